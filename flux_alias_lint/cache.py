"""Per-file results keyed by content hash, found through a stat fast path.

One JSON file per (tool build, settings) in the cache directory holds two maps:

- `files`: absolute path → [stamp, digest], the stamp being (mtime_ns, ctime_ns, size, inode);
- `results`: digest → the file's findings (without the path) or the reason it could not be checked.

A warm run stats every file and, when the stamp matches, answers from `results` without opening
the file. When the stamp differs the file is read and hashed, so touched-but-identical files still
hit. The digest is the key for correctness; the stamp only lets us skip reading.

A file modified within `_RACY_NS` of being cached gets no stamp (as git's "racily clean" entries):
a second write in the same timestamp tick with the same size would otherwise look unchanged.

JSON rather than pickle: a cache directory checked into a repository must not be able to run code.
Writes are atomic (temporary file + rename), so concurrent runs never see a torn file; the last
writer wins, which only costs the other run's additions.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from . import __version__
from .finding import Finding
from .project import Reach, Step
from .runner import FileResult
from .selection import Selection

CACHE_DIR_NAME = ".flux-alias-lint-cache"
_RACY_NS = 2_000_000_000
_FIELDS = tuple(f.name for f in dataclasses.fields(Finding) if f.name != "path")

Stamp = tuple[int, int, int, int]


def stamp_of(st: os.stat_result) -> Stamp:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def digest_of(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


_DIGEST_LENGTH = len(digest_of(b""))


def _build_fingerprint() -> str:
    """The tool version plus the bytes of its own modules: an edited checkout never reads stale results.

    The interpreter and libcst are in it too: which syntax a file may use depends on both.
    """
    import importlib.metadata  # lazy: ~20 ms, and a run without the cache never needs it

    package = Path(__file__).parent
    h = hashlib.blake2b(f"{__version__} {sys.version} {importlib.metadata.version('libcst')}".encode(), digest_size=16)
    for module in sorted(package.glob("*.py")):
        h.update(module.name.encode())
        h.update(module.read_bytes())
    return h.hexdigest()


class Cache:
    def __init__(self, directory: Path, selection: Selection) -> None:
        self.directory = directory
        settings = json.dumps([_build_fingerprint(), *dataclasses.astuple(selection)])
        self.file = directory / f"check-{hashlib.blake2b(settings.encode(), digest_size=8).hexdigest()}.json"
        self.files: dict[str, list] = {}
        self.results: dict[str, list] = {}
        self._dirty = False
        try:
            with open(self.file, "rb") as handle:
                data = json.load(handle)
            files, results = dict(data["files"]), dict(data["results"])
            if all(isinstance(v, list) and len(v) == 2 for v in files.values()) and all(
                isinstance(v, list) and len(v) == 3 for v in results.values()
            ):
                self.files, self.results = files, results
        except (OSError, ValueError, KeyError, TypeError):
            pass  # missing, unreadable or malformed: start empty, the next save replaces it

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
        dependencies = [_dependency(other) for other in result.dependencies]
        if None in dependencies:
            return  # a file it depends on vanished meanwhile: nothing to validate a reuse against
        self.results[digest + context] = [rows, error, dependencies]
        self._remember(os.path.abspath(path), stamp, digest)

    def save(self) -> None:
        if not self._dirty:
            return
        live = {entry[1] for entry in self.files.values()}
        data = {"files": self.files, "results": {d: r for d, r in self.results.items() if d[:_DIGEST_LENGTH] in live}}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            _write_markers(self.directory)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.directory)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(data, handle, separators=(",", ":"))
                os.replace(tmp, self.file)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass  # a read-only checkout still gets its results, just not cached
        self._dirty = False

    def _remember(self, key: str, stamp: Stamp, digest: str) -> None:
        racy = time.time_ns() - stamp[0] < _RACY_NS
        self.files[key] = [None if racy else list(stamp), digest]
        self._dirty = True

    def _result(self, path: str, digest: str, context: str) -> FileResult | None:
        cached = self.results.get(digest + context)
        if cached is None:
            return None
        rows, error, dependencies = cached
        if any(_dependency(other) != [other, digest_of_dependency] for other, digest_of_dependency in dependencies):
            return None  # a helper it summarised changed
        if error is not None:
            return FileResult(path, error=f"{path}: {error}")
        return FileResult(path, [_finding(path, row) for row in rows])


def reach_key(reaches: Mapping[int, Reach] | None) -> str:
    """A short, stable key for what the project index knows of one file's functions ("" for nothing)."""
    if not reaches:
        return ""
    rows = sorted([line, r.context, [dataclasses.astuple(s) for s in r.steps]] for line, r in reaches.items())
    return ":" + hashlib.blake2b(json.dumps(rows).encode(), digest_size=8).hexdigest()


def _dependency(path: str) -> list[str] | None:
    """(path, content digest) of a file whose functions a result used; None if it cannot be read."""
    try:
        with open(path, "rb") as handle:
            return [path, digest_of(handle.read())]
    except OSError:
        return None


def _to_json(value: object) -> object:
    if isinstance(value, tuple):  # reached_by: its steps
        return [dataclasses.astuple(step) for step in value]
    return value


def _finding(path: str, row: list) -> Finding:
    values = dict(zip(_FIELDS, row, strict=True))
    values["reached_by"] = tuple(Step(*step) for step in values["reached_by"])
    return Finding(path, **values)


def _write_markers(directory: Path) -> None:
    """Like ruff's cache: never committed, skipped by backup tools."""
    for name, text in (
        (".gitignore", "# Automatically created by flux-alias-lint.\n*\n"),
        ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n"),
    ):
        marker = directory / name
        if not marker.exists():
            marker.write_text(text)
