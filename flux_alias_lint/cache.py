"""Per-file results keyed by content hash, found through a stat fast path.

One file per (tool build, settings) in the cache directory: a checksum line, then JSON of two maps:

- `files`: absolute path → [stamp, digest], the stamp being (mtime_ns, ctime_ns, size, inode);
- `results`: digest (+ context key) → [the file's findings (without the path), or the reason it
  could not be checked; the (path, digest) of each file whose functions the findings used; each
  module the analysis looked for, as (importer, "" for the file itself; dotted name; level; the file
  `find_module` found, or None); the project root the file was checked in, and for each project
  whose texts the escape analysis searched, its state (`_STATES`)]. A result is reused only while
  those files are unchanged and those lookups find what they found: a helper module deleted,
  restored or shadowed (a branch switch) is seen, its absence being part of the key as its content
  is. It is reused only in the same project (a folder declaring nothing is the project of the path
  the run names), and one the escape analysis answered only while no file of the searched project
  was added, removed or edited (a new file elsewhere may hand the function to a library).

A warm run stats every file and, when the stamp matches, answers from `results` without opening
the file. When the stamp differs the file is read and hashed, so touched-but-identical files still
hit. The digest is the key for correctness; the stamp only lets us skip reading.

A file modified within `_RACY_NS` of being cached gets no stamp (as git's "racily clean" entries):
a second write in the same timestamp tick with the same size would otherwise look unchanged.

JSON rather than pickle: a cache directory checked into a repository must not be able to run code.
For the same reason its content is untrusted input. The checksum line drops a corrupted file
whole (truncated, merged, edited by hand). Every entry of one that passes is still checked against
the schema (types, known and selected rule codes, known contexts, positions) and whatever fails is
dropped, so those files are checked again and the next save rewrites them. No text holding a
control character is taken (`finding.CONTROL`): what is printed is what the tool computed. A cache
file that is not a regular file, or is a link, is never read.
Writes are atomic (temporary file + rename), so concurrent runs never see a torn file; the last
writer wins, which only costs the other run's additions. They never leave the cache folder nor go
through a link (`_write`): a repository may ship the folder with links in it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
import stat
import sys
import time
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

try:
    from _blake2 import blake2b  # what `hashlib.blake2b` is, without hashlib loading OpenSSL (~8 ms a start)
except ImportError:  # another interpreter
    from hashlib import blake2b

from . import __version__
from .facts.hosts import BY_NAME
from .finding import CONTROL, Finding
from .index.files import find_module, project_of, project_roots, python_files
from .index.reach import (
    ESCAPES,
    IN_FUNCTION,
    IN_PLACE_CALLER,
    UNREACHED,
    Evidence,
    Reach,
    Step,
    merged,
    styled,
)
from .index.texts import KINDS, Asked, answer
from .rules import RULES
from .runner import FileResult
from .selection import Selection
from .source import SourceError, read_bytes

CACHE_DIR_NAME = ".flux-alias-lint-cache"
_RACY_NS = 2_000_000_000
_FIELDS = tuple(f.name for f in dataclasses.fields(Finding) if f.name != "path")
_TYPES = typing.get_type_hints(Finding)
_POSITIONS = {"line", "column", "end_line", "end_column"}
# "": a FAL000 finding (nothing was checked).
# The contexts a reach may have (every host's, `facts/hosts.py`, and a project's own in-place caller),
# and a finding (those, and the analysis' own).
_REACH_CONTEXTS = {*BY_NAME, IN_PLACE_CALLER}
_CONTEXTS = {*_REACH_CONTEXTS, IN_FUNCTION, UNREACHED, ESCAPES, ""}
_MAX_CACHE_BYTES = 1024 * 1024 * 1024
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW | _CLOEXEC  # a new name only
_MAX_LEVEL = 64  # the dots of a relative import a cached lookup may have: more is no file's

Stamp = tuple[int, int, int, int]

# Each project the last `project_reached` of this process listed (by root): a digest of its files and
# their stamps, None when one was modified too recently to be trusted. What a result that searched the
# project's texts is keyed on: the index lists and stats the files anyway, so a warm run pays nothing.
_STATES: dict[str, str | None] = {}


def stamp_of(st: os.stat_result) -> Stamp:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def digest_of(data: bytes) -> str:
    return blake2b(data, digest_size=16).hexdigest()


_DIGEST_LENGTH = len(digest_of(b""))
_DIGEST = re.compile(rf"[0-9a-f]{{{_DIGEST_LENGTH}}}")
_RESULT_KEY = re.compile(rf"[0-9a-f]{{{_DIGEST_LENGTH}}}(?::[0-9a-f]{{16}})?")  # digest + `reach_key`


def _build_fingerprint() -> str:
    """The tool version plus the bytes of its own modules: an edited checkout never reads stale results.

    The interpreter and libcst are in it too: which syntax a file may use depends on both.
    """
    package = Path(__file__).parent
    h = blake2b(f"{__version__} {sys.version} ".encode() + _libcst_version(), digest_size=16)
    for module in sorted(package.rglob("*.py")):  # the subpackages' too: the analysis lives in them
        h.update(module.relative_to(package).as_posix().encode())
        h.update(module.read_bytes())
    return h.hexdigest()


def _libcst_version() -> bytes:
    """The installed libcst's version: its `_version.py` as it is on disk (importing
    `importlib.metadata` to ask costs 20-40 ms a start, a warm run's tenth)."""
    import importlib.util

    spec = importlib.util.find_spec("libcst")
    try:
        assert spec is not None and spec.origin is not None
        return Path(spec.origin).with_name("_version.py").read_bytes()
    except (AssertionError, OSError):
        import importlib.metadata

        return importlib.metadata.version("libcst").encode()


@functools.cache
def _fingerprint() -> str:
    """`_build_fingerprint()`, once a process: the modules it reads are the ones loaded already."""
    return _build_fingerprint()


class Cache:
    def __init__(self, directory: Path, selection: Selection) -> None:
        self.directory = directory
        settings = json.dumps([_fingerprint(), *dataclasses.astuple(selection)])
        self.file = directory / f"check-{blake2b(settings.encode(), digest_size=8).hexdigest()}.json"
        self.selection = selection
        self.files: dict[str, list] = {}
        self.results: dict[str, list] = {}
        self._dependencies: dict[str, list[str] | None] = {}  # `_dependency_once`'s
        self._lookups: dict[tuple[str, str, int], str | None] = {}  # `_found_once`'s
        self._roots: dict[str, tuple[str | None, str | None]] = {}  # and what they found of the projects
        self._files_asked: dict[str, bool] = {}  # and of the files
        self._dirty = False
        try:
            header, _, body = _read(self.file).partition(b"\n")
            if header != _header(body):
                return  # corrupted or from another version: start empty, the next save replaces it
            data = json.loads(body)
        except (OSError, ValueError, RecursionError):
            return  # missing, not a regular file, unreadable or not JSON: start empty, the next save replaces it
        files = data.get("files") if isinstance(data, dict) else None
        results = data.get("results") if isinstance(data, dict) else None
        for key, entry in files.items() if isinstance(files, dict) else ():
            if _valid_file_entry(entry):
                self.files[key] = entry
        for key, cached in results.items() if isinstance(results, dict) else ():
            if _RESULT_KEY.fullmatch(key) and self._valid_result(cached):
                self.results[key] = cached
        # Anything dropped: rewrite the file at the end of the run.
        self._dirty = not (isinstance(files, dict) and isinstance(results, dict)) or (
            len(self.files),
            len(self.results),
        ) != (len(files), len(results))

    def lookup(self, path: str, st: os.stat_result, context: str = "") -> FileResult | None:
        """The cached result if the file is unchanged; reads and hashes it only if its stamp moved.

        `context`: `reach_key` of what the project index knows of the file's functions; a result is
        only reused under the same context, and while the files it depends on are unchanged."""
        key = os.path.abspath(path)
        entry = self.files.get(key)
        stamp = stamp_of(st)
        if entry is not None and entry[0] is not None and tuple(entry[0]) == stamp:
            return self._result(path, entry[1], context)
        if entry is None and not self.results:
            return None  # nothing to match by content: do not read the file twice
        try:
            with open(path, "rb") as handle:
                digest = digest_of(handle.read())
        except OSError:
            return None
        result = self._result(path, digest, context)
        if result is not None:
            self._remember(key, stamp, digest)
        return result

    def store(self, path: str, stamp: Stamp, digest: str, result: FileResult, context: str = "") -> None:
        error = None if result.error is None else result.error.removeprefix(f"{path}: ")
        rows = [[_to_json(getattr(f, name)) for name in _FIELDS] for f in result.findings]
        dependencies = [_dependency(other) for other in result.dependencies.files]
        if None in dependencies:
            return  # a file it depends on vanished meanwhile: nothing to validate a reuse against
        if not all(map(_printable, _strings([rows, error]))):
            return  # a control character a load would reject: checked again each run rather than rewritten
        searched = [[root, _STATES.get(root)] for root in result.dependencies.searched]
        if any(state is None for _, state in searched):
            return  # a project whose files were not all listed with a trusted stamp: checked again each run
        own = os.path.abspath(path)
        # The file's own lookups are asked again from wherever a file of the same content is.
        lookups = [
            ["" if os.path.abspath(i) == own else i, d, level, found]
            for i, d, level, found in result.dependencies.lookups
        ]
        self.results[digest + context] = [rows, error, dependencies, lookups, [project_of(path), searched]]
        self._remember(own, stamp, digest)

    def save(self) -> None:
        if not self._dirty:
            return
        live = {entry[1] for entry in self.files.values()}
        data = {"files": self.files, "results": {d: r for d, r in self.results.items() if d[:_DIGEST_LENGTH] in live}}
        with contextlib.suppress(OSError):  # a read-only checkout still gets its results, just not cached
            _write(self.file, data)
        self._dirty = False

    def _remember(self, key: str, stamp: Stamp, digest: str) -> None:
        racy = time.time_ns() - stamp[0] < _RACY_NS
        self.files[key] = [None if racy else list(stamp), digest]
        self._dirty = True

    def _result(self, path: str, digest: str, context: str) -> FileResult | None:
        cached = self.results.get(digest + context)
        if cached is None:
            return None
        rows, error, dependencies, lookups, (root, searched) = cached
        if root != project_of(path) or any(_STATES.get(r) != state for r, state in searched):
            return None  # checked in another project, or a file of a project it searched changed
        if any(self._dependency_once(other) != [other, digest] for other, digest in dependencies):
            return None  # a helper it summarised changed
        if any(
            self._found_once(importer or path, dotted, level) != found for importer, dotted, level, found in lookups
        ):
            return None  # a module it looked for is found elsewhere now, or found where it was not (or no longer)
        if error is not None:
            return FileResult(path, error=f"{path}: {error}")
        return FileResult(path, [_finding(path, row) for row in rows])

    def _dependency_once(self, path: str) -> list[str] | None:
        """`_dependency(path)`, read and hashed once a run however many cached results name it."""
        if path not in self._dependencies:
            self._dependencies[path] = _dependency(path)
        return self._dependencies[path]

    def _found_once(self, importer: str, dotted: str, level: int) -> str | None:
        """`find_module`, asked once a run however many cached results looked for the module, the
        lookups sharing the project roots and the files they ask about."""
        key = (os.path.abspath(importer), dotted, level)
        if key not in self._lookups:
            self._lookups[key] = find_module(importer, dotted, level, self._roots, self._is_file)
        return self._lookups[key]

    def _is_file(self, path: str) -> bool:
        found = self._files_asked.get(path)
        if found is None:
            found = self._files_asked[path] = os.path.isfile(path)
        return found

    def _valid_result(self, cached: object) -> bool:
        """`[rows, error, dependencies, lookups, project]`, every row a finding this run could report
        and no text in it that a terminal or a CI log would read as anything but text (`_printable`)."""
        if not (isinstance(cached, list) and len(cached) == 5 and _valid_project(cached[4])):
            return False
        rows, error, dependencies, lookups, _ = cached
        if not (isinstance(dependencies, list) and all(_valid_dependency(d) for d in dependencies)):
            return False
        if not (isinstance(lookups, list) and all(_valid_lookup(lookup) for lookup in lookups)):
            return False
        if error is not None:
            return isinstance(error, str) and rows == [] and _printable(error)
        return isinstance(rows, list) and all(self._valid_row(row) for row in rows)

    def _valid_row(self, row: object) -> bool:
        """A cached finding: each field of the type `Finding` declares, a known and selected rule,
        a known context, 1-based positions with the end after the start."""
        if not (isinstance(row, list) and len(row) == len(_FIELDS)):
            return False
        values = dict(zip(_FIELDS, row, strict=True))
        if not all(_is_a(value, _TYPES[name]) for name, value in values.items()):
            return False
        if values["code"] not in RULES or not self.selection.enabled(values["code"]):
            return False
        if values["context"] not in _CONTEXTS or any(values[name] < 1 for name in _POSITIONS):
            return False
        if not all(map(_printable, _strings(row))):
            return False
        return (values["end_line"], values["end_column"]) >= (values["line"], values["column"])


def reach_key(reaches: Mapping[int, Reach] | None) -> str:
    """A short, stable key for what the project index knows of one file's functions ("" for nothing)."""
    if not reaches:
        return ""
    rows = sorted(
        [line, [[a.context, [dataclasses.astuple(s) for s in a.steps], a.whole_return, a.entry] for a in (r, *r.also)]]
        for line, r in reaches.items()
    )
    return ":" + blake2b(json.dumps(rows).encode(), digest_size=8).hexdigest()


def _dependency(path: str) -> list[str] | None:
    """(path, content digest) of a file whose functions a result used; None if it cannot be read."""
    try:
        return [path, digest_of(read_bytes(path))]
    except SourceError:
        return None


def _to_json(value: object) -> object:
    if isinstance(value, tuple):  # reached_by: its steps, stored absolute (a run may be in another directory)
        return [dataclasses.astuple(step) for step in styled(value, os.path.abspath(os.curdir))]
    return value


def _finding(path: str, row: list) -> Finding:
    """A stored finding, its steps' paths in the style of `path` (this run's), as a fresh one's are."""
    values = dict(zip(_FIELDS, row, strict=True))
    values["reached_by"] = styled(tuple(Step(*step) for step in values["reached_by"]), path)
    return Finding(path, **values)


def _header(body: bytes) -> bytes:
    return b"flux-alias-lint-cache " + blake2b(body, digest_size=16).hexdigest().encode()


def _valid_file_entry(entry: object) -> bool:
    """`[stamp or None, digest]`."""
    if not (isinstance(entry, list) and len(entry) == 2):
        return False
    stamp, digest = entry
    stamp_ok = stamp is None or (
        isinstance(stamp, list) and len(stamp) == 4 and all(type(x) is int and x >= 0 for x in stamp)
    )
    return stamp_ok and isinstance(digest, str) and bool(_DIGEST.fullmatch(digest))


def _printable(text: str) -> bool:
    """No control character (`finding.CONTROL`): a cached text holding one is dropped, not shown. A
    finding the tool computes with one is not cached (checked again each run)."""
    return CONTROL.search(text) is None


def _strings(value: object) -> Iterator[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


_DOTTED = re.compile(r"\w+(?:\.\w+)*")


def _valid_lookup(entry: object) -> bool:
    """`[importer ("": the file itself), dotted module name, level, the file found or None]`."""
    if not (isinstance(entry, list) and len(entry) == 4):
        return False
    importer, dotted, level, found = entry
    return (
        isinstance(importer, str)
        and isinstance(dotted, str)
        and (bool(_DOTTED.fullmatch(dotted)) or dotted == "")
        and type(level) is int
        and 0 <= level <= _MAX_LEVEL
        and (found is None or isinstance(found, str))
    )


def _valid_project(entry: object) -> bool:
    """`[root, [[searched root, its state digest], ...]]`."""
    if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and isinstance(entry[1], list)):
        return False
    return all(
        isinstance(s, list) and len(s) == 2 and isinstance(s[0], str) and isinstance(s[1], str) for s in entry[1]
    )


def _valid_dependency(entry: object) -> bool:
    """`[path, digest]`."""
    return (
        isinstance(entry, list)
        and len(entry) == 2
        and isinstance(entry[0], str)
        and isinstance(entry[1], str)
        and bool(_DIGEST.fullmatch(entry[1]))
    )


def _is_a(value: object, hint: object) -> bool:
    """Whether JSON `value` is what `_to_json` makes of a `hint` (a tuple of dataclasses: lists)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_is_a(value, option) for option in typing.get_args(hint))
    if origin is tuple:
        args = typing.get_args(hint)
        return (
            len(args) == 2 and args[1] is Ellipsis and isinstance(value, list) and all(_is_a(v, args[0]) for v in value)
        )
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        fields = typing.get_type_hints(hint)
        return isinstance(value, list) and len(value) == len(fields) and all(map(_is_a, value, fields.values()))
    if hint in (int, str, bool, type(None)):
        return type(value) is hint  # exactly: JSON's true is not an int here, nor 3.0
    return False  # a type the cache never stores: the entry is dropped, the file re-checked


def _write_markers(directory: int) -> None:
    """Like ruff's cache: never committed, skipped by backup tools. Created in the opened `directory`
    only where the name is free: whatever holds it already (ours, or a link a repository ships) is
    left as it is, never written through."""
    for name, text in (
        (".gitignore", "# Automatically created by flux-alias-lint.\n*\n"),
        ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n"),
    ):
        try:
            fd = os.open(name, _CREATE, 0o666, dir_fd=directory)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as handle:
            handle.write(text)


def collect_evidence(
    roots: Sequence[str],
    files: Mapping[str, Sequence[str]],
    jobs: int = 1,
    listing: Mapping[str, Sequence[str]] | None = None,
    answers: Mapping[Asked, list[str]] | None = None,
) -> tuple[dict[str, Evidence], dict[str, set[str]], dict[str, set[Asked]], dict[Asked, list[str]]]:
    """`index.project.collect_evidence`: the index's modules are loaded only when what is cached
    cannot answer."""
    from .index import project

    return project.collect_evidence(roots, files, jobs, listing, answers)


def project_reached(paths: Sequence[str], directory: Path | None, jobs: int = 1) -> dict[str, dict[int, Reach]]:
    """`ProjectIndex.for_paths(paths).reached_by_path()`, kept in `directory` file by file: each file
    the gate let through, with its evidence, the stamps of the files it parsed and the queries it
    asked of the others' texts (`index/texts.py`), and the files answering each query. A later run
    stats the project, asks the changed files the queries again, and re-derives only the files that
    changed, whose dependencies did, or one of whose queries a changed file now answers differently
    (a pre-commit run over a few edited files); a file added or removed, another working directory
    (the steps' paths are shown from it) or another tool build rebuilds it all. Any other content of
    the file is rebuilt from scratch. `jobs`: see `collect_evidence`."""
    roots = project_roots(paths)
    files = {root: list(python_files(root)) for root in roots}
    order = [path for root in roots for path in files[root]]
    _STATES.clear()
    if directory is None:
        evidence = collect_evidence(roots, files, jobs)[0]
        return merged(evidence[path] for path in order if path in evidence).reached_by_path()
    index_file = directory / "index.json"
    key = f"{_fingerprint()} {os.getcwd()} {roots}"
    stamps = {path: _trusted_stamp(path) for root in roots for path in files[root]}
    _STATES.update((root, _state([(path, stamps[path]) for path in files[root]])) for root in roots)
    old = _load_index(index_file, key, roots)
    # The project's files are stat'ed once, before any is read (an edit made meanwhile shows next run),
    # any other dependency once too.
    current = dict(stamps)
    if old is not None and set(old[0]) == set(stamps):
        old_stamps, old_gated, answers = old
        redo = {p for p in order if stamps[p] is None or stamps[p] != old_stamps[p]}
        changed = frozenset(redo)
        flipped = _ask_again(answers, changed, files) if changed else set()
        redo |= {
            g
            for g, ((same, other, queries), _) in old_gated.items()
            if g not in redo
            and (
                not changed.isdisjoint(same)
                or any(s is None or _stamp_now(current, d) != s for d, s in other.items())
                or not flipped.isdisjoint(queries)
            )
        }
        gated = {g: record for g, record in old_gated.items() if g not in redo}
    else:
        redo, gated, answers = set(order), {}, {}
    if redo:
        found, depends_on, searched, asked = collect_evidence(
            roots, {root: [p for p in files[root] if p in redo] for root in roots}, jobs, files, answers
        )
        answers.update(asked)
        for path, evidence in found.items():
            deps = {d: _stamp_now(current, d) for d in sorted(depends_on[path])}
            same = frozenset(d for d, s in deps.items() if s is not None and s == stamps.get(d))
            other = {d: s for d, s in deps.items() if d not in same}
            gated[path] = ((same, other, frozenset(searched[path])), evidence)
        with contextlib.suppress(OSError):
            _write(index_file, _index_rows(key, stamps, gated, answers))
    return merged(gated[path][1] for path in order if path in gated).reached_by_path()


def _state(listed: list[tuple[str, Stamp | None]]) -> str | None:
    """A project's `_STATES` entry from its files and their stamps."""
    if any(stamp is None for _, stamp in listed):
        return None
    return blake2b(json.dumps(listed).encode(), digest_size=16).hexdigest()


def _ask_again(answers: dict[Asked, list[str]], changed: frozenset[str], files: Mapping[str, list[str]]) -> set[Asked]:
    """Ask the changed files every known query again, bringing `answers` up to date: the queries
    whose answer changed. Read as the index reads them (a file changed, so the index is about to be
    loaded anyway)."""
    from .index.modules import text_of

    texts = {path: text_of(path) for path in sorted(changed)}
    members = {root: changed.intersection(listed) for root, listed in files.items()}
    flipped = set()
    for asked, holders in answers.items():
        root, kind, word = asked
        now = {p for p in members[root] if answer(kind, word, texts[p])}
        before = members[root].intersection(holders)
        if now != before:
            flipped.add(asked)
            keep = (set(holders) - before) | now
            answers[asked] = [p for p in files[root] if p in keep]
    return flipped


def _stamp_now(known: dict[str, Stamp | None], path: str) -> Stamp | None:
    """`_trusted_stamp(path)`, taken once a run: `known` holds what was taken so far."""
    if path not in known:
        known[path] = _trusted_stamp(path)
    return known[path]


def _trusted_stamp(path: str) -> Stamp | None:
    """The file's stamp, or None when it was modified too recently to be trusted (or is gone)."""
    try:
        stamp = stamp_of(os.stat(path))
    except OSError:
        return None
    return None if time.time_ns() - stamp[0] < _RACY_NS else stamp


# What a gated file's evidence was resolved against: the files of the project it parsed whose stamp was
# the one the project's stamps hold then, stale once one of them changed; the others with the stamp each
# had; the queries it asked of the project's texts, stale once a changed file answers one differently.
Dependencies = tuple[frozenset[str], dict[str, Stamp | None], frozenset[Asked]]
Gated = dict[str, tuple[Dependencies, Evidence]]


def _index_rows(
    key: str, stamps: dict[str, Stamp | None], gated: Gated, answers: Mapping[Asked, list[str]]
) -> dict[str, object]:
    """What `_load_index` reads. A file is written as its position in `stamps` (a dependency whose stamp
    is another as [path, stamp]), a query as its position in `answers`, which holds the queries some
    gated file asked: the file stays small to read on every run."""
    position = {path: at for at, path in enumerate(stamps)}
    asked = sorted({query for (_, _, queries), _ in gated.values() for query in queries})
    numbered = {query: at for at, query in enumerate(asked)}
    return {
        "key": key,
        "stamps": stamps,
        "answers": [[*query, [position[p] for p in answers[query]]] for query in asked],
        "gated": {
            path: [
                [
                    sorted(position[d] for d in same),
                    [[d, s] for d, s in other.items()],
                    sorted(map(numbered.get, queries)),
                ],
                [
                    [
                        p,
                        line,
                        r.context,
                        [dataclasses.astuple(step) for step in r.steps],
                        r.guessed,
                        r.whole_return,
                        r.entry,
                    ]
                    for (p, line), r in evidence
                ],
            ]
            for path, ((same, other, queries), evidence) in gated.items()
        },
    }


def _write(file: Path, data: object) -> None:
    """Atomically, with its checksum line, in a directory marked as a cache, and only there: the
    directory is opened without following a link (`_open_directory`) and every name is then taken
    relative to that descriptor, so nothing swapped into its path meanwhile redirects a write; a new
    name is created exclusively (`O_EXCL` fails on any entry, a dangling link too) and the file
    replaced by a rename, which replaces a link in its place instead of writing where it points."""
    body = json.dumps(data, separators=(",", ":")).encode()
    directory = _open_directory(file.parent)
    try:
        _write_markers(directory)
        temporary = f".tmp-{os.getpid()}-{os.urandom(6).hex()}"
        fd = os.open(temporary, _CREATE, 0o600, dir_fd=directory)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(_header(body) + b"\n" + body)
            os.replace(temporary, file.name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=directory)
            raise
    finally:
        os.close(directory)


def _open_directory(path: Path, make: bool = True) -> int:
    """The cache directory (made if missing, with `make`), opened as itself: OSError where it is a link
    (a repository may ship one pointing anywhere) or not a directory. The directories above it are the
    user's path."""
    if make:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # `mkdir` never follows a link: one there is an existing entry
            os.mkdir(path)
    return os.open(path, os.O_RDONLY | _NO_FOLLOW | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)


def _read(file: Path) -> bytes:
    """A cache file's bytes: a regular file in a cache directory that is no link, never through a link
    (a shipped one may point at a FIFO, a device or a file of the user's); OSError otherwise."""
    directory = _open_directory(file.parent, make=False)
    try:
        fd = os.open(file.name, os.O_RDONLY | os.O_NONBLOCK | _NO_FOLLOW | _CLOEXEC, dir_fd=directory)
    finally:
        os.close(directory)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{file} is not a regular file")
        data = handle.read(_MAX_CACHE_BYTES + 1)
    if len(data) > _MAX_CACHE_BYTES:
        raise OSError(f"{file} is too large")
    return data


def _load_index(
    index_file: Path, key: str, roots: Sequence[str]
) -> tuple[dict[str, Stamp | None], Gated, dict[Asked, list[str]]] | None:
    """The stamps, gated files and answers of a previous run with the same key (and so `roots`); None:
    missing, unreadable, for another key, or not ours."""
    try:
        header, _, body = _read(index_file).partition(b"\n")
        if header != _header(body):
            return None
        data = json.loads(body)
        if data["key"] != key:
            return None
        stamps = {path: _stamp(stamp) for path, stamp in data["stamps"].items()}
        paths = list(stamps)  # in the order written: a file is a position
        answers: dict[Asked, list[str]] = {}
        for root, kind, word, holders in data["answers"]:
            if not (root in roots and kind in KINDS and isinstance(word, str) and _positions(holders, len(paths))):
                return None
            answers[root, kind, word] = list(map(paths.__getitem__, holders))
        asked = list(answers)
        gated: Gated = {}
        for path, ((same, other, queries), rows) in data["gated"].items():
            if path not in stamps or not _positions(queries, len(asked)):
                return None
            evidence: Evidence = []
            for target, line, context, steps, guessed, whole_return, entry in rows:
                valid = (
                    isinstance(target, str)
                    and type(line) is int
                    and type(guessed) is bool
                    and type(whole_return) is bool
                    and isinstance(entry, str)
                )
                if not (valid and context in _REACH_CONTEXTS):
                    return None
                parsed = tuple(Step(*step) for step in steps)
                if not all(isinstance(s.path, str) and type(s.line) is int and isinstance(s.what, str) for s in parsed):
                    return None
                evidence.append(((target, line), Reach(context, parsed, guessed, whole_return, entry=entry)))
            if not _positions(same, len(paths)):
                return None
            others = {dep: _stamp(stamp) for dep, stamp in other if isinstance(dep, str)}
            gated[path] = (
                (frozenset(map(paths.__getitem__, same)), others, frozenset(map(asked.__getitem__, queries))),
                evidence,
            )
        return stamps, gated, answers
    except (SourceError, OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None  # missing, unreadable or not ours: rebuilt


def _positions(value: object, length: int) -> bool:
    """Whether `value` is a list of positions in a list of `length`. Tens of thousands a run: checked by
    C loops, not a generator."""
    return isinstance(value, list) and (
        not value or (set(map(type, value)) == {int} and min(value) >= 0 and max(value) < length)
    )


def _stamp(value: object) -> Stamp | None:
    if value is None:
        return None
    if isinstance(value, list) and len(value) == 4 and all(type(x) is int and x >= 0 for x in value):
        return (value[0], value[1], value[2], value[3])  # `type(x) is int`: `_is_a(x, int)`, tens of thousands a run
    raise ValueError("not a stamp")
