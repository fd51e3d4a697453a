"""The fast paths change nothing: cache on or off, cold or warm, one job or many, triage or not.

Correctness only; timing lives in `bench/bench.py`.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import synthetic_corpus
from megatron_shapes import FORWARD_STEP

from flux_alias_lint import check_source, fix_source, lint, parallel, triage
from flux_alias_lint.cache import Cache
from flux_alias_lint.cli import main
from flux_alias_lint.runner import FileResult
from flux_alias_lint.selection import Selection
from flux_alias_lint.source import SourceError

ROOT = Path(__file__).resolve().parents[1]
BUG = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach()}\n' + FORWARD_STEP
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
    rows = json.loads(off[1])
    assert off[0] == 1 and {row["code"] for row in rows} >= {"FAL000", "FAL001"}  # the broken files are FAL000
    assert _run(capsys, str(corpus), "--cache-dir", cache_dir) == off  # cold: fills the cache
    assert _run(capsys, str(corpus), "--cache-dir", cache_dir) == off  # warm: answers from it
    assert (tmp_path / "cache" / ".gitignore").read_text().endswith("*\n")


def test_jobs_1_and_n_agree(corpus: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "_IN_PROCESS_BYTES", 0)  # use the pool even for a small corpus
    one = _run(capsys, str(corpus), "--no-cache", "--jobs", "1")
    assert _run(capsys, str(corpus), "--no-cache", "--jobs", "3") == one
    assert _run(capsys, str(corpus), "--no-cache") == one


# What a cold run needs and a warm one, answered by the caches, must not load: libcst (~0.2 s), the
# index's and the triage's modules, the workers' machinery, what writes the caches (`tempfile`, with
# `shutil` and `random`), importlib.metadata (20-40 ms).
_NOT_WARM = ("libcst", "flux_alias_lint.index.project", "flux_alias_lint.triage.reduce", "multiprocessing", "tempfile")


def _cold_then_warm(tree: Path, cache: Path) -> tuple[list[str], list[str]]:
    """Which of `_NOT_WARM` (and importlib.metadata) a cold run, then a warm one, loaded; both report alike."""
    command = [sys.executable, "-m", "flux_alias_lint", "check", str(tree), "--cache-dir", str(cache)]
    script = (
        "import sys\nfrom flux_alias_lint.cli import main\n"
        f"code = main({command[3:]!r})\n"
        f"print([m for m in {(*_NOT_WARM, 'importlib.metadata')!r} if m in sys.modules], file=sys.stderr)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cold = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env)
    warm = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env)
    assert cold.stdout == warm.stdout and cold.stdout
    return ast.literal_eval(cold.stderr.splitlines()[-1]), ast.literal_eval(warm.stderr.splitlines()[-1])


def test_a_warm_run_loads_none_of_what_only_checking_needs(corpus: Path, tmp_path: Path) -> None:
    cold, warm = _cold_then_warm(corpus, tmp_path)
    assert set(_NOT_WARM) <= set(cold) and warm == []


def test_a_host_finding_is_answered_by_the_caches_too(tmp_path: Path) -> None:
    # A reach or a finding in a host's context (here transformers' Trainer) was not a valid cache entry: the
    # project was indexed again and the file checked again on every run.
    project = tmp_path / "project"
    shutil.copytree(ROOT / "fixtures" / "FAL005" / "host_transformers_training_step", project)
    (project / ".git").mkdir()
    _age(project)
    cold, warm = _cold_then_warm(project, tmp_path / "cache")
    # A project this small is indexed and checked in one process: no workers, cold or warm.
    assert set(_NOT_WARM) - {"multiprocessing"} <= set(cold) and warm == []


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
    assert second[1] == first[1].replace("a.py", "b.py").replace("broken.py", "worse.py")
    assert "worse.py" in second[1]


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
    assert all(json.loads(entry.read_text().partition("\n")[2]) for entry in cache_dir.glob("check-*.json"))


def test_settings_are_part_of_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.py").write_text(BUG)
    args = (str(tmp_path / "a.py"), "--cache-dir", str(tmp_path / "c"))
    assert _run(capsys, *args)[0] == 1
    assert _run(capsys, *args, "--ignore", "FAL001")[0] == 0
    assert _run(capsys, *args)[0] == 1


def test_fix_mode_fixes_a_file_the_cache_holds_a_fixable_finding_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "a.py"
    target.write_text(BUG)
    args = (str(target), "--cache-dir", str(tmp_path / "c"))
    assert _run(capsys, *args)[0] == 1
    assert main(["check", *args, "--fix"]) == 0
    capsys.readouterr()
    assert _run(capsys, *args)[0] == 0
    assert target.read_text() != CLEAN  # fixed with .clone(), not our CLEAN text


def _analysed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files each later run reads and analyses (in this process: small files)."""
    analysed: list[str] = []
    real = parallel.process_file
    monkeypatch.setattr(
        parallel, "process_file", lambda path, *a, **k: analysed.append(Path(path).name) or real(path, *a, **k)
    )
    return analysed


@pytest.mark.parametrize("mode", ["--fix", "--diff"])
def test_fix_and_diff_analyse_only_files_with_something_to_fix(
    mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "bug.py").write_text(BUG)
    (project / "clean.py").write_text(CLEAN)
    (project / "broken.py").write_text("def f(:\n")  # a finding (FAL000) with no fix
    _age(project)
    args = ("check", str(project), "--cache-dir", str(tmp_path / "c"), "--jobs", "1", "--format", "json")
    cold = main([*args, mode, "--no-cache"]), capsys.readouterr().out
    if mode == "--fix":
        (project / "bug.py").write_text(BUG)  # undone: the cached runs below fix it again
        _age(project)
    assert main(list(args)) == 1  # fills the cache
    capsys.readouterr()
    analysed = _analysed(monkeypatch)
    assert (main([*args, mode]), capsys.readouterr().out) == cold
    assert analysed == ["bug.py"]  # the cache holds a fixable finding there, and nothing to fix elsewhere
    analysed.clear()
    again = main([*args, mode]), capsys.readouterr().out
    if mode == "--fix":  # fixed: changed on disk, so analysed once more, and then cached
        assert analysed == ["bug.py"] and "FAL001" not in again[1] and "FAL000" in again[1]
        analysed.clear()
        assert (main([*args, mode]), capsys.readouterr().out) == again
    assert analysed == ([] if mode == "--fix" else ["bug.py"])
    analysed.clear()
    (project / "clean.py").write_text(CLEAN.replace("loss_func", "other_loss"))
    assert main([*args, mode]) == again[0]
    assert sorted(analysed) == (["clean.py"] if mode == "--fix" else ["bug.py", "clean.py"])


def test_a_file_with_a_finding_is_parsed_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The triage's `ast` tree is the one the compile check, the roles and the escape analysis of
    an unreached finding read: the file's text goes through CPython's parser once."""
    text = 'X = 1\ndef loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach()}\n'  # X: not kept
    (tmp_path / "m.py").write_text(text)
    parsed: list[object] = []
    real = builtins.compile
    monkeypatch.setattr(builtins, "compile", lambda source, *a, **k: parsed.append(source) or real(source, *a, **k))
    code, out, _ = _run(capsys, str(tmp_path / "m.py"), "--no-cache", "--jobs", "1")
    assert code == 0 and [row["context"] for row in json.loads(out)] == ["unreached"]
    assert [source for source in parsed if source in (text, text.encode())] == [text]


# ---- triage: it only skips what cannot have a finding ------------------------------------

# Shapes where the compiler drops code the analysis reads, or where a unit is easy to misplace.
ADVERSARIAL = {
    "dead_branch": "def f(x):\n    loss = x.sum()\n    if False:\n        return loss, {'a': loss.detach()}\n",
    "constant_ifexp": "def f(x):\n    loss = x.sum()\n    return loss, ({'a': loss.detach()} if 0 else {'a': loss.detach()})\n",
    "constant_boolop": "def f(x):\n    loss = x.sum()\n    return loss, (True or {'a': loss.detach()})\n",
    "after_while_true": "def f(x):\n    while True:\n        pass\n    loss = x.sum()\n    return loss, {'a': loss.detach()}\n",
    "unreachable_def": "def f(x):\n    return x\n    def g(y):\n        return y, {'a': y.detach()}\n",
    "unreachable_lambda": "def f(x):\n    return x\n    h = lambda y: (y, {'a': y.detach()})\n",
    "debug_branch": "def f(x):\n    loss = x.sum()\n    if not __debug__:\n        return loss, {'a': loss.data}\n",
    "assert_message": "def f(x):\n    assert 1, (lambda y: (y, {'a': y.detach()}))\n",
    "module_lambda": "import torch\nf = lambda y: (y, {'a': y.detach()})\n",
    "decorator_lambda": "@register(lambda y: (y, {'a': y.detach()}))\ndef f(x):\n    return x\n",
    "default_lambda": "def f(x, g=lambda y: (y, {'a': y.detach()})):\n    return x\n",
    "none_owner": "def f(x):\n    loss = x.sum()\n    rep = None\n    rep['a'] = loss.detach()\n    return loss, rep\n",
    "annotated_owner": "def f(x, rep: int):\n    loss = x.sum()\n    rep['a'] = loss.detach()\n    return loss, rep\n",
    "alias_ctor": "from collections import OrderedDict as OD\ndef f(x):\n    loss = x.sum()\n    return loss, OD(a=loss.detach())\n",
    "alias_torch": "import torch as th\ndef f(x):\n    loss = x.sum()\n    return loss, {'a': th.detach(loss)}\n",
    "semicolon_import": "import os; import torch as th\ndef f(x):\n    loss = x.sum()\n    return loss, {'a': th.detach(loss)}\n",
    "nested_classes": "class A:\n    class B:\n        def f(self, x):\n            return x, {'a': x.detach()}\n    def g(self, x):\n        return x, {'a': x.data}\n",
    "type_checking_block": "import typing\nif typing.TYPE_CHECKING:\n    def f(x):\n        return x, {'a': x.detach()}\n",
    "one_line_def": "def f(x): return x, {'a': x.detach()}\ndef g(x): return x, {'a': x.data}\n",
    "closure_report": "def step(x):\n    rep = {}\n    def loss_func(out):\n        rep['a'] = out.detach()\n        return out, rep\n    return loss_func\n",
    "report_via_items": "def f(x):\n    d = {'r': {'a': x.detach()}}\n    for k, v in d.items():\n        pass\n    return x, v\n",
    "return_through_list": "def f(x):\n    t = []\n    t.append(x)\n    t.append({'a': x.detach()})\n    return t[0], t[1]\n",
    "walrus": "def f(x):\n    if (r := {'a': x.detach()}):\n        pass\n    return x, r\n",
    "tabs": "class A:\n\tdef f(self, x):\n\t\treturn x, {'a': x.detach()}\n",
    "crlf": "def f(x):\r\n    return x, {'a': x.detach()}\r\n",
    "syntax_error": "def f(x):\n    return x, {'a': x.detach()\n",
    "noqa": "def f(x):\n    return x, {'a': x.detach()}  # noqa: FAL001\n",
    "module_dead_branch": "if 0:\n    def f(x):\n        return x, {'a': x.detach()}\n",
    "module_dead_else": "if True:\n    pass\nelse:\n    g = lambda x: (x, {'a': x.detach()})\n",
    "after_module_while_true": "while 1:\n    pass\ndef f(x):\n    return x, {'a': x.detach()}\n",
    "import_after_while_true": (
        "while 1:\n    pass\nimport torch as th\ndef f(x):\n    return x, {'a': th.detach(x)}\n"
    ),
    "class_dead_branch": "class A:\n    if 0:\n        def f(self, x):\n            return x, {'a': x.detach()}\n",
    "class_lambda": "class A:\n    x = 1\n    f = lambda self, y: (y, {'a': y.detach()})\n",
    "lambda_in_if_header": "if (lambda y: (y, {'a': y.detach()})):\n    pass\n",
    "lambda_after_semicolon": "import torch; f = lambda y: (y, {'a': torch.detach(y)})\n",
    "lambda_in_block": "import sys\nif sys:\n    f = lambda y: (y, {'a': y.data})\nelse:\n    g = 1\n",
    "lambda_beside_if": "if 1: f = lambda y: (y, {'a': y.data})\n",
    # Found by review: the flow must follow the analysis through these calls and updates.
    "max_of_one_list": "def f(x):\n    loss = x.sum()\n    return loss, max([{'a': loss.detach()}])\n",
    "min_of_numbers": "def f(x):\n    loss = x.sum()\n    r = min([1, 2])\n    r['a'] = loss.detach()\n    return loss, r\n",
    "dict_ior": "def f(x):\n    loss = x.sum()\n    o = {}\n    o |= {'r': {'a': loss.detach()}}\n    return loss, o['r']\n",
    "torch_op_on_list": (
        "import torch\ndef f(x):\n    loss = x.sum()\n    r = torch.squeeze([1])\n    r['a'] = loss.detach()\n"
        "    return loss, r\n"
    ),
    "type_string": "def f(x):\n    loss = x.sum()\n    r = loss.type()\n    r['a'] = loss.detach()\n    return loss, r\n",
    "copy_of_none": (
        "import copy\ndef f(x):\n    loss = x.sum()\n    r = copy.copy(None)\n    r['a'] = loss.detach()\n"
        "    return loss, r\n"
    ),
    # ... and kept lines must not change meaning once the lines between them are gone.
    "backslash_then_decorator": (
        "def f(x):\n    return x, {'a': x.detach()} \\\n\n@staticmethod\ndef g(y):\n    return y, {'a': y.data}\n"
    ),
    "string_closed_before_import": (
        's = """\n"""; import torch as th\ndef f(x):\n    return x, {\'a\': x.detach()}\n'
        'def h(x):\n    return x, {\'b\': 1}  # """\n'
    ),
    "two_lambdas_one_line": "class A:\n    f = lambda y: (y, {'a': y.data}); g = lambda y: (y, {'a': y.data})\n",
    "docstring_col0": 'def f(x):\n    """\ndef g(y):\n    return y, {}\n"""\n    return x, {"a": x.detach()}\n',
    # Storage: the report leaf reaches the backprop tensor's storage only through these.
    "helper_passes_argument": "def h(a):\n    return a\ndef f(x):\n    loss = x.sum()\n    return loss, {'a': h(loss.detach())}\n",
    "helper_returns_attribute": (
        "def h(o):\n    return o.last\ndef f(x):\n    loss = x.sum()\n    x.last = loss.detach()\n    return loss, {'a': h(x)}\n"
    ),
    "helper_writes_argument": (
        "def log_into(r, k, v):\n    r[k] = v\ndef f(x):\n    loss = x.sum()\n    r = {}\n"
        "    log_into(r, 'l', loss.detach())\n    return loss, r\n"
    ),
    "helper_rebinds_argument": (
        "def add(r, v):\n    r = dict(r)\n    r['v'] = v\n    return None\ndef f(x):\n    loss = x.sum()\n"
        "    r = {}\n    add(r, loss.detach())\n    return loss, r\n"
    ),
    "method_sets_self": (
        "import torch\nclass A:\n    def _record(self, l):\n        self.last = l.detach()\n    def loss_func(self, out):\n"
        "        loss = out.sum()\n        self._record(loss)\n        return loss, {'l': self.last}\n"
    ),
    "method_reads_self": (
        "class A:\n    def _last(self):\n        return self.last\n    def loss_func(self, out):\n"
        "        loss = out.sum()\n        self.last = loss.detach()\n        return loss, {'l': self._last()}\n"
    ),
    "helper_display_shared_inside": (
        "def mk(x):\n    y = x.sum()\n    return y, y\ndef f(x):\n    a, b = mk(x)\n    return a, {'b': b.detach()}\n"
    ),
    "helper_display_from_arguments": (
        "def _ret(a, n, r):\n    return a, n, {'r': r}\ndef f(x):\n    loss = x.sum()\n    return _ret(loss, 1, loss.detach())\n"
    ),
    "keyword_to_helper": (
        "def h(a=None, b=None):\n    return b\ndef f(x):\n    loss = x.sum()\n    return loss, {'a': h(b=loss.detach())}\n"
    ),
    "unpack_display": "def f(x):\n    loss = x.sum()\n    a, b = (loss, loss)\n    return a, {'b': b.detach()}\n",
    "unpack_appended_list": (
        "def f(x):\n    loss = x.sum()\n    t = []\n    t.append(loss)\n    t.append(loss)\n    a, b = t\n"
        "    return a, {'b': b.detach()}\n"
    ),
    "same_index_twice": "def f(x):\n    out = x.sum()\n    return out[0], {'a': out[0].detach()}\n",
    "index_of_the_whole": "import torch\ndef f(x):\n    out = x.sum()\n    return out, {'a': out[0].detach()}\n",
    "same_key_twice": "def f(batch):\n    return batch['x'], {'a': batch['x'].detach()}\n",
    "closure_returns_alias": (
        "def f(x):\n    loss = x.sum()\n    def g():\n        return loss.detach()\n    return loss, {'a': g()}\n"
    ),
    "entry_of_display_updated": (
        "def f(x):\n    loss = x.sum()\n    out = [loss, {}]\n    out[1].update({'a': loss.detach()})\n    return out\n"
    ),
    "returned_name_of_display": "import torch\ndef f(x):\n    loss = x.sum()\n    out = (loss, {'a': loss.data})\n    return out\n",
    "loop_over_display": (
        "def f(x):\n    loss = x.sum()\n    for l in [loss]:\n        rep = {'a': l.detach()}\n    return loss, rep\n"
    ),
    "zip_into_dict": "def f(x):\n    loss = x.sum()\n    return loss, dict(zip(['a'], [loss.detach()]))\n",
    "defaultdict_append": (
        "from collections import defaultdict\ndef f(x):\n    loss = x.sum()\n    r = defaultdict(list)\n"
        "    r['a'].append(loss.detach())\n    return loss, r\n"
    ),
    "unbound_method": "import torch\ndef f(x):\n    loss = x.sum()\n    return loss, {'a': torch.Tensor.detach(loss)}\n",
    "view_attribute": "import torch\ndef f(x):\n    loss = x.sum()\n    return loss, {'a': loss.T}\n",
    "getattr_of_report": "def f(x):\n    loss = x.sum()\n    r = {'a': loss.detach()}\n    return loss, r.copy()\n",
    "declared_number_not_summarised": (
        "import torch\nasync def n() -> int:\n    return 1\ndef f(x):\n    loss = x.sum()\n    r = n()\n"
        "    r['a'] = loss.detach()\n    return loss, r\n"
    ),
    "ifexp_of_displays": "import torch\ndef f(x, c):\n    loss = x.sum()\n    return (loss, {}) if c else (loss, {'a': loss.data})\n",
}


# Records (dataclass reports): followed only where a rescaling caller is known, which the triage
# keeps whole; wherever a field's value travels, triage on and off must agree.
# An opaque value (what an unknown call returns) given a string key, or updated with a dict or keywords,
# is a mapping from then on (ms-swift's `metric = self._all_reduce_metric(metric)`, then `metric[k] = v`).
MAPPING_CASES = {
    "string_key_into_opaque": "def f(x):\n    loss = x.sum()\n    m = reduce(x)\n    m['a'] = loss.detach()\n"
    "    return loss, m\n",
    "update_opaque_with_dict": "def f(x):\n    loss = x.sum()\n    m = self.reduce(x)\n    m.update({'a': loss.detach()})\n"
    "    return loss, m\n",
    "update_opaque_with_keywords": "def f(x):\n    loss = x.sum()\n    m = reduce(x)\n    m.update(a=loss.detach())\n"
    "    return loss, m\n",
    "update_opaque_with_a_number": "def f(x, pbar):\n    loss = x.sum()\n    pbar.update(1)\n    return loss, pbar\n",
}


def test_a_value_given_a_string_key_is_a_mapping() -> None:
    flagged = {name: [f.report_path for f in check_source(text)] for name, text in MAPPING_CASES.items()}
    assert flagged == {
        "string_key_into_opaque": ['report["a"]'],
        "update_opaque_with_dict": ['report["a"]'],
        "update_opaque_with_keywords": ['report["a"]'],
        "update_opaque_with_a_number": [],
    }


# Captures (FAL005): where the triage tells a kept alias and the write changing it apart from others.
CAPTURE_HEAD = "import torch\n\n\n"
CAPTURE_CASES = {
    # A conversion given `copy=True` copies; without it, it may return the tensor itself.
    # A store inside a tuple target or an annotated one is a capture too.
    "tuple_target": "def f(self, x):\n    a, self.last = 1, x.detach()\n    x.mul_(2)\n    return x\n",
    "annotated_target": "def f(self, x):\n    self.last: torch.Tensor = x.detach()\n    x.mul_(2)\n    return x\n",
    # A torch function of the table imported by name keeps its first argument too.
    "imported_torch_function": "from torch import as_tensor as keep\n\n\ndef f(x, log):\n    log.append(keep(x))\n    x.mul_(2)\n    return x\n",
    "to_with_copy": "def f(x, log):\n    loss = x.sum()\n    log.append(loss.to('cpu', copy=True))\n    loss *= 2\n    return loss\n",
    "to_without_copy": "def f(x, log):\n    loss = x.sum()\n    log.append(loss.to('cpu', copy=False))\n    loss *= 2\n    return loss\n",
    # What a conversion keeps is its receiver (a torch function's: its first argument), not the device.
    "device_of_another": "def f(x, y, log):\n    log.append(y.to(x.device))\n    x.mul_(2)\n    return x\n",
    "torch_function_argument": "def f(x, log):\n    log.append(torch.as_tensor(x))\n    x.mul_(2)\n    return x\n",
    # A dotted name holds what is bound to it and to its attributes, not to its siblings.
    "sibling_attribute": "def f(x, log):\n    box = Box()\n    box.last = x.detach()\n    log.append(box.other)\n    x.mul_(2)\n    return x\n",
    "kept_attribute": "def f(x, log):\n    box = Box()\n    box.last = x.detach()\n    log.append(box.last)\n    x.mul_(2)\n    return x\n",
    "kept_owner": "def f(x, log):\n    box = Box()\n    box.last = x.detach()\n    log.append(box)\n    x.mul_(2)\n    return x\n",
    "attribute_of_kept": "def f(self, x):\n    k = x.detach()\n    self.history.append(k.T)\n    x.mul_(2)\n    return x\n",
    # A subscript's key gives it no storage; its value does.
    "kept_key": "def f(x, buf, log):\n    i = x.detach()\n    log.append(buf[i])\n    x.mul_(2)\n    return x\n",
    "kept_view": "def f(x, log):\n    log.append(x.detach()[0])\n    x.mul_(2)\n    return x\n",
    # An if's two branches never follow each other, unless a loop is around them.
    "other_branch": "def f(x, log, c):\n    if c:\n        log.append(x.detach())\n    else:\n        x.mul_(2)\n    return x\n",
    "elif_branch": "def f(x, log, c, d):\n    if c:\n        log.append(x.detach())\n    elif d:\n        x.mul_(2)\n    return x\n",
    "other_branch_in_a_loop": "def f(x, log, cs):\n    for c in cs:\n        if c:\n            log.append(x.detach())\n        else:\n            x.mul_(2)\n    return x\n",
    "after_the_if": "def f(x, log, c):\n    if c:\n        log.append(x.detach())\n    x.mul_(2)\n    return x\n",
    "nested_def_in_other_branch": "def f(x, log, c):\n    if c:\n        log.append(x.detach())\n    else:\n        def g():\n            x.mul_(2)\n        g()\n    return x\n",
}


def test_captures_the_triage_rules_out_are_no_findings() -> None:
    flagged = sorted(name for name, text in CAPTURE_CASES.items() if check_source(CAPTURE_HEAD + text))
    assert flagged == [
        "after_the_if", "annotated_target", "attribute_of_kept", "imported_torch_function", "kept_attribute", "kept_view", "other_branch_in_a_loop",
        "to_without_copy", "torch_function_argument", "tuple_target",
    ]  # fmt: skip
    dropped = sorted(name for name, text in CAPTURE_CASES.items() if triage.reduce_source(CAPTURE_HEAD + text) == [])
    assert dropped == [
        "device_of_another", "elif_branch", "kept_key", "nested_def_in_other_branch", "other_branch", "to_with_copy",
    ]  # fmt: skip


RECORD_HEAD = "import dataclasses\nimport torch\n\n\n@dataclasses.dataclass\nclass R:\n    lm: object = None\n\n\n"
HANDED_OVER = "\n\ndef forward_step(data_iterator, model):\n    return model(next(data_iterator)), loss_func\n"
RECORD_CASES = {
    "field_read_into_dict": "def f(x):\n    loss = x.sum()\n    r = R(lm=loss.detach())\n    return loss, {'lm': r.lm}\n",
    "field_read_in_helper": (
        "def mk(l):\n    r = R(lm=l.detach())\n    return {'lm': r.lm}\n\n\n"
        "def f(x):\n    loss = x.sum()\n    return loss, mk(loss)\n"
    ),
    "joined_with_dict": "def f(x, c):\n    loss = x.sum()\n    r = {'lm': loss.clone()} if c else R(lm=loss.detach())\n"
    "    return loss, r\n",
    "record_report_reached": "def loss_func(x):\n    loss = x.sum()\n    return loss, R(loss.detach())\n" + HANDED_OVER,
    "record_in_dict_reached": "def loss_func(x):\n    loss = x.sum()\n    return loss, {'s': R(lm=loss[0:1])}\n"
    + HANDED_OVER,
    "subscript_of_a_join": "def f(x, c):\n    loss = x.sum()\n    r = {'lm': loss.clone()} if c else R(lm=loss.detach())\n"
    "    return loss, {'lm': r['lm']}\n",
    "join_of_a_join": "def f(x, c, e):\n    loss = x.sum()\n"
    "    r = {'lm': loss.clone()} if e else ({'lm': loss.clone()} if c else R(lm=loss.detach()))\n    return loss, r\n",
    "attribute_of_a_join": "def f(x, c):\n    loss = x.sum()\n    r = R(lm=loss.detach()) if c else {'lm': loss[0:1]}\n"
    "    return loss, {'lm': r.lm}\n",
    "get_of_a_join": "def f(x, c):\n    loss = x.sum()\n    r = {'lm': loss.clone()} if c else R(lm=loss.detach())\n"
    "    return loss, {'lm': r.get('lm')}\n",
    "helper_subscripts": (
        "def pick(r):\n    return r['lm']\n\n\n"
        "def f(x):\n    loss = x.sum()\n    return loss, {'lm': pick(R(lm=loss.detach()))}\n"
    ),
    "field_set_later_reached": (
        "def loss_func(x):\n    loss = x.sum()\n    r = R()\n    r.lm = loss.data\n    return loss, r\n" + HANDED_OVER
    ),
}


def _findings(text: str, enabled: bool, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setattr(triage, "ENABLED", enabled)
    try:
        return check_source(text, "m.py"), fix_source(text)
    except SourceError as exc:
        return str(exc)


def _corpus_texts() -> list[tuple[str, str]]:
    texts = [
        (str(p.relative_to(ROOT)), p.read_bytes().decode("utf-8", "replace"))
        for p in sorted(ROOT.glob("fixtures/**/*.py"))
    ]
    texts += [(f"adversarial/{name}", text) for name, text in ADVERSARIAL.items()]
    texts += [(f"records/{name}", RECORD_HEAD + text) for name, text in RECORD_CASES.items()]
    texts += [(f"mappings/{name}", text) for name, text in MAPPING_CASES.items()]
    texts += [(f"captures/{name}", CAPTURE_HEAD + text) for name, text in CAPTURE_CASES.items()]
    rng = random.Random(11)
    for serial in range(150):
        texts.append((f"synthetic/{serial}", synthetic_corpus.module_text(rng, rng.randint(3, 12), loss_share=0.5)))
    return texts


@pytest.mark.parametrize(("name", "text"), _corpus_texts(), ids=lambda v: v if "/" in str(v) else "")
def test_triage_finds_what_the_full_analysis_finds(name: str, text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _findings(text, True, monkeypatch) == _findings(text, False, monkeypatch), name


def test_adversarial_cases_are_findings() -> None:
    """The cases above are worth comparing: the full analysis flags (nearly) all of them."""
    flagged = []
    for name, text in ADVERSARIAL.items():
        with contextlib.suppress(SourceError):
            flagged += [name] if check_source(text) else []
    assert len(flagged) >= len(ADVERSARIAL) - 7, sorted(set(ADVERSARIAL) - set(flagged))


def test_reduced_text_keeps_columns_and_maps_lines_back() -> None:
    text = (
        "import torch as th\nx = 1\n\n\nclass A:\n    y = 2\n\n    def loss(self, out):\n"
        "        return out, {'a': out.detach()}\n\n    def other(self):\n        return 1\n"
    )
    [reduced] = triage.reduce_source(text) or [None]
    assert reduced is not None
    assert reduced.text.splitlines() == [
        "import torch as th",
        "if 1:",
        "    def loss(self, out):",
        "        return out, {'a': out.detach()}",
    ]
    assert reduced.lines == (1, 7, 8, 9)
    original = text.splitlines()
    assert all(
        original[n - 1] == kept
        for n, kept in zip(reduced.lines, reduced.text.splitlines(), strict=True)
        if kept != "if 1:"
    )
    [finding] = check_source(text)
    assert (finding.line, finding.column) == (9, 27)
    assert triage.reduce_source("def f(x):\n    return x + 1\n") == []
    assert triage.reduce_source("def f(:\n") is None


def test_lines_are_numbered_as_python_numbers_them() -> None:
    """A form feed or U+2028 inside a line must not shift the lines kept after it."""
    for odd in ("\x0c", "\u2028", "\x85"):
        text = f"def g():\n    s = 'a{odd}b'\n    return s\n\n\ndef f(x):\n    return x, {{'a': x.detach()}}\n"
        assert [reduced.lines for reduced in triage.reduce_source(text) or ()] == [(6, 7)], odd
        assert [f.line for f in check_source(text)] == [7]


def test_many_units_go_to_libcst_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces bound libcst's memory on generated modules; findings and fixes are the same."""
    function = "def loss_{i}(out):\n    return out, {{'a': out.detach(), 'b': out.data}}\n\n\n"
    text = "import torch\n\n" + "".join(function.format(i=i) for i in range(40))
    monkeypatch.setattr(triage.reduce, "PIECE_LINES", 10)
    pieces = triage.reduce_source(text) or []
    assert len(pieces) == 8 and all(piece.text.startswith("import torch\n") for piece in pieces)
    assert len(check_source(text)) == 80
    assert _findings(text, True, monkeypatch) == _findings(text, False, monkeypatch)


def test_pieces_never_share_a_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(triage.reduce, "PIECE_LINES", 1)
    text = "import torch\n" + ADVERSARIAL["two_lambdas_one_line"] + "def k(y):\n    return y, {'a': y.data}\n"
    assert _findings(text, True, monkeypatch) == _findings(text, False, monkeypatch)
    assert len(check_source(text)) == 3


def test_a_piece_libcst_rejects_means_the_whole_file(monkeypatch: pytest.MonkeyPatch) -> None:
    real_parse = lint.parse

    def reject_pieces(source):  # type: ignore[no-untyped-def]
        if source.text != text:
            raise SourceError(source.path, "rejected")
        return real_parse(source)

    text = "import torch\n\ndef f(out):\n    return out, {'a': out.detach()}\n\ndef g():\n    return 1\n"
    monkeypatch.setattr(lint, "parse", reject_pieces)
    assert [f.line for f in check_source(text)] == [4]


def test_triage_mirrors_the_analysis_it_approximates() -> None:
    """A new expression handler in the analysis must be taught to `triage.flows._Flow` (mapping constructors
    and container mutators are shared: both read `facts.storage.MAPPING_CONSTRUCTORS`, `CONTAINER_MUTATORS`)."""
    from flux_alias_lint import analysis

    handlers = {name for name in dir(analysis.ModuleAnalysis) if name.startswith("_eval_")}
    assert handlers == {
        "_eval_Name", "_eval_Attribute", "_eval_Subscript", "_eval_slice", "_eval_Tuple", "_eval_List",
        "_eval_Dict", "_eval_IfExp", "_eval_BooleanOperation", "_eval_NamedExpr", "_eval_BinaryOperation",
        "_eval_UnaryOperation", "_eval_Comparison", "_eval_Lambda", "_eval_ListComp", "_eval_GeneratorExp",
        "_eval_SetComp", "_eval_DictComp", "_eval_Call",
    }  # fmt: skip


def test_return_shapes_the_flow_can_rule_out_are_ruled_out_by_it() -> None:
    """`triage.returns._some_return_may_fit` skips the flow by the kind of a returned expression: every kind
    outside `_MAY_BE_DICT` / `_MAY_BE_SEQUENCE` must be one `_Flow._eval` never makes a dict / sequence
    of, whatever the names in it hold. Every kind of expression is sampled."""
    samples = [
        "a", "a.b", "1", "f'{a}'", "lambda: a", "{a: a}", "{k: a for k in a}", "(a, a)", "[a, a]",
        "[x for x in a]", "(x for x in a)", "a[0]", "a[1:2]", "a if a else a", "a and a", "(y := a)",
        "-a", "not a", "a + a", "a(a)", "dict(a)", "list(a)", "a.copy()", "a.get(0)", "a < a", "{a}",
        "{x for x in a}", "a.values()", "a.items()", "max(a, a)", "await a", "(yield a)", "(yield from a)",
    ]  # fmt: skip
    expressions = [ast.parse(sample, mode="eval").body for sample in samples]
    expressions += [expressions[3].values[0], expressions[12].slice, ast.parse("[*a]", mode="eval").body.elts[0]]
    assert {type(e) for e in expressions} == set(ast.expr.__subclasses__())
    for expression in expressions:
        flow = triage.flows._Flow(ast.parse("pass"), frozenset(), None)
        flow.env = {"a": triage.values.ALL, "a.b": triage.values.ALL}
        flags = flow._eval(expression)
        if flags & triage.values.D:
            assert isinstance(expression, triage.returns._MAY_BE_DICT), ast.dump(expression)
        if flags & triage.values.S and not isinstance(expression, (ast.Tuple, ast.List)):  # displays: by their elements
            assert isinstance(expression, triage.returns._MAY_BE_SEQUENCE), ast.dump(expression)
