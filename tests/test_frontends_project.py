"""Every front end gives a file the whole project's verdict: flake8 (run for real) and a pre-commit
run on the changed files report the finding in `losses.py` that `train.py` makes an error by handing
its loss function to Megatron (fixtures/FAL001/dataclass_report_handed_over_by_another_file).

Beside the fixture each project gets two files of its own, the negatives: `evaluate.py`, a loss
function nothing hands over (an `unreached` warning, which must not fail a run), and
`pretrain_vision.py`, which hands its own loss function to Megatron (an error, but none that a
change to `train.py` decides).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from flake8.main import cli as flake8_cli

from flux_alias_lint import cache

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "FAL001" / "dataclass_report_handed_over_by_another_file"
LOSSES = "losses.py:20:29: FAL001"  # the fixture's `expected`, without the context

EVALUATE = """\
import torch


def eval_loss(output_tensor):
    loss = torch.mean(output_tensor)
    return loss, {"eval loss": loss.detach()}
"""
EVALUATE_FINDING = "evaluate.py:6:32: FAL001"

PRETRAIN_VISION = """\
import torch


def vision_loss(output_tensor):
    loss = torch.sum(output_tensor)
    return loss, {"vision loss": loss.detach()}


def forward_step(data_iterator, model):
    return model(next(data_iterator)), vision_loss
"""
PRETRAIN_VISION_FINDING = "pretrain_vision.py:6:34: FAL001"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The fixture project and the two negatives, a project of its own (its pyproject.toml)."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "expected").unlink()
    (root / "evaluate.py").write_text(EVALUATE)
    (root / "pretrain_vision.py").write_text(PRETRAIN_VISION)
    (root / "pyproject.toml").write_text('[project]\nname = "trainer"\n')
    return root


def run(project: Path, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # this checkout's plugin, whatever is installed
    return subprocess.run(
        [sys.executable, *argv],
        cwd=project,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def found(output: str) -> list[str]:
    """`path:line:col: CODE` of each finding printed."""
    return re.findall(r"^(?:\./)?([^\s:]+\.py:\d+:\d+: FAL\d+)", output, re.MULTILINE)


# flake8


def test_flake8_reports_a_finding_whose_context_is_another_files(project: Path) -> None:
    result = run(project, "-m", "flake8", "--select", "FAL", ".")
    assert found(result.stdout) == [LOSSES, PRETRAIN_VISION_FINDING], result.stdout + result.stderr
    assert "[megatron via train.py:14]" in result.stdout  # the call that rescales it, in train.py
    assert result.returncode == 1
    # The file alone, as an editor's flake8 runs it: the same verdict.
    alone = run(project, "-m", "flake8", "--select", "FAL", "losses.py")
    assert found(alone.stdout) == [LOSSES] and alone.returncode == 1


def test_flake8_passes_on_an_unreached_finding_unless_told_otherwise(project: Path) -> None:
    assert found(run(project, "-m", "flake8", "--select", "FAL", "--fal-unreached", "error", ".").stdout) == [
        EVALUATE_FINDING,
        LOSSES,
        PRETRAIN_VISION_FINDING,
    ]
    alone = run(project, "-m", "flake8", "--select", "FAL", "evaluate.py")
    assert (alone.returncode, alone.stdout) == (0, "")  # a warning for `check`, which passes
    loud = run(project, "-m", "flake8", "--select", "FAL", "--fal-unreached", "error", "evaluate.py")
    assert found(loud.stdout) == [EVALUATE_FINDING] and loud.returncode == 1


def test_flake8_reads_the_projects_settings(project: Path) -> None:
    config = project / "pyproject.toml"
    config.write_text('[tool.flux-alias-lint]\nunreached = "error"\n')
    assert found(run(project, "-m", "flake8", "--select", "FAL", "evaluate.py").stdout) == [EVALUATE_FINDING]
    config.write_text(
        '[tool.flux-alias-lint]\nunreached = "error"\n\n[tool.flux-alias-lint.per-file-ignores]\n"eval*" = ["FAL001"]\n'
    )
    assert found(run(project, "-m", "flake8", "--select", "FAL", ".").stdout) == [LOSSES, PRETRAIN_VISION_FINDING]
    config.write_text('[tool.flux-alias-lint]\nunreachd = "error"\n')
    broken = run(project, "-m", "flake8", "--select", "FAL", ".")
    assert broken.returncode == 1
    assert f"flux-alias-lint: {config}: unknown option(s) in [tool.flux-alias-lint]: unreachd" in broken.stdout
    assert "Traceback" not in broken.stdout + broken.stderr


ACCUMULATE = """

def accumulate(output_tensor, accumulation_steps):
    loss, report = lm_loss(output_tensor)
    loss /= accumulation_steps
    return report
"""


def test_flake8_on_stdin_gives_the_saved_files_verdict(project: Path) -> None:
    """An editor's flake8 pipes the buffer in: unsaved, the text's own evidence goes on top of the
    index's (its lines are the ones shown); saved, the verdict is the file's, although the text's own
    evidence alone (a caller in it rescaling the loss in place) is weaker than the hand-off."""
    losses = project / "losses.py"
    losses.write_text(losses.read_text() + ACCUMULATE)
    command = ("-m", "flake8", "--select", "FAL", "--stdin-display-name", "losses.py", "-")
    saved = run(project, *command, stdin=losses.read_text())
    assert found(saved.stdout) == [LOSSES] and "[megatron via train.py:14]" in saved.stdout
    assert saved.stdout == run(project, "-m", "flake8", "--select", "FAL", "losses.py").stdout
    edited = run(project, *command, stdin="# edited\n" + losses.read_text())
    assert found(edited.stdout) == ["losses.py:21:29: FAL001"] and "[in-place-caller via losses.py:26]" in edited.stdout


def test_flake8_builds_the_index_once_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """20 files over two flake8 workers: one index build, over the whole project, in the process
    that forks them; a second run reads it from the cache (the files' stamps unchanged)."""
    project = tmp_path / "project"
    shutil.copytree(FIXTURE, project)
    (project / "expected").unlink()
    (project / "pyproject.toml").write_text('[project]\nname = "trainer"\n')
    for k in range(20 - 3):
        (project / f"module_{k}.py").write_text(f"import torch\n\n\ndef scale_{k}(x):\n    return x * {k}\n")
    files = sorted(project.glob("*.py"))
    assert len(files) == 20
    old = 1_000_000_000  # 2001: older than any stamp the index cache distrusts as too recent
    for path in files:
        os.utime(path, (old, old))
    builds = tmp_path / "builds"  # a line per build, appended by whichever process builds
    real = cache.collect_evidence

    def counting(roots, files, *known):  # noqa: ANN001, ANN002, ANN202
        with open(builds, "a") as handle:
            handle.write(f"{os.getpid()} {sum(len(paths) for paths in files.values())}\n")
        return real(roots, files, *known)

    monkeypatch.setattr(cache, "collect_evidence", counting)
    monkeypatch.chdir(project)
    assert flake8_cli.main(["--select", "FAL", "-j", "2", *map(str, files)]) == 1
    assert found(capsys.readouterr().out) == [f"{project}/{LOSSES}"]
    assert builds.read_text().splitlines() == [f"{os.getpid()} 20"]
    builds.unlink()
    assert flake8_cli.main(["--select", "FAL", "-j", "2", *map(str, files)]) == 1
    assert found(capsys.readouterr().out) == [f"{project}/{LOSSES}"]
    assert not builds.exists()


# pre-commit: the hook's own command on the changed files


def hook_entry(hook: str = "flux-alias-lint") -> list[str]:
    """The hook's entry (.pre-commit-hooks.yaml), as `python -m flux_alias_lint ...`."""
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text()
    (entry,) = re.findall(rf"^- id: {hook}\n(?:  .*\n)*?  entry: (.*)$", hooks, re.MULTILINE)
    program, *args = entry.split()
    assert program == "flux-alias-lint"
    return ["-m", "flux_alias_lint", *args]


def test_committing_the_hand_off_alone_reports_the_loss_function_it_hands_over(project: Path) -> None:
    result = run(project, *hook_entry(), "train.py")
    assert found(result.stdout) == [LOSSES], result.stdout + result.stderr
    assert result.returncode == 1
    # Why a file that was not handed over is reported: the step in train.py that decides it.
    assert (
        "flux-alias-lint: note: losses.py is reported too: its verdict is decided in train.py:9 "
        "(returned as the loss function by forward_step)"
    ) in result.stderr


def test_the_fix_hook_on_the_hand_off_alone_fixes_the_loss_function_it_hands_over(project: Path) -> None:
    before = (project / "losses.py").read_text()
    result = run(project, *hook_entry("flux-alias-lint-fix"), "train.py")
    assert result.returncode == 1, result.stdout + result.stderr  # it changed a file, to be reviewed
    assert found(result.stdout) == [], result.stdout
    assert "Found 1 error (1 fixed, 0 remaining)." in result.stdout
    assert "flux-alias-lint: note: losses.py is fixed too: its verdict is decided in train.py:9 " in result.stderr
    after = (project / "losses.py").read_text()
    assert after != before and after.replace(".clone()", "") == before
    again = run(project, *hook_entry("flux-alias-lint-fix"), "train.py")
    assert again.returncode == 0 and found(again.stdout) == [], again.stdout + again.stderr
    assert (project / "losses.py").read_text() == after


def test_a_fix_run_never_tells_to_use_fix(project: Path) -> None:
    (project / "losses.py").chmod(0o444)  # the finding stays: its file is read-only
    result = run(project, *hook_entry("flux-alias-lint-fix"), "losses.py")
    assert found(result.stdout) == [LOSSES] and result.returncode == 1, result.stdout + result.stderr
    assert "losses.py: read-only file, not fixed" in result.stderr
    assert "--fix` option" not in result.stdout
    assert "[*] 1 fixable with the `--fix` option." in run(project, *hook_entry(), "losses.py").stdout


def test_a_change_reports_no_file_it_does_not_decide(project: Path) -> None:
    # The unrelated files: each alone reports only itself, the warning passes.
    vision = run(project, *hook_entry(), "pretrain_vision.py")
    assert found(vision.stdout) == [PRETRAIN_VISION_FINDING] and "note:" not in vision.stderr
    evaluate = run(project, *hook_entry(), "evaluate.py")
    assert found(evaluate.stdout) == [EVALUATE_FINDING] and evaluate.returncode == 0
    # The loss function's own file: nothing else is decided by it.
    losses = run(project, *hook_entry(), "losses.py")
    assert found(losses.stdout) == [LOSSES] and "note:" not in losses.stderr
    # A directory is checked as before: what is in it, no more.
    (project / "steps").mkdir()
    (project / "train.py").rename(project / "steps" / "train.py")
    (project / "steps" / "__init__.py").write_text("")
    assert found(run(project, *hook_entry(), "steps").stdout) == []


def test_a_file_the_run_excludes_stays_out(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.flux-alias-lint]\nextend-exclude = ["losses.py"]\n')
    result = run(project, *hook_entry(), "train.py")
    assert (result.returncode, found(result.stdout)) == (0, [])


# the editor

LOSSES_WITH_A_CALLER = """\
import torch


def loss_func(output_tensor):
    loss = torch.mean(output_tensor)
    return loss, {"lm loss": loss.detach()}


def evaluate(output_tensor, n):
    loss, report = loss_func(output_tensor)
    loss /= n
    return report
"""

TRAIN = """\
from losses import loss_func
from megatron.core.pipeline_parallel import get_forward_backward_func


def forward_step(data_iterator, model):
    return model(next(data_iterator)), loss_func


def train(data_iterator, model):
    get_forward_backward_func()(forward_step_func=forward_step, data_iterator=data_iterator, model=model)
"""


def test_the_editor_gives_a_saved_file_checks_verdict(tmp_path: Path) -> None:
    """A saved document gets the index's answer alone: the hand-off to Megatron in another file, not
    the weaker in-place caller its own text shows; an unsaved edit gets its own evidence on top."""
    from flux_alias_lint.lint import check_text
    from flux_alias_lint.server import lint_document
    from flux_alias_lint.source import SourceFile

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "trainer"\n')
    losses, train = tmp_path / "losses.py", tmp_path / "train.py"
    losses.write_text(LOSSES_WITH_A_CALLER)
    train.write_text(TRAIN)
    reached = cache.project_reached([str(losses), str(train)], None)
    by_check = check_text(
        SourceFile(str(losses), LOSSES_WITH_A_CALLER, "utf-8"), reaches=reached[str(losses.resolve())]
    )
    in_editor = lint_document(str(losses), LOSSES_WITH_A_CALLER, reached)
    assert [(f.line, f.context, f.reached_by[-1].path) for f in in_editor] == [
        (f.line, f.context, f.reached_by[-1].path) for f in by_check[0]
    ]
    assert [f.context for f in in_editor] == ["megatron"]
    edited = LOSSES_WITH_A_CALLER.replace("return report", "return report  # edited")
    assert [f.context for f in lint_document(str(losses), edited, reached)] == ["in-place-caller"]
