"""The `ast` shapes every part of the triage walks: defs and the blocks statements nest in, the nodes
and fields a walk need not enter, parameters, dotted names, a quiet parse."""

from __future__ import annotations

import ast
import warnings

# Where statements nest: a unit may be defined in a class, an `if`, a `try`, a `with`, a loop, a `match`.
_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef})
# Statements with no statements inside them (a `return` is a statement: only blocks hold one).
_EXPRESSION_STATEMENTS = frozenset({ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise, ast.Assert})

# Nothing the flow collects is in these nodes or fields: the walk does not enter them.
_LEAVES = frozenset({ast.Name, ast.Constant, ast.alias, ast.Pass, ast.Break, ast.Continue})
_LEAF_FIELDS = frozenset(
    {"ctx", "id", "attr", "name", "names", "arg", "module", "level", "kind", "op", "ops", "type_comment", "is_async"}
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _quiet_parse(text: str) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings (invalid escapes) are not ours to print
        return ast.parse(text)


def _parameters(arguments: ast.arguments) -> list[ast.arg]:
    extra = [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    return [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, *extra]


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _owner(node: ast.expr) -> str | None:
    """The dotted name a container entry belongs to: `report` for `report["k"]`, `d` for `d[a][b]`."""
    while type(node) is ast.Subscript:
        node = node.value
    return _dotted(node)


def _has_starred(elements: list[ast.expr]) -> bool:
    return any(type(e) is ast.Starred for e in elements)
