"""The findings table of public trees, as the README and docs show it: one row per tree, measured.

    python bench/trees.py /work/trees/Megatron-LM /work/trees/NeMo /work/trees/Primus

Each tree is checked whole (`check TREE --no-cache --unreached error --output-format json`, so the
warnings are counted too) by the flux-alias-lint on this path; the table says when, on what machine
and at which commit, so a figure copied from it carries its provenance.
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


def findings_of(tree: Path) -> list[dict[str, object]]:
    command = [sys.executable, "-m", "flux_alias_lint", "check", str(tree), "--no-cache", "--exit-zero"]
    command += ["--unreached", "error", "--output-format", "json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if run.returncode != 0:
        raise SystemExit(f"{tree}: flux-alias-lint exited {run.returncode}: {run.stderr.strip()[-500:]}")
    return json.loads(run.stdout)


def row(tree: Path) -> str:
    files = sum(1 for _ in tree.rglob("*.py"))
    counts = collections.Counter("FAL000" if f["code"] == "FAL000" else str(f["context"]) for f in findings_of(tree))
    cells = [counts[c] for c in ("megatron", "in-place-caller", "in-function", "unreached", "FAL000")]
    return f"| {tree.name} ({files:,} files) | " + " | ".join(str(c) for c in cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", type=Path)
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
    )
    when = datetime.date.today().isoformat()
    print(f"{when}, {os.cpu_count()}-core {platform.machine()}, flux-alias-lint at {commit.stdout.strip()}:\n")
    print(
        "| tree | megatron (errors) | in-place-caller (errors) | in-function (errors) | unreached (warnings) | FAL000 |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for tree in args.trees:
        print(row(tree), flush=True)


if __name__ == "__main__":
    main()
