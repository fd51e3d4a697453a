"""Which parameter of a loss function Megatron fills with the model's output, read from the forward step that
hands the function over.

Megatron calls the loss function with one argument, the output tensor: ``loss_func(output_tensor)``. A forward
step that binds some arguments first hands over ``partial(loss_func, mask)`` (the output goes to the first
parameter the partial leaves: ``loss_func(mask, output_tensor)``), ``partial(loss_func, data=batch)`` (to
``logits`` of ``loss_func(logits, data)``), or a lambda (``lambda out: loss_func(mask, out)``: where the lambda
puts its parameter). The analysis records the forward step's ``return output, handed`` as a step of the
finding's chain (index/schedule.py); this reads ``handed`` there.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import os

from ..finding import Finding
from ..index.nodes import last_name

HANDED_OVER = "returned as the loss function by "  # the chain's step at the forward step's return (schedule.py)


@dataclasses.dataclass(frozen=True)
class Handover:
    """How the forward step binds the loss function's other arguments before Megatron calls it."""

    positional: int = 0  # leading positional arguments bound (a partial's)
    keywords: frozenset[str] = frozenset()  # keyword arguments bound
    output: str | int | None = None  # a lambda's: the parameter name or position it passes Megatron's argument to

    def parameter(self, names: list[str]) -> str | None:
        """The one of the loss function's positional parameters ``names`` (``self`` left out) Megatron fills."""
        if isinstance(self.output, str):
            return self.output if self.output in names else None
        if isinstance(self.output, int):
            return names[self.output] if self.output < len(names) else None
        free = [name for name in names[self.positional :] if name not in self.keywords]
        return free[0] if free else None


def handover(finding: Finding) -> Handover | None:
    """How the forward step in ``finding``'s chain hands the function to Megatron; None where the chain has no
    such step or its expression cannot be read (then nothing is known of which parameter is the output)."""
    step = next((s for s in finding.reached_by if s.what.startswith(HANDED_OVER)), None)
    if step is None:
        return None
    tree = _tree(step.path if os.path.isabs(step.path) else os.path.abspath(step.path))
    if tree is None:
        return None
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            returned = node.value if isinstance(node, ast.Return) and node.lineno == step.line else None
            if isinstance(returned, ast.Tuple) and len(returned.elts) == 2:
                return _read(_bound_value(function, returned.elts[1], node.lineno))
    return None


def _bound_value(function: ast.AST, handed: ast.expr, line: int) -> ast.expr:
    """``handed``, or, for a name, the last value the function assigns to it before ``line``."""
    if not isinstance(handed, ast.Name):
        return handed
    values = [
        node.value
        for node in ast.walk(function)
        if isinstance(node, ast.Assign)
        and node.lineno < line
        and any(isinstance(t, ast.Name) and t.id == handed.id for t in node.targets)
    ]
    return max(values, key=lambda v: v.lineno) if values else handed


def _read(handed: ast.expr) -> Handover | None:
    if isinstance(handed, ast.Call) and last_name(handed.func) == "partial" and handed.args:
        if any(isinstance(a, ast.Starred) for a in handed.args) or any(k.arg is None for k in handed.keywords):
            return None  # `partial(f, *args)`: how many it binds is not in the source
        return Handover(len(handed.args) - 1, frozenset(k.arg for k in handed.keywords if k.arg))
    if isinstance(handed, ast.Lambda) and isinstance(handed.body, ast.Call) and handed.args.args:
        given = handed.args.args[0].arg
        for position, argument in enumerate(handed.body.args):
            if isinstance(argument, ast.Name) and argument.id == given:
                return Handover(output=position)
        for keyword in handed.body.keywords:
            if isinstance(keyword.value, ast.Name) and keyword.value.id == given and keyword.arg:
                return Handover(output=keyword.arg)
        return None
    return Handover()  # the function itself: Megatron's argument is its first


@functools.cache
def _tree(path: str) -> ast.Module | None:
    try:
        with open(path, "rb") as file:
            return ast.parse(file.read())
    except (OSError, SyntaxError, ValueError):
        return None
