"""Render findings for people (text) and machines (json; CI formats in `ci_formats`)."""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Sequence

from .ci_formats import SourceLines, format_github, format_gitlab, format_sarif
from .finding import ERROR, WARNING, Finding, visible
from .index.reach import ESCAPES
from .rules import RULES


def format_text(findings: Sequence[Finding]) -> str:
    """`path:line:col: CODE [*] message [context]`, the `[*]` marking what `--fix` can fix (ruff's concise format)."""
    return "".join(
        visible(f"{f.path}:{f.line}:{f.column}: {f.code} {'[*] ' if f.fixable else ''}{f.message}{context_note(f)}")
        + "\n"
        for f in findings
    )


def format_full(findings: Sequence[Finding]) -> str:
    """ruff's full format: the header, where it is, and the source lines with a caret under the finding."""
    lines = SourceLines()
    return "".join(_full(finding, lines) for finding in findings)


def _full(f: Finding, lines: SourceLines) -> str:
    # Two lines of context each side, less blank ones at the edges, as ruff shows them.
    numbers = [n for n in range(max(f.line - 2, 1), f.line + 3) if lines.exists(f.path, n)] or [f.line]
    while numbers[0] != f.line and not lines.get(f.path, numbers[0]).strip():
        numbers.pop(0)
    while numbers[-1] != f.line and not lines.get(f.path, numbers[-1]).strip():
        numbers.pop()
    width = len(str(numbers[-1]))
    gutter = " " * width + " |"
    out = [
        visible(f"{f.code} {'[*] ' if f.fixable else ''}{f.message}{context_note(f)}") + "\n",
        visible(f"{' ' * width}--> {f.path}:{f.line}:{f.column}") + "\n",
        gutter + "\n",
    ]
    for number in numbers:
        text = lines.get(f.path, number)
        out.append(visible(f"{number:>{width}} | {text}".rstrip()) + "\n")
        if number == f.line:  # a finding over several lines is underlined to the end of its first
            end = f.end_column if f.end_line == f.line else len(text) + 1
            out.append(f"{gutter} {' ' * (f.column - 1)}{'^' * max(end - f.column, 1)}\n")
    out.append(gutter + "\n")
    if f.fixable:
        out.append(visible(f"help: Add `{f.fix_after.lstrip(')')}`") + "\n")
    return "".join(out) + "\n"


def context_note(finding: Finding) -> str:
    """` [megatron via path:line]` (the call that rescales: the last step), ` [unreached, warning]`,
    ` [escapes at path:line, warning]` (where the function goes out of sight, which the message
    says: the last step), or nothing (FAL000); a warning says so, an error needs no word."""
    severity = ", warning" if finding.severity == WARNING else ""
    if not finding.reached_by:
        return f" [{finding.context}{severity}]" if finding.context else ""
    last = finding.reached_by[-1]
    how = "at" if finding.context == ESCAPES else "via"
    return f" [{finding.context} {how} {last.path}:{last.line}{severity}]"


def format_json(findings: Sequence[Finding]) -> str:
    rows = [dict(f.to_dict(), rule=RULES[f.code].name) for f in findings]
    return json.dumps(rows, indent=2) + "\n"


FORMATTERS: dict[str, Callable[[Sequence[Finding]], str]] = {
    "text": format_text,
    "concise": format_text,  # ruff's name for it
    "full": format_full,
    "json": format_json,
    "github": format_github,
    "sarif": format_sarif,
    "gitlab": format_gitlab,
}


def format_statistics(findings: Sequence[Finding], output_format: str = "text") -> str:
    """Counts per rule, most frequent first; `[*]` (json: `fixable`) when every one is fixable."""
    counts = collections.Counter(f.code for f in findings)
    fixable = collections.Counter(f.code for f in findings if f.fixable)
    rows = [
        {"code": code, "name": RULES[code].name, "count": count, "fixable": fixable[code] == count}
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]
    if output_format == "json":
        return json.dumps(rows, indent=2) + "\n"
    return "".join(f"{r['count']:>5}\t{r['code']}\t{'[*]' if r['fixable'] else '[ ]'} {r['name']}\n" for r in rows)


def format_fixes(fixed: Sequence[tuple[str, Sequence[str]]]) -> str:
    """`--show-fixes`: what `--fix` fixed (or `--diff` would fix), per file and rule, as ruff lists it."""
    fixed = [(path, codes) for path, codes in fixed if codes]
    if not fixed:
        return ""
    total = sum(len(codes) for _, codes in fixed)
    lines = [f"Fixed {total} error{'s' if total != 1 else ''}:\n"]
    for path, codes in fixed:
        lines.append(visible(f"- {path}:") + "\n")
        for code, count in sorted(collections.Counter(codes).items()):
            lines.append(f"    {count} \u00d7 {code} ({RULES[code].name})\n")
    return "".join(lines)


def summary(
    findings: Sequence[Finding], fixed: int, unchecked: int = 0, not_fixed: int = 0, *, fixing: bool = False
) -> str:
    """The closing lines of text output: `unchecked` files cost a checker error, `not_fixed` were left
    alone; `fixing`: the run had `--fix`, so what is left fixable is not told to use it."""
    tail = ""
    if unchecked:
        files = "file" if unchecked == 1 else "files"
        tail += f"{unchecked} {files} could not be checked (see the errors above).\n"
    if not_fixed:
        files = "file was" if not_fixed == 1 else "files were"
        tail += f"{not_fixed} {files} not fixed (see the warnings above).\n"
    if not findings and fixed == 0:
        return tail or "All checks passed!\n"
    errors = sum(f.severity == ERROR for f in findings)
    counted = _counted(errors, len(findings) - errors)
    if fixed:
        total = len(findings) + fixed
        if errors == len(findings):  # ruff's words
            return f"Found {_plural(total, 'error')} ({fixed} fixed, {errors} remaining).\n" + tail
        return f"Found {_plural(total, 'finding')} ({fixed} fixed, {counted} remaining).\n" + tail
    line = f"Found {counted}.\n"
    fixable = sum(f.fixable for f in findings)
    if fixable and not fixing:
        line += f"[*] {fixable} fixable with the `--fix` option.\n"
    return line + tail


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def _counted(errors: int, warnings: int) -> str:
    """`2 errors`, `1 warning`, `2 errors and 1 warning`; warnings (nothing is known to rescale the
    loss) do not fail the run."""
    parts = [_plural(errors, "error")] if errors else []
    if warnings:
        parts.append(_plural(warnings, "warning"))
    return " and ".join(parts)
