"""Measure what ``install()`` and ``guard_forward_step`` add per microbatch in a real run of Megatron's schedule.

python bench/schedule_overhead.py

One CPU rank, the harness's stand-in model, the seed's (fixed) loss function, training steps of
MICROBATCHES microbatches through ``forward_backward_no_pipelining``. The stand-in model is tiny,
so a microbatch costs far less than in any real job: the added microseconds are the figure to read.
"""

from __future__ import annotations

import functools
import time
import timeit

import torch

from flux_alias_lint.harness import (
    check_loss_outputs,
    guard_forward_step,
    install,
    run_schedule,
    single_rank_megatron,
    uninstall,
)
from flux_alias_lint.harness.cpu import cuda_is_the_cpu
from flux_alias_lint.harness.schedule import DEFAULT_BATCH, stand_in_model

MICROBATCHES = 32
STEPS = 20
REPEATS = 9


def loss_func(sample_count, output_tensor):
    loss_sum = output_tensor.sum()
    return loss_sum, {"loss": (loss_sum.detach().clone(), sample_count.detach())}


def forward_step(data_iterator, model):
    return model(next(data_iterator)), functools.partial(loss_func, torch.tensor(2))


def step_us(step, model) -> float:
    start = time.perf_counter()
    for _ in range(STEPS):
        run_schedule(step, model, batch=DEFAULT_BATCH, num_microbatches=MICROBATCHES)
    return (time.perf_counter() - start) / (STEPS * MICROBATCHES) * 1e6


def main() -> None:
    model = stand_in_model()
    guarded_step = guard_forward_step(forward_step)
    best = {"unguarded": float("inf"), "install()": float("inf"), "guard_forward_step()": float("inf")}
    with single_rank_megatron():
        step_us(forward_step, model)  # warm up
        # Interleaved, best of REPEATS each: the cost of the code, not of a busy machine.
        for _ in range(REPEATS):
            best["unguarded"] = min(best["unguarded"], step_us(forward_step, model))
            install()
            try:
                best["install()"] = min(best["install()"], step_us(forward_step, model))
            finally:
                uninstall()
            best["guard_forward_step()"] = min(best["guard_forward_step()"], step_us(guarded_step, model))
    print(
        f"forward_backward_no_pipelining, {MICROBATCHES} microbatches per step, best of {REPEATS} x {STEPS} steps "
        f"(torch {torch.__version__}, {torch.get_num_threads()} threads):"
    )
    plain = best["unguarded"]
    for name, us in best.items():
        print(f"  {us:8.1f} µs per microbatch  {name:22} (+{us - plain:.1f} µs)")
    # On a CPU the check runs inside cpu.py's CUDA redirection, which intercepts each of its tensor calls;
    # on a GPU nothing is redirected and the check costs what it costs outside.
    outputs = loss_func(torch.tensor(2), torch.rand(2, 4, requires_grad=True) * 1.0)
    outside = check_us(outputs)
    with cuda_is_the_cpu():
        inside = check_us(outputs)
    print(f"the check alone: {outside:.1f} µs, {inside:.1f} µs inside the CPU's CUDA redirection")


def check_us(outputs, number: int = 5_000) -> float:
    return min(timeit.repeat(lambda: check_loss_outputs(outputs), number=number, repeat=REPEATS)) / number * 1e6


if __name__ == "__main__":
    main()
