"""`# noqa` and `# noqa: FAL001, FAL003` suppressions, as in flake8 and ruff."""

from __future__ import annotations

import re

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)

# line number (1-based) → suppressed codes, or None when the comment names no codes (all)
Suppressions = dict[int, "frozenset[str] | None"]


def parse_suppressions(text: str) -> Suppressions:
    found: Suppressions = {}
    if "noqa" not in text.lower():
        return found
    for number, line in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        match = _NOQA.search(line)
        if match:
            codes = match.group("codes")
            found[number] = frozenset(c.upper() for c in re.split(r"[\s,]+", codes)) if codes else None
    return found


def is_suppressed(suppressions: Suppressions, code: str, lines: tuple[int, ...]) -> bool:
    """A finding is suppressed by a matching `# noqa` on its first or last line."""
    for line in lines:
        if line in suppressions:
            codes = suppressions[line]
            if codes is None or code in codes:
                return True
    return False
