"""Calls: the calls of a function and what each passes for a parameter (`_passed`, `_callers`),
registries (what is filed into a dict or list of functions, or by a decorator), decorated defs."""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Iterator

from .classes import Classes
from .names import _FUNCTIONS, Found, Value, _bound_locally, _default, _may_be, _parameter_owner
from .nodes import body_walk, last_name, parameters, positional
from .reach import MEGATRON, Reach, Step
from .symbols import Symbols

# How many other files may call a function whose parameter a value is followed through (`_calls_of`).
_CALLER_FILES = 8

# A call as `_calls_named` keeps it: its scope, itself, the function called and its arguments.
_Call = tuple[list[ast.AST], ast.Call, ast.expr, list[ast.expr], dict[str, ast.expr]]


class Calls(Classes):
    """The calls of the project's functions, and its registries."""

    def __init__(self, roots: list[str]) -> None:
        super().__init__(roots)
        self._calls: dict[int, dict[str, list[_Call]]] = {}  # `_calls_named`, by module
        self._filings: dict[int, dict[str, list[tuple[list[ast.AST], ast.Assign]]]] = {}
        self._nested_filings: dict[int, dict[str, list[tuple[list[ast.AST], ast.Assign]]]] = {}
        # A decorated def, by id: the calls its decorators make of it (`_application`).
        self._applications: dict[int, ast.Call] = {}

    def _decorated_value(self, module: Symbols, scope: list[ast.AST], function: ast.AST, depth: int) -> list[Value]:
        """What a def of `scope` binds its name to: the def, or what its decorators return when they
        are functions of the project returning a function (a wrapper, the def passed through); the
        def where they are not (`functools.lru_cache`, a decorator returning an object)."""
        if not getattr(function, "decorator_list", None):
            return [Value(module, function)]
        self._calls_named(module)
        made = self._values(module, scope, self._applications[id(function)], depth)
        return made or [Value(module, function)]

    def _passed(self, module: Symbols, scope: list[ast.AST], parameter: str, depth: int) -> Iterator[Value]:
        """What the calls of `scope[-1]` pass as its `parameter` (by position or keyword). A nested
        function is called in its enclosing one; any other where a call names it (resolved as any
        callee is; a method also wherever a call of that name has a receiver of unknown type)."""
        calls = self._calls_of(module, scope, parameter, depth, bounded=True)
        for caller, inner, call, passed in calls:
            step = self._step(caller, call, _passing(call, parameter, _name_of(scope[-1])))
            for found in self._values(caller, inner, passed, depth):
                yield found._replace(steps=(*found.steps, step))

    def _calls_of(
        self, module: Symbols, scope: list[ast.AST], parameter: str, depth: int = 0, bounded: bool = False
    ) -> Iterator[tuple[Symbols, list[ast.AST], ast.Call, ast.expr]]:
        """The calls of `scope[-1]` passing something as its `parameter`: (the caller's module, the
        scope of the call, the call, what it passes). Other files are searched only in a project on
        disk (not for stdin), by the words naming the function (`_caller_files`): the evidence depends
        on the files answering and on those it then reads.
        `bounded` (a parameter followed while resolving a value): a method's calls only where their
        receiver resolves to it, and in other files only as `_followed_caller_files` bounds them (a name
        called all over the project, `training_step(`, is followed in its own module only).
        In the function's own module, a call of a parameter (`fn(x)`) is one where `fn` may be it. A class's
        `__init__` is called by `Class(...)` too."""
        function = scope[-1]
        assert isinstance(function, (*_FUNCTIONS, ast.Lambda))
        method = len(scope) > 1 and isinstance(scope[-2], ast.ClassDef)
        params = positional(function, through_attribute=method)
        position = params.index(parameter) if parameter in params else None
        nested = len(scope) > 1 and isinstance(scope[-2], _FUNCTIONS)
        made = _made_class(scope)
        paths = self._caller_files(module, scope)
        if bounded:
            paths = self._followed_caller_files(module, scope, paths)
        callers = [module, *(m for m in map(self._module, paths) if m is not None)]
        for caller in callers:
            if isinstance(function, ast.Lambda):  # called by the names it is assigned to
                around = next((f for f in reversed(scope[:-1]) if not isinstance(f, ast.ClassDef)), module.tree)
                names = [n for n, values in self._bindings(around)[1].items() if any(v is function for v in values)]
            else:
                names = [function.name, *_aliases(self._bindings(caller.tree)[1], function.name)]
                names += [made.name] if made is not None else []
            calls = [c for n in names for c in self._calls_named(caller).get(n, ())]
            if caller is module:  # and the calls of a parameter (`fn(x)`) the function may be passed as
                calls += [
                    c
                    for n, named in self._calls_named(caller).items()
                    if n not in names
                    for c in named
                    if isinstance(c[2], ast.Name) and _parameter_owner(c[0], n) is not None
                ]
            for inner, call, head, given, keywords in calls:
                if nested and (not inner or inner[-1] is not scope[-2]):
                    continue
                passed = keywords.get(parameter)
                if passed is None and position is not None and position < len(given):
                    starred = any(isinstance(a, ast.Starred) for a in given[: position + 1])
                    passed = None if starred else given[position]
                if passed is None:
                    continue
                callees = [v.function for v in self._values(caller, inner, head, depth)]
                if made is not None and function not in callees:  # `Class(...)` runs the `__init__` it has
                    classes = self._classes(caller, head, depth)
                    callees += [
                        m for c_module, c in classes for _, m in self._inherited(c_module, c, "__init__", depth)
                    ]
                unknown_receiver = method and not bounded and isinstance(head, ast.Attribute) and not callees
                if function in callees or unknown_receiver:
                    yield caller, inner, call, passed

    def _caller_files(self, module: Symbols, scope: list[ast.AST]) -> list[str]:
        """The other files that may call `scope[-1]` (or bind it with `functools.partial`): beyond
        `_CALLER_FILES` of them, a value is not followed back through its parameters."""
        function = scope[-1]
        nested = len(scope) > 1 and isinstance(scope[-2], _FUNCTIONS)
        if nested or isinstance(function, ast.Lambda):  # called in its own module
            return []
        made = _made_class(scope)
        if made is not None:  # `Class(...)` runs its `__init__`
            return [p for p in self._mentioning(module.path, f"{made.name}(") if p != module.path]
        paths = self._mentioning(module.path, f"{function.name}(")
        partials = set(self._mentioning(module.path, "partial("))
        paths = [*paths, *(p for p in self._mentioning(module.path, function.name) if p in partials)]
        paths += self._mentioning(module.path, f"@{function.name}")  # applied as a decorator
        return [p for p in dict.fromkeys(paths) if p != module.path]

    def _followed_caller_files(self, module: Symbols, scope: list[ast.AST], paths: list[str]) -> list[str]:
        """Of `paths`, the other files that may call `scope[-1]` (`_caller_files`), those whose calls a bounded
        search follows: all, up to `_CALLER_FILES`; beyond, those of them that may import its module, up to
        `_CALLER_FILES`; else none. Its own module's calls are always followed: how many files elsewhere call
        a name says nothing of the calls beside the function (a task's loop calling its own `self.train_step`)."""
        if len(paths) > _CALLER_FILES:
            paths = self._importing(module, scope, paths)
        return paths if len(paths) <= _CALLER_FILES else []

    def _importing(self, module: Symbols, scope: list[ast.AST], paths: list[str]) -> list[str]:
        """Of `paths`, naming a module-level function of `module`, those that may import it: a caller names its
        module or a package holding it (`from engine import train_one_epoch`, `import pkg.engine`, a package
        re-exporting it), where a tree of many projects defines and calls a function of that name in each
        (LLaMA-Adapter's sixteen `train_one_epoch(`). A method is called through instances: `paths` as it is."""
        if len(scope) != 1 or not module.path:
            return paths
        root = next((r for r in self.roots if module.path.startswith(r + os.sep)), None)
        if root is None:
            return paths
        stem = os.path.splitext(os.path.basename(module.path))[0]
        words = {stem} if stem != "__init__" else set()
        words |= set(os.path.relpath(os.path.dirname(module.path), root).split(os.sep)) - {os.curdir}
        importing = {p for word in words for p in self._mentioning(module.path, word)}
        return [p for p in paths if p in importing]

    def _calls_named(self, module: Symbols) -> dict[str, list[_Call]]:
        """The calls of `module` (and the partials binding a function) by the last name of the function
        called: (the scope of the call, the call, the function, positional and keyword arguments).
        A decorator is called on what the decorators below it made of the def (`_applications`).
        Read once a module: `_calls_of` asks it for every parameter it follows."""
        calls = self._calls.get(id(module))
        if calls is None:
            calls = self._calls[id(module)] = {}
            for scope, node in [*module.scoped, ([], module.tree)]:
                inner = [*scope, node] if not isinstance(node, ast.Module) else scope
                for call in body_walk(node):
                    if isinstance(call, _FUNCTIONS) and call.decorator_list:
                        self._applications[id(call)] = applied = _application(call)
                        for made in _nested_calls(applied):
                            if last_name(made.func) is not None:
                                calls.setdefault(last_name(made.func), []).append(
                                    (inner, made, made.func, made.args, {})
                                )
                    if isinstance(call, ast.Call):
                        head, given, keywords = _applied(call)
                        name = last_name(head)
                        if name is not None:
                            calls.setdefault(name, []).append((inner, call, head, given, keywords))
        return calls

    def _filed(
        self, module: Symbols, scope: list[ast.AST], registry: ast.expr, depth: int, key: ast.expr | None = None
    ) -> Iterator[Value]:
        """The functions filed into `registry` (a name, maybe imported): the elements of the dict, list
        or tuple it is bound to, what is stored into it (`LOSSES[name] = fn`), and what a decorator
        files into it. A constant `key` (`LOSSES["ce"]`, `fns[0]`) keeps the entries filed under a key
        that may equal it, and so does a parameter every call of its function passes a constant for."""
        namespace = self._namespace(module, registry)
        if namespace is not None:  # `models.__dict__[args.model]`: every def it may name
            yield from (Value(namespace, f) for name, f in namespace.defs.items() if _may_be(key, name))
            return
        if isinstance(registry, ast.Subscript):  # `d["a"]["b"]`, `ls[0][0]`
            yield from self._filed_nested(module, scope, registry, depth, key)
            return
        if not isinstance(registry, ast.Name):
            return
        keys = self._constants_passed(module, scope, key, depth) if isinstance(key, ast.Name) else None
        if keys:
            for constant in keys:
                yield from self._filed(module, scope, registry, depth + 1, constant)
            return
        if isinstance(key, ast.Name):  # `ls[KEY]`, `KEY = 1` here or in the module it is imported from
            key = self._constant_named(module, scope, key) or key
        name = registry.id
        _, values = self._named(module, scope, name, _REGISTRIES)
        owner = None if values else _parameter_owner(scope, name)
        if owner is not None:  # a registry passed in: what the callers pass
            inner = scope[: scope.index(owner) + 1]
            for caller, at, call, passed in self._calls_of(module, inner, name, depth, bounded=True):
                step = self._step(caller, call, _passing(call, name, _name_of(owner)))
                for found in self._filed(caller, at, passed, depth + 1, key):
                    yield found._replace(steps=(*found.steps, step))
            return
        if not values:  # `d = make()`: the dicts and lists the functions called return
            for made in self._named(module, scope, name, (ast.Call,), at=registry)[1]:
                yield from self._returned_registry(module, scope, made, depth, key)
        if not values and name in module.targets and not _bound_locally(scope, name):
            dotted, level = module.targets[name]
            owner, _, there = dotted.rpartition(".")
            path = self._find(module.path, owner, level) if owner or level else None
            target = self._module(path) if path is not None else None
            if target is not None and target is not module:
                yield from self._filed(target, [], ast.Name(there, ast.Load()), depth + 1, key)
                return
        stores = self._subscript_stores(module).get(name, [])
        filed = self._filed_in_order(module, scope, registry, stores)
        if filed is not None:  # straight-line code: what the last store of each key left
            for stmt, element in _entries_at(filed, key):
                for found in self._values(module, scope, element, depth):
                    yield found._replace(steps=(*found.steps, self._step(module, stmt, f"filed into {name}")))
            return
        for value in values:
            for element in _entries(value, key):
                yield from self._values(module, scope, element, depth)
        for inner, stmt in stores:
            if not _may_equal(key, stmt.targets[0]):
                continue
            step = self._step(module, stmt, f"filed into {name}")
            for found in self._values(module, inner, stmt.value, depth):
                yield found._replace(steps=(*found.steps, step))
        yield from (Value(m, f) for m, f in self._registered(module, name, depth))

    def _filed_nested(
        self, module: Symbols, scope: list[ast.AST], registry: ast.Subscript, depth: int, key: ast.expr | None
    ) -> Iterator[Value]:
        """The functions filed under `key` in `name[outer]` (a display nested in the display `name` is
        bound to, or what `name[outer][key] = fn` stores). Where every such store is a statement of
        the body of the function reading it (or the module's), each under constant keys, the last one
        under both keys before the read (and after the last binding of `name`) is what is read."""
        if not isinstance(registry.value, ast.Name):
            return
        name, outer = registry.value.id, registry.slice
        _, values = self._named(module, scope, name, _REGISTRIES, at=registry.value)
        stores = self._nested_stores(module).get(name, [])
        function = next((f for f in reversed(scope) if not isinstance(f, ast.ClassDef)), module.tree)
        body = function.body if isinstance(function.body, list) else []
        at = (getattr(registry, "lineno", 0), getattr(registry, "col_offset", 0))
        ordered = all(any(stmt is s for s in body) and _constant_path(stmt.targets[0]) for _, stmt in stores)
        before = [
            stmt
            for _, stmt in stores
            if (stmt.end_lineno, stmt.end_col_offset) <= at and _exactly(stmt.targets[0], outer, key)
        ]
        bound = [end for end in self._in_order(function).get(name, ()) if end <= at]
        if ordered and before and (not bound or (before[-1].end_lineno, before[-1].end_col_offset) > bound[-1]):
            step = self._step(module, before[-1], f"filed into {name}")
            for found in self._values(module, scope, before[-1].value, depth):
                yield found._replace(steps=(*found.steps, step))
            return
        for value in values:
            for inner in _entries(value, outer):
                if isinstance(inner, _REGISTRIES):
                    for element in _entries(inner, key):
                        yield from self._values(module, scope, element, depth)
        for inner_scope, stmt in stores:
            target = stmt.targets[0]
            if _may_equal(key, target) and _may_equal(outer, target.value):
                for found in self._values(module, inner_scope, stmt.value, depth):
                    yield found._replace(steps=(*found.steps, self._step(module, stmt, f"filed into {name}")))

    def _nested_stores(self, module: Symbols) -> dict[str, list[tuple[list[ast.AST], ast.Assign]]]:
        """The statements `name[outer][key] = value` of `module`, by `name`, with their scopes (one walk)."""
        found = self._nested_filings.get(id(module))
        if found is None:
            found = self._nested_filings[id(module)] = {}
            for scope, node in [*module.scoped, ([], module.tree)]:
                inner = [*scope, node] if not isinstance(node, ast.Module) else scope
                for stmt in body_walk(node):
                    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                        target = stmt.targets[0]
                        nested = isinstance(target, ast.Subscript) and isinstance(target.value, ast.Subscript)
                        if nested and isinstance(target.value.value, ast.Name):
                            found.setdefault(target.value.value.id, []).append((inner, stmt))
        return found

    def _returned_registry(
        self, module: Symbols, scope: list[ast.AST], call: ast.Call, depth: int, key: ast.expr | None
    ) -> Iterator[Value]:
        """The functions filed under `key` in the dicts and lists the functions `call` calls return
        (a display, or a name bound to one)."""
        for factory in self._values(module, scope, call.func, depth):
            if isinstance(factory.function, ast.Lambda):
                continue
            inner = factory.module.scope_of(factory.function)
            for stmt in body_walk(factory.function):
                if not (isinstance(stmt, ast.Return) and stmt.value is not None):
                    continue
                step = self._step(factory.module, stmt, f"returned by {factory.function.name}")
                if isinstance(stmt.value, _REGISTRIES):
                    found = [
                        f for e in _entries(stmt.value, key) for f in self._values(factory.module, inner, e, depth)
                    ]
                else:
                    found = list(self._filed(factory.module, inner, stmt.value, depth + 1, key))
                for value in found:
                    yield value._replace(steps=(*value.steps, step))

    def _constant_named(self, module: Symbols, scope: list[ast.AST], key: ast.Name) -> ast.Constant | None:
        """The constant a module-level `key` holds where it is read: the last value its module's
        straight-line code assigns it before, or the one a module of the project assigns to the name
        it imports (no function binds it or declares it `global`)."""
        if any(key.id in self._bindings(f)[1] for f in scope if not isinstance(f, ast.ClassDef)):
            return None
        if _bound_locally(scope, key.id):
            return None
        there, name = module, key.id
        if name not in self._bindings(module.tree)[1] and name in module.targets:
            dotted, level = module.targets[name]
            owner, _, name = dotted.rpartition(".")
            path = self._find(module.path, owner, level) if owner or level else None
            there = self._module(path) if path is not None else None
        if there is None or name not in self._in_order(there.tree):  # straight-line, never `global`
            return None
        values = self._named(there, [], name, (ast.expr,), at=key if there is module else None)[1]
        return values[-1] if values and isinstance(values[-1], ast.Constant) else None

    def _constants_passed(self, module: Symbols, scope: list[ast.AST], key: ast.Name, depth: int) -> list[ast.expr]:
        """The constants the calls of the function whose parameter `key` is pass for it, and its default
        (none unless every one is a constant)."""
        owner = _parameter_owner(scope, key.id) if self._follow_parameters else None
        if owner is None:
            return []
        passed = [p for *_, p in self._calls_of(module, scope[: scope.index(owner) + 1], key.id, depth, bounded=True)]
        default = _default(owner, key.id)  # what the calls passing nothing get
        passed += [default] if default is not None else []
        return passed if all(isinstance(p, ast.Constant) for p in passed) else []

    def _filed_in_order(
        self, module: Symbols, scope: list[ast.AST], registry: ast.Name, stores: list[tuple[list[ast.AST], ast.Assign]]
    ) -> list[tuple[ast.stmt, dict[object, ast.expr]]] | None:
        """The dict `registry` holds where it is read, when the function reading it (or the module)
        binds it to a display and stores into it (`d[k] = f`, `d.update({k: f})`) only in statements
        of its own body, each under a constant key, and no decorator files into it: the statements
        before the read that bind or store, each with what it files by key (a binding: a new dict).
        None where the order cannot tell (the stores of any other scope, a branch, a loop)."""
        function = next((f for f in reversed(scope) if not isinstance(f, ast.ClassDef)), module.tree)
        name = registry.id
        ends = self._in_order(function).get(name)
        if ends is None or not hasattr(registry, "lineno") or self._registered(module, name, 0):
            return None
        body = function.body if isinstance(function.body, list) else []
        changes = [s for s in body if _binds_or_stores(s, name)]
        mutations = [n for n in body_walk(function) if _stores_into(n, name)]
        if len(mutations) != sum(
            not isinstance(s, ast.Assign) or isinstance(s.targets[0], ast.Subscript) for s in changes
        ):
            return None
        if any(inner[-1:] != ([function] if function is not module.tree else []) for inner, _ in stores):
            return None
        filed = []
        for stmt in changes:
            if (stmt.end_lineno, stmt.end_col_offset) > (registry.lineno, registry.col_offset):
                break
            entries = _constant_entries(stmt, name)
            if entries is None:
                return None
            filed.append((stmt, entries))
        return filed

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
            step = self._step(caller, call, _passing(call, parameter, _name_of(scope[-1])))
            reach = Reach(MEGATRON, (step, *steps))
            if like is not None:
                reach = dataclasses.replace(like, steps=reach.steps)
            for value in self._values(caller, inner, passed):
                self._reach(
                    value.module.path, value.function, dataclasses.replace(reach, steps=value.steps + reach.steps)
                )


# What a registry's name may be bound to (`Resolver._filed`).
_REGISTRIES = (ast.Dict, ast.List, ast.Tuple)


def _application(function: ast.AST) -> ast.Call:
    """The calls the decorators of `function` make, as a nested call: `@a @b def f` is `a(b(f))`, each
    call where its decorator is written."""
    made: ast.expr = function
    for decorator in reversed(function.decorator_list):
        made = ast.copy_location(ast.Call(func=decorator, args=[made], keywords=[]), decorator)
    return made


def _nested_calls(call: ast.Call) -> Iterator[ast.Call]:
    while isinstance(call, ast.Call):
        yield call
        call = call.args[0]


def _aliases(assigned: dict[str, list[ast.expr]], name: str) -> list[str]:
    """The module-level names bound to a name or attribute ending in `name` (`run = train`), whose
    calls may be `name`'s."""
    return [
        alias
        for alias, values in assigned.items()
        if alias != name and any(isinstance(v, (ast.Name, ast.Attribute)) and last_name(v) == name for v in values)
    ]


def _entries(display: ast.expr, key: ast.expr | None) -> list[ast.expr]:
    """The entries of a dict, list or tuple display that `display[key]` may be."""
    if isinstance(display, ast.Dict):
        return [v for k, v in zip(display.keys, display.values, strict=True) if k is None or _same(key, k)]
    index = key.value if isinstance(key, ast.Constant) else None
    if type(index) is int and not any(isinstance(e, ast.Starred) for e in display.elts):
        return display.elts[index : index + 1] if -len(display.elts) <= index < len(display.elts) else []
    return list(display.elts)


def _constant_path(target: ast.Subscript) -> bool:
    """Whether a store `name[outer][key] = ...` has constant keys."""
    return isinstance(target.slice, ast.Constant) and isinstance(target.value.slice, ast.Constant)


def _exactly(target: ast.Subscript, outer: ast.expr, key: ast.expr | None) -> bool:
    """Whether a store `name[o][k] = ...` surely files under `[outer][key]`: all four constants, equal."""
    pairs = ((target.value.slice, outer), (target.slice, key))
    return all(isinstance(a, ast.Constant) and isinstance(b, ast.Constant) and _same(a, b) for a, b in pairs)


def _binds_or_stores(stmt: ast.stmt, name: str) -> bool:
    """Whether `stmt` is `name = ...`, `name[k] = ...` or `name.update(...)`."""
    if isinstance(stmt, ast.Assign):
        target = stmt.targets[0]
        target = target.value if isinstance(target, ast.Subscript) else target
        return len(stmt.targets) == 1 and isinstance(target, ast.Name) and target.id == name
    return isinstance(stmt, ast.Expr) and _stores_into(stmt.value, name)


def _stores_into(node: ast.AST, name: str) -> bool:
    """Whether `node` is a store `name[k] = ...` or a call `name.update(...)`."""
    if isinstance(node, ast.Assign):
        return any(
            isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name for t in node.targets
        )
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "update"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == name
    )


def _constant_entries(stmt: ast.stmt, name: str) -> dict[object, ast.expr] | None:
    """What a binding or store of `name` files, by constant key (None if a key is no constant, or
    the value bound no dict display)."""
    if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Subscript):
        key = stmt.targets[0].slice
        return {_key(key): stmt.value} if isinstance(key, ast.Constant) else None
    display = stmt.value if isinstance(stmt, ast.Assign) else (stmt.value.args or [None])[0]
    if not isinstance(display, ast.Dict) or not all(isinstance(k, ast.Constant) for k in display.keys):
        return None
    return {_key(k): v for k, v in zip(display.keys, display.values, strict=True)}


def _key(key: ast.Constant) -> object:
    return (type(key.value), key.value)


def _entries_at(
    filed: list[tuple[ast.stmt, dict[object, ast.expr]]], key: ast.expr | None
) -> list[tuple[ast.stmt, ast.expr]]:
    """The entries `d[key]` may be, `filed` the statements before it binding (a new dict) or storing."""
    held: dict[object, tuple[ast.stmt, ast.expr]] = {}
    for stmt, entries in filed:
        if isinstance(stmt, ast.Assign) and not isinstance(stmt.targets[0], ast.Subscript):
            held = {}
        held.update({k: (stmt, v) for k, v in entries.items()})
    if isinstance(key, ast.Constant):
        return [held[_key(key)]] if _key(key) in held else []
    return list(held.values())


def _may_equal(key: ast.expr | None, target: ast.expr) -> bool:
    """Whether a store `name[k] = ...` (`target`) may file under `key`."""
    return not isinstance(target, ast.Subscript) or _same(key, target.slice)


def _same(key: ast.expr | None, other: ast.expr) -> bool:
    """Whether two keys may be equal: only two constants can be told apart."""
    if isinstance(key, ast.Constant) and isinstance(other, ast.Constant):
        return type(key.value) is type(other.value) and key.value == other.value
    return True


def _name_of(function: ast.AST) -> str:
    return getattr(function, "name", "<lambda>")


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


def _made_class(scope: list[ast.AST]) -> ast.ClassDef | None:
    """The class whose `__init__` `scope[-1]` is (a call of the class runs it), if it is one."""
    function = scope[-1]
    if len(scope) > 1 and isinstance(scope[-2], ast.ClassDef) and getattr(function, "name", None) == "__init__":
        return scope[-2]
    return None
