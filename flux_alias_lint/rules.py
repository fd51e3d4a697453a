"""The rule catalogue: codes, names and the documentation `flux-alias-lint rule CODE` prints."""

from __future__ import annotations

import dataclasses

from .facts.tensor_ops import AliasKind


@dataclasses.dataclass(frozen=True)
class Rule:
    code: str
    name: str
    summary: str
    doc: str


_WHY = """\
Megatron calls `outputs = loss_func(output_tensor)` and takes the first element as the
tensor to backpropagate. Since megatron-core 0.7 it rescales that tensor *in place*
(`output_tensor /= num_microbatches`, from 0.12 on the 2-tuple path after
`output_tensor *= cp_group_size`) and only then stores the report (the last element). Anything in the report that shares
storage with the backprop tensor is rescaled with it: with two microbatches the
reported loss halves, and nothing warns. At one microbatch the factor is 1, so the bug
hides until gradient accumulation is turned on."""

RULES: dict[str, Rule] = {
    rule.code: rule
    for rule in (
        Rule(
            "FAL000",
            "invalid-syntax",
            "the file could not be read, decoded or parsed, so it was not checked",
            """\
## What it does
Reports a file the checker could not analyse: a syntax error (Python 2 code, or syntax newer
than the project's target version), bytes that are not valid in the file's encoding, NUL bytes,
a file that cannot be read, or nesting too deep to parse safely. The message says which.

## Why is this bad?
Nothing in the file was checked, so a loss function in it may alias the backprop tensor
unnoticed. Like ruff's `invalid-syntax`, it is a finding in every output format (so CI sees
it) and `--exit-zero` applies to it.

## Example
```python
print "step", step  # Python 2
```

## Fix
Fix the file, or exclude it (`extend-exclude`). It is reported whatever `select` says; only an
`ignore` or `per-file-ignores` entry naming `FAL000` exactly turns it off.
""",
        ),
        Rule(
            "FAL001",
            "detached-alias-in-report",
            "a `.detach()`/`.data` alias of the backprop tensor is in the report",
            f"""\
## What it does
Flags a loss-function return `(loss, report)` or `(loss, num_tokens, report)` whose
report contains `loss.detach()`, `loss.detach_()`, `torch.detach(loss)` or `loss.data`,
directly, through local variables, or nested in tuples, lists and dicts (and, where Megatron
is known to call the function, in the fields of a dataclass or `NamedTuple` report).

## Why is this bad?
`.detach()` and `.data` make a new tensor object that shares storage with `loss`;
they stop gradients, they do not copy.
{_WHY}

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
        ),
        Rule(
            "FAL002",
            "backprop-tensor-in-report",
            "the backprop tensor itself is in the report",
            f"""\
## What it does
Flags a loss-function return whose report contains the backprop tensor itself,
e.g. `return loss, {{"lm loss": loss}}`, directly or through a variable.

## Why is this bad?
The report holds the very tensor Megatron rescales in place.
{_WHY}
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
        ),
        Rule(
            "FAL003",
            "view-alias-in-report",
            "a view of the backprop tensor is in the report",
            f"""\
## What it does
Flags a report entry that is a view of the backprop tensor or of one of its aliases:
`view`, `view_as`, `reshape`, `flatten`, `squeeze`, `unsqueeze`, `expand`, `transpose`,
`t`, `T`, `permute`, `movedim`, `narrow`, `select`, `unbind`, `split`, `chunk`,
`diagonal`, `unflatten`, `as_strided`, basic indexing (`x[0]`, `x[1:]`, `x[None]`,
`x[...]`) and the other view operations PyTorch lists.

## Why is this bad?
A view shares storage with its base, so an in-place update of the base shows through it.
{_WHY}

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
        ),
        Rule(
            "FAL004",
            "may-return-self-conversion-in-report",
            "a conversion that may return the backprop tensor itself is in the report",
            f"""\
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
{_WHY}

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
        ),
        Rule(
            "FAL005",
            "captured-alias-written-in-place",
            "a value kept for later shares storage with a tensor that is then changed in place",
            """\
## What it does
Flags a *capture*, a value kept past the statement that makes it, when an in-place write can
change it afterwards. Captures: an entry of the returned report, an element appended, inserted or
stored into a container that outlives the function (an attribute of `self`, a parameter, a module
global, a closure variable: `self.losses.append(v)`, `metrics["loss"] = v`), an attribute set on
such an object (`self.last_loss = v`). The value is an alias of a tensor: `.detach()`, `.data`, a
view, a conversion that may return `self`, or the tensor itself. The writers:
- an in-place write later in the same function (`loss *= scale`, `loss /= n`, `loss += aux`,
  `loss.mul_(k)`, `copy_`, `zero_`, `clamp_`, ...; the message gives its line);
- Megatron's schedule, when the tensor is the loss returned by a function Megatron calls (it runs
  `loss *= cp_size; loss /= num_microbatches`);
- a caller in the project that unpacks the returned loss and rescales it in place.

Copies (`.clone()`, `.item()`, `float()`, arithmetic, `torch.cat`) and rebinding (`loss = loss * w`)
are not flagged, nor is a capture made after the write, nor an entry updated through the container
holding it (`metrics[k] += v`). A write in the function itself is an error whoever calls it (context
`in-function`); the others follow their context, as for FAL001. The tensor itself kept in a list or on an
attribute and then updated in place by the function is taken to be on purpose (a buffer).

## Why is this bad?
An alias has no values of its own: an in-place write to the tensor shows through it. The kept
metric then reports the value after the write (the scaled loss, or the loss divided by the number
of microbatches), not the one it was meant to keep, and nothing warns.

## Example
```python
def loss_func(output_tensor):
    loss = output_tensor.sum()
    metrics = {"policy_loss": loss.detach()}
    loss *= scale
    return loss, metrics
```

## Fix
Keep a copy where the value is captured:
```python
    metrics = {"policy_loss": loss.detach().clone()}
```
`flux-alias-lint check --fix` inserts the `.clone()` (where the value is shown to be a tensor).
""",
        ),
    )
}

# The code a chain of alias operations reports: the most doubtful operation decides.
CODE_FOR_KIND: dict[AliasKind, str] = {
    AliasKind.SAME: "FAL002",
    AliasKind.DETACH: "FAL001",
    AliasKind.VIEW: "FAL003",
    AliasKind.MAY_RETURN_SELF: "FAL004",
}

# The code of a capture changed in place after it was made (`captures.py`).
CAPTURE_CODE = "FAL005"
