"""Summaries of the project's own functions: what a call of a nested def, a function of the file or
of the project, or a method of `self` gives and leaves, in terms of its parameters, and that summary
put in the caller's terms at each call.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

import libcst as cst

from ..facts.policy import SUMMARY_DEPTH
from ..facts.tensor_ops import AliasKind
from ..library import Definition, Library
from .captures import _kept
from .statements import _MIN_WORK, _WORK_PER_STATEMENT, Work, _Loop, _parameters, _statement_count
from .values import (
    IMMUTABLE,
    Alias,
    Env,
    Field,
    Free,
    Item,
    Param,
    Site,
    Token,
    Val,
    _leaves,
    dotted_name,
    join_all,
    join_envs,
)

# The name a place (`self.vals[...]`, `stats["loss"]`) is rooted at.
_HEAD = re.compile(r"[A-Za-z_]\w*")


class SummaryCost(NamedTuple):
    """What computing a library function's summary cost (`analysis.Work`), without the helper
    summaries it used (`used`, ids of their defs: charged on their own), and how many lines it spans."""

    statements: int
    aliases: int
    copied: int
    lines: int
    used: frozenset[tuple[int, Library]]  # (id of the def, its library)


@dataclasses.dataclass(frozen=True)
class Summary:
    """What a call of `node` gives, in terms of its parameters' storage tokens, and what it leaves in
    the names rooted at its parameters (`report` after `report[k] = v`, `self.last`)."""

    params: tuple[str, ...]
    node: cst.FunctionDef
    returns: Val
    effects: dict[str, Val]
    # What it keeps of its parameters where it outlives the call (`self.vals.append(v)`): the place,
    # rooted at a parameter or a global, and the aliases of parameters kept there.
    kept: tuple[tuple[str, Val], ...] = ()
    # The parameters it shows to be tensors (`value.detach()`, a tensor-only method, whatever its module imports):
    # what a caller passes for them is a tensor, its loss too (`kept(loss)` in a module never importing torch).
    tensors: tuple[str, ...] = ()


class Summaries:
    """Mixin of `ModuleAnalysis`: a call's summary, computed once per def, and applied at each call."""

    def _call_summarised(self, func: cst.BaseExpression, node: cst.Call, env: Env) -> Val | None:
        """A call of a nested def, a function of this file, a method of `self`, or a function imported
        from the project: what its summary says (None: not one of those, or no summary)."""
        receiver: tuple[Val, str | None] | None = None
        summary: Summary | None = None
        if isinstance(func, cst.Name) and func.value in env:
            nested = env[func.value].function
            if nested is not None:
                summary = self._summary(nested, env)
        elif self.library is not None and len(self._summary_stack) < SUMMARY_DEPTH:
            if isinstance(func, cst.Name):
                definition = self.library.function(func.value)
            elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
                definition = self.library.method(func.attr.value, self._self_class())
                receiver = (self._eval(func.value, env), "self")
            elif isinstance(func, cst.Attribute) and _is_self_attribute(func.value):
                self._keep_as_summarised(func, node, env)
                return None
            else:
                definition = None
            if definition is not None:
                summary = self._library_summary(definition)
        if summary is None:
            return None
        return self._apply_summary(summary, node, receiver, env)

    def _keep_as_summarised(self, func: cst.Attribute, node: cst.Call, env: Env) -> None:
        """`self.meter.update(v)`, the meter an instance of a class of the project: what the method
        keeps of its arguments is captured here. Its value and its effects stay those of a method
        call (`_call_method`): only the captures are taken from its summary."""
        assert self.library is not None and isinstance(func.value, cst.Attribute)
        definition = self.library.attribute_method(self._self_class(), func.value.attr.value, func.attr.value)
        if definition is None:
            return
        # Summarised only when given a kept value (`.detach()`, a conversion, `.data`): a method
        # detaching what it is given is not followed, as the triage does not follow it.
        params = _parameters(definition.node.params)
        receiver = (self._eval(func.value, env), dotted_name(func.value))
        bound = self._bound(
            Summary(tuple(p.name.value for p in params), definition.node, Val(), {}), node, receiver, env
        )
        if any(_kept(a, data=True) for val, _ in bound.values() for _, leaf in _leaves(val) for a in leaf.aliases):
            summary = self._library_summary(definition)
            if summary is not None and summary.kept:
                self._apply_kept(summary, bound, node, env)

    def _self_class(self) -> str | None:
        """The class `self` is an instance of where the code runs: the summarised method's, or the one
        around the function being checked (None: not known, so a method name must be unique)."""
        if self._owner is not None or self.library is None or self.line_of is None:
            return self._owner
        unit = self._functions[0] if self._functions else None
        return self.library.class_at(self.line_of(unit.name)) if isinstance(unit, cst.FunctionDef) else None

    def _library_summary(self, definition: Definition) -> Summary | None:
        cache, costs = definition.library.summaries, definition.library.summary_costs
        key = id(definition.node)
        work = self.work
        for used in work.using:
            used.add((key, definition.library))
        if key not in cache:
            cache[key] = None  # recursion: a function calling itself gets no summary of itself
            work.charged.add(key)
            work.allow(definition.lines)
            before, charged_before = (work.statements, work.aliases, work.copied), set(work.charged)
            work.using.append(set())
            analysis = type(self)(definition.module, definition.library)
            analysis.work = work  # one count for the file: its stop depends on the input alone
            analysis._summary_stack = [*self._summary_stack, key]
            analysis._owner = definition.owner
            try:
                cache[key] = analysis._summary(definition.node, {})
            except BaseException:
                del cache[key]  # the library outlives this file's analysis: no placeholder left behind
                raise
            finally:
                used = work.using.pop()
            # Its own cost: what the helpers it charged meanwhile cost is theirs.
            nested = [costs[k] for k in work.charged - charged_before if k in costs]
            costs[key] = SummaryCost(
                work.statements - before[0] - sum(c.statements for c in nested),
                work.aliases - before[1] - sum(c.aliases for c in nested),
                work.copied - before[2] - sum(c.copied for c in nested),
                definition.lines,
                frozenset(used - {(key, definition.library)}),
            )
        elif key not in work.charged:
            self._charge(key, definition.library)
        found = cache[key]
        return found if isinstance(found, Summary) else None

    def _charge(self, key: int, library: Library) -> None:
        """Count a summary computed before (by another file's analysis, say) as if it were computed
        now: its own cost and that of every helper summary it used, each once."""
        work, stack = self.work, [(key, library)]
        while stack:
            current, where = stack.pop()
            cost = where.summary_costs.get(current)
            if current in work.charged or not isinstance(cost, SummaryCost):
                continue
            work.charged.add(current)
            work.allow(cost.lines)
            work.statements += cost.statements
            work.aliases += cost.aliases
            work.copied += cost.copied
            stack.extend(cost.used)

    def _summary(self, node: cst.FunctionDef, closure: Env) -> Summary | None:
        """How `node`'s return value and its effects on its parameters relate to its parameters."""
        key = id(node)
        if key in self._summaries:
            return self._summaries[key]
        self._summaries[key] = None  # recursion-safe: a call back into it is an unknown call
        saved = (self._summarising, self._collected, self._loops, self._paths, self._work_limit, self._kept_here)
        self._summarising, self._collected, self._loops, self._paths, self._kept_here = node, [], [], 1, {}
        self._work_limit = self.work.statements + _WORK_PER_STATEMENT * _statement_count(node) + _MIN_WORK
        env: Env = dict(closure)
        params = self._bind_parameters(node, env)
        initial = {name: env[name] for name in params}

        self._functions.append(node)
        try:
            end = self._exec_block(node.body.body, env)
        finally:
            self._functions.pop()
            collected, kept = self._collected, self._kept_here
            self._summarising, self._collected, self._loops, self._paths, self._work_limit, self._kept_here = saved
        if end is not None:
            collected.append((IMMUTABLE, end))  # falling off the end returns None
        if not collected:
            return None
        returns = join_all([val for val, _ in collected])
        final = join_envs([e for _, e in collected]) or {}
        effects = {
            name: val
            for name, val in final.items()
            if (name in initial and val is not initial[name] and val.items)
            or ("." in name and name.partition(".")[0] in initial)
        }
        tensors = tuple(name for name in params if Param(id(node), name) in self._tensor_tokens)
        summary = Summary(tuple(params), node, returns, effects, tuple(kept.items()), tensors)
        self._summaries[key] = summary
        return summary

    def _apply_summary(
        self, summary: Summary, node: cst.Call, receiver: tuple[Val, str | None] | None, env: Env
    ) -> Val:
        """The call's value, its arguments put in for the summary's parameters; the effects on
        arguments (`report[k] = ...`, `self.last = ...`) applied to the caller's names, and what it
        keeps captured."""
        bound = self._bound(summary, node, receiver, env)
        self._apply_kept(summary, bound, node, env)
        for name in summary.tensors:
            self._tensor_tokens.update(a.token for a in bound.get(name, (Val(), None))[0].aliases)
        # A dict the helper returns holds what the caller takes apart by key (`parts = helper(x)`, then
        # `return parts["loss"], parts["report"]`): what the helper made in it is shown at the call.
        shown = node if summary.returns.container == "dict" else None
        result = self._substitute(summary.returns, bound, node, summary.node, env, shown)
        for name, effect in summary.effects.items():
            head, _, rest = name.partition(".")
            owner = bound.get(head, (None, None))[1]
            if owner is None:
                continue
            new = self._substitute(effect, bound, node, summary.node, env)
            current = env.get(owner)
            if rest and current is not None and current.container == "record" and "." not in rest:
                env[owner] = self._with_item(current, Field(rest), new, strong=False)  # `report.lm = ...` in a helper
                continue
            if rest:
                env[f"{owner}.{rest}"] = new
                continue
            current = env.get(owner)
            if current is not None and (current.container or not current.aliases):
                merged = current if current.container else dataclasses.replace(current, container=new.container)
                for key, item in new.items:
                    merged = self._with_item(merged, key, item, strong=False)
                env[owner] = merged
        return result

    def _bound(
        self, summary: Summary, node: cst.Call, receiver: tuple[Val, str | None] | None, env: Env
    ) -> dict[str, tuple[Val, str | None]]:
        """Each parameter of the summary the call gives: the argument's value and its dotted name."""
        params = list(summary.params)
        bound: dict[str, tuple[Val, str | None]] = {}
        if receiver is not None and params:
            bound[params.pop(0)] = receiver
        position = 0
        for arg in node.args:
            val = self._eval(arg.value, env)
            if arg.keyword is not None:
                bound[arg.keyword.value] = (val, dotted_name(arg.value))
            elif arg.star == "" and position < len(params):
                bound[params[position]] = (val, dotted_name(arg.value))
                position += 1
        return bound

    def _apply_kept(self, summary: Summary, bound: dict[str, tuple[Val, str | None]], node: cst.Call, env: Env) -> None:
        """What the helper keeps of its arguments is captured at the call, where the caller's object
        holding it outlives the caller (`self.meter` of `self.meter.update(v)`, whose `update` does
        `self.vals.append(v)`: kept at `self.meter.vals[...]`), or in a global."""
        for there, val in summary.kept:
            head = _HEAD.match(there)
            if head is None:
                continue
            name, place = head[0], there
            if name in summary.params:
                owner = bound.get(name, (None, None))[1]
                if owner is None or not self._escapes_name(owner.partition(".")[0], env):
                    continue  # an object made by the caller (or not named), which dies with it
                place = owner + there[head.end() :]
            elif not self._escapes_name(name, env):
                continue
            self._capture(place, self._substitute(val, bound, node, summary.node, env), env)

    def _keep_in_summary(self, place: str, val: Val) -> None:
        """While a helper is summarised: `val` is kept at `place`; what it holds of the helper's
        parameters is what a caller's argument keeps there (`Summary.kept`)."""
        assert self._summarising is not None
        function = id(self._summarising)
        aliases = frozenset(
            a
            for _, leaf in _leaves(val)
            for a in leaf.aliases
            if isinstance(a.token, Param) and a.token.function == function
        )
        if aliases:
            before = self._kept_here.get(place)
            self._kept_here[place] = Val(aliases) if before is None else Val(before.aliases | aliases)

    def _substitute(
        self,
        val: Val,
        bound: dict[str, tuple[Val, str | None]],
        call: cst.Call,
        helper: cst.FunctionDef,
        env: Env,
        shown: cst.Call | None = None,
    ) -> Val:
        """A value of the summary in the caller's terms: parameters become the arguments, what the
        helper allocated becomes an allocation at the call (a new one per call site), shown at `shown`
        where a finding names it (None: nowhere in the caller, and so never a finding)."""
        parts = [self._substitute_alias(alias, bound, call, helper, env, shown) for alias in val.aliases]
        if val.container or val.items or val.immutable or not parts:
            items = tuple((k, self._substitute(v, bound, call, helper, env, shown)) for k, v in val.items)
            parts.append(
                Val(
                    container=val.container,
                    items=items,
                    immutable=val.immutable,
                    dtype=val.dtype,
                    length=val.length,
                    tensor=val.tensor,
                )
            )
        return join_all(parts)

    def _substitute_alias(
        self,
        alias: Alias,
        bound: dict[str, tuple[Val, str | None]],
        call: cst.Call,
        helper: cst.FunctionDef,
        env: Env,
        shown: cst.Call | None = None,
    ) -> Val:
        token = alias.token
        if isinstance(token, Param) and token.function == id(helper):
            base = bound.get(token.name, (Val(), None))[0]
            suffix = token.indices
            if not alias.ops and not suffix:
                return base  # passed straight through: the caller's own value, where the caller wrote it
            # The helper took a view or a detach of an argument: the fix copies the argument where the
            # caller passes it (its entry), since the helper's own code may be shared or out of reach.
            derived = frozenset(
                Alias(b.token.indexed(*suffix), b.ops + alias.ops, b.entry, b.fixable) for b in base.aliases
            )
            keeps_dtype = all(op.kind in (AliasKind.DETACH, AliasKind.VIEW) for op in alias.ops)
            tensor = base.tensor or any(op.kind is not AliasKind.VIEW for op in alias.ops)
            same_shape = all(op.kind is AliasKind.DETACH for op in alias.ops)
            dtype, length = base.dtype if keeps_dtype else None, base.length if same_shape else None
            return Val(derived, dtype=dtype, length=length, tensor=tensor)
        if isinstance(token, Item):
            inner = self._substitute_alias(Alias(token.base), bound, call, helper, env, shown)
            if inner.container:
                return inner.item(token.key)
            return Val(frozenset(Alias(Item(b.token, token.key), alias.ops, None, True) for b in inner.aliases))
        if isinstance(token, Free):
            head, _, rest = token.name.partition(".")
            owner = bound.get(head, (None, None))[1]
            if owner is not None and rest and f"{owner}.{rest}" in env:
                return env[f"{owner}.{rest}"]  # `self.last`, set by the caller before the call
            if owner is not None and rest:
                return Val(frozenset({Alias(Free(f"{owner}.{rest}"), alias.ops, None, True)}))
        # Allocated inside the helper (or a global of its module): a new object at each call site,
        # with no expression in the caller to put a copy after (the call at most shows it).
        return Val(frozenset({Alias(Site(id(call), self._passes, token), alias.ops, shown, False)}))

    def _is_summarised_parameter(self, val: Val) -> bool:
        """A parameter of the helper being summarised (never a container of the caller's own)."""
        return (
            self._summarising is not None
            and bool(val.aliases)
            and all(
                isinstance(a.token, Param) and a.token.function == id(self._summarising) and not a.ops
                for a in val.aliases
            )
        )

    # Provided by the other parts of `ModuleAnalysis`.
    _collected: list[tuple[Val, Env]]
    _kept_here: dict[str, Val]  # what the helper being summarised keeps, by place (`Summary.kept`)
    _capture: Callable[[str, Val, Env], None]
    _escapes_name: Callable[[str, Env], bool]
    _functions: list[cst.FunctionDef | cst.Lambda]
    library: Library | None
    line_of: Callable[[cst.CSTNode], int] | None
    _loops: list[_Loop]
    _owner: str | None
    _passes: tuple[int, ...]
    _paths: int
    _summaries: dict[int, Summary | None]
    _summarising: cst.FunctionDef | None
    _summary_stack: list[int]
    _tensor_tokens: set[Token]
    work: Work
    _work_limit: int
    _bind_parameters: Callable[[cst.FunctionDef | cst.Lambda, Env], list[str]]
    _eval: Callable[[cst.BaseExpression, Env], Val]
    _exec_block: Callable[[Sequence[cst.CSTNode], Env | None], Env | None]
    _with_item: Callable[..., Val]


def _is_self_attribute(node: cst.BaseExpression) -> bool:
    """`self.<name>`."""
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"
