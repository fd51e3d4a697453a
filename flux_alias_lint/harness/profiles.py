"""What each megatron-core release does to a loss function's outputs, as data.

Megatron calls ``outputs = loss_func(output_tensor)`` on the last pipeline stage, rescales
the first element (the tensor it backpropagates) and only then stores the last element
(the report). Each ``Profile`` below models one behaviour and names the releases it was
compared against (``scripts/pin_profiles.py`` and ``tests/harness/test_pinning.py``).
Written from the behaviour of the released wheels, not copied from them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any, Literal

from ._deps import require_torch

torch = require_torch()

ThreeTuple = Literal["unsupported", "untouched", "rescaled"]


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    description: str
    in_place: bool  # ``/=`` on the backprop tensor (so its aliases in the report move too)
    three_tuple: ThreeTuple  # what happens to ``(loss, num_tokens, report)``
    cp_on_two_tuple: bool  # ``*= cp_size`` on the ``(loss, report)`` path
    cp_on_three_tuple: bool  # ``*= cp_size`` on the 3-tuple path (0.12 only)
    clamp_num_tokens: bool  # divide by ``clamp(num_tokens, min=1)`` instead of ``num_tokens``
    pinned_to: tuple[str, ...]  # the megatron-core releases this profile was checked against

    def apply(
        self,
        outputs: Sequence[Any],
        *,
        num_microbatches: int,
        cp_group_size: int = 1,
        calculate_per_token_loss: bool = False,
    ) -> tuple[Any, Any]:
        """Rescale ``outputs`` as the modelled release does; return ``(backprop tensor, report)``."""
        loss, num_tokens, report = _unpack(outputs, self)
        steps: list[tuple[str, Any]] = []
        if num_tokens is None:
            if self.cp_on_two_tuple:
                steps.append(("mul", cp_group_size))
            steps.append(("div", num_microbatches))
        elif self.three_tuple == "rescaled" and not calculate_per_token_loss:
            steps.append(("div", torch.clamp(num_tokens, min=1) if self.clamp_num_tokens else num_tokens))
            if self.cp_on_three_tuple:
                steps.append(("mul", cp_group_size))
            steps.append(("div", num_microbatches))
        for op, value in steps:
            # ``loss.div_(n)`` is Megatron's ``loss /= n``; ``torch.div(loss, n)`` its ``loss / n``.
            loss = getattr(loss, f"{op}_")(value) if self.in_place else getattr(torch, op)(loss, value)
        return loss, report


def _unpack(outputs: Sequence[Any], profile: Profile) -> tuple[Any, Any, Any]:
    if len(outputs) == 3 and profile.three_tuple != "unsupported":
        loss, num_tokens, report = outputs
        return loss, num_tokens, report
    if len(outputs) == 2:
        loss, report = outputs
        return loss, None, report
    shapes = (
        "(loss, report)" if profile.three_tuple == "unsupported" else "(loss, report) or (loss, num_tokens, report)"
    )
    raise ValueError(
        f"megatron-core {profile.name} expects a loss function to return {shapes}; got {len(outputs)} values"
    )


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            "0.6",
            "up to 0.6: `loss / num_microbatches`, a copy; 3-tuples unsupported",
            in_place=False,
            three_tuple="unsupported",
            cp_on_two_tuple=False,
            cp_on_three_tuple=False,
            clamp_num_tokens=False,
            pinned_to=("0.5.0", "0.6.0"),
        ),
        Profile(
            "2024-04-29",
            "Megatron-LM commit adfa873d (no release): 2-tuple copied and divided, 3-tuple untouched",
            in_place=False,
            three_tuple="untouched",
            cp_on_two_tuple=False,
            cp_on_three_tuple=False,
            clamp_num_tokens=False,
            pinned_to=(),
        ),
        Profile(
            "0.7",
            "0.7 - 0.11: in place; `/= num_tokens` (unless per-token), `/= num_microbatches`",
            in_place=True,
            three_tuple="rescaled",
            cp_on_two_tuple=False,
            cp_on_three_tuple=False,
            clamp_num_tokens=False,
            pinned_to=("0.7.0", "0.8.0", "0.9.0", "0.10.0", "0.11.0"),
        ),
        Profile(
            "0.12",
            "0.12: in place; `*= cp_size` on both paths",
            in_place=True,
            three_tuple="rescaled",
            cp_on_two_tuple=True,
            cp_on_three_tuple=True,
            clamp_num_tokens=False,
            pinned_to=("0.12.0", "0.12.3"),
        ),
        Profile(
            "0.13",
            "0.13 - 0.14: in place; `*= cp_size` on the 2-tuple path only",
            in_place=True,
            three_tuple="rescaled",
            cp_on_two_tuple=True,
            cp_on_three_tuple=False,
            clamp_num_tokens=False,
            pinned_to=("0.13.0", "0.13.1", "0.14.0"),
        ),
        Profile(
            "0.15",
            "0.15 and later: as 0.13, dividing by `clamp(num_tokens, min=1)`",
            in_place=True,
            three_tuple="rescaled",
            cp_on_two_tuple=True,
            cp_on_three_tuple=False,
            clamp_num_tokens=True,
            pinned_to=("0.15.0", "0.15.3", "0.16.0", "0.16.1"),
        ),
    )
}

LATEST = "0.15"
# The first release of each released behaviour, newest first.
_FIRST_RELEASE: tuple[tuple[tuple[int, int], str], ...] = (
    ((0, 15), "0.15"),
    ((0, 13), "0.13"),
    ((0, 12), "0.12"),
    ((0, 7), "0.7"),
    ((0, 0), "0.6"),
)


def _release(version: str) -> tuple[int, int] | None:
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else None


# The newest release a profile was checked against: a later one may behave differently.
NEWEST_PINNED = max(v for p in PROFILES.values() for v in map(_release, p.pinned_to) if v is not None)


def profile_for_release(version: str) -> Profile:
    """The profile that models a megatron-core release, e.g. ``"0.9.0"`` or ``"0.14.0rc2"``.

    ValueError for a release newer than any profile was checked against: it is not known what it does.
    """
    release = _release(version)
    if release is None:
        raise ValueError(f"not a megatron-core version: {version!r}")
    if release > NEWEST_PINNED:
        newest = ".".join(map(str, NEWEST_PINNED))
        raise ValueError(
            f"megatron-core {version} is newer than any release flux-alias-lint models (up to {newest}); "
            "use 'installed' to run its own code, or 'latest'"
        )
    return PROFILES[next(name for first, name in _FIRST_RELEASE if release >= first)]


def resolve_profile(name: str) -> Profile:
    """A profile by name (``"0.12"``, ``"2024-04-29"``), ``"latest"``, or a release number up to ``NEWEST_PINNED``."""
    if name == "latest":
        return PROFILES[LATEST]
    if name in PROFILES:
        return PROFILES[name]
    if _release(name) is not None:
        return profile_for_release(name)
    known = ", ".join(["latest", "installed", *PROFILES])
    raise ValueError(f"unknown Megatron profile {name!r}; use one of {known} or a release like '0.9.0'")
