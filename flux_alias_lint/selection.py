"""Which rule codes a run reports. Its own module so the CLI can build one without importing libcst."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Selection:
    """Which codes are reported: prefixes, as in ruff (`FAL`, `FAL00`, `FAL001`); ignore wins."""

    select: tuple[str, ...] = ("FAL",)
    ignore: tuple[str, ...] = ()

    def enabled(self, code: str) -> bool:
        return any(code.startswith(p) for p in self.select) and not any(code.startswith(p) for p in self.ignore)


DEFAULT_SELECTION = Selection()
