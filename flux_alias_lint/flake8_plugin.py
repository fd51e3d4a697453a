"""flake8 plugin: the FAL rules for teams that run flake8 (entry point `flake8.extension`, prefix FAL).

Each file gets the verdict `flux-alias-lint check` gives it:
- its context comes from the project index, as `check` builds it (`cache.project_reached`, kept
  where `check` keeps it), once per flake8 run: in flake8's main process, before it forks the
  workers that inherit it (`parse_options`); a project first met in a worker is indexed once there;
- its settings come from its nearest `[tool.flux-alias-lint]` (`select`, `ignore`,
  `per-file-ignores`, `target-version`, `unreached`), with flake8's own selection on top;
- flake8 has no warnings (every code it reports fails the run), so only errors are reported: a
  finding nothing is known to rescale (`unreached`, a warning for `check`) is reported only where
  `unreached = "error"` (or `--fal-unreached error`), as `check` would fail on it.

flake8 applies `# noqa`, `--select`/`--ignore`/`--extend-select` and per-file ignores itself, so
our own noqa handling stays off (`--disable-noqa` then works). Source read from stdin that differs
from the file it is named after (an editor's unsaved text) is checked with the index's answer for
that file plus the evidence in the text itself, its lines as they are now.
"""

from __future__ import annotations

import argparse
import ast
import multiprocessing
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from flake8.exceptions import ExecutionError

from . import __version__
from .cache import CACHE_DIR_NAME, project_reached
from .config import ConfigError, Resolver, selection_for
from .finding import ERROR, Finding, visible
from .index.files import given, project_root
from .index.project import reaches_of_text
from .index.reach import Reaches
from .lint import check_source
from .output import context_note
from .parallel import default_jobs
from .runner import analysis_limit, unchecked
from .selection import UNREACHED_MODES, Selection
from .source import SourceError, TooComplex, too_large

Reached = Mapping[str, Reaches]  # the project index: real path -> def line -> who rescales its loss


class Flake8Plugin:
    name = "flux-alias-lint"
    version = __version__

    # What this run's options say (`parse_options`, in flake8's main process; forked workers inherit it).
    unreached: str | None = None  # --fal-unreached: instead of each config's `unreached`
    from_stdin = False  # the source comes from stdin (`flake8 -`), not from the file it is named after
    _resolver: Resolver | None = None
    _indexes: dict[str, Reached] = {}  # project root -> its index, built once per process

    @classmethod
    def add_options(cls, manager: object) -> None:
        manager.add_option(  # type: ignore[attr-defined]
            "--fal-unreached",
            choices=UNREACHED_MODES,
            parse_from_config=True,
            help="flux-alias-lint findings in functions nothing is known to rescale: report them only with "
            "'error' (flake8 has no warnings); default: the config's `unreached`, else not reported",
        )

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        cls.unreached = options.fal_unreached
        cls.from_stdin = "-" in options.filenames
        cls._indexes = {}
        # As `check`'s paths: the project of a file no marker places; stdin stands for the file it is named after.
        given([options.stdin_display_name if path == "-" else path for path in options.filenames or ["."]])
        try:
            cls._resolver = Resolver(None, Path.cwd())
            for path in options.filenames or ["."]:  # flake8 checks "." when given nothing
                if path != "-" and os.path.exists(path):
                    cls._reached(path)
        except ConfigError as exc:  # flake8 prints it on one line and fails the run
            raise ExecutionError(f"flux-alias-lint: {exc}") from None

    @classmethod
    def _reached(cls, path: str) -> Reached:
        """The index of the project `path` is in, with its cache where `check` keeps it."""
        root = project_root(path)
        index = cls._indexes.get(root)
        if index is None:
            # The resolver reads a path's directory: a directory's own settings are its entries'.
            config = cls._config_resolver()(os.path.join(path, "*") if os.path.isdir(path) else path)
            cache = (config.root or Path.cwd()) / CACHE_DIR_NAME
            # flake8's workers are daemons, which may not fork the index's own workers.
            jobs = 1 if multiprocessing.current_process().daemon else default_jobs()
            index = cls._indexes[root] = project_reached([os.path.join(root, "")], cache, jobs)
        return index

    @classmethod
    def _config_resolver(cls) -> Resolver:
        if cls._resolver is None:  # options never parsed: the plugin driven on its own
            cls._resolver = Resolver(None, Path.cwd())
        return cls._resolver

    # flake8 picks the plugin kind from the parameter names: `tree` makes this a once-per-file
    # (AST) plugin. The AST is not used: the analysis needs libcst's tree, parsed from `lines`.
    def __init__(self, tree: ast.AST, lines: Sequence[str], filename: str) -> None:
        self._lines = lines
        self._filename = filename

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        path, text = self._filename, "".join(self._lines)
        config = self._config_resolver()(path)
        selection = selection_for(config, path, unreached=self.unreached)
        # `check`'s limits: a file over max-file-size is FAL000, as `check` says; past file-timeout (the
        # safety net) `CheckTimedOut` fails flake8's run, naming the file, as it fails `check`'s.
        over = too_large(path, len(text.encode("utf-8", "surrogatepass")), config.max_file_size)
        if over is None:
            try:
                with analysis_limit(path, config.file_timeout):
                    found = self._check(text, path, selection)
            except SourceError as exc:
                over = exc
        findings = unchecked(over, selection).findings if over is not None else found
        for f in findings:
            if f.severity != ERROR:
                continue  # a warning for `check`, which passes: flake8 would fail on it
            # flake8 wants a 0-based column and shows it 1-based, as we do.
            yield f.line, f.column - 1, visible(f"{f.code} {f.message}{context_note(f)}"), type(self)

    def _check(self, text: str, path: str, selection: Selection) -> list[Finding]:
        try:
            return check_source(text, path, selection, noqa=False, reaches=self._reaches(path, text))
        except TooComplex:
            raise  # over the work budget: FAL000, as `check` says
        except SourceError:
            return []  # flake8 reports a file it cannot parse as E999 already

    def _reaches(self, path: str, text: str) -> Reaches | None:
        """Who rescales the loss of each function of the file: the index's answer (`check`'s), and
        for text from stdin that is not the file's the evidence in the text itself on top (its lines
        as they are now). None (no file of that name): the text's own evidence alone, as
        `check_source` reads it."""
        if not os.path.isfile(path):
            return None
        if self.from_stdin:
            return reaches_of_text(path, text, self._reached(path))
        return self._reached(path).get(os.path.realpath(path), {})
