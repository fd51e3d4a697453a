"""Which files to check: explicit files, `*.py` under directories, minus excludes."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from .gitignore import GitIgnore

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
        # One regex for all patterns and one resolve() per directory: per-pattern fnmatch and a
        # resolve() per file were most of a warm (cached) run on a large tree.
        self._match = re.compile("|".join(fnmatch.translate(p) for p in self.patterns)).match
        self._prefixes: dict[Path, str] = {}  # a directory's path relative to the root, as a prefix

    def __call__(self, path: Path) -> bool:
        if path.name in ("", ".", ".."):
            return bool(self.patterns) and self._matches(path.name, path)
        return self.excluded_in(path.parent, path.name)

    def excluded_in(self, directory: Path, name: str, entry: os.DirEntry[str] | None = None) -> bool:
        """Whether `directory / name` is excluded, with the directory's path relative to the root
        worked out once for all its entries (a symlink is resolved on its own). `entry`: the walk's,
        which knows whether it is a symlink or a directory without asking the system again.

        No prefix test: the walk prunes excluded directories, and a directory named on the command
        line is walked even if a pattern would exclude it (see `discover`)."""
        if not self.patterns:
            return False
        if self._match(name):
            return True
        if entry.is_symlink() if entry is not None else os.path.islink(os.path.join(directory, name)):
            return self._matches(name, directory / name)
        prefix = self._prefixes.get(directory)
        if prefix is None:
            relative = self._relative(directory)
            prefix = self._prefixes[directory] = "" if relative == "." else relative.rstrip("/") + "/"
        if entry is not None and entry.is_dir():
            # Not a symlink: resolved, it is its directory's resolved path and its name.
            self._prefixes.setdefault(directory / name, prefix + name + "/")
        return bool(self._match(prefix + name))

    def _matches(self, name: str, path: Path) -> bool:
        return bool(self._match(name) or self._match(self._relative(path)))

    def _relative(self, path: Path) -> str:
        """`path` resolved, relative to the root (as written when it is elsewhere)."""
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
            resolved = Path(os.path.abspath(path))
        try:
            return resolved.relative_to(self.root).as_posix()
        except ValueError:
            return path.as_posix()


def discover(
    paths: Sequence[str],
    excluded: Callable[[Path], bool],
    force_exclude: bool = False,
    gitignore: GitIgnore | None = None,
    excluded_in: Callable[[Path, str, os.DirEntry[str]], bool] | None = None,
) -> tuple[list[str], list[str]]:
    """(files in a stable order, one-line errors for paths that do not exist).

    With `gitignore`, what git ignores is skipped inside directories; a path named explicitly is
    only dropped for that with `force_exclude`, as for the exclude patterns. `excluded_in(directory,
    name, entry)`: `excluded(directory / name)`, cheaper for the thousands of entries of a walk.
    """
    if excluded_in is None:
        excluded_in = lambda directory, name, entry: excluded(directory / name)  # noqa: E731
    files: list[str] = []
    errors: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            # Like ruff: a directory named on the command line is walked unless --force-exclude.
            if force_exclude and excluded(path) and raw not in (".", "./"):
                continue
            if force_exclude and gitignore is not None and gitignore.ignored_here_or_above(path, is_dir=True):
                continue
            files.extend(_walk(path, excluded_in, gitignore))
        elif path.exists() or path.is_symlink():
            if force_exclude and (
                excluded(path) or (gitignore is not None and gitignore.ignored_here_or_above(path, is_dir=False))
            ):
                continue
            files.append(raw)
        else:
            errors.append(f"{raw}: no such file or directory")
    seen: set[str] = set()
    unique = [f for f in files if not (f in seen or seen.add(f))]
    return unique, errors


def _walk(
    top: Path, excluded_in: Callable[[Path, str, os.DirEntry[str]], bool], gitignore: GitIgnore | None
) -> list[str]:
    """The `.py` files under `top` in `os.walk`'s order (top-down, names sorted), symlinked
    directories listed but not entered; each directory read once with `os.scandir`, whose entries
    say what they are without asking the system again."""
    found: list[str] = []
    stack = [str(top)]
    while stack:
        directory = stack.pop()
        base = Path(directory)
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            continue  # as `os.walk`: an unreadable directory is skipped
        spelled = "" if str(base) == "." else str(base) + os.sep  # as `str(base / filename)` spells it
        entered = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if not is_dir and not entry.name.endswith(".py"):
                continue
            if excluded_in(base, entry.name, entry) or (
                gitignore is not None and gitignore.ignored_in(base, entry.name, is_dir)
            ):
                continue  # pruning an ignored directory also keeps a `!` below it from re-including files
            if not is_dir:
                found.append(spelled + entry.name)
            elif not entry.is_symlink():  # followlinks=False: a symlink loop cannot make the walk go round forever
                entered.append(entry.path)
        stack.extend(reversed(entered))
    return found
