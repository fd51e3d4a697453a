"""Which files to check: explicit files, `*.py` under directories, minus excludes."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".hg",
    ".mypy_cache",
    ".nox",
    ".pytest_cache",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    "__pycache__",
    "__pypackages__",
    "_build",
    "buck-out",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
)


class Excluder:
    """Patterns match a path's basename or its path relative to the config root, like ruff."""

    def __init__(self, patterns: Iterable[str], root: Path) -> None:
        self.patterns = tuple(p.rstrip("/") for p in patterns)
        self.root = root

    def __call__(self, path: Path) -> bool:
        name = path.name
        try:
            rel = path.resolve().relative_to(self.root).as_posix()
        except ValueError:
            rel = path.as_posix()
        # No prefix test: the walk prunes excluded directories, and a directory named on the
        # command line is walked even if a pattern would exclude it (see `discover`).
        return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(rel, p) for p in self.patterns)


def discover(paths: Sequence[str], excluded: Excluder, force_exclude: bool = False) -> tuple[list[str], list[str]]:
    """(files in a stable order, one-line errors for paths that do not exist)."""
    files: list[str] = []
    errors: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            # Like ruff: a directory named on the command line is walked unless --force-exclude.
            if force_exclude and excluded(path) and raw not in (".", "./"):
                continue
            files.extend(_walk(path, excluded))
        elif path.exists() or path.is_symlink():
            if not (force_exclude and excluded(path)):
                files.append(raw)
        else:
            errors.append(f"{raw}: no such file or directory")
    seen: set[str] = set()
    unique = [f for f in files if not (f in seen or seen.add(f))]
    return unique, errors


def _walk(top: Path, excluded: Excluder) -> list[str]:
    found: list[str] = []
    # followlinks=False: a symlink loop cannot make the walk go round forever.
    for directory, dirnames, filenames in os.walk(top):
        base = Path(directory)
        dirnames[:] = sorted(d for d in dirnames if not excluded(base / d))
        for filename in sorted(filenames):
            if filename.endswith(".py") and not excluded(base / filename):
                found.append(str(base / filename))
    return found
