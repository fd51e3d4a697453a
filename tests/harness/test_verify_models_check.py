"""`verify` models what `check` read: the schedule a hand-off reaches (the project's own copy when it ships one)
and the settings the project computes (both values run where the setting is not a literal)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from flux_alias_lint.cli import main
from flux_alias_lint.harness.schedule import run_schedule, stand_in_model

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "FAL001"
VENDORED_CORE = FIXTURES / "vendored_core_schedule_divides_a_copy"
COPYING = (
    "vendored_core_schedule_divides_a_copy",
    "vendored_schedule_divides_a_copy",
    "checkout_beside_divides_a_copy",
)
SCHEDULE = VENDORED_CORE / "megatron" / "core" / "pipeline_parallel" / "schedules.py"


def _run(capsys: pytest.CaptureFixture[str], command: str, *args: str) -> tuple[int, list[dict[str, object]]]:
    status = main([command, *args, "--format", "json"])
    return status, json.loads(capsys.readouterr().out)


def _fork(tmp_path: Path, old: str = "", new: str = "") -> Path:
    """The vendored fixture as a project of its own, its schedule's `old` text replaced by `new`."""
    project = tmp_path / "fork"
    shutil.copytree(VENDORED_CORE, project)
    (project / "pyproject.toml").write_text("[project]\nname = 'fork'\n")
    schedule = project / SCHEDULE.relative_to(VENDORED_CORE)
    text = schedule.read_text()
    assert old in text
    schedule.write_text(text.replace(old, new))
    return project


@pytest.mark.parametrize("fixture", COPYING)
def test_a_function_handed_to_an_own_schedule_that_copies_is_not_confirmed(
    capsys: pytest.CaptureFixture[str], fixture: str
) -> None:
    # `check`: unreached (or escapes), a warning, as the project's own schedule divides a copy. `verify` runs that
    # schedule, not the installed megatron-core's (which would move it ×0.50), and sees nothing move.
    [finding] = _run(capsys, "check", str(FIXTURES / fixture), "--no-cache")[1]
    assert finding["context"] in ("unreached", "escapes") and finding["severity"] == "warning"
    status, [verdict] = _run(capsys, "verify", str(FIXTURES / fixture))
    assert status == 1 and not verdict["confirmed"], verdict["detail"]
    assert "did not move under the project's own schedule" in str(verdict["detail"])
    assert "installed megatron-core" not in str(verdict["modelled"])


def test_an_own_schedule_that_rescales_in_place_confirms_under_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _fork(tmp_path, "output_tensor = loss / num_microbatches", "loss /= num_microbatches")
    [finding] = _run(capsys, "check", str(project), "--no-cache")[1]
    assert finding["context"] == "megatron"
    status, [verdict] = _run(capsys, "verify", str(project))
    assert status == 0 and verdict["confirmed"], verdict["detail"]
    assert str(verdict["modelled"]).startswith("the project's own schedule ")
    assert str(verdict["modelled"]).split(" (")[0].endswith("megatron/core/pipeline_parallel/schedules.py")
    # The real schedule at hand is the installed release's, which the project does not run: not claimed.
    assert verdict["confirmed_by"] == "rescale"
    assert "not run through the installed forward_backward_no_pipelining" in str(verdict["detail"])


IN_PLACE = ("output_tensor = loss / num_microbatches", "loss /= num_microbatches\n            output_tensor = loss")
KERNELS = (
    "from megatron.core import parallel_state\n",
    "from megatron.core import parallel_state\n"
    "import kernels_not_installed_here as kernels\n"
    "from kernels_not_installed_here.language import constexpr\n"
    "from json.training_of_this_fork import get_args\n\n"  # a part an installed package lacks
    "KERNELS_3 = kernels.__version__ >= '3'\n\n\n"
    "@kernels.autotune(configs=[kernels.Config({'BLOCK': 64})], key=['n'])\n"
    "@kernels.jit\n"
    "def _fused(x, BLOCK: constexpr):\n"
    "    return x\n\n\n"
    "class _Op(kernels.Function):\n"
    "    pass\n",
)


def _edit(project: Path, old: str, new: str) -> None:
    schedule = project / SCHEDULE.relative_to(VENDORED_CORE)
    text = schedule.read_text()
    assert old in text
    schedule.write_text(text.replace(old, new))


def test_a_module_not_installed_here_is_stood_in_while_the_schedule_is_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Megatron-LM's MoE kernels `import triton` at the top of a module its schedule's package imports.
    project = _fork(tmp_path, *IN_PLACE)
    _edit(project, *KERNELS)
    status, [verdict] = _run(capsys, "verify", str(project))
    assert status == 0 and verdict["confirmed"], verdict["detail"]
    assert str(verdict["modelled"]).startswith("the project's own schedule ")
    stood_in = "kernels_not_installed_here, json.training_of_this_fork"
    assert f"(forward_step; {stood_in} not installed here: stood in)" in str(verdict["modelled"])
    assert not any(name.startswith(("kernels_not_installed_here", "json.training")) for name in sys.modules)


def test_an_own_schedule_that_runs_what_is_not_installed_here_is_not_confirmed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _fork(tmp_path, *IN_PLACE)
    _edit(project, *KERNELS)
    _edit(project, "loss /= num_microbatches", "loss /= num_microbatches\n            kernels.synchronize()")
    status, [verdict] = _run(capsys, "verify", str(project))
    assert status == 1 and not verdict["confirmed"]
    assert (
        "ModuleNotFoundError: No module named 'kernels_not_installed_here': stood in to import the schedule, "
        "which needs kernels_not_installed_here.synchronize" in str(verdict["detail"])
    ), verdict["detail"]


@pytest.mark.parametrize(
    ("missing", "said"),
    [
        # The fork's own part, absent: never stood in for.
        (
            "import megatron.core.fused_kernels_of_this_fork\n",
            "No module named 'megatron.core.fused_kernels_of_this_fork'",
        ),
        ("from megatron.core import fused_kernels_of_this_fork\n", "ImportError: cannot import name"),
        ("raise RuntimeError('torch.cuda.Stream requires CUDA support')\n", "RuntimeError: torch.cuda.Stream"),
    ],
)
def test_an_own_schedule_that_cannot_be_imported_is_declined(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], missing: str, said: str
) -> None:
    project = _fork(tmp_path, "from megatron.core import parallel_state\n", missing)
    status, [verdict] = _run(capsys, "verify", str(project))
    assert status == 1 and not verdict["confirmed"]
    detail = str(verdict["detail"])
    assert detail.startswith("declined: it is handed to the project's own schedule "), detail
    assert "it does not import here (" in detail and said in detail, detail
    assert "megatron" in sys.modules


def test_an_own_schedule_taking_arguments_no_release_passes_is_declined(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _fork(
        tmp_path, "    collect_non_loss_data=False,\n", "    collect_non_loss_data=False,\n    *,\n    router,\n"
    )
    status, [verdict] = _run(capsys, "verify", str(project))
    assert status == 1 and "its forward_step needs router, which Megatron's releases do not pass" in str(
        verdict["detail"]
    )


def test_the_installed_megatron_is_back_after_an_own_schedule_ran(capsys: pytest.CaptureFixture[str]) -> None:
    import megatron.core.pipeline_parallel.schedules as installed

    _run(capsys, "verify", str(VENDORED_CORE))
    assert sys.modules["megatron.core.pipeline_parallel.schedules"] is installed
    assert hasattr(installed, "forward_step_calc_loss")


def _forward_step_of(project: Path):  # the fixture's `train.forward_step`, imported from the project
    sys.path.insert(0, str(project))
    try:
        import importlib

        for name in ("train", "loss"):
            sys.modules.pop(name, None)
        return importlib.import_module("train").forward_step
    finally:
        sys.path.remove(str(project))
        for name in ("train", "loss"):
            sys.modules.pop(name, None)


def test_the_vendored_fixture_moves_under_megatron_core_and_not_under_its_own_schedule() -> None:
    # Its alias is real: megatron-core's real schedule (one gloo rank on the CPU) moves the report ×0.50...
    forward_step = _forward_step_of(VENDORED_CORE)
    batch = torch.arange(1.0, 9.0).view(2, 4)
    model = stand_in_model()
    [one] = run_schedule(forward_step, model, batch=batch, num_microbatches=1)
    reports = run_schedule(forward_step, model, batch=batch, num_microbatches=2)
    assert [r["lm loss"].item() for r in reports] == pytest.approx([one["lm loss"].item() * 0.5] * 2)
    # ...and the fork's own schedule, which is what it runs, leaves it as it was.
    from flux_alias_lint.harness.own_schedule import load

    own = load(str(SCHEDULE))
    loss = torch.arange(1.0, 5.0, requires_grad=True).sum() * 1.0
    _, report = own.rescale(
        (loss, {"lm loss": loss.detach()}), num_microbatches=2, cp_group_size=1, calculate_per_token_loss=False
    )
    assert report["lm loss"].item() == loss.item() == 10.0


def test_an_overlay_package_is_imported_under_its_own_name_beside_the_installed_megatron(tmp_path: Path) -> None:
    # Primus' `primus/backends/megatron/core/pipeline_parallel/schedules.py` is a module of `primus`, importing the
    # installed `megatron.core`; as `megatron.core...` from `primus/backends` it imports itself half-made.
    from flux_alias_lint.harness.own_schedule import load

    package = tmp_path / "overlay" / "backends" / "megatron" / "core" / "pipeline_parallel"
    package.mkdir(parents=True)
    for folder in [package, *package.parents][:5]:
        (folder / "__init__.py").write_text("")
    (package / "schedules.py").write_text(SCHEDULE.read_text().replace(*IN_PLACE))
    import megatron.core.parallel_state as installed

    own = load(str(package / "schedules.py"))
    assert own.module.__name__ == "overlay.backends.megatron.core.pipeline_parallel.schedules"
    assert own.module.parallel_state is installed and own.absent == ()
    loss = torch.arange(1.0, 5.0, requires_grad=True).sum() * 1.0
    _, report = own.rescale(
        (loss, {"lm loss": loss.detach()}), num_microbatches=2, cp_group_size=1, calculate_per_token_loss=False
    )
    assert report["lm loss"].item() == 5.0
    assert sys.modules["megatron.core.parallel_state"] is installed and "overlay" not in sys.modules


def test_a_computed_per_token_setting_is_run_both_ways(capsys: pytest.CaptureFixture[str]) -> None:
    fixture = FIXTURES / "three_tuple_per_token_computed"
    [finding] = _run(capsys, "check", str(fixture), "--no-cache")[1]
    assert finding["context"] == "megatron" and finding["severity"] == "error"
    where = "fixtures/FAL001/three_tuple_per_token_computed/arguments.py:15"
    assert f"unless calculate_per_token_loss (computed at {where}) is on" in str(finding["message"])
    status, [verdict] = _run(capsys, "verify", str(fixture))
    detail = str(verdict["detail"])
    assert status == 0 and verdict["confirmed"], detail
    off, on = detail.split("; with it on: ")
    assert off.startswith('with calculate_per_token_loss off: CONFIRMED report["lm loss"] ×0.12 before fix')
    assert on.startswith("UNCONFIRMED declined, per-token: Megatron does not rescale the 3-tuple")
    assert f"under calculate_per_token_loss on (computed at {where})" in on
    assert str(verdict["modelled"]).endswith(f"calculate_per_token_loss off (computed at {where}); then with it on")


def test_a_literal_setting_is_run_one_way(capsys: pytest.CaptureFixture[str]) -> None:
    status, [verdict] = _run(capsys, "verify", str(FIXTURES / "three_tuple_under_per_token_loss"))
    assert status == 1 and "with it on" not in str(verdict["detail"]) + str(verdict["modelled"])


@pytest.mark.parametrize("given", ["--calculate-per-token-loss", "--no-calculate-per-token-loss"])
def test_the_option_decides_a_computed_setting(capsys: pytest.CaptureFixture[str], given: str) -> None:
    status, [verdict] = _run(capsys, "verify", str(FIXTURES / "three_tuple_per_token_computed"), given)
    assert "with it on" not in str(verdict["detail"])
    assert verdict["confirmed"] is (given == "--no-calculate-per-token-loss")


# The fixture projects whose loss function goes to the project's own schedule, which divides a copy: `check` says no
# host rescales it (a warning), and `verify`, running that schedule, sees nothing move.
OWN_SCHEDULE_COPIES = {f"FAL001/{name}" for name in COPYING}
SPARED = "leaves a 3-tuple's loss as it is under"  # `check`: a setting of the project spares it (a warning)


def test_check_and_verify_agree_on_every_fixture_project(capsys: pytest.CaptureFixture[str]) -> None:
    """An error of `check` is confirmed by `verify`; a warning a setting spares is not, nor one whose function goes
    to the project's own copying schedule; any other warning (nothing seen to rescale it) is confirmed under the
    rescale it warns of."""
    folders = sorted(p for p in FIXTURES.parent.glob("FAL*/*") if p.is_dir())
    assert {f"FAL001/{p.name}" for p in folders if p.parent.name == "FAL001"} >= OWN_SCHEDULE_COPIES
    found = _run(capsys, "check", *map(str, folders), "--no-cache")[1]
    verdicts = _run(capsys, "verify", *map(str, folders))[1]
    key = lambda row: (row["path"], row["line"], row["column"], row["code"])  # noqa: E731
    assert sorted(map(key, verdicts)) == sorted(map(key, found))
    verdict_of = {key(v): v for v in verdicts}
    disagree = []
    for finding in found:
        verdict = verdict_of[key(finding)]
        fixture = "/".join(Path(str(finding["path"])).resolve().relative_to(FIXTURES.parent).parts[:2])
        unconfirmed = SPARED in str(finding["message"]) or fixture in OWN_SCHEDULE_COPIES
        if finding["severity"] == "error":
            unconfirmed = False
        if verdict["confirmed"] is unconfirmed:
            disagree.append(f"{key(finding)} [{finding['context']}, {finding['severity']}]: {verdict['detail']}")
    assert disagree == []
