"""FAL004: a conversion that may return the backprop tensor itself in the report."""

from __future__ import annotations

from ..facts.tensor_ops import AliasKind
from ._report import WHY, ReportAliasRule

RULE = ReportAliasRule(
    code="FAL004",
    name="may-return-self-conversion-in-report",
    summary="a conversion that may return the backprop tensor itself is in the report",
    kind=AliasKind.MAY_RETURN_SELF,
    relation="may alias",
    flags="`.float()`, `.to(...)`, `.cpu()`, `.contiguous()`, `torch.as_tensor`, ...",
    fix="`.clone()`",
    doc=f"""\
## What it does
Flags a report entry made by a conversion that returns `self` when nothing needs
converting: `.to(...)`, `.float()`, `.double()`, `.half()`, `.bfloat16()`, `.type(...)`,
`.type_as(...)`, `.cpu()`, `.cuda()`, `.contiguous()`, `.requires_grad_()`,
`torch.as_tensor(...)`. Where the dtype is known locally (the tensor was made by
`.to(torch.bfloat16)`, say) the checker uses it: a conversion to another dtype is a
copy and is not flagged.

## Why is this bad?
`loss.float()` copies a bf16 loss but returns the same tensor for an fp32 loss; `.cpu()`
is a copy on a GPU and a no-op in a CPU test. Whether the report aliases the loss then
depends on precision and device settings, which is how the bug survives review.
{WHY}

## Example
```python
def loss_func(output_tensor):
    loss = output_tensor.float().mean()
    return loss, {{"loss": loss.detach().float()}}
```

## Fix
```python
    return loss, {{"loss": loss.detach().float().clone()}}
```
""",
)
