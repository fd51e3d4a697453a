"""Where the nodes of a libcst module are: what libcst's `PositionProvider` says, ~5x faster.

`PositionProvider` runs through libcst's metadata machinery: a visit of the whole tree, then a
codegen that makes a frozen `CodeRange` (two `CodePosition`s) for every node. In a file full of
findings that was most of the run. Here the same codegen hooks (`before_codegen`, `after_codegen`,
`record_syntactic_position`, `add_token`) fill plain tuples instead.

The hooks are libcst internals, so the answer is checked: the codegen must end exactly where the
module's text ends (a token added without moving the position would not), else, or if the
internals are gone, the provider answers. `tests/test_positions.py` compares both on every fixture.

Both are positions in libcst's own rendering of the module, which is not always the text it
parsed: it drops a form feed at the start of a line and a whitespace-only line ending in a
backslash. Given that text, the spans are moved back onto it (checked against CPython's `ast`).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import re
from collections.abc import Iterator

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

try:
    from libcst._nodes.internal import CodegenState
except ImportError:  # pragma: no cover - a libcst without the hooks: the provider answers
    CodegenState = None

Point = tuple[int, int]  # (1-based line, 0-based column), as libcst's CodePosition
Span = tuple[Point, Point]


def node_spans(module: cst.Module, text: str | None = None) -> dict[cst.CSTNode, Span]:
    """Every node's syntactic span (whitespace it owns excluded), keyed by the node; in `text`
    (what `module` was parsed from) when given, else in libcst's rendering of the module."""
    if CodegenState is not None:
        state = _SpanState(default_indent=module.default_indent, default_newline=module.default_newline)
        module._codegen(state)
        rendered = "".join(state.tokens) + state.popped
        if (state.line, state.column) == _end_of(rendered):
            return state.spans if text is None or text == rendered else _moved(state.spans, rendered, text)
    ranges = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    spans = {node: ((r.start.line, r.start.column), (r.end.line, r.end.column)) for node, r in ranges.items()}
    return spans if text is None or text == module.code else _moved(spans, module.code, text)


def _moved(spans: dict[cst.CSTNode, Span], rendered: str, text: str) -> dict[cst.CSTNode, Span]:
    """`spans` in `rendered` moved onto `text`, which holds the same characters and some that libcst
    dropped (all whitespace, form feeds and backslashes: no token is among them). Unchanged if
    `rendered` is not such a subsequence of `text`: the fixer then refuses the file, as before."""
    at: list[int] = []  # offset in `text` of each character of `rendered`
    j = 0
    for char in rendered:
        j = text.find(char, j)
        if j < 0:
            return spans
        at.append(j)
        j += 1
    at.append(len(text))
    rendered_lines, text_lines = _line_starts(rendered), _line_starts(text)

    def point(offset: int) -> Point:
        line = bisect.bisect_right(text_lines, offset)
        return line, offset - text_lines[line - 1]

    moved = {}
    for node, ((start_line, start_column), (end_line, end_column)) in spans.items():
        start = rendered_lines[start_line - 1] + start_column
        end = rendered_lines[end_line - 1] + end_column
        # The end is exclusive: one past the last character, wherever that character moved.
        moved[node] = (point(at[start]), point(at[end - 1] + 1 if end > start else at[start]))
    return moved


def _line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]


def _end_of(text: str) -> Point:
    last = max(text.rfind("\n"), text.rfind("\r"))
    return text.count("\n") + text.count("\r") - text.count("\r\n") + 1, len(text) - last - 1


if CodegenState is not None:

    @dataclasses.dataclass
    class _SpanState(CodegenState):  # type: ignore[misc,valid-type]
        line: int = 1
        column: int = 0
        popped: str = ""
        starts: list[Point] = dataclasses.field(default_factory=list)
        spans: dict[cst.CSTNode, Span] = dataclasses.field(default_factory=dict)

        def add_indent_tokens(self) -> None:
            self.tokens.extend(self.indent_tokens)
            for token in self.indent_tokens:
                self._advance(token)

        def add_token(self, value: str) -> None:
            self.tokens.append(value)
            self._advance(value)

        def _advance(self, value: str) -> None:
            if "\n" in value or "\r" in value:
                lines, self.column = _end_of(value)
                self.line += lines - 1
            else:
                self.column += len(value)

        def pop_trailing_newline(self) -> None:
            if self.tokens:
                self.popped = self.tokens.pop()

        def before_codegen(self, node: cst.CSTNode) -> None:
            self.starts.append((self.line, self.column))

        def after_codegen(self, node: cst.CSTNode) -> None:
            start = self.starts.pop()
            if node not in self.spans:  # a syntactic span recorded inside wins
                self.spans[node] = (start, (self.line, self.column))

        @contextlib.contextmanager
        def record_syntactic_position(
            self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
        ) -> Iterator[None]:
            start = (self.line, self.column)
            try:
                yield
            finally:
                end = (self.line, self.column)
                if start_node is not None:
                    start = self.spans[start_node][0]
                if end_node is not None:
                    end = self.spans[end_node][1]
                self.spans[node] = (start, end)
