"""What the run's surroundings must not change: the working directory (a repository's own json.py,
the directory removed) and the parent process (workers die with it)."""

from __future__ import annotations

import os
import subprocess
import sys
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
