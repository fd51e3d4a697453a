"""The units of a file, the cheap text gates that skip most of them, the lambdas outside every def,
and the reduced text handed to libcst in pieces."""

from __future__ import annotations

import ast
import dataclasses
import re
import warnings
from collections.abc import Iterator

from ..facts.reports import AUGMENTED_OPERATORS, KEEPING_NAMES
from ..facts.storage import MAPPING_NAMES, MAPPING_UPDATE
from ..index.host_models import handed_methods
from ..index.nodes import leaves_unchanged_write
from ..index.symbols import FUNCTIONS, PARSE_ERRORS, Def, Symbols
from .calls import _is_mapping, _is_mutation
from .captures import _assigned_into, _captures_and_writes, _keeping_functions
from .flows import _Flow, _flow_may_find, _Flows
from .returns import _some_return_may_fit
from .summaries import _Helpers
from .syntax import _BLOCK_FIELDS

# Line ends that `str.splitlines` honours but Python's tokenizer does not.
_OTHER_LINE_ENDS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_CALLED = re.compile(r"(\w+)\s*\(")
_UPDATE_CALL = f".{MAPPING_UPDATE}("  # `x.update(k=v)`: a dict, whatever `x` was
# What an in-place write looks like in a unit's text (`loss *= k`, `loss.mul_(k)`, not `__init__(`):
# only then can a capture made in it be changed by a write in it (FAL005, `captures.py`). The
# operators are searched for as text: those holding none of the others (`/=` finds `//=` too).
_AUGMENTED = tuple(op for op in AUGMENTED_OPERATORS if not any(o != op and o in op for o in AUGMENTED_OPERATORS))
_NAME_END_CALLED = re.compile(r"_\s*\(")  # a literal first: searched fast (`[^\W_]_\s*\(` is 20x slower)
# What a kept value is made with (`captures._kept`, a method of the table): only a returned report's
# entries are kept without one.
# A method of an object `self` holds (`self.meter.update(v)`), which may keep its arguments.
_HELD_OBJECT_CALL = re.compile(r"\bself\s*\.\s*\w+\s*\.\s*\w+\s*\(")
# A call of a host's method writing what it is handed in place (`accelerator.backward(loss)`).
_HANDED_WRITE = re.compile(r"\.\s*(?:" + "|".join(sorted(handed_methods())) + r")\s*\(")
_KEEPING_CALL = re.compile(r"\.\s*(?:" + "|".join(sorted(KEEPING_NAMES)) + r")\s*\(")


@dataclasses.dataclass(frozen=True)
class Reduced:
    """What libcst must see of a file: the kept lines, and the line each of them is in the file."""

    text: str
    lines: tuple[int, ...]  # 1-based, one per line of `text`
    tree: ast.Module = dataclasses.field(compare=False, repr=False)  # the whole file's, for `library.Library`


# Kept lines per piece handed to libcst: its tree takes ~30 kB a line, so a generated module of
# thousands of loss functions is analysed piece by piece in bounded memory (units are independent).
PIECE_LINES = 2_000


def _reduce_source(text: str, reached: frozenset[int], path: str, captures: bool) -> list[Reduced] | None:
    """The units of `text` that may have a finding, in pieces of about `PIECE_LINES` lines, each
    with the module's imports. None: all of `text` must be analysed; []: none of it.

    `reached`: def lines of functions the project index knows a rescaling caller of; their units are
    kept whatever their returns look like (any report type is checked there). `path`: where the text
    is, to tell the project's own imports (their calls are summarised) from the others. `captures`:
    whether FAL005 is selected (else only units a report finding may be in are kept)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings (invalid escapes) are not ours to print
        try:
            # A capture then a host's write of what it is handed (`accelerator.backward(loss)`) needs no return.
            if "return" not in text and "lambda" not in text and (not captures or _HANDED_WRITE.search(text) is None):
                compile(text, "<triage>", "exec", dont_inherit=True)  # validated, without building a tree
                return []
            tree = ast.parse(text)
        except PARSE_ERRORS:
            return None
    lines = _source_lines(text)
    symbols = Symbols(tree, path)
    imports = symbols.imports
    helpers = _Helpers(symbols, path)
    mapping_names = MAPPING_NAMES | {local for local, full in imports if _is_mapping(full)}
    keeping_functions = _keeping_functions(imports)
    units = list(_units(tree.body))
    kept: list[tuple[int, int, int]] = []  # (first line, last line, column), 1-based lines
    spans: list[tuple[int, int]] = []
    for unit in units:
        first, last = _first_line(unit), unit.end_lineno or unit.lineno
        spans.append((first, last))
        span = "".join(lines[first - 1 : last])
        if any(first <= line <= last for line in reached) or _unit_may_find(
            unit, span, imports, helpers, mapping_names, keeping_functions, captures
        ):
            if not _alone(lines, unit):
                return None
            kept.append((first, last, unit.col_offset))
    if "lambda" in text and "lambda" in _outside(lines, spans):
        # A lambda outside every def is a function to the analysis too: keep the statement holding it.
        for statement, function in _lambdas_outside_units(tree.body):
            if function.lineno in reached or _flow_may_find(function, imports, helpers):
                if statement is None or not _alone(lines, statement):
                    return None  # in a compound statement's header, or sharing its lines: it cannot be cut out
                kept.append((statement.lineno, statement.end_lineno or statement.lineno, statement.col_offset))
        kept = sorted(set(kept))
    import_nodes = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    if not all(_alone(lines, node) for node in import_nodes):
        return None
    import_spans = [(node.lineno, node.end_lineno or node.lineno) for node in import_nodes]
    pieces = []
    for group in _groups(kept):
        reduced = _reduce(lines, group, import_spans, tree)
        if reduced is None:
            return None
        pieces.append(reduced)
    return pieces


def _groups(kept: list[tuple[int, int, int]]) -> Iterator[list[tuple[int, int, int]]]:
    """Consecutive kept spans, about `PIECE_LINES` lines a group (a longer unit is a group alone)."""
    group: list[tuple[int, int, int]] = []
    size = 0
    for span in sorted(kept):
        if group and size + span[1] - span[0] + 1 > PIECE_LINES:
            yield group
            group, size = [], 0
        group.append(span)
        size += span[1] - span[0] + 1
    if group:
        yield group


def _source_lines(text: str) -> list[str]:
    """The lines of `text` as Python numbers them (only \\n, \\r\\n and \\r end one), with their ends."""
    lines = text.splitlines(keepends=True)
    if "\r" not in text and len(lines) == text.count("\n") + (not text.endswith("\n")):
        return lines  # the usual case, told without a regex over the whole text
    return lines if _OTHER_LINE_ENDS.search(text) is None else _LINE.findall(text)


def _units(body: list[ast.stmt]) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in body:
        if isinstance(node, FUNCTIONS):
            yield node
        else:
            for field in _BLOCK_FIELDS:
                yield from _units(getattr(node, field, ()))


def _first_line(unit: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A decorated def starts at its first decorator."""
    return min([unit.lineno, *(decorator.lineno for decorator in unit.decorator_list)])


def _alone(lines: list[str], node: ast.stmt) -> bool:
    """Whether `node` has its lines to itself (a comment after it aside). Kept lines are joined
    with other kept lines only, so code sharing a line (`x = 1; f = lambda ...`, the close of a
    string opened on a dropped line) or a trailing backslash would change what they mean."""
    before = lines[node.lineno - 1].encode()[: node.col_offset]
    after = lines[(node.end_lineno or node.lineno) - 1].encode()[node.end_col_offset :].strip()
    return not before.strip() and (not after or after.startswith(b"#"))


def _text_may_find(span: str, mapping_names: frozenset[str]) -> bool:
    """A way to make a dict: a display or comprehension, a subscript store (the analysis turns a
    number or None into a dict), an `update` (given keywords, anything is one), a mapping
    constructor. (Else a call of a helper, whose summary may give one: the caller asks `_Helpers`,
    which costs more.)"""
    return "{" in span or "[" in span or _UPDATE_CALL in span or any(name in span for name in mapping_names)


def _outside(lines: list[str], spans: list[tuple[int, int]]) -> str:
    """The text of every line no unit covers."""
    pieces, previous = [], 0  # lines[previous:] is not yet looked at (0-based)
    for first, last in sorted(spans):
        pieces.append("".join(lines[previous : first - 1]))
        previous = max(previous, last)
    return "".join(pieces) + "".join(lines[previous:])


def _lambdas_outside_units(body: list[ast.stmt]) -> Iterator[tuple[ast.stmt | None, ast.Lambda]]:
    """Every lambda outside every def (a dataclass field's `default_factory`, `f = lambda ...`), with the
    simple statement holding it; None when it is in the header of a compound statement (`if`, `class`)."""
    for node in body:
        if isinstance(node, FUNCTIONS):
            continue
        blocks = [field for field in _BLOCK_FIELDS if hasattr(node, field)]
        if not blocks:
            for function in _lambdas_in(node):
                yield node, function
            continue
        for field, value in ast.iter_fields(node):
            if field not in blocks:
                for function in _lambdas_in(value):
                    yield None, function
        for field in blocks:
            yield from _lambdas_outside_units(getattr(node, field))


def _lambdas_in(value: object) -> Iterator[ast.Lambda]:
    stack = list(value) if isinstance(value, list) else [value]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Lambda):
            yield node  # the flow over it sees the lambdas inside it
        elif isinstance(node, ast.AST):
            stack.extend(ast.iter_child_nodes(node))


def _unit_may_find(
    unit: Def,
    span: str,
    imports: frozenset[tuple[str, str]],
    helpers: _Helpers,
    mapping_names: frozenset[str],
    keeping_functions: frozenset[str],
    captures: bool,
) -> bool:
    """Whether the analysis may find something in `unit` (its text `span`): a returned report sharing
    storage with the loss (FAL001-FAL004), or a capture an in-place write changes (FAL005)."""
    reports = ("lambda" in span or ("return" in span and _some_return_may_fit(unit.body))) and (
        _text_may_find(span, mapping_names) or any(_called_may_give(helpers.rough, span))
    )
    keeping = captures and (_KEEPING_CALL.search(span) is not None or any(name in span for name in keeping_functions))
    method_writes = captures and (reports or keeping) and _calls_inplace_method(span)
    if not captures or not (method_writes or ((reports or keeping) and any(op in span for op in _AUGMENTED))):
        return reports and _flow_may_find(unit, imports, helpers)
    try:
        flows = _Flows(unit, imports, helpers)
        if reports and flows.may(_Flow.may_find):
            return True
        # A capture an in-place write may change: kept values are made by a detach or a conversion,
        # written report entries are in a returned dict. For the entries, first whether any write
        # (`x op= v`, `x.mul_(v)`: the flow's own walk has them) may reach any returned report, in any
        # order; the places of captures and writes are needed only then, or for a kept value.
        if reports:
            walk = flows.walk
            written = [
                node.target
                for node in walk.bindings
                if type(node) is ast.AugAssign and not leaves_unchanged_write(node)
            ] + walk.written
            reports = flows.may(lambda flow: flow.report_may_be_written(written, walk.returns))
        # A kept value is given to a container's method or to a helper that may keep it, or stored
        # into an entry or an attribute.
        keeping = keeping and (
            any(_is_mutation(node) or _assigned_into(node) for node in flows.walk.bindings)
            or any(call.args or call.keywords for call in flows.walk.calls)
            or _HELD_OBJECT_CALL.search(span) is not None
        )
        if not reports and not keeping:
            return False
        found = _captures_and_writes(unit, imports, keeping_functions, reports, helpers)
        if not found.written or not (found.kept or found.reports):
            return False
        return flows.may(lambda flow: flow.captured_may_be_written(found))
    except RecursionError:
        return True


def _calls_inplace_method(span: str) -> bool:
    """Whether `span` may call a method named as in-place ones are (`x.mul_(k)`; not `__init__(`), or hand a
    value to a host's method that writes it in place (`accelerator.backward(loss)`, `host_models.handed_write`)."""
    if _HANDED_WRITE.search(span) is not None:
        return True
    for match in _NAME_END_CALLED.finditer(span):
        start = match.start()
        if start and span[start - 1].isalnum():
            return True
    return False


def _called_may_give(helpers: _Helpers, span: str) -> Iterator[int]:
    """For each name called in `span`, what the functions and methods of that name may return."""
    for name in _CALLED.findall(span):
        yield helpers.flags(name, False, 0) | helpers.flags(name, True, 0)


# ---- the reduced text -------------------------------------------------------------------


def _reduce(
    lines: list[str], kept: list[tuple[int, int, int]], import_spans: list[tuple[int, int]], tree: ast.Module
) -> Reduced | None:
    owner = [0] * (len(lines) + 2)  # which kept span a line belongs to (1-based), -1: an import, 0: none
    for number, (first, last, _) in enumerate(sorted(kept), start=1):
        owner[first : last + 1] = [number] * (last - first + 1)
    for first, last in import_spans:
        if any(owner[first : last + 1]):
            return None
        owner[first : last + 1] = [-1] * (last - first + 1)
    headers: dict[int, str] = {}  # a free line above a nested unit: it opens the unit's block
    previous_column = None
    for number, (first, _, column) in enumerate(sorted(kept), start=1):
        follows_sibling = first > 1 and owner[first - 1] == number - 1 and previous_column == column
        if column and not follows_sibling:
            if first == 1 or owner[first - 1]:
                return None  # no free line above to open a block on
            headers[first - 1] = "if 1:" + _newline(lines[first - 2])
        previous_column = column
    out, numbers = [], []
    for number, line in enumerate(lines, start=1):
        if owner[number]:
            out.append(line)
        elif number in headers:
            out.append(headers[number])
        else:
            continue
        numbers.append(number)
    reduced = "".join(out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(reduced, "<triage>", "exec", dont_inherit=True)
        except PARSE_ERRORS:
            return None
    return Reduced(reduced, tuple(numbers), tree)


def _newline(line: str) -> str:
    stripped = line.rstrip("\r\n")
    return line[len(stripped) :]
