#!/usr/bin/env python3
"""Every number the README and docs/ quote, measured again.

    python scripts/doc_numbers.py            # each quote: where, what, quoted, measured
    python scripts/doc_numbers.py --write    # rewrite the quotes that differ from the measurement
    python scripts/doc_numbers.py --check    # exit 1 when a quote differs or a record lacks its provenance

A number is one of three things, and `SECTIONS` says for every section of every doc which ones it has:

- a `Quote`: measured here, from this checkout alone (the linter on fixtures/, `verify` on fixtures/,
  the test count, a limit the code defines). tests/test_doc_numbers.py fails when one differs.
- a `Record`: measured on something CI does not have (a public tree, a timing on a named machine).
  Its paragraph must carry what makes it reproducible: the date, the commit, the command and, for a
  timing, the machine. The test checks that provenance, not the value.
- neither: an example's input, a release number, a factor the example itself shows (checked where the
  example runs, e.g. tests/harness/test_harness_docs.py).

The expensive measurements (the test count, `verify` over fixtures/) run once each, side by side.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/context.md", "docs/editor.md", "docs/internals.md", "docs/prove-it.md", "docs/usage.md")


def _env() -> dict[str, str]:
    # This checkout first on the path; no pytest options of an enclosing run.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return env | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def _wrapped(pattern: str) -> str:
    """`pattern` with each space matching any run of whitespace: a quote may be wrapped anywhere."""
    return pattern.replace(" ", r"\s+")


def _search(pattern: str, text: str, what: str) -> re.Match[str]:
    found = re.search(pattern, text, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"{what}: no line matches {pattern!r} in:\n{text[-2000:]}")
    return found


class Measurements:
    """What this checkout measures, each at most once; the two slow runs start together."""

    def __init__(self) -> None:
        self._runs: dict[str, subprocess.Popen[str]] = {}

    def _start(self, name: str, *args: str) -> None:
        if name not in self._runs:
            self._runs[name] = subprocess.Popen(
                [sys.executable, *args],
                cwd=ROOT,
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )

    def start(self) -> None:
        """Start the slow runs (the test count and `verify fixtures/`) side by side."""
        self._start("collect", "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider")
        self._start("verify", "-m", "flux_alias_lint", "verify", "fixtures/")

    def _output(self, name: str) -> str:
        self.start()
        out, _ = self._runs[name].communicate()
        return out

    @cached_property
    def fixture_summary(self) -> tuple[int, int]:
        """The errors and warnings `flux-alias-lint check fixtures/` ends with (the README's first line)."""
        args = [sys.executable, "-m", "flux_alias_lint", "check", "fixtures/", "--no-cache"]
        out = subprocess.run(args, cwd=ROOT, env=_env(), capture_output=True, text=True, check=False).stdout
        found = _search(r"^Found (\d+) errors? and (\d+) warnings?\.$", out, "check fixtures/")
        return int(found[1]), int(found[2])

    @cached_property
    def tests(self) -> tuple[int, int]:
        """The tests the README's test command runs, and those it deselects (`slow`, `readme`)."""
        out = self._output("collect")
        found = _search(r"^(\d+)/(\d+) tests collected \((\d+) deselected\)", out, "pytest --collect-only")
        return int(found[1]), int(found[3])

    @cached_property
    def verify(self) -> tuple[int, int]:
        """`verify fixtures/`: findings confirmed, and of them those also confirmed through the schedule."""
        out = self._output("verify")
        found = _search(r"(\d+) confirmed \((\d+) also through forward_backward_no_pipelining\)", out, "verify")
        return int(found[1]), int(found[2])


@dataclass(frozen=True)
class Quote:
    """Numbers a doc quotes: `pattern`'s groups, which must read `measure`'s values."""

    doc: str
    pattern: str
    measure: Callable[[Measurements], tuple[object, ...]]
    what: str

    def find(self, text: str) -> re.Match[str]:
        matches = list(re.finditer(_wrapped(self.pattern), text))
        if len(matches) != 1:
            raise LookupError(f"{self.doc}: {self.what}: {len(matches)} places match {self.pattern!r}, not one")
        return matches[0]

    def quoted(self, text: str) -> tuple[str, ...]:
        return self.find(text).groups()

    def measured(self, m: Measurements) -> tuple[str, ...]:
        return tuple(str(value) for value in self.measure(m))


def _thousands(value: int) -> str:
    return f"{value:,}"


def _const(module: str, name: str, shown: Callable[[object], object] = lambda value: value) -> Callable:
    """A limit the code defines, as the doc shows it (`name` may be `Class.ATTR`)."""

    def measure(_: Measurements) -> tuple[object, ...]:
        import importlib

        value: object = importlib.import_module(module)
        for part in name.split("."):
            value = getattr(value, part)
        return (shown(value),)

    return measure


def _action_input(name: str) -> str:
    """An input's default in action.yml (read as text: the script needs no YAML parser)."""
    found = _search(rf"^  {re.escape(name)}:\n(?:    .*\n)*?    default: \"?([^\"\n]*)\"?$", read("action.yml"), name)
    return found[1]


def _seconds(value: object) -> str:
    return f"{value:g}"


def _mib(value: object) -> str:
    return f"{value // 2**20}"  # type: ignore[operator]


def _kib(value: object) -> str:
    return f"{value // 2**10}"  # type: ignore[operator]


def _kb(value: object) -> str:
    return f"{value // 1000}"  # type: ignore[operator]


QUOTES: tuple[Quote, ...] = (
    Quote(
        "README.md",
        r"The first lints the shipped examples and ends `Found (\d+) errors and (\d+) warnings\.`",
        lambda m: m.fixture_summary,
        "the summary of `check fixtures/`",
    ),
    Quote(
        "README.md",
        r"`pip install \"dist/flux_alias_lint-([\d.]+)-py3-none-any\.whl\[server\]\"`",
        _const("flux_alias_lint", "__version__"),
        "the wheel's version",
    ),
    Quote(
        "docs/internals.md",
        r"The suite has ([\d,]+) tests \(`python -m pytest --collect-only -q`; (\d+) more",
        lambda m: (_thousands(m.tests[0]), m.tests[1]),
        "the test count",
    ),
    Quote(
        "docs/prove-it.md",
        r"\(on `fixtures/`: `(\d+) confirmed \((\d+) also through forward_backward_no_pipelining\)`\)",
        lambda m: m.verify,
        "verify's confirmations on fixtures/",
    ),
    Quote(
        "docs/internals.md",
        r"generates ([\d,]+) loss functions",
        lambda m: (_thousands(_const("test_differential_fuzz", "EXAMPLES")(m)[0]),),
        "the differential fuzz's examples",
    ),
    Quote(
        "docs/internals.md",
        r"work budget \((\d+) statements analysed per statement, plus ([\d,]+)\)",
        lambda m: (
            _const("flux_alias_lint.analysis.statements", "_WORK_PER_STATEMENT")(m)[0],
            _thousands(_const("flux_alias_lint.analysis.statements", "_MIN_WORK")(m)[0]),
        ),
        "the analysis' work budget",
    ),
    Quote(
        "docs/internals.md",
        r"Chains of ops stop at (\d+)",
        _const("flux_alias_lint.analysis.values", "_MAX_OPS"),
        "the longest op chain",
    ),
    Quote(
        "docs/internals.md",
        r"a value read with more than (\d+) aliases",
        _const("flux_alias_lint.analysis.values", "_MAX_ALIASES"),
        "the most aliases kept apart",
    ),
    Quote(
        "docs/internals.md",
        r"parsed on a (\d+) MiB thread stack; beyond ([\d,]+) levels",
        lambda m: (
            _mib(_const("flux_alias_lint.source", "_DEEP_STACK")(m)[0]),
            _thousands(_const("flux_alias_lint.source", "MAX_DEPTH")(m)[0]),
        ),
        "the deep parse's stack and depth",
    ),
    Quote(
        "docs/internals.md",
        r"so files over ([\d,]+) characters are not tried",
        lambda m: (_thousands(_const("flux_alias_lint.lint", "_UNMEASURED_LIMIT")(m)[0]),),
        "the longest file parsed without CPython's tree",
    ),
    Quote(
        "docs/internals.md",
        r"its units go to libcst ~([\d,]+) lines at a time",
        lambda m: (_thousands(_const("flux_alias_lint.triage.reduce", "PIECE_LINES")(m)[0]),),
        "the triage's piece size",
    ),
    Quote(
        "docs/internals.md",
        r"files over\s+`--max-file-size` \((\d+) MiB\) are never read",
        _const("flux_alias_lint.source", "DEFAULT_MAX_FILE_SIZE", _mib),
        "the per-file size limit, in brief",
    ),
    Quote(
        "docs/internals.md",
        r"`file-timeout` \(default (\d+): none\)",
        _const("flux_alias_lint.runner", "DEFAULT_TIMEOUT", _seconds),
        "the default timeout",
    ),
    Quote(
        "docs/internals.md",
        r"statements analysed ≤ (\d+) × \((\d+) \+ loop\s+depth \+ 1\) × lines \+ ([\d,]+)",
        lambda m: (
            _const("flux_alias_lint.analysis.statements", "_LOOP_SLACK")(m)[0],
            _const("flux_alias_lint.analysis.statements", "_WORK_PER_STATEMENT")(m)[0],
            _thousands(_const("flux_alias_lint.analysis.statements", "_MIN_WORK")(m)[0]),
        ),
        "the stated work bound",
    ),
    Quote(
        "docs/internals.md",
        r"aliases evaluated ≤ (\d+) per statement analysed",
        _const("flux_alias_lint.analysis.statements", "_ALIASES_PER_STATEMENT"),
        "aliases per statement",
    ),
    Quote(
        "docs/internals.md",
        r"analyse (\d+) times the bound above at the deepest nesting \((\d+) loops\)",
        lambda m: (
            _const("flux_alias_lint.analysis.statements", "_STOP_FACTOR")(m)[0],
            _const("flux_alias_lint.analysis.statements", "_MAX_LOOP_DEPTH")(m)[0],
        ),
        "where the analysis stops",
    ),
    Quote(
        "docs/internals.md",
        r"`--max-file-size` / `max-file-size` \(default (\d+) MiB\)",
        _const("flux_alias_lint.source", "DEFAULT_MAX_FILE_SIZE", _mib),
        "the default size limit",
    ),
    Quote(
        "docs/internals.md",
        r"Files written within (\d+) s of being cached get no stamp",
        _const("flux_alias_lint.cache", "_RACY_NS", lambda ns: f"{ns / 1e9:g}"),
        "the racily-clean window",
    ),
    Quote(
        "docs/internals.md",
        r"under (\d+) kB of source to check, in-process",
        _const("flux_alias_lint.parallel", "_IN_PROCESS_BYTES", _kib),
        "the in-process threshold",
    ),
    Quote(
        "docs/usage.md",
        r"`--timeout SECONDS` \(config `file-timeout`, default (\d+);",
        _const("flux_alias_lint.runner", "DEFAULT_TIMEOUT", _seconds),
        "the default timeout",
    ),
    Quote(
        "docs/usage.md",
        r"`--max-file-size BYTES` \(config `max-file-size`, default (\d+)\)",
        _const("flux_alias_lint.source", "DEFAULT_MAX_FILE_SIZE"),
        "the default size limit",
    ),
    Quote(
        "docs/usage.md",
        r"The action sets up Python \(`python-version`, default ([\d.]+);",
        lambda m: (_action_input("python-version"),),
        "the action's default Python",
    ),
    Quote(
        "docs/editor.md",
        r"for ([\d.]+) s \(`--debounce SECONDS`\)",
        _const("flux_alias_lint.server", "DEFAULT_DEBOUNCE", _seconds),
        "the server's debounce",
    ),
    Quote(
        "docs/prove-it.md",
        r"up to (\d+) executions per stand-in shape",
        _const("flux_alias_lint.harness.verify", "MAX_EXECUTIONS"),
        "verify's executions per shape",
    ),
    Quote(
        "docs/context.md",
        r"\((\d+) values followed, (\d+) modules read for one function\)",
        lambda m: (
            *_const("flux_alias_lint.index.escapes", "_BUDGET")(m),
            *_const("flux_alias_lint.index.references", "_MODULES")(m),
        ),
        "the escape analysis' bounds",
    ),
    Quote(
        "docs/context.md",
        r"followed to the calls of its own module and of at most (\d+) other files",
        _const("flux_alias_lint.index.calls", "_CALLER_FILES"),
        "the files a parameter's callers are searched in",
    ),
    Quote(
        "docs/context.md",
        r"bounded by a depth \((\d+)\)",
        _const("flux_alias_lint.index.names", "_DEPTH"),
        "the callable values' depth",
    ),
    Quote(
        "docs/prove-it.md",
        r"files over (\d+) kB are stubbed",
        _const("flux_alias_lint.harness.moduletop", "Project.MAX_BYTES", _kb),
        "the largest project module a probe runs",
    ),
)

# What makes a recorded number reproducible, each found in the record's own paragraph.
PROVENANCE = {
    "date": r"\b20\d\d-\d\d-\d\d\b",
    "commit": r"`?\b[0-9a-f]{7,40}\b`?",
    "command": r"`(?:\.ci/run|python (?:-m \w+|bench/\S+|scripts/\S+)|flux-alias-lint \w+|check \S+)[^`]*`",
    "machine": r"\b\d+-core\b",
}
TREE = ("date", "commit", "command")
TIMING = ("date", "machine")


@dataclass(frozen=True)
class Record:
    """Numbers measured where CI cannot measure them: the paragraph `anchor` starts must say how."""

    doc: str
    anchor: str
    needs: tuple[str, ...]

    def paragraph(self, text: str) -> str:
        paragraphs = [p for p in re.split(r"\n\s*\n", text) if re.search(_wrapped(self.anchor), p, re.MULTILINE)]
        if len(paragraphs) != 1:
            raise LookupError(f"{self.doc}: {len(paragraphs)} paragraphs match {self.anchor!r}, not one")
        return paragraphs[0]

    def missing(self, text: str) -> list[str]:
        paragraph = self.paragraph(text)
        return [need for need in self.needs if not re.search(PROVENANCE[need], paragraph)]


RECORDS: tuple[Record, ...] = (
    Record("docs/usage.md", r"On \[AMD-AGI/Primus\]", TREE),
    Record("docs/context.md", r"^`python bench/trees\.py TREE\.\.\.`", TREE),
    Record("docs/context.md", r"^mlcommons/training and mlcommons/training_results", TREE),
    Record("docs/context.md", r"^`python bench/inject\.py --list", TREE),
    Record("docs/context.md", r"^`python bench/pycg\.py", TREE),
    Record("docs/context.md", r"^Tried as a new user would, on \d+ trees", TREE),
    Record("docs/context.md", r"^No tree keeps an alias of a loss it hands to a host", TREE),
    Record("docs/context.md", r"^`python bench/host_trees\.py --trees", TREE),
    Record("docs/context.md", r"^On real trees the graph takes", (*TIMING, "commit", "command")),
    Record("docs/internals.md", r"a 5 MB generated data-table module takes", (*TIMING, "commit")),
    Record("docs/internals.md", r"`python bench/pathological\.py` prints each shape's work", (*TIMING, "commit")),
    Record("docs/internals.md", r"^On a 2-core machine, idle, ", (*TIMING, "command")),
    Record("docs/internals.md", r"^The table predates FAL005\.", (*TIMING, "commit", "command")),
    Record("docs/internals.md", r"^Kept lines for libcst", ("date", "commit", "command")),
    Record(
        "docs/internals.md", r"^Where a cold run's CPU goes, `python bench/phases\.py", (*TIMING, "commit", "command")
    ),
    Record("docs/internals.md", r"^Start-up is 0\.1 s for the command line", (*TIMING, "commit", "command")),
    Record("docs/internals.md", r"^Issue 33, on this 2-core x86_64 machine", (*TIMING, "commit", "command")),
    Record("docs/internals.md", r"that is \d+ of [\d,]+ files and ~\d+k of", ("date", "commit")),
    Record("docs/internals.md", r"NeMo 0\.65 s to 0\.4 s", (*TIMING, "commit")),
    Record("docs/internals.md", r"^`python bench/bench\.py \[--tree DIR\]", (*TIMING, "command")),
    Record("docs/internals.md", r"Its time was measured on this 2-core machine", (*TIMING, "commit", "command")),
    Record("docs/prove-it.md", r"^`python bench/verify_injected\.py` copies", TREE),
    Record("docs/prove-it.md", r"^`python bench/hosts\.py` makes a finding", TREE),
    Record("docs/prove-it.md", r"^`python bench/verify_trees\.py` runs", TREE),
    Record("docs/prove-it.md", r"The check costs tens of microseconds per call", (*TIMING, "command")),
    Record("docs/prove-it.md", r"^Overhead per microbatch, `python bench/schedule_overhead\.py`", (*TIMING, "command")),
)

# Every section of every doc, and where its numbers come from. A section missing here fails the test:
# say, for a new one, whether its numbers are quotes, records or neither.
SECTIONS: dict[tuple[str, str], str] = {
    ("README.md", "flux-alias-lint"): "an example's microbatches; megatron-core's first in-place release",
    ("README.md", "Quick start"): "quotes: the fixtures' summary, the wheel's version",
    ("README.md", "Rules"): "none: the rules table is checked by tests/test_rules.py",
    ("README.md", "Errors and warnings: who rescales the loss"): "an example hand-off's line",
    ("README.md", "Use it"): "none",
    ("README.md", "pre-commit"): "the rev, checked by tests/test_doc_numbers.py",
    ("README.md", "CI"): "none",
    ("README.md", "In the editor"): "none",
    ("README.md", "Prove it"): "an example, run by tests/harness/test_harness_docs.py",
    ("README.md", "More"): "none",
    ("docs/context.md", "Context and severity: who rescales the loss"): "example lines",
    ("docs/context.md", "Severity follows the context"): "an example summary",
    ("docs/context.md", "Not a loss function, no finding"): "none",
    ("docs/context.md", "What `--fix` wraps"): "an example line",
    ("docs/context.md", "On public trees"): "record",
    ("docs/context.md", "MLPerf submissions"): "record",
    ("docs/context.md", "`unreached` is earned: where the function's value goes"): "quote: the escape analysis' bounds",
    ("docs/context.md", "Callable values"): "quotes: the depth and the caller files",
    ("docs/context.md", "Injected aliases"): "record",
    ("docs/context.md", "Call graph"): "records: bench/pycg.py on PyCG's micro-benchmark, the graph's CPU on trees",
    ("docs/context.md", "Hosts"): "releases and line numbers of the host table, checked by tests/test_hosts.py",
    ("docs/context.md", "Hosts on public trees"): "records",
    (
        "docs/context.md",
        "Hosts on more public trees, with `.git` and as a plain folder",
    ): "record: bench/host_trees.py on fetched trees CI does not have",
    ("docs/editor.md", "In the editor: `flux-alias-lint server`"): "quote: the debounce",
    ("docs/editor.md", "VS Code"): "none",
    ("docs/editor.md", "Neovim (0.11 or newer)"): "a release",
    ("docs/editor.md", "Neovim 0.7 to 0.10"): "releases",
    ("docs/editor.md", "Helix"): "none",
    ("docs/editor.md", "Next to ruff: keep the `# noqa` comments"): "ruff's pinned release (pyproject.toml)",
    ("docs/editor.md", "The CLI, as a ruff user expects it"): "ruff's pinned release (pyproject.toml)",
    ("docs/internals.md", "Internals"): "none",
    ("docs/internals.md", "Layout"): "none",
    ("docs/internals.md", "Adding a rule"): "an example code",
    ("docs/internals.md", "Reliability in brief"): "quotes: limits",
    ("docs/internals.md", "Reliability in detail"): "quotes: limits; records: timings",
    ("docs/internals.md", "Performance"): "none",
    ("docs/internals.md", "Measured"): "records",
    ("docs/internals.md", "How"): "quotes: limits; records: measurements on trees",
    ("docs/internals.md", "The test suite"): "quote: the test count; record: its timings",
    ("docs/prove-it.md", "Prove it at runtime"): "a release",
    ("docs/prove-it.md", "A regression test in one call"): "an example, run by tests/harness/test_harness_docs.py",
    ("docs/prove-it.md", "The pytest fixture"): "an example, run by tests/harness/test_harness_docs.py",
    ("docs/prove-it.md", "Through Megatron's real schedule"): "an example, run by tests/harness/test_harness_docs.py",
    ("docs/prove-it.md", "A guard in production"): "record: the guard's overhead",
    ("docs/prove-it.md", "A guard for the whole job: `install()`"): "record: the schedule's overhead",
    ("docs/prove-it.md", "Confirming findings: `flux-alias-lint verify`"): "quotes: verify on fixtures/, its limits",
    ("docs/prove-it.md", "Injected into real loss functions"): "record",
    ("docs/prove-it.md", "On public trees"): "record",
    ("docs/prove-it.md", "Under other hosts"): "record: bench/hosts.py",
    ("docs/usage.md", "Usage and configuration"): "none",
    ("docs/usage.md", "Configuration"): "an example",
    ("docs/usage.md", "Limits"): "quotes: the defaults",
    ("docs/usage.md", "As in ruff"): "none",
    ("docs/usage.md", "CI"): "quote: the action's default Python",
    ("docs/usage.md", "Fix a whole repository"): "record: Primus",
    ("docs/usage.md", "pre-commit"): "an example's lines, run by tests/test_frontends_project.py",
    ("docs/usage.md", "flake8"): "none",
}


def headings(text: str) -> list[str]:
    """The Markdown headings of `text`, outside fenced code blocks."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#+ (.+)", line)):
            found.append(heading[1].strip())
    return found


def read(doc: str) -> str:
    return (ROOT / doc).read_text(encoding="utf-8")


def compare(m: Measurements) -> list[tuple[Quote, tuple[str, ...], tuple[str, ...]]]:
    """(quote, quoted, measured) for every quote."""
    m.start()
    return [(quote, quote.quoted(read(quote.doc)), quote.measured(m)) for quote in QUOTES]


def write(rows: list[tuple[Quote, tuple[str, ...], tuple[str, ...]]]) -> list[str]:
    """Rewrite each quote that differs; the docs changed."""
    changed = []
    for quote, quoted, measured in rows:
        if quoted == measured:
            continue
        text = read(quote.doc)
        match = quote.find(text)
        for group in range(len(measured), 0, -1):  # from the end, so earlier spans keep their offsets
            text = text[: match.start(group)] + measured[group - 1] + text[match.end(group) :]
        (ROOT / quote.doc).write_text(text, encoding="utf-8")
        changed.append(quote.doc)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="rewrite the quotes that differ")
    action.add_argument("--check", action="store_true", help="exit 1 when a quote or a record's provenance is off")
    args = parser.parse_args(argv)
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    rows = compare(Measurements())
    for quote, quoted, measured in rows:
        mark = "ok" if quoted == measured else "DIFFERS"
        print(f"{mark:7} {quote.doc}: {quote.what}: quoted {', '.join(quoted)}; measured {', '.join(measured)}")
    bad = [record for record in RECORDS if record.missing(read(record.doc))]
    for record in bad:
        print(f"NO PROVENANCE {record.doc}: {record.anchor!r} lacks {', '.join(record.missing(read(record.doc)))}")
    if args.write:
        for doc in write(rows):
            print(f"rewrote {doc}")
        return 1 if bad else 0
    return 1 if args.check and (bad or any(quoted != measured for _, quoted, measured in rows)) else 0


if __name__ == "__main__":
    sys.exit(main())
