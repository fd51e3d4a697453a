"""Where a project turns on Megatron's ``calculate_per_token_loss``, or computes it: read by the index
(`index/settings.py`), which `check` uses too; `verify` models the setting as the project sets it."""

from __future__ import annotations

from ..index.settings import computed, setting

NAME = "calculate_per_token_loss"


def per_token_setting(path: str) -> str | None:
    """Where the project of ``path`` turns ``calculate_per_token_loss`` on for it (``file:line``), or None."""
    found = setting(path, NAME)
    return found[0] if found is not None and found[1] else None


def per_token_computed(path: str) -> str | None:
    """Where the project of ``path`` computes ``calculate_per_token_loss`` for it (``file:line``), or None: a run
    may get either value, so `verify` runs both."""
    return computed(path, NAME)
