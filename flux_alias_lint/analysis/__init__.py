"""Find loss-function returns whose report can share storage with the backprop tensor.

An abstract interpreter over each function body. Every tensor-like value is described
by the storages it may share (``Alias``): a *token* naming the storage, and the chain of
operations (detach, view, conversion) that led from that storage to the value. Fresh
tensors (arithmetic, ``clone``, unknown calls) get a new token per allocation site, so
a copy never overlaps anything. Containers (dicts, tuples, lists) keep their entries,
so a report built over several statements is known entry by entry. Branches join,
loops run twice, and rebinding a name drops its old aliases: exactly the
flow-sensitivity the rules need.

At each ``return (B, ..., report)`` the aliases of every report leaf are compared with
B's: overlapping tokens mean Megatron's in-place rescale of B shows through the report.

One module per concern, each a mixin of `ModuleAnalysis` (`module.py`): `statements.py`,
`expressions.py`, `calls.py` (builtins and container methods by the rows of `facts.storage`),
`summaries.py` (calls of the project's own functions), `returns.py` (the check at a return),
`captures.py` (FAL005); `values.py` holds what they compute.
"""

from .module import ModuleAnalysis, analyze_module
from .statements import OverBudget, Work
from .values import RawFinding

__all__ = ["ModuleAnalysis", "OverBudget", "RawFinding", "Work", "analyze_module"]
