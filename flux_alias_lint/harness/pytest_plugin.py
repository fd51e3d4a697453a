"""pytest plugin (entry point ``pytest11``): the ``megatron_rescale`` and ``megatron_schedule`` fixtures.

Loaded into every pytest run where flux-alias-lint is installed, so it imports neither
torch nor megatron-core until a test uses the fixture.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--megatron-profile",
        default=None,
        help="Megatron rescale the megatron_rescale fixture applies: 'installed' (the default when "
        "megatron-core is importable, else 'latest'), 'latest', a profile such as '0.12', or a release.",
    )


@dataclasses.dataclass(frozen=True)
class MegatronRescale:
    """``megatron_rescale`` bound to one profile, with the assertion helper as a method."""

    profile: str

    def __call__(
        self,
        outputs: Sequence[Any],
        *,
        num_microbatches: int = 2,
        cp_group_size: int = 3,
        calculate_per_token_loss: bool = False,
    ) -> tuple[Any, Any]:
        """Rescale a loss function's outputs; return ``(backprop tensor, report)``."""
        from flux_alias_lint.harness import megatron_rescale

        return megatron_rescale(
            outputs,
            num_microbatches=num_microbatches,
            cp_group_size=cp_group_size,
            calculate_per_token_loss=calculate_per_token_loss,
            profile=self.profile,
        )

    def assert_report_survives(
        self, loss_func: Callable[..., Sequence[Any]], *args: Any, **kwargs: Any
    ) -> tuple[Any, Any]:
        """``assert_report_survives_rescale`` with this fixture's profile."""
        __tracebackhide__ = True
        from flux_alias_lint.harness import assert_report_survives_rescale

        return assert_report_survives_rescale(loss_func, *args, profile=self.profile, **kwargs)


@pytest.fixture
def megatron_rescale(request: pytest.FixtureRequest) -> MegatronRescale:
    """Apply Megatron's rescale to a loss function's outputs (2 microbatches, cp size 3 by default)."""
    profile = request.config.getoption("--megatron-profile")
    if profile is None:
        profile = "installed" if importlib.util.find_spec("megatron") else "latest"
    return MegatronRescale(profile)


class MegatronSchedule:
    """Megatron's real schedule on one CPU rank (schedule.py), set up for the test that asks for it."""

    def run(self, forward_step_func: Callable[..., Any], model: Any = None, **kwargs: Any) -> list[Any]:
        """``run_schedule``: Megatron's ``forward_data_store``, one report per microbatch."""
        from flux_alias_lint.harness.schedule import run_schedule

        return run_schedule(forward_step_func, model, **kwargs)

    def assert_reports_agree(self, forward_step_func: Callable[..., Any], model: Any = None, **kwargs: Any) -> None:
        """``assert_reports_agree``: every report leaf the same at 1 and at 2 microbatches, training and forward-only."""
        __tracebackhide__ = True
        from flux_alias_lint.harness.schedule import assert_reports_agree

        assert_reports_agree(forward_step_func, model, **kwargs)


@pytest.fixture
def megatron_schedule() -> Iterator[MegatronSchedule]:
    """A single-rank gloo process group and Megatron's parallel state (tp 1, pp 1), torn down after the test."""
    from flux_alias_lint.harness.schedule import single_rank_megatron

    with single_rank_megatron():
        yield MegatronSchedule()
