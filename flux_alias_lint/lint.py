"""Check and fix one source text: parse → analyse → positions, noqa, selection → findings or fixed text."""

from __future__ import annotations

import ast
import collections
import dataclasses
import functools
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

import libcst as cst

from .analysis import OverBudget, RawFinding, analyze_module
from .analysis.values import dotted_name
from .facts.hosts import BY_NAME
from .finding import Finding
from .fixer import Edit, apply_edits, line_offsets, make_edit, select_edits, unexplained_change
from .index.escapes import Escapes
from .index.files import Read, project_roots
from .index.host_models import Write, handed_write
from .index.project import ProjectIndex
from .index.reach import UNREACHED, UNREACHED_REACH, Reach, Step, styled
from .index.releases import released
from .index.roles import not_loss_functions
from .library import Library
from .noqa import is_suppressed, parse_suppressions
from .positions import Span, node_spans
from .rules import ANALYSIS_RULES, CAPTURE_CODE, RULES
from .selection import DEFAULT_SELECTION, Selection
from .source import (
    MAX_DEPTH,
    SourceError,
    SourceFile,
    TooComplex,
    call_at_depth,
    check_compiles,
    decode,
    nesting_depth,
    parse,
)
from .triage import reduce_source
from .triage.reduce import Reduced


@dataclasses.dataclass(frozen=True)
class Located:
    finding: Finding
    edit: Edit | None
    raw: RawFinding
    entry: str = ""  # the entry of a returned dict its rescaler takes as the loss (`Reach.entry`), if one


Reaches = Mapping[int, Reach]  # the functions of one file the project index knows a caller of, by def line


def locate(
    source: SourceFile,
    selection: Selection,
    noqa: bool = True,
    module: cst.Module | None = None,
    reaches: Reaches | None = None,
) -> list[Located]:
    """Findings with their edits and the nodes they came from; pass `module` (parsed from `source`)
    to relate findings to its nodes."""
    found, _ = _collect(source, selection, noqa, module, reaches, lambda item: item)
    return sorted(found, key=lambda item: item.finding)


def _findings(
    source: SourceFile, selection: Selection, noqa: bool = True, reaches: Reaches | None = None
) -> tuple[list[tuple[Finding, Edit | None]], Read]:
    """`locate` without the nodes, so that each piece's libcst tree is freed before the next is parsed;
    and what the findings depend on beyond the file (`Library.files`, `Library.lookups`)."""
    found, dependencies = _collect(source, selection, noqa, None, reaches, lambda item: (item.finding, item.edit))
    return sorted(found, key=lambda p: p[0]), dependencies


T = TypeVar("T")


def _collect(
    source: SourceFile,
    selection: Selection,
    noqa: bool,
    module: cst.Module | None,
    reaches: Reaches | None,
    keep: Callable[[Located], T],
) -> tuple[list[T], Read]:
    alone = reaches is None  # no project around it: the evidence in its own text
    if alone:
        reaches = ProjectIndex.of_source(source.text, source.path).reached_by_path().get(source.path, {})
    context = _Context(reaches, Library(source.path, source.text), source, alone)
    found: list[T] = []
    try:
        for parse_from, given, piece in _pieces(source, module, reaches, selection.enabled(CAPTURE_CODE)):
            found += map(keep, _analyze_piece(source, selection, noqa, parse_from, given, piece, context))
    except _PieceRejected as rejected:
        found = list(map(keep, _analyze_piece(source, selection, noqa, source, rejected.module, None, context)))
    finally:
        context.library.close()
    files = tuple(sorted({*context.library.files(), *context.escape_files(), *context.release_files}))
    return found, Read(files, tuple(context.library.lookups()), context.searched())


@dataclasses.dataclass
class _Context:
    """What the analysis of one file knows beyond the file's units: who calls its functions, and where
    the functions they call are defined."""

    reaches: Reaches
    library: Library
    source: SourceFile
    alone: bool  # no project around the file: its own text is all there is
    release_files: set[str] = dataclasses.field(default_factory=set)  # read for the hosts' releases
    tree: ast.Module | None = None  # the file's `ast` tree, once the triage has it

    def released(self, reach: Reach, returned: int) -> Reach | None:
        """`reach` as the project's declared releases and settings have it (`index/releases.py`)."""
        reach_now, files = released(self.source.path, reach, returned)
        self.release_files.update(files)
        return reach_now

    @functools.cached_property
    def not_loss_functions(self) -> frozenset[int]:
        """The def lines of the file's functions that are shaped like loss functions but are not
        (`index/roles.py`): asked only when an unreached finding is about to be reported."""
        return not_loss_functions(self.source.text, self.source.path, self.tree)

    @functools.cached_property
    def _escapes(self) -> Escapes:
        """Where the file's functions go in the project (`index/escapes.py`): made only when an
        unreached finding is about to be reported."""
        path = self.source.path if self.alone else os.path.realpath(self.source.path)
        return Escapes([] if self.alone else project_roots([path]), path, self.source.text, self.tree)

    def escape(self, line: int) -> Reach:
        """The reach of the unreached function at `line`: `escapes` with its steps, or `unreached`."""
        return self._escapes.of(line)

    def escape_files(self) -> list[str]:
        """The other files the escape analysis read (none if it was never asked)."""
        return self._escapes.files() if "_escapes" in self.__dict__ else []

    def searched(self) -> tuple[str, ...]:
        """The projects whose texts the escape analysis searched (none if it was never asked)."""
        return tuple(self._escapes.roots) if "_escapes" in self.__dict__ else ()


class _PieceRejected(Exception):
    """libcst rejects a piece of the triaged text but not the whole file: analyse the whole file."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        self.module = module  # the whole file, already parsed


def _pieces(
    source: SourceFile, module: cst.Module | None, reaches: Reaches, captures: bool
) -> Iterator[tuple[SourceFile, cst.Module | None, Reduced | None]]:
    """What to parse (or the given module), and the triaged piece it is (None: all of `source`);
    `captures`: whether FAL005 is selected."""
    pieces = reduce_source(source.text, frozenset(reaches), source.path, captures) if module is None else None
    if pieces != []:  # something to analyse, and so maybe to fix: it must compile
        check_compiles(source, pieces[0].tree if pieces else None)
    if pieces is None:
        yield source, module, None
        return
    for reduced in pieces:  # none at all: no unit can have a finding, libcst need not see the file
        yield dataclasses.replace(source, text=reduced.text), None, reduced


def _analyze_piece(
    source: SourceFile,
    selection: Selection,
    noqa: bool,
    parse_from: SourceFile,
    module: cst.Module | None,
    piece: Reduced | None,
    context: _Context,
) -> list[Located]:
    rejected = None
    try:
        depth = nesting_depth(parse_from)
    except SourceError as error:
        if not _newer_syntax_allowed(error, parse_from, selection):
            raise
        rejected, depth = error, MAX_DEPTH  # no CPython tree to measure: libcst gets the deepest stack
    try:
        return call_at_depth(depth, _analyze_parsed, source, selection, noqa, module, parse_from, piece, context)
    except RecursionError:
        raise SourceError(source.path, "too deeply nested to analyse") from None
    except TooComplex:
        raise
    except SourceError:
        if rejected is not None:
            raise rejected from None  # not newer syntax after all: CPython's message is the better one
        raise


# Without CPython's tree nothing bounds libcst's nesting but the text: on the deep stack it survives
# 200,000 levels, and a file cannot nest deeper than it has characters.
_UNMEASURED_LIMIT = 200_000


def _newer_syntax_allowed(error: SourceError, parse_from: SourceFile, selection: Selection) -> bool:
    """CPython rejected the text, but the project targets a newer Python whose syntax libcst reads."""
    target = selection.target_version
    return (
        target is not None
        and target > sys.version_info[:2]
        and error.reason.startswith("syntax error")
        and len(parse_from.text) <= _UNMEASURED_LIMIT
    )


def _analyze_parsed(
    source: SourceFile,
    selection: Selection,
    noqa: bool,
    module: cst.Module | None,
    parse_from: SourceFile,
    piece: Reduced | None,
    context: _Context,
) -> list[Located]:
    """`parse_from`: `source`, or (when `module` is None) the triaged `piece` of it."""
    if module is None:
        try:
            module = parse(parse_from)
        except SourceError:
            if parse_from is source:
                raise
            # libcst rejects a kept unit: the error to report, if any, is the whole file's.
            raise _PieceRejected(parse(source)) from None
    if piece is not None:
        context.library.offer_tree(piece.tree)
        context.tree = piece.tree
    lines = piece.lines if piece else None
    known: dict[cst.CSTNode, Span] = {}

    def line_in_file(node: cst.CSTNode) -> int:
        if not known:  # what findings need anyway; here only for an ambiguous `self.m()`
            known.update(node_spans(module, parse_from.text))
        line = known[node][0][0]
        return lines[line - 1] if lines else line

    try:
        raws = analyze_module(module, context.library, line_in_file, parse_from.text.count("\n") + 1)
    except OverBudget as stop:
        raise TooComplex(source.path, str(stop)) from None
    if not raws:
        return []
    spans = known or node_spans(module, parse_from.text)
    suppressions = parse_suppressions(source.text) if noqa else {}
    offsets = line_offsets(source.text)
    located = []
    for raw in raws:
        if not selection.enabled(raw.code):
            continue
        (start_line, start_column), (end_line, end_column) = spans[raw.entry]
        def_line = spans[raw.function.name if isinstance(raw.function, cst.FunctionDef) else raw.function][0][0]
        if lines:  # a triaged piece: its lines are elsewhere in the file
            start_line, end_line, def_line = lines[start_line - 1], lines[end_line - 1], lines[def_line - 1]
        handed = _handed_write(raw.write)
        if handed is not None:  # `accelerator.backward(loss)` after the capture: the host's release and setting decide
            write_line = spans[raw.write][0][0]
            step = Step(source.path, lines[write_line - 1] if lines else write_line, handed.said)
            reach = context.released(Reach(handed.context, (step,)), raw.returned)
            if reach is None:
                continue
        else:
            reach = _reach_of(context, context.reaches.get(def_line, UNREACHED_REACH), raw)
        if reach is None and raw.write is None:
            continue  # the releases the project runs leave the value as it is
        if reach is None:  # ... but the function's own write changes it, whoever calls it (`in-function`)
            reach = UNREACHED_REACH
        if not reach.steps and def_line in context.not_loss_functions:  # not a loss function: nothing to say
            continue
        rule = ANALYSIS_RULES[raw.code]
        reach, severity = rule.verdict(raw, reach, selection.unreached)
        if (raw.proof_needed and not reach.steps) or severity is None:  # None: hidden, and so never fixed
            continue
        if is_suppressed(suppressions, raw.code, (start_line, end_line)):
            continue
        if reach.context == UNREACHED:  # its severity stays: `escapes` is a warning as `unreached` is
            reach = context.escape(def_line)
        write = None
        if raw.write is not None:
            write_line = spans[raw.write][0][0]
            write = (module.code_for_node(raw.write), lines[write_line - 1] if lines else write_line)
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
            message=rule.message(raw, module.code_for_node(raw.entry), reach, write),
            fixable=raw.fixable,
            report_path=raw.report_path,
            backprop=raw.backprop,
            fix_before=edit.before if edit else "",
            fix_after=edit.after if edit else "",
            context=reach.context,
            reached_by=styled(reach.steps, source.path),
            severity=severity,
        )
        located.append(Located(finding, edit, raw, reach.entry or ""))
    return located


def _handed_write(write: cst.CSTNode | None) -> Write | None:
    """The in-place write of the host a call `write` hands the written value to (`accelerator.backward(loss)`)."""
    if not (isinstance(write, cst.Call) and isinstance(write.func, cst.Attribute)):
        return None
    return handed_write(write.func.attr.value, dotted_name(write.func.value) or "")


def _reach_of(context: _Context, found: Reach, raw: RawFinding) -> Reach | None:
    """Who rescales the value `raw` is about: the first of the function's reaches (`Reach.also`) that
    rescales that value (the bare return or a tuple's first element) in a release the project runs;
    `UNREACHED_REACH` where none is about that value, None where the releases leave it alone."""
    candidates = [r for r in (found, *found.also) if _rescales(r, raw)]
    if not candidates or not candidates[0].steps:
        return UNREACHED_REACH
    for reach in candidates:
        now = context.released(reach, raw.returned)
        if now is not None:
            return now
    return None


def _rescales(reach: Reach, raw: RawFinding) -> bool:
    """Whether `reach` rescales the value `raw` is about: a host taking one entry of a returned dict as its loss
    (`Host.entry`, or `Reach.entry` for this function alone) that entry's captures alone; any other, a bare return or a tuple's first element as it
    receives it."""
    host = BY_NAME.get(reach.context)
    entry = reach.entry or (host.entry if host is not None else None)
    if entry or raw.entries:
        return entry in raw.entries and reach.whole_return and raw.code == CAPTURE_CODE
    return reach.whole_return == raw.whole_return or _first_of_pair(reach, raw)


def _first_of_pair(reach: Reach, raw: RawFinding) -> bool:
    """A capture of the first element of a returned pair, for a host that receives the loss bare or as
    that element (`Host.or_first_of_pair`: `return (loss, outputs) if return_outputs else loss`)."""
    host = BY_NAME.get(reach.context)
    return host is not None and host.or_first_of_pair and reach.whole_return and raw.code == CAPTURE_CODE


def _as_source(source: str | bytes, path: str) -> SourceFile:
    if isinstance(source, bytes):
        return decode(source, path)
    return SourceFile(path, source, "utf-8")


def check_source(
    source: str | bytes,
    path: str = "<string>",
    selection: Selection = DEFAULT_SELECTION,
    *,
    noqa: bool = True,
    reaches: Reaches | None = None,
) -> list[Finding]:
    """Findings for one module's source, sorted by position. Raises `SourceError` if it cannot be parsed.

    `noqa=False` reports suppressed findings too, for a host (flake8) that applies `# noqa` itself.
    `reaches`: what the project index knows of who calls this module's functions (by def line, from
    `ProjectIndex.reached_by_path()`); by default, what the source's own text shows.
    """
    return check_text(_as_source(source, path), selection, noqa, reaches)[0]


def check_text(
    source: SourceFile, selection: Selection = DEFAULT_SELECTION, noqa: bool = True, reaches: Reaches | None = None
) -> tuple[list[Finding], Read]:
    """`check_source`, and what the findings depend on beyond the file (for the cache)."""
    found, dependencies = _findings(source, selection, noqa, reaches)
    return [finding for finding, _ in found], dependencies


@dataclasses.dataclass(frozen=True)
class FixResult:
    text: str  # the fixed text (the original when nothing was fixed)
    fixed_codes: tuple[str, ...]  # one code per finding the fix removed, sorted
    remaining: list[Finding]  # findings still there afterwards
    dependencies: Read = Read()  # what the findings depend on beyond the file
    refused: tuple[str, ...] = ()  # one line per edit left out because it would not clear its finding

    @property
    def fixed(self) -> int:
        return len(self.fixed_codes)


# An edit nested in another waits for the pass after it; real code nests a few deep at most.
_MAX_FIX_PASSES = 8


def fix_text(source: SourceFile, selection: Selection = DEFAULT_SELECTION, reaches: Reaches | None = None) -> FixResult:
    """Fix every fixable finding, pass after pass until none is left (so a second `--fix` changes
    nothing). Refuses (SourceError) a result that changes anything but the inserted copies or that
    does not parse back; an edit that would not clear its own finding is left out (`FixResult.refused`)
    and the others are applied."""
    before, dependencies = _findings(source, selection, reaches=reaches)
    text, current = source.text, before
    refused: set[tuple[int, str, str]] = set()  # findings whose copy would not clear them
    for _ in range(_MAX_FIX_PASSES):
        edits = select_edits(edit for f, edit in current if edit is not None and _identity(f) not in refused)
        if not edits:
            break
        fixed_text = apply_edits(text, edits)
        problem = unexplained_change(text, fixed_text, edits)
        if problem is not None:
            raise SourceError(source.path, f"fix refused, {problem}")
        try:
            # The inserted copies change no line, so the def lines `reaches` names still hold.
            after, _ = _findings(dataclasses.replace(source, text=fixed_text), selection, reaches=reaches)
        except TooComplex:
            raise
        except SourceError as exc:
            raise SourceError(source.path, f"fix refused, the result would not parse ({exc.reason})") from None
        uncleared = _uncleared(current, after, edits)
        if uncleared:  # the same pass again, without them
            refused |= uncleared
            continue
        text, current = fixed_text, after
    remaining = [
        dataclasses.replace(f, fixable=False, fix_before="", fix_after="") if _identity(f) in refused else f
        for f, _ in current
    ]
    # Positions move with the edits, so what was fixed is counted per rule, not matched finding by finding.
    fixed = collections.Counter(finding.code for finding, _ in before) - collections.Counter(f.code for f in remaining)
    refusals = tuple(
        f"fix refused, the copy at line {line} would not clear its {code} finding" for line, code, _ in sorted(refused)
    )
    return FixResult(text, tuple(sorted(fixed.elements())), remaining, dependencies, refusals)


def _uncleared(
    before: list[tuple[Finding, Edit | None]], after: list[tuple[Finding, Edit | None]], edits: list[Edit]
) -> set[tuple[int, str, str]]:
    """The findings an edit targeted that are still there afterwards (same line, rule and report entry:
    the copies change no line): every later `--fix` would apply it again (a copy of the loss itself,
    say, which the report holds too)."""
    applied = {(e.start, e.end) for e in edits}
    targeted = {_identity(f) for f, edit in before if edit is not None and (edit.start, edit.end) in applied}
    return {_identity(f) for f, _ in after} & targeted


def _identity(finding: Finding) -> tuple[int, str, str]:
    return finding.line, finding.code, finding.report_path


def fix_source(source: str, selection: Selection = DEFAULT_SELECTION, reaches: Reaches | None = None) -> str:
    """The source with every fixable finding turned into a copy; unchanged if there is none."""
    return fix_text(SourceFile("<string>", source, "utf-8"), selection, reaches).text


__all__ = ["RULES", "Finding", "FixResult", "Selection", "SourceError", "check_source", "fix_source", "fix_text"]
