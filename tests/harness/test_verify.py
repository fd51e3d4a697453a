"""`flux-alias-lint verify`: every finding confirmed by running it through real Megatron, before and after its fix."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flux_alias_lint import check_source
from flux_alias_lint.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


def _positive_fixtures() -> list[Path]:
    return sorted(
        p
        for p in FIXTURES.glob("*/*.py")
        if not p.name.endswith((".in.py", ".out.py")) and p.with_suffix(".expected").read_text().strip()
    )


def test_every_positive_fixture_is_confirmed(capsys: pytest.CaptureFixture[str]) -> None:
    positives = _positive_fixtures()
    assert len(positives) >= 40
    expected = sum(len(check_source(p.read_bytes(), str(p))) for p in positives)
    assert main(["verify", *map(str, positives), "--format", "json"]) == 0
    verdicts = json.loads(capsys.readouterr().out)
    assert len(verdicts) == expected
    unconfirmed = [f"{v['path']}:{v['line']} {v['detail']}" for v in verdicts if not v["confirmed"]]
    assert unconfirmed == []


def test_the_seed_closure_in_a_method_is_confirmed_with_its_factor(capsys: pytest.CaptureFixture[str]) -> None:
    seed = str(FIXTURES / "FAL001" / "seed.py")
    assert main(["verify", seed]) == 0
    lines = capsys.readouterr().out.splitlines()
    # Megatron's schedule reaches it (forward_step's loss function): confirmed through its real run too.
    assert lines[0] == (
        f'{seed}:17:40: FAL001 CONFIRMED report["loss"][0] ×0.50 before fix, held after; loss and grad unchanged; '
        'through forward_backward_no_pipelining (training): report["loss"][0] ×0.50, held after'
    )
    assert lines[1].startswith("1 finding(s): 1 confirmed (1 also through forward_backward_no_pipelining), 0 unc")
    # With context parallelism the 2-tuple path multiplies first: 3 / 2. The one-rank schedule has cp size 1.
    assert main(["verify", seed, "--cp-group-size", "3", "--format", "json"]) == 0
    [verdict] = json.loads(capsys.readouterr().out)
    assert "×1.50 before fix" in verdict["detail"] and verdict["confirmed_by"] == "rescale"
    assert (
        "(not run through forward_backward_no_pipelining: it is the installed release on one rank" in verdict["detail"]
    )


def test_a_finding_no_schedule_reaches_is_confirmed_by_the_rescale_alone(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(FIXTURES / "FAL001" / "detach_direct.py"), "--format", "json"]) == 0
    [verdict] = json.loads(capsys.readouterr().out)
    assert verdict["context"] == "unreached" and verdict["confirmed_by"] == "rescale"
    assert "forward_backward_no_pipelining" not in verdict["detail"]


def test_a_fix_that_does_not_hold_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Unpacking views into a list leaves no expression to put `.clone()` after: flagged, not fixable.
    path = tmp_path / "unfixable.py"
    path.write_text(
        "def loss_func(output_tensor):\n"
        "    loss = (output_tensor * 2.0).sum().reshape(1)\n"
        '    return loss, {"parts": list(loss.detach())}\n'
    )
    (finding,) = check_source(path.read_text(), str(path))
    assert not finding.fixable
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert "UNCONFIRMED" in out and "still moves after the fix" in out


def test_a_finding_that_does_not_move_at_runtime_is_unconfirmed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Statically `.half()` may return self; on this float32 probe it is a copy.
    path = tmp_path / "half.py"
    path.write_text(
        "def loss_func(output_tensor):\n    loss = output_tensor.sum()\n    return loss, {'l': loss.detach().half()}\n"
    )
    assert main(["verify", str(path)]) == 1
    assert (
        'UNCONFIRMED report["l"] held the flagged value and did not move under the rescale' in capsys.readouterr().out
    )


def test_a_function_that_cannot_run_is_unconfirmed_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "calls_what_a_tensor_lacks.py"
    path.write_text(
        "def loss_func(out):\n    loss = out.sum().no_such_method()\n    return loss, {'l': loss.detach()}\n"
    )
    assert main(["verify", str(path)]) == 1
    assert (
        "UNCONFIRMED no probe could run it (AttributeError: 'Tensor' object has no attribute" in capsys.readouterr().out
    )


def test_profiles_are_selectable(capsys: pytest.CaptureFixture[str]) -> None:
    seed = str(FIXTURES / "FAL001" / "seed.py")
    assert main(["verify", seed, "--profile", "0.12"]) == 0
    # megatron-core 0.6 divided into a copy: nothing moves, so nothing can be confirmed.
    assert main(["verify", seed, "--profile", "0.6"]) == 1
    assert "did not move" in capsys.readouterr().out


def test_without_the_harness_verify_says_what_to_install(tmp_path: Path) -> None:
    code = "import sys; sys.modules['torch'] = None; from flux_alias_lint.cli import main; sys.exit(main(sys.argv[1:]))"
    run = subprocess.run(
        [sys.executable, "-c", code, "verify", str(FIXTURES / "FAL001" / "seed.py")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 2
    assert "pip install" in run.stderr and "Traceback" not in run.stderr


def test_a_function_that_needs_a_matrix_gets_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `dim=1` fails on the first stand-in shape ([4]); the probe retries with [2, 4].
    path = tmp_path / "per_row.py"
    path.write_text(
        "import torch\n\n\ndef loss_func(losses):\n"
        "    loss = torch.sum(losses, dim=1).mean()\n"
        "    return loss, {'lm loss': loss.detach()}\n"
    )
    assert main(["verify", str(path)]) == 0
    assert 'CONFIRMED report["lm loss"] ×0.50' in capsys.readouterr().out


def test_the_text_output_names_the_megatron_it_modelled(capsys: pytest.CaptureFixture[str]) -> None:
    seed = str(FIXTURES / "FAL001" / "seed.py")
    assert main(["verify", seed]) == 0
    summary = capsys.readouterr().out.splitlines()[-1]
    assert summary.endswith(
        "(modelled: installed megatron-core 0.16.1, 2 microbatches, cp size 1, "
        "calculate_per_token_loss as the project sets it, else off)."
    )
    assert main(["verify", seed, "--profile", "0.12", "--num-microbatches", "4"]) == 0
    assert "(modelled: profile 0.12 (0.12: in place; `*= cp_size` on both paths), 4 microbatches" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--profile", "0.99.0"], "newer than any release flux-alias-lint models"),
        (["--profile", "newest"], "unknown Megatron profile 'newest'"),
        (["--num-microbatches", "0"], "--num-microbatches: must be at least 1"),
        (["--cp-group-size", "-1"], "--cp-group-size: must be at least 1"),
    ],
)
def test_bad_options_are_usage_errors(options: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    seed = str(FIXTURES / "FAL001" / "seed.py")
    try:
        status = main(["verify", seed, *options])
    except SystemExit as exit_:  # argparse's own usage error
        status = exit_.code
    assert status == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_an_internal_error_exits_3_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A bug of ours in the harness is neither a finding (1) nor a usage error (2): 3, as pytest's internal error.
    seed, other = str(FIXTURES / "FAL001" / "seed.py"), str(FIXTURES / "FAL001" / "detach_direct.py")
    from flux_alias_lint.harness import verify

    real = verify.verify_file

    def crashes_on_the_seed(path: str, *args: object) -> object:
        if path == seed:
            raise KeyError("a line\nbroken")
        return real(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(verify, "verify_file", crashes_on_the_seed)
    assert main(["verify", seed, other]) == 3
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"flux-alias-lint: internal error: {seed}: KeyError: 'a line\\nbroken' (a bug in flux-alias-lint; please report it)"
    ]
    assert f"{other}:" in captured.out and "1 finding(s): 1 confirmed" in captured.out  # the other file still ran


def test_verify_reads_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seed = (FIXTURES / "FAL001" / "seed.py").read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(seed)))
    assert main(["verify", "-"]) == 0
    assert capsys.readouterr().out.startswith('-:17:40: FAL001 CONFIRMED report["loss"][0] ×0.50')


def test_megatron_cores_import_warnings_are_not_printed() -> None:
    # A fresh process: megatron-core warns about Apex and Transformer Engine the first time it is imported.
    run = subprocess.run(
        [sys.executable, "-m", "flux_alias_lint", "verify", str(FIXTURES / "FAL001" / "seed.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0 and "CONFIRMED" in run.stdout
    assert run.stderr == ""


def test_an_unparsable_file_is_a_fal000_as_in_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    assert main(["verify", str(broken)]) == 1  # a finding, as `check` exits; not a usage error
    assert capsys.readouterr().out.splitlines()[0] == (
        f"{broken}:1:7: FAL000 UNCONFIRMED not checked: syntax error: invalid syntax"
    )


# ---- captures (FAL005): judged by their own writers ------------------------------------------------


def test_a_capture_written_in_the_function_is_confirmed_with_its_values(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "FAL005" / "append_to_global.py")
    assert main(["verify", path]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"{path}:10:20: FAL005 CONFIRMED HISTORY[...] 2.5 -> 5 (×2.00) after `loss *= 2.0` before fix, held after; "
        "loss and grad unchanged"
    )
    assert main(["verify", path, "--format", "json"]) == 0
    [verdict] = json.loads(capsys.readouterr().out)
    assert verdict["confirmed_by"] == "call"


def test_a_report_entry_capture_is_judged_by_the_write_not_by_the_rescale(capsys: pytest.CaptureFixture[str]) -> None:
    # One entry, two findings: FAL001's writer is Megatron's rescale (÷2), FAL005's the function's `loss *= 0.25`.
    path = str(FIXTURES / "FAL005" / "report_entry_scaled.py")
    assert main(["verify", path]) == 0
    fal001, fal005 = capsys.readouterr().out.splitlines()[:2]
    assert 'FAL001 CONFIRMED report["policy_loss"] ×0.50 before fix' in fal001
    assert 'FAL005 CONFIRMED report["policy_loss"] 2.5 -> 0.625 (×0.25) after `loss *= 0.25` before fix' in fal005


def test_a_capture_megatron_rescales_is_confirmed_through_its_schedule() -> None:
    # Megatron's real schedule runs here: a process of its own, so no process group outlives the test.
    path = str(FIXTURES / "FAL005" / "global_list_megatron.py")
    run = subprocess.run(
        [sys.executable, "-m", "flux_alias_lint", "verify", path, "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    [verdict] = json.loads(run.stdout)
    assert verdict["confirmed"] and verdict["confirmed_by"] == "forward_backward_no_pipelining"
    assert verdict["detail"] == (
        "LOSSES[...] 2.5 -> 1.25 (×0.50) after the rescale before fix, held after; loss and grad unchanged; "
        "through forward_backward_no_pipelining (training): LOSSES[...] 2.5 -> 1.25 (×0.50), held after"
    )


def test_a_capture_an_in_place_caller_rescales_is_confirmed_by_the_rescale(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "FAL005" / "global_dict_in_place_caller.py")
    # The 2-tuple path multiplies by the context-parallel size first: 3 / 2.
    assert main(["verify", path, "--cp-group-size", "3", "--format", "json"]) == 0
    [verdict] = json.loads(capsys.readouterr().out)
    assert verdict["context"] == "in-place-caller" and verdict["confirmed_by"] == "rescale"
    assert verdict["detail"].startswith('METRICS["loss"] 2.5 -> 3.75 (×1.50) after the rescale before fix, held after')


def test_a_capture_whose_writer_changes_nothing_is_unconfirmed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `*= 1.0` is no write (facts/tensor_ops.py's identity operands), so only `half_func` is a finding;
    # statically it is written in place, at run time `.half()` copies a float32, so the kept value holds.
    path = tmp_path / "no_change.py"
    path.write_text(
        "import torch\n\nHISTORY = []\n\n\ndef loss_func(output_tensor):\n"
        "    loss = torch.sum(output_tensor)\n"
        "    HISTORY.append(loss.detach())\n"
        "    loss *= 1.0\n"
        "    return loss, {}\n\n\n"
        "def half_func(output_tensor):\n"
        "    loss = torch.sum(output_tensor)\n"
        "    HISTORY.append(loss.detach().half())\n"
        "    loss *= 2.0\n"
        "    return loss, {}\n"
    )
    assert [(f.code, f.line) for f in check_source(path.read_text(), str(path))] == [("FAL005", 15)]
    assert main(["verify", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(
        "FAL005 UNCONFIRMED HISTORY[...] held the captured value and it did not move after `loss *= 2.0`"
    )


def test_a_capture_fix_that_does_not_hold_is_unconfirmed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Views unpacked into a list: no expression to put `.clone()` after, so "fixing" the file leaves it moving.
    path = tmp_path / "unfixable_capture.py"
    path.write_text(
        "HISTORY = []\n\n\ndef loss_func(output_tensor):\n"
        "    loss = (output_tensor * 2.0).sum().reshape(1)\n"
        "    HISTORY.append(list(loss.detach()))\n"
        "    loss *= 2.0\n"
        "    return loss, {}\n"
    )
    (finding,) = check_source(path.read_text(), str(path))
    assert finding.code == "FAL005" and not finding.fixable
    assert main(["verify", str(path)]) == 1
    assert "FAL005 UNCONFIRMED HISTORY[...] 5 -> 10 (×2.00) after `loss *= 2.0` before fix, still moves after" in (
        capsys.readouterr().out
    )


def test_a_capture_the_function_never_makes_is_unconfirmed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "raises_first.py"
    path.write_text(
        "import torch\n\nHISTORY = []\n\n\ndef loss_func(output_tensor):\n"
        "    loss = torch.sum(output_tensor)\n"
        "    loss.no_such_method()\n"
        "    HISTORY.append(loss.detach())\n"
        "    loss *= 2.0\n"
        "    return loss, {}\n"
    )
    assert main(["verify", str(path)]) == 1
    assert (
        "FAL005 UNCONFIRMED no probe could run it (AttributeError: 'Tensor' object has no attribute"
        in capsys.readouterr().out
    )
