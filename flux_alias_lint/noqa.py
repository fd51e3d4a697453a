"""`# noqa` suppressions, as in flake8 and ruff.

On a line: `# noqa` or `# noqa: FAL001, FAL003`. For the whole file, anywhere in it:
`# flux-alias-lint: noqa` (optionally `: FAL001`), or `# ruff: noqa: FAL001` naming our codes. A
blanket `# ruff: noqa` or `# flake8: noqa` silences those tools' style checks in a generated or
vendored file; it does not hide a report that Megatron rescales (NeMo has such files with real ones).
"""

from __future__ import annotations

import re

_CODES = r"(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*)"
_NOQA = re.compile(rf"#\s*noqa(?::\s*{_CODES})?", re.IGNORECASE)
_FILE_NOQA = re.compile(rf"#\s*flux-alias-lint\s*:\s*noqa(?::\s*{_CODES})?", re.IGNORECASE)
_RUFF_FILE_NOQA = re.compile(rf"#\s*ruff\s*:\s*noqa:\s*{_CODES}", re.IGNORECASE)  # only when it names codes

# line number (1-based; 0 for the whole file) → suppressed codes, or None when the comment names no codes (all)
Suppressions = dict[int, "frozenset[str] | None"]
FILE = 0


def _codes(match: re.Match[str]) -> frozenset[str] | None:
    codes = match.group("codes")
    return frozenset(c.upper() for c in re.split(r"[\s,]+", codes)) if codes else None


def parse_suppressions(text: str) -> Suppressions:
    found: Suppressions = {}
    if "noqa" not in text.lower():
        return found
    for number, line in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        exempt = _FILE_NOQA.search(line) or _RUFF_FILE_NOQA.search(line)
        if exempt:
            codes, before = _codes(exempt), found.get(FILE, frozenset())
            found[FILE] = None if codes is None or before is None else before | codes
            continue
        match = _NOQA.search(line)
        if match:
            found[number] = _codes(match)
    return found


def is_suppressed(suppressions: Suppressions, code: str, lines: tuple[int, ...]) -> bool:
    """A finding is suppressed by a matching `# noqa` on its first or last line, or for the whole file."""
    for line in (FILE, *lines):
        if line in suppressions:
            codes = suppressions[line]
            if codes is None or code in codes:
                return True
    return False
