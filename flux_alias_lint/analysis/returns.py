"""What a returned `(loss, ..., report)` is: which report entries share storage with the loss, how
sure that is, and whether `.clone()` fixes each.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping

import libcst as cst

from ..evidence import declares_no_count
from ..facts.tensor_ops import GRADLESS_DECORATORS
from ..rules import CODE_FOR_KIND
from .statements import _body_statements, _parameters
from .values import (
    _SEVERITY,
    Alias,
    Env,
    Param,
    RawFinding,
    Site,
    Token,
    Val,
    _leaves,
    _overlap,
    _relative_kind,
    made_by_helper,
    render_path,
)


class Returns:
    """Mixin of `ModuleAnalysis`: the check at each return of the function being analysed."""

    def _check_return(self, val: Val, node: cst.BaseExpression | None) -> None:
        if val.container != "seq" or self.array_module:
            return
        keys = [k for k, _ in val.items]
        if keys not in ([0, 1], [0, 1, 2]):
            return
        backprop, report = val.item(0), val.item(keys[-1])
        if backprop.immutable or not backprop.aliases:
            return
        if len(keys) == 3 and self._no_token_count(val.item(1), node):
            return  # this return is no `(loss, num_tokens, report)`; the function's others are checked
        # Without a dict report or evidence that the loss is a tensor, only a caller known to
        # rescale it (the project index's context, applied in lint.py) makes this a finding:
        # Megatron stores whatever the last element is, but `return h, h` in a model is no bug.
        proof_needed = (
            report.container not in ("dict", "record")  # a dataclass or NamedTuple report is one as a dict is
            or not self._may_be_tensor(backprop)
            or self._without_grad()
            or all(a.detached for a in backprop.aliases)  # `out.detach()`: nothing to backpropagate either
        )
        backprop_src = self._backprop_source(node, backprop)
        for path, leaf in _leaves(report):
            if not path and report.container:
                continue  # a report container itself is never rescaled, only what it holds
            for alias in leaf.aliases:
                if self._is_array(alias):
                    continue
                hits = [b for b in backprop.aliases if _overlap(alias, b) and not self._is_array(b)]
                if not hits or alias.entry is None:
                    continue
                leaf_proof_needed = proof_needed
                kind = max((_relative_kind(alias, b) for b in hits), key=_SEVERITY.__getitem__)
                key = (id(alias.entry), render_path(path))
                old = self.findings.get(key)
                finding = RawFinding(
                    CODE_FOR_KIND[kind],
                    alias.entry,
                    key[1],
                    backprop_src,
                    alias.detached,
                    self._suits_a_copy(alias, leaf, backprop),
                    self._functions[-1],
                    leaf_proof_needed,
                    returned=len(keys),
                    made_by_helper=made_by_helper(alias),
                )
                if old is not None:
                    finding = dataclasses.replace(
                        old,
                        code=max(old.code, finding.code),
                        detached=old.detached and finding.detached,  # `.clone()` alone only if every value was detached
                        fixable=old.fixable and finding.fixable,  # one edit must suit every value it may be
                        proof_needed=old.proof_needed and leaf_proof_needed,
                    )
                self.findings[key] = finding

    def _suits_a_copy(self, alias: Alias, leaf: Val, backprop: Val) -> bool:
        """Whether `.clone()` (or `.detach().clone()`) at the alias' entry works on every value that
        can be there: not where some path leaves a literal (`logged = None`, then `logged = loss` in
        a branch), a parameter defaulting to None, or a value not shown to be a tensor (`s = loss if
        scale is None else scale`, `scale` maybe a float)."""
        if not alias.fixable or self._may_be_none(alias):
            return False
        entry = alias.entry
        if isinstance(entry, cst.Name) and entry.value in _literal_bindings(self._functions[-1]):
            return False
        if any(a.entry is entry and self._is_array(a) for a in leaf.aliases):
            return False  # a jax or numpy array has no `.clone()`
        # Another parameter passed through untouched may be anything its caller gives (a float scale).
        return not any(
            isinstance(a.token, Param) and not a.ops and a.token not in self._tensor_tokens
            for a in leaf.aliases
            if a.entry is entry and not any(_overlap(a, b) for b in backprop.aliases)
        )

    def _may_be_none(self, alias: Alias) -> bool:
        """A parameter itself whose default is None (`inputs: Optional[Tensor] = None`): `.clone()`
        on it would raise where the caller left it out."""
        if alias.ops or not isinstance(alias.token, Param) or alias.token.function != id(self._functions[-1]):
            return False
        function = self._functions[-1]
        return any(
            param.name.value == alias.token.name
            and isinstance(param.default, cst.Name)
            and param.default.value == "None"
            for param in _parameters(function.params)
        )

    def _no_token_count(self, middle: Val, node: cst.BaseExpression | None) -> bool:
        """Whether the middle of a returned 3-tuple is shown, on some path, to be no token count (a str,
        a bool, None or a dict): then this return is not Megatron's `(loss, num_tokens, report)`
        (Hugging Face's `_prepare_model_inputs` returns `(inputs, input_name, model_kwargs)`). An int
        can be a count (Megatron before 0.15 divides by it)."""
        if middle.container == "dict":
            return True
        function = self._functions[-1]
        returns = getattr(function, "returns", None)
        if returns is not None and declares_no_count(self.module.code_for_node(returns.annotation)):
            return True
        if not (isinstance(node, cst.Tuple) and len(node.elements) == 3):
            return False
        element = node.elements[1].value
        if _literal_kind(element) not in (None, "number"):
            return True
        # A name bound to a str or a dict somewhere; not to None (`num_tokens = None` before the
        # branches that count is common) nor a bool (`num_tokens = False` on a side path).
        bound = _literal_bindings(function).get(element.value, frozenset()) if isinstance(element, cst.Name) else ()
        return bool({"str", "dict"} & set(bound))

    def _without_grad(self) -> bool:
        """Whether the function returning runs under `@torch.no_grad()` or `@torch.inference_mode()`:
        it has nothing to backpropagate (a sampler, an evaluation helper), so only a caller known to
        rescale its first element in place (Megatron's evaluation does) makes its report a finding."""
        function = self._functions[-1]
        if isinstance(function, cst.Lambda):
            return False
        for decorator in function.decorators:
            node = decorator.decorator
            called = node.func if isinstance(node, cst.Call) else node
            # `@torch.inference_mode(False)` (a mode argument) leaves gradients on.
            switched_off = isinstance(node, cst.Call) and any(
                isinstance(a.value, cst.Name) and a.value.value == "False" for a in node.args
            )
            if self._qualified(called, {}) in GRADLESS_DECORATORS and not switched_off:
                return True
        return False

    def _may_be_tensor(self, val: Val) -> bool:
        """Positive evidence that `val` can be a tensor (see `Val.tensor`), or that a torch operation took it."""
        return val.tensor or any(a.token in self._tensor_tokens for a in val.aliases)

    def _is_array(self, alias: Alias) -> bool:
        """Whether `alias` is known to be a JAX or NumPy array: made by one of their functions and not
        taken into torch since (`torch.from_numpy(a)` is a tensor over the array's memory)."""
        token = alias.token
        return (
            bool(self._array_sites)
            and isinstance(token, Site)
            and token.node in self._array_sites
            and not any(op.label.startswith("torch.") for op in alias.ops)
        )

    def _backprop_source(self, node: cst.BaseExpression | None, backprop: Val) -> str:
        """How the message names the backprop tensor: as written in the return, else where it was last passed."""
        if isinstance(node, cst.Tuple) and node.elements:
            return self.module.code_for_node(node.elements[0].value)
        entries = sorted({self.module.code_for_node(a.entry) for a in backprop.aliases if a.entry is not None})
        return " or ".join(entries) if entries else "the first returned element"

    # Provided by the other parts of `ModuleAnalysis`.
    findings: dict[tuple[int, str], RawFinding]
    _functions: list[cst.FunctionDef | cst.Lambda]
    module: cst.Module
    _tensor_tokens: set[Token]
    array_module: bool
    _array_sites: set[int]
    _qualified: Callable[[cst.BaseExpression, Env], str | None]


def _literal_kind(node: cst.BaseExpression) -> str | None:
    """ "str", "bool", "none", "number" or "dict" for a literal (or a dict display or comprehension)."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return "str"
    if isinstance(node, (cst.Dict, cst.DictComp)):
        return "dict"
    if isinstance(node, cst.BaseNumber):
        return "number"
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return "none" if node.value == "None" else "bool"
    return None


@functools.lru_cache(maxsize=256)
def _literal_bindings(function: cst.FunctionDef | cst.Lambda) -> Mapping[str, frozenset[str]]:
    """The kinds of literal (`_literal_kind`) each name is bound to somewhere in the function
    (`name = "x"`, `a, name = t, None`): on some path, it is no tensor."""
    kinds: dict[str, set[str]] = {}
    for stmt in _body_statements(function):
        if not isinstance(stmt, cst.Assign):
            continue
        for target in stmt.targets:
            pairs = [(target.target, stmt.value)]
            if isinstance(target.target, cst.Tuple) and isinstance(stmt.value, cst.Tuple):
                pairs = list(
                    zip((e.value for e in target.target.elements), (e.value for e in stmt.value.elements), strict=False)
                )
            for name, value in pairs:
                kind = _literal_kind(value)
                if isinstance(name, cst.Name) and kind is not None:
                    kinds.setdefault(name.value, set()).add(kind)
    return {name: frozenset(found) for name, found in kinds.items()}
