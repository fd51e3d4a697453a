"""Registries of classes: the classes of the project an expression may be as a class (not an instance), where a
project picks its model by name. A registry is a dict display of classes, a store `MODELS[name] = cls`, a
decorator storing the class it decorates (LAVIS' `@registry.register_model("blip2_opt")`, whose `wrap(model_cls)`
stores `cls.mapping["model_name_mapping"][name] = model_cls`), a module's namespace (`models.__dict__[name]`);
it is read by `registry[name]`, `registry.get(name)`, or a function returning such a read
(`registry.get_model_class(name)`). A constant key keeps the entries filed under it. A parameter is not followed:
no class is assumed where nothing shows which one it holds. Bounded by `names._DEPTH`, as values are.
"""

from __future__ import annotations

import ast

from .calls import Calls, _entries, _may_equal
from .names import _DEPTH, _FUNCTIONS, _bound_locally, _may_be, _parameter_owner
from .nodes import body_walk, last_name
from .symbols import Symbols

Classes = list[tuple[Symbols, ast.ClassDef]]
# The class methods that make an instance of the class they are called on, defined outside the project
# (`TinyLM.from_pretrained(path)` of a transformers model).
_LOADERS = ("from_pretrained", "from_config", "_from_config")
# A store into a registry read by its text (`cls.mapping["model_name_mapping"]`): its scope, the statement, the target.
_Store = tuple[list[ast.AST], ast.Assign, ast.Subscript]


class Registries(Calls):
    """The classes a registry of the project holds."""

    def __init__(self, roots: list[str]) -> None:
        super().__init__(roots)
        self._keyed: dict[int, dict[str, list[_Store]]] = {}  # `_keyed_stores`, by module
        self._deciding: set[int] = set()  # the decorators `_decorated_classes` is finding the uses of

    def _class_values(self, module: Symbols, scope: list[ast.AST], node: ast.expr, depth: int = 0) -> Classes:
        """The classes of the project `node` (in `scope`) may be: a class it names, an entry of a registry of
        classes, what a function returns that is one of these."""
        if depth > _DEPTH:
            return []
        named = self._classes(module, node, depth)
        if named or isinstance(node, ast.Attribute):
            return named
        found: Classes = []
        if isinstance(node, ast.Name):
            if _parameter_owner(scope, node.id) is None:
                for value in self._named(module, scope, node.id, at=node)[1]:
                    found += self._class_values(module, scope, value, depth + 1)
        elif isinstance(node, ast.IfExp):
            found = self._class_values(module, scope, node.body, depth + 1)
            found += self._class_values(module, scope, node.orelse, depth + 1)
        elif isinstance(node, ast.Subscript):
            found = self._held(module, scope, node.value, node.slice, depth + 1)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get" and node.args:
                found = self._held(module, scope, func.value, node.args[0], depth + 1)
            for factory in [] if found else self._values(module, scope, func, depth + 1):
                if isinstance(factory.function, ast.Lambda):
                    continue
                inner = factory.module.scope_of(factory.function)
                for stmt in body_walk(factory.function):
                    if isinstance(stmt, ast.Return) and stmt.value is not None:
                        found += self._class_values(factory.module, inner, stmt.value, depth + 1)
        return _unique(found)

    def _instance_of(self, module: Symbols, scope: list[ast.AST], node: ast.expr, depth: int) -> Classes:
        """`Classes._instance_of`, and an instance of a class a registry holds: `model_cls(cfg)`, or
        `model_cls.from_config(cfg)` (a classmethod of it returning `cls(...)`, or a loader of `_LOADERS`)."""
        found = super()._instance_of(module, scope, node, depth)
        if not isinstance(node, ast.Call) or found or depth > _DEPTH:
            return found
        # Which classes the callee may be is a question of its own: its steps are not `depth`'s (a registry read
        # through a method of an imported instance takes most of them).
        func = node.func
        if not isinstance(func, ast.Attribute):
            return self._class_values(module, scope, func)
        for class_module, cls in self._class_values(module, scope, func.value):
            if func.attr in _LOADERS or any(
                _makes_its_class(method) for _, method in self._inherited(class_module, cls, func.attr, depth)
            ):
                found.append((class_module, cls))
        return found

    def _held(self, module: Symbols, scope: list[ast.AST], registry: ast.expr, key: ast.expr, depth: int) -> Classes:
        """The classes `registry[key]` may be (`registry.get(key)`)."""
        if depth > _DEPTH:
            return []
        namespace = self._namespace(module, registry)
        if namespace is not None:
            return [(namespace, cls) for name, cls in namespace.classes.items() if _may_be(key, name)]
        found: Classes = []
        if isinstance(registry, ast.Name):
            displays = self._named(module, scope, registry.id, (ast.Dict,))[1]
            for display in displays:
                for entry in _entries(display, key):
                    found += self._class_values(module, scope, entry, depth + 1)
            if not displays and registry.id in module.targets and not _bound_locally(scope, registry.id):
                dotted, level = module.targets[registry.id]
                owner, _, there = dotted.rpartition(".")
                path = self._find(module.path, owner, level) if owner or level else None
                target = self._module(path) if path is not None else None
                if target is not None and target is not module:
                    return self._held(target, [], ast.Name(there, ast.Load()), key, depth + 1)
        for inner, stmt, target in self._keyed_stores(module).get(ast.unparse(registry), ()):
            if not _may_equal(key, target):
                continue
            value = stmt.value
            function = inner[-1] if inner else None
            if isinstance(value, ast.Name) and isinstance(function, _FUNCTIONS) and _parameter_owner(inner, value.id):
                found += self._decorated_classes(module, inner)  # `wrap(model_cls)` files what it decorates
            else:
                found += self._class_values(module, inner, value, depth + 1)
        return _unique(found)

    def _keyed_stores(self, module: Symbols) -> dict[str, list[_Store]]:
        """The statements `<registry>[key] = value` of `module`, by the registry's text, with their scopes."""
        found = self._keyed.get(id(module))
        if found is None:
            found = self._keyed[id(module)] = {}
            for scope, node in [*module.scoped, ([], module.tree)]:
                inner = [*scope, node] if not isinstance(node, ast.Module) else scope
                for stmt in body_walk(node):
                    if isinstance(stmt, ast.Assign):
                        for target in stmt.targets:
                            if isinstance(target, ast.Subscript):
                                found.setdefault(ast.unparse(target.value), []).append((inner, stmt, target))
        return found

    def _decorated_classes(self, module: Symbols, inner: list[ast.AST]) -> Classes:
        """The classes decorated with the decorator `inner[-1]` stores its parameter from: itself, or the function
        around it returning it (`register_model(name)` returning `wrap`), used as `@register_model("opt")`."""
        function = inner[-1]
        outer = inner[-2] if len(inner) > 1 else None
        made = isinstance(outer, _FUNCTIONS) and any(
            isinstance(r, ast.Return) and isinstance(r.value, ast.Name) and r.value.id == function.name
            for r in body_walk(outer)
        )
        decorator = outer if made else function
        found: Classes = []
        if id(decorator) in self._deciding:  # asked again while resolving its own uses
            return found
        self._deciding.add(id(decorator))
        paths = self._mentioning(module.path, decorator.name)
        for other in [module, *(m for m in map(self._module, paths) if m is not None and m is not module)]:
            for cls in other.classes.values():
                for node in cls.decorator_list:
                    callee = node.func if isinstance(node, ast.Call) else node
                    if last_name(callee) != decorator.name:
                        continue
                    # Whether this decorator is that function: a question of its own, not a step of `depth`'s.
                    if any(target is decorator for _, target in self._resolve(other, [], callee)):
                        found.append((other, cls))
        self._deciding.discard(id(decorator))
        return found


def _makes_its_class(method: ast.AST) -> bool:
    """Whether `method` is a classmethod returning an instance of the class it is called on (`return cls(...)`, or
    `model = cls(...)` then `return model`)."""
    if not any(isinstance(d, ast.Name) and d.id == "classmethod" for d in getattr(method, "decorator_list", ())):
        return False
    first = method.args.args[0].arg if method.args.args else None
    made = {
        t.id
        for node in body_walk(method)
        if isinstance(node, ast.Assign) and _calls(node.value, first)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    return any(
        isinstance(r, ast.Return)
        and r.value is not None
        and (_calls(r.value, first) or (isinstance(r.value, ast.Name) and r.value.id in made))
        for r in body_walk(method)
    )


def _calls(node: ast.expr, name: str | None) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _unique(found: Classes) -> Classes:
    seen: set[int] = set()
    return [(m, c) for m, c in found if not (id(c) in seen or seen.add(id(c)))]
