"""Functions shaped like a loss function that their own module shows are something else.

A loss function is what a host calls as one, not any function returning `(x, dict)`. One that
nothing in the project is seen to call as a loss function is a hazard (`unreached`), unless its
module shows what it is instead:

- the schedule's caller: it calls Megatron's schedule itself and returns what the schedule gave
  back (NeMo's `fwd_bwd_step` averaging the microbatches' reports into `(loss_mean, loss_dict)`);
- a function whose callers hand its dict back to it: every call of it in its module unpacks
  `value, state = f(..., state, ...)` (a sampler's cache, `eps, eps_cache = self.eps(eps_cache, ...)`),
  or `a, b, state = f(..., state, ...)` (OLMo's beam search: `sample_beams` returns the sampler's state
  last, as a per-token loss function returns its report);
- a class's private step whose every use is its own class unpacking the pair: each mention of
  `_step` in the module is `loss, report = self._step(...)`, and no caller returns the pair on (NeMo 2's
  `FSDPStrategy._step_proxy`, read by the strategy's own `training_step`, which logs the report and
  hands Lightning the bare loss). Private by its name, so nothing outside the class calls it.

Read from the checked file alone, and only when one of its findings is about to be reported as
`unreached` (lint.py): most files never ask.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .nodes import body_walk, is_self_attribute, last_name
from .schedule import schedule_calls
from .symbols import PARSE_ERRORS, Symbols


def not_loss_functions(text: str, path: str = "", tree: ast.Module | None = None) -> frozenset[int]:
    """The def lines of the functions of `text` that are not loss functions (see the module's doc);
    `tree`: its `ast` tree, when the caller has it (no second parse)."""
    try:
        module = Symbols(ast.parse(text.removeprefix("\ufeff")) if tree is None else tree, path)
    except PARSE_ERRORS:
        return frozenset()
    threaded = _threaded_back(module)
    unpacked = _unpacked_by_its_class(module)
    return frozenset(
        function.lineno
        for scope, function in module.scoped
        if function.name in threaded
        or (function.name in unpacked and scope and isinstance(scope[-1], ast.ClassDef))
        or _returns_the_schedule_result(module, function)
    )


def _returns_the_schedule_result(module: Symbols, function: ast.AST) -> bool:
    """Whether `function` calls a schedule (`schedule.schedule_calls`) and returns, first in a tuple, a
    value made from what the call returned (`losses = fwd_bwd(...)`, `loss_dict[key] = stack(...).mean()`,
    `loss_mean = loss_dict["train/loss"]`, then `return loss_mean, loss_dict`)."""
    nodes = list(body_walk(function))
    calls = {id(call) for call, _, _, _ in schedule_calls(module, nodes)}
    if not calls:
        return False
    made: set[str] = set()  # the names holding a value made from the schedule's result
    while True:
        before = len(made)
        for targets, value in _bindings(nodes):
            if _made_from(value, calls, made):
                made.update(name for target in targets for name in _stored_names(target))
        if len(made) == before:
            break
    return any(
        isinstance(stmt, ast.Return)
        and isinstance(stmt.value, ast.Tuple)
        and stmt.value.elts
        and _made_from(stmt.value.elts[0], calls, made)
        for stmt in nodes
    )


def _bindings(nodes: list[ast.AST]) -> Iterator[tuple[list[ast.expr], ast.expr]]:
    """(targets, value) of each assignment and `for` loop among `nodes`."""
    for node in nodes:
        if isinstance(node, ast.Assign):
            yield node.targets, node.value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            yield [node.target], node.value
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            yield [node.target], node.iter


def _made_from(value: ast.expr, calls: set[int], made: set[str]) -> bool:
    return any(id(node) in calls or (isinstance(node, ast.Name) and node.id in made) for node in ast.walk(value))


def _stored_names(target: ast.expr) -> Iterator[str]:
    """The names a store into `target` binds or updates (`x`, `a, b`, `d[key]`, `*rest`)."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _stored_names(element)
    elif isinstance(target, (ast.Subscript, ast.Starred)):
        yield from _stored_names(target.value)


def _threaded_back(module: Symbols) -> set[str]:
    """The names of the functions every call of which in `module` (one at least) hands back what it
    returned last: `value, state = f(..., state, ...)`, `a, b, state = f(..., state, ...)`."""
    threaded: dict[str, bool] = {}
    unpacked: set[int] = set()
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call):
            target, call = node.targets[0], node.value
            name = last_name(call.func)
            if name is None or not (isinstance(target, ast.Tuple) and len(target.elts) in (2, 3)):
                continue
            unpacked.add(id(call))
            state = target.elts[-1]
            given = [*call.args, *(k.value for k in call.keywords)]
            handed_back = isinstance(state, ast.Name) and any(
                isinstance(a, ast.Name) and a.id == state.id for a in given
            )
            threaded[name] = threaded.get(name, True) and handed_back
    for node in ast.walk(module.tree):  # any other call of the name uses its result as something else
        if isinstance(node, ast.Call) and id(node) not in unpacked and last_name(node.func) in threaded:
            threaded[last_name(node.func)] = False
    return {name for name, always in threaded.items() if always}


def _unpacked_by_its_class(module: Symbols) -> set[str]:
    """The private names (`_step`) every mention of which in `module` (one at least) is a call
    `a, b = self._step(...)` in a function that returns no tuple holding `b`: the pair is read where
    it is made, never handed on as a loss function's result."""
    unpacked: dict[str, bool] = {}
    calls: set[int] = set()
    for _, function in module.scoped:
        nodes = list(body_walk(function))
        handed_on = {
            name.id
            for stmt in nodes
            if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple)
            for name in stmt.value.elts
            if isinstance(name, ast.Name)
        }
        for node in nodes:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)):
                continue
            target, callee = node.targets[0], node.value.func
            if not (is_self_attribute(callee) and callee.attr.startswith("_") and not callee.attr.startswith("__")):
                continue
            calls.add(id(callee))
            pair = isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(target.elts[-1], ast.Name)
            kept = pair and target.elts[-1].id not in handed_on
            unpacked[callee.attr] = unpacked.get(callee.attr, True) and kept
    for node in ast.walk(module.tree):  # any other mention hands the function, or its result, elsewhere
        if isinstance(node, ast.Attribute) and node.attr in unpacked and id(node) not in calls:
            unpacked[node.attr] = False
        elif isinstance(node, ast.Name) and node.id in unpacked:
            unpacked[node.id] = False
    return {name for name, always in unpacked.items() if always}
