"""What the index asks of a file's text without parsing it, and the answers a later run compares.

A query is `(kind, word)`: `holds`, the text holds the word (`"training_step("`, the callers of a
function); `derives`, the text may define a subclass of the class the word names (`may_derive`);
`marks`, the text names the word where a patch may install a function (`.word =`, `"pkg.mod.word"`). A file's evidence depends on the files it parsed and, for every other file, only
on the answers to its queries: an edit elsewhere re-derives it only when the edited file's answer to
one of them changes (`cache.project_reached`). Bytes only: the cache asks the edited files without
loading the index.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

HOLDS = "holds"
MARKS = "marks"
DERIVES = "derives"
KINDS = (HOLDS, MARKS, DERIVES)

# One root's query: (root, kind, word); the files of the root answering yes are kept in its file order.
Asked = tuple[str, str, str]

_AFTER_MARK = re.compile(rb"""['"]|\s*=[^=]""")


def answer(kind: str, word: str, text: bytes) -> bool:
    """Whether `text` answers the query `(kind, word)` yes."""
    needle = word.encode()
    if kind == HOLDS:
        return needle in text
    if kind == DERIVES:
        return may_derive(text, needle)
    return next(marks(text, needle), None) is not None


def may_derive(text: bytes, name: bytes) -> bool:
    """Whether `text` may define a class deriving from the class `name`: a `class` statement naming it among
    its bases (`class X(Base)`, `class X(pkg.Base, Mixin)`), or an import renaming it (`Base as B`), after
    which a base names it otherwise. Only these files are parsed in the search for a class's subclasses
    (most of those mentioning a class only import or call it). A base bound to another name by an
    assignment (`B = Base`) is not seen."""
    if name not in text:
        return False
    word = re.escape(name)
    return re.search(rb"\bclass\s+\w+\s*\([^)]*\b" + word + rb"\b", text) is not None or (
        re.search(rb"\b" + word + rb"\s+as\s", text) is not None
    )


def marked_lines(text: bytes, name: bytes) -> frozenset[int] | None:
    """The lines of `marks`; None when the text ends lines with a bare `\r` too (counting `\n`
    would not give Python's line numbers)."""
    if b"\r" in text and b"\r" in text.replace(b"\r\n", b""):
        return None
    return frozenset(text.count(b"\n", 0, at) + 1 for at in marks(text, name))


def marks(text: bytes, name: bytes) -> Iterator[int]:
    """Where `text` names `name` as a patch may install it: an attribute assigned (`.name =`) or a
    string (`"pkg.mod.name"`, `'name'`). Found with `bytes.find`: a pattern starting with a
    character class would try every position of the text."""
    at = text.find(name)
    while at != -1:
        if at and text[at - 1] in b".'\"" and _AFTER_MARK.match(text, at + len(name)):
            yield at
        at = text.find(name, at + 1)
