"""The command line: exit codes, formats, noqa, config, stdin, --diff, unparsable files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from megatron_shapes import FORWARD_STEP

from flux_alias_lint.cli import main

ROOT = Path(__file__).resolve().parents[1]

BUG = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach()}\n' + FORWARD_STEP
FIXED = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach().clone()}\n' + FORWARD_STEP
CLEAN = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.item()}\n'


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bug.py").write_text(BUG)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    return tmp_path


def test_exit_codes_and_text_format(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "pkg/clean.py"]) == 0
    assert "All checks passed!" in capsys.readouterr().out
    assert main(["check", "pkg"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith('pkg/bug.py:3:27: FAL001 [*] report["loss"] = `loss.detach()`')
    assert main(["check", "pkg", "--exit-zero"]) == 0


def test_json_format(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "pkg", "--format", "json"]) == 1
    (row,) = json.loads(capsys.readouterr().out)
    assert {k: row[k] for k in ("path", "line", "column", "end_line", "end_column", "code", "fixable")} == {
        "path": "pkg/bug.py",
        "line": 3,
        "column": 27,
        "end_line": 3,
        "end_column": 40,
        "code": "FAL001",
        "fixable": True,
    }
    assert "loss" in row["message"]


def test_fix_rewrites_and_then_checks_clean(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "pkg", "--fix"]) == 0
    assert "1 fixed, 0 remaining" in capsys.readouterr().out
    assert (tree / "pkg" / "bug.py").read_text() == FIXED
    assert (tree / "pkg" / "clean.py").read_text() == CLEAN
    assert main(["check", "pkg"]) == 0


def test_diff_writes_nothing(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "pkg", "--diff"]) == 1
    out = capsys.readouterr().out
    assert '-    return loss, {"loss": loss.detach()}' in out
    assert '+    return loss, {"loss": loss.detach().clone()}' in out
    assert (tree / "pkg" / "bug.py").read_text() == BUG
    assert main(["check", "pkg/clean.py", "--diff"]) == 0


def test_noqa(tree: Path) -> None:
    (tree / "pkg" / "bug.py").write_text(BUG.replace("detach()}", "detach()}  # noqa: FAL001"))
    assert main(["check", "pkg"]) == 0
    (tree / "pkg" / "bug.py").write_text(BUG.replace("detach()}", "detach()}  # noqa: FAL003"))
    assert main(["check", "pkg"]) == 1
    (tree / "pkg" / "bug.py").write_text(BUG.replace("detach()}", "detach()}  # noqa"))
    assert main(["check", "pkg"]) == 0


def test_select_ignore_and_config(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "pkg", "--ignore", "FAL001"]) == 0
    assert main(["check", "pkg", "--select", "FAL002,FAL003"]) == 0
    assert main(["check", "pkg", "--select", "FAL00"]) == 1
    (tree / "pyproject.toml").write_text('[tool.flux-alias-lint]\nignore = ["FAL001"]\n')
    assert main(["check", "pkg"]) == 0
    (tree / "pyproject.toml").write_text('[tool.flux-alias-lint]\nextend-exclude = ["bug.py"]\n')
    assert main(["check", "pkg"]) == 0
    (tree / "pyproject.toml").write_text('[tool.flux-alias-lint]\nselekt = ["FAL"]\n')
    capsys.readouterr()
    assert main(["check", "pkg"]) == 2
    assert "unknown option(s)" in capsys.readouterr().err
    assert main(["check", "pkg", "--config", str(tree / "missing.toml")]) == 2


def test_unknown_selector_is_a_usage_error(tree: Path) -> None:
    assert main(["check", "pkg", "--select", "E501"]) == 2


def test_bad_files_are_reported_and_others_still_checked(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tree / "pkg" / "broken.py").write_text("def f(:\n")
    (tree / "pkg" / "py2.py").write_text('print "hello"\n')
    (tree / "pkg" / "binary.py").write_bytes(b"\x00\x01\x02")
    (tree / "pkg" / "latin.py").write_bytes(b"x = '\xe9'\n")
    assert main(["check", "pkg", "nope.py"]) == 2  # a path that does not exist is a usage error
    captured = capsys.readouterr()
    assert "pkg/bug.py:3:27: FAL001" in captured.out
    assert captured.err.splitlines() == ["flux-alias-lint: error: nope.py: no such file or directory"]
    # Files that cannot be checked are FAL000 findings.
    unchecked = [line for line in captured.out.splitlines() if " FAL000 " in line]
    assert len(unchecked) == 4
    assert "pkg/broken.py:1:7: FAL000 syntax error: invalid syntax" in unchecked
    assert any(e.startswith("pkg/py2.py:1:1: FAL000 syntax error: Missing parentheses") for e in unchecked)
    assert "pkg/binary.py:1:1: FAL000 contains NUL bytes (binary file?)" in unchecked
    assert any(e.startswith("pkg/latin.py:1:1: FAL000 not valid utf-8") for e in unchecked)


def test_declared_latin1_file_is_checked_and_fixed_in_its_encoding(tree: Path) -> None:
    source = ("# -*- coding: latin-1 -*-\n# caf\xe9\n" + BUG).encode("latin-1")
    (tree / "pkg" / "bug.py").write_bytes(source)
    assert main(["check", "pkg", "--fix"]) == 0
    assert (tree / "pkg" / "bug.py").read_bytes() == ("# -*- coding: latin-1 -*-\n# caf\xe9\n" + FIXED).encode(
        "latin-1"
    )


def test_crlf_and_bom_survive_the_fix(tree: Path) -> None:
    (tree / "pkg" / "bug.py").write_bytes(b"\xef\xbb\xbf" + BUG.replace("\n", "\r\n").encode())
    assert main(["check", "pkg", "--fix"]) == 0
    assert (tree / "pkg" / "bug.py").read_bytes() == b"\xef\xbb\xbf" + FIXED.replace("\n", "\r\n").encode()


def test_stdin(tree: Path) -> None:
    cmd = [sys.executable, "-m", "flux_alias_lint", "check", "-", "--stdin-filename", "x.py"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(cmd, check=False, input=BUG, capture_output=True, text=True, env=env)
    assert run.returncode == 1 and run.stdout.startswith("x.py:3:27: FAL001")
    run = subprocess.run([*cmd, "--fix"], check=False, input=BUG, capture_output=True, text=True, env=env)
    assert run.returncode == 0 and run.stdout == FIXED
    run = subprocess.run(cmd, check=False, input="def f(:\n", capture_output=True, text=True, env=env)
    assert run.returncode == 1 and run.stdout.startswith("x.py:1:7: FAL000 syntax error")


def test_rule_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rule", "FAL001"]) == 0
    doc = capsys.readouterr().out
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Fix"):
        assert heading in doc
    assert main(["rule", "FAL999"]) == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    capsys.readouterr()
    assert main(["rule"]) == 0
    assert "FAL004" in capsys.readouterr().out


def test_statistics(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "pkg", "--statistics"]) == 1
    assert capsys.readouterr().out.split() == ["1", "FAL001", "[*]", "detached-alias-in-report"]


def test_conflicting_options_are_usage_errors(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["-", "pkg"], ["pkg", "--statistics", "--format", "github"]):
        with pytest.raises(SystemExit) as exit_info:
            main(["check", *argv])
        assert exit_info.value.code == 2
    assert "cannot be combined with --output-format github" in capsys.readouterr().err


def test_diff_honours_exit_zero(tree: Path) -> None:
    assert main(["check", "pkg", "--diff", "--exit-zero"]) == 0
    assert (tree / "pkg" / "bug.py").read_text() == BUG


def test_misspelled_table_is_named(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tree / "pyproject.toml").write_text('[tool.flux_alias_lint]\nignore = ["FAL001"]\n')
    assert main(["check", "pkg"]) == 1  # not read: the finding stays
    assert (
        f"flux-alias-lint: warning: {tree / 'pyproject.toml'}: [tool.flux_alias_lint] is not read; "
        "the table is [tool.flux-alias-lint]"
    ) in capsys.readouterr().err.splitlines()
    (tree / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n[tool.flux-alias-lint]\n")
    assert main(["check", "pkg"]) == 1
    assert "warning" not in capsys.readouterr().err


def test_unknown_key_lists_the_valid_ones(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tree / "pyproject.toml").write_text('[tool.flux-alias-lint]\nselekt = ["FAL"]\n')
    assert main(["check", "pkg"]) == 2
    assert "unknown option(s) in [tool.flux-alias-lint]: selekt (valid: exclude, extend-exclude," in (
        capsys.readouterr().err
    )


def test_bad_numbers_name_the_flag(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["check", "pkg", "-j", "abc"])
    assert exit_info.value.code == 2
    assert "argument -j/--jobs: 'abc' is not a whole number" in capsys.readouterr().err


def test_exit_non_zero_on_fix_without_fix_warns(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "pkg", "--exit-non-zero-on-fix"]) == 1
    assert "warning: --exit-non-zero-on-fix has no effect without --fix" in capsys.readouterr().err


def test_cache_stays_beside_the_project_with_config_file(tree: Path) -> None:
    (tree / "pyproject.toml").write_text("[tool.flux-alias-lint]\n")
    elsewhere = tree / "settings"
    elsewhere.mkdir()
    (elsewhere / "lint.toml").write_text('select = ["FAL001"]\n')
    assert main(["check", "pkg", "--config", str(elsewhere / "lint.toml")]) == 1
    assert (tree / ".flux-alias-lint-cache").is_dir() and not (elsewhere / ".flux-alias-lint-cache").exists()


def test_reached_by_paths_take_the_findings_style(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed = ROOT / "fixtures" / "FAL001" / "seed.py"
    (tree / "pkg" / "seed.py").write_text(seed.read_text())
    for spelled in ("pkg/seed.py", str(tree / "pkg" / "seed.py")):
        assert main(["check", spelled, "--format", "json", "-n"]) == 1
        (row,) = json.loads(capsys.readouterr().out)
        assert row["path"] == spelled
        assert {step["path"] for step in row["reached_by"]} == {spelled}


def test_a_python_script_without_extension_gets_the_context_of_a_py_file(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = (ROOT / "fixtures" / "FAL001" / "seed.py").read_text()
    (tree / "pyproject.toml").write_text("[tool.flux-alias-lint]\n")
    (tree / "train.py").write_text(seed)
    (tree / "train").write_text("#!/usr/bin/env python3\n" + seed)
    contexts = []
    for name in ("train.py", "train"):
        assert main(["check", name, "--format", "json", "-n"]) == 1
        (row,) = json.loads(capsys.readouterr().out)
        contexts.append((row["context"], [step["what"] for step in row["reached_by"]]))
    assert contexts[0] == contexts[1] and contexts[0][0] == "megatron"


def test_the_index_phase_is_shown(capsys: pytest.CaptureFixture[str]) -> None:
    import io

    from flux_alias_lint.progress import phase

    stream = io.StringIO()
    with phase("Indexing the project", stream):
        assert stream.getvalue() == "\rIndexing the project"
    assert stream.getvalue() == "\rIndexing the project\r\x1b[2K"


def test_the_walk_lists_what_os_walk_would_and_resolves_a_symlink_on_its_own(tmp_path: Path) -> None:
    """The walk reads each directory once (`os.scandir`); a directory's path relative to the root is
    its parent's and its name unless it is a symlink: the listing and the excludes are those of an
    `os.walk` asking the excluder about every entry's own path."""
    from flux_alias_lint.discover import Excluder, discover

    for name in ("a.py", "pkg/b.py", "pkg/sub/c.py", "pkg/sub/generated/d.py", "z/y.py", "z/notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    (tmp_path / "pkg" / "link").symlink_to(tmp_path / "pkg" / "sub")  # listed, not entered
    (tmp_path / "pkg" / "alias.py").symlink_to(tmp_path / "pkg" / "sub" / "c.py")
    (tmp_path / "pkg" / "broken.py").symlink_to(tmp_path / "missing.py")
    excluder = Excluder(("pkg/sub/generated", "pkg/sub/c.py"), tmp_path)
    reference = []
    for directory, dirnames, filenames in os.walk(tmp_path):
        dirnames[:] = sorted(d for d in dirnames if not excluder(Path(directory) / d))
        reference += [
            os.path.join(directory, f)
            for f in sorted(filenames)
            if f.endswith(".py") and not excluder(Path(directory) / f)
        ]
    walked, errors = discover([str(tmp_path)], excluder, excluded_in=Excluder(excluder.patterns, tmp_path).excluded_in)
    assert errors == []
    assert walked == reference == discover([str(tmp_path)], excluder)[0]
    names = [Path(f).relative_to(tmp_path).as_posix() for f in walked]
    assert names == ["a.py", "pkg/b.py", "pkg/broken.py", "z/y.py"]  # alias.py is c.py, excluded once resolved
