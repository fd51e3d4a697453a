"""Differential fuzz beyond CI: generate loss functions with fresh seeds and compare the checker,
the fix and megatron-core's real in-place rescale on each (see tests/differential.py).

    PYTHONPATH=.:tests python scripts/fuzz.py --count 20000 --seed 7 --save /tmp/disagreements
"""

from __future__ import annotations

import argparse
import pathlib
import random
import sys
import time
import warnings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from differential import Draw, compare, generate  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000, help="how many functions to generate")
    parser.add_argument("--seed", type=int, default=None, help="default: a fresh one, printed")
    parser.add_argument("--save", type=pathlib.Path, help="write each disagreement here as <n>.txt")
    parser.add_argument("--show", type=int, default=3, help="print this many disagreements in full")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    draw = Draw(lambda seq: seq[rng.randrange(len(seq))], rng.randint)
    warnings.filterwarnings("ignore")
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
    start, bad = time.monotonic(), 0
    for index in range(args.count):
        verdict = compare(*generate(draw))
        if verdict.problems:
            bad += 1
            if bad <= args.show:
                print(f"--- disagreement {bad} (function {index})\n{verdict}\n")
            if args.save:
                (args.save / f"{index}.txt").write_text(str(verdict))
    print(f"seed {seed}: {args.count} functions, {bad} disagreements, {time.monotonic() - start:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
