"""`verify` under the hosts that rescale a returned loss in place (harness/hosts.py): the real transformers and
accelerate releases from the cache, installed once by the fixture below, and the emulated lines.

The findings are made here (a context and chain given to the analysis as the index would give them), on the
small programs in host_cases/, so each test holds whatever the index finds today.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flux_alias_lint.harness import hosts
from flux_alias_lint.harness.verify import BY_HOST, Settings, Verdict, verify_source
from flux_alias_lint.index.reach import IN_PLACE_CALLER, Reach, Step
from flux_alias_lint.selection import DEFAULT_SELECTION
from flux_alias_lint.source import read_source

CASES = Path(__file__).resolve().parent / "host_cases"
TRAINER = CASES / "trainer_subclass.py"
OWN_LOOP = CASES / "own_loop.py"


@pytest.fixture(scope="module")
def real_hosts() -> None:
    """Every pinned host release in the cache: pip installs the missing ones (once; later runs find them)."""
    for release in hosts.releases():
        hosts.install(release)


def _def_line(path: Path, name: str) -> int:
    return next(
        i for i, line in enumerate(path.read_text().splitlines(), 1) if line.lstrip().startswith(f"def {name}(")
    )


def _verify(path: Path, function: str, context: str, steps: tuple[Step, ...]) -> list[Verdict]:
    reaches = {_def_line(path, function): Reach(context, steps, whole_return=True)}
    return verify_source(read_source(str(path)), DEFAULT_SELECTION, Settings(), reaches)


def _trainer(context: str) -> Verdict:
    [verdict] = _verify(
        TRAINER, "compute_loss", context, (Step(str(TRAINER), 11, "a Trainer subclass's compute_loss"),)
    )
    return verdict


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        (
            hosts.TRAINING_STEP,
            "self.last_loss 0.8438 -> 1.688 (×2.00) after Trainer.training_step (transformers 4.46.0, real: "
            "`loss *= self.args.gradient_accumulation_steps` with gradient_accumulation_steps=2)",
        ),
        (
            hosts.COMPUTE_LOSS,
            "self.last_loss 0.8438 -> 1.688 (×2.00) after Trainer.compute_loss (transformers 4.57.1, real: "
            "`loss *= self.accelerator.num_processes` with average_tokens_across_devices on, 2 processes)",
        ),
        (
            hosts.ACCELERATE_BACKWARD,
            "self.last_loss 0.8438 -> 0.4219 (×0.50) after Accelerator.backward (accelerate 0.12.0, real: "
            "`loss /= self.gradient_accumulation_steps` with gradient_accumulation_steps=2)",
        ),
    ],
)
def test_a_kept_loss_is_confirmed_under_the_real_host(real_hosts: None, context: str, expected: str) -> None:
    verdict = _trainer(context)
    assert verdict.finding.context == context
    assert verdict.confirmed, verdict.detail
    assert verdict.detail == f"{expected} before fix, held after; loss and grad unchanged"
    assert verdict.confirmed_by == BY_HOST


def test_a_models_output_read_by_key_is_run_with_a_scalar_loss(real_hosts: None) -> None:
    # `model(**inputs)` gives a mapping (tried after a tensor); the loss read from it is made a scalar, since the
    # real training_step's backward needs one.
    path = CASES / "trainer_model_output.py"
    [verdict] = _verify(path, "compute_loss", hosts.TRAINING_STEP, (Step(str(path), 6, "compute_loss"),))
    assert verdict.confirmed, verdict.detail
    assert verdict.detail.startswith(
        "self.last_loss 2 -> 4 (×2.00) after Trainer.training_step (transformers 4.46.0, real: "
    )


def test_composer_is_emulated_and_says_why() -> None:
    verdict = _trainer(hosts.COMPOSER)
    assert verdict.confirmed, verdict.detail
    assert verdict.detail.startswith(
        "self.last_loss 0.8438 -> 0.4219 (×0.50) after Composer's Trainer._train_microbatch (emulated: "
        "`loss.mul_(microbatch_num_samples / current_batch_size)` with a microbatch of 2 in a batch of 4; no public "
        "case to run it on"
    )


def test_composer_0_10_takes_the_dicts_total_as_its_loss() -> None:
    # `microbatch_loss = self.state.loss['total']`, then `.mul_`: the kept 'total' moves, the returned copy does not.
    path = CASES / "model_total.py"
    steps = (Step(str(path), 8, "a ComposerModel subclass's loss"),)
    [verdict] = _verify(path, "loss", hosts.COMPOSER_TOTAL, steps)
    assert verdict.confirmed, verdict.detail
    assert verdict.detail.startswith(
        "self.last_total 0.8438 -> 0.4219 (×0.50) after Composer's Trainer._train_microbatch (emulated: "
        "`microbatch_loss.mul_(microbatch_num_samples / current_batch_size)` with a microbatch of 2 in a batch of 4, "
        "the dict's 'total' taken as the loss (0.10+); "
    )


@pytest.mark.parametrize(
    ("returned", "kept"),
    [({"ce": 1, "aux": 2}, "ce"), ({"total": 3, "ce": 1}, "ce"), (1, "")],
    ids=["no total", "another key", "a tensor"],
)
def test_composer_0_10_sums_anything_else_into_a_new_tensor(returned: object, kept: str) -> None:
    # A dict without 'total' or a bare tensor: the release sums the losses into zeros, so nothing returned is the loss.
    import torch

    values = {k: torch.tensor([float(v), 2.0 * v]) for k, v in returned.items()} if isinstance(returned, dict) else None
    given = values if values is not None else torch.tensor([1.0, 2.0])
    loss = hosts.returned_loss(given, hosts.HOSTS[hosts.COMPOSER_TOTAL].entry)
    if isinstance(given, dict) and "total" in given:
        assert loss is given["total"]
        assert loss is not given[kept]
    else:
        members = given.values() if isinstance(given, dict) else [given]
        assert all(loss.untyped_storage().data_ptr() != m.untyped_storage().data_ptr() for m in members)
        assert float(loss) == sum(float(m.mean()) for m in members)


def test_a_release_not_in_the_cache_is_emulated_saying_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(hosts.CACHE_ENV, str(tmp_path))
    (tmp_path / "accelerate-0.12.0").mkdir()  # an install that never finished counts as none
    verdict = _trainer(hosts.ACCELERATE_BACKWARD)
    assert verdict.confirmed, verdict.detail
    assert (
        "after Accelerator.backward (emulated: `loss /= self.gradient_accumulation_steps` with "
        f"gradient_accumulation_steps=2; accelerate 0.12.0 is not in {tmp_path} (python -m "
        "flux_alias_lint.harness.hosts install))"
    ) in verdict.detail


def test_a_release_that_cannot_run_is_emulated_saying_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(hosts.CACHE_ENV, str(tmp_path))
    release = tmp_path / "accelerate-0.12.0"
    release.mkdir()
    (release / "flux-alias-lint-complete").write_text("accelerate==0.12.0\n")  # whole, but holding no accelerate
    verdict = _trainer(hosts.ACCELERATE_BACKWARD)
    assert verdict.confirmed, verdict.detail
    assert "(emulated: `loss /= self.gradient_accumulation_steps` with gradient_accumulation_steps=2; the real " in (
        verdict.detail
    )
    assert "accelerate 0.12.0 did not run: rank 0 exited 1: ModuleNotFoundError: No module named 'accelerate')" in (
        verdict.detail
    )


def _own_loop(line: int) -> Verdict:
    steps = (Step(str(OWN_LOOP), line - 1, "its loss is returned to train"), Step(str(OWN_LOOP), line, "rescaled"))
    [verdict] = _verify(OWN_LOOP, "compute_loss", IN_PLACE_CALLER, steps)
    return verdict


def test_the_projects_own_loop_runs_its_recorded_line() -> None:
    verdict = _own_loop(18)  # loss /= accum
    assert verdict.confirmed, verdict.detail
    assert verdict.detail == (
        f"HISTORY[...] 0.4688 -> 0.2344 (×0.50) after the caller at {OWN_LOOP}:18 (emulated: `loss /= accum` with "
        "accum = 2; it is the project's own code) before fix, held after; loss and grad unchanged"
    )


def test_a_line_that_cannot_change_the_value_is_not_confirmed() -> None:
    verdict = _own_loop(25)  # loss *= 1.0
    assert not verdict.confirmed
    assert verdict.detail.startswith("HISTORY[...] held the captured value and it did not move after the caller at")


@pytest.mark.parametrize(
    ("line", "op", "factor", "setting"),
    [
        ("loss /= accum", "div", 2.0, "accum = 2"),
        ("loss.mul_(0.25)", "mul", 0.25, "0.25 as written"),
        ("loss *= self.args.gradient_accumulation_steps", "mul", 2.0, "self.args.gradient_accumulation_steps = 2"),
    ],
)
def test_a_callers_line_is_read_as_written(tmp_path: Path, line: str, op: str, factor: float, setting: str) -> None:
    path = tmp_path / "loop.py"
    path.write_text(f"def train(loss, accum):\n    {line}\n")
    host = hosts.caller_host(Step(str(path), 2, "rescaled"))
    assert (host.line, host.op, host.factor, host.setting) == (line, op, factor, setting)


def test_a_line_that_is_no_in_place_rescale_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "loop.py"
    path.write_text("def train(loss, accum):\n    loss = loss / accum\n")
    host = hosts.caller_host(Step(str(path), 2, "rescaled"))
    assert host.factor == 1.0 and "not an in-place rescale" in host.emulated_because


def test_the_loss_a_host_takes_from_what_the_function_returned() -> None:
    import types

    import torch

    loss = torch.tensor(2.0)
    assert hosts.returned_loss(loss) is loss
    assert hosts.returned_loss({"loss": loss, "logits": loss}) is loss  # a ModelOutput is a mapping
    assert hosts.returned_loss(types.SimpleNamespace(loss=loss)) is loss
    assert hosts.returned_loss((loss, {})) is None  # a Megatron (loss, report): not a host's
    assert hosts.returned_loss({"logits": loss}) is None


def test_an_in_place_callers_host_is_the_rescale_its_chain_names() -> None:
    steps = (Step(str(OWN_LOOP), 17, "returned to train"), Step(str(OWN_LOOP), 18, "/="), Step(str(OWN_LOOP), 19, "?"))
    host = hosts.host_of(IN_PLACE_CALLER, steps)
    assert host is not None and (host.name, host.line) == (f"the caller at {OWN_LOOP}:18", "loss /= accum")
    assert hosts.host_of("unreached", steps) is None


def _project(tmp_path: Path, files: dict[str, str]) -> str:
    (tmp_path / ".git").mkdir()  # the project's root
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return str(tmp_path / "loss.py")


@pytest.mark.parametrize(
    ("files", "name", "release", "in_place", "on"),
    [
        ({"requirements.txt": "accelerate>=0.13\n"}, hosts.ACCELERATE_BACKWARD, "accelerate 0.13.0", False, True),
        ({"requirements.txt": "accelerate<0.13\n"}, hosts.ACCELERATE_BACKWARD, "accelerate 0.12.0", True, True),
        ({"requirements.txt": "transformers==4.57.1\n"}, hosts.TRAINING_STEP, "transformers 4.57.1", False, True),
        (
            {"requirements.txt": "transformers==4.57.1\n", "train.py": "a = A(average_tokens_across_devices=False)\n"},
            hosts.COMPUTE_LOSS,
            "transformers 4.57.1",
            False,
            False,
        ),
        ({"requirements.txt": "transformers>=4.54\n"}, hosts.TRAINING_STEP, "transformers 4.57.1", False, True),
        ({"requirements.txt": "lightning==2.4.0\n"}, "lightning", "lightning 2.4.0", False, True),
    ],
)
def test_the_host_a_project_runs_is_read_from_its_pin(
    tmp_path: Path, files: dict[str, str], name: str, release: str, in_place: bool, on: bool
) -> None:
    found, host = hosts.for_project(_project(tmp_path, files))
    assert (found, str(host.release), host.in_place, host.on) == (name, release, in_place, on)


def test_megatron_before_0_7_runs_its_profile_out_of_place(tmp_path: Path) -> None:
    name, host = hosts.for_project(_project(tmp_path, {"requirements.txt": "megatron-core>=0.5,<0.7\n"}))
    assert (name, host.profile, host.in_place, host.release) == (hosts.MEGATRON, "0.6", False, None)
    twin = hosts.in_place_twin(name)
    assert (twin.profile, twin.in_place, twin.line) == ("0.7", True, "output_tensor /= num_microbatches")


def test_each_hosts_line_is_the_one_facts_records() -> None:
    from flux_alias_lint.facts.hosts import BY_NAME

    for context, host in hosts.HOSTS.items():
        assert f"`{host.line}`" == BY_NAME[context].operation
