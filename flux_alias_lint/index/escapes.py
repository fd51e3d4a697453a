"""Where the value of a function nothing hands to a host goes: `escapes`, or `unreached` earned.

The index proves a context by finding the hand-off; when it finds none, a finding would be
`unreached`. That is only earned when the function's value provably reaches no rescaling host, so
every reference to the function that is not a direct call (`references.py`) is followed the way
the value flows: a name bound to it (its reads in the same function, or module-wide and in its
importers), `self.attr` set to it (its reads in the class and subclasses), a container holding it
(subscripts, `.get`, iteration, unpacking by position: `Path`), a `functools.partial` of it, an
argument of a function or class of the project (that parameter's reads there), a return (the calls
of the function returning it: `CALLED`).

Where it goes where this cannot follow, it **escapes**: passed to a call that resolves to nothing
in the project, stored on an object of unknown class or in a container that escapes, looked up by
a `getattr` with a computed key, returned by a function whose callers are not seen, read off an
object of unknown class in a module naming the class, registered by a library's decorator, run
past a function, from a file whose calls of it the hand-off search does not follow back
(`Calls._followed_caller_files`: that search stopped there, so what runs it may be a host). The
first such place, depth first in source order, ends the finding's chain; none: `unreached`. The
work is bounded (`_BUDGET` values, `references._MODULES` modules a function): beyond, it escapes.
Where the line is drawn is in docs/context.md.

Asked only for findings about to be reported unreached (`lint.py`), one `Escapes` per checked file.
"""

from __future__ import annotations

import ast
import dataclasses

from .calls import _CALLER_FILES
from .nodes import last_name, parameters, positional
from .reach import ESCAPES, UNREACHED_REACH, Reach, Step
from .references import SELF, Bound, Ref, References
from .symbols import FUNCTIONS, Symbols

# Calls that look at a function value without keeping it (`callable(f)`, `functools.wraps(f)`).
INSPECTING = frozenset(
    {
        "callable", "print", "repr", "str", "id", "hash", "type", "isinstance", "issubclass", "hasattr",
        "len", "dir", "vars", "signature", "getfullargspec", "getsource", "getfile", "getmodule",
        "iscoroutinefunction", "isfunction", "ismethod", "isclass", "wraps", "update_wrapper", "format",
    }
)  # fmt: skip
# Container methods that keep their argument: the container then holds the value.
_ADDS = frozenset({"append", "add", "insert", "extend", "setdefault", "update", "appendleft"})
# A library decorator with this word in its name files the function in a registry it keeps.
_REGISTERING = "register"
_BUDGET = 256  # values followed for one function before it counts as escaping
_PATH = 3  # container levels and calls told apart in a path; deeper ones are one

# How the value is got from the expression: () it is the value; an index (or "*", any) of a
# container holding it; CALLED: calling it gives the value (a function returning it).
Path = tuple[int | str, ...]
CALLED = "()"


@dataclasses.dataclass(frozen=True)
class _Value:
    """An expression that evaluates to the function (or, `path`, to a container holding it)."""

    module: Symbols
    node: ast.AST
    steps: tuple[Step, ...]
    path: Path = ()
    instance: str | None = None  # an instance of the functor's class: calling it runs this method
    lookup: bool = False  # a `getattr` whose key is computed: it may give the function
    # Passed as a parameter of a function from a file the hand-off search does not follow back
    # (`Calls._followed_caller_files`), so where the value runs past it, it escapes there.
    cut: tuple[str, int] | None = None  # (what the step where it runs says, id of that function)
    # The calls it was passed in through, innermost last: (id of the function called, the caller's
    # module, the call). Returned by that function, it is that call's result, not every caller's.
    frames: tuple[tuple[int, Symbols, ast.Call], ...] = ()

    @classmethod
    def of(cls, ref: Ref, steps: tuple[Step, ...] = (), path: Path = ()) -> _Value:
        return cls(ref.module, ref.node, steps, path, ref.instance, ref.lookup)

    def to(self, module: Symbols, node: ast.AST, steps: tuple[Step, ...], path: Path | None = None) -> _Value:
        return dataclasses.replace(
            self, module=module, node=node, steps=steps, path=self.path if path is None else path, lookup=False
        )

    def result(self, call: ast.Call) -> _Value:
        """What calling the value at `call` gives, where `path` says it gives the value."""
        return _Value(self.module, call, self.steps, self.path[1:])


class Escapes(References):
    """`References`, followed: where an unreached function's value goes."""

    def of(self, line: int) -> Reach:
        """Where the function (def or lambda) at `line` of the checked file escapes (`ESCAPES`, with
        the steps to that place), or `UNREACHED_REACH` when no value of it leaves what is followed."""
        module = self._parsed.get(self._path)
        if module is None:
            return UNREACHED_REACH
        self._fresh()
        try:
            return self._of(module, line)
        except Bound:
            where = next((f for _, f in module.scoped_at.get(line, ())), module.tree)
            return Reach(ESCAPES, (self._step(module, where, "the analysis' bound reached"),))

    def _of(self, module: Symbols, line: int) -> Reach:
        starts: list[_Value] = []
        for scope, function in module.scoped_at.get(line, ()):
            escaped = self._decorated_escape(module, scope, function)
            if escaped is not None:
                return Reach(ESCAPES, (escaped,))
            refs = self._references(module, scope, function)
            starts += [_Value.of(ref) for ref in refs]
        # Indexed by line: asked once per unreached finding, a walk of the module each time was
        # quadratic in a module of many small loss functions.
        starts += [_Value(module, node, ()) for node in module.lambdas_at.get(line, ())]
        return self._follow(starts)

    def named_at(self, line: int) -> list[Step]:
        """The references to the innermost function around `line` of the checked file that are not
        calls of it (what `of` follows), each as a step (`explain`)."""
        module = self._parsed.get(self._path)
        around = [
            (scope, f) for scope, f in (module.scoped if module else []) if f.lineno <= line <= (f.end_lineno or 0)
        ]
        if module is None or not around:
            return []
        scope, function = max(around, key=lambda found: found[1].lineno)
        named = []
        for ref in self._references(module, scope, function):
            parent = self._tree(ref.module).parent.get(id(ref.node))
            if ref.instance is None and isinstance(parent, ast.Call) and parent.func is ref.node:
                continue
            what = "an instance made here" if ref.instance else "looked up here" if ref.lookup else "named here"
            named.append(self._step(ref.module, ref.node, what))
        return named

    # ---- following ------------------------------------------------------------------

    def _follow(self, starts: list[_Value]) -> Reach:
        seen: set[tuple[int, tuple[int | str, ...], str | None, bool, int | None]] = set()
        stack = list(reversed(starts))
        while stack:
            value = stack.pop()
            # Deep paths are one state: a function returning a lookup that may give itself would
            # otherwise give `()()()...` without end.
            key = (
                id(value.node),
                value.path[:_PATH] + (("...",) if len(value.path) > _PATH else ()),
                value.instance,
                value.lookup,
                id(value.frames[-1][2]) if value.frames else None,
            )
            if key in seen:
                continue
            seen.add(key)
            if len(seen) > _BUDGET:
                return Reach(ESCAPES, (*value.steps, self._at(value, "the analysis' bound reached")))
            found = self._uses(value)
            if isinstance(found, Step):
                return Reach(ESCAPES, (*value.steps, found))
            stack.extend(reversed(found))
        return UNREACHED_REACH

    def _uses(self, value: _Value) -> list[_Value] | Step:
        """Where the expression `value.node` goes: the values it flows into, or the step where it escapes."""
        module, node, path = value.module, value.node, value.path
        if value.lookup:  # what it looks up is not known: the function among anything else
            return self._at(value, f"looked up by {_short(node)}")
        tree = self._tree(module)
        parent = tree.parent.get(id(node))
        if isinstance(parent, ast.keyword):
            return self._passed(value, tree.parent[id(parent)], parent.arg)
        if isinstance(parent, ast.Call):
            if node is parent.func:  # called: runs here; its result is the value only where `path` says so
                if not path and value.cut is not None and id(self._innermost_def(module, node)) != value.cut[1]:
                    return self._at(value, value.cut[0])  # run where the hand-off search does not follow it back
                return [value.result(parent)] if path[:1] == (CALLED,) else []
            if isinstance(node, ast.Starred) or node not in parent.args:
                return []
            return self._passed(value, parent, parent.args.index(node))
        if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node is parent.value:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            found: list[_Value] = []
            for target in targets:
                stored = self._store(value, target, path)
                if isinstance(stored, Step):
                    return stored
                found += stored
            return found
        if isinstance(parent, (ast.Return, ast.Yield, ast.YieldFrom)):
            return self._returned(value, isinstance(parent, ast.Return))
        if isinstance(parent, (ast.Tuple, ast.List)) and not isinstance(parent.ctx, ast.Store):
            index = next(i for i, e in enumerate(parent.elts) if e is node)
            return [self._moved(value, parent, (index, *path))]
        if isinstance(parent, ast.Set) or (isinstance(parent, ast.Dict) and any(v is node for v in parent.values)):
            return [self._moved(value, parent, ("*", *path))]
        if isinstance(parent, (ast.IfExp, ast.BoolOp)) and node is not getattr(parent, "test", None):
            return [self._moved(value, parent, path)]
        if isinstance(parent, ast.Subscript) and node is parent.value:
            return self._subscripted(value, parent)
        if isinstance(parent, ast.Attribute) and node is parent.value:
            return self._attribute_of(value, parent)
        held = path[:1] not in ((), (CALLED,)) and value.instance is None  # a container holds it
        if isinstance(parent, (ast.For, ast.AsyncFor)) and node is parent.iter:
            return self._store(value, parent.target, path[1:]) if held else []
        if isinstance(parent, ast.comprehension) and node is parent.iter:
            return self._at(value, "iterated in a comprehension") if held else []
        if isinstance(parent, ast.Lambda):
            return self._at(value, "returned by a lambda")
        if isinstance(parent, ast.Starred):
            return self._at(value, "unpacked here")
        if isinstance(parent, ast.Dict):  # a key
            return []
        # Compared, tested, formatted, deleted, awaited, a bare statement, a decorator: nothing keeps it.
        return []

    def _moved(self, value: _Value, node: ast.AST, path: Path, what: str | None = None) -> _Value:
        steps = value.steps if what is None else (*value.steps, self._step(value.module, node, what))
        return value.to(value.module, node, steps, path)

    def _at(self, value: _Value, what: str) -> Step:
        return self._step(value.module, value.node, what)

    def _passed(self, value: _Value, call: ast.Call, where: int | str | None) -> list[_Value] | Step:
        """`value` passed to `call` (`where`: its position, or its keyword; None: `**`)."""
        module, path = value.module, value.path
        callee = call.func
        name = last_name(callee) or ""
        shown_callee = _short(callee)
        if where is None:
            return self._step(module, call, f"unpacked into {shown_callee}(**...)")
        if where == 0 and name == "partial" and path[:1] in ((), (CALLED,)) and value.instance is None:
            return [self._moved(value, call, path, "bound by partial")]
        if name in INSPECTING:
            return []
        if name == "setattr" and where == 2 and len(call.args) >= 2:
            attr = call.args[1]
            if isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                target = ast.Attribute(call.args[0], attr.value, ast.Store(), lineno=call.lineno, col_offset=0)
                return self._stored_attribute(value, target, path, None)
            return self._step(module, call, "stored by setattr under a computed name")
        if name == "getattr":
            return []  # the object it is looked up on, or a default: what getattr returns is handled as a lookup
        if isinstance(callee, ast.Attribute) and name in _ADDS:
            return self._store(value, callee.value, ("*", *path), f"added to {_short(callee.value)}")
        scope = self._scope_list(module, call)
        targets: list[tuple[Symbols, ast.AST, bool]] = [
            (m, f, isinstance(callee, ast.Attribute) and _is_method(m, f))
            for m, f in self._resolve(module, scope, callee)
            if isinstance(f, FUNCTIONS)
        ]
        for class_module, cls in self._classes(module, callee):
            inits = self._methods(class_module, cls, "__init__", 0)
            if not inits:
                return self._step(module, call, f"passed to {shown_callee} (no __init__ seen)")
            targets += [(class_module, init, True) for init in inits]
        if not targets:
            return self._step(module, call, f"passed to {shown_callee}")
        found: list[_Value] = []
        for target_module, function, bound in targets:
            if isinstance(where, int):
                names = positional(function, through_attribute=bound)
                rest = function.args.vararg
                parameter = names[where] if where < len(names) else None
            else:
                rest = function.args.kwarg
                parameter = where if where in parameters(function) else None
            if parameter is None:
                if rest is None:
                    continue  # no such parameter: the call fails, nothing is handed over
                return self._step(module, call, f"passed to {function.name} as *{rest.arg}")
            step = self._step(module, call, f"passed as {parameter} to {function.name}")
            passed = value
            # A constructor's calls are spelled with its class's name, which this bound does not count.
            # Past the bound, the hand-off search follows calls from the function's own module and from
            # the files `Calls._followed_caller_files` keeps: passed from any other, it is cut there.
            if function.name != "__init__" and module is not target_module and value.cut is None:
                function_scope = target_module.scope_of(function)
                callers = self._caller_files(target_module, function_scope)
                if len(callers) > _CALLER_FILES and module.path not in self._followed_caller_files(
                    target_module, function_scope, callers
                ):
                    what = f"called past {function.name}, which {len(callers)} files call"
                    passed = dataclasses.replace(value, cut=(what, id(function)))
            passed = dataclasses.replace(passed, frames=(*value.frames, (id(function), module, call)))
            found += [
                passed.to(target_module, load, (*value.steps, step))
                for load in self._loads(target_module, parameter, function)
            ]
        return found

    def _store(self, value: _Value, target: ast.AST, path: Path, what: str | None = None) -> list[_Value] | Step:
        """`value` (at `path` in it) stored into `target`."""
        module = value.module
        if isinstance(target, ast.Name):
            step = self._step(module, target, what or f"bound to {target.id}")
            steps = (*value.steps, step)
            function = self._innermost_def(module, target)
            if function is not None:
                return [value.to(module, load, steps, path) for load in self._loads(module, target.id, function)]
            return [
                value.to(ref.module, ref.node, steps, path)
                for ref in self._name_references(module, target.id, 0, set())
            ]
        if isinstance(target, (ast.Tuple, ast.List)):
            if path[:1] in ((), (CALLED,)) or value.instance is not None:
                return []
            head, rest = path[0], path[1:]
            chosen = target.elts if head == "*" else target.elts[head : head + 1]
            found: list[_Value] = []
            for element in chosen:
                if isinstance(element, ast.Starred):
                    return self._step(module, element, "unpacked into a list")
                stored = self._store(value, element, rest, what)
                if isinstance(stored, Step):
                    return stored
                found += stored
            return found
        if isinstance(target, ast.Subscript):
            return self._store(value, target.value, ("*", *path), what or f"stored in {_short(target.value)}")
        if isinstance(target, ast.Attribute):
            return self._stored_attribute(value, target, path, what)
        return self._step(module, target, f"stored in {_short(target)}")

    def _stored_attribute(
        self, value: _Value, target: ast.Attribute, path: Path, what: str | None
    ) -> list[_Value] | Step:
        """`value` stored as `receiver.attr`: followed where the receiver's class is known."""
        module, receiver = value.module, target.value
        scope = self._scope_list(module, value.node)  # where the store is (a setattr's target is made up)
        if isinstance(receiver, ast.Name) and receiver.id in SELF:
            cls = next((s for s in reversed(scope) if isinstance(s, ast.ClassDef)), None)
            classes = [(module, cls)] if cls is not None else []
        else:
            classes = self._classes(module, receiver) or self._instance_classes(module, scope, receiver)
        if not classes:
            return self._step(module, target, f"stored as {_short(target)}")
        step = self._step(module, target, what or f"stored as {_short(target)}")
        found: list[_Value] = []
        for class_module, cls in classes:
            for other, read, known in self._attribute_reads(class_module, cls, target.attr):
                if not known:
                    return self._step(other, read, f"stored as {_short(target)} of {cls.name}, read as {_short(read)}")
                found.append(value.to(other, read, (*value.steps, step), path))
        return found

    def _returned(self, value: _Value, returned: bool) -> list[_Value] | Step:
        """`value` returned (or yielded) by its function: followed into that function's calls."""
        module = value.module
        function = self._innermost_def(module, value.node)
        if function is None:
            return []  # at module level: a syntax error CPython reports
        if not returned:
            return self._at(value, f"yielded by {function.name}")
        step = self._at(value, f"returned by {function.name}")
        if value.frames and value.frames[-1][0] == id(function):  # passed in at a call seen: its result
            _, caller, call = value.frames[-1]
            back = value.to(caller, call, (*value.steps, step))
            return [dataclasses.replace(back, frames=value.frames[:-1])]
        calls = [
            _Value.of(ref, (*value.steps, step), (CALLED, *value.path))
            for ref in self._references(module, module.scope_of(function)[:-1], function)
        ]
        return calls or self._at(value, f"returned by {function.name}, called nowhere seen")

    def _subscripted(self, value: _Value, subscript: ast.Subscript) -> list[_Value] | Step:
        path = value.path
        if path[:1] in ((), (CALLED,)) or value.instance is not None or isinstance(subscript.ctx, ast.Store):
            return []
        key = subscript.slice
        if isinstance(path[0], int) and isinstance(key, ast.Constant) and isinstance(key.value, int):
            return [self._moved(value, subscript, path[1:])] if key.value == path[0] else []
        return [self._moved(value, subscript, path[1:])]

    def _attribute_of(self, value: _Value, attribute: ast.Attribute) -> list[_Value] | Step:
        """An attribute of the value: a container's lookup methods give an element, an instance's
        method `value.instance` read is the function itself; the rest is something else."""
        tree = self._tree(value.module)
        call = tree.parent.get(id(attribute))
        called = isinstance(call, ast.Call) and call.func is attribute
        if value.instance is not None:  # its method read: the function (called: what it returns)
            if attribute.attr != value.instance:
                return []
            method = _Value(value.module, attribute, value.steps, value.path)
            return [method.result(call)] if called and value.path[:1] == (CALLED,) else [] if called else [method]
        if value.path[:1] in ((), (CALLED,)) or not called:
            return []
        assert isinstance(call, ast.Call)
        if attribute.attr in ("get", "pop", "setdefault", "values", "copy"):
            rest = value.path[1:] if attribute.attr in ("get", "pop", "setdefault") else value.path
            return [value.to(value.module, call, value.steps, rest)]
        if attribute.attr == "items":
            return [value.to(value.module, call, value.steps, ("*", 1, *value.path[1:]))]
        return []

    def _decorated_escape(self, module: Symbols, scope: list[ast.AST], function: ast.AST) -> Step | None:
        """A decorator from outside the project that files the function in a registry
        (`@LOSSES.register_module()`): the function escapes there. Other decorators wrap it and
        are rebound to its name, which is followed."""
        assert isinstance(function, FUNCTIONS)
        for decorator in function.decorator_list:
            callee = decorator.func if isinstance(decorator, ast.Call) else decorator
            name = (last_name(callee) or "").lower()
            if _REGISTERING in name and not self._resolve(module, list(scope), callee):
                return self._step(module, decorator, f"registered by @{_short(callee)}")
        return None


def _is_method(module: Symbols, function: ast.AST) -> bool:
    scope = module.scope_of(function)
    return len(scope) > 1 and isinstance(scope[-2], ast.ClassDef)


def _short(node: ast.AST) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= 40 else text[:37] + "..."
