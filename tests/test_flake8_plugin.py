"""The flake8 plugin, driven through flake8's own API against the fixture corpus."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest
from flake8.main import cli
from megatron_shapes import FORWARD_STEP

from flux_alias_lint.flake8_plugin import Flake8Plugin

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
# `.expected` lines are `LINE:COL: CODE REPORT_PATH` (see tests/fixture_corpus.py).
CHECKER_CASES = sorted(p for p in FIXTURES.glob("FAL*/*.py") if p.with_suffix(".expected").exists())
FORMAT = "%(path)s|%(row)d:%(col)d: %(code)s %(text)s"


def flake8(
    capsys: pytest.CaptureFixture[str], paths: list[Path], **options: object
) -> tuple[int, dict[str, list[str]]]:
    """Run flake8's command line (in this process) on `paths`; (total errors, path → `LINE:COL: CODE
    REPORT_PATH` lines). Options as flake8's long flags: `extend_ignore=["FAL001"]`, `disable_noqa=True`."""
    argv = [f"--format={FORMAT}"]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        argv += [flag] if value is True else [f"{flag}={','.join(value) if isinstance(value, list) else value}"]
    capsys.readouterr()
    status = cli.main([*argv, *map(str, paths)])
    rows: dict[str, list[str]] = {str(p): [] for p in paths}
    out = capsys.readouterr().out.splitlines()
    for line in out:
        path, rest = line.split("|", 1)
        # The message starts with the report entry: `FAL001 report["loss"] = `...`` (or `, made in `helper()``).
        rows[path].append(re.sub(r"( = |, made in )`.*", "", rest))
    assert status == (1 if out else 0)
    return len(out), rows


def test_the_entry_point_is_registered() -> None:
    (entry,) = [e for e in importlib.metadata.entry_points(group="flake8.extension") if e.name == "FAL"]
    assert entry.load() is Flake8Plugin


@pytest.mark.parametrize("unreached", [None, "error"])
def test_flake8_reports_exactly_what_each_fixture_expects(
    capsys: pytest.CaptureFixture[str], unreached: str | None
) -> None:
    """flake8 fails on what `check` fails on: the findings with a context; those nothing is known to
    rescale (no context in `.expected`) are warnings, reported only with `--fal-unreached error`."""
    assert len(CHECKER_CASES) > 50
    options = {"fal_unreached": unreached} if unreached else {}
    total, rows = flake8(capsys, CHECKER_CASES, select=["FAL"], **options)
    proven = re.compile(r" (megatron|in-place-caller|in-function)$")
    # flake8 shows the context in the message: the expected lines without it.
    expected = {
        p: [proven.sub("", line) for line in _lines(p) if unreached == "error" or proven.search(line)]
        for p in CHECKER_CASES
    }
    mismatches = {
        p.relative_to(FIXTURES).as_posix(): (rows[str(p)], expected[p])
        for p in CHECKER_CASES
        if rows[str(p)] != expected[p]
    }
    assert mismatches == {}
    assert total == sum(len(r) for r in rows.values()) > (50 if unreached else 15)


def _lines(path: Path) -> list[str]:
    return path.with_suffix(".expected").read_text().splitlines()


def test_flake8_owns_noqa(capsys: pytest.CaptureFixture[str]) -> None:
    noqa = [FIXTURES / "FAL001" / "noqa_code.py", FIXTURES / "FAL001" / "noqa_bare.py"]
    # Nothing hands these loss functions to Megatron: their findings are reported with --fal-unreached error.
    assert flake8(capsys, noqa, select=["FAL"], fal_unreached="error")[0] == 0
    # With flake8's noqa switched off the plugin's findings come back: it did not suppress them itself.
    total, rows = flake8(capsys, noqa, select=["FAL"], disable_noqa=True, fal_unreached="error")
    assert total == 2
    assert all(lines and lines[0].endswith('FAL001 report["lm loss"]') for lines in rows.values()), rows


def test_flake8_select_and_ignore_apply_to_fal_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bug.py"
    path.write_text(
        'import torch\n\n\ndef loss_func(x):\n    loss = torch.sum(x)\n    return loss, {"a": loss.detach(), "b": loss.detach().view(1)}\n'
        + FORWARD_STEP  # handed to Megatron: errors
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
    lines += FORWARD_STEP.splitlines(keepends=True)  # handed to Megatron: an error
    (row,) = list(Flake8Plugin(tree=None, lines=lines, filename="x.py").run())  # type: ignore[arg-type]
    assert row[:2] == (4, 23) and row[2].startswith('FAL002 report["l"] = `loss`')


def test_flake8_applies_checks_limits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`max-file-size` and `file-timeout` hold under flake8 as under `check`: the file over the size
    is FAL000 with the reason, and the other files are still checked; a file still being checked
    when `file-timeout` (the safety net) runs out fails the run, never a finding."""
    from flux_alias_lint import flake8_plugin

    (tmp_path / "pyproject.toml").write_text("[tool.flux-alias-lint]\nmax-file-size = 400\nfile-timeout = 1\n")
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" * 100)  # 600 bytes
    slow = tmp_path / "slow.py"
    slow.write_text("SPIN = 1\n")
    bug = tmp_path / "bug.py"
    bug.write_text(
        FORWARD_STEP
        + 'def loss_func(output_tensor):\n    loss = output_tensor.sum()\n    return loss, {"loss": loss.detach()}\n'
    )
    real_check = flake8_plugin.check_source

    def spinning_on_slow(text: str, *args: object, **kwargs: object) -> object:
        while "SPIN" in text:  # until the time limit's signal interrupts it
            pass
        return real_check(text, *args, **kwargs)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(flake8_plugin, "check_source", spinning_on_slow)
    capsys.readouterr()
    # The safety net fails flake8's run, naming the file, as it fails `check`'s: never a finding.
    with pytest.raises(Exception, match=r"slow\.py: still being checked after 1 s"):
        cli.main([f"--format={FORMAT}", "--select=FAL", "--jobs=1", "big.py", "slow.py", "bug.py"])
    assert "FAL000" not in capsys.readouterr().out
    status = cli.main([f"--format={FORMAT}", "--select=FAL", "--jobs=1", "big.py", "bug.py"])
    out = sorted(capsys.readouterr().out.splitlines())
    assert status == 1
    assert out[0] == "big.py|1:1: FAL000 is 600 bytes, more than the limit of 400 (max-file-size); skipped", out
    assert out[1].startswith("bug.py|") and " FAL001 " in out[1], out
    assert len(out) == 2, out
