"""FAL005: a value kept for later (a capture, `analysis/captures.py`) that an in-place write then changes."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..index.reach import IN_FUNCTION, UNREACHED, Reach
from ._base import AnalysisRule, consequence, shortened

if TYPE_CHECKING:
    from ..values import RawFinding


@dataclasses.dataclass(frozen=True, kw_only=True)
class CapturedAliasRule(AnalysisRule):
    def verdict(self, found: RawFinding, reach: Reach, unreached: str) -> tuple[Reach, str | None]:
        """A write shown in the function itself is a bug whoever calls it (context `in-function`);
        the caller's rescale of the returned loss follows its context, as for FAL001."""
        if found.write is not None and reach.context == UNREACHED:
            reach = Reach(IN_FUNCTION, ())
        return super().verdict(found, reach, unreached)

    def explain(
        self, found: RawFinding, expression: str, reach: Reach, write: tuple[str, int] | None
    ) -> tuple[str, str]:
        if write is not None:
            changed = f"{found.report_path} = `{expression}` is changed by the in-place `{shortened(write[0])}` at line {write[1]}"
            if reach.release:  # a host's method handed the value (`accelerator.backward(loss)`): its release does it
                return changed, consequence(reach)
            return changed, "the kept value is then the one after the write, not the one it was kept to show"
        loss = f"the returned loss `{found.backprop}`"
        if found.entries:  # an entry of a returned dict, which a host takes as its loss (`Host.entry`)
            loss = f"`{found.backprop}`, returned under {', '.join(repr(k) for k in found.entries)}"
        what = f"{found.report_path} = `{expression}` shares storage with {loss}"
        return what, consequence(reach)


RULE = CapturedAliasRule(
    code="FAL005",
    name="captured-alias-written-in-place",
    summary="a value kept for later shares storage with a tensor that is then changed in place",
    flags=(
        "a `.detach()`/conversion kept in `self.x`, a container that outlives the function or the report, then "
        "changed by an in-place write (`loss *= k` later in the function, or the caller's rescale of the returned loss)"
    ),
    fix="`.clone()` at the capture",
    doc="""\
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
- a third-party host given the bare returned loss, in the releases that rescale it in place (the
  project's pin, else the installed release, decides; `docs/context.md` "Hosts"):
  `Trainer.training_step` (transformers 4.46.0–4.46.1) for a `Trainer` subclass's `compute_loss`,
  `Trainer.compute_loss` (×world size, 4.54 on) for a `compute_loss_func=`, `Accelerator.backward`
  (accelerate 0.11–0.12) for `loss = f(...)` (or `loss, metrics = f(...)`) then `accelerator.backward(loss)`, and for a value kept in the
  loop before `accelerator.backward(loss)` (not where no `gradient_accumulation_steps` is given: it is 1), Composer 0.2–0.8.2
  for a `ComposerModel`'s `loss`, and Composer 0.10 on for the `'total'` entry of the dict it returns
  (`return {"total": total, "ce": ce}`: the trainer backpropagates `total` itself). The message names the
  host, the release and where it is pinned.
- a caller in the project that unpacks the returned loss, or gets it whole, and rescales it in
  place: the project's own accumulation loop (`loss = model.compute_loss(batch)`, then
  `loss /= accum`), where `compute_loss` kept `self.last_loss = loss.detach()`, or handed it to a
  helper or to a method of an object of the project that keeps it (`self.meter.update(v)`).

Copies (`.clone()`, `.item()`, `float()`, arithmetic, `torch.cat`) and rebinding (`loss = loss * w`)
are not flagged, nor is a write that changes no value (`mul_(1)`, `div_(1)`, `*= 1`, `add_(0)`,
`-= 0`), nor a `.data` written in the function itself (a buffer shared on purpose; `.data` of the
returned loss a caller rescales is flagged as `.detach()` is), nor a capture made after the write,
nor an entry updated through the container holding it (`metrics[k] += v`), nor a write through the
kept value itself or through an entry of the returned report (a transform cropping the
`target["boxes"]` it returns in place is updating its report). A report entry is changed by a write to
the returned loss or an alias of it, and, kept with `.detach()` or a conversion, by a write to any
tensor it shares storage with in a loss function (`metrics = {"ce": ce.detach()}; ce *= w; return
ce + kl, metrics` logs the weighted value under "ce"): one returning a tensor and a report of its own
making, or one a host calls as its loss function, which alone makes a write to what the function was
handed (its input, as a data transform writes) a finding. A write in the function itself is an error
whoever calls it (context `in-function`); the others follow their context, as for FAL001. The tensor itself kept in a list or on an
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
)
