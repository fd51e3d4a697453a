"""bench/host_trees.py: its edits land where the data says, its verdicts are read from the right lines,
and its data file holds only our text, paths and line numbers, with verdicts the linter can give."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import host_trees  # noqa: E402

from flux_alias_lint.facts.hosts import HOSTS  # noqa: E402
from flux_alias_lint.index import reach  # noqa: E402


def test_edits_use_the_unedited_line_numbers_and_the_lines_indentation(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f(x):\n    y = x\n    return y\n", encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("torch\naccelerate==1.6.0\n", encoding="utf-8")
    origins = host_trees.apply_edits(
        tmp_path,
        [
            host_trees.Edit("a.py", 3, "KEPT.append(y)"),
            host_trees.Edit("a.py", 1, "KEPT = []"),
            host_trees.Edit("requirements.txt", 2, "accelerate==0.12.0", replace=True),
        ],
    )
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == (
        "KEPT = []\ndef f(x):\n    y = x\n    KEPT.append(y)\n    return y\n"
    )
    assert (tmp_path / "requirements.txt").read_text(encoding="utf-8") == "torch\naccelerate==0.12.0\n"
    assert origins["a.py"] == [0, 1, 2, 0, 3]
    assert host_trees.old_line(origins, "a.py", 5) == 3
    with pytest.raises(ValueError, match="a.py:9"):
        host_trees.apply_edits(tmp_path, [host_trees.Edit("a.py", 9, "x = 1")])


LOOP = """\
def step(batch):
    loss = (batch * 2).sum()
    return loss, {}


def train(batches, accum):
    for batch in batches:
        loss, report = step(batch)
        loss /= accum
        loss.backward()
"""


def _tree(tmp_path: Path) -> tuple[Path, str]:
    tree = tmp_path / "trees" / "toy"
    tree.mkdir(parents=True)
    (tree / "train.py").write_text("import torch\n\n\n" + LOOP, encoding="utf-8")
    git = ["git", "-C", str(tree), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "toy"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    return tree, head


def test_a_tree_is_run_with_its_git_and_as_a_plain_folder_and_judged(tmp_path: Path) -> None:
    tree, head = _tree(tmp_path)
    capture = {"file": "train.py", "line": 6, "text": "KEPT.append(loss.detach())"}
    data = {
        "name": "toy",
        "repo": "example/toy",
        "commit": head,
        "baseline": [],
        "injections": [
            {
                "site": "train.py:6",
                "edits": [{"file": "train.py", "line": 4, "text": "KEPT = []"}, capture],
                "expected": "error in-place-caller",
                "chain": ["train.py:12"],
            },
            {"site": "train.py:6 wrong", "edits": [capture], "expected": "silent", "chain": []},
        ],
    }
    rows = host_trees.run_tree(data, tree.parent, Path(host_trees.ROOT), chains=False)
    assert [(r.site, r.got_git, r.got_plain, r.right) for r in rows] == [
        ("baseline", "no finding", "no finding", True),
        ("train.py:6", "error in-place-caller", "error in-place-caller", True),
        ("train.py:6 wrong", "error in-place-caller", "error in-place-caller", False),
    ]
    assert host_trees.run_tree({**data, "commit": "0" * 40}, tree.parent, Path(host_trees.ROOT), chains=False) == []


def test_a_baseline_counts_the_false_and_the_missed_findings() -> None:
    judged = [
        {"finding": "a.py:1 FAL001 warning unreached", "verdict": "true"},
        {"finding": "b.py:2 FAL003 error in-place-caller", "verdict": "false"},
        {"finding": "c.py:3 FAL002 error in-place-caller", "verdict": "missed"},
    ]
    keys = ["a.py:1 FAL001 warning unreached", "b.py:2 FAL003 error in-place-caller", "d.py:4 FAL001 warning unreached"]
    assert host_trees.judge_baseline(keys, judged) == (
        "2 findings",
        "3 findings (1 false, 1 missed, 1 not judged)",
        False,
    )
    assert host_trees.judge_baseline(keys[:1] + ["c.py:3 FAL002 error in-place-caller"], judged)[2]
    assert host_trees.judge_baseline([], []) == ("no finding", "no finding", True)


def _data() -> dict:
    return json.loads(host_trees.DATA.read_text(encoding="utf-8"))


CONTEXTS = {host.name for host in HOSTS} | {reach.IN_PLACE_CALLER, reach.IN_FUNCTION, reach.UNREACHED, reach.ESCAPES}


def test_the_data_names_each_tree_once_at_a_full_commit_with_verdicts_the_linter_can_give() -> None:
    trees = _data()["trees"]
    assert len({t["name"] for t in trees}) == len(trees) >= 10
    for tree in trees:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", tree["repo"]) and re.fullmatch(r"[0-9a-f]{40}", tree["commit"])
        for injection in tree["injections"]:
            kind, _, context = injection["expected"].partition(" ")
            assert injection["expected"] == host_trees.SILENT or (kind in ("error", "warning") and context in CONTEXTS)
            assert any(not e.get("replace") for e in injection["edits"]), injection["site"]
            assert injection["why"]
        for finding in tree["baseline"]:
            assert re.fullmatch(r"\S+:\d+ FAL00\d (error|warning) \S+", finding["finding"]) and finding["why"]
            assert finding["verdict"] in ("true", "false", "missed")


def test_the_data_holds_one_line_of_our_text_per_edit() -> None:
    # Our text only: one short line each (a pin, a capture), never a block copied from a tree.
    for tree in _data()["trees"]:
        for injection in tree["injections"]:
            for edit in injection["edits"]:
                assert "\n" not in edit["text"] and len(edit["text"]) <= 100 and edit["line"] >= 1
