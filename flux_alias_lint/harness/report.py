"""Find every tensor in a loss function's report, and name it by its path, e.g. ``report["loss"][0]``.

Paths are kept as tuples of steps and rendered only when shown: the guard walks every
report on every call, and building strings for tensors that turn out fine would dominate
its cost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import Any

from ._deps import require_torch

torch = require_torch()
_Tensor = torch.Tensor
_ATOMS = (str, bytes, int, float, bool, type(None))

Step = tuple[str, Any]  # ("[]", key or index) or (".", attribute name)
Path = tuple[Step, ...]


def report_tensors(report: Any) -> list[tuple[Path, Any]]:
    """``(path, tensor)`` for each tensor in dicts, lists, tuples, namedtuples and dataclasses.

    A numpy array is given as a tensor over its memory (``loss.detach().numpy()`` is the loss's memory
    on a CPU), so a change to either shows.
    """
    found: list[tuple[Path, Any]] = []
    _collect(report, (), found, set())
    return found


def paths_to(report: Any, targets: set[int]) -> list[Path]:
    """Where in ``report`` the objects whose ``id()`` is in ``targets`` are (the same containers as above)."""
    found: list[Path] = []
    pending: list[tuple[Any, Path]] = [(report, ())]
    seen: set[int] = set()
    while pending:
        value, path = pending.pop()
        if id(value) in targets:
            found.append(path)
        if isinstance(value, _Tensor) or type(value) in _ATOMS or id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, Mapping):
            pending.extend((item, (*path, ("[]", key))) for key, item in value.items())
        elif isinstance(value, tuple) and hasattr(value, "_fields"):
            pending.extend((item, (*path, (".", f))) for f, item in zip(value._fields, value, strict=True))
        elif isinstance(value, (list, tuple)):
            pending.extend((item, (*path, ("[]", i))) for i, item in enumerate(value))
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            pending.extend((getattr(value, f.name), (*path, (".", f.name))) for f in dataclasses.fields(value))
    return found


def iter_report_tensors(report: Any) -> Iterator[tuple[str, Any]]:
    """As ``report_tensors``, with rendered paths."""
    for path, tensor in report_tensors(report):
        yield render_path(path), tensor


def render_path(path: Path, root: str = "report") -> str:
    return root + "".join(f"[{_render_key(value)}]" if kind == "[]" else f".{value}" for kind, value in path)


def _render_key(key: Any) -> str:
    # Double quotes, as the linter and the assertion messages print paths.
    return json.dumps(key, ensure_ascii=False) if isinstance(key, str) else repr(key)


def _collect(value: Any, path: Path, found: list[tuple[Path, Any]], seen: set[int]) -> None:
    cls = type(value)
    if cls is _Tensor or isinstance(value, _Tensor):
        found.append((path, value))
        return
    if cls in _ATOMS or id(value) in seen:  # ``seen``: a report that contains itself
        return
    seen.add(id(value))
    # Exact types first: ``isinstance`` against the ``Mapping`` ABC is slow.
    if cls is dict or (cls is not tuple and cls is not list and isinstance(value, Mapping)):
        for key, item in value.items():
            _collect(item, (*path, ("[]", key)), found, seen)
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        for field, item in zip(value._fields, value, strict=True):
            _collect(item, (*path, (".", field)), found, seen)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _collect(item, (*path, ("[]", index)), found, seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _collect(getattr(value, field.name), (*path, (".", field.name)), found, seen)
    elif cls.__name__ == "ndarray" and cls.__module__ == "numpy":
        with contextlib.suppress(TypeError):  # object or other dtypes torch cannot view
            found.append((path, torch.from_numpy(value)))
