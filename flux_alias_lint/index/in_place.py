"""Evidence of an in-place caller: a function unpacking a call's `(loss, report)` and rescaling the loss
in place (`handoffs.IN_PLACE_CALLER`, context "in-place-caller")."""

from __future__ import annotations

import ast

from .nodes import body_walk, rescaled_in_place
from .reach import IN_PLACE_CALLER, Reach, Step, shown
from .resolve import Resolver
from .symbols import Symbols


class InPlaceEvidence(Resolver):
    """The functions whose loss a caller rescales in place."""

    def _in_place_evidence(self, module: Symbols, scope: list[ast.AST], function: ast.AST) -> None:
        nodes = list(body_walk(function))
        rescaled = rescaled_in_place(nodes)
        unpacked = [
            (stmt, stmt.targets[0].elts[0].id)
            for stmt in nodes
            if isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Tuple)
            and len(stmt.targets[0].elts) in (2, 3)
            and isinstance(stmt.targets[0].elts[0], ast.Name)
            and isinstance(stmt.value, ast.Call)
        ]
        for assign, name in unpacked:
            line = rescaled.get(name)
            if line is None or line < assign.lineno:
                continue
            callee = assign.value.func
            steps = (
                self._step(module, assign, f"its (loss, report) is unpacked by {function.name}"),
                Step(shown(module.path), line, f"which rescales {name} in place"),
            )
            for value in self._values(module, scope + [function], callee):
                self._reach(value.module.path, value.function, Reach(IN_PLACE_CALLER, (*value.steps, *steps)))
