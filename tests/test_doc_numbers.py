"""Every number the README and docs/ quote is what scripts/doc_numbers.py measures now.

When one of these fails after a change that moves a number (a new test, fixture or confirmed finding),
`python scripts/doc_numbers.py --write` rewrites the quotes. The slow measurements (the test count
and `verify` over fixtures/) run once for the module, side by side.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_spec = importlib.util.spec_from_file_location("doc_numbers", ROOT / "scripts" / "doc_numbers.py")
doc_numbers = importlib.util.module_from_spec(_spec)
sys.modules["doc_numbers"] = doc_numbers  # dataclasses look their module up there
_spec.loader.exec_module(doc_numbers)


def test_every_section_of_the_docs_says_where_its_numbers_come_from() -> None:
    found = {(doc, heading) for doc in doc_numbers.DOCS for heading in doc_numbers.headings(doc_numbers.read(doc))}
    assert found - doc_numbers.SECTIONS.keys() == set(), "new sections: add them to SECTIONS in scripts/doc_numbers.py"
    assert doc_numbers.SECTIONS.keys() - found == set(), "sections gone: take them out of SECTIONS"
    listed = {Path(p).as_posix() for p in ["README.md", *(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]}
    assert set(doc_numbers.DOCS) == listed


def test_the_quotes_the_docs_must_hold_are_each_found_once() -> None:
    # Not vacuous: the numbers the issue found drifting are among the quotes, each found exactly once.
    whats = {quote.what for quote in doc_numbers.QUOTES}
    assert {"the summary of `check fixtures/`", "the test count", "verify's confirmations on fixtures/"} <= whats
    for quote in doc_numbers.QUOTES:
        assert all(quote.quoted(doc_numbers.read(quote.doc))), quote


@pytest.fixture(scope="module")
def measurements():
    measured = doc_numbers.Measurements()
    measured.start()
    return measured


@pytest.mark.parametrize("quote", doc_numbers.QUOTES, ids=lambda quote: f"{quote.doc}: {quote.what}")
def test_each_quote_is_what_is_measured_now(quote, measurements) -> None:
    sys.path[:0] = [str(ROOT / "tests")]  # the limits of tests/ (the fuzz's example count)
    try:
        measured = quote.measured(measurements)
    finally:
        sys.path.remove(str(ROOT / "tests"))
    assert quote.quoted(doc_numbers.read(quote.doc)) == measured, "python scripts/doc_numbers.py --write"


@pytest.mark.parametrize("record", doc_numbers.RECORDS, ids=lambda record: f"{record.doc}: {record.anchor[:40]}")
def test_each_recorded_number_says_when_where_and_how(record) -> None:
    assert record.missing(doc_numbers.read(record.doc)) == []


def test_write_rewrites_the_numbers_and_nothing_else(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for doc in doc_numbers.DOCS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / doc, tmp_path / doc)
    monkeypatch.setattr(doc_numbers, "ROOT", tmp_path)
    quote = next(q for q in doc_numbers.QUOTES if q.what == "verify's confirmations on fixtures/")
    before = doc_numbers.read(quote.doc)
    quoted = quote.quoted(before)
    assert doc_numbers.write([(quote, quoted, ("1234", "5"))]) == [quote.doc]
    after = doc_numbers.read(quote.doc)
    assert quote.quoted(after) == ("1234", "5")
    assert after.replace("1234 confirmed (5 also", f"{quoted[0]} confirmed ({quoted[1]} also", 1) == before
    assert doc_numbers.write([(quote, ("1234", "5"), ("1234", "5"))]) == []  # nothing differs, nothing written


def readme_rev() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## pre-commit\n") :]
    rev = re.search(r"```yaml\n# \.pre-commit-config\.yaml\n.*?^\s+rev: (\S+)", section, re.DOTALL | re.MULTILINE)
    assert rev is not None, "the README's pre-commit section has no rev"
    return rev[1]


def git(*args: str, cwd: Path = ROOT, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=check)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_pre_commit_rev_installs_the_current_hooks_and_rules() -> None:
    rev = readme_rev()
    assert re.fullmatch(r"[0-9a-f]{40}", rev), f"{rev}: pre-commit needs an immutable rev, a full commit sha"
    if git("cat-file", "-e", f"{rev}^{{commit}}", check=False).returncode:
        if git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
            pytest.skip(f"{rev} is not in this shallow checkout's history")
        pytest.fail(f"the README's rev {rev} is not a commit of this repository")
    assert git("merge-base", "--is-ancestor", rev, "HEAD", check=False).returncode == 0, (
        f"{rev} is not in HEAD's history"
    )

    # The hooks a user gets at the rev are the ones this checkout defines...
    hooks = git("show", f"{rev}:.pre-commit-hooks.yaml").stdout
    assert hooks == (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"), "update the rev: the hooks changed"
    # ...with every rule (FAL005 and any newer one)...
    at_rev = set(
        re.findall(r'code="(FAL\d+)"', git("grep", "-h", 'code="FAL', rev, "--", "flux_alias_lint/rules/").stdout)
    )
    from flux_alias_lint.rules import RULES

    assert at_rev == set(RULES), f"update the rev: it has the rules {sorted(at_rev)}, this checkout {sorted(RULES)}"
    # ...and the same dependencies.
    project = tomllib.loads(git("show", f"{rev}:pyproject.toml").stdout)["project"]
    current = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["dependencies"] == current["dependencies"], "update the rev: the dependencies changed"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_autoupdate_freeze_pins_the_newest_commit_as_the_readme_says(tmp_path: Path) -> None:
    # The command the README gives, against a clone of this repository standing for where it is hosted.
    clone = tmp_path / "clone"
    git("clone", "-q", str(ROOT), str(clone))
    head = git("rev-parse", "HEAD", cwd=clone).stdout.strip()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    command = re.search(r"run `(pre-commit autoupdate --freeze --repo\s+(\S+))`", text)
    assert command is not None, "the README no longer says how to move the rev"
    snippet = re.search(r"```yaml\n(# \.pre-commit-config\.yaml\n.*?)```", text, re.DOTALL)[1]
    config = tmp_path / "project" / ".pre-commit-config.yaml"
    config.parent.mkdir()
    config.write_text(snippet.replace(command[2], str(clone)))
    git("init", "-q", cwd=config.parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    argv = command[1].split()[1:-1] + [str(clone)]  # `autoupdate --freeze --repo`, then the clone
    run = subprocess.run(
        [sys.executable, "-m", "pre_commit", *argv],
        cwd=config.parent,
        env=env | {"PRE_COMMIT_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(rf"^\s+rev: {head}\b", config.read_text(), re.MULTILINE), config.read_text()
