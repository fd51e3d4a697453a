"""Make a flagged loss function runnable on its own: its code, with stand-ins for what it does not define.

The probe is the function's own source (decorators dropped), executed in a namespace that
holds what the module defines without side effects: its imports, its constant assignments
(`LOSS_DTYPE = torch.float16`), its functions and classes. Every other free name (closure
variables, `self`, helpers it cannot see) gets a stand-in chosen by how the code uses it:
called names return a tensor; names used with non-tensor attributes are objects whose
attributes are tensors; the rest are non-leaf tensors that require grad, like the loss a
closure captures. Parameters without defaults are non-leaf float tensors, as Megatron
passes the model output, so the loss has a gradient to compare before and after a fix.
"""

from __future__ import annotations

import builtins
import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any

import libcst as cst

from ..analysis import dotted_name
from ._deps import require_torch

torch = require_torch()

# Stand-in tensors are float32 with distinct positive values, in the first of these shapes the
# function runs with: [4] for a reduced loss, then [2, 4] for code that reduces over `dim=1`.
SHAPES: tuple[tuple[int, ...], ...] = ((4,), (2, 4))


class ProbeError(Exception):
    """No runnable probe could be built; `str()` says why."""


def _stand_in_tensor(seed: int, shape: tuple[int, ...]) -> Any:
    size = math.prod(shape)
    return ((torch.arange(1, size + 1, dtype=torch.float32) + seed) / size).reshape(shape)


def _stand_in_output(seed: int, shape: tuple[int, ...]) -> Any:
    """Non-leaf and requiring grad, like a model output: in-place ops on it are allowed."""
    return _stand_in_tensor(seed, shape).requires_grad_() * 1.0


class _StandInObject:
    """`self`, `args`, `config`...: attributes are tensors, or callables returning one where called."""

    def __init__(self, name: str, called: frozenset[str], shape: tuple[int, ...]) -> None:
        self._name, self._called, self._shape, self._made = name, called, shape, {}

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if attr not in self._made:
            dotted = f"{self._name}.{attr}"
            value = _stand_in_tensor(len(self._made) + 7, self._shape)
            self._made[attr] = (lambda *a, **k: value * 1.0) if dotted in self._called else value
        return self._made[attr]


class _Namespace(dict):
    """Module globals for the probe: a name it does not hold gets a stand-in on first use."""

    def __init__(self, called: frozenset[str], objects: frozenset[str], shape: tuple[int, ...]) -> None:
        super().__init__()
        self._called, self._objects, self._shape = called, objects, shape

    def __missing__(self, name: str) -> Any:
        # A dict subclass as globals is asked before the builtins are: defer to them first.
        if hasattr(builtins, name):
            return getattr(builtins, name)
        if name in self._called:
            value = _stand_in_tensor(len(self) + 3, self._shape)
            stand_in: Any = lambda *a, **k: value * 1.0  # noqa: E731
        elif name in self._objects:
            stand_in = _StandInObject(name, self._called, self._shape)
        else:
            stand_in = _stand_in_output(len(self) + 3, self._shape)
        self[name] = stand_in
        return stand_in


@dataclasses.dataclass
class Probe:
    func: Callable[..., Any]
    make_args: Callable[[], tuple[list[Any], list[Any]]]  # fresh (args, leaf bases) per run


def _usage(function: cst.CSTNode) -> tuple[frozenset[str], frozenset[str]]:
    """Dotted names the code calls, and names it takes non-tensor attributes of (`args.seq_len`)."""
    called: set[str] = set()
    objects: set[str] = set()

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            name = dotted_name(node.func)
            if name:
                called.add(name)

        def visit_Attribute(self, node: cst.Attribute) -> None:
            name = dotted_name(node.value)
            if name and not hasattr(torch.Tensor, node.attr.value):
                objects.add(name)

    function.visit(Visitor())
    return frozenset(called), frozenset(objects)


def _constant(node: cst.BaseExpression) -> bool:
    """Literals, names and attributes, and containers and arithmetic of them: nothing that calls."""
    if isinstance(node, (cst.BaseNumber, cst.BaseString, cst.Name, cst.Attribute)):
        return True
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return all(_constant(e.value) for e in node.elements)
    if isinstance(node, cst.Dict):
        return all(isinstance(e, cst.DictElement) and _constant(e.key) and _constant(e.value) for e in node.elements)
    if isinstance(node, cst.UnaryOperation):
        return _constant(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return _constant(node.left) and _constant(node.right)
    return False


def _definitions(module: cst.Module) -> Iterator[str]:
    """Module-level statements that define names without running anything heavy."""
    for stmt in module.body:
        defines = isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) or (
            isinstance(stmt, cst.SimpleStatementLine)
            and all(
                isinstance(small, (cst.Import, cst.ImportFrom))
                or (
                    isinstance(small, (cst.Assign, cst.AnnAssign))
                    and small.value is not None
                    and _constant(small.value)
                )
                for small in stmt.body
            )
        )
        if defines:
            yield module.code_for_node(stmt)


def functions(module: cst.Module) -> list[cst.FunctionDef | cst.Lambda]:
    """Every function and lambda, in source order: the same index finds it again in the fixed module."""
    found: list[cst.FunctionDef | cst.Lambda] = []

    class Collector(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            found.append(node)

        def visit_Lambda(self, node: cst.Lambda) -> None:
            found.append(node)

    module.visit(Collector())
    return found


def _is_method(module: cst.Module, function: cst.CSTNode) -> bool:
    classes: list[cst.ClassDef] = []

    class Collector(cst.CSTVisitor):
        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            classes.append(node)

    module.visit(Collector())
    return any(stmt is function for cls in classes for stmt in cls.body.body)


def _positional_params(function: cst.FunctionDef | cst.Lambda) -> list[str]:
    params = function.params
    return [p.name.value for p in (*params.posonly_params, *params.params) if p.default is None]


def build_probe(module: cst.Module, function: cst.FunctionDef | cst.Lambda, shape: tuple[int, ...]) -> Probe:
    """A runnable version of `function` from `module`, fed tensors of `shape`; ProbeError if it cannot be made."""
    called, objects = _usage(function)
    namespace = _Namespace(called, objects, shape)
    for statement in _definitions(module):
        try:
            exec(statement, namespace)
        except Exception:  # a definition the probe may not need (relative import, missing package)
            continue
    if isinstance(function, cst.Lambda):
        code, name = f"__flux_probe__ = ({module.code_for_node(function)})\n", "__flux_probe__"
    else:
        code = module.code_for_node(function.with_changes(decorators=[], leading_lines=[]))
        name = function.name.value
    try:
        exec(compile(code, "<flux-alias-lint probe>", "exec"), namespace)
    except Exception as exc:
        raise ProbeError(f"the function does not run on its own ({type(exc).__name__}: {exc})") from None
    func = dict.__getitem__(namespace, name)
    params = _positional_params(function)
    method = isinstance(function, cst.FunctionDef) and _is_method(module, function) and params
    receiver = params.pop(0) if method else None

    def make_args() -> tuple[list[Any], list[Any]]:
        bases = [_stand_in_tensor(i, shape).requires_grad_() for i in range(len(params))]
        args: list[Any] = [base * 1.0 for base in bases]  # non-leaf, as Megatron's output tensor
        if receiver is not None:
            args.insert(0, _StandInObject(receiver, called, shape))
        return args, bases

    return Probe(func, make_args)
