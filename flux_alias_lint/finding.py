"""The result of an analysis: one reported alias of the backprop tensor."""

from __future__ import annotations

import dataclasses
import re

from .index.reach import UNREACHED, Step

# A finding's severity, as its rule's verdict gives it (`rules/_base.py`).
ERROR = "error"
WARNING = "warning"


@dataclasses.dataclass(frozen=True, order=True)
class Finding:
    """One place where a loss function's report can share storage with its backprop tensor.

    Positions are 1-based lines and columns, the end exclusive, as in ruff's JSON output.
    """

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    message: str
    fixable: bool = True
    report_path: str = dataclasses.field(default="", compare=False)
    backprop: str = dataclasses.field(default="", compare=False)
    # The fix as two insertions: `fix_before` at (line, column), `fix_after` at (end_line, end_column).
    # Both empty when the finding is not fixable. Kept as text so SARIF can carry the exact edit.
    fix_before: str = dataclasses.field(default="", compare=False)
    fix_after: str = dataclasses.field(default="", compare=False)
    # Who rescales the loss: "megatron", "in-place-caller", "in-function" (FAL005: the write is in the
    # function) or "unreached" (see index/reach.py), and the steps from the function to the call that
    # rescales (empty when unreached).
    context: str = dataclasses.field(default=UNREACHED, compare=False)
    reached_by: tuple[Step, ...] = dataclasses.field(default=(), compare=False)
    # "error" or "warning" (its rule's verdict): only errors fail the run.
    severity: str = dataclasses.field(default=ERROR, compare=False)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


# What a terminal or a log viewer would act on rather than show: C0 and C1 controls but the tab (an
# escape sequence, a carriage return overwriting the line), the Unicode line separators and the
# bidirectional overrides (which reorder what a reader sees). A path or a quoted expression may hold any.
CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """`text` with each control character written as its Python escape (`\\x1b`, `\\n`)."""
    return CONTROL.sub(lambda match: match[0].encode("unicode_escape").decode("ascii"), text)
