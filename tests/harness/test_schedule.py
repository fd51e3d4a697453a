"""The seed trainer through megatron-core's real schedule (one gloo rank on the CPU), before and after its fix."""

import functools

import pytest
import torch
from megatron.core import parallel_state

from flux_alias_lint.harness.schedule import (
    report_disagreements,
    run_schedule,
    single_rank_megatron,
    stand_in_model,
)


class DiffusionPretrainTrainer:
    """The shape of Primus's trainer before the fix: the seed's loss function, as its forward step hands it over."""

    def forward_step(self, data_iterator, model):
        batch = next(data_iterator)
        output_tensor = model(batch["latents"])
        return output_tensor, functools.partial(self.loss_func, batch["sample_count"])

    def loss_func(self, sample_count, output_tensor):
        loss_sum = output_tensor.sum()
        return loss_sum, {"loss": (loss_sum.detach(), sample_count.detach())}  # noqa: FAL001 -- the seed bug


class FixedDiffusionPretrainTrainer(DiffusionPretrainTrainer):
    def loss_func(self, sample_count, output_tensor):
        loss_sum = output_tensor.sum()
        return loss_sum, {"loss": (loss_sum.detach().clone(), sample_count.detach())}


BATCH = {"latents": torch.arange(1.0, 9.0).view(2, 4), "sample_count": torch.tensor(2)}


@pytest.mark.parametrize("forward_only", [False, True], ids=["training", "forward-only"])
@pytest.mark.parametrize("num_microbatches", [1, 2, 4])
@pytest.mark.parametrize(
    ("trainer", "fixed"), [(DiffusionPretrainTrainer(), False), (FixedDiffusionPretrainTrainer(), True)]
)
def test_the_reported_loss_is_divided_by_the_microbatches_until_the_fix(
    megatron_schedule, trainer, fixed, num_microbatches, forward_only
):
    model = stand_in_model()
    with torch.no_grad():
        true_loss = model(BATCH["latents"]).sum().item()
    reports = megatron_schedule.run(
        trainer.forward_step, model, batch=BATCH, num_microbatches=num_microbatches, forward_only=forward_only
    )
    factor = 1.0 if fixed else 1 / num_microbatches  # ×0.5 at 2, ×0.25 at 4 before the fix
    assert len(reports) == num_microbatches
    assert [report["loss"][0].item() for report in reports] == pytest.approx([true_loss * factor] * num_microbatches)
    assert [report["loss"][1].item() for report in reports] == [2] * num_microbatches


def test_gradients_are_the_same_either_way_so_training_looks_fine(megatron_schedule):
    grads = []
    for trainer in (DiffusionPretrainTrainer(), FixedDiffusionPretrainTrainer()):
        model = stand_in_model()
        model.load_state_dict({name: torch.ones_like(value) for name, value in model.state_dict().items()})
        megatron_schedule.run(trainer.forward_step, model, batch=BATCH, num_microbatches=2)
        grads.append([parameter.grad.clone() for parameter in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*grads, strict=True))
    assert grads[0][0].abs().sum() > 0


def test_the_fixture_fails_on_the_seed_naming_path_and_factor(megatron_schedule):
    with pytest.raises(AssertionError) as caught:
        megatron_schedule.assert_reports_agree(DiffusionPretrainTrainer().forward_step, batch=BATCH)
    lines = str(caught.value).splitlines()
    assert lines[0] == (
        "the report of DiffusionPretrainTrainer.loss_func changes with the number of microbatches "
        "(megatron-core 0.16.1, forward_backward_no_pipelining, cp size 1; compared with 1 microbatch):"
    )
    assert lines[1:3] == [
        '  training, 2 microbatches: report["loss"][0] ×0.50',
        '  forward-only, 2 microbatches: report["loss"][0] ×0.50',
    ]
    assert lines[3].endswith("Put a copy in the report: loss.detach().clone()")


def test_the_fixture_passes_on_the_fixed_trainer(megatron_schedule):
    megatron_schedule.assert_reports_agree(FixedDiffusionPretrainTrainer().forward_step, batch=BATCH)


def test_four_microbatches_quarter_it_and_a_changed_shape_is_named():
    assert report_disagreements(DiffusionPretrainTrainer().forward_step, batch=BATCH, num_microbatches=4) == [
        'training, 4 microbatches: report["loss"][0] ×0.25',
        'forward-only, 4 microbatches: report["loss"][0] ×0.25',
    ]

    def forward_step(data_iterator, model):
        # A report that accumulates across microbatches is caught too, though it is no alias.
        seen.append(model(next(data_iterator)).sum())
        return seen[-1], lambda output_tensor: (output_tensor, {"seen": torch.stack(seen).detach().clone()})

    seen = []
    assert report_disagreements(forward_step)[0] == 'training, 2 microbatches: report["seen"] has shape [2], not [1]'


def test_a_zero_loss_is_refused_since_it_cannot_show_a_rescale():
    def forward_step(data_iterator, model):
        output_tensor = model(next(data_iterator)) * 0
        return output_tensor, lambda output: (output.sum(), {"loss": output.sum().detach()})  # noqa: FAL001

    with pytest.raises(ValueError, match="every loss was zero"):
        report_disagreements(forward_step)


def test_process_group_and_parallel_state_are_torn_down_and_a_users_left_alone():
    assert not torch.distributed.is_initialized()
    with single_rank_megatron():
        assert parallel_state.model_parallel_is_initialized()
        with single_rank_megatron():  # nested: uses what is there
            pass
        assert torch.distributed.get_world_size() == 1 and parallel_state.model_parallel_is_initialized()
        assert run_schedule(FixedDiffusionPretrainTrainer().forward_step, batch=BATCH, num_microbatches=1)
        assert parallel_state.model_parallel_is_initialized()
    assert not torch.distributed.is_initialized()
    assert not parallel_state.model_parallel_is_initialized()
