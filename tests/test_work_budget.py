"""The per-file limit counts work, not seconds (issue 44): a file over its work allowance is one
FAL000 finding at the same place on any machine, the other files are checked and fixed, `--fix`
twice changes nothing, and no clock is consulted unless `--timeout` asks for the safety net, which
fails the run (exit 2) and is never a finding.

The allowance (`analysis.statements.stop_after`) is a backstop that no real file reaches (the
analysis degrades first, bounded per line: tests/test_pathological.py); here it is made small."""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path

import libcst as cst
import pytest
from megatron_shapes import FORWARD_STEP

from flux_alias_lint.analysis import ModuleAnalysis, statements
from flux_alias_lint.cli import main
from flux_alias_lint.library import Library

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import determinism  # noqa: E402
import pathological  # noqa: E402

BUG = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach()}\n' + FORWARD_STEP
FIXED = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach().clone()}\n' + FORWARD_STEP


@pytest.fixture
def small_allowance(monkeypatch: pytest.MonkeyPatch) -> None:
    """An allowance that 12 nested loops (about 150 statements analysed per line) go past, and a
    plain loss function (a few per line) does not; and no clock to consult."""
    monkeypatch.setattr(statements, "_STOP_FACTOR", 0.5)

    def no_clock(*args: object) -> None:
        raise AssertionError("a wall-clock limit was consulted")

    monkeypatch.setattr(signal, "setitimer", no_clock)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    status = main(["check", ".", "--jobs", "1", "--output-format", "json", *args])
    return status, capsys.readouterr().out


@pytest.mark.usefixtures("small_allowance")
def test_a_file_over_its_work_allowance_is_one_finding_the_same_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "deep.py").write_text(pathological.nested_loops(12)[0])
    (tmp_path / "bug.py").write_text(BUG)
    monkeypatch.chdir(tmp_path)
    runs = [_run(capsys, "--no-cache"), _run(capsys), _run(capsys)]  # uncached, then cold and warm cache
    assert [status for status, _ in runs] == [1, 1, 1]
    assert runs[0][1] == runs[1][1] == runs[2][1]  # byte for byte
    found = {(f["path"], f["code"]): f["message"] for f in json.loads(runs[0][1])}
    assert set(found) == {("bug.py", "FAL001"), ("deep.py", "FAL000")}, found
    # The allowance is for the lines the triage keeps (here the loss function's).
    assert re.fullmatch(r"too complex to analyse \(over \d+ statements analysed\)", found["deep.py", "FAL000"])


@pytest.mark.usefixtures("small_allowance")
def test_two_cpu_bound_processes_beside_the_run_change_no_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A loaded machine slows the run down; what it stops at and reports is the same."""
    (tmp_path / "deep.py").write_text(pathological.nested_loops(12)[0])
    (tmp_path / "bug.py").write_text(BUG)
    monkeypatch.chdir(tmp_path)
    idle = _run(capsys, "--no-cache")
    with determinism.burning(2):
        busy = _run(capsys, "--no-cache")
    assert idle == busy
    assert {f["code"] for f in json.loads(busy[1])} == {"FAL000", "FAL001"}


@pytest.mark.usefixtures("small_allowance")
def test_fix_twice_over_the_work_allowance_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = pathological.nested_loops(12)[0]
    (tmp_path / "deep.py").write_text(deep)
    (tmp_path / "bug.py").write_text(BUG)
    monkeypatch.chdir(tmp_path)
    first = _run(capsys, "--fix")
    assert (tmp_path / "bug.py").read_text() == FIXED  # the other file is fixed
    second = _run(capsys, "--fix")
    assert (tmp_path / "deep.py").read_text() == deep and (tmp_path / "bug.py").read_text() == FIXED
    assert first[1] == second[1], (first, second)  # deep.py's FAL000 alone, both times
    assert [f["path"] for f in json.loads(second[1])] == ["deep.py"]


def test_a_summary_computed_before_costs_the_same_work(tmp_path: Path) -> None:
    """A helper's summary, computed by the first file's analysis, is reused by the next file's in
    the same process: the second is charged what it cost, so both stop at the same place."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "helpers.py").write_text(
        'def add(report, value):\n    report["value"] = value.detach()\n    return report\n'
    )
    loss = tmp_path / "loss.py"
    text = (
        "from helpers import add\n\n\ndef loss_func(x):\n    loss = x.sum()\n"
        "    report = add({}, loss)\n    return loss, report\n"
    )
    loss.write_text(text)
    counted = []
    for _ in range(2):
        library = Library(str(loss), text)
        analysis = ModuleAnalysis(cst.parse_module(text), library)
        analysis.run()
        library.close()
        counted.append((analysis.work.statements, analysis.work.aliases, analysis.work.allowed))
    assert counted[0] == counted[1] and counted[0][0] > 3, counted
