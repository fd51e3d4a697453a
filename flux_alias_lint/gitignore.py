"""`.gitignore` as git applies it, so a whole-repository run skips what git ignores (like ruff).

Pure logic, no `git` process: per gitignore(5), patterns come from `.git/info/exclude` and every
`.gitignore` from the work tree's root down to the file's directory; a deeper file, and a later
line in one file, wins; `!` re-includes; a trailing `/` matches directories only; a pattern with
a `/` before its end is anchored to its file's directory, one without matches at any depth; `*`,
`?` and `[...]` never match `/`, `**` matches across directories. A file inside an ignored
directory stays ignored whatever a later `!` says: the walk never enters that directory.

As in ruff, `.gitignore` files count only inside a git work tree (a `.git` at or above), and a
nested repository (a submodule) starts afresh. Git's global excludes file is not read.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

_POSIX_CLASSES = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "digit": "0-9",
    "lower": "a-z",
    "punct": re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}


@dataclasses.dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]  # matched against the path relative to the pattern file's directory
    negated: bool
    dir_only: bool

    def matches(self, relative: str, is_dir: bool) -> bool:
        return (is_dir or not self.dir_only) and self.regex.match(relative) is not None


def _bracket(glob: str, start: int) -> tuple[str, int] | None:
    """`[...]` at `start` as a regex class and the index after it; None if it never closes."""
    i = start + 1
    negate = i < len(glob) and glob[i] in "!^"
    i += negate
    parts: list[str] = []
    first = True
    while i < len(glob):
        char = glob[i]
        if char == "]" and not first:
            body = "".join(parts)
            # Like git's wildmatch with WM_PATHNAME, a class never matches `/`.
            return f"(?!/)[{'^' if negate else ''}{body}]", i + 1
        first = False
        if char == "[" and glob.startswith("[:", i):
            end = glob.find(":]", i + 2)
            if end != -1:
                parts.append(_POSIX_CLASSES.get(glob[i + 2 : end], ""))
                i = end + 2
                continue
        if char == "\\" and i + 1 < len(glob):
            i += 1
            char = glob[i]
        if char == "-" and parts and i + 1 < len(glob) and glob[i + 1] != "]":
            parts.append("-")
        else:
            parts.append(re.escape(char))
        i += 1
    return None


def _translate(glob: str) -> str:
    """A gitignore glob (leading `/` and trailing `/` already removed) as a regex body."""
    out: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**", i):
            bounded_before = i == 0 or glob[i - 1] == "/"
            after = i + 2
            if bounded_before and glob.startswith("/", after):
                out.append("(?:.*/)?")  # `**/`: zero or more directories
                i = after + 1
                continue
            if bounded_before and after == len(glob):
                out.append(".*")  # trailing `/**` (or a lone `**`): everything below
                i = after
                continue
            out.append("[^/]*")  # other runs of stars are a plain `*`
            while i < len(glob) and glob[i] == "*":
                i += 1
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            bracket = _bracket(glob, i)
            if bracket is not None:
                out.append(bracket[0])
                i = bracket[1]
                continue
            out.append(re.escape(char))
        elif char == "\\" and i + 1 < len(glob):
            i += 1
            out.append(re.escape(glob[i]))
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def parse_line(line: str) -> Pattern | None:
    """One line of a `.gitignore`; None for blanks and comments."""
    line = line.rstrip("\r\n")
    # Trailing spaces are dropped unless escaped with a backslash.
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    dir_only = line.endswith("/") and not line.endswith("\\/")
    if dir_only:
        line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    body = _translate(line.lstrip("/") if anchored else line)
    regex = re.compile(("" if anchored else "(?:.*/)?") + body + r"\Z", re.DOTALL)
    return Pattern(regex, negated, dir_only)


def parse(text: str) -> tuple[Pattern, ...]:
    return tuple(p for p in map(parse_line, text.split("\n")) if p is not None)


@dataclasses.dataclass(frozen=True)
class _PatternFile:
    base: Path  # the directory its patterns are relative to
    patterns: tuple[Pattern, ...]


def _read(path: str, base: str) -> _PatternFile | None:
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    patterns = parse(text)
    return _PatternFile(Path(base), patterns) if patterns else None


def _prefix(directory: Path, base: Path) -> str:
    """`directory` relative to `base`, as the start of an entry's relative path."""
    relative = directory.relative_to(base).as_posix()
    return "" if relative == "." else relative + "/"


class GitIgnore:
    """`ignored(path, is_dir)` for paths under git work trees; pattern files are read once each."""

    def __init__(self) -> None:
        self._chains: dict[str, tuple[_PatternFile, ...] | None] = {}  # by absolute directory
        self._in: dict[Path, tuple[tuple[_PatternFile, str], ...]] = {}

    def _chain(self, directory: str) -> tuple[_PatternFile, ...] | None:
        """The pattern files that apply in `directory` (absolute), lowest precedence first; None
        outside a work tree. Strings, not `Path`s: asked for every directory of a walk."""
        if directory in self._chains:
            return self._chains[directory]
        chain: tuple[_PatternFile, ...] | None
        git = os.path.join(directory, ".git")
        parent_directory = os.path.dirname(directory)
        if os.path.exists(git):
            # A work tree's root; `.git` is a file (no info/exclude of its own here) in worktrees and submodules.
            files = (
                _read(os.path.join(git, "info", "exclude"), directory),
                _read(os.path.join(directory, ".gitignore"), directory),
            )
            chain = tuple(f for f in files if f is not None)
        elif parent_directory == directory:
            chain = None
        else:
            parent = self._chain(parent_directory)
            own = _read(os.path.join(directory, ".gitignore"), directory) if parent is not None else None
            chain = parent if parent is None or own is None else parent + (own,)
        self._chains[directory] = chain
        return chain

    def ignored_in(self, directory: Path, name: str, is_dir: bool) -> bool:
        """Whether git ignores `directory / name` itself, with what depends only on the directory (its
        absolute path, its pattern files, its path relative to each) worked out once for all its entries."""
        known = self._in.get(directory)
        if known is None:
            absolute = directory.absolute()
            chain = self._chain(os.fspath(absolute)) or ()
            known = self._in[directory] = tuple((f, _prefix(absolute, f.base)) for f in reversed(chain))
        if not known or name == ".git":
            return False
        for pattern_file, prefix in known:
            relative = prefix + name
            for pattern in reversed(pattern_file.patterns):
                if pattern.matches(relative, is_dir):
                    return not pattern.negated
        return False

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """Whether git ignores `path` itself (its parent directories are the caller's business)."""
        path = path.absolute()
        return self.ignored_in(path.parent, path.name, is_dir)

    def ignored_here_or_above(self, path: Path, is_dir: bool) -> bool:
        """Whether `path` or a directory it is in is ignored: for paths named on the command line."""
        path = path.absolute()
        if self.ignored(path, is_dir):
            return True
        return any(self.ignored(parent, True) for parent in path.parents if self._chain(os.fspath(parent.parent)))
