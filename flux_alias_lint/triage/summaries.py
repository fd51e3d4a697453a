"""The project's functions the analysis summarises, read on `ast`: a module's defs (`index.symbols.Symbols`,
another module's one def at a time: `_LazyDefs`), what calling each may give and what it does with its
arguments (`_Helpers`, `_Passing`), by the summary policy of `facts.policy`."""

from __future__ import annotations

import ast
import collections
import dataclasses
import os
import re

from ..facts.policy import SUMMARY_DEPTH
from ..facts.tensor_ops import attribute_alias_kind
from ..index.files import find_module
from ..index.symbols import PARSE_ERRORS, Def, Symbols, summarisable
from .calls import _is_mutation
from .captures import _assigned_into, _bound_names, may_keep_arguments
from .flows import Walk, _Flow, _walk
from .syntax import _dotted, _parameters, _quiet_parse
from .values import ALL, D, Token, _named, _union


class _LazyDefs:
    """Another module's `Symbols`, read one function at a time from its text: only the module's
    imports and the functions a flow asks for are parsed (a helper is at most `SUMMARY_LINES` long),
    each into a `Symbols` of its own, whose nested defs are the module's so far. Where the text
    cannot be cut so (a def whose lines do not end where the next statement at column 0 begins, a
    method asked for), the whole module is parsed once and its `Symbols` answers from then on."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._whole: Symbols | None = None
        self._cut: dict[str, list[Def]] = {}
        self._starts: dict[str, list[int]] | None = None
        self._nested: dict[str, list[Def]] = {}
        try:
            self._imports_only = Symbols(_quiet_parse("".join(match[0] for match in _IMPORT_STATEMENT.finditer(text))))
        except PARSE_ERRORS:
            self._imports_only = self._all()

    @property
    def imports(self) -> frozenset[tuple[str, str]]:
        return (self._whole or self._imports_only).imports

    @property
    def imported(self) -> dict[str, tuple[str, int, str]]:
        return (self._whole or self._imports_only).imported

    def _all(self) -> Symbols:
        if self._whole is None:
            try:
                tree = _quiet_parse(self._text)
            except PARSE_ERRORS:  # the analysis reads no function of a module CPython rejects: nor does this
                tree = ast.Module(body=[], type_ignores=[])
            self._whole = Symbols(tree)
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
                cut = _def_at(self._text, start, name)
                if cut is None:
                    return self._all().functions(name)
                found += cut.functions(name)
                for scope, inner in cut.scoped:
                    if scope:  # in the def: nested
                        self._nested.setdefault(inner.name, []).append(inner)
            self._cut[name] = found
        return self._cut[name]

    def methods(self, name: str) -> list[Def]:
        return self._all().methods(name)

    def nested(self, name: str) -> list[Def]:
        return self._whole.nested(name) if self._whole is not None else self._nested.get(name, [])

    def is_record(self, name: str) -> bool:
        """Whether the module's class `name` is a record (`index.symbols.Record`): the whole module is parsed only
        when its text defines a class of that name."""
        return ("class " + name) in self._text and name in self._all().records

    def declares_number(self, name: str) -> bool:
        if self._whole is not None:
            return self._whole.declares_number(name)
        return ("def " + name) in self._text and "->" in self._text  # some may: the flow lets it be a number


# A statement at column 0 that imports: its lines (a parenthesised list may span several).
_IMPORT_STATEMENT = re.compile(r"^(?:from[ \t]+[\w.]+[ \t]+import[ \t]*\([^)]*\)|(?:from|import)[ \t][^\n]*)\n?", re.M)


def _def_at(text: str, start: int, name: str) -> Symbols | None:
    """The def starting at `start` (column 0), parsed alone (the `Symbols` of a module of it alone):
    its lines run until the next line at column 0 that is not blank, a comment, or a bracket closing
    its signature. None: that cut does not parse to exactly this def (a string or bracket with lines
    at column 0 in it, a backslash)."""
    header_end = text.find("\n", start)
    following = _COLUMN_0_STATEMENT.search(text, header_end + 1) if header_end != -1 else None
    try:
        tree = _quiet_parse(text[start : following.start() if following else len(text)])
    except PARSE_ERRORS:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef) or tree.body[0].name != name:
        return None
    return Symbols(tree)


_COLUMN_0_STATEMENT = re.compile(r"^[^\s#)\]}]", re.M)
_DEF_AT_COLUMN_0 = re.compile(r"^def[ \t]+(\w+)", re.M)


class _Helpers:
    """What calling a function of the project may give, by the flow below over its own code: the
    analysis summarises these calls, so a helper that returns a container makes one, and one that
    passes its arguments on passes their storage. The defs of the file, and those imported by name
    from another module of the project (`from pkg.mod import f`); decided per name, when a unit
    calls it, at the depth of summaries the call is at."""

    def __init__(self, defs: Symbols | _LazyDefs, path: str, rough: bool = False) -> None:
        self._defs = defs
        self._path = path
        self._rough = rough  # imported helpers may return anything: no other module is read
        self._numbers: dict[str, bool] = {}  # `declares_number`, by name
        self._paths: dict[tuple[str, bool, int], str | None] = {}  # `_imported_path`
        self._known: dict[tuple[str, bool, int], int] = {}
        self._passings: dict[tuple[str, bool, int], list[_Passing] | None] = {}
        self._summarised: dict[tuple[str, bool, int], bool] = {}
        self._keeps: dict[tuple[str, bool, int], bool] = {}  # `may_keep`
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
            if imported is None or imported[0].startswith("torch"):  # torch's own modules are not the project's
                self._paths[key] = None
            else:
                self._paths[key] = _project_module(self._path, *imported[:2])
        return self._paths[key]

    def may_summarise(self, name: str, method: bool, depth: int) -> bool:
        """Whether the analysis may summarise the call (decided without reading another module)."""
        key = (name, method, depth)
        if key not in self._summarised:
            self._summarised[key] = bool(self._candidates(*key)) or self._imported_path(*key) is not None
        return self._summarised[key]

    def may_keep(self, name: str, method: bool, depth: int) -> bool:
        """Whether a def the call may run keeps something of its parameters where it outlives the
        call (what `analysis.summaries.Summary.kept` holds): it stores what may hold a parameter into
        an attribute or an entry, gives it to a container's method, or to a helper that may keep it."""
        key = (name, method, depth)
        if key not in self._keeps:
            self._keeps[key] = False  # recursion: a helper calling itself keeps nothing more by it
            found = any(self._keeps_a_parameter(node, at) for node, at in self._candidates(*key))
            path = self._imported_path(*key)
            if not found and path is not None:
                other = None if self._rough else _imported_helpers(path)
                found = other is None or other.may_keep(self._defs.imported[name][2], False, depth)
            self._keeps[key] = found
        return self._keeps[key]

    def _keeps_a_parameter(self, node: Def, depth: int) -> bool:
        nodes = list(ast.walk(node))
        holding = {argument.arg for argument in _parameters(node.args)}  # and the names bound from them
        grew = True
        while grew:
            grew = False
            for inner in nodes:
                kind = type(inner)
                if kind in (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr, ast.For, ast.AsyncFor):
                    value = inner.iter if kind in (ast.For, ast.AsyncFor) else inner.value
                    targets = inner.targets if kind is ast.Assign else [inner.target]
                elif kind is ast.withitem:
                    value, targets = inner.context_expr, [inner.optional_vars]
                else:
                    continue
                if value is None or not _mentions(value, holding):
                    continue
                names = {name for target in targets if target is not None for name in _bound_names(target)}
                if not names <= holding:
                    holding |= names
                    grew = True
        for inner in nodes:
            if type(inner) is ast.Call and (inner.args or inner.keywords):
                given = [*inner.args, *(keyword.value for keyword in inner.keywords)]
                if any(_mentions(value, holding) for value in given) and (
                    _is_mutation(inner) or may_keep_arguments(inner, self, depth)
                ):
                    return True
            elif _assigned_into(inner) and inner.value is not None and _mentions(inner.value, holding):
                return True
        return False

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

    def is_record(self, name: str) -> bool:
        """Whether a call of `name` makes a record of the project (`analysis.calls._call_record`): a class of this
        module or, one import deep, of the project's module it is imported from. It holds what it is given,
        and is a report as a dict is."""
        defs = self._defs
        if defs.is_record(name) if isinstance(defs, _LazyDefs) else name in defs.records:
            return True
        path = self._imported_path(name, False, 0)
        if path is None:
            return False
        other = None if self._rough else _imported_helpers(path)
        if other is None:
            return self._rough  # not read: it may be one
        imported = self._defs.imported[name][2]
        return isinstance(other._defs, _LazyDefs) and other._defs.is_record(imported)

    def _decide(self, name: str, method: bool, depth: int) -> int:
        flags = D if not method and self.is_record(name) else 0
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
    except (OSError, UnicodeDecodeError, *PARSE_ERRORS):
        helpers = None
    _LOADED[key] = helpers
    if len(_LOADED) > _LOADED_KEPT:
        _LOADED.popitem(last=False)
    return helpers


@dataclasses.dataclass(frozen=True)
class _Passing:
    """What one def does with its parameters, for `_Flow`'s storage: which of them its returns may
    hold (or hold attributes of), and which it writes into (or rebinds to a container, which the
    analysis applies to the caller's argument too: a summary's effects are per parameter)."""

    params: tuple[str, ...]  # in the order `analysis.statements._parameters` binds them
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


def _mentions(value: ast.AST, names: set[str]) -> bool:
    """Whether `value` may hold what one of `names` (dotted) holds, as the analysis reads it: `v`,
    `v[0]`, `v.data`, `v.detach()`, `f(v)`; not `self.x`, another object than `self` (a free name to
    the analysis) unless `self.x` is one of `names`."""
    stack = [value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Name:
            if node.id in names:
                return True
        elif kind is ast.Attribute:
            dotted = _dotted(node)
            if dotted is not None and dotted in names:
                return True
            if dotted is None or attribute_alias_kind(node.attr) is not None:
                stack.append(node.value)
        elif kind is ast.Call and type(node.func) is ast.Attribute:
            stack.append(node.func.value)  # the receiver of `v.detach()`
            stack.extend(node.args)
            stack.extend(keyword.value for keyword in node.keywords)
        else:
            stack.extend(ast.iter_child_nodes(node))
    return False


def _holds(tokens: frozenset[Token], name: str) -> bool:
    """Whether `tokens` may hold `name`'s value or one of its attributes."""
    prefix = name + "."
    for token in tokens:
        named = _named(token)
        if type(named) is str and (named == name or named.startswith(prefix)):
            return True
    return False
