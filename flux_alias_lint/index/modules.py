"""The project's modules as the index reads them: parsed once each, with what each file's evidence read.

A file's evidence depends on every other file read to resolve it (`depends_on`) and on the words it
searched the project's texts for (`searched`): a later run re-derives only the files whose own text
or whose dependencies changed, or another of whose files now holds such a word
(`cache.project_reached`).
"""

from __future__ import annotations

import ast
import os
import warnings

from ..source import SourceError, read_bytes
from .files import python_files
from .reach import Found
from .symbols import Symbols


class Modules(Found):
    """The parsed modules of the projects under `roots`, by real path."""

    def __init__(self, roots: list[str]) -> None:
        super().__init__()
        self.roots = roots
        self.depends_on: dict[str, set[str]] = {}
        self.searched: dict[str, set[str]] = {}  # the words each file's evidence searched the project for
        self._parsed: dict[str, Symbols | None] = {}
        self._project_files: dict[str, list[str]] = {}  # every file of a root, for `_callers` (files may be a part)
        self._mentions: dict[tuple[str, str], list[str]] = {}  # `_mentioning`
        self._texts: dict[str, bytes] = {}  # every file's text, by path, once `_mentioning` read its root

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
        """The files of `path`'s project whose text holds `word`. The evidence being collected depends
        on each of them and on `word` (`searched`): another file's change matters to it only if that
        file's new text holds the word."""
        root = next((r for r in self.roots if path == r or path.startswith(r + os.sep)), None)
        if root is None:  # one module on its own (stdin, the Python API): nothing else is read
            return []
        if root not in self._project_files:
            self._project_files[root] = list(python_files(root))
            self._texts.update((f, text_of(f)) for f in self._project_files[root])  # read once, searched for each word
        key = (root, word)
        if key not in self._mentions:
            needle = word.encode()
            texts = self._texts
            self._mentions[key] = [f for f in self._project_files[root] if needle in texts[f]]
        mentions = self._mentions[key]
        if self._current is not None:
            self.depends_on[self._current].update(f for f in mentions if f != self._current)
            self.searched[self._current].add(word)
        return mentions


def text_of(path: str) -> bytes:
    try:
        return read_bytes(path)
    except SourceError:
        return b""
