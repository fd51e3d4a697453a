"""Watch the tensors code keeps (FAL005's captures) and say which changed after they were kept.

A capture is a tensor stored where it outlives the statement storing it: in a container or on an
object (``HISTORY.append(loss.detach())``, ``metrics["k"] = loss.detach()``) or in the report. A
``CaptureWatch`` copies each kept tensor's values when it first sees it kept, and ``moved()`` names
those whose values are no longer what they were then. It is fed in one of two ways:

- ``keep(where, tensor)``: a caller that knows the captured value as it is made (``verify`` marks the
  flagged entry, so the copy is the value at capture, wherever the code puts it);
- ``tracing(filename)``: ``sys.settrace`` over the frames of one file, looking into the containers its
  module globals and frame locals hold (dicts, lists, tuples, ``SimpleNamespace``, and the attributes of an
  object whose class has a method in that file: ``self.last``), two levels deep,
  at every line and return. A line event comes before the line runs, so a value stored by one line is
  copied before the next can change it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import types
from collections.abc import Hashable, Iterator
from typing import Any

from ._deps import require_torch
from .assertions import same_values, scale_factor
from .report import report_tensors

torch = require_torch()

_DEPTH = 2  # containers inside containers looked into: `STATE.log[0]`, `METRICS["k"][1]`


class CaptureWatch:
    def __init__(self) -> None:
        # identity of a kept slot -> (where it is shown, the tensor kept there, its values then)
        self._kept: dict[Hashable, tuple[str, Any, Any]] = {}
        self._holders: list[object] = []  # keeps watched containers alive, so their ids stay theirs
        self._replaced: dict[str, str] = {}  # where → how a tensor moved while kept there, before another replaced it
        self._file = ""  # the file traced: objects of its classes are containers too

    def keep(self, where: str, value: Any) -> None:
        """``value`` is captured now, shown as ``where``: each tensor it is or holds (``list(loss.detach())``)
        has its values copied once."""
        for _path, tensor in report_tensors(value):
            if ("kept", id(tensor)) not in self._kept:
                self._kept[("kept", id(tensor))] = (where, tensor, _copy(tensor))

    @contextlib.contextmanager
    def tracing(self, filename: str) -> Iterator[CaptureWatch]:
        """Copy every tensor held in a container by the code of ``filename`` while the block runs."""

        def trace(frame: types.FrameType, event: str, arg: object) -> Any:
            if frame.f_code.co_filename != filename:
                return None
            for name, value in [*frame.f_globals.items(), *frame.f_locals.items()]:
                self._visit(name, value, _DEPTH)
            return trace

        self._file = filename
        previous = sys.gettrace()
        sys.settrace(trace)
        try:
            yield self
        finally:
            sys.settrace(previous)

    def _visit(self, path: str, value: object, depth: int) -> None:
        if isinstance(value, dict):
            entries = [(f"{path}{_key(k)}", k, v) for k, v in value.items() if not str(k).startswith("__")]
        elif isinstance(value, (list, tuple)):
            entries = [(f"{path}[{i}]", i, v) for i, v in enumerate(value)]
        elif isinstance(value, types.SimpleNamespace) or (self._file and _defined_in(type(value), self._file)):
            entries = [(f"{path}.{k}", k, v) for k, v in vars(value).items()]
        else:
            return
        for where, key, item in entries:
            if torch.is_tensor(item):
                known = self._kept.get((id(value), key))
                if known is None or known[1] is not item:  # a slot given another tensor: kept anew
                    if known is not None:  # a loop's next capture: the one it replaces counts if it moved
                        self._retire(*known)
                    self._holders.append(value)
                    self._kept[(id(value), key)] = (where, item, _copy(item))
            elif depth > 0:
                self._visit(where, item, depth - 1)

    def _retire(self, where: str, tensor: Any, before: Any) -> None:
        if where not in self._replaced and not same_values(before, tensor.detach()):
            self._replaced[where] = describe_move(before, tensor.detach())

    def moved(self) -> dict[str, str]:
        """Where → ``before -> after (factor)`` for each kept tensor whose values changed since it was kept
        (the first such tensor of each ``where``; one replaced there later counts with its values then)."""
        found = dict(self._replaced)
        with torch.no_grad():
            for where, tensor, before in self._kept.values():
                if where not in found and not same_values(before, tensor.detach()):
                    found[where] = describe_move(before, tensor.detach())
        return found


@functools.cache
def _defined_in(cls: type, filename: str) -> bool:
    """Whether a class (or one it derives from) has a method written in ``filename``: its objects' attributes are
    where that file's code keeps things (``self.last = loss.detach()``)."""
    return any(
        isinstance(f, types.FunctionType) and f.__code__.co_filename == filename
        for c in cls.__mro__
        for f in vars(c).values()
    )


def describe_move(before: Any, after: Any) -> str:
    """``5 -> 10 (×2.00)``: the values of a tensor at capture and now, and the factor between them."""
    factor = scale_factor(before, after) if before.shape == after.shape else "(reshaped)"
    return f"{_values(before)} -> {_values(after)} ({factor})"


def _values(tensor: Any) -> str:
    values = tensor.flatten().tolist()
    text = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in values[:4])
    text += ", …" if len(values) > 4 else ""
    return text if tensor.dim() == 0 else f"[{text}]"


def _copy(tensor: Any) -> Any:
    return tensor.detach().clone()


def _key(key: object) -> str:
    """A path step spelled as the linter spells it: ``["lm loss"]``, ``[0]``."""
    return f"[{json.dumps(key, ensure_ascii=False)}]" if isinstance(key, str) else f"[{key!r}]"
