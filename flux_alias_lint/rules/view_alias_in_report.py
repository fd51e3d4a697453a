"""FAL003: a view of the backprop tensor in the report."""

from __future__ import annotations

from ..facts.tensor_ops import AliasKind
from ._report import WHY, ReportAliasRule

RULE = ReportAliasRule(
    code="FAL003",
    name="view-alias-in-report",
    summary="a view of the backprop tensor is in the report",
    kind=AliasKind.VIEW,
    relation="is a view of",
    seen_at_run_time="a view of it",
    flags="views: `view`, `reshape`, `squeeze`, `T`, `x[0]`, `chunk`, ...",
    fix="`.clone()`",
    doc=f"""\
## What it does
Flags a report entry that is a view of the backprop tensor or of one of its aliases:
`view`, `view_as`, `reshape`, `flatten`, `squeeze`, `unsqueeze`, `expand`, `transpose`,
`t`, `T`, `permute`, `movedim`, `narrow`, `select`, `unbind`, `split`, `chunk`,
`diagonal`, `unflatten`, `as_strided`, basic indexing (`x[0]`, `x[1:]`, `x[None]`,
`x[...]`) and the other view operations PyTorch lists.

## Why is this bad?
A view shares storage with its base, so an in-place update of the base shows through it.
{WHY}

## Example
```python
def loss_func(output_tensor):
    loss = output_tensor.sum()
    return loss, {{"loss": loss.detach().view(1)}}
```

## Fix
```python
    return loss, {{"loss": loss.detach().view(1).clone()}}
```
""",
)
