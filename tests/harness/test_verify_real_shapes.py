"""`verify` on loss functions shaped like real ones it could not run before: inputs that fit, and the per-token setting.

Each case in verify_cases/ is this project's own code, shaped like a loss function public trees hand to
Megatron (a helper whose result is unpacked, a gather at sampled token ids, a dict of losses iterated, an
argument that may be None, logits sliced by a count, a 3-tuple in a project that turns per-token loss on).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("megatron.core")

from flux_alias_lint.cli import main  # noqa: E402
from flux_alias_lint.harness import verify  # noqa: E402
from flux_alias_lint.harness.per_token import per_token_setting  # noqa: E402
from flux_alias_lint.harness.schedule import shaped_model  # noqa: E402

CASES = Path(__file__).parent / "verify_cases"
PROJECT = CASES / "per_token_project"


def _verdicts(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, object]]]:
    status = main(["verify", *args, "--format", "json"])
    return status, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("case", "factor"),
    [
        ("unpacked_helper.py", "×0.12"),  # a 3-tuple: divided by its 4 tokens and 2 microbatches
        ("gathered_ids.py", "×0.50"),  # a gather's index must be integer token ids
        ("iterated_losses.py", "×0.50"),  # `for key, loss in losses.items()`: the loss is a tensor, not 0
        ("optional_count.py", "×0.50"),  # the flagged 2-tuple is returned only when `num_seqs is None`
        ("sliced_logits.py", "×0.50"),  # `logits[:, -n - 1 : -1, :]`: 3-D logits, a whole number of actions
    ],
)
def test_a_function_shaped_like_a_real_one_is_confirmed(
    case: str, factor: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, [found] = _verdicts(capsys, str(CASES / case))
    assert found["confirmed"], found["detail"]
    assert status == 0
    assert f"{factor} before fix, held after" in str(found["detail"])


def test_the_layout_search_is_bounded_by_a_counter(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without a layout search the gather at float token ids cannot run: its line says what it was given.
    monkeypatch.setattr(verify, "MAX_LAYOUTS", 0)
    status, [found] = _verdicts(capsys, str(CASES / "gathered_ids.py"))
    assert status == 1 and not found["confirmed"]
    detail = str(found["detail"])
    assert detail.startswith("no probe could run it (RuntimeError: gather(): Expected dtype int")
    assert "; furthest with " in detail and "sampled [" in detail
    assert " at `logprobs = torch.gather(output_tensor.log_softmax(-1), -1, targets.unsqueeze(...`;" in detail


@pytest.mark.parametrize(
    "case",
    [
        "record_item.py",  # `params = data["packed_seq_params"]; params.cu_seqlens_q_padded`: the item is a stub
        "callee_target.py",  # handed to the project's `def token_logprobs(logits, target)`: token ids
        "compared_setting.py",  # `if temperature <= 0.0`: one number
        "callee_varargs.py",  # handed to `def scaled(*values)`: no parameter names it, nothing derived
    ],
)
def test_inputs_derived_from_use_need_no_search(
    case: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No layout search: only what the function's use (and its callee's parameters) asks for can make it run.
    monkeypatch.setattr(verify, "MAX_LAYOUTS", 0)
    status, [found] = _verdicts(capsys, str(CASES / case))
    assert found["confirmed"], found["detail"]
    assert status == 0


def test_the_project_turns_per_token_loss_on_where_its_config_does() -> None:
    assert per_token_setting(str(PROJECT / "train.py")) == "tests/harness/verify_cases/per_token_project/config.py:6"
    assert per_token_setting(str(CASES / "gathered_ids.py")) is None  # a setting in a tests directory is its own


def test_a_3_tuple_under_the_projects_per_token_loss_is_not_confirmed(capsys: pytest.CaptureFixture[str]) -> None:
    status, [found] = _verdicts(capsys, str(PROJECT / "train.py"))
    assert status == 1 and not found["confirmed"]
    assert found["detail"] == (
        "declined, per-token: Megatron does not rescale the 3-tuple (loss, num_tokens, report) it returns under "
        "calculate_per_token_loss on (set at tests/harness/verify_cases/per_token_project/config.py:6), "
        'so report["total"] keeps its value'
    )
    assert "calculate_per_token_loss on (set at" in str(found["modelled"])
    # Turned off by the option, Megatron divides by the tokens and the microbatches: a real alias.
    status, [found] = _verdicts(capsys, str(PROJECT / "train.py"), "--no-calculate-per-token-loss")
    assert status == 0 and found["confirmed"]
    assert "calculate_per_token_loss off (--no-calculate-per-token-loss)" in str(found["modelled"])


def test_a_per_token_site_is_declined_as_per_token_before_any_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No stand-in input runs this function (`len()` of what the model gives it): the reason is the setting, said
    # before a probe is built, not that no probe could run it.
    def no_probe(*args: object, **kwargs: object) -> None:
        raise AssertionError("a probe was built for a site the setting spares")

    monkeypatch.setattr(verify, "build_probe", no_probe)
    project = Path(__file__).parents[2] / "fixtures" / "FAL001" / "per_token_site_no_stand_in_runs"
    status, [found] = _verdicts(capsys, str(project))
    assert status == 1 and not found["confirmed"]
    assert str(found["detail"]).startswith("declined, per-token: Megatron does not rescale the 3-tuple")
    assert "no probe could run it" not in str(found["detail"])


TEST_MODULES = Path(__file__).parents[2] / "fixtures" / "FAL001" / "per_token_set_in_one_test_module"


def test_a_test_modules_setting_configures_that_module_only() -> None:
    # A literal in one test module (test_config.py) sets up that module's runs, not its neighbours'; a helper's
    # parameter passed on as the setting is set where the module calls it with a literal.
    shown = "fixtures/FAL001/per_token_set_in_one_test_module/tests/"
    assert per_token_setting(str(TEST_MODULES / "tests" / "test_config.py")) == f"{shown}test_config.py:7"
    assert per_token_setting(str(TEST_MODULES / "tests" / "test_per_token_schedule.py")) == (
        f"{shown}test_per_token_schedule.py:29"
    )
    assert per_token_setting(str(TEST_MODULES / "tests" / "test_default_schedule.py")) is None
    assert per_token_setting(str(TEST_MODULES / "loss.py")) is None


def test_verify_models_each_test_module_as_it_is_set_up(capsys: pytest.CaptureFixture[str]) -> None:
    status, found = _verdicts(capsys, str(TEST_MODULES / "tests"))
    by_file = {Path(str(v["path"])).name: v for v in found}
    assert status == 1 and set(by_file) == {"test_default_schedule.py", "test_per_token_schedule.py"}
    assert by_file["test_default_schedule.py"]["confirmed"]
    per_token = by_file["test_per_token_schedule.py"]
    assert not per_token["confirmed"] and str(per_token["detail"]).endswith(
        "under calculate_per_token_loss on "
        "(set at fixtures/FAL001/per_token_set_in_one_test_module/tests/test_per_token_schedule.py:29), "
        'so report["loss_reduced"] keeps its value'
    )


def test_the_option_turns_it_on_for_any_project(capsys: pytest.CaptureFixture[str]) -> None:
    status, [found] = _verdicts(capsys, str(CASES / "unpacked_helper.py"), "--calculate-per-token-loss")
    assert status == 1 and "under calculate_per_token_loss on (--calculate-per-token-loss)," in str(found["detail"])


def test_the_exit_status_is_documented_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["verify", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "0  every finding was run and confirmed" in out and "2  a usage error" in out
    assert "3  an internal error" in out
    with pytest.raises(SystemExit) as exit_:
        main(["verify", "--num-microbatches", "0", str(CASES / "gathered_ids.py")])
    assert exit_.value.code == 2


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("config = TransformerConfig(calculate_per_token_loss=True)\n", 1),  # a keyword
        ("cfg.model.calculate_per_token_loss = True\n", 1),  # an attribute
        ('if "calculate_per_token_loss" not in kw:\n    kw["calculate_per_token_loss"] = True\n', 2),  # a default
        ("def check(self):\n    assert self.calculate_per_token_loss, 'required'\n", 2),  # a requirement
        ('defaults = {"calculate_per_token_loss": True}\n', 1),  # a dict entry
        ("if cp_size > 1:\n    cfg.calculate_per_token_loss = True\n", None),  # decided by something else
        ("cfg.calculate_per_token_loss = False\n", None),
        ("def f(calculate_per_token_loss: bool = True):\n    pass\n", None),  # a parameter's default
        # a helper's parameter passed on, given a literal where it is called (by keyword, by position)
        ("def cfg(on):\n    return Config(calculate_per_token_loss=on)\n\n\nc = cfg(on=True)\n", 5),
        ("def cfg(n, on):\n    return Config(calculate_per_token_loss=on)\n\n\nc = cfg(\n    1,\n    True)\n", 7),
        ("def cfg(on):\n    return Config(calculate_per_token_loss=on)\n\n\nc = cfg(on=flag)\n", None),
    ],
)
def test_what_turns_per_token_loss_on(tmp_path: Path, setting: str, expected: int | None) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "config.py").write_text(setting)
    (tmp_path / "pkg" / "loss.py").write_text("")
    where = per_token_setting(str(tmp_path / "pkg" / "loss.py"))
    assert where == (None if expected is None else f"pkg/config.py:{expected}")


def test_a_scripts_setting_is_its_own(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pretrain_vlm.py").write_text(
        "config.calculate_per_token_loss = True\n\nif __name__ == '__main__':\n    main()\n"
    )
    (tmp_path / "pretrain_gpt.py").write_text("")
    assert per_token_setting(str(tmp_path / "pretrain_vlm.py")) == "pretrain_vlm.py:1"
    assert per_token_setting(str(tmp_path / "pretrain_gpt.py")) is None


def test_the_schedule_runs_a_stub_model_whose_output_the_loss_function_consumes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[tuple[int, ...]] = []

    def recording(output: object) -> object:
        made.append(tuple(output.shape))  # type: ignore[attr-defined]
        return shaped_model(output)

    monkeypatch.setattr(verify, "shaped_model", recording)
    status, [found] = _verdicts(capsys, str(CASES / "handed_over.py"))
    assert status == 0 and found["confirmed_by"] == "forward_backward_no_pipelining", found["detail"]
    assert 'through forward_backward_no_pipelining (training): report["lm loss"] ×0.50, held after' in str(
        found["detail"]
    )
    assert made == [(2, 4, 8), (2, 4, 8)]  # before and after the fix: the logits the function indexes
