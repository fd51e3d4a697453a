"""Insert `.clone()` after each flagged expression, touching no other byte of the file."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterable, Sequence

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


def select_edits(edits: Iterable[Edit]) -> list[Edit]:
    """The edits to apply now, sorted and non-overlapping; an edit nested in another waits for the next run."""
    merged: dict[tuple[int, int], Edit] = {}
    for edit in edits:
        key = (edit.start, edit.end)
        old = merged.get(key)
        # The same expression flagged twice: it needs the detach if either finding says so.
        merged[key] = edit if old is None else dataclasses.replace(edit, detached=old.detached and edit.detached)
    chosen: list[Edit] = []
    for edit in sorted(merged.values(), key=lambda e: (e.start, -e.end)):
        if not chosen or edit.start >= chosen[-1].end:
            chosen.append(edit)
    return chosen


def apply_edits(text: str, edits: list[Edit]) -> str:
    """Apply edits as `select_edits` returns them: sorted and non-overlapping."""
    out, position = [], 0
    for edit in edits:
        out.append(text[position : edit.start])
        out.append(edit.before + text[edit.start : edit.end] + edit.after)
        position = edit.end
    out.append(text[position:])
    return "".join(out)


_INSERTIONS = frozenset({"", "(", ".clone()", ".detach().clone()", ").clone()", ").detach().clone()"})


def unexplained_change(original: str, fixed: str, edits: Sequence[Edit]) -> str | None:
    """Why `fixed` is not `original` plus exactly the insertions `edits` record, or None if it is.

    Independent of `apply_edits`: it removes each recorded insertion from `fixed` and compares
    what is left with `original`, and checks each wrapped span is a whole expression on its own.
    """
    kept, position, shift = [], 0, 0
    for edit in edits:
        body = original[edit.start : edit.end]
        try:
            ast.parse(f"(\n{body}\n)", mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return f"the span at offset {edit.start} ({body[:40]!r}) is not a whole expression"
        for offset, inserted in ((edit.start, edit.before), (edit.end, edit.after)):
            at = offset + shift
            if inserted not in _INSERTIONS or fixed[at : at + len(inserted)] != inserted:
                return f"no {inserted!r} where the fix at offset {offset} should have put it"
            kept.append(fixed[position:at])
            position, shift = at + len(inserted), shift + len(inserted)
    kept.append(fixed[position:])
    if "".join(kept) != original:
        return "removing the inserted copies does not give back the original"
    return None
