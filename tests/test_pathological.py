"""The pathological shapes of bench/pathological.py stay within the analysis's stated bound.

The bound is on the analysis' own work counters (statements analysed, aliases evaluated), never on
seconds: the counts are the same on any machine, however busy. Small sizes, so the test stays fast;
each is already past where the unbounded analysis blew up (20 alternating branches took over 30 s,
10 nested loops over 60 s: 2**depth passes, which these counters see at once). The findings are
still there: bounding the work widens what the analysis knows, it never drops an alias.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import pathological  # noqa: E402

SIZES = {"branches": 40, "nested_loops": 20, "long_flat": 1_000, "huge_dict": 1_000}


@pytest.mark.parametrize("shape", sorted(pathological.SHAPES))
def test_shape_stays_within_the_stated_work_bound(shape: str) -> None:
    source, depth = pathological.SHAPES[shape][0](SIZES[shape])
    work, limit = pathological.work_of(source), pathological.bound(source, depth)
    assert pathological.within(work, limit), f"{shape} at {SIZES[shape]}: {work}, bound {limit}"
    findings = pathological.check_source(source)
    assert len(findings) == (SIZES[shape] if shape in ("long_flat", "huge_dict") else 1)


def test_the_work_bound_grows_linearly_with_nested_loops() -> None:
    """Two nests of 20 loops in one function cost twice one nest: the budget is linear in the
    function's length (a cost quadratic in it would quadruple)."""
    counts = []
    for nests in (1, 2):
        source, _ = pathological.nested_loops(20 * nests)
        counts.append(pathological.work_of(source).statements)
    assert counts[1] <= 2.5 * counts[0], counts


@pytest.mark.parametrize("depth", [3, 18])  # 18: past the budget; CPython nests 20 blocks at most
def test_an_alias_carried_over_iterations_is_found_past_the_work_budget(depth: int) -> None:
    """The report holds the previous iteration's detach: only a second pass over the body sees it."""
    lines = ["def loss_func(output_tensor, xs):", "    loss = output_tensor.sum()", "    prev = None", "    rep = {}"]
    lines += ["    " * (i + 1) + f"for x{i} in xs:" for i in range(depth)]
    lines += ["    " * (depth + 1) + 'rep = {"r": prev}', "    " * (depth + 1) + "prev = loss.detach()"]
    findings = pathological.check_source("\n".join([*lines, "    return loss, rep", ""]))
    if depth < 10:
        assert [(f.code, f.report_path) for f in findings] == [("FAL001", 'report["r"]')]
    else:  # past the budget: widened, so more may be flagged (and less precisely), but never less
        assert 'report["r"]' in {f.report_path for f in findings}
