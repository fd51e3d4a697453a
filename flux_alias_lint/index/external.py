"""Calls into other packages: what an expression is outside the project, by the dotted name it is
imported as (`from ext import Cls`, then `Cls().fun`: `ext.Cls.fun`), as PyCG names such callees.

A name imported from a module the project does not ship (nor the standard library) is that module's; an attribute of it, or of
what calling it gives (an instance, a result), extends the name; a name bound to one of these, or a
parameter called (`step()`) the callers pass one for, is it too; a member the project's classes do not have, of an
instance of a class deriving from an outside base, is the base's (`self.parent_fn`:
`ext.parent.parent_fn`). Bounded as `Resolver._values` is: by `_DEPTH`, cached per node for the
file being read, parameters followed to `_CALLER_FILES` files.
"""

from __future__ import annotations

import ast
import sys

from .calls import Calls
from .names import _DEPTH, _parameter_owner
from .nodes import is_self_attribute
from .symbols import Symbols

# An outside value: its dotted name, and whether it is what calling that name gave (an instance or
# a result: calling it again runs nothing the name says).
Outside = tuple[str, bool]


class External(Calls):
    """The project's modules, with what their expressions are outside the project."""

    def __init__(self, roots: list[str]) -> None:
        super().__init__(roots)
        self._outside_cache: dict[tuple[int, int, bool], tuple[ast.AST, list[Outside]]] = {}
        self._outside_of: str | None = None

    def _external(self, module: Symbols, scope: list[ast.AST], func: ast.expr) -> list[str]:
        """The dotted names outside the project that calling `func` runs."""
        return sorted({name for name, made in self._outside(module, scope, func, 0) if not made})

    def _external_bases(self, module: Symbols, cls: ast.ClassDef) -> list[str]:
        """The dotted names of the bases outside the project of `cls` and of its bases in it."""
        found = []
        for owner_module, owner in [(module, cls), *self._bases(module, cls, 0)]:
            for base in owner.bases:
                found += [name for name, made in self._outside(owner_module, [], base, 0) if not made]
        return list(dict.fromkeys(found))

    def _outside(
        self, module: Symbols, scope: list[ast.AST], node: ast.expr, depth: int, called: bool = True
    ) -> list[Outside]:
        """What `node` may be outside the project. A parameter is what the callers pass only where it
        is `called` itself (`step()`): the owner of an attribute (`model.forward`) is not followed
        back, as every method of the project would send the search to its callers."""
        if depth > _DEPTH:
            return []
        if self._outside_of != self._current:
            self._outside_cache.clear()
            self._outside_of = self._current
        key = (id(node), id(scope[-1]) if scope else id(module.tree), called)
        cached = self._outside_cache.get(key)
        if cached is not None and cached[0] is node:
            return cached[1]
        self._outside_cache[key] = (node, [])  # a cycle finds nothing more
        found = list(dict.fromkeys(self._compute_outside(module, scope, node, depth + 1, called)))
        self._outside_cache[key] = (node, found)
        return found

    def _compute_outside(
        self, module: Symbols, scope: list[ast.AST], node: ast.expr, depth: int, called: bool
    ) -> list[Outside]:
        if isinstance(node, ast.Call):
            return [(name, True) for name, _ in self._outside(module, scope, node.func, depth, called)]
        if isinstance(node, ast.IfExp):
            branches = (node.body, node.orelse)
            return [found for branch in branches for found in self._outside(module, scope, branch, depth, called)]
        if isinstance(node, ast.Name):
            return self._outside_name(module, scope, node, depth, called)
        if isinstance(node, ast.Attribute):
            owner = self._outside(module, scope, node.value, depth, called=False)
            found = [(f"{name}.{node.attr}", False) for name, _ in owner]
            if not found and not self._values(module, scope, node):  # no member of the project's classes
                found = [(f"{name}.{node.attr}", False) for name in self._outside_members(module, scope, node, depth)]
            return found
        return []

    def _outside_name(
        self, module: Symbols, scope: list[ast.AST], node: ast.Name, depth: int, called: bool
    ) -> list[Outside]:
        defs, values = self._named(module, scope, node.id, at=node)
        if defs:
            return []
        if values:
            return [found for value in values for found in self._outside(module, scope, value, depth, called)]
        owner = _parameter_owner(scope, node.id)
        if owner is not None and not (called and self._follow_parameters):
            return []
        if owner is not None:  # what the callers pass
            inner = scope[: scope.index(owner) + 1]
            calls = self._calls_of(module, inner, node.id, depth, bounded=True)
            return [found for caller, at, _, passed in calls for found in self._outside(caller, at, passed, depth)]
        if node.id in module.defs or node.id in module.classes or node.id not in module.targets:
            return []
        dotted, level = module.targets[node.id]
        if level or dotted.partition(".")[0] in sys.stdlib_module_names or self._ships(module, dotted):
            return []  # the project's, or the standard library's (`functools.partial`: no package called)
        return [(dotted, False)]

    def _outside_members(self, module: Symbols, scope: list[ast.AST], node: ast.Attribute, depth: int) -> list[str]:
        """The outside bases whose member `node` is: of the classes its owner is an instance of (the
        class around `self`)."""
        owner = node.value
        if not (isinstance(owner, ast.Name) or is_self_attribute(owner)):
            return []
        if isinstance(owner, ast.Name) and owner.id not in ("self", "cls") and _parameter_owner(scope, owner.id):
            return []  # a parameter's class: not followed back to the callers (`_outside`)
        classes = self._instance_of(module, scope, node.value, depth)
        return list(dict.fromkeys(name for c_module, cls in classes for name in self._external_bases(c_module, cls)))

    def _ships(self, module: Symbols, dotted: str) -> bool:
        """Whether the project has the module `dotted` (or a module it is a name of) imports from."""
        parts = dotted.split(".")
        return any(self._find(module.path, ".".join(parts[:cut]), 0) is not None for cut in range(1, len(parts) + 1))
