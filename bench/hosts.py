"""`verify` under every host that rescales a returned loss in place: what runs for real, what is emulated.

For each host row of `flux_alias_lint.harness.hosts.HOSTS`, and for a project's own accumulation loop, a
finding is made on the small programs in tests/harness/host_cases/ (the context and chain given to the analysis
as the index gives them) and `verify` runs it under that host; then the host runs a function keeping a copy
(`loss.detach().clone()`), which must hold. The table says what ran (the pinned release, real, or the
recorded line, emulated, and why), the kept value before and after, and the seconds each took.

    python bench/hosts.py [--install]      # --install: put the pinned releases in the cache first
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "harness" / "host_cases"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--install", action="store_true", help="install the pinned host releases first")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from flux_alias_lint.harness import hosts
    from flux_alias_lint.harness.verify import Settings, verify_source
    from flux_alias_lint.index.reach import IN_PLACE_CALLER, Reach, Step
    from flux_alias_lint.selection import DEFAULT_SELECTION
    from flux_alias_lint.source import read_source

    if args.install:
        for release in hosts.releases():
            hosts.install(release)
    trainer, loop, model = CASES / "trainer_subclass.py", CASES / "own_loop.py", CASES / "model_total.py"
    # A host taking one entry of a returned dict as its loss (Composer's 'total') gets a model returning one.
    rows = [
        (context, model, 8, (Step(str(model), 8, "loss"),))
        if host.entry
        else (context, trainer, 8, (Step(str(trainer), 8, "compute_loss"),))
        for context, host in hosts.HOSTS.items()
    ]
    caller = (Step(str(loop), 17, "its loss is returned to train"), Step(str(loop), 18, "rescaled"))
    rows.append((IN_PLACE_CALLER, loop, 9, caller))
    print("| context | host | what ran | kept alias | kept copy | seconds |")
    print("| --- | --- | --- | --- | --- | ---: |")
    for context, path, def_line, steps in rows:
        started = time.monotonic()
        reaches = {def_line: Reach(context, steps, whole_return=True)}
        [verdict] = verify_source(read_source(str(path)), DEFAULT_SELECTION, Settings(), reaches)
        host = hosts.host_of(context, steps)
        assert host is not None
        copied = CASES / ("kept_total_copy.py" if host.entry else "kept_copy.py")
        [copy] = hosts.run_under_host(host, [hosts.ModuleSubject(str(copied))])
        seconds = time.monotonic() - started
        status = "CONFIRMED" if verdict.confirmed else "UNCONFIRMED"
        kept = re.match(r"\S+ (.*?\)) after", verdict.detail)
        moved = kept[1] if kept and verdict.confirmed else verdict.detail
        held = "held" if not copy.moved and not copy.error else f"moved: {copy.moved or copy.error}"
        name = host.name.replace(str(ROOT) + "/", "")
        print(f"| `{context}` | {name} | {copy.ran} | {status} {moved} | {held} | {seconds:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
