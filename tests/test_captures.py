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


# FAL005 `in-function` for a report entry kept with a detach or a conversion: any in-place write to storage it shares,
# in a loss function (issue 46), not only a write to the returned loss. Each case: the body before the return, the
# return, the report paths flagged.
IN_A_LOSS_FUNCTION = textwrap.dedent(
    """
    import torch


    {decorator}
    def loss_func(output_tensor, w=0.5):
        ce = torch.sum(output_tensor)
        kl = torch.mean(output_tensor)
        {body}
        return {returned}
    {hand_off}
    """
)
HAND_OFF = "\n\ndef forward_step(data_iterator, model):\n    return model(next(data_iterator)), loss_func\n"


@pytest.mark.parametrize(
    ("body", "returned", "flagged"),
    [
        ('metrics = {"ce": ce.detach()}; ce *= w', "ce + kl, metrics", ['report["ce"]']),
        ('metrics = {"ce": ce.float()}; ce.mul_(w)', "ce + kl, torch.ones(1), metrics", ['report["ce"]']),
        ('metrics = {"ce": ce.detach().clone()}; ce *= w', "ce + kl, metrics", []),  # a copy
        ('metrics = {"ce": ce.detach()}; kl *= w', "ce + kl, metrics", []),  # shares nothing with it
        ('metrics = {"ce": ce.detach()}', "ce + kl, metrics", []),  # written nowhere
        # The entry is the tensor itself, written through it: the report updated (a transform's target).
        ('d = ce.detach(); metrics = {"ce": d}; d *= w', "ce + kl, metrics", []),
        ('metrics = {"ce": ce.detach()}; ce *= w', "ce + kl, {'n': 1}", []),  # not the report returned
        # The caller's input written: a data transform does that too, so it takes a host's call (below).
        ('metrics = {"out": output_tensor.detach()}; output_tensor.mul_(w)', "ce + kl, metrics", []),
    ],
)
@pytest.mark.parametrize("triaged", [True, False])
def test_a_kept_entry_written_in_a_loss_function(
    body: str, returned: str, flagged: list[str], triaged: bool, monkeypatch: pytest.MonkeyPatch
):
    from flux_alias_lint import triage

    monkeypatch.setattr(triage, "ENABLED", triaged)  # the triage keeps the unit whenever the analysis flags it
    source = IN_A_LOSS_FUNCTION.format(decorator="", body=body, returned=returned, hand_off="")
    assert _captures(source) == flagged


def test_a_write_to_the_input_is_a_finding_where_a_host_calls_the_loss_function():
    body = 'metrics = {"out": output_tensor.detach()}; output_tensor.mul_(w)'
    source = IN_A_LOSS_FUNCTION.format(decorator="", body=body, returned="ce + kl, metrics", hand_off=HAND_OFF)
    [finding] = [f for f in check_source(source) if f.code == "FAL005"]
    assert (finding.report_path, finding.context) == ('report["out"]', "megatron")


def test_a_function_without_gradients_is_no_loss_function_by_its_shape():
    source = IN_A_LOSS_FUNCTION.format(
        decorator="@torch.no_grad()",
        body='metrics = {"ce": ce.detach()}; ce *= w',
        returned="ce + kl, metrics",
        hand_off="",
    )
    assert _captures(source) == []
    assert _captures(source.replace("@torch.no_grad()", "")) == ['report["ce"]']


TRANSFORM = textwrap.dedent(
    """
    import torch


    class RandomCrop(torch.nn.Module):
        def forward(self, image, target):
            {body}
            return image[..., 1:] * torch.ones(1), {returned}
    """
)


@pytest.mark.parametrize(
    ("body", "returned", "flagged"),
    [
        # MLPerf's crop with the boxes detached first: written through the entry that holds them.
        ('boxes = target["boxes"][target["keep"]].detach(); target["boxes"] = boxes; target["boxes"][:, 0::2] -= 1',
         "target", []),
        ('boxes = target["boxes"].detach(); target["boxes"] = boxes; boxes.clamp_(min=0)', "target", []),
        # Its own dict keeping a detach of its input, the input then written: not a loss function by its shape.
        ('out = {"orig": target["boxes"].detach()}; target["boxes"].clamp_(min=0)', "out", []),
        # A copy of the boxes kept on the target, the boxes then cropped: a capture on a parameter, as before.
        ('boxes = target["boxes"].detach(); target["orig"] = boxes.detach(); boxes[:, 0::2] -= 1', "target",
         ['target["orig"]']),
    ],
)  # fmt: skip
def test_a_data_transform_updating_its_target(body: str, returned: str, flagged: list[str]):
    assert _captures(TRANSFORM.format(body=body, returned=returned)) == flagged


def test_a_kept_value_written_through_a_part_of_it_is_on_purpose():
    # `d` kept on `self`, then one of its elements written through `d`: the code updates what it kept.
    source = textwrap.dedent(
        """
        import torch


        class Model:
            def step(self, x):
                loss = x.sum(0)
                d = loss.detach()
                self.kept = d
                d[0] *= 2
                return loss.sum()
        """
    )
    assert _captures(source) == []
    assert _captures(source.replace("d[0] *= 2", "loss[0] *= 2")) == ["self.kept"]
