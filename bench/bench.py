"""Cold and warm `flux-alias-lint check` against `ruff check --select ALL --no-cache`, side by side.

    python bench/bench.py                      # a synthetic training repository (tests/synthetic_corpus.py)
    python bench/bench.py --tree /tmp/megatron-lm --tree /tmp/primus --tree /tmp/nemo --runs 3
    python bench/bench.py --scaling 1 2 4      # time growth with the size of the synthetic corpus

Runs alternate between the tools so that load on the machine hits both alike; the table shows
medians. Peak memory is the largest sum of RSS over the process tree (workers included), sampled
from /proc every 20 ms; elsewhere it falls back to the largest single process.

`--diff` is timed warm too, on the tree as it is (a file with a fixable finding is fixed again each
run), and warm `check`, `--diff` and `--fix` alternate on a copy whose fixable findings a first `--fix`
fixed: with nothing to fix, fixing must cost what checking does.
With a tree, a pre-commit-style run is timed too: in a copy of the tree whose results and project
index are cached, `--changed` files (default 5, spread over the tree) are edited, then checked alone.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import synthetic_corpus  # noqa: E402


def _tree_rss(root_pid: int) -> int:
    """Bytes resident in `root_pid` and all its descendants (Linux /proc; a few reads per sample)."""
    total, frontier = 0, [root_pid]
    while frontier:
        pid = frontier.pop()
        try:
            with open(f"/proc/{pid}/statm") as handle:
                total += int(handle.read().split()[1]) * _PAGE
            with open(f"/proc/{pid}/task/{pid}/children") as handle:
                frontier.extend(int(child) for child in handle.read().split())
        except (OSError, ValueError, IndexError):
            continue
    return total


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def measure(command: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """(wall seconds, peak RSS of the process tree in bytes, stdout). The wall time ends when the
    process does (it is waited for; a thread samples the memory meanwhile), not at the next sample."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, env=env)
        peak = 0
        sampling = os.path.exists(f"/proc/{process.pid}/task/{process.pid}/children")
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.02):
                peak = max(peak, _tree_rss(process.pid))

        sampler = threading.Thread(target=sample) if sampling else None
        if sampler is not None:
            sampler.start()
        process.wait()
        elapsed = time.perf_counter() - started
        done.set()
        if sampler is not None:
            sampler.join()
        out.seek(0)
        stdout = out.read().decode("utf-8", "replace")
    if not sampling:
        import resource

        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return elapsed, peak, stdout


def _ours(tree: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "flux_alias_lint", "check", str(tree), "--exit-zero", "--quiet", *extra]


def _ruff(tree: Path) -> list[str]:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    return [ruff, "check", "--select", "ALL", "--no-cache", "--exit-zero", "--quiet", str(tree)]


def compare(tree: Path, runs: int, jobs: int | None, changed: int = 0) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    job_args = ("--jobs", str(jobs)) if jobs else ()
    cache = Path(tempfile.mkdtemp(prefix="flux-bench-cache-"))
    try:
        measure(_ours(tree, "--cache-dir", str(cache), *job_args), env)  # fills the cache (and the page cache)
        measure(_ours(tree, "--cache-dir", str(cache), *job_args), env)  # stamps recorded once files are not racy
        rows: dict[str, list[tuple[float, int]]] = {"ruff": [], "cold": [], "warm": [], "warm diff": []}
        findings = set()
        for _ in range(runs):
            wall, peak, _ = measure(_ruff(tree))
            rows["ruff"].append((wall, peak))
            wall, peak, out = measure(_ours(tree, "--no-cache", *job_args), env)
            rows["cold"].append((wall, peak))
            findings.add(out)
            wall, peak, out = measure(_ours(tree, "--cache-dir", str(cache), *job_args), env)
            rows["warm"].append((wall, peak))
            findings.add(out)
            wall, peak, _ = measure(_ours(tree, "--cache-dir", str(cache), "--diff", *job_args), env)
            rows["warm diff"].append((wall, peak))  # its output is the (empty or not) diff
        assert len(findings) == 1, "findings differ between runs or between cold and warm"
        rows.update(_nothing_to_fix(tree, runs, env, job_args))
        if changed:
            rows["pre-commit"] = _pre_commit(tree, changed, runs, env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    files = sum(1 for _ in tree.rglob("*.py"))
    lines = sum(p.read_bytes().count(b"\n") for p in tree.rglob("*.py"))
    medians = {name: statistics.median(w for w, _ in values) for name, values in rows.items()}
    peaks = {name: max(p for _, p in values) for name, values in rows.items()}
    return {"files": files, "lines": lines, "findings": findings.pop().count("\n"), "wall": medians, "peak": peaks}


def _copy(tree: Path, scratch: str) -> Path:
    """A copy of `tree` in `scratch`, its own git root, its files older than the cache's racy window."""
    copy = Path(scratch) / "tree"
    shutil.copytree(tree, copy, ignore=shutil.ignore_patterns(".git", ".flux-alias-lint-cache"))
    (copy / ".git").mkdir()  # the project root, as in a checkout
    past = time.time() - 3600
    for path in copy.rglob("*.py"):
        os.utime(path, (past, past))
    return copy


def _nothing_to_fix(
    tree: Path, runs: int, env: dict[str, str], job_args: Sequence[str]
) -> dict[str, list[tuple[float, int]]]:
    """Warm `check`, `--diff` and `--fix`, alternated, on a copy of `tree` whose fixable findings a
    first `--fix` fixed: with nothing to fix, fixing must cost what checking does."""
    rows: dict[str, list[tuple[float, int]]] = {"fixed check": [], "fixed diff": [], "fixed fix": []}
    with tempfile.TemporaryDirectory(prefix="flux-bench-fixed-") as scratch:
        copy = _copy(tree, scratch)
        cache = ("--cache-dir", str(Path(scratch) / "cache"), *job_args)
        measure(_ours(copy, "--fix", *cache), env)
        past = time.time() - 3600
        for path in copy.rglob("*.py"):  # what the fix rewrote, out of the racy window too
            os.utime(path, (past, past))
        for _ in range(2):  # the cache learns every file, then records their stamps
            measure(_ours(copy, *cache), env)
        for _ in range(runs):
            for name, extra in (("fixed check", ()), ("fixed diff", ("--diff",)), ("fixed fix", ("--fix",))):
                wall, peak, _ = measure(_ours(copy, *extra, *cache), env)
                rows[name].append((wall, peak))
    return rows


def _pre_commit(tree: Path, changed: int, runs: int, env: dict[str, str]) -> list[tuple[float, int]]:
    """`check` on `changed` just-edited files of a copy of `tree` (its own git root), whose results
    and project index a whole-tree run cached."""
    with tempfile.TemporaryDirectory(prefix="flux-bench-pre-commit-") as scratch:
        copy = _copy(tree, scratch)
        run = [sys.executable, "-m", "flux_alias_lint", "check", "--exit-zero", "--quiet"]
        quiet = {"cwd": copy, "env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        subprocess.run([*run, "."], check=False, **quiet)  # the results and the index, as the last commit left them
        candidates = sorted(str(p.relative_to(copy)) for p in copy.rglob("*.py") if p.stat().st_size)
        step = max(1, len(candidates) // changed)
        picked = candidates[step // 2 :: step][:changed]
        timings = []
        for edit in range(runs):
            for name in picked:
                with open(copy / name, "a") as handle:
                    handle.write(f"# edit {edit}\n")
            started = time.perf_counter()
            subprocess.run([*run, *picked], check=False, **quiet)
            timings.append((time.perf_counter() - started, 0))
        return timings


_LABELS = {
    "ruff": "ruff --select ALL --no-cache",
    "cold": "flux-alias-lint --no-cache",
    "warm": "flux-alias-lint, warm cache",
    "warm diff": "flux-alias-lint --diff, warm cache",
    "fixed check": "flux-alias-lint, warm cache, nothing to fix (a fixed copy)",
    "fixed diff": "flux-alias-lint --diff, the same",
    "fixed fix": "flux-alias-lint --fix, the same",
    "pre-commit": "flux-alias-lint, {changed} edited files (index cached)",
}


def _table(title: str, result: dict[str, object], changed: int = 0) -> str:
    wall, peak = result["wall"], result["peak"]
    assert isinstance(wall, dict) and isinstance(peak, dict)
    lines = [
        f"{title}: {result['files']} files, {result['lines']:,} lines, {result['findings']} findings",
        "| run | median wall | vs ruff | peak RSS (tree) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, label in _LABELS.items():
        if name in wall:
            ratio = wall[name] / wall["ruff"]
            memory = f"{peak[name] / 2**20:.0f} MB" if peak[name] else "-"
            lines.append(f"| {label.format(changed=changed)} | {wall[name]:.2f} s | {ratio:.2f}x | {memory} |")
    return "\n".join(lines)


def _side_by_side(results: dict[str, dict[str, object]], changed: int) -> str:
    lines = [
        "| tree | files | ruff | cold | cold vs ruff | warm | " + (f"{changed} edited files | " if changed else "")
        + "peak RSS (cold) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | " + ("---: | " if changed else "") + "---: |",
    ]  # fmt: skip
    for name, result in results.items():
        wall, peak = result["wall"], result["peak"]
        assert isinstance(wall, dict) and isinstance(peak, dict)
        pre_commit = f"{wall['pre-commit']:.2f} s | " if changed else ""
        lines.append(
            f"| {name} | {result['files']} | {wall['ruff']:.2f} s | {wall['cold']:.2f} s | "
            f"{wall['cold'] / wall['ruff']:.2f}x | {wall['warm']:.2f} s | {pre_commit}{peak['cold'] / 2**20:.0f} MB |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, action="append", help="a source tree to lint (repeat for several)")
    parser.add_argument("--files", type=int, default=300, help="synthetic corpus size at 1x (default 300)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, help="passed to flux-alias-lint (default: its own, all cores)")
    parser.add_argument("--changed", type=int, default=5, help="files edited in the pre-commit run (0: none)")
    parser.add_argument("--scaling", type=int, nargs="*", default=[], help="synthetic sizes to time, e.g. 1 2 4")
    args = parser.parse_args(argv)

    cpu = next((line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")), "?")
    print(f"{time.strftime('%Y-%m-%d')}, {platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} cores ({cpu})\n")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="flux-bench-") as scratch:
        if args.tree:
            results = {tree.name: compare(tree, args.runs, args.jobs, args.changed) for tree in args.tree}
            for tree in args.tree:
                print(_table(str(tree), results[tree.name], args.changed), "\n")
            print(_side_by_side(results, args.changed), "\n")
        else:
            tree = Path(scratch) / "synthetic"
            synthetic_corpus.generate(tree, files=args.files)
            time.sleep(2.1)  # files older than the cache's racy window, as in any real checkout
            print(_table(f"synthetic corpus ({args.files} files)", compare(tree, args.runs, args.jobs)), "\n")
        if args.scaling:
            print("| size | files | lines | ruff | flux-alias-lint cold | warm |")
            print("| --- | ---: | ---: | ---: | ---: | ---: |")
            for factor in args.scaling:
                tree = Path(scratch) / f"scaled-{factor}"
                synthetic_corpus.generate(tree, files=args.files * factor)
                time.sleep(2.1)
                result = compare(tree, args.runs, args.jobs)
                wall = result["wall"]
                assert isinstance(wall, dict)
                print(f"| {factor}x | {result['files']} | {result['lines']:,} | {wall['ruff']:.2f} s "
                      f"| {wall['cold']:.2f} s | {wall['warm']:.2f} s |")  # fmt: skip
    return 0


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


if __name__ == "__main__":
    sys.exit(main())
