"""`verify` on whole public trees, as published: one row per tree, its findings and how many were confirmed.

`verify` runs on each tree's directory (the tree is only read; its root is the project), and the table says,
per tree, how many findings it judged, how many it confirmed, and each unconfirmed one with its reason. The
header line carries the date, this build's commit, the release of megatron-core and the command.

    python bench/verify_trees.py [--trees /work/trees] [TREE ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = ("Primus", "Megatron-LM", "NeMo", "Megatron-Bridge", "ROLL")


def _commit(tree: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", default="/work/trees", type=Path)
    parser.add_argument("--json", type=Path, help="also write every verdict here, per tree")
    parser.add_argument("names", nargs="*", default=TREES, metavar="TREE")
    args = parser.parse_args()
    from importlib.metadata import version

    print(
        f"{datetime.date.today().isoformat()}, flux-alias-lint at {_commit(ROOT)}, megatron-core "
        f"{version('megatron-core')}, 2 microbatches, command: python bench/verify_trees.py {' '.join(args.names)}"
    )
    print()
    print("| tree | commit | findings | confirmed | unconfirmed, and why |")
    print("| --- | --- | ---: | ---: | --- |")
    total = confirmed_total = 0
    everything = {}
    for name in args.names:
        tree = args.trees / name
        done = subprocess.run(
            # -P: the tree's own packages (Megatron-LM's megatron/) must not shadow the installed megatron-core
            [sys.executable, "-P", "-m", "flux_alias_lint", "verify", "--format", "json", "."],
            capture_output=True,
            text=True,
            check=False,  # 1: some finding unconfirmed, which the table shows
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            cwd=tree,
        )
        if done.returncode not in (0, 1):
            raise SystemExit(f"{name}: verify exited {done.returncode}: {done.stderr.strip()}")
        verdicts = json.loads(done.stdout)
        everything[name] = verdicts
        confirmed = sum(v["confirmed"] for v in verdicts)
        why = "; ".join(
            f"`{v['path']}:{v['line']}` {v['code']}: " + v["detail"].replace("|", "\\|")
            for v in verdicts
            if not v["confirmed"]
        )
        print(f"| {name} | `{_commit(tree)}` | {len(verdicts)} | {confirmed} | {why} |", flush=True)
        total += len(verdicts)
        confirmed_total += confirmed
    print(f"| **all** | | **{total}** | **{confirmed_total}** | |")
    if args.json:
        args.json.write_text(json.dumps(everything, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
