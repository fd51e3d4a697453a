"""Classes and attributes: the members of an instance (methods, overrides, what is stored as
`self.<name>`), bases and subclasses across modules, and the classes an expression is an instance of."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .names import (
    _DEPTH,
    _FUNCTIONS,
    Found,
    Names,
    Value,
    _arguments,
    _bound_locally,
    _enclosing_class,
    _parameter_owner,
    _targets,
)
from .nodes import body_walk, is_self_attribute
from .symbols import Symbols, derived_classes


class Classes(Names):
    """The project's classes: members, bases, subclasses, instances."""

    def __init__(self, roots: list[str]) -> None:
        super().__init__(roots)
        self._attributes: dict[int, tuple[dict[str, list[ast.expr]], dict[str, list[ast.expr]]]] = {}
        self._stores: dict[int, dict[str, list[tuple[list[ast.AST], ast.stmt, ast.expr]]]] = {}
        # `_derived_anywhere`, by class, for the file `_derived_for` names (what it reads is that file's dependency)
        self._derived: dict[int, list[tuple[Symbols, ast.ClassDef]]] = {}
        self._derived_for: str | None = None

    def _members(self, module: Symbols, cls: ast.ClassDef, name: str, depth: int, subclasses: bool) -> Iterator[Value]:
        """Member `name` of an instance of `cls`: its method (or the one it inherits), its subclasses'
        overrides (in its module; `subclasses`: also in the modules naming it), and every function
        stored as `self.name` in the class, its bases or those subclasses."""
        owners = [(module, cls), *self._bases(module, cls, depth)]
        yield from (Value(m_module, m) for m_module, m in self._inherited(module, cls, name, depth))
        yield from (Value(module, m) for m in self._overrides(module, cls, name))
        owners += [(module, module.classes[c]) for c in derived_classes(module.classes, cls.name)]
        if subclasses:
            for other, subclass in self._subclasses(module, cls):
                yield from (Value(other, m) for m in self._methods(other, subclass, name, 0))
                yield from (Value(other, m) for m in self._overrides(other, subclass, name))
                owners.append((other, subclass))
        for owner_module, owner in owners:
            for inner, stmt, value in self._stored(owner_module, owner).get(name, ()):
                step = self._step(owner_module, stmt, f"stored as self.{name}")
                for found in self._values(owner_module, inner, value, depth):
                    yield found._replace(steps=(*found.steps, step))

    def _overriding(self, module: Symbols, cls: ast.ClassDef, name: str) -> Iterator[Value]:
        """The methods `name` of the classes deriving from `cls` through other modules, at any depth (to
        `_DEPTH`; those of its own module deriving from it there are `_overrides`'): `self.name` in a method of `cls` runs the override of the instance's class, wherever
        it is defined (a base trainer handing `self.forward_step` to the schedule). Not a name the class or a
        base stores as `self.name`: an instance's attribute shadows any method of that name."""
        if any(name in self._stored(m, c) for m, c in [(module, cls), *self._bases(module, cls, 0)]):
            return
        covered = set(derived_classes(module.classes, cls.name))  # `_overrides`' own
        for other, subclass in self._derived_anywhere(module, cls):
            if other is module and subclass.name in covered:
                continue
            for method in subclass.body:
                if isinstance(method, _FUNCTIONS) and method.name == name:
                    what = f"runs as self.{name} of {cls.name} in an instance of {subclass.name}"
                    yield Value(other, method, (self._step(other, method, what),))

    def _derived_anywhere(self, module: Symbols, cls: ast.ClassDef) -> list[tuple[Symbols, ast.ClassDef]]:
        """The classes of the project deriving from `cls`, directly or not (to `_DEPTH` levels), in its
        module (`derived_classes`) and in the modules naming each class (`_subclasses`), nearest first."""
        if self._derived_for != self._current:
            self._derived.clear()
            self._derived_for = self._current
        found = self._derived.get(id(cls))
        if found is None:
            found = []
            seen = {id(cls)}
            level = [(module, cls)]
            for _ in range(_DEPTH):
                below = [(m, m.classes[name]) for m, c in level for name in derived_classes(m.classes, c.name)]
                below += [derived for m, c in level for derived in self._subclasses(m, c)]
                level = []
                for m, c in below:
                    if id(c) not in seen:
                        seen.add(id(c))
                        level.append((m, c))
                if not level:
                    break
                found += level
            self._derived[id(cls)] = found
        return found

    def _stored(self, module: Symbols, cls: ast.ClassDef) -> dict[str, list[tuple[list[ast.AST], ast.stmt, ast.expr]]]:
        """What the methods of `cls` (and the functions in them) store as `self.<name>`, by name: (the
        scope of the store, the statement, the value)."""
        stores = self._stores.get(id(cls))
        if stores is None:
            stores = self._stores[id(cls)] = {}
            for scope, function in module.scoped:
                if cls not in scope:
                    continue
                for stmt in body_walk(function):
                    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                        for target in _targets(stmt):
                            if is_self_attribute(target):
                                stores.setdefault(target.attr, []).append(([*scope, function], stmt, stmt.value))
        return stores

    def _instance_of(
        self, module: Symbols, scope: list[ast.AST], node: ast.expr, depth: int
    ) -> list[tuple[Symbols, ast.ClassDef]]:
        """The classes of the project `node` is an instance of: `Class(...)` (or what a factory it
        calls returns), `self`, `self.attr` (declared or made in its class or its bases), a name
        bound to one of these or annotated with a class, a parameter what the callers pass."""
        if depth > _DEPTH:
            return []
        if isinstance(node, ast.Call):
            return self._classes(module, node.func, depth) + self._made_by(module, scope, node.func, depth)
        if isinstance(node, ast.Name) and node.id == "self":
            cls = _enclosing_class(scope)
            return [(module, cls)] if cls is not None else []
        if is_self_attribute(node):
            cls = _enclosing_class(scope)
            if cls is None:
                return []
            found = self._instance_classes(module, scope, node)
            for base_module, base in [(module, cls), *self._bases(module, cls, depth)]:
                if base is not cls:
                    found += self._attribute_classes(base_module, base, node.attr)
                found += self._unpacked_from_method(module, cls, base, node.attr, depth)
            for inner, _, value in self._stored(module, cls).get(node.attr, ()):
                if isinstance(value, ast.Name):  # `self.c = c`, a parameter: what the callers pass
                    found += self._instance_of(module, inner, value, depth + 1)
            return found
        if isinstance(node, ast.Name):
            owner = _parameter_owner(scope, node.id)
            if owner is not None:
                annotation = next((a.annotation for a in _arguments(owner) if a.arg == node.id), None)
                if annotation is not None:
                    return self._classes(module, annotation, depth + 1)
                if not self._follow_parameters:
                    return []
                inner = scope[: scope.index(owner) + 1]  # what the callers pass
                calls = self._calls_of(module, inner, node.id, depth + 1, bounded=True)
                return [c for caller, at, _, passed in calls for c in self._instance_of(caller, at, passed, depth + 1)]
            _, values = self._named(module, scope, node.id)
            if not values and node.id in module.targets and not _bound_locally(scope, node.id):
                return self._imported_instance(module, node.id, depth)
            return [found for value in values for found in self._instance_of(module, scope, value, depth + 1)]
        return []

    def _imported_instance(self, module: Symbols, name: str, depth: int) -> list[tuple[Symbols, ast.ClassDef]]:
        """The classes an instance `module` imports as `name` is of, made in the module it comes from
        (`from lavis.common.registry import registry`, there `registry = Registry()`)."""
        dotted, level = module.targets[name]
        owner, _, there = dotted.rpartition(".")
        path = self._find(module.path, owner, level) if owner or level else None
        target = self._module(path) if path is not None else None
        if target is None or target is module:
            return []
        return self._instance_of(target, [], ast.Name(there, ast.Load()), depth + 1)

    def _unpacked_from_method(
        self, module: Symbols, cls: ast.ClassDef, owner: ast.ClassDef, attr: str, depth: int
    ) -> list[tuple[Symbols, ast.ClassDef]]:
        """`self.tokenizer, self.model = self.load()` in `owner` (`cls` or a base of it): the classes of the element
        `self.attr` takes of what `cls`'s own `load` (or the one it inherits) returns (`return tokenizer, model`,
        `model = Model(...)`)."""
        found = []
        for node in ast.walk(owner):
            if not (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Tuple)
                and isinstance(node.value, ast.Call)
                and is_self_attribute(node.value.func)
            ):
                continue
            places = [i for i, t in enumerate(node.targets[0].elts) if is_self_attribute(t) and t.attr == attr]
            if not places:
                continue
            for method_module, method in self._inherited(module, cls, node.value.func.attr, depth):
                nodes = list(body_walk(method))
                for stmt in nodes:
                    if not (isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple)):
                        continue
                    if places[0] >= len(stmt.value.elts):
                        continue
                    element = stmt.value.elts[places[0]]
                    values = [element]
                    if isinstance(element, ast.Name):
                        values = [
                            n.value
                            for n in nodes
                            if isinstance(n, ast.Assign)
                            and any(isinstance(t, ast.Name) and t.id == element.id for t in n.targets)
                        ]
                    found += [
                        c for v in values if isinstance(v, ast.Call) for c in self._classes(method_module, v.func)
                    ]
        return found

    def _made_by(
        self, module: Symbols, scope: list[ast.AST], func: ast.expr, depth: int
    ) -> list[tuple[Symbols, ast.ClassDef]]:
        """The classes whose instances the functions `func` may be return (`return Class(...)`, or
        `x = Class(...)` then `return x`)."""
        found = []
        for factory in self._values(module, scope, func, depth + 1):
            if isinstance(factory.function, ast.Lambda):
                continue
            inner = factory.module.scope_of(factory.function)
            nodes = list(body_walk(factory.function))
            for stmt in nodes:
                if not (isinstance(stmt, ast.Return) and stmt.value is not None):
                    continue
                values = [stmt.value]
                if isinstance(stmt.value, ast.Name):
                    values = [
                        n.value
                        for n in nodes
                        if isinstance(n, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == stmt.value.id for t in n.targets)
                    ]
                found += [
                    c
                    for v in values
                    if isinstance(v, ast.Call)
                    for c in self._instance_of(factory.module, inner, v, depth + 1)
                ]
        return found

    def _bases(self, module: Symbols, cls: ast.ClassDef, depth: int) -> list[tuple[Symbols, ast.ClassDef]]:
        """The base classes of `cls` in the project, at any depth (to `_DEPTH`), nearest first."""
        found: list[tuple[Symbols, ast.ClassDef]] = []
        level = [(module, cls)]
        for _ in range(max(_DEPTH - depth, 1)):
            level = [b for m, c in level for base in c.bases for b in self._classes(m, base)]
            level = [b for b in level if b[1] is not cls and all(b[1] is not f for _, f in found)]
            if not level:
                break
            found += level
        return found

    def _inherited(self, module: Symbols, cls: ast.ClassDef, name: str, depth: int) -> Found:
        """Method `name` of `cls`, or the one it inherits from its nearest base that has it (bases in
        other modules too; nearest first, so a diamond's sibling base before their common one)."""
        for base_module, base in [(module, cls), *self._bases(module, cls, depth)]:
            methods = [s for s in base.body if isinstance(s, _FUNCTIONS) and s.name == name]
            if methods:
                return [(base_module, methods[0])]
        return []

    def _subclasses(self, module: Symbols, cls: ast.ClassDef) -> Iterator[tuple[Symbols, ast.ClassDef]]:
        """The classes of the modules that may derive from `cls` (not its own) that do, directly."""
        for other in map(self._module, self._deriving(module.path, cls.name)):
            if other is None or other is module:
                continue
            for subclass in other.classes.values():
                bases = (c for base in subclass.bases for _, c in self._classes(other, base))
                if any(base is cls for base in bases):
                    yield other, subclass

    def _attribute_classes(self, module: Symbols, cls: ast.ClassDef, attr: str) -> list[tuple[Symbols, ast.ClassDef]]:
        """The classes of the project that `self.<attr>` of `cls` is declared as (`self.attr: Base`,
        `attr: Base` in the class body) or made from (`self.attr = Base(...)`)."""
        declared, _ = self._class_attributes(cls)
        return [found for node in declared.get(attr, ()) for found in self._classes(module, node)]

    def _class_attributes(self, cls: ast.ClassDef) -> tuple[dict[str, list[ast.expr]], dict[str, list[ast.expr]]]:
        """What one walk of `cls` shows of each `self.<attr>`: the annotations and callees naming its
        class, and the callees of the calls assigned to it."""
        found = self._attributes.get(id(cls))
        if found is None:
            declared: dict[str, list[ast.expr]] = {}
            made: dict[str, list[ast.expr]] = {}
            for stmt in cls.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    declared.setdefault(stmt.target.id, []).append(stmt.annotation)
            for node in ast.walk(cls):
                if isinstance(node, ast.AnnAssign) and is_self_attribute(node.target):
                    declared.setdefault(node.target.attr, []).append(node.annotation)
                elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    for t in node.targets:
                        if is_self_attribute(t):
                            declared.setdefault(t.attr, []).append(node.value.func)
                            made.setdefault(t.attr, []).append(node.value.func)
            found = self._attributes[id(cls)] = (declared, made)
        return found

    def _instance_classes(
        self, module: Symbols, scope: list[ast.AST], node: ast.expr
    ) -> list[tuple[Symbols, ast.ClassDef]]:
        """The classes of the project `self.<attr>` (`node`, in `scope`) is an instance of: declared or
        made in its class (`_attribute_classes`), or made by a method of it returning an instance
        (`self.model = self.model_provider_func()`, which does `model = LatentDiffusion(...)`, `return model`)."""
        cls = _enclosing_class(scope)
        if cls is None or not is_self_attribute(node):
            return []
        found = self._attribute_classes(module, cls, node.attr)
        inner = scope[: scope.index(cls) + 1]
        made = self._class_attributes(cls)[1].get(node.attr, ())
        return found + [c for func in made for c in self._made_by(module, inner, func, 0)]

    def _methods(self, module: Symbols, cls: ast.ClassDef, name: str, depth: int) -> list[ast.AST]:
        for stmt in cls.body:
            if isinstance(stmt, _FUNCTIONS) and stmt.name == name:
                return [stmt]
        if depth < 4:  # inherited from a base class of the same module
            for base in cls.bases:
                if isinstance(base, ast.Name) and base.id in module.classes:
                    found = self._methods(module, module.classes[base.id], name, depth + 1)
                    if found:
                        return found
        return []

    def _overrides(self, module: Symbols, cls: ast.ClassDef, name: str) -> list[ast.AST]:
        """The methods `name` of the classes of the module that derive from `cls`: `self.name` in
        `cls` may run any of them (a base class's `forward_step` is often abstract)."""
        return [
            m
            for subclass in derived_classes(module.classes, cls.name)
            for m in module.classes[subclass].body
            if isinstance(m, _FUNCTIONS) and m.name == name
        ]
