"""Where a cold `flux-alias-lint check` spends its time, phase by phase (one process, `--jobs 1`).

    python bench/phases.py /tmp/primus [/tmp/megatron-lm ...]

Each phase is the exclusive CPU time of the functions that do it (a phase called inside another
counts for itself only): the parse is every `ast`/`compile` parse, whoever asks for it; libcst
is every libcst parse, summaries' too. Start-up is timed apart, as fresh interpreters: the
import of the command line, and of libcst (loaded only once a file is really analysed).

The parse is then split by who asks for it (the first module of the package on the stack), and
"parsed again" is the CPU of parses of a text this process had already parsed (the same
characters, wherever they were read: one parse per file would save that much).
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
_asked: dict[str, float] = {}  # parse CPU by who asked
_seen: set[int] = set()  # hashes of the texts parsed so far
_parsing: list[bool] = []  # non-empty inside a parse
_PACKAGE = str(ROOT / "flux_alias_lint") + "/"


def _asker() -> str:
    """The package's module that asked for a parse: its path below the package, without `.py`."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_PACKAGE):
            return name[len(_PACKAGE) : -3]
        frame = frame.f_back
    return "outside the package"


def _text_key(source: object) -> int | None:
    """The parsed characters, whether they came as bytes or str (a BOM and `\\r\\n` aside), or None
    for what is not source text (an `ast` tree given to `compile`)."""
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    if not isinstance(source, str):
        return None
    return hash(source.removeprefix("\ufeff").replace("\r\n", "\n"))


def _parse_timed(function: Callable[..., object]) -> Callable[..., object]:
    """`_timed("parse", function)`, its CPU also counted by asker and as first or again."""
    timed = _timed("parse", function)

    @functools.wraps(function)
    def wrapper(source: object, *args: object, **kwargs: object) -> object:
        if _parsing:  # `ast.parse` calling `compile`: counted once, by the outer call
            return timed(source, *args, **kwargs)
        started = time.process_time()
        _parsing.append(True)
        try:
            return timed(source, *args, **kwargs)
        finally:
            _parsing.pop()
            spent = time.process_time() - started
            asker = _asker()
            _asked[asker] = _asked.get(asker, 0.0) + spent
            key = _text_key(source)
            if key is not None and key in _seen:
                _asked["parsed again"] = _asked.get("parsed again", 0.0) + spent
            elif key is not None:
                _seen.add(key)

    return wrapper


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
        timed = _parse_timed if phase == "parse" else functools.partial(_timed, phase)
        setattr(owner, name, timed(getattr(owner, name)))
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
    _asked.clear()
    _seen.clear()
    started_cpu, started = time.process_time(), time.perf_counter()
    with _instrumented(), contextlib.redirect_stdout(io.StringIO()):
        cli.main(["check", str(tree), "--no-cache", "--exit-zero", "--quiet", "--jobs", "1"])
    total = time.process_time() - started_cpu
    out = {phase: _spent.get(phase, 0.0) for phase in PHASES}
    out["other"] = total - sum(out.values())
    out["total (CPU)"] = total
    out["wall"] = time.perf_counter() - started
    out.update({f"parse: {asker}": spent for asker, spent in sorted(_asked.items(), key=lambda item: -item[1])})
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
    askers = sorted({key for result in results.values() for key in result if key.startswith("parse: ")})
    askers.sort(key=lambda key: (key == "parse: parsed again", -max(r.get(key, 0.0) for r in results.values())))
    for asker in askers:
        print(f"| {asker} | " + " | ".join(f"{results[name].get(asker, 0.0):.2f}" for name in names) + " |")


if __name__ == "__main__":
    main()
