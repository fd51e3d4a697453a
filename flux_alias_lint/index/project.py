"""The project-wide index: which functions Megatron's schedule (or an in-place caller) really calls.

A finding is only as convincing as the evidence that something rescales the loss it reports. The
index reads the whole project the checked files belong to (`files.project_root`), not only the
files handed over. A cheap byte-level gate (`gates.py`) picks the files that can hold evidence; only
those are parsed (`modules.py`), and the modules their names resolve into (`resolve.py`) on demand.
The evidence, each a `Step`, is one entry each of the table in `handoffs.py`: the schedule's
(`schedule.py`), what follows from a file's own evidence (`following.py`: patches, delegations, a
loss returned whole), and callers rescaling in place a loss they unpack or get whole (`in_place.py`).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable, Mapping, Sequence

from ..source import collections_paused, saved_text
from ..workers import die_with_parent
from .files import project_roots, python_files
from .following import FollowedEvidence
from .gates import gates
from .hosts import HostEvidence, hand_off_lines, hosted
from .in_place import InPlaceEvidence
from .modules import text_of
from .reach import Evidence, Reaches
from .schedule import ScheduleEvidence
from .texts import Asked

# Below this many files, forking workers for the index costs more than it saves.
_FORK_FILES = 256


# Each file's evidence, the files it parsed and the queries it asked of the rest; the answers found.
Collected = tuple[dict[str, Evidence], dict[str, set[str]], dict[str, set[Asked]], dict[Asked, list[str]]]


def collect_evidence(
    roots: Sequence[str],
    files: Mapping[str, Sequence[str]],
    jobs: int = 1,
    listing: Mapping[str, Sequence[str]] | None = None,
    answers: Mapping[Asked, list[str]] | None = None,
) -> Collected:
    """`ProjectIndex(roots, files)`'s `evidence`, `depends_on`, `searched` and the answers it found to
    queries not in `answers` (the known ones; `listing`: every file of each root). Each file's are its
    own (what it resolves against is read whatever else is collected), so `jobs` forked processes
    collect a share of the files each: the index is most of what a cold run does before checking any file."""
    count = sum(len(paths) for paths in files.values())
    collect = functools.partial(_collected, roots, listing=listing or {}, answers=answers or {})
    if jobs <= 1 or count < _FORK_FILES or sys.platform != "linux":
        return collect(files)
    shares = [{root: list(paths[k::jobs]) for root, paths in files.items()} for k in range(jobs)]
    evidence: dict[str, Evidence] = {}
    depends_on: dict[str, set[str]] = {}
    searched: dict[str, set[Asked]] = {}
    found: dict[Asked, list[str]] = {}
    import multiprocessing  # only when workers are started: a pre-commit run's few files need none

    with multiprocessing.get_context("fork").Pool(jobs, die_with_parent, (os.getpid(),)) as pool:
        for part in pool.map(collect, shares):
            for whole, share in zip((evidence, depends_on, searched, found), part, strict=True):
                whole.update(share)
    return evidence, depends_on, searched, found


def _collected(
    roots: Sequence[str],
    files: Mapping[str, Sequence[str]],
    listing: Mapping[str, Sequence[str]],
    answers: Mapping[Asked, list[str]],
) -> Collected:
    with collections_paused():
        index = ProjectIndex(roots, files, listing, answers)
        found = index.evidence, index.depends_on, index.searched, {key: index.answers[key] for key in index.asked}
        # Freed while the collector is off: it would walk all of the index's trees once more before.
        del index
    return found


def reaches_of_text(path: str, text: str, reached: Mapping[str, Reaches]) -> Reaches:
    """Who rescales the loss of each function of `text`, standing for the file at `path` (stdin, an
    editor's buffer): the project index's answer for that file (`reached`, from the files as saved,
    `check`'s), and where the text is not the saved file's, the evidence in the text itself on top
    (its lines as they are now)."""
    indexed = reached.get(os.path.realpath(path), {})
    if saved_text(path) == text:
        return indexed
    return {**indexed, **ProjectIndex.of_source(text, path).reached_by_path().get(path, {})}


class ProjectIndex(ScheduleEvidence, FollowedEvidence, InPlaceEvidence, HostEvidence):
    """Contexts of the functions in one or more projects, by (real path, def line).

    Each file's evidence is also kept apart (`evidence`, for the files the gate let through), with
    the other files parsed to resolve it (`depends_on`) and the queries it asked of the project's texts
    (`searched`): a later run re-derives only the files whose own text or whose dependencies changed,
    or whose queries an edited file now answers differently (`cache.project_reached`), and `merged` puts the
    pieces together exactly as one run over every file would."""

    def __init__(
        self,
        roots: Iterable[str],
        files: Mapping[str, Sequence[str]] | None = None,
        listing: Mapping[str, Sequence[str]] | None = None,
        answers: Mapping[Asked, list[str]] | None = None,
    ) -> None:
        super().__init__(sorted(set(roots)))
        self._know(listing or {}, answers or {})
        self._files = {root: list(files[root]) if files else list(python_files(root)) for root in self.roots}
        for root in self.roots:
            for path in self._files[root]:
                self._current = path
                self._collect(path)
        self._current = None

    @classmethod
    def for_paths(cls, paths: Iterable[str]) -> ProjectIndex:
        """The index of every project the files `paths` belong to."""
        return cls(project_roots(paths))

    @classmethod
    def of_source(cls, text: str, path: str = "<string>") -> ProjectIndex:
        """The index of one module on its own (stdin, the Python API): the evidence in its own text."""
        index = cls([])
        index._current = path
        index._collect(path, text.encode("utf-8", "surrogatepass"))
        index._current = None
        return index

    def _collect(self, path: str, data: bytes | None = None) -> None:
        if data is None:
            data = text_of(path)  # b"": unreadable, and so no evidence
        megatron, rescaling = gates(data)
        host = hosted(data)
        if not (megatron or rescaling or host):
            return
        self.evidence[path], self.depends_on[path], self.searched[path] = [], set(), set()
        module = self._module(path, data)
        if module is None:
            return
        in_functions: set[int] = set()  # the rescaling lines inside a function
        for scope, function in module.scoped:
            lines = range(function.lineno, (function.end_lineno or function.lineno) + 1)
            if any(line in lines for line in megatron):
                self._megatron_evidence(module, scope, function)
            if any(line in lines for line in rescaling):
                in_functions.update(line for line in rescaling if line in lines)
                self._in_place_evidence(module, scope, function)
        if rescaling - in_functions:  # a script's loop at module level (nanoGPT's train.py shape)
            self._in_place_evidence(module, [], module.tree)
        if megatron:
            self._megatron_evidence(module, [], module.tree)
            self._loss_reduction_evidence(module)
        if host:
            self._host_evidence(module, hand_off_lines(data))
        self._patch_evidence(path)
        self._delegated_evidence(path)
        self._entry_returned_evidence(path)
        self._returned_as_the_loss(path)
