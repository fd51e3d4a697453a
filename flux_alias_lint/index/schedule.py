"""Evidence of Megatron's schedule: a function handed to it, the loss function a forward step returns.

The entries of `handoffs.py` this reads: Megatron's schedule calls and Megatron-Bridge's entry
points (`SCHEDULE_CALLS`), forward-step signatures as a guess (`SIGNATURES`), the loss function a
forward step returns, partials binding it (and what callers pass for a parameter bound so),
`forward_step_calc_loss`, NeMo's `MegatronLossReduction`; none where the schedule run is the
project's own copy of a Megatron that divides a copy of the loss. Each function handed to the project's
own copy (a fork's) is noted with that copy's path (`own_schedules`), copying or not: `verify` runs that
schedule, the one `check` read, not the installed one.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import os
from collections.abc import Iterable, Iterator, Mapping

from .files import find_module, project_root
from .gates import LOSS_REDUCTION_CLASS
from .handoffs import SCHEDULE_CALLS, SCHEDULE_GETTER, SIGNATURES, ScheduleCall, Signature
from .nodes import argument, body_walk, bound_names, last_name, parameters, positional, rescaled_in_place
from .reach import MEGATRON, Key, Reach, Step
from .resolve import Resolver, imported_from
from .symbols import Symbols

# Where Megatron's schedule calls the loss function, in the layouts of megatron-core and of the
# Megatron-LM releases before it: a project carrying its own copy of Megatron imports these.
_SCHEDULE_MODULES = ("megatron.core.pipeline_parallel.schedules", "megatron.schedules")

_SCHEDULE_LOSS_FUNC = "loss_func"  # the name the schedule gives what the forward step returns

# NeMo 2's strategies that call a loss reduction's `forward` directly, without Megatron's schedule.
_FSDP_STRATEGIES = frozenset({"FSDPStrategy", "FSDP2Strategy"})


@dataclasses.dataclass(frozen=True)
class _Bound:
    """The arguments a `functools.partial` at a hand-off gives a forward step's parameters, with
    where the partial is (to resolve them there)."""

    module: Symbols
    scope: list[ast.AST]  # the functions and classes around the partial, innermost last
    call: ast.Call
    arguments: dict[str, ast.expr]  # parameter name -> the argument bound to it


class ScheduleEvidence(Resolver):
    """The functions Megatron's schedule calls as a forward step or a loss function."""

    def __init__(self, roots: list[str]) -> None:
        super().__init__(roots)
        self._copying: dict[str, bool] = {}  # `_schedule_copies`, by the schedule module's path
        self._schedules: dict[str, str | None] = {}  # the schedule module found from each directory
        # The functions handed to the project's own copy of the schedule: (real path, def line) -> its path.
        self.own_schedules: dict[Key, str] = {}
        self._handed_to: tuple[str, bool] | None = None  # while evidence is collected: (own schedule, copies)

    def _own_schedule(self, importer: Symbols) -> str | None:
        """The path of the project's own copy of Megatron's schedule that `importer` runs (a fork such as
        Megatron-DeepSpeed, or a checkout beside it); None: the installed one."""
        directory = os.path.dirname(importer.path)
        if directory not in self._schedules:  # one lookup per directory: every gated file asks
            # Asked for the directory, not a file in it: the schedule module itself gets the same answer.
            anyone = os.path.join(directory, "<importer>")
            found = (find_module(anyone, dotted, 0) for dotted in _SCHEDULE_MODULES)
            path = next((path for path in found if path is not None), None)
            self._schedules[directory] = path if path is not None else _schedule_beside(directory)
        path = self._schedules[directory]
        schedule = self._module(path) if path is not None else None  # a dependency of the importer's evidence
        return path if schedule is not None else None

    def _schedule_copies(self, path: str) -> bool:
        """Whether the project's own schedule at `path` divides a copy of the loss (`output_tensor = loss /
        num_microbatches`, megatron-core up to 0.6) instead of rescaling it in place: then handing a
        function to it rescales nothing."""
        if path not in self._copying:
            schedule = self._module(path)
            assert schedule is not None  # `_own_schedule` found it parsed
            callers = [r for _, f in schedule.scoped if (r := _rescaled_results(f, _SCHEDULE_LOSS_FUNC)) is not None]
            self._copying[path] = bool(callers) and not any(callers)
        return self._copying[path]

    def _reach(self, path: str, function: ast.AST, reach: Reach) -> None:
        """A function handed to the project's own schedule is noted with it; one that copies rescales nothing."""
        if self._handed_to is not None and reach.context == MEGATRON:
            schedule, copies = self._handed_to
            self.own_schedules.setdefault((path, function.lineno), schedule)
            if copies:
                return
        super()._reach(path, function, reach)

    def schedules_by_path(self) -> dict[str, dict[int, str]]:
        """`own_schedules` by the real path of each file, then the line of each function's def."""
        out: dict[str, dict[int, str]] = {}
        for (path, line), schedule in self.own_schedules.items():
            out.setdefault(path, {})[line] = schedule
        return out

    def _megatron_evidence(self, module: Symbols, scope: list[ast.AST], function: ast.AST) -> None:
        """`function`: a def, or the module itself (`pretrain(...)` under `if __name__ == "__main__":`)."""
        own = self._own_schedule(module)
        self._handed_to = (own, self._schedule_copies(own)) if own is not None else None
        try:
            self._handed_evidence(module, scope, function)
        finally:
            self._handed_to = None

    def _handed_evidence(self, module: Symbols, scope: list[ast.AST], function: ast.AST) -> None:
        inner = scope + [function] if not isinstance(function, ast.Module) else scope
        signature = None if isinstance(function, ast.Module) else _forward_step_signature(function)
        if signature is not None:
            what = f"{function.name} has {signature.shown}"
            self._forward_step(module, inner, function, (self._step(module, function, what),), guessed=True)
        for call, name, entry, handed in schedule_calls(module, body_walk(function)):
            keyword = entry.keyword if entry else "forward_step_func"
            does = entry.does if entry else "rescales the loss in place"
            what = f"passed as {keyword} to {name or f'{SCHEDULE_GETTER}()'}, which {does}"
            why = self._step(module, call, what)
            if keyword != "forward_step_func":  # the loss function itself
                for value in self._values(module, inner, handed):
                    self._reach(value.module.path, value.function, Reach(MEGATRON, (*value.steps, why)))
            else:
                partial = self._partial(module, inner, handed)
                for value in self._values(module, inner, handed):
                    target = value.function
                    if isinstance(target, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        scope_of_target = value.module.scope_of(target)
                        arguments = _Bound(module, inner, partial, _bindings(partial, target)) if partial else None
                        model = argument(call, "model", None)
                        given = _Given(module, inner, model) if model is not None else None
                        outer = (*value.steps, why)
                        self._forward_step(value.module, scope_of_target, target, outer, arguments, given)

    def _loss_reduction_evidence(self, module: Symbols) -> None:
        """The `forward` of each class of `module` deriving from NeMo's `MegatronLossReduction`, unless
        only an FSDP strategy runs it (`_under_fsdp_only`)."""
        for cls in module.classes.values():
            if self._is_loss_reduction(module, cls, depth=0) and not self._under_fsdp_only(module, cls):
                for stmt in cls.body:
                    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "forward":
                        what = f"forward of {cls.name}, a {LOSS_REDUCTION_CLASS}"
                        self._reach(module.path, stmt, Reach(MEGATRON, (self._step(module, stmt, what),)))

    def _under_fsdp_only(self, module: Symbols, cls: ast.ClassDef) -> bool:
        """Whether every strategy `module` makes is an FSDP one (NeMo 2's `FSDPStrategy` and
        `FSDP2Strategy` call the reduction's `forward` themselves: no schedule, nothing rescales), and
        no other module of the project imports `cls` or `module`: the reduction runs only there."""
        made = {
            name
            for node in ast.walk(module.tree)
            if isinstance(node, ast.Call) and (name := last_name(node.func)) is not None and name.endswith("Strategy")
        }
        if not made or not made <= _FSDP_STRATEGIES:
            return False
        stem = os.path.splitext(os.path.basename(module.path))[0]
        for other in map(self._module, self._mentioning(module.path, cls.name)):
            if other is None or other is module:
                continue
            if any(target.rpartition(".")[2] in (cls.name, stem) for target, _ in other.targets.values()):
                return False
        return True

    def _is_loss_reduction(self, module: Symbols, cls: ast.ClassDef, depth: int) -> bool:
        for base in cls.bases:
            if last_name(base) == LOSS_REDUCTION_CLASS:
                return True
            inherited = depth < 4 and isinstance(base, ast.Name) and base.id in module.classes
            if inherited and self._is_loss_reduction(module, module.classes[base.id], depth + 1):
                return True
        return False

    def _forward_step(
        self,
        module: Symbols,
        scope: list[ast.AST],
        function: ast.AST,
        outer: tuple[Step, ...],
        bound: _Bound | None = None,
        model: _Given | None = None,
        guessed: bool = False,
    ) -> None:
        """A forward-step function: whatever it returns second is Megatron's loss_func. `bound`: the
        partial it was handed over as, whose arguments its parameters are (a loss function may be one);
        `model`: what the schedule call hands the forward step as its `model`; `outer`: the steps from
        the forward step to the host."""
        for stmt in body_walk(function):
            if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple) and len(stmt.value.elts) == 2:
                handed = stmt.value.elts[1]
                steps = (self._step(module, stmt, f"returned as the loss function by {function.name}"), *outer)
                for value in self._values(module, scope, handed):
                    target_module, target = value.module, value.function
                    self._reach(target_module.path, target, Reach(MEGATRON, (*value.steps, *steps), guessed))
                    call = _model_results(function, target) if model is not None else None
                    if call is not None:  # `loss, loss_dict = model(x)`, and the closure returns them
                        what = f"{target.name} returns what model's forward returned at {function.name}"
                        self._model_forward(model, (self._step(module, call, what), *steps))
                    if bound is not None and target in body_walk(function):  # a closure of the forward step
                        for call, parameter in _delegations(target, bound.arguments):
                            what = f"called by {target.name}, which returns its (loss, report)"
                            self._reach_argument(bound, parameter, (self._step(target_module, call, what), *steps))
                parameter = _callee_name(handed)
                if bound is not None and parameter in bound.arguments:  # `return output, partial(loss_fn, ...)`
                    self._reach_argument(bound, parameter, steps)

    def _model_forward(self, model: _Given, steps: tuple[Step, ...]) -> None:
        """The `forward` of each class of the project the schedule's `model` is an instance of
        (`self.model`, made in its class by `Class(...)` or by a method returning one): calling the
        model runs it, so what it returns is what the closure hands the schedule."""
        for class_module, cls in self._instance_classes(model.module, model.scope, model.node):
            for forward in self._methods(class_module, cls, "forward", 0):
                self._reach(class_module.path, forward, Reach(MEGATRON, steps))

    def _partial(self, module: Symbols, scope: list[ast.AST], node: ast.expr) -> ast.Call | None:
        """`functools.partial(...)` as handed over: the call itself, or the one a name is bound to."""
        values = self._named(module, scope, node.id)[1] if isinstance(node, ast.Name) else [node]
        return next((v for v in values if isinstance(v, ast.Call) and last_name(v.func) == "partial" and v.args), None)

    def _reach_argument(self, bound: _Bound, parameter: str, steps: tuple[Step, ...]) -> None:
        """What the hand-off's partial binds to `parameter` is a loss function Megatron calls: the
        functions it names, or, if it is a parameter of the function making the partial, what that
        function's callers pass for it."""
        argument = bound.arguments[parameter]
        steps = (self._step(bound.module, bound.call, f"bound to {parameter} by partial"), *steps)
        for value in self._values(bound.module, bound.scope, argument):
            self._reach(value.module.path, value.function, Reach(MEGATRON, (*value.steps, *steps)))
        maker = bound.scope[-1] if bound.scope else None
        passed_in = isinstance(maker, (ast.FunctionDef, ast.AsyncFunctionDef)) and isinstance(argument, ast.Name)
        if passed_in and argument.id in parameters(maker):
            self._callers(bound.module, bound.scope, argument.id, steps)


def schedule_calls(
    module: Symbols, nodes: Iterable[ast.AST]
) -> Iterator[tuple[ast.Call, str | None, ScheduleCall | None, ast.expr]]:
    """The calls among `nodes` (one function's own, or a module's) that hand a schedule what it calls:
    (the call, its callee's name, its `handoffs.SCHEDULE_CALLS` entry or None for a call of
    `get_forward_backward_func()`'s result, what it hands over)."""
    nodes = list(nodes)
    bound = {  # names bound to `get_forward_backward_func()` here: calling them runs the schedule
        last_name(t)
        for stmt in nodes
        if isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Call)
        and last_name(stmt.value.func) == SCHEDULE_GETTER
        for t in stmt.targets
    }
    for call in nodes:
        if not isinstance(call, ast.Call):
            continue
        name = last_name(call.func)
        schedule = name in bound or _calls_getter(call)
        entry = None if schedule else _schedule_call(module, call, name)
        keyword = entry.keyword if entry else "forward_step_func"
        handed = argument(call, keyword, entry.position if entry else None)
        if handed is not None and (schedule or entry):
            yield call, name, entry, handed


@dataclasses.dataclass(frozen=True)
class _Given:
    """What a schedule call hands the forward step as its `model`, with where the call is."""

    module: Symbols
    scope: list[ast.AST]
    node: ast.expr


def _model_results(forward_step: ast.AST, closure: ast.AST) -> ast.Assign | None:
    """`loss, loss_dict = model(...)` in `forward_step` (its parameter `model`), when `closure`, a def
    of it, returns exactly those two names and nothing else (`def dummy(output_tensor): return loss,
    loss_dict`, NeMo-1's text-to-image forward steps)."""
    if not isinstance(closure, (ast.FunctionDef, ast.AsyncFunctionDef)) or closure not in body_walk(forward_step):
        return None
    if "model" not in parameters(forward_step):
        return None
    returns = [node for node in body_walk(closure) if isinstance(node, ast.Return)]
    names = [
        tuple(e.id for e in r.value.elts if isinstance(e, ast.Name))
        for r in returns
        if isinstance(r.value, ast.Tuple) and len(r.value.elts) == 2
    ]
    if not names or len(names) != len(returns) or len(set(names)) != 1 or len(names[0]) != 2:
        return None
    if set(names[0]) & (bound_names(body_walk(closure)) | set(parameters(closure))):
        return None
    for stmt in body_walk(forward_step):
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Tuple)
            and tuple(e.id if isinstance(e, ast.Name) else None for e in stmt.targets[0].elts) == names[0]
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)
            and stmt.value.func.id == "model"
        ):
            return stmt
    return None


def schedule_module(path: str) -> tuple[str, str] | None:
    """For the project's own schedule module at `path` (as `_own_schedule` finds it): the directory to import it
    from and its dotted name (`megatron.core.pipeline_parallel.schedules`); None if `path` is not one."""
    for dotted in _SCHEDULE_MODULES:
        tail = os.sep + os.path.join(*dotted.split(".")) + ".py"
        if path.endswith(tail):
            return path[: -len(tail)], dotted
    return None


def _schedule_beside(directory: str) -> str | None:
    """The schedule of a megatron-core checked out beside the importer's own checkout (the nearest
    directory above it with a `setup.py` or `pyproject.toml`): MLPerf submissions ship
    `implementations/pytorch/{NeMo,Megatron-LM}` and install both from there. None where there is no
    such checkout, or several sit beside it (which one runs is not in sight)."""
    root = project_root(directory)
    current = directory
    while not any(os.path.isfile(os.path.join(current, marker)) for marker in ("setup.py", "pyproject.toml")):
        if current == root or not current.startswith(root + os.sep):
            return None
        current = os.path.dirname(current)
    if current == root:
        return None
    found = _core_schedules_in_children(os.path.dirname(current))
    return found[0] if len(found) == 1 else None


@functools.cache
def _core_schedules_in_children(directory: str) -> tuple[str, ...]:
    """The megatron-core schedule modules of the checkouts right under `directory`."""
    try:
        children = sorted(entry.path for entry in os.scandir(directory) if entry.is_dir())
    except OSError:
        return ()
    schedule = os.path.join(*_SCHEDULE_MODULES[0].split(".")) + ".py"
    return tuple(path for child in children if os.path.isfile(path := os.path.join(child, schedule)))


def _forward_step_signature(function: ast.AST) -> Signature | None:
    """The forward-step signature (`handoffs.SIGNATURES`) `function`'s parameters have, if any."""
    args = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    if args and args[0] in ("self", "cls"):
        args = args[1:]
    for signature in SIGNATURES:
        rest = args[1:] if args and args[0] in signature.optional_first else args
        pairs = zip(rest, signature.params, strict=False)
        if len(rest) >= len(signature.params) and all(name in allowed for name, allowed in pairs):
            return signature
    return None


def _schedule_call(module: Symbols, call: ast.Call, name: str | None) -> ScheduleCall | None:
    """The first entry of `handoffs.SCHEDULE_CALLS` that `call` (of `name`) is, if any."""
    for entry in SCHEDULE_CALLS:
        if name not in entry.callees:
            continue
        if entry.imported_from is None or imported_from(module, call.func).startswith(entry.imported_from + "."):
            return entry
    return None


def _bindings(partial: ast.Call, function: ast.AST) -> dict[str, ast.expr]:
    """The parameters of `function` that `partial(function_expr, *args, **keywords)` binds, to their
    arguments. A partial of a partial binds nothing known here."""
    head = partial.args[0]
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or isinstance(head, ast.Call):
        return {}
    bound: dict[str, ast.expr] = {}
    for name, value in zip(positional(function, isinstance(head, ast.Attribute)), partial.args[1:], strict=False):
        if isinstance(value, ast.Starred):
            break
        bound[name] = value
    names = parameters(function)
    bound.update((k.arg, k.value) for k in partial.keywords if k.arg is not None and k.arg in names)
    return bound


def _callee_name(node: ast.expr) -> str | None:
    """`name` for `name` or `partial(name, ...)`: a callable handed over as it is."""
    if isinstance(node, ast.Call) and last_name(node.func) == "partial" and node.args:
        node = node.args[0]
    return node.id if isinstance(node, ast.Name) else None


def _delegations(function: ast.AST, parameters: Mapping[str, ast.expr]) -> Iterator[tuple[ast.Call, str]]:
    """The calls in `function` of one of `parameters` (an enclosing function's) whose `(loss, report)`
    it returns: `return loss_fn(x)`, or `loss, report = loss_fn(x)` and then `return loss, report`."""
    nodes = list(body_walk(function))
    returned = {
        stmt.value.elts[0].id
        for stmt in nodes
        if isinstance(stmt, ast.Return)
        and isinstance(stmt.value, ast.Tuple)
        and stmt.value.elts
        and isinstance(stmt.value.elts[0], ast.Name)
    }
    for stmt in nodes:
        value = stmt.value if isinstance(stmt, (ast.Return, ast.Assign)) else None
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in parameters):
            continue
        if isinstance(stmt, ast.Return) or any(
            isinstance(t, ast.Tuple) and t.elts and isinstance(t.elts[0], ast.Name) and t.elts[0].id in returned
            for t in stmt.targets
        ):
            yield value, value.func.id


def _calls_getter(call: ast.Call) -> bool:
    """`get_forward_backward_func()(...)`."""
    return isinstance(call.func, ast.Call) and last_name(call.func.func) == SCHEDULE_GETTER


def _rescaled_results(function: ast.AST, callee: str) -> set[str] | None:
    """The names holding what `function`'s calls of `callee` returned (directly, or unpacked from
    it) that it then rescales in place (`x /= n`, `x *= k`, `x.div_(n)`, `x.mul_(k)`); None: it
    never calls `callee`."""
    nodes = list(body_walk(function))
    results: set[str] = set()
    for _ in range(2):  # `outputs = loss_func(x)`, then `loss, report = outputs`
        for stmt in nodes:
            if not isinstance(stmt, ast.Assign):
                continue
            value = stmt.value
            called = isinstance(value, ast.Call) and last_name(value.func) == callee
            if called or (isinstance(value, ast.Name) and value.id in results):
                for target in stmt.targets:
                    elements = target.elts if isinstance(target, ast.Tuple) else [target]
                    results.update(e.id for e in elements if isinstance(e, ast.Name))
    return results & set(rescaled_in_place(nodes)) if results else None
