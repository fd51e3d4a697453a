"""The single source of truth: which torch operations can share storage with their input.

The checker looks operations up here to decide whether a value aliases the backprop
tensor, the fixer uses the kinds to decide what to insert, and the runtime harness
uses the same table to explain a confirmed alias. Anything *not* listed is treated
as producing fresh storage (arithmetic, ``clone``, ``torch.cat``, unknown calls), so
an entry missing here is a missed finding, never a false one.

Sources: PyTorch's "Tensor Views" page (view ops), and the documented
"returns ``self`` if no conversion is needed" behaviour of the conversion methods.
"""

from __future__ import annotations

import enum


class AliasKind(enum.Enum):
    """How a value relates to the storage it came from; ordered by severity of doubt."""

    SAME = "same"  # the very same tensor object (or an in-place op returning it)
    DETACH = "detach"  # .detach(), .data, torch.detach: new tensor object, same storage
    VIEW = "view"  # a view: same storage, other shape/strides
    MAY_RETURN_SELF = "may-return-self"  # a conversion that is a no-op (returns self) when nothing changes

    # Members are singletons: identity hashes in C, where Enum's own hashes the name in Python, and the
    # analysis hashes a kind per op of every alias it builds.
    __hash__ = object.__hash__


# Tensor methods that return a detached tensor sharing storage.
DETACH_METHODS: frozenset[str] = frozenset({"detach", "detach_"})
# Tensor attributes that are a detached alias of the same storage.
DETACH_ATTRIBUTES: frozenset[str] = frozenset({"data"})

# Tensor methods that always (or, for reshape/flatten, usually) return a view.
# PyTorch docs, "Tensor Views", plus reshape/reshape_as/flatten which return a
# view whenever the strides allow it (always for a contiguous loss tensor).
VIEW_METHODS: frozenset[str] = frozenset(
    {
        "adjoint",
        "as_strided",
        "broadcast_to",
        "chunk",
        "diagonal",
        "expand",
        "expand_as",
        "flatten",
        "hsplit",
        "indices",
        "movedim",
        "moveaxis",
        "narrow",
        "permute",
        "ravel",
        "reshape",
        "reshape_as",
        "select",
        "split",
        "split_with_sizes",
        "squeeze",
        "swapaxes",
        "swapdims",
        "t",
        "tensor_split",
        "transpose",
        "unbind",
        "unflatten",
        "unfold",
        "unsqueeze",
        "values",
        "view",
        "view_as",
        "vsplit",
        "dsplit",
    }
)
# Tensor attributes that are views.
VIEW_ATTRIBUTES: frozenset[str] = frozenset({"T", "mT", "H", "mH", "real", "imag"})

# Methods that return ``self`` when no dtype/device/layout change is needed.
MAY_RETURN_SELF_METHODS: frozenset[str] = frozenset(
    {
        "to",
        "type",
        "type_as",
        "float",
        "double",
        "half",
        "bfloat16",
        "cpu",
        "cuda",
        "contiguous",
        "requires_grad_",
    }
)

# `x.to(..., copy=True)`: a conversion that always copies, whatever dtype and device it is given.
COPY_KEYWORD = "copy"
# `torch.zeros(n, dtype=torch.bfloat16)`, `x.to(dtype=...)`: the keyword a dtype is given by.
DTYPE_KEYWORD = "dtype"
# Conversions given their dtype as an argument (`x.to(torch.float16)`, `x.type(torch.float64)`), and
# those given a tensor whose dtype they take (`x.to(other)`, `x.type_as(other)`).
DTYPE_ARGUMENT_METHODS: frozenset[str] = frozenset({"to", "type"})
DTYPE_OF_ARGUMENT_METHODS: frozenset[str] = frozenset({"to", "type_as"})
# Copies with their receiver's dtype (other methods' results are of a dtype not known).
DTYPE_KEEPING_COPIES: frozenset[str] = frozenset({"clone"})
# `torch.stack([a, b])`: a new tensor with one row of dimension 0 per tensor of the list it is given.
STACKING_FUNCTIONS: frozenset[str] = frozenset({"stack"})
# Decorators a function runs without gradients under (`@torch.no_grad()`): it has nothing to backpropagate.
GRADLESS_DECORATORS: frozenset[str] = frozenset(
    {
        "torch.no_grad",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.autograd.grad_mode.no_grad",
        "torch.autograd.grad_mode.inference_mode",
    }
)

# View methods with no ``torch.<name>`` function of the same meaning.
_METHOD_ONLY_VIEWS: frozenset[str] = frozenset(
    {"expand", "expand_as", "indices", "reshape_as", "unfold", "values", "view", "view_as"}
)

# View functions with no method of the same name (`atleast_*` return their input when it has the dims).
_FUNCTION_ONLY_VIEWS: frozenset[str] = frozenset(
    {"view_as_real", "view_as_complex", "atleast_1d", "atleast_2d", "atleast_3d"}
)

# ``torch.<fn>(x, ...)`` functions whose first argument is aliased.
TORCH_FUNCTIONS: dict[str, AliasKind] = {
    "detach": AliasKind.DETACH,
    "as_tensor": AliasKind.MAY_RETURN_SELF,
    "asarray": AliasKind.MAY_RETURN_SELF,
    # The functional spelling of every view method that has one, plus two that are functions only.
    **{name: AliasKind.VIEW for name in (VIEW_METHODS - _METHOD_ONLY_VIEWS) | _FUNCTION_ONLY_VIEWS},
}

# The dtype a conversion method produces, where the method name fixes it.
DTYPE_OF_METHOD: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "bfloat16": "bfloat16",
}

# ``torch.<name>`` spellings of dtypes, canonicalised.
TORCH_DTYPES: dict[str, str] = {
    "float32": "float32",
    "float": "float32",
    "float64": "float64",
    "double": "float64",
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "int64": "int64",
    "long": "int64",
    "int32": "int32",
    "int": "int32",
    "int16": "int16",
    "short": "int16",
    "int8": "int8",
    "uint8": "uint8",
    "bool": "bool",
}

# Methods and builtins whose result is a Python number (immutable: never aliased).
# (`tolist` gives Python numbers in lists.)
NUMBER_METHODS: frozenset[str] = frozenset({"item", "numel", "dim", "ndimension", "nelement", "element_size", "tolist"})
# What gives a size or a count of elements (`x.size(0)`, `x.numel()`, `x.shape[0]`, `len(x)`): a count, never a
# loss (`index/roles.py`: a function returning one first, on some path, is no loss function).
SIZE_METHODS: frozenset[str] = frozenset({"size", "numel", "nelement", "dim", "ndimension"})
SIZE_ATTRIBUTES: frozenset[str] = frozenset({"shape", "ndim"})
SIZE_BUILTINS: frozenset[str] = frozenset({"len"})
# Methods that give a Python value (a str) when called with no arguments: `x.type()`.
NUMBER_WITHOUT_ARGUMENTS: frozenset[str] = frozenset({"type"})
# Methods only a `torch.Tensor` has (numpy, str, list and dict have none of them): a value one of
# them was called on, or that one of them made, is a tensor in any module. In a module that imports
# torch, any call or arithmetic on a value that may be a tensor counts too (see `analysis/calls.py`).
TENSOR_METHODS: frozenset[str] = frozenset(
    {
        "backward",
        "bfloat16",
        "clone",
        "contiguous",
        "cpu",
        "cuda",
        "detach",
        "detach_",
        "element_size",
        "expand",
        "expand_as",
        "float",
        "half",
        "masked_fill",
        "numel",
        "requires_grad_",
        "type_as",
        "unsqueeze",
        "view",
        "view_as",
    }
)


# Alias-table methods that builtins have too (`str.split`, `dict.values`, `range.index`): no evidence
# that their receiver is a tensor.
AMBIGUOUS_METHODS: frozenset[str] = frozenset({"split", "values", "indices", "select", "type"})


# Methods that return a numpy array over the tensor's memory (always, on the CPU). The array has no
# `.clone()`, so the fix copies the tensor before it: `x.detach().cpu().clone().numpy()`.
ARRAY_METHODS: frozenset[str] = frozenset({"numpy"})

# Packages whose functions make arrays, not tensors (`jnp.einsum(...)`, `np.zeros(n)`): what they make is
# never a tensor finding, and gets no `.clone()` (a JAX array is immutable: `x /= k` rebinds it).
ARRAY_LIBRARIES: frozenset[str] = frozenset({"jax", "numpy"})


def torch_function_alias_kind(name: str) -> AliasKind | None:
    """The alias ``torch.<name>(x, ...)`` makes of ``x``: the functions above, and the unbound
    methods ``torch.Tensor.<method>(x, ...)``."""
    if name.startswith("Tensor."):
        return method_alias_kind(name.removeprefix("Tensor."))
    return TORCH_FUNCTIONS.get(name)


def method_alias_kind(name: str) -> AliasKind | None:
    """The alias a tensor method call ``x.name(...)`` produces, or ``None`` for a copy."""
    if name in ARRAY_METHODS:
        return AliasKind.VIEW
    if name in DETACH_METHODS:
        return AliasKind.DETACH
    if name in VIEW_METHODS:
        return AliasKind.VIEW
    if name in MAY_RETURN_SELF_METHODS:
        return AliasKind.MAY_RETURN_SELF
    if is_inplace_method(name):
        return AliasKind.SAME
    return None


def attribute_alias_kind(name: str) -> AliasKind | None:
    """The alias a tensor attribute ``x.name`` is, or ``None`` if it is not a tensor alias."""
    if name in DETACH_ATTRIBUTES:
        return AliasKind.DETACH
    if name in VIEW_ATTRIBUTES:
        return AliasKind.VIEW
    return None


def is_tensor_method(name: str) -> bool:
    """Whether only a tensor has this method: `TENSOR_METHODS`, and PyTorch's in-place `mul_`, `div_`, ..."""
    return name in TENSOR_METHODS or is_inplace_method(name)


# In-place methods that change a tensor's shape, flags or storage pointer, never the values in its
# storage: an alias taken before them (`loss.detach()`) still reads the same numbers.
METADATA_INPLACE_METHODS: frozenset[str] = frozenset(
    {
        "as_strided_",
        "rename_",
        "requires_grad_",
        "resize_",
        "resize_as_",
        "set_",
        "share_memory_",
        "squeeze_",
        "swapaxes_",
        "swapdims_",
        "t_",
        "transpose_",
        "unsqueeze_",
    }
)


# The operand with which each in-place arithmetic method leaves every value as it was: `x.mul_(1)`,
# `x.div_(1)`, `x.add_(0)`, `x.sub_(0)` (given that one operand alone: `div_(1, rounding_mode="floor")`
# floors). Such a write changes nothing an alias reads, so it is no finding and no caller's rescale.
# The augmented operators are these methods on a tensor (`facts.reports.AUGMENTED_METHODS`).
IDENTITY_OPERANDS: dict[str, int] = {"add_": 0, "sub_": 0, "mul_": 1, "div_": 1}


def leaves_unchanged(method: str, operand: object) -> bool:
    """Whether ``x.method(operand)``, its one operand a literal number (``None``: not one), changes no value."""
    return type(operand) in (int, float) and operand == IDENTITY_OPERANDS.get(method)


def writes_in_place(name: str) -> bool:
    """Whether ``x.name(...)`` changes the values in ``x``'s storage (``mul_``, ``copy_``, ``zero_``, ...)."""
    return is_inplace_method(name) and name not in METADATA_INPLACE_METHODS


def is_inplace_method(name: str) -> bool:
    """PyTorch's naming convention: ``mul_``, ``div_``, ``clamp_`` mutate and return ``self``."""
    return name.endswith("_") and not name.startswith("_") and name not in DETACH_METHODS


# torch's module wrappers: calling one runs the wrapped module (its first argument) and returns what that
# module's `forward` returned, the same tensors (DistributedDataParallel, DataParallel and FSDP call
# `self.module(*inputs)`); a model wrapped so is still the model a loop's `model(x)` runs.
MODULE_WRAPPERS: frozenset[str] = frozenset({"DistributedDataParallel", "DataParallel", "FullyShardedDataParallel"})
