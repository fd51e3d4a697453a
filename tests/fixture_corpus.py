"""The fixture corpus under ``fixtures/``: discovery, byte-exact reading, and what each case claims.

Layout (TorchFix-style; adding a case is adding two files):

* ``fixtures/<CODE>/<case>.py`` + ``<case>.expected``: a checker case. Each ``.expected`` line is
  ``LINE:COL: CODE REPORT_PATH [CONTEXT]``, sorted by line and column (CONTEXT when the file shows
  who rescales the loss: ``megatron``, ``in-place-caller`` or, for FAL005, ``in-function``); an empty file is a negative.
* ``fixtures/<CODE>/<case>.in.py`` + ``<case>.out.py``: a fixer pair, ``fix_source(in) == out``.
* ``fixtures/<CODE>/<case>/``: a multi-file project case: its modules, and ``expected`` with lines
  ``FILE:LINE:COL: CODE REPORT_PATH [CONTEXT]`` for the whole folder checked as one project. Its
  ``loss.py`` defines the ``loss_func`` that is run.

Every fixture module defines ``loss_func(output_tensor)`` and is run through Megatron's real
rescale by ``test_fixtures_runtime.py``, so a case's claim (aliases or not) is checked at run time.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import pathlib
import re
import tokenize

import pytest

import flux_alias_lint
from flux_alias_lint.facts.hosts import HOSTS
from flux_alias_lint.rules import ANALYSIS_RULES, CAPTURE_CODE

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

# The code is one the analysis reports (the registry's); a context other than "unreached" (see
# flux_alias_lint/index/reach.py) ends the line.
# FAL005's path is where the captured value is kept: `report[...]`, `HISTORY[...]`, `state.last_loss`.
CONTEXTS = ("in-place-caller", "in-function", "escapes", *(host.name for host in HOSTS))  # HOSTS[0]: megatron
EXPECTED_LINE = re.compile(
    rf"^(?P<line>[1-9]\d*):(?P<col>[1-9]\d*): (?P<code>{'|'.join(ANALYSIS_RULES)}) "
    r"(?P<path>[A-Za-z_]\w*(?:\[.+\]|\.\w+)*)"
    rf"(?: (?P<context>{'|'.join(CONTEXTS)}))?$"
)
NOQA = re.compile(r"#\s*noqa\b", re.IGNORECASE)


class Kind(enum.Enum):
    POSITIVE = "positive"  # the checker reports it, and the report moves at run time
    SUPPRESSED = "suppressed"  # a real alias (the report moves) silenced by a noqa comment
    NEGATIVE = "negative"  # nothing to report, and the report does not move


@dataclasses.dataclass(frozen=True)
class Source:
    """A fixture file decoded the way a user's editor would: BOM kept as U+FEFF, newlines untouched."""

    path: pathlib.Path
    data: bytes
    encoding: str  # codec that turns ``text`` back into ``data``
    text: str

    def encode(self, text: str) -> bytes:
        return text.encode(self.encoding)


def read_source(path: pathlib.Path) -> Source:
    data = path.read_bytes()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    if encoding == "utf-8-sig":  # keep the BOM in the text so that a fixer can keep it in its output
        encoding = "utf-8"
    return Source(path, data, encoding, data.decode(encoding))


def has_noqa(source: Source) -> bool:
    tokens = tokenize.tokenize(io.BytesIO(source.data).readline)
    return any(tok.type == tokenize.COMMENT and NOQA.search(tok.string) for tok in tokens)


def report_path_pattern(report_path: str) -> re.Pattern[str]:
    """``report["a"][...]`` as a pattern: ``[...]`` stands for any one key or index."""
    return re.compile(re.escape(report_path).replace(re.escape("[...]"), r"\[[^\]]+\]") + "$")


def fixture_id(path: pathlib.Path) -> str:
    return path.relative_to(FIXTURES).as_posix()


@dataclasses.dataclass(frozen=True)
class CheckerCase:
    source_path: pathlib.Path
    expected_path: pathlib.Path

    @property
    def id(self) -> str:
        return fixture_id(self.source_path)

    @property
    def rule_dir(self) -> str:
        return self.source_path.parent.name

    def source(self) -> Source:
        return read_source(self.source_path)

    def expected(self) -> list[str]:
        return [line for line in self.expected_path.read_text(encoding="utf-8").splitlines() if line]

    def expected_report_paths(self) -> set[str]:
        """The report entries the findings name (FAL005's captures are checked apart: `expected_captures`)."""
        matches = [EXPECTED_LINE.match(line) for line in self.expected()]
        return {m["path"] for m in matches if m["code"] != CAPTURE_CODE}

    def expected_captures(self) -> set[str]:
        matches = [EXPECTED_LINE.match(line) for line in self.expected()]
        return {m["path"] for m in matches if m["code"] == CAPTURE_CODE}

    def kind(self) -> Kind:
        if self.expected():
            return Kind.POSITIVE
        return Kind.SUPPRESSED if has_noqa(self.source()) else Kind.NEGATIVE


@dataclasses.dataclass(frozen=True)
class FixerPair:
    in_path: pathlib.Path
    out_path: pathlib.Path

    @property
    def id(self) -> str:
        return fixture_id(self.in_path)

    def kind(self) -> Kind:
        before = read_source(self.in_path)
        if before.data != self.out_path.read_bytes():
            return Kind.POSITIVE
        return Kind.SUPPRESSED if has_noqa(before) else Kind.NEGATIVE


def _rule_dirs() -> list[pathlib.Path]:
    return sorted(p for p in FIXTURES.glob("FAL*") if p.is_dir())


def checker_cases() -> list[CheckerCase]:
    return [
        CheckerCase(expected.with_suffix(".py"), expected)
        for rule_dir in _rule_dirs()
        for expected in sorted(rule_dir.glob("*.expected"))
    ]


def fixer_pairs() -> list[FixerPair]:
    return [
        FixerPair(in_path, in_path.with_name(in_path.name.removesuffix(".in.py") + ".out.py"))
        for rule_dir in _rule_dirs()
        for in_path in sorted(rule_dir.glob("*.in.py"))
    ]


def all_fixture_files() -> list[pathlib.Path]:
    return sorted(p for rule_dir in _rule_dirs() for p in rule_dir.iterdir() if p.is_file())


PROJECT_LINE = re.compile(r"^(?P<file>[\w/]+\.py):" + EXPECTED_LINE.pattern.removeprefix("^"))


@dataclasses.dataclass(frozen=True)
class ProjectCase:
    folder: pathlib.Path

    @property
    def id(self) -> str:
        return fixture_id(self.folder)

    @property
    def rule_dir(self) -> str:
        return self.folder.parent.name

    @property
    def entry(self) -> pathlib.Path:
        return self.folder / "loss.py"

    def modules(self) -> list[pathlib.Path]:
        return sorted(self.folder.rglob("*.py"))

    def expected(self) -> list[str]:
        return [line for line in (self.folder / "expected").read_text(encoding="utf-8").splitlines() if line]

    def expected_report_paths(self) -> set[str]:
        """The report entries the findings name (FAL005's captures are checked apart: `expected_captures`)."""
        matches = [PROJECT_LINE.match(line) for line in self.expected()]
        return {m["path"] for m in matches if m["code"] != CAPTURE_CODE}

    def expected_captures(self) -> set[str]:
        matches = [PROJECT_LINE.match(line) for line in self.expected()]
        return {m["path"] for m in matches if m["code"] == CAPTURE_CODE}

    def kind(self) -> Kind:
        return Kind.POSITIVE if self.expected() else Kind.NEGATIVE


def project_cases() -> list[ProjectCase]:
    return [
        ProjectCase(folder) for rule_dir in _rule_dirs() for folder in sorted(rule_dir.iterdir()) if folder.is_dir()
    ]


def api(name: str):
    """``pytest.importorskip`` for an attribute: the checker and fixer are written on branch core."""
    function = getattr(flux_alias_lint, name, None)
    if function is None:
        pytest.skip(f"flux_alias_lint.{name} does not exist yet (it lands from branch core)")
    return function
