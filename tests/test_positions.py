"""`positions.node_spans` must say what libcst's `PositionProvider` says, for every node."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from flux_alias_lint import positions

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(ROOT.glob("fixtures/**/*.py")) + sorted((ROOT / "flux_alias_lint").glob("*.py"))
ODD = {
    "crlf": "def f(x):\r\n    return x, {'a': (x\r\n        .detach())}\r\n",
    "cr": "def f(x):\r    return x, {'a': x.data}\r",
    "tabs_and_continuation": "def f(x):\n\tr = x + \\\n\t\t1\n\treturn x, {'a': r}\n",
    "no_final_newline": "x = (1,\n 2)",
    "strings": 'def f(x):\n    s = """a\nb"""\n    return x, {s: f"{x!r:>{3}}"}\n',
}


def _provider(module: cst.Module) -> dict[cst.CSTNode, positions.Span]:
    ranges = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    return {node: ((r.start.line, r.start.column), (r.end.line, r.end.column)) for node, r in ranges.items()}


@pytest.mark.parametrize(
    "text",
    [p.read_text(encoding="utf-8", errors="replace") for p in SOURCES] + list(ODD.values()),
    ids=[str(p.relative_to(ROOT)) for p in SOURCES] + list(ODD),
)
def test_spans_are_the_providers(text: str) -> None:
    module = cst.parse_module(text)
    assert positions.node_spans(module) == _provider(module)


def test_a_codegen_that_loses_its_place_falls_back_to_the_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """If libcst ever adds text without the hooks moving the position, the end check catches it."""
    module = cst.parse_module("def f(x):\n    return x, {'a': x.detach()}\n")
    monkeypatch.setattr(positions._SpanState, "_advance", lambda self, value: None)
    assert positions.node_spans(module) == _provider(module)


# Text libcst does not render back as it read it: a form feed at the start of a line, and a
# whitespace-only line ending in a backslash (which continues into the next line).
LOSSY = {
    "form_feed_before_indent": "def f(x):\n    loss = x.sum()\n\x0c    return loss, {'a': loss.detach()}\n",
    "form_feed_at_start": "\x0cdef f(x):\n\x0c    loss = x.sum()\n\x0c\x0c    return loss, {'a': loss.detach()}\n",
    "backslash_line": "def f(x):\n    loss = x.sum()\n    \\\n    return loss, {'a': loss.detach()}\n",
    "backslash_line_crlf": "def f(x):\r\n    loss = x.sum()\r\n    \\\r\n    return loss, {'a': loss.detach()}\r\n",
    "both_then_continuation": (
        "def f(x):\n    loss = x.sum()\n\x0c    \\\n    r = loss.detach() + \\\n        0\n"
        "    return loss, {'a': loss.detach(), 'b': r}\n"
    ),
}


@pytest.mark.parametrize("text", list(LOSSY.values()), ids=list(LOSSY))
def test_positions_follow_cpython_where_libcst_renders_differently(text: str) -> None:
    from flux_alias_lint.lint import check_source, fix_source

    assert cst.parse_module(text).code != text  # still lossy: else this case tests nothing
    calls = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call) and ast.unparse(n) == "loss.detach()"]
    last = max(calls, key=lambda n: (n.lineno, n.col_offset))
    findings = [f for f in check_source(text) if f.report_path == "report['a']" or f.report_path == 'report["a"]']
    assert [(f.line, f.column, f.end_line, f.end_column) for f in findings] == [
        (last.lineno, last.col_offset + 1, last.end_lineno, last.end_col_offset + 1)
    ]
    fixed = fix_source(text)
    assert fixed == text.replace("'a': loss.detach()", "'a': loss.detach().clone()")
