"""The fast paths change nothing: cache on or off, cold or warm, one job or many, triage or not.

Correctness only; timing lives in `bench/bench.py`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import synthetic_corpus

from flux_alias_lint import parallel
from flux_alias_lint.cache import Cache
from flux_alias_lint.cli import main
from flux_alias_lint.runner import FileResult
from flux_alias_lint.selection import Selection

ROOT = Path(__file__).resolve().parents[1]
BUG = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach()}\n'
CLEAN = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.item()}\n'
AN_HOUR_AGO = 3600


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixtures, a synthetic training repository, and a few files that cannot be checked."""
    root = tmp_path_factory.mktemp("corpus")
    shutil.copytree(ROOT / "fixtures", root / "fixtures")
    synthetic_corpus.generate(root / "synthetic", files=60, seed=5, loss_share=0.3)
    (root / "broken.py").write_text("def f(:\n")
    (root / "latin1.py").write_bytes(b"x = '\xe9'\n")
    _age(root)
    return root


def _age(root: Path) -> None:
    """Old enough for the cache to trust the stat of every file (see cache._RACY_NS)."""
    for path in root.rglob("*.py"):
        os.utime(path, (path.stat().st_atime - AN_HOUR_AGO, path.stat().st_mtime - AN_HOUR_AGO))


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check", *args, "--format", "json"])
    out, err = capsys.readouterr()
    return code, out, err


def test_cache_cold_warm_and_off_agree(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache_dir = str(tmp_path / "cache")
    off = _run(capsys, str(corpus), "--no-cache")
    assert json.loads(off[1]) and off[0] == 2  # findings, and the broken files are errors
    assert _run(capsys, str(corpus), "--cache-dir", cache_dir) == off  # cold: fills the cache
    assert _run(capsys, str(corpus), "--cache-dir", cache_dir) == off  # warm: answers from it
    assert (tmp_path / "cache" / ".gitignore").read_text().endswith("*\n")


def test_jobs_1_and_n_agree(corpus: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "_IN_PROCESS_BYTES", 0)  # use the pool even for a small corpus
    one = _run(capsys, str(corpus), "--no-cache", "--jobs", "1")
    assert _run(capsys, str(corpus), "--no-cache", "--jobs", "3") == one
    assert _run(capsys, str(corpus), "--no-cache") == one


def test_warm_run_does_not_import_libcst(corpus: Path, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "flux_alias_lint", "check", str(corpus), "--cache-dir", str(tmp_path)]
    script = (
        "import sys\nfrom flux_alias_lint.cli import main\n"
        f"code = main({command[3:]!r})\nprint('libcst' in sys.modules, file=sys.stderr)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cold = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env)
    warm = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env)
    assert cold.stdout == warm.stdout and cold.stdout
    assert cold.stderr.splitlines()[-1] == "True" and warm.stderr.splitlines()[-1] == "False"


def _stale_mtime(path: Path) -> None:
    past = path.stat().st_mtime - AN_HOUR_AGO
    os.utime(path, (past, past))


def test_edit_with_same_size_and_mtime_is_seen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "m.py"
    target.write_text(BUG)
    _stale_mtime(target)
    mtime = target.stat().st_mtime_ns
    args = (str(target), "--cache-dir", str(tmp_path / "c"))
    assert _run(capsys, *args)[0] == 1
    fixed = BUG.replace("detach()", "item()  ")  # same length
    assert len(fixed) == len(BUG)
    target.write_text(fixed)
    os.utime(target, ns=(mtime, mtime))  # only the inode change time still differs
    assert _run(capsys, *args)[0] == 0


def test_same_content_elsewhere_reports_its_own_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.py").write_text(BUG)
    (tmp_path / "broken.py").write_text("def f(:\n")
    cache = str(tmp_path / "c")
    first = _run(capsys, str(tmp_path / "a.py"), str(tmp_path / "broken.py"), "--cache-dir", cache)
    (tmp_path / "b.py").write_text(BUG)
    (tmp_path / "worse.py").write_text("def f(:\n")
    second = _run(capsys, str(tmp_path / "b.py"), str(tmp_path / "worse.py"), "--cache-dir", cache)
    assert second[1] == first[1].replace("a.py", "b.py")
    assert second[2] == first[2].replace("broken.py", "worse.py")


def test_stamp_hit_does_not_read_and_racy_files_are_rehashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old, new = tmp_path / "old.py", tmp_path / "new.py"
    old.write_text(BUG)
    new.write_text(BUG)
    _stale_mtime(old)
    cache = Cache(tmp_path / "c", Selection())
    result = FileResult(str(old))
    for path in (old, new):
        st = path.stat()
        cache.store(str(path), (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino), "d" * 32, result)
    cache.save()
    reopened = Cache(tmp_path / "c", Selection())
    reads: list[str] = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: reads.append(str(path)) or real_open(path, *a, **k))
    assert reopened.lookup(str(old), old.stat()) == FileResult(str(old))
    assert reads == []
    assert reopened.lookup(str(new), new.stat()) is None  # just written: hashed, and its bytes differ
    assert reads == [str(new)]


def test_unreadable_cache_is_ignored_and_replaced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.py").write_text(BUG)
    cache_dir = tmp_path / "c"
    expected = _run(capsys, str(tmp_path / "a.py"), "--no-cache")
    assert _run(capsys, str(tmp_path / "a.py"), "--cache-dir", str(cache_dir)) == expected
    for entry in cache_dir.glob("check-*.json"):
        entry.write_text("{not json")
    assert _run(capsys, str(tmp_path / "a.py"), "--cache-dir", str(cache_dir)) == expected
    assert all(json.loads(entry.read_text()) for entry in cache_dir.glob("check-*.json"))


def test_settings_are_part_of_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.py").write_text(BUG)
    args = (str(tmp_path / "a.py"), "--cache-dir", str(tmp_path / "c"))
    assert _run(capsys, *args)[0] == 1
    assert _run(capsys, *args, "--ignore", "FAL001")[0] == 0
    assert _run(capsys, *args)[0] == 1


def test_fix_mode_bypasses_the_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "a.py"
    target.write_text(BUG)
    args = (str(target), "--cache-dir", str(tmp_path / "c"))
    assert _run(capsys, *args)[0] == 1
    assert main(["check", *args, "--fix"]) == 0
    capsys.readouterr()
    assert _run(capsys, *args)[0] == 0
    assert target.read_text() != CLEAN  # fixed with .clone(), not our CLEAN text
