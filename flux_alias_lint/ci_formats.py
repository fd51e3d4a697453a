"""Output for CI systems: GitHub workflow annotations, SARIF 2.1.0 and GitLab Code Quality."""

from __future__ import annotations

import collections
import json
import re
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import PurePath

from . import __version__
from .finding import ERROR, Finding, visible
from .rules import RULES, Rule
from .source import SourceError, read_source

# ---- GitHub Actions workflow commands ---------------------------------------------


def _escape_data(value: str) -> str:
    # GitHub's rules (actions/toolkit, command.ts): `%` first, so the other escapes survive; a line
    # break ends the command, so it is escaped (the runner decodes it), any other control made visible.
    return visible(value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def format_github(findings: Sequence[Finding]) -> str:
    """One `::error` (or `::warning`) command per finding; the runner turns each into an annotation on the diff."""
    lines = []
    for f in findings:
        props = {
            "file": f.path,
            "line": f.line,
            "col": f.column,
            "endLine": f.end_line,
            "endColumn": f.end_column,
            "title": f.code,
        }
        rendered = ",".join(f"{key}={_escape_property(str(value))}" for key, value in props.items())
        lines.append(f"::{f.severity} {rendered}::{_escape_data(f.message)}\n")  # ::error or ::warning
    return "".join(lines)


# ---- fingerprints (GitLab, SARIF partialFingerprints) -----------------------------


def _split_lines(text: str) -> list[str]:
    # The tokenizer's line breaks, not str.splitlines (which also splits on \x0c, \u2028, ...).
    return re.split(r"\r\n|\r|\n", text)


class SourceLines:
    """The source lines of each reported file, read once; empty for stdin or a vanished file."""

    def __init__(self) -> None:
        self._files: dict[str, list[str]] = {}

    def get(self, path: str, line: int) -> str:
        if path not in self._files:
            try:
                self._files[path] = _split_lines(read_source(path).text)
            except SourceError:
                self._files[path] = []
        lines = self._files[path]
        return lines[line - 1] if 0 < line <= len(lines) else ""

    def exists(self, path: str, line: int) -> bool:
        self.get(path, line)
        return 0 < line <= len(self._files[path])


def fingerprints(findings: Sequence[Finding]) -> Iterator[str]:
    """A fingerprint per finding that survives edits elsewhere in the file.

    It hashes the path, the rule, the report entry and the flagged line's text (stripped), not
    the line number, so inserting code above a finding keeps it the same issue. Findings that
    agree on all of that are told apart by their order of occurrence.
    """
    import hashlib  # loads OpenSSL (~8 ms): only a CI format asks

    lines = SourceLines()
    seen: collections.Counter[str] = collections.Counter()
    for f in findings:
        content = lines.get(f.path, f.line).strip() or f.message
        key = "\0".join((PurePath(f.path).as_posix(), f.code, f.report_path, content))
        seen[key] += 1
        yield hashlib.sha256(f"{key}\0{seen[key]}".encode()).hexdigest()


# ---- GitLab Code Quality (a subset of the Code Climate issue format) ----------------


def format_gitlab(findings: Sequence[Finding]) -> str:
    issues = [
        {
            "type": "issue",
            "check_name": f.code,
            "description": f"{f.code} {f.message}",
            "categories": ["Bug Risk"],
            "severity": "major" if f.severity == ERROR else "minor",
            "fingerprint": fingerprint,
            "location": {"path": PurePath(f.path).as_posix(), "lines": {"begin": f.line, "end": f.end_line}},
        }
        for f, fingerprint in zip(findings, fingerprints(findings), strict=True)
    ]
    return json.dumps(issues, indent=2) + "\n"


# ---- SARIF 2.1.0 ------------------------------------------------------------------

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def _section(doc: str, heading: str) -> str:
    """The body of one `## heading` section of a rule's documentation."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", doc, re.MULTILINE | re.DOTALL)
    return match.group(1).strip() if match else ""


def _sarif_rule(rule: Rule) -> dict[str, object]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": _section(rule.doc, "What it does")},
        "help": {"text": rule.doc, "markdown": rule.doc},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["correctness", "megatron"]},
    }


def _uri(path: str) -> str:
    """A URI reference for the path: relative stays relative (GitHub resolves it against the checkout)."""
    pure = PurePath(path)
    if pure.is_absolute():
        return pure.as_uri()
    return urllib.parse.quote(pure.as_posix())


def _insertion(line: int, column: int, text: str) -> dict[str, object]:
    """A replacement that deletes nothing (an empty region) and inserts `text` there."""
    return {
        "deletedRegion": {"startLine": line, "startColumn": column, "endLine": line, "endColumn": column},
        "insertedContent": {"text": text},
    }


def _sarif_result(f: Finding, rule_index: int, fingerprint: str) -> dict[str, object]:
    location = {"uri": _uri(f.path)}
    result: dict[str, object] = {
        "ruleId": f.code,
        "ruleIndex": rule_index,
        "level": f.severity,  # SARIF's levels include "error" and "warning"
        "message": {"text": f.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": location,
                    "region": {
                        "startLine": f.line,
                        "startColumn": f.column,
                        "endLine": f.end_line,
                        "endColumn": f.end_column,
                    },
                }
            }
        ],
        "partialFingerprints": {"fluxAliasLint/v1": fingerprint},
        "properties": {"context": f.context},
    }
    if f.reached_by:  # the way from the loss function to the call that rescales its loss
        result["relatedLocations"] = [
            {
                "id": number,
                "message": {"text": step.what},
                "physicalLocation": {"artifactLocation": {"uri": _uri(step.path)}, "region": {"startLine": step.line}},
            }
            for number, step in enumerate(f.reached_by, start=1)
        ]
    if f.fix_after:
        replacements = [_insertion(f.end_line, f.end_column, f.fix_after)]
        if f.fix_before:
            replacements.insert(0, _insertion(f.line, f.column, f.fix_before))
        result["fixes"] = [
            {
                "description": {"text": f"Copy the report entry: insert `{f.fix_after.lstrip(')')}`"},
                "artifactChanges": [{"artifactLocation": location, "replacements": replacements}],
            }
        ]
    return result


def format_sarif(findings: Sequence[Finding]) -> str:
    codes = list(RULES)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "flux-alias-lint",
                        "version": __version__,
                        "rules": [_sarif_rule(rule) for rule in RULES.values()],
                    }
                },
                # Our columns count characters (code points), not SARIF's default UTF-16 units.
                "columnKind": "unicodeCodePoints",
                "results": [
                    _sarif_result(f, codes.index(f.code), fingerprint)
                    for f, fingerprint in zip(findings, fingerprints(findings), strict=True)
                ],
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"
