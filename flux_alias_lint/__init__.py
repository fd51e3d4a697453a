"""flux-alias-lint: find and fix loss-function reports that alias Megatron's backprop tensor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from .finding import Finding
from .selection import Selection
from .source import SourceError

if TYPE_CHECKING:
    from .lint import check_source, fix_source


def __getattr__(name: str) -> Any:
    # Lazy: importing libcst costs ~0.3 s, which a warm cached run must not pay.
    if name in ("check_source", "fix_source"):
        from . import lint

        return getattr(lint, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Finding", "Selection", "SourceError", "__version__", "check_source", "fix_source"]
