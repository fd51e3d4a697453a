"""One edited file checked alone, for files of every kind: what a pre-commit run costs after an edit.

    python bench/edits.py /tmp/megatron-lm /tmp/nemo /tmp/primus [--runs 3] [--spread 5]

In a copy of each tree (its own git root) whose results and project index a whole-tree run cached,
each picked file gets a module-level line appended (`EDITED_<n> = <n>`: code, not a comment) and is
checked alone, `--runs` times; the median wall time of each file is printed, then their median and
largest. The files picked: the `--spread` largest, `--spread` of those the index derives evidence
from (its gated files, spread over the sorted list) and `--spread` spread over all the files (as
`bench/bench.py --changed` picks them). Each timed run follows its edit at once, as a hook run after
a save does (the file is too new for its stamp to be trusted); an untimed run 2 s later settles it,
so that one file's edit does not show in the next file's time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flux_alias_lint.cache import _RACY_NS  # noqa: E402
from flux_alias_lint.index.files import python_files  # noqa: E402


def _copy(tree: Path, scratch: str) -> Path:
    """A copy of `tree` in `scratch`, its own git root, its files older than the cache's racy window."""
    copy = Path(scratch) / "tree"
    shutil.copytree(tree, copy, ignore=shutil.ignore_patterns(".git", ".flux-alias-lint-cache"))
    (copy / ".git").mkdir()
    past = time.time() - 3600
    for path in copy.rglob("*.py"):
        os.utime(path, (past, past))
    return copy


def _picked(copy: Path, spread: int) -> list[tuple[str, str]]:
    """(kind, path relative to the copy) of the files to edit."""
    files = sorted(os.path.relpath(p, copy) for p in python_files(str(copy.resolve())) if os.path.getsize(p))
    index = (copy / ".flux-alias-lint-cache" / "index.json").read_bytes().partition(b"\n")[2]
    gated = sorted(os.path.relpath(p, copy.resolve()) for p in json.loads(index)["gated"])
    largest = sorted(files, key=lambda p: -os.path.getsize(copy / p))[:spread]

    def spread_over(names: list[str]) -> list[str]:
        step = max(1, len(names) // spread)
        return names[step // 2 :: step][:spread]

    picked = [("largest", p) for p in largest] + [("gated", p) for p in spread_over(gated)]
    picked += [("spread", p) for p in spread_over(files)]
    seen: set[str] = set()
    return [(kind, p) for kind, p in picked if not (p in seen or seen.add(p))]


def measure(tree: Path, runs: int, spread: int) -> list[tuple[str, str, int, float]]:
    """(kind, file, size in bytes, median wall seconds) for each picked file of `tree`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = [sys.executable, "-m", "flux_alias_lint", "check", "--exit-zero", "--quiet"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="flux-bench-edits-") as scratch:
        copy = _copy(tree, scratch)
        quiet = {"cwd": copy, "env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        subprocess.run([*run, "."], check=False, **quiet)
        for kind, name in _picked(copy, spread):
            walls = []
            for edit in range(runs):
                with open(copy / name, "a") as handle:
                    handle.write(f"EDITED_{edit} = {edit}\n")
                started = time.perf_counter()
                subprocess.run([*run, name], check=False, **quiet)
                walls.append(time.perf_counter() - started)
                time.sleep(_RACY_NS / 1e9 + 0.1)
                subprocess.run([*run, name], check=False, **quiet)  # settles the edited file's stamp
            rows.append((kind, name, os.path.getsize(copy / name), statistics.median(walls)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spread", type=int, default=5, help="files of each kind")
    args = parser.parse_args()
    for tree in args.trees:
        rows = measure(tree, args.runs, args.spread)
        print(f"{tree.name}: one edited file checked alone, median of {args.runs} edits each")
        for kind, name, size, wall in rows:
            print(f"  {wall:6.3f} s  {size // 1024:5d} kB  {kind:8s} {name}")
        walls = [wall for *_, wall in rows]
        under = sum(wall <= 0.2 for wall in walls)
        print(
            f"  {len(walls)} files: median {statistics.median(walls):.3f} s, largest {max(walls):.3f} s, "
            f"{under} of {len(walls)} at most 0.2 s\n"
        )


if __name__ == "__main__":
    main()
