"""A guard for a whole job: check every loss function handed to Megatron, switched on once.

``install()`` replaces ``megatron.core.pipeline_parallel.schedules.forward_step_calc_loss`` (which
every schedule's ``forward_step`` calls) with a version that wraps its ``loss_func``: the outputs
are checked right after the loss function returns, before Megatron's in-place rescale.
``guard_forward_step`` does the same for one forward step, for forks with their own schedule.
"""

from __future__ import annotations

import functools
import inspect
import types
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ._deps import quiet, require
from .guard import (
    OnAlias,
    ReportAlias,
    ReportAliasError,
    ReportAliasWarning,
    callable_name,
    find_report_aliases,
    rescaled_by_megatron,
    validate_on_alias,
)

# (module, the forward_step_calc_loss it had before install()), to restore in uninstall().
_patched: list[tuple[types.ModuleType, Any]] = []


class _Alarm:
    """What a guard does on an alias: raise, or warn one line per loss function (a job calls it every microbatch)."""

    def __init__(self, on_alias: OnAlias) -> None:
        validate_on_alias(on_alias)
        self.on_alias = on_alias
        self.warned: set[Any] = set()

    def check(self, loss_func: Callable[..., Any], outputs: Sequence[Any], calculate_per_token_loss: bool) -> None:
        if not rescaled_by_megatron(outputs, calculate_per_token_loss):
            return
        aliases = find_report_aliases(outputs)
        if not aliases:
            return
        if self.on_alias == "raise":
            raise ReportAliasError(aliases, callable_name(loss_func))
        identity = _identity(loss_func)
        if identity not in self.warned:
            self.warned.add(identity)
            warnings.warn(
                _one_line(loss_func, aliases), ReportAliasWarning, stacklevel=3
            )  # Megatron's call of the loss function


def _identity(loss_func: Any) -> Any:
    """The same for every microbatch's loss function: its code, through partials and bound methods."""
    while isinstance(loss_func, functools.partial):
        loss_func = loss_func.func
    return getattr(loss_func, "__code__", None) or type(loss_func)


def _one_line(loss_func: Any, aliases: Sequence[ReportAlias]) -> str:
    code = _identity(loss_func)
    where = f" ({code.co_filename}:{code.co_firstlineno})" if isinstance(code, types.CodeType) else ""
    return (
        f"{callable_name(loss_func)}{where}: its report aliases the loss Megatron rescales in place: "
        + "; ".join(map(str, aliases))
        + ". Put a copy in the report: loss.detach().clone() (warned once per loss function)"
    )


def _checked(loss_func: Callable[..., Any], alarm: _Alarm, calculate_per_token_loss: bool) -> Callable[..., Any]:
    def checked(*args: Any, **kwargs: Any) -> Any:
        outputs = loss_func(*args, **kwargs)
        if not kwargs.get("non_loss_data"):  # collect_non_loss_data: arbitrary data, never rescaled
            alarm.check(loss_func, outputs, calculate_per_token_loss)
        return outputs

    return checked


def _schedules() -> types.ModuleType:
    with quiet():
        return require("megatron.core.pipeline_parallel.schedules", "megatron-core")


def _guarded_calc_loss(original: Callable[..., Any], alarm: _Alarm) -> Callable[..., Any]:
    # Megatron passes every argument by position; looking them up by index costs far less than
    # inspect.signature().bind on each microbatch.
    names = list(inspect.signature(original).parameters)
    loss_func_at, config_at, non_loss_at = (names.index(n) for n in ("loss_func", "config", "collect_non_loss_data"))

    def argument(args: tuple[Any, ...], kwargs: dict[str, Any], index: int) -> Any:
        return args[index] if index < len(args) else kwargs.get(names[index])

    @functools.wraps(original)
    def forward_step_calc_loss(*args: Any, **kwargs: Any) -> Any:
        loss_func = argument(args, kwargs, loss_func_at)
        if loss_func is not None and not argument(args, kwargs, non_loss_at):
            per_token = getattr(argument(args, kwargs, config_at), "calculate_per_token_loss", False)
            checked = _checked(loss_func, alarm, per_token)
            if loss_func_at < len(args):
                args = (*args[:loss_func_at], checked, *args[loss_func_at + 1 :])
            else:
                kwargs = {**kwargs, "loss_func": checked}
        return original(*args, **kwargs)

    return forward_step_calc_loss


def install(*, on_alias: OnAlias = "raise", also_patch: Sequence[types.ModuleType] = ()) -> None:
    """Check every loss function Megatron calls from now on; ``uninstall()`` undoes it.

    ``on_alias="warn"`` warns once per loss function instead of raising ``ReportAliasError``.
    ``also_patch``: modules that did ``from megatron.core.pipeline_parallel.schedules import
    forward_step_calc_loss`` and so hold their own reference. Calling it again replaces the settings.
    """
    alarm = _Alarm(on_alias)
    schedules = _schedules()
    for module in also_patch:
        if not hasattr(module, "forward_step_calc_loss"):
            raise AttributeError(f"{module.__name__} has no forward_step_calc_loss to patch")
    uninstall()
    guarded = _guarded_calc_loss(schedules.forward_step_calc_loss, alarm)
    for module in (schedules, *also_patch):
        _patched.append((module, module.forward_step_calc_loss))
        module.forward_step_calc_loss = guarded


def uninstall() -> None:
    """Put back every ``forward_step_calc_loss`` that ``install()`` replaced (nothing if it was not installed)."""
    while _patched:
        module, original = _patched.pop()
        module.forward_step_calc_loss = original


def guard_forward_step(
    forward_step_func: Callable[..., tuple[Any, Any]], *, on_alias: OnAlias = "raise"
) -> Callable[..., tuple[Any, Any]]:
    """A forward step whose loss function is checked on every call, for a schedule ``install()`` cannot reach.

    The model's config (``get_model_config``) says whether the loss is per-token (a 3-tuple is then not
    checked); a ``non_loss_data=True`` call is never checked.
    """
    alarm = _Alarm(on_alias)
    get_model_config = require("megatron.core.utils", "megatron-core").get_model_config

    @functools.wraps(forward_step_func)
    def guarded(data_iterator: Any, model: Any, *args: Any) -> tuple[Any, Any]:
        output_tensor, loss_func = forward_step_func(data_iterator, model, *args)
        if loss_func is None:
            return output_tensor, loss_func
        per_token = getattr(get_model_config(model), "calculate_per_token_loss", False)
        return output_tensor, _checked(loss_func, alarm, per_token)

    return guarded
