"""Evidence of an in-place caller: a function (or a script's own module-level code) unpacking a call's
`(loss, report)`, binding its result to a name (`loss = compute_loss(batch)`, the loss returned
whole) or reading the loss out of the dict it returned (`result = task(x)`, `loss = result["loss"]`),
and rescaling that loss in place (`handoffs.IN_PLACE_CALLER`, context "in-place-caller")."""

from __future__ import annotations

import ast

from .nodes import aliases_itself, body_walk, rescaled_in_place
from .reach import IN_PLACE_CALLER, Reach, Step, shown
from .resolve import Resolver
from .symbols import Symbols


class InPlaceEvidence(Resolver):
    """The functions whose loss a caller rescales in place."""

    def _in_place_evidence(self, module: Symbols, scope: list[ast.AST], function: ast.AST) -> None:
        """`function` a def, or the module itself for a script's loop at module level."""
        nodes = list(body_walk(function))
        rescaled, written = _through_aliases(nodes, rescaled_in_place(nodes))
        at_module = isinstance(function, ast.Module)
        caller = "the module's own code" if at_module else function.name
        for assign, name, whole in _received(nodes, rescaled):
            if name in written and assign.lineno > written[name][1]:
                continue  # `loss = c_loss` before this `c_loss = f(...)`: the rescaled tensor is an older one
            callee = assign.value.func
            what = "its result is bound whole by" if whole else "its (loss, report) is unpacked by"
            steps = (
                self._step(module, assign, f"{what} {caller}"),
                Step(
                    shown(module.path),
                    rescaled[name],
                    f"which rescales {written[name][0] if name in written else name} in place",
                ),
            )
            for value in self._values(module, scope if at_module else scope + [function], callee):
                reach = Reach(IN_PLACE_CALLER, (*value.steps, *steps), whole_return=whole)
                self._reach(value.module.path, value.function, reach)
        for assign, read, name, key in _entries_received(nodes, rescaled):
            steps = (
                self._step(module, assign, f"its dict is bound by {caller}"),
                self._step(module, read, f"its {key!r} entry read as {name}"),
                Step(shown(module.path), rescaled[name], f"which rescales {name} in place"),
            )
            for value in self._values(module, scope if at_module else scope + [function], assign.value.func):
                reach = Reach(IN_PLACE_CALLER, (*value.steps, *steps), whole_return=True, entry=key)
                self._reach(value.module.path, value.function, reach)


def _received(nodes: list[ast.AST], rescaled: dict[str, int]) -> list[tuple[ast.Assign, str, bool]]:
    """The assignments of a call's result whose loss is then rescaled in place, each with the loss'
    name and whether the result is the loss itself (`loss = f(...)`) rather than a tuple unpacked
    (`loss, report = f(...)`). A name bound to a call is that call's loss at the rescale only if no
    other binding of it comes between (`loss = f(x)`, `loss = loss / k`, `loss *= s`: a new tensor;
    `loss += aux` is no binding), whether bound whole or unpacked (fairseq's denoiser unpacks `out, extra`,
    then rescales the `out` it rebound to a `th.cat` of it)."""
    found = []
    stores: dict[str, list[int]] | None = None
    for stmt in nodes:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call)):
            continue
        target = stmt.targets[0]
        if isinstance(target, ast.Tuple) and len(target.elts) in (2, 3) and isinstance(target.elts[0], ast.Name):
            name, whole = target.elts[0].id, False
            if rescaled.get(name, -1) < stmt.lineno:
                continue
        elif isinstance(target, ast.Name) and rescaled.get(target.id, 0) > stmt.lineno:
            name, whole = target.id, True
        else:
            continue
        if stores is None:
            stores = _stores(nodes, rescaled)
        line = rescaled[name]
        if not any(stmt.lineno < other < line for other in stores[name]):
            found.append((stmt, name, whole))
    return found


def _stores(nodes: list[ast.AST], names: dict[str, int]) -> dict[str, list[int]]:
    """The lines binding each of `names` to a new value: `loss += aux` is no rebinding (in place on a
    tensor), nor `loss = loss.float()` or `loss = loss.view(-1)` (the same storage, which the rescale reaches)."""
    augmented = {id(node.target) for node in nodes if isinstance(node, ast.AugAssign)}
    augmented |= {
        id(target)
        for node in nodes
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and aliases_itself(node.value, target.id)
    }
    stores: dict[str, list[int]] = {}
    for node in nodes:
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Store)
            and node.id in names
            and id(node) not in augmented
        ):
            stores.setdefault(node.id, []).append(node.lineno)
    return stores


def _entries_received(nodes: list[ast.AST], rescaled: dict[str, int]) -> list[tuple[ast.Assign, ast.Assign, str, str]]:
    """`result = f(...)`, then `loss = result["loss"]`, then `loss` rescaled in place (timm's `_forward`:
    `result = task(input, target)`, `_loss = result['loss']`, `_loss /= accum_steps`): the call's
    assignment, the entry's read, the loss' name and the entry: `result` bound by nothing else between the
    call and the read, `loss` nothing between the read and the rescale."""
    reads = [
        (stmt, stmt.targets[0].id, stmt.value.value.id, stmt.value.slice.value)
        for stmt in nodes
        if isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and rescaled.get(stmt.targets[0].id, 0) > stmt.lineno
        and isinstance(stmt.value, ast.Subscript)
        and isinstance(stmt.value.value, ast.Name)
        and isinstance(stmt.value.slice, ast.Constant)
        and isinstance(stmt.value.slice.value, str)
    ]
    if not reads:
        return []
    stores = _stores(nodes, {name: 0 for read in reads for name in read[1:3]})
    calls = {
        (stmt.targets[0].id, stmt.lineno): stmt
        for stmt in nodes
        if isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Call)
    }
    found = []
    for read, name, holder, key in reads:
        bound = [line for line in stores.get(holder, []) if line < read.lineno]
        assign = calls.get((holder, max(bound))) if bound else None
        if assign is None:
            continue
        line = rescaled[name]
        if not any(read.lineno < other < line for other in stores[name]):
            found.append((assign, read, name, key))
    return found


def _through_aliases(
    nodes: list[ast.AST], rescaled: dict[str, int]
) -> tuple[dict[str, int], dict[str, tuple[str, int]]]:
    """`rescaled`, and the names a rescaled name is bound to whole before the rescale (`loss = c_loss`, then
    `loss /= k`: `c_loss` is the tensor divided), when that is the rescaled name's only binding (LLaMA-Adapter's
    loop): one level. With each such name, the one the rescale writes and the line binding it so."""
    augmented = {id(node.target) for node in nodes if isinstance(node, ast.AugAssign)}
    bound: dict[str, int] = {}
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and id(node) not in augmented:
            bound[node.id] = bound.get(node.id, 0) + 1
    found = dict(rescaled)
    written: dict[str, tuple[str, int]] = {}
    for stmt in nodes:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Name)):
            continue
        target, source = stmt.targets[0], stmt.value.id
        if not isinstance(target, ast.Name) or target.id not in rescaled or source in rescaled:
            continue
        if bound.get(target.id) == 1 and stmt.lineno < rescaled[target.id]:
            found[source] = rescaled[target.id]
            written[source] = (target.id, stmt.lineno)
    return found, written
