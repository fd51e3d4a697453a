"""Callable values (`index/resolve.py`): each fixture project of a shape the hand-off table does not
list is reached through the steps that computation finds, each a place and what happens there."""

from __future__ import annotations

import pathlib

import pytest
from fixture_corpus import FIXTURES

from flux_alias_lint.index.project import ProjectIndex
from flux_alias_lint.index.reach import MEGATRON

# (fixture project, the loss function's file and def line, its steps: file, line, what happens there)
CHAINS = {
    "forward_step_nested_under_its_own_name": (
        ("loss.py", 4),
        [
            ("trainer.py", 15, "returned as the loss function by forward_step_func"),
            (
                "trainer.py",
                18,
                "passed as forward_step_func to forward_backward_func, which rescales the loss in place",
            ),
        ],
    ),
    "loss_reduced_by_a_strategy_method": (
        ("megatron_strategy.py", 10),
        [
            ("model.py", 11, "its (loss, report) is returned by post_loss_function"),
            ("model.py", 15, "returned as the loss function by forward_step_func"),
            (
                "model.py",
                17,
                "passed as forward_step_func to get_forward_backward_func(), which rescales the loss in place",
            ),
        ],
    ),
    "forward_step_made_by_a_handler": (
        ("handler.py", 12),
        [
            ("handler.py", 16, "returned by get_loss_func"),
            ("handler.py", 8, "stored as self.loss_func"),
            ("handler.py", 21, "returned as the loss function by forward_step"),
            ("handler.py", 23, "returned by get_forward_step_func"),
            ("handler.py", 9, "stored as self.forward_step"),
            ("engine.py", 14, "passed as forward_step_func to forward_backward_func, which rescales the loss in place"),
        ],
    ),
    "loss_closure_made_by_a_method": (
        ("losses.py", 11),
        [
            ("losses.py", 15, "returned by make"),
            ("loss.py", 7, "its (loss, report) is returned by loss_func"),
            ("train.py", 9, "returned as the loss function by forward_step"),
            ("train.py", 13, "passed as forward_step_func to pretrain, which rescales the loss in place"),
        ],
    ),
    "loss_handed_through_parameters": (
        ("losses.py", 9),
        [
            ("losses.py", 8, "passed as fn to logged"),
            ("losses.py", 5, "returned by logged"),
            ("train.py", 26, "bound to loss_fn of forward_step by partial"),
            ("train.py", 12, "returned as the loss function by forward_step"),
            ("train.py", 26, "passed as step to run_schedule"),
            (
                "train.py",
                16,
                "passed as forward_step_func to get_forward_backward_func(), which rescales the loss in place",
            ),
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(CHAINS))
def test_the_chain_names_every_step(case: str) -> None:
    folder = (FIXTURES / "FAL001" / case).resolve()
    (relative, line), steps = CHAINS[case]
    reach = ProjectIndex([str(folder)]).reached[(str(folder / relative), line)]
    assert reach.context == MEGATRON and not reach.guessed
    shown = [(pathlib.Path(s.path).resolve().relative_to(folder).as_posix(), s.line, s.what) for s in reach.steps]
    assert shown == steps


def test_a_parameter_is_what_its_callers_pass_and_no_more() -> None:
    """Only the function the callers pass for the forward step's parameter is reached: not another
    function of the same module that nothing hands over."""
    folder = (FIXTURES / "FAL001" / "loss_handed_through_parameters").resolve()
    reached = {(pathlib.Path(path).name, line) for path, line in ProjectIndex([str(folder)]).reached}
    assert reached == {("losses.py", 9)}


# A function returning its own parameter, called at two places (FAL002 fixture projects): each call
# gets back what it passes, so only the step handed to the schedule is reached, through its own call.
_SCHEDULE_STEP = "passed as forward_step_func to forward_backward_func, which rescales the loss in place"
PASSED_BACK = {
    "step_passed_through_a_wrapper": [
        ("train.py", 27, "returned as the loss function by forward_step"),
        ("train.py", 31, "passed as forward_step_func to passthrough"),
        ("train.py", 22, "returned by passthrough"),
        ("train.py", 30, _SCHEDULE_STEP),
    ],
    "step_decorated_by_a_method_returning_it": [
        ("train.py", 36, "returned as the loss function by forward_step"),
        ("train.py", 34, "passed as forward_step_func to wrap_forward_step"),
        ("train.py", 28, "returned by wrap_forward_step"),
        ("train.py", 39, _SCHEDULE_STEP),
    ],
}


@pytest.mark.parametrize("case", sorted(PASSED_BACK))
def test_a_function_returning_its_parameter_gives_each_call_its_own(case: str) -> None:
    folder = (FIXTURES / "FAL002" / case).resolve()
    reached = ProjectIndex([str(folder)]).reached
    assert set(reached) == {(str(folder / "train.py"), 11)}  # not `probe_loss`, run by a plain loop
    reach = reached[(str(folder / "train.py"), 11)]
    shown = [(pathlib.Path(s.path).resolve().relative_to(folder).as_posix(), s.line, s.what) for s in reach.steps]
    assert reach.context == MEGATRON and not reach.guessed and shown == PASSED_BACK[case]
