"""Call-time guard: refuse (or warn about) a report that shares memory with the backprop tensor.

Memory, not values: two tensors alias when their byte ranges in the same storage overlap,
so ``.detach()``, ``.data`` and views are caught, while a disjoint slice of the same buffer
(``losses[1]`` next to ``losses[0]``) is not. The fast path compares address ranges only;
the exact element-by-element test runs only when the ranges overlap.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar, overload

from ..facts.tensor_ops import AliasKind
from ..rules import RULE_FOR_KIND
from ._deps import require_torch
from .report import render_path, report_tensors

torch = require_torch()
_Tensor = torch.Tensor

OnAlias = Literal["raise", "warn"]
F = TypeVar("F", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True)
class ReportAlias:
    """One tensor in the report that shares storage with the backprop tensor."""

    path: str
    kind: AliasKind

    @property
    def code(self) -> str:
        return RULE_FOR_KIND[self.kind].code

    def __str__(self) -> str:
        rule = RULE_FOR_KIND[self.kind]
        return f"{self.path} shares storage with the backprop tensor ({rule.seen_at_run_time}; {rule.code} {rule.name})"


class ReportAliasError(ValueError):
    """A loss function's report aliases the tensor Megatron rescales in place."""

    def __init__(self, aliases: Sequence[ReportAlias], loss_func_name: str | None = None) -> None:
        self.aliases = list(aliases)
        super().__init__(_message(self.aliases, loss_func_name))


class ReportAliasWarning(UserWarning):
    """The ``on_alias="warn"`` form of ``ReportAliasError``."""


def _message(aliases: Sequence[ReportAlias], loss_func_name: str | None = None) -> str:
    lines = "\n".join(f"  {alias}" for alias in aliases)
    subject = f"the loss function {loss_func_name}" if loss_func_name else "the loss function"
    return (
        f"{subject}'s report aliases its backprop tensor; Megatron rescales that tensor in place "
        f"(/= num_microbatches, *= cp_size) before it reads the report, so these values are rescaled too:\n"
        f"{lines}\nPut a copy in the report: loss.detach().clone()"
    )


def find_report_aliases(outputs: Sequence[Any]) -> list[ReportAlias]:
    """The tensors in the report of ``(loss, report)`` / ``(loss, num_tokens, report)`` that alias ``loss``."""
    if not isinstance(outputs, (tuple, list)) or len(outputs) not in (2, 3):
        raise TypeError("a Megatron loss function returns (loss, report) or (loss, num_tokens, report)")
    loss = outputs[0]
    if not isinstance(loss, _Tensor):
        raise TypeError(f"the first value a loss function returns must be a tensor; got {type(loss).__name__}")
    start, end = _byte_span(loss)
    found = []
    for path, tensor in report_tensors(outputs[-1]):
        other_start, other_end = _byte_span(tensor)
        if other_start < end and start < other_end and _shares_memory(loss, tensor):
            found.append(ReportAlias(render_path(path), _kind(loss, tensor)))
    return found


def check_loss_outputs(
    outputs: Sequence[Any], *, on_alias: OnAlias = "raise", calculate_per_token_loss: bool = False
) -> Sequence[Any]:
    """Return ``outputs`` unchanged, or raise ``ReportAliasError`` / warn if the report aliases the loss.

    With ``calculate_per_token_loss`` (as in your ``TransformerConfig``) a 3-tuple is not checked:
    Megatron does not rescale its loss then.
    """
    return _check(outputs, on_alias, calculate_per_token_loss, stacklevel=3)


def rescaled_by_megatron(outputs: Sequence[Any], calculate_per_token_loss: bool) -> bool:
    """Whether Megatron rescales the loss of these outputs in place: a 2-tuple always, a 3-tuple unless per-token."""
    return not (calculate_per_token_loss and isinstance(outputs, (tuple, list)) and len(outputs) == 3)


def _check(outputs: Sequence[Any], on_alias: OnAlias, calculate_per_token_loss: bool, stacklevel: int) -> Sequence[Any]:
    aliases = find_report_aliases(outputs) if rescaled_by_megatron(outputs, calculate_per_token_loss) else []
    if aliases:
        if on_alias == "raise":
            raise ReportAliasError(aliases)
        # Point the warning at the code that called the loss function.
        warnings.warn(_message(aliases), ReportAliasWarning, stacklevel=stacklevel)
    return outputs


def validate_on_alias(on_alias: str) -> None:
    if on_alias not in ("raise", "warn"):
        raise ValueError(f"on_alias must be 'raise' or 'warn', not {on_alias!r}")


@overload
def guard_loss_func(func: F, *, on_alias: OnAlias = "raise", calculate_per_token_loss: bool = False) -> F: ...
@overload
def guard_loss_func(
    func: None = None, *, on_alias: OnAlias = "raise", calculate_per_token_loss: bool = False
) -> Callable[[F], F]: ...
def guard_loss_func(
    func: F | None = None, *, on_alias: OnAlias = "raise", calculate_per_token_loss: bool = False
) -> F | Callable[[F], F]:
    """Decorate a loss function so every call checks its outputs (``@guard_loss_func`` or ``(on_alias=...)``).

    A ``non_loss_data=True`` call (Megatron's ``collect_non_loss_data``) returns arbitrary data and is
    not checked; nor is a 3-tuple with ``calculate_per_token_loss``, which Megatron does not rescale.
    """
    validate_on_alias(on_alias)

    def decorate(loss_func: F) -> F:
        @functools.wraps(loss_func)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            outputs = loss_func(*args, **kwargs)
            if kwargs.get("non_loss_data"):
                return outputs
            return _check(outputs, on_alias, calculate_per_token_loss, stacklevel=3)

        return guarded  # type: ignore[return-value]

    return decorate if func is None else decorate(func)


def callable_name(func: Any) -> str:
    """``loss_func`` for a function, ``Trainer.loss_func`` for a method, either through ``functools.partial``."""
    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__qualname__", None) or type(func).__qualname__


def _byte_span(tensor: Any) -> tuple[int, int]:
    """``[first byte, last byte + 1)`` of the memory a tensor can touch (strides are never negative)."""
    start = tensor.data_ptr()
    if tensor.is_contiguous():  # the common case, and the only one for a scalar loss
        return start, start + tensor.nbytes
    if tensor.numel() == 0:
        return 0, 0
    extent = 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True))
    return start, start + extent * tensor.element_size()


def _shares_memory(a: Any, b: Any) -> bool:
    # Byte ranges overlap; confirm they are in one storage and, for strided tensors, that
    # some element really overlaps (``x[::2]`` and ``x[1::2]`` share a range, not an element).
    if a.device != b.device or a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False
    if a.is_contiguous() and b.is_contiguous():
        return True
    starts_a, starts_b = _element_starts(a), _element_starts(b)
    width_a, width_b = a.element_size(), b.element_size()
    # Element [x, x + width_a) of a meets [y, y + width_b) of b iff x - width_b < y < x + width_a.
    first_after = torch.searchsorted(starts_b, starts_a - width_b, right=True)
    in_range = first_after < len(starts_b)
    candidates = starts_b[first_after[in_range]]
    return bool((candidates < starts_a[in_range] + width_a).any())


def _element_starts(tensor: Any) -> Any:
    """The sorted start addresses of a tensor's elements."""
    offsets = torch.zeros((), dtype=torch.int64)
    for size, stride in zip(tensor.shape, tensor.stride(), strict=True):
        offsets = offsets.unsqueeze(-1) + torch.arange(size, dtype=torch.int64) * stride
    return torch.unique(offsets.flatten()) * tensor.element_size() + tensor.data_ptr()


def _kind(loss: Any, tensor: Any) -> AliasKind:
    if tensor is loss:
        return AliasKind.SAME
    if (tensor.data_ptr(), tensor.shape, tensor.stride(), tensor.dtype) == (
        loss.data_ptr(),
        loss.shape,
        loss.stride(),
        loss.dtype,
    ):
        return AliasKind.DETACH
    return AliasKind.VIEW
