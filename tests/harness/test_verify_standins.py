"""`verify` on loss functions shaped like the ones in real training code: each stand-in kind, run through megatron-core."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from flux_alias_lint.cli import main
from flux_alias_lint.harness import probe
from flux_alias_lint.harness.standins import Flag, Run, StandInMapping, Stub, single_rank, stub_type
from flux_alias_lint.source import SourceFile, parse

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _verify(tmp_path: Path, capsys: pytest.CaptureFixture[str], code: str, *options: str) -> tuple[int, list[str]]:
    path = tmp_path / "loss.py"
    path.write_text(textwrap.dedent(code))
    status = main(["verify", str(path), *options])
    lines = capsys.readouterr().out.splitlines()
    return status, [line.split(": ", 1)[1] for line in lines[:-1]]


def test_a_batch_dict_self_flags_and_parallel_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A MegatronLossReduction.forward: the batch is a dict, `self` has settings, the context-parallel size
    # comes from parallel_state, and an early return on a `self` flag comes before the flagged one.
    status, lines = _verify(
        tmp_path,
        capsys,
        """
        import torch
        from megatron.core import parallel_state
        from .not_importable import LossReduction


        class MaskedLoss(LossReduction):
            def forward(self, batch, per_token_losses):
                masked = per_token_losses * batch["loss_mask"]
                cp_size = parallel_state.get_context_parallel_world_size()
                if cp_size > 1:
                    raise AssertionError("a single rank has no context parallelism")
                loss = torch.sum(masked, dim=1) / batch["loss_mask"].sum(1)
                if self.validation_step and not self.val_drop_last:
                    stacked = torch.stack([loss.clone().detach(), loss.clone().detach()])
                    torch.distributed.all_reduce(stacked, group=parallel_state.get_data_parallel_group())
                    return loss, {"loss_sum_and_ub_size": stacked}
                return loss, {"avg": loss}
        """,
    )
    assert lines == ['FAL002 CONFIRMED report["avg"] ×0.50 before fix, held after; loss and grad unchanged']
    assert status == 0


def test_a_helper_on_self_called_with_the_output_gives_a_tensor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines = _verify(
        tmp_path,
        capsys,
        """
        import torch


        class Worker:
            def forward_func_log_probs(self, data, output_tensor: torch.Tensor):
                log_probs = self.strategy.op_compute_log_probs(
                    logits=output_tensor, input_ids=data.batch["input_ids"], attention_mask=data.batch["attention_mask"]
                )
                return log_probs, {"log_probs": log_probs}
        """,
    )
    assert lines == ['FAL002 CONFIRMED report["log_probs"] ×0.50 before fix, held after; loss and grad unchanged']
    assert status == 0


def test_a_key_test_on_the_output_is_tried_both_ways(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The first execution answers "present"; the flagged return is reached only when "loss" is absent.
    status, lines = _verify(
        tmp_path,
        capsys,
        """
        def loss_func(output):
            if "loss" in output:
                return output["loss"], {}
            loss = output["logits"].sum()
            return loss, {"lm loss": loss.detach()}
        """,
    )
    assert lines == ['FAL001 CONFIRMED report["lm loss"] ×0.50 before fix, held after; loss and grad unchanged']
    assert status == 0


def test_a_report_based_on_a_module_global(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "module-top-ran"
    status, lines = _verify(
        tmp_path,
        capsys,
        f"""
        from pathlib import Path

        REPORT_BASE = {{"step": 0, "source": "train"}}
        Path({str(marker)!r}).write_text("a call at the top level must not run")


        def loss_func(output_tensor):
            loss = output_tensor.sum()
            return loss, {{**REPORT_BASE, "lm loss": loss.detach()}}
        """,
    )
    assert lines == ['FAL001 CONFIRMED report["lm loss"] ×0.50 before fix, held after; loss and grad unchanged']
    assert status == 0
    assert not marker.exists()


def test_an_output_name_from_a_closure_is_a_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The shape of NeMo's encoder-decoder `id_func`: the report's key is the enclosing function's argument.
    # Its report halves under forward_step_calc_loss; calling it "did not move" was a wrong verdict.
    status, lines = _verify(
        tmp_path,
        capsys,
        """
        from megatron.core.pipeline_parallel import get_forward_backward_func


        def get_forward_output_only_func(output_name):
            def fwd_output_only_func(dataloader_iter, model):
                output = model(next(dataloader_iter))

                def id_func(output_tensor):
                    if isinstance(output_tensor, dict):
                        output_tensor = output_tensor["output"]
                    return output_tensor, {output_name: output_tensor}

                return output, id_func

            return fwd_output_only_func


        def predict(model, data, output_name):
            forward_backward = get_forward_backward_func()
            return forward_backward(
                forward_step_func=get_forward_output_only_func(output_name), data_iterator=data, model=[model]
            )
        """,
    )
    assert lines == [
        'FAL002 CONFIRMED report["output_name"] ×0.50 before fix, held after; loss and grad unchanged; '
        'through forward_backward_no_pipelining (forward-only): report["output_name"] ×0.50, held after'
    ]
    assert status == 0


def test_a_branch_on_a_tensor_of_several_values_is_tried_both_ways(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines = _verify(
        tmp_path,
        capsys,
        """
        def loss_func(output_tensor, skip):
            loss = output_tensor.sum()
            if skip:
                return loss, {}
            return loss, {"lm loss": loss.detach()}
        """,
    )
    assert lines == ['FAL001 CONFIRMED report["lm loss"] ×0.50 before fix, held after; loss and grad unchanged']
    assert status == 0
    with pytest.raises(RuntimeError, match="ambiguous"):  # restored after the probe
        bool(torch.ones(2))


def test_distributed_calls_answer_as_one_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, lines = _verify(
        tmp_path,
        capsys,
        """
        import torch.distributed as dist


        def loss_func(output_tensor):
            loss = output_tensor.sum() / dist.get_world_size()
            dist.all_reduce(loss)
            return loss, {"lm loss": loss.detach()}
        """,
    )
    assert lines == ['FAL001 CONFIRMED report["lm loss"] ×0.50 before fix, held after; loss and grad unchanged']
    assert status == 0
    assert not torch.distributed.is_initialized()  # restored after the probe


def test_a_reward_of_floats_is_unconfirmed_not_confirmed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Handed to Megatron, so flagged whatever its type; but unknown numbers stay unknown through arithmetic,
    # never a tensor to confirm.
    status, lines = _verify(
        tmp_path,
        capsys,
        """
        from megatron.core.pipeline_parallel import get_forward_backward_func


        class Env:
            def forward_step(self, data_iterator, model):
                return model(next(data_iterator)), self.outcome_reward

            def outcome_reward(self, response):
                reward = self.acc_weight * self.judge() + self.format_weight * 0.5
                return reward, {"info": {"final_reward": reward}}

            def train(self, model, data):
                get_forward_backward_func()(forward_step_func=self.forward_step, data_iterator=data, model=[model])
        """,
    )
    assert lines == [
        "FAL002 UNCONFIRMED with stand-in inputs its loss was <stand-in self.acc_weight * … + …>, not a tensor"
    ]
    assert status == 1


def test_a_flagged_value_no_execution_returns_is_unconfirmed_not_did_not_move(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines = _verify(
        tmp_path,
        capsys,
        """
        def to_floats(report):
            for key in report:
                report[key] = float(report[key])


        def loss_func(output_tensor):
            loss = output_tensor.sum()
            report = {"lm loss": loss.detach()}
            to_floats(report)  # the linter cannot see into the helper; the probe runs it
            return loss, report
        """,
    )
    assert set(lines) == {"FAL001 UNCONFIRMED it returned, but never with the flagged value in its report"}
    assert status == 1


def test_a_module_setting_is_tried_both_ways_its_own_value_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines = _verify(
        tmp_path,
        capsys,
        """
        USE_DATA = False


        def loss_func(output_tensor):
            loss = output_tensor.sum()
            return loss, {"lm loss": loss.data if USE_DATA else loss.detach().clone()}
        """,
    )
    assert lines == ['FAL001 CONFIRMED report["lm loss"] ×0.50 before fix, held after; loss and grad unchanged']
    assert status == 0


def test_a_loop_that_only_a_stand_in_keeps_going_is_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe, "SECONDS_PER_EXECUTION", 0.2)
    status, lines = _verify(
        tmp_path,
        capsys,
        """
        def loss_func(output_tensor):
            loss = output_tensor.sum()
            while loss.numel() == 1:
                pass
            return loss, {"lm loss": loss.detach()}
        """,
    )
    # the loop's two lines: the timer stops it at either
    assert [line.replace("`pass`", "`while loss.numel() == 1:`") for line in lines] == [
        "FAL001 UNCONFIRMED no probe could run it (ProbeTimeout: still running after 0 s) at "
        "`while loss.numel() == 1:`; furthest with output_tensor [4] float32"
    ]
    assert status == 1


# ---- the stand-ins themselves ------------------------------------------------------------------


def test_a_stub_yields_stubs_and_tensors_where_arithmetic_needs_them() -> None:
    run = Run((4,))
    stub = Stub("self", run)
    assert stub.strategy.helper is stub.strategy.helper  # one object per attribute, like a real one
    assert isinstance(stub.strategy.helper(), Stub)
    output = run.tensor()
    computed = stub.strategy.helper(logits=output)
    assert torch.is_tensor(computed) and torch.equal(computed, output) and computed is not output
    assert torch.is_tensor(stub.scale * output) and isinstance(stub.scale * 2.0, Stub)
    assert torch.is_tensor(stub.cache["x"].sum()) and torch.is_tensor(torch.sum(stub.cache))
    first, second = stub.pair()
    assert isinstance(first, Stub) and isinstance(second, Stub)


def test_a_stub_forgets_what_it_handed_out_when_the_next_execution_starts() -> None:
    run = Run((4,))
    stub = Stub("self", run)
    first = stub.weights.as_tensor()
    run.start(())
    assert stub.weights.as_tensor() is not first


def test_undecidable_answers_are_replayed_in_order() -> None:
    run = Run((4,))
    stub, batch = Stub("self", run), StandInMapping(run)
    run.start((True, False))
    assert bool(stub.enabled) is True and ("logits" in batch) is False
    with pytest.raises(KeyError):
        batch["logits"]
    assert run.taken == [True, False]
    assert batch.get("tokens") is batch["tokens"] and run.taken == [True, False, True]


def test_a_failed_import_is_a_class_that_isinstance_rejects() -> None:
    run = Run((4,))
    missing = stub_type("DataProto", run)
    assert not isinstance(torch.ones(1), missing)
    assert isinstance(missing.from_dict(tensors={}), Stub) and isinstance(missing(), Stub)

    class Derived(missing):  # a module's class may derive from it
        pass

    assert isinstance(Derived.anything, Stub)


def test_a_flag_keeps_its_value_first() -> None:
    run = Run((4,))
    flag = Flag(False, run)
    assert not flag and run.taken == [False]
    run.start((True,))
    assert flag and repr(flag) == "False"


def test_single_rank_answers_then_restores() -> None:
    from megatron.core import parallel_state  # imported before: `single_rank` answers for the modules imported

    with single_rank():
        assert torch.distributed.get_world_size() == 1 and torch.distributed.get_rank() == 0
        tensor = torch.ones(2)
        assert torch.distributed.all_reduce(tensor) is None and torch.equal(tensor, torch.ones(2))
        assert parallel_state.get_context_parallel_world_size() == 1
        assert parallel_state.is_pipeline_last_stage()
    assert not torch.distributed.is_initialized()


def test_the_call_context_overrides_what_use_suggests() -> None:
    # `batch` is only handed on; the analysis's call context (a MegatronLossReduction.forward) says it is a mapping.
    code = "def forward(self, batch, forward_out):\n    loss = forward_out.sum()\n    return loss, {'n': len(batch)}\n"
    module = parse(SourceFile("f.py", code, "utf-8"))
    (function,) = probe.functions(module)
    guessed = probe.build_probe(module, function, (4,))
    told = probe.build_probe(module, function, (4,), kinds={"batch": "mapping"})
    assert guessed.positional == [("self", "tensor"), ("batch", "tensor"), ("forward_out", "tensor")]
    assert told.positional == [("self", "tensor"), ("batch", "mapping"), ("forward_out", "tensor")]


# The multi-file fixture projects with findings, one test each (so parallel workers share them out).
MULTI_FILE_PROJECTS = sorted(p.parent for p in FIXTURES.glob("*/*/expected") if p.read_text().strip())


def test_there_are_multi_file_fixture_projects() -> None:
    assert len(MULTI_FILE_PROJECTS) >= 2


@pytest.mark.parametrize("project", MULTI_FILE_PROJECTS, ids=lambda p: p.relative_to(FIXTURES).as_posix())
def test_every_multi_file_fixture_project_is_confirmed(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    no_excludes = tmp_path / "pyproject.toml"  # this repository's own excludes the fixtures
    no_excludes.write_text("")
    expected = len(project.joinpath("expected").read_text().splitlines())
    name = project.relative_to(FIXTURES).as_posix()
    # a warning, not a bug: the setting the project turns on, or the project's own schedule dividing a copy,
    # leaves the value alone, and verify says so
    spared, why = next(((table[name], said) for table, said in _SPARING if name in table), (0, ""))
    status = main(["verify", "--config", str(no_excludes), str(project)])
    out = capsys.readouterr().out
    assert status == (1 if spared else 0), out
    summary = [line for line in out.splitlines() if line.startswith(f"{expected} finding(s): ")]
    assert summary and summary[0].startswith(f"{expected} finding(s): {expected - spared} confirmed"), out
    if spared:
        assert out.count(why) == spared, out


# Fixture projects with findings that are warnings because a setting of theirs spares the value: how many.
SPARED_BY_A_SETTING = {
    "FAL001/three_tuple_under_per_token_loss": 1,
    "FAL001/per_token_set_in_one_test_module": 1,
    "FAL001/per_token_site_no_stand_in_runs": 1,
}
# ... because the project ships its own copy of Megatron's schedule, which divides a copy: how many.
SPARED_BY_THEIR_OWN_SCHEDULE = {
    "FAL001/checkout_beside_divides_a_copy": 1,
    "FAL001/vendored_core_schedule_divides_a_copy": 1,
    "FAL001/vendored_schedule_divides_a_copy": 1,
}
_SPARING = (
    (SPARED_BY_A_SETTING, "does not rescale"),
    (SPARED_BY_THEIR_OWN_SCHEDULE, "did not move under the project's own schedule"),
)


def test_a_helper_from_the_project_runs_but_not_its_module_top(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "helper-module-top-ran"
    (tmp_path / "metrics.py").write_text(
        f"from pathlib import Path\n\nPath({str(marker)!r}).write_text('ran')\nPREFIX = 'train/'\n\n\n"
        "def make_report(loss):\n    return {PREFIX + 'loss': loss.detach()}\n"
    )
    status, lines = _verify(
        tmp_path,
        capsys,
        """
        import torch
        from metrics import make_report


        def loss_func(output_tensor):
            loss = torch.sum(output_tensor)
            return loss, make_report(loss)
        """,
    )
    assert lines == ['FAL001 CONFIRMED report["train/loss"] ×0.50 before fix, held after; loss and grad unchanged']
    assert status == 0
    assert not marker.exists()


def test_self_is_an_instance_of_its_own_class_so_its_methods_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines = _verify(
        tmp_path,
        capsys,
        """
        import torch


        class Trainer:
            def __init__(self):
                raise RuntimeError("__init__ needs a cluster: the probe must not call it")

            def _remember(self, loss):
                self.last = loss.detach()

            def loss_func(self, output_tensor):
                loss = torch.sum(output_tensor) * self.scale
                self._remember(loss)
                return loss, {"lm loss": self.last}
        """,
    )
    assert lines == ['FAL001 CONFIRMED report["lm loss"] ×0.50 before fix, held after; loss and grad unchanged']
    assert status == 0


def test_a_numpy_array_in_the_report_is_seen_over_its_memory() -> None:
    from flux_alias_lint.harness import find_report_aliases
    from flux_alias_lint.harness.report import iter_report_tensors

    loss = torch.ones(3) * 2.0
    report = {"lm loss": loss.detach().numpy(), "copy": loss.detach().clone().numpy()}
    ((path, seen), _copy) = iter_report_tensors(report)
    loss.div_(2)
    assert path == 'report["lm loss"]' and seen.tolist() == [1.0, 1.0, 1.0]
    assert [alias.path for alias in find_report_aliases((loss, report))] == ['report["lm loss"]']


def test_cuda_tensors_stay_on_the_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, lines = _verify(
        tmp_path,
        capsys,
        """
        import torch


        def loss_func(output_tensor):
            zero = torch.tensor(0.0, device="cuda")
            loss = output_tensor.float().sum().cuda() + zero.to("cuda")
            return loss, {"lm loss": loss.detach().cuda()}
        """,
    )
    assert lines == ['FAL004 CONFIRMED report["lm loss"] ×0.50 before fix, held after; loss and grad unchanged']
    assert status == 0


def test_two_findings_of_one_entry_are_both_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The helper copies the entry under a second key: one entry, two report paths, two findings.
    status, lines = _verify(
        tmp_path,
        capsys,
        """
        import torch


        def add_averages(report):
            for key in list(report):
                report["avg " + key] = report[key]


        def loss_func(output_tensor):
            loss = output_tensor.sum()
            report = {"lm loss": loss.detach()}
            add_averages(report)
            return loss, report
        """,
    )
    assert len(lines) == 2 and all(line.startswith("FAL001 CONFIRMED") for line in lines)
    assert status == 0


POLICY_GRADIENT = """
    import torch
    import torch.nn.functional as F
    from megatron.core.pipeline_parallel import get_forward_backward_func


    def train(model, batches, rewards):
        rewards_t = torch.tensor(rewards)

        def policy_gradient_loss(logits: torch.Tensor, batch: dict):
            # The log-probability of each sampled next token, weighted by its sample's reward.
            log_probs = F.log_softmax(logits[:, :-1, :], dim=-1)
            taken = log_probs.gather(dim=-1, index=batch["input_ids"][:, 1:].unsqueeze(-1)).squeeze(-1)
            taken = taken * batch["attention_mask"][:, 1:].float()
            loss = -(rewards_t.view(-1, 1) * taken).sum(dim=1).mean()
            return loss, {"pg_loss": loss.detach()}

        def forward_step(data_iterator, model):
            batch = next(data_iterator)
            out = model(input_ids=batch["input_ids"])
            return out, (lambda _: policy_gradient_loss(out, batch))

        get_forward_backward_func()(
            forward_step_func=forward_step, data_iterator=iter(batches), model=model, num_microbatches=2,
            seq_length=4, micro_batch_size=2,
        )
"""


def test_3d_logits_and_integer_token_ids_are_tried_when_flat_tensors_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Megatron-Bridge's RLHF example has this shape: it gathers [batch, sequence, vocabulary] logits at
    # integer token ids and weights them by one reward per sample.
    status, lines = _verify(tmp_path, capsys, POLICY_GRADIENT)
    assert lines == [
        'FAL001 CONFIRMED report["pg_loss"] ×0.50 before fix, held after; loss and grad unchanged; '
        'through forward_backward_no_pipelining (training): report["pg_loss"] ×0.50, held after'
    ]
    assert status == 0
    # Without the third shape the layout search finds logits and token ids on its own; without both, nothing runs.
    monkeypatch.setattr("flux_alias_lint.harness.verify.SHAPES", probe.SHAPES[:2])
    status, lines = _verify(tmp_path, capsys, POLICY_GRADIENT)
    assert status == 0 and lines[0].startswith('FAL001 CONFIRMED report["pg_loss"] ×0.50')
    monkeypatch.setattr("flux_alias_lint.harness.verify.MAX_LAYOUTS", 0)
    status, lines = _verify(tmp_path, capsys, POLICY_GRADIENT)
    assert status == 1 and lines[0].startswith("FAL001 UNCONFIRMED no probe could run it (")
