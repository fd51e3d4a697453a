"""flux-alias-lint: find and fix loss-function reports that alias Megatron's backprop tensor."""

# Nothing is imported here at run time that the interpreter has not loaded already (not even
# `typing` or `__future__`): `python -m flux_alias_lint` imports this package before __main__ takes
# the working directory off sys.path, and a repository's own typing.py or json.py there must not
# stand in for the standard library's. The public names are loaded on first use.
__version__ = "0.1.0"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .finding import Finding
    from .lint import check_source, fix_source
    from .selection import Selection
    from .source import SourceError

# Each public name and the module that defines it; `lint` costs ~0.3 s (libcst), which a warm
# cached run must not pay.
_DEFINED_IN = {
    "Finding": "finding",
    "Selection": "selection",
    "SourceError": "source",
    "check_source": "lint",
    "fix_source": "lint",
}


def __getattr__(name: str) -> object:
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # loaded at start-up: see above

    return getattr(importlib.import_module(f".{module}", __name__), name)


__all__ = ["Finding", "Selection", "SourceError", "__version__", "check_source", "fix_source"]
