"""What an annotation says a value is: a Python number or string (never a tensor), a tensor, or unknown.

One reading of annotations for both parsers: the analysis (libcst) passes an annotation's text, the
symbol table (`index/symbols.py`, CPython's `ast`) the return annotations of a whole file's defs, so a
call to a function of the file declared `-> float` is a number even when the triage hands libcst only
the loss function.
"""

from __future__ import annotations

import ast
import enum
import functools


class Declared(enum.Enum):
    IMMUTABLE = "immutable"  # int, float, str, bool, None, and tuples/unions of them: never aliases a tensor
    TENSOR = "tensor"  # torch.Tensor, Optional[Tensor]: evidence that the value is a tensor


_IMMUTABLE_TYPES = frozenset({"str", "int", "float", "bool", "bytes", "complex", "None", "NoneType"})
# Generics of immutables are immutable too: `Tuple[float, ...]`, `tuple[int, int]`, `Optional[str]`, `Union[int, str]`.
_IMMUTABLE_GENERICS = frozenset({"Optional", "Union", "Tuple", "tuple", "FrozenSet", "frozenset", "Literal"})
_TENSOR_TYPES = frozenset({"Tensor", "torch.Tensor", "FloatTensor", "torch.FloatTensor"})


@functools.lru_cache(maxsize=4096)
def declared(annotation: str) -> Declared | None:
    """What the annotation `annotation` (its source text) says; None when it says neither."""
    try:
        node = ast.parse(annotation.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation: "float"
        return declared(node.value) if node.value != annotation else None
    if _immutable(node):
        return Declared.IMMUTABLE
    return Declared.TENSOR if _tensor(node) else None


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return ""


def _immutable(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None or node.value is Ellipsis or isinstance(node.value, (str, int))
    if isinstance(node, (ast.Name, ast.Attribute)):
        return _name(node).rpartition(".")[2] in _IMMUTABLE_TYPES
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _immutable(node.left) and _immutable(node.right)
    if isinstance(node, ast.Subscript) and _name(node.value).rpartition(".")[2] in _IMMUTABLE_GENERICS:
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return all(_immutable(element) for element in inner)
    return False


def _tensor(node: ast.expr) -> bool:
    if isinstance(node, ast.Subscript) and _name(node.value).rpartition(".")[2] in ("Optional", "Union"):
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return any(_tensor(element) for element in inner)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _tensor(node.left) or _tensor(node.right)
    return _name(node) in _TENSOR_TYPES


# What Megatron's `(loss, num_tokens, report)` can never have in the middle: it divides the loss by
# `num_tokens` (or sums it). An `int` can be a count, so only these say "not a loss function".
_NOT_A_COUNT = frozenset({"str", "bool", "bytes", "None", "NoneType", "dict", "Dict", "Mapping", "MutableMapping"})


@functools.lru_cache(maxsize=4096)
def declares_no_count(returns: str) -> bool:
    """Whether a return annotation (its text) declares a 3-tuple whose middle is a str, bool, None
    or dict: `tuple[torch.Tensor, Optional[str], dict[str, Tensor]]` (Hugging Face's generation helpers)."""
    try:
        node = ast.parse(returns.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if not (isinstance(node, ast.Subscript) and _name(node.value).rpartition(".")[2] in ("tuple", "Tuple")):
        return False
    elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else []
    return len(elements) == 3 and _not_a_count(elements[1])


def _not_a_count(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None
    if isinstance(node, ast.Subscript):
        outer = _name(node.value).rpartition(".")[2]
        if outer in ("Optional", "Union"):
            inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return all(_not_a_count(element) for element in inner)
        return outer in _NOT_A_COUNT
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _not_a_count(node.left) and _not_a_count(node.right)
    return _name(node).rpartition(".")[2] in _NOT_A_COUNT
