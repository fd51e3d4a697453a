"""`check --fix` over code that holds no tensors changes nothing (tests/non_tensor_corpus/).

Each corpus module returns `(value, {...})` like a loss function, but its values are strings,
ints, floats, lists, numpy arrays or symbolic expressions, where an inserted `.clone()` or
`.detach()` would raise. The files still flagged wait for more type evidence (issue 13: only
tensors get tensor fixes) and are marked as strict xfails, so each one that starts passing must be
unmarked.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flux_alias_lint.cli import main
from flux_alias_lint.lint import check_source

CORPUS = Path(__file__).resolve().parent / "non_tensor_corpus"
WAITING_FOR_TYPE_EVIDENCE = {
    "inductor_comms.py": "in a module that imports torch, ints from an unknown call are taken for tensors",
}
FILES = sorted(p.name for p in CORPUS.glob("*.py"))


def test_the_corpus_is_there() -> None:
    assert len(FILES) >= 12 and set(WAITING_FOR_TYPE_EVIDENCE) <= set(FILES)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=WAITING_FOR_TYPE_EVIDENCE[name]))
        if name in WAITING_FOR_TYPE_EVIDENCE
        else name
        for name in FILES
    ],
)
def test_fix_changes_nothing(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / name
    shutil.copyfile(CORPUS / name, target)
    before = target.read_bytes()
    code = main(["check", "--fix", "--no-cache", str(target)])
    out, err = capsys.readouterr()
    assert target.read_bytes() == before, out
    assert code == 0, out + err
    assert check_source(before, str(target)) == []
