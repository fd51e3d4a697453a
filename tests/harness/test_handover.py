"""Which parameter Megatron fills with the model's output, read from the forward step that hands the loss function
over (harness/handover.py): the first one a partial leaves, where a lambda puts its argument."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

import libcst as cst  # noqa: E402

from flux_alias_lint import check_source  # noqa: E402
from flux_alias_lint.harness.handover import handover  # noqa: E402
from flux_alias_lint.harness.probe import build_probe, functions  # noqa: E402

LOSS = """import functools


def loss_func(logits, data, output_tensor=None):
    loss = (logits * data["mask"]).sum()
    return loss, {{"loss": loss.detach()}}


def forward_step(data_iterator, model):
    batch = next(data_iterator)
    handed = {handed}
    return model(batch["tokens"]), handed
"""


@pytest.mark.parametrize(
    ("handed", "parameter"),
    [
        ("functools.partial(loss_func, data=batch)", "logits"),  # SkyRL's: the batch bound by keyword
        ("functools.partial(loss_func, batch)", "data"),  # a mask bound first: the output goes last
        ("lambda out: loss_func(batch, out)", "data"),
        ("lambda out: loss_func(batch, data=out)", "data"),
        ("loss_func", "logits"),  # the function itself: Megatron's one argument is its first
        ("functools.partial(loss_func, *batch)", None),  # how many it binds is not in the source
    ],
)
def test_the_output_goes_where_the_hand_over_leaves_it(tmp_path: Path, handed: str, parameter: str | None) -> None:
    path = tmp_path / "train.py"
    path.write_text(LOSS.format(handed=handed))
    (finding,) = check_source(path.read_text(), str(path))
    assert finding.context == "megatron"
    how = handover(finding)
    assert (how.parameter(["logits", "data"]) if how is not None else None) == parameter


def test_the_probe_hands_megatrons_output_to_that_parameter() -> None:
    module = cst.parse_module(LOSS.format(handed="functools.partial(loss_func, data=batch)"))
    function = functions(module)[0]
    assert build_probe(module, function, (2, 4), output="logits").megatron_argument() == 0
    # Told nothing, the last positional parameter, as `partial(loss_func, mask)` leaves it; `data` is a batch.
    assert build_probe(module, function, (2, 4)).megatron_argument() is None
