"""Name resolution: the functions of the project an expression naming a callable may be.

A name is resolved the way it is bound where it is used (a closure, a name bound to a partial or a
lambda, a module-level def, an import of a module of the project), an attribute through `self` (the
class's methods, its subclasses' overrides, an attribute declared as an instance of a class of the
project), a call through what it returns (a factory) or calls (a functor's `__call__`), and a
registry through the functions its decorator files into it. The other way round, `_callers` finds
the calls of a function and the functions each passes for one of its parameters.
"""

from __future__ import annotations

import ast
import dataclasses

from .files import find_module
from .modules import Modules
from .nodes import argument, body_walk, is_self_attribute, last_name, parameters, positional
from .reach import MEGATRON, Reach, Step
from .symbols import Symbols, derived_classes

# What a name bound to a loss function may be assigned (`_named`).
_CALLABLE_VALUES = (ast.Lambda, ast.Call, ast.Name, ast.Attribute, ast.IfExp)


class Resolver(Modules):
    """The project's modules, with the functions their expressions name."""

    def _resolve(
        self, module: Symbols, scope: list[ast.AST], node: ast.expr, depth: int = 0
    ) -> list[tuple[Symbols, ast.AST]]:
        """The functions (defs or lambdas) an expression naming a callable may be, in the project."""
        if depth > 4:
            return []
        if isinstance(node, ast.Lambda):
            found = [(module, node)]
            if isinstance(node.body, ast.Call):
                found += self._resolve(module, scope, node.body.func, depth + 1)
            return found
        if isinstance(node, ast.Call) and last_name(node.func) == "partial" and node.args:
            return self._resolve(module, scope, node.args[0], depth + 1)
        if isinstance(node, ast.Call):
            # An instance of a class of the project (a functor: calling it runs its `__call__`, or, where
            # the project defines none, its `forward`: a `torch.nn.Module`'s), or a factory: what the
            # functions it may be return (a callable or a partial, not a call's result).
            instances = [
                (class_module, method)
                for class_module, cls in self._classes(module, node.func)
                for method in self._methods(class_module, cls, "__call__", 0)
                or self._methods(class_module, cls, "forward", 0)
            ]
            return instances + [
                found
                for target_module, factory in self._resolve(module, scope, node.func, depth + 1)
                if not isinstance(factory, ast.Lambda)
                for stmt in body_walk(factory)
                if isinstance(stmt, ast.Return) and stmt.value is not None and _callable_value(stmt.value)
                for found in self._resolve(target_module, target_module.scope_of(factory), stmt.value, depth + 1)
            ]
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):  # `LOSS_REGISTRY[name]`
            return self._registered(module, node.value.id, depth + 1)
        if isinstance(node, ast.IfExp):
            return self._resolve(module, scope, node.body, depth + 1) + self._resolve(
                module, scope, node.orelse, depth + 1
            )
        if isinstance(node, ast.Name):
            # A closure, or a name bound to a partial or lambda in an enclosing function or the module.
            defs, values = self._named(module, scope, node.id)
            if defs:
                return [(module, d) for d in defs]
            if values:
                return [found for value in values for found in self._resolve(module, scope, value, depth + 1)]
            if node.id in module.defs:
                return [(module, module.defs[node.id])]
            if node.id in module.targets:
                return self._resolve_dotted(module, *module.targets[node.id], depth + 1)
            return []
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            cls = next((f for f in reversed(scope) if isinstance(f, ast.ClassDef)), None)
            if cls is not None:
                methods = self._methods(module, cls, node.attr, 0) + self._overrides(module, cls, node.attr)
                return [(module, m) for m in methods]
        if isinstance(node, ast.Attribute) and is_self_attribute(node.value):
            # `self.loss_func.compute_loss`, `self.loss_func` declared (or made) as an instance of a
            # class of the project: that class's method, or any of its subclasses' in the project.
            cls = next((f for f in reversed(scope) if isinstance(f, ast.ClassDef)), None)
            declared = self._attribute_classes(module, cls, node.value.attr) if cls is not None else []
            return [
                found
                for class_module, declared_cls in declared
                for found in self._subclass_methods(class_module, declared_cls, node.attr)
            ]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in module.classes:
            return [(module, m) for m in self._methods(module, module.classes[node.value.id], node.attr, 0)]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in module.targets:
            target, level = module.targets[node.value.id]
            return self._resolve_dotted(module, f"{target}.{node.attr}", level, depth + 1)
        return []

    def _registered(self, module: Symbols, registry: str, depth: int) -> list[tuple[Symbols, ast.AST]]:
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
            made = isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(r, ast.Return) and isinstance(r.value, ast.Name) and r.value.id == function.name
                for r in body_walk(outer)
            )
            found += self._decorated(module, outer if made else function, depth)
        return found

    def _decorated(self, module: Symbols, decorator: ast.AST, depth: int) -> list[tuple[Symbols, ast.AST]]:
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

    def _classes(self, module: Symbols, node: ast.expr) -> list[tuple[Symbols, ast.ClassDef]]:
        """The class of the project `node` (`Name`, `alias.Name`) names, if it names one."""
        if isinstance(node, ast.Name) and node.id in module.classes:
            return [(module, module.classes[node.id])]
        dotted = imported_from(module, node)
        if "." not in dotted:
            return []
        owner, _, name = dotted.rpartition(".")
        level = module.targets[node.id if isinstance(node, ast.Name) else node.value.id][1]
        path = find_module(module.path, owner, level)
        target = self._module(path) if path is not None else None
        return [(target, target.classes[name])] if target is not None and name in target.classes else []

    def _attribute_classes(self, module: Symbols, cls: ast.ClassDef, attr: str) -> list[tuple[Symbols, ast.ClassDef]]:
        """The classes of the project that `self.<attr>` of `cls` is declared as (`self.attr: Base`,
        `attr: Base` in the class body) or made from (`self.attr = Base(...)`)."""
        named = [
            stmt.annotation
            for stmt in cls.body
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == attr
        ]
        for node in ast.walk(cls):
            if isinstance(node, ast.AnnAssign) and is_self_attribute(node.target) and node.target.attr == attr:
                named.append(node.annotation)
            elif (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and any(is_self_attribute(t) and t.attr == attr for t in node.targets)
            ):
                named.append(node.value.func)
        return [found for node in named for found in self._classes(module, node)]

    def _instance_classes(
        self, module: Symbols, scope: list[ast.AST], node: ast.expr
    ) -> list[tuple[Symbols, ast.ClassDef]]:
        """The classes of the project `self.<attr>` (`node`, in `scope`) is an instance of: declared or
        made in its class (`_attribute_classes`), or made by a method of it returning an instance
        (`self.model = self.model_provider_func()`, which does `model = LatentDiffusion(...)`, `return model`)."""
        cls = next((f for f in reversed(scope) if isinstance(f, ast.ClassDef)), None)
        if cls is None or not is_self_attribute(node):
            return []
        found = self._attribute_classes(module, cls, node.attr)
        inner = scope[: scope.index(cls) + 1]
        made = [
            stmt.value.func
            for stmt in ast.walk(cls)
            if isinstance(stmt, ast.Assign)
            and isinstance(stmt.value, ast.Call)
            and any(is_self_attribute(t) and t.attr == node.attr for t in stmt.targets)
        ]
        for factory_module, factory in (found for func in made for found in self._resolve(module, inner, func)):
            if isinstance(factory, ast.Lambda):
                continue
            nodes = list(body_walk(factory))
            for stmt in nodes:
                if not (isinstance(stmt, ast.Return) and stmt.value is not None):
                    continue
                values = [stmt.value]
                if isinstance(stmt.value, ast.Name):  # `model = LatentDiffusion(...)`, then `return model`
                    values = [
                        n.value
                        for n in nodes
                        if isinstance(n, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == stmt.value.id for t in n.targets)
                    ]
                found += [c for v in values if isinstance(v, ast.Call) for c in self._classes(factory_module, v.func)]
        return found

    def _subclass_methods(self, module: Symbols, cls: ast.ClassDef, name: str) -> list[tuple[Symbols, ast.AST]]:
        """Method `name` of `cls` (or what it inherits) and the overrides of its subclasses in the
        project: those of its own module, and of the modules naming it whose classes derive from it."""
        found = [(module, m) for m in self._methods(module, cls, name, 0) + self._overrides(module, cls, name)]
        for other in map(self._module, self._mentioning(module.path, cls.name)):
            if other is None or other is module:
                continue
            for subclass in other.classes.values():
                bases = (c for base in subclass.bases for _, c in self._classes(other, base))
                if any(base is cls for base in bases):
                    found += [(other, m) for m in self._methods(other, subclass, name, 0)]
                    found += [(other, m) for m in self._overrides(other, subclass, name)]
        return found

    def _named(self, module: Symbols, scope: list[ast.AST], name: str) -> tuple[list[ast.AST], list[ast.expr]]:
        """What `name` means in the innermost function of `scope` (or the module) that binds it: every
        def of it there (each branch of an `if` may define its own), else every callable assigned to
        it (a lambda, a call such as a partial, a name or attribute, a conditional of them: each
        branch may assign its own). A class body is no enclosing scope of its methods: `name` there
        is not `self.name`."""
        for function in [*(f for f in reversed(scope) if not isinstance(f, ast.ClassDef)), module.tree]:
            nodes = list(body_walk(function))
            defs = [n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
            if defs:
                return defs, []
            values = [
                stmt.value
                for stmt in nodes
                if isinstance(stmt, ast.Assign)
                and isinstance(stmt.value, _CALLABLE_VALUES)
                and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
            ]
            if values:
                return [], values
        return [], []

    def _resolve_dotted(self, importer: Symbols, dotted: str, level: int, depth: int) -> list[tuple[Symbols, ast.AST]]:
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
            if len(rest) == 1 and rest[0] in target.targets and depth < 4:  # re-exported
                return self._resolve_dotted(target, *target.targets[rest[0]], depth + 1)
            if len(rest) == 2 and rest[0] in target.classes:
                return [(target, m) for m in self._methods(target, target.classes[rest[0]], rest[1], 0)]
        return []

    def _methods(self, module: Symbols, cls: ast.ClassDef, name: str, depth: int) -> list[ast.AST]:
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
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
            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == name
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
        (or as `like` is: its context, guess and `whole_return`). A nested function is
        called in its enclosing one; any other where a call names it (resolved as any callee is), and a
        method also wherever a call of that name has a receiver of unknown type (`self.strategy.m(...)`).
        Other files are searched only in a project on disk (not for stdin): every file is read for
        them, so each is a dependency of this evidence."""
        function = scope[-1]
        assert isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        method = len(scope) > 1 and isinstance(scope[-2], ast.ClassDef)
        params = positional(function, through_attribute=method)
        position = params.index(parameter) if parameter in params else None
        nested = len(scope) > 1 and isinstance(scope[-2], (ast.FunctionDef, ast.AsyncFunctionDef))
        paths = [] if nested else self._mentioning(module.path, f"{function.name}(")
        callers = [module, *(m for m in map(self._module, paths) if m is not None and m is not module)]
        for caller in callers:
            places = [(scope[:-2], scope[-2])] if nested else [*caller.scoped, ([], caller.tree)]
            for caller_scope, node in places:
                inner = caller_scope + [node] if not isinstance(node, ast.Module) else caller_scope
                for call in body_walk(node):
                    if not (isinstance(call, ast.Call) and last_name(call.func) == function.name):
                        continue
                    callees = [target for _, target in self._resolve(caller, inner, call.func)]
                    unknown_receiver = method and isinstance(call.func, ast.Attribute) and not callees
                    passed = argument(call, parameter, position)
                    if passed is None or not (function in callees or unknown_receiver):
                        continue
                    step = self._step(caller, call, f"passed as {parameter} to {function.name}")
                    reach = Reach(MEGATRON, (step, *steps))
                    if like is not None:
                        reach = dataclasses.replace(like, steps=reach.steps)
                    for target_module, target in self._resolve(caller, inner, passed):
                        self._reach(target_module.path, target, reach)


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
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and isinstance(value, ast.Name)
        and node.name == value.id
    ]
    return any(
        isinstance(r, ast.Return)
        and isinstance(r.value, ast.Call)
        and isinstance(r.value.func, ast.Name)
        and r.value.func.id == parameter
        for wrapper in wrappers
        for r in body_walk(wrapper)
    )
