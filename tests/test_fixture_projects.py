"""Multi-file fixture projects (``fixtures/<CODE>/<case>/``): whole-project analysis, checked statically
and at run time.

Each folder is checked as one project, the way the command line checks a repository: the project index
(``index/``) gives each function its context, and calls into the folder's other modules use their
summaries. Then the folder's ``loss.py`` goes through megatron-core's real rescale: a positive's
expected report entries, and only they, move; a negative's report does not. Fixed by ``check --fix``,
the report no longer moves and the loss and its gradient are unchanged.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import pathlib
import shutil
import sys
import types
from collections.abc import Iterator

import pytest
from fixture_corpus import CAPTURE_CODE, PROJECT_LINE, Kind, ProjectCase, project_cases, report_path_pattern
from test_fixtures_runtime import Run, assert_claim, assert_same_training, run_loss_func

from flux_alias_lint.cli import main
from flux_alias_lint.index.project import ProjectIndex
from flux_alias_lint.lint import check_text
from flux_alias_lint.source import decode

PROJECT_CASES = project_cases()
FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"

# Host fixtures (`facts/hosts.py`) that megatron-core's rescale cannot prove: their host is another
# library or a megatron-core release before 0.7. Each is proven under its own host instead, in
# test_fixtures_runtime.py: a positive by `verify`, a negative under the release its pin names.
NOT_RUN_UNDER_MEGATRON = {
    "FAL005/host_transformers_training_step": "transformers 4.46.0's Trainer.training_step",
    "FAL005/neg_host_transformers_training_step_after_4_46": "transformers 4.57's Trainer",
    "FAL005/neg_pinned_at_the_root_trainer_in_a_package": "transformers 4.46.2's Trainer (pinned at the project's root)",
    "FAL005/host_trainer_imported_under_try": "transformers 4.46.0's Trainer.training_step",
    "FAL005/neg_host_trainer_imported_under_try_after_4_46": "transformers 4.57's Trainer",
    "FAL005/host_transformers_compute_loss": "transformers 4.54+'s Trainer.compute_loss",
    "FAL005/host_compute_loss_func_set_by_the_trainer": "transformers 4.54+'s Trainer.compute_loss",
    "FAL005/host_second_of_two_rescales": "transformers 4.54+'s Trainer.compute_loss",
    "FAL005/neg_host_transformers_compute_loss_turned_off": "transformers 4.57's Trainer.compute_loss",
    "FAL005/host_accelerate_backward": "accelerate 0.12's Accelerator.backward",
    "FAL002/neg_in_place_caller_rescales_a_rebound_loss": "its own training step, run below",
    "FAL005/accelerate_backward_of_a_view_of_the_loss": "accelerate 0.12's Accelerator.backward (test_host_models.py)",
    "FAL005/neg_accelerate_backward_of_a_rebound_loss": "accelerate 0.12's Accelerator.backward (test_host_models.py)",
    "FAL005/neg_host_accelerate_backward_0_13": "accelerate 0.13's Accelerator.backward",
    "FAL005/host_accelerate_backward_of_an_unpacked_pair": "accelerate 0.12's Accelerator.backward",
    "FAL005/neg_host_accelerate_backward_of_an_unpacked_pair_0_13": "accelerate 0.13's Accelerator.backward",
    "FAL005/host_accelerate_backward_of_a_loss_kept_in_the_loop": "accelerate 0.12's Accelerator.backward (test_host_models.py)",
    "FAL005/neg_accelerate_backward_of_a_loss_kept_in_the_loop_default_steps": (
        "accelerate 0.12's Accelerator.backward at its default 1 step (test_host_models.py)"
    ),
    "FAL005/host_composer": "Composer 0.8's Trainer._train_microbatch",
    "FAL005/host_composer_total": "Composer 0.10+'s Trainer._train_microbatch ('total' taken as the loss)",
    "FAL005/neg_composer_total_other_key": "Composer 0.10+'s Trainer._train_microbatch ('total' taken as the loss)",
    "FAL005/neg_composer_no_total": "Composer 0.10+'s Trainer._train_microbatch (a new sum as the loss)",
    "FAL005/neg_composer_bare_after_0_9": "Composer 0.10+'s Trainer._train_microbatch (a new sum as the loss)",
    "FAL005/neg_composer_own_checkout": "Composer 0.10+'s Trainer._train_microbatch (a new sum as the loss)",
    "FAL005/host_composer_total_through_loss_fn": "Composer 0.10+'s Trainer._train_microbatch ('total' taken as the loss)",
    "FAL005/host_composer_through_a_loss_fn_attribute": "Composer 0.8's Trainer._train_microbatch",
    "FAL005/neg_composer_classifier_bare_loss_fn": "Composer 0.10+'s Trainer._train_microbatch (a new sum as the loss)",
    "FAL005/neg_host_lightning_out_of_place": "Lightning's out-of-place scaling",
    "FAL005/neg_host_megatron_before_0_7": "megatron-core 0.6's out-of-place division",
    "FAL005/neg_trainer_training_step_overridden": "transformers 4.46.0's Trainer (test_host_models.py)",
    "FAL005/neg_trainer_compute_loss_func_never_called": "transformers 4.57's Trainer, never calling the function",
    "FAL005/neg_trainer_gradient_accumulation_steps_one": "transformers 4.46.0's Trainer at 1 step (test_host_models.py)",
    "FAL005/host_trainer_base_under_a_try_import": "transformers 4.46.0's Trainer.training_step",
    "FAL005/trainer_write_after_capture_pinned_after_4_46": "its own in-place write, under transformers 4.57's Trainer",
    "FAL005/host_trainer_model_forward": "transformers 4.46.0's Trainer.training_step on the model's forward",
    "FAL005/host_trainer_pretrained_model_tuple_output": "transformers 4.46.0's Trainer.training_step on the model's forward",
    "FAL005/neg_trainer_model_forward_one_step": "transformers 4.46.0's Trainer at 1 step (test_host_models.py)",
    "FAL005/neg_trainer_model_forward_after_4_46": "transformers 4.57.1's Trainer (test_host_models.py)",
    "FAL005/neg_trainer_model_forward_own_compute_loss": "transformers 4.46.0's Trainer, its compute_loss its own",
    "FAL005/neg_trainer_model_forward_keeps_a_number": "transformers 4.46.0's Trainer, a number kept",
    "FAL005/own_loop_model_from_a_module_namespace": "its own training loop, run below",
    "FAL005/neg_own_loop_model_named_in_a_module_namespace": "its own training loop, run below",
    "FAL005/own_loop_model_from_a_decorator_registry": "its own training loop, run below",
    "FAL005/neg_own_loop_model_from_a_decorator_registry_keeps_copies": "its own training loop, run below",
    "FAL005/own_loop_task_returns_a_dict_of_losses": "its own training loop, run below",
    "FAL005/neg_own_loop_task_keeps_a_term_of_its_dict": "its own training loop, run below",
    "FAL005/host_trainer_compute_loss_override_returns_the_model_loss": (
        "transformers 4.46.0's Trainer.training_step under the project's compute_loss (test_host_models.py)"
    ),
    "FAL005/neg_trainer_compute_loss_override_returns_a_new_loss": (
        "transformers 4.46.0's Trainer under the project's compute_loss (test_host_models.py)"
    ),
    "FAL005/host_trainer_model_forward_accepts_loss_kwargs": "transformers 4.57.1's Trainer.compute_loss (test_host_models.py)",
    "FAL005/neg_trainer_model_forward_accepts_loss_kwargs_off": "transformers 4.57.1's Trainer (test_host_models.py)",
}


def _runs_under_megatron(case: ProjectCase) -> None:
    host = NOT_RUN_UNDER_MEGATRON.get(case.id)
    if host is not None:
        pytest.skip(f"proven under {host}, not megatron-core's rescale")


def _findings(folder: pathlib.Path, unfixable_only: bool = False) -> list[str]:
    index = ProjectIndex([str(folder.resolve())])
    reached = index.reached_by_path()
    lines = []
    for path in sorted(folder.rglob("*.py")):
        source = decode(path.read_bytes(), str(path))
        found, _ = check_text(source, reaches=reached.get(os.path.realpath(path), {}))
        for f in found:
            if unfixable_only and f.fixable:
                continue
            context = "" if f.context == "unreached" else f" {f.context}"
            lines.append(
                f"{path.relative_to(folder).as_posix()}:{f.line}:{f.column}: {f.code} {f.report_path}{context}"
            )
    return lines


def _run(folder: pathlib.Path) -> Run:
    """Import `folder/loss.py` with the folder on the path, its modules fresh and forgotten afterwards."""
    names = {p.stem for p in folder.glob("*.py")}
    sys.path.insert(0, str(folder))
    try:
        for name in names:
            sys.modules.pop(name, None)
        return run_loss_func(folder / "loss.py")
    finally:
        sys.path.remove(str(folder))
        for name in names:
            sys.modules.pop(name, None)


def test_the_cases_not_run_under_megatron_exist():
    assert set(NOT_RUN_UNDER_MEGATRON) <= {case.id for case in PROJECT_CASES}


def test_there_are_project_cases_of_each_kind():
    kinds = {case.kind() for case in PROJECT_CASES}
    assert kinds == {Kind.POSITIVE, Kind.NEGATIVE}
    assert all(case.entry.exists() for case in PROJECT_CASES)


@pytest.mark.parametrize("case", PROJECT_CASES, ids=lambda c: c.id)
def test_project_findings(case: ProjectCase):
    assert all(PROJECT_LINE.match(line) for line in case.expected()), "malformed expected line"
    assert _findings(case.folder) == case.expected()


@pytest.mark.parametrize("case", PROJECT_CASES, ids=lambda c: c.id)
def test_project_case_is_honest(case: ProjectCase):
    _runs_under_megatron(case)
    run = _run(case.folder)
    captures = case.rule_dir == CAPTURE_CODE
    assert_claim(case.kind(), run, captures)
    if captures:  # the kept values that move: the ones the findings name, as report entries are
        patterns = [report_path_pattern(path) for path in case.expected_captures()]
        assert all(any(p.match(moved) for p in patterns) for moved in run.captures_moved), run.captures_moved
        assert all(any(p.match(moved) for moved in run.captures_moved) for p in patterns), run.captures_moved
    if case.kind() is Kind.POSITIVE:
        patterns = [report_path_pattern(path) for path in case.expected_report_paths()]
        assert all(any(p.match(moved) for p in patterns) for moved in run.moved), run.moved
        assert all(any(p.match(moved) for moved in run.moved) for p in patterns), run.moved


@pytest.mark.parametrize("case", [c for c in PROJECT_CASES if c.kind() is Kind.POSITIVE], ids=lambda c: c.id)
def test_project_fix_stops_the_rescale_leaking(case: ProjectCase, tmp_path: pathlib.Path, capsys):
    copy = tmp_path / case.folder.name
    shutil.copytree(case.folder, copy)
    # A report entry a helper made is shown at its call, where no copy fits: its fix goes into the helper.
    unfixable = _findings(case.folder, unfixable_only=True)
    assert main(["check", str(copy), "--fix", "--no-cache", "-q"]) == (1 if unfixable else 0), capsys.readouterr()
    assert _findings(copy) == unfixable
    if unfixable:
        pytest.skip("a finding --fix cannot edit: the report is made by a helper, shown at its call")
    _runs_under_megatron(case)
    before, after = _run(case.folder), _run(copy)
    assert not after.moved, f"the report still moves after --fix: {after.moved}"
    assert not after.captures_moved, f"kept values still move after --fix: {after.captures_moved}"
    assert_same_training(before, after)


@pytest.mark.parametrize(
    ("fixture", "factor"),
    [
        ("FAL002/in_place_caller_rescales_a_cast_of_the_loss", 0.5),
        ("FAL002/neg_in_place_caller_rescales_a_rebound_loss", 1.0),
    ],
)
def test_an_own_training_step_run_moves_the_report_as_check_says(fixture: str, factor: float) -> None:
    # The project's own step, run: its in-place division reaches the report through `loss.float()` (the loss
    # itself), and not through `loss + aux` (a new tensor). `check`: an in-place-caller error, and nothing.
    import torch

    folder = FIXTURES / fixture
    with _project_module(folder, "trainer") as trainer:
        output = torch.arange(1.0, 5.0, requires_grad=True)
        arguments = (2, 0.5) if "aux_weight" in inspect.signature(trainer.train_step).parameters else (2,)
        [reported] = trainer.train_step(output, *arguments)
    assert reported.item() == pytest.approx(10.0 * factor)
    assert bool((folder / "expected").read_text().strip()) is (factor != 1.0)


@pytest.mark.parametrize(
    "fixture",
    [
        "FAL002/in_place_caller_report_copied_from_the_output",
        "FAL002/neg_in_place_caller_report_copies_numbers",
        "FAL005/own_loop_model_from_a_module_namespace",
        "FAL005/neg_own_loop_model_named_in_a_module_namespace",
        "FAL005/own_loop_model_from_a_decorator_registry",
        "FAL005/neg_own_loop_model_from_a_decorator_registry_keeps_copies",
        "FAL005/own_loop_task_returns_a_dict_of_losses",
        "FAL005/neg_own_loop_task_keeps_a_term_of_its_dict",
    ],
)
def test_an_own_loop_run_moves_what_it_keeps_as_check_says(fixture: str) -> None:
    # The project's own loop (`train.main`), run accumulating over 1 step and over 2: the value it logs or keeps
    # reads half the loss at 2 (the loop's `loss /= 2` reached it) exactly where `check` gives an error.
    folder = FIXTURES / fixture
    with _project_module(folder, "train") as train:
        once, twice = train.main(1), train.main(2)
    assert twice / once == pytest.approx(0.5 if (folder / "expected").read_text().strip() else 1.0)


@contextlib.contextmanager
def _project_module(folder: pathlib.Path, name: str) -> Iterator[types.ModuleType]:
    """The module `name` of a fixture project, imported with the folder on the path, its modules fresh and
    forgotten afterwards."""
    names = {p.stem for p in folder.glob("*.py")}
    sys.path.insert(0, str(folder))
    try:
        for each in names:
            sys.modules.pop(each, None)
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))
        for each in names:
            sys.modules.pop(each, None)
