"""`flux-alias-lint explain FILE:LINE`: the chain of the finding at that line, or where its value is lost."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from .finding import WARNING, Finding
from .index.escapes import Escapes
from .index.files import project_roots
from .index.project import ProjectIndex
from .index.reach import ESCAPES, IN_FUNCTION, IN_PLACE_CALLER, MEGATRON, UNREACHED
from .lint import check_text
from .selection import Selection
from .source import SourceError, read_source

EXIT_CLEAN, EXIT_ERROR = 0, 2

_HEADINGS = {
    MEGATRON: "Megatron's schedule rescales its loss in place, reached so:",
    IN_PLACE_CALLER: "a caller in the project rescales its loss in place, reached so:",
    ESCAPES: "it may reach a host that rescales its loss: its value goes where the analysis cannot follow it:",
}


def explain(target: str, selection_of: Callable[[str], Selection]) -> int:
    """Print each finding on `target`'s line with its chain; exit 2 with one line for a bad
    `FILE:LINE` or a line without a finding."""
    path, _, number = target.rpartition(":")
    if not path or not number.isdigit() or int(number) < 1:
        return _error(f"expected FILE:LINE (a line number from 1), got {target!r}")
    line = int(number)
    if not os.path.isfile(path):
        return _error(f"{path}: no such file")
    try:
        source = read_source(path)
        reaches = ProjectIndex.for_paths([path]).reached_by_path().get(os.path.realpath(path), {})
        findings, _ = check_text(source, selection_of(path), reaches=reaches)
    except SourceError as exc:
        return _error(str(exc))
    here = [f for f in findings if f.line <= line <= f.end_line]
    if not here:
        return _error(f"{path}:{line}: no finding there")
    for finding in here:
        print(_explained(finding, source.text))
    return EXIT_CLEAN


def _explained(finding: Finding, text: str) -> str:
    severity = ", warning" if finding.severity == WARNING else ""
    head = f"{finding.path}:{finding.line}:{finding.column}: {finding.code} {finding.report_path}"
    lines = [f"{head} [{finding.context or 'unchecked'}{severity}]" if finding.report_path else head]
    if finding.context in _HEADINGS:
        lines.append(f"  {_HEADINGS[finding.context]}")
        last = len(finding.reached_by) - 1
        for number, step in enumerate(finding.reached_by):
            lost = ", not followed" if finding.context == ESCAPES and number == last else ""
            lines.append(f"    {step.path}:{step.line}: {step.what}{lost}")
    elif finding.context == IN_FUNCTION:
        lines.append("  the in-place write that changes it is in the function itself, whoever calls it")
    elif finding.context == UNREACHED:
        real = os.path.realpath(finding.path)
        named = Escapes(project_roots([real]), real, text).named_at(finding.line)
        if not named:
            lines.append("  unreached: nothing in the project references its function, other than to call it")
        else:
            lines.append("  unreached: every reference to its function was followed, and none reaches a host:")
            lines += [f"    {step.path}:{step.line}: {step.what}" for step in named]
    else:
        lines.append(f"  {finding.message}")
    return "\n".join(lines)


def _error(message: str) -> int:
    print(f"flux-alias-lint: error: {message}", file=sys.stderr)
    return EXIT_ERROR
