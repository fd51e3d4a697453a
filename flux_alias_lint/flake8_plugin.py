"""flake8 plugin: the FAL rules for teams that run flake8 (entry point `flake8.extension`, prefix FAL).

flake8 hands the plugin the file's lines; the analysis is the same libcst one as `check_source`.
flake8 applies `# noqa`, `--select`/`--ignore`/`--extend-select` and per-file ignores itself, so
the plugin reports every rule and leaves our own noqa handling off (`--disable-noqa` then works).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

from . import __version__
from .lint import check_source
from .source import SourceError


class Flake8Plugin:
    name = "flux-alias-lint"
    version = __version__

    # flake8 picks the plugin kind from the parameter names: `tree` makes this a once-per-file
    # (AST) plugin. The AST is not used: the analysis needs libcst's tree, parsed from `lines`.
    def __init__(self, tree: ast.AST, lines: Sequence[str], filename: str) -> None:
        self._lines = lines
        self._filename = filename

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        try:
            findings = check_source("".join(self._lines), self._filename, noqa=False)
        except SourceError:
            return  # flake8 reports a file it cannot parse as E999 already
        for f in findings:
            # flake8 wants a 0-based column and shows it 1-based, as we do.
            yield f.line, f.column - 1, f"{f.code} {f.message}", type(self)
