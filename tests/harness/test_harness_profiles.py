import pytest
import torch

from flux_alias_lint.harness import PROFILES, megatron_rescale, resolve_profile
from flux_alias_lint.harness.profiles import profile_for_release


def aliased_outputs(arity: int = 2, num_tokens: int = 4):
    loss = (torch.tensor([3.0, 5.0], requires_grad=True) * 1.0).sum()  # 8.0
    report = {"loss": (loss.detach(), torch.tensor(7))}  # noqa: FAL001 -- deliberate alias under test
    return (loss, report) if arity == 2 else (loss, torch.tensor(num_tokens), report)


@pytest.mark.parametrize(
    ("profile", "arity", "per_token", "expected_loss", "expected_report"),
    [
        ("0.6", 2, False, 8.0 / 2, 8.0),  # a copy: the report keeps the true value
        ("2024-04-29", 2, False, 8.0 / 2, 8.0),
        ("2024-04-29", 3, False, 8.0, 8.0),  # 3-tuple untouched
        ("0.7", 2, False, 8.0 / 2, 8.0 / 2),  # in place, no cp factor
        ("0.7", 3, False, 8.0 / 4 / 2, 8.0 / 4 / 2),
        ("0.7", 3, True, 8.0, 8.0),  # per-token loss: nothing is rescaled
        ("0.12", 2, False, 8.0 * 3 / 2, 8.0 * 3 / 2),
        ("0.12", 3, False, 8.0 / 4 * 3 / 2, 8.0 / 4 * 3 / 2),  # 0.12 alone multiplies the 3-tuple by cp
        ("0.13", 3, False, 8.0 / 4 / 2, 8.0 / 4 / 2),
        ("latest", 2, False, 8.0 * 3 / 2, 8.0 * 3 / 2),
    ],
)
def test_profile_rescales_like_its_release(profile, arity, per_token, expected_loss, expected_report):
    loss, report = megatron_rescale(
        aliased_outputs(arity),
        num_microbatches=2,
        cp_group_size=3,
        calculate_per_token_loss=per_token,
        profile=profile,
    )
    assert loss.item() == expected_loss
    assert report["loss"][0].item() == expected_report
    assert report["loss"][1].item() == 7


def test_clamped_num_tokens_from_0_15_on():
    assert megatron_rescale(aliased_outputs(3, num_tokens=0), num_microbatches=2, profile="0.15")[0].item() == 4.0
    assert megatron_rescale(aliased_outputs(3, num_tokens=0), num_microbatches=2, profile="0.13")[0].isinf()


def test_three_tuple_is_an_error_before_0_7():
    with pytest.raises(ValueError, match=r"expects a loss function to return \(loss, report\); got 3"):
        megatron_rescale(aliased_outputs(3), num_microbatches=2, profile="0.6")


@pytest.mark.parametrize(
    ("name", "profile"),
    [
        ("latest", "0.15"),
        ("0.9.0", "0.7"),
        ("0.8", "0.7"),
        ("0.14.0rc1", "0.13"),
        ("0.5.0", "0.6"),
        ("0.16.1", "0.15"),
    ],
)
def test_resolve_profile_by_name_or_release(name, profile):
    assert resolve_profile(name).name == profile


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(ValueError, match="use one of latest, installed, 0.6"):
        resolve_profile("newest")


@pytest.mark.parametrize("release", ["0.17.0", "1.2.0", "0.99"])
def test_a_release_newer_than_any_pinned_one_is_an_error_not_a_fallback(release):
    with pytest.raises(ValueError, match="newer than any release flux-alias-lint models"):
        resolve_profile(release)


def test_every_profile_but_the_unreleased_commit_is_pinned_to_the_releases_it_resolves_from():
    for profile in PROFILES.values():
        for release in profile.pinned_to:
            assert profile_for_release(release) is profile
    assert [name for name, profile in PROFILES.items() if not profile.pinned_to] == ["2024-04-29"]
