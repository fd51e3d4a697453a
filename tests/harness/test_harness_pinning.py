"""Pin the built-in profiles to the real megatron-core releases they model."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from flux_alias_lint.harness import installed_megatron_version, megatron_rescale
from flux_alias_lint.harness.pinning import CASES, matching_profiles, mismatches
from flux_alias_lint.harness.profiles import profile_for_release

ROOT = Path(__file__).resolve().parents[2]


def test_installed_release_matches_exactly_its_own_profile():
    # Every CI run: the installed megatron-core against its built-in profile, on the whole matrix.
    expected = profile_for_release(installed_megatron_version())
    assert matching_profiles() == [expected.name], mismatches(expected.name)[:3]


def test_the_matrix_tells_every_two_profiles_apart():
    from flux_alias_lint.harness import PROFILES

    names = list(PROFILES)
    assert all(mismatches(a, b) for i, a in enumerate(names) for b in names[i + 1 :])
    assert len(CASES) == 48


def test_installed_rescale_needs_no_process_group_and_keeps_the_report_object():
    loss = (torch.ones(3, requires_grad=True) * 2.0).sum()
    report = {"lm loss": loss.detach().clone()}
    rescaled, stored = megatron_rescale((loss, report), num_microbatches=2, cp_group_size=3, profile="installed")
    assert rescaled is loss and stored is report
    assert loss.item() == 9.0 and report["lm loss"].item() == 6.0


def _pin_script():
    spec = importlib.util.spec_from_file_location("pin_profiles", ROOT / "scripts" / "pin_profiles.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_every_pinned_release_matches_exactly_its_own_profile():
    pin = _pin_script()
    releases = [release for release in pin.pinned_releases() if (pin.DEFAULT_DIR / release).exists()]
    if not releases:
        pytest.skip(f"no megatron-core releases under {pin.DEFAULT_DIR}: python scripts/pin_profiles.py --install")
    results = pin.pin(pin.DEFAULT_DIR, releases)
    assert [r for r in results if not r["ok"]] == []
