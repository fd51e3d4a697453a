"""FAL002: the backprop tensor itself in the report."""

from __future__ import annotations

from ..facts.tensor_ops import AliasKind
from ._report import WHY, ReportAliasRule

RULE = ReportAliasRule(
    code="FAL002",
    name="backprop-tensor-in-report",
    summary="the backprop tensor itself is in the report",
    kind=AliasKind.SAME,
    relation="is",
    seen_at_run_time="it is the backprop tensor itself",
    flags="`loss` itself",
    fix="`.detach().clone()`",
    doc=f"""\
## What it does
Flags a loss-function return whose report contains the backprop tensor itself,
e.g. `return loss, {{"lm loss": loss}}`, directly or through a variable.

## Why is this bad?
The report holds the very tensor Megatron rescales in place.
{WHY}
The report also keeps the autograd graph of the loss alive.

## Example
```python
def loss_func(output_tensor):
    loss = output_tensor.mean()
    return loss, {{"lm loss": loss}}
```

## Fix
```python
    return loss, {{"lm loss": loss.detach().clone()}}
```
`flux-alias-lint check --fix` inserts `.detach().clone()`.
""",
)
