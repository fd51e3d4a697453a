"""Check and fix one source text: parse → analyse → positions, noqa, selection → findings or fixed text."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterator
from typing import TypeVar

import libcst as cst

from .analysis import RawFinding, analyze_module
from .finding import Finding
from .fixer import Edit, apply_edits, line_offsets, make_edit, select_edits, unexplained_change
from .noqa import is_suppressed, parse_suppressions
from .positions import node_spans
from .rules import RULES
from .selection import DEFAULT_SELECTION, Selection
from .source import SourceError, SourceFile, call_at_depth, decode, nesting_depth, parse
from .triage import reduce_source

_RELATION = {
    "FAL001": "is a detached alias of",
    "FAL002": "is",
    "FAL003": "is a view sharing storage with",
    "FAL004": "may return the same storage as",
}


def _message(raw: RawFinding, expression: str) -> str:
    if len(expression) > 60 or "\n" in expression:
        expression = expression.replace("\n", " ")[:57] + "..."
    return (
        f"{raw.report_path} = `{expression}` {_RELATION[raw.code]} the backprop tensor `{raw.backprop}`, "
        f"which Megatron rescales in place before reading the report; copy it with .clone()"
    )


@dataclasses.dataclass(frozen=True)
class Located:
    finding: Finding
    edit: Edit | None
    raw: RawFinding


def locate(
    source: SourceFile, selection: Selection, noqa: bool = True, module: cst.Module | None = None
) -> list[Located]:
    """Findings with their edits and the nodes they came from; pass `module` (parsed from `source`)
    to relate findings to its nodes."""
    return sorted(_collect(source, selection, noqa, module, lambda item: item), key=lambda item: item.finding)


def _findings(source: SourceFile, selection: Selection, noqa: bool = True) -> list[tuple[Finding, Edit | None]]:
    """`locate` without the nodes, so that each piece's libcst tree is freed before the next is parsed."""
    return sorted(_collect(source, selection, noqa, None, lambda item: (item.finding, item.edit)), key=lambda p: p[0])


T = TypeVar("T")


def _collect(
    source: SourceFile, selection: Selection, noqa: bool, module: cst.Module | None, keep: Callable[[Located], T]
) -> list[T]:
    found: list[T] = []
    try:
        for parse_from, given, lines in _pieces(source, module):
            found += map(keep, _analyze_piece(source, selection, noqa, parse_from, given, lines))
    except _PieceRejected as rejected:
        found = list(map(keep, _analyze_piece(source, selection, noqa, source, rejected.module, None)))
    return found


class _PieceRejected(Exception):
    """libcst rejects a piece of the triaged text but not the whole file: analyse the whole file."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        self.module = module  # the whole file, already parsed


def _pieces(
    source: SourceFile, module: cst.Module | None
) -> Iterator[tuple[SourceFile, cst.Module | None, tuple[int, ...] | None]]:
    """What to parse (or the given module), and where each of its lines is in `source` (None: the same)."""
    pieces = reduce_source(source.text) if module is None else None
    if pieces is None:
        yield source, module, None
        return
    for reduced in pieces:  # none at all: no unit can have a finding, libcst need not see the file
        yield dataclasses.replace(source, text=reduced.text), None, reduced.lines


def _analyze_piece(
    source: SourceFile,
    selection: Selection,
    noqa: bool,
    parse_from: SourceFile,
    module: cst.Module | None,
    lines: tuple[int, ...] | None,
) -> list[Located]:
    depth = nesting_depth(parse_from)
    try:
        return call_at_depth(depth, _analyze_parsed, source, selection, noqa, module, parse_from, lines)
    except RecursionError:
        raise SourceError(source.path, "too deeply nested to analyse") from None


def _analyze_parsed(
    source: SourceFile,
    selection: Selection,
    noqa: bool,
    module: cst.Module | None,
    parse_from: SourceFile,
    lines: tuple[int, ...] | None,
) -> list[Located]:
    """`parse_from`: `source`, or (when `module` is None) its triaged lines, `lines` being where each is in `source`."""
    if module is None:
        try:
            module = parse(parse_from)
        except SourceError:
            if parse_from is source:
                raise
            # libcst rejects a kept unit: the error to report, if any, is the whole file's.
            raise _PieceRejected(parse(source)) from None
    raws = analyze_module(module)
    if not raws:
        return []
    spans = node_spans(module)
    suppressions = parse_suppressions(source.text) if noqa else {}
    offsets = line_offsets(source.text)
    located = []
    for raw in raws:
        if not selection.enabled(raw.code):
            continue
        (start_line, start_column), (end_line, end_column) = spans[raw.entry]
        if lines:  # a triaged piece: its lines are elsewhere in the file
            start_line, end_line = lines[start_line - 1], lines[end_line - 1]
        if is_suppressed(suppressions, raw.code, (start_line, end_line)):
            continue
        edit = None
        if raw.fixable:
            edit = make_edit(
                offsets, (start_line, start_column), (end_line, end_column), type(raw.entry).__name__, raw.detached
            )
        finding = Finding(
            path=source.path,
            line=start_line,
            column=start_column + 1,
            end_line=end_line,
            end_column=end_column + 1,
            code=raw.code,
            message=_message(raw, module.code_for_node(raw.entry)),
            fixable=raw.fixable,
            report_path=raw.report_path,
            backprop=raw.backprop,
            fix_before=edit.before if edit else "",
            fix_after=edit.after if edit else "",
        )
        located.append(Located(finding, edit, raw))
    return located


def _as_source(source: str | bytes, path: str) -> SourceFile:
    if isinstance(source, bytes):
        return decode(source, path)
    return SourceFile(path, source, "utf-8")


def check_source(
    source: str | bytes, path: str = "<string>", selection: Selection = DEFAULT_SELECTION, *, noqa: bool = True
) -> list[Finding]:
    """Findings for one module's source, sorted by position. Raises `SourceError` if it cannot be parsed.

    `noqa=False` reports suppressed findings too, for a host (flake8) that applies `# noqa` itself.
    """
    return [finding for finding, _ in _findings(_as_source(source, path), selection, noqa)]


@dataclasses.dataclass(frozen=True)
class FixResult:
    text: str  # the fixed text (the original when nothing was fixed)
    fixed_codes: tuple[str, ...]  # one code per finding the fix removed, sorted
    remaining: list[Finding]  # findings still there afterwards

    @property
    def fixed(self) -> int:
        return len(self.fixed_codes)


def fix_text(source: SourceFile, selection: Selection = DEFAULT_SELECTION) -> FixResult:
    """Fix every fixable finding; refuses (SourceError) a result that changes anything but the
    inserted copies, or that does not parse back."""
    before = _findings(source, selection)
    edits = select_edits(edit for _, edit in before if edit is not None)
    if not edits:
        return FixResult(source.text, (), [finding for finding, _ in before])
    text = apply_edits(source.text, edits)
    problem = unexplained_change(source.text, text, edits)
    if problem is not None:
        raise SourceError(source.path, f"fix refused, {problem}")
    try:
        remaining = [finding for finding, _ in _findings(dataclasses.replace(source, text=text), selection)]
    except SourceError as exc:
        raise SourceError(source.path, f"fix refused, the result would not parse ({exc.reason})") from None
    # Positions move with the edits, so what was fixed is counted per rule, not matched finding by finding.
    fixed = collections.Counter(finding.code for finding, _ in before) - collections.Counter(f.code for f in remaining)
    return FixResult(text, tuple(sorted(fixed.elements())), remaining)


def fix_source(source: str, selection: Selection = DEFAULT_SELECTION) -> str:
    """The source with every fixable finding turned into a copy; unchanged if there is none."""
    return fix_text(SourceFile("<string>", source, "utf-8"), selection).text


__all__ = ["RULES", "Finding", "FixResult", "Selection", "SourceError", "check_source", "fix_source", "fix_text"]
