"""Evidence that follows from a file's own evidence: patches, delegations, a loss returned whole.

A function installed in place of a reached one (`handoffs.PATCH`), one whose `(loss, report)` a
reached loss function returns (`handoffs.DELEGATED`), and the functions passed for a callable
parameter whose result a reached loss function returns as its loss (`handoffs.RETURNED_AS_THE_LOSS`).
Each is found from the file's own evidence, so it is the same whichever other files are collected
with it.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable, Iterator

from .handoffs import PATCH
from .nodes import body_walk, bound_names, last_name, parameters, walk_statements
from .reach import Key, Reach, stronger
from .resolve import Resolver
from .symbols import Symbols
from .texts import marked_lines


class FollowedEvidence(Resolver):
    """The functions a file's evidence reaches in turn."""

    def __init__(self, roots: list[str]) -> None:
        super().__init__(roots)
        self._sites: dict[
            tuple[int, frozenset[int] | None], list[tuple[list[ast.AST], ast.AST]]
        ] = {}  # `_patch_sites`'

    def _patch_evidence(self, path: str) -> None:
        """A function installed in place of one this file's evidence reached takes its context, and of
        any installed in its place in turn (`handoffs.PATCH`). Found from this file's own evidence,
        so it is the same whichever other files are collected with it."""
        evidence = self.evidence[path]
        seen: dict[Key, Reach] = {}
        at = 0
        while at < len(evidence):  # grows as replacements are reached
            key, reach = evidence[at]
            at += 1
            if reach.whole_return or (key in seen and not stronger(reach, seen[key])):
                continue  # a whole return is not followed on (`_reached_functions`)
            seen[key] = reach
            for module, scope, site, replacement, what in self._replacements(key):
                step = self._step(module, site, what)
                for value in self._values(module, scope, replacement):
                    steps = (*value.steps, step, *reach.steps)
                    self._reach(value.module.path, value.function, Reach(reach.context, steps, reach.guessed))

    def _delegated_evidence(self, path: str) -> None:
        """A reached loss function returning the `(loss, report)` of a function it calls (`return
        loss_fn(x)`, or `loss, metrics = loss_fn(**kwargs)`, then `return loss, metrics`, or a report it
        `.update`s with `metrics`): that function is reached too, and so on down
        (`handoffs.DELEGATED`). Found from this file's own evidence, as patches are."""
        # The evidence grows as callees are reached: the iteration meets what it adds.
        for reach, module, scope, function in self._reached_functions(self.evidence[path], whole=True):
            # A bare loss returned whole is what `return f(...)` gives: `f`'s own return, whole too.
            unpacked = () if reach.whole_return else _returned_unpacked(function)
            what = "its loss is returned whole by" if reach.whole_return else "its (loss, report) is returned by"
            for stmt in (*unpacked, *_returned_calls(function)):
                step = self._step(module, stmt, f"{what} {_name(function)}")
                for value in self._values(module, [*scope, function], stmt.value.func):
                    steps = (*value.steps, step, *reach.steps)
                    self._reach(value.module.path, value.function, dataclasses.replace(reach, steps=steps))

    def _entry_returned_evidence(self, path: str) -> None:
        """A reached loss function whose loss is an entry of what a call returned (`output = model(samples)`, then
        `return output["loss"], loss_dict`; `return model(x)["loss"]`): the functions called return a dict whose
        entry is rescaled (`Reach.entry`), a model's `forward` among them (`handoffs.ENTRY_RETURNED`). Found from
        this file's own evidence, as delegations are."""
        for reach, module, scope, function in self._reached_functions(list(self.evidence[path]), whole=True):
            if reach.entry or isinstance(function, ast.Lambda):
                continue
            for stmt, call, key in _entries_returned(function, reach.whole_return):
                what = f"its {key!r} entry is returned as the loss by {function.name}"
                step = self._step(module, stmt, what)
                for value in self._values(module, [*scope, function], call.func):
                    steps = (*value.steps, step, *reach.steps)
                    like = dataclasses.replace(reach, steps=steps, whole_return=True, entry=key, also=())
                    self._reach(value.module.path, value.function, like)

    def _reached_functions(
        self, evidence: Iterable[tuple[Key, Reach]], whole: bool = False
    ) -> Iterator[tuple[Reach, Symbols, list[ast.AST], ast.AST]]:
        """Each reached function of `evidence` with its strongest reach so far, once per reach that is
        stronger than the one before (a whole return only where `whole` says so, once per host taking
        it: Composer's `loss` returns its bare loss to one and its dict of losses to another)."""
        seen: dict[tuple[Key, str | None], Reach] = {}
        for key, reach in evidence:
            slot = (key, reach.context if reach.whole_return else None)
            if (reach.whole_return and not whole) or (slot in seen and not stronger(reach, seen[slot])):
                continue
            seen[slot] = reach
            found = self._function_at(key)
            if found is not None:
                yield reach, *found

    def _function_at(self, key: Key) -> tuple[Symbols, list[ast.AST], ast.AST] | None:
        """The module, the enclosing scopes and the function a reach's key (path, def line) names."""
        module = self._module(key[0])
        found = next(((s, f) for s, f in module.scoped if f.lineno == key[1]), None) if module else None
        return None if module is None or found is None else (module, *found)

    def _returned_as_the_loss(self, path: str) -> None:
        """A reached loss function whose loss is what a callable parameter of an enclosing function
        returns (`loss = process_output_fn(output, inputs)`, then `return loss, {}`): the functions that
        enclosing function's callers pass for it return the loss itself (`handoffs.RETURNED_AS_THE_LOSS`).
        Found from this file's own evidence, as patches are."""
        # What this adds returns its loss whole, which is not followed on: the evidence as it is now.
        for reach, module, scope, function in self._reached_functions(list(self.evidence[path])):
            for call, owner in _loss_from_a_parameter(function, scope):
                assert isinstance(call.func, ast.Name)
                step = self._step(module, call, f"its result is returned as the loss by {function.name}")
                like = dataclasses.replace(reach, whole_return=True)
                self._callers(module, scope[: scope.index(owner) + 1], call.func.id, (step, *reach.steps), like)

    def _replacements(self, key: Key) -> Iterator[tuple[Symbols, list[ast.AST], ast.AST, ast.expr, str]]:
        """The patches installing something in place of the function at `key` (a module's function
        or a method of a module's class), in its module or any file of the project naming it:
        (module, scope, the patch, what it installs, the step's text)."""
        owner = self._module(key[0])
        function = next(
            (f for scope, f in owner.scoped if f.lineno == key[1] and len(scope) <= 1) if owner else (), None
        )
        if owner is None or function is None:
            return
        name = function.name
        others = (p for p in self._marking(owner.path, name) if p != owner.path)
        for module in [owner, *map(self._module, others)]:
            if module is None:
                continue
            # The owner's module whole; another only around the lines naming `name` as a patch would.
            lines = None if module is owner else marked_lines(self._text(module.path), name.encode())
            for inner, site in self._patch_sites(module, lines):
                patch = _patch(site, name)
                if patch is None:
                    continue
                replaced, replacement, how = patch
                if isinstance(replaced, str):
                    targets = self._resolve_dotted(module, replaced, 0, 0)
                else:
                    targets = self._named_only(module, inner, replaced)
                if any(target is function for _, target in targets):
                    yield module, inner, site, replacement, f"installed by {how} in place of {name}"

    def _patch_sites(self, module: Symbols, lines: frozenset[int] | None) -> list[tuple[list[ast.AST], ast.AST]]:
        """The nodes of `module` that may install a function under some name (`_patch`), each with
        its scope, in the order of a walk; with `lines`, only in the defs and module-level statements
        spanning one of them. Each module is walked once for every set of lines asked."""
        key = (id(module), lines)
        sites = self._sites.get(key)
        if sites is None:
            sites = self._sites[key] = [
                ([*scope, node] if not isinstance(node, ast.Module) else scope, site)
                for scope, node in [*module.scoped, ([], module.tree)]
                for site in _walked(node, lines)
                if (type(site) is ast.Call and len(site.args) >= 2 and not site.keywords)
                or (type(site) is ast.Assign and len(site.targets) == 1)
            ]
        return sites


def _walked(node: ast.AST, lines: frozenset[int] | None) -> Iterator[ast.AST]:
    """`body_walk(node)`, or with `lines` its part spanning one of them: a def spanning none is not
    walked, a module only in its statements spanning one."""
    if lines is None:
        return body_walk(node)
    if isinstance(node, ast.Module):
        return walk_statements([stmt for stmt in node.body if _spans(stmt, lines)])
    return body_walk(node) if _spans(node, lines) else iter(())


def _spans(node: ast.AST, lines: frozenset[int]) -> bool:
    first, last = node.lineno, node.end_lineno or node.lineno
    return any(first <= line <= last for line in lines)


def _patch(node: ast.AST, name: str) -> tuple[str | ast.expr, ast.expr, str] | None:
    """(what is replaced: a dotted string or an expression, what replaces it, how) if `node` installs a
    function as `name` (`handoffs.PATCH`): `register_patch("pkg.mod.Class.name", fn)`,
    `setattr(owner, "name", fn)`, `owner.name = fn`."""
    if isinstance(node, ast.Call) and len(node.args) >= 2 and not node.keywords:
        first = node.args[0]
        if last_name(node.func) in PATCH.callees and isinstance(first, ast.Constant):
            dotted = first.value
            if isinstance(dotted, str) and dotted.endswith(f".{name}"):
                return dotted, node.args[1], last_name(node.func)
        if last_name(node.func) == "setattr" and len(node.args) == 3:
            attribute = node.args[1]
            if isinstance(attribute, ast.Constant) and attribute.value == name:
                return ast.Attribute(first, name, ast.Load()), node.args[2], "setattr"
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        owner_named = isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
        if owner_named and target.attr == name and target.value.id not in ("self", "cls"):
            return target, node.value, "assignment"
    return None


def _returned_unpacked(function: ast.AST) -> Iterator[ast.Assign]:
    """The statements `loss, report = f(...)` (or three names) of `function` whose loss it returns first
    and whose report it returns last, itself or in a dict it `.update`s with it. Not where it stores
    into that report: it may replace the entries by copies (a loop averaging them), which only its own
    analysis tells."""
    nodes = list(body_walk(function))
    returned = [
        stmt.value.elts
        for stmt in nodes
        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple) and len(stmt.value.elts) in (2, 3)
    ]
    updates = [
        (node.func.value.id, node.args[0].id)
        for node in nodes
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "update"
        and isinstance(node.func.value, ast.Name)
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
    ]
    stored = {
        node.value.id
        for node in nodes
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name)
    }
    for stmt in nodes:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call)):
            continue
        target = stmt.targets[0]
        if not (isinstance(target, ast.Tuple) and len(target.elts) in (2, 3)):
            continue
        if not all(isinstance(e, ast.Name) for e in target.elts):
            continue
        loss, report = target.elts[0].id, target.elts[-1].id
        reports = {report} | {into for into, given in updates if given == report}
        if reports & stored:
            continue
        if any(
            isinstance(elts[0], ast.Name)
            and elts[0].id == loss
            and isinstance(elts[-1], ast.Name)
            and elts[-1].id in reports
            for elts in returned
        ):
            yield stmt


def _returned_calls(function: ast.AST) -> Iterator[ast.Return]:
    """The statements `return f(...)` of `function` (a lambda's `lambda x: f(x)` as one): what it
    returns is what `f` returns, whole."""
    if isinstance(function, ast.Lambda):
        if isinstance(function.body, ast.Call):
            yield ast.copy_location(ast.Return(function.body), function.body)
        return
    for stmt in body_walk(function):
        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Call):
            yield stmt


def _name(function: ast.AST) -> str:
    return getattr(function, "name", "a lambda")


def _loss_from_a_parameter(function: ast.AST, scope: list[ast.AST]) -> Iterator[tuple[ast.Call, ast.AST]]:
    """The calls in `function` of a parameter of an enclosing function (of `scope`, outermost first)
    whose result it returns as its loss (`return fn(x), {}`, or `loss = fn(x)` and then `return loss,
    report`), each with the function whose parameter it is."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return
    nodes = list(body_walk(function))
    firsts = [
        stmt.value.elts[0]
        for stmt in nodes
        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple) and len(stmt.value.elts) in (2, 3)
    ]
    returned = {e.id for e in firsts if isinstance(e, ast.Name)}
    calls = [e for e in firsts if isinstance(e, ast.Call)] + [
        stmt.value
        for stmt in nodes
        if isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Call)
        and any(isinstance(t, ast.Name) and t.id in returned for t in stmt.targets)
    ]
    own = set(parameters(function)) | bound_names(nodes)
    for call in calls:
        if isinstance(call.func, ast.Name) and call.func.id not in own:
            owner = _parameter_owner(scope, call.func.id)
            if owner is not None:
                yield call, owner


def _parameter_owner(scope: list[ast.AST], name: str) -> ast.AST | None:
    """The innermost function of `scope` whose parameter `name` is, unless a function inside it binds
    `name` itself. A class body is no enclosing scope of its methods."""
    for function in reversed(scope):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if name in parameters(function):
            return function
        if name in bound_names(body_walk(function)):
            return None
    return None


def _entries_returned(function: ast.AST, whole: bool) -> Iterator[tuple[ast.stmt, ast.Call, str]]:
    """The calls whose result's entry `function` returns as its loss (its bare return if `whole`, else the first
    element of a returned tuple): `out["loss"]` of a name bound once to a call (`out = model(x)`), a name bound
    once to such an entry (`loss = out["loss"]`), `model(x)["loss"]`; each with the statement binding or returning
    it and the entry's key."""
    nodes = list(body_walk(function))
    stores: dict[str, int] = {}
    assigned: dict[str, ast.expr] = {}
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node.value

    def once(name: str) -> ast.expr | None:
        return assigned.get(name) if stores.get(name) == 1 else None

    for stmt in nodes:
        if not isinstance(stmt, ast.Return) or stmt.value is None:
            continue
        loss = stmt.value
        if not whole:
            if not (isinstance(loss, ast.Tuple) and len(loss.elts) in (2, 3)):
                continue
            loss = loss.elts[0]
        if isinstance(loss, ast.Name):
            loss = once(loss.id)
        if not (isinstance(loss, ast.Subscript) and isinstance(loss.slice, ast.Constant)):
            continue
        key, made = loss.slice.value, loss.value
        if isinstance(made, ast.Name):
            made = once(made.id)
        if isinstance(key, str) and isinstance(made, ast.Call):
            yield stmt, made, key
