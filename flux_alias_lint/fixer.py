"""Insert `.clone()` after each flagged expression, touching no other byte of the file."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

# Expressions that take an attribute suffix without parentheses.
_ATOMS = ("Name", "Attribute", "Call", "Subscript")


@dataclasses.dataclass(frozen=True)
class Edit:
    """Make the expression spanning [start, end) (character offsets) a copy."""

    start: int
    end: int
    atom: bool  # False: wrap in parentheses before adding the suffix
    detached: bool  # the value already went through a detach: `.clone()` is enough

    @property
    def suffix(self) -> str:
        return ".clone()" if self.detached else ".detach().clone()"

    @property
    def before(self) -> str:
        """Text inserted at `start`."""
        return "" if self.atom else "("

    @property
    def after(self) -> str:
        """Text inserted at `end`."""
        return self.suffix if self.atom else ")" + self.suffix


def line_offsets(text: str) -> list[int]:
    """Offset of the start of each line, splitting only where the Python tokenizer does."""
    return [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]


def make_edit(offsets: list[int], start: tuple[int, int], end: tuple[int, int], node_type: str, detached: bool) -> Edit:
    """From 1-based line / 0-based column positions."""
    return Edit(offsets[start[0] - 1] + start[1], offsets[end[0] - 1] + end[1], node_type in _ATOMS, detached)


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """Apply non-overlapping edits; an edit nested in another is left for the next run."""
    merged: dict[tuple[int, int], Edit] = {}
    for edit in edits:
        key = (edit.start, edit.end)
        old = merged.get(key)
        # The same expression flagged twice: it needs the detach if either finding says so.
        merged[key] = edit if old is None else dataclasses.replace(edit, detached=old.detached and edit.detached)
    out, position = [], 0
    for edit in sorted(merged.values(), key=lambda e: (e.start, -e.end)):
        if edit.start < position:
            continue
        out.append(text[position : edit.start])
        out.append(edit.before + text[edit.start : edit.end] + edit.after)
        position = edit.end
    out.append(text[position:])
    return "".join(out)
