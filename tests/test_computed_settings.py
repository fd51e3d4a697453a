"""A host's setting the project computes (`index/settings.computed`): which value a run gets is not in the code, so
`check`'s message says the verdict depends on it, naming it and where it is computed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flux_alias_lint.cli import main
from flux_alias_lint.index.settings import computed, setting

NAME = "calculate_per_token_loss"
LOSS = (
    "import torch\n\n\ndef loss_func(output_tensor):\n    loss = torch.sum(output_tensor)\n"
    "    num_tokens = torch.tensor(output_tensor.numel())\n"
    '    return loss, num_tokens, {"lm loss": loss.detach()}\n\n\n'
    "def forward_step(data_iterator, model):\n    return model(next(data_iterator)), loss_func\n"
)


def _project(tmp_path: Path, config: str) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "pkg" / "config.py").write_text(config)
    (tmp_path / "pkg" / "loss.py").write_text(LOSS)
    return tmp_path / "pkg" / "loss.py"


@pytest.mark.parametrize(
    ("config", "line"),
    [
        ("cfg.calculate_per_token_loss = not args.no_calculate_per_token_loss\n", 1),  # bionemo's recipes
        ("c = Config(calculate_per_token_loss=args.per_token if args.per_token is not None else True)\n", 1),
        (  # ms-swift's arguments: a default filled in from the task
            "class Args:\n    def __post_init__(self):\n        if self.calculate_per_token_loss is None:\n"
            "            self.calculate_per_token_loss = self.task_type == 'causal_lm' and self.rlhf_type is None\n",
            4,
        ),
        ('kwargs = {"calculate_per_token_loss": args.sft or args.pretrain}\n', 1),
        ("cfg.calculate_per_token_loss = args.calculate_per_token_loss\n", None),  # passed on: set elsewhere
        ("if cp_size > 1:\n    cfg.calculate_per_token_loss = not args.x\n", None),  # decided by something else
        ("cfg.calculate_per_token_loss = False\n", None),  # a literal
    ],
)
def test_what_computes_a_setting(tmp_path: Path, config: str, line: int | None) -> None:
    path = str(_project(tmp_path, config))
    assert computed(path, NAME) == (f"pkg/config.py:{line}" if line else None)


def _finding(tmp_path: Path, config: str, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    path = _project(tmp_path, config)
    main(["check", str(path), "--no-cache", "--format", "json"])
    [finding] = json.loads(capsys.readouterr().out)
    return finding


def test_check_says_the_verdict_depends_on_a_computed_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    finding = _finding(tmp_path, "cfg.calculate_per_token_loss = not args.no_calculate_per_token_loss\n", capsys)
    assert finding["context"] == "megatron" and finding["severity"] == "error"
    assert "num_microbatches unless calculate_per_token_loss (computed at pkg/config.py:1) is on" in str(
        finding["message"]
    )


def test_a_computed_setting_beside_a_literal_off_still_decides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ms-swift: its preference arguments default it to False, its others compute it: a run may get either.
    config = "class Rlhf:\n    calculate_per_token_loss: bool = False\n\n\nc.calculate_per_token_loss = not a\n"
    finding = _finding(tmp_path, config, capsys)
    assert setting(str(tmp_path / "pkg" / "loss.py"), NAME) == ("pkg/config.py:2", False)
    assert "unless calculate_per_token_loss (computed at pkg/config.py:5) is on" in str(finding["message"])


def test_a_literal_on_spares_it_whatever_else_computes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    finding = _finding(tmp_path, "a.calculate_per_token_loss = True\nb.calculate_per_token_loss = not x\n", capsys)
    assert finding["severity"] == "warning" and "depends" not in str(finding["message"])
    assert "under calculate_per_token_loss=True at pkg/config.py:1" in str(finding["message"])


def test_a_two_tuple_does_not_depend_on_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _project(tmp_path, "cfg.calculate_per_token_loss = not args.x\n")
    path.write_text(LOSS.replace("loss, num_tokens, {", "loss, {"))
    main(["check", str(path), "--no-cache", "--format", "json"])
    [finding] = json.loads(capsys.readouterr().out)
    assert finding["severity"] == "error" and "depends" not in str(finding["message"])
