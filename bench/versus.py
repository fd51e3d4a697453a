"""Cold `check` CPU of two checkouts of flux-alias-lint on the same trees, runs alternated.

    python bench/versus.py /path/to/old-checkout /path/to/new-checkout ../trees/NeMo ... --runs 4

Each run is `python -m flux_alias_lint check TREE --no-cache --exit-zero --quiet` with the checkout
first on the path; its CPU is user + system of the process tree (workers included). The runs of
the two checkouts alternate so that load on the machine hits both alike; the table shows medians,
and each row the machine's load average (1 min, as `uptime` shows it) before and after its runs.
`--timeout 0` is passed on to `check`: its per-file limit counts wall time, so on a loaded machine
it would cut a slow file short in one run and not in the other.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path


def cpu_of_run(checkout: Path, tree: Path, timeout: float | None = None) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [sys.executable, "-m", "flux_alias_lint", "check", str(tree), "--no-cache", "--exit-zero", "--quiet"]
    command += [] if timeout is None else ["--timeout", str(timeout)]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, cwd=checkout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, help="check's --timeout (seconds per file, 0: no limit)")
    args = parser.parse_args()
    print(f"| tree | {args.old.name} (s) | {args.new.name} (s) | change | load |")
    print("| --- | ---: | ---: | ---: | --- |")
    for tree in args.trees:
        load = os.getloadavg()[0]
        old: list[float] = []
        new: list[float] = []
        for _ in range(args.runs):
            old.append(cpu_of_run(args.old, tree, args.timeout))
            new.append(cpu_of_run(args.new, tree, args.timeout))
        a, b = statistics.median(old), statistics.median(new)
        load_after = os.getloadavg()[0]
        print(
            f"| {tree.name} | {a:.2f} | {b:.2f} | {100 * (b - a) / a:+.1f}% | {load:.2f} to {load_after:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
