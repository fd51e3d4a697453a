"""The checker and the fixer against the fixture corpus (expectations written from the spec).

Sources are read as bytes and decoded the way a user's file would be: by its coding cookie, with a
UTF-8 BOM kept as U+FEFF and CRLF kept as is, so that ``fix_source`` must hand back the same bytes.
"""

from __future__ import annotations

import pytest
from fixture_corpus import (
    EXPECTED_LINE,
    CheckerCase,
    FixerPair,
    Kind,
    all_fixture_files,
    api,
    checker_cases,
    fixer_pairs,
    read_source,
)

CHECKER_CASES = checker_cases()
FIXER_PAIRS = fixer_pairs()
POSITIVE_CASES = [case for case in CHECKER_CASES if case.kind() is Kind.POSITIVE]


def _format(findings) -> list[str]:
    ordered = sorted(findings, key=lambda f: (f.line, f.column, f.code, f.report_path))
    return [f"{f.line}:{f.column}: {f.code} {f.report_path}" + _context(f) for f in ordered]


def _context(finding) -> str:
    return "" if finding.context == "unreached" else f" {finding.context}"


def _made_by_a_helper(finding) -> bool:
    """A report entry a helper made, shown at its call (`parts = helper(x)`): no copy fits there, the fix goes
    into the helper (the message says where it was made)."""
    return not finding.fixable and ", made in `" in finding.message


# ------------------------------------------------------------------ the corpus itself


def test_every_fixture_file_belongs_to_a_case():
    claimed = {c.source_path for c in CHECKER_CASES} | {c.expected_path for c in CHECKER_CASES}
    claimed |= {p.in_path for p in FIXER_PAIRS} | {p.out_path for p in FIXER_PAIRS}
    assert [p for p in all_fixture_files() if p not in claimed] == []
    assert all(c.source_path.exists() for c in CHECKER_CASES)
    assert all(p.out_path.exists() for p in FIXER_PAIRS)


@pytest.mark.parametrize("case", CHECKER_CASES, ids=lambda c: c.id)
def test_expected_file_is_well_formed(case: CheckerCase):
    lines = case.expected()
    parsed = [EXPECTED_LINE.match(line) for line in lines]
    assert all(parsed), f"malformed lines: {[text for text, m in zip(lines, parsed, strict=True) if not m]}"
    positions = [(int(m["line"]), int(m["col"])) for m in parsed]
    assert positions == sorted(positions), "not sorted by line, column"
    if lines:
        assert case.rule_dir in {m["code"] for m in parsed}, "a positive lives in the directory of its rule"
    text_lines = case.source().text.lstrip("\ufeff").splitlines()
    for line, col in positions:
        assert line <= len(text_lines) and col <= len(text_lines[line - 1])
        assert not text_lines[line - 1][col - 1].isspace(), f"{line}:{col} points at whitespace"


# ------------------------------------------------------------------ checker


@pytest.mark.parametrize("case", CHECKER_CASES, ids=lambda c: c.id)
def test_checker_fixture(case: CheckerCase):
    check_source = api("check_source")
    findings = check_source(case.source().text, case.id)
    assert _format(findings) == case.expected()
    assert all(f.fixable or _made_by_a_helper(f) for f in findings), (
        "every finding in the corpus but a helper's can be fixed by adding a clone"
    )
    assert all(f.path == case.id for f in findings)


def test_seed_finding_names_the_backprop_tensor():
    check_source = api("check_source")
    (case,) = [c for c in CHECKER_CASES if c.id == "FAL001/seed.py"]
    (finding,) = check_source(case.source().text, case.id)
    assert (finding.code, finding.report_path, finding.backprop) == (
        "FAL001",
        'report["loss"][0]',
        "loss_sum",
    )
    assert (finding.end_line, finding.end_column) == (finding.line, finding.column + len("loss_sum.detach()"))
    assert finding.message


# ------------------------------------------------------------------ fixer


@pytest.mark.parametrize("pair", FIXER_PAIRS, ids=lambda p: p.id)
def test_fixer_pair(pair: FixerPair):
    fix_source = api("fix_source")
    check_source = api("check_source")
    before, after = read_source(pair.in_path), read_source(pair.out_path)
    fixed = fix_source(before.text)
    assert fixed == after.text
    assert before.encode(fixed) == after.data, "the fixed file differs from .out.py byte for byte"
    assert fix_source(after.text) == after.text, "the fix is not idempotent"
    assert check_source(after.text, pair.id) == []


@pytest.mark.parametrize("case", POSITIVE_CASES, ids=lambda c: c.id)
def test_fix_leaves_positive_fixture_clean(case: CheckerCase):
    fix_source = api("fix_source")
    check_source = api("check_source")
    fixed = fix_source(case.source().text)
    left = [f for f in check_source(case.source().text, case.id) if _made_by_a_helper(f)]
    assert (fixed != case.source().text) or left
    assert _format(check_source(fixed, case.id)) == _format(left)
    assert fix_source(fixed) == fixed, "the fix is not idempotent"
