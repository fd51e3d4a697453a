"""Run a project's own copy of Megatron's schedule (a fork's vendored one) on a loss function's outputs.

`check` reads the schedule a hand-off reaches (`index/schedule.py`: the project's own copy when it ships one);
`verify` runs that one, not the installed megatron-core. The copy is imported from the project: its import root
goes first on ``sys.path`` and the installed ``megatron`` modules are set aside while it is imported and while
it runs, then put back, so the rest of the process keeps the installed release. Its ``forward_step_calc_loss``
(megatron-core 0.14 on), else its ``forward_step``, gets the outputs as its loss function's, each argument given
by its name (the releases and forks order them differently); the pipeline-stage queries of its own
``parallel_state`` answer as the last stage of one, as for the installed release (`megatron.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import os
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..index.reach import shown
from ..index.schedule import schedule_module
from ._deps import quiet
from .megatron import _single_process_parallel_state, _StandInModel

# Where Megatron's schedule calls the loss function, newest first.
_ENTRIES = ("forward_step_calc_loss", "forward_step")


class ScheduleUnavailable(Exception):
    """The project's own schedule cannot be run here; ``str()`` says why."""


@dataclasses.dataclass(frozen=True)
class OwnSchedule:
    """A project's own schedule module, imported from the project, and the function calling the loss function."""

    path: str
    module: types.ModuleType
    entry: str
    modules: dict[str, types.ModuleType]  # the project's `megatron` modules, put in place while it runs

    def rescale(
        self, outputs: Sequence[Any], *, num_microbatches: int, cp_group_size: int, calculate_per_token_loss: bool
    ) -> tuple[Any, Any]:
        """Hand ``outputs`` to the project's schedule as its loss function's return value: ``(backprop tensor,
        report)`` after it, as `megatron_rescale` gives them."""
        store: list[Any] = []
        given = _given(
            outputs, store, _model_type(self.module), num_microbatches, cp_group_size, calculate_per_token_loss
        )
        function = getattr(self.module, self.entry)
        arguments = {name: given[name] for name in inspect.signature(function).parameters if name in given}
        parallel_state = getattr(self.module, "parallel_state", None)
        with self._in_place(), quiet(), contextlib.ExitStack() as stack:
            if isinstance(parallel_state, types.ModuleType):
                stack.enter_context(_single_process_parallel_state(parallel_state, cp_group_size))
            result = function(**arguments)
        if not store:
            raise RuntimeError(f"its {self.entry} stored no report")
        # `forward_step` returns the tensor (up to 0.6) or `(tensor, num_tokens)`; so does `forward_step_calc_loss`.
        return (result[0] if isinstance(result, tuple) else result), store[-1]

    def describe(self) -> str:
        return f"the project's own schedule {shown(self.path)} ({self.entry})"

    @contextlib.contextmanager
    def _in_place(self) -> Iterator[None]:
        with _set_aside(self.module.__name__.partition(".")[0], self.modules):
            yield


def _model_type(module: types.ModuleType) -> Any:
    """The schedule's own `ModelType.encoder_or_decoder`, which its `forward_step` compares a model's with."""
    model_type = getattr(module, "ModelType", None)
    return getattr(model_type, "encoder_or_decoder", None)


@contextlib.contextmanager
def _set_aside(top: str, replacement: dict[str, types.ModuleType]) -> Iterator[dict[str, types.ModuleType]]:
    """The modules of package ``top`` in ``sys.modules`` replaced by ``replacement`` for the duration; the dict
    yielded holds those there at the end (what an import inside added), and the originals go back after."""
    ours = [name for name in sys.modules if name == top or name.startswith(top + ".")]
    saved = {name: sys.modules.pop(name) for name in ours}
    sys.modules.update(replacement)
    present: dict[str, types.ModuleType] = {}
    try:
        yield present
    finally:
        for name in [name for name in sys.modules if name == top or name.startswith(top + ".")]:
            present[name] = sys.modules.pop(name)
        sys.modules.update(saved)


@functools.cache
def available(path: str) -> OwnSchedule | str:
    """`load`, once per path: the schedule, or why it cannot be run here."""
    try:
        return load(path)
    except ScheduleUnavailable as exc:
        return str(exc)


def load(path: str) -> OwnSchedule:
    """The project's own schedule module at ``path``, imported from the project; ScheduleUnavailable saying why
    it cannot be (it does not import here, or it has no function calling the loss function that can be run)."""
    found = schedule_module(path)
    if found is None:
        raise ScheduleUnavailable(f"{shown(path)} is not where Megatron's schedule module is")
    root, dotted = found
    top = dotted.partition(".")[0]
    sys.path.insert(0, root)
    importlib.invalidate_caches()
    try:
        with quiet(), _set_aside(top, {}) as imported:
            try:
                module = importlib.import_module(dotted)
            except Exception as exc:  # the fork's imports (apex, its own C++ parts, ...) are not all here
                raise ScheduleUnavailable(f"it does not import here ({type(exc).__name__}: {exc})") from None
    finally:
        sys.path.remove(root)
    where = os.path.realpath(getattr(module, "__file__", None) or "")
    if where != os.path.realpath(path):
        raise ScheduleUnavailable(f"`import {dotted}` gave {where or 'a module without a file'}, not the project's")
    entry = next((name for name in _ENTRIES if callable(getattr(module, name, None))), None)
    if entry is None:
        raise ScheduleUnavailable(f"it defines neither {' nor '.join(_ENTRIES)}")
    _check_arguments(getattr(module, entry), entry)
    return OwnSchedule(path, module, entry, imported)


def _given(
    outputs: Sequence[Any],
    store: list[Any],
    model_type: Any,
    num_microbatches: int,
    cp_group_size: int,
    calculate_per_token_loss: bool,
) -> dict[str, Any]:
    """Every argument a release of Megatron's schedule passes where it calls the loss function, by its name."""

    def loss_func(*args: Any, **kwargs: Any) -> Sequence[Any]:
        return outputs

    config = types.SimpleNamespace(
        calculate_per_token_loss=calculate_per_token_loss, timers=None, enable_autocast=False
    )
    loss = outputs[0] if outputs else None
    return {
        "forward_step_func": lambda data_iterator, model: (loss, loss_func),
        "data_iterator": None,
        "model": _StandInModel(model_type),
        "num_microbatches": num_microbatches,
        "input_tensor": None,
        "forward_data_store": store,
        "config": config,
        "timers": None,
        "collect_non_loss_data": False,
        "output_tensor": loss,
        "loss_func": loss_func,
        "cp_group_size": cp_group_size,
        "is_last_stage": True,
        "vp_stage": None,
    }


_GIVEN = frozenset(_given((), [], None, 1, 1, False))


def _check_arguments(function: Callable[..., Any], entry: str) -> None:
    """ScheduleUnavailable if ``function`` needs an argument this cannot give (one with no default, not named as
    Megatron's releases name them)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError) as exc:
        raise ScheduleUnavailable(f"its {entry} has no signature to call it by ({exc})") from None
    needed = [
        p.name
        for p in parameters
        if p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        and p.name not in _GIVEN
    ]
    if needed:
        raise ScheduleUnavailable(f"its {entry} needs {', '.join(needed)}, which Megatron's releases do not pass")
