"""Runtime harness: prove at test time or call time that a loss function's report survives Megatron.

- ``megatron_rescale``: what Megatron does to a loss function's outputs, per release.
- ``assert_report_survives_rescale``: a regression-test helper built on it.
- ``check_loss_outputs`` / ``guard_loss_func``: a cheap storage-overlap guard for production.
- ``install`` / ``uninstall`` / ``guard_forward_step``: that guard on every loss function Megatron calls.
- ``run_schedule`` / ``assert_reports_agree``: a forward step through Megatron's real schedule on one CPU rank.

The public names are loaded lazily so ``import flux_alias_lint.harness`` works without torch;
using one of them without torch raises ``HarnessUnavailableError`` with the install command.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._deps import HarnessUnavailableError

_EXPORTS = {
    "megatron_rescale": "rescale",
    "PROFILES": "profiles",
    "Profile": "profiles",
    "resolve_profile": "profiles",
    "installed_megatron_version": "megatron",
    "assert_report_survives_rescale": "assertions",
    "check_loss_outputs": "guard",
    "find_report_aliases": "guard",
    "guard_loss_func": "guard",
    "ReportAlias": "guard",
    "ReportAliasError": "guard",
    "ReportAliasWarning": "guard",
    "install": "schedule_guard",
    "uninstall": "schedule_guard",
    "guard_forward_step": "schedule_guard",
    "run_schedule": "schedule",
    "assert_reports_agree": "schedule",
    "report_disagreements": "schedule",
    "single_rank_megatron": "schedule",
    "stand_in_model": "schedule",
}

__all__ = [
    "PROFILES",
    "HarnessUnavailableError",
    "Profile",
    "ReportAlias",
    "ReportAliasError",
    "ReportAliasWarning",
    "assert_report_survives_rescale",
    "assert_reports_agree",
    "check_loss_outputs",
    "find_report_aliases",
    "guard_forward_step",
    "guard_loss_func",
    "install",
    "installed_megatron_version",
    "megatron_rescale",
    "report_disagreements",
    "resolve_profile",
    "run_schedule",
    "single_rank_megatron",
    "stand_in_model",
    "uninstall",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
