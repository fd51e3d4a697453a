"""The rule registry, derived from the rule files: every module of this package not named with a
leading underscore defines one `RULE`, named after it (`view_alias_in_report.py`: `view-alias-in-report`).
Adding a rule is adding its file (docs/internals.md, "Adding a rule")."""

from __future__ import annotations

import importlib
import os

from ..facts.tensor_ops import AliasKind
from ._base import AnalysisRule, Rule
from ._report import ReportAliasRule
from .captured_alias_written_in_place import RULE as _CAPTURED
from .invalid_syntax import RULE as INVALID_SYNTAX


def _rule_files() -> list[Rule]:
    # The directory listed, not `pkgutil.iter_modules`: importing pkgutil would double this package's cost.
    names = [name.removesuffix(".py") for name in os.listdir(__path__[0]) if name.endswith(".py") and name[0] != "_"]
    return sorted((importlib.import_module(f"{__name__}.{name}").RULE for name in names), key=lambda rule: rule.code)


# Every rule by code, in code order (`rule --all`, SARIF, the README's table).
RULES: dict[str, Rule] = {rule.code: rule for rule in _rule_files()}
# The rules the analysis reports (a `RawFinding` carries one of their codes).
ANALYSIS_RULES: dict[str, AnalysisRule] = {code: r for code, r in RULES.items() if isinstance(r, AnalysisRule)}
# The rule of a report entry aliasing the backprop tensor, by the kind of alias the analysis found
# (the most doubtful operation of its chain decides), and its code.
RULE_FOR_KIND: dict[AliasKind, ReportAliasRule] = {r.kind: r for r in RULES.values() if isinstance(r, ReportAliasRule)}
CODE_FOR_KIND: dict[AliasKind, str] = {kind: rule.code for kind, rule in RULE_FOR_KIND.items()}
# A file that cannot be read, decoded or parsed: reported whatever is selected (`selection.resolve`).
UNCHECKED = INVALID_SYNTAX.code
# A capture changed in place after it was made (`analysis/captures.py`).
CAPTURE_CODE = _CAPTURED.code

__all__ = [
    "ANALYSIS_RULES",
    "CAPTURE_CODE",
    "CODE_FOR_KIND",
    "INVALID_SYNTAX",
    "RULES",
    "RULE_FOR_KIND",
    "UNCHECKED",
    "AnalysisRule",
    "ReportAliasRule",
    "Rule",
]
