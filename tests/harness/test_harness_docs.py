"""The snippets in docs/prove-it.md run as written, and fail as shown without the fix."""

import re
from pathlib import Path

import pytest

from flux_alias_lint.harness.pytest_plugin import MegatronRescale, MegatronSchedule
from flux_alias_lint.harness.schedule import single_rank_megatron

DOC = (Path(__file__).resolve().parents[2] / "docs" / "prove-it.md").read_text()
SEED_TEST = "test_validation_report_survives_megatrons_in_place_rescale"
SCHEDULE_TEST = "test_validation_loss_does_not_depend_on_the_microbatches"


def run_snippets(source: str) -> dict:
    namespace: dict = {}
    for block in re.findall(r"```python\n(.*?)```", source, re.DOTALL):
        exec(compile(block, "docs/prove-it.md", "exec"), namespace)  # noqa: S102 -- our own docs
    return namespace


def call(test) -> None:
    """A snippet's test with the fixture its parameter names."""
    __tracebackhide__ = True
    if "megatron_schedule" in test.__code__.co_varnames[: test.__code__.co_argcount]:
        with single_rank_megatron():
            test(MegatronSchedule())
    else:
        test(MegatronRescale("installed")) if test.__code__.co_argcount else test()


def test_prove_it_snippets_pass():
    namespace = run_snippets(DOC)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert SEED_TEST in namespace and SCHEDULE_TEST in namespace and len(tests) == 4
    for test in tests:
        call(test)


@pytest.mark.parametrize("name", [SEED_TEST, SCHEDULE_TEST])
def test_without_the_clone_the_seed_tests_fail_as_the_doc_shows(name):
    namespace = run_snippets(DOC.replace("loss_sum.detach().clone()", "loss_sum.detach()"))
    with pytest.raises(AssertionError) as caught:
        call(namespace[name])
    version = re.search(r"megatron-core ([\d.]+)", str(caught.value))[1]
    shown = [re.sub(r"megatron-core [\d.]+", f"megatron-core {version}", block) for block in SHOWN]
    assert f"AssertionError: {caught.value}\n" in shown


SHOWN = re.findall(r"```\n(AssertionError: .*?)```", DOC, re.DOTALL)
