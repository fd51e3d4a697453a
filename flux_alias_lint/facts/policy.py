"""How far the interpreters follow code: the bounds both must agree on, so that the triage keeps
everything the analysis could find."""

from __future__ import annotations

# Which calls are summarised: a def nested in the function (always), else, while fewer than
# `SUMMARY_DEPTH` summaries are open, a module-level function of the file or of the project module it
# is imported from, or a method of `self`, if it is not async and spans fewer than `SUMMARY_LINES`
# lines (longer ones are training loops, not helpers).
SUMMARY_DEPTH = 2
SUMMARY_LINES = 80


def summarisable(first_line: int, last_line: int, is_async: bool) -> bool:
    """Whether a def spanning these lines is summarised where it is called (see `SUMMARY_LINES`)."""
    return not is_async and last_line - first_line < SUMMARY_LINES
