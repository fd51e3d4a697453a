"""Captures (FAL005): values a function keeps past the statement making them, and the in-place writes
that change them afterwards.

A capture puts a value where it outlives the statement: into a container or onto an object reachable
after the function returns (an attribute of `self`, a parameter, a module global, a closure variable:
`self.losses.append(v)`, `metrics["k"] = v`, `self.last = v`), or into the returned report. What is
captured is kept in the environment itself (under keys no name can be), so branches and loops keep
captures apart as they keep names apart, and a capture made after a write is never changed by it.

Two writers change a capture. An in-place write later in the same function (`x *= k`, `x.mul_(k)`,
see `facts.tensor_ops.writes_in_place`) to storage a captured alias overlaps, unless it writes through
the kept value itself; for a report's entry, a write to the returned loss or an alias of it, or, for an
entry kept with a detach or a conversion, any write in a loss function (`_returns_a_loss`, else only
where a host's call proves it) that does not go through the report's own entries (those are the report
being updated, as a data transform crops the target it returns). And the rescale of the returned loss
by whoever calls the function (only a finding where the project shows Megatron or an in-place caller
doing it: `proof_needed`). The returned loss is the first element of a returned `(loss, report)`, or
a bare returned value, which only a reach of its own proves rescaled (`whole_return`: a loss function
returning that value as its loss, `index.handoffs.RETURNED_AS_THE_LOSS`). Copies (`.clone()`, `.item()`, arithmetic) have storage of
their own, and rebinding a name is no write, so neither ever reaches a capture.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ..facts.reports import AUGMENTED_METHODS, KEEPING_KINDS
from ..facts.storage import CONTAINER_METHODS, Updates
from ..facts.tensor_ops import DETACH_ATTRIBUTES, AliasKind, leaves_unchanged
from ..rules import CAPTURE_CODE
from .values import (
    Alias,
    Env,
    Free,
    Item,
    Key,
    Param,
    RawFinding,
    Site,
    Token,
    Val,
    _leaves,
    _overlap,
    _relative_kind,
    dotted_name,
    join,
    render_path,
)

CAPTURED = "<captured>"  # env key: the aliases kept in places that outlive the function
WRITTEN = "<written>"  # env key: report entries an in-place write changed after they were stored


class CaptureTracking:
    """Mixin of `ModuleAnalysis`: the hooks its statements call when a value is captured
    (`_capture`), when storage is written in place (`_written`), and at a return (`_captures_at_return`)."""

    def _init_captures(self) -> None:
        self._places: dict[Alias, str] = {}  # where each captured alias is kept (`self.losses[...]`)
        # A report entry in WRITTEN -> the writes changing it, in order, each with the storage it wrote.
        self._writes: dict[Alias, dict[int, tuple[cst.CSTNode, frozenset[Alias]]]] = {}
        self._closure_names: dict[int, frozenset[str]] = {}  # per nested def: the closure variables it uses

    def _escapes(self, target: cst.BaseExpression, env: Env) -> bool:
        """Whether the object `target` names (`self.x`, `metrics`, `LOG[k]`) is reachable after the
        function returns: a module global, a closure variable, a parameter or something read from one."""
        while isinstance(target, (cst.Attribute, cst.Subscript, cst.Call)):
            if isinstance(target, cst.Call):  # `LOG.setdefault(k, [])`: the entry `LOG` holds from then on
                holder = entry_holder(target)
                if holder is None:
                    return False
                target = holder
                continue
            target = target.value
        return isinstance(target, cst.Name) and self._escapes_name(target.value, env)

    def _escapes_name(self, name: str, env: Env) -> bool:
        """Whether the object the name `name` holds is reachable after the function returns."""
        if name not in env:
            return True  # a module global (or a builtin, which nothing stores into)
        function = self._functions[-1]
        if name in self._closure_names.get(id(function), frozenset()):
            return True
        return any(isinstance(a.token, (Param, Free)) and not a.ops for a in env[name].aliases)

    def _enter_function(self, node: cst.FunctionDef | cst.Lambda, closure: Env, params: list[str]) -> None:
        """Note the closure variables of a nested def: the enclosing names it reads and never rebinds."""
        if closure and isinstance(node, cst.FunctionDef):
            rebound = self._rebound_names(node)
            names = frozenset(closure) - {CAPTURED, WRITTEN} - set(params) - rebound
            self._closure_names[id(node)] = names

    def _capture(self, place: str, val: Val, env: Env) -> None:
        """`val` is now kept at `place` (as shown in messages)."""
        if self._summarising is not None:
            self._keep_in_summary(place, val)
            return
        aliases = frozenset(
            a for _, leaf in _leaves(val) for a in leaf.aliases if a.entry is not None and _kept(a, data=True)
        )
        if not aliases:
            return
        for alias in aliases:
            self._places.setdefault(alias, place)
        env[CAPTURED] = join(env[CAPTURED], Val(aliases)) if CAPTURED in env else Val(aliases)

    def _written(self, written: Val, node: cst.CSTNode, env: Env) -> None:
        """`node` writes in place the storage of `written`: every capture overlapping it changes."""
        if self._summarising is not None or not written.aliases or not self._may_be_tensor(written):
            return
        if _leaves_unchanged(node, self.module):
            return  # `loss *= 1`, `loss.add_(0)`: no value changes
        captured = env.get(CAPTURED)
        for alias in captured.aliases if captured is not None else ():
            if not _kept(alias):
                continue  # `.data` kept and written here: a buffer shared on purpose
            # Written through the captured value itself or a part of it (`d = loss.detach(); log.append(d);
            # d *= k`, `target["boxes"] = boxes.detach(); target["boxes"][:, 0::2] -= left`): on purpose.
            if any(
                _overlap(alias, w) and _relative_kind(alias, w) is not AliasKind.SAME and not _through(w, alias)
                for w in written.aliases
            ):
                self._capture_finding(alias, self._places[alias], node, proof_needed=False, tensor=True)
        # A write through the container holding the entry (`report[k] += v`) is the container's own
        # update, as a write through a kept value is: it marks the entries of every other container.
        target = None
        if isinstance(node, cst.AugAssign):
            target = node.target
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            target = node.func.value  # `report[k].mul_(v)`
        through = dotted_name(target.value) if isinstance(target, cst.Subscript) else None
        marked = frozenset(
            a
            for name, val in env.items()
            if val.container and name not in (CAPTURED, WRITTEN, through)
            for _, leaf in _leaves(val)
            for a in leaf.aliases
            if a.entry is not None and not _allocated_at_entry(a) and any(_overlap(a, w) for w in written.aliases)
        )
        if marked:
            for alias in marked:
                writes = self._writes.setdefault(alias, {})
                before = writes.get(id(node))  # a loop's passes: the storage every pass wrote
                writes[id(node)] = (node, written.aliases if before is None else before[1] | written.aliases)
            env[WRITTEN] = join(env[WRITTEN], Val(marked)) if WRITTEN in env else Val(marked)

    def _captures_at_return(self, val: Val, node: cst.BaseExpression | None, env: Env) -> None:
        """At `return (loss, ..., report)`: report entries an in-place write of `loss` changed after they
        were stored, and captures of `loss` that whoever rescales the returned loss changes. At `return
        loss` (no container): the captures of `loss`, for a function that another returns as its loss."""
        if self._summarising is not None:
            return
        if not val.container:
            self._captures_of_loss(val, node, env, whole_return=True)
            return
        if val.container == "dict":
            self._captures_of_entries(val, node, env)
            return
        keys: list[Key] = [k for k, _ in val.items]
        if val.container != "seq" or keys not in ([0, 1], [0, 1, 2]):
            return
        backprop, report = val.item(0), val.item(keys[-1])
        written = env.get(WRITTEN)
        # A report is a dict or a record (as for FAL001-FAL004): a returned pair of lists is no report.
        if written is not None and report.container in ("dict", "record"):
            entries: dict[tuple, list[Alias]] = {}  # the report's entries by their storage token
            for _, leaf in _leaves(report):
                for a in leaf.aliases:
                    entries.setdefault(tuple(a.token), []).append(a)
            loss_function: bool | None = None  # asked once, of the first entry a write does not reach through the loss
            for path, leaf in _leaves(report):
                for alias in leaf.aliases & written.aliases:
                    write = _write_to(self._writes[alias], backprop)
                    proof_needed = False
                    if write is None and _kept(alias, data=True):
                        # Another tensor the kept entry shares storage with: a bug in a loss function only,
                        # and only where the write does not go through the report's own entries.
                        write, storage = _write_past(self._writes[alias], entries)
                        if write is not None and loss_function is None:
                            loss_function = self._returns_a_loss(backprop, report)
                        # A write to what the caller handed in (a transform's input) needs a host's call too.
                        proof_needed = not loss_function or _handed_in(Val(storage))
                    if write is not None:
                        self._capture_finding(alias, render_path(path), write, proof_needed=proof_needed, tensor=True)
        self._captures_of_loss(backprop, node, env, whole_return=False)

    def _returns_a_loss(self, backprop: Val, report: Val) -> bool:
        """Whether `return backprop, report` is a loss function's: a tensor with a gradient and a report the
        function made, each of its own making. A data transform hands back what it was given (`return image,
        target` after cropping `target["boxes"]`), and so is a loss function only where a host calls it as one
        (the finding's `proof_needed`)."""
        return (
            self._may_be_tensor(backprop)
            and not self._without_grad()
            and not all(a.detached for a in backprop.aliases)
            and not _handed_in(backprop)
            and not _handed_in(report)
        )

    def _captures_of_loss(
        self, backprop: Val, node: cst.BaseExpression | None, env: Env, *, whole_return: bool
    ) -> None:
        """The captures sharing storage with `backprop`, the loss a caller may rescale once this returns."""
        captured = env.get(CAPTURED)
        if captured is None or backprop.immutable:
            return
        tensor = self._may_be_tensor(backprop)
        source = self._backprop_source(node, backprop)
        for alias in captured.aliases:
            if any(_overlap(alias, b) for b in backprop.aliases):
                self._capture_finding(
                    alias,
                    self._places[alias],
                    None,
                    proof_needed=True,
                    tensor=tensor,
                    loss=source,
                    whole_return=whole_return,
                )

    def _captures_of_entries(self, returned: Val, node: cst.BaseExpression | None, env: Env) -> None:
        """At `return {"total": total, "ce": ce}`: the captures sharing storage with an entry of the returned dict,
        each with the keys of the entries it shares. A host that takes one entry as its loss and rescales it in
        place (`facts.hosts.Host.entry`: Composer's `'total'`) proves the finding; nothing else does."""
        captured = env.get(CAPTURED)
        if captured is None:
            return
        entries = [(k, v) for k, v in returned.items if isinstance(k, str) and not v.immutable]
        for alias in captured.aliases:
            keys = tuple(k for k, v in entries if any(_overlap(alias, b) for b in v.aliases))
            if not keys:
                continue
            value = returned.item(keys[0])
            self._capture_finding(
                alias,
                self._places[alias],
                None,
                proof_needed=True,
                tensor=self._may_be_tensor(value),
                loss=_entry_source(self.module, node, keys[0]) or self._backprop_source(None, value),
                entries=keys,
            )

    def _capture_finding(
        self,
        alias: Alias,
        place: str,
        write: cst.CSTNode | None,
        *,
        proof_needed: bool,
        tensor: bool,
        loss: str = "",
        whole_return: bool = False,
        entries: tuple[str, ...] = (),
    ) -> None:
        """`write`: the statement or call writing in place, None for the rescale of the returned `loss`;
        `tensor`: the written value is shown to be a tensor (the fix, `.clone()`, needs one)."""
        assert alias.entry is not None
        if self.array_module or self._is_array(alias):
            return  # a JAX or NumPy array: no tensor, and `x /= k` on a JAX array rebinds
        key = (id(alias.entry), "captured " + place)
        old = self.findings.get(key)
        if old is not None and (proof_needed or not old.proof_needed):
            return  # a write in the function itself is the better evidence: it holds whoever calls
        # (A capture returned both bare and in a tuple keeps the first return's kind: real code has one.)
        self.findings[key] = RawFinding(
            CAPTURE_CODE,
            alias.entry,
            place,
            loss,
            True,  # the fix is `.clone()`: the capture keeps its own copy (and a graph, if it had one)
            alias.fixable and tensor,
            self._functions[-1],
            proof_needed,
            write,
            whole_return,
            entries=entries,
        )

    # Provided by `ModuleAnalysis`.
    module: cst.Module
    findings: dict[tuple[int, str], RawFinding]
    _functions: list[cst.FunctionDef | cst.Lambda]
    _summarising: cst.FunctionDef | None
    _may_be_tensor: Callable[[Val], bool]
    _is_array: Callable[[Alias], bool]
    array_module: bool
    _backprop_source: Callable[[cst.BaseExpression | None, Val], str]
    _rebound_names: Callable[[cst.FunctionDef], frozenset[str]]
    _keep_in_summary: Callable[[str, Val], None]


def entry_holder(call: cst.BaseExpression) -> cst.BaseExpression | None:
    """`report` of `report.setdefault(k, [])`: the container a call gives the entry of, where the entry
    is held from then on (`facts.storage.Updates.ADDS_DEFAULT`), else None."""
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)):
        return None
    row = CONTAINER_METHODS.get(call.func.attr.value)
    return call.func.value if row is not None and row.updates is Updates.ADDS_DEFAULT else None


def _entry_source(module: cst.Module, node: cst.BaseExpression | None, key: str) -> str:
    """The expression a returned dict display gives for `key` (`total` in `{"total": total}`), else ""."""
    for element in node.elements if isinstance(node, cst.Dict) else ():
        if (
            isinstance(element, cst.DictElement)
            and isinstance(element.key, cst.SimpleString)
            and element.key.evaluated_value == key
        ):
            return module.code_for_node(element.value)
    return ""


def _write_to(writes: dict[int, tuple[cst.CSTNode, frozenset[Alias]]], backprop: Val) -> cst.CSTNode | None:
    """The first of a report entry's writes that writes the returned loss (or an alias of it): only
    that corrupts the report. Writing the entry's own storage otherwise is updating the report (a
    data transform clamping `target["boxes"]` in place and returning `(image, target)`)."""
    for node, written in writes.values():
        if any(_overlap(w, b) for w in written for b in backprop.aliases):
            return node
    return None


def _write_past(
    writes: dict[int, tuple[cst.CSTNode, frozenset[Alias]]], entries: dict[tuple, list[Alias]]
) -> tuple[cst.CSTNode | None, frozenset[Alias]]:
    """The first of a kept report entry's writes that does not go through an entry of the report (the entry
    itself or a part of it: `target["boxes"][:, 0::2] -= left` is the report updated, not a value it kept),
    with the storage it writes. `entries`: the report's, by their storage token."""
    for node, written in writes.values():
        if not all(
            any(_through(w, e) for n in range(1, len(w.token) + 1) for e in entries.get(tuple(w.token[:n]), ()))
            for w in written
        ):
            return node, written
    return None, frozenset()


def _through(written: Alias, held: Alias) -> bool:
    """Whether `written` is `held` or a part of it: the same storage reached by the same operations, and more."""
    n = len(held.ops)
    return (
        written.token[: len(held.token)] == held.token
        and written.ops[:n] == held.ops
        and not any(op.widened for op in held.ops)
    )


def _handed_in(val: Val) -> bool:
    """Whether every storage `val` may be is the caller's or a global's (a parameter, a name the
    function does not bind, an entry of one): nothing of the function's own making."""
    return bool(val.aliases) and all(isinstance(_root(a.token), (Param, Free)) for a in val.aliases)


def _root(token: Token) -> Token:
    while isinstance(token, Item):
        token = token.base
    return token


def _leaves_unchanged(node: cst.CSTNode, module: cst.Module) -> bool:
    """`x *= 1`, `x.add_(0)`: an in-place write given only its identity operand (`IDENTITY_OPERANDS`)."""
    if isinstance(node, cst.AugAssign):
        method = AUGMENTED_METHODS.get(module.code_for_node(node.operator).strip())
        return method is not None and leaves_unchanged(method, _number(node.value))
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and len(node.args) == 1:
        (arg,) = node.args
        return arg.keyword is None and not arg.star and leaves_unchanged(node.func.attr.value, _number(arg.value))
    return False


def _number(node: cst.BaseExpression) -> int | float | None:
    """The int or float a literal is (`1`, `1.0`), else None."""
    if isinstance(node, cst.Integer):
        return int(node.value.replace("_", ""), 0)
    if isinstance(node, cst.Float):
        return float(node.value.replace("_", ""))
    return None


def _allocated_at_entry(alias: Alias) -> bool:
    """A report entry made right where it is stored (`{"buf": torch.zeros(n)}`): writes to it are
    the report's own (`report["buf"].add_(x)`), not a change to a value it kept."""
    return not alias.ops and isinstance(alias.token, Site) and alias.token.node == id(alias.entry)


def _kept(alias: Alias, *, data: bool = False) -> bool:
    """An alias made to keep a value: through `.detach()` or a conversion (`.cpu()`, `.float()`), as
    code keeps a metric. The tensor itself, `.data` and views put in a container or on an object are
    how code shares a buffer on purpose (`self.buf = torch.zeros(n)`, `self.param_data = buffer.data[:n]`);
    `data`: `.data` counts too, as it does for the returned loss (`self.last = loss.data` is a metric
    kept of the loss a caller rescales, whose `.data` no buffer is made of)."""
    return any(
        op.kind in KEEPING_KINDS and (data or op.label.removeprefix(".") not in DETACH_ATTRIBUTES) for op in alias.ops
    )
