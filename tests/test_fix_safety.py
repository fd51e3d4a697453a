"""`--fix` never makes code worse: it wraps only values shown to suit a copy, it reaches a fixed
point in one run (a second run changes nothing), and an edit that does not clear its own finding is
refused with one line instead of being written."""

from __future__ import annotations

import pytest
from fixture_corpus import checker_cases, fixer_pairs, read_source

from flux_alias_lint.lint import check_source, fix_source, fix_text
from flux_alias_lint.source import SourceFile

SOURCES = [(c.id, c.source().text) for c in checker_cases()] + [
    (p.id, read_source(p.in_path).text) for p in fixer_pairs()
]


@pytest.mark.parametrize(("case", "text"), SOURCES, ids=[case for case, _ in SOURCES])
def test_a_second_fix_changes_nothing(case: str, text: str) -> None:
    once = fix_source(text)
    assert fix_source(once) == once


def test_a_bare_comprehension_element_is_flagged_not_fixed() -> None:
    """A copy on the element is a copy of every value of `kwargs` (bools and None among them)."""
    source = (
        "import torch\n\n\ndef loss_func(output_tensor, kwargs):\n"
        "    loss = output_tensor.sum()\n"
        "    report = {k: v for k, v in kwargs.items()}\n"
        "    report['lm'] = loss\n"
        "    return loss, {k: v for k, v in report.items()}\n"
    )
    findings = check_source(source)
    assert [(f.code, f.fixable) for f in findings] == [("FAL002", False)]
    assert fix_source(source) == source
    shown = source.replace("{k: v for k, v in report.items()}", "{k: v.detach() for k, v in report.items()}")
    assert [(f.code, f.fixable) for f in check_source(shown)] == [("FAL001", True)]


def test_a_parameter_defaulting_to_none_is_flagged_not_fixed() -> None:
    source = (
        "import torch\n\n\ndef loss_func(output_tensor: torch.Tensor = None):\n"
        "    return output_tensor, {'out': output_tensor}\n"
    )
    assert [(f.code, f.fixable) for f in check_source(source)] == [("FAL002", False)]
    assert fix_source(source) == source


def test_a_fix_that_does_not_clear_its_finding_is_left_out_and_the_others_applied() -> None:
    """Copying `loss` where `out` holds it copies the returned loss too (it is `out["a"]`): the finding
    stays, so the edit is refused with one line, shown as not fixable, and `loss_a` is still fixed."""
    text = (
        "import torch\n\n\ndef loss_a(output_tensor):\n    loss = output_tensor.sum()\n"
        '    return loss, {"lm": loss.detach()}\n\n\n'
        'def loss_b(output_tensor):\n    loss = output_tensor.mean()\n    out = {"a": loss}\n    return out["a"], out\n'
    )
    result = fix_text(SourceFile("bug.py", text, "utf-8"))
    assert result.text == text.replace('{"lm": loss.detach()}', '{"lm": loss.detach().clone()}')
    assert result.refused == ("fix refused, the copy at line 11 would not clear its FAL002 finding",)
    assert [(f.line, f.code, f.fixable) for f in result.remaining] == [(11, "FAL002", False)]


def _fixable(source: str) -> list[tuple[str, bool]]:
    return [(f.report_path, f.fixable) for f in check_source("import torch\n\n\n" + source)]


def test_a_name_some_path_leaves_none_is_flagged_not_fixed() -> None:
    source = (
        "def loss_func(mask, output_tensor):\n    loss = output_tensor.sum()\n    logged = None\n"
        "    if mask is not None:\n        logged = loss\n    return loss, {'lm': logged}\n"
    )
    assert _fixable(source) == [('report["lm"]', False)]


def test_an_element_inside_a_comprehension_tuple_is_flagged_not_fixed() -> None:
    head = "def loss_func(output_tensor, report):\n    loss = output_tensor.sum()\n    report['lm'] = loss\n"
    assert _fixable(head + "    return loss, dict((k, v) for k, v in report.items())\n") == [("report[...]", False)]
    assert _fixable(head + "    return loss, {k: (v, 1) for k, v in report.items()}\n") == [("report[...][0]", False)]


def test_a_value_that_may_be_another_parameter_is_flagged_not_fixed() -> None:
    source = (
        "def loss_func(output_tensor, *, scale=None):\n    loss = output_tensor.sum()\n"
        "    s = loss if scale is None else scale\n    return loss, {'s': s}\n"
    )
    assert _fixable(source) == [('report["s"]', False)]
