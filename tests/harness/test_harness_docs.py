"""The snippets in docs/prove-it.md run as written, and fail as shown without the fix."""

import re
from pathlib import Path

import pytest

from flux_alias_lint.harness.pytest_plugin import MegatronRescale

DOC = (Path(__file__).resolve().parents[2] / "docs" / "prove-it.md").read_text()
SEED_TEST = "test_validation_report_survives_megatrons_in_place_rescale"


def run_snippets(source: str) -> dict:
    namespace: dict = {}
    for block in re.findall(r"```python\n(.*?)```", source, re.DOTALL):
        exec(compile(block, "docs/prove-it.md", "exec"), namespace)  # noqa: S102 -- our own docs
    return namespace


def test_prove_it_snippets_pass():
    namespace = run_snippets(DOC)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert SEED_TEST in namespace and len(tests) == 3
    for test in tests:
        test(MegatronRescale("installed")) if test.__code__.co_argcount else test()


def test_without_the_clone_the_seed_test_fails_as_the_doc_shows():
    namespace = run_snippets(DOC.replace("loss_sum.detach().clone()", "loss_sum.detach()"))
    with pytest.raises(AssertionError) as caught:
        namespace[SEED_TEST]()
    shown = re.search(r"```\n(AssertionError: .*?)```", DOC, re.DOTALL)[1]
    version = re.search(r"megatron-core ([\d.]+)", str(caught.value))[1]
    assert f"AssertionError: {caught.value}\n" == re.sub(r"megatron-core [\d.]+", f"megatron-core {version}", shown)
