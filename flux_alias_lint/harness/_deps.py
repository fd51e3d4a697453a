"""The optional dependencies of the runtime harness, imported only when a harness entry point runs.

Importing ``flux_alias_lint`` or running the linter must never import torch, so every
harness module that needs torch or megatron-core gets it through these functions.
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from collections.abc import Iterator
from types import ModuleType

# The package is on no index: the extra is named after a clone's path or a wheel's (README, Quick start).
_INSTALL_HINT = (
    "pip install '/path/to/flux-alias-lint[harness]' (a clone of flux-alias-lint, or its wheel: "
    "'dist/flux_alias_lint-*.whl[harness]'); install the CPU build of torch first, e.g. "
    "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu, or pip pulls a multi-GB CUDA build"
)


class HarnessUnavailableError(ImportError):
    """torch or megatron-core is missing; the message says what to install."""


def require(module: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise HarnessUnavailableError(
            f"flux-alias-lint's runtime harness needs {what}, which is not importable ({error}). "
            f"Install it with: {_INSTALL_HINT}"
        ) from error


def require_torch() -> ModuleType:
    return require("torch", "torch")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No warning printed while code outside this project runs (megatron-core warns on import about
    Apex and Transformer Engine). Recorded, not just filtered: an imported module may add its own
    filters in front of an "ignore"."""
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("ignore")
        yield
