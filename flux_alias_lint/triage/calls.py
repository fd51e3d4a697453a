"""The flows' transfers for calls: what a builtin, a torch function, a method or a container method
gives (flags and storage) and how a container method updates its receiver, read from `facts.storage`'s
rows; and the calls of the project's functions, which the analysis summarises (`summaries.py`)."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..facts.storage import CONTAINER_MUTATORS, MAPPING_CONSTRUCTORS, NUMBER_BUILTINS
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
    from .summaries import _Helpers, _Passing

_MAPPING_NAMES = frozenset(name.rpartition(".")[2] for name in MAPPING_CONSTRUCTORS)
# Calls that give (part of) their arguments back: containers made of them, one of them, a shallow copy.
_PASSING_FUNCTIONS = frozenset({"list", "tuple", "zip", "max", "min", "copy.copy"})
# Methods that give (part of) their receiver or arguments back, besides the alias table's.
_PASSING_METHODS = frozenset({"get", "pop", "setdefault", "copy", "values", "items"})


def _is_mapping(qualified: str) -> bool:
    return qualified in MAPPING_CONSTRUCTORS or qualified.rpartition(".")[2] in _MAPPING_NAMES


def _passes_arguments(qualified: str) -> bool:
    """Containers made of the arguments, one of them, a shallow copy, a torch alias of one."""
    if qualified in _PASSING_FUNCTIONS or _is_mapping(qualified):
        return True
    return qualified.startswith("torch.") and torch_function_alias_kind(qualified[len("torch.") :]) is not None


def _updates_a_mapping(node: ast.Call) -> bool:
    """`analysis._updates_a_mapping`: `x.update(...)` given a dict display or keywords."""
    if not (isinstance(node.func, ast.Attribute) and node.func.attr == "update"):
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
    """`x.to(..., copy=True)`: a conversion the analysis takes for a copy (`analysis._call_method`)."""
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


class _Calls:
    """`_Flow`'s calls: what each may give, as flags (`_call`) and as storage (`_call_storage`)."""

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
            if method in NUMBER_METHODS or (method in NUMBER_WITHOUT_ARGUMENTS and no_arguments) or receiver & M:
                flags |= M
        return flags

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
