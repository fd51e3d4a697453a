"""What the run's surroundings must not change: the working directory (a repository's own json.py,
the directory removed) and the parent process (workers die with it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from megatron_shapes import FORWARD_STEP

from flux_alias_lint import cli
from flux_alias_lint.cli import main

ROOT = Path(__file__).resolve().parents[1]

BUG = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach()}\n' + FORWARD_STEP

# Standard-library modules a repository may well shadow at its root; each says so when imported.
SHADOWED = ("json", "typing", "ast", "tokenize", "argparse", "dataclasses")


def test_python_m_does_not_import_from_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(BUG)
    for name in SHADOWED:
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('imported the repository\\'s {name}.py')\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # this checkout, whatever is installed
    for argv, code, out in (
        (["check", "train.py"], 1, "train.py:3:27: FAL001"),
        (["check", "--output-format", "json", "train.py"], 1, '"code": "FAL001"'),
        (["rule", "FAL001"], 0, "# FAL001"),
    ):
        run = subprocess.run(
            [sys.executable, "-m", "flux_alias_lint", *argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert (run.returncode, "repository's" in run.stderr) == (code, False), run.stdout + run.stderr
        assert out in run.stdout


def test_a_working_directory_removed_before_the_run_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert main(["check", "."]) == 2
    err = capsys.readouterr().err
    assert err == "flux-alias-lint: error: the working directory no longer exists (removed?)\n", err


def test_a_working_directory_removed_mid_run_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(BUG)
    monkeypatch.chdir(project)
    indexed = cli.project_reached

    def remove_then_index(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        (project / "train.py").unlink()
        project.rmdir()
        return indexed(*args, **kwargs)

    monkeypatch.setattr(cli, "project_reached", remove_then_index)
    assert main(["check", "."]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "flux-alias-lint: error: the working directory no longer exists (removed?)", err
    assert "Traceback" not in err


# Enough source that `--fix -j 2` forks workers (parallel._IN_PROCESS_BYTES) and the index does too
# (project._FORK_FILES), and enough files that many are still queued when the parent dies.
PADDED = BUG + "".join(
    f"# padding line {k}: enough bytes per file to make the workers worth forking\n" for k in range(14)
)


def _alive(pid: int) -> bool:
    """Running (a zombie nobody reaps, as under some containers' init, has finished)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_until(condition, what: str, polls: int = 60_000) -> None:  # noqa: ANN001
    """Poll every 10 ms; a bound on a hang, not a time being measured."""
    for _ in range(polls):
        if condition():
            return
        time.sleep(0.01)
    pytest.fail(f"never {what}")


@pytest.mark.skipif(sys.platform != "linux", reason="workers are forked, and listed in /proc, on Linux")
def test_fix_workers_die_with_their_parent_and_leave_no_half_written_file(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "p"\n')
    files = [project / f"module_{k:03}.py" for k in range(400)]
    for path in files:
        path.write_text(PADDED)
    stderr = tmp_path / "stderr"
    with open(stderr, "w") as err:
        parent = subprocess.Popen(
            [sys.executable, "-m", "flux_alias_lint", "check", "--fix", "--no-cache", "-j", "2", "."],
            cwd=project,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        _wait_until(lambda: any(path.read_text() != PADDED for path in files), "fixed a file")
        workers = {
            int(pid)
            for listing in Path(f"/proc/{parent.pid}/task").glob("*/children")
            for pid in listing.read_text().split()
        }
    finally:
        parent.kill()
        parent.wait()
    assert len(workers) == 2, workers
    fixed_then = {path for path in files if path.read_text() != PADDED}
    _wait_until(lambda: not any(map(_alive, workers)), "saw the workers end")
    fixed_after = {path for path in files if path.read_text() != PADDED}
    # At most the write each worker was in the middle of is finished; nothing is started after.
    assert len(fixed_after - fixed_then) <= len(workers), len(fixed_after - fixed_then)
    assert len(fixed_after) < len(files)
    # Every file is whole, old or new; no temporary file is left; the workers printed nothing.
    assert {path.read_text() for path in files} <= {PADDED, PADDED.replace("loss.detach()", "loss.detach().clone()")}
    assert sorted(p.name for p in project.iterdir() if not p.name.startswith("module_")) == ["pyproject.toml"]
    assert stderr.read_text() == ""
