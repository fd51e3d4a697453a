"""Names and imports: what a name of the project is bound to where it is used (a def, an assigned
value, an import, a re-export), the class a name or `alias.Name` is, and `Value`, what `Resolver`
answers (a function, with the steps that bring it to the expression)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from typing import NamedTuple

from .files import find_module
from .modules import Modules
from .nodes import body_walk, bound_names, parameters, statements
from .reach import Step
from .symbols import Symbols, _imports_of

# What a name bound to a loss function may be assigned (`_named`).
_CALLABLE_VALUES = (ast.Lambda, ast.Call, ast.Name, ast.Attribute, ast.IfExp, ast.Subscript, ast.BoolOp, ast.Starred)
# How many steps of resolution one expression may take (names, attributes, calls, parameters).
_DEPTH = 6
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class Value(NamedTuple):
    """A function an expression may evaluate to: a def or lambda of `module`, with the steps from it
    out to the expression (innermost first), each a place and what happens there."""

    module: Symbols
    function: ast.AST
    steps: tuple[Step, ...] = ()


Found = list[tuple[Symbols, ast.AST]]


class Names(Modules):
    """The project's modules, with what their names are bound to."""

    def __init__(self, roots: list[str]) -> None:
        super().__init__(roots)
        self._imported: dict[int, dict[str, list[tuple[str, int]]]] = {}  # `_imports`, by module
        self._bound: dict[int, tuple[dict[str, list[ast.AST]], dict[str, list[ast.expr]]]] = {}  # `_bindings`
        self._found: dict[tuple[str, str, int], str | None] = {}  # `_find`
        self._straight: dict[int, dict[str, list[tuple[int, int]]]] = {}  # `_in_order`, by function

    def _find(self, importer: str, dotted: str, level: int) -> str | None:
        """`files.find_module`, asked once for each question (it stats the directories above)."""
        key = (importer, dotted, level)
        if key not in self._found:
            self._found[key] = find_module(importer, dotted, level)
        return self._found[key]

    def _named(
        self,
        module: Symbols,
        scope: list[ast.AST],
        name: str,
        kinds: tuple[type, ...] = _CALLABLE_VALUES,
        at: ast.expr | None = None,
    ) -> tuple[list[ast.AST], list[ast.expr]]:
        """What `name` means in the innermost function of `scope` (or the module) that binds it: every
        def of it there (each branch of an `if` may define its own), else every value of `kinds`
        assigned to it (a lambda, a call such as a partial, a name or attribute, a conditional of
        them: each branch may assign its own). A class body is no enclosing scope of its methods:
        `name` there is not `self.name`. Read at `at` in the function's own straight-line code (every
        binding of `name` a statement of its body, none in a branch or loop), only the last assignment
        before `at`: an overwritten value is not what the name holds."""
        functions = [*(f for f in reversed(scope) if not isinstance(f, ast.ClassDef)), module.tree]
        for function in functions:
            defs, assigned = self._bindings(function)
            if name in defs:
                return defs[name], []
            values = assigned.get(name, [])
            ends = self._in_order(function).get(name) if at is not None and function is functions[0] else None
            if ends is not None and hasattr(at, "lineno"):
                before = [v for v, end in zip(values, ends, strict=True) if end <= (at.lineno, at.col_offset)]
                values = before[-1:]
            values = [value for value in values if isinstance(value, kinds)]
            if values:
                return [], values
            if not isinstance(function, ast.Module) and name in parameters(function):
                return [], []  # a parameter hides the enclosing scopes' `name`: what the callers pass
        return [], []

    def _bindings(self, function: ast.AST) -> tuple[dict[str, list[ast.AST]], dict[str, list[ast.expr]]]:
        """The defs of `function`'s own body and the values assigned to its names, by name (one walk);
        a `for` target's value is `*iterated` (an `ast.Starred`): an element of it."""
        found = self._bound.get(id(function))
        if found is None:
            defs: dict[str, list[ast.AST]] = {}
            assigned: dict[str, list[ast.expr]] = {}
            for stmt in body_walk(function):
                if isinstance(stmt, _FUNCTIONS):
                    defs.setdefault(stmt.name, []).append(stmt)
                elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.comprehension)) and isinstance(stmt.target, ast.Name):
                    # an element of what is iterated (`Resolver._elements`)
                    element = ast.copy_location(ast.Starred(stmt.iter, ast.Load()), stmt.iter)
                    assigned.setdefault(stmt.target.id, []).append(element)
                elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                    for target in _targets(stmt):
                        for name, value in _unpacked(target, stmt.value):
                            assigned.setdefault(name, []).append(value)
            found = self._bound[id(function)] = (defs, assigned)
        return found

    def _in_order(self, function: ast.AST) -> dict[str, list[tuple[int, int]]]:
        """The names every binding of which in `function`'s own code is a plain assignment, a statement
        of its body (so each runs once, in order), with where each of `_bindings`' values of it ends.
        A module's name declared `global` in a function is not among them."""
        found = self._straight.get(id(function))
        if found is None:
            body = function.body if isinstance(function.body, list) else []
            top: dict[str, list[tuple[int, int]]] = {}
            for stmt in body:
                if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
                    for target in stmt.targets:
                        top.setdefault(target.id, []).append((stmt.end_lineno, stmt.end_col_offset))
            stores: dict[str, int] = {}
            for node in body_walk(function):
                if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    stores[node.id] = stores.get(node.id, 0) + 1
            others = bound_names(n for n in body_walk(function) if not isinstance(n, ast.Name))
            if isinstance(function, ast.Module):
                others |= {n for node in ast.walk(function) if isinstance(node, ast.Global) for n in node.names}
            else:
                others |= {n for node in body_walk(function) if isinstance(node, ast.Nonlocal) for n in node.names}
            found = {n: ends for n, ends in top.items() if stores.get(n) == len(ends) and n not in others}
            self._straight[id(function)] = found
        return found

    def _dotted(self, importer: Symbols, dotted: str, level: int, depth: int) -> Iterator[Value]:
        yield from (Value(m, f) for m, f in self._resolve_dotted(importer, dotted, level, depth))

    def _resolve_dotted(self, importer: Symbols, dotted: str, level: int, depth: int) -> Found:
        """`pkg.mod.f` (or `pkg.mod.Class.f`), imported by `importer`, to the function in the project."""
        parts = dotted.split(".")
        for cut in (len(parts) - 1, len(parts) - 2):
            if cut < (0 if level else 1):
                continue
            path = self._find(importer.path, ".".join(parts[:cut]), level)
            target = self._module(path) if path is not None else None
            if target is None:
                continue
            rest = parts[cut:]
            if len(rest) == 1 and rest[0] in target.defs:
                return [(target, target.defs[rest[0]])]
            if len(rest) == 1 and rest[0] in target.targets and depth < _DEPTH:  # re-exported
                return self._resolve_dotted(target, *target.targets[rest[0]], depth + 1)
            if len(rest) == 2 and rest[0] in target.classes:
                return [(target, m) for m in self._methods(target, target.classes[rest[0]], rest[1], 0)]
        return []

    def _star_imported(self, module: Symbols, name: str, depth: int) -> Found:
        """The def `name` of a module `module` imports with `from m import *` (or, through it, imports
        or re-exports), the last such import first."""
        for node in reversed(module.tree.body):
            if not (isinstance(node, ast.ImportFrom) and node.names[0].name == "*") or depth >= _DEPTH:
                continue
            path = self._find(module.path, node.module or "", node.level)
            target = self._module(path) if path is not None else None
            if target is None or target is module:
                continue
            if name in target.defs:
                return [(target, target.defs[name])]
            found = (
                self._resolve_dotted(target, *target.targets[name], depth + 1)
                if name in target.targets
                else self._star_imported(target, name, depth + 1)
            )
            if found:
                return found
        return []

    def _classes(self, module: Symbols, node: ast.expr, depth: int = 0) -> list[tuple[Symbols, ast.ClassDef]]:
        """The class of the project `node` (`Name`, `alias.Name`) names, if it names one, through
        imports and re-exports (`from .strategy import Strategy` in a package's `__init__`), a module's
        name assigned a class (`Kind = Strategy`), a class nested in one (`Outer.Inner`)."""
        if isinstance(node, ast.Name) and node.id in module.classes:
            return [(module, module.classes[node.id])]
        if isinstance(node, ast.Subscript):  # `models.__dict__[args.model]`: the classes it may hold
            namespace = self._namespace(module, node.value)
            if namespace is None:
                return []
            return [(namespace, cls) for name, cls in namespace.classes.items() if _may_be(node.slice, name)]
        if isinstance(node, ast.Name):  # each branch may import its own class under one name
            imported = [
                c
                for dotted, level in self._imports(module).get(node.id, ())
                for c in self._class_at(module, dotted, level, depth)
            ]
            if imported or depth >= _DEPTH:
                return imported
            assigned = self._bindings(module.tree)[1].get(node.id, ())
            return [
                c
                for v in assigned
                if isinstance(v, (ast.Name, ast.Attribute))
                for c in self._classes(module, v, depth + 1)
            ]
        if isinstance(node, ast.Attribute) and depth < _DEPTH:
            nested = [
                (m, inner)
                for m, cls in self._classes(module, node.value, depth + 1)
                for inner in cls.body
                if isinstance(inner, ast.ClassDef) and inner.name == node.attr
            ]
            if nested:
                return nested
        dotted = imported_from(module, node)
        if "." not in dotted:
            return []
        level = module.targets[node.value.id][1]
        return self._class_at(module, dotted, level, depth)

    def _namespace(self, module: Symbols, node: ast.expr) -> Symbols | None:
        """The module of the project whose names `node` maps to their values (`mod.__dict__`, `vars(mod)`, a
        module imported as `mod`; `globals()`: `module` itself): a registry of every def and class it holds."""
        if isinstance(node, ast.Call) and not node.keywords:
            name = node.func.id if isinstance(node.func, ast.Name) else None
            if name == "globals" and not node.args:
                return module
            if name != "vars" or len(node.args) != 1:
                return None
            node = node.args[0]
        elif isinstance(node, ast.Attribute) and node.attr == "__dict__":
            node = node.value
        else:
            return None
        if not isinstance(node, ast.Name) or node.id not in module.targets:
            return None
        path = self._find(module.path, *module.targets[node.id])
        return self._module(path) if path is not None else None

    def _imports(self, module: Symbols) -> dict[str, list[tuple[str, int]]]:
        """Every import binding each name anywhere in `module` (`Symbols.targets` keeps the last)."""
        found = self._imported.get(id(module))
        if found is None:
            found = self._imported[id(module)] = {}
            for node in statements(module.tree):  # an import is a statement: no expression is walked
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for item in _imports_of(node):
                        if "." in item.target:
                            found.setdefault(item.local, []).append((item.target, item.level))
        return found

    def _class_at(self, importer: Symbols, dotted: str, level: int, depth: int) -> list[tuple[Symbols, ast.ClassDef]]:
        owner, _, name = dotted.rpartition(".")
        path = self._find(importer.path, owner, level)
        target = self._module(path) if path is not None else None
        if target is None:
            return []
        if name in target.classes:
            return [(target, target.classes[name])]
        if name in target.targets and depth < _DEPTH and "." in target.targets[name][0]:  # re-exported
            return self._class_at(target, *target.targets[name], depth + 1)
        return []


def _may_be(key: ast.expr | None, name: str) -> bool:
    """Whether a namespace's entry `name` may be what `key` reads: any entry for a key computed at run time."""
    return not isinstance(key, ast.Constant) or key.value == name


def _unpacked(target: ast.expr, value: ast.expr) -> Iterator[tuple[str, ast.expr]]:
    """The names `target = value` binds, each with its value: a tuple or list unpacking a display
    pairs them element by element (`a, (b, c) = f, (g, h)`; a starred name gets the list of the rest)."""
    if isinstance(target, ast.Name):
        yield target.id, value
        return
    if not (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))):
        return
    if any(isinstance(e, ast.Starred) for e in value.elts):
        return
    starred = [i for i, e in enumerate(target.elts) if isinstance(e, ast.Starred)]
    if not starred:
        if len(target.elts) == len(value.elts):
            for inner, given in zip(target.elts, value.elts, strict=True):
                yield from _unpacked(inner, given)
        return
    at, after = starred[0], len(target.elts) - starred[0] - 1
    if len(starred) > 1 or len(value.elts) < at + after:
        return
    tail = len(value.elts) - after
    pairs = [
        *zip(target.elts[:at], value.elts[:at], strict=True),
        *zip(target.elts[at + 1 :], value.elts[tail:], strict=True),
    ]
    for inner, given in pairs:
        yield from _unpacked(inner, given)
    yield from _unpacked(target.elts[at].value, ast.copy_location(ast.List(value.elts[at:tail], ast.Load()), value))


def _targets(stmt: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]


def _default(function: ast.AST, name: str) -> ast.expr | None:
    """The default value of `function`'s parameter `name`, if it has one."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    for arg, value in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True):
        if arg.arg == name:
            return value
    return next((v for a, v in zip(args.kwonlyargs, args.kw_defaults, strict=True) if a.arg == name), None)


def _arguments(function: ast.AST) -> list[ast.arg]:
    args = function.args
    return [*args.posonlyargs, *args.args, *args.kwonlyargs]


def _enclosing_class(scope: list[ast.AST]) -> ast.ClassDef | None:
    return next((f for f in reversed(scope) if isinstance(f, ast.ClassDef)), None)


def _parameter_owner(scope: list[ast.AST], name: str) -> ast.AST | None:
    """The innermost function (or lambda) of `scope` whose parameter `name` is, unless it or a function
    inside it binds `name` itself. A class body is no enclosing scope of its methods."""
    for function in reversed(scope):
        if isinstance(function, ast.ClassDef):
            continue
        if name in _bound_names(function):
            return None
        if isinstance(function, (*_FUNCTIONS, ast.Lambda)) and name in parameters(function):
            return function
    return None


@functools.lru_cache(maxsize=4096)
def _bound_names(function: ast.AST) -> frozenset[str]:
    return frozenset(bound_names(body_walk(function)))


def _bound_locally(scope: list[ast.AST], name: str) -> bool:
    """Whether a function of `scope` binds `name` (a parameter or a local), hiding the module's."""
    return _parameter_owner(scope, name) is not None


def imported_from(module: Symbols, func: ast.expr) -> str:
    """The dotted name a callee `name` or `alias.name` is imported as ("" if it is not imported)."""
    if isinstance(func, ast.Name) and func.id in module.targets:
        return module.targets[func.id][0]
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in module.targets:
        return f"{module.targets[func.value.id][0]}.{func.attr}"
    return ""
