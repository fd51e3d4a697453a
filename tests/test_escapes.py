"""`escapes`: a function nothing is seen to hand to a host whose value goes where the index cannot
follow it (`index/escapes.py`), in every output; and `flux-alias-lint explain FILE:LINE`."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import jsonschema
import pytest
from test_formats import sarif_schema

from flux_alias_lint import check_source
from flux_alias_lint.cli import main
from flux_alias_lint.index import escapes

LOSS = """\
import torch


def loss_func(output_tensor):
    loss = output_tensor.sum()
    return loss, {"lm loss": loss}
"""

TRAIN = """\
from external import Trainer
from loss import loss_func


def main():
    Trainer().fit(loss_func)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "loss.py").write_text(LOSS)
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


def check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["check", ".", "--no-cache", *argv])
    return code, capsys.readouterr().out


def test_the_text_says_where_the_function_escapes(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = check(capsys)
    assert code == 0  # a warning, as `unreached`
    first = out.splitlines()[0]
    assert first.startswith("loss.py:6:30: FAL002 [*] ")
    assert "may be reached (passed to Trainer().fit, not followed)" in first
    assert first.endswith("[escapes at train.py:6, warning]")


def test_escapes_follows_the_unreached_severity(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = check(capsys, "--unreached", "error")
    assert code == 1 and out.splitlines()[0].endswith("[escapes at train.py:6]")
    code, out = check(capsys, "--unreached", "ignore")
    assert code == 0 and "FAL002" not in out


def test_json_carries_the_chain(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = check(capsys, "--output-format", "json")
    [finding] = json.loads(out)
    assert (finding["context"], finding["severity"]) == ("escapes", "warning")
    assert finding["reached_by"] == [{"path": "train.py", "line": 6, "what": "passed to Trainer().fit"}]


def test_sarif_carries_the_chain_as_related_locations(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = check(capsys, "--output-format", "sarif")
    log = json.loads(out)
    jsonschema.validate(log, sarif_schema())
    [result] = log["runs"][0]["results"]
    assert result["level"] == "warning" and result["properties"] == {"context": "escapes"}
    [related] = result["relatedLocations"]
    assert related["message"]["text"] == "passed to Trainer().fit"
    assert related["physicalLocation"]["artifactLocation"]["uri"] == "train.py"
    assert related["physicalLocation"]["region"] == {"startLine": 6}


def explain(capsys: pytest.CaptureFixture[str], target: str) -> tuple[int, str, str]:
    code = main(["explain", target])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_explain_shows_where_the_value_is_lost(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "train.py").write_text(TRAIN.replace("Trainer().fit(loss_func)", "chosen = loss_func\n    run(chosen)"))
    assert explain(capsys, "loss.py:6") == (
        0,
        'loss.py:6:30: FAL002 report["lm loss"] [escapes, warning]\n'
        "  it may reach a host that rescales its loss: its value goes where the analysis cannot follow it:\n"
        "    train.py:6: bound to chosen\n"
        "    train.py:7: passed to run, not followed\n",
        "",
    )


def test_explain_says_when_nothing_references_the_function(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "train.py").unlink()
    code, out, _ = explain(capsys, "loss.py:6")
    assert code == 0
    assert out.splitlines()[1] == "  unreached: nothing in the project references its function, other than to call it"


def test_explain_lists_the_references_followed(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "train.py").write_text("from loss import loss_func\n\nchosen = loss_func\nchosen(None)\n")
    code, out, _ = explain(capsys, "loss.py:6")
    assert (code, out.splitlines()[1:]) == (
        0,
        [
            "  unreached: every reference to its function was followed, and none reaches a host:",
            "    train.py:3: named here",
        ],
    )


def test_explain_prints_a_megatron_chain(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "train.py").write_text(
        "from loss import loss_func\nfrom megatron.training import pretrain\n\n\n"
        "def forward_step(data_iterator, model):\n    return model(next(data_iterator)), loss_func\n\n\n"
        "pretrain(None, None, None, forward_step)\n"
    )
    code, out, _ = explain(capsys, "loss.py:6")
    lines = out.splitlines()
    assert code == 0 and lines[0] == 'loss.py:6:30: FAL002 report["lm loss"] [megatron]'
    assert lines[1] == "  Megatron's schedule rescales its loss in place, reached so:"
    assert [line.split(": ")[0] for line in lines[2:]] == ["    train.py:6", "    train.py:9"]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("loss.py", "expected FILE:LINE (a line number from 1), got 'loss.py'"),
        ("loss.py:0", "expected FILE:LINE (a line number from 1), got 'loss.py:0'"),
        ("loss.py:six", "expected FILE:LINE (a line number from 1), got 'loss.py:six'"),
        ("missing.py:3", "missing.py: no such file"),
        ("loss.py:4", "loss.py:4: no finding there"),
    ],
)
def test_explain_refuses_a_bad_target_in_one_line(
    project: Path, capsys: pytest.CaptureFixture[str], target: str, message: str
) -> None:
    assert explain(capsys, target) == (2, "", f"flux-alias-lint: error: {message}\n")


def test_the_escape_analysis_runs_only_for_unreached_findings(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []
    original = escapes.Escapes.__init__

    def counting(self: escapes.Escapes, roots: list[str], path: str, text: str, tree: ast.Module | None = None) -> None:
        made.append(Path(path).name)
        original(self, roots, path, text, tree)

    monkeypatch.setattr(escapes.Escapes, "__init__", counting)
    (project / "train.py").write_text(
        "from loss import loss_func\n\n\ndef forward_step(data_iterator, model):\n"
        "    return model(next(data_iterator)), loss_func\n"
    )
    assert check(capsys, "--jobs", "1")[0] == 1  # Megatron's: an error, nothing asked
    assert made == []
    (project / "other.py").write_text(LOSS)  # one unreached finding: one analysis, for its file
    check(capsys, "--jobs", "1")
    assert made == ["other.py"]


def _context(source: str) -> tuple[str, str]:
    [finding] = check_source(textwrap.dedent(source), "m.py")
    return finding.context, finding.reached_by[-1].what if finding.reached_by else ""


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            """\
            import functools, torch
            def loss_func(output_tensor, scale):
                loss = torch.sum(output_tensor) * scale
                return loss, {"lm loss": loss}
            def setup(trainer):
                trainer.register(functools.partial(loss_func, scale=2))
            """,
            ("escapes", "passed to trainer.register"),
            id="a-partial-passed-to-an-unknown-call",
        ),
        pytest.param(
            """\
            import torch
            def make():
                def loss_func(output_tensor):
                    loss = torch.sum(output_tensor)
                    return loss, {"lm loss": loss}
                return loss_func
            """,
            ("escapes", "returned by make, called nowhere seen"),
            id="a-closure-returned-by-a-function-nothing-calls",
        ),
        pytest.param(
            """\
            import torch
            def make():
                def loss_func(output_tensor):
                    loss = torch.sum(output_tensor)
                    return loss, {"lm loss": loss}
                return 1, loss_func
            def run(x):
                _, fn = make()
                return fn(x)
            """,
            ("unreached", ""),
            id="a-closure-returned-unpacked-and-called",
        ),
        pytest.param(
            """\
            import torch
            class Trainer:
                def __init__(self, objective):
                    self.objective = objective
                def step(self, x):
                    return self.objective(x)
            def loss_func(output_tensor):
                loss = torch.sum(output_tensor)
                return loss, {"lm loss": loss}
            Trainer(loss_func).step(None)
            """,
            ("unreached", ""),
            id="stored-on-self-and-called-in-its-class",
        ),
        pytest.param(
            """\
            import torch
            class Trainer:
                def __init__(self, objective):
                    self.objective = objective
            def loss_func(output_tensor):
                loss = torch.sum(output_tensor)
                return loss, {"lm loss": loss}
            def run(engine):
                trainer = Trainer(loss_func)
                engine.fit(trainer.objective)
            """,
            ("escapes", "stored as self.objective of Trainer, read as trainer.objective"),
            id="stored-on-self-and-read-off-an-object-of-unknown-class",
        ),
        pytest.param(
            """\
            import torch
            class Loss:
                def __call__(self, output_tensor):
                    loss = torch.sum(output_tensor)
                    return loss, {"lm loss": loss}
            def run(policy):
                policy.train(loss_fn=Loss())
            """,
            ("escapes", "passed to policy.train"),
            id="a-functor-instance-passed-to-an-unknown-call",
        ),
        pytest.param(
            """\
            import torch
            from mmengine import LOSSES
            @LOSSES.register_module()
            def loss_func(output_tensor):
                loss = torch.sum(output_tensor)
                return loss, {"lm loss": loss}
            """,
            ("escapes", "registered by @LOSSES.register_module"),
            id="registered-by-a-library-decorator",
        ),
        pytest.param(
            """\
            import torch
            def loss_func(output_tensor):
                loss = torch.sum(output_tensor)
                return loss, {"lm loss": loss}
            LOSSES = {"sum": loss_func}
            def run(name, x):
                return LOSSES[name](x)
            """,
            ("unreached", ""),
            id="a-dict-registry-read-and-called",
        ),
        pytest.param(
            """\
            import torch
            def loss_func(output_tensor):
                loss = torch.sum(output_tensor)
                return loss, {"lm loss": loss}
            LOSSES = [loss_func]
            def run(engine):
                engine.use(LOSSES)
            """,
            ("escapes", "passed to engine.use"),
            id="a-list-registry-handed-on",
        ),
    ],
)
def test_shapes(source: str, expected: tuple[str, str]) -> None:
    assert _context(source) == expected


def test_a_file_changed_between_two_checks_in_one_process_is_read_again(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "train.py").write_text("from loss import loss_func\n\nchosen = loss_func\nchosen(None)\n")
    assert check(capsys, "--jobs", "1", "--output-format", "json")[1].count('"unreached"') == 1
    (project / "train.py").write_text("from loss import loss_func\n\nchosen = loss_func\nrun(chosen, None)\n")
    [finding] = json.loads(check(capsys, "--jobs", "1", "--output-format", "json")[1])
    assert finding["context"] == "escapes" and finding["reached_by"][-1]["what"] == "passed to run"


@pytest.mark.parametrize(("callers", "expected"), [(9, "escapes"), (2, "unreached")])
def test_a_value_run_past_a_function_too_many_files_call_escapes(
    project: Path, capsys: pytest.CaptureFixture[str], callers: int, expected: str
) -> None:
    """The hand-off search follows a parameter back to its function's calls in at most
    `calls._CALLER_FILES` other files: a loss function run past a function called from more is
    where that search stopped, so it escapes there; with fewer, `unreached` is earned."""
    (project / "train.py").write_text(
        "from loss import loss_func\nfrom steps import wrap\n\n\ndef main():\n    wrap(loss_func)\n"
    )
    (project / "steps.py").write_text("def wrap(fn):\n    return run(fn)\n\n\ndef run(step):\n    return step(None)\n")
    for k in range(callers):
        (project / f"user{k}.py").write_text(f"from steps import wrap\n\n\ndef use{k}(f):\n    wrap(f)\n")
    [finding] = json.loads(check(capsys, "--jobs", "1", "--output-format", "json")[1])
    assert finding["context"] == expected
    if expected == "escapes":
        assert finding["reached_by"][-1]["what"] == f"called past wrap, which {callers + 1} files call"
        assert finding["reached_by"][-1]["path"] == "steps.py"
