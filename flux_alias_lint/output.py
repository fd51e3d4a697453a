"""Render findings for people (text) and machines (json; CI formats in `ci_formats`)."""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Sequence

from .ci_formats import format_github, format_gitlab, format_sarif
from .finding import Finding
from .rules import RULES


def format_text(findings: Sequence[Finding]) -> str:
    return "".join(f"{f.path}:{f.line}:{f.column}: {f.code} {f.message} [{_context(f)}]\n" for f in findings)


def _context(finding: Finding) -> str:
    """`megatron via path:line` (the call that rescales: the last step), or `unreached`."""
    if not finding.reached_by:
        return finding.context
    last = finding.reached_by[-1]
    return f"{finding.context} via {last.path}:{last.line}"


def format_json(findings: Sequence[Finding]) -> str:
    rows = [dict(f.to_dict(), rule=RULES[f.code].name) for f in findings]
    return json.dumps(rows, indent=2) + "\n"


FORMATTERS: dict[str, Callable[[Sequence[Finding]], str]] = {
    "text": format_text,
    "json": format_json,
    "github": format_github,
    "sarif": format_sarif,
    "gitlab": format_gitlab,
}


def format_statistics(findings: Sequence[Finding]) -> str:
    counts = collections.Counter(f.code for f in findings)
    fixable = collections.Counter(f.code for f in findings if f.fixable)
    lines = []
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        marker = "[*]" if fixable[code] == count else "[ ]"
        lines.append(f"{count:>5}\t{code}\t{marker} {RULES[code].name}\n")
    return "".join(lines)


def summary(findings: Sequence[Finding], fixed: int, unchecked: int = 0) -> str:
    remaining = len(findings)
    if unchecked:
        files = "file" if unchecked == 1 else "files"
        tail = f"{unchecked} {files} could not be checked (see the errors above).\n"
    else:
        tail = ""
    if remaining == 0 and fixed == 0:
        return tail or "All checks passed!\n"
    plural = "s" if remaining + fixed != 1 else ""
    if fixed:
        return f"Found {remaining + fixed} error{plural} ({fixed} fixed, {remaining} remaining).\n" + tail
    fixable = sum(f.fixable for f in findings)
    line = f"Found {remaining} error{plural}.\n"
    if fixable:
        line += f"[*] {fixable} fixable with the `--fix` option.\n"
    return line + tail
