"""What a restructuring must leave unchanged, recorded as JSON to compare before and after.

    python bench/identity.py OUT.json fixtures/ ../trees/Megatron-LM ../trees/NeMo ...

For each tree: every finding of `check TREE --no-cache --unreached error --output-format json`
(code, path, line, column, message, context, reached_by: the whole JSON object), and the lines the
triage keeps for the analysis in each file (`--jobs 1`, one process). Two runs' files compare
with `diff` or `python bench/identity.py --compare A.json B.json`. `--timeout 0` lifts the per-file
limit, which counts wall time: on a loaded machine a slow file becomes FAL000 in one run and not the
other.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flux_alias_lint import cli, lint, runner  # noqa: E402


def record(tree: Path, timeout: float | None = None) -> dict[str, object]:
    kept: dict[str, list[int] | None] = {}
    originals = (runner.reduce_source, lint.reduce_source)

    def recording(text, reached=frozenset(), path="", captures=True):  # noqa: ANN001, ANN202
        pieces = originals[0](text, reached, path, captures)
        kept[path] = None if pieces is None else [line for piece in pieces for line in piece.lines]
        return pieces

    runner.reduce_source = lint.reduce_source = recording
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            cli.main(
                [
                    "check",
                    str(tree),
                    "--no-cache",
                    "--exit-zero",
                    "--jobs",
                    "1",
                    "--unreached",
                    "error",
                    "--output-format",
                    "json",
                    *([] if timeout is None else ["--timeout", str(timeout)]),
                ]
            )
    except SystemExit:
        pass
    finally:
        runner.reduce_source, lint.reduce_source = originals
    return {"findings": json.loads(out.getvalue()), "kept": dict(sorted(kept.items()))}


def compare(a: Path, b: Path) -> int:
    left, right = json.loads(a.read_text()), json.loads(b.read_text())
    differences = 0
    for tree in sorted(set(left) | set(right)):
        for part in ("findings", "kept"):
            x, y = left.get(tree, {}).get(part), right.get(tree, {}).get(part)
            if x != y:
                differences += 1
                print(f"{tree}: {part} differ")
                if part == "kept" and isinstance(x, dict) and isinstance(y, dict):
                    for path in sorted(set(x) | set(y)):
                        if x.get(path) != y.get(path):
                            print(f"  {path}")
    print("identical" if not differences else f"{differences} differences")
    return 1 if differences else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--compare", type=Path, help="compare OUT with this earlier record instead")
    parser.add_argument("--timeout", type=float, help="check's --timeout (seconds per file, 0: no limit)")
    args = parser.parse_args()
    if args.compare:
        raise SystemExit(compare(args.compare, args.out))
    args.out.write_text(
        json.dumps({str(tree): record(tree, args.timeout) for tree in args.trees}, indent=1, sort_keys=True)
    )


if __name__ == "__main__":
    main()
