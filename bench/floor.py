"""The least a cold run that reports every syntax error must do: read and `ast.parse` every file.

    python bench/floor.py /tmp/megatron-lm /tmp/primus [--runs 3] [--jobs 2]

Each tree's files are parsed by `--jobs` forked processes, largest first, as `check` spreads them;
the median wall time of `--runs` runs is printed, start-up and listing included. Compare it with
`bench/bench.py`'s ruff column: what is left is all the linter may spend on everything else.
"""

from __future__ import annotations

import argparse
import ast
import multiprocessing
import os
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


def _once(tree: Path, jobs: int) -> float:
    started = time.perf_counter()
    files = sorted(python_files(str(tree)), key=lambda p: -os.path.getsize(p))
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        for _ in pool.imap_unordered(_parse, files, 8):
            pass
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    for tree in args.trees:
        times = [_once(tree, args.jobs) for _ in range(args.runs)]
        print(f"{tree.name}: read + ast.parse of every file, {args.jobs} processes: {statistics.median(times):.2f} s")


if __name__ == "__main__":
    main()
