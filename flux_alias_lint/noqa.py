"""`# noqa` suppressions, as in flake8 and ruff.

On a line: `# noqa` or `# noqa: FAL001, FAL003`. For the whole file, anywhere in it:
`# flux-alias-lint: noqa` (optionally `: FAL001`), or `# ruff: noqa: FAL001` naming our codes. A
blanket `# ruff: noqa` or `# flake8: noqa` silences those tools' style checks in a generated or
vendored file; it does not hide a report that Megatron rescales (NeMo has such files with real ones).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable

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


def comment_lines(text: str) -> set[int]:
    """The lines whose end can take a comment: not inside a string, not continued by a backslash."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return set()
    return {token.start[0] for token in tokens if token.type in (tokenize.NEWLINE, tokenize.NL)}


def noqa_line(start: int, end: int, commentable: set[int]) -> int | None:
    """Where a `# noqa` for a finding on lines `start`..`end` goes: the first line if it can take a
    comment, else the last (`is_suppressed` reads both); None if neither can."""
    return next((line for line in (start, end) if line in commentable), None)


def with_noqa(line: str, codes: Iterable[str]) -> str:
    """`line` (without its line break) with `codes` added to its `# noqa: ...`, or a new one at its end."""
    match = _NOQA.search(line)
    if match is None:
        return line.rstrip(" \t") + "  # noqa: " + ", ".join(dict.fromkeys(codes))
    if match.group("codes") is None:
        return line  # a blanket noqa comment already silences everything
    old = re.split(r"[\s,]+", match.group("codes"))
    merged = ", ".join(dict.fromkeys([*old, *codes]))
    return f"{line[: match.start()]}# noqa: {merged}{line[match.end() :]}"


def add_noqa(text: str, findings: Iterable[tuple[int, int, str]]) -> tuple[str, int]:
    """`text` with a `# noqa: CODE` for each finding given as (first line, last line, code), and
    how many lines changed, as ruff's `--add-noqa` counts them."""
    commentable = comment_lines(text)
    wanted: dict[int, list[str]] = {}
    for start, end, code in findings:
        line = noqa_line(start, end, commentable)
        if line is not None:
            wanted.setdefault(line, []).append(code)
    parts = re.split(r"(\r\n|\r|\n)", text)  # line, break, line, break, ...: line N is parts[2 * (N - 1)]
    changed = 0
    for number, codes in wanted.items():
        index = 2 * (number - 1)
        updated = with_noqa(parts[index], codes)
        changed += updated != parts[index]
        parts[index] = updated
    return "".join(parts), changed
