"""flux-alias-lint: find and fix loss-function reports that alias Megatron's backprop tensor."""

__version__ = "0.1.0"

from .finding import Finding
from .lint import Selection, check_source, fix_source
from .source import SourceError

__all__ = ["Finding", "Selection", "SourceError", "__version__", "check_source", "fix_source"]
