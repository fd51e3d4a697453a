"""CPU of a cold `check` (user + sys of the whole process tree), two checkouts side by side.

    python bench/cpu.py --before /tmp/old-checkout --after . TREE... [--runs 5] [--jobs N]

Each run is `python -m flux_alias_lint check TREE --no-cache --exit-zero --quiet` with the
checkout first on `PYTHONPATH`; the two alternate, so that load on a shared machine hits both
alike. Prints per tree the median CPU and wall of each, the saving, and the load average
(`os.getloadavg`) before the first and after the last run. Each checkout's runs must report the same
findings (the two checkouts may differ). `--timeout` is passed on to `check`: its per-file limit counts
wall time, so on a loaded machine it would cut a slow file short in one run and not in the other.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run(checkout: Path, tree: Path, jobs: int | None, timeout: float | None) -> tuple[float, float, str]:
    """(CPU seconds of the process and its children, wall seconds, the report)."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    command = [sys.executable, "-m", "flux_alias_lint", "check", str(tree), "--no-cache", "--exit-zero", "--quiet"]
    if jobs:
        command += ["--jobs", str(jobs)]
    if timeout is not None:
        command += ["--timeout", str(timeout)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the project")
    parser.add_argument("--after", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, help="passed to check (default: its own)")
    parser.add_argument("--timeout", type=float, help="passed to check (seconds per file, 0: no limit)")
    args = parser.parse_args()
    print("| tree | before CPU | after CPU | saved | before wall | after wall | load before -> after |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for tree in args.trees:
        load = os.getloadavg()[0]
        cpu: dict[str, list[float]] = {"before": [], "after": []}
        wall: dict[str, list[float]] = {"before": [], "after": []}
        reports: dict[str, set[str]] = {"before": set(), "after": set()}
        for _ in range(args.runs):
            for name in ("before", "after"):
                spent, elapsed, out = run(getattr(args, name), tree, args.jobs, args.timeout)
                cpu[name].append(spent)
                wall[name].append(elapsed)
                reports[name].add(out)
        if any(len(outs) != 1 for outs in reports.values()):
            raise SystemExit(f"{tree}: one checkout's findings differ between its runs")
        before, after = statistics.median(cpu["before"]), statistics.median(cpu["after"])
        print(
            f"| {tree.name} | {before:.2f} s | {after:.2f} s | {before - after:.2f} s ({(before - after) / before:.0%}) "
            f"| {statistics.median(wall['before']):.2f} s | {statistics.median(wall['after']):.2f} s "
            f"| {load:.1f} -> {os.getloadavg()[0]:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
