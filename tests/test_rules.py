"""The rule registry is derived from the rule files, and what is derived from it stays so: the README's
and docs' rules tables, the fixture corpus' directories, the alias kinds the analysis reports."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

from flux_alias_lint import rules
from flux_alias_lint.facts.tensor_ops import AliasKind
from flux_alias_lint.rules import ANALYSIS_RULES, CODE_FOR_KIND, RULES

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
TABLE_HEADER = "| Code | Name | Flags (in a loss function's report) | Fix |"


def rule_modules() -> list[str]:
    return [info.name for info in pkgutil.iter_modules(rules.__path__) if not info.name.startswith("_")]


def registry_table() -> list[str]:
    """The rules table as the README shows it, from the registry."""
    rows = [(rule.code, rule.name, rule.flags, rule.fix) for rule in RULES.values()]
    return [
        TABLE_HEADER,
        "| --- | --- | --- | --- |",
        *("|" + "|".join(f" {c} " if c else " " for c in row) + "|" for row in rows),
    ]


def tables_in(path: Path) -> list[list[str]]:
    """Every rules table in a markdown file: the header row and the rows that follow it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    tables = []
    for start, line in enumerate(lines):
        if line.startswith("| Code | Name |"):
            end = start
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            tables.append(lines[start:end])
    return tables


def test_each_rule_file_defines_one_rule_named_after_it() -> None:
    modules = rule_modules()
    assert len(RULES) == len(modules), "two rule files define the same code"
    for name in modules:
        rule = importlib.import_module(f"flux_alias_lint.rules.{name}").RULE
        assert rule.name.replace("-", "_") == name
        assert RULES[rule.code] is rule
    assert list(RULES) == sorted(RULES)
    assert len({rule.name for rule in RULES.values()}) == len(RULES)
    assert all(re.fullmatch(r"FAL\d{3}", code) for code in RULES)


def test_every_alias_kind_has_one_rule() -> None:
    assert set(CODE_FOR_KIND) == set(AliasKind)
    assert len(set(CODE_FOR_KIND.values())) == len(AliasKind)
    assert set(CODE_FOR_KIND.values()) <= set(ANALYSIS_RULES)


@pytest.mark.parametrize("code", list(RULES))
def test_documentation_has_every_section(code: str) -> None:
    headings = re.findall(r"^## (.+)$", RULES[code].doc, re.MULTILINE)
    assert headings == ["What it does", "Why is this bad?", "Example", "Fix"]
    assert RULES[code].doc.endswith("\n") and "\n" not in RULES[code].summary


def test_readme_rules_table_is_the_registry() -> None:
    (table,) = tables_in(ROOT / "README.md")
    assert table == registry_table()


@pytest.mark.parametrize("doc", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_docs_rules_tables_are_the_registry(doc: Path) -> None:
    assert all(table == registry_table() for table in tables_in(doc))


def test_every_analysis_rule_has_its_fixtures() -> None:
    """`fixtures/<CODE>/`, one directory per rule the analysis reports, and none for a code it does not."""
    directories = {path.name for path in FIXTURES.iterdir() if path.is_dir()}
    assert directories == set(ANALYSIS_RULES)
    for code in ANALYSIS_RULES:
        expected = [*(FIXTURES / code).glob("*.expected"), *(FIXTURES / code).glob("*/expected")]
        assert any(code in path.read_text(encoding="utf-8") for path in expected), f"{code} has no positive fixture"
