"""`flux-alias-lint callgraph` scored on PyCG's micro-benchmark (github vitsalis/PyCG, `micro-benchmark/`).

    python bench/pycg.py /path/to/PyCG/micro-benchmark/snippets [--external] [--show-misses]

Each case (`<category>/<case>/`, with `main.py`, its other modules and the expected `callgraph.json`)
is run as `python -m flux_alias_lint callgraph CASE --output-format pycg`. Both graphs are scored by
their edges between names of the case's own modules: an edge to a builtin (`<builtin>.len`,
`<**PyStr**>.join`) is left out of both, as PyCG's own evaluation leaves out builtins, and so is an
edge to a module the case does not have (`main -> ext.Cls.fun`) unless `--external` counts it, as
PyCG's ground truth has it. A case is sound when every expected edge is found and
complete when every edge found is expected (as PyCG's paper counts them). Prints a Markdown table
per category and the totals, with the date and the commit measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


def module_names(case: Path) -> set[str]:
    """The dotted names of a case's modules (`pkg/__init__.py`: `pkg`)."""
    names = set()
    for path in case.rglob("*.py"):
        parts = list(path.relative_to(case).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        names.add(".".join(parts))
    return names


def edges(graph: dict[str, list[str]], modules: set[str], external: bool) -> set[tuple[str, str]]:
    """The edges of a graph from names of the case's own modules to names of them or, `external`, to
    names of modules the case does not ship (not to builtins, `<builtin>.len`, `<**PyStr**>.join`)."""

    def own(name: str) -> bool:
        return any(name == m or name.startswith(m + ".") for m in modules)

    def counted(name: str) -> bool:
        return own(name) or (external and not name.startswith("<"))

    return {
        (caller, callee) for caller, callees in graph.items() if own(caller) for callee in callees if counted(callee)
    }


def produced(case: Path) -> dict[str, list[str]]:
    command = [sys.executable, "-m", "flux_alias_lint", "callgraph", str(case), "--output-format", "pycg"]
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=CHECKOUT, check=False)
    if done.returncode:
        sys.exit(f"{case}: callgraph exited {done.returncode}:\n{done.stderr}")
    return json.loads(done.stdout)


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("snippets", type=Path, help="PyCG's micro-benchmark/snippets directory")
    parser.add_argument("--show-misses", action="store_true", help="list each missing and each unexpected edge")
    parser.add_argument(
        "--external",
        action="store_true",
        help="count the edges to modules the case does not ship too (`main -> ext.Cls.fun`), as PyCG's ground truth has them",
    )
    args = parser.parse_args()
    cases = sorted(p.parent for p in args.snippets.glob("*/*/callgraph.json"))
    if not cases:
        parser.error(f"{args.snippets}: no <category>/<case>/callgraph.json under it")
    rows: dict[str, list[int]] = {}  # category -> cases, expected, found, right, sound, complete
    misses = []
    for case in cases:
        modules = module_names(case)
        expected = edges(json.loads((case / "callgraph.json").read_text()), modules, args.external)
        found = edges(produced(case), modules, args.external)
        right = expected & found
        row = rows.setdefault(case.parent.name, [0] * 6)
        counts = [1, len(expected), len(found), len(right), int(expected <= found), int(found <= expected)]
        rows[case.parent.name] = [a + b for a, b in zip(row, counts, strict=True)]
        name = f"{case.parent.name}/{case.name}"
        misses += [f"missing    {name}: {a} -> {b}" for a, b in sorted(expected - found)]
        misses += [f"unexpected {name}: {a} -> {b}" for a, b in sorted(found - expected)]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=CHECKOUT, capture_output=True, text=True, check=True
    ).stdout.strip()
    counted = "own modules and modules the case does not ship" if args.external else "own modules only"
    print(f"PyCG micro-benchmark, {len(cases)} cases, edges to {counted}; {datetime.date.today()}, commit {commit}\n")
    print("| category | cases | expected edges | found | right | precision | recall | sound | complete |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    total = [0] * 6
    for category, (n, expected, found, right, sound, complete) in sorted(rows.items()):
        total = [a + b for a, b in zip(total, (n, expected, found, right, sound, complete), strict=True)]
        print(
            f"| {category} | {n} | {expected} | {found} | {right} | {percent(right, found)} | "
            f"{percent(right, expected)} | {sound}/{n} | {complete}/{n} |"
        )
    n, expected, found, right, sound, complete = total
    print(
        f"| **all** | {n} | {expected} | {found} | {right} | **{percent(right, found)}** | "
        f"**{percent(right, expected)}** | {sound}/{n} | {complete}/{n} |"
    )
    if args.show_misses:
        print("\n" + "\n".join(misses) if misses else "\nno missing or unexpected edge")


if __name__ == "__main__":
    main()
