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
- a function whose every `(x, ..., report)` return leads with what is no loss:
  - a layer stack's output: a name a loop passes through each layer in turn (`for layer in self.layers:
    x, attn = layer(x, ...)`), after the loop only ever rebound to a call or view of itself alone
    (`x = self.layer_norm(x)`, `x = x.transpose(0, 1)`): hidden states (fairseq's decoders return
    `x, {"inner_states": [...]}`, the states each layer left);
  - a count on some path: a name every binding of which may be a size (`facts.tensor_ops.SIZE_METHODS`:
    `n = x.size(0) if per_sentence else sample["ntokens"]`), as the `(sample_size, logging_output)` of a
    criterion's logging helper.

Read from the checked file alone, and only when one of its findings is about to be reported as
`unreached` (lint.py): most files never ask.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..facts.reports import REPORT_LENGTHS
from ..facts.tensor_ops import SIZE_ATTRIBUTES, SIZE_BUILTINS, SIZE_METHODS
from .nodes import body_walk, is_self_attribute, last_name, walk_statements
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
        or _leads_with_no_loss(function)
    )


def _leads_with_no_loss(function: ast.AST) -> bool:
    """Whether `function` returns a loss-shaped tuple, and each leads with a layer stack's output or a count
    (see the module's doc)."""
    nodes = list(body_walk(function))
    firsts = [
        stmt.value.elts[0]
        for stmt in nodes
        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple) and len(stmt.value.elts) in REPORT_LENGTHS
    ]
    return bool(firsts) and all(
        _may_be_a_size(first)
        or (isinstance(first, ast.Name) and (_always_counted(nodes, first.id) or _layer_stack_output(nodes, first.id)))
        for first in firsts
    )


def _may_be_a_size(value: ast.expr) -> bool:
    """Whether `value` is, on some path, a size: `x.size(0)`, `x.shape[0]`, `len(x)`, either branch of a
    conditional expression, an operand of `or`."""
    if isinstance(value, ast.IfExp):
        return _may_be_a_size(value.body) or _may_be_a_size(value.orelse)
    if isinstance(value, ast.BoolOp):
        return any(_may_be_a_size(operand) for operand in value.values)
    if isinstance(value, ast.Subscript):
        value = value.value  # `x.shape[0]`, `x.size()[0]`
    if isinstance(value, ast.Call):
        func = value.func
        return (isinstance(func, ast.Name) and func.id in SIZE_BUILTINS) or (
            isinstance(func, ast.Attribute) and func.attr in SIZE_METHODS
        )
    return isinstance(value, ast.Attribute) and value.attr in SIZE_ATTRIBUTES


def _always_counted(nodes: list[ast.AST], name: str) -> bool:
    """Whether every binding of `name` among `nodes` (one at least) is `name = <value that may be a size>`."""
    stores = {id(n) for n in nodes if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)}
    counted = {
        id(target)
        for n in nodes
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None and _may_be_a_size(n.value)
        for target in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(target, ast.Name) and target.id == name
    }
    return bool(stores) and stores == counted


def _layer_stack_output(nodes: list[ast.AST], name: str) -> bool:
    """Whether a loop among `nodes` passes `name` through each of its layers (`for layer in layers: name, ... =
    layer(name, ...)`), and after that loop `name` is only rebound to a call or a view of itself alone."""
    for loop in nodes:
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        layers = set(_stored_names(loop.target))
        if not any(_through_a_layer(stmt, name, layers) for stmt in walk_statements(loop.body)):
            continue
        after = [n for n in nodes if getattr(n, "lineno", 0) > loop.end_lineno]
        stores = {id(n) for n in after if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)}
        of_itself = {
            id(n.targets[0])
            for n in after
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and _of_itself_alone(n.value, name)
        }
        if stores <= of_itself:
            return True
    return False


def _through_a_layer(stmt: ast.AST, name: str, layers: set[str]) -> bool:
    """`name = layer(..., name, ...)` or `name, *rest = layer(...)`, `layer` one of the loop's `layers`."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call)):
        return False
    target, call = stmt.targets[0], stmt.value
    first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
    given = [*call.args, *(k.value for k in call.keywords)]
    return (
        isinstance(first, ast.Name)
        and first.id == name
        and isinstance(call.func, ast.Name)
        and call.func.id in layers
        and any(isinstance(a, ast.Name) and a.id == name for a in given)
    )


def _of_itself_alone(value: ast.expr, name: str) -> bool:
    """`name.transpose(0, 1)` (a method of `name`) or `self.layer_norm(name)` (`name` its one positional argument)."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == name:
        return True
    return len(value.args) == 1 and isinstance(value.args[0], ast.Name) and value.args[0].id == name


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
