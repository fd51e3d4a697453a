"""``assert_report_survives_rescale``: the regression test for a loss function, in one call.

It runs the real loss function and Megatron's rescale and compares the report's values
before and after, so it sees aliases that no static rule can (made in a helper in another
module, behind a dynamic dispatch, by a conversion that happens to be a no-op, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ._deps import require_torch
from .guard import find_report_aliases
from .megatron import installed_megatron_version
from .report import iter_report_tensors
from .rescale import megatron_rescale

torch = require_torch()


def assert_report_survives_rescale(
    loss_func: Callable[..., Sequence[Any]],
    *args: Any,
    num_microbatches: int = 2,
    cp_group_size: int = 3,
    calculate_per_token_loss: bool = False,
    profile: str = "installed",
    **kwargs: Any,
) -> tuple[Any, Any]:
    """Call ``loss_func(*args, **kwargs)``, rescale as Megatron does, assert the report did not move.

    Returns the rescaled ``(backprop tensor, report)``. The defaults use 2 microbatches and
    3 context-parallel ranks so that neither factor is 1 and they do not cancel.
    """
    __tracebackhide__ = True  # pytest shows the failing test's line and this message, not the helper's source
    outputs = loss_func(*args, **kwargs)
    aliased = {alias.path for alias in find_report_aliases(outputs)}
    if not bool(torch.any(outputs[0].detach() != 0)):
        raise ValueError(
            "the loss is zero, so no rescale can show in the report; call the loss function with inputs "
            "that give a non-zero loss"
        )
    before = snapshot(outputs[-1])
    rescaled = megatron_rescale(
        outputs,
        num_microbatches=num_microbatches,
        cp_group_size=cp_group_size,
        calculate_per_token_loss=calculate_per_token_loss,
        profile=profile,
    )
    moved = [
        f"{path} changed {factor} after the rescale: "
        + ("it shares storage with the backprop tensor" if path in aliased else "something else modified it")
        for path, factor in changed_since(before).items()
    ]
    if moved:
        label = (
            f"installed megatron-core {installed_megatron_version()}"
            if profile == "installed"
            else f"profile {profile}"
        )
        name = getattr(loss_func, "__name__", repr(loss_func))
        raise AssertionError(
            f"the report of {name} does not survive Megatron's in-place rescale "
            f"({label}, num_microbatches={num_microbatches}, cp_group_size={cp_group_size}):\n"
            + "\n".join(moved)
            + "\nPut a copy in the report: loss.detach().clone()"
        )
    return rescaled


Snapshot = list[tuple[str, Any, Any]]  # (path, the report's tensor, a copy of its values)


def snapshot(report: Any) -> Snapshot:
    return [(path, tensor, tensor.detach().clone()) for path, tensor in iter_report_tensors(report)]


def changed_since(before: Snapshot) -> dict[str, str]:
    """Path → factor (``×0.50``) for each snapshotted tensor whose values changed since."""
    moved = {}
    with torch.no_grad():
        for path, tensor, old in before:
            try:
                if not same_values(old, tensor):
                    moved[path] = scale_factor(old, tensor)
            except RuntimeError as exc:  # a view of a multi-output op (split, chunk) the rescale invalidated
                if "modified inplace" not in str(exc):
                    raise
                moved[path] = "(invalidated by the in-place rescale)"
    return moved


def same_values(old: Any, new: Any) -> bool:
    if old.shape != new.shape:
        return False
    if old.is_floating_point() or old.is_complex():
        return bool(((old == new) | (old.isnan() & new.isnan())).all())
    return torch.equal(old, new)


def scale_factor(old: Any, new: Any) -> str:
    """``×0.50``: how much the changed, non-zero values were scaled (a range if not uniform)."""
    changed = (old != new) & (old != 0)
    ratios = (new[changed].double() / old[changed].double()).flatten()
    if ratios.numel() == 0:
        return "from zero"
    low, high = float(ratios.min()), float(ratios.max())
    return f"×{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"×{low:.2f}…×{high:.2f}"
