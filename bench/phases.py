"""Where a cold `flux-alias-lint check` spends its time, phase by phase (one process, `--jobs 1`).

    python bench/phases.py /tmp/primus [/tmp/megatron-lm ...]

Each phase is the exclusive CPU time of the functions that do it (a phase called inside another
counts for itself only): the parse is every `ast`/`compile` parse, whoever asks for it; libcst
is every libcst parse, summaries' too. Start-up is timed apart, as fresh interpreters: the
import of the command line, and of libcst (loaded only once a file is really analysed).
"""

from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import functools
import io
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import libcst  # noqa: E402

from flux_alias_lint import analysis, cli, library, lint, runner, triage  # noqa: E402

PHASES = ("discover", "index", "parse", "triage", "triage helpers", "libcst", "analysis", "summaries", "output")

_spent: dict[str, float] = {}
_stack: list[list[object]] = []  # [phase, started, time spent in phases called inside it]


def _timed(phase: str, function: Callable[..., object]) -> Callable[..., object]:
    @functools.wraps(function)
    def wrapper(*args: object, **kwargs: object) -> object:
        frame: list[object] = [phase, time.process_time(), 0.0]
        _stack.append(frame)
        try:
            return function(*args, **kwargs)
        finally:
            _stack.pop()
            total = time.process_time() - frame[1]  # type: ignore[operator]
            _spent[phase] = _spent.get(phase, 0.0) + total - frame[2]  # type: ignore[operator]
            if _stack:
                _stack[-1][2] += total  # type: ignore[operator]

    return wrapper


@contextlib.contextmanager
def _instrumented() -> Iterator[None]:
    patches = [
        (cli._Settings, "files", "discover"),
        (cli, "project_reached", "index"),
        (ast, "parse", "parse"),
        (builtins, "compile", "parse"),
        (runner, "reduce_source", "triage"),
        (lint, "reduce_source", "triage"),
        (triage.summaries, "_imported_helpers", "triage helpers"),
        (libcst, "parse_module", "libcst"),
        (lint, "_analyze_parsed", "analysis"),
        (analysis.ModuleAnalysis, "_call_summarised", "summaries"),
        (library.Library, "function", "summaries"),
        (cli, "_report", "output"),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, phase in patches:
        setattr(owner, name, _timed(phase, getattr(owner, name)))
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def _startup(code: str, runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
        best = min(best, time.perf_counter() - started)
    return best


def profile(tree: Path) -> dict[str, float]:
    _spent.clear()
    started_cpu, started = time.process_time(), time.perf_counter()
    with _instrumented(), contextlib.redirect_stdout(io.StringIO()):
        cli.main(["check", str(tree), "--no-cache", "--exit-zero", "--quiet", "--jobs", "1"])
    total = time.process_time() - started_cpu
    out = {phase: _spent.get(phase, 0.0) for phase in PHASES}
    out["other"] = total - sum(out.values())
    out["total (CPU)"] = total
    out["wall"] = time.perf_counter() - started
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # one tree, as JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(profile(args.trees[0])))
        return
    print(f"start-up, import of the command line: {_startup('import flux_alias_lint.cli'):.3f} s")
    print(f"start-up, import of libcst:           {_startup('import libcst') - _startup('pass'):.3f} s")
    results = {}
    for tree in args.trees:  # each in a fresh process: nothing left over from the last tree
        run = subprocess.run([sys.executable, __file__, "--one", str(tree)], check=True, capture_output=True, text=True)
        results[tree.name] = json.loads(run.stdout.splitlines()[-1])
    names = list(results)
    print()
    print("| phase (s) | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for phase in [*PHASES, "other", "total (CPU)", "wall"]:
        print(f"| {phase} | " + " | ".join(f"{results[name][phase]:.2f}" for name in names) + " |")


if __name__ == "__main__":
    main()
