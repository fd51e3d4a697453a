"""Where a project's files are: its root, its Python files, and the file a module name imports.

The index reads the whole project the checked files belong to (`project_root`: the git work tree,
else the folder declaring the project or the folder the run was given), not only the files handed
over, so a pre-commit run on one file gets the context a whole-tree run gets; the library and the
triage find the project's modules a file imports the same way (`find_module`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from ..facts.projects import declares_a_project

_SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".nox", "build"})

Known = dict[str, tuple[str | None, str | None]]


@dataclasses.dataclass
class _Run:
    """What the run in progress was given (`given`)."""

    given: tuple[str, ...] = ()  # the folders it names, outermost first: the project of a file no marker places
    # The markers of each directory asked (`_markers_above`): a run lists a directory once, however many
    # files it has. None outside a run (an API call, a test): each question looks again.
    known: Known | None = None
    roots: dict[str, str] = dataclasses.field(default_factory=dict)  # `project_of`'s answers, by directory


_RUN = _Run()


def project_root(path: str, known: Known | None = None) -> str:
    """The project `path` is in: the git work tree it is in; else the outermost of the outermost folder
    declaring a project (a `pyproject.toml`, `setup.py`, `setup.cfg`, `requirements*.txt`,
    `requirements/`, ...: `facts/projects.py`) and the folder the run was given holding it (`given`);
    else, neither being there, its own directory. `known`: see `_markers_above` (default: this run's)."""
    start = real_path(path)
    directory = start if os.path.isdir(start) else os.path.dirname(start)
    known = known if known is not None else _RUN.known if _RUN.known is not None else {}
    git, declared = _markers_above(directory, known)
    if git is not None:
        return git
    folder = next((g for g in _RUN.given if directory == g or directory.startswith(g.rstrip(os.sep) + os.sep)), None)
    candidates = [d for d in (declared, folder) if d is not None]
    return min(candidates, key=len) if candidates else directory  # both hold `path`: the shorter holds the other


def _markers_above(directory: str, known: Known) -> tuple[str | None, str | None]:
    """(the nearest directory at or above `directory` with a `.git`, the outermost declaring a project
    when there is no `.git`); `known`: answers for directories already asked, so that sibling
    directories look at their shared parents once. One listing per directory."""
    chain: list[tuple[str, bool]] = []
    current = directory
    while current not in known:
        try:
            names = os.listdir(current)
        except OSError:
            names = []
        if ".git" in names:
            known[current] = (current, None)
            break
        parent = os.path.dirname(current)
        if parent == current:  # the filesystem's root
            known[current] = (None, current if declares_a_project(names) else None)
            break
        chain.append((current, declares_a_project(names)))
        current = parent
    for below, declares in reversed(chain):
        git, declared = known[os.path.dirname(below)]
        # the outermost declaring folder, as git's is the outermost work tree: a file checked alone in a
        # sub-project (`NeMo/setup.py` under the checkout's `pyproject.toml`) gets what the whole tree gets
        known[below] = (git, declared or (below if git is None and declares else None))
    return known[directory]


def given(paths: Iterable[str]) -> None:
    """Start a run given `paths`: they name the project of a file no marker places (`project_root`),
    the folder holding them all (a file stands for its folder), as `check .` names the folder it is
    run in and `check $(git ls-files '*.py')` the same one; each its own where only the filesystem's
    root holds them all."""
    folders = {_folder(path) for path in paths if path != "-"}
    common = os.path.commonpath(folders) if folders else ""
    folders_given([common] if common and os.path.dirname(common) != common else folders)


def folders_given(folders: Iterable[str]) -> None:
    """`given`, with folders each naming a project (an editor's workspace folders). The markers known
    are forgotten: a server's next index sees a marker added meanwhile."""
    _RUN.given = tuple(sorted({real_path(folder) for folder in folders}, key=len))
    _RUN.known, _RUN.roots = {}, {}


@contextlib.contextmanager
def run_given(paths: Iterable[str]) -> Iterator[None]:
    """`given(paths)` for one run, what was before afterwards (a run inside a process that goes on:
    the tests, an API caller)."""
    previous = dataclasses.replace(_RUN)
    given(paths)
    try:
        yield
    finally:
        _RUN.given, _RUN.known, _RUN.roots = previous.given, previous.known, previous.roots


def _folder(path: str) -> str:
    real = real_path(path)
    return real if os.path.isdir(real) else os.path.dirname(real)


def project_roots(paths: Iterable[str]) -> list[str]:
    """The projects the files `paths` belong to (`project_root`), each once."""
    known: Known = _RUN.known if _RUN.known is not None else {}
    roots = _RUN.roots if _RUN.known is not None else {}
    return sorted({project_of(path, known, roots) for path in paths})


def project_of(path: str, known: Known | None = None, roots: dict[str, str] | None = None) -> str:
    """`project_root(path)`, asked once a directory: `roots` holds the answers so far (default: this
    run's, those `project_roots` gave too; outside a run each question looks again)."""
    if roots is None:
        roots = _RUN.roots if _RUN.known is not None else {}
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in roots:
        roots[directory] = project_root(path, known)
    return roots[directory]


def python_files(root: str) -> Iterator[str]:
    """Every `*.py` under `root` (real paths), and every script without an extension that starts
    with a `python` shebang (pre-commit's `types: [python]` hands those over too), skipping VCS,
    virtualenv and build directories. The directory entries tell files from the rest: no stat per
    file (a warm run stats each one once, for the index cache's key)."""
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in _SKIP_DIRS and not entry.name.endswith(".egg-info"):
                        subdirs.append(entry.path)
                elif (
                    entry.name.endswith(".py")
                    and entry.is_file()
                    or "." not in entry.name
                    and entry.is_file()
                    and python_script(entry.path)
                ):
                    yield entry.path
            except OSError:
                continue
        stack.extend(reversed(subdirs))


def python_script(path: str) -> bool:
    """A file whose first line is a shebang naming python (`#!/usr/bin/env python3`)."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def real_path(path: str) -> str:
    """`os.path.realpath`, with one lstat for the file instead of one per component of its path:
    the directories are resolved once each (asked for every file of a run)."""
    directory, name = os.path.split(path)
    if not name or name in (".", "..") or os.path.islink(path):
        return os.path.realpath(path)
    cwd = "" if directory.startswith("/") else os.getcwd()  # a syscall: asked only when it matters
    return os.path.join(_real_directory(directory or os.curdir, cwd), name)


@functools.lru_cache(maxsize=4096)
def _real_directory(directory: str, cwd: str) -> str:  # `cwd`: a relative directory means another one there
    """`os.path.realpath(directory)` from its parent's, with one lstat (realpath takes one per
    component, for each directory again)."""
    absolute = os.path.join(cwd, directory)
    if "/." in absolute:  # `..` must be resolved after the symlinks before it: realpath's business
        return os.path.realpath(directory)
    parent, name = os.path.split(absolute.rstrip("/"))
    if not name or os.path.islink(absolute):
        return os.path.realpath(directory)
    return os.path.join(_real_directory(parent, cwd), name)


class Lookup(NamedTuple):
    """A module a file looked for (`find_module`'s question) and the file it found (None: none): what
    is found, or that nothing is, is part of what a result depends on."""

    importer: str
    dotted: str
    level: int
    found: str | None


@dataclasses.dataclass(frozen=True)
class Read:
    """What one file's findings depend on beyond its own text (for the cache): the other files read,
    by content, the modules looked for, by what `find_module` answers, and the projects whose texts
    were searched (the escape analysis': any file of them added, removed or edited may answer it
    otherwise)."""

    files: tuple[str, ...] = ()
    lookups: tuple[Lookup, ...] = ()
    searched: tuple[str, ...] = ()


def find_module(
    importer: str,
    dotted: str,
    level: int,
    known: dict[str, tuple[str | None, str | None]] | None = None,
    is_file: Callable[[str], bool] = os.path.isfile,
) -> str | None:
    """The file of module `dotted` as `importer` imports it (`level`: the dots of a relative import),
    found the way Python's path would: relative to the importer's package, else from each directory
    above it up to its project root, then the root's `src/` (so `src/` layouts and nested packages
    resolve, also from outside `src/`). None: outside
    the project."""
    importer = real_path(importer)
    parts = dotted.split(".") if dotted else []
    directory = os.path.dirname(importer)
    if level:
        for _ in range(level - 1):
            directory = os.path.dirname(directory)
        bases = [directory]
    else:
        root = project_root(importer, known)
        bases = []
        while directory == root or directory.startswith(root + os.sep):
            bases.append(directory)
            directory = os.path.dirname(directory)
        bases.append(os.path.join(root, "src"))  # a `src/` layout's packages, from its scripts and tests
    for base in bases:
        candidate = os.path.join(base, *parts)
        for path in (candidate + ".py", os.path.join(candidate, "__init__.py")):
            if path != importer and is_file(path):
                return path
    return None
