import subprocess
import sys
import textwrap

import torch

from flux_alias_lint.harness.pytest_plugin import MegatronRescale


def loss_func(output_tensor):
    loss = output_tensor.sum()
    return loss, {"lm loss": loss.detach()}  # noqa: FAL001 -- deliberate alias under test


def test_plugin_is_registered_through_its_entry_point(pytestconfig):
    assert pytestconfig.pluginmanager.get_plugin("flux-alias-lint") is not None


def test_fixture_defaults_to_the_installed_release(megatron_rescale):
    assert megatron_rescale == MegatronRescale("installed")
    loss, report = megatron_rescale(loss_func(torch.ones(4)), cp_group_size=1)
    assert loss.item() == 2.0 and report["lm loss"].item() == 2.0


def test_fixture_asserts_with_its_profile():
    MegatronRescale("0.6").assert_report_survives(loss_func, torch.ones(4))


def test_megatron_profile_option_selects_the_profile(tmp_path):
    (tmp_path / "test_profile.py").write_text(
        textwrap.dedent(
            """
            import pytest, torch

            def loss_func(output_tensor):
                loss = output_tensor.sum()
                return loss, {"lm loss": loss.detach()}

            def test_profile(megatron_rescale):
                assert megatron_rescale.profile == "0.12"
                with pytest.raises(AssertionError, match="profile 0.12"):
                    megatron_rescale.assert_report_survives(loss_func, torch.ones(4))
            """
        )
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--megatron-profile=0.12",
            str(tmp_path),
        ],
        capture_output=True,
        check=False,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_failing_helper_shows_the_message_not_the_helpers_source(tmp_path):
    (tmp_path / "test_alias.py").write_text(
        textwrap.dedent(
            """
            import torch
            from flux_alias_lint.harness import assert_report_survives_rescale

            def loss_func(output_tensor):
                loss = output_tensor.sum()
                return loss, {"lm loss": loss.detach()}

            def test_helper():
                assert_report_survives_rescale(loss_func, torch.ones(4) * 1.0, profile="latest")

            def test_fixture(megatron_rescale):
                megatron_rescale.assert_report_survives(loss_func, torch.ones(4) * 1.0)
            """
        )
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        check=False,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 1
    assert run.stdout.count("does not survive Megatron's in-place rescale") >= 2
    assert "raise AssertionError(" not in run.stdout and "return assert_report_survives_rescale(" not in run.stdout
