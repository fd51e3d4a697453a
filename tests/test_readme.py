"""The README's quick start, as a newcomer runs it: its two lines, read from the README, each in a
fresh clone of this repository and a fresh virtualenv.

The first line runs in the default suite. The second line is the suite itself (the command `.ci/run`
runs once), so its test is marked `readme`: the default run leaves it out, no recursion; run it with
`pytest -m readme` to try the README as a newcomer would.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="cloning needs git")


def quick_start(readme: Path) -> list[str]:
    """The command lines of the first bash block under `## Quick start`."""
    text = readme.read_text(encoding="utf-8")
    section = text[text.index("\n## Quick start\n") :]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the Quick start section has no bash block"
    lines = [line for line in block[1].splitlines() if line.strip() and not line.startswith("#")]
    assert len(lines) == 2, lines
    return lines


def readme_text(clone: Path) -> str:
    return (clone / "README.md").read_text(encoding="utf-8")


def fresh_clone(destination: Path) -> Path:
    """A clone of this repository's committed HEAD, as `git clone` gives a newcomer."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(destination)], check=True, capture_output=True)
    return destination


def run_line(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # No virtualenv, pip or pytest settings of this run leak in. PIP_RETRIES=0: on a machine without
    # a network (torch from local disk, as in CI) pip would otherwise retry PyTorch's index with
    # backoff for every dependency.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTEST", "PYTHONPATH", "CI"))}
    env["PIP_RETRIES"] = "0"
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(sys.prefix))
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=3600
    )


def test_each_line_makes_its_own_virtualenv() -> None:
    """ "Each line makes its own virtualenv and works alone": run one after the other, the second must
    not reuse (or change) the first's."""
    made = []
    for line in quick_start(ROOT / "README.md"):
        (venv,) = re.findall(r"python3 -m venv (\S+)", line)
        assert f". {venv}/bin/activate" in line, line
        made.append(venv)
    assert len(set(made)) == len(made), made


def test_the_readme_says_where_the_suite_downloads_the_host_releases(monkeypatch: pytest.MonkeyPatch) -> None:
    from flux_alias_lint.harness import hosts

    monkeypatch.delenv(hosts.CACHE_ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    default = "~/" + hosts.cache_dir().relative_to(Path.home()).as_posix()
    text = readme_text(ROOT)
    section = text[text.index("\n## Quick start\n") :].split("\n## ", 2)[1]
    for said in (f"`{default}`", f"`{hosts.CACHE_ENV}=DIR`", "`$XDG_CACHE_HOME`"):
        assert said in section, said
    monkeypatch.setenv(hosts.CACHE_ENV, "/elsewhere")
    assert hosts.cache_dir() == Path("/elsewhere")


def test_first_line_lints_the_shipped_examples(tmp_path: Path) -> None:
    clone = fresh_clone(tmp_path / "clone")
    lint, _ = quick_start(clone / "README.md")
    run = run_line(lint, clone)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]  # findings
    assert re.search(r"^fixtures/FAL001/seed\.py:\d+:\d+: FAL001 \[\*\] ", run.stdout, re.MULTILINE), run.stdout
    # The README quotes the closing line: it must be what a newcomer sees.
    stated = re.search(r"The first lints the shipped examples and ends `(Found [^`]+)`", readme_text(clone))
    assert stated is not None, "the README no longer quotes the first line's summary"
    assert re.search(rf"^{re.escape(stated[1])}$", run.stdout, re.MULTILINE), run.stdout[-500:]


@pytest.mark.readme
def test_second_line_passes_the_tests(tmp_path: Path) -> None:
    clone = fresh_clone(tmp_path / "clone")
    _, tests = quick_start(clone / "README.md")
    run = run_line(tests, clone)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert re.search(r"\d+ passed", run.stdout.splitlines()[-1]), run.stdout[-2000:]
