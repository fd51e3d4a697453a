"""What FAL001–FAL004 share: one verdict and one message for a report entry that aliases the backprop
tensor; the kind of alias (`facts.tensor_ops.AliasKind`, decided by the analysis) picks the rule."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..facts.tensor_ops import AliasKind
from ._base import AnalysisRule, consequence

if TYPE_CHECKING:
    from ..index.reach import Reach
    from ..values import RawFinding

# Why any alias in the report is a bug: each rule's documentation says it after its own reason.
WHY = """\
Megatron calls `outputs = loss_func(output_tensor)` and takes the first element as the
tensor to backpropagate. Since megatron-core 0.7 it rescales that tensor *in place*
(`output_tensor /= num_microbatches`, from 0.12 on the 2-tuple path after
`output_tensor *= cp_group_size`) and only then stores the report (the last element). Anything in the report that shares
storage with the backprop tensor is rescaled with it: with two microbatches the
reported loss halves, and nothing warns. At one microbatch the factor is 1, so the bug
hides until gradient accumulation is turned on."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReportAliasRule(AnalysisRule):
    """A report entry that is an alias of the backprop tensor of one `kind`."""

    kind: AliasKind
    relation: str  # the entry {relation} the backprop tensor, in the message
    # How the run-time guard (`harness/guard.py`) describes such a tensor; it tells only the kinds it
    # can see in memory apart, and a conversion that returned its input is one of those.
    seen_at_run_time: str = ""

    def explain(
        self, found: RawFinding, expression: str, reach: Reach, write: tuple[str, int] | None
    ) -> tuple[str, str]:
        what = f"{found.report_path} = `{expression}` {self.relation} the backprop tensor `{found.backprop}`"
        if found.made_by_helper:  # no copy fits at the call: the helper made the entry (named, not its arguments)
            helper = expression.partition("(")[0]
            what = f"{found.report_path}, made in `{helper}()`, {self.relation} the backprop tensor `{found.backprop}`"
        return what, consequence(reach, found.returned)
