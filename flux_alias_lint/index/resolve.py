"""Callable values: the functions of the project an expression may evaluate to, and how it gets them.

`_values` computes, for an expression that is called or handed over, every def or lambda of the
project it may be, each with the steps that bring it there (`Value.steps`: "returned by make_loss",
"stored as self.loss_func", "passed as forward_step_func to train"). A name is what binds it where it
is used (a def, an assignment, an import, a re-export; a parameter is what the callers pass for it),
an attribute of `self` every method and every `self.attr = ...` of the class, its bases and its
subclasses, an attribute of another object the members of the classes it is an instance of
(`self.strategy = Strategy(...)`, `Factory()`, `x = Factory()`), a call what the function called
returns (a factory, a closure) or, for an instance of a class, its `__call__`, a `functools.partial`
(nested) the function it binds, a subscript the functions filed into the registry (a dict or list of
functions, or a decorator storing its parameter). Bounded by a depth (`_DEPTH`) and cached per node
for the file whose evidence is collected (what a file reads is its dependency: a cache shared by
files would hide it). `_resolve` is the same without the steps.

The other way round, `_callers` finds the calls of a function and the functions each passes as one
of its parameters.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Iterator
from typing import NamedTuple

from .files import find_module
from .modules import Modules
from .nodes import body_walk, bound_names, is_self_attribute, last_name, parameters, positional
from .reach import MEGATRON, Reach, Step
from .symbols import Symbols, _imports_of, derived_classes

# What a name bound to a loss function may be assigned (`_named`).
_CALLABLE_VALUES = (ast.Lambda, ast.Call, ast.Name, ast.Attribute, ast.IfExp, ast.Subscript, ast.BoolOp)
# How many steps of resolution one expression may take (names, attributes, calls, parameters).
_DEPTH = 6
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# How many other files may call a function whose parameter a value is followed through (`_calls_of`).
_CALLER_FILES = 8


class Value(NamedTuple):
    """A function an expression may evaluate to: a def or lambda of `module`, with the steps from it
    out to the expression (innermost first), each a place and what happens there."""

    module: Symbols
    function: ast.AST
    steps: tuple[Step, ...] = ()


Found = list[tuple[Symbols, ast.AST]]
# A call as `_calls_named` keeps it: its scope, itself, the function called and its arguments.
_Call = tuple[list[ast.AST], ast.Call, ast.expr, list[ast.expr], dict[str, ast.expr]]


class Resolver(Modules):
    """The project's modules, with the functions their expressions evaluate to."""

    def __init__(self, roots: list[str]) -> None:
        super().__init__(roots)
        # `_values`, by (node, innermost scope, depth), for the file `_cache_of` names.
        self._value_cache: dict[tuple[int, int, int, bool], tuple[ast.AST, list[Value]]] = {}
        # Whether a parameter is what the callers pass (`_passed`); off where only the functions an
        # expression names are asked, not what reaches it (what a patch replaces).
        self._follow_parameters = True
        self._cache_of: str | None = None
        self._imported: dict[int, dict[str, list[tuple[str, int]]]] = {}  # `_imports`, by module
        self._calls: dict[int, dict[str, list[_Call]]] = {}  # `_calls_named`, by module
        self._attributes: dict[int, tuple[dict[str, list[ast.expr]], dict[str, list[ast.expr]]]] = {}
        self._bound: dict[int, tuple[dict[str, list[ast.AST]], dict[str, list[ast.expr]]]] = {}  # `_bindings`
        self._filings: dict[int, dict[str, list[tuple[list[ast.AST], ast.Assign]]]] = {}
        self._stores: dict[int, dict[str, list[tuple[list[ast.AST], ast.stmt, ast.expr]]]] = {}

    def _resolve(self, module: Symbols, scope: list[ast.AST], node: ast.expr, depth: int = 0) -> Found:
        """The functions (defs or lambdas) an expression naming a callable may be, in the project."""
        return [(value.module, value.function) for value in self._values(module, scope, node, depth)]

    def _named_only(self, module: Symbols, scope: list[ast.AST], node: ast.expr) -> Found:
        """`_resolve` without following parameters to the callers: the functions `node` names where it
        is, as a patch's target is asked (is this the function replaced?)."""
        self._follow_parameters = False
        try:
            return self._resolve(module, scope, node)
        finally:
            self._follow_parameters = True

    def _values(self, module: Symbols, scope: list[ast.AST], node: ast.expr, depth: int = 0) -> list[Value]:
        """The functions `node` (in `scope`, the functions and classes around it) may evaluate to, each
        once (the first way found), with how it gets there."""
        if depth > _DEPTH:
            return []
        if self._cache_of != self._current:
            self._value_cache.clear()
            self._cache_of = self._current
        key = (id(node), id(scope[-1]) if scope else id(module.tree), depth, self._follow_parameters)
        cached = self._value_cache.get(key)
        if cached is not None and cached[0] is node:
            return cached[1]
        self._value_cache[key] = (node, [])  # a cycle finds nothing more
        found: list[Value] = []
        seen: set[int] = set()
        for value in self._compute(module, scope, node, depth + 1):
            if id(value.function) not in seen:
                seen.add(id(value.function))
                found.append(value)
        self._value_cache[key] = (node, found)
        return found

    def _compute(self, module: Symbols, scope: list[ast.AST], node: ast.expr, depth: int) -> Iterator[Value]:
        if isinstance(node, ast.Lambda):
            yield Value(module, node)
            if isinstance(node.body, ast.Call):
                yield from self._values(module, scope, node.body.func, depth)
        elif isinstance(node, ast.Call):
            yield from self._called(module, scope, node, depth)
        elif isinstance(node, ast.Subscript):  # `LOSSES[name]`
            yield from self._filed(module, scope, node.value, depth)
        elif isinstance(node, ast.IfExp):
            yield from self._values(module, scope, node.body, depth)
            yield from self._values(module, scope, node.orelse, depth)
        elif isinstance(node, ast.BoolOp):
            for operand in node.values:
                yield from self._values(module, scope, operand, depth)
        elif isinstance(node, ast.Name):
            yield from self._name(module, scope, node, depth)
        elif isinstance(node, ast.Attribute):
            yield from self._attribute(module, scope, node, depth)

    def _called(self, module: Symbols, scope: list[ast.AST], call: ast.Call, depth: int) -> Iterator[Value]:
        """What a call gives that is a function: the function a `functools.partial` binds, the
        `__call__` of an instance of a class of the project (where the project defines none, its
        `forward`: a `torch.nn.Module`'s), or what the functions called return (a factory's closure or
        partial; `registry.get(name)`: the functions filed into it)."""
        func = call.func
        if last_name(func) == "partial" and call.args:
            yield from self._values(module, scope, call.args[0], depth)
            return
        if isinstance(func, ast.Attribute) and func.attr == "get" and call.args:
            yield from self._filed(module, scope, func.value, depth)
        for class_module, cls in self._classes(module, func, depth):
            for method in self._methods(class_module, cls, "__call__", 0) or self._methods(
                class_module, cls, "forward", 0
            ):
                yield Value(class_module, method)
        for factory in self._values(module, scope, func, depth):
            if isinstance(factory.function, ast.Lambda):
                continue
            inner = factory.module.scope_of(factory.function)
            for stmt in body_walk(factory.function):
                if isinstance(stmt, ast.Return) and stmt.value is not None and _callable_value(stmt.value):
                    step = self._step(factory.module, stmt, f"returned by {factory.function.name}")
                    for made in self._values(factory.module, inner, stmt.value, depth):
                        yield made._replace(steps=(*made.steps, step, *factory.steps))

    def _name(self, module: Symbols, scope: list[ast.AST], node: ast.Name, depth: int) -> Iterator[Value]:
        """A closure, a name bound to a callable in an enclosing function or the module, a parameter
        (what the callers pass), a module-level def, an import."""
        defs, values = self._named(module, scope, node.id)
        if defs:
            yield from (Value(module, d) for d in defs)
            return
        if values:
            for value in values:
                yield from self._values(module, scope, value, depth)
            return
        owner = _parameter_owner(scope, node.id) if self._follow_parameters else None
        passed = list(self._passed(module, scope[: scope.index(owner) + 1], node.id, depth)) if owner else []
        if passed:
            yield from passed
        elif node.id in module.defs:
            yield Value(module, module.defs[node.id])
        elif node.id in module.targets:
            yield from self._dotted(module, *module.targets[node.id], depth)

    def _attribute(self, module: Symbols, scope: list[ast.AST], node: ast.Attribute, depth: int) -> Iterator[Value]:
        """`self.name`: the class's members (its methods, its subclasses' overrides, what is stored as
        `self.name`); `obj.name`, `obj` an instance of a class of the project: that class's members
        and its subclasses'; `Class.name`; `module.name`."""
        owner, attr = node.value, node.attr
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            cls = _enclosing_class(scope)
            if cls is not None:
                yield from self._members(module, cls, attr, depth, subclasses=False)
            return
        if isinstance(owner, ast.Name) and (owner.id in module.classes or owner.id in module.targets):
            classes = self._classes(module, owner, depth)
            if classes:
                for class_module, cls in classes:
                    yield from (Value(m_module, m) for m_module, m in self._inherited(class_module, cls, attr, depth))
                return
            if owner.id in module.targets and not _bound_locally(scope, owner.id):
                target, level = module.targets[owner.id]
                yield from self._dotted(module, f"{target}.{attr}", level, depth)
                return
        # `self.x.attr` may be any subclass's (a declared base class); another object is of the class made.
        subclasses = is_self_attribute(owner)
        for class_module, cls in self._instance_of(module, scope, owner, depth):
            yield from self._members(class_module, cls, attr, depth, subclasses=subclasses)

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
        bound to one of these or annotated with a class."""
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
            for base_module, base in self._bases(module, cls, depth):
                found += self._attribute_classes(base_module, base, node.attr)
            return found
        if isinstance(node, ast.Name):
            owner = _parameter_owner(scope, node.id)
            if owner is not None:
                annotation = next((a.annotation for a in _arguments(owner) if a.arg == node.id), None)
                return self._classes(module, annotation, depth + 1) if annotation is not None else []
            _, values = self._named(module, scope, node.id)
            return [found for value in values for found in self._instance_of(module, scope, value, depth + 1)]
        return []

    def _made_by(
        self, module: Symbols, scope: list[ast.AST], func: ast.expr, depth: int
    ) -> list[tuple[Symbols, ast.ClassDef]]:
        """The classes whose instances the functions `func` may be return (`return Class(...)`, or
        `x = Class(...)` then `return x`)."""
        found = []
        for factory in self._values(module, scope, func, depth + 1):
            if isinstance(factory.function, ast.Lambda):
                continue
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
                found += [c for v in values if isinstance(v, ast.Call) for c in self._classes(factory.module, v.func)]
        return found

    def _filed(self, module: Symbols, scope: list[ast.AST], registry: ast.expr, depth: int) -> Iterator[Value]:
        """The functions filed into `registry` (a name, maybe imported): the elements of the dict, list
        or tuple it is bound to, what is stored into it (`LOSSES[name] = fn`), and what a decorator
        files into it."""
        if not isinstance(registry, ast.Name):
            return
        name = registry.id
        _, values = self._named(module, scope, name, _REGISTRIES)
        if not values and name in module.targets and not _bound_locally(scope, name):
            dotted, level = module.targets[name]
            owner, _, there = dotted.rpartition(".")
            path = find_module(module.path, owner, level) if owner or level else None
            target = self._module(path) if path is not None else None
            if target is not None and target is not module:
                yield from self._filed(target, [], ast.Name(there, ast.Load()), depth + 1)
                return
        for value in values:
            elements = value.values if isinstance(value, ast.Dict) else value.elts
            for element in elements:
                if element is not None:
                    yield from self._values(module, scope, element, depth)
        for inner, stmt in self._subscript_stores(module).get(name, ()):
            step = self._step(module, stmt, f"filed into {name}")
            for found in self._values(module, inner, stmt.value, depth):
                yield found._replace(steps=(*found.steps, step))
        yield from (Value(m, f) for m, f in self._registered(module, name, depth))

    def _subscript_stores(self, module: Symbols) -> dict[str, list[tuple[list[ast.AST], ast.Assign]]]:
        """The statements `name[key] = value` of `module`, by `name`, with their scopes (one walk)."""
        found = self._filings.get(id(module))
        if found is None:
            found = self._filings[id(module)] = {}
            for scope, node in [*module.scoped, ([], module.tree)]:
                inner = [*scope, node] if not isinstance(node, ast.Module) else scope
                for stmt in body_walk(node):
                    if isinstance(stmt, ast.Assign):
                        for t in stmt.targets:
                            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                                found.setdefault(t.value.id, []).append((inner, stmt))
        return found

    def _passed(self, module: Symbols, scope: list[ast.AST], parameter: str, depth: int) -> Iterator[Value]:
        """What the calls of `scope[-1]` pass as its `parameter` (by position or keyword). A nested
        function is called in its enclosing one; any other where a call names it (resolved as any
        callee is; a method also wherever a call of that name has a receiver of unknown type)."""
        calls = self._calls_of(module, scope, parameter, depth, bounded=True)
        for caller, inner, call, passed in calls:
            step = self._step(caller, call, _passing(call, parameter, scope[-1].name))
            for found in self._values(caller, inner, passed, depth):
                yield found._replace(steps=(*found.steps, step))

    def _calls_of(
        self, module: Symbols, scope: list[ast.AST], parameter: str, depth: int = 0, bounded: bool = False
    ) -> Iterator[tuple[Symbols, list[ast.AST], ast.Call, ast.expr]]:
        """The calls of `scope[-1]` passing something as its `parameter`: (the caller's module, the
        scope of the call, the call, what it passes). Other files are searched only in a project on
        disk (not for stdin): every file is read for them, so each is a dependency of this evidence.
        `bounded` (a parameter followed while resolving a value): a method's calls only where their
        receiver resolves to it, and no more than `_CALLER_FILES` files naming it, else none (a name
        called all over the project, `training_step(`, is not followed: as the summaries' bounds)."""
        function = scope[-1]
        assert isinstance(function, _FUNCTIONS)
        method = len(scope) > 1 and isinstance(scope[-2], ast.ClassDef)
        params = positional(function, through_attribute=method)
        position = params.index(parameter) if parameter in params else None
        nested = len(scope) > 1 and isinstance(scope[-2], _FUNCTIONS)
        paths = [] if nested else self._mentioning(module.path, f"{function.name}(")
        if not nested:  # `partial(name, ...)` binds its parameters too
            partials = set(self._mentioning(module.path, "partial("))
            paths = [*paths, *(p for p in self._mentioning(module.path, function.name) if p in partials)]
        paths = [p for p in dict.fromkeys(paths) if p != module.path]
        if bounded and len(paths) > _CALLER_FILES:
            return
        callers = [module, *(m for m in map(self._module, paths) if m is not None)]
        for caller in callers:
            for inner, call, head, given, keywords in self._calls_named(caller).get(function.name, ()):
                if nested and (not inner or inner[-1] is not scope[-2]):
                    continue
                passed = keywords.get(parameter)
                if passed is None and position is not None and position < len(given):
                    starred = any(isinstance(a, ast.Starred) for a in given[: position + 1])
                    passed = None if starred else given[position]
                if passed is None:
                    continue
                callees = [v.function for v in self._values(caller, inner, head, depth)]
                unknown_receiver = method and not bounded and isinstance(head, ast.Attribute) and not callees
                if function in callees or unknown_receiver:
                    yield caller, inner, call, passed

    def _calls_named(self, module: Symbols) -> dict[str, list[_Call]]:
        """The calls of `module` (and the partials binding a function) by the last name of the function
        called: (the scope of the call, the call, the function, positional and keyword arguments).
        Read once a module: `_calls_of` asks it for every parameter it follows."""
        calls = self._calls.get(id(module))
        if calls is None:
            calls = self._calls[id(module)] = {}
            for scope, node in [*module.scoped, ([], module.tree)]:
                inner = [*scope, node] if not isinstance(node, ast.Module) else scope
                for call in body_walk(node):
                    if isinstance(call, ast.Call):
                        head, given, keywords = _applied(call)
                        name = last_name(head)
                        if name is not None:
                            calls.setdefault(name, []).append((inner, call, head, given, keywords))
        return calls

    def _registered(self, module: Symbols, registry: str, depth: int) -> Found:
        """The functions a decorator of `module` files into its dict `registry` (`handoffs.REGISTRY`):
        the decorator stores its parameter (`REGISTRY[name] = fn`, or a wrapper returning `fn(...)`),
        and is used as `@decorator` or, made by a factory returning it, as `@factory("name")`."""
        found = []
        for scope, function in module.scoped:
            params = parameters(function)
            stores = [
                stmt
                for stmt in body_walk(function)
                if isinstance(stmt, ast.Assign)
                and any(isinstance(t, ast.Subscript) and last_name(t.value) == registry for t in stmt.targets)
            ]
            if not params or not any(_hands_on(function, stmt.value, params[0]) for stmt in stores):
                continue
            outer = scope[-1] if scope else None
            made = isinstance(outer, _FUNCTIONS) and any(
                isinstance(r, ast.Return) and isinstance(r.value, ast.Name) and r.value.id == function.name
                for r in body_walk(outer)
            )
            found += self._decorated(module, outer if made else function, depth)
        return found

    def _decorated(self, module: Symbols, decorator: ast.AST, depth: int) -> Found:
        """The functions of the project decorated with `decorator` (`@decorator`, `@decorator(...)`)."""
        found = []
        paths = self._mentioning(module.path, f"@{decorator.name}")
        for other in [module, *(m for m in map(self._module, paths) if m is not None and m is not module)]:
            for scope, function in other.scoped:
                for node in function.decorator_list:
                    callee = node.func if isinstance(node, ast.Call) else node
                    if last_name(callee) != decorator.name:
                        continue
                    if any(target is decorator for _, target in self._resolve(other, scope, callee, depth + 1)):
                        found.append((other, function))
        return found

    def _classes(self, module: Symbols, node: ast.expr, depth: int = 0) -> list[tuple[Symbols, ast.ClassDef]]:
        """The class of the project `node` (`Name`, `alias.Name`) names, if it names one, through
        imports and re-exports (`from .strategy import Strategy` in a package's `__init__`)."""
        if isinstance(node, ast.Name) and node.id in module.classes:
            return [(module, module.classes[node.id])]
        if isinstance(node, ast.Name):  # each branch may import its own class under one name
            return [
                c
                for dotted, level in self._imports(module).get(node.id, ())
                for c in self._class_at(module, dotted, level, depth)
            ]
        dotted = imported_from(module, node)
        if "." not in dotted:
            return []
        level = module.targets[node.value.id][1]
        return self._class_at(module, dotted, level, depth)

    def _imports(self, module: Symbols) -> dict[str, list[tuple[str, int]]]:
        """Every import binding each name anywhere in `module` (`Symbols.targets` keeps the last)."""
        found = self._imported.get(id(module))
        if found is None:
            found = self._imported[id(module)] = {}
            for node in ast.walk(module.tree):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for item in _imports_of(node):
                        if "." in item.target:
                            found.setdefault(item.local, []).append((item.target, item.level))
        return found

    def _class_at(self, importer: Symbols, dotted: str, level: int, depth: int) -> list[tuple[Symbols, ast.ClassDef]]:
        owner, _, name = dotted.rpartition(".")
        path = find_module(importer.path, owner, level)
        target = self._module(path) if path is not None else None
        if target is None:
            return []
        if name in target.classes:
            return [(target, target.classes[name])]
        if name in target.targets and depth < _DEPTH and "." in target.targets[name][0]:  # re-exported
            return self._class_at(target, *target.targets[name], depth + 1)
        return []

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
        other modules too)."""
        own = self._methods(module, cls, name, 0)
        if own:
            return [(module, m) for m in own]
        for base_module, base in self._bases(module, cls, depth):
            methods = [s for s in base.body if isinstance(s, _FUNCTIONS) and s.name == name]
            if methods:
                return [(base_module, methods[0])]
        return []

    def _subclasses(self, module: Symbols, cls: ast.ClassDef) -> Iterator[tuple[Symbols, ast.ClassDef]]:
        """The classes of the modules naming `cls` (not its own) that derive from it directly."""
        for other in map(self._module, self._mentioning(module.path, cls.name)):
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

    def _named(
        self, module: Symbols, scope: list[ast.AST], name: str, kinds: tuple[type, ...] = _CALLABLE_VALUES
    ) -> tuple[list[ast.AST], list[ast.expr]]:
        """What `name` means in the innermost function of `scope` (or the module) that binds it: every
        def of it there (each branch of an `if` may define its own), else every value of `kinds`
        assigned to it (a lambda, a call such as a partial, a name or attribute, a conditional of
        them: each branch may assign its own). A class body is no enclosing scope of its methods:
        `name` there is not `self.name`."""
        for function in [*(f for f in reversed(scope) if not isinstance(f, ast.ClassDef)), module.tree]:
            defs, assigned = self._bindings(function)
            if name in defs:
                return defs[name], []
            values = [value for value in assigned.get(name, ()) if isinstance(value, kinds)]
            if values:
                return [], values
        return [], []

    def _bindings(self, function: ast.AST) -> tuple[dict[str, list[ast.AST]], dict[str, list[ast.expr]]]:
        """The defs of `function`'s own body and the values assigned to its names, by name (one walk)."""
        found = self._bound.get(id(function))
        if found is None:
            defs: dict[str, list[ast.AST]] = {}
            assigned: dict[str, list[ast.expr]] = {}
            for stmt in body_walk(function):
                if isinstance(stmt, _FUNCTIONS):
                    defs.setdefault(stmt.name, []).append(stmt)
                elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                    for target in _targets(stmt):
                        if isinstance(target, ast.Name):
                            assigned.setdefault(target.id, []).append(stmt.value)
            found = self._bound[id(function)] = (defs, assigned)
        return found

    def _dotted(self, importer: Symbols, dotted: str, level: int, depth: int) -> Iterator[Value]:
        yield from (Value(m, f) for m, f in self._resolve_dotted(importer, dotted, level, depth))

    def _resolve_dotted(self, importer: Symbols, dotted: str, level: int, depth: int) -> Found:
        """`pkg.mod.f` (or `pkg.mod.Class.f`), imported by `importer`, to the function in the project."""
        parts = dotted.split(".")
        for cut in (len(parts) - 1, len(parts) - 2):
            if cut < (0 if level else 1):
                continue
            path = find_module(importer.path, ".".join(parts[:cut]), level)
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

    def _callers(
        self,
        module: Symbols,
        scope: list[ast.AST],
        parameter: str,
        steps: tuple[Step, ...],
        like: Reach | None = None,
    ) -> None:
        """The calls of `scope[-1]` and the functions each passes as `parameter`, reached by Megatron
        (or as `like` is: its context, guess and `whole_return`)."""
        for caller, inner, call, passed in self._calls_of(module, scope, parameter):
            step = self._step(caller, call, _passing(call, parameter, scope[-1].name))
            reach = Reach(MEGATRON, (step, *steps))
            if like is not None:
                reach = dataclasses.replace(like, steps=reach.steps)
            for value in self._values(caller, inner, passed):
                self._reach(
                    value.module.path, value.function, dataclasses.replace(reach, steps=value.steps + reach.steps)
                )


# What a registry's name may be bound to (`Resolver._filed`).
_REGISTRIES = (ast.Dict, ast.List, ast.Tuple)


def _passing(call: ast.Call, parameter: str, function: str) -> str:
    """What a step says of `call` passing something as `parameter` of `function`."""
    if last_name(call.func) == "partial":
        return f"bound to {parameter} of {function} by partial"
    return f"passed as {parameter} to {function}"


def _applied(call: ast.Call) -> tuple[ast.expr, list[ast.expr], dict[str, ast.expr]]:
    """(the function called, its positional arguments, its keyword arguments) of a call, through
    `functools.partial`, nested or not: `partial(partial(f, a), b, k=c)` gives `f`, `[a, b]`, `{k: c}`."""
    head, given = call.func, list(call.args)
    keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
    while last_name(head) == "partial" and given:
        head, given = given[0], given[1:]
        if isinstance(head, ast.Call) and last_name(head.func) == "partial":
            keywords = {**{k.arg: k.value for k in head.keywords if k.arg is not None}, **keywords}
            head, given = head.func, [*head.args, *given]
    return head, given, keywords


def _targets(stmt: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]


def _arguments(function: ast.AST) -> list[ast.arg]:
    args = function.args
    return [*args.posonlyargs, *args.args, *args.kwonlyargs]


def _enclosing_class(scope: list[ast.AST]) -> ast.ClassDef | None:
    return next((f for f in reversed(scope) if isinstance(f, ast.ClassDef)), None)


def _parameter_owner(scope: list[ast.AST], name: str) -> ast.AST | None:
    """The innermost function of `scope` whose parameter `name` is, unless it or a function inside it
    binds `name` itself. A class body is no enclosing scope of its methods."""
    for function in reversed(scope):
        if isinstance(function, ast.ClassDef):
            continue
        if name in _bound_names(function):
            return None
        if isinstance(function, _FUNCTIONS) and name in parameters(function):
            return function
    return None


@functools.lru_cache(maxsize=4096)
def _bound_names(function: ast.AST) -> frozenset[str]:
    return frozenset(bound_names(body_walk(function)))


def _bound_locally(scope: list[ast.AST], name: str) -> bool:
    """Whether a function of `scope` binds `name` (a parameter or a local), hiding the module's."""
    return _parameter_owner(scope, name) is not None


def _callable_value(node: ast.expr) -> bool:
    """What a factory may return as a callable: not a call's result, except a `functools.partial`."""
    return not isinstance(node, ast.Call) or last_name(node.func) == "partial"


def imported_from(module: Symbols, func: ast.expr) -> str:
    """The dotted name a callee `name` or `alias.name` is imported as ("" if it is not imported)."""
    if isinstance(func, ast.Name) and func.id in module.targets:
        return module.targets[func.id][0]
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in module.targets:
        return f"{module.targets[func.value.id][0]}.{func.attr}"
    return ""


def _hands_on(function: ast.AST, value: ast.expr, parameter: str) -> bool:
    """Whether `value`, stored by `function`, is its `parameter` or a def of it returning `parameter(...)`
    (a `functools.wraps` wrapper)."""
    if isinstance(value, ast.Name) and value.id == parameter:
        return True
    wrappers = [
        node
        for node in body_walk(function)
        if isinstance(node, _FUNCTIONS) and isinstance(value, ast.Name) and node.name == value.id
    ]
    return any(
        isinstance(r, ast.Return)
        and isinstance(r.value, ast.Call)
        and isinstance(r.value.func, ast.Name)
        and r.value.func.id == parameter
        for wrapper in wrappers
        for r in body_walk(wrapper)
    )
