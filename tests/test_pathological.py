"""The pathological shapes of bench/pathological.py stay within the analysis's stated bound.

The bound is on the analysis' own work counters (statements analysed, aliases evaluated), never on
seconds: the counts are the same on any machine, however busy. Small sizes, so the test stays fast;
each is already past where the unbounded analysis blew up (20 alternating branches took over 30 s,
10 nested loops over 60 s: 2**depth passes, which these counters see at once). The findings are
still there: bounding the work widens what the analysis knows, it never drops an alias.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import libcst as cst
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import pathological  # noqa: E402

from flux_alias_lint.analysis.statements import (  # noqa: E402
    _LOOP_SLACK,
    _MIN_WORK,
    _WORK_PER_STATEMENT,
    _functions_in,
    _statement_count,
    _string_literal,
)

SIZES = {"branches": 40, "nested_loops": 20, "long_flat": 1_000, "huge_dict": 1_000, "loss_functions": 100}
SIZES["dict_then_stores"] = 500
# The findings of each shape at its size: one per report entry, or the one returned alias.
FINDINGS = {"long_flat": 1_000, "huge_dict": 1_000, "loss_functions": 100, "dict_then_stores": 1_000}


@pytest.mark.parametrize("shape", sorted(pathological.SHAPES))
def test_shape_stays_within_the_stated_work_bound(shape: str) -> None:
    source, depth = pathological.SHAPES[shape][0](SIZES[shape])
    work, limit = pathological.work_of(source), pathological.bound(source, depth)
    assert pathological.within(work, limit), f"{shape} at {SIZES[shape]}: {work}, bound {limit}"
    findings = pathological.check_source(source)
    assert len(findings) == FINDINGS.get(shape, 1)


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


# The generated modules of issue 45, whose cost was quadratic in the module (a walk of the whole
# module per finding, a set copied per store): their analysis' work stays within the bound stated
# per line (times loop depth + 1), whatever the number of functions, report entries or nesting
# (`pathological.GENERATED`, the table `bench/pathological.py --generated` prints).
@pytest.mark.parametrize(("shape", "size"), pathological.GENERATED)
def test_a_generated_module_stays_within_the_work_bound_per_line(shape: str, size: int) -> None:
    source, depth = pathological.SHAPES[shape][0](size)
    work, limit = pathological.work_of(source), pathological.bound(source, depth)
    assert pathological.within(work, limit), f"{shape} at {size}: {work}, bound {limit}"


def test_work_grows_linearly_with_the_number_of_loss_functions() -> None:
    """Four times the functions, four times the analysis' work: no function's analysis reads the others."""
    small, large = (pathological.work_of(pathological.loss_functions(n)[0]) for n in (400, 1_600))
    assert large.statements <= 4 * small.statements and large.aliases <= 4 * small.aliases, (small, large)


def _python_calls(source: str) -> int:
    """The Python function calls of a whole check of `source` (triage, index, analysis, the escape
    analysis of each unreached finding): a count the machine does not change."""
    calls = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(count)
    try:
        pathological.check_source(source)
    finally:
        sys.setprofile(None)
    return calls


def test_a_whole_check_grows_linearly_with_the_number_of_loss_functions() -> None:
    """Each loss function here is an unreached finding, and each such finding asks where the
    function escapes: that walked the whole module once per finding (16x the calls for 4x the
    functions); now it looks the def up by line."""
    pathological.check_source("x = 1\n")  # what loading takes is no part of either count
    small, large = (_python_calls(pathological.loss_functions(n)[0]) for n in (50, 200))
    assert large <= 5 * small, (small, large)


@pytest.mark.parametrize("shape", ["long_flat", "dict_then_stores"])
def test_stores_into_one_report_copy_entries_linearly(shape: str) -> None:
    """Twice the `r["k<i>"] = loss.detach()` stores (after a literal of as many entries, or alone),
    twice the container entries the stores copy (`Work.copied`): a store of a new key appends to
    the entries the container shares with the one before it. Each store copied every entry into
    a new tuple before (4x the copies, and a collector walking each tuple: 20,000 stores 28 s)."""
    small, large = (pathological.work_of(pathological.SHAPES[shape][0](n)[0]) for n in (2_500, 5_000))
    assert large.copied <= 2.2 * small.copied, (small.copied, large.copied)
    assert large.statements <= 2.2 * small.statements, (small.statements, large.statements)


@pytest.mark.parametrize("entries", [8, 40])  # 40: past `values._INDEXED`, the entries a store appends to
def test_a_report_stored_into_on_branches_is_known_entry_by_entry(entries: int) -> None:
    """A large container's entries, shared with the one it extends, are those a small one's tuple
    holds: on one branch, on both (each its own copy), replaced by a copy, read back, and stored
    into in a loop (whose passes join: the longer is the join)."""
    lines = ["def loss_func(output_tensor, flags):", "    loss = output_tensor.sum()", "    r = {}"]
    lines += [f'    r["k{i}"] = loss.detach()' for i in range(entries)]
    lines += ["    if flags[0]:", '        r["a"] = loss.detach()', "    else:", '        r["b"] = loss.detach()']
    lines += ["    if flags[1]:", '        r["c"] = loss.detach()', '    r["k3"] = loss.detach().clone()']
    lines += ['    r["d"] = r["k4"]', '    r["e"] = r["k3"]', "    for flag in flags:"]
    lines += ['        r["f"] = loss.detach()']
    flagged = {f.report_path for f in pathological.check_source("\n".join([*lines, "    return loss, r", ""]))}
    expected = {f"k{i}" for i in range(entries) if i != 3} | {"a", "b", "c", "d", "f"}
    assert flagged == {f'report["{key}"]' for key in expected}


@pytest.mark.parametrize(
    "token", ['""', '"k0"', "'a b'", '"""x\ny"""', "''''''", '"""a"b"""', r'"a\nb"', 'r"x"', 'b"x"']
)
def test_a_string_key_read_without_compiling_it_is_what_python_reads(token: str) -> None:
    """Report keys are read without `ast.parse` when they have no prefix or escape (20,000 keys were
    20,000 compiles); any literal reads as Python reads it."""
    value = ast.literal_eval(token)
    assert _string_literal(token) == (value if isinstance(value, str) else None)


@pytest.mark.parametrize("loops", [8, 16])
def test_nested_loops_cost_the_budget_then_each_statement_once_per_enclosing_loop(loops: int) -> None:
    """8 and 16 nested `for` loops: the work is at most the function's budget (linear in its
    statements) and, past it, (loop depth + 1) analyses per statement (2 for the loops under way
    when it widens); 2**depth passes over the innermost body before the budget."""
    source, depth = pathological.nested_loops(loops)
    (function,) = _functions_in(cst.parse_module(source))[1]
    statements = _statement_count(function)
    budget = _WORK_PER_STATEMENT * statements + _MIN_WORK
    assert pathological.work_of(source).statements <= budget + _LOOP_SLACK * (depth + 1) * statements
