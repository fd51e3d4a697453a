"""Group the findings on the MLPerf trees and print them with their judgement.

    python bench/mlperf.py TREE_OR_JSON... [--judged FILE] [--summary]

Each argument is a tree (checked with `check --no-cache --exit-zero --unreached error`) or the
JSON that check wrote for one (the tree is the file's stem). Most findings repeat across
submissions because NeMo and Megatron-LM are vendored in many of them, so a finding's group is its
path from the vendored root (`NeMo/...`, `Megatron-LM/...`), else from the benchmark folder
(`llama2_70b_lora/custom_llama.py`), else from the tree, plus the enclosing function, code and
context. The judgement file maps a group key to {"verdict": "true"|"false"|"hazard", "why": ...}.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import date
from pathlib import Path

VENDORED = ("NeMo", "Megatron-LM")
BENCHMARK_DIRS = ("benchmarks", "benchmark")
HERE = Path(__file__).resolve().parent


def load(arg: str) -> tuple[str, list[dict]]:
    """The tree's name and its findings, from a JSON or by running the check."""
    path = Path(arg)
    if path.suffix == ".json":
        return path.stem, json.loads(path.read_text())
    cmd = [sys.executable, "-m", "flux_alias_lint", "check", str(path), "--no-cache", "--exit-zero"]
    cmd += ["--unreached", "error", "--output-format", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return path.name, json.loads(out)


def relative(path: str, tree: str) -> str:
    parts = path.split("/")
    for root in VENDORED:
        if root in parts:
            return "/".join(parts[parts.index(root) :])
    for folder in BENCHMARK_DIRS:
        if folder in parts:
            i = parts.index(folder)
            return f"{parts[i + 1]}/{parts[-1]}"
    if tree in parts:
        return "/".join(parts[parts.index(tree) + 1 :])
    return path


_spans: dict[str, list[tuple[int, int, str]] | None] = {}


def enclosing(path: str, line: int) -> str | None:
    """The qualified name of the innermost function around `line`, None if the file does not parse."""
    if path not in _spans:
        try:
            tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError):
            _spans[path] = None
        else:
            spans: list[tuple[int, int, str]] = []

            def walk(node: ast.AST, prefix: str) -> None:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                        name = prefix + child.name
                        if not isinstance(child, ast.ClassDef):
                            spans.append((child.lineno, child.end_lineno or child.lineno, name))
                        walk(child, name + ".")
                    else:
                        walk(child, prefix)

            walk(tree, "")
            _spans[path] = spans
    spans = _spans[path]
    if spans is None:
        return None
    inner = [(start, name) for start, end, name in spans if start <= line <= end]
    return max(inner)[1] if inner else "<module>"


def group_key(finding: dict, tree: str) -> str:
    rel = relative(finding["path"], tree)
    where = enclosing(finding["path"], finding["line"]) or str(finding["line"])
    return f"{rel}::{where} {finding['code']} {finding['context'] or '-'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+", help="a tree, or the JSON check wrote for one")
    parser.add_argument("--judged", default=str(HERE / "mlperf_judged.json"))
    parser.add_argument("--summary", action="store_true", help="only the counts by (code, context)")
    args = parser.parse_args(argv)

    trees: list[str] = []
    by_kind: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    lines: dict[str, set[int]] = defaultdict(set)
    for arg in args.inputs:
        tree, findings = load(arg)
        trees.append(tree)
        for finding in findings:
            by_kind[finding["code"], finding["context"] or "-"][tree] += 1
            key = group_key(finding, tree)
            groups[key][tree] += 1
            lines[key].add(finding["line"])

    total = sum(sum(c.values()) for c in by_kind.values())
    print(f"{total} findings, {len(groups)} groups, {date.today().isoformat()}\n")
    print("| code | context | " + " | ".join(trees) + " | total |")
    print("| --- | --- | " + "---: | " * len(trees) + "---: |")
    for (code, context), counts in sorted(by_kind.items()):
        row = " | ".join(str(counts[t]) for t in trees)
        print(f"| {code} | {context} | {row} | {sum(counts.values())} |")
    if args.summary:
        return 0

    judged = json.loads(Path(args.judged).read_text()) if Path(args.judged).exists() else {}
    verdicts: Counter[str] = Counter()
    print("\n| group | code | context | " + " | ".join(trees) + " | verdict | why |")
    print("| --- | --- | --- | " + "---: | " * len(trees) + "--- | --- |")
    for key in sorted(groups):
        where, code, context = key.rsplit(" ", 2)
        at = ", ".join(str(n) for n in sorted(lines[key]))
        judgement = judged.get(key, {"verdict": "not judged", "why": ""})
        verdicts[judgement["verdict"]] += 1
        row = " | ".join(str(groups[key][t]) for t in trees)
        print(f"| `{where}` ({at}) | {code} | {context} | {row} | {judgement['verdict']} | {judgement['why']} |")
    print("\n" + ", ".join(f"{v}: {n}" for v, n in sorted(verdicts.items())) + " groups")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
