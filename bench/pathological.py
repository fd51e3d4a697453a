"""The pathological shapes of issue 13: their analysis' work against its stated bound, and seconds.

    python bench/pathological.py            # every shape, 1x to 8x
    python bench/pathological.py --scale 1 2 --shape nested_loops
    python bench/pathological.py --shape nested_loops --size 8 12 16 19
    python bench/pathological.py --generated  # issue 45's generated modules: lines, functions, nesting, CPU per line

Each shape is one loss function that made the analysis exponential or quadratic before its work
was bounded (README, Reliability): alternating if/else blocks (2**n alias chains), nested `for`
loops (2**depth passes over the innermost body), a long flat function of dict stores, one huge
dict literal and one followed by as many stores (quadratic container updates: each store copied
every entry); and a module of many small loss functions (each one an unreached finding: quadratic
when each finding walked the whole module). The bound is on the
analysis' own work counters (`analysis.Work`), which do not depend on the machine: statements
analysed are linear in the source lines times (enclosing loops + 1) past the per-statement budget,
and each evaluated value carries a bounded number of aliases. The seconds (CPU time of one process,
the whole check) are printed beside them, with CPU per 1,000 lines.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import libcst as cst

from flux_alias_lint.analysis import ModuleAnalysis, Work
from flux_alias_lint.analysis import statements as _statements
from flux_alias_lint.analysis.statements import (
    _ALIASES_PER_STATEMENT,
    _LOOP_SLACK,
    _MIN_WORK,
    _WORK_PER_STATEMENT,
    _functions_in,
)
from flux_alias_lint.lint import check_source

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


def dict_then_stores(n: int) -> tuple[str, int]:
    """A dict literal of n entries, then n statements `r["s<i>"] = loss.detach()` adding to it."""
    lines = [*_HEAD, "    r = {", *(f'        "k{i}": loss.detach(),' for i in range(n)), "    }"]
    lines += [f'    r["s{i}"] = loss.detach()' for i in range(n)]
    return _module(lines, "    return loss, r"), 0


def loss_functions(n: int) -> tuple[str, int]:
    """n module-level three-line loss functions `lossN(out)`, each reporting `l.detach()`."""
    lines = ["import torch", ""]
    for i in range(n):
        lines += ["", f"def loss{i}(out):", "    l = out.sum()", '    return l, {"loss": l.detach()}']
    return "\n".join([*lines, ""]), 0


def _module(lines: list[str], last: str) -> str:
    return "\n".join([*lines, last, ""])


# shape -> (generator, its size at 1x): the sizes issue 13 reported as slow.
SHAPES: dict[str, tuple[Callable[[int], tuple[str, int]], int]] = {
    "branches": (branches, 20),
    "nested_loops": (nested_loops, 10),
    "long_flat": (long_flat, 2_500),
    "huge_dict": (huge_dict, 2_500),
    "dict_then_stores": (dict_then_stores, 2_500),
    "loss_functions": (loss_functions, 400),
}


# The generated modules of issue 45 (`--generated`): (shape, size), its cost per line in one table.
GENERATED: list[tuple[str, int]] = [("loss_functions", 400), ("loss_functions", 1_600), ("long_flat", 20_000)]
GENERATED += [("huge_dict", 20_000), ("dict_then_stores", 10_000), ("nested_loops", 8), ("nested_loops", 16)]


def bound(source: str, depth: int) -> Work:
    """The stated worst case of the analysis' work for a source of this many lines and loop depth
    (`analysis.statements.bound`)."""
    statements = _statements.bound(source.count("\n"), depth)
    return Work(statements=statements, aliases=_ALIASES_PER_STATEMENT * statements)


def within(work: Work, limit: Work) -> bool:
    return work.statements <= limit.statements and work.aliases <= limit.aliases


def work_of(source: str) -> Work:
    """The analysis' work on a source, the whole module analysed (no triage)."""
    analysis = ModuleAnalysis(cst.parse_module(source), None)
    analysis.run()
    return analysis.work


def measure(shape: str, size: int) -> tuple[Work, Work, float, int, int]:
    """(the analysis' work, its bound, CPU seconds to check, findings, lines) for one shape at one size."""
    source, depth = SHAPES[shape][0](size)
    started = time.process_time()
    findings = check_source(source)
    seconds = time.process_time() - started
    return work_of(source), bound(source, depth), seconds, len(findings), source.count("\n")


def generated_table(rows: list[tuple[str, int]]) -> None:
    """Each generated module's lines, functions and loop nesting, the analysis' work and the CPU
    seconds of a whole check (`check_source`: parse, triage, analysis, escapes), per line too."""
    print(
        f"{'module':24} {'lines':>7} {'functions':>9} {'nesting':>7} {'statements':>10} {'copied':>8} "
        f"{'cpu s':>7} {'cpu ms/line':>11}"
    )
    for shape, size in rows:
        source, depth = SHAPES[shape][0](size)
        work, _, seconds, _, lines = measure(shape, size)
        functions = len(_functions_in(cst.parse_module(source))[0])
        print(
            f"{f'{shape} {size}':24} {lines:>7} {functions:>9} {depth:>7} {work.statements:>10} {work.copied:>8} "
            f"{seconds:>7.2f} {1000 * seconds / lines:>11.3f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--size", type=int, nargs="+", help="these sizes instead of the scales")
    parser.add_argument("--generated", action="store_true", help="the table of issue 45's generated modules")
    parser.add_argument("--shape", choices=sorted(SHAPES), nargs="+", default=list(SHAPES))
    args = parser.parse_args()
    if args.generated:
        check_source("x = 1\n")  # load libcst outside the timings
        generated_table(GENERATED)
        return
    print(
        f"bound: statements <= {_LOOP_SLACK} x ({_WORK_PER_STATEMENT} + loop depth + 1) x lines + {_MIN_WORK}, "
        f"aliases <= {_ALIASES_PER_STATEMENT} x statements"
    )
    header = f"{'shape':14} {'size':>7} {'lines':>7} {'statements':>16} {'aliases':>20} {'cpu s':>7} {'s/1k lines':>10}"
    print(f"{header} {'findings':>8}")
    check_source("x = 1\n")  # load libcst outside the timings
    for shape in args.shape:
        for size in args.size or [SHAPES[shape][1] * scale for scale in args.scale]:
            work, limit, seconds, findings, lines = measure(shape, size)
            verdict = "" if within(work, limit) else "  OVER THE BOUND"
            statements = f"{work.statements}/{limit.statements}"
            aliases = f"{work.aliases}/{limit.aliases}"
            print(
                f"{shape:14} {size:>7} {lines:>7} {statements:>16} {aliases:>20} {seconds:>7.2f} "
                f"{1000 * seconds / lines:>10.3f} {findings:>8}{verdict}",
                flush=True,
            )


if __name__ == "__main__":
    main()
