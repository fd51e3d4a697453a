"""Read, decode and parse one Python file, turning every way that can fail into a `SourceError`."""

from __future__ import annotations

import ast
import codecs
import contextlib
import dataclasses
import gc
import io
import os
import stat
import sys
import threading
import tokenize
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import libcst as cst

T = TypeVar("T")

# libcst's native parser recurses on the C stack and segfaults (it cannot raise) at a few
# thousand levels on the default 8 MiB stack. Nesting up to MAX_DEPTH is parsed and analysed
# in a thread with a _DEEP_STACK stack, which survives 200,000 levels; deeper is refused.
_INLINE_DEPTH = 500
MAX_DEPTH = 10_000
_DEEP_STACK = 256 * 1024 * 1024
# Python frames the checker needs per nesting level (measured: about 4.6), with margin.
_FRAMES_PER_LEVEL = 10
_stack_size_lock = threading.Lock()
# CPython's own refusals of too much nesting (it guards its C stack; libcst does not).
_NESTING_ERRORS = ("too many nested parentheses", "too many levels of indentation", "too complex")


class SourceError(Exception):
    """A file that could not be checked; `str()` is the one-line reason shown to the user."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class TooComplex(SourceError):
    """The analysis went past the work it is allowed for the file's size (`analysis.Work`): a
    FAL000 finding, the same on any machine however busy."""


@dataclasses.dataclass(frozen=True)
class SourceFile:
    """Decoded text plus what is needed to write it back byte for byte."""

    path: str
    text: str  # without BOM, newlines exactly as in the file
    encoding: str
    bom: bool = False

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def decode(data: bytes, path: str) -> SourceFile:
    """Decode like CPython does: BOM, then a PEP 263 coding cookie, else UTF-8."""
    if b"\0" in data:
        raise SourceError(path, "contains NUL bytes (binary file?)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if "invalid or missing encoding declaration" not in str(exc):
            raise SourceError(path, f"cannot decode: {exc.msg}") from None
        encoding = "utf-8"  # undeclared non-UTF-8 bytes: the decode below names the byte
    bom = encoding == "utf-8-sig"
    if bom:
        encoding, data = "utf-8", data[len(codecs.BOM_UTF8) :]
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SourceError(
            path, f"not valid {encoding} (byte 0x{data[exc.start]:02x} on line {line}) and no other encoding declared"
        ) from None
    return SourceFile(path, text, encoding, bom)


# A default far above any hand-written module; generated ones this large take minutes to analyse.
DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024

_SPECIAL_FILES = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_regular(path: str, max_bytes: int = DEFAULT_MAX_FILE_SIZE) -> tuple[bytes, os.stat_result]:
    """The bytes of a regular file (a symlink is followed only to one) and its stat, at most `max_bytes`.

    Opened without blocking and checked on the open descriptor, so a FIFO or a device never hangs
    the run or fills memory, even one put in the file's place after it was listed.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        with contextlib.suppress(OSError):  # a socket cannot be opened at all: say what it is
            _require_regular(path, os.stat(path))
        raise SourceError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        _require_regular(path, st)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(max_bytes + 1)  # the size in the stat may be stale, or 0 (/proc)
        except OSError as exc:
            raise SourceError(path, f"cannot read: {exc.strerror or exc}") from None
    error = too_large(path, max(st.st_size, len(data)) if len(data) > max_bytes else len(data), max_bytes)
    if error is not None:
        raise error
    return data, st


def too_large(path: str, size: int, max_bytes: int) -> SourceError | None:
    """Why a source of `size` bytes is not checked (max-file-size), or None when it is within the limit."""
    if size <= max_bytes:
        return None
    return SourceError(path, f"is {size:,} bytes, more than the limit of {max_bytes:,} (max-file-size); skipped")


def _require_regular(path: str, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise SourceError(path, "is a directory")
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _SPECIAL_FILES if test(st.st_mode)), "not a regular file")
        raise SourceError(path, f"is {kind}, not a regular file; skipped")


def read_bytes(path: str, max_bytes: int = DEFAULT_MAX_FILE_SIZE) -> bytes:
    return read_regular(path, max_bytes)[0]


def saved_text(path: str) -> str | None:
    """The text of the file as saved, None where it cannot be read or decoded (an editor's or
    stdin's text is checked against it: the same text gets the index's answer alone)."""
    try:
        return decode(read_bytes(path), path).text
    except SourceError:
        return None


def read_source(path: str) -> SourceFile:
    return decode(read_bytes(path), path)


def nesting_depth(source: SourceFile) -> int:
    """Validate with CPython's parser, which fails safely, and bound how deep libcst will recurse.

    Running CPython first means libcst never sees text it could crash on: CPython refuses more
    than 200 nested brackets and about 3,000 nested expressions. One shape it accepts flat is
    nested in libcst: a chain of `and`/`or` is one `BoolOp` but a tower of `BooleanOperation`s,
    so each chain counts as deep as it is long. Syntax newer than the running Python is a
    syntax error here, as in every `ast`-based linter.
    """
    try:
        # A str that still starts with a BOM (libcst accepts it; compile() of a str does not).
        text = source.text.removeprefix("\ufeff")
        tree = compile(text, source.path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        raise _refusal(source, error) from None
    except (RecursionError, MemoryError):
        raise SourceError(source.path, "too deeply nested for Python's parser") from None
    except ValueError as error:  # e.g. NUL bytes in a str that did not come from `decode`
        raise SourceError(source.path, f"cannot parse: {error}") from None
    deepest = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]  # iterative: the tree may be 3,000 deep
    while stack:
        node, depth = stack.pop()
        if isinstance(node, ast.BoolOp):
            depth += len(node.values) - 2
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    if deepest > MAX_DEPTH:
        raise SourceError(source.path, f"nested {deepest} levels deep; more than {MAX_DEPTH} is not checked")
    return deepest


def check_compiles(source: SourceFile, tree: ast.Module | None = None) -> None:
    """Refuse, like a syntax error, what CPython parses but will not compile: a duplicate argument
    name, `import *` in a function or class, a misplaced `from __future__`, `return` outside a
    function and the like. Checked by compiling, so only for files with something to analyse:
    for every file it would add half again to a cold run. `tree`: the text's `ast` tree when the
    triage has it, compiled instead of the text (the same errors, without parsing it again)."""
    text = source.text.removeprefix("\ufeff")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings (invalid escapes) are not ours to print
        try:
            compile(text if tree is None else tree, source.path, "exec", dont_inherit=True)
        except SyntaxError as error:
            try:
                if tree is None:
                    compile(text, source.path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
            except SyntaxError:
                return  # it does not parse: the parse says why (or the target's newer syntax allows it)
            raise _refusal(source, error) from None
        except (RecursionError, MemoryError, ValueError):
            pass  # limits of the compiler, not errors in the file: `nesting_depth` judges nesting


def _parses_as_3_12(text: str) -> bool:
    import libcst as cst  # only for this rare message: libcst reads newer syntax than the running Python

    try:
        cst.parse_module(text, config=cst.PartialParserConfig(python_version="3.12"))
    except Exception:  # noqa: BLE001 - any refusal means: not 3.12 syntax either
        return False
    return True


def _refusal(source: SourceFile, error: SyntaxError) -> SourceError:
    if any(reason in error.msg for reason in _NESTING_ERRORS):
        return SourceError(source.path, f"too deeply nested for Python's parser ({error.msg})")
    hint = ""
    if error.msg.startswith("Missing parentheses in call to"):
        hint = " (Python 2 code?)"
    elif error.msg.startswith("f-string") and sys.version_info < (3, 12) and _parses_as_3_12(source.text):
        # Quotes, backslashes and comments inside f-string braces are Python 3.12 syntax (PEP 701).
        hint = " (Python 3.12 syntax: set requires-python or target-version)"
    return SourceError(source.path, f"syntax error at {error.lineno}:{error.offset}: {error.msg}{hint}")


def call_at_depth(depth: int, function: Callable[..., T], *args: object) -> T:
    """Call `function(*args)` with enough C stack and recursion limit for `depth` levels of nesting."""
    if depth <= _INLINE_DEPTH:
        return function(*args)
    # Only ever raised, never restored: another thread may be deep inside a check right now.
    needed = _FRAMES_PER_LEVEL * depth + 2_000
    if sys.getrecursionlimit() < needed:
        sys.setrecursionlimit(needed)
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(function(*args))
        except BaseException as exc:  # handed to the calling thread, which re-raises it
            failure.append(exc)

    with _stack_size_lock:  # the stack size is process-wide state: set it only for this thread
        previous = threading.stack_size(_DEEP_STACK)
        try:
            worker = threading.Thread(target=run, name="flux-alias-lint-deep", daemon=True)
            worker.start()
        finally:
            threading.stack_size(previous)
    worker.join()
    if failure:
        raise failure[0]
    return outcome[0]


def parse(source: SourceFile) -> cst.Module:
    """libcst's tree of text that `nesting_depth` accepted, on a stack `call_at_depth` sized."""
    import libcst as cst  # lazy: a run answered from the cache never parses

    try:
        return cst.parse_module(source.text)
    except cst.ParserSyntaxError as exc:
        # CPython accepted it, so this is a libcst limitation (e.g. thousands of adjacent strings).
        reason = f"libcst cannot parse it at {exc.raw_line}:{exc.raw_column + 1}: {exc.message}"
        raise SourceError(source.path, reason) from None
    except RecursionError:
        raise SourceError(source.path, "too deeply nested to parse") from None


@contextlib.contextmanager
def collections_paused(freeze_survivors: bool = False) -> Iterator[None]:
    """No cyclic garbage collection while one file is checked. Its `ast` and libcst trees are
    hundreds of thousands of acyclic nodes, freed by reference counting once the file is done; the
    collector would walk the live, growing trees again and again (a third of a cold run). Between
    files it runs as usual, over what survived.

    `freeze_survivors`: what survived the file (the helpers and summaries kept for the next files) is
    looked at for cycles once, then set aside (`gc.freeze`) until the caller gives it back (a worker
    process never does: it ends with the run): the collector would otherwise walk the growing caches,
    and in one process the whole project index, again at every full collection."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if freeze_survivors:
                gc.collect(0)
                gc.freeze()
            gc.enable()
