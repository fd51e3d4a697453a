"""The project's modules as the index reads them: parsed once each, with what each file's evidence read.

A file's evidence depends on every other file parsed to resolve it (`depends_on`) and, for the rest of
the project, on the answers to what it asked of their texts (`searched`, `texts.py`): a later run
re-derives only the files whose own text or whose dependencies changed, or whose queries an edited
file now answers differently (`cache.project_reached`).
"""

from __future__ import annotations

import ast
import os
import warnings
from collections.abc import Mapping, Sequence

from ..source import SourceError, read_bytes
from .files import python_files
from .reach import Found
from .symbols import Symbols
from .texts import DERIVES, HOLDS, MARKS, Asked, answer


class Modules(Found):
    """The parsed modules of the projects under `roots`, by real path."""

    def __init__(self, roots: list[str]) -> None:
        super().__init__()
        self.roots = roots
        self.depends_on: dict[str, set[str]] = {}
        self.searched: dict[str, set[Asked]] = {}  # the queries each file's evidence asked of the project
        self.answers: dict[Asked, list[str]] = {}  # the files of a root answering a query (`_asking`)
        self.asked: set[Asked] = set()  # the queries of `answers` this index answered itself
        self._parsed: dict[str, Symbols | None] = {}
        self._project_files: dict[str, list[str]] = {}  # every file of a root (the files collected may be a part)
        self._texts: dict[str, bytes] = {}  # the texts read, by path

    def _know(self, listing: Mapping[str, Sequence[str]], answers: Mapping[Asked, list[str]]) -> None:
        """What the caller knows already: every file of each root, the answers of a previous run that
        hold still (`cache.project_reached`)."""
        self._project_files.update((root, list(files)) for root, files in listing.items())
        self.answers.update(answers)

    def _module(self, path: str, data: bytes | None = None) -> Symbols | None:
        if self._current is not None and path != self._current:
            self.depends_on[self._current].add(path)
        if path in self._parsed:
            return self._parsed[path]
        self._parsed[path] = None
        try:
            if data is None:
                data = read_bytes(path)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(data)
        except (SourceError, SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        module = Symbols(tree, path)
        self._parsed[path] = module
        return module

    def _mentioning(self, path: str, word: str) -> list[str]:
        """The files of `path`'s project whose text holds `word`."""
        return self._asking(path, HOLDS, word)

    def _deriving(self, path: str, name: str) -> list[str]:
        """The files of `path`'s project that may define a subclass of the class `name` (`texts.may_derive`)."""
        return self._asking(path, DERIVES, name)

    def _marking(self, path: str, name: str) -> list[str]:
        """The files of `path`'s project whose text names `name` where a patch may install a function."""
        return self._asking(path, MARKS, name)

    def _asking(self, path: str, kind: str, word: str) -> list[str]:
        """The files of `path`'s project answering `(kind, word)` yes, in the project's file order. The
        evidence being collected depends on the answers (`searched`), not on the files: another file's
        change matters to it only if that file's answer changes."""
        root = next((r for r in self.roots if path == r or path.startswith(r + os.sep)), None)
        if root is None:  # one module on its own (stdin, the Python API): nothing else is read
            return []
        if self._current is not None:
            self.searched[self._current].add((root, kind, word))
        return self._answered(root, kind, word)

    def _answered(self, root: str, kind: str, word: str) -> list[str]:
        """`_asking`'s answer, known or found (and then in `asked`)."""
        key = (root, kind, word)
        found = self.answers.get(key)
        if found is None:
            if root not in self._project_files:
                self._project_files[root] = list(python_files(root))
            # A file that names a patch holds its name: only those are asked.
            files = self._project_files[root] if kind == HOLDS else self._answered(root, HOLDS, word)
            found = self.answers[key] = [f for f in files if answer(kind, word, self._text(f))]
            self.asked.add(key)
        return found

    def _text(self, path: str) -> bytes:
        """The file's text, read once."""
        text = self._texts.get(path)
        if text is None:
            text = self._texts[path] = self._read_text(path)
        return text

    def _read_text(self, path: str) -> bytes:
        """A file's text from the disk (b"": unreadable); the escape analysis reads from its store."""
        return text_of(path)


def text_of(path: str) -> bytes:
    try:
        return read_bytes(path)
    except SourceError:
        return b""
