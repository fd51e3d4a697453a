"""The least a cold run that reports every syntax error must do: read and `ast.parse` every file.

    python bench/floor.py /tmp/megatron-lm /tmp/primus [--runs 3] [--jobs 2]

Each tree's files are parsed by `--jobs` forked processes, largest first, as `check` spreads them;
the median wall time and CPU (user + sys of this process and its workers) of `--runs` runs are
printed, start-up and listing included. Compare the wall with `bench/bench.py`'s ruff column and
the CPU with `bench/cpu.py`'s: what is left is all the linter may spend on everything else.
"""

from __future__ import annotations

import argparse
import ast
import multiprocessing
import os
import resource
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flux_alias_lint.index.files import python_files  # noqa: E402


def _parse(path: str) -> None:
    warnings.simplefilter("ignore")  # SyntaxWarnings
    try:
        with open(path, "rb") as handle:
            ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        pass


def _cpu() -> float:
    """User + sys seconds of this process and of its children that have ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _once(tree: Path, jobs: int) -> tuple[float, float]:
    """(wall, CPU) of one read and parse of every file; the pool's workers have ended when it returns."""
    started, cpu = time.perf_counter(), _cpu()
    files = sorted(python_files(str(tree)), key=lambda p: -os.path.getsize(p))
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        for _ in pool.imap_unordered(_parse, files, 8):
            pass
        pool.close()
        pool.join()
    return time.perf_counter() - started, _cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    for tree in args.trees:
        walls, cpus = zip(*(_once(tree, args.jobs) for _ in range(args.runs)), strict=True)
        print(
            f"{tree.name}: read + ast.parse of every file, {args.jobs} processes: "
            f"{statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU"
        )


if __name__ == "__main__":
    main()
