"""The project's own loop rescaling in place what a call returned, bound to another name first (LLaMA-Adapter's
`c_loss = model(...)`, `loss = c_loss`, `loss /= accum_iter`): the call's function is reached, and not where the
name rescaled holds another tensor."""

from __future__ import annotations

import textwrap

import pytest

from flux_alias_lint.index.project import ProjectIndex
from flux_alias_lint.index.reach import IN_PLACE_CALLER

COMPUTE = """
def compute(x):
    return x.sum()

"""


def _reached(loop: str) -> list[str]:
    """The contexts `compute` is reached with, with the last step's text."""
    source = COMPUTE + textwrap.dedent(loop)
    index = ProjectIndex.of_source(source, "train.py")
    return [f"{r.context}: {r.steps[-1].what}" for (_, line), r in index.reached.items() if line == 2]


def test_a_loss_bound_to_another_name_then_rescaled_is_what_the_call_returned() -> None:
    loop = """
    def train(x, k):
        c_loss = compute(x)
        loss = c_loss
        loss /= k
    """
    assert _reached(loop) == [f"{IN_PLACE_CALLER}: which rescales loss in place"]


@pytest.mark.parametrize(
    "loop",
    [
        # the name is bound to the other before the call: it holds an older tensor
        """
        def train(x, old, k):
            c_loss = old
            loss = c_loss
            c_loss = compute(x)
            loss /= k
        """,
        # the name rescaled is bound again: a new tensor
        """
        def train(x, k):
            c_loss = compute(x)
            loss = c_loss
            loss = loss * 2
            loss /= k
        """,
    ],
)
def test_not_where_the_name_rescaled_holds_another_tensor(loop: str) -> None:
    assert _reached(loop) == []
