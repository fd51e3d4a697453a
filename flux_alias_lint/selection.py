"""Which rule codes a run reports (and the syntax it accepts). Its own module so the CLI can build one without importing libcst."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .rules import UNCHECKED

# What `unreached` (config and --unreached) may say of findings nothing is known to rescale.
UNREACHED_MODES = ("warn", "error", "ignore")
DEFAULT_UNREACHED = "warn"


@dataclasses.dataclass(frozen=True)
class Selection:
    """Which codes are reported: prefixes, as in ruff (`FAL`, `FAL00`, `FAL001`); ignore wins."""

    select: tuple[str, ...] = ("FAL",)
    ignore: tuple[str, ...] = ()
    # The oldest Python the checked project supports (`target-version`, `requires-python`). Where it
    # is newer than the running interpreter, syntax only it allows (PEP 701 f-strings) is parsed by
    # libcst instead of being a syntax error. Part of the settings, so the cache keys on it too.
    target_version: tuple[int, int] | None = None
    # Findings nothing is known to rescale: warnings ("warn"), errors, or hidden and left unfixed
    # ("ignore"); see `rules._base.severity`.
    unreached: str = DEFAULT_UNREACHED

    def enabled(self, code: str) -> bool:
        return any(code.startswith(p) for p in self.select) and not any(code.startswith(p) for p in self.ignore)


DEFAULT_SELECTION = Selection()


@dataclasses.dataclass(frozen=True)
class Layer:
    """One source of selectors: a config file or the command line. `select=None`: not given."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


def resolve(codes: Sequence[str], layers: Sequence[Layer], extra_ignore: Sequence[str] = ()) -> Selection:
    """The enabled codes after applying `layers` in order, as ruff resolves its rule selection.

    A layer that gives `select` starts over from it (so `--select X` beats a config's `ignore = [X]`);
    `extend-select` adds and `ignore` removes. Within a layer the more specific selector wins, and
    on a tie `ignore` does. `extra_ignore` (per-file ignores) is applied last. `UNCHECKED` stays on
    unless some ignore names it exactly.
    """
    enabled = set(codes)
    for layer in layers:
        updates: dict[str, bool] = {}
        chosen = [*(layer.select or ()), *layer.extend_select]
        for length in sorted({len(s) for s in (*chosen, *layer.ignore)}):
            for selector in chosen:
                if len(selector) == length:
                    updates.update((code, True) for code in codes if code.startswith(selector))
            for selector in layer.ignore:
                if len(selector) == length:
                    updates.update((code, False) for code in codes if code.startswith(selector))
        if layer.select is not None:
            enabled = set()
        enabled = (enabled | {c for c, on in updates.items() if on}) - {c for c, on in updates.items() if not on}
    enabled -= {code for code in codes if any(code.startswith(p) for p in extra_ignore)}
    if UNCHECKED not in (*extra_ignore, *(p for layer in layers for p in layer.ignore)):
        enabled.add(UNCHECKED)
    return Selection(tuple(sorted(enabled)))
