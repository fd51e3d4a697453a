"""The pathological shapes of issue 13, timed at 1x, 2x, 4x and 8x against the analysis's stated bound.

    python bench/pathological.py            # every shape, 1x to 8x
    python bench/pathological.py --scale 1 2 --shape nested_loops

Each shape is one loss function that made the analysis exponential or quadratic before its work
was bounded (README, Reliability): alternating if/else blocks (2**n alias chains), nested `for`
loops (2**depth passes over the innermost body), a long flat function of dict stores and one
huge dict literal (quadratic container updates). The bound is linear in the work: source lines
times (enclosing loops + 1), at BOUND_PER_UNIT seconds each, plus BOUND_BASE for starting up.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from flux_alias_lint.lint import check_source

BOUND_BASE = 1.0  # seconds
BOUND_PER_UNIT = 0.002  # seconds per line x (loop depth + 1)

_HEAD = ["import torch", "", "", "def loss_func(output_tensor, flags, batches):", "    loss = output_tensor.sum()"]


def branches(n: int) -> tuple[str, int]:
    """n if/else blocks alternating `r.detach()` and `r.view(-1)`."""
    lines = [*_HEAD, "    r = loss"]
    for i in range(n):
        first, second = ("r.detach()", "r.view(-1)")[:: 1 if i % 2 == 0 else -1]
        lines += [f"    if flags[{i}]:", f"        r = {first}", "    else:", f"        r = {second}"]
    return _module(lines, '    return loss, {"r": r}'), 0


def nested_loops(n: int) -> tuple[str, int]:
    """n `for` loops, each rebinding `r` through a detach, nested 20 deep at most (CPython compiles
    no deeper), nest after nest."""
    lines = [*_HEAD, "    r = loss"]
    for first in range(0, n, 20):
        for i in range(min(20, n - first)):
            lines += ["    " * (i + 1) + f"for b{first + i} in batches:", "    " * (i + 2) + "r = r.detach()"]
    return _module(lines, '    return loss, {"r": r}'), min(n, 20)


def long_flat(n: int) -> tuple[str, int]:
    """n statements `r["k<i>"] = loss.detach()`."""
    lines = [*_HEAD, "    r = {}", *(f'    r["k{i}"] = loss.detach()' for i in range(n))]
    return _module(lines, "    return loss, r"), 0


def huge_dict(n: int) -> tuple[str, int]:
    """One dict literal of n entries `"k<i>": loss.detach()`."""
    lines = [*_HEAD, "    r = {", *(f'        "k{i}": loss.detach(),' for i in range(n)), "    }"]
    return _module(lines, "    return loss, r"), 0


def _module(lines: list[str], last: str) -> str:
    return "\n".join([*lines, last, ""])


# shape -> (generator, its size at 1x): the sizes issue 13 reported as slow.
SHAPES: dict[str, tuple[Callable[[int], tuple[str, int]], int]] = {
    "branches": (branches, 20),
    "nested_loops": (nested_loops, 10),
    "long_flat": (long_flat, 2_500),
    "huge_dict": (huge_dict, 2_500),
}


def bound(source: str, depth: int) -> float:
    """The stated worst case, in seconds, for a source of this many lines and loop depth."""
    return BOUND_BASE + BOUND_PER_UNIT * source.count("\n") * (depth + 1)


def measure(shape: str, size: int) -> tuple[float, float, int]:
    """(seconds to check, the bound, findings) for one shape at one size."""
    source, depth = SHAPES[shape][0](size)
    started = time.perf_counter()
    findings = check_source(source)
    return time.perf_counter() - started, bound(source, depth), len(findings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--shape", choices=sorted(SHAPES), nargs="+", default=list(SHAPES))
    args = parser.parse_args()
    print(f"bound: {BOUND_BASE:g} s + {BOUND_PER_UNIT * 1000:g} ms x lines x (loop depth + 1)")
    print(f"{'shape':14} {'scale':>5} {'size':>7} {'seconds':>8} {'bound':>8} {'findings':>8}")
    check_source("x = 1\n")  # load libcst outside the timings
    for shape in args.shape:
        for scale in args.scale:
            size = SHAPES[shape][1] * scale
            seconds, limit, findings = measure(shape, size)
            verdict = "" if seconds <= limit else "  OVER THE BOUND"
            print(f"{shape:14} {scale:>4}x {size:>7} {seconds:>8.2f} {limit:>8.2f} {findings:>8}{verdict}", flush=True)


if __name__ == "__main__":
    main()
