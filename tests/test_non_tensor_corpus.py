"""`check --fix` over code that holds no tensors changes nothing (tests/non_tensor_corpus/).

Each corpus module returns `(value, {...})` like a loss function, but its values are strings,
ints, floats, lists, numpy arrays or symbolic expressions, where an inserted `.clone()` or
`.detach()` would raise. The files still flagged wait for type evidence (issue 13: only tensors
get tensor fixes) and are marked as strict xfails, so each one that starts passing must be
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
    "collate.py": "list elements and dict entries of lists taken for tensors",
    "config_merge.py": "dict.get/setdefault results of unknown values taken for tensors",
    "lr_schedule.py": "float arithmetic on an unannotated parameter taken for a tensor",
    "mailcap_parse.py": "fields[0] and fields[1] of one appended-to list taken for the same object",
    "numeric_arrays.py": "numpy arrays (no torch import) taken for tensors",
    "reward_functions.py": "float scores from unannotated parameters and calls taken for tensors",
    "stage_scheduler.py": "ints from an estimator call taken for tensors",
    "symbolic_index.py": "sympy expressions taken for tensors",
    "text_tokens.py": "str methods on unannotated strings taken for tensors",
}
FILES = sorted(p.name for p in CORPUS.glob("*.py"))


def test_the_corpus_is_there() -> None:
    assert len(FILES) >= 10 and set(WAITING_FOR_TYPE_EVIDENCE) <= set(FILES)


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
