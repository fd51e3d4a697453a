"""Feedback for whole-repository runs, on stderr so stdout stays pure: a progress bar and a closing summary.

The bar is hand-written (a dozen lines) rather than a dependency: rich and tqdm would double what
`pip install flux-alias-lint` pulls in for one line of output.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TextIO, TypeVar

from .rules import UNCHECKED
from .runner import FileResult

T = TypeVar("T")

_REDRAW_EVERY = 0.1  # seconds: often enough to look alive, rarely enough to cost nothing


def progress_wanted(stream: TextIO) -> bool:
    """A terminal, and not CI (whose logs keep every carriage-return redraw)."""
    return stream.isatty() and not os.environ.get("CI")


def track(items: Iterable[T], total: int, stream: TextIO = sys.stderr) -> Iterator[T]:
    """Yield `items` unchanged, drawing `[=====>    ] done/total files  elapsed` as each one completes."""
    started = last = time.monotonic()
    drawn = False
    for done, item in enumerate(items, start=1):
        yield item
        now = time.monotonic()
        if not drawn or now - last >= _REDRAW_EVERY or done == total:
            _draw(stream, done, total, now - started)
            drawn, last = True, now
    if drawn:
        stream.write("\r\x1b[2K")  # erase the bar: what follows starts on a clean line
        stream.flush()


@contextlib.contextmanager
def phase(label: str, stream: TextIO = sys.stderr) -> Iterator[None]:
    """`label` on the bar's line while a step without per-file progress runs (the project index,
    most of a cold run on a large tree), erased after it."""
    stream.write(f"\r{label}")
    stream.flush()
    try:
        yield
    finally:
        stream.write("\r\x1b[2K")
        stream.flush()


def _draw(stream: TextIO, done: int, total: int, elapsed: float) -> None:
    label = f" {done}/{total} files  {elapsed:.1f}s"
    width = max(10, min(40, shutil.get_terminal_size().columns - len(label) - 3))
    filled = width * done // max(total, 1)
    bar = "=" * filled + (">" if filled < width else "") + " " * (width - filled - 1)
    stream.write(f"\r[{bar[:width]}]{label}")
    stream.flush()


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def run_summary(results: Sequence[FileResult], unchecked: int, elapsed: float, *, diff: bool) -> str:
    """What a `--fix`/`--diff` run did: files scanned, findings by rule, files changed, files not checked
    (`unchecked`: paths that do not exist and checker errors; FAL000 files are counted here) or not fixed."""
    found = collections.Counter(f.code for r in results for f in r.findings if f.code != UNCHECKED)
    found.update(code for r in results for code in r.fixed_codes)
    fixed = sum(len(r.fixed_codes) for r in results)
    changed = sum(r.changed for r in results)
    invalid = sum(any(f.code == UNCHECKED for f in r.findings) for r in results)
    not_fixed = sum(r.warning is not None for r in results)
    unchecked_results = sum(r.error is not None for r in results)
    by_rule = ", ".join(f"{code}: {count}" for code, count in sorted(found.items()))
    lines = [
        f"Scanned {_plural(len(results) - invalid - unchecked_results, 'file')} in {elapsed:.2f}s.",
        f"Findings: {sum(found.values())}" + (f" ({by_rule})" if by_rule else "") + ".",
        (f"Would fix {fixed}, changing " if diff else f"Fixed {fixed}, changed ") + f"{_plural(changed, 'file')}.",
    ]
    if unchecked + invalid:
        lines.append(f"Could not be checked: {_plural(unchecked + invalid, 'file')} (see above).")
    if not_fixed:
        lines.append(f"Not fixed: {_plural(not_fixed, 'file')} (see the warnings above).")
    return "".join(line + "\n" for line in lines)
