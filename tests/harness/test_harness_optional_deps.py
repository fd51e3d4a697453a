"""torch and megatron-core are optional: the linter never imports them, the harness says how to get them."""

import subprocess
import sys
import textwrap


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False)


def test_importing_the_package_and_running_the_linter_never_imports_torch(tmp_path):
    (tmp_path / "loss.py").write_text(
        "def loss_func(output_tensor):\n    loss = output_tensor.sum()\n    return loss, {'lm loss': loss.detach()}\n"
    )
    run = run_python(
        f"""
        import contextlib, importlib, io, pkgutil, sys
        import flux_alias_lint, flux_alias_lint.harness, flux_alias_lint.harness.pytest_plugin
        for module in pkgutil.iter_modules(flux_alias_lint.__path__):
            if module.name not in ("harness", "__main__"):
                importlib.import_module(f"flux_alias_lint.{{module.name}}")
        with contextlib.redirect_stdout(io.StringIO()):
            flux_alias_lint.cli.main(["check", {str(tmp_path)!r}])
        loaded = sorted(name for name in sys.modules if name.split(".")[0] in ("torch", "megatron"))
        assert not loaded, loaded
        """
    )
    assert run.returncode == 0, run.stderr


def test_harness_without_torch_says_what_to_install():
    run = run_python(
        """
        import sys
        sys.modules["torch"] = None  # as if torch were not installed
        import flux_alias_lint.harness as harness
        try:
            harness.megatron_rescale
        except harness.HarnessUnavailableError as error:
            print(error)
        """
    )
    assert run.returncode == 0, run.stderr
    assert "pip install '/path/to/flux-alias-lint[harness]'" in run.stdout
    assert "torch==2.13.0" in run.stdout


def test_installed_profile_without_megatron_says_what_to_install():
    run = run_python(
        """
        import sys, torch
        sys.modules["megatron"] = None
        from flux_alias_lint.harness import HarnessUnavailableError, megatron_rescale
        loss = torch.ones(()) * 2
        assert megatron_rescale((loss, {}), num_microbatches=2)[0].item() == 1.0  # built-in profiles need no megatron
        try:
            megatron_rescale((loss, {}), num_microbatches=2, profile="installed")
        except HarnessUnavailableError as error:
            print(error)
        """
    )
    assert run.returncode == 0, run.stderr
    assert "needs megatron-core" in run.stdout and "flux-alias-lint[harness]" in run.stdout


def test_every_public_harness_name_resolves():
    import flux_alias_lint.harness as harness

    assert set(harness.__all__) == {"HarnessUnavailableError", *harness._EXPORTS}
    assert all(getattr(harness, name) is not None for name in harness.__all__)
