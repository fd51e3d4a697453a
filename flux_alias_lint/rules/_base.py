"""What every rule is made of: its texts, its verdict (severity from context) and, for the rules the
analysis reports, its message. The rule files fill these in; `rules/__init__.py` collects them."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..facts.hosts import BY_NAME
from ..facts.hosts import MEGATRON as MEGATRON_HOST
from ..finding import ERROR, WARNING
from ..index.reach import ESCAPES, IN_PLACE_CALLER, MEGATRON, UNREACHED, Reach, lost

if TYPE_CHECKING:
    from ..values import RawFinding

# What `unreached` (config and --unreached) makes of a finding nothing is known to rescale.
_UNREACHED_SEVERITY: dict[str, str | None] = {"warn": WARNING, "error": ERROR, "ignore": None}


def severity(context: str, unreached: str) -> str | None:
    """A proven context (Megatron, an in-place caller, a write in the function) and an unchecked file
    (FAL000, no context) are errors; a finding nothing is known to rescale (`unreached`, or `escapes`:
    its function goes where the index cannot follow) is a hazard, not yet a bug: a warning unless
    `unreached` says "error", hidden (None) where it says "ignore"."""
    if context not in (UNREACHED, ESCAPES):
        return ERROR
    return _UNREACHED_SEVERITY[unreached]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Rule:
    """A rule's texts: `rule CODE` prints `doc`, `rule` alone lists `summary`; `flags` and `fix` are its
    row of the README's rules table (`fix` empty: nothing to fix)."""

    code: str
    name: str
    summary: str
    doc: str
    flags: str
    fix: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class AnalysisRule(Rule):
    """A rule the analysis reports (a `RawFinding` with its code): what its message says and how
    severe a finding is, given who rescales the loss."""

    def verdict(self, found: RawFinding, reach: Reach, unreached: str) -> tuple[Reach, str | None]:
        """Who rescales the value, as this rule reads the project's `reach`, and the severity that
        follows (None: hidden, and so never fixed). A value the host leaves as it is under a setting
        of the project (`Reach.spared_by`) is a hazard, not a bug: a warning."""
        return reach, WARNING if reach.spared_by else severity(reach.context, unreached)

    def message(self, found: RawFinding, expression: str, reach: Reach, write: tuple[str, int] | None) -> str:
        """One line: what the entry is, what will happen to it at run time, and the rule that explains it.
        `expression`: the flagged entry's source; `write`: the in-place write in the function and its line."""
        what, consequence = self.explain(found, shortened(expression), reach, write)
        return f"{what}; {consequence} (flux-alias-lint rule {self.code})"

    def explain(
        self, found: RawFinding, expression: str, reach: Reach, write: tuple[str, int] | None
    ) -> tuple[str, str]:
        """The message's two halves: what the entry is, and what happens to it at run time."""
        raise NotImplementedError


def consequence(reach: Reach, returned: int = 0) -> str:
    """What happens to the entry at run time, by who rescales the loss; `returned`: the length of the
    returned tuple (0: not known), which decides Megatron's in-place operations (megatron-core 0.12 on).
    A third-party host (`facts/hosts.py`) is named with its operation, the release doing it and where
    the project pins it (`Reach.release`)."""
    if reach.spared_by:
        setting = MEGATRON_HOST.setting
        assert setting is not None
        return f"Megatron {setting.effect} under {reach.spared_by} (off, it divides it in place)"
    host = BY_NAME.get(reach.context)
    if host is not None and host is not MEGATRON_HOST:
        return f"{host.does} {reach.release}"
    if reach.context == MEGATRON and returned == 2:
        return (
            "Megatron multiplies it in place by the context-parallel size and divides it by num_microbatches "
            "after this function returns, so the logged value is rescaled too"
        )
    if reach.context == MEGATRON and returned == 3 and reach.depends_on:
        setting = MEGATRON_HOST.setting
        assert setting is not None
        # the verdict depends on a setting the project computes: said, and where, in the one line a message has
        return (
            "Megatron divides it in place by num_tokens and num_microbatches unless "
            f"{setting.name} (computed at {reach.depends_on}) is on"
        )
    if reach.context == MEGATRON and returned == 3:
        return (
            "Megatron divides it in place by num_tokens and num_microbatches after this function returns, "
            "so the logged value is divided too"
        )
    if reach.context == MEGATRON:
        return "Megatron divides it in place by num_microbatches after this function returns, so the logged value is divided too"
    if reach.context == IN_PLACE_CALLER:
        caller = reach.steps[-1]
        return (
            f"the caller at {caller.path}:{caller.line} rescales it in place after this function returns, "
            "so the reported value changes too"
        )
    if reach.context == ESCAPES:
        return (
            f"a host rescaling the loss in place may be reached ({lost(reach.steps[-1])}), "
            "which would change the reported value too"
        )
    return (
        "an in-place rescale of it after this function returns (as Megatron's schedule does; none is seen in this "
        "project) would change the reported value too"
    )


def shortened(expression: str) -> str:
    if len(expression) > 28 or "\n" in expression:
        return expression.replace("\n", " ")[:25] + "..."
    return expression
