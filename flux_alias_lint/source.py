"""Read, decode and parse one Python file, turning every way that can fail into a `SourceError`."""

from __future__ import annotations

import ast
import codecs
import dataclasses
import io
import tokenize
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import libcst as cst


class SourceError(Exception):
    """A file that could not be checked; `str()` is the one-line reason shown to the user."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


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


def read_source(path: str) -> SourceFile:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except IsADirectoryError:
        raise SourceError(path, "is a directory") from None
    except OSError as exc:
        raise SourceError(path, f"cannot read: {exc.strerror or exc}") from None
    return decode(data, path)


def _syntax_error(text: str, exc: cst.ParserSyntaxError) -> str:
    """CPython's own message where it has one (it names Python 2 prints, for instance)."""
    try:
        compile(text, "<check>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        return f"syntax error at {error.lineno}:{error.offset}: {error.msg}"
    except (ValueError, RecursionError, MemoryError):
        pass
    return f"syntax error at {exc.raw_line}:{exc.raw_column + 1}: {exc.message}"


def parse(source: SourceFile) -> cst.Module:
    import libcst as cst  # lazy: a run answered from the cache never parses

    try:
        return cst.parse_module(source.text)
    except cst.ParserSyntaxError as exc:
        raise SourceError(source.path, _syntax_error(source.text, exc)) from None
    except RecursionError:
        raise SourceError(source.path, "too deeply nested to parse") from None
