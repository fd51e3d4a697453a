"""Aliases injected at real hand-offs of Trainer/accelerate/Composer/Lightning/own-loop trees, judged.

    python bench/host_trees.py --trees /work/trees2                 # every tree of bench/host_trees.json
    python bench/host_trees.py --trees /work/trees2 --only LAVIS    # one tree

`bench/host_trees.json` lists, per tree, its repository and commit, the findings `check` should give the
tree as it is (`baseline`, each judged `true`, `false` or `missed` in its `verdict`, with its `why`), and the injections: each one's edits (our text
inserted before a line of the tree, with that line's indentation, or a line replaced, e.g. a pin
rewritten), the verdict the host's real code at the release the tree pins calls for (`error CONTEXT`,
`warning CONTEXT` or `silent`), and the chain steps (`FILE:LINE` of the tree, before the edits) the
finding must name. The data holds no code of the trees, only paths and line numbers.

Each tree is run as a user gets it: the checkout copied with its `.git` and checked, then the same copy
without `.git` (a plain folder) checked again (`check COPY --no-cache -j 1 --timeout 0 --exit-zero
--output-format json`, this checkout first on the path, one run at a time). Only findings on the lines
the injection inserted (or on its `at` line) are read; a tree whose folder is missing, or is not at the
listed commit, is reported and skipped. The printed table has one row per baseline and per injection:
tree, site, expected, what each run got, and whether both are right.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "host_trees.json"
SILENT = "silent"


@dataclass(frozen=True)
class Edit:
    """Our text put into one file of the tree: inserted before `line`, or replacing it."""

    file: str
    line: int
    text: str
    replace: bool = False


def apply_edits(tree: pathlib.Path, edits: Iterable[Edit]) -> dict[str, list[int]]:
    """Apply `edits` (line numbers of the unedited files) to the files under `tree`; return, per file,
    the old line number each new line came from (0 for an inserted line)."""
    by_file: dict[str, list[Edit]] = {}
    for edit in edits:
        by_file.setdefault(edit.file, []).append(edit)
    origins: dict[str, list[int]] = {}
    for relative, file_edits in by_file.items():
        path = tree / relative
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        numbered: list[tuple[int, str]] = [(n, text) for n, text in enumerate(lines, 1)]
        # From the bottom up, so each edit's line number is still the unedited file's.
        for edit in sorted(file_edits, key=lambda e: (e.line, not e.replace), reverse=True):
            if not 1 <= edit.line <= len(lines):
                raise ValueError(f"{relative}:{edit.line}: the file has {len(lines)} lines")
            index = next(i for i, (n, _) in enumerate(numbered) if n == edit.line)
            old = lines[edit.line - 1]
            if edit.replace:
                numbered[index] = (edit.line, edit.text + "\n")
            else:
                indent = old[: len(old) - len(old.lstrip())]
                numbered.insert(index, (0, f"{indent}{edit.text}\n"))
        path.write_text("".join(text for _, text in numbered), encoding="utf-8")
        origins[relative] = [n for n, _ in numbered]
    return origins


def run_check(project: pathlib.Path, checkout: pathlib.Path) -> list[dict]:
    """`check` on `project` by the flux-alias-lint in `checkout`: its JSON findings, paths made relative."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    command = [sys.executable, "-m", "flux_alias_lint", "check", str(project), "--no-cache", "-j", "1"]
    command += ["--timeout", "0", "--exit-zero", "--output-format", "json"]
    run = subprocess.run(command, capture_output=True, text=True, check=False, env=env, cwd=project.parent)
    if run.returncode != 0:
        raise RuntimeError(f"check {project} exited {run.returncode}: {run.stderr[-2000:]}")
    findings = json.loads(run.stdout or "[]")
    for finding in findings:
        path = os.path.realpath(os.path.join(project.parent, finding["path"]))
        finding["path"] = os.path.relpath(path, os.path.realpath(project))
        for step in finding.get("reached_by", []):
            step_path = os.path.realpath(os.path.join(project.parent, step["path"]))
            step["path"] = os.path.relpath(step_path, os.path.realpath(project))
    return findings


def verdict(findings: list[dict]) -> str:
    """`severity context` of each finding (joined), or `silent`."""
    return ", ".join(sorted({f"{f['severity']} {f['context'] or f['code']}" for f in findings})) or SILENT


def old_line(origins: dict[str, list[int]], path: str, line: int) -> int:
    """The unedited file's number of `line` of the edited `path` (0 for a line we inserted)."""
    lines = origins.get(path)
    return line if lines is None or line > len(lines) else lines[line - 1]


def judge_injection(findings: list[dict], injection: dict, origins: dict[str, list[int]]) -> tuple[str, bool, str]:
    """(what `check` says at the injection, whether it is the expected verdict and chain, the chain shown)."""
    edits = [e for e in injection["edits"] if not e.get("replace")]
    site = edits[0]["file"]
    inserted = {n for n, origin in enumerate(origins[site], 1) if origin == 0}
    at = injection.get("at")
    mine = [
        f
        for f in findings
        if f["path"] == site
        and f["code"] != "FAL000"
        and (f["line"] in inserted or old_line(origins, site, f["line"]) == at)
    ]
    steps = [
        f"{step['path']}:{old_line(origins, step['path'], step['line'])}"
        for f in mine
        for step in f.get("reached_by", [])
    ]
    chain_ok = all(any(step.endswith(want) for step in steps) for want in injection.get("chain", []))
    got = verdict(mine)
    unchecked = [f for f in findings if f["path"] == site and f["code"] == "FAL000"]
    if unchecked:
        got += f" (FAL000: {unchecked[0]['message'][:80]})"
    return got, got == injection["expected"] and chain_ok, " > ".join(steps)


def baseline_keys(findings: list[dict]) -> list[str]:
    return sorted(f"{f['path']}:{f['line']} {f['code']} {f['severity']} {f['context'] or '-'}" for f in findings)


def judge_baseline(keys: list[str], judged: list[dict]) -> tuple[str, str, bool]:
    """(what the tree should give, what it gave: the count and how many are false, missed or not judged in
    the data, whether it gave exactly the true ones)."""
    verdicts = {entry["finding"]: entry["verdict"] for entry in judged}
    should = sorted(k for k, v in verdicts.items() if v in ("true", "missed"))
    false = [k for k in keys if verdicts.get(k) == "false"]
    missed = [k for k in should if k not in keys]
    unjudged = [k for k in keys if k not in verdicts]
    counts = (("false", len(false)), ("missed", len(missed)), ("not judged", len(unjudged)))
    said = ", ".join(f"{count} {label}" for label, count in counts if count)
    got = (f"{len(keys)} findings" if keys else "no finding") + (f" ({said})" if said else "")
    return f"{len(should)} findings" if should else "no finding", got, keys == should


@dataclass
class Row:
    tree: str
    site: str
    expected: str
    got_git: str
    got_plain: str
    right: bool


def run_tree(tree: dict, trees: pathlib.Path, checkout: pathlib.Path, chains: bool) -> list[Row]:
    """Every row of one tree: its baseline, then each injection, each run with `.git` and as a plain folder."""
    source = trees / tree["name"]
    head = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    if head.returncode != 0 or not head.stdout.strip().startswith(tree["commit"]):
        print(f"{tree['name']}: skipped, {source} is not a checkout of {tree['repo']}@{tree['commit']}", flush=True)
        return []
    rows: list[Row] = []
    jobs = [("baseline", None), *((injection["site"], injection) for injection in tree["injections"])]
    for site, injection in jobs:
        got: list[str] = []
        right = True
        for plain in (False, True):
            with tempfile.TemporaryDirectory(prefix="host-trees-") as temp:
                copy = pathlib.Path(temp) / tree["name"]
                shutil.copytree(source, copy, symlinks=True)
                origins = apply_edits(copy, [Edit(**e) for e in injection["edits"]]) if injection else {}
                if plain:
                    shutil.rmtree(copy / ".git")
                findings = run_check(copy, checkout)
            if injection is None:
                expected, said, ok = judge_baseline(baseline_keys(findings), tree["baseline"])
                got.append(said)
                right &= ok
                continue
            said, ok, chain = judge_injection(findings, injection, origins)
            got.append(said)
            right &= ok
            if chains and chain:
                print(f"  {tree['name']} {site} ({'plain' if plain else 'git'}): {chain}", flush=True)
        if injection is not None:
            expected = injection["expected"]
        rows.append(Row(tree["name"], site, expected, got[0], got[1], right))
        print(f"  {tree['name']} {site}: {'right' if right else 'WRONG'}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", type=pathlib.Path, required=True, help="the folder holding each tree's checkout")
    parser.add_argument("--data", type=pathlib.Path, default=DATA)
    parser.add_argument("--only", action="append", help="a tree's name (repeatable)")
    parser.add_argument("--checkout", type=pathlib.Path, default=ROOT, help="the flux-alias-lint to run (this one)")
    parser.add_argument("--chains", action="store_true", help="print each finding's chain too")
    args = parser.parse_args(argv)
    data = json.loads(args.data.read_text(encoding="utf-8"))
    rows: list[Row] = []
    for tree in data["trees"]:
        if not args.only or tree["name"] in args.only:
            rows += run_tree(tree, args.trees, args.checkout.resolve(), args.chains)
    commit = subprocess.run(
        ["git", "-C", str(args.checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    print(f"\nflux-alias-lint at {commit}")
    print("| tree | injected site | expected | with .git | plain folder | right |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row.tree} | {row.site} | {row.expected} | {row.got_git} | {row.got_plain} | {'yes' if row.right else '**no**'} |"
        )
    injected = [r for r in rows if r.site != "baseline"]
    print(
        f"\n{len(rows) - len(injected)} trees, {len(injected)} injections: "
        f"{sum(r.right for r in injected)} right, {sum(not r.right for r in injected)} wrong; "
        f"baselines right: {sum(r.right for r in rows if r.site == 'baseline')}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
