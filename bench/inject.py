"""Inject an alias into a copy of a real tree and show the context and chain `check` gives it.

    python bench/inject.py TREE FILE:LINE 'report["x"] = loss.detach()'
    python bench/inject.py --list bench/injections.txt --trees ../trees   # every row of the table


copies TREE (without `.git`, which becomes an empty marker so the copy is still its own project) to a
temporary directory, inserts the alias line before LINE of FILE (relative to TREE) with that line's
indentation, runs `python -m flux_alias_lint check <copy> --no-cache --output-format json` with this
checkout first on the path, and prints the findings of the injected function: each one's code,
line, context, message (a host's names the release it reads) and `reached_by` chain, then one
summary line (the table row of docs/context.md): `TREE@commit FILE:LINE -> context` (`missed`: no
finding in the function; a FAL000 on the file, such as the per-file timeout, is shown after it).
`--timeout` is passed on to `check`: its per-file limit counts wall time, so on a loaded machine
`--timeout 0` keeps a slow file from reading as a miss.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _function_span(text: str, line: int) -> tuple[int, int]:
    """The lines of the innermost def holding `line` (the whole file if none)."""
    best = (1, len(text.splitlines()) + 1)
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            end = node.end_lineno or node.lineno
            if node.lineno <= line <= end and end - node.lineno < best[1] - best[0]:
                best = (node.lineno, end)
    return best


def inject(tree: pathlib.Path, where: str, alias: str, workdir: pathlib.Path) -> tuple[pathlib.Path, str, int]:
    """Copy `tree` under `workdir` and insert `alias` before `where` (FILE:LINE): (the copy, the
    file's relative path, the injected line's number)."""
    relative, _, number = where.rpartition(":")
    line = int(number)
    copy = workdir / tree.name
    shutil.copytree(tree, copy, ignore=lambda d, names: [".git"] if d == str(tree) else [], symlinks=True)
    (copy / ".git").mkdir()
    path = copy / relative
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    indent = lines[line - 1][: len(lines[line - 1]) - len(lines[line - 1].lstrip())]
    lines.insert(line - 1, f"{indent}{alias}\n")
    path.write_text("".join(lines), encoding="utf-8")
    return copy, relative, line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=pathlib.Path, nargs="?")
    parser.add_argument("where", nargs="?", help="FILE:LINE, FILE relative to TREE: the alias goes before LINE")
    parser.add_argument("alias", nargs="?", help="the line to insert (indented as LINE is)")
    parser.add_argument("--list", type=pathlib.Path, help="rows `TREE|FILE:LINE|ALIAS`, TREE a folder of --trees")
    parser.add_argument("--trees", type=pathlib.Path, default=pathlib.Path("."))
    parser.add_argument("--checkout", type=pathlib.Path, default=ROOT, help="the flux-alias-lint to run (this one)")
    parser.add_argument("--timeout", type=float, help="check's --timeout (seconds per file, 0: no limit)")
    args = parser.parse_args(argv)
    if args.list is not None:
        for row in args.list.read_text(encoding="utf-8").splitlines():
            if row.strip():
                name, where, alias = row.split("|", 2)
                run_one(args.trees / name, where, alias, args.checkout, args.timeout)
        return 0
    if args.tree is None or args.where is None or args.alias is None:
        parser.error("TREE FILE:LINE ALIAS, or --list")
    run_one(args.tree, args.where, args.alias, args.checkout, args.timeout)
    return 0


def run_one(tree: pathlib.Path, where: str, alias: str, checkout: pathlib.Path, timeout: float | None = None) -> None:
    """Inject `alias` at `where` in a copy of `tree`, check the copy, print what `check` says of it."""
    tree = tree.resolve()
    commit = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="inject-") as temp:
        copy, relative, line = inject(tree, where, alias, pathlib.Path(temp))
        text = (copy / relative).read_text(encoding="utf-8")
        first, last = _function_span(text, line)
        env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
        command = [sys.executable, "-m", "flux_alias_lint", "check", str(copy), "--no-cache", "--output-format", "json"]
        run = subprocess.run(
            command + ([] if timeout is None else ["--timeout", str(timeout)]),
            capture_output=True,
            check=False,
            text=True,
            env=env,
            cwd=temp,
        )
        findings = json.loads(run.stdout or "[]")
        target = os.path.realpath(copy / relative)
        in_file = [f for f in findings if os.path.realpath(os.path.join(temp, f["path"])) == target]
        ours = [f for f in in_file if first <= f["line"] <= last and f["code"] != "FAL000"]
        unchecked = [f"FAL000: {f['message']}" for f in in_file if f["code"] == "FAL000"]
        for finding in ours:
            print(f"{relative}:{finding['line']}: {finding['code']} {finding['context']}")
            print(f"    {finding['message']}")  # a host's message names the release that rescales
            for step in finding.get("reached_by", []):
                shown = os.path.relpath(os.path.join(temp, step["path"]), copy)
                print(f"    {shown}:{step['line']}: {step['what']}")
        contexts = sorted({f["context"] for f in ours}) or ["missed"]
        print(f"{tree.name}@{commit} {relative}:{line} -> {', '.join(contexts + unchecked)}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
