"""A cached result depends on every module it looked for, found or not: a module deleted, restored or
replaced by another (a branch switch) gives a warm run exactly what a run without the cache gives, for a
file's own findings (a report helper it imports) and for the project index's verdict (the module through
which the schedule gets the loss function)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from pathlib import Path

from flux_alias_lint.cache import Cache, digest_of, stamp_of
from flux_alias_lint.cli import main
from flux_alias_lint.index.files import run_given
from flux_alias_lint.runner import FileResult
from flux_alias_lint.selection import Selection

LOSS = (
    "from reports import make_report\n\n\ndef loss_func(x):\n    loss = x.sum()\n    return loss, make_report(loss)\n"
)
DETACHED = 'def make_report(loss):\n    return {"loss": loss.detach()}\n'
CLONED = 'def make_report(loss):\n    return {"loss": loss.detach().clone()}\n'
FORWARD_STEP = "\n\n\ndef forward_step(data_iterator, model):\n    return model(data_iterator), loss_func\n"
TRAIN = "from glue import loss_func" + FORWARD_STEP  # Megatron's schedule calls what glue gives
TRAIN_LOSS = "from loss import loss_func" + FORWARD_STEP
BUG = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach()}\n'
GLUE = "from bug import loss_func\n"
OWN_GLUE = "def loss_func(x):\n    return x.sum()\n"
AN_HOUR_AGO = 3600


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    for name, text in files.items():
        _put(root / "src" / name, text)
    return root


def _put(path: Path, text: str) -> None:
    """Write `path` with a stamp the cache trusts (older than its racy window), as a restore keeps it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    st = path.stat()
    os.utime(path, (st.st_atime - AN_HOUR_AGO, st.st_mtime - AN_HOUR_AGO))


def _check(root: Path, target: str, *args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main(["check", str(root / "src" / target), "--format", "json", "--cache-dir", str(root / "cache"), *args])
    return out.getvalue()


def _same_warm_and_cold(root: Path, target: str) -> str:
    """Two warm runs (the second answers from the stamps the first recorded) and an uncached run agree."""
    cold = _check(root, target, "--no-cache")
    assert _check(root, target) == cold
    assert _check(root, target) == cold
    return cold


def test_a_deleted_and_restored_helper_module_is_seen_again(tmp_path: Path) -> None:
    root = _project(tmp_path, {"loss.py": LOSS, "reports.py": DETACHED, "train.py": TRAIN_LOSS})
    helper = root / "src" / "reports.py"
    with_helper = _same_warm_and_cold(root, "loss.py")
    assert '"code": "FAL001"' in with_helper
    helper.unlink()
    assert _same_warm_and_cold(root, "loss.py") == "[]\n"  # nothing found to summarise
    _put(helper, DETACHED)
    assert _same_warm_and_cold(root, "loss.py") == with_helper


def test_a_helper_module_shadowed_after_a_branch_switch_is_the_one_read(tmp_path: Path) -> None:
    """The package `reports/` stays as it was; the branch adds `reports.py`, which Python (and the
    tool) imports instead: the file the cached result read is unchanged, its lookup is not."""
    root = _project(tmp_path, {"loss.py": LOSS, "reports/__init__.py": DETACHED, "train.py": TRAIN_LOSS})
    detached = _same_warm_and_cold(root, "loss.py")
    assert '"code": "FAL001"' in detached
    _put(root / "src" / "reports.py", CLONED)
    assert _same_warm_and_cold(root, "loss.py") == "[]\n"
    (root / "src" / "reports.py").unlink()  # back to the first branch
    assert _same_warm_and_cold(root, "loss.py") == detached


def test_the_index_verdict_follows_a_deleted_and_restored_module(tmp_path: Path) -> None:
    """The schedule gets `loss_func` through `glue`: without it nothing is known to rescale the loss."""
    root = _project(tmp_path, {"bug.py": BUG, "glue.py": GLUE, "train.py": TRAIN})
    glue = root / "src" / "glue.py"
    reached = _same_warm_and_cold(root, "bug.py")
    assert '"context": "megatron"' in reached
    glue.unlink()
    assert '"context": "unreached"' in _same_warm_and_cold(root, "bug.py")
    _put(glue, GLUE)
    assert _same_warm_and_cold(root, "bug.py") == reached


def test_the_index_verdict_follows_a_module_replaced_by_another(tmp_path: Path) -> None:
    """A branch whose `glue.py` defines its own `loss_func` shadows the package `glue/` re-exporting the
    buggy one; switching back brings the package's back."""
    root = _project(tmp_path, {"bug.py": BUG, "glue/__init__.py": GLUE, "train.py": TRAIN})
    reached = _same_warm_and_cold(root, "bug.py")
    assert '"context": "megatron"' in reached
    _put(root / "src" / "glue.py", OWN_GLUE)
    assert '"context": "unreached"' in _same_warm_and_cold(root, "bug.py")
    (root / "src" / "glue.py").unlink()
    assert _same_warm_and_cold(root, "bug.py") == reached
    shutil.rmtree(root / "src" / "glue")  # and a branch without it at all
    assert '"context": "unreached"' in _same_warm_and_cold(root, "bug.py")


REGISTERED = "import somewhere\n\nfrom bug import loss_func\n\nsomewhere.register(loss_func)\n"


def test_a_new_file_that_lets_the_loss_function_escape_is_seen(tmp_path: Path) -> None:
    """The escape analysis searches the whole project's texts: a file added elsewhere that hands the
    function to a library (`register`) turns `unreached` into `escapes`, the checked file unchanged."""
    root = _project(tmp_path, {"bug.py": BUG})
    assert '"context": "unreached"' in _same_warm_and_cold(root, "bug.py")
    _put(root / "src" / "other.py", REGISTERED)
    assert '"context": "escapes"' in _same_warm_and_cold(root, "bug.py")
    (root / "src" / "other.py").unlink()
    assert '"context": "unreached"' in _same_warm_and_cold(root, "bug.py")


def test_a_result_is_reused_only_under_the_project_it_was_computed_in(tmp_path: Path) -> None:
    """A folder declaring nothing is the project of the path the run names: `check pkg/bug.py` reads
    `pkg/` alone, `check .` the folder, where `other.py` lets the function escape."""
    root = tmp_path / "folder"
    _put(root / "pkg" / "bug.py", BUG)
    _put(root / "other.py", REGISTERED.replace("from bug", "from pkg.bug"))

    def check(target: str, *args: str) -> str:
        out = io.StringIO()
        with contextlib.chdir(root), contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            main(["check", target, "--format", "json", "--cache-dir", str(tmp_path / "cache"), *args])
        return out.getvalue()

    narrow = check("pkg/bug.py", "--no-cache")
    assert '"context": "unreached"' in narrow
    assert check("pkg/bug.py") == narrow
    whole = check(".", "--no-cache")
    assert '"context": "escapes"' in whole
    assert check(".") == whole
    assert check(".") == whole
    assert check("pkg/bug.py") == narrow


def test_a_cached_result_is_keyed_on_the_project_root(tmp_path: Path) -> None:
    """Whatever a result depends on through its project, it is taken only in the project it was
    computed in: `check pkg/ok.py` and `check .` in a folder declaring nothing are two projects."""
    folder = tmp_path / "folder"
    _put(folder / "pkg" / "ok.py", OWN_GLUE)
    path = str(folder / "pkg" / "ok.py")
    st = os.stat(path)
    with run_given([path]):
        cache = Cache(tmp_path / "cache", Selection())
        cache.store(path, stamp_of(st), digest_of(Path(path).read_bytes()), FileResult(path, []))
        cache.save()
        assert Cache(tmp_path / "cache", Selection()).lookup(path, st) == FileResult(path, [])
    with run_given([str(folder)]):
        assert Cache(tmp_path / "cache", Selection()).lookup(path, st) is None
