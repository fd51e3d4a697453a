"""Statements and control flow: blocks, branches, loops, try, the small statements, binding names and
storing into containers; the walks over a function's statements, and the work bounds.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence

import libcst as cst

from ..facts.storage import KEY_ENTRY_PAIRS_METHOD, KEYS_METHOD
from ..facts.tensor_ops import AliasKind
from .values import (
    IMMUTABLE,
    Env,
    Field,
    Key,
    Op,
    Site,
    Val,
    _as_mapping,
    copies,
    dotted_name,
    join_all,
    join_envs,
)


@dataclasses.dataclass
class Work:
    """What an analysis did, counted independently of the machine: the tests bound these, the
    benchmark prints them beside its seconds, and the analysis stops past `allowed` (`_stop_if_over`).

    One counter for a module analysed and every helper summary it uses: a summary computed
    earlier (by another file's analysis in this process) is charged what it cost then (`charge`),
    so the count, and where it stops, depend on the input alone."""

    statements: int = 0  # statements analysed (a loop body's again on each pass)
    aliases: int = 0  # aliases of the values expressions evaluated to: the analysis' inner loop
    copied: int = 0  # container entries copied by stores into containers (`values.copies`)
    allowed: int = 0  # statements it may analyse before it stops (0: no stop), from the lines it was given
    charged: set[int] = dataclasses.field(default_factory=set)  # the helper summaries counted (ids of their defs)
    # Per summary being computed: the helper summaries it used, (id of the def, its `Library`).
    using: list[set[tuple[int, object]]] = dataclasses.field(default_factory=list)

    def allow(self, lines: int) -> None:
        """Allow the analysis of `lines` more lines of code (the module's, a helper's)."""
        self.allowed += stop_after(lines)


class OverBudget(Exception):
    """The analysis went past its work allowance (`Work.allowed`); raised between two statements,
    never in the middle of an update."""

    def __init__(self, work: Work) -> None:
        super().__init__(f"too complex to analyse (over {work.allowed} statements analysed)")


# Beyond this many paths per function, branches are joined again: no statement is analysed more
# than this many times over.
_MAX_PATHS = 16
_WORK_PER_STATEMENT = 64  # statements analysed per statement of a function before it degrades
_MIN_WORK = 1_024
# The stated bound (docs/internals.md, Reliability): past its budget a function's statements are
# analysed at most (enclosing loops + 1) times more; 2 covers the loops already under way when it
# degrades; 20 is the deepest CPython nests loops. Each statement evaluates values holding at most
# _ALIASES_PER_STATEMENT aliases (see `values._MAX_ALIASES`).
_LOOP_SLACK = 2
_MAX_LOOP_DEPTH = 20
_ALIASES_PER_STATEMENT = 128
# The analysis stops (`OverBudget`) at this many times the stated bound at the deepest nesting: a
# backstop the bounded analysis never reaches (no file of the audited trees comes near it).
_STOP_FACTOR = 4


def bound(lines: int, depth: int) -> int:
    """The stated worst case of statements analysed for `lines` lines of code nesting loops `depth` deep."""
    return _LOOP_SLACK * (_WORK_PER_STATEMENT + depth + 1) * lines + _MIN_WORK


def stop_after(lines: int) -> int:
    """The statements the analysis of `lines` lines may take before it stops."""
    return int(_STOP_FACTOR * bound(lines, _MAX_LOOP_DEPTH))


_UNROLLED_ENTRIES = 16  # a loop over a dict of more entries is analysed as any loop


class _Loop:
    def __init__(self) -> None:
        self.breaks: list[Env | None] = []
        self.continues: list[Env | None] = []


class Statements:
    """Mixin of `ModuleAnalysis`: executing statements, from an environment to the one after them
    (None: no path goes on), and binding and storing values."""

    def _degraded(self) -> bool:
        """Whether the current function has used its work budget (`_WORK_PER_STATEMENT` per
        statement). From then on, branches join at once and a loop analysed before runs its body
        once (see `_widened_loop_state`): each statement is then analysed at most (enclosing
        loops + 1) times more, where nested loops ran their bodies 2**depth times."""
        return self.work.statements > self._work_limit

    def _stop_if_over(self) -> None:
        """Count one statement; past the allowance, stop here, between two statements."""
        work = self.work
        work.statements += 1
        if work.allowed and (work.statements > work.allowed or work.aliases > _ALIASES_PER_STATEMENT * work.allowed):
            raise OverBudget(work)

    # ---- statements ---------------------------------------------------------------

    def _exec_block(self, body: Sequence[cst.CSTNode], env: Env | None) -> Env | None:
        for index, stmt in enumerate(body):
            if env is None:
                return None
            self._stop_if_over()
            if isinstance(stmt, cst.If):
                outcomes = self._if_branches(stmt, env)
            elif isinstance(stmt, (cst.For, cst.While)):
                outcomes = self._loop_outcomes(stmt, env)
            else:
                env = self._exec(stmt, env)
                continue
            branches = [e for e in outcomes if e is not None]
            if len(branches) < 2 or self._paths * len(branches) > _MAX_PATHS or self._degraded():
                env = join_envs(branches)
                continue
            # Path-sensitive up to _MAX_PATHS: the rest of the block runs once per branch (or per
            # iteration count), so `if c: raw = loss.detach(); loss = loss * k` cannot pair this
            # branch's `raw` with the other branch's `loss`.
            self._paths *= len(branches)
            try:
                return join_envs([self._exec_block(body[index + 1 :], branch) for branch in branches])
            finally:
                self._paths //= len(branches)
        return env

    def _exec_suite(self, suite: cst.BaseSuite | None, env: Env | None) -> Env | None:
        if suite is None or env is None:
            return env
        return self._exec_block(suite.body, env)

    def _exec(self, stmt: cst.CSTNode, env: Env) -> Env | None:
        if isinstance(stmt, cst.BaseSmallStatement):  # the body of `def f(x): return ...` on one line
            return self._exec_small(stmt, env)
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if env is None:
                    return None
                env = self._exec_small(small, env)
            return env
        if isinstance(stmt, cst.If):
            return join_envs(self._if_branches(stmt, env))
        if isinstance(stmt, (cst.For, cst.While)):
            return join_envs(self._loop_outcomes(stmt, env))
        if isinstance(stmt, (cst.Try, cst.TryStar)):
            return self._exec_try(stmt, env)
        if isinstance(stmt, cst.With):
            for item in stmt.items:
                val = self._eval(item.item, env)
                if item.asname is not None:
                    self._bind(item.asname.name, val if val.container else self._fresh(item.item), env)
            return self._exec_suite(stmt.body, env)
        if isinstance(stmt, cst.FunctionDef):
            self._analyze_function(stmt, env)
            env[stmt.name.value] = Val(immutable=True, function=stmt)
            return env
        if isinstance(stmt, cst.ClassDef):
            for inner in _functions_in(stmt)[1]:
                self._analyze_function(inner, env)
            env[stmt.name.value] = IMMUTABLE
            return env
        if isinstance(stmt, cst.Match):
            self._eval(stmt.subject, env)
            outs = [self._exec_suite(case.body, dict(env)) for case in stmt.cases]
            return join_envs(outs + [env])
        return env

    def _if_branches(self, stmt: cst.If, env: Env) -> list[Env | None]:
        """The environment after each branch of an if/elif/else chain (None: the branch left)."""
        self._eval(stmt.test, env)
        then = self._exec_suite(stmt.body, _narrowed(stmt.test, dict(env), holds=True))
        otherwise = _narrowed(stmt.test, dict(env), holds=False)
        if isinstance(stmt.orelse, cst.If):
            return [then, *self._if_branches(stmt.orelse, otherwise)]
        return [then, self._exec_orelse(stmt.orelse, otherwise)]

    def _exec_orelse(self, orelse: cst.If | cst.Else | None, env: Env) -> Env | None:
        if orelse is None:
            return env
        if isinstance(orelse, cst.If):  # elif
            return join_envs(self._if_branches(orelse, env))
        return self._exec_suite(orelse.body, env)

    def _loop_exits(self, stmt: cst.For | cst.While, env: Env) -> list[Env | None]:
        """The environments after zero, one, and (approximately) more iterations, and at each break."""
        loop = _Loop()
        self._loops.append(loop)
        exits: list[Env | None] = [env]
        state: Env | None = env
        # Twice: the second pass sees what the first bound (enough for alias chains). Degraded,
        # a loop analysed before (an inner loop on its enclosing loop's second pass) starts
        # from what it reached then and runs once.
        passes = range(2)
        carried = self._carried.get(id(stmt)) if self._degraded() else None
        if carried is not None:
            state, passes = self._widened_loop_state(stmt, env, carried), range(1, 2)
        for loop_pass in passes:
            assert state is not None
            body_env = dict(state)
            self._passes += (loop_pass,)
            if isinstance(stmt, cst.For):
                self._bind(stmt.target, self._element_of(self._eval(stmt.iter, body_env), stmt.iter), body_env)
            else:
                self._eval(stmt.test, body_env)
            end = join_envs([self._exec_suite(stmt.body, body_env), *loop.continues])
            self._passes = self._passes[:-1]
            exits.append(end)
            state = join_envs([state, end])
        self._loops.pop()
        assert state is not None
        self._carried[id(stmt)] = state
        if stmt.orelse:
            exits = [self._exec_orelse(stmt.orelse, dict(e)) if e is not None else None for e in exits]
        return exits + loop.breaks

    def _loop_outcomes(self, stmt: cst.For | cst.While, env: Env) -> list[Env | None]:
        unrolled = self._unrolled_loop_exits(stmt, env) if isinstance(stmt, cst.For) else None
        return unrolled if unrolled is not None else self._loop_exits(stmt, env)

    def _unrolled_loop_exits(self, stmt: cst.For, env: Env) -> list[Env | None] | None:
        """A loop over the entries of a dict whose keys are all known (`for k, v in d.items()`, `for k
        in d`) runs its body once per entry, in order, with the key known in each pass: `d[k] = ...`
        then replaces that entry (`for k, v in report.items(): report[k] = average(v)` leaves no old
        entry behind), and `v` is the entry itself (`if v is None: continue` keeps a None there).
        None: not such a loop."""
        shape = _loop_over_entries(stmt)
        if shape is None or self._degraded():
            return None
        owner, key_name, value_name = shape
        container = env.get(owner)
        if container is None or container.container != "dict" or not 0 < len(container.items) <= _UNROLLED_ENTRIES:
            return None
        if id(stmt) not in self._loop_bodies:
            self._loop_bodies[id(stmt)] = _assigned_in(stmt.body)
        rebound, keyed_stores = self._loop_bodies[id(stmt)]
        if owner in rebound or owner.partition(".")[0] in rebound or (owner, key_name.value) not in keyed_stores:
            return None  # another dict by then, or nothing replaced entry by entry: analysed as any loop
        keys = [key for key, _ in container.items]
        # The entries of unknown keys (None) may come anywhere in the order: their pass is run where
        # it is listed, which is sound only if a pass leaves nothing but its own entry to the next.
        if not all(isinstance(key, (str, int)) for key in keys if key is not None) or (
            None in keys and not rebound <= {key_name.value, *([value_name.value] if value_name else [])}
        ):
            return None
        loop = _Loop()
        self._loops.append(loop)
        state: Env | None = env
        for number, key in enumerate(keys):
            assert state is not None
            body_env = dict(state)
            current = body_env.get(owner)
            self._bind(key_name, IMMUTABLE, body_env)
            if value_name is not None:  # the entry itself, not a read of it: narrowing `v` narrows the entry
                entries = [v for k, v in current.items if k == key] if current is not None else []
                body_env[value_name.value] = entries[0] if entries else Val()
            self._loop_keys[key_name.value] = key if key is not None else _OTHER_KEYS
            self._passes += (number,)
            end = join_envs([self._exec_suite(stmt.body, body_env), *loop.continues])
            self._passes = self._passes[:-1]
            self._loop_keys.pop(key_name.value, None)
            loop.continues.clear()
            state = end
            if state is None:  # every path left the loop (return, break)
                break
        self._loops.pop()
        exits = [state]
        if stmt.orelse and state is not None:
            exits = [self._exec_orelse(stmt.orelse, dict(state))]
        return exits + loop.breaks

    def _widened_loop_state(self, stmt: cst.For | cst.While, env: Env, carried: Env) -> Env:
        """A state one pass of the loop body can start from and still see whatever any number of
        passes would: every name the loop may rebind or mutate holds the join of every value the
        loop mentions (on entry now, or when it was last analysed). Imprecise, but only past the
        work budget, which code written by hand does not reach."""
        mentioned, bound = _loop_names(stmt)
        state = join_envs([env, carried])
        assert state is not None
        values = [state[name] for name in mentioned if name in state]
        if values:
            everything = join_all(values)
            for name in bound:
                state[name] = everything
        return state

    def _exec_try(self, stmt: cst.Try | cst.TryStar, env: Env) -> Env | None:
        body = self._exec_suite(stmt.body, dict(env))
        # An exception can leave at any point: handlers start from before or after the body.
        start = join_envs([env, body])
        outs = []
        for handler in stmt.handlers:
            henv = dict(start) if start is not None else {}
            if handler.name is not None:
                self._bind(handler.name.name, IMMUTABLE, henv)
            outs.append(self._exec_suite(handler.body, henv))
        normal = self._exec_orelse(stmt.orelse, dict(body)) if body is not None and stmt.orelse else body
        result = join_envs([normal, *outs])
        if stmt.finalbody is not None:
            fin_env = dict(result) if result is not None else dict(start or env)
            fin = self._exec_suite(stmt.finalbody.body, fin_env)
            return fin if result is not None else None
        return result

    def _exec_small(self, small: cst.BaseSmallStatement, env: Env) -> Env | None:
        if isinstance(small, cst.Return):
            val = self._eval(small.value, env) if small.value is not None else IMMUTABLE
            if self._summarising is not None and self._functions[-1] is self._summarising:
                self._collected.append((val, dict(env)))
            else:
                self._check_return(val, small.value)
                self._captures_at_return(val, small.value, env)
            return None
        if isinstance(small, cst.Raise):
            if small.exc is not None:
                self._eval(small.exc, env)
            return None
        if isinstance(small, (cst.Break, cst.Continue)):
            if self._loops:
                target = self._loops[-1].breaks if isinstance(small, cst.Break) else self._loops[-1].continues
                target.append(dict(env))
            return None
        if isinstance(small, cst.Assign):
            val = self._eval(small.value, env)
            for target in small.targets:
                self._bind(target.target, val, env)
            return env
        if isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self._bind(small.target, self._eval(small.value, env), env)
            return env
        if isinstance(small, cst.AugAssign):
            self._exec_augassign(small, env)
            return env
        if isinstance(small, cst.Expr):
            self._eval(small.value, env)
            return env
        if isinstance(small, cst.Del):
            targets = (
                [e.value for e in small.target.elements] if isinstance(small.target, cst.Tuple) else [small.target]
            )
            for target in targets:
                if isinstance(target, cst.Subscript):
                    self._delete_item(target, env)
                for name in _target_names(target):
                    env.pop(name, None)
            return env
        return env

    def _exec_augassign(self, small: cst.AugAssign, env: Env) -> None:
        rhs = self._eval(small.value, env)
        current = self._eval(small.target, env)
        if current.immutable:
            # `total += x`: a number stays a number only if x is one; else a fresh tensor.
            new = IMMUTABLE if rhs.immutable else self._fresh(small)
        elif current.container == "seq" and isinstance(small.operator, cst.AddAssign):
            new = self._with_item(current, None, self._element_of(rhs, small.value), strong=False)
        elif current.container == "dict" and isinstance(small.operator, cst.BitOrAssign):
            new = current  # `report |= {...}`: an update
            for key, val in rhs.items:
                new = self._with_item(new, key, val, strong=key is not None)
        else:
            self._written(current, small, env)  # a tensor: `loss /= n` is in place, every alias stays
            return
        self._bind(small.target, new, env)

    # ---- binding ------------------------------------------------------------------

    def _key_of(self, node: cst.BaseExpression, store: bool = False) -> Key | _OtherKeys:
        """The constant an index is, or the key of this pass of an unrolled loop (`d[k]`); in the pass
        over the entries of unknown keys, `_OTHER_KEYS` for a store (a read is of any entry: None)."""
        if isinstance(node, cst.Name) and node.value in self._loop_keys:
            key = self._loop_keys[node.value]
            return key if store or key is not _OTHER_KEYS else None
        return _constant_index(node)

    def _bind(self, target: cst.BaseExpression, val: Val, env: Env) -> None:
        if isinstance(target, cst.Name):
            env[target.value] = val
            self._loop_keys.pop(target.value, None)  # rebound: no longer the pass's key
            return
        if isinstance(target, cst.Attribute):
            owner = dotted_name(target.value)
            current = env.get(owner) if owner is not None else None
            if current is not None and current.container == "record":  # `report.lm = ...`
                env[owner] = self._with_item(current, Field(target.attr.value), val)  # type: ignore[index]
                return
            if self._escapes(target.value, env):  # `self.last = loss.detach()`
                self._capture(self.module.code_for_node(target), val, env)
            dotted = dotted_name(target)
            if dotted is not None:
                for name in [n for n in env if n.startswith(dotted + ".")]:
                    del env[name]
                env[dotted] = val
            return
        if isinstance(target, cst.Subscript):
            self._store_item(target, val, env)
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            starred = any(isinstance(e, cst.StarredElement) for e in elements)
            known = val.container == "seq" and all(isinstance(k, int) for k, _ in val.items)
            for i, element in enumerate(elements):
                if isinstance(element, cst.StarredElement):
                    self._bind(element.value, Val(container="seq", items=((None, self._element_of(val, target)),)), env)
                elif known and not starred and len(val.items) == len(elements):
                    self._bind(element.value, val.item(i), env)
                else:
                    self._bind(element.value, self._element_of(val, target, None if starred else i), env)
            return
        if isinstance(target, cst.StarredElement):
            self._bind(target.value, Val(container="seq", items=((None, self._element_of(val, target)),)), env)

    def _with_item(self, container: Val, key: Key, value: Val, *, strong: bool = True) -> Val:
        """`container.with_item(...)`, counting the entries the store copied (`Work.copied`)."""
        updated = container.with_item(key, value, strong=strong)
        self.work.copied += copies(container, updated)
        return updated

    def _delete_item(self, target: cst.Subscript, env: Env) -> None:
        """`del report["k"]` on a tracked dict drops the entry."""
        owner = dotted_name(target.value)
        index = target.slice[0].slice if len(target.slice) == 1 else None
        key = _constant_index(index.value) if isinstance(index, cst.Index) else None
        current = env.get(owner) if owner is not None else None
        if current is not None and current.container == "dict" and key is not None:
            env[owner] = dataclasses.replace(current, items=tuple((k, v) for k, v in current.items if k != key))

    def _store_item(self, target: cst.Subscript, val: Val, env: Env) -> None:
        """`d[k] = v` on a tracked container updates it; on a tensor it is an in-place write."""
        owner = dotted_name(target.value)
        if owner is None or len(target.slice) != 1:
            return
        current = env.get(owner)
        index = target.slice[0].slice
        key = self._key_of(index.value, store=True) if isinstance(index, cst.Index) else None
        # A helper's parameter, or a value given a string key (`metric = reduce(metric)`, then
        # `metric["lm"] = ...`: a tensor has no string keys), is a mapping from here on.
        if (
            current is not None
            and not current.container
            and (self._is_summarised_parameter(current) or isinstance(key, str))
        ):
            current = _as_mapping(current)
        if (isinstance(key, str) or (current is not None and current.container)) and self._escapes(target, env):
            self._capture(self.module.code_for_node(target), val, env)  # `metrics["loss"] = v`
        if current is None or (current.container is None and current.aliases):
            return
        base = current if current.container else dataclasses.replace(current, container="dict")
        if key is _OTHER_KEYS:  # the pass over the entries of unknown keys: each replaces its own
            env[owner] = dataclasses.replace(base, items=tuple((k, val if k is None else v) for k, v in base.items))
            return
        env[owner] = self._with_item(base, key, val, strong=key is not None)

    def _element_of(self, val: Val, node: cst.BaseExpression, index: int | None = None) -> Val:
        """What iterating or unpacking `val` yields; `index`: the position, when unpacking a fixed count."""
        if val.container:
            if not val.items:
                return Val()
            if val.container == "record":
                return Val()  # a NamedTuple's values, in an order this does not follow
            if val.container == "dict":
                keys = [k for k, _ in val.items]
                return IMMUTABLE if all(isinstance(k, str) for k in keys) else Val()
            return join_all([v for _, v in val.items])
        if val.aliases:
            # Iterating a tensor yields views of it (unbind); unpacking an opaque call result
            # (`loss, report = f()`) yields distinct objects: position `index` is its own storage.
            op = Op(AliasKind.VIEW, "[i]" if index is None else f"[{index}]", unpacked=index is not None)
            aliases = frozenset(a.derive(op, node, index, fixable=False) for a in val.aliases)
            # A method result guessed a tensor (in a module that imports torch) but unpacked into
            # names is a tuple: its parts are no evidence (`loss, metrics = self.model.step()`).
            guessed = index is not None and all(
                not a.ops and isinstance(a.token, Site) and a.token.node in self._guessed_sites for a in val.aliases
            )
            return Val(aliases, dtype=val.dtype, tensor=val.tensor and not guessed)
        return Val(immutable=val.immutable)

    def _rebound_names(self, node: cst.FunctionDef) -> frozenset[str]:
        return frozenset(_assigned_in(node.body)[0])

    # Provided by the other parts of `ModuleAnalysis`.
    _carried: dict[int, Env]
    _collected: list[tuple[Val, Env]]
    _functions: list[cst.FunctionDef | cst.Lambda]
    _guessed_sites: set[int]
    _loop_bodies: dict[int, tuple[set[str], set[tuple[str | None, str]]]]
    _loop_keys: dict[str, Key | _OtherKeys]
    _loops: list[_Loop]
    module: cst.Module
    _passes: tuple[int, ...]
    _paths: int
    _summarising: cst.FunctionDef | None
    work: Work
    _work_limit: int
    _analyze_function: Callable[[cst.FunctionDef | cst.Lambda, Env], None]
    _capture: Callable[[str, Val, Env], None]
    _captures_at_return: Callable[[Val, cst.BaseExpression | None, Env], None]
    _check_return: Callable[[Val, cst.BaseExpression | None], None]
    _escapes: Callable[[cst.BaseExpression, Env], bool]
    _eval: Callable[[cst.BaseExpression, Env], Val]
    _fresh: Callable[..., Val]
    _is_summarised_parameter: Callable[[Val], bool]
    _written: Callable[[Val, cst.CSTNode, Env], None]


class _OtherKeys:
    """The key of an unrolled loop's pass over a dict's entries of unknown keys (see `_store_item`)."""


_OTHER_KEYS = _OtherKeys()


def _loop_over_entries(stmt: cst.For) -> tuple[str, cst.Name, cst.Name | None] | None:
    """(the dict, the key name, the value name) of `for k, v in d.items()`, `for k in d.keys()`, `for k in d`."""
    iterated, target = stmt.iter, stmt.target
    method = KEYS_METHOD  # `for k in d`
    if isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Attribute) and not iterated.args:
        method, iterated = iterated.func.attr.value, iterated.func.value
    owner = dotted_name(iterated)
    if owner is None or method not in (KEY_ENTRY_PAIRS_METHOD, KEYS_METHOD):
        return None
    if method == KEYS_METHOD:
        return (owner, target, None) if isinstance(target, cst.Name) and target.value != owner else None
    elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else ()
    if len(elements) != 2 or not all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in elements):
        return None
    key_name, value_name = elements[0].value, elements[1].value
    assert isinstance(key_name, cst.Name) and isinstance(value_name, cst.Name)
    return (owner, key_name, value_name) if key_name.value != owner else None


def _assigned_in(body: cst.BaseSuite) -> tuple[set[str], set[tuple[str | None, str]]]:
    """(the names a suite rebinds as a whole: `d = ...`, `for d in`, `with ... as d`, not `d[k] = ...`;
    the (owner, key name) of its stores `d[k] = ...`), nested functions' included."""
    rebound: set[str] = set()
    keyed: set[tuple[str | None, str]] = set()
    stack: list[cst.CSTNode] = [body]
    while stack:
        node = stack.pop()
        targets: list[cst.BaseExpression] = []
        if isinstance(
            node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.Del)
        ):
            targets = [node.target]
        elif isinstance(node, cst.AsName):
            targets = [node.name]
        for target in targets:
            rebound.update(_target_names(target))
            if isinstance(target, cst.Subscript) and len(target.slice) == 1:
                index = target.slice[0].slice
                if isinstance(index, cst.Index) and isinstance(index.value, cst.Name):
                    keyed.add((dotted_name(target.value), index.value.value))
        stack.extend(_child_nodes(node))
    return rebound, keyed


def _narrowed(test: cst.BaseExpression, env: Env, *, holds: bool) -> Env:
    """`env` where `test` is `holds`: where `x is None` holds (`x is not None` fails), `x` is None, and
    so is whatever holds the very same value (the entry of an unrolled loop's `v`)."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name)):
        return env
    target = test.comparisons[0]
    is_none = isinstance(target.comparator, cst.Name) and target.comparator.value == "None"
    operator = target.operator
    if not is_none or not isinstance(operator, (cst.Is, cst.IsNot)) or holds != isinstance(operator, cst.Is):
        return env
    val = env.get(test.left.value)
    if val is None or val is IMMUTABLE:
        return env
    for name, held in list(env.items()):
        if held is val:
            env[name] = IMMUTABLE
        elif held.container in ("dict", "seq") and any(item is val for _, item in held.items):
            env[name] = dataclasses.replace(
                held, items=tuple((k, IMMUTABLE if item is val else item) for k, item in held.items)
            )
    return env


def _parameters(params: cst.Parameters) -> Iterator[cst.Param]:
    yield from (*params.posonly_params, *params.params, *params.kwonly_params)
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            yield star


@functools.lru_cache(maxsize=256)
def _loop_names(loop: cst.For | cst.While) -> tuple[frozenset[str], frozenset[str]]:
    """(every name and dotted name in the loop, those it may rebind or mutate)."""
    collector = _NameCollector()
    loop.visit(collector)
    return frozenset(collector.mentioned), frozenset(collector.bound)


class _NameCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.mentioned: set[str] = set()
        self.bound: set[str] = set()

    def _binds(self, target: cst.BaseExpression) -> None:
        self.bound.update(_target_names(target))
        for node in (target, *(e.value for e in getattr(target, "elements", ()))):
            if isinstance(node, (cst.Subscript, cst.Attribute, cst.StarredElement)):
                self._binds(node.value)  # `d[k] = v`, `a.b = v`: the owner changes

    def visit_Name(self, node: cst.Name) -> None:
        self.mentioned.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        dotted = dotted_name(node)
        if dotted is not None:
            self.mentioned.add(dotted)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._binds(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._binds(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._binds(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._binds(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._binds(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._binds(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._binds(node.name)

    def visit_Del(self, node: cst.Del) -> None:
        self._binds(node.target)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.bound.add(node.name.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.bound.add(node.name.value)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute):  # `x.append(v)`, `d.update(...)`: may mutate `x`
            self._binds(node.func.value)


def _body_statements(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Statements (and the blocks holding them) in a function, without descending into expressions."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        for name in ("body", "orelse", "handlers", "finalbody", "cases"):
            child = getattr(current, name, None)
            if isinstance(child, cst.CSTNode):
                stack.append(child)
            elif isinstance(child, tuple | list):
                stack.extend(c for c in child if isinstance(c, cst.CSTNode))


def _statement_count(node: cst.CSTNode) -> int:
    return sum(1 for _ in _body_statements(node))


def _target_names(node: cst.BaseExpression) -> Iterator[str]:
    dotted = dotted_name(node)
    if dotted is not None:
        yield dotted
    elif isinstance(node, (cst.Tuple, cst.List)):
        for element in node.elements:
            yield from _target_names(element.value)


_Function = cst.FunctionDef | cst.Lambda


def _functions_in(root: cst.CSTNode) -> tuple[list[_Function], list[_Function]]:
    """(every function and lambda under `root`, each before those inside it; the outermost ones).

    A walk over dataclass fields: `.children` rebuilds every node it visits, which cost several
    times the parse itself on a large module. Sibling order does not matter to the analysis;
    an enclosing function coming first does (it gives its nested ones their environment).
    """
    everything: list[_Function] = []
    outermost: list[_Function] = []
    stack: list[tuple[cst.CSTNode, bool]] = [(child, False) for child in reversed(_child_nodes(root))]
    while stack:
        node, inside = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            everything.append(node)
            if not inside:
                outermost.append(node)
            inside = True
        stack.extend((child, inside) for child in reversed(_child_nodes(node)))
    return everything, outermost


_NODE_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    names = _NODE_FIELDS.get(type(node))
    if names is None:
        names = _NODE_FIELDS[type(node)] = tuple(f.name for f in dataclasses.fields(node))
    children: list[cst.CSTNode] = []
    for name in names:
        value = getattr(node, name)
        if _is_node(type(value)):
            children.append(value)
        elif type(value) in (tuple, list):
            children.extend(item for item in value if _is_node(type(item)))
    return children


# Nodes that cannot hold a function: whitespace, comments, operators, names and literals. Most of
# a tree is these, so the walk skips them.
_LEAVES = (
    cst.BaseParenthesizableWhitespace,
    cst.Comment,
    cst.EmptyLine,
    cst.Newline,
    cst.TrailingWhitespace,
    cst.Name,
    cst.BaseNumber,
    cst.SimpleString,
    cst.Dot,
    cst.Comma,
    cst.Colon,
    cst.Semicolon,
    cst.AssignEqual,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
    cst.BaseBinaryOp,
    cst.BaseBooleanOp,
    cst.BaseCompOp,
    cst.BaseUnaryOp,
    cst.BaseAugOp,
)


def _constant_index(node: cst.BaseExpression) -> int | str | None:
    if isinstance(node, cst.Integer):
        return int(node.value, 0)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _constant_index(node.expression)
        return -inner if isinstance(inner, int) else None
    if isinstance(node, cst.SimpleString):
        return _string_literal(node.value)
    if isinstance(node, cst.ConcatenatedString):
        left, right = _constant_index(node.left), _constant_index(node.right)
        return left + right if isinstance(left, str) and isinstance(right, str) else None
    return None


@functools.lru_cache(maxsize=4096)
def _string_literal(token: str) -> str | None:
    """The value of one string literal token. Not libcst's `evaluated_value`: `ast.literal_eval`
    leaves a cycle of closures behind at every call, garbage only the collector frees. Nor, for a
    literal without prefix or escape (a report's keys), `ast.parse`: 20,000 keys were 20,000 compiles."""
    quote = token[:3] if token[:3] in ('"""', "'''") else token[:1]
    if quote in ('"', "'", '"""', "'''") and "\\" not in token and "\r" not in token:
        return token[len(quote) : -len(quote)]
    value = ast.parse(token, mode="eval").body
    return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None


@functools.cache
def _is_node(kind: type) -> bool:
    # cached: isinstance on the CSTNode ABC is slow
    return issubclass(kind, cst.CSTNode) and not issubclass(kind, _LEAVES)
