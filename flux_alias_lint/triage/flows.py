"""The flow over a unit's `ast` (`_Flow`): its statements and bindings, in two flow-insensitive
parts, the container flags (`_FlowFlags`) and the storage tokens (`_FlowStorage`); its calls'
transfers are `calls.py`'s, its questions `returns.py`'s and `captures.py`'s."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from ..facts.reports import REPORT_LENGTHS
from ..facts.storage import CONTAINER_METHODS, MAPPING_NAMES
from ..facts.tensor_ops import attribute_alias_kind, writes_in_place
from ..index.nodes import leaves_unchanged_write
from ..index.symbols import FUNCTIONS
from .calls import FLAG_UPDATES, _Calls, _helper_call, _is_mutation, _may_have_effects, _updates_a_mapping
from .captures import _CaptureQuestions
from .returns import _own_returns, _Returns
from .syntax import _CHILD_FIELDS, _LEAF_FIELDS, _LEAVES, _dotted, _has_starred, _owner, _parameters
from .values import _NO_TOKENS, D, H, M, S, Token, _elements, _holding, _narrowed, _union

if TYPE_CHECKING:
    from .summaries import _Helpers

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
        attribute = node.func.attr if kind is ast.Call and type(node.func) is ast.Attribute else None
        if attribute is not None and writes_in_place(attribute) and not leaves_unchanged_write(node):
            written.append(node.func.value)  # not `x.mul_(1)`: it writes no value
        if kind in _BINDING_NODES or (kind is ast.Call and _is_mutation(node)):
            bindings.append(node)
            if kind is ast.Call and _updates_a_mapping(node):
                makes_dict = True
        elif kind is ast.Call:
            if _helper_call(node) is not None:
                calls.append(node)
            elif type(node.func) is ast.Attribute and node.func.attr in MAPPING_NAMES:
                makes_dict = True
        elif (kind is ast.Tuple or kind is ast.List) and not display:
            display = len(node.elts) in REPORT_LENGTHS and not _has_starred(node.elts)
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


class _FlowFlags:
    """The container flags of `_Flow`: one set per name (or dotted name), joined over the whole unit."""

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
        elif kind is ast.Call:  # a container method that updates its receiver (`Walk.bindings`)
            owner = _dotted(node.func.value)
            if owner is not None:
                FLAG_UPDATES[CONTAINER_METHODS[node.func.attr].updates](self, owner, node)

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


class _FlowStorage:
    """The storage of `_Flow`: the tokens each name (or dotted name) may share, joined over the whole unit."""

    # ---- storage: which values may share memory ------------------------------------------
    #
    # A finding needs a report leaf whose alias shares a token with the backprop tensor's (the
    # analysis' `_overlap`). Its tokens are parameters and free names (here: the name), allocation
    # sites (here: the node) and items of those (here: the owner's tokens). Joined over the whole
    # unit, per dotted name, they over-approximate every alias the analysis can give a value. The
    # alias table (`facts.tensor_ops`) says which operations pass their operand's tokens on.

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

    def _grow(self, table: dict[str, set[Token]], name: str, tokens: frozenset[Token]) -> None:
        # Grown in place: a name given a new token at each of n statements (`r[f"k{i}"] =
        # loss.detach()`) would otherwise be copied n times. Every reader takes a copy or a union.
        old = table.get(name)
        if old is None and tokens:
            table[name] = set(tokens)
        elif old is not None and not tokens <= old:
            old |= tokens
        else:
            return
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
            if self._eval(node.target) & (
                D | S | H
            ):  # `analysis.statements._exec_augassign`: only a container takes v's
                tokens |= self._storage(node.value)
            self._bind_storage(node.target, tokens)
        elif kind in (ast.For, ast.AsyncFor, ast.comprehension):
            self._bind_storage(node.target, self._storage(node.iter))
        elif kind is ast.withitem:
            if node.optional_vars is not None:
                self._bind_storage(node.optional_vars, self._storage(node.context_expr) | {id(node)})
        elif kind in FUNCTIONS:  # a nested def: calling it gives what it returns
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
            owner = _owner(target.value) if kind is ast.Attribute and self._eval(target.value) & D else None
            if owner is not None:  # a record's field (`report.lm = v`): the record holds it, as a dict its entry
                self._mutated.add(owner)
                self._grow(self._store, owner, tokens)
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
        stored = self._store.get(name)
        found = frozenset({name}).union(stored) if stored else frozenset({name})
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
            # `.data`, `.T`; a record's field (`report.lm`: what the record was given).
            if attribute_alias_kind(node.attr) is not None or self._eval(node.value) & D:
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
            if len(node.elts) in REPORT_LENGTHS and not any(type(e) is ast.Starred for e in node.elts):
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


class _Flow(_FlowFlags, _FlowStorage, _Calls, _Returns, _CaptureQuestions):
    """Flow-insensitive: one set of flags per name (or dotted name) over the whole unit. Its parts:
    flags and storage (here), calls (`calls._Calls`), what returns may be (`returns._Returns`), what
    in-place writes may change (`captures._CaptureQuestions`)."""

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
        self._store: dict[str, set[Token]] | None = None  # by dotted name, once `_settle_storage` ran
        self._wild: dict[str, set[Token]] = {}  # what any attribute `<owner>.x` may have been given
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
