"""Skip, before libcst ever sees it, the code that provably cannot produce a finding.

libcst parses ~5k lines a second, CPython's `ast` ~300k: on a training repository, where a few
hundred lines out of half a million are loss functions, parsing everything with libcst is nearly
all of a cold run. The analysis stays the source of truth; this module only decides which *units*
it needs to see. A unit is a function defined at module or class level (in any block there): the
analysis runs each of those with an empty environment (closures get theirs from the enclosing
function, which is why nested functions are never units of their own), and the only module-level
context it reads is the module's own imports.

Three filters, each an over-approximation of the analysis in `analysis.py`:

1. `ast.parse` the file (CPython rejects it: return None, the caller analyses everything and
   reports the error exactly as before).
2. Per unit, its text must hold `return` or `lambda` and a way to make a dict: `{`, `[` (a
   subscript store, which the analysis turns into a dict when the owner held a number or None),
   or the name of a mapping constructor (`dict`, `OrderedDict`, `defaultdict`, an alias of one);
   and some `return` must have a shape that can fit (`_some_return_may_fit`).
3. Per surviving unit, a flow-insensitive pass over its `ast` mirroring the analysis (`_Flow`):
   can some `return` (or lambda body) be a 2- or 3-element sequence whose last element is a dict
   (containers), and can that report share storage with the first element at all (storage: the
   alias tokens the analysis could give each value, joined per name, passed on by the operations
   of the alias table in `aliasing.py`)? Calls of the project's functions follow the analysis'
   own summary rules (`SUMMARY_DEPTH`, `SUMMARY_LINES`): what each def returns and which of its
   arguments it passes on or writes into, another module's read one def at a time, and only once
   the unit survives taking every imported helper to do anything.

For FAL005 (captures), a unit whose text holds an in-place write (`op=`, a method named like
`mul_`) and a capture (a detach or conversion, a returned report) is kept when some capture may
hold storage a later write changes: `_captures_and_writes` finds both with their places
(`_may_follow`: later, in a loop around both, never the other branch of an `if`), and
`_Flow.captured_may_be_written` asks the flow's storage, where a kept value holds a detach's or a
conversion's receiver only through that call's own result.

The units that survive and the module's imports are handed to libcst alone, each line with the
number it has in the file, so columns are unchanged and lines map back. A unit nested in a class
or block gets an `if 1:` line above it (the analysis treats both the same: an empty environment).
A lambda outside every def is a function to the analysis too: the simple statement holding it is
kept like a unit (in a compound statement's header, it cannot be cut out: the file goes whole).

Only CPython's verdict on a whole file is kept: what libcst alone would refuse (its parser's
limits, nesting over 10,000 levels) is reported only where libcst has to read it.

When `analysis.py` learns a new way to make, move or alias a value, `_Flow` must learn it too:
`tests/test_performance_equivalence.py` compares triage against the full analysis on the fixtures
and a generated corpus, and pins the analysis' expression handlers.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import operator
import os
import re
import warnings
from collections.abc import Callable, Iterator
from typing import NamedTuple

from .aliasing import (
    CONTAINER_MUTATORS,
    COPY_KEYWORD,
    KEEPING_KINDS,
    KEEPING_NAMES,
    MAPPING_CONSTRUCTORS,
    NUMBER_BUILTINS,
    NUMBER_METHODS,
    AliasKind,
    attribute_alias_kind,
    method_alias_kind,
    torch_function_alias_kind,
    writes_in_place,
)
from .evidence import Declared, declared
from .index.files import find_module

# Triage on/off: tests switch it off to compare against the full analysis.
ENABLED = True

_MAPPING_NAMES = frozenset(name.rpartition(".")[2] for name in MAPPING_CONSTRUCTORS)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Where statements nest: a unit may be defined in a class, an `if`, a `try`, a `with`, a loop, a `match`.
_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
# Line ends that `str.splitlines` honours but Python's tokenizer does not.
_OTHER_LINE_ENDS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_CALLED = re.compile(r"(\w+)\s*\(")
_PARSE_ERRORS = (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError)
# What an in-place write looks like in a unit's text (`loss *= k`, `loss.mul_(k)`, not `__init__(`):
# only then can a capture made in it be changed by a write in it (FAL005, `captures.py`).
_AUGMENTED = ("+=", "-=", "*=", "/=", "%=", "@=", "&=", "|=", "^=", "<<=", ">>=")  # `//=`, `**=` too
_NAME_END_CALLED = re.compile(r"_\s*\(")  # a literal first: searched fast (`[^\W_]_\s*\(` is 20x slower)
# What a kept value is made with (`captures._kept`, a method of the table): only a returned report's
# entries are kept without one.
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


def reduce_source(
    text: str, reached: frozenset[int] = frozenset(), path: str = "", captures: bool = True
) -> list[Reduced] | None:
    """See `_reduce_source`. The runner asks first (to skip libcst when nothing is kept), then the
    analysis asks again: the answer is kept for that one second question."""
    if not ENABLED:
        return None
    key = (text, reached, path, captures)
    if _LAST[0] == key:  # `text` is the same object both times: compared by identity first, cheaply
        answer = _LAST[1]
        _LAST[:] = [None, None]  # the trees in it are not kept alive past the file
        return answer
    answer = _reduce_source(text, reached, path, captures)
    _LAST[:] = [key, answer]
    return answer


_LAST: list = [None, None]


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
            if "return" not in text and "lambda" not in text:
                compile(text, "<triage>", "exec", dont_inherit=True)  # validated, without building a tree
                return []
            tree = ast.parse(text)
        except _PARSE_ERRORS:
            return None
    lines = _source_lines(text)
    imports = module_imports(tree)
    helpers = _Helpers(_Defs(tree, imports), path)
    mapping_names = _MAPPING_NAMES | {local for local, full in imports if _is_mapping(full)}
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
        if isinstance(node, _FUNCTIONS):
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
    return "{" in span or "[" in span or ".update(" in span or any(name in span for name in mapping_names)


# What `_Flow._eval` may give a dict for (`D`), and a sequence (`S`), by the kind of the expression:
# the others are numbers, strings, sets, fresh tensors or dicts (`Dict`, `DictComp`: never `S`).
_MAY_BE_DICT = (
    ast.Name, ast.Attribute, ast.Starred, ast.Dict, ast.DictComp, ast.Subscript, ast.IfExp, ast.BoolOp, ast.NamedExpr,
    ast.Call,
)  # fmt: skip
_MAY_BE_SEQUENCE = (
    ast.Name, ast.Attribute, ast.Starred, ast.ListComp, ast.GeneratorExp, ast.Subscript, ast.IfExp, ast.BoolOp,
    ast.NamedExpr, ast.Call,
)  # fmt: skip


def _some_return_may_fit(body: list[ast.stmt]) -> bool:
    """`_Flow._returnable` by the shape of each `return` alone (nested functions' too; lambdas are
    the caller's to rule out): most units return a name or a call, which it cannot rule out, but a
    quarter return only arithmetic, comparisons, strings or None, and then the flow need not run."""
    stack = list(body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Return:
            value = node.value
            if type(value) is ast.Tuple or type(value) is ast.List:
                elements = value.elts
                if len(elements) in (2, 3) and not _has_starred(elements) and isinstance(elements[-1], _MAY_BE_DICT):
                    return True
            elif value is not None and isinstance(value, _MAY_BE_SEQUENCE):
                return True
        elif kind not in _EXPRESSION_STATEMENTS:
            for field in _BLOCK_FIELDS:
                stack.extend(getattr(node, field, ()))
    return False


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
        if isinstance(node, _FUNCTIONS):
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


def module_imports(tree: ast.Module) -> frozenset[tuple[str, str]]:
    """(local name, qualified name) for the module-level imports, as `ModuleAnalysis._module_imports` reads them."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                head = alias.name.split(".")[0]
                found.add((alias.asname, alias.name) if alias.asname else (head, head))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    qualified = f"{node.module}.{alias.name}" if node.module else alias.name
                    found.add((alias.asname or alias.name, qualified))
    return frozenset(found)


# Which calls the analysis summarises (`analysis._call_summarised`, `library.Library`): a def nested
# in the function (always), else, while fewer than `SUMMARY_DEPTH` summaries are open, a module-level
# function of the file or of the project module it is imported from, or a method of `self`, if it is
# not async and shorter than `SUMMARY_LINES` lines (longer ones are training loops, not helpers).
SUMMARY_DEPTH = 2
SUMMARY_LINES = 80

Def = ast.FunctionDef | ast.AsyncFunctionDef


def summarisable(node: Def) -> bool:
    return not isinstance(node, ast.AsyncFunctionDef) and (node.end_lineno or node.lineno) - node.lineno < SUMMARY_LINES


class _Defs:
    """The defs of one module that flows may run, by name: module-level functions, methods of
    module-level classes, defs nested in functions (any), and return annotations; with the module's
    imports. Read from the module's tree, when first asked (most files never are)."""

    def __init__(self, tree: ast.Module, imports: frozenset[tuple[str, str]] | None = None) -> None:
        self._tree = tree
        self.imports = module_imports(tree) if imports is None else imports
        self._imported: dict[str, tuple[str, int, str]] | None = None
        self._tables: tuple[dict[str, list[Def]], ...] | None = None
        self._annotations: dict[str, list[ast.expr]] = {}

    @property
    def imported(self) -> dict[str, tuple[str, int, str]]:
        """Local name -> (module, level, its name there), for `from <module> import <name> as <local>`."""
        if self._imported is None:
            self._imported = {
                alias.asname or alias.name: (node.module or "", node.level, alias.name)
                for node in self._tree.body
                if isinstance(node, ast.ImportFrom) and not (node.module or "").startswith("torch")
                for alias in node.names
            }
        return self._imported

    def _read(self) -> tuple[dict[str, list[Def]], ...]:
        if self._tables is None:
            functions: dict[str, list[Def]] = {}
            methods: dict[str, list[Def]] = {}
            nested: dict[str, list[Def]] = {}
            stack: list[tuple[list[ast.stmt], dict[str, list[Def]]]] = [(self._tree.body, functions)]
            while stack:
                body, table = stack.pop()
                for node in body:
                    inner = table
                    if isinstance(node, _FUNCTIONS):
                        table.setdefault(node.name, []).append(node)
                        if node.returns is not None and table is not nested:
                            self._annotations.setdefault(node.name, []).append(node.returns)
                        inner = nested
                    elif isinstance(node, ast.ClassDef):
                        inner = methods if table is functions else nested
                    elif table is methods:
                        inner = nested  # the analysis reads a class's own statements only
                    for field in _BLOCK_FIELDS:
                        block = getattr(node, field, None)
                        if isinstance(block, list):
                            stack.append((block, inner))
            self._tables = functions, methods, nested
        return self._tables

    def functions(self, name: str) -> list[Def]:
        return (self._tables or self._read())[0].get(name, [])

    def methods(self, name: str) -> list[Def]:
        return (self._tables or self._read())[1].get(name, [])

    def nested(self, name: str) -> list[Def]:
        return (self._tables or self._read())[2].get(name, [])

    def declares_number(self, name: str) -> bool:
        """Whether a function or method called `name` is annotated to return a number, a string or
        the like (`evidence.declared_returns` asks all of them to agree: some is enough here)."""
        self._read()
        return any(declared(ast.unparse(a)) is Declared.IMMUTABLE for a in self._annotations.get(name, ()))


class _LazyDefs(_Defs):
    """Another module's defs, read one function at a time from its text: only the module's imports
    and the functions a flow asks for are parsed (a helper is at most `SUMMARY_LINES` long). Where
    the text cannot be cut so (a def whose lines do not end where the next statement at column 0
    begins, a method asked for), the whole module is parsed once."""

    def __init__(self, text: str) -> None:  # the tables of `_Defs` are built only if the whole module is read
        self._text = text
        self._whole: _Defs | None = None
        self._cut: dict[str, list[Def]] = {}
        self._starts: dict[str, list[int]] | None = None
        self._nested = {}
        try:
            tree = _quiet_parse("".join(match[0] for match in _IMPORT_STATEMENT.finditer(text)))
        except _PARSE_ERRORS:
            tree = self._parsed_whole_tree()
        if self._whole is None:
            self._imports_only = _Defs(tree)
            self.imports = self._imports_only.imports

    def _parsed_whole_tree(self) -> ast.Module:
        try:
            tree = _quiet_parse(self._text)
        except _PARSE_ERRORS:  # the analysis reads no function of a module CPython rejects: nor does this
            tree = ast.Module(body=[], type_ignores=[])
        self._whole = _Defs(tree)
        self.imports = self._whole.imports
        return tree

    @property
    def imported(self) -> dict[str, tuple[str, int, str]]:
        return (self._whole or self._imports_only).imported

    def _all(self) -> _Defs:
        if self._whole is None:
            self._parsed_whole_tree()
        assert self._whole is not None
        return self._whole

    def functions(self, name: str) -> list[Def]:
        if self._whole is not None:
            return self._whole.functions(name)
        if name not in self._cut:
            found = []
            if self._starts is None:  # where each def at column 0 starts, by name: one scan of the text
                self._starts = {}
                for match in _DEF_AT_COLUMN_0.finditer(self._text):
                    self._starts.setdefault(match[1], []).append(match.start())
            for start in self._starts.get(name, ()):
                node = _def_at(self._text, start, name)
                if node is None:
                    return self._all().functions(name)
                found.append(node)
                for inner in _own_defs(node):
                    self._nested.setdefault(inner.name, []).append(inner)
            self._cut[name] = found
        return self._cut[name]

    def methods(self, name: str) -> list[Def]:
        return self._all().methods(name)

    def nested(self, name: str) -> list[Def]:
        return self._whole.nested(name) if self._whole is not None else self._nested.get(name, [])

    def declares_number(self, name: str) -> bool:
        if self._whole is not None:
            return self._whole.declares_number(name)
        return ("def " + name) in self._text and "->" in self._text  # some may: the flow lets it be a number


# A statement at column 0 that imports: its lines (a parenthesised list may span several).
_IMPORT_STATEMENT = re.compile(r"^(?:from[ \t]+[\w.]+[ \t]+import[ \t]*\([^)]*\)|(?:from|import)[ \t][^\n]*)\n?", re.M)


def _def_at(text: str, start: int, name: str) -> Def | None:
    """The def starting at `start` (column 0), parsed alone: its lines run until the next line at
    column 0 that is not blank, a comment, or a bracket closing its signature. None: that cut does
    not parse to exactly this def (a string or bracket with lines at column 0 in it, a backslash)."""
    header_end = text.find("\n", start)
    following = _COLUMN_0_STATEMENT.search(text, header_end + 1) if header_end != -1 else None
    try:
        tree = _quiet_parse(text[start : following.start() if following else len(text)])
    except _PARSE_ERRORS:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef) or tree.body[0].name != name:
        return None
    return tree.body[0]


_COLUMN_0_STATEMENT = re.compile(r"^[^\s#)\]}]", re.M)
_DEF_AT_COLUMN_0 = re.compile(r"^def[ \t]+(\w+)", re.M)


def _quiet_parse(text: str) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings (invalid escapes) are not ours to print
        return ast.parse(text)


def _own_defs(function: Def) -> Iterator[Def]:
    """The defs nested in a function, at any depth."""
    stack: list[ast.stmt] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, _FUNCTIONS):
            yield node
        for field in _BLOCK_FIELDS:
            stack.extend(getattr(node, field, ()))


class _Helpers:
    """What calling a function of the project may give, by the flow below over its own code: the
    analysis summarises these calls, so a helper that returns a container makes one, and one that
    passes its arguments on passes their storage. The defs of the file, and those imported by name
    from another module of the project (`from pkg.mod import f`); decided per name, when a unit
    calls it, at the depth of summaries the call is at."""

    def __init__(self, defs: _Defs, path: str, rough: bool = False) -> None:
        self._defs = defs
        self._path = path
        self._rough = rough  # imported helpers may return anything: no other module is read
        self._numbers: dict[str, bool] = {}  # `declares_number`, by name
        self._paths: dict[tuple[str, bool, int], str | None] = {}  # `_imported_path`
        self._known: dict[tuple[str, bool, int], int] = {}
        self._passings: dict[tuple[str, bool, int], list[_Passing] | None] = {}
        self._summarised: dict[tuple[str, bool, int], bool] = {}
        self._walks: dict[int, Walk] = {}
        self._twin: _Helpers | None = None
        self.guessed = False  # the rough twin took an imported helper to return anything
        self._guesses: set[tuple[str, bool, int]] = set()  # the calls whose flags were guessed so

    @property
    def rough(self) -> _Helpers:
        """The same helpers, with every imported one taken to return anything."""
        if self._rough:
            return self
        if self._twin is None:
            self._twin = _Helpers(self._defs, self._path, rough=True)
            self._twin._walks, self._twin._numbers, self._twin._paths = self._walks, self._numbers, self._paths
            self._twin._summarised = self._summarised  # which calls are summarised does not depend on it
        return self._twin

    def declares_number(self, name: str) -> bool:
        if name not in self._numbers:
            self._numbers[name] = self._defs.declares_number(name)
        return self._numbers[name]

    def _candidates(self, name: str, method: bool, depth: int) -> list[tuple[Def, int]]:
        """The defs a call of `name` (`self.name` if `method`) from a flow at `depth` may be summarised
        from, each with the depth its own flow is at."""
        defs = self._defs
        found = [] if method else [(node, depth) for node in defs.nested(name)]
        if depth < SUMMARY_DEPTH:
            found += [
                (node, depth + 1) for node in (defs.methods if method else defs.functions)(name) if summarisable(node)
            ]
        return found

    def _imported_path(self, name: str, method: bool, depth: int) -> str | None:
        key = (name, method, depth)
        if key not in self._paths:
            imported = None if method or depth >= SUMMARY_DEPTH or not self._path else self._defs.imported.get(name)
            self._paths[key] = _project_module(self._path, *imported[:2]) if imported is not None else None
        return self._paths[key]

    def may_summarise(self, name: str, method: bool, depth: int) -> bool:
        """Whether the analysis may summarise the call (decided without reading another module)."""
        key = (name, method, depth)
        if key not in self._summarised:
            self._summarised[key] = bool(self._candidates(*key)) or self._imported_path(*key) is not None
        return self._summarised[key]

    def _flow(self, node: Def, depth: int) -> _Flow:
        """A flow over a def at `depth`, from its walk (one per def, shared with the rough twin).
        Flows are not kept: one refers to its helpers, and the cycle would outlive the file."""
        walk = self._walks.get(id(node))
        if walk is None:
            walk = self._walks[id(node)] = _walk(node)
        return _Flow(node, self._defs.imports, self, depth, walk)

    def passing(self, name: str, method: bool, depth: int) -> list[_Passing] | None:
        """What each def the call may run does with its arguments (None: not known, so anything: an
        imported helper, to the rough twin, or a helper calling itself)."""
        key = (name, method, depth)
        if key not in self._passings:
            self._passings[key] = None  # recursion: a helper calling itself passes anything on
            found: list[_Passing] | None = [
                _Passing.of(node, self._flow(node, at)) for node, at in self._candidates(*key)
            ]
            path = self._imported_path(*key)
            if path is not None:
                other = None if self._rough else _imported_helpers(path)
                imported = other.passing(self._defs.imported[name][2], False, depth) if other is not None else None
                found = None if imported is None or found is None else found + imported
            self._passings[key] = found
        if self._passings[key] is None and self._rough and self._imported_path(*key) is not None:
            self.guessed = True
        return self._passings[key]

    def flags(self, name: str, method: bool, depth: int) -> int:
        """What the call may return, as flow flags (0: not summarised, or only fresh values)."""
        key = (name, method, depth)
        if key not in self._known:
            self._known[key] = 0  # a helper calling itself adds nothing to itself
            guessed, self.guessed = self.guessed, False
            self._known[key] = self._decide(*key)
            if self.guessed:
                self._guesses.add(key)
            self.guessed = guessed or self.guessed
        elif key in self._guesses:
            self.guessed = True  # asked again: still a guess
        return self._known[key]

    def _decide(self, name: str, method: bool, depth: int) -> int:
        flags = 0
        for node, at in self._candidates(name, method, depth):
            flags |= self._flow(node, at).return_flags()
        path = self._imported_path(name, method, depth)
        if path is not None and self._rough:
            self.guessed = True
            flags |= ALL
        elif path is not None:
            other = _imported_helpers(path)
            flags |= other.flags(self._defs.imported[name][2], False, depth) if other is not None else 0
        return flags


_PROJECT_MODULES: dict[tuple[str, str, int], str | None] = {}


def _project_module(path: str, module: str, level: int) -> str | None:
    """`find_module`, remembered per importing directory."""
    key = (os.path.dirname(os.path.abspath(path)), module, level)
    if key not in _PROJECT_MODULES:
        _PROJECT_MODULES[key] = find_module(path, module, level)
    return _PROJECT_MODULES[key]


# The helpers of the project's other modules, as this process read them, by path and stamp (each
# remembers what it decided, name by name): the last `_LOADED_KEPT` modules.
_LOADED: collections.OrderedDict[tuple[str, tuple[int, int]], _Helpers | None] = collections.OrderedDict()
_LOADED_KEPT = 1024


def _imported_helpers(path: str) -> _Helpers | None:
    """Another module of the project, read lazily (`_LazyDefs`); None if it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, (st.st_mtime_ns, st.st_size))
    if key in _LOADED:
        _LOADED.move_to_end(key)
        return _LOADED[key]
    try:
        with open(path, "rb") as handle:
            helpers: _Helpers | None = _Helpers(_LazyDefs(handle.read().decode("utf-8")), path)
    except (OSError, UnicodeDecodeError, *_PARSE_ERRORS):
        helpers = None
    _LOADED[key] = helpers
    if len(_LOADED) > _LOADED_KEPT:
        _LOADED.popitem(last=False)
    return helpers


def _is_mapping(qualified: str) -> bool:
    return qualified in MAPPING_CONSTRUCTORS or qualified.rpartition(".")[2] in _MAPPING_NAMES


# ---- the container flow -----------------------------------------------------------------

# What a value may be, as bits. D: a dict container. S: a sequence container. H: a container
# holding a dict somewhere inside. M: no storage and no container (a number, None, a string, or
# the analysis' unknown `Val()`), which a subscript store turns into a dict.
D, S, H, M = 1, 2, 4, 8
ALL = D | S | H | M


def _elements(flags: int) -> int:
    """What indexing, iterating or unpacking a value with these flags may give."""
    out = M if flags & M else 0
    if flags & H:
        return ALL
    if flags & (D | S):
        out |= S | M
    return out


def _holding(flags: int) -> int:
    """The H bit of a container that holds a value with these flags."""
    return H if flags & (D | H) else 0


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _flow_may_find(node: ast.AST, imports: frozenset[tuple[str, str]], helpers: _Helpers | None) -> bool:
    try:
        return _Flows(node, imports, helpers).may(_Flow.may_find)
    except RecursionError:
        return True


class _Flows:
    """A unit's flows, each built once for every question asked of it: first with every imported
    helper of the project taken to return anything (no other module read), then, only if that may
    find and took a guess, with what the helpers' own code returns."""

    def __init__(self, node: ast.AST, imports: frozenset[tuple[str, str]], helpers: _Helpers | None) -> None:
        self.node, self.imports, self.helpers = node, imports, helpers
        self._walk: Walk | None = None
        self._rough: _Flow | None = None
        self._full: _Flow | None = None

    @property
    def walk(self) -> Walk:
        if self._walk is None:
            self._walk = _walk(self.node)
        return self._walk

    def may(self, question: Callable[[_Flow], bool]) -> bool:
        if self.helpers is None:
            self._full = self._full or _Flow(self.node, self.imports, None, walk=self.walk)
            return question(self._full)
        rough = self.helpers.rough
        if self._rough is None:
            rough.guessed = False  # a guess kept from an earlier question only costs a second look
            self._rough = _Flow(self.node, self.imports, rough, walk=self.walk)
        if not question(self._rough):
            return False
        if not rough.guessed:
            return True
        self._full = self._full or _Flow(self.node, self.imports, self.helpers, walk=self.walk)
        return question(self._full)


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
            written = [node.target for node in walk.bindings if type(node) is ast.AugAssign] + walk.written
            reports = flows.may(lambda flow: flow.report_may_be_written(written, walk.returns))
        # A kept value is given to a container's method or stored into an entry or an attribute.
        keeping = keeping and any(_is_mutation(node) or _assigned_into(node) for node in flows.walk.bindings)
        if not reports and not keeping:
            return False
        found = _captures_and_writes(unit, imports, keeping_functions, reports)
        if not found.written or not (found.kept or found.reports):
            return False
        return flows.may(lambda flow: flow.captured_may_be_written(found))
    except RecursionError:
        return True


def _calls_inplace_method(span: str) -> bool:
    """Whether `span` may call a method named as in-place ones are (`x.mul_(k)`; not `__init__(`)."""
    for match in _NAME_END_CALLED.finditer(span):
        start = match.start()
        if start and span[start - 1].isalnum():
            return True
    return False


@dataclasses.dataclass
class _Captures:
    """What `captures.py` may take for a capture and what an in-place write may change, in one unit."""

    kept: list[ast.expr] = dataclasses.field(
        default_factory=list
    )  # given to a container method, set as an entry or attribute
    reports: list[ast.expr] = dataclasses.field(
        default_factory=list
    )  # what a return may be a report tuple's last element of
    written: list[ast.expr] = dataclasses.field(default_factory=list)  # `x` of `x op= v`, `x.mul_(v)`
    # What a kept alias may be made of (`captures._kept`): what a detach or a conversion is applied to in
    # the unit, by the id of the call. (A helper's summary detaching its argument is not followed here:
    # a known gap.)
    keeping: dict[int, ast.expr] = dataclasses.field(default_factory=dict)
    # What is put into a container (a display's element, a stored entry, a mutator's or helper's
    # argument): `captures._written` marks a report's entries only once they are in one.
    entries: list[ast.expr] = dataclasses.field(default_factory=list)
    where: dict[int, _Where] = dataclasses.field(default_factory=dict)  # of each node in the lists above
    stored_in: dict[int, ast.expr] = dataclasses.field(default_factory=dict)  # kept by `owner[i] = v`: owner


class _Level(NamedTuple):
    scope: int  # the id of a def
    position: tuple[int, int]  # (line, column) in it of the node, or of the def holding the node
    loops: frozenset[int]  # the ids of the loops around that in the def
    branches: frozenset[tuple[int, bool]]  # (the id of an `if` around it in the def, whether in its `else`)


_Where = tuple[_Level, ...]  # a node's place, from the unit's def down to its own


_DISPLAYS = frozenset(
    {ast.Dict, ast.List, ast.Tuple, ast.Set, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp}
)


def _display_elements(display: ast.expr) -> list[ast.expr | None]:
    kind = type(display)
    if kind is ast.Dict:
        return display.values
    if kind is ast.DictComp:
        return [display.value]
    return [display.elt] if kind in (ast.ListComp, ast.SetComp, ast.GeneratorExp) else display.elts


def _may_follow(later: _Where, earlier: _Where) -> bool:
    """Whether the analysis may meet `later` after `earlier` in the flow of `earlier`'s def: further on
    or in a loop around both, there or in a def nested there after `earlier` (a nested def is analysed
    where it is defined, with the env of that point as its closure; what it does stays in it)."""
    depth = len(earlier)
    if len(later) < depth or any(a.scope != b.scope for a, b in zip(later[:depth], earlier, strict=True)):
        return False
    here, there = later[depth - 1], earlier[-1]
    if here.loops & there.loops:
        return True
    # Not in the other branch of an `if` both are in (a loop around both is a loop around the `if`).
    other = {(branch, not orelse) for branch, orelse in there.branches}
    return here.position >= there.position and other.isdisjoint(here.branches)


# The levels above a def, the def's id, the loops and `if` branches around (as `_Level`).
_Context = tuple[_Where, int, frozenset[int], frozenset[tuple[int, bool]]]


def _placed(tree: ast.AST) -> Iterator[tuple[ast.AST, _Context]]:
    """Every node of `tree` but its leaves (as `_walk`), with its context (one object for the nodes
    of a def outside its loops, and so on)."""
    frontier: list[tuple[ast.AST, _Context]] = [(tree, ((), id(tree), frozenset(), frozenset()))]
    while frontier:
        node, context = frontier.pop()
        yield node, context
        kind = type(node)
        if kind is ast.Lambda or kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            pass
        elif kind is ast.For or kind is ast.AsyncFor or kind is ast.While or kind is ast.comprehension:
            context = (context[0], context[1], context[2] | {id(node)}, context[3])
        fields = _CHILD_FIELDS.get(kind)
        if fields is None:
            fields = _CHILD_FIELDS[kind] = tuple(f for f in kind._fields if f not in _LEAF_FIELDS)
        for name in fields:
            value = getattr(node, name, None)
            here = context
            if kind is ast.If and name != "test":
                here = (context[0], context[1], context[2], context[3] | {(id(node), name == "orelse")})
            for child in value if type(value) is list else (value,):
                if child is None or type(child) in _LEAVES or not isinstance(child, ast.AST):
                    continue
                child_kind = type(child)
                if child_kind is ast.Lambda or child_kind is ast.FunctionDef or child_kind is ast.AsyncFunctionDef:
                    outer, scope, loops, branches = here
                    level = _Level(scope, _position(child), loops, branches)
                    frontier.append((child, ((*outer, level), id(child), frozenset(), frozenset())))
                else:
                    frontier.append((child, here))


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _keeping_functions(imports: frozenset[tuple[str, str]]) -> frozenset[str]:
    """The local names of the torch functions of the table that keep a value (`from torch import detach`)."""
    return frozenset(
        local
        for local, full in imports
        if full.startswith("torch.") and torch_function_alias_kind(full[len("torch.") :]) in KEEPING_KINDS
    )


def _captures_and_writes(
    tree: ast.AST, imports: frozenset[tuple[str, str]], keeping_functions: frozenset[str], reports: bool
) -> _Captures:
    """What `tree` may capture and write in place; its returned reports' entries only if `reports`
    (a return may be a report tuple)."""
    found = _Captures()
    keeping_calls: set[int] = set()
    bindings: list[tuple[list[ast.expr | None], ast.expr]] = []
    modules = {local for local, _ in imports}
    torch_names = {local for local, full in imports if full == "torch" or full.startswith("torch.")}
    defs: dict[int, Def | ast.Lambda] = {}
    # Decided once the unit is walked, and only if it may capture at all: (value, owner, def) of a
    # value given to or stored into `owner`; (target, def) of `name op= v`.
    stores: list[tuple[ast.expr, ast.expr, int]] = []
    augmented: list[tuple[ast.Name, int]] = []

    def put(into: list[ast.expr], value: ast.expr, node: ast.AST, context: _Context) -> None:
        into.append(value)
        outer, scope, loops, branches = context
        found.where[id(value)] = (*outer, _Level(scope, _position(node), loops, branches))

    bound: dict[int, dict[str, list[ast.expr | None]]] = {}  # per def: `_bind_names`
    for node, context in _placed(tree):
        kind = type(node)
        if kind in _NAME_BINDINGS:
            # A def's own name is bound in the def around it (whose context the def's node is not in).
            scope = context[0][-1].scope if kind in _FUNCTIONS and context[0] else context[1]
            _bind_names(node, bound.setdefault(scope, {}))
        if kind in _DISPLAYS:
            if not reports:
                continue
            for element in _display_elements(node):
                if element is not None:
                    put(found.entries, element.value if type(element) is ast.Starred else element, node, context)
        elif kind is ast.AugAssign:
            put(found.written, node.target, node, context)
            if type(node.target) is ast.Name:
                augmented.append((node.target, context[1]))
        elif kind is ast.Call:
            func = node.func
            attribute = func.attr if type(func) is ast.Attribute else None
            given = [a.value if type(a) is ast.Starred else a for a in node.args]
            given += [keyword.value for keyword in node.keywords]
            # A method (`x.detach()`, `x.cpu()`) or torch function of the table.
            root = (_dotted(func.value) or "").partition(".")[0] if attribute is not None else ""
            if attribute in KEEPING_NAMES and root not in modules - torch_names and not _copies(node):
                # What is kept is the receiver's storage (`x.to(device)`), or a torch function's first argument.
                receiver = (node.args or [None])[0] if root in torch_names else func.value
                if receiver is not None:
                    found.keeping[id(node)] = receiver
                keeping_calls.add(id(node))
            elif type(func) is ast.Name and func.id in keeping_functions and node.args:
                found.keeping[id(node)] = node.args[0]
                keeping_calls.add(id(node))
            if attribute is not None and writes_in_place(attribute):
                if root not in modules:  # `scf.for_(...)`: a function of an imported module, not a tensor's method
                    put(found.written, func.value, node, context)
            elif attribute in CONTAINER_MUTATORS:
                for value in given:
                    if reports:
                        put(found.entries, value, node, context)
                    put(found.kept, value, node, context)
                    stores.append((value, func.value, context[1]))
            elif reports and (_helper_call(node) is not None or (_dotted(func) or "") in _CONTAINER_CONSTRUCTORS):
                for value in given:  # a helper may put its arguments into what it returns
                    put(found.entries, value, node, context)
        elif kind is ast.Return and node.value is not None and reports:
            put(found.reports, node.value, node, context)
        elif kind is ast.Lambda or kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            defs[id(node)] = node
        if kind in _BINDINGS:
            targets = (
                node.targets if kind is ast.Assign else [node.optional_vars if kind is ast.withitem else node.target]
            )
            value = node.iter if kind in (ast.For, ast.AsyncFor, ast.comprehension) else getattr(node, "value", None)
            if kind is ast.withitem:
                value = node.context_expr
            if value is not None:
                bindings.append((targets, value))
            stored = _assigned_into(node)
            for target in stored:  # `x.a = v`, `x[k] = v`, `a, x.b = v` and `x.a: T = v` alike
                if reports:
                    put(found.entries, value, node, context)
                put(found.kept, value, node, context)
                stores.append((value, target.value, context[1]))
                key = target.slice if type(target) is ast.Subscript else None
                if len(stored) == 1 and key is not None and not (type(key) is ast.Constant and type(key.value) is str):
                    # `x[i] = v` keeps `v` only in a container (`analysis._store_item`): a tensor's is a write.
                    found.stored_in[id(value)] = target.value
    if not found.written or not (found.kept or found.reports):
        return found
    # Only a value a detach or conversion of the unit made can be a kept alias (`captures._kept`): one
    # holding such a call, or a name bound (through any chain of names) to one.
    # A dotted name holds what is bound to it, to an attribute of it (`self` holds `self.x`) or to an
    # owner of it (`out.x` holds `out`'s), not what is bound to a sibling (`self.y`).
    parts: dict[int, tuple[bool, set[str], set[str]]] = {}  # per value: such a call in it, its names, their heads
    kept_names: set[str] = set()
    kept_heads: set[str] = set()  # the kept names and their prefixes

    def parts_of(value: ast.AST) -> tuple[bool, set[str], set[str]]:
        found_parts = parts.get(id(value))
        if found_parts is None:
            calls, names = False, set()
            for node in _walk_storage(value):
                calls = calls or id(node) in keeping_calls
                if type(node) is ast.Name or type(node) is ast.Attribute:
                    name = _dotted(node)
                    if name is not None:
                        names.add(name)
            found_parts = parts[id(value)] = (calls, names, _with_heads(names))
        return found_parts

    def holds_kept(value: ast.AST) -> bool:
        calls, names, heads = parts_of(value)
        return calls or not kept_names.isdisjoint(heads) or not kept_heads.isdisjoint(names)

    grew = bool(found.kept)
    while grew:
        grew = False
        for targets, value in bindings:
            names = {name for target in targets if target is not None for name in _bound_names(target)} - kept_names
            if names and holds_kept(value):
                kept_names |= names
                kept_heads |= _with_heads(names)
                grew = True
    found.kept = [value for value in found.kept if holds_kept(value)]
    if not (found.kept or found.reports):
        return found
    local_names: dict[int, _Locals] = {}

    def names_of(scope: int) -> _Locals:
        if scope not in local_names:
            local_names[scope] = _locals_of(defs[scope], bound.get(scope, {}))
        return local_names[scope]

    # Kept only where it may outlive the call; no tensor write to a name bound only to containers.
    kept = {id(value) for value in found.kept}
    escaping = {
        id(value) for value, owner, scope in stores if id(value) in kept and _may_escape(owner, names_of(scope).own)
    }
    found.kept = [value for value in found.kept if id(value) in escaping]
    containers = {id(target) for target, scope in augmented if target.id in names_of(scope).containers}
    found.written = [target for target in found.written if id(target) not in containers]
    return found


def _assigned_into(node: ast.AST) -> list[ast.Attribute | ast.Subscript]:
    """The attributes and entries an assignment (`=`, or an annotated one with a value) stores into."""
    kind = type(node)
    if kind is ast.Assign:
        return list(_stored_into(node.targets))
    return list(_stored_into([node.target])) if kind is ast.AnnAssign and node.value is not None else []


def _stored_into(targets: list[ast.expr]) -> Iterator[ast.Attribute | ast.Subscript]:
    """The attributes and entries an assignment stores into, inside tuple targets too."""
    for target in targets:
        kind = type(target)
        if kind is ast.Attribute or kind is ast.Subscript:
            yield target
        elif kind is ast.Tuple or kind is ast.List:
            yield from _stored_into(target.elts)
        elif kind is ast.Starred:
            yield from _stored_into([target.value])


def _walk_storage(value: ast.AST) -> Iterator[ast.AST]:
    """The nodes of `value` that may give it storage: not its subscripts' keys (`x[i]` shares storage
    with `x`, never with `i`), nor what a dotted name is made of (`self.y` is not `self`)."""
    frontier = [value]
    while frontier:
        node = frontier.pop()
        yield node
        kind = type(node)
        if kind is ast.Subscript:
            frontier.append(node.value)
        elif kind is not ast.Attribute or _dotted(node) is None:
            frontier.extend(ast.iter_child_nodes(node))


def _with_heads(names: set[str]) -> set[str]:
    """`names` and every dotted prefix of one (`self.x.y`: `self.x`, `self`)."""
    heads = set(names)
    for name in names:
        head = name
        while "." in head:
            head = head.rpartition(".")[0]
            heads.add(head)
    return heads


def _bound_names(target: ast.AST) -> Iterator[str]:
    """The dotted names a target binds, and the owners of the entries it stores into (`d` of `d[k]`)."""
    kind = type(target)
    if kind is ast.Name or kind is ast.Attribute or kind is ast.Subscript:
        name = _owner(target)
        if name is not None:
            yield name
    elif kind is ast.Tuple or kind is ast.List:
        for element in target.elts:
            yield from _bound_names(element)
    elif kind is ast.Starred:
        yield from _bound_names(target.value)


_BINDINGS = frozenset(
    {ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.For, ast.AsyncFor, ast.comprehension, ast.withitem}
)
# Values that are a new Python container or string: never a tensor, whatever `+=` does to them.
_CONTAINER_VALUES = (
    ast.Dict, ast.List, ast.Set, ast.Tuple, ast.DictComp, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.JoinedStr,
)  # fmt: skip
_CONTAINER_CONSTRUCTORS = frozenset({"list", "set", "tuple", *MAPPING_CONSTRUCTORS})
_DEFS = (*_FUNCTIONS, ast.ClassDef)
_NAME_BINDINGS = frozenset(
    {ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.Global, ast.Nonlocal, ast.Import, ast.ImportFrom, ast.For}
    | {ast.AsyncFor, ast.comprehension, ast.withitem, *_DEFS}
)


@dataclasses.dataclass(frozen=True)
class _Locals:
    """What one def's own names are bound to, as far as `captures.py` cares."""

    own: frozenset[str]  # bound only to objects made in the def: stored into, they die with the call
    containers: frozenset[str]  # bound only to Python containers or strings: no in-place tensor write


def _locals_of(function: Def | ast.Lambda, bound: dict[str, list[ast.expr | None]]) -> _Locals:
    """A parameter, a global or closure variable, and a name bound to a call the analysis may summarise
    (`helper(x)`, `self.m()`: it may return a parameter) may be an object the caller holds
    (`captures._escapes`); a name bound only to names of the def's own objects is one of them.
    `bound`: what each name is bound to in the def (None: by a loop, `with`, an import, `global`...)."""
    bound = {name: list(values) for name, values in bound.items()}
    for argument in _parameters(function.args):
        bound.setdefault(argument.arg, []).append(None)
    containers = frozenset(
        name for name, values in bound.items() if all(_is_container_value(value) for value in values)
    )
    own = {name for name, values in bound.items() if None not in values}
    grew = True
    while grew:  # drop the names bound to what may not be the def's own, until none is left to drop
        grew = False
        for name in list(own):
            if not all(_is_own_value(value, own) for value in bound[name]):
                own.discard(name)
                grew = True
    return _Locals(frozenset(own), containers)


def _bind_names(node: ast.AST, bound: dict[str, list[ast.expr | None]]) -> None:
    """Note what `node` binds in its def (`_locals_of`)."""
    kind = type(node)
    if kind is ast.Assign or kind is ast.AnnAssign or kind is ast.NamedExpr:
        if node.value is None:
            return
        for target in node.targets if kind is ast.Assign else [node.target]:
            if type(target) is ast.Name:
                bound.setdefault(target.id, []).append(node.value)
                continue
            for name in ast.walk(target):
                if type(name) is ast.Name:
                    bound.setdefault(name.id, []).append(None)
    elif kind is ast.Global or kind is ast.Nonlocal:
        for name in node.names:
            bound.setdefault(name, []).append(None)
    elif kind is ast.Import or kind is ast.ImportFrom:
        for alias in node.names:
            bound.setdefault((alias.asname or alias.name).partition(".")[0], []).append(None)
    elif kind in (ast.For, ast.AsyncFor, ast.comprehension, ast.withitem):
        target = node.optional_vars if kind is ast.withitem else node.target
        for name in ast.walk(target) if target is not None else ():
            if type(name) is ast.Name:
                bound.setdefault(name.id, []).append(None)
    elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.ClassDef:
        bound.setdefault(node.name, []).append(None)


def _is_container_value(value: ast.expr | None) -> bool:
    if value is None:
        return False
    if isinstance(value, _CONTAINER_VALUES):
        return True
    if type(value) is ast.Constant:
        return type(value.value) in (str, bytes)
    return type(value) is ast.Call and (_dotted(value.func) or "") in _CONTAINER_CONSTRUCTORS


def _is_own_value(value: ast.expr | None, own: set[str]) -> bool:
    kind = type(value)
    if kind is ast.Name:
        return value.id in own or value.id in ("None", "True", "False")
    if kind is ast.IfExp:
        return _is_own_value(value.body, own) and _is_own_value(value.orelse, own)
    if kind is ast.BoolOp:
        return all(_is_own_value(part, own) for part in value.values)
    if kind is ast.NamedExpr:
        return _is_own_value(value.value, own)
    if kind is ast.Call:
        return _helper_call(value) is None or (_dotted(value.func) or "") in _CONTAINER_CONSTRUCTORS
    return kind not in (ast.Attribute, ast.Subscript, ast.Starred, ast.Await, ast.Yield, ast.YieldFrom)


def _parameters(arguments: ast.arguments) -> list[ast.arg]:
    extra = [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    return [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, *extra]


def _may_escape(owner: ast.expr, own: frozenset[str]) -> bool:
    """Whether the object `owner` names (`self.log`, `metrics`, `LOG[k]`) may outlive the call."""
    while type(owner) in (ast.Attribute, ast.Subscript):
        owner = owner.value
    return type(owner) is not ast.Name or owner.id not in own


_BINDING_NODES = frozenset(
    {
        ast.Assign,
        ast.AnnAssign,
        ast.AugAssign,
        ast.For,
        ast.AsyncFor,
        ast.comprehension,
        ast.withitem,
        ast.NamedExpr,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
        ast.ExceptHandler,
        ast.arguments,
    }
)


# Nothing the flow collects is in these nodes or fields: the walk does not enter them.
_LEAVES = frozenset({ast.Name, ast.Constant, ast.alias, ast.Pass, ast.Break, ast.Continue})
_LEAF_FIELDS = frozenset(
    {"ctx", "id", "attr", "name", "names", "arg", "module", "level", "kind", "op", "ops", "type_comment", "is_async"}
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _updates_a_mapping(node: ast.Call) -> bool:
    """`analysis._updates_a_mapping`: `x.update(...)` given a dict display or keywords."""
    if not (isinstance(node.func, ast.Attribute) and node.func.attr == "update"):
        return False
    return bool(node.keywords) or any(isinstance(arg, (ast.Dict, ast.DictComp)) for arg in node.args)


def _is_mutation(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CONTAINER_MUTATORS


# What a flow reads of its code: the statements that bind or update names, the returned values
# (a lambda's body is one), the calls of names or of `self`'s methods (maybe summarised), whether
# it has a display of 2 or 3 elements (what a returned name may be a report tuple through), and
# whether it makes a dict itself: a display or comprehension, a subscript store (on a number or
# None, or with a string key: `_bind`), an `update` given a dict or keywords, a call of a method
# named like a mapping constructor (`collections.OrderedDict`); and what in-place methods write
# (`x` of `x.mul_(k)`, for FAL005).
class Walk(NamedTuple):
    bindings: list[ast.AST]
    returns: list[ast.expr]
    calls: list[ast.Call]
    display: bool
    makes_dict: bool
    written: list[ast.expr]


def _walk(tree: ast.AST) -> Walk:
    bindings: list[ast.AST] = []
    returns: list[ast.expr] = []
    calls: list[ast.Call] = []
    written: list[ast.expr] = []
    display = makes_dict = False
    stack: list[ast.AST] = [tree]
    while stack:  # ast.walk, without its generator-per-node overhead, and not into leaves
        node = stack.pop()
        kind = type(node)
        if kind is ast.Call and type(node.func) is ast.Attribute and writes_in_place(node.func.attr):
            written.append(node.func.value)
        if kind in _BINDING_NODES or (kind is ast.Call and _is_mutation(node)):
            bindings.append(node)
            if kind is ast.Call and _updates_a_mapping(node):
                makes_dict = True
        elif kind is ast.Call:
            if _helper_call(node) is not None:
                calls.append(node)
            elif type(node.func) is ast.Attribute and node.func.attr in _MAPPING_NAMES:
                makes_dict = True
        elif (kind is ast.Tuple or kind is ast.List) and not display:
            display = len(node.elts) in (2, 3) and not _has_starred(node.elts)
        elif kind is ast.Dict or kind is ast.DictComp or (kind is ast.Subscript and type(node.ctx) is ast.Store):
            makes_dict = True
        if kind is ast.Return and node.value is not None:
            returns.append(node.value)
        elif kind is ast.Lambda:
            returns.append(node.body)
        fields = _CHILD_FIELDS.get(kind)
        if fields is None:
            fields = _CHILD_FIELDS[kind] = tuple(f for f in kind._fields if f not in _LEAF_FIELDS)
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if type(item) not in _LEAVES and item is not None and type(item) is not str:
                        stack.append(item)
            elif value is not None and type(value) not in _LEAVES and isinstance(value, ast.AST):
                stack.append(value)
    # The walk meets statements about in reverse: in source order, the fixpoints settle sooner.
    bindings.reverse()
    calls.reverse()
    return Walk(bindings, returns, calls, display, makes_dict, written)


class _Flow:
    """Flow-insensitive: one set of flags per name (or dotted name) over the whole unit."""

    def __init__(
        self,
        tree: ast.AST,
        imports: frozenset[tuple[str, str]],
        helpers: _Helpers | None,
        depth: int = 0,
        walk: Walk | None = None,
    ) -> None:
        self.helpers = helpers
        self.depth = depth  # how many summaries the analysis has open while it runs this code
        self.bindings, self.returns, calls, self._has_display, self._makes_dict, _ = walk or _walk(tree)
        self._named_calls = calls
        # the calls the analysis may summarise: their effects on arguments
        self.calls = [call for call in calls if _may_have_effects(call, helpers, depth)]
        self._store: dict[str, frozenset[Token]] | None = None  # by dotted name, once `_settle_storage` ran
        self._wild: dict[str, frozenset[Token]] = {}  # what any attribute `<owner>.x` may have been given
        self._mutated: set[str] = set()  # names whose entries or attributes were written to
        self._displays: dict[int, ast.Tuple | ast.List] = {}  # the 2- and 3-element displays, by id
        self._known_storage: dict[int, frozenset[Token]] = {}  # this round's, by node id
        self._store_seen: set[str] = set()  # the names this round read from `_store`, from `_wild`
        self._wild_seen: set[str] = set()
        self._read_whole_store = False
        self._grew_after_read = False
        self._own: dict[int, list[ast.expr]] = {}  # `_own_returns` of the defs met, by id
        self.env: dict[str, int] = {}
        self._settled = False
        self._seen: set[str] = set()  # the names this round of `_settle` has read
        self._stale = False  # a name changed after this round read it
        self.qualified: dict[str, set[str]] = {}
        self._qualified_names: dict[int, frozenset[str]] = {}
        for local, full in imports:
            self.qualified.setdefault(local, set()).add(full)

    def may_find(self) -> bool:
        # A returned name or call is a report tuple only through a display here or a helper's (given
        # arguments): see `_shares_storage`. Without either, only displays returned as such can be.
        opaque = self._has_display or any(call.args or call.keywords for call in self.calls)
        if not any(opaque or type(value) in (ast.Tuple, ast.List) for value in self.returns):
            return False
        # No dict is made here, by a mapping constructor or by a helper: none can be returned.
        if not (self._makes_dict or any(self._may_give_dict(call) for call in self._named_calls)):
            return False
        self._settle()
        return any(self._returnable(value) and self._shares_storage(value) for value in self.returns)

    def _may_give_dict(self, call: ast.Call) -> bool:
        if any(_is_mapping(name) for name in self._qualified(call.func)):
            return True
        helper = _helper_call(call)
        return self.helpers is None or (helper is not None and bool(self.helpers.flags(*helper, self.depth) & (D | H)))

    def return_flags(self) -> int:
        """What the function may return (its own returns; a lambda's body counts as one)."""
        if not self.returns:
            return 0
        self._settle()
        flags = 0
        for value in self.returns:
            flags |= self._eval(value)
        return flags

    def _settle(self) -> None:
        """Rounds over the bindings until one changes no name it had read before the change: every
        read of that round saw the final flags (most units settle in one round, not two)."""
        while not self._settled:
            self._seen.clear()
            self._stale = False
            for node in self.bindings:
                self._statement(node)
            self._settled = not self._stale

    def _get(self, name: str) -> int:
        self._seen.add(name)
        return self.env.get(name, 0)

    def _returnable(self, value: ast.expr) -> bool:
        """Can this be `(backprop, report)` or `(backprop, n, report)` with `report` a dict?"""
        if isinstance(value, (ast.Tuple, ast.List)):
            elements = value.elts
            if any(isinstance(e, ast.Starred) for e in elements) or len(elements) not in (2, 3):
                return False
            return bool(self._eval(elements[-1]) & D)
        flags = self._eval(value)
        return bool(flags & S and flags & H)

    def _join(self, name: str, flags: int) -> None:
        old = self.env.get(name, 0)
        if flags | old != old:
            self.env[name] = old | flags
            self._stale = self._stale or name in self._seen

    def _statement(self, node: ast.AST) -> None:
        kind = type(node)
        if kind is ast.Assign:
            value = self._eval(node.value)
            for target in node.targets:
                self._bind(target, value)
        elif kind is ast.AnnAssign:
            if node.value is not None:
                self._bind(node.target, self._eval(node.value))
        elif kind is ast.AugAssign:
            current, value = self._eval(node.target), self._eval(node.value)
            new = M if current & M else 0
            if current & S and isinstance(node.op, ast.Add):
                new |= current | _holding(_elements(value))
            if current & D and isinstance(node.op, ast.BitOr):  # `report |= {...}`: an update
                new |= current | (value & H)
            self._bind(node.target, new)
        elif kind in (ast.For, ast.AsyncFor, ast.comprehension):
            self._bind(node.target, _elements(self._eval(node.iter)))
        elif kind is ast.withitem:
            if node.optional_vars is not None:
                self._bind(node.optional_vars, self._eval(node.context_expr) & (D | S | H))
        elif kind is ast.NamedExpr:
            self._bind(node.target, self._eval(node.value))
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            self._join(node.name, M)
        elif kind is ast.ExceptHandler:
            if node.name:
                self._join(node.name, M)
        elif kind is ast.arguments:
            # An annotated parameter may be declared a number or a string (`n: int`).
            for arg in _parameters(node):
                if arg.annotation is not None:
                    self._join(arg.arg, M)
        elif kind is ast.Call:
            owner = _dotted(node.func.value)
            if owner is not None and _updates_a_mapping(node):
                self._join(owner, D | _holding(self._arguments(node)))  # a mapping whatever it was
            elif owner is not None and self._get(owner) & (D | S):
                self._join(owner, _holding(self._arguments(node)))

    def _bind(self, target: ast.expr, flags: int) -> None:
        if isinstance(target, (ast.Name, ast.Attribute)):
            name = _dotted(target)
            if name is not None and flags:
                self._join(name, flags)
        elif isinstance(target, ast.Subscript):
            owner = _dotted(target.value)
            if owner is not None:
                current = self._get(owner)
                key = target.slice.value if type(target.slice) is ast.Constant else None
                if current & M or type(key) is str:  # a string key makes anything a mapping
                    self._join(owner, D | _holding(flags))
                if current & (D | S):
                    self._join(owner, _holding(flags))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._bind(element, _elements(flags))
        elif isinstance(target, ast.Starred):
            self._bind(target.value, S | _holding(_elements(flags)))

    def _qualified(self, node: ast.expr) -> frozenset[str]:
        known = self._qualified_names.get(id(node))  # the fixpoint evaluates each node several times
        if known is None:
            name = _dotted(node)
            if name is None:
                known = frozenset()
            else:
                head, _, rest = name.partition(".")
                known = frozenset(
                    f"{full}.{rest}" if rest else full for full in self.qualified.get(head, set()) | {head}
                )
            self._qualified_names[id(node)] = known
        return known

    def _arguments(self, node: ast.Call) -> int:
        flags = 0
        for arg in node.args:
            flags |= self._eval(arg)
        for keyword in node.keywords:
            flags |= self._eval(keyword.value)
        return flags

    def _eval(self, node: ast.expr) -> int:
        kind = type(node)
        if kind is ast.Name:
            return self._get(node.id) | (M if node.id in ("None", "True", "False") else 0)
        if kind is ast.Attribute:
            name = _dotted(node)
            if name is None:
                return 0
            torch = any(q.startswith("torch.") for q in self._qualified(node))
            return self._get(name) | (M if torch else 0)
        if kind is ast.Constant or kind is ast.JoinedStr or kind is ast.Lambda:
            return M
        if kind is ast.Dict:
            flags = D
            for key, value in zip(node.keys, node.values, strict=True):
                flags |= _holding(self._eval(value) if key is not None else _elements(self._eval(value)))
            return flags
        if kind is ast.DictComp:
            return D | _holding(self._eval(node.value))
        if kind is ast.Tuple or kind is ast.List:
            flags = S
            for element in node.elts:
                flags |= _holding(self._eval(element))
            return flags
        if kind is ast.Starred:
            return _elements(self._eval(node.value))
        if kind is ast.ListComp or kind is ast.GeneratorExp:
            return S | _holding(self._eval(node.elt))
        if kind is ast.Subscript:
            return _elements(self._eval(node.value))
        if kind is ast.IfExp:
            return self._eval(node.body) | self._eval(node.orelse)
        if kind is ast.BoolOp:
            flags = 0
            for value in node.values:
                flags |= self._eval(value)
            return flags
        if kind is ast.NamedExpr:
            return self._eval(node.value)
        if kind is ast.UnaryOp:
            return M if isinstance(node.op, ast.Not) or self._eval(node.operand) & M else 0
        if kind is ast.BinOp:
            return M if self._eval(node.left) & M and self._eval(node.right) & M else 0
        if kind is ast.Call:
            return self._call(node)
        return 0  # a fresh tensor: comparisons, sets, awaits, ...

    def _call(self, node: ast.Call) -> int:
        arguments = self._arguments(node)
        flags = 0
        for name in self._qualified(node.func):
            if name in NUMBER_BUILTINS:
                flags |= M
            elif _is_mapping(name):
                flags |= D | _holding(arguments)
            elif name in ("list", "tuple"):
                flags |= S | _holding(_elements(arguments))
            elif name in ("max", "min"):  # one of the arguments, or an element of the one argument
                flags |= arguments | _elements(arguments)
            elif name == "copy.deepcopy":
                flags |= arguments | M
            elif name == "copy.copy":
                flags |= arguments
            elif name.startswith("torch.") and arguments & (M | D | S | H):
                flags |= M  # an op on a number or a container: a value without storage
        helper = _helper_call(node)
        returned = self.helpers.flags(*helper, self.depth) if helper is not None and self.helpers is not None else 0
        if returned:  # a function of the project: what it returns, and its arguments inside what it returns
            flags |= returned | arguments | (_holding(arguments) if returned & (D | S) else 0)
        if helper is not None and self.helpers is not None and self.helpers.declares_number(helper[0]):
            flags |= M  # not summarised, its annotation says (`-> int`): the analysis believes it
        if isinstance(node.func, ast.Attribute):
            method, receiver = node.func.attr, self._eval(node.func.value)
            if receiver & (D | S):  # the analysis' container methods
                if method in ("get", "pop", "setdefault"):
                    flags |= _elements(receiver) | arguments | M
                elif method == "copy":
                    flags |= receiver
                elif method in ("values", "items"):
                    flags |= S | _holding(_elements(receiver))
                else:
                    flags |= M
            no_arguments = not node.args and not node.keywords
            if method in NUMBER_METHODS or method == "tolist" or (method == "type" and no_arguments) or receiver & M:
                flags |= M
        return flags

    # ---- storage: which values may share memory ------------------------------------------
    #
    # A finding needs a report leaf whose alias shares a token with the backprop tensor's (the
    # analysis' `_overlap`). Its tokens are parameters and free names (here: the name), allocation
    # sites (here: the node) and items of those (here: the owner's tokens). Joined over the whole
    # unit, per dotted name, they over-approximate every alias the analysis can give a value. The
    # alias table (`aliasing.py`) says which operations pass their operand's tokens on.

    def _shares_storage(self, value: ast.expr) -> bool:
        """Whether a returned `(backprop, ..., report)` may have a report leaf aliasing `backprop`.
        The analysis knows the positions of a sequence only from a display of 2 or 3 elements (here,
        or returned by a summarised helper): a returned name or call is checked through the
        displays it may be (`("seq", node)` tokens) and the helper calls it may come from."""
        self._settle_storage()
        if isinstance(value, (ast.Tuple, ast.List)):
            return self._display_shares(value)
        for token in self._storage(value):
            if type(token) is tuple and token[0] == "seq" and self._display_shares(self._displays[token[1]]):
                return True
            if type(token) is tuple and token[0] == "call":
                return True
        return False

    def captured_may_be_written(self, found: _Captures) -> bool:
        """Whether a capture may hold storage a later in-place write changes: a report entry (a
        returned name only if it may be a sequence), or a kept value holding the result of a detach
        or conversion whose receiver that write changes."""
        self._settle()
        reports = [value for value in found.reports if self._returnable(value)]  # as `_report_elements`
        if not (reports or found.kept):
            return False
        self._settle_storage()
        written = [(self._storage(target), found.where[id(target)]) for target in found.written]

        def changed_after(where: _Where) -> frozenset[Token]:
            return _union(storage for storage, at in written if _may_follow(at, where))

        # A write changes a report's entry only once its storage is in a container.
        entries = [(self._storage(entry), found.where[id(entry)]) for entry in found.entries]
        into_entries = [
            (storage, at)
            for storage, at in written
            if any(_may_follow(at, put) and _overlap(storage, stored) for stored, put in entries)
        ]
        for returned in reports:
            where = found.where[id(returned)]
            changed = _union(storage for storage, at in into_entries if _may_follow(where, at))
            if any(_overlap(self._storage(report), changed) for report in self._report_elements([returned])):
                return True
        # A kept alias is the receiver's storage through the call: a value holds one only if it holds the
        # call's own result (its node's token, or a part of it), and a write changes it only if it
        # overlaps that receiver.
        receivers = {call: self._storage(receiver) for call, receiver in found.keeping.items()}
        if not _overlap(_union(iter(receivers.values())), _union(storage for storage, _ in written)):
            return False
        for value in found.kept:
            made = _union(receivers[named] for named in map(_named, self._storage(value)) if named in receivers)
            owner = found.stored_in.get(id(value))  # `x[i] = v` keeps `v` only in a container
            if _overlap(made, changed_after(found.where[id(value)])) and (
                owner is None or bool(self._eval(owner) & (D | S))
            ):
                return True
        return False

    def report_may_be_written(self, written: list[ast.expr], returned: list[ast.expr]) -> bool:
        """`captured_may_be_written` for report entries, in any order of writes and returns."""
        self._settle()
        if not any(self._returnable(value) for value in returned):
            return False  # no report tuple (`_report_elements`): storage need not be settled
        self._settle_storage()
        changed = _union(self._storage(target) for target in written)
        return any(_overlap(self._storage(report), changed) for report in self._report_elements(returned))

    def _report_elements(self, returned: list[ast.expr]) -> Iterator[ast.expr]:
        """The last elements of the 2- and 3-element displays the returned values may be (`_shares_storage`),
        those that may be dicts: `captures.py` takes a dict or a record for a report. A helper's display
        (a `("call", ...)` token) is the whole returned value."""
        for value in returned:
            if type(value) in (ast.Tuple, ast.List):
                displays = [value] if len(value.elts) in (2, 3) else []
            elif not self._returnable(value):
                continue  # `captures._captures_at_return`: a 2- or 3-element sequence ending in a dict
            else:
                tokens = [t for t in self._storage(value) if type(t) is tuple and t[0] in ("seq", "call")]
                if any(t[0] == "call" for t in tokens):
                    yield value
                displays = [self._displays[t[1]] for t in tokens if t[0] == "seq"]
            yield from (d.elts[-1] for d in displays if self._eval(d.elts[-1]) & D)

    def _display_shares(self, display: ast.Tuple | ast.List) -> bool:
        assert self._store is not None
        if _overlap(self._storage(display.elts[0]), self._storage(display.elts[-1])):
            return True
        # A display whose report was updated through a name holding it (`out[1].update(...)`).
        marker = ("seq", id(display))
        return any(marker in self._store.get(owner, _NO_TOKENS) for owner in self._mutated)

    def _settle_storage(self) -> None:
        if self._store is not None:
            return
        self._settle()  # the container flags tell an opaque value, whose elements are disjoint, from a container
        self._store = {}
        while True:  # rounds until one grows nothing it had read before (as `_settle`)
            self._grew_after_read = False
            self._store_seen.clear()
            self._wild_seen.clear()
            self._read_whole_store = False
            self._known_storage.clear()
            for node in self.bindings:
                self._store_statement(node)
            for call in self.calls:
                self._storage(call)
            if not self._grew_after_read:
                return

    def _grow(self, table: dict[str, frozenset[Token]], name: str, tokens: frozenset[Token]) -> None:
        old = table.get(name, _NO_TOKENS)
        if not tokens <= old:
            table[name] = old | tokens
            seen = self._wild_seen if table is self._wild else self._store_seen
            self._grew_after_read |= name in seen or (table is self._store and self._read_whole_store)

    def _store_statement(self, node: ast.AST) -> None:
        kind = type(node)
        if kind is ast.Assign:
            tokens = self._storage(node.value)
            opaque = not self._eval(node.value) & (D | S)
            for target in node.targets:
                if opaque and type(target) in (ast.Tuple, ast.List) and not _has_starred(target.elts):
                    # `loss, extra = f()`: each position of an opaque value is its own storage.
                    for position, element in enumerate(target.elts):
                        self._bind_storage(element, _narrowed(tokens, position))
                else:
                    self._bind_storage(target, tokens)
        elif kind is ast.AnnAssign or kind is ast.NamedExpr:
            if node.value is not None:
                self._bind_storage(node.target, self._storage(node.value))
        elif kind is ast.AugAssign:  # in place on a tensor, a new value on a number, more elements on a list
            tokens = self._storage(node.target) | {id(node)}
            if self._eval(node.target) & (D | S | H):  # `analysis._exec_augassign`: only a container takes v's
                tokens |= self._storage(node.value)
            self._bind_storage(node.target, tokens)
        elif kind in (ast.For, ast.AsyncFor, ast.comprehension):
            self._bind_storage(node.target, self._storage(node.iter))
        elif kind is ast.withitem:
            if node.optional_vars is not None:
                self._bind_storage(node.optional_vars, self._storage(node.context_expr) | {id(node)})
        elif kind in _FUNCTIONS:  # a nested def: calling it gives what it returns
            tokens = _NO_TOKENS
            for value in self.own_returns(node):
                tokens |= self._storage(value)
            self._grow(self._store, node.name, tokens)
        elif kind is ast.Call:
            self._storage(node)

    def _bind_storage(self, target: ast.expr, tokens: frozenset[Token]) -> None:
        assert self._store is not None
        kind = type(target)
        if kind is ast.Name or kind is ast.Attribute:
            name = _dotted(target)
            if name is not None:
                self._grow(self._store, name, tokens)
        elif kind is ast.Subscript:  # an entry of a container (or an in-place write to a tensor)
            owner = _owner(target.value)
            if owner is not None:
                self._mutated.add(owner)
                self._grow(self._store, owner, tokens)
        elif kind is ast.Tuple or kind is ast.List:
            for element in target.elts:
                self._bind_storage(element, tokens)
        elif kind is ast.Starred:
            self._bind_storage(target.value, tokens)

    def _lookup(self, name: str) -> frozenset[Token]:
        assert self._store is not None
        self._store_seen.add(name)
        found = self._store.get(name, _NO_TOKENS) | {name}
        head = name
        while "." in head:
            head = head.rpartition(".")[0]
            self._wild_seen.add(head)
            found |= self._wild.get(head, _NO_TOKENS)
        return found

    def own_returns(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr]:
        if id(function) not in self._own:
            self._own[id(function)] = list(_own_returns(function))
        return self._own[id(function)]

    def _storage(self, node: ast.expr) -> frozenset[Token]:
        """What `node` may share storage with (memoised per round of the fixpoint: within a round a
        value may lag behind, the next round catches it up)."""
        found = self._known_storage.get(id(node))
        if found is None:
            found = self._known_storage[id(node)] = self._storage_of(node)
        return found

    def _storage_of(self, node: ast.expr) -> frozenset[Token]:
        kind = type(node)
        if kind is ast.Name:
            return _NO_TOKENS if node.id in ("None", "True", "False") else self._lookup(node.id)
        if kind is ast.Attribute:
            if any(q.startswith("torch.") for q in self._qualified(node)):
                return _NO_TOKENS  # torch.float32 and the like
            name = _dotted(node)
            found = self._lookup(name) if name is not None else frozenset({id(node)})
            if attribute_alias_kind(node.attr) is not None:
                found |= self._storage(node.value)
            return found
        if kind is ast.Constant or kind is ast.JoinedStr:
            return _NO_TOKENS
        if kind is ast.Lambda:
            return self._storage(node.body)
        if kind is ast.Dict:
            return _union(self._storage(value) for value in node.values)
        if kind is ast.Tuple or kind is ast.List:
            found = _union(self._storage(element) for element in node.elts)
            if len(node.elts) in (2, 3) and not any(type(e) is ast.Starred for e in node.elts):
                self._displays[id(node)] = node
                found |= {("seq", id(node))}
            return found
        if kind is ast.Starred or kind is ast.NamedExpr:
            if kind is ast.NamedExpr:
                self._bind_storage(node.target, self._storage(node.value))
            return self._storage(node.value)
        if kind is ast.ListComp or kind is ast.GeneratorExp:
            return self._storage(node.elt)
        if kind is ast.DictComp:
            return self._storage(node.value)
        if kind is ast.Subscript:  # an item, a view, or a copy (advanced indexing)
            found = self._storage(node.value)
            key = node.slice.value if type(node.slice) is ast.Constant else None
            if (type(key) is str or (type(key) is int and key >= 0)) and not self._eval(node.value) & (D | S):
                return _narrowed(found, key)  # `out[0]`, `batch["labels"]`: one part of an opaque value
            return found | {id(node)}
        if kind is ast.IfExp:
            return self._storage(node.body) | self._storage(node.orelse)
        if kind is ast.BoolOp:
            return _union(self._storage(value) for value in node.values)
        if kind is ast.Call:
            return self._call_storage(node)
        return frozenset({id(node)})  # a new value: arithmetic, comparisons, sets, awaits, ...

    def _call_storage(self, node: ast.Call) -> frozenset[Token]:
        assert self._store is not None
        arguments = _union(self._storage(arg.value if type(arg) is ast.Starred else arg) for arg in node.args)
        arguments |= _union(self._storage(keyword.value) for keyword in node.keywords)
        found = {id(node)}
        if any(_passes_arguments(name) for name in self._qualified(node.func)):
            found |= arguments
        func = node.func
        owners: list[str] = []
        if type(func) is ast.Attribute:
            receiver = self._storage(func.value)
            if func.attr in _PASSING_METHODS:
                found |= receiver | arguments  # `d.get(k, default)`
            elif method_alias_kind(func.attr) is not None and not _copies(node):
                # `x.view(shape)`, `x.to(device)`: the receiver only; `np.transpose(x)`: a module's function
                of_module = (_dotted(func.value) or "").partition(".")[0] in self.qualified
                found |= receiver | arguments if of_module else receiver
            if func.attr in CONTAINER_MUTATORS:
                owner = _owner(func.value)
                if owner is not None:
                    self._mutated.add(owner)
                    self._grow(self._store, owner, arguments)
        helper = _helper_call(node)
        if helper is None or (self.helpers is not None and not self.helpers.may_summarise(*helper, self.depth)):
            return frozenset(found)
        if helper[1]:
            owners.append("self")
        # A function the analysis may summarise: its value may hold what it returns of its arguments
        # (and of their attributes, `self`'s too), and it may store its arguments into them
        # (`report[k] = v`, `self.x = v`). Each def of that name says which (`_Passing`).
        nested = _dotted(func) or ""
        self._store_seen.add(nested)
        found |= self._store.get(nested, _NO_TOKENS)  # a nested def: what it returns
        passings = self.helpers.passing(*helper, self.depth) if self.helpers is not None else None
        receiver_owner = owners[:1]  # ["self"] for a method of `self`
        method = bool(receiver_owner)
        reaching = [arg for arg, reaches in _bound_arguments(node, passings, method, _REACHING) if reaches]
        found |= _union(self._storage(arg) for arg in reaching)
        readers = [*receiver_owner] if passings is None or any(p.reads_self for p in passings) else []
        readers += [name for arg in reaching if (name := _dotted(arg))]
        for owner in readers:
            prefix = owner + "."
            found.add(("*", owner))
            self._wild_seen.add(owner)
            self._read_whole_store = True
            found |= self._wild.get(owner, _NO_TOKENS)
            for name, tokens in self._store.items():
                if name.startswith(prefix):
                    found |= tokens
        if reaching and (self.helpers is None or self.helpers.flags(*helper, self.depth) & S):
            found.add(("call", id(node)))  # a display of the helper's, its elements from the arguments
        if passings is None or any(p.written for p in passings):
            given = arguments | {id(node)}
            if method and passings is not None and not any(p.writes_self for p in passings):
                owners.clear()  # `self` is not written
            written = _bound_arguments(node, passings, method, _WRITTEN)
            owners += [name for arg, writes in written if writes and (name := _dotted(arg))]
            self._mutated.update(owners)
            for owner in owners:
                self._grow(self._store, owner, given)
                self._grow(self._wild, owner, given)
        return frozenset(found)


@dataclasses.dataclass(frozen=True)
class _Passing:
    """What one def does with its parameters, for `_Flow`'s storage: which of them its returns may
    hold (or hold attributes of), and which it writes into (or rebinds to a container, which the
    analysis applies to the caller's argument too: a summary's effects are per parameter)."""

    params: tuple[str, ...]  # in the order `analysis._parameters` binds them
    reaching: frozenset[str]
    written: frozenset[str]

    @property
    def reads_self(self) -> bool:
        return bool(self.params) and self.params[0] in self.reaching

    @property
    def writes_self(self) -> bool:
        return bool(self.params) and self.params[0] in self.written

    @classmethod
    def of(cls, node: ast.FunctionDef | ast.AsyncFunctionDef, flow: _Flow) -> _Passing:
        params = tuple(a.arg for a in _parameters(node.args))
        flow._settle_storage()
        assert flow._store is not None
        returned = _union(flow._storage(value) for value in flow.own_returns(node))
        reaching = frozenset(p for p in params if _holds(returned, p))
        names = [*flow._store, *flow._mutated]
        written = frozenset(p for p in params if any(name == p or name.startswith(p + ".") for name in names))
        return cls(params, reaching, written)


def _holds(tokens: frozenset[Token], name: str) -> bool:
    """Whether `tokens` may hold `name`'s value or one of its attributes."""
    prefix = name + "."
    for token in tokens:
        named = _named(token)
        if type(named) is str and (named == name or named.startswith(prefix)):
            return True
    return False


_REACHING: Callable[[_Passing], frozenset[str]] = operator.attrgetter("reaching")
_WRITTEN: Callable[[_Passing], frozenset[str]] = operator.attrgetter("written")


def _bound_arguments(
    node: ast.Call, passings: list[_Passing] | None, method: bool, which: Callable[[_Passing], frozenset[str]]
) -> Iterator[tuple[ast.expr, bool]]:
    """Each argument of a call, and whether it is bound to a parameter in `which` parameters of some
    def it may call (as `analysis._apply_summary` binds them: by position, by keyword; `*args` and
    `**kwargs` are not)."""
    for position, arg in enumerate(node.args):
        if type(arg) is ast.Starred:
            yield arg.value, passings is None  # not bound: the helper never sees it
            continue
        yield arg, passings is None or any(_is_in(p, which(p), position + method, None) for p in passings)
    for keyword in node.keywords:
        yield keyword.value, passings is None or any(_is_in(p, which(p), None, keyword.arg) for p in passings)


def _is_in(passing: _Passing, params: frozenset[str], position: int | None, keyword: str | None) -> bool:
    if position is not None:
        return position >= len(passing.params) or passing.params[position] in params
    return keyword is None or keyword not in passing.params or keyword in params


# An allocation site (node id), a name, ("*", owner): any attribute of it, ("seq", id): a display of
# 2 or 3 elements, ("call", id): a summarised call that may return one of its helper's.
Token = int | str | tuple[str, str] | tuple[str, int]
_NO_TOKENS: frozenset[Token] = frozenset()
# Calls that give (part of) their arguments back: containers made of them, one of them, a shallow copy.
_PASSING_FUNCTIONS = frozenset({"list", "tuple", "zip", "max", "min", "copy.copy"})
# Methods that give (part of) their receiver or arguments back, besides the alias table's.
_PASSING_METHODS = frozenset({"get", "pop", "setdefault", "copy", "values", "items"})


def _passes_arguments(qualified: str) -> bool:
    """Containers made of the arguments, one of them, a shallow copy, a torch alias of one."""
    if qualified in _PASSING_FUNCTIONS or _is_mapping(qualified):
        return True
    return qualified.startswith("torch.") and torch_function_alias_kind(qualified[len("torch.") :]) is not None


def _copies(node: ast.Call) -> bool:
    """`x.to(..., copy=True)`: a conversion the analysis takes for a copy (`analysis._call_method`)."""
    func = node.func
    return (
        type(func) is ast.Attribute
        and method_alias_kind(func.attr) is AliasKind.MAY_RETURN_SELF
        and any(
            k.arg == COPY_KEYWORD and type(k.value) is ast.Constant and k.value.value is True for k in node.keywords
        )
    )


def _union(parts: Iterator[frozenset[Token]]) -> frozenset[Token]:
    found = _NO_TOKENS
    for part in parts:
        found = found | part if found else part
    return found


def _narrowed(tokens: frozenset[Token], key: int | str) -> frozenset[Token]:
    """Part `key` of an opaque value: `("at", token, key)` shares storage with `token`, never with
    another part (the analysis' index and item tokens)."""
    # A part of a part stays the first part: coarser, and the tokens of a loop (`x = x[0]`) stay finite.
    return frozenset(t if type(t) is tuple and t[0] in ("*", "seq", "call", "at") else ("at", t, key) for t in tokens)


def _has_starred(elements: list[ast.expr]) -> bool:
    return any(type(e) is ast.Starred for e in elements)


def _overlap(first: frozenset[Token], second: frozenset[Token]) -> bool:
    if not first.isdisjoint(second):
        return True
    for one, other in ((first, second), (second, first)):
        for token in one:
            if type(token) is tuple and token[0] == "at" and token[1] in other:
                return True  # a part shares storage with what it is part of
            if type(token) is tuple and token[0] == "*":
                prefix = token[1] + "."
                for candidate in other:
                    named = _named(candidate)
                    if type(named) is str and ((named + ".").startswith(prefix) or prefix.startswith(named + ".")):
                        return True
    return False


def _named(token: Token) -> object:
    """The name a token is about: an owner's, a part's whole's, or its own."""
    return token[1] if type(token) is tuple and token[0] in ("*", "at") else token


def _owner(node: ast.expr) -> str | None:
    """The dotted name a container entry belongs to: `report` for `report["k"]`, `d` for `d[a][b]`."""
    while type(node) is ast.Subscript:
        node = node.value
    return _dotted(node)


def _helper_call(node: ast.Call) -> tuple[str, bool] | None:
    """(name, whether a method of `self`) of a call the analysis may summarise."""
    func = node.func
    if type(func) is ast.Name:
        return func.id, False
    if type(func) is ast.Attribute and _dotted(func.value) == "self":
        return func.attr, True
    return None


def _may_have_effects(node: ast.Call, helpers: _Helpers | None, depth: int) -> bool:
    """A method of `self`, or a function given arguments, that the analysis may summarise: it may
    apply the summary's effects on `self.x` or on the arguments."""
    helper = _helper_call(node)
    if helper is None or not (helper[1] or node.args or node.keywords):
        return False
    return helpers is None or helpers.may_summarise(*helper, depth)


def _called_may_give(helpers: _Helpers, span: str) -> Iterator[int]:
    """For each name called in `span`, what the functions and methods of that name may return."""
    for name in _CALLED.findall(span):
        yield helpers.flags(name, False, 0) | helpers.flags(name, True, 0)


_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef})
# Statements with no statements inside them (a `return` is a statement: only blocks hold one).
_EXPRESSION_STATEMENTS = frozenset({ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise, ast.Assert})


def _own_returns(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.expr]:
    """The returned values of a def's own body (not of the functions inside it)."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Return:
            if node.value is not None:
                yield node.value
        elif kind not in _SCOPES and kind not in _EXPRESSION_STATEMENTS:
            for field in _BLOCK_FIELDS:
                stack.extend(getattr(node, field, ()))


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
        except _PARSE_ERRORS:
            return None
    return Reduced(reduced, tuple(numbers), tree)


def _newline(line: str) -> str:
    stripped = line.rstrip("\r\n")
    return line[len(stripped) :]
