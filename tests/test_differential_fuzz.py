"""The checker, the fix and Megatron agree on 2,000 generated loss functions, captures (FAL005) included
(see differential.py).

Derandomized, so CI sees the same 2,000 functions every run; `scripts/fuzz.py` explores more with
fresh seeds. A failure prints the generated function, what was flagged and what moved.
"""

from __future__ import annotations

import pytest
from differential import Draw, compare, generate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = 2_000


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_checker_and_fix_agree_with_megatron(data: st.DataObject) -> None:
    draw = Draw(lambda seq: data.draw(st.sampled_from(seq)), lambda lo, hi: data.draw(st.integers(lo, hi)))
    source, flags, loops = generate(draw)
    verdict = compare(source, flags, loops)
    assert not verdict.problems, str(verdict)


def test_the_comparison_can_fail() -> None:
    """A disagreement is reported, so the property above is not vacuous. This one is by design:
    on an unknown dtype `.double()` may return `self` (FAL004); on float32 it copies."""
    source = (
        "import torch\n\n\ndef loss_func(output_tensor):\n"
        "    loss = output_tensor.sum()\n"
        "    return loss, {'wide': loss.detach().double()}\n"
    )
    verdict = compare(source, 0, 0)
    assert verdict.flagged == {'report["wide"]'} and verdict.moved == set()
    assert verdict.problems[0] == "checker disagrees: false positives ['report[\"wide\"]'], missed []"


def test_the_capture_comparison_can_fail() -> None:
    """Both directions of a FAL005 disagreement are reported. By design `.half()` of an unknown dtype may
    return `self` (a finding a float32 run never moves); a detach through `getattr` is out of the checker's sight."""
    source = (
        "import torch\n\nHISTORY = []\nMETRICS = {}\n\n\ndef loss_func(output_tensor):\n"
        "    loss = output_tensor.sum()\n"
        "    HISTORY.append(loss.detach().half())\n"
        '    METRICS["k"] = getattr(loss, "detach")()\n'
        "    loss *= 2.0\n"
        "    return loss, {}\n"
    )
    verdict = compare(source, 0, 0)
    assert verdict.captures == {"HISTORY[...]"} and verdict.captured == {'METRICS["k"]'}
    assert verdict.problems[0] == "captures disagree: false positives ['HISTORY[...]'], missed ['METRICS[\"k\"]']"
