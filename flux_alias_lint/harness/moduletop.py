"""The part of a module's top level a probe runs, so a loss function sees its module's own values.

What runs, statement by statement (nothing else at the top level does):

- ``import`` and ``from ... import``, including those inside top-level ``try``/``if`` blocks.
  Names from megatron's ``parallel_state``/``mpu`` answer as a single rank. A module of the
  project itself (found on disk as the analysis finds it, ``index.files.find_module``) is not
  imported: its own top level is run by these same rules, when a ``Project`` is given (the
  modules the probed one imports, not what they import in turn, except a module a base class
  of their classes comes from: an inherited helper runs as the project wrote it). Any
  other module is imported from the installed packages only (not the current directory). A
  name that cannot be imported becomes a stub.
- Assignments of constants: literals, names, attributes, containers, arithmetic and f-strings
  of them, and calls of the built-in constructors ``dict``, ``list``, ``tuple``, ``set``,
  ``frozenset``, ``int``, ``float``, ``str`` and ``bool``. ``LOSS_DTYPE = torch.float16`` and
  ``BASE = {"step": 0}`` run; ``MODEL = build_model()`` does not. A name set to a literal
  ``True`` or ``False`` is a setting its user may flip: branches on it are tried both ways.
- ``def`` and ``class`` statements, with decorators, annotations and class keywords removed,
  defaults that are not constants replaced by ``None``, and class bodies filtered by these
  same rules. Defining runs none of their code; a probe that calls them does. A class keeps a
  ``@dataclass`` decorator (with constant arguments) and its annotated fields, their annotations
  as strings, so a dataclass or ``NamedTuple`` report is built as the loss function builds it.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import libcst as cst

from ..index.files import find_module
from ..index.symbols import CLASS_VARIABLES
from ._deps import quiet
from .standins import PARALLEL_STATE_MODULES, Flag, Run, SingleRankParallelState, Stub, single_rank_answer, stub_type

_CONSTRUCTORS = frozenset({"dict", "list", "tuple", "set", "frozenset", "int", "float", "str", "bool"})


def constant(node: cst.BaseExpression) -> bool:
    """Literals, names and attributes, and containers, arithmetic and f-strings of them; nothing that calls."""
    if isinstance(node, (cst.BaseNumber, cst.SimpleString, cst.Name, cst.Ellipsis)):
        return True
    if isinstance(node, cst.Attribute):
        return constant(node.value)
    if isinstance(node, cst.ConcatenatedString):
        return constant(node.left) and constant(node.right)
    if isinstance(node, cst.FormattedString):
        return all(
            not isinstance(part, cst.FormattedStringExpression) or constant(part.expression) for part in node.parts
        )
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return all(constant(e.value) for e in node.elements)
    if isinstance(node, cst.Dict):
        return all(
            constant(e.value) and (isinstance(e, cst.StarredDictElement) or constant(e.key)) for e in node.elements
        )
    if isinstance(node, cst.UnaryOperation):
        return constant(node.expression)
    if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation)):
        return constant(node.left) and constant(node.right)
    if isinstance(node, cst.Comparison):
        return constant(node.left) and all(constant(c.comparator) for c in node.comparisons)
    if isinstance(node, cst.Subscript):
        return constant(node.value) and all(
            isinstance(s.slice, cst.Index) and constant(s.slice.value) for s in node.slice
        )
    if isinstance(node, cst.Call):
        return (
            isinstance(node.func, cst.Name)
            and node.func.value in _CONSTRUCTORS
            and all(constant(a.value) for a in node.args)
        )
    return False


def _safe_statement(stmt: cst.BaseStatement) -> cst.BaseStatement | None:
    """The statement as the probe may run it, or None if it may not run at all."""
    if isinstance(stmt, cst.SimpleStatementLine):
        kept = [small for small in stmt.body if _safe_small(small)]
        return stmt.with_changes(body=kept) if kept else None
    if isinstance(stmt, cst.FunctionDef):
        return _definition_only(stmt)
    if isinstance(stmt, cst.ClassDef):
        if not all(constant(base.value) for base in stmt.bases):
            return None
        body = [s for s in map(_safe_class_statement, stmt.body.body) if s is not None]
        return stmt.with_changes(
            decorators=[d for d in stmt.decorators if _is_dataclass_decorator(d.decorator)],
            keywords=[],
            lpar=cst.MaybeSentinel.DEFAULT if not stmt.bases else stmt.lpar,
            rpar=cst.MaybeSentinel.DEFAULT if not stmt.bases else stmt.rpar,
            body=cst.IndentedBlock(body=body or [cst.SimpleStatementLine([cst.Pass()])]),
        )
    return None


def _safe_class_statement(stmt: cst.BaseStatement) -> cst.BaseStatement | None:
    """As `_safe_statement`, and a field `name: annotation [= constant]` with its annotation as a string."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.AnnAssign):
        field = stmt.body[0]
        if isinstance(field.target, cst.Name):
            value = field.value
            if value is not None and not (constant(value) or _is_field_call(value)):
                value = cst.Name("None")  # a default it has, whatever it is: the fields keep their order
            annotation = field.annotation.annotation
            text = cst.Module([]).code_for_node(annotation)
            if isinstance(annotation, cst.SimpleString):
                text = annotation.evaluated_value if isinstance(annotation.evaluated_value, str) else text
            if text.startswith(CLASS_VARIABLES):  # no field: a plain class attribute, if it has a value
                return stmt.with_changes(body=[cst.Assign([cst.AssignTarget(field.target)], value)]) if value else None
            annotation = cst.SimpleString(repr(text))
            return stmt.with_changes(body=[field.with_changes(annotation=cst.Annotation(annotation), value=value)])
    return _safe_statement(stmt)


def _is_field_call(node: cst.BaseExpression) -> bool:
    """`field(default_factory=dict)`: a dataclass field's spec, its arguments constants (names too)."""
    if not isinstance(node, cst.Call) or cst.Module([]).code_for_node(node.func) not in ("field", "dataclasses.field"):
        return False
    return all(constant(a.value) for a in node.args)


_DATACLASS = frozenset({"dataclass", "dataclasses.dataclass"})


def _is_dataclass_decorator(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Call):
        return _is_dataclass_decorator(node.func) and all(constant(a.value) for a in node.args)
    code = cst.Module([]).code_for_node(node)
    return code in _DATACLASS


def _safe_small(small: cst.BaseSmallStatement) -> bool:
    if isinstance(small, cst.Assign):
        return constant(small.value) and all(isinstance(t.target, (cst.Name, cst.Tuple)) for t in small.targets)
    if isinstance(small, cst.AnnAssign):
        return small.value is not None and isinstance(small.target, cst.Name) and constant(small.value)
    return isinstance(small, cst.Pass)


# The decorators that change what a method is, rather than wrap it: kept, so `self` stays right.
_METHOD_KINDS = frozenset({"staticmethod", "classmethod", "property"})


def _definition_only(function: cst.FunctionDef) -> cst.FunctionDef:
    """``function`` without decorators or annotations, non-constant defaults replaced by None."""

    class Strip(cst.CSTTransformer):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function  # nested functions are not evaluated at definition time

        def leave_Param(self, original: cst.Param, updated: cst.Param) -> cst.Param:
            default = updated.default
            if default is not None and not constant(default):
                default = cst.Name("None")
            return updated.with_changes(annotation=None, default=default)

    stripped = function.visit(Strip())
    assert isinstance(stripped, cst.FunctionDef)
    kinds = [d for d in function.decorators if isinstance(d.decorator, cst.Name) and d.decorator.value in _METHOD_KINDS]
    return stripped.with_changes(decorators=kinds, returns=None, leading_lines=[])


def _imports(module: cst.Module) -> Iterator[cst.Import | cst.ImportFrom]:
    """Import statements at the top level, and in top-level ``try``/``if`` blocks."""

    def walk(statements: Any) -> Iterator[cst.Import | cst.ImportFrom]:
        for stmt in statements:
            if isinstance(stmt, cst.SimpleStatementLine):
                yield from (s for s in stmt.body if isinstance(s, (cst.Import, cst.ImportFrom)))
            elif isinstance(stmt, (cst.Try, cst.If)):
                yield from walk(stmt.body.body)

    yield from walk(module.body)


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    assert isinstance(node, cst.Name)
    return node.value


@contextlib.contextmanager
def _installed_packages_only() -> Iterator[None]:
    """Imports must not pick up the checked repository's own code through the current directory."""
    saved = sys.path[:]
    here = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", ".") and os.path.abspath(p) != here]
    try:
        with quiet():
            yield
    finally:
        sys.path[:] = saved


def _import(dotted: str) -> Any:
    try:
        return importlib.import_module(dotted)
    except Exception:  # not installed, or its own import failed: the caller stubs it
        return None


class _ModuleNamespace(dict):
    """A project module's globals: a name it does not define is a stub, not a NameError."""

    def __init__(self, run: Run, name: str) -> None:
        super().__init__(__name__=name)
        self._run = run

    def __missing__(self, name: str) -> Any:
        if hasattr(builtins, name):
            return getattr(builtins, name)
        self[name] = stub = Stub(name, self._run)
        return stub


@functools.lru_cache(maxsize=256)
def _parsed(path: str) -> cst.Module:
    """A project module's tree: every probe of a run that imports it parses it once."""
    with open(path, "rb") as file:
        return cst.parse_module(file.read())


class Project:
    """The modules of the checked project a probe has loaded, by file: each one's top level runs once."""

    # The modules the probed one imports run; what they import in turn is installed or stubbed. Deeper
    # chains cost more than they give: a training package's modules import half the package.
    MAX_DEPTH = 1
    # But a module's import of a base class of its own classes runs however deep its chain is, to this bound: a
    # method's helper inherited from a base class two modules away (`class DPOTrainer(RLHFMixin)`, the mixin's
    # `class RLHFMixin(BaseTrainer)` in another module) is then the project's own, not a stub.
    MAX_BASE_DEPTH = 4
    MAX_BYTES = 200_000  # a generated table, not a helper: stubbed

    def __init__(self, run: Run) -> None:
        self._run = run
        self._loaded: dict[str, types.ModuleType] = {}
        self._depth = 0

    def module(self, importer: str, dotted: str, level: int, base: bool = False) -> types.ModuleType | None:
        """The project module ``importer`` imports as ``dotted`` (None: not one of the project's); ``base``: it
        imports a base class of one of its classes from there."""
        path = find_module(importer, dotted, level)
        if path is None or os.path.getsize(path) > self.MAX_BYTES:
            return None
        if path not in self._loaded:
            if self._depth >= (self.MAX_BASE_DEPTH if base else self.MAX_DEPTH):
                return None
            # Registered before its top level runs: a module that imports itself back finds it.
            self._loaded[path] = module = types.ModuleType(dotted)
            namespace = _ModuleNamespace(self._run, dotted)
            self._depth += 1
            try:
                run_module_top(_parsed(path), namespace, self._run, path, self)
            except Exception:  # unreadable or unparsable: its names are stubs
                return None
            finally:
                self._depth -= 1
            module.__dict__.update(namespace)
        return self._loaded[path]


def _base_names(module: cst.Module) -> frozenset[str]:
    """The names the bases of the module's top-level classes start with (`Base` of `Base`, `trainers` of
    `trainers.Base`)."""
    names: set[str] = set()
    for stmt in module.body:
        for base in stmt.bases if isinstance(stmt, cst.ClassDef) else ():
            node = base.value
            while isinstance(node, cst.Attribute):
                node = node.value
            if isinstance(node, cst.Name):
                names.add(node.value)
    return frozenset(names)


def _bind_import(
    stmt: cst.Import | cst.ImportFrom,
    bind: Callable[[str, Any], None],
    run: Run,
    path: str,
    project: Project | None,
    bases: frozenset[str] = frozenset(),
) -> None:
    """``bases``: the names the module's classes derive from (`_base_names`), whose modules run deeper."""

    def load(dotted: str, level: int = 0, base: bool = False) -> Any:
        found = project.module(path, dotted, level, base) if project is not None and path else None
        return found if found is not None or level else _import(dotted)

    if isinstance(stmt, cst.Import):
        for alias in stmt.names:
            dotted = _dotted(alias.name)
            name = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else None
            if name and dotted in PARALLEL_STATE_MODULES:
                bind(name, SingleRankParallelState(run))
            elif name:
                module = load(dotted, base=name in bases)
                bind(name, module if module is not None else stub_type(name, run))
            else:  # `import a.b`: importing the submodule first makes it an attribute of `a`
                top = dotted.split(".")[0]
                module = load(dotted, base=top in bases) and load(top)
                bind(top, module if module is not None else stub_type(top, run))
        return
    if isinstance(stmt.names, cst.ImportStar):
        return
    level = len(stmt.relative)
    source = _dotted(stmt.module) if stmt.module is not None else ""
    names = [
        alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else _dotted(alias.name)
        for alias in stmt.names
    ]
    module = load(source, level, bool(bases.intersection(names))) if source or level else None
    for alias, name in zip(stmt.names, names, strict=True):
        imported = _dotted(alias.name)
        full = f"{source}.{imported}" if source else imported
        if not level and full in PARALLEL_STATE_MODULES:
            bind(name, SingleRankParallelState(run))
        elif not level and source in PARALLEL_STATE_MODULES:
            bind(name, single_rank_answer(imported) or stub_type(name, run))
        elif module is not None and _has(module, imported):
            bind(name, getattr(module, imported))
        else:
            found = load(full, level, name in bases)
            bind(name, found if found is not None else stub_type(name, run))


def _has(module: Any, name: str) -> bool:
    """`hasattr`, for a module whose lazy `__getattr__` may fail with more than an AttributeError
    (it imports a package that is not installed)."""
    try:
        return hasattr(module, name)
    except Exception:
        return False


def run_module_top(
    module: cst.Module, namespace: dict[str, Any], run: Run, path: str = "", project: Project | None = None
) -> None:
    """Fill ``namespace`` with what the safe part of ``module`` (the file ``path``) defines at its top level.

    See the module docstring; ``project``: load the project's own modules it imports, else stub them.
    """
    bases = _base_names(module)
    with _installed_packages_only():
        for stmt in _imports(module):
            _bind_import(stmt, namespace.__setitem__, run, path, project, bases)
    for stmt in module.body:
        safe = _safe_statement(stmt)
        if safe is None:
            continue
        try:
            exec(compile(cst.Module(body=[safe]).code, "<flux-alias-lint module top>", "exec"), namespace)
        except Exception:  # a definition the probe may not need (a base class that is a stub, say)
            continue
        for name in _flags(safe):
            namespace[name] = Flag(namespace[name], run)


def _flags(stmt: cst.BaseStatement) -> Iterator[str]:
    """Names a statement sets to a literal True or False."""
    for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
        value = small.value if isinstance(small, (cst.Assign, cst.AnnAssign)) else None
        if isinstance(value, cst.Name) and value.value in ("True", "False"):
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            yield from (t.value for t in targets if isinstance(t, cst.Name))
