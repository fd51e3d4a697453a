"""The flake8 plugin, driven through flake8's own API against the fixture corpus."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest
from flake8.api import legacy

from flux_alias_lint.flake8_plugin import Flake8Plugin

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
# `.expected` lines are `LINE:COL: CODE REPORT_PATH` (see tests/fixture_corpus.py).
CHECKER_CASES = sorted(p for p in FIXTURES.glob("FAL*/*.py") if p.with_suffix(".expected").exists())
FORMAT = "%(path)s|%(row)d:%(col)d: %(code)s %(text)s"


def flake8(
    capsys: pytest.CaptureFixture[str], paths: list[Path], **options: object
) -> tuple[int, dict[str, list[str]]]:
    """Run flake8 on `paths`; (total errors, path → `LINE:COL: CODE REPORT_PATH` lines)."""
    capsys.readouterr()
    # The legacy API's formatter prints to stdout (it opens `output_file` only from the CLI).
    report = legacy.get_style_guide(format=FORMAT, **options).check_files([str(p) for p in paths])
    rows: dict[str, list[str]] = {str(p): [] for p in paths}
    for line in capsys.readouterr().out.splitlines():
        path, rest = line.split("|", 1)
        # The message starts with the report entry: `FAL001 report["loss"] = `...``.
        rows[path].append(re.sub(r" = `.*", "", rest))
    return report.total_errors, rows


def test_the_entry_point_is_registered() -> None:
    (entry,) = [e for e in importlib.metadata.entry_points(group="flake8.extension") if e.name == "FAL"]
    assert entry.load() is Flake8Plugin


def test_flake8_reports_exactly_what_each_fixture_expects(capsys: pytest.CaptureFixture[str]) -> None:
    assert len(CHECKER_CASES) > 50
    total, rows = flake8(capsys, CHECKER_CASES, select=["FAL"])
    # flake8 shows no context: the expected lines without it.
    expected = {
        p: [re.sub(r" (megatron|in-place-caller|in-function)$", "", line) for line in _lines(p)] for p in CHECKER_CASES
    }
    mismatches = {
        p.relative_to(FIXTURES).as_posix(): (rows[str(p)], expected[p])
        for p in CHECKER_CASES
        if rows[str(p)] != expected[p]
    }
    assert mismatches == {}
    assert total == sum(len(r) for r in rows.values()) > 50


def _lines(path: Path) -> list[str]:
    return path.with_suffix(".expected").read_text().splitlines()


def test_flake8_owns_noqa(capsys: pytest.CaptureFixture[str]) -> None:
    noqa = [FIXTURES / "FAL001" / "noqa_code.py", FIXTURES / "FAL001" / "noqa_bare.py"]
    assert flake8(capsys, noqa, select=["FAL"])[0] == 0
    # With flake8's noqa switched off the plugin's findings come back: it did not suppress them itself.
    total, rows = flake8(capsys, noqa, select=["FAL"], disable_noqa=True)
    assert total == 2
    assert all(lines and lines[0].endswith('FAL001 report["lm loss"]') for lines in rows.values()), rows


def test_flake8_select_and_ignore_apply_to_fal_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bug.py"
    path.write_text(
        'import torch\n\n\ndef loss_func(x):\n    loss = torch.sum(x)\n    return loss, {"a": loss.detach(), "b": loss.detach().view(1)}\n'
    )
    assert flake8(capsys, [path])[1][str(path)] == ['6:24: FAL001 report["a"]', '6:44: FAL003 report["b"]']
    assert flake8(capsys, [path], extend_ignore=["FAL001"])[1][str(path)] == ['6:44: FAL003 report["b"]']
    assert flake8(capsys, [path], select=["E", "W"])[0] == 0


def test_unparsable_file_is_flake8s_e999_not_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.py"
    path.write_text("def loss_func(:\n")
    total, rows = flake8(capsys, [path], select=["E9", "FAL"])
    assert total == 1
    (line,) = rows[str(path)]
    assert " E999 " in f" {line.split(': ', 1)[1]}"


def test_the_plugin_itself_never_applies_noqa() -> None:
    lines = ["import torch\n", "def loss_func(x):\n", "    loss = x.sum()\n", '    return loss, {"l": loss}  # noqa\n']
    (row,) = list(Flake8Plugin(tree=None, lines=lines, filename="x.py").run())  # type: ignore[arg-type]
    assert row[:2] == (4, 23) and row[2].startswith('FAL002 report["l"] = `loss`')
