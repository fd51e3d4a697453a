"""Check or fix one file on disk: read → lint → (write atomically | diff) → a FileResult; and which
other files a run on named files reports too (`decided_by`)."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import os
import signal
import stat
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping

from .finding import Finding
from .index.files import Read, real_path
from .index.reach import Reaches, Step
from .rules import CAPTURE_CODE, INVALID_SYNTAX, UNCHECKED
from .selection import Selection
from .source import DEFAULT_MAX_FILE_SIZE, SourceError, SourceFile, TooComplex, decode, read_bytes
from .triage import reduce_source
from .workers import exit_if_orphaned

# No clock by default: the analysis stops at a count of its work (`analysis.Work`), the same on any
# machine; `--timeout` is an opt-in safety net that fails the run, never a finding.
DEFAULT_TIMEOUT = 0.0


class Mode(enum.Enum):
    CHECK = "check"
    FIX = "fix"
    DIFF = "diff"


@dataclasses.dataclass(frozen=True)
class FileResult:
    path: str
    findings: list[Finding] = dataclasses.field(default_factory=list)  # what is left to report
    fixed: int = 0
    changed: bool = False  # the file was (or, with --diff, would be) rewritten
    diff: str = ""
    error: str | None = None  # one line: a checker bug cost this file
    dependencies: Read = Read()  # the other files and modules the findings used (`index.files.Read`)
    fixed_codes: tuple[str, ...] = ()  # the rule of each fixed finding, for the closing summary
    warning: str | None = None  # one line: why a fix was not written (read-only, refused)
    cacheable: bool = True  # False: not to be cached (over the work budget: it depends on helpers too)


# How fixing (not checking) fails: the file's findings are still reported.
_REFUSALS = ("fix refused", "cannot write the fix")


def unchecked(error: SourceError, selection: Selection) -> FileResult:
    """A file that could not be read, decoded or parsed, as a FAL000 finding (none if deselected)."""
    if not selection.enabled(UNCHECKED):
        return FileResult(error.path)
    return FileResult(error.path, [INVALID_SYNTAX.finding(error)])


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one file may cost: `timeout` seconds of checking before the run fails (0: no limit, the
    default: the safety net, never a finding), `max_bytes` of source."""

    timeout: float = DEFAULT_TIMEOUT
    max_bytes: int = DEFAULT_MAX_FILE_SIZE


class _TimedOut(BaseException):
    """Raised by the timer's signal handler; a BaseException so that no `except Exception` on the
    way swallows it."""


@contextlib.contextmanager
def time_limit(seconds: float, expired: Callable[[], BaseException] = _TimedOut) -> Iterator[None]:
    """Interrupt the block after `seconds` with `expired()`. Signals reach only the main thread,
    which is where files are checked (in this process or in each worker); elsewhere, no limit."""
    if seconds <= 0 or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise expired()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


DEFAULT_LIMITS = Limits()


class CheckTimedOut(Exception):
    """A file still being checked when the safety net's clock ran out (`--timeout`): an error that
    fails the run (exit 2), never a finding, since it depends on how busy the machine was."""


@contextlib.contextmanager
def analysis_limit(path: str, timeout: float) -> Iterator[None]:
    """The block, interrupted after `timeout` seconds (0: no limit) by `CheckTimedOut`."""
    try:
        with time_limit(timeout):
            yield
    except _TimedOut:
        raise CheckTimedOut(timed_out(path, timeout)) from None


def timed_out(path: str, timeout: float) -> str:
    """The one line of a file the safety net stopped."""
    return (
        f"{path}: still being checked after {timeout:g} s (--timeout, file-timeout): a safety net, so the "
        "run fails; the analysis itself stops at a count of its work, so please report this file"
    )


def unified_diff(path: str, before: str, after: str) -> str:
    import difflib  # loaded by `--diff` alone

    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), path, path))


def write_atomically(path: str, data: bytes) -> None:
    """Temporary file in the same directory, then rename: readers see the old or the new file, never half.

    A symlink stays a symlink (its target is rewritten); mode and, where allowed, owner are kept.
    """
    import tempfile  # loaded by a run that writes a file alone

    target = os.path.realpath(path)
    st = os.stat(target)
    with _termination_held():
        fd, tmp = tempfile.mkstemp(prefix=".flux-alias-lint-", suffix=".tmp", dir=os.path.dirname(target))
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
            if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                with contextlib.suppress(PermissionError):  # only root may give a file away
                    os.chown(tmp, st.st_uid, st.st_gid)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
    # The rename itself must survive a crash too.
    directory = os.open(os.path.dirname(target), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


@contextlib.contextmanager
def _termination_held() -> Iterator[None]:
    """SIGTERM (`kill`'s default, and how a worker learns its parent died: `workers.py`) waits until
    the block is done: the file is replaced, or the temporary one removed, never left behind. Held
    by this thread: a worker has no other; in a process with more, another thread may take it, and
    then only the temporary file is left (the rename is what replaces the file)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def write_fix(source: SourceFile, original: bytes, text: str) -> None:
    """Write the fixed `text` over the file `original` was read from (unless it already holds it).

    Refuses (SourceError, file untouched) when the bytes would differ from `original` by more than
    the fix, or when the file changed since it was read: another run's identical fix is fine,
    anyone else's edit is not overwritten.
    """
    path = source.path
    data = source.encode(text)
    if source.encode(source.text) != original or decode(data, path).text != text:
        raise SourceError(path, f"fix refused, {source.encoding} does not round-trip this file byte for byte")
    current = read_bytes(path, max(len(original), len(data)))
    if current == data:
        return  # a concurrent run wrote the same fix
    if current != original:
        raise SourceError(path, "fix refused, the file changed on disk while it was being fixed")
    exit_if_orphaned()  # a worker whose run is over writes nothing more
    try:
        write_atomically(path, data)
    except OSError as exc:
        raise SourceError(path, f"cannot write the fix: {exc.strerror or exc}") from None


def lint_source(
    source: SourceFile, selection: Selection, mode: Mode, reaches: Reaches | None = None
) -> tuple[FileResult, str]:
    """The result for one decoded source, plus its (possibly fixed) text; `reaches`: `ProjectIndex.reach_for`."""
    from .lint import check_text, fix_text  # lazy: libcst is only needed once a file is really analysed

    if mode is Mode.CHECK:
        findings, dependencies = check_text(source, selection, reaches=reaches)
        return FileResult(source.path, findings, dependencies=dependencies), source.text
    result = fix_text(source, selection, reaches)
    changed = result.text != source.text
    diff = unified_diff(source.path, source.text, result.text) if mode is Mode.DIFF and changed else ""
    return FileResult(
        source.path,
        result.remaining,
        result.fixed,
        changed,
        diff,
        fixed_codes=result.fixed_codes,
        dependencies=result.dependencies,
        warning=f"{source.path}: {'; '.join(result.refused)}" if result.refused else None,
    ), result.text


def read_only(path: str) -> str | None:
    """Why `--fix` must leave `path` alone: its mode (or its directory's) allows no writing.

    The mode bits are asked as well as access(): root may write anything, but a 0444 file says
    it is not to be changed.
    """
    target = os.path.realpath(path)
    for what, name in (("file", target), ("directory", os.path.dirname(target))):
        try:
            writable = os.stat(name).st_mode & 0o222 and os.access(name, os.W_OK)
        except OSError:
            return None  # gone: writing the fix says so
        if not writable:
            return f"{path}: read-only {what}, not fixed"
    return None


def process_file(
    path: str,
    selection: Selection,
    mode: Mode,
    data: bytes | None = None,
    reaches: Reaches | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> FileResult:
    """Never raises for a bad file: it becomes a FAL000 finding (a checker bug: `FileResult.error`).

    `data`: the file's bytes when the caller already read them (to hash them for the cache).
    """
    try:
        original = read_bytes(path, limits.max_bytes) if data is None else data
        source = decode(original, path)
        started = time.monotonic()
        try:
            with time_limit(limits.timeout):
                if (
                    reaches is not None
                    and reduce_source(source.text, frozenset(reaches), source.path, selection.enabled(CAPTURE_CODE))
                    == []
                ):
                    return FileResult(path)  # no unit can have a finding: libcst is not even loaded
            from . import lint  # noqa: F401  (imported outside the time limit: libcst takes ~0.3 s to load)

            remaining = max(limits.timeout - (time.monotonic() - started), 0.001) if limits.timeout > 0 else 0
            with time_limit(remaining):
                protected = read_only(path) if mode is Mode.FIX else None
                if protected:
                    result, _ = lint_source(source, selection, Mode.CHECK, reaches)
                    return (
                        dataclasses.replace(result, warning=protected)
                        if any(f.fixable for f in result.findings)
                        else result
                    )
                try:
                    result, text = lint_source(source, selection, mode, reaches)
                    if mode is Mode.FIX and result.changed:
                        write_fix(source, original, text)
                except SourceError as exc:
                    if not exc.reason.startswith(_REFUSALS):
                        raise
                    result, _ = lint_source(source, selection, Mode.CHECK, reaches)
                    return dataclasses.replace(result, warning=str(exc))
        except _TimedOut:
            return FileResult(path, error=timed_out(path, limits.timeout), cacheable=False)
        return result
    except TooComplex as exc:  # the analysis' own stop, which depends on the helpers it read too
        return dataclasses.replace(unchecked(exc, selection), cacheable=False)
    except SourceError as exc:
        return unchecked(exc, selection)
    except RecursionError:
        return unchecked(SourceError(path, "too deeply nested to analyse"), selection)
    except Exception as exc:  # a checker bug must cost one file, not the whole run
        return FileResult(path, error=f"{path}: internal error ({type(exc).__name__}: {exc}); please report it")


def decided_by(named: Collection[str], reached: Mapping[str, Reaches]) -> list[str]:
    """The files of the index (real paths, sorted) other than `named` (real paths) with a function
    whose chain to the call that rescales its loss passes through a named file: a change there can
    make their findings errors, so a run on the changed files (pre-commit) reports them too. Read
    off the project index: nothing else is analysed."""
    return sorted(
        path
        for path, reaches in reached.items()
        if path not in named and any(_in(step, named) for reach in reaches.values() for step in reach.steps)
    )


def step_in(finding: Finding, named: Collection[str]) -> Step | None:
    """The first step of the finding's chain that lies in one of the `named` files (real paths)."""
    return next((step for step in finding.reached_by if _in(step, named)), None)


def _in(step: Step, named: Collection[str]) -> bool:
    return real_path(step.path) in named
