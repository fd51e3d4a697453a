"""ruff's flags where the two CLIs overlap: each run on the same file as ruff 0.17.6 (a rule of its
own, F841, against ours, FAL001), comparing exit codes, output shape and file edits."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flux_alias_lint.rules import RULES

ROOT = Path(__file__).resolve().parents[1]
# Line 2 is ruff's F841 (`unused` is never read), line 4 our FAL001 (an error: the forward step
# below hands the loss function to Megatron); each with lines after it.
SOURCE = (
    "def loss_func(x):\n"
    "    unused = 1\n"
    "    loss = x.sum()\n"
    '    return loss, {"loss": loss.detach()}\n'
    "\n"
    "def forward_step(data_iterator, model):\n"
    "    return model(next(data_iterator)), loss_func\n"
)


def _run(tool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    module = "ruff" if tool == "ruff" else "flux_alias_lint"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def both(
    *args: str, cwd: Path, ruff_rule: str = "F841", ours: str = "FAL001"
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """ruff and flux-alias-lint with the same arguments, `{rule}` standing for each one's rule."""
    ruff = _run("ruff", *(a.replace("{rule}", ruff_rule) for a in args), cwd=cwd)
    flux = _run("flux", *(a.replace("{rule}", ours) for a in args), cwd=cwd)
    return ruff, flux


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "bug.py").write_text(SOURCE)
    return tmp_path


def test_select_all(project: Path) -> None:
    ruff, flux = both("check", "-n", "--select", "ALL", "bug.py", cwd=project)
    assert ruff.returncode == flux.returncode == 1
    assert "F841" in ruff.stdout and "FAL001" in flux.stdout
    ruff, flux = both("check", "-n", "--select", "ALL", "--ignore", "ALL", "bug.py", cwd=project)
    assert ruff.returncode == flux.returncode == 0


def test_exit_zero_short_flag(project: Path) -> None:
    ruff, flux = both("check", "-n", "--select", "{rule}", "-e", "bug.py", cwd=project)
    assert ruff.returncode == flux.returncode == 0
    assert "F841" in ruff.stdout and "FAL001" in flux.stdout  # still reported


def test_no_cache_short_flag(project: Path) -> None:
    ruff, flux = both("check", "-n", "--select", "{rule}", "bug.py", cwd=project)
    assert ruff.returncode == flux.returncode == 1
    assert sorted(p.name for p in project.iterdir()) == ["bug.py"]  # neither .ruff_cache nor ours
    both("check", "--select", "{rule}", "bug.py", cwd=project)
    assert sorted(p.name for p in project.iterdir()) == [".flux-alias-lint-cache", ".ruff_cache", "bug.py"]


def test_concise_format(project: Path) -> None:
    ruff, flux = both("check", "-n", "--select", "{rule}", "--output-format", "concise", "bug.py", cwd=project)
    assert ruff.returncode == flux.returncode == 1
    assert ruff.stdout.splitlines()[0].startswith("bug.py:2:5: F841 ")
    assert flux.stdout.splitlines()[0].startswith("bug.py:4:27: FAL001 [*] ")
    assert ruff.stdout.splitlines()[1] == flux.stdout.splitlines()[1] == "Found 1 error."


def _snippet(output: str) -> list[str]:
    """The first diagnostic of a full report, from its header to the gutter line closing the snippet."""
    lines = output.splitlines()
    caret = next(i for i, line in enumerate(lines) if re.fullmatch(r" +\| +\^+", line))
    end = next(i for i in range(caret, len(lines)) if re.fullmatch(r" +\|", lines[i]))
    return lines[: end + 1]


_KINDS = (
    ("arrow", r" *--> \S+:\d+:\d+"),
    ("caret", r" +\| +\^+"),
    ("gutter", r" +\|"),
    ("source", r"\d+ \|( .*)?"),
)


def _shape(snippet: list[str]) -> list[str]:
    """Each line's kind, runs of one kind counted once."""
    kinds: list[str] = []
    for line in snippet:
        kind = next((name for name, pattern in _KINDS if re.fullmatch(pattern, line)), "header")
        if not kinds or kind != kinds[-1]:
            kinds.append(kind)
    return kinds


def test_full_format(project: Path) -> None:
    ruff, flux = both("check", "-n", "--select", "{rule}", "--output-format", "full", "bug.py", cwd=project)
    assert ruff.returncode == flux.returncode == 1
    ruff_snippet, flux_snippet = _snippet(ruff.stdout), _snippet(flux.stdout)
    shape = ["header", "arrow", "gutter", "source", "caret", "source", "gutter"]
    assert _shape(ruff_snippet) == _shape(flux_snippet) == shape
    assert ruff_snippet[1] == " --> bug.py:2:5" and flux_snippet[1] == " --> bug.py:4:27"
    # The caret sits under the flagged expression of the line above it.
    for snippet, flagged in ((ruff_snippet, "unused"), (flux_snippet, "loss.detach()")):
        at = next(i for i, line in enumerate(snippet) if line.endswith("^"))
        caret, source = snippet[at], snippet[at - 1].split(" | ", 1)[1]
        start = caret.index("^") - caret.index("|") - 2
        assert source[start : start + caret.count("^")] == flagged


def test_show_settings(project: Path) -> None:
    ruff, flux = both("check", "-n", "--select", "{rule}", "--show-settings", "bug.py", cwd=project)
    assert ruff.returncode == flux.returncode == 0
    expected = f'Resolved settings for: "{project / "bug.py"}"'
    assert ruff.stdout.splitlines()[0] == flux.stdout.splitlines()[0] == expected
    assert 'select = ["FAL000", "FAL001"]' in flux.stdout.splitlines()


def test_add_noqa(project: Path) -> None:
    other = project / "other"
    other.mkdir()
    (other / "bug.py").write_text(SOURCE)
    ruff = _run("ruff", "check", "-n", "--select", "F841", "--add-noqa", "bug.py", cwd=project)
    flux = _run("flux", "check", "-n", "--select", "FAL001", "--add-noqa", "bug.py", cwd=other)
    assert ruff.returncode == flux.returncode == 0
    assert ruff.stderr == flux.stderr == "Added 1 noqa directive.\n"
    lines = SOURCE.splitlines(keepends=True)
    assert (project / "bug.py").read_text() == SOURCE.replace(lines[1], lines[1][:-1] + "  # noqa: F841\n")
    assert (other / "bug.py").read_text() == SOURCE.replace(lines[3], lines[3][:-1] + "  # noqa: FAL001\n")
    # The files then pass; and both add their code to a noqa comment already on the line.
    ruff = _run("ruff", "check", "-n", "--select", "F841,E501", "bug.py", cwd=project)
    flux = _run("flux", "check", "-n", "--select", "FAL001", "bug.py", cwd=other)
    assert ruff.returncode == flux.returncode == 0
    (project / "e.py").write_text("def f():\n    x = 1  # noqa: E501\n")
    (other / "e.py").write_text(SOURCE.replace("detach()}\n", "detach()}  # noqa: E501\n"))
    _run("ruff", "check", "-n", "--select", "F841", "--add-noqa", "e.py", cwd=project)
    _run("flux", "check", "-n", "--add-noqa", "e.py", cwd=other)
    assert "x = 1  # noqa: E501, F841\n" in (project / "e.py").read_text()
    assert "detach()}  # noqa: E501, FAL001\n" in (other / "e.py").read_text()


def test_rule_by_name_and_all(tmp_path: Path) -> None:
    ruff, flux = (
        _run("ruff", "rule", "unused-variable", cwd=tmp_path),
        _run("flux", "rule", "detached-alias-in-report", cwd=tmp_path),
    )
    assert ruff.returncode == flux.returncode == 0
    assert ruff.stdout.startswith("# unused-variable (F841)") and flux.stdout.startswith(
        "# FAL001 (detached-alias-in-report)"
    )
    ruff, flux = both("rule", "--all", cwd=tmp_path)
    assert ruff.returncode == flux.returncode == 0
    headers = [line for line in flux.stdout.splitlines() if line.startswith("# FAL")]
    assert headers == [f"# {rule.code} ({rule.name})" for rule in RULES.values()]
    ruff, flux = both("rule", "no-such-rule", cwd=tmp_path)
    assert ruff.returncode == flux.returncode == 2


def test_inline_config(project: Path) -> None:
    ruff = _run("ruff", "check", "-n", "--config", 'lint.select = ["F841"]', "bug.py", cwd=project)
    flux = _run("flux", "check", "-n", "--config", 'select = ["FAL001"]', "bug.py", cwd=project)
    assert ruff.returncode == flux.returncode == 1
    assert "F841" in ruff.stdout and "FAL001" in flux.stdout
    ruff = _run("ruff", "check", "-n", "--config", 'lint.ignore = ["F841"]', "bug.py", cwd=project)
    flux = _run("flux", "check", "-n", "--config", 'ignore = ["FAL001"]', "bug.py", cwd=project)
    assert ruff.returncode == flux.returncode == 0
    ruff, flux = both("check", "-n", "--config", "select = [", "bug.py", cwd=project)
    assert ruff.returncode == flux.returncode == 2
    assert "--config select = [: neither an existing file nor a TOML `KEY = VALUE`" in flux.stderr
    # On top of the pyproject.toml's settings, as in ruff.
    (project / "pyproject.toml").write_text('[tool.flux-alias-lint]\nignore = ["FAL001"]\n')
    assert _run("flux", "check", "-n", "bug.py", cwd=project).returncode == 0
    assert _run("flux", "check", "-n", "--config", "ignore = []", "bug.py", cwd=project).returncode == 1


def test_ruff_keeps_our_noqa_comments_when_told_they_are_external(tmp_path: Path) -> None:
    """What the docs say to put in ruff's config: `lint.external = ["FAL"]`."""
    kept = tmp_path / "kept.py"
    deleted = tmp_path / "deleted.py"
    for path in (kept, deleted):
        path.write_text("x = 1  # noqa: FAL001\n")
    _run("ruff", "check", "-n", "--select", "ALL", "--fix", "deleted.py", cwd=tmp_path)
    _run(
        "ruff",
        "check",
        "-n",
        "--select",
        "ALL",
        "--config",
        'lint.external = ["FAL"]',
        "--fix",
        "kept.py",
        cwd=tmp_path,
    )
    assert deleted.read_text() == "x = 1\n"  # RUF100 took it for an unused noqa
    assert kept.read_text() == "x = 1  # noqa: FAL001\n"


def test_no_arguments_print_the_help(tmp_path: Path) -> None:
    ruff, flux = _run("ruff", cwd=tmp_path), _run("flux", cwd=tmp_path)
    assert ruff.returncode == flux.returncode == 2
    assert ruff.stderr.startswith("Ruff:") and "usage: flux-alias-lint" in flux.stderr
    assert ruff.stdout == flux.stdout == ""
