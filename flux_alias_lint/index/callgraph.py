"""The project's call graph: for each function, the functions of the project its calls run, and
what they run in other packages by the dotted name it is imported as (`index/external.py`).

Every call is resolved by the index's own evaluation of callable values (`Resolver._values`, the one
the hand-off search reads), and so are the calls Python makes itself: a class called runs its
`__init__`, a decorator is called on the def below it, a class raised runs its `__init__`, a `for`
over an instance its `__iter__` and `__next__`, `map` and `filter` the functions passed. Functions
are named as PyCG names them: `pkg.mod` for a module's own code, `pkg.mod.Class.method`,
`pkg.mod.f.g`, `pkg.mod.f.<lambda1>`. The work is the resolver's, bounded as the hand-off search's
is (`names._DEPTH`, `calls._CALLER_FILES`).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from typing import NamedTuple

from .files import python_files
from .names import _FUNCTIONS
from .nodes import body_walk, last_name
from .resolve import Resolver
from .symbols import Symbols

_SCOPES = (*_FUNCTIONS, ast.Lambda, ast.ClassDef)
# Builtins that call a function they are passed (unless the project binds the name to its own).
_MAPPING = ("map", "filter")


class Named(NamedTuple):
    """A def, lambda or class of a module: itself, the scopes around it, its dotted name there."""

    node: ast.AST
    scope: list[ast.AST]
    name: str


Layout = dict[int, Named]  # by id of the node


def call_graph(root: str, unread: list[str] | None = None) -> dict[str, list[str]]:
    """Each function of the project under `root` (and each module's own code) -> the sorted dotted
    names of the functions of the project it calls and of what it calls outside (`ext.Cls.fun`). The files that cannot be read or parsed are
    left out (and added to `unread`)."""
    root = os.path.realpath(root)
    resolver = Resolver([root])
    named: dict[int, tuple[str, Layout]] = {}  # id(Symbols) -> (dotted module name, layout)
    for path in python_files(root):
        module = resolver._module(path)
        if module is None:
            if unread is not None:
                unread.append(path)
            continue
        layout: Layout = {}
        _lay_out(module.tree, [], "", {}, layout)
        named[id(module)] = (module_name(root, path), layout)
    graph: dict[str, set[str]] = {}
    for module in [m for m in resolver._parsed.values() if m is not None and id(m) in named]:
        prefix, layout = named[id(module)]
        graph.setdefault(prefix, set())
        graph.update({f"{prefix}.{n.name}": set() for n in layout.values() if not isinstance(n.node, ast.ClassDef)})
        for scope, nodes in _own_nodes(module, layout):
            functions = [s for s in scope if not isinstance(s, ast.ClassDef)]
            source = graph[f"{prefix}.{layout[id(functions[-1])].name}" if functions else prefix]
            for node in nodes:
                for target_module, target in _run_by(resolver, module, scope, node):
                    there = named.get(id(target_module))
                    if there is not None and id(target) in there[1]:
                        source.add(f"{there[0]}.{there[1][id(target)].name}")
                source.update(_run_outside(resolver, module, scope, node))
    return {name: sorted(callees) for name, callees in sorted(graph.items())}


def _run_by(
    resolver: Resolver, module: Symbols, scope: list[ast.AST], node: ast.AST
) -> Iterator[tuple[Symbols, ast.AST]]:
    """The functions a node of a scope's own code runs."""
    if isinstance(node, ast.Call):
        yield from _called(resolver, module, scope, node.func)
        if last_name(node.func) in _MAPPING and not resolver._values(module, scope, node.func):
            for argument in node.args:  # `map(f, xs)`: the builtin calls the functions passed
                yield from ((value.module, value.function) for value in resolver._values(module, scope, argument))
    elif isinstance(node, _FUNCTIONS):
        for decorator in node.decorator_list:
            yield from _called(resolver, module, scope, decorator)
    elif isinstance(node, ast.Raise) and node.exc is not None and not isinstance(node.exc, ast.Call):
        yield from _constructed(resolver, module, node.exc)
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        for cls_module, cls in resolver._instance_of(module, scope, node.iter, 0):
            for name in ("__iter__", "__next__"):
                yield from resolver._inherited(cls_module, cls, name, 0)


def _run_outside(resolver: Resolver, module: Symbols, scope: list[ast.AST], node: ast.AST) -> list[str]:
    """The dotted names outside the project a node of a scope's own code runs: what a call or a
    decorator names there, the outside base's `__init__` of a class of the project that has none."""
    if isinstance(node, _FUNCTIONS):
        return [name for decorator in node.decorator_list for name in resolver._external(module, scope, decorator)]
    if not isinstance(node, ast.Call):
        return []
    found = resolver._external(module, scope, node.func)
    for cls_module, cls in resolver._classes(module, node.func):
        if not resolver._inherited(cls_module, cls, "__init__", 0):
            found += [f"{base}.__init__" for base in resolver._external_bases(cls_module, cls)]
    return found


def _called(
    resolver: Resolver, module: Symbols, scope: list[ast.AST], func: ast.expr
) -> Iterator[tuple[Symbols, ast.AST]]:
    """What calling `func` runs: the functions it may be, a class's `__init__`."""
    yield from ((value.module, value.function) for value in resolver._values(module, scope, func))
    yield from _constructed(resolver, module, func)


def _constructed(resolver: Resolver, module: Symbols, func: ast.expr) -> Iterator[tuple[Symbols, ast.AST]]:
    for cls_module, cls in resolver._classes(module, func):
        yield from resolver._inherited(cls_module, cls, "__init__", 0)


def _own_nodes(module: Symbols, layout: Layout) -> Iterator[tuple[list[ast.AST], list[ast.AST]]]:
    """Each scope of `module` (the module, each def, lambda and class) with the nodes it runs itself:
    a def's decorators and defaults and a class's bases run in the scope around it."""
    scopes = [[], *([*n.scope, n.node] for n in layout.values())]
    for scope in scopes:
        nodes = []
        for node in body_walk(scope[-1] if scope else module.tree):
            nodes.append(node)
            if isinstance(node, _SCOPES):
                for part in _heads(node):
                    nodes += ast.walk(part)
        yield scope, nodes


def _lay_out(node: ast.AST, scope: list[ast.AST], prefix: str, counters: dict[int, int], found: Layout) -> None:
    """Every def, lambda and class under `node`, named in the order of the fields (how PyCG counts
    lambdas: `<lambda1>`, `<lambda2>` in each scope)."""
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, _SCOPES):
            _lay_out(child, scope, prefix, counters, found)
            continue
        for part in _heads(child):
            _lay_out(ast.Expr(value=part), scope, prefix, counters, found)
        if isinstance(child, ast.Lambda):
            owner = id(scope[-1]) if scope else 0
            counters[owner] = counters.get(owner, 0) + 1
            name = f"<lambda{counters[owner]}>"
        else:
            name = child.name
        found[id(child)] = Named(child, scope, prefix + name)
        body = ast.Expr(value=child.body) if isinstance(child, ast.Lambda) else ast.Module(child.body, [])
        _lay_out(body, [*scope, child], f"{prefix}{name}.", counters, found)


def _heads(node: ast.AST) -> list[ast.AST]:
    """The parts of a def, lambda or class evaluated in the scope around it."""
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *node.keywords]
    args = node.args
    defaults = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
    return defaults if isinstance(node, ast.Lambda) else [*node.decorator_list, *defaults]


def module_name(root: str, path: str) -> str:
    """A file's dotted module name under `root` (`pkg/__init__.py`: `pkg`)."""
    relative = os.path.splitext(os.path.relpath(path, root))[0].split(os.sep)
    if relative[-1] == "__init__" and len(relative) > 1:
        relative = relative[:-1]
    return ".".join(relative)
