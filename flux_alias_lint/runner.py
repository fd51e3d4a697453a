"""Check or fix one file on disk: read → lint → (write atomically | diff) → a FileResult."""

from __future__ import annotations

import dataclasses
import difflib
import enum
import os
import tempfile

from .finding import Finding
from .selection import Selection
from .source import SourceError, SourceFile, decode, read_source


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
    error: str | None = None  # one line: why the file could not be checked
    fixed_codes: tuple[str, ...] = ()  # the rule of each fixed finding, for the closing summary


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), path, path))


def write_atomically(path: str, data: bytes) -> None:
    """Temporary file in the same directory, then rename: readers see the old or the new file, never half."""
    mode = os.stat(path).st_mode & 0o7777
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".flux-alias-lint-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def lint_source(source: SourceFile, selection: Selection, mode: Mode) -> tuple[FileResult, str]:
    """The result for one decoded source, plus its (possibly fixed) text."""
    from .lint import check_source, fix_text  # lazy: libcst is only needed once a file is really analysed

    if mode is Mode.CHECK:
        return FileResult(source.path, check_source(source.text, source.path, selection)), source.text
    result = fix_text(source, selection)
    changed = result.text != source.text
    diff = unified_diff(source.path, source.text, result.text) if mode is Mode.DIFF and changed else ""
    return FileResult(
        source.path, result.remaining, result.fixed, changed, diff, fixed_codes=result.fixed_codes
    ), result.text


def process_file(path: str, selection: Selection, mode: Mode, data: bytes | None = None) -> FileResult:
    """Never raises for a bad file: the reason goes into `FileResult.error`.

    `data`: the file's bytes when the caller already read them (to hash them for the cache).
    """
    try:
        source = read_source(path) if data is None else decode(data, path)
        result, text = lint_source(source, selection, mode)
        if mode is Mode.FIX and result.changed:
            try:
                write_atomically(path, source.encode(text))
            except OSError as exc:
                raise SourceError(path, f"cannot write the fix: {exc.strerror or exc}") from None
        return result
    except SourceError as exc:
        return FileResult(path, error=str(exc))
    except RecursionError:
        return FileResult(path, error=f"{path}: too deeply nested to analyse")
    except Exception as exc:  # a checker bug must cost one file, not the whole run
        return FileResult(path, error=f"{path}: internal error ({type(exc).__name__}: {exc}); please report it")
