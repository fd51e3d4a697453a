"""Compare built-in profiles with the installed megatron-core over a matrix of loss-function outputs.

The matrix is chosen so every pair of profiles differs on some case: 2- and 3-tuples,
per-token on and off, context parallelism 1 and 3, ``num_tokens`` 4 and 0 (0.15 clamps
it), and reports that alias the loss or not (copy versus in place).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from ._deps import require_torch
from .profiles import PROFILES
from .report import iter_report_tensors
from .rescale import megatron_rescale

torch = require_torch()

Outcome = tuple[Any, ...]
REPORT_KINDS = ("detach", "clone", "view", "same")


@dataclasses.dataclass(frozen=True)
class Case:
    arity: int
    calculate_per_token_loss: bool
    cp_group_size: int
    report_kind: str
    num_tokens: int | None = None
    num_microbatches: int = 2

    def outputs(self) -> tuple[Any, ...]:
        # A non-leaf loss that requires grad, as a model's loss is (Megatron's in-place
        # division refuses a leaf that requires grad).
        loss = (torch.tensor([3.0, 5.0], requires_grad=True) * 1.0).sum()
        count = torch.tensor(7)
        report = {
            "detach": {"loss": (loss.detach(), count)},  # noqa: FAL001 -- the case matrix needs aliasing reports
            "clone": {"loss": (loss.detach().clone(), count)},
            "view": {"loss": loss.detach().view(1)},  # noqa: FAL003 -- the case matrix needs aliasing reports
            "same": {"lm loss": loss},  # noqa: FAL002 -- the case matrix needs aliasing reports
        }[self.report_kind]
        if self.arity == 2:
            return loss, report
        return loss, torch.tensor(self.num_tokens, dtype=torch.int), report


CASES: tuple[Case, ...] = tuple(
    Case(arity, per_token, cp, kind, num_tokens)
    for arity, per_token, cp, kind in itertools.product((2, 3), (False, True), (1, 3), REPORT_KINDS)
    for num_tokens in ((None,) if arity == 2 else (4, 0))
)


def outcome(case: Case, profile: str) -> Outcome:
    """What ``profile`` makes of ``case``: the rescaled loss and every reported value, or an error."""
    try:
        loss, report = megatron_rescale(
            case.outputs(),
            num_microbatches=case.num_microbatches,
            cp_group_size=case.cp_group_size,
            calculate_per_token_loss=case.calculate_per_token_loss,
            profile=profile,
        )
    except (AssertionError, ValueError):  # Megatron asserts, the profiles raise ValueError
        return ("error",)
    # repr() so that inf and nan compare equal to themselves.
    values = tuple((path, repr(tensor.tolist())) for path, tensor in iter_report_tensors(report))
    return repr(loss.tolist()), values


def mismatches(profile: str, against: str = "installed") -> list[tuple[Case, Outcome, Outcome]]:
    """The cases on which two profiles disagree, with both outcomes."""
    return [
        (case, mine, theirs) for case in CASES if (mine := outcome(case, profile)) != (theirs := outcome(case, against))
    ]


def matching_profiles(against: str = "installed") -> list[str]:
    """The built-in profiles that agree with ``against`` on every case."""
    theirs = [outcome(case, against) for case in CASES]
    return [name for name in PROFILES if [outcome(case, name) for case in CASES] == theirs]
