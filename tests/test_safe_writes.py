"""`--fix` writes safely: atomically, keeping mode, BOM, newlines and encoding; it refuses any result
that is more than the inserted copies; concurrent runs never corrupt a file; a corpus stays valid."""

from __future__ import annotations

import ast
import codecs
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from megatron_shapes import FORWARD_STEP

from flux_alias_lint import fixer, lint, runner
from flux_alias_lint.cli import main
from flux_alias_lint.lint import fix_text
from flux_alias_lint.source import decode

ROOT = Path(__file__).resolve().parents[1]
BUG = (
    'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach(), "v": loss.view(1)}\n'
    + FORWARD_STEP
)
FIXED = (
    'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach().clone(), "v": loss.view(1).detach().clone()}\n'
    + FORWARD_STEP
)


def _fixed_bytes(data: bytes) -> bytes:
    """What one --fix run must leave: the fix of `data`, encoded the way `data` was."""
    source = decode(data, "f.py")
    return source.encode(fix_text(source).text)


def _fixpoint(data: bytes) -> bytes:
    """Fixes nested in other fixes wait for the next run: what repeated runs converge to."""
    while (fixed := _fixed_bytes(data)) != data:
        data = fixed
    return data


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ---------------------------------------------------------------- what is kept


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("crlf.py", BUG.replace("\n", "\r\n").encode()),
        ("bom.py", codecs.BOM_UTF8 + BUG.encode()),
        ("bom_crlf.py", codecs.BOM_UTF8 + BUG.replace("\n", "\r\n").encode()),
        ("latin1.py", b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + BUG.encode()),
        ("cp1252.py", b"# coding: cp1252\n# \x93quoted\x94\n" + BUG.encode()),
        ("tabs_and_cr.py", BUG.replace("    ", "\t").replace("\n", "\r").encode()),
    ],
)
def test_fix_keeps_bytes_encoding_and_newlines(cwd: Path, name: str, data: bytes) -> None:
    (cwd / name).write_bytes(data)
    assert main(["check", name, "--fix", "--no-cache"]) == 0
    after = (cwd / name).read_bytes()
    assert after == _fixed_bytes(data) != data
    # Exactly the two insertions, nothing else: take them out and the original is back.
    assert after.replace(b".clone()", b"") == data.replace(b"loss.view(1)", b"loss.view(1).detach()")


def test_fix_keeps_mode_owner_and_symlinks(cwd: Path) -> None:
    real = cwd / "real.py"
    real.write_text(BUG)
    real.chmod(0o751)
    os.symlink("real.py", cwd / "link.py")
    assert main(["check", "link.py", "--fix", "--no-cache"]) == 0
    assert (cwd / "link.py").is_symlink() and os.readlink(cwd / "link.py") == "real.py"
    assert real.read_text() == FIXED
    assert stat.S_IMODE(real.stat().st_mode) == 0o751
    assert [p.name for p in cwd.iterdir() if p.name.startswith(".flux-alias-lint-")] == []


def test_failed_write_leaves_file_and_no_temporary(cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    (cwd / "bug.py").write_text(BUG)

    def full_disk(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner.os, "replace", full_disk)
    # The file was checked: its finding is still reported (exit 1), the write failure is a warning.
    assert main(["check", "bug.py", "--fix", "--no-cache"]) == 1
    captured = capsys.readouterr()
    assert "warning: bug.py: cannot write the fix: No space left on device" in captured.err
    assert "bug.py:3:27: FAL001" in captured.out
    assert (cwd / "bug.py").read_text() == BUG
    assert sorted(p.name for p in cwd.iterdir()) == ["bug.py"]


# ---------------------------------------------------------------- what is refused


def _refused(cwd: Path, capsys: pytest.CaptureFixture[str]) -> str:
    (cwd / "bug.py").write_text(BUG)
    assert main(["check", "bug.py", "--fix", "--no-cache"]) == 1  # the finding stays
    assert (cwd / "bug.py").read_text() == BUG
    captured = capsys.readouterr()
    assert "bug.py:3:27: FAL001" in captured.out
    (line,) = [e for e in captured.err.splitlines() if e.startswith("flux-alias-lint: warning:")]
    return line


def test_refuses_a_change_beyond_the_insertions(cwd: Path, monkeypatch, capsys) -> None:
    real = fixer.apply_edits
    monkeypatch.setattr(lint, "apply_edits", lambda text, edits: real(text, edits).replace('"v"', '"w"'))
    assert _refused(cwd, capsys).endswith(
        "bug.py: fix refused, removing the inserted copies does not give back the original"
    )


def test_refuses_an_insertion_in_the_wrong_place(cwd: Path, monkeypatch, capsys) -> None:
    real = fixer.apply_edits
    monkeypatch.setattr(lint, "apply_edits", lambda text, edits: real(text, edits).replace("().clone()", "()", 1) + "")
    assert "fix refused, no '.clone()' where the fix at offset" in _refused(cwd, capsys)


def test_refuses_a_span_that_is_not_an_expression(cwd: Path, monkeypatch, capsys) -> None:
    real = lint.make_edit
    shifted = lambda offsets, start, end, *rest: real(offsets, start, (end[0], end[1] - 1), *rest)  # noqa: E731
    monkeypatch.setattr(lint, "make_edit", shifted)
    assert "is not a whole expression" in _refused(cwd, capsys)


def test_refuses_a_result_that_does_not_parse(cwd: Path, monkeypatch, capsys) -> None:
    # Checked after the insertion check: make both the text and the recorded insertions wrong alike.
    monkeypatch.setattr(fixer.Edit, "after", property(lambda self: ".clone("))
    monkeypatch.setattr(fixer, "_INSERTIONS", fixer._INSERTIONS | {".clone("})
    assert "fix refused, the result would not parse" in _refused(cwd, capsys)


def test_refuses_when_the_file_changes_while_being_fixed(cwd: Path, monkeypatch, capsys) -> None:
    real = runner.lint_source

    def edit_meanwhile(source, *args):  # type: ignore[no-untyped-def]
        result = real(source, *args)
        (cwd / "bug.py").write_text(BUG + "# edited by someone else\n")
        return result

    monkeypatch.setattr(runner, "lint_source", edit_meanwhile)
    (cwd / "bug.py").write_text(BUG)
    assert main(["check", "bug.py", "--fix", "--no-cache"]) == 1
    assert "bug.py: fix refused, the file changed on disk while it was being fixed" in capsys.readouterr().err
    assert (cwd / "bug.py").read_text() == BUG + "# edited by someone else\n"


def test_an_identical_concurrent_fix_is_not_an_error(cwd: Path, monkeypatch) -> None:
    real = runner.lint_source

    def fixed_meanwhile(source, *args):  # type: ignore[no-untyped-def]
        result = real(source, *args)
        (cwd / "bug.py").write_text(FIXED)
        return result

    monkeypatch.setattr(runner, "lint_source", fixed_meanwhile)
    (cwd / "bug.py").write_text(BUG)
    assert main(["check", "bug.py", "--fix", "--no-cache"]) == 0
    assert (cwd / "bug.py").read_text() == FIXED


# ---------------------------------------------------------------- a corpus, and two runs at once


def _corpus() -> dict[str, bytes]:
    """A few hundred files: every fixture module, as is and re-encoded (CRLF, BOM, latin-1 cookie)."""
    # A fixture project's files are fixed by what the project around them shows (a loss function only
    # the project's schedule call reaches): flattened beside unrelated files, each is checked alone.
    bases = sorted(
        p
        for p in (ROOT / "fixtures").rglob("*.py")
        if not p.name.endswith(".out.py") and p.parent.parent == ROOT / "fixtures"
    )
    files: dict[str, bytes] = {}
    for base in bases:
        data = base.read_bytes()
        stem = f"{base.parent.name}_{base.name.removesuffix('.py').replace('.', '_')}"
        files[f"{stem}.py"] = data
        if data.startswith(codecs.BOM_UTF8) or b"coding" in data.split(b"\n", 2)[0]:
            continue
        files[f"crlf/{stem}.py"] = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        files[f"bom/{stem}.py"] = codecs.BOM_UTF8 + data
        if data.isascii():
            files[f"latin1/{stem}.py"] = b"# -*- coding: latin-1 -*-\n# \xe9t\xe9\n" + data
    return files


def _write(tree: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_bytes(data)


def _run(tree: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "flux_alias_lint", "check", ".", "--fix", "--exit-zero", *args],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_corpus_fix_is_valid_minimal_and_idempotent(tmp_path: Path) -> None:
    files = _corpus()
    assert len(files) >= 300
    _write(tmp_path, files)
    out, err = _run(tmp_path, "--no-cache").communicate(timeout=600)
    assert b"error:" not in err, err.decode()
    changed = 0
    for name, before in files.items():
        after = (tmp_path / name).read_bytes()
        ast.parse(decode(after, name).text.removeprefix("\ufeff"))  # still Python
        assert after == _fixed_bytes(before), name  # unflagged files: byte-identical
        changed += after != before
    assert changed >= 100
    # A second run has nothing left to do but fixes that were nested inside another fix.
    _run(tmp_path, "--no-cache").communicate(timeout=600)
    second = {name: (tmp_path / name).read_bytes() for name in files}
    _run(tmp_path, "--no-cache").communicate(timeout=600)
    for name, before in files.items():
        assert (tmp_path / name).read_bytes() == second[name] == _fixpoint(before), name


def test_two_concurrent_fix_runs_never_corrupt_a_file(tmp_path: Path) -> None:
    files = _corpus()
    _write(tmp_path, files)
    # Both with the shared results cache (the default) and one without, started together.
    runs = [_run(tmp_path), _run(tmp_path, "--no-cache")]
    outcomes = [run.communicate(timeout=600) for run in runs]
    for run, (_, err) in zip(runs, outcomes, strict=True):
        assert run.returncode == 0, err.decode()
        assert b"Traceback" not in err
    for name, before in files.items():
        after = (tmp_path / name).read_bytes()
        ast.parse(decode(after, name).text.removeprefix("\ufeff"))
        # One run's fix, or (when one run read the other's output) the next run's on top of it.
        assert after in (_fixed_bytes(before), _fixpoint(before)), name
    # Temporary files of the atomic writes (the cache directory, with the project index, is no leftover).
    leftovers = [p for p in tmp_path.rglob(".flux-alias-lint-*") if p.name != ".flux-alias-lint-cache"]
    assert leftovers == []
