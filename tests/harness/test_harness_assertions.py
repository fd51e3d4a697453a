import pytest
import torch
from report_helpers import summarize, summarize_safely

from flux_alias_lint.harness import assert_report_survives_rescale


def validation_loss_func(output_tensor):
    loss_sum = output_tensor.sum()
    sample_count = torch.tensor(output_tensor.shape[0])
    return loss_sum, {"loss": (loss_sum.detach(), sample_count.detach())}  # noqa: FAL001 -- deliberate alias under test


def fixed_validation_loss_func(output_tensor):
    loss_sum = output_tensor.sum()
    sample_count = torch.tensor(output_tensor.shape[0])
    return loss_sum, {"loss": (loss_sum.detach().clone(), sample_count.detach())}


def model_output():
    return torch.rand(4, 3, requires_grad=True) + 1.0


def test_seed_bug_fails_naming_path_factor_and_storage():
    with pytest.raises(AssertionError) as caught:
        assert_report_survives_rescale(validation_loss_func, model_output(), cp_group_size=1)
    lines = str(caught.value).splitlines()
    assert 'report["loss"][0] changed ×0.50 after the rescale: it shares storage with the backprop tensor' in lines
    assert lines[0].startswith("the report of validation_loss_func does not survive Megatron's in-place rescale")
    assert not any('report["loss"][1]' in line for line in lines)


def test_default_scenario_shows_both_factors():
    with pytest.raises(AssertionError, match=r'report\["loss"\]\[0\] changed ×1\.50 after the rescale'):
        assert_report_survives_rescale(validation_loss_func, model_output())


def test_fixed_loss_func_passes_and_returns_the_rescaled_outputs():
    output = torch.ones(4, 3, requires_grad=True) * 1.0
    loss, report = assert_report_survives_rescale(fixed_validation_loss_func, output)
    assert loss.item() == 12.0 * 3 / 2
    assert report["loss"][0].item() == 12.0


def test_alias_made_in_a_helper_in_another_module_is_caught():
    def loss_func(output_tensor, scale=1.0):
        loss_sum = output_tensor.sum() * scale
        return loss_sum, summarize(loss_sum, torch.tensor(output_tensor.shape[0]))  # noqa: FAL001 (the alias this test needs)

    with pytest.raises(AssertionError, match=r'report\["loss"\]\[0\] changed ×1\.50'):
        assert_report_survives_rescale(loss_func, model_output(), scale=2.0)


def test_safe_helper_in_another_module_passes():
    def loss_func(output_tensor):
        loss_sum = output_tensor.sum()
        return loss_sum, summarize_safely(loss_sum, torch.tensor(output_tensor.shape[0]))

    assert_report_survives_rescale(loss_func, model_output())


def test_three_tuple_alias_and_per_token_mode():
    def loss_func(output_tensor):
        loss = output_tensor.sum()
        num_tokens = torch.tensor(output_tensor.numel())
        return loss, num_tokens, {"lm loss": torch.cat([loss.detach().view(1), num_tokens.view(1)])}

    def aliased(output_tensor):
        loss = output_tensor.sum()
        return loss, torch.tensor(4), {"lm loss": loss.detach().view(1)}  # noqa: FAL003 -- deliberate alias under test

    assert_report_survives_rescale(loss_func, model_output())  # torch.cat copies
    with pytest.raises(AssertionError, match=r'report\["lm loss"\] changed ×0\.12'):
        assert_report_survives_rescale(aliased, model_output())
    # With per-token loss Megatron does not touch a 3-tuple's loss, so the alias is harmless.
    assert_report_survives_rescale(aliased, model_output(), calculate_per_token_loss=True)


def test_copying_releases_let_the_alias_through():
    assert_report_survives_rescale(validation_loss_func, model_output(), profile="0.6")
    with pytest.raises(AssertionError, match=r"\(profile 0\.7, num_microbatches=2"):
        assert_report_survives_rescale(validation_loss_func, model_output(), profile="0.7")


def test_zero_loss_cannot_prove_anything():
    with pytest.raises(ValueError, match="the loss is zero"):
        assert_report_survives_rescale(validation_loss_func, torch.zeros(4, 3))
