"""The alias table against real torch: every listed op really shares storage, and the copies really copy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from flux_alias_lint.facts.tensor_ops import (
    DETACH_ATTRIBUTES,
    DETACH_METHODS,
    DTYPE_OF_METHOD,
    MAY_RETURN_SELF_METHODS,
    TORCH_FUNCTIONS,
    VIEW_ATTRIBUTES,
    VIEW_METHODS,
    AliasKind,
    method_alias_kind,
)

# Arguments that make each op valid on a float32 [2, 4] tensor (a complex one for the complex views).
_ARGS: dict[str, tuple[Any, ...]] = {
    "as_strided": ((2,), (1,)),
    "broadcast_to": ((3, 2, 4),),
    "chunk": (2,),
    "diagonal": (),
    "expand": (3, 2, 4),
    "expand_as": (torch.zeros(3, 2, 4),),
    "hsplit": (2,),
    "vsplit": (2,),
    "dsplit": (1,),
    "movedim": (0, 1),
    "moveaxis": (0, 1),
    "narrow": (1, 0, 2),
    "permute": (1, 0),
    "reshape": (8,),
    "reshape_as": (torch.zeros(8),),
    "select": (0, 1),
    "split": (2, 1),
    "split_with_sizes": ([2, 2], 1),
    "swapaxes": (0, 1),
    "swapdims": (0, 1),
    "tensor_split": (2, 1),
    "transpose": (0, 1),
    "unflatten": (1, (2, 2)),
    "unfold": (1, 2, 1),
    "unsqueeze": (0,),
    "view": (8,),
    "view_as": (torch.zeros(8),),
    "to": (torch.float32,),
    "type": (torch.float32,),
    "type_as": (torch.zeros(1),),
}
# `torch.permute(t, dims)` and `torch.reshape(t, shape)` take a tuple where the methods take varargs.
_FUNCTION_ARGS: dict[str, tuple[Any, ...]] = {"permute": ((1, 0),), "reshape": ((8,),)}
_NEEDS_3D = {"dsplit"}
_NEEDS_COMPLEX = {"adjoint", "view_as_real"}
_NEEDS_REAL_PAIRS = {"view_as_complex"}
_SPARSE_ONLY = {"indices", "values"}  # views of a sparse tensor's parts: no dense equivalent to run
_DEVICE_ONLY = {"cuda"}  # needs a GPU


def _sample(name: str) -> torch.Tensor:
    if name in _NEEDS_3D:
        return torch.arange(8.0).reshape(2, 2, 2)
    if name in _NEEDS_COMPLEX:
        return torch.arange(8.0).reshape(2, 4).to(torch.complex64)
    if name in _NEEDS_REAL_PAIRS:
        return torch.arange(8.0).reshape(4, 2)
    return torch.arange(8.0).reshape(2, 4)


def _tensors(result: Any) -> list[torch.Tensor]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _shares_storage(base: torch.Tensor, result: Any) -> bool:
    base_ptr = base.untyped_storage().data_ptr()
    return all(t.untyped_storage().data_ptr() == base_ptr for t in _tensors(result))


def _check(name: str, call: Callable[[torch.Tensor], Any]) -> None:
    base = _sample(name)
    assert _shares_storage(base, call(base)), f"{name} did not share storage with its input"


@pytest.mark.parametrize("name", sorted(VIEW_METHODS - _SPARSE_ONLY))
def test_view_methods_share_storage(name: str) -> None:
    assert method_alias_kind(name) is AliasKind.VIEW
    _check(name, lambda t: getattr(t, name)(*_ARGS.get(name, ())))


@pytest.mark.parametrize("name", sorted(VIEW_ATTRIBUTES))
def test_view_attributes_share_storage(name: str) -> None:
    base = torch.arange(8.0).reshape(2, 4).to(torch.complex64) if name in ("H", "mH", "real", "imag") else None
    base = base if base is not None else _sample(name)
    assert _shares_storage(base, getattr(base, name))


@pytest.mark.parametrize("name", sorted(DETACH_METHODS | DETACH_ATTRIBUTES))
def test_detach_shares_storage(name: str) -> None:
    base = _sample(name).requires_grad_() * 1.0
    result = getattr(base, name)
    result = result() if callable(result) else result
    assert _shares_storage(base, result) and not result.requires_grad


@pytest.mark.parametrize("name", sorted(MAY_RETURN_SELF_METHODS - _DEVICE_ONLY))
def test_conversions_return_self_when_nothing_converts(name: str) -> None:
    base = _sample(name).to(getattr(torch, DTYPE_OF_METHOD.get(name, "float32")))  # `.half()` of a half tensor
    assert getattr(base, name)(*_ARGS.get(name, ())) is base


@pytest.mark.parametrize("name", sorted(TORCH_FUNCTIONS))
def test_torch_functions_share_storage(name: str) -> None:
    args = _FUNCTION_ARGS.get(name, _ARGS.get(name, ()))
    _check(name, lambda t: getattr(torch, name)(t, *args))


@pytest.mark.parametrize(
    "copy",
    [
        lambda t: t.clone(),
        lambda t: t.detach().clone(),
        lambda t: torch.cat([t]),
        lambda t: torch.stack([t]),
        lambda t: t * 1,
        lambda t: t + 0,
        lambda t: t[[0, 1]],  # advanced indexing
        lambda t: t.to(torch.bfloat16),  # a real conversion
        lambda t: t.new_tensor(t),
    ],
)
def test_operations_the_table_leaves_out_copy(copy: Callable[[torch.Tensor], torch.Tensor]) -> None:
    base = _sample("")
    assert not _shares_storage(base, copy(base))
