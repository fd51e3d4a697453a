"""Small readings of `ast` nodes the index's resolution and evidence share."""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable, Iterator

from ..facts.reports import AUGMENTED_METHODS, RESCALING_METHODS, RESCALING_OPERATORS
from ..facts.tensor_ops import attribute_alias_kind, leaves_unchanged, method_alias_kind

# The `ast` operator of each augmented operator of `AUGMENTED_METHODS`, and those of
# `RESCALING_OPERATORS` (a new operator there without one here fails at import).
_AUGMENTED = {ast.Add: "+=", ast.Sub: "-=", ast.Mult: "*=", ast.Div: "/="}
_RESCALING_OPERATORS = tuple({text: op for op, text in _AUGMENTED.items()}[text] for text in RESCALING_OPERATORS)


def dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a chain of names, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


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


def aliases_itself(value: ast.expr | None, name: str) -> bool:
    """`value` is `name` itself or storage it shares (`facts/tensor_ops.py`: views, detached aliases, conversions
    that may return it, indexing)."""
    while value is not None:
        if isinstance(value, ast.Name):
            return value.id == name
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            if method_alias_kind(value.func.attr) is None:
                return False
            value = value.func.value
        elif isinstance(value, ast.Subscript) or (
            isinstance(value, ast.Attribute) and attribute_alias_kind(value.attr) is not None
        ):
            value = value.value
        else:
            return False
    return False


def rescaled_in_place(nodes: Iterable[ast.AST]) -> dict[str, int]:
    """The names rescaled in place among `nodes` (`x /= n`, `x *= k`, `x.div_(n)`, `x.mul_(k)` as a
    statement), each with the first line doing it; not by an operand changing nothing (`x *= 1`)."""
    rescaled: dict[str, int] = {}
    for stmt in nodes:
        target = write = None
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, _RESCALING_OPERATORS):
            target, write = stmt.target, stmt
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            func = stmt.value.func
            if isinstance(func, ast.Attribute) and func.attr in RESCALING_METHODS:
                target, write = func.value, stmt.value
        if isinstance(target, ast.Name) and not leaves_unchanged_write(write):
            rescaled.setdefault(target.id, stmt.lineno)
    return rescaled


def leaves_unchanged_write(node: ast.AST) -> bool:
    """`x *= 1`, `x.add_(0)`: an in-place write given only its identity operand (`IDENTITY_OPERANDS`)."""
    if isinstance(node, ast.AugAssign):
        operator = _AUGMENTED.get(type(node.op))
        return operator is not None and leaves_unchanged(AUGMENTED_METHODS[operator], _number(node.value))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and len(node.args) == 1:
        return not node.keywords and leaves_unchanged(node.func.attr, _number(node.args[0]))
    return False


def _number(node: ast.expr) -> object:
    """The int or float a literal is (`1`, `1.0`), else None."""
    return node.value if isinstance(node, ast.Constant) and type(node.value) in (int, float) else None


def body_walk(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's own body, not those of the functions and classes inside it, nor the
    singletons a node holds in its `ctx`, `op` and `ops` (`Load()`, `Add()`: read through their owner)."""
    return walk_statements(function.body if isinstance(function.body, list) else [function.body])


def walk_statements(body: list[ast.AST]) -> Iterator[ast.AST]:
    """`body_walk` of these statements (or a lambda's expression)."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        kind = type(node)
        if kind in _SCOPES:
            continue
        fields = _WALKED_FIELDS.get(kind)
        if fields is None:
            fields = _WALKED_FIELDS[kind] = tuple(f for f in kind._fields if f not in ("ctx", "op", "ops"))
        children = []
        for field in fields:  # `ast.iter_child_nodes`, without its generator per node
            value = getattr(node, field, None)
            if type(value) is list:
                children.extend([item for item in value if isinstance(item, ast.AST)])
            elif isinstance(value, ast.AST):
                children.append(value)
        children.reverse()
        stack.extend(children)


_WALKED_FIELDS: dict[type, tuple[str, ...]] = {}  # `body_walk`'s, by node type
_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda})
_HOLDING_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


def statements(tree: ast.AST) -> Iterator[ast.AST]:
    """The statements in `tree`, nested ones too, in `ast.walk`'s order (breadth first) without walking an
    expression: a statement is only ever in a statement's, an `except` handler's or a `case`'s body."""
    queue = deque([tree])
    while queue:
        node = queue.popleft()
        if isinstance(node, ast.stmt):
            yield node
        for field in type(node)._fields:
            value = getattr(node, field, None)
            if type(value) is list:
                queue.extend(item for item in value if isinstance(item, _HOLDING_STATEMENTS))
