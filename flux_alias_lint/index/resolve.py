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

The cases are read by concern: names and imports in `names.py`, classes and attributes in
`classes.py`, calls, parameters and registries in `calls.py` (where `_callers` finds, the other way
round, the calls of a function and the functions each passes as one of its parameters).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..facts.tensor_ops import MODULE_WRAPPERS
from .calls import _passing
from .external import External
from .names import (
    _DEPTH,
    _FUNCTIONS,
    Found,
    Value,
    _bound_locally,
    _default,
    _enclosing_class,
    _parameter_owner,
    imported_from,
)
from .nodes import body_walk, is_self_attribute, last_name, positional
from .registries import Registries
from .symbols import Symbols

__all__ = ["Resolver", "Value", "imported_from"]


class Resolver(Registries, External):
    """The project's modules, with the functions their expressions evaluate to."""

    def __init__(self, roots: list[str]) -> None:
        super().__init__(roots)
        # `_values`, by (node, innermost scope, depth), for the file `_cache_of` names.
        self._value_cache: dict[tuple[int, int, int, bool], tuple[ast.AST, list[Value]]] = {}
        # Whether a parameter is what the callers pass (`_passed`); off where only the functions an
        # expression names are asked, not what reaches it (what a patch replaces).
        self._follow_parameters = True
        self._cache_of: str | None = None

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
        if isinstance(node, _FUNCTIONS):  # a def a decorator is called on (`Calls._application`)
            yield Value(module, node)
        elif isinstance(node, ast.Lambda):
            yield Value(module, node)
            if isinstance(node.body, ast.Call):
                yield from self._values(module, scope, node.body.func, depth)
        elif isinstance(node, ast.Call):
            yield from self._called(module, scope, node, depth)
        elif isinstance(node, ast.Subscript):  # `LOSSES[name]`
            yield from self._filed(module, scope, node.value, depth, node.slice)
        elif isinstance(node, ast.IfExp):
            yield from self._values(module, scope, node.body, depth)
            yield from self._values(module, scope, node.orelse, depth)
        elif isinstance(node, ast.BoolOp):
            for operand in node.values:
                yield from self._values(module, scope, operand, depth)
        elif isinstance(node, ast.Starred):  # an element of an iterable (a `for` target)
            yield from self._elements(module, scope, node.value, depth)
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
        if last_name(func) in MODULE_WRAPPERS and call.args and not self._classes(module, func, depth):
            yield from self._values(module, scope, call.args[0], depth)  # `DistributedDataParallel(model)` runs `model`
            return
        if isinstance(func, ast.Attribute) and func.attr == "get" and call.args:
            yield from self._filed(module, scope, func.value, depth, call.args[0])
        for class_module, cls in self._instance_of(module, scope, call, depth):
            for method in self._methods(class_module, cls, "__call__", 0) or self._methods(
                class_module, cls, "forward", 0
            ):
                yield Value(class_module, method)
        for factory in self._values(module, scope, func, depth):
            yield from self._returned_by(module, scope, call, factory, depth)

    def _returned_by(
        self, module: Symbols, scope: list[ast.AST], call: ast.Call | None, factory: Value, depth: int
    ) -> Iterator[Value]:
        """The functions `factory` returns, called by `call` (None: called by a builtin, `map`)."""
        if isinstance(factory.function, ast.Lambda):
            return
        inner = factory.module.scope_of(factory.function)
        for stmt in body_walk(factory.function):
            if isinstance(stmt, ast.Return) and stmt.value is not None:  # `return make()`: what it returns
                step = self._step(factory.module, stmt, f"returned by {factory.function.name}")
                made_here = None
                if call is not None:
                    made_here = self._given_back(module, scope, call, factory, inner, stmt.value, depth)
                if made_here is None:
                    made_here = self._values(factory.module, inner, stmt.value, depth)
                for made in made_here:
                    yield made._replace(steps=(*made.steps, step, *factory.steps))

    def _given_back(
        self,
        module: Symbols,
        scope: list[ast.AST],
        call: ast.Call,
        factory: Value,
        inner: list[ast.AST],
        returned: ast.expr,
        depth: int,
    ) -> list[Value] | None:
        """What `call` gets back where the function called returns its own parameter (a decorator or a
        wrapper passing the step through): what this call passes for it (by position, `self` given
        when called through an attribute, or by keyword), else its default; None where the call does
        not show it (`*args`, `**kwargs`, a partial's arguments), to be followed to every caller."""
        if not self._follow_parameters or not isinstance(returned, ast.Name):
            return None
        function = factory.function
        if _parameter_owner(inner, returned.id) is not function:
            return None
        method = len(inner) > 1 and isinstance(inner[-2], ast.ClassDef)
        if isinstance(call.func, ast.Call) and (method or last_name(call.func.func) == "partial"):
            return None  # `make()(x)` calling a bound method, `partial(wrap, a)(b)`: positions unknown
        if isinstance(call.func, ast.Name):  # `w = partial(wrap, a)`, then `w(b)`: not `wrap`'s positions
            bound = self._named(module, scope, call.func.id, at=call.func)[1]
            if any(isinstance(v, ast.Call) and last_name(v.func) == "partial" for v in bound):
                return None
        name = returned.id
        if any(k.arg is None for k in call.keywords):
            return None
        passed = next((k.value for k in call.keywords if k.arg == name), None)
        params = positional(function, through_attribute=method and isinstance(call.func, ast.Attribute))
        if passed is None and name in params:
            position = params.index(name)
            if any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
                return None
            passed = call.args[position] if position < len(call.args) else None
        if passed is not None:
            step = self._step(module, call, _passing(call, name, function.name))
            return [found._replace(steps=(*found.steps, step)) for found in self._values(module, scope, passed, depth)]
        default = _default(function, name)
        return None if default is None else self._values(factory.module, inner[:-1], default, depth)

    def _elements(self, module: Symbols, scope: list[ast.AST], node: ast.expr, depth: int) -> Iterator[Value]:
        """The functions an element of `node` may be: of a display, of a registry, what a generator
        of the project yields, what `__next__` returns for an instance of a class of the project."""
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            for element in node.elts:
                yield from self._values(module, scope, element, depth)
        elif isinstance(node, ast.Name):
            yield from self._filed(module, scope, node, depth)
            for made in self._named(module, scope, node.id, (ast.Call,), at=node)[1]:  # `res = map(f, xs)`
                yield from self._elements(module, scope, made, depth + 1)
        if isinstance(node, ast.Call) and last_name(node.func) == "map" and not self._values(module, scope, node.func):
            for argument in node.args:  # the builtin's elements: what the functions passed return
                for function in self._values(module, scope, argument, depth):
                    yield from self._returned_by(module, scope, None, function, depth)
        if isinstance(node, ast.Call):
            for generator in self._values(module, scope, node.func, depth):
                inner = generator.module.scope_of(generator.function)
                for part in body_walk(generator.function):
                    if isinstance(part, ast.Yield) and part.value is not None:
                        yield from self._values(generator.module, inner, part.value, depth)
        for class_module, cls in self._instance_of(module, scope, node, depth):
            for next_module, method in self._inherited(class_module, cls, "__next__", depth):
                for stmt in body_walk(method):
                    if isinstance(stmt, ast.Return) and stmt.value is not None:
                        yield from self._values(next_module, next_module.scope_of(method), stmt.value, depth)

    def _name(self, module: Symbols, scope: list[ast.AST], node: ast.Name, depth: int) -> Iterator[Value]:
        """A closure, a name bound to a callable in an enclosing function or the module, a parameter
        (what the callers pass), a module-level def, an import."""
        defs, values = self._named(module, scope, node.id, at=node)
        if defs:
            for d in defs:
                yield from self._decorated_value(module, module.scope_of(d)[:-1], d, depth)
            return
        if values:
            for value in values:
                yield from self._values(module, scope, value, depth)
            return
        owner = _parameter_owner(scope, node.id) if self._follow_parameters else None
        passed = list(self._passed(module, scope[: scope.index(owner) + 1], node.id, depth)) if owner else []
        default = _default(owner, node.id) if owner else None
        if default is not None:  # what the callers that pass nothing for it get
            passed += self._values(module, scope[: scope.index(owner)], default, depth)
        if passed:
            yield from passed
        elif node.id in module.defs:
            yield Value(module, module.defs[node.id])
        elif node.id in module.targets:
            yield from self._dotted(module, *module.targets[node.id], depth)
        else:
            yield from (Value(m, f) for m, f in self._star_imported(module, node.id, depth))

    def _attribute(self, module: Symbols, scope: list[ast.AST], node: ast.Attribute, depth: int) -> Iterator[Value]:
        """`self.name`: the class's members (its methods, its subclasses' overrides, what is stored as
        `self.name`); `obj.name`, `obj` an instance of a class of the project: that class's members
        and its subclasses'; `Class.name`; `module.name`."""
        owner, attr = node.value, node.attr
        if isinstance(owner, ast.Call) and last_name(owner.func) == "super":  # the bases' member
            cls = _enclosing_class(scope)
            if cls is not None:
                for base_module, base in self._bases(module, cls, depth):
                    methods = self._inherited(base_module, base, attr, depth)
                    if methods:
                        yield from (Value(m_module, m) for m_module, m in methods)
                        return
            return
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            cls = _enclosing_class(scope)
            if cls is not None:
                yield from self._members(module, cls, attr, depth, subclasses=False)
                yield from self._overriding(module, cls, attr)
            return
        if isinstance(owner, ast.Name) and (owner.id in module.classes or owner.id in module.targets):
            classes = self._classes(module, owner, depth)
            if classes:
                for class_module, cls in classes:
                    yield from (Value(m_module, m) for m_module, m in self._inherited(class_module, cls, attr, depth))
                return
            if owner.id in module.targets and not _bound_locally(scope, owner.id):
                target, level = module.targets[owner.id]
                found = list(self._dotted(module, f"{target}.{attr}", level, depth))
                if found or not self._imported_instance(module, owner.id, depth):
                    yield from found
                    return
        head, dotted = _chain(node)
        if head in module.targets and "." in dotted[len(head) + 1 :] and not _bound_locally(scope, head):
            target, level = module.targets[head]  # `import pkg.mod`, then `pkg.mod.f`
            found = list(self._dotted(module, target + dotted[len(head) :], level, depth))
            if found:
                yield from found
                return
        # `self.x.attr` may be any subclass's (a declared base class); another object is of the class made.
        subclasses = is_self_attribute(owner)
        for class_module, cls in self._instance_of(module, scope, owner, depth):
            yield from self._members(class_module, cls, attr, depth, subclasses=subclasses)


def _chain(node: ast.expr) -> tuple[str, str]:
    """The head name and the dotted text of an attribute chain of names (`pkg.mod.f`: `pkg`,
    `pkg.mod.f`); ("", "") for any other expression."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return "", ""
    return node.id, ".".join([node.id, *reversed(names)])
