"""Where the nodes of a libcst module are: what libcst's `PositionProvider` says, ~5x faster.

`PositionProvider` runs through libcst's metadata machinery: a visit of the whole tree, then a
codegen that makes a frozen `CodeRange` (two `CodePosition`s) for every node. In a file full of
findings that was most of the run. Here the same codegen hooks (`before_codegen`, `after_codegen`,
`record_syntactic_position`, `add_token`) fill plain tuples instead.

The hooks are libcst internals, so the answer is checked: the codegen must end exactly where the
module's text ends (a token added without moving the position would not), else, or if the
internals are gone, the provider answers. `tests/test_positions.py` compares both on every fixture.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

try:
    from libcst._nodes.internal import CodegenState
except ImportError:  # pragma: no cover - a libcst without the hooks: the provider answers
    CodegenState = None

Point = tuple[int, int]  # (1-based line, 0-based column), as libcst's CodePosition
Span = tuple[Point, Point]


def node_spans(module: cst.Module) -> dict[cst.CSTNode, Span]:
    """Every node's syntactic span (whitespace it owns excluded), keyed by the node."""
    if CodegenState is not None:
        state = _SpanState(default_indent=module.default_indent, default_newline=module.default_newline)
        module._codegen(state)
        if (state.line, state.column) == _end_of("".join(state.tokens) + state.popped):
            return state.spans
    ranges = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    return {node: ((r.start.line, r.start.column), (r.end.line, r.end.column)) for node, r in ranges.items()}


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
