"""Check many files: answer what the cache can, spread the rest over worker processes, yield in order.

Results come back in the order of `paths` whatever `jobs` is, so output never depends on scheduling.
"""

from __future__ import annotations

import functools
import gc
import os
import stat
import sys
from collections.abc import Iterator, Mapping, Sequence

from .cache import Cache, Stamp, digest_of, reach_key, stamp_of
from .index.files import real_path
from .index.reach import Reaches
from .runner import DEFAULT_LIMITS, FileResult, Limits, Mode, process_file, unchecked
from .selection import Selection
from .source import SourceError, collections_paused, read_regular
from .workers import die_with_parent, exit_if_orphaned

# Below this much source, forking workers costs more than it saves (a fork plus a libcst import
# per worker is ~0.3 s; checking 256 kB in-process takes about as long).
_IN_PROCESS_BYTES = 256 * 1024

Checked = tuple[FileResult, Stamp | None, str | None]


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def check_files(
    paths: Sequence[str],
    selection: Selection,
    mode: Mode,
    *,
    jobs: int | None = None,
    cache: Cache | None = None,
    reached: Mapping[str, Reaches] | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Iterator[FileResult]:
    """One `FileResult` per path, in order. With `--fix` or `--diff` the cache answers (and learns)
    only the files without a fixable finding: for them fixing is checking.

    `reached`: `ProjectIndex.reached_by_path()`, the functions of each file (by real path) that a
    rescaling caller is known to call; None: each file's own text is its evidence."""
    yield from _check_files(paths, selection, mode, jobs, cache, reached, limits)


def _check_files(
    paths: Sequence[str],
    selection: Selection,
    mode: Mode,
    jobs: int | None,
    cache: Cache | None,
    reached: Mapping[str, Reaches] | None,
    limits: Limits,
) -> Iterator[FileResult]:
    done: list[FileResult | None] = [None] * len(paths)
    todo: list[int] = []
    sizes: dict[int, int] = {}
    for index, path in enumerate(paths):
        try:
            st = os.stat(path)
        except OSError:
            todo.append(index)  # process_file reports why
            continue
        sizes[index] = st.st_size
        # Only a regular file within the limit is looked up (lookup may read it); _check_one says why not.
        regular = stat.S_ISREG(st.st_mode) and st.st_size <= limits.max_bytes
        hit = cache.lookup(path, st, _reach_key(reached, path)) if cache is not None and regular else None
        if hit is None or not _as_checked(hit, mode):
            todo.append(index)
        else:
            done[index] = hit
    work = _run(
        [paths[i] for i in todo],
        [sizes.get(i, 0) for i in todo],
        selection,
        mode,
        jobs or default_jobs(),
        reached,
        limits,
    )
    pending = iter(todo)
    next_todo = next(pending, None)
    for index in range(len(paths)):
        if index == next_todo:
            result, stamp, digest = next(work)
            if cache is not None and stamp is not None and digest is not None and _as_checked(result, mode):
                cache.store(paths[index], stamp, digest, result, _reach_key(reached, paths[index]))
            done[index] = result
            next_todo = next(pending, None)
        result = done[index]
        assert result is not None
        yield result
    if cache is not None:
        cache.save()


def _as_checked(result: FileResult, mode: Mode) -> bool:
    """Whether `result` is what `check` reports for the file: always in check mode; with `--fix` or
    `--diff`, when nothing was or could be fixed (no edit made or refused, no fixable finding)."""
    return mode is Mode.CHECK or not (result.changed or result.warning or any(f.fixable for f in result.findings))


def _reach_key(reached: Mapping[str, Reaches] | None, path: str) -> str:
    return reach_key(reached.get(real_path(path))) if reached else ""


def _run(
    paths: list[str],
    sizes: list[int],
    selection: Selection,
    mode: Mode,
    jobs: int,
    reached: Mapping[str, Reaches] | None,
    limits: Limits,
) -> Iterator[Checked]:
    """Checked files in the order of `paths`."""
    task = functools.partial(_check_one, selection=selection, mode=mode, reached=reached, limits=limits)
    workers = min(jobs, len(paths))
    if workers <= 1 or sum(sizes) < _IN_PROCESS_BYTES:
        try:
            yield from map(task, paths)
        finally:
            gc.unfreeze()  # what `_check_one` set aside is the collector's again once the files are done
        return
    # Largest files first so that no worker is left with a big one at the end; reordered below.
    order = sorted(range(len(paths)), key=lambda i: -sizes[i])
    chunksize = max(1, min(16, len(paths) // (workers * 16)))
    import multiprocessing  # only when workers are started: a warm run starts none

    # fork: workers start in milliseconds and inherit the imported modules (elsewhere: the default).
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else None)
    if context.get_start_method() == "fork":
        # libcst, imported once here rather than by each worker (~0.2 s each): in a tree this large
        # some file is always analysed.
        from . import lint  # noqa: F401
    with context.Pool(workers, die_with_parent, (os.getpid(),)) as pool:
        ready: dict[int, Checked] = {}
        position = 0
        for index, checked in pool.imap_unordered(
            functools.partial(_indexed, task), [(i, paths[i]) for i in order], chunksize
        ):
            ready[index] = checked
            while position in ready:
                yield ready.pop(position)
                position += 1


def _indexed(task: functools.partial[Checked], item: tuple[int, str]) -> tuple[int, Checked]:
    return item[0], task(item[1])


def _check_one(
    path: str, selection: Selection, mode: Mode, reached: Mapping[str, Reaches] | None, limits: Limits
) -> Checked:
    """Read once, a regular file only (the stat is taken as it is opened: a change after it only
    makes the stamp stale, never wrong). What survives the file is set aside from the collector: for
    good in a worker, until `_run` is done in this process."""
    exit_if_orphaned()
    reaches = reached.get(real_path(path), {}) if reached is not None else None
    try:
        data, st = read_regular(path, limits.max_bytes)
    except SourceError as exc:
        return unchecked(exc, selection), None, None
    with collections_paused(freeze_survivors=True):
        result = process_file(path, selection, mode, data, reaches, limits)
    return result, (stamp_of(st) if result.cacheable else None), digest_of(data)
