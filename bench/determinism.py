"""The same code, the same bytes: each tree's JSON report as it is, then beside CPU-bound processes.

    python bench/determinism.py TREE... [--burners 4] [--runs 2]

Each run is `python -m flux_alias_lint check TREE --no-cache --exit-zero --output-format json` with the
checkout running this script first on `PYTHONPATH` and check's own defaults otherwise (its worker count, no
wall-clock limit). For each tree the runs alternate between the machine as it is and the machine with
`--burners` processes spinning beside the check; every report must be byte-identical. Prints per tree the
report's size and SHA-256, the findings, the wall of each kind of run and the load average
(`os.getloadavg`) seen during each; exits 1 when any two reports of a tree differ.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def burning(count: int) -> Iterator[None]:
    """`count` processes that only spend CPU, for as long as the block runs."""
    burners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(count)]
    for burner in burners:
        burner.start()
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.join()


def report(tree: Path) -> tuple[bytes, float, float]:
    """(the JSON report, wall seconds, the one-minute load average at its end)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "flux_alias_lint", "check", str(tree), "--no-cache", "--exit-zero"]
    started = time.perf_counter()
    out = subprocess.run([*command, "--output-format", "json"], env=env, check=True, capture_output=True).stdout
    return out, time.perf_counter() - started, os.getloadavg()[0]


def _said(runs: list[tuple[bytes, float, float]]) -> str:
    walls = ", ".join(f"{wall:.1f} s" for _, wall, _ in runs)
    loads = ", ".join(f"{load:.1f}" for _, _, load in runs)
    return f"{walls}; load {loads}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--burners", type=int, default=4, help="CPU-bound processes beside the loaded runs")
    parser.add_argument("--runs", type=int, default=2, help="runs of each kind per tree")
    args = parser.parse_args()
    print(
        f"| tree | bytes | sha256 | findings | as is: wall, load | beside {args.burners} burners: wall, load | same |"
    )
    print("|---|---:|---|---:|---|---|---|")
    differ = False
    for tree in args.trees:
        runs: dict[str, list[tuple[bytes, float, float]]] = {"as is": [], "burning": []}
        for _ in range(args.runs):
            runs["as is"].append(report(tree))
            with burning(args.burners):
                runs["burning"].append(report(tree))
        outs = {out for kind in runs.values() for out, _, _ in kind}
        differ |= len(outs) > 1
        first = runs["as is"][0][0]

        print(
            f"| {tree.name} | {len(first):,} | {hashlib.sha256(first).hexdigest()[:12]} | {len(json.loads(first))} "
            f"| {_said(runs['as is'])} | {_said(runs['burning'])} | {'yes' if len(outs) == 1 else f'NO: {len(outs)} reports'} |"
        )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
