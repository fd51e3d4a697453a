"""Find loss-function returns whose report can share storage with the backprop tensor.

An abstract interpreter over each function body. Every tensor-like value is described
by the storages it may share (``Alias``): a *token* naming the storage, and the chain of
operations (detach, view, conversion) that led from that storage to the value. Fresh
tensors (arithmetic, ``clone``, unknown calls) get a new token per allocation site, so
a copy never overlaps anything. Containers (dicts, tuples, lists) keep their entries,
so a report built over several statements is known entry by entry. Branches join,
loops run twice, and rebinding a name drops its old aliases: exactly the
flow-sensitivity the rules need.

At each ``return (B, ..., report)`` the aliases of every report leaf are compared with
B's: overlapping tokens mean Megatron's in-place rescale of B shows through the report.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence

import libcst as cst

from .aliasing import (
    AMBIGUOUS_METHODS,
    ARRAY_METHODS,
    CONTAINER_MUTATORS,
    COPY_KEYWORD,
    DTYPE_OF_METHOD,
    MAPPING_CONSTRUCTORS,
    NUMBER_BUILTINS,
    NUMBER_METHODS,
    TORCH_DTYPES,
    AliasKind,
    attribute_alias_kind,
    is_tensor_method,
    method_alias_kind,
    torch_function_alias_kind,
    writes_in_place,
)
from .captures import CAPTURED, WRITTEN, CaptureTracking
from .evidence import Declared, declared, declares_no_count
from .index.symbols import declared_returns_of
from .library import Definition, Library
from .rules import CODE_FOR_KIND
from .triage import SUMMARY_DEPTH  # how deep library summaries nest (the triage mirrors it)
from .values import (
    _SEVERITY,
    IMMUTABLE,
    Alias,
    Env,
    Field,
    Key,
    Op,
    RawFinding,
    Token,
    Val,
    _leaves,
    _overlap,
    _relative_kind,
    dotted_name,
    join,
    join_all,
    join_envs,
    render_path,
)


@dataclasses.dataclass
class Work:
    """What an analysis did, counted independently of the machine: the tests bound these, the
    benchmark prints them beside its seconds."""

    statements: int = 0  # statements analysed (a loop body's again on each pass)
    aliases: int = 0  # aliases of the values expressions evaluated to: the analysis' inner loop


# Beyond this many paths per function, branches are joined again: no statement is analysed more
# than this many times over.
_MAX_PATHS = 16
_WORK_PER_STATEMENT = 64  # statements analysed per statement of a function before it degrades
_MIN_WORK = 1_024

_GRADLESS_DECORATORS = frozenset(
    {
        "torch.no_grad",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.autograd.grad_mode.no_grad",
        "torch.autograd.grad_mode.inference_mode",
    }
)


@dataclasses.dataclass(frozen=True)
class Summary:
    """What a call of `node` gives, in terms of its parameters' storage tokens, and what it leaves in
    the names rooted at its parameters (`report` after `report[k] = v`, `self.last`)."""

    params: tuple[str, ...]
    node: cst.FunctionDef
    returns: Val
    effects: dict[str, Val]


# Methods that show a helper's parameter is a container, not a tensor.
_MAPPING_METHODS = CONTAINER_MUTATORS | {"get", "items", "values"}


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
    leaves a cycle of closures behind at every call, garbage only the collector frees."""
    value = ast.parse(token, mode="eval").body
    return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None


class _Loop:
    def __init__(self) -> None:
        self.breaks: list[Env | None] = []
        self.continues: list[Env | None] = []


class ModuleAnalysis(CaptureTracking):
    """Runs the abstract interpreter over every function of one module.

    `library`: the whole file's functions (`module` may hold only the units the triage kept), for the
    summaries of the functions it calls and what their return annotations declare. `imports`: the
    module's imports, when `module` is one function parsed alone."""

    def __init__(
        self, module: cst.Module, library: Library | None = None, imports: Mapping[str, str] | None = None
    ) -> None:
        self.module = module
        self.imports = dict(imports) if imports is not None else self._module_imports(module)
        self.library = library
        self._summaries: dict[int, Summary | None] = {}  # by id of the def; None while being computed
        # While summarising: the def whose returns are collected, and what they returned with their envs.
        self._summarising: cst.FunctionDef | None = None
        self._collected: list[tuple[Val, Env]] = []
        self._summary_stack: list[int] = []  # the library functions being summarised, outermost first
        self.line_of: Callable[[cst.CSTNode], int] | None = None  # see `analyze_module`
        self._owner: str | None = None  # the class of the library method being summarised
        # Where a call's result is unknown, a module that imports torch makes it a possible tensor.
        self.torch_module = any(q == "torch" or q.startswith("torch.") for q in self.imports.values())
        self.returns = library.returns() if library is not None else declared_returns_of(module.code)
        # Storages a tensor-only method or a torch function was applied to somewhere: `x.detach()`
        # anywhere in a function is evidence that `x` is a tensor everywhere in it.
        self._tensor_tokens: set[Token] = set()
        # Method calls whose result is a tensor only by that guess (`_call_method`), by node id.
        self._guessed_sites: set[int] = set()
        self.findings: dict[tuple[int, str], RawFinding] = {}
        self._analyzed: set[int] = set()
        self._loops: list[_Loop] = []
        self._paths = 1  # how many paths through the current function are being followed separately
        self._passes: tuple[int, ...] = ()  # which pass of each enclosing loop is being analysed
        self._functions: list[cst.FunctionDef | cst.Lambda] = []  # innermost last
        self.work = Work()
        self._work_limit = 0  # beyond this much work, the current function degrades (`_degraded`)
        self._carried: dict[int, Env] = {}  # per loop: the state its last analysis reached
        # In a loop unrolled over a dict's entries (`_unrolled_loop_exits`): its key name -> this pass's key.
        self._loop_keys: dict[str, Key | _OtherKeys] = {}
        self._loop_bodies: dict[int, tuple[set[str], set[tuple[str | None, str]]]] = {}  # `_assigned_in`, per loop
        self._init_captures()

    # ---- entry points -------------------------------------------------------------

    def run(self) -> list[RawFinding]:
        everything, outermost = _functions_in(self.module)
        for node in outermost:
            self._analyze_function(node, {})
        # Functions that flow analysis never reached (unreachable code) still get checked.
        for node in everything:
            if id(node) not in self._analyzed:
                self._analyze_function(node, {})
        return list(self.findings.values())

    @staticmethod
    def _module_imports(module: cst.Module) -> dict[str, str]:
        """Local name → qualified name for module-level imports (`import torch as t`)."""
        names: dict[str, str] = {}
        for stmt in module.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        full = dotted_name(alias.name) or ""
                        local = alias.asname.name.value if alias.asname else full.split(".")[0]
                        names[local] = full if alias.asname else local
                elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                    mod = dotted_name(small.module) if small.module else ""
                    for alias in small.names:
                        full = dotted_name(alias.name) or ""
                        local = alias.asname.name.value if alias.asname else full
                        names[local] = f"{mod}.{full}" if mod else full
        return names

    def _qualified(self, node: cst.BaseExpression, env: Env) -> str | None:
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in env:
            return None
        head = self.imports.get(head, head)
        return f"{head}.{rest}" if rest else head

    # ---- functions ----------------------------------------------------------------

    def _bind_parameters(self, node: cst.FunctionDef | cst.Lambda, env: Env) -> list[str]:
        names = []
        for param in _parameters(node.params):
            kind = self._declared(param.annotation)
            if kind is Declared.IMMUTABLE:
                env[param.name.value] = IMMUTABLE
            else:
                alias = Alias(("param", id(node), param.name.value))
                env[param.name.value] = Val(frozenset({alias}), tensor=kind is Declared.TENSOR)
            names.append(param.name.value)
        return names

    def _degraded(self) -> bool:
        """Whether the current function has used its work budget (`_WORK_PER_STATEMENT` per
        statement). From then on, branches join at once and a loop analysed before runs its body
        once (see `_widened_loop_state`): each statement is then analysed at most (enclosing
        loops + 1) times more, where nested loops ran their bodies 2**depth times."""
        return self.work.statements > self._work_limit

    def _analyze_function(self, node: cst.FunctionDef | cst.Lambda, closure: Env) -> None:
        self._analyzed.add(id(node))
        saved_limit = self._work_limit
        # Its own budget: a nested function is analysed each time its `def` is reached, which
        # the enclosing function's budget bounds (its own work counts against both).
        self._work_limit = self.work.statements + _WORK_PER_STATEMENT * _statement_count(node) + _MIN_WORK
        env: Env = dict(closure)
        for key in (CAPTURED, WRITTEN):  # a nested function runs later: what was captured by then is not known
            env.pop(key, None)
        params = self._bind_parameters(node, env)
        self._enter_function(node, closure, params)
        self._functions.append(node)
        if isinstance(node, cst.Lambda):
            self._check_return(self._eval(node.body, env), node.body)
        else:
            saved, self._loops, saved_paths, self._paths = self._loops, [], self._paths, 1
            self._exec_block(node.body.body, env)
            self._loops, self._paths = saved, saved_paths
        self._functions.pop()
        self._work_limit = saved_limit

    def _check_return(self, val: Val, node: cst.BaseExpression | None) -> None:
        if val.container != "seq":
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
            report.container != "dict"
            or not self._may_be_tensor(backprop)
            or self._without_grad()
            or all(a.detached for a in backprop.aliases)  # `out.detach()`: nothing to backpropagate either
        )
        backprop_src = self._backprop_source(node, backprop)
        for path, leaf in _leaves(report):
            if not path and report.container:
                continue  # a report container itself is never rescaled, only what it holds
            # A record's fields are checked only where a rescaling caller is known (as any non-dict
            # report is): the triage, which keeps such functions whole, need not follow records.
            path_needs_proof = proof_needed or any(isinstance(key, Field) for key in path)
            for alias in leaf.aliases:
                hits = [b for b in backprop.aliases if _overlap(alias, b)]
                if not hits or alias.entry is None:
                    continue
                leaf_proof_needed = path_needs_proof or alias.via_record
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
                )
                if old is not None:
                    finding = dataclasses.replace(
                        old,
                        code=max(old.code, finding.code),
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
        # Another parameter passed through untouched may be anything its caller gives (a float scale).
        return not any(
            a.token[0] == "param" and not a.ops and a.token not in self._tensor_tokens
            for a in leaf.aliases
            if a.entry is entry and not any(_overlap(a, b) for b in backprop.aliases)
        )

    def _may_be_none(self, alias: Alias) -> bool:
        """A parameter itself whose default is None (`inputs: Optional[Tensor] = None`): `.clone()`
        on it would raise where the caller left it out."""
        if alias.ops or alias.token[0] != "param" or alias.token[1] != id(self._functions[-1]):
            return False
        function = self._functions[-1]
        return any(
            param.name.value == alias.token[2] and isinstance(param.default, cst.Name) and param.default.value == "None"
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
            if self._qualified(called, {}) in _GRADLESS_DECORATORS and not switched_off:
                return True
        return False

    def _may_be_tensor(self, val: Val) -> bool:
        """Positive evidence that `val` can be a tensor (see `Val.tensor`), or that a torch operation took it."""
        return val.tensor or any(a.token in self._tensor_tokens for a in val.aliases)

    def _backprop_source(self, node: cst.BaseExpression | None, backprop: Val) -> str:
        """How the message names the backprop tensor: as written in the return, else where it was last passed."""
        if isinstance(node, cst.Tuple) and node.elements:
            return self.module.code_for_node(node.elements[0].value)
        entries = sorted({self.module.code_for_node(a.entry) for a in backprop.aliases if a.entry is not None})
        return " or ".join(entries) if entries else "the first returned element"

    # ---- statements ---------------------------------------------------------------

    def _exec_block(self, body: Sequence[cst.CSTNode], env: Env | None) -> Env | None:
        for index, stmt in enumerate(body):
            if env is None:
                return None
            self.work.statements += 1
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
            new = current.with_item(None, self._element_of(rhs, small.value), strong=False)
        elif current.container == "dict" and isinstance(small.operator, cst.BitOrAssign):
            new = current  # `report |= {...}`: an update
            for key, val in rhs.items:
                new = new.with_item(key, val, strong=key is not None)
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
                env[owner] = current.with_item(Field(target.attr.value), _into_record(val))  # type: ignore[index]
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
        env[owner] = base.with_item(key, val, strong=key is not None)

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
                not a.ops and a.token[0] == "site" and a.token[1] in self._guessed_sites for a in val.aliases
            )
            return Val(aliases, dtype=val.dtype, tensor=val.tensor and not guessed)
        return Val(immutable=val.immutable)

    # ---- expressions --------------------------------------------------------------

    def _fresh(self, node: cst.CSTNode, dtype: str | None = None, tensor: bool = False) -> Val:
        """A new value allocated at `node` (a copy, an arithmetic result, an unknown call); `tensor`:
        there is evidence that it is a tensor."""
        # Tagged with the loop passes it happens in: what one iteration allocates is never the
        # object the next iteration allocates at the same place.
        return Val(frozenset({Alias(("site", id(node), self._passes), (), node)}), dtype=dtype, tensor=tensor)

    def _eval(self, node: cst.BaseExpression, env: Env) -> Val:
        method = getattr(self, "_eval_" + type(node).__name__, None)
        if method is not None:
            val = method(node, env)
            self.work.aliases += len(val.aliases)
            return val
        if isinstance(node, (cst.BaseNumber, cst.BaseString, cst.Ellipsis)):
            return IMMUTABLE
        for child in node.children:
            if isinstance(child, cst.BaseExpression):
                self._eval(child, env)
        return self._fresh(node)

    def _eval_Name(self, node: cst.Name, env: Env) -> Val:
        if node.value in env:
            return env[node.value].entered_at(node)
        if node.value in ("None", "True", "False"):
            return IMMUTABLE
        return Val(frozenset({Alias(("free", node.value), (), node)}))

    def _eval_Attribute(self, node: cst.Attribute, env: Env) -> Val:
        qualified = self._qualified(node, env)
        if qualified is not None and qualified.startswith("torch."):
            return IMMUTABLE  # torch.float32, torch.bfloat16 and the like
        dotted = dotted_name(node)
        if dotted is not None and dotted in env:
            return env[dotted].entered_at(node)
        base = self._eval(node.value, env)
        if base.container == "record":  # only a record has the field: what it gives went through one
            return _into_record(base.item(Field(node.attr.value))).entered_at(node)
        kind = attribute_alias_kind(node.attr.value)
        if kind is not None and self.torch_module:  # `.data`, `.T` in a torch module: a tensor's
            self._tensor_tokens.update(a.token for a in base.aliases)
        if kind is not None and base.aliases:
            op = Op(kind, "." + node.attr.value)
            length = base.length if kind is AliasKind.DETACH else None
            aliases = frozenset(a.derive(op, node) for a in base.aliases)
            return Val(aliases, dtype=base.dtype, length=length, tensor=base.tensor)
        if dotted is not None:
            return Val(frozenset({Alias(("free", dotted), (), node)}))
        return self._fresh(node)

    def _eval_Subscript(self, node: cst.Subscript, env: Env) -> Val:
        base = self._eval(node.value, env)
        indices = [self._eval_slice(s.slice, env) for s in node.slice]
        if base.container:
            key = indices[0][0] if len(indices) == 1 and indices[0][1] == "const" else None
            if isinstance(key, int) and key < 0 and base.container == "seq":
                key += len(base.items)
            return base.item(key).entered_at(node) if base.items else Val()
        if not base.aliases:
            return Val(immutable=base.immutable)
        if len(indices) == 1 and isinstance(indices[0][0], str):
            # `batch["labels"]`: a lookup in a mapping, never a view of a tensor. The same key read
            # twice is the same object; it shares nothing with the mapping itself.
            return Val(
                frozenset(Alias(("item", a.token, indices[0][0]), (), node, True, a.via_record) for a in base.aliases)
            )
        if all(kind in ("const", "basic") for _, kind in indices):
            consts = [key for key, kind in indices if kind == "const" and isinstance(key, int)]
            # A single constant index narrows the storage (x[0] and x[1] are disjoint). A negative
            # one only where the length is known: x[-1] is x[1] when x has two rows.
            index = consts[0] if len(indices) == 1 and consts else None
            if index is not None and index < 0:
                index = index + base.length if base.length is not None and index + base.length >= 0 else None
            op = Op(AliasKind.VIEW, "[" + ", ".join(self.module.code_for_node(s.slice) for s in node.slice) + "]")
            aliases = frozenset(a.derive(op, node, index) for a in base.aliases)
            return Val(aliases, dtype=base.dtype, tensor=base.tensor)
        return self._fresh(node, base.dtype, tensor=base.tensor)  # advanced indexing copies

    def _eval_slice(self, item: cst.BaseSlice, env: Env) -> tuple[Key, str]:
        """Classify one index: a constant, a basic view index, or anything else."""
        if isinstance(item, cst.Slice):
            for part in (item.lower, item.upper, item.step):
                if part is not None:
                    self._eval(part, env)
            return None, "basic"
        assert isinstance(item, cst.Index)
        value = item.value
        const = self._key_of(value)
        if const is not None:
            return const, "const"
        if isinstance(value, (cst.Ellipsis)) or (isinstance(value, cst.Name) and value.value == "None"):
            return None, "basic"
        val = self._eval(value, env)
        return None, "basic" if val.immutable else "other"

    def _eval_Tuple(self, node: cst.Tuple, env: Env) -> Val:
        return self._sequence(node.elements, env)

    def _eval_List(self, node: cst.List, env: Env) -> Val:
        return self._sequence(node.elements, env)

    def _sequence(self, elements: Sequence[cst.BaseElement], env: Env) -> Val:
        items: list[tuple[Key, Val]] = []
        unknown = False
        for element in elements:
            val = self._eval(element.value, env)
            if isinstance(element, cst.StarredElement):
                items.append((None, self._element_of(val, element.value)))
                unknown = True
            else:
                items.append((None if unknown else len(items), val))
        return Val(container="seq", items=tuple(items))

    def _eval_Dict(self, node: cst.Dict, env: Env) -> Val:
        # Built in one go, as `with_item` would entry by entry: a 20,000-entry literal is not
        # 20,000 copies of a growing tuple. An unknown key (None) may be any other: it joins.
        items: list[tuple[Key, Val]] = []
        positions: dict[Key, int] = {}
        for element in node.elements:
            if isinstance(element, cst.StarredDictElement):
                pairs: Sequence[tuple[Key, Val]] = self._eval(element.value, env).items
            else:
                self._eval(element.key, env)
                pairs = [(_constant_index(element.key), self._eval(element.value, env))]
            for key, val in pairs:
                position = positions.get(key)
                if position is None:
                    positions[key] = len(items)
                    items.append((key, val))
                else:
                    items[position] = (key, val if key is not None else join(items[position][1], val))
        return Val(container="dict", items=tuple(items))

    def _eval_IfExp(self, node: cst.IfExp, env: Env) -> Val:
        self._eval(node.test, env)
        return join(self._eval(node.body, env), self._eval(node.orelse, env))

    def _eval_BooleanOperation(self, node: cst.BooleanOperation, env: Env) -> Val:
        return join(self._eval(node.left, env), self._eval(node.right, env))

    def _eval_NamedExpr(self, node: cst.NamedExpr, env: Env) -> Val:
        val = self._eval(node.value, env)
        self._bind(node.target, val, env)
        return val

    def _eval_BinaryOperation(self, node: cst.BinaryOperation, env: Env) -> Val:
        left, right = self._eval(node.left, env), self._eval(node.right, env)
        if left.immutable and right.immutable:
            return IMMUTABLE
        return self._fresh(node, tensor=left.tensor or right.tensor)

    def _eval_UnaryOperation(self, node: cst.UnaryOperation, env: Env) -> Val:
        val = self._eval(node.expression, env)
        if val.immutable or isinstance(node.operator, cst.Not):
            return IMMUTABLE
        return self._fresh(node, tensor=val.tensor)

    def _eval_Comparison(self, node: cst.Comparison, env: Env) -> Val:
        self._eval(node.left, env)
        for target in node.comparisons:
            self._eval(target.comparator, env)
        return self._fresh(node)

    def _eval_Lambda(self, node: cst.Lambda, env: Env) -> Val:
        self._analyze_function(node, env)
        return IMMUTABLE

    def _comprehension_env(self, node: cst.BaseComp, env: Env) -> Env:
        inner = dict(env)
        clause: cst.CompFor | None = node.for_in
        while clause is not None:
            self._bind(clause.target, self._element_of(self._eval(clause.iter, inner), clause.iter), inner)
            for cond in clause.ifs:
                self._eval(cond.test, inner)
            clause = clause.inner_for_in
        return inner

    def _eval_ListComp(self, node: cst.ListComp, env: Env) -> Val:
        inner = self._comprehension_env(node, env)
        return Val(container="seq", items=((None, self._element(node.elt, inner)),))

    _eval_GeneratorExp = _eval_ListComp

    def _eval_SetComp(self, node: cst.SetComp, env: Env) -> Val:
        self._eval(node.elt, self._comprehension_env(node, env))
        return self._fresh(node)

    def _eval_DictComp(self, node: cst.DictComp, env: Env) -> Val:
        inner = self._comprehension_env(node, env)
        self._eval(node.key, inner)
        return Val(container="dict", items=((None, self._element(node.value, inner)),))

    def _element(self, node: cst.BaseExpression, inner: Env) -> Val:
        """A comprehension's element. A copy put there is put on every element: only where a tensor
        method or attribute made each (`[x.detach() for x in xs]`) is it a fix; a bare element
        (`{k: v for k, v in kwargs.items()}`, bools and None among them), or one in a tuple
        (`dict((k, v) for ...)`), is flagged, not fixed."""
        return _unfixable_unless_made_by_a_method(self._eval(node, inner))

    # ---- calls --------------------------------------------------------------------

    def _eval_Call(self, node: cst.Call, env: Env) -> Val:
        func = node.func
        qualified = self._qualified(func, env)
        if qualified is not None:
            handled = self._call_function(qualified, node, env)
            if handled is not None:
                return handled
        summarised = self._call_summarised(func, node, env)
        if summarised is not None:
            return summarised
        record = self._call_record(func, node, env)
        if record is not None:
            return record
        kind = self._declared_return(func, env)
        if isinstance(func, cst.Attribute) and kind is None:
            return self._call_method(func, node, env)
        callee = self._eval(func, env)
        for arg in node.args:
            self._eval(arg.value, env)
        if kind is Declared.IMMUTABLE:
            return IMMUTABLE
        # An unknown function (`runtime_of(node)`, a callable argument) is no evidence of a tensor, even in a
        # module that imports torch: only its annotation is, or a torch function having made the callee
        # (`loss_fct = torch.nn.CrossEntropyLoss()`). Methods are (`_call_method`).
        return self._fresh(node, tensor=kind is Declared.TENSOR or callee.tensor)

    def _call_record(self, func: cst.BaseExpression, node: cst.Call, env: Env) -> Val | None:
        """`Report(lm=loss.detach(), n=n)`: a record of the file or of the project, holding what it is given."""
        if not isinstance(func, cst.Name) or func.value in env or self.library is None:
            return None
        record = self.library.record(func.value)
        if record is None:
            return None
        result = Val(container="record")
        position: int | None = 0 if record.positional else None  # None: which field is not known
        for arg in node.args:
            val = self._eval(arg.value, env)
            key: Key = None
            if arg.keyword is not None:
                key = Field(arg.keyword.value)
            elif arg.star:  # `*values`, `**fields`: any field may get any of their entries
                position = None
                if val.container and not val.items:
                    continue  # `**{}`: nothing given
                val = join_all([v for _, v in val.items]) if val.container else val
            elif position is not None and position < len(record.fields):
                key, position = Field(record.fields[position]), position + 1
            result = result.with_item(key, _into_record(val), strong=key is not None)
        return result

    # ---- summaries: calls of the project's own functions ------------------------------

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
            else:
                definition = None
            if definition is not None:
                summary = self._library_summary(definition)
        if summary is None:
            return None
        return self._apply_summary(summary, node, receiver, env)

    def _self_class(self) -> str | None:
        """The class `self` is an instance of where the code runs: the summarised method's, or the one
        around the function being checked (None: not known, so a method name must be unique)."""
        if self._owner is not None or self.library is None or self.line_of is None:
            return self._owner
        unit = self._functions[0] if self._functions else None
        return self.library.class_at(self.line_of(unit.name)) if isinstance(unit, cst.FunctionDef) else None

    def _library_summary(self, definition: Definition) -> Summary | None:
        cache = definition.library.summaries
        key = id(definition.node)
        if key not in cache:
            cache[key] = None  # recursion: a function calling itself gets no summary of itself
            analysis = ModuleAnalysis(definition.module, definition.library, definition.library.imports())
            analysis._summary_stack = [*self._summary_stack, key]
            analysis._owner = definition.owner
            cache[key] = analysis._summary(definition.node, {})
        found = cache[key]
        return found if isinstance(found, Summary) else None

    def _summary(self, node: cst.FunctionDef, closure: Env) -> Summary | None:
        """How `node`'s return value and its effects on its parameters relate to its parameters."""
        key = id(node)
        if key in self._summaries:
            return self._summaries[key]
        self._summaries[key] = None  # recursion-safe: a call back into it is an unknown call
        saved = (self._summarising, self._collected, self._loops, self._paths, self._work_limit)
        self._summarising, self._collected, self._loops, self._paths = node, [], [], 1
        self._work_limit = self.work.statements + _WORK_PER_STATEMENT * _statement_count(node) + _MIN_WORK
        env: Env = dict(closure)
        params = self._bind_parameters(node, env)
        initial = {name: env[name] for name in params}

        self._functions.append(node)
        try:
            end = self._exec_block(node.body.body, env)
        finally:
            self._functions.pop()
            collected = self._collected
            self._summarising, self._collected, self._loops, self._paths, self._work_limit = saved
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
        summary = Summary(tuple(params), node, returns, effects)
        self._summaries[key] = summary
        return summary

    def _apply_summary(
        self, summary: Summary, node: cst.Call, receiver: tuple[Val, str | None] | None, env: Env
    ) -> Val:
        """The call's value, its arguments put in for the summary's parameters; the effects on
        arguments (`report[k] = ...`, `self.last = ...`) applied to the caller's names."""
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
        result = self._substitute(summary.returns, bound, node, summary.node, env)
        for name, effect in summary.effects.items():
            head, _, rest = name.partition(".")
            owner = bound.get(head, (None, None))[1]
            if owner is None:
                continue
            new = self._substitute(effect, bound, node, summary.node, env)
            current = env.get(owner)
            if rest and current is not None and current.container == "record" and "." not in rest:
                env[owner] = current.with_item(
                    Field(rest), _into_record(new), strong=False
                )  # `report.lm = ...` in a helper
                continue
            if rest:
                env[f"{owner}.{rest}"] = new
                continue
            current = env.get(owner)
            if current is not None and (current.container or not current.aliases):
                merged = current if current.container else dataclasses.replace(current, container=new.container)
                for key, item in new.items:
                    merged = merged.with_item(key, item, strong=False)
                env[owner] = merged
        return result

    def _substitute(
        self, val: Val, bound: dict[str, tuple[Val, str | None]], call: cst.Call, helper: cst.FunctionDef, env: Env
    ) -> Val:
        """A value of the summary in the caller's terms: parameters become the arguments, what the
        helper allocated becomes an allocation at the call (a new one per call site)."""
        parts = [self._substitute_alias(alias, bound, call, helper, env) for alias in val.aliases]
        if val.container or val.items or val.immutable or not parts:
            items = tuple((k, self._substitute(v, bound, call, helper, env)) for k, v in val.items)
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
        self, alias: Alias, bound: dict[str, tuple[Val, str | None]], call: cst.Call, helper: cst.FunctionDef, env: Env
    ) -> Val:
        token = alias.token
        if token[0] == "param" and token[1] == id(helper):
            base = bound.get(token[2], (Val(), None))[0]
            suffix = token[3:]
            if not alias.ops and not suffix:
                return base  # passed straight through: the caller's own value, where the caller wrote it
            # The helper took a view or a detach of an argument: the fix copies the argument where the
            # caller passes it (its entry), since the helper's own code may be shared or out of reach.
            derived = frozenset(
                Alias(b.token + suffix, b.ops + alias.ops, b.entry, b.fixable, b.via_record or alias.via_record)
                for b in base.aliases
            )
            keeps_dtype = all(op.kind in (AliasKind.DETACH, AliasKind.VIEW) for op in alias.ops)
            tensor = base.tensor or any(op.kind is not AliasKind.VIEW for op in alias.ops)
            same_shape = all(op.kind is AliasKind.DETACH for op in alias.ops)
            dtype, length = base.dtype if keeps_dtype else None, base.length if same_shape else None
            return Val(derived, dtype=dtype, length=length, tensor=tensor)
        if token[0] == "item":
            inner = self._substitute_alias(Alias(token[1]), bound, call, helper, env)
            if inner.container:
                return inner.item(token[2])
            return Val(
                frozenset(
                    Alias(("item", b.token, token[2]), alias.ops, None, True, b.via_record or alias.via_record)
                    for b in inner.aliases
                )
            )
        if token[0] == "free":
            head, _, rest = token[1].partition(".")
            owner = bound.get(head, (None, None))[1]
            if owner is not None and rest and f"{owner}.{rest}" in env:
                return env[f"{owner}.{rest}"]  # `self.last`, set by the caller before the call
            if owner is not None and rest:
                return Val(frozenset({Alias(("free", f"{owner}.{rest}"), alias.ops, None, True, alias.via_record)}))
        # Allocated inside the helper (or a global of its module): a new object at each call site,
        # with no expression in the caller to put a copy after.
        return Val(
            frozenset({Alias(("site", id(call), self._passes, token), alias.ops, None, False, alias.via_record)})
        )

    def _declared(self, annotation: cst.Annotation | None) -> Declared | None:
        return declared(self.module.code_for_node(annotation.annotation)) if annotation is not None else None

    def _declared_return(self, func: cst.BaseExpression, env: Env) -> Declared | None:
        """What the return annotation of a function of this file says its calls give: `f(...)`, `self.m(...)`."""
        if isinstance(func, cst.Name) and func.value not in env:
            return self.returns.get(func.value)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            return self.returns.get(func.attr.value)
        return None

    def _args(self, node: cst.Call, env: Env) -> tuple[list[Val], dict[str, Val]]:
        positional: list[Val] = []
        keywords: dict[str, Val] = {}
        for arg in node.args:
            val = self._eval(arg.value, env)
            if arg.keyword is not None:
                keywords[arg.keyword.value] = val
            elif arg.star == "":
                positional.append(val)
        return positional, keywords

    def _call_function(self, name: str, node: cst.Call, env: Env) -> Val | None:
        """Calls by qualified name: builtins, `torch.*`, `copy.*`, mapping constructors."""
        if name in NUMBER_BUILTINS:
            self._args(node, env)
            return IMMUTABLE
        if name in MAPPING_CONSTRUCTORS:
            return self._call_dict(node, env)
        if name in ("list", "tuple"):
            positional, _ = self._args(node, env)
            if not positional:
                return Val(container="seq")
            return Val(container="seq", items=((None, self._element_of(positional[0], node)),))
        if name == "zip":  # tuples of one element of each argument
            positional, _ = self._args(node, env)
            pair = Val(container="seq", items=tuple((i, self._element_of(v, node)) for i, v in enumerate(positional)))
            return Val(container="seq", items=((None, pair),))
        if name in ("max", "min"):  # returns one of its arguments (or of its one iterable argument)
            positional, _ = self._args(node, env)
            if len(positional) == 1:
                positional = [self._element_of(positional[0], node)]
            return join_all(positional).entered_at(node) if positional else self._fresh(node)
        if name in ("copy.deepcopy",):
            positional, _ = self._args(node, env)
            return _without_aliases(positional[0]) if positional else Val()
        if name == "copy.copy":  # a new container or tensor object over the same storage
            positional, _ = self._args(node, env)
            return positional[0].entered_at(node) if positional else self._fresh(node)
        if name.startswith("torch."):
            return self._call_torch(name[len("torch.") :], node, env)
        return None

    def _call_dict(self, node: cst.Call, env: Env) -> Val:
        """`dict(d, k=v)`, `dict(**d)`, `dict([(k, v), ...])`, `OrderedDict(...)`, `defaultdict(factory)`."""
        result = Val(container="dict")
        for index, arg in enumerate(node.args):
            val = self._eval(arg.value, env)
            if arg.keyword is not None:
                result = result.with_item(arg.keyword.value, val)
            elif arg.star == "**":
                for key, item in val.items:
                    result = result.with_item(key, item, strong=key is not None)
            elif index == 0 and arg.star == "" and val.container == "dict":
                result = dataclasses.replace(val, aliases=frozenset())
            elif index == 0 and arg.star == "" and val.container == "seq":
                for _, pair in val.items:  # pairs: the keys are not tracked, the values are
                    result = result.with_item(None, pair.item(1), strong=False)
        return result

    def _call_torch(self, name: str, node: cst.Call, env: Env) -> Val:
        positional, _ = self._args(node, env)
        dtype = _keyword_dtype(node)
        kind = torch_function_alias_kind(name)
        if name == "stack" and positional and _literal_length(positional[0]) is not None:
            return dataclasses.replace(self._fresh(node, dtype, tensor=True), length=_literal_length(positional[0]))
        if kind is None or not positional:
            return self._fresh(node, dtype, tensor=True)
        self._tensor_tokens.update(a.token for a in positional[0].aliases)
        source = dataclasses.replace(positional[0], tensor=True)
        if kind is AliasKind.MAY_RETURN_SELF:
            if dtype is not None and source.dtype is not None and dtype != source.dtype:
                return self._fresh(node, dtype, tensor=True)
            dtype = dtype or source.dtype
        else:
            dtype = source.dtype
        return self._derived(source, Op(kind, f"torch.{name}()"), node, dtype)

    def _derived(self, source: Val, op: Op, node: cst.BaseExpression, dtype: str | None) -> Val:
        """Apply an aliasing op to every storage `source` may share (or to a tracked container)."""
        if not source.aliases:
            return Val(immutable=source.immutable, dtype=dtype)
        length = source.length if op.kind is not AliasKind.VIEW else None  # detach, `self`: same shape
        return Val(
            frozenset(a.derive(op, node) for a in source.aliases), dtype=dtype, length=length, tensor=source.tensor
        )

    def _call_method(self, func: cst.Attribute, node: cst.Call, env: Env) -> Val:
        name = func.attr.value
        receiver = self._eval(func.value, env)
        positional, keywords = self._args(node, env)
        if name in CONTAINER_MUTATORS and self._escapes(func.value, env):
            self._capture_arguments(func, name, receiver, positional, keywords, node, env)
        if not receiver.container and name in CONTAINER_MUTATORS and self._is_tracked_entry(func.value, env):
            receiver = Val(container="dict" if name in ("update", "setdefault") else "seq")  # a defaultdict's new entry
        if not receiver.container and name in _MAPPING_METHODS and self._is_summarised_parameter(receiver):
            receiver = _as_mapping(receiver)  # a helper's `report` or `metrics`: a dict until shown otherwise
        if not receiver.container and receiver.aliases and _updates_a_mapping(node):
            receiver = _as_mapping(receiver)  # `metric.update({"lm": ...})`, `metric.update(lm=...)`
        if receiver.container:
            result, updated = self._container_method(receiver, name, node, positional, keywords)
            if updated is not None:
                self._write_back(func.value, updated, env)
            return result
        of_module = (dotted_name(func.value) or "").partition(".")[0] in self.imports
        if writes_in_place(name) and not of_module:  # `scf.for_(...)`: a function of a module
            self._written(receiver, node, env)
        # `.item()`, `.tolist()`, `.type()` (a str), and any method of a str/int/float (`text.partition(...)`).
        if name in NUMBER_METHODS or name == "tolist" or receiver.immutable or (name == "type" and not node.args):
            return IMMUTABLE
        kind = method_alias_kind(name)
        if name in ARRAY_METHODS and receiver.aliases:  # the copy must go before `.numpy()`: keep the receiver's entry
            op = Op(AliasKind.VIEW, f".{name}()")
            return Val(
                frozenset(Alias(a.token, a.ops + (op,), a.entry, a.fixable, a.via_record) for a in receiver.aliases)
            )
        if is_tensor_method(name) or (self.torch_module and kind is not None and name not in AMBIGUOUS_METHODS):
            self._tensor_tokens.update(a.token for a in receiver.aliases)
        # A method of a value in a module that imports torch is evidence; a function of an imported
        # module (`sympy.Symbol(...)`, `math.floor(...)`) is not.
        tensor = receiver.tensor or (self.torch_module and not of_module) or is_tensor_method(name)
        if kind is None:
            dtype = receiver.dtype if name == "clone" else None
            if tensor and not (receiver.tensor or is_tensor_method(name)):
                self._guessed_sites.add(id(node))
            return self._fresh(node, dtype, tensor=tensor)
        dtype = receiver.dtype
        if kind is AliasKind.MAY_RETURN_SELF:
            target = self._conversion_dtype(name, positional, keywords, node)
            copies = COPY_KEYWORD in keywords and _is_true(node, COPY_KEYWORD)
            if copies or (target is not None and receiver.dtype is not None and target != receiver.dtype):
                return self._fresh(node, target, tensor=tensor)
            dtype = target or receiver.dtype
        return self._derived(dataclasses.replace(receiver, tensor=tensor), Op(kind, f".{name}()"), node, dtype)

    def _conversion_dtype(
        self, name: str, positional: list[Val], keywords: dict[str, Val], node: cst.Call
    ) -> str | None:
        if name in DTYPE_OF_METHOD:
            return DTYPE_OF_METHOD[name]
        if name in ("to", "type"):
            found = _keyword_dtype(node)
            if found is not None:
                return found
            for arg in node.args:
                if arg.keyword is None:
                    found = _dtype_literal(arg.value)
                    if found is not None:
                        return found
            if name == "to" and positional and positional[0].dtype is not None:
                return positional[0].dtype  # .to(other_tensor)
        if name == "type_as" and positional:
            return positional[0].dtype
        return None

    def _capture_arguments(
        self,
        func: cst.Attribute,
        name: str,
        receiver: Val,
        positional: list[Val],
        keywords: dict[str, Val],
        node: cst.Call,
        env: Env,
    ) -> None:
        """`self.losses.append(v)`, `metrics.update({...})`: what a container that outlives the function
        is given. An `update` only of a container or given a mapping (`meter.update(loss)` may copy)."""
        if name == "update" and not (receiver.container or _updates_a_mapping(node)):
            return
        given = [*positional, *keywords.values()]
        if given:
            place = self.module.code_for_node(func.value) + "[...]"
            self._capture(place, join_all(given), env)

    def _rebound_names(self, node: cst.FunctionDef) -> frozenset[str]:
        return frozenset(_assigned_in(node.body)[0])

    def _is_summarised_parameter(self, val: Val) -> bool:
        """A parameter of the helper being summarised (never a container of the caller's own)."""
        return (
            self._summarising is not None
            and bool(val.aliases)
            and all(a.token[:2] == ("param", id(self._summarising)) and not a.ops for a in val.aliases)
        )

    def _is_tracked_entry(self, target: cst.BaseExpression, env: Env) -> bool:
        """`report[k]` where `report` is a tracked dict (or a helper's parameter used as one)."""
        if not isinstance(target, cst.Subscript):
            return False
        owner = dotted_name(target.value)
        base = env.get(owner) if owner is not None else None
        return base is not None and (base.container == "dict" or self._is_summarised_parameter(base))

    def _write_back(self, target: cst.BaseExpression, updated: Val, env: Env) -> None:
        """Store a mutated container where it came from: a name (`report.update(...)`) or an entry of a
        tracked container (`report["k"].append(v)`, a `defaultdict(list)`)."""
        owner = dotted_name(target)
        if owner is not None:
            env[owner] = updated
        elif isinstance(target, cst.Subscript):
            self._store_item(target, updated, env)

    def _container_method(
        self, receiver: Val, name: str, node: cst.Call, positional: list[Val], keywords: dict[str, Val]
    ) -> tuple[Val, Val | None]:
        """dict/list methods: (what the call gives, the container after it when it mutates it)."""
        key = _constant_index(node.args[0].value) if node.args and node.args[0].keyword is None else None
        updated: Val | None = None
        result: Val = IMMUTABLE
        if name in ("get", "pop", "setdefault") and positional:
            default = positional[1] if len(positional) > 1 else IMMUTABLE
            present = key is not None and any(k == key for k, _ in receiver.items)
            if name == "setdefault" and not present:
                updated = receiver.with_item(key, default)
                result = default
            else:
                result = receiver.item(key) if present else join(receiver.item(key), default)
            if name == "pop" and present:
                updated = dataclasses.replace(receiver, items=tuple((k, v) for k, v in receiver.items if k != key))
            result = result.entered_at(node)
        elif name == "pop" and receiver.container == "seq":  # `stack.pop()`: the last element, whichever
            result = receiver.item(None).entered_at(node) if receiver.items else Val()
        elif name == "update":
            updated = receiver
            for val in positional:
                for k, v in val.items:
                    updated = updated.with_item(k, v, strong=k is not None)
            for k, v in keywords.items():
                updated = updated.with_item(k, v)
        elif name in ("append", "insert") and positional:
            updated = receiver.with_item(None, positional[-1], strong=False)
        elif name == "extend" and positional:
            updated = receiver.with_item(None, self._element_of(positional[0], node), strong=False)
        elif name == "clear":
            updated = dataclasses.replace(receiver, items=())
        elif name == "copy":
            result = receiver
        elif name == "values":
            result = (
                Val(container="seq", items=((None, receiver.item(None)),)) if receiver.items else Val(container="seq")
            )
        elif name == "items":
            pair = Val(container="seq", items=((0, IMMUTABLE), (1, receiver.item(None) if receiver.items else Val())))
            result = Val(container="seq", items=((None, pair),))
        return result, updated


_UNROLLED_ENTRIES = 16  # a loop over a dict of more entries is analysed as any loop


class _OtherKeys:
    """The key of an unrolled loop's pass over a dict's entries of unknown keys (see `_store_item`)."""


_OTHER_KEYS = _OtherKeys()


def _loop_over_entries(stmt: cst.For) -> tuple[str, cst.Name, cst.Name | None] | None:
    """(the dict, the key name, the value name) of `for k, v in d.items()`, `for k in d.keys()`, `for k in d`."""
    iterated, target = stmt.iter, stmt.target
    method = "keys"
    if isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Attribute) and not iterated.args:
        method, iterated = iterated.func.attr.value, iterated.func.value
    owner = dotted_name(iterated)
    if owner is None or method not in ("items", "keys"):
        return None
    if method == "keys":
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


def _updates_a_mapping(node: cst.Call) -> bool:
    """`x.update(...)` given a dict display or keywords: `x` is a mapping (`pbar.update(1)` is not)."""
    if not (isinstance(node.func, cst.Attribute) and node.func.attr.value == "update"):
        return False
    return any(
        arg.keyword is not None or arg.star == "**" or isinstance(arg.value, (cst.Dict, cst.DictComp))
        for arg in node.args
    )


def _as_mapping(param: Val) -> Val:
    """A helper's parameter used as a container: its entries are the caller's, looked up at the call."""
    entries = Val(frozenset(Alias(("item", a.token, None), (), None, True, a.via_record) for a in param.aliases))
    return Val(param.aliases, container="dict", items=((None, entries),))


def _literal_length(val: Val) -> int | None:
    """The length of a list or tuple display with no starred element."""
    if val.container == "seq" and all(isinstance(k, int) for k, _ in val.items):
        return len(val.items)
    return None


def _into_record(val: Val) -> Val:
    """`val` as a record's field holds it: every storage in it marked `via_record`."""
    return dataclasses.replace(
        val,
        aliases=frozenset(dataclasses.replace(a, via_record=True) for a in val.aliases),
        items=tuple((k, _into_record(v)) for k, v in val.items),
    )


def _without_aliases(val: Val) -> Val:
    return dataclasses.replace(val, aliases=frozenset(), items=tuple((k, _without_aliases(v)) for k, v in val.items))


def _dtype_literal(node: cst.BaseExpression) -> str | None:
    """`torch.bfloat16` → "bfloat16"; strings like "torch.FloatTensor" are not tracked."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "torch":
        return TORCH_DTYPES.get(node.attr.value)
    return None


def _keyword_dtype(node: cst.Call) -> str | None:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == "dtype":
            return _dtype_literal(arg.value)
    return None


def _is_true(node: cst.Call, keyword: str) -> bool:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return isinstance(arg.value, cst.Name) and arg.value.value == "True"
    return False


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


def _unfixable_unless_made_by_a_method(val: Val) -> Val:
    """`val`, each alias of it or of its entries not made by a tensor method or attribute marked unfixable."""
    aliases = frozenset(
        a if not a.fixable or (a.ops and a.ops[-1].label.startswith(".")) else dataclasses.replace(a, fixable=False)
        for a in val.aliases
    )
    items = tuple((key, _unfixable_unless_made_by_a_method(item)) for key, item in val.items)
    return dataclasses.replace(val, aliases=aliases, items=items)


@functools.cache
def _is_node(kind: type) -> bool:
    # cached: isinstance on the CSTNode ABC is slow
    return issubclass(kind, cst.CSTNode) and not issubclass(kind, _LEAVES)


def analyze_module(
    module: cst.Module, library: Library | None = None, line_of: Callable[[cst.CSTNode], int] | None = None
) -> list[RawFinding]:
    """Every alias of a backprop tensor in a loss-function report, in source order; `library`: see
    `ModuleAnalysis`; `line_of`: the line of a node in the file (`module` may be a triaged piece)."""
    analysis = ModuleAnalysis(module, library)
    analysis.line_of = line_of
    return analysis.run()
