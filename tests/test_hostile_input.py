"""Hostile input at the command line: one clear line per bad file, never a traceback or a crash,
every other file still checked and fixed, exit code 2 when anything could not be checked."""

from __future__ import annotations

import errno
import io
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
FIXED = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach().clone()}\n' + FORWARD_STEP
LATIN1 = (
    b"# -*- coding: latin-1 -*-\n"
    b"# d\xe9j\xe0 vu\n"
    b"def loss_func(x):\n"
    b"    loss = x.sum()\n"
    b'    return loss, {"caf\xe9": loss.detach()}\n'
)

# name -> (content, the reason the one error line must give); content None = built by `_make`.
BAD: dict[str, tuple[bytes | None, str]] = {
    "syntax.py": (b"def loss_func(:\n", "syntax.py:1:15: FAL000 syntax error: invalid syntax"),
    "python2.py": (b'print "hello"\n', "Python 2 code?"),
    "not_utf8.py": (b'x = "caf\xe9"\n', "not valid utf-8 (byte 0xe9 on line 1)"),
    "nul.py": (b"x = 1\0\n", "contains NUL bytes"),
    "binary.py": (bytes(range(256)) * 8, "contains NUL bytes"),
    "binary_no_nul.py": (bytes(range(1, 256)) * 8, "not valid utf-8"),
    "bad_cookie.py": (b"# coding: no-such-codec\nx = 1\n", "unknown encoding"),
    "deep_parens.py": (b"x = " + b"(" * 100_000 + b"1" + b")" * 100_000 + b"\n", "too deeply nested"),
    "deep_unary.py": (b"x = " + b"-" * 100_000 + b"1\n", "too deeply nested"),
    # In a loss function: elsewhere the triage proves there is nothing to check and libcst never sees it.
    "deep_and.py": (
        b"def loss_func(loss):\n    r = "
        + b" and ".join([b"a"] * 100_000)
        + b"\n    return loss, {'r': r, 'l': loss}\n",
        "levels deep",
    ),
    "deep_elif.py": (b"if a:\n    pass\n" + b"elif a:\n    pass\n" * 100_000, "too deeply nested"),
    "deep_indent.py": (b"".join(b" " * i + b"if x:\n" for i in range(120)) + b" " * 120 + b"pass\n", "nested"),
    "loop.py": (None, "Too many levels of symbolic links"),
    # Parsed, but CPython will not compile them: refused like a syntax error, never fixed.
    "duplicate_argument.py": (b"def loss_func(x, x):\n" + BUG.encode().split(b"\n", 1)[1], "duplicate argument 'x'"),
    "import_star_in_class.py": (b"class C:\n    from os import *\n\n\n" + BUG.encode(), "import * only allowed at"),
    "late_future_import.py": (
        b"import os\nfrom __future__ import annotations\n" + BUG.encode(),
        "from __future__ imports",
    ),
}
if sys.version_info < (3, 12):  # newer Pythons parse it
    BAD["fstring_quotes.py"] = (
        b'd = {}\nx = f"{d["k"]}"\n',
        "(Python 3.12 syntax: set requires-python or target-version)",
    )
GOOD: dict[str, bytes] = {
    "empty.py": b"",
    "latin1.py": LATIN1,
    # Deep, but within what CPython accepts: checked on the big stack, not refused (and not fixed:
    # nothing shows `loss` is a tensor, and no rescaling caller is known).
    "deep_ok.py": b"def loss_func(loss):\n    r = " + b"-" * 2_500 + b"loss\n    return loss, {'r': r, 'l': loss}\n",
    "long_and.py": (
        b"def loss_func(loss):\n    r = " + b" and ".join([b"1"] * 5_000) + b"\n    return loss, {'r': r, 'l': loss}\n"
    ),
}


def _error_lines(stderr: str) -> str:
    """The per-file error lines, without the closing summary."""
    return "".join(line for line in stderr.splitlines(keepends=True) if line.startswith("flux-alias-lint: error:"))


def _unchecked_lines(stdout: str) -> list[str]:
    """The FAL000 findings: files that could not be read, decoded or parsed."""
    return [line for line in stdout.splitlines() if ": FAL000 " in line]


def _make(tree: Path) -> None:
    for name, (content, _) in BAD.items():
        if content is not None:
            (tree / name).write_bytes(content)
    for name, content in GOOD.items():
        (tree / name).write_bytes(content)
    (tree / "bug.py").write_text(BUG)
    (tree / "x.py").mkdir()  # a directory with a .py name
    (tree / "x.py" / "inner_bug.py").write_text(BUG)
    os.symlink("loop.py", tree / "loop2.py")
    os.symlink("loop2.py", tree / "loop.py")
    os.symlink(".", tree / "self")  # a directory symlink loop: never followed


def _run(*args: str, cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "flux_alias_lint", *args],
        check=False,
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        timeout=300,
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    )


def test_matrix_one_line_per_bad_file_others_fixed(tmp_path: Path) -> None:
    _make(tmp_path)
    # A subprocess: a native stack overflow would kill the process, and must show up as such.
    proc = _run("check", ".", "--fix", "--exit-zero", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr  # bad files are FAL000 findings, and --exit-zero covers them
    assert "Traceback" not in proc.stderr + proc.stdout
    assert _error_lines(proc.stderr) == ""
    unchecked = _unchecked_lines(proc.stdout)
    bad = {name: reason for name, (_, reason) in BAD.items()} | {"loop2.py": "Too many levels of symbolic links"}
    for name, reason in bad.items():
        (line,) = [e for e in unchecked if e.startswith(f"{name}:")]
        assert reason in line, line
    assert len(unchecked) == len(bad), unchecked
    assert f"Could not be checked: {len(bad)} files" in proc.stderr
    # Every other file was checked and fixed.
    assert (tmp_path / "bug.py").read_text() == FIXED
    assert (tmp_path / "x.py" / "inner_bug.py").read_text() == FIXED
    assert (tmp_path / "empty.py").read_bytes() == b""
    assert (tmp_path / "latin1.py").read_bytes() == LATIN1.replace(b"detach()}", b"detach().clone()}")
    for name in ("deep_ok.py", "long_and.py"):
        assert (tmp_path / name).read_bytes() == GOOD[name], name  # checked, nothing to fix
    for name, (content, _) in BAD.items():
        if content is not None:
            assert (tmp_path / name).read_bytes() == content, name
    assert "3 fixed" in proc.stdout


def test_deep_but_valid_files_are_checked_not_refused(tmp_path: Path) -> None:
    deep = "def loss_func(loss):\n    r = " + "-" * 2_500 + "loss.detach()\n    return loss, {'r': r, 'd': loss.data}\n"
    deep += FORWARD_STEP
    (tmp_path / "deep.py").write_text(deep)
    proc = _run("check", "deep.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    # The unary tower is a fresh tensor (not flagged); `.data` is an alias.
    assert proc.stdout.startswith('deep.py:3:32: FAL001 [*] report["d"]') and "Found 1 error" in proc.stdout


def test_explicit_directory_named_like_a_file_is_walked(tmp_path: Path) -> None:
    (tmp_path / "x.py").mkdir()
    (tmp_path / "x.py" / "bug.py").write_text(BUG)
    proc = _run("check", "x.py", cwd=tmp_path)
    assert proc.returncode == 1 and "x.py/bug.py:3:27: FAL001" in proc.stdout


def test_generated_big_file_finishes(tmp_path: Path) -> None:
    # Like a generated table module: one big literal, then a loss function; triage keeps libcst away
    # from the table. FLUX_ALIAS_LINT_BIG_MB=5 runs the full 5 MB case (about 4 s with --fix).
    megabytes = float(os.environ.get("FLUX_ALIAS_LINT_BIG_MB", "0.5"))
    rows = "".join(f"    ({i}, {i * 0.5!r}, 'name_{i}'),\n" for i in range(int(megabytes * 40_000)))
    text = f"TABLE = [\n{rows}]\n\n{BUG}"
    assert len(text) > megabytes * 1_000_000
    (tmp_path / "big.py").write_text(text)
    proc = _run("check", "big.py", "--fix", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "big.py").read_text() == text.replace("detach()}", "detach().clone()}")


def test_file_vanishing_after_discovery(tree_with_bug: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    (tree_with_bug / "gone.py").write_text(BUG)
    real = cli.discover

    def discover_then_delete(*args, **kwargs):  # type: ignore[no-untyped-def]
        files, errors = real(*args, **kwargs)
        (tree_with_bug / "gone.py").unlink()
        return files, errors

    monkeypatch.setattr(cli, "discover", discover_then_delete)
    assert main(["check", ".", "--fix"]) == 1
    assert _unchecked_lines(capsys.readouterr().out) == ["gone.py:1:1: FAL000 cannot read: No such file or directory"]
    assert (tree_with_bug / "bug.py").read_text() == FIXED


def test_unreadable_file(tree_with_bug: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    secret = tree_with_bug / "secret.py"
    secret.write_text(BUG)
    secret.chmod(0)
    if os.geteuid() == 0:
        # root reads mode-000 files anyway: make the read fail the way it does for everyone else.
        real_open = os.open

        def deny(file, *args, **kwargs):  # type: ignore[no-untyped-def]
            if os.fspath(file).endswith("secret.py"):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), file)
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(os, "open", deny)
    assert main(["check", ".", "--fix"]) == 1
    assert _unchecked_lines(capsys.readouterr().out) == ["secret.py:1:1: FAL000 cannot read: Permission denied"]
    assert (tree_with_bug / "bug.py").read_text() == FIXED


def test_stdin_read_error(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    class Broken(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(Broken())))
    assert main(["check", "-", "--stdin-filename", "ed.py"]) == 1
    assert _unchecked_lines(capsys.readouterr().out) == ["ed.py:1:1: FAL000 cannot read stdin: Input/output error"]


@pytest.mark.parametrize(
    ("data", "reason"),
    [(b"x = '\xff'\n", "not valid utf-8"), (b"\0", "NUL"), (b"def f(:\n", "syntax error"), (b"", None)],
)
def test_stdin_hostile_bytes(data: bytes, reason: str | None, tmp_path: Path) -> None:
    proc = _run("check", "-", "--fix", cwd=tmp_path, stdin=data)
    assert "Traceback" not in proc.stderr
    # An editor replaces its buffer with stdout: a source that cannot be fixed comes back unchanged.
    assert proc.stdout == data.decode("utf-8", "replace")
    if reason is None:
        assert proc.returncode == 0
    else:
        # With --fix on stdin the report goes to stderr.
        (line,) = _unchecked_lines(proc.stderr)
        assert proc.returncode == 1 and line.startswith("-:") and reason in line


@pytest.fixture
def tree_with_bug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bug.py").write_text(BUG)
    return tmp_path


def test_verify_refuses_what_check_refuses(tmp_path: Path) -> None:
    # `verify` parses too: a long and-chain used to take the whole process down there (SIGSEGV).
    for name in ("deep_and.py", "deep_parens.py", "python2.py"):
        (tmp_path / name).write_bytes(BAD[name][0] or b"")
    proc = _run("verify", "deep_and.py", "deep_parens.py", "python2.py", cwd=tmp_path)
    # As `check` does: each is a FAL000 finding (not confirmable), not a usage error.
    assert proc.returncode == 1, proc.stderr
    unchecked = [line.split(":")[0] for line in proc.stdout.splitlines() if ": FAL000 UNCONFIRMED not checked:" in line]
    assert unchecked == ["deep_and.py", "deep_parens.py", "python2.py"], proc.stdout
