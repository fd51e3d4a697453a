"""`--fix` never makes code worse: it wraps only values shown to suit a copy, it reaches a fixed
point in one run (a second run changes nothing), and an edit that does not clear its own finding is
refused with one line instead of being written."""

from __future__ import annotations

import pytest
from fixture_corpus import checker_cases, fixer_pairs, read_source

from flux_alias_lint import lint
from flux_alias_lint.lint import check_source, fix_source, fix_text
from flux_alias_lint.source import SourceError, SourceFile

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


def test_a_fix_that_does_not_clear_its_finding_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    source = SourceFile(
        "bug.py", 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"l": loss.detach()}\n', "utf-8"
    )
    real = lint._findings
    first = real(source, lint.DEFAULT_SELECTION)

    def the_finding_stays(src: SourceFile, *args: object, **kwargs: object) -> object:
        return first if src.text != source.text else real(src, *args, **kwargs)

    monkeypatch.setattr(lint, "_findings", the_finding_stays)
    with pytest.raises(SourceError, match=r"fix refused, the copy at line 3 would not clear its FAL001 finding"):
        fix_text(source)
