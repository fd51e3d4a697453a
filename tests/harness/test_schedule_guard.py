"""install() / guard_forward_step / guard_loss_func in real runs of megatron-core's schedule (one CPU rank)."""

import functools
import types
import warnings

import pytest
import torch
from megatron.core.pipeline_parallel import schedules

from flux_alias_lint.harness import (
    ReportAliasError,
    ReportAliasWarning,
    guard_forward_step,
    guard_loss_func,
    install,
    run_schedule,
    stand_in_model,
    uninstall,
)

ORIGINAL = schedules.forward_step_calc_loss
BATCH = torch.arange(1.0, 9.0).view(2, 4)


@pytest.fixture
def guarded(megatron_schedule):
    yield install
    uninstall()
    assert schedules.forward_step_calc_loss is ORIGINAL


def masked_loss(mask, output_tensor):
    loss = (output_tensor * mask).sum()
    return loss, {"lm loss": loss.detach()}  # noqa: FAL001 -- the alias under test


def per_token_loss(mask, output_tensor):
    loss = (output_tensor * mask).sum()
    return loss, mask.sum().int(), {"lm loss": loss.detach()}  # noqa: FAL001 -- the alias under test


def fresh_loss(mask, output_tensor):
    loss = (output_tensor * mask).sum()
    return loss, {"lm loss": loss.detach().clone()}


def step_with(loss_func, seen=None):
    """A forward step handing Megatron ``partial(loss_func, mask)``, undecorated; ``seen`` collects the losses."""

    def recorded(*args, **kwargs):
        outputs = loss_func(*args, **kwargs)
        seen.append(outputs[0])
        return outputs

    def forward_step(data_iterator, model):
        return model(next(data_iterator)), functools.partial(loss_func if seen is None else recorded, torch.ones(2, 4))

    return forward_step


def per_token_model():
    model = stand_in_model()
    model.config.calculate_per_token_loss = True
    return model


def test_install_catches_an_undecorated_partial_before_the_rescale(guarded):
    guarded()
    model, seen = stand_in_model(), []
    with torch.no_grad():
        true_loss = model(BATCH).sum().item()
    with pytest.raises(ReportAliasError) as caught:
        run_schedule(step_with(masked_loss, seen), model, batch=BATCH, num_microbatches=2)
    assert str(caught.value).startswith("the loss function step_with.<locals>.recorded's report aliases")
    assert 'report["lm loss"] shares storage with the backprop tensor' in str(caught.value)
    assert seen[0].item() == pytest.approx(true_loss)  # raised before Megatron's /= 2


def test_install_catches_a_three_tuple_and_lets_the_per_token_one_through(guarded):
    guarded()
    with pytest.raises(ReportAliasError, match=r'report\["lm loss"\]'):
        run_schedule(step_with(per_token_loss), batch=BATCH, num_microbatches=2)
    reports = run_schedule(step_with(per_token_loss), per_token_model(), batch=BATCH, num_microbatches=2)
    assert len(reports) == 2  # per-token: Megatron does not rescale, so the alias is harmless


def test_install_lets_non_loss_data_and_no_loss_func_through(guarded):
    guarded()

    def non_loss_data(output_tensor, non_loss_data=False):
        assert non_loss_data
        return {"logits": output_tensor}  # the data itself, not a (loss, report) pair

    def forward_step(data_iterator, model):
        return model(next(data_iterator)), non_loss_data

    def no_loss_func(data_iterator, model):
        return model(next(data_iterator)), None

    for step in (forward_step, no_loss_func):
        store = run_schedule(step, batch=BATCH, num_microbatches=2, forward_only=True, collect_non_loss_data=True)
        assert len(store) == 2
    assert run_schedule(no_loss_func, batch=BATCH, num_microbatches=1, forward_only=True)[0].shape == (2, 4)


def test_install_warns_one_line_per_loss_function_and_changes_nothing(guarded):
    guarded(on_alias="warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            reports = run_schedule(step_with(masked_loss), batch=BATCH, num_microbatches=2)
        run_schedule(step_with(per_token_loss), batch=BATCH, num_microbatches=2)
    lines = [str(w.message) for w in caught if issubclass(w.category, ReportAliasWarning)]
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    assert lines[0].startswith(f"masked_loss ({__file__}:")
    assert lines[1].startswith(f"per_token_loss ({__file__}:")
    assert 'report["lm loss"] shares storage' in lines[0] and lines[0].endswith("(warned once per loss function)")
    assert reports[0]["lm loss"].item() == pytest.approx(reports[1]["lm loss"].item())  # both halved, not refused


def test_install_patches_modules_that_imported_the_function_and_uninstall_restores_them(guarded):
    fork = types.ModuleType("fork")
    fork.forward_step_calc_loss = ORIGINAL
    guarded(also_patch=[fork])
    assert schedules.forward_step_calc_loss is fork.forward_step_calc_loss is not ORIGINAL
    config = types.SimpleNamespace(calculate_per_token_loss=False, timers=None)
    output = torch.ones(2, 4, requires_grad=True) * 1.0
    with pytest.raises(ReportAliasError):
        fork.forward_step_calc_loss(
            None, output, functools.partial(masked_loss, 1.0), config, None, False, 2, [], 1, True
        )
    install()  # again: replaces, and uninstall still restores the original
    uninstall()
    assert fork.forward_step_calc_loss is ORIGINAL
    with pytest.raises(AttributeError, match="no forward_step_calc_loss"):
        install(also_patch=[types.ModuleType("elsewhere")])
    assert schedules.forward_step_calc_loss is ORIGINAL


def test_guard_forward_step_for_a_schedule_install_cannot_reach(megatron_schedule):
    assert schedules.forward_step_calc_loss is ORIGINAL
    with pytest.raises(ReportAliasError):
        run_schedule(guard_forward_step(step_with(masked_loss)), batch=BATCH, num_microbatches=2)
    run_schedule(guard_forward_step(step_with(per_token_loss)), per_token_model(), batch=BATCH, num_microbatches=2)
    run_schedule(guard_forward_step(step_with(fresh_loss)), batch=BATCH, num_microbatches=2)


def test_guard_loss_func_passes_per_token_three_tuples_and_non_loss_data(megatron_schedule):
    @guard_loss_func(calculate_per_token_loss=True)
    def loss_func(output_tensor, non_loss_data=False):
        if non_loss_data:
            return output_tensor  # was a TypeError: not a (loss, report)
        loss = output_tensor.sum()
        return loss, torch.tensor(8), {"lm loss": loss.detach()}  # noqa: FAL001 -- per-token: never rescaled

    def forward_step(data_iterator, model):
        return model(next(data_iterator)), loss_func

    assert len(run_schedule(forward_step, per_token_model(), batch=BATCH, num_microbatches=2)) == 2
    store = run_schedule(forward_step, batch=BATCH, num_microbatches=1, forward_only=True, collect_non_loss_data=True)
    assert store[0].shape == (2, 4)
    with pytest.raises(ReportAliasError):  # off per-token, the same 3-tuple is rescaled: refused
        guard_loss_func(loss_func.__wrapped__)(torch.ones(3, requires_grad=True) * 1.0)
