"""``megatron_rescale``: apply what Megatron does to a loss function's outputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .megatron import rescale_with_installed
from .profiles import resolve_profile


def megatron_rescale(
    outputs: Sequence[Any],
    *,
    num_microbatches: int,
    cp_group_size: int = 1,
    calculate_per_token_loss: bool = False,
    profile: str = "latest",
) -> tuple[Any, Any]:
    """Rescale a loss function's ``outputs`` as Megatron does; return ``(backprop tensor, report)``.

    ``outputs`` is ``(loss, report)`` or ``(loss, num_tokens, report)``. Like Megatron, the
    in-place profiles modify ``loss`` itself, so any alias of it in the report moves too.
    ``profile`` is a built-in profile (``"latest"``, ``"0.12"``, a release such as ``"0.9.0"``;
    see ``PROFILES``) or ``"installed"`` to run the installed megatron-core's own code.
    """
    if not isinstance(outputs, (tuple, list)):
        raise TypeError(f"a Megatron loss function returns a tuple; got {type(outputs).__name__}")
    if profile == "installed":
        return rescale_with_installed(
            outputs,
            num_microbatches=num_microbatches,
            cp_group_size=cp_group_size,
            calculate_per_token_loss=calculate_per_token_loss,
        )
    return resolve_profile(profile).apply(
        outputs,
        num_microbatches=num_microbatches,
        cp_group_size=cp_group_size,
        calculate_per_token_loss=calculate_per_token_loss,
    )
