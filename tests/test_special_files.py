"""Only regular files are read, within a size and a time limit: anything else is one error line,
and every other file is still checked and fixed (in check and fix mode, with and without the cache)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from megatron_shapes import FORWARD_STEP

from flux_alias_lint import runner
from flux_alias_lint.cli import main

BUG = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach()}\n' + FORWARD_STEP
FIXED = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach().clone()}\n' + FORWARD_STEP


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()  # the socket file stays


def _link_to(target: str) -> Callable[[Path], None]:
    return lambda path: path.symlink_to(target)


def _big(path: Path) -> None:
    path.write_text("# padding\n" * 200)  # 2,000 bytes, over the limit the runs below set


SPECIAL: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo.py": (_fifo, "is a FIFO, not a regular file; skipped"),
    "socket.py": (_socket, "is a socket, not a regular file; skipped"),
    "zero.py": (_link_to("/dev/zero"), "is a character device, not a regular file; skipped"),
    "null.py": (_link_to("/dev/null"), "is a character device, not a regular file; skipped"),
    "big.py": (_big, "is 2,000 bytes, more than the limit of 1,000 (max-file-size); skipped"),
}


def _run(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # A subprocess with a timeout: a regression here hangs (a FIFO) or fills memory (/dev/zero).
    command = [sys.executable, "-m", "flux_alias_lint", "check", ".", *args]
    return subprocess.run(command, check=False, cwd=tree, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", sorted(SPECIAL))
@pytest.mark.parametrize("args", [("--no-cache",), (), ("--fix",), ("--diff",), ("--jobs", "2", "--no-cache")])
def test_special_file_is_one_finding_and_the_rest_is_checked(tmp_path: Path, name: str, args: tuple[str, ...]) -> None:
    make, reason = SPECIAL[name]
    make(tmp_path / name)
    (tmp_path / "bug.py").write_text(BUG)
    for _ in range(2):  # the second run reads the cache the first one wrote
        result = _run(tmp_path, "--max-file-size", "1000", *args)
        unchecked = [line for line in result.stdout.splitlines() if ": FAL000 " in line]
        if "--diff" not in args:  # a diff shows only the fixes
            assert unchecked == [f"{name}:1:1: FAL000 {reason}"], result.stdout
        assert result.returncode == 1, result.stderr  # a file that could not be checked fails the run
        assert "Traceback" not in result.stderr
    assert (tmp_path / "bug.py").read_text() == (FIXED if "--fix" in args else BUG)


def test_size_limit_from_the_config(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.flux-alias-lint]\nmax-file-size = 50\n")
    (tmp_path / "bug.py").write_text(BUG)
    command = [sys.executable, "-m", "flux_alias_lint", "check", "--no-cache", "bug.py"]
    result = subprocess.run(command, check=False, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert (
        f"bug.py:1:1: FAL000 is {len(BUG)} bytes, more than the limit of 50 (max-file-size); skipped" in result.stdout
    )
    result = subprocess.run(
        [*command, "--max-file-size", "0"], check=False, cwd=tmp_path, capture_output=True, text=True
    )
    assert "more than the limit of 0" in result.stdout  # the command line wins over the config


@pytest.mark.parametrize("value", ['"30"', "-1", "true", "[1]"])
def test_limits_in_the_config_are_validated(tmp_path: Path, value: str) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.flux-alias-lint]\nfile-timeout = {value}\n")
    command = [sys.executable, "-m", "flux_alias_lint", "check", "--no-cache", "."]
    result = subprocess.run(command, check=False, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip().endswith("`file-timeout` must be a non-negative number"), result.stderr


def test_the_timeout_is_a_safety_net_that_fails_the_run_never_a_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file whose check never ends (its triage made to spin: deterministic on any machine, where a
    merely large file races the clock) fails the run under `--timeout`: exit 2 and one error line
    naming it, no finding (how busy the machine was must never change a finding); the other file
    is still fixed, and nothing of the stopped file is cached. Without `--timeout` no clock runs."""
    lines = ["import torch", "", "def loss_func(output_tensor):", "    loss = output_tensor.sum()", "    r = {}"]
    lines += [f'    r["k{i}"] = loss.detach()' for i in range(30)]
    (tmp_path / "slow.py").write_text("\n".join([*lines, "    return loss, r", ""]))
    (tmp_path / "bug.py").write_text(BUG)
    real_reduce = runner.reduce_source

    def spinning_on_slow(text: str, *args: object) -> object:
        while 'r["k29"]' in text:  # until the time limit's signal interrupts it
            pass
        return real_reduce(text, *args)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runner, "reduce_source", spinning_on_slow)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        status = main(["check", ".", "--jobs", "1", *args])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    # Ample for bug.py on a loaded machine: the clock is the thing this limit cannot be sure of.
    status, out, err = run("--timeout", "10", "--fix")
    assert status == 2 and "FAL000" not in out, (out, err)
    assert "slow.py: still being checked after 10 s (--timeout, file-timeout)" in err, err
    assert (tmp_path / "bug.py").read_text() == FIXED, (out, err)
    assert ".clone()" not in (tmp_path / "slow.py").read_text()
    assert run("--timeout", "10")[0] == 2  # check mode, caching: stopped again, nothing was cached
    monkeypatch.setattr(runner, "reduce_source", real_reduce)
    status, out, _ = run()  # no clock: the file is checked
    assert status == 0 and "slow.py" in out and "FAL001" in out  # its warnings (unreached)


def test_time_limit_interrupts_a_check_that_never_ends() -> None:
    with pytest.raises(runner._TimedOut), runner.time_limit(0.05):
        while True:
            pass


def test_real_path_is_realpath_through_symlinks_and_dots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`real_path` resolves a directory from its parent's (one lstat each): the answer must be
    `os.path.realpath`'s, through symlinked directories, `..` after one, hidden and relative ones."""
    from flux_alias_lint.index.files import project_root, real_path

    (tmp_path / "repo" / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "repo" / ".hidden").mkdir()
    (tmp_path / "repo" / ".git").mkdir()
    (tmp_path / "elsewhere" / "deep").mkdir(parents=True)
    for file in ("repo/pkg/sub/a.py", "repo/.hidden/b.py", "elsewhere/deep/c.py", "elsewhere/d.py"):
        (tmp_path / file).write_text("x = 1\n")
    (tmp_path / "repo" / "link").symlink_to(tmp_path / "elsewhere" / "deep")
    (tmp_path / "repo" / "pkg" / "file_link.py").symlink_to(tmp_path / "elsewhere" / "d.py")
    monkeypatch.chdir(tmp_path / "repo")
    paths = [
        "pkg/sub/a.py",
        "./pkg/sub/a.py",
        "pkg//sub/a.py",
        ".hidden/b.py",
        "link/c.py",
        "link/../d.py",  # `..` after a symlink: the link's target's parent
        "pkg/file_link.py",
        "pkg/sub/../sub/a.py",
        str(tmp_path / "repo" / "link" / "c.py"),
        "pkg/sub/",
        ".",
    ]
    for path in paths:
        assert real_path(path) == os.path.realpath(path), path
    assert project_root("link/c.py") == os.path.realpath(tmp_path / "elsewhere" / "deep")
    assert project_root("pkg/sub/a.py") == os.path.realpath(tmp_path / "repo")
