"""FAL001: a `.detach()`/`.data` alias of the backprop tensor in the report."""

from __future__ import annotations

from ..facts.tensor_ops import AliasKind
from ._report import WHY, ReportAliasRule

RULE = ReportAliasRule(
    code="FAL001",
    name="detached-alias-in-report",
    summary="a `.detach()`/`.data` alias of the backprop tensor is in the report",
    kind=AliasKind.DETACH,
    relation="is a detached alias of",
    seen_at_run_time="a .detach()/.data alias of it",
    flags="`loss.detach()`, `loss.data`, `torch.detach(loss)`, `loss.detach_()`",
    fix="`.clone()`",
    doc=f"""\
## What it does
Flags a loss-function return `(loss, report)` or `(loss, num_tokens, report)` whose
report contains `loss.detach()`, `loss.detach_()`, `torch.detach(loss)` or `loss.data`,
directly, through local variables, or nested in tuples, lists and dicts (and, where Megatron
is known to call the function, in the fields of a dataclass or `NamedTuple` report).

## Why is this bad?
`.detach()` and `.data` make a new tensor object that shares storage with `loss`;
they stop gradients, they do not copy.
{WHY}

## Example
```python
def loss_func(output_tensor):
    loss_sum = output_tensor.sum()
    sample_count = torch.tensor(output_tensor.numel())
    return loss_sum, {{"loss": (loss_sum.detach(), sample_count.detach())}}
```

## Fix
Copy the value that goes into the report:
```python
    return loss_sum, {{"loss": (loss_sum.detach().clone(), sample_count.detach())}}
```
`flux-alias-lint check --fix` inserts the `.clone()`.
""",
)
