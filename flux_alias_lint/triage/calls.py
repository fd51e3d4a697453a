"""The flows' transfers for calls: what a builtin, a torch function, a method or a container method
gives (flags and storage) and how a container method updates its receiver, read from `facts.storage`'s
rows; and the calls of the project's functions, which the analysis summarises (`summaries.py`)."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..facts.storage import (
    BUILTINS,
    CONTAINER_METHODS,
    CONTAINER_MUTATORS,
    MAPPING_NAMES,
    MAPPING_UPDATE,
    Gives,
    Updates,
)
from ..facts.tensor_ops import (
    COPY_KEYWORD,
    NUMBER_METHODS,
    NUMBER_WITHOUT_ARGUMENTS,
    AliasKind,
    method_alias_kind,
    torch_function_alias_kind,
)
from .syntax import _dotted, _owner
from .values import _NO_TOKENS, D, H, M, S, Token, _elements, _holding, _union

if TYPE_CHECKING:
    from .flows import _Flow
    from .summaries import _Helpers, _Passing

# ---- the rows of `facts.storage`, one transfer each --------------------------------------
#
# What a call gives, as flow flags, by its row's `Gives`: f(the receiver's flags, or 0 for a function;
# the arguments' flags, joined). A container method's row is read only on a container (`D | S`); an
# unlisted method of one gives `M`, as the analysis' container methods give an unknown value.
FLAG_GIVES: dict[Gives, Callable[[int, int], int]] = {
    Gives.NUMBER: lambda receiver, arguments: M,
    Gives.MAPPING: lambda receiver, arguments: D | _holding(arguments),
    Gives.SEQUENCE_OF_ELEMENTS: lambda receiver, arguments: S | _holding(_elements(arguments)),
    # Coarser than the analysis, which follows `zip`'s tuples: no flags, a fresh value here, whose
    # storage (`STORAGE_GIVES`) still holds the arguments'.
    Gives.TUPLES_OF_ELEMENTS: lambda receiver, arguments: 0,
    Gives.ONE_OF_ARGUMENTS: lambda receiver, arguments: arguments | _elements(arguments),
    Gives.DEEP_COPY: lambda receiver, arguments: arguments | M,
    Gives.SAME_STORAGE: lambda receiver, arguments: arguments,
    Gives.UNTRACKED_CONTAINER: lambda receiver, arguments: 0,  # its elements are not followed
    Gives.ENTRY_OR_DEFAULT: lambda receiver, arguments: _elements(receiver) | arguments | M,
    Gives.RECEIVER: lambda receiver, arguments: receiver,
    Gives.ENTRIES: lambda receiver, arguments: S | _holding(_elements(receiver)),
    Gives.KEY_ENTRY_PAIRS: lambda receiver, arguments: S | _holding(_elements(receiver)),
    Gives.NOTHING: lambda receiver, arguments: M,  # None
}

# What a call may share storage with, besides its own node, by its row's `Gives`: f(the receiver's
# tokens, or none for a function; the arguments' tokens). A container method's row is read on any
# receiver (a tensor's `values()` is the alias table's view of it: the same tokens).
STORAGE_GIVES: dict[Gives, Callable[[frozenset[Token], frozenset[Token]], frozenset[Token]]] = {
    Gives.NUMBER: lambda receiver, arguments: _NO_TOKENS,
    Gives.MAPPING: lambda receiver, arguments: arguments,
    Gives.SEQUENCE_OF_ELEMENTS: lambda receiver, arguments: arguments,
    Gives.TUPLES_OF_ELEMENTS: lambda receiver, arguments: arguments,
    Gives.ONE_OF_ARGUMENTS: lambda receiver, arguments: arguments,
    Gives.DEEP_COPY: lambda receiver, arguments: _NO_TOKENS,
    Gives.SAME_STORAGE: lambda receiver, arguments: arguments,
    # The set's elements are not followed, by the analysis either: a fresh value.
    Gives.UNTRACKED_CONTAINER: lambda receiver, arguments: _NO_TOKENS,
    Gives.ENTRY_OR_DEFAULT: lambda receiver, arguments: receiver | arguments,
    Gives.RECEIVER: lambda receiver, arguments: receiver | arguments,
    Gives.ENTRIES: lambda receiver, arguments: receiver | arguments,
    Gives.KEY_ENTRY_PAIRS: lambda receiver, arguments: receiver | arguments,
    Gives.NOTHING: lambda receiver, arguments: _NO_TOKENS,
}


def _flags_add(flow: _Flow, owner: str, node: ast.Call) -> None:
    """A container's flags take in what it is given (`log.append(x)`); anything else's are not a container's."""
    if flow._get(owner) & (D | S):
        flow._join(owner, _holding(flow._arguments(node)))


def _flags_add_entries(flow: _Flow, owner: str, node: ast.Call) -> None:
    """Given a mapping or keywords, the receiver is a mapping whatever it was (`metric.update({...})`)."""
    if _updates_a_mapping(node):
        flow._join(owner, D | _holding(flow._arguments(node)))
    else:
        _flags_add(flow, owner, node)


def _flags_keep(flow: _Flow, owner: str, node: ast.Call) -> None:
    """Flags only grow over the unit: what a call removes stays in them."""


def _storage_add(flow: _Flow, receiver: ast.expr, arguments: frozenset[Token]) -> None:
    """The receiver's owner (`d` of `d[k].append(v)`) holds the arguments' storage from then on."""
    owner = _owner(receiver)
    if owner is not None:
        flow._mutated.add(owner)
        flow._grow(flow._store, owner, arguments)


def _storage_keep(flow: _Flow, receiver: ast.expr, arguments: frozenset[Token]) -> None:
    """Storage only grows over the unit: what a call removes stays in it."""


# How a container method changes its receiver, by its row's `Updates`: the flags pass (`_statement`,
# for the calls `Walk.bindings` holds: the mutators) and the storage pass (`_call_storage`).
FLAG_UPDATES: dict[Updates, Callable[[_Flow, str, ast.Call], None]] = {
    Updates.NOTHING: _flags_keep,
    Updates.ADDS_ARGUMENT: _flags_add,
    Updates.ADDS_ELEMENTS: _flags_add,  # coarser than the analysis: a dict anywhere in the argument
    Updates.ADDS_ENTRIES: _flags_add_entries,
    Updates.ADDS_DEFAULT: _flags_add,
    Updates.REMOVES_ENTRY: _flags_keep,
    Updates.CLEARS: _flags_keep,
}
STORAGE_UPDATES: dict[Updates, Callable[[_Flow, ast.expr, frozenset[Token]], None]] = {
    Updates.NOTHING: _storage_keep,
    Updates.ADDS_ARGUMENT: _storage_add,
    Updates.ADDS_ELEMENTS: _storage_add,
    Updates.ADDS_ENTRIES: _storage_add,
    Updates.ADDS_DEFAULT: _storage_add,
    Updates.REMOVES_ENTRY: _storage_keep,
    Updates.CLEARS: _storage_keep,
}


def _gives(qualified: str) -> Gives | None:
    """What a call of this qualified name gives, by its row of `facts.storage.BUILTINS`. A mapping
    constructor is known by its last name too (`typing.OrderedDict`, a re-export): coarser than the
    analysis, which knows only the rows' qualified names."""
    row = BUILTINS.get(qualified)
    if row is not None:
        return row.gives
    return Gives.MAPPING if qualified.rpartition(".")[2] in MAPPING_NAMES else None


def _is_mapping(qualified: str) -> bool:
    return _gives(qualified) is Gives.MAPPING


def _updates_a_mapping(node: ast.Call) -> bool:
    """`analysis.calls._updates_a_mapping`: `x.update(...)` given a dict display or keywords."""
    if not (isinstance(node.func, ast.Attribute) and node.func.attr == MAPPING_UPDATE):
        return False
    return bool(node.keywords) or any(isinstance(arg, (ast.Dict, ast.DictComp)) for arg in node.args)


def _is_mutation(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CONTAINER_MUTATORS


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


def _copies(node: ast.Call) -> bool:
    """`x.to(..., copy=True)`: a conversion the analysis takes for a copy (`analysis.calls._call_method`)."""
    func = node.func
    return (
        type(func) is ast.Attribute
        and method_alias_kind(func.attr) is AliasKind.MAY_RETURN_SELF
        and any(
            k.arg == COPY_KEYWORD and type(k.value) is ast.Constant and k.value.value is True for k in node.keywords
        )
    )


_REACHING: Callable[[_Passing], frozenset[str]] = operator.attrgetter("reaching")
_WRITTEN: Callable[[_Passing], frozenset[str]] = operator.attrgetter("written")


def _bound_arguments(
    node: ast.Call, passings: list[_Passing] | None, method: bool, which: Callable[[_Passing], frozenset[str]]
) -> Iterator[tuple[ast.expr, bool]]:
    """Each argument of a call, and whether it is bound to a parameter in `which` parameters of some
    def it may call (as `analysis.summaries._apply_summary` binds them: by position, by keyword; `*args` and
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


class _Calls:
    """`_Flow`'s calls: what each may give, as flags (`_call`) and as storage (`_call_storage`)."""

    def _call(self, node: ast.Call) -> int:
        arguments = self._arguments(node)
        flags = 0
        for name in self._qualified(node.func):
            gives = _gives(name)
            if gives is not None:
                flags |= FLAG_GIVES[gives](0, arguments)
            elif name.startswith("torch.") and arguments & (M | D | S | H):
                flags |= M  # an op on a number or a container: a value without storage
        helper = _helper_call(node)
        returned = self.helpers.flags(*helper, self.depth) if helper is not None and self.helpers is not None else 0
        if returned and self._makes_a_record(helper):  # it holds what it is given, as a dict does
            flags |= FLAG_GIVES[Gives.MAPPING](0, arguments)
        elif returned:  # a function of the project: what it returns, and its arguments inside what it returns
            flags |= returned | arguments | (_holding(arguments) if returned & (D | S) else 0)
        if helper is not None and self.helpers is not None and self.helpers.declares_number(helper[0]):
            flags |= M  # not summarised, its annotation says (`-> int`): the analysis believes it
        if isinstance(node.func, ast.Attribute):
            method, receiver = node.func.attr, self._eval(node.func.value)
            if receiver & (D | S):  # the analysis' container methods
                row = CONTAINER_METHODS.get(method)
                flags |= FLAG_GIVES[row.gives](receiver, arguments) if row is not None else M
            no_arguments = not node.args and not node.keywords
            if method in NUMBER_METHODS or (method in NUMBER_WITHOUT_ARGUMENTS and no_arguments) or receiver & M:
                flags |= M
        return flags

    def _makes_a_record(self, helper: tuple[str, bool] | None) -> bool:
        """Whether the call `_helper_call` read as `helper` makes a record of the project (`_Helpers.is_record`)."""
        return helper is not None and not helper[1] and self.helpers is not None and self.helpers.is_record(helper[0])

    def _call_storage(self, node: ast.Call) -> frozenset[Token]:
        assert self._store is not None
        arguments = _union(self._storage(arg.value if type(arg) is ast.Starred else arg) for arg in node.args)
        arguments |= _union(self._storage(keyword.value) for keyword in node.keywords)
        found = {id(node)}
        for name in self._qualified(node.func):
            gives = _gives(name)
            if gives is not None:
                found |= STORAGE_GIVES[gives](_NO_TOKENS, arguments)
            elif name.startswith("torch.") and torch_function_alias_kind(name[len("torch.") :]) is not None:
                found |= arguments  # a torch alias of an argument
        func = node.func
        owners: list[str] = []
        if type(func) is ast.Attribute:
            receiver = self._storage(func.value)
            row = CONTAINER_METHODS.get(func.attr)
            if row is not None:  # the row, not the alias table (`values`: a view either way)
                found |= STORAGE_GIVES[row.gives](receiver, arguments)  # `d.get(k, default)`
                STORAGE_UPDATES[row.updates](self, func.value, arguments)
            elif method_alias_kind(func.attr) is not None and not _copies(node):
                # `x.view(shape)`, `x.to(device)`: the receiver only; `np.transpose(x)`: a module's function
                of_module = (_dotted(func.value) or "").partition(".")[0] in self.qualified
                found |= receiver | arguments if of_module else receiver
        helper = _helper_call(node)
        if self._makes_a_record(helper):
            found |= STORAGE_GIVES[Gives.MAPPING](_NO_TOKENS, arguments)  # it holds what it is given, as a dict does
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
