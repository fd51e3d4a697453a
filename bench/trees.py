"""The findings table of public trees, as the README and docs show it: one row per tree, measured.

    python bench/trees.py /work/trees/Megatron-LM /work/trees/NeMo /work/trees/Primus
    python bench/trees.py --record head.json /work/trees/Megatron-LM ...   # a bench/identity.py record

Each tree is checked whole (`check TREE --no-cache --unreached error --output-format json`, so the
warnings are counted too) by the flux-alias-lint on this path; the table says when, on what machine
and at which commit, so a figure copied from it carries its provenance. `--record` reads the same
findings from a `bench/identity.py` record of the trees made at this commit instead of checking them
again; `--timeout` is passed on to `check` (its per-file limit counts wall time). The third-party
hosts' contexts (`facts/hosts.py`) share one column, and `escapes` has its own: a context no column
names stops the script.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flux_alias_lint.facts.hosts import HOSTS, MEGATRON  # noqa: E402
from flux_alias_lint.index import reach  # noqa: E402

# The table's columns: the contexts each counts (FAL000 by its code).
COLUMNS: dict[str, tuple[str, ...]] = {
    "megatron (errors)": (reach.MEGATRON,),
    "other hosts (errors)": tuple(host.name for host in HOSTS if host is not MEGATRON),
    "in-place-caller (errors)": (reach.IN_PLACE_CALLER,),
    "in-function (errors)": (reach.IN_FUNCTION,),
    "unreached (warnings)": (reach.UNREACHED,),
    "escapes (warnings)": (reach.ESCAPES,),
    "FAL000": ("FAL000",),
}


def findings_of(tree: Path, timeout: float | None = None) -> list[dict[str, object]]:
    command = [sys.executable, "-m", "flux_alias_lint", "check", str(tree), "--no-cache", "--exit-zero"]
    command += ["--unreached", "error", "--output-format", "json"]
    command += [] if timeout is None else ["--timeout", str(timeout)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if run.returncode != 0:
        raise SystemExit(f"{tree}: flux-alias-lint exited {run.returncode}: {run.stderr.strip()[-500:]}")
    return json.loads(run.stdout)


def row(tree: Path, findings: list[dict[str, object]]) -> str:
    files = sum(1 for _ in tree.rglob("*.py"))
    counts = collections.Counter("FAL000" if f["code"] == "FAL000" else str(f["context"]) for f in findings)
    unknown = set(counts) - {context for contexts in COLUMNS.values() for context in contexts}
    if unknown:
        raise SystemExit(f"{tree}: no column for the context {', '.join(sorted(unknown))}")
    cells = [sum(counts[c] for c in contexts) for contexts in COLUMNS.values()]
    return f"| {tree.name} ({files:,} files) | " + " | ".join(str(c) for c in cells) + " |"


def recorded(record: Path, tree: Path) -> list[dict[str, object]]:
    trees = json.loads(record.read_text())
    if str(tree) not in trees:
        raise SystemExit(f"{record}: no record of {tree}")
    return trees[str(tree)]["findings"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--record", type=Path, help="a bench/identity.py record of the trees at this commit")
    parser.add_argument("--timeout", type=float, help="check's --timeout (seconds per file, 0: no limit)")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
    )
    when = datetime.date.today().isoformat()
    print(f"{when}, {os.cpu_count()}-core {platform.machine()}, flux-alias-lint at {commit.stdout.strip()}:\n")
    print("| tree | " + " | ".join(COLUMNS) + " |")
    print("| --- |" + " ---: |" * len(COLUMNS))
    for tree in args.trees:
        findings = recorded(args.record, tree) if args.record else findings_of(tree, args.timeout)
        print(row(tree, findings), flush=True)


if __name__ == "__main__":
    main()
