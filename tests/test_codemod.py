"""Whole-repository runs: progress bar only on a terminal, the closing summary, pure stdout, .gitignore."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from megatron_shapes import FORWARD_STEP

from flux_alias_lint.cli import main

ROOT = Path(__file__).resolve().parents[1]

DETACH = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach()}\n' + FORWARD_STEP
SAME = (
    'def loss_func(x):\n    loss = x.sum()\n    return loss, {"a": loss, "b": loss.detach().view(1)}\n' + FORWARD_STEP
)
CLEAN = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.item()}\n'


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small repository: two files with findings, clean ones, an unparsable one, an ignored one."""
    monkeypatch.chdir(tmp_path)
    files = {"pkg/a.py": DETACH, "pkg/b.py": SAME, "pkg/broken.py": "def f(:\n", "out/gen.py": DETACH}
    files |= {f"pkg/clean{i}.py": CLEAN for i in range(5)}
    for name, text in files.items():
        Path(name).parent.mkdir(parents=True, exist_ok=True)
        Path(name).write_text(text)
    Path(".gitignore").write_text("out/\n")
    Path(".git").mkdir()  # a work tree root, for .gitignore to count
    return tmp_path


def cli(*argv: str, env: dict[str, str] | None = None, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    full_env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PYTHONPATH": str(ROOT)} | (env or {})
    command = [sys.executable, "-m", "flux_alias_lint", "check", *argv]
    return subprocess.run(command, check=False, env=full_env, stdin=subprocess.DEVNULL, **kwargs)  # type: ignore[call-overload]


def stderr_on_a_terminal(*argv: str, env: dict[str, str] | None = None) -> tuple[int, bytes, bytes]:
    """Run the CLI with stderr on a pseudo-terminal; (exit code, stdout, what the terminal showed)."""
    controller, terminal = pty.openpty()
    try:
        proc = cli(*argv, env=env, stdout=subprocess.PIPE, stderr=terminal)
    finally:
        os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    return proc.returncode, proc.stdout, shown


def test_progress_bar_on_a_terminal(tree: Path) -> None:
    code, stdout, shown = stderr_on_a_terminal("--fix", "pkg")
    assert code == 1  # broken.py could not be checked: a FAL000 finding
    assert b"\r[" in shown and b"] 8/8 files" in shown
    assert b"\x1b[2K" in shown  # the bar is erased before the summary
    assert shown.rstrip().endswith(b"Could not be checked: 1 file (see above).")
    assert b"\r" not in stdout and stdout.startswith(b"pkg/broken.py:1:7: FAL000 syntax error: ")
    assert b"Found 4 errors (3 fixed, 1 remaining)." in stdout


@pytest.mark.parametrize("ci", ["true", "1"])
def test_no_progress_bar_in_ci(tree: Path, ci: str) -> None:
    _, _, shown = stderr_on_a_terminal("--fix", "pkg", env={"CI": ci})
    assert b"Scanned 7 files" in shown  # the summary is there, the bar is not
    assert b"\r[" not in shown and b"\x1b[2K" not in shown


def test_no_progress_bar_when_stderr_is_not_a_terminal(tree: Path) -> None:
    proc = cli("--fix", "pkg", capture_output=True)
    assert b"\r" not in proc.stderr and b"\x1b" not in proc.stderr
    assert b"Scanned 7 files" in proc.stderr


def test_quiet_has_neither_bar_nor_summary(tree: Path) -> None:
    _, _, shown = stderr_on_a_terminal("--fix", "pkg", "--quiet")
    assert b"\r[" not in shown and b"Scanned" not in shown


def test_closing_summary(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--diff", "pkg"]) == 1
    err = capsys.readouterr().err
    summary = err[err.index("Scanned") :].splitlines()
    assert summary[0].startswith("Scanned 7 files in ") and summary[0].endswith("s.")
    assert summary[1:] == [
        "Findings: 3 (FAL001: 1, FAL002: 1, FAL003: 1).",
        "Would fix 3, changing 2 files.",
        "Could not be checked: 1 file (see above).",
    ]
    assert Path("pkg/a.py").read_text() == DETACH  # --diff wrote nothing
    main(["check", "--fix", "pkg"])
    assert "Fixed 3, changed 2 files." in capsys.readouterr().err
    main(["check", "--fix", "pkg"])
    assert "Findings: 0.\nFixed 0, changed 0 files.\n" in capsys.readouterr().err


def test_check_mode_prints_no_summary(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["check", "pkg/a.py"])
    assert "Scanned" not in capsys.readouterr().err


@pytest.mark.parametrize("output_format", ["json", "sarif", "gitlab"])
def test_machine_formats_keep_stdout_pure_with_fix(
    tree: Path, capsys: pytest.CaptureFixture[str], output_format: str
) -> None:
    Path("pkg/broken.py").unlink()
    Path("pkg/c.py").write_text(DETACH.replace('"loss": loss.detach()', '"l": list(loss.detach().chunk(2))'))
    assert main(["check", "--fix", "--format", output_format, "pkg"]) == 1  # c.py cannot be fixed
    captured = capsys.readouterr()
    json.loads(captured.out)
    assert "Fixed 3, changed 2 files." in captured.err


@pytest.mark.skipif(shutil.which("git") is None, reason="git applies the diff")
def test_diff_applies_with_git_and_equals_the_fix(tree: Path) -> None:
    Path("pkg/broken.py").unlink()
    shutil.rmtree(".git")
    subprocess.run(["git", "init", "-q"], check=True)
    proc = cli("--diff", "pkg", capture_output=True)
    assert proc.returncode == 1
    Path("changes.diff").write_bytes(proc.stdout)
    subprocess.run(["git", "apply", "-p0", "changes.diff"], check=True)
    applied = {p: Path(p).read_text() for p in ("pkg/a.py", "pkg/b.py")}
    for p, text in {"pkg/a.py": DETACH, "pkg/b.py": SAME}.items():
        Path(p).write_text(text)
    assert cli("--fix", "pkg", capture_output=True).returncode == 0
    assert applied == {p: Path(p).read_text() for p in ("pkg/a.py", "pkg/b.py")}


def test_gitignore_is_respected_unless_turned_off(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("pkg/broken.py").unlink()
    main(["check", ".", "--format", "json"])
    assert {row["path"] for row in json.loads(capsys.readouterr().out)} == {"pkg/a.py", "pkg/b.py"}
    main(["check", ".", "--format", "json", "--no-respect-gitignore"])
    paths = {row["path"] for row in json.loads(capsys.readouterr().out)}
    assert paths == {"pkg/a.py", "pkg/b.py", "out/gen.py"}
    # A file named explicitly is checked even if ignored; --force-exclude drops it.
    assert main(["check", "out/gen.py"]) == 1
    assert main(["check", "out/gen.py", "--force-exclude"]) == 0
