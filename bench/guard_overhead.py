"""Measure what ``@guard_loss_func`` adds to each loss-function call, in microseconds.

python bench/guard_overhead.py
"""

from __future__ import annotations

import timeit

import torch

from flux_alias_lint.harness import check_loss_outputs, guard_loss_func

N = 20_000


def per_call_us(stmt, number: int = N) -> float:
    # The best of several runs: the cost of the check itself, not of a busy machine.
    return min(timeit.repeat(stmt, number=number, repeat=7)) / number * 1e6


def main() -> None:
    loss = (torch.rand(8, 4, requires_grad=True) * 1.0).sum()
    num_tokens = torch.tensor(32)
    reports = {
        "seed report {'loss': (sum.clone(), count)}": (
            loss,
            {"loss": (loss.detach().clone(), num_tokens.detach())},
        ),
        "3-tuple {'lm loss': cat([loss, tokens])}": (
            loss,
            num_tokens,
            {"lm loss": torch.cat([loss.detach().view(1), num_tokens.view(1).float()])},
        ),
        "8 metrics, nested": (
            loss,
            {f"metric {i}": (loss.detach().clone(), {"n": num_tokens}) for i in range(8)},
        ),
    }
    print(f"check_loss_outputs per call (best of 7 x {N} calls, torch {torch.__version__}):")
    for name, outputs in reports.items():
        print(f"  {per_call_us(lambda outputs=outputs: check_loss_outputs(outputs)):6.2f} µs  {name}")
    reference = per_call_us(lambda: loss.detach().clone())
    print(f"  {reference:6.2f} µs  (for scale: one loss.detach().clone())")

    def loss_func(output_tensor):
        loss_sum = output_tensor.sum()
        return loss_sum, {"loss": (loss_sum.detach().clone(), num_tokens.detach())}

    output = torch.rand(8, 4)
    plain = per_call_us(lambda: loss_func(output))
    guarded_loss_func = guard_loss_func(loss_func)
    guarded = per_call_us(lambda: guarded_loss_func(output))
    print(
        f"@guard_loss_func on the seed's loss function: {plain:.2f} -> {guarded:.2f} µs per call "
        f"(+{guarded - plain:.2f} µs)"
    )


if __name__ == "__main__":
    main()
