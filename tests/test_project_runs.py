"""Whole-project analysis through the command line: a file checked alone gets the answer a whole-tree
run gives (pre-commit), and a cached result is never reused once a helper it summarised has changed,
whatever `--jobs` and the cache are."""

from __future__ import annotations

import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

from flux_alias_lint.cli import main
from flux_alias_lint.index import modules as index_modules

ROOT = pathlib.Path(__file__).resolve().parent.parent
HELPER = 'def make_report(loss):\n    return {"lm loss": loss.detach()}\n'
FIXED_HELPER = 'def make_report(loss):\n    return {"lm loss": loss.detach().clone()}\n'
LOSS = (
    "import torch\nfrom reporting import make_report\n\n\n"
    "def loss_func(output_tensor):\n    loss = torch.sum(output_tensor)\n    return loss, make_report(loss)\n"
)
# A list report: a finding only because the forward step in another module hands the function to Megatron.
LIST_LOSS = (
    "import torch\n\n\ndef masked(mask, out):\n    loss = torch.sum(out * mask)\n    return loss, [loss.detach()]\n"
)
TRAIN = (
    "import functools\n\nfrom losses import masked\n\n\n"
    "def forward_step(data_iterator, model):\n    batch = next(data_iterator)\n"
    '    return model(batch), functools.partial(masked, batch["mask"])\n'
)


def _project(tmp_path: pathlib.Path) -> pathlib.Path:
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (project / "pkg" / "reporting.py").write_text(HELPER)
    (project / "pkg" / "loss.py").write_text(LOSS)
    (project / "pkg" / "losses.py").write_text(LIST_LOSS)
    (project / "pkg" / "train.py").write_text(TRAIN)
    return project


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> list[tuple[str, int, str, str]]:
    main(["check", *args, "--format", "json"])
    rows = json.loads(capsys.readouterr().out)
    return [(os.path.basename(r["path"]), r["line"], r["code"], r["context"]) for r in rows]


def test_a_file_checked_alone_gets_its_whole_tree_context(tmp_path: pathlib.Path, capsys) -> None:
    project = _project(tmp_path)
    whole = _check(capsys, str(project), "--no-cache")
    alone = _check(capsys, str(project / "pkg" / "losses.py"), "--no-cache")
    assert ("losses.py", 6, "FAL001", "megatron") in whole
    assert alone == [row for row in whole if row[0] == "losses.py"]


def test_a_cached_chain_takes_the_style_of_the_run_reading_it(
    tmp_path: pathlib.Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finding read from the cache shows its steps as a fresh one would: relative in a run on a
    relative path, absolute in a run on an absolute one, whichever run stored it."""
    project = _project(tmp_path)
    monkeypatch.chdir(project)

    def steps(target: str) -> list[str]:
        main(["check", target, "--format", "json"])
        (row,) = [r for r in json.loads(capsys.readouterr().out) if r["path"].endswith("losses.py")]
        return [step["path"] for step in row["reached_by"]]

    stored = steps("pkg")  # relative, and stored in the cache
    assert stored and not any(os.path.isabs(p) for p in stored), stored
    assert steps(str(project / "pkg")) == [str(project / p) for p in stored]  # read from the cache
    assert steps("pkg") == stored


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_changed_helper_invalidates_the_files_that_summarised_it(tmp_path: pathlib.Path, capsys, jobs: str) -> None:
    project = _project(tmp_path)
    cache = str(tmp_path / "cache")
    first = _check(capsys, str(project), "--cache-dir", cache, "-j", jobs)
    assert ("loss.py", 7, "FAL001", "unreached") in first
    assert _check(capsys, str(project), "--cache-dir", cache, "-j", jobs) == first  # warm
    helper = project / "pkg" / "reporting.py"
    helper.write_text(FIXED_HELPER)
    past = time.time() - 3600  # a stamp the cache trusts: only the content tells the change
    os.utime(helper, (past, past))
    warm = _check(capsys, str(project), "--cache-dir", cache, "-j", jobs)
    cold = _check(capsys, str(project), "--no-cache", "-j", jobs)
    assert warm == cold
    assert ("loss.py", 7, "FAL001", "unreached") not in warm


def test_pre_commit_style_run_on_one_file_through_the_cli(tmp_path: pathlib.Path) -> None:
    project = _project(tmp_path)
    run = subprocess.run(
        [sys.executable, "-m", "flux_alias_lint", "check", "pkg/losses.py", "--no-cache", "--format", "json"],
        cwd=project,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=False,
    )
    assert run.returncode == 1, run.stderr
    (row,) = json.loads(run.stdout)
    assert row["context"] == "megatron"
    assert [step["path"] for step in row["reached_by"]] == ["pkg/train.py", "pkg/train.py"]


def test_sarif_carries_the_steps_as_related_locations(tmp_path: pathlib.Path, capsys) -> None:
    project = _project(tmp_path)
    main(["check", str(project / "pkg" / "losses.py"), "--no-cache", "--format", "sarif"])
    (result,) = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert result["properties"]["context"] == "megatron"
    steps = [(r["physicalLocation"]["region"]["startLine"], r["message"]["text"]) for r in result["relatedLocations"]]
    assert steps == [
        (8, "returned as the loss function by forward_step"),
        (6, "forward_step has Megatron's forward-step signature (data_iterator, model, ...)"),
    ]


def test_unreached_warns_by_default_fails_as_error_and_hides_as_ignore(tmp_path: pathlib.Path, capsys) -> None:
    project = _project(tmp_path)
    (project / "pyproject.toml").write_text('[tool.flux-alias-lint]\nunreached = "warn"\n')
    assert main(["check", str(project / "pkg" / "loss.py"), "--no-cache"]) == 0
    assert "[unreached, warning]" in capsys.readouterr().out
    (project / "pyproject.toml").write_text('[tool.flux-alias-lint]\nunreached = "error"\n')
    assert main(["check", str(project / "pkg" / "loss.py"), "--no-cache"]) == 1
    assert "[unreached]" in capsys.readouterr().out
    (project / "pyproject.toml").write_text('[tool.flux-alias-lint]\nunreached = "ignore"\n')
    assert main(["check", str(project / "pkg" / "loss.py"), "--no-cache"]) == 0
    assert "All checks passed!" in capsys.readouterr().out
    assert main(["check", str(project / "pkg" / "losses.py"), "--no-cache"]) == 1  # megatron: still fails


def test_the_cached_index_follows_the_project(tmp_path: pathlib.Path, capsys) -> None:
    """A warm run reuses the project index only while no file changed; a new forward step in another
    file gives a function its context at once, and a corrupted index file is rebuilt."""
    project = _project(tmp_path)
    (project / "pkg" / "train.py").unlink()
    past = time.time() - 3600  # stamps old enough to be trusted
    for path in project.rglob("*.py"):
        os.utime(path, (past, past))
    cache = tmp_path / "cache"
    assert _check(capsys, str(project), "--cache-dir", str(cache)) == [("loss.py", 7, "FAL001", "unreached")]
    assert (cache / "index.json").exists()
    (project / "pkg" / "train.py").write_text(TRAIN)
    os.utime(project / "pkg" / "train.py", (past, past))
    expected = [("loss.py", 7, "FAL001", "unreached"), ("losses.py", 6, "FAL001", "megatron")]
    assert _check(capsys, str(project), "--cache-dir", str(cache)) == expected
    (cache / "index.json").write_bytes(b"flux-alias-lint-cache 0\n{]")
    assert _check(capsys, str(project), "--cache-dir", str(cache)) == expected


VENDORED = ROOT / "fixtures" / "FAL001" / "vendored_schedule_divides_a_copy"


@pytest.mark.parametrize(
    ("schedule", "context"),
    [
        ("    output_tensor = loss / num_microbatches\n", "unreached"),  # megatron-core <= 0.6: a copy
        ("    loss /= num_microbatches\n    output_tensor = loss\n", "megatron"),  # 0.7 on: in place
        ("    output_tensor.div_(num_microbatches)\n", "megatron"),
        (None, "megatron"),  # no copy of Megatron in the project: the installed, current one runs
    ],
    ids=["copy", "in place", "div_", "not vendored"],
)
def test_a_vendored_schedule_is_judged_by_its_own_rescale(
    tmp_path: pathlib.Path, capsys, schedule: str | None, context: str
) -> None:
    project = tmp_path / "fork"
    shutil.copytree(VENDORED, project)
    (project / "pyproject.toml").write_text("[project]\nname = 'fork'\n")
    path = project / "megatron" / "schedules.py"
    if schedule is None:
        path.unlink()
    else:
        text = path.read_text()
        path.write_text(text.replace("    output_tensor = loss / num_microbatches\n", schedule))
    assert _check(capsys, str(project), "--no-cache") == [("loss.py", 8, "FAL001", context)]


def test_a_change_to_the_vendored_schedule_reaches_the_cached_index(tmp_path: pathlib.Path, capsys) -> None:
    project = tmp_path / "fork"
    shutil.copytree(VENDORED, project)
    (project / "pyproject.toml").write_text("[project]\nname = 'fork'\n")
    cache = str(tmp_path / "cache")
    assert _check(capsys, str(project), "--cache-dir", cache) == [("loss.py", 8, "FAL001", "unreached")]
    path = project / "megatron" / "schedules.py"
    path.write_text(
        path.read_text().replace("output_tensor = loss / num_microbatches", "loss *= 1.0 / num_microbatches")
    )
    assert _check(capsys, str(project), "--cache-dir", cache) == [("loss.py", 8, "FAL001", "megatron")]


STRATEGY = ROOT / "fixtures" / "FAL001" / "loss_passed_through_a_strategy"


@pytest.mark.parametrize(
    ("edits", "context"),
    [
        ({}, "megatron"),
        # The loss function reaches the strategy positionally.
        ({"worker.py": ("batch=batch, forward_func=loss_func", "batch, loss_func")}, "megatron"),
        # The forward step hands the bound parameter over itself, not through a wrapper.
        (
            {"strategy.py": ("return output_tensor, loss_wrapper", "return output_tensor, partial(loss_func)")},
            "megatron",
        ),
        # A wrapper returning a copy of the loss: what Megatron rescales is not the function's.
        ({"strategy.py": ("return loss, metrics", "return loss * 1.0, metrics")}, None),
        # A strategy whose schedule is not Megatron's.
        ({"strategy.py": ("return self.forward_backward_func(", "return self.run_schedule(")}, None),
    ],
    ids=["keyword", "positional", "parameter handed over", "wrapper copies", "not a schedule"],
)
def test_a_loss_function_passed_through_parameters_is_followed(
    tmp_path: pathlib.Path, capsys, edits: dict[str, tuple[str, str]], context: str | None
) -> None:
    project = tmp_path / "rl"
    shutil.copytree(STRATEGY, project)
    (project / "pyproject.toml").write_text("[project]\nname = 'rl'\n")
    for name, (old, new) in edits.items():
        text = (project / name).read_text()
        assert old in text
        (project / name).write_text(text.replace(old, new))
    expected = [("loss.py", 8, "FAL001", context)] if context else []  # a list report needs a rescaling caller
    assert _check(capsys, str(project), "--no-cache") == expected


def test_a_new_caller_of_the_strategy_reaches_the_cached_index(tmp_path: pathlib.Path, capsys) -> None:
    project = tmp_path / "rl"
    shutil.copytree(STRATEGY, project)
    (project / "pyproject.toml").write_text("[project]\nname = 'rl'\n")
    worker = project / "worker.py"
    original = worker.read_text()
    worker.write_text(original.replace("forward_func=loss_func", "forward_func=print"))
    cache = str(tmp_path / "cache")
    assert _check(capsys, str(project), "--cache-dir", cache) == []
    worker.write_text(original)
    past = time.time() - 3600  # a stamp the cache trusts: only the content tells the change
    os.utime(worker, (past, past))
    assert _check(capsys, str(project), "--cache-dir", cache) == [("loss.py", 8, "FAL001", "megatron")]


ENGINE = """\
import torch
from megatron.core.pipeline_parallel import get_forward_backward_func


def token_loss(output_tensor):
    loss = torch.sum(output_tensor)
    return loss, [loss.detach()]


class Engine:
    def train_batch(self, batches):
        forward_backward_func = get_forward_backward_func()
        return forward_backward_func(forward_step_func=self.forward_step, data_iterator=iter(batches))

    def forward_step(self, data_iterator, model):
        raise NotImplementedError


class LanguageModelEngine(Engine):
    def forward_step(self, data_iterator, model):
        return model(next(data_iterator)), token_loss
"""


def test_self_method_may_run_a_subclass_override(tmp_path: pathlib.Path, capsys) -> None:
    project = tmp_path / "engine"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'engine'\n")
    (project / "engine.py").write_text(ENGINE)
    assert _check(capsys, str(project), "--no-cache") == [("engine.py", 7, "FAL001", "megatron")]


def test_a_bare_name_in_a_method_is_not_the_class_attribute(tmp_path: pathlib.Path, capsys) -> None:
    project = tmp_path / "engine"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'engine'\n")
    # `token_loss` inside the method is the module's function, never a method of the class.
    text = ENGINE.replace(
        "        raise NotImplementedError\n",
        "        return model(next(data_iterator)), token_loss\n\n    def token_loss(self, output_tensor):\n        return output_tensor, [output_tensor]\n",
    )
    (project / "engine.py").write_text(text.replace("(Engine)", "(object)"))
    assert _check(capsys, str(project), "--no-cache") == [("engine.py", 7, "FAL001", "megatron")]


HANDS_OVER = """\
from functools import partial
from megatron.core.pipeline_parallel import get_forward_backward_func


def forward_step(data_iterator, model, loss_fn):
    return model(next(data_iterator)), partial(loss_fn)


def my_loss(out):
    loss = out.sum()
    return loss, (loss.detach(),)
"""


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param(
            "def main(model):\n"
            "    def run(loss_fn):\n"
            "        get_forward_backward_func()(forward_step_func=partial(forward_step, loss_fn=loss_fn))\n"
            "    run(my_loss)\n",
            [("train.py", 11, "FAL001", "megatron")],
            id="nested function: its enclosing function's call",
        ),
        pytest.param(
            "def run(model, *hooks, loss_fn=None):\n"
            "    get_forward_backward_func()(forward_step_func=partial(forward_step, loss_fn=loss_fn))\n\n\n"
            "def main(model):\n    run(model, my_loss)\n",
            [],
            id="keyword-only parameter: never given by position",
        ),
        pytest.param(
            "class Runner:\n    @staticmethod\n    def run(model, loss_fn):\n"
            "        get_forward_backward_func()(forward_step_func=partial(forward_step, loss_fn=loss_fn))\n\n\n"
            "def main(model):\n    Runner.run(model, my_loss)\n",
            [("train.py", 11, "FAL001", "megatron")],
            id="staticmethod: no self to skip",
        ),
        pytest.param(
            "fwd = partial(forward_step, loss_fn=my_loss)\n\n\n"
            "class Trainer:\n    fwd = partial(forward_step, loss_fn=print)\n\n"
            "    def train(self, model):\n        get_forward_backward_func()(forward_step_func=fwd)\n",
            [("train.py", 11, "FAL001", "megatron")],
            id="a name in a method is the module's, not the class attribute",
        ),
    ],
)
def test_hand_offs_through_parameters_bind_as_python_does(
    tmp_path: pathlib.Path, capsys, code: str, expected: list[tuple[str, int, str, str]]
) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (project / "train.py").write_text(HANDS_OVER + "\n\n" + code)
    assert _check(capsys, str(project), "--no-cache") == expected


def test_an_unrelated_call_of_the_same_name_passes_nothing(tmp_path: pathlib.Path, capsys) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    nested = (
        "def main(model):\n    def run(loss_fn):\n"
        "        get_forward_backward_func()(forward_step_func=partial(forward_step, loss_fn=loss_fn))\n"
        "    run(print)\n"
    )
    (project / "train.py").write_text(HANDS_OVER.replace("my_loss", "unused_loss") + "\n\n" + nested)
    (project / "jobs.py").write_text(
        "def checksum(t):\n    total = t.sum()\n    return total, (total.detach(),)\n\n\n"
        "def schedule(pool):\n    pool.run(checksum)\n"
    )
    assert _check(capsys, str(project), "--no-cache") == []


def test_stdin_reads_no_other_file(tmp_path: pathlib.Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "other.py").write_text("def run(loss_fn):\n    pass\n")
    code = HANDS_OVER + (
        "\n\ndef run(loss_fn):\n"
        "    get_forward_backward_func()(forward_step_func=partial(forward_step, loss_fn=loss_fn))\n\n\n"
        "run(my_loss)\n"
    )
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(code.encode())))
    opened = []
    real_read = index_modules.read_bytes
    monkeypatch.setattr(index_modules, "read_bytes", lambda path, *a: opened.append(path) or real_read(path, *a))
    main(["check", "-", "--format", "json", "--no-cache"])
    rows = json.loads(capsys.readouterr().out)
    assert [(r["line"], r["code"], r["context"]) for r in rows] == [(11, "FAL001", "megatron")]
    assert opened == []


@pytest.mark.parametrize(
    "chosen",
    [
        "    loss_func = functools.partial(copying, m) if m is None else functools.partial(masked, m)\n",
        "    if m is None:\n        loss_func = copying\n    else:\n        loss_func = masked\n",
        "    loss_func = copying\n    if m is not None:\n        loss_func = functools.partial(masked, m)\n",
    ],
    ids=["conditional expression", "names in branches", "rebound in a branch"],
)
def test_every_loss_function_a_forward_step_may_return_is_reached(tmp_path: pathlib.Path, capsys, chosen: str) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "losses.py").write_text(
        LIST_LOSS + "\n\ndef copying(out):\n    loss = torch.sum(out)\n    return loss, [loss.detach().clone()]\n"
    )
    (tmp_path / "train.py").write_text(
        "import functools\n\nfrom losses import copying, masked\n\n\n"
        "def forward_step(data_iterator, model):\n    m = next(data_iterator)\n"
        + chosen
        + "    return model(m), loss_func\n"
    )
    assert _check(capsys, str(tmp_path), "--no-cache") == [("losses.py", 6, "FAL001", "megatron")]


def test_a_warm_run_stats_each_file_of_the_cached_index_once(tmp_path: pathlib.Path, monkeypatch) -> None:
    """The files a gated file was resolved against are most of the project: their stamps are the
    project's, taken once, not once more per file that depends on them."""
    from flux_alias_lint import cache

    project = _project(tmp_path)
    past = time.time() - 3600  # old enough for their stamps to be trusted
    for path in project.rglob("*.py"):
        os.utime(path, (past, past))
    files = [str(path) for path in project.rglob("*.py")]
    first = cache.project_reached(files, tmp_path / "c")
    index = json.loads((tmp_path / "c" / "index.json").read_bytes().partition(b"\n")[2])
    assert any(same for (same, _, _), _ in index["gated"].values())  # some depend on other files of the project
    stamped: list[str] = []
    real_stamp = cache._trusted_stamp
    monkeypatch.setattr(cache, "_trusted_stamp", lambda path: stamped.append(path) or real_stamp(path))
    assert cache.project_reached(files, tmp_path / "c") == first
    assert sorted(stamped) == sorted(files)


def _aged_and_watched(project: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[list[str]], float]:
    """Stamps the cache trusts on every file of `project` (an hour old), and the files each collection
    of the index re-derives, appended as it happens: (that list, the stamps' time)."""
    from flux_alias_lint import cache

    past = time.time() - 3600
    for path in project.rglob("*.py"):
        os.utime(path, (past, past))
    collected: list[list[str]] = []
    real = cache.collect_evidence
    monkeypatch.setattr(
        cache,
        "collect_evidence",
        lambda roots, files, *known: collected.append(sorted(sum(files.values(), []))) or real(roots, files, *known),
    )
    return collected, past


def test_an_edit_redoes_only_the_evidence_whose_searches_it_can_change(tmp_path: pathlib.Path, monkeypatch) -> None:
    """A gated file depends on the files its searches of the project found and on the words it
    searched for: an edit elsewhere re-derives that file alone (a pre-commit run), an edit giving
    another file one of those words (a new caller of the strategy) re-derives the gated file too."""
    from flux_alias_lint import cache

    project = tmp_path / "rl"
    shutil.copytree(STRATEGY, project)
    (project / "pyproject.toml").write_text("[project]\nname = 'rl'\n")
    worker = project / "worker.py"
    original = worker.read_text()
    call = "self.strategy.forward_step(batch=batch, forward_func=loss_func)"
    worker.write_text(original.replace(call, "None"))  # no caller of the strategy at all
    (project / "util.py").write_text("SCALE = 1\n")
    collected, past = _aged_and_watched(project, monkeypatch)
    paths = [str(path) for path in project.rglob("*.py")]
    loss = str((project / "loss.py").resolve())
    reached = cache.project_reached(paths, tmp_path / "c")
    assert loss not in reached  # nothing hands loss_func to the strategy yet
    (project / "util.py").write_text("SCALE = 2\n")
    os.utime(project / "util.py", (past, past))
    collected.clear()
    assert cache.project_reached(paths, tmp_path / "c") == reached
    assert collected == [[str((project / "util.py").resolve())]]  # not strategy.py, which searched the project
    worker.write_text(original)
    os.utime(worker, (past, past))
    collected.clear()
    reached = cache.project_reached(paths, tmp_path / "c")
    assert str((project / "strategy.py").resolve()) in collected[0]
    assert [r.context for r in reached[loss].values()] == ["megatron"]
    assert reached == cache.project_reached(paths, None)  # what an uncached run finds


PATCHED = ROOT / "fixtures" / "FAL001" / "loss_func_patched_by_a_registry"


def test_an_edit_redoes_the_evidence_only_when_it_changes_an_answer(tmp_path: pathlib.Path, monkeypatch) -> None:
    """A file the evidence did not parse matters to it only through its answers to the evidence's
    queries: an edit keeping them (a file naming the patched method, still not as a patch) re-derives
    the edited file alone; an edit changing one (that file now installs a patch) re-derives the file
    that asked, and finds what an uncached run finds."""
    from flux_alias_lint import cache

    project = tmp_path / "sft"
    shutil.copytree(PATCHED, project)
    (project / "pyproject.toml").write_text("[project]\nname = 'sft'\n")
    notes = project / "notes.py"
    notes.write_text('"""Which loss_func runs is up to the adaptor."""\n\nSCALE = 1\n')
    collected, past = _aged_and_watched(project, monkeypatch)
    paths = [str(path) for path in project.rglob("*.py")]
    reached = cache.project_reached(paths, tmp_path / "c")
    patched = str((project / "patched_losses.py").resolve())
    assert [r.context for r in reached[patched].values()] == ["megatron"]

    def edit(text: str) -> dict:
        notes.write_text(text)
        os.utime(notes, (past, past))
        collected.clear()
        return cache.project_reached(paths, tmp_path / "c")

    assert edit('"""Which loss_func runs is up to the adaptor."""\n\nSCALE = 2\n') == reached
    assert collected == [[str(notes.resolve())]]  # not sft_trainer.py, whose patches were asked for
    installs = (
        "from sft_trainer import SFTTrainer\n\n\ndef other_loss(input_tensor, output_tensor):\n"
        '    return output_tensor.sum(), {"loss": output_tensor.sum().detach()}\n\n\n'
        "SFTTrainer.loss_func = other_loss\n"
    )
    reached = edit(installs)
    assert str((project / "sft_trainer.py").resolve()) in collected[0]
    assert [r.context for r in reached[str(notes.resolve())].values()] == ["megatron"]
    assert reached == cache.project_reached(paths, None)  # what an uncached run finds


def test_a_file_leaving_a_search_too_wide_to_follow_redoes_the_evidence(tmp_path: pathlib.Path, monkeypatch) -> None:
    """A forward step reaching Megatron through a parameter is what the calls pass, followed only in a
    few files calling the function (`calls._CALLER_FILES`): with one more, none is read, so the evidence
    depends on those files through the query's answer alone. An edit taking the call out of one of
    them re-derives it, and the forward step is followed then."""
    from flux_alias_lint import cache
    from flux_alias_lint.index.calls import _CALLER_FILES

    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (project / "engine.py").write_text(
        "from megatron.core.pipeline_parallel import get_forward_backward_func\n\n\n"
        "def drive(step, model, data):\n"
        "    return get_forward_backward_func()(forward_step_func=step, data_iterator=data, model=model)\n"
    )
    (project / "loss.py").write_text((STRATEGY / "loss.py").read_text())
    (project / "user0.py").write_text(
        "from engine import drive\nfrom loss import loss_func\n\n\n"
        "def step(batches, net):\n    return net(next(batches)), loss_func\n\n\n"
        "drive(step, None, None)\n"
    )
    users = [project / f"user{n}.py" for n in range(1, _CALLER_FILES + 1)]
    for user in users:
        user.write_text("from engine import drive\n\ndrive(None, None, None)\n")
    collected, past = _aged_and_watched(project, monkeypatch)
    paths = [str(path) for path in project.rglob("*.py")]
    loss = str((project / "loss.py").resolve())
    assert loss not in cache.project_reached(paths, tmp_path / "c")  # nine files call drive: none is read
    users[0].write_text("from engine import drive\n")
    os.utime(users[0], (past, past))
    collected.clear()
    reached = cache.project_reached(paths, tmp_path / "c")
    assert str((project / "engine.py").resolve()) in collected[0]
    assert [r.context for r in reached[loss].values()] == ["megatron"]
    assert reached == cache.project_reached(paths, None)


REGISTRY_LOOP = ROOT / "fixtures" / "FAL005" / "own_loop_model_from_a_decorator_registry"


def test_a_method_called_all_over_the_project_is_still_followed_in_its_own_module(
    tmp_path: pathlib.Path, capsys
) -> None:
    """Past `_CALLER_FILES` files calling `train_step(`, the search still follows the calls beside the method:
    the task's own loop passes the model it divides the output of (the same project inside a larger one)."""
    from flux_alias_lint.index.calls import _CALLER_FILES

    project = tmp_path / "p"
    shutil.copytree(REGISTRY_LOOP, project)
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    expected = [("loss.py", 25, "FAL005", "in-place-caller")]
    assert _check(capsys, str(project), "-n") == expected
    for n in range(_CALLER_FILES + 1):
        (project / f"other{n}.py").write_text(f"def run(task, model, batch):\n    return task.train_step(model, {n})\n")
    assert _check(capsys, str(project), "-n") == expected


OVERRIDDEN = ROOT / "fixtures" / "FAL001" / "forward_step_overridden_in_another_module"


def test_the_search_for_subclasses_parses_only_modules_that_may_derive(tmp_path: pathlib.Path, monkeypatch) -> None:
    """A module naming the base trainer only to call it is never parsed to find the base's subclasses; once an
    edit makes it derive the base (under another name), the evidence is re-derived, and the cached index is
    the one an uncached run finds."""
    from flux_alias_lint import cache

    project = tmp_path / "trainers"
    shutil.copytree(OVERRIDDEN, project)
    (project / "pyproject.toml").write_text("[project]\nname = 'trainers'\n")
    (project / "sft_trainer.py").unlink()
    (project / "loss.py").unlink()
    runner = project / "runner.py"
    runner.write_text("from base_trainer import BaseTrainer\n\ntrainer = BaseTrainer(None, 1)\n")
    parsed: list[str] = []
    real_parse = index_modules.ast.parse
    monkeypatch.setattr(index_modules.ast, "parse", lambda data, *a, **k: parsed.append(data) or real_parse(data))
    collected, past = _aged_and_watched(project, monkeypatch)
    paths = [str(path) for path in project.rglob("*.py")]
    assert cache.project_reached(paths, tmp_path / "c") == {}
    assert not [data for data in parsed if b"trainer = BaseTrainer(None, 1)" in data]
    runner.write_text(
        "from functools import partial\n\nimport torch\nfrom base_trainer import BaseTrainer as Base\n\n\n"
        "class Runner(Base):\n"
        "    def forward_step(self, batches, chunk):\n"
        "        batch = next(batches)\n"
        "        return chunk(batch), partial(self.loss_func, batch)\n\n"
        "    def loss_func(self, mask, logits):\n"
        "        loss = torch.sum(logits * mask)\n"
        "        return loss, {'lm loss': loss.detach()}\n"
    )
    os.utime(runner, (past, past))
    collected.clear()
    reached = cache.project_reached(paths, tmp_path / "c")
    assert collected and str((project / "base_trainer.py").resolve()) in collected[0]
    assert [r.context for r in reached[str(runner.resolve())].values()] == ["megatron"]
    assert reached == cache.project_reached(paths, None)
