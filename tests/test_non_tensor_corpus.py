"""`check --fix` over code that holds no tensors changes nothing (tests/non_tensor_corpus/).

Each corpus module returns `(value, {...})` like a loss function, but its values are strings,
ints, floats, lists, numpy arrays or symbolic expressions, where an inserted `.clone()` or
`.detach()` would raise: nothing in them may be flagged or fixed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flux_alias_lint.cli import main
from flux_alias_lint.lint import check_source

CORPUS = Path(__file__).resolve().parent / "non_tensor_corpus"
FILES = sorted(p.name for p in CORPUS.glob("*.py"))


def test_the_corpus_is_there() -> None:
    assert len(FILES) >= 12


@pytest.mark.parametrize("name", FILES)
def test_fix_changes_nothing(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / name
    shutil.copyfile(CORPUS / name, target)
    before = target.read_bytes()
    code = main(["check", "--fix", "--no-cache", str(target)])
    out, err = capsys.readouterr()
    assert target.read_bytes() == before, out
    assert code == 0, out + err
    assert check_source(before, str(target)) == []
