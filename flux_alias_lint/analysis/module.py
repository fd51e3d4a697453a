"""`ModuleAnalysis`: the abstract interpreter over every function of one module, composed of one
part per concern, and what it starts from: the module's imports, a function's parameters.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ..evidence import Declared, declared
from ..index.symbols import declared_returns_of
from ..library import Library
from .calls import Calls
from .captures import CAPTURED, WRITTEN, CaptureTracking
from .expressions import Expressions
from .returns import Returns
from .statements import (
    _MIN_WORK,
    _WORK_PER_STATEMENT,
    Statements,
    Work,
    _functions_in,
    _Loop,
    _OtherKeys,
    _parameters,
    _statement_count,
)
from .summaries import Summaries, Summary
from .values import IMMUTABLE, Alias, Env, Key, Param, RawFinding, Token, Val, dotted_name


class ModuleAnalysis(Statements, Expressions, Calls, Summaries, Returns, CaptureTracking):
    """Runs the abstract interpreter over every function of one module: statements (`statements.py`),
    expressions (`expressions.py`), calls (`calls.py`), the project's functions called (`summaries.py`),
    returns (`returns.py`), captures (`captures.py`), over the values of `values.py`.

    `library`: the whole file's functions (`module` may hold only the units the triage kept, or one
    function parsed alone), for the summaries of the functions it calls, what their return
    annotations declare, and the module's imports."""

    def __init__(self, module: cst.Module, library: Library | None = None) -> None:
        self.module = module
        imports = library.imports() if library is not None else None
        # No `ast` tree of the file (no library, or syntax newer than this Python's, which libcst reads
        # and `lint._newer_syntax_allowed` lets through): its imports are read from libcst's tree.
        self.imports = imports if imports is not None else _libcst_imports(module)
        self.library = library
        self._summaries: dict[int, Summary | None] = {}  # by id of the def; None while being computed
        # While summarising: the def whose returns are collected, and what they returned with their envs.
        self._summarising: cst.FunctionDef | None = None
        self._collected: list[tuple[Val, Env]] = []
        self._kept_here: dict[str, Val] = {}  # what the helper being summarised keeps (`Summary.kept`)
        self._summary_stack: list[int] = []  # the library functions being summarised, outermost first
        self.line_of: Callable[[cst.CSTNode], int] | None = None  # see `analyze_module`
        self._owner: str | None = None  # the class of the library method being summarised
        # Where a call's result is unknown, a module that imports torch makes it a possible tensor.
        self.torch_module = any(q == "torch" or q.startswith("torch.") for q in self.imports.values())
        # One that imports jax and not torch computes on JAX arrays, which nothing writes in place.
        self.array_module = not self.torch_module and any(q.partition(".")[0] == "jax" for q in self.imports.values())
        self._array_sites: set[int] = set()  # calls of jax's or numpy's functions: they make arrays, not tensors
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
                alias = Alias(Param(id(node), param.name.value))
                env[param.name.value] = Val(frozenset({alias}), tensor=kind is Declared.TENSOR)
            names.append(param.name.value)
        return names

    def _declared(self, annotation: cst.Annotation | None) -> Declared | None:
        return declared(self.module.code_for_node(annotation.annotation)) if annotation is not None else None

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


def analyze_module(
    module: cst.Module,
    library: Library | None = None,
    line_of: Callable[[cst.CSTNode], int] | None = None,
    lines: int = 0,
) -> list[RawFinding]:
    """Every alias of a backprop tensor in a loss-function report, in source order; `library`: see
    `ModuleAnalysis`; `line_of`: the line of a node in the file (`module` may be a triaged piece);
    `lines`: how many lines `module` has, what its work is allowed (0: no limit). Raises
    `OverBudget` past that (`Work`)."""
    analysis = ModuleAnalysis(module, library)
    analysis.line_of = line_of
    if lines:
        analysis.work.allow(lines)
    return analysis.run()


def _libcst_imports(module: cst.Module) -> dict[str, str]:
    """`Symbols.qualified` read from a libcst module: local name → qualified name for the module-level
    imports (`import torch as t`)."""
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
