"""Worker processes die with the process that forked them.

A pool's worker that outlives its parent (killed by an editor, a CI timeout, `kill -9`) would go on
checking, and with `--fix` writing, whatever was queued, then print a `BrokenPipeError` traceback
when it hands its result to no one. On Linux the kernel ends it at once (PR_SET_PDEATHSIG, with
SIGTERM, which `runner.write_atomically` holds off until a write in progress is whole); elsewhere,
and for a parent gone before the worker asked, it looks before each file and each write.
"""

from __future__ import annotations

import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_parent: list[int] = []  # in a worker only: the pid of the process that forked it


def die_with_parent(parent: int) -> None:
    """A pool's `initializer`, given the parent's pid (taken before forking)."""
    _parent[:] = [parent]
    if sys.platform == "linux":
        try:
            import ctypes  # a worker's only: the parent never loads it

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (ImportError, OSError, AttributeError):
            pass  # no ctypes or no prctl: the checks below still stop it
    exit_if_orphaned()  # the parent may have died before the kernel was asked


def exit_if_orphaned() -> None:
    """In a worker whose parent has gone: leave now, silently (nobody reads what it would say)."""
    if _parent and os.getppid() != _parent[0]:
        os._exit(1)
