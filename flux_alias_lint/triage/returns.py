"""What a loss function's return may be: the report shapes (`facts.reports`) by the kind of each
returned expression, before any flow runs, and then by the flow's flags and storage."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..facts.reports import REPORT_LENGTHS
from .calls import _helper_call, _is_mapping
from .syntax import _BLOCK_FIELDS, _EXPRESSION_STATEMENTS, _SCOPES, _has_starred
from .values import _NO_TOKENS, D, H, S, _overlap

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
                if (
                    len(elements) in REPORT_LENGTHS
                    and not _has_starred(elements)
                    and isinstance(elements[-1], _MAY_BE_DICT)
                ):
                    return True
            elif value is not None and isinstance(value, _MAY_BE_SEQUENCE):
                return True
        elif kind not in _EXPRESSION_STATEMENTS:
            for field in _BLOCK_FIELDS:
                stack.extend(getattr(node, field, ()))
    return False


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


class _Returns:
    """`_Flow`'s questions about returns: may one be a report tuple, sharing storage with its loss."""

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

    def _returnable(self, value: ast.expr) -> bool:
        """Can this be `(backprop, report)` or `(backprop, n, report)` with `report` a dict?"""
        if isinstance(value, (ast.Tuple, ast.List)):
            elements = value.elts
            if any(isinstance(e, ast.Starred) for e in elements) or len(elements) not in REPORT_LENGTHS:
                return False
            return bool(self._eval(elements[-1]) & D)
        flags = self._eval(value)
        return bool(flags & S and flags & H)

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

    def _report_elements(self, returned: list[ast.expr]) -> Iterator[ast.expr]:
        """The last elements of the 2- and 3-element displays the returned values may be (`_shares_storage`),
        those that may be dicts: `captures.py` takes a dict or a record for a report. A helper's display
        (a `("call", ...)` token) is the whole returned value."""
        for value in returned:
            if type(value) in (ast.Tuple, ast.List):
                displays = [value] if len(value.elts) in REPORT_LENGTHS else []
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
