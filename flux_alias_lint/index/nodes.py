"""Small readings of `ast` nodes the index's resolution and evidence share."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from ..facts.reports import RESCALING_METHODS, RESCALING_OPERATORS

# The `ast` operators of `RESCALING_OPERATORS` (a new operator there without one here fails at import).
_RESCALING_OPERATORS = tuple({"*=": ast.Mult, "/=": ast.Div}[operator] for operator in RESCALING_OPERATORS)


def last_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = function.args
    return [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]


def positional(function: ast.FunctionDef | ast.AsyncFunctionDef, through_attribute: bool) -> list[str]:
    """The parameters a call fills by position; `through_attribute`: called as `obj.m`, so a method's
    `self` or a classmethod's `cls` is given already (a staticmethod's first parameter is not)."""
    names = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    static = any(last_name(d) == "staticmethod" for d in getattr(function, "decorator_list", ()))
    return names[1:] if through_attribute and names and names[0] in ("self", "cls") and not static else names


def argument(call: ast.Call, keyword: str, position: int | None) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if position is not None and len(call.args) > position and not any(isinstance(a, ast.Starred) for a in call.args):
        return call.args[position]
    return None


def is_self_attribute(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def bound_names(nodes: Iterable[ast.AST]) -> set[str]:
    """The names `nodes` (one function's own) assign, define or import."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def rescaled_in_place(nodes: Iterable[ast.AST]) -> dict[str, int]:
    """The names rescaled in place among `nodes` (`x /= n`, `x *= k`, `x.div_(n)`, `x.mul_(k)` as a
    statement), each with the first line doing it."""
    rescaled: dict[str, int] = {}
    for stmt in nodes:
        target = None
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, _RESCALING_OPERATORS):
            target = stmt.target
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            func = stmt.value.func
            target = func.value if isinstance(func, ast.Attribute) and func.attr in RESCALING_METHODS else None
        if isinstance(target, ast.Name):
            rescaled.setdefault(target.id, stmt.lineno)
    return rescaled


def body_walk(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's own body, not those of the functions and classes inside it."""
    body = function.body if isinstance(function.body, list) else [function.body]
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        kind = type(node)
        if kind in _SCOPES:
            continue
        children = []
        for field in kind._fields:  # `ast.iter_child_nodes`, without its generator per node
            value = getattr(node, field, None)
            if type(value) is list:
                children.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                children.append(value)
        children.reverse()
        stack.extend(children)


_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda})
