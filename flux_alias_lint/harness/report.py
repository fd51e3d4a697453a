"""Walk a loss function's report and name every tensor in it by its path, e.g. ``report["loss"][0]``."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Iterator

from ._deps import require_torch

torch = require_torch()
_Tensor = torch.Tensor


def iter_report_tensors(report: Any, path: str = "report") -> Iterator[tuple[str, Any]]:
    """Yield ``(path, tensor)`` for each tensor in dicts, lists, tuples, namedtuples and dataclasses."""
    yield from _walk(report, path, set())


def _walk(value: Any, path: str, seen: set[int]) -> Iterator[tuple[str, Any]]:
    # The common report is a tensor or a small dict of tuples: test those first.
    if isinstance(value, _Tensor):
        yield path, value
        return
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return
    if id(value) in seen:  # a report that contains itself
        return
    seen.add(id(value))
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk(item, f"{path}[{_render_key(key)}]", seen)
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        for field, item in zip(value._fields, value):
            yield from _walk(item, f"{path}.{field}", seen)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]", seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _walk(getattr(value, field.name), f"{path}.{field.name}", seen)


def _render_key(key: Any) -> str:
    # Double quotes, as the linter and the assertion messages print paths.
    return json.dumps(key, ensure_ascii=False) if isinstance(key, str) else repr(key)
