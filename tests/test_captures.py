"""FAL005's writes through the container holding an entry: the container's own update, not a change
to a value kept there (the shape of NeMo-RL's loss wrapper, which accumulates its metrics)."""

from __future__ import annotations

import textwrap

import pytest

from flux_alias_lint.lint import check_source

ACCUMULATED = textwrap.dedent(
    """
    import torch


    class Wrapper:
        def __call__(self, batches):
            loss_accum = 0
            metrics_accum = {}
            for batch in batches:
                loss, metrics = self.loss_fn(batch)
                loss_accum += loss
                for k, v in metrics.items():
                    if k not in metrics_accum:
                        metrics_accum[k] = float("inf") if k == "ratio_min" else 0
                    val = v.item() if isinstance(v, torch.Tensor) and v.ndim == 0 else v
                    if k == "ratio_min":
                        metrics_accum[k] = min(metrics_accum[k], val)
                    else:
                        metrics_accum[k] += val
            return loss_accum, metrics_accum
    """
)


def _captures(source: str) -> list[str]:
    return [f.report_path for f in check_source(source) if f.code == "FAL005"]


def test_an_entry_updated_through_its_own_container_is_not_a_capture_written():
    assert _captures(ACCUMULATED) == []


def test_an_entry_written_through_another_name_is_the_reports_own_update():
    # The kept metric itself scaled in place after it was stored: the entry changes, but no write to
    # the returned loss changes it (issue 34: a transform cropping its returned target in place).
    source = ACCUMULATED.replace("metrics_accum[k] += val", "metrics_accum[k] = val\n                    val *= 2")
    assert source != ACCUMULATED
    assert _captures(source) == []


def test_an_entry_the_returned_loss_is_written_after_keeping_still_is():
    # The loss scaled in place after an entry kept it: the entry shows the scaled loss.
    source = ACCUMULATED.replace(
        "return loss_accum, metrics_accum",
        'metrics_accum["loss"] = loss_accum.detach()\n        loss_accum *= 2\n        return loss_accum, metrics_accum',
    )
    assert source != ACCUMULATED
    assert _captures(source) == ['report["loss"]']


REALLOCATED_IN_A_LOOP = textwrap.dedent(
    """
    import torch

    HISTORY = []


    def loss_func(output_tensor):
        loss = output_tensor.sum() * 2.0
        for _ in range(2):
            HISTORY.append(loss.mul_(2.0).float())
            loss = loss * 2.0
        return loss, {"k": loss.detach().clone()}


    def forward_step(data_iterator, model):
        return model(next(data_iterator)), loss_func
    """
)


@pytest.mark.xfail(strict=True, reason="one allocation site stands for every tensor a loop makes there (known gap)")
def test_a_value_kept_in_one_pass_is_not_the_one_the_next_pass_writes():
    """Each pass keeps `loss` and then rebinds it to a new tensor made at the same place: the next
    pass's `mul_`, and Megatron's rescale of the last one, write tensors nothing kept (found by the
    differential fuzz: executed, no kept value moves)."""
    assert _captures(REALLOCATED_IN_A_LOOP) == []


# A helper of the project keeping what it is given: a capture at its call (`Summary.kept`), where the
# caller's object holding it outlives the caller. Each case: the call, the place the finding names.
KEEPING_HELPERS = textwrap.dedent(
    """
    import torch


    def record(buf, v):
        buf.append(v)


    def local_only(v):
        kept = []
        kept.append(v)
        return len(kept)


    class Meter:
        def __init__(self):
            self.vals = []

        def update(self, v):
            self.vals.append(v)


    class Model:
        def __init__(self):
            self.meter = Meter()
            self.vals = []

        def _keep(self, v):
            self.vals.append(v)

        def _count(self, v):
            self.calls = self.calls + [len(self.vals)]
            return v.sum()

        def step(self, x, buf):
            loss = x.sum()
            {call}
            loss *= 2
            return loss
    """
)


@pytest.mark.parametrize(
    ("call", "place"),
    [
        ("record(buf, loss.detach())", "buf[...]"),
        ("self._keep(loss.float())", "self.vals[...]"),
        ("self.meter.update(loss.detach().view(1))", "self.meter.vals[...]"),
        ("record([], loss.detach())", None),  # the caller's own list, which dies with it
        ("local_only(loss.detach())", None),  # kept nowhere that outlives the helper
        ("self.meter.update(loss.detach().clone())", None),  # a copy
        ("self._count(loss.detach())", None),  # what it stores is none of its arguments
    ],
)
def test_what_a_helper_keeps_is_captured_at_its_call(call: str, place: str | None, monkeypatch: pytest.MonkeyPatch):
    from flux_alias_lint import triage

    source = KEEPING_HELPERS.replace("{call}", call)
    for enabled in (True, False):  # the triage keeps the unit whenever the analysis flags it
        monkeypatch.setattr(triage, "ENABLED", enabled)
        assert _captures(source) == ([place] if place else []), enabled
