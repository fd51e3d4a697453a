"""Skip, before libcst ever sees it, the code that provably cannot produce a finding.

libcst parses ~5k lines a second, CPython's `ast` ~300k: on a training repository, where a few
hundred lines out of half a million are loss functions, parsing everything with libcst is nearly
all of a cold run. The analysis stays the source of truth; this package only decides which *units*
it needs to see. A unit is a function defined at module or class level (in any block there): the
analysis runs each of those with an empty environment (closures get theirs from the enclosing
function, which is why nested functions are never units of their own), and the only module-level
context it reads is the module's own imports.

Three filters, each an over-approximation of the analysis:

1. `ast.parse` the file (CPython rejects it: return None, the caller analyses everything and
   reports the error exactly as before).
2. Per unit, its text must hold `return` or `lambda` and a way to make a dict: `{`, `[` (a
   subscript store, which the analysis turns into a dict when the owner held a number or None),
   or the name of a mapping constructor (`dict`, `OrderedDict`, `defaultdict`, an alias of one);
   and some `return` must have a shape that can fit (`_some_return_may_fit`).
3. Per surviving unit, a flow-insensitive pass over its `ast` mirroring the analysis (`_Flow`):
   can some `return` (or lambda body) be a 2- or 3-element sequence whose last element is a dict
   (containers), and can that report share storage with the first element at all (storage: the
   alias tokens the analysis could give each value, joined per name, passed on by the operations
   of the alias table in `facts.tensor_ops`)? Calls of the project's functions follow the analysis'
   own summary rules (`SUMMARY_DEPTH`, `SUMMARY_LINES`): what each def returns and which of its
   arguments it passes on or writes into, another module's read one def at a time, and only once
   the unit survives taking every imported helper to do anything.

For FAL005 (captures), a unit whose text holds an in-place write (`op=`, a method named like
`mul_`) and a capture (a detach or conversion, a returned report) is kept when some capture may
hold storage a later write changes: `_captures_and_writes` finds both with their places
(`_may_follow`: later, in a loop around both, never the other branch of an `if`), and
`_Flow.captured_may_be_written` asks the flow's storage, where a kept value holds a detach's or a
conversion's receiver only through that call's own result.

The units that survive and the module's imports are handed to libcst alone, each line with the
number it has in the file, so columns are unchanged and lines map back. A unit nested in a class
or block gets an `if 1:` line above it (the analysis treats both the same: an empty environment).
A lambda outside every def is a function to the analysis too: the simple statement holding it is
kept like a unit (in a compound statement's header, it cannot be cut out: the file goes whole).

Only CPython's verdict on a whole file is kept: what libcst alone would refuse (its parser's
limits, nesting over 10,000 levels) is reported only where libcst has to read it.

Its modules sit beside the analysis' (a drift shows in one diff): `reduce.py` (units, text gates,
lambdas, pieces), `returns.py` (report shapes), `flows.py` (`_Flow`'s statements and bindings, flags
and storage), `calls.py` (its transfers for calls), `summaries.py` (the project's functions),
`captures.py` (FAL005), with `values.py` (flags and tokens) and `syntax.py` (the `ast` shapes walked).
What builtins and container methods do, the report shapes and the summary bounds are read from
`facts/`, never spelled here: `calls.py` holds one transfer per `Gives` and `Updates` of a row.

When the analysis learns a new way to make, move or alias a value, `_Flow` must learn it too:
`tests/test_performance_equivalence.py` compares triage against the full analysis on the fixtures
and a generated corpus, and pins the analysis' expression handlers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .reduce import Reduced

# Triage on/off: tests switch it off to compare against the full analysis.
ENABLED = True


def reduce_source(
    text: str, reached: frozenset[int] = frozenset(), path: str = "", captures: bool = True
) -> list[Reduced] | None:
    """See `_reduce_source`. The runner asks first (to skip libcst when nothing is kept), then the
    analysis asks again: the answer is kept for that one second question."""
    if not ENABLED:
        return None
    key = (text, reached, path, captures)
    if _LAST[0] == key:  # `text` is the same object both times: compared by identity first, cheaply
        answer = _LAST[1]
        _LAST[:] = [None, None]  # the trees in it are not kept alive past the file
        return answer
    from .reduce import _reduce_source  # loaded once a file is triaged: a warm run triages none

    answer = _reduce_source(text, reached, path, captures)
    _LAST[:] = [key, answer]
    return answer


_LAST: list = [None, None]
