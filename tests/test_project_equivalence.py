"""The fast paths change nothing on multi-file projects either: triage on or off, the results cache
off, cold or warm, one job or two, and the project index rebuilt or re-derived file by file after an
edit. Each fixture project (``fixtures/<CODE>/<case>/``) is checked as its own project."""

from __future__ import annotations

import json
import os
import pathlib
import random
import re
import shutil
import time

import pytest
from fixture_corpus import project_cases
from test_project_runs import HELPER, LIST_LOSS, LOSS, TRAIN  # the two-module project of those tests

from flux_alias_lint import parallel, triage
from flux_alias_lint.cli import main
from flux_alias_lint.index import project as index_module

PROJECT_CASES = project_cases()
AN_HOUR_AGO = 3600


def _copy(folder: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    project = tmp_path / "project"
    shutil.copytree(folder, project)
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    _age(project)
    return project


def _age(project: pathlib.Path) -> None:
    """Stamps old enough for the caches to trust them: only content tells a change."""
    past = time.time() - AN_HOUR_AGO
    for path in project.rglob("*.py"):
        os.utime(path, (past, past))


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, object]]:
    main(["check", *args, "--output-format", "json", "--exit-zero"])
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("case", PROJECT_CASES, ids=lambda case: case.id)
def test_every_path_to_the_findings_agrees(case, tmp_path: pathlib.Path, capsys, monkeypatch) -> None:
    project = _copy(case.folder, tmp_path)
    cache = str(tmp_path / "cache")
    monkeypatch.setattr(parallel, "_IN_PROCESS_BYTES", 0)  # two jobs really are two worker processes
    monkeypatch.setattr(index_module, "_FORK_FILES", 0)  # for the index too
    reference = _check(capsys, str(project), "--no-cache", "--jobs", "1")
    assert _check(capsys, str(project), "--no-cache", "--jobs", "2") == reference
    assert _check(capsys, str(project), "--cache-dir", cache, "--jobs", "2") == reference  # cold
    assert _check(capsys, str(project), "--cache-dir", cache, "--jobs", "1") == reference  # warm
    monkeypatch.setattr(triage, "ENABLED", False)
    assert _check(capsys, str(project), "--no-cache", "--jobs", "1") == reference
    # Each file alone (a pre-commit run) gets what the whole project gives it.
    for path in sorted(project.rglob("*.py")):
        alone = _check(capsys, str(path), "--cache-dir", cache)
        assert alone == _decided(reference, path), path.name


def _decided(rows: list[dict[str, object]], path: pathlib.Path) -> list[dict[str, object]]:
    """What `check PATH` reports of a whole project's `rows`: the file's own, and those of other
    files whose chain to the rescaling call passes through it (docs/usage.md, pre-commit). An
    `escapes` chain is where the value is lost, a warning's, not a verdict the file decides."""
    return [
        r
        for r in rows
        if r["path"] == str(path)
        or (r["context"] != "escapes" and any(s["path"] == str(path) for s in r["reached_by"]))
    ]


def _edited(project: pathlib.Path, name: str, text: str) -> None:
    """Only this file's stamp changes (its mtime is old enough to be trusted): the other files'
    evidence and results are reused unless they depend on it."""
    path = project / name
    path.write_text(text)
    past = time.time() - AN_HOUR_AGO
    os.utime(path, (past, past))


@pytest.mark.parametrize(
    ("edit", "text"),
    [
        # The function Megatron reaches moves: the forward step's evidence names its new line.
        ("losses.py", "import torch\n\n# moved down\n\n" + LIST_LOSS.split("\n\n\n", 1)[1]),
        # The forward step no longer hands it over: its context goes.
        ("train.py", TRAIN.replace('functools.partial(masked, batch["mask"])', "None")),
        # A helper changes what it returns: the file that summarised it is checked again.
        ("reporting.py", HELPER.replace("loss.detach()", "loss.detach().clone()")),
        # A new file hands `loss_func` to Megatron.
        (
            "step.py",
            "from loss import loss_func\n\n\ndef forward_step(data_iterator, model):\n    return 1, loss_func\n",
        ),
    ],
    ids=["reached-function-moves", "hand-off-removed", "helper-fixed", "new-forward-step"],
)
def test_the_index_and_results_follow_an_edit(edit: str, text: str, tmp_path: pathlib.Path, capsys) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    for name, content in (("reporting.py", HELPER), ("loss.py", LOSS), ("losses.py", LIST_LOSS), ("train.py", TRAIN)):
        (project / name).write_text(content)
    _age(project)
    cache = str(tmp_path / "cache")
    before = _check(capsys, str(project), "--cache-dir", cache)
    assert [(os.path.basename(r["path"]), r["context"]) for r in before] == [
        ("loss.py", "unreached"),
        ("losses.py", "megatron"),
    ]
    _edited(project, edit, text)
    warm = _check(capsys, str(project), "--cache-dir", cache)
    assert warm == _check(capsys, str(project), "--no-cache")
    assert warm != before
    for path in sorted(project.glob("*.py")):  # and one file at a time, from the same cache
        assert _check(capsys, str(path), "--cache-dir", cache) == _decided(warm, path)


def test_a_helper_module_cpython_rejects_is_no_helper(tmp_path: pathlib.Path, capsys, monkeypatch) -> None:
    """Its function cannot be read alone (a string has a line at column 0), and the whole module does
    not parse: like the analysis, the triage reads no function of it, and the importer is checked."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (project / "helpers.py").write_text(
        'def make(loss):\n    s = """\nx"""\n    return {"l": loss.detach()}\n\n\ndef broken(:\n    pass\n'
    )
    (project / "loss.py").write_text(LOSS.replace("reporting", "helpers").replace("make_report", "make"))
    main(["check", str(project), "--no-cache", "--output-format", "json", "--exit-zero"])
    out, err = capsys.readouterr()
    rows = json.loads(out)
    assert [(os.path.basename(r["path"]), r["code"]) for r in rows] == [("helpers.py", "FAL000")]
    assert err == ""  # loss.py was checked: no internal error
    monkeypatch.setattr(triage, "ENABLED", False)
    assert _check(capsys, str(project), "--no-cache") == rows


def _mutated(lines: list[str], donor: list[str], rng: random.Random) -> list[str]:
    """`lines` after one random edit: a line deleted, doubled, taken from `donor` or a name renamed."""
    at = rng.randrange(len(lines) + 1)
    edit = rng.choice(("delete", "double", "donor", "rename"))
    if edit == "delete" and at < len(lines):
        return lines[:at] + lines[at + 1 :]
    if edit == "double" and at < len(lines):
        return lines[: at + 1] + lines[at:]
    if edit == "donor" and donor:
        return lines[:at] + [rng.choice(donor)] + lines[at:]
    names = sorted({word for line in lines for word in re.findall(r"[A-Za-z_]\w{3,}", line)})
    if not names:
        return lines
    name = rng.choice(names)
    return [line.replace(name, name + "_x") for line in lines]


@pytest.mark.parametrize("case", PROJECT_CASES, ids=lambda case: case.id)
def test_the_index_follows_random_edits(case, tmp_path: pathlib.Path) -> None:
    """Edit the project's files at random, one at a time (a line deleted, doubled, copied from another
    file, a name renamed), and after each edit the index kept in the cache, re-derived from what the
    edit can change, is the one an uncached run derives from scratch."""
    from flux_alias_lint import cache

    project = _copy(case.folder, tmp_path)
    paths = sorted(str(path) for path in project.rglob("*.py"))
    rng = random.Random(case.id)
    cache.project_reached(paths, tmp_path / "c")
    past = time.time() - AN_HOUR_AGO
    for edit in range(6):
        path, donor = rng.choice(paths), rng.choice(paths)
        lines = pathlib.Path(path).read_text().splitlines()
        text = "\n".join(_mutated(lines, pathlib.Path(donor).read_text().splitlines(), rng)) + "\n"
        pathlib.Path(path).write_text(text)
        os.utime(path, (past + edit + 1, past + edit + 1))  # a new stamp, old enough to be trusted
        assert cache.project_reached(paths, tmp_path / "c") == cache.project_reached(paths, None), (edit, path, text)
