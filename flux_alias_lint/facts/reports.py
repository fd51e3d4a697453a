"""What a loss function's return and its caller's rescale look like, as both interpreters read them."""

from __future__ import annotations

from .tensor_ops import DETACH_METHODS, MAY_RETURN_SELF_METHODS, TORCH_FUNCTIONS, AliasKind

# `(loss, report)` and `(loss, num_tokens, report)`: the lengths of a returned tuple Megatron reads.
REPORT_LENGTHS = (2, 3)

# The in-place operators a caller (or the function itself) rescales a loss with: `loss *= k`,
# `loss /= n`. Any augmented assignment to a tensor writes into its storage.
AUGMENTED_OPERATORS = ("+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^=", "<<=", ">>=")
# The in-place method an augmented operator is on a tensor, for those whose identity operand
# `tensor_ops.IDENTITY_OPERANDS` gives (`loss *= 1` is `loss.mul_(1)`: no write at all).
AUGMENTED_METHODS = {"+=": "add_", "-=": "sub_", "*=": "mul_", "/=": "div_"}

# The operations code applies to keep a value for later (a metric, a log line): a detach or a conversion
# (`.detach()`, `.cpu()`, `.float()`, `torch.as_tensor`). `.data` and views share storage on purpose
# (a buffer and its parts), and are no such sign (`analysis/captures.py`).
KEEPING_KINDS: frozenset[AliasKind] = frozenset({AliasKind.DETACH, AliasKind.MAY_RETURN_SELF})
KEEPING_NAMES: frozenset[str] = (
    DETACH_METHODS | MAY_RETURN_SELF_METHODS | {name for name, kind in TORCH_FUNCTIONS.items() if kind in KEEPING_KINDS}
)

# The in-place rescales the project index looks for in a caller of a loss function (`loss /= n`,
# `loss.mul_(k)`): what Megatron's schedule does to the returned loss.
RESCALING_OPERATORS = ("*=", "/=")
RESCALING_METHODS = ("div_", "mul_")
