"""What one module imports and defines, read from its `ast` tree: the one symbol table.

The project index, the library (where the analysis finds the functions a loss function calls, and
its module's imports) and the triage read a module's names here, and whether a def is summarised
(`summarisable`). An import statement is read by `_imports_of` alone, and the defs by one walk of
the statements (`Symbols._walk`); each view is built when first asked and kept with the table (most
modules are asked for one or two, many for none).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Iterator, Mapping
from typing import NamedTuple

from ..evidence import Declared, declared
from ..facts.policy import summarisable as policy_summarisable
from ..facts.storage import MODEL_OUTPUT_BASE

Def = ast.FunctionDef | ast.AsyncFunctionDef
# What `ast.parse` raises on a text CPython rejects (or cannot build a tree of).
PARSE_ERRORS = (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError)
Scope = list[ast.AST]  # the functions and classes around a def, outermost first
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class Import(NamedTuple):
    """One name an import statement binds."""

    local: str
    # What the name is: "pkg" for `import pkg.mod`, "pkg.mod" for `import pkg.mod as m`, "pkg.mod.f"
    # for `from pkg.mod import f`, "f" for `from . import f`.
    target: str
    level: int  # the dots of a relative import
    from_import: bool


def _imports_of(node: ast.Import | ast.ImportFrom) -> Iterator[Import]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            head = alias.name.split(".")[0]
            yield Import(alias.asname, alias.name, 0, False) if alias.asname else Import(head, head, 0, False)
    else:
        for alias in node.names:
            if alias.name != "*":
                target = f"{node.module}.{alias.name}" if node.module else alias.name
                yield Import(alias.asname or alias.name, target, node.level, True)


@dataclasses.dataclass(frozen=True)
class Record:
    """A class whose instances only hold what they are given: a `@dataclass` or a `NamedTuple`
    with no `__init__`/`__post_init__` of its own (either may copy what it is given)."""

    fields: tuple[str, ...]  # in the order its constructor takes them by position
    positional: bool  # False: a base class may add fields before these, positions are not known
    # A transformers `ModelOutput` subclass: an ordered dict of its fields (`facts.storage.is_model_output`).
    mapping: bool = False


_DATACLASS = frozenset({"dataclass", "dataclasses.dataclass"})
_NAMED_TUPLE = frozenset({"NamedTuple", "typing.NamedTuple"})
# Annotations that declare no field of a dataclass (the probe of `verify` builds records by them too).
CLASS_VARIABLES = ("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar")


def record_of(node: ast.ClassDef) -> Record | None:
    """`node` as a `Record`, if it is one."""
    decorators = {ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list}
    bases = [ast.unparse(base) for base in node.bases]
    named_tuple = bool(bases) and bases[0] in _NAMED_TUPLE
    if not (decorators & _DATACLASS or named_tuple):
        return None
    fields = []
    for inner in node.body:
        if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and inner.name in ("__init__", "__post_init__"):
            return None
        if isinstance(inner, ast.AnnAssign) and isinstance(inner.target, ast.Name):
            annotation = inner.annotation
            text = annotation.value if isinstance(annotation, ast.Constant) else ast.unparse(annotation)
            if not str(text).startswith(CLASS_VARIABLES):  # `"ClassVar[float]"` is one too
                fields.append(inner.target.id)
    # Inherited fields, `KW_ONLY` and `field(init=False)` or `field(kw_only=True)` move positions;
    # keywords still name fields.
    own_bases = bases[1:] if named_tuple else bases
    code = ast.unparse(node)
    positional = not own_bases and "KW_ONLY" not in code and "kw_only" not in code and "init=False" not in code
    mapping = any(base.rpartition(".")[2] == MODEL_OUTPUT_BASE for base in own_bases)
    return Record(tuple(fields), positional, mapping)


class Symbols:
    """The imports and defs of one parsed module (`path`: its file, "" if none)."""

    def __init__(self, tree: ast.Module, path: str = "") -> None:
        self.tree = tree
        self.path = path

    # ---- imports --------------------------------------------------------------------

    @functools.cached_property
    def _module_level(self) -> list[Import]:
        return [
            i for node in self.tree.body if isinstance(node, (ast.Import, ast.ImportFrom)) for i in _imports_of(node)
        ]

    @functools.cached_property
    def imports(self) -> frozenset[tuple[str, str]]:
        """(local name, what it is) for each module-level import (the triage's reading)."""
        return frozenset((i.local, i.target) for i in self._module_level)

    @functools.cached_property
    def qualified(self) -> dict[str, str]:
        """Local name -> what it is, for the module-level imports, the last one winning (the
        analysis' reading, through `Library.imports`)."""
        return {i.local: i.target for i in self._module_level}

    @functools.cached_property
    def branch_imports(self) -> dict[str, list[str]]:
        """Local name -> what it may be, for the imports of the module's top level and of every branch
        of its blocks (`try`/`except ImportError`, `if version...:`/`else:`), not in defs or classes:
        a name each branch imports from elsewhere may be any of them."""
        found: dict[str, list[str]] = {}
        stack = [self.tree.body]
        while stack:
            for node in stack.pop():
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for i in _imports_of(node):
                        found.setdefault(i.local, []).append(i.target)
                elif type(node) in _COMPOUND and not isinstance(node, (*FUNCTIONS, ast.ClassDef)):
                    stack.extend(block for block, _ in _blocks(node))
        return found

    @functools.cached_property
    def imported(self) -> dict[str, tuple[str, int, str]]:
        """Local name -> (module, level, its name there), for the module-level `from <module> import
        <name> as <local>` (module "" for `from . import name`)."""
        return {
            i.local: (i.target.rpartition(".")[0], i.level, i.target.rpartition(".")[2])
            for i in self._module_level
            if i.from_import
        }

    @functools.cached_property
    def targets(self) -> dict[str, tuple[str, int]]:
        """Local name -> (what it is, level), for every import of the module, in functions and
        classes too (the project index's reading: a name imported anywhere is resolved)."""
        return {
            i.local: (i.target, i.level)
            for node in _statements(self.tree.body)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for i in _imports_of(node)
        }

    # ---- defs -----------------------------------------------------------------------

    @functools.cached_property
    def defs(self) -> dict[str, Def]:
        """The defs of the module's own body, by name (the last of a name wins)."""
        return {node.name: node for node in self.tree.body if isinstance(node, FUNCTIONS)}

    @functools.cached_property
    def classes(self) -> dict[str, ast.ClassDef]:
        """The classes of the module's own body, by name (the last of a name wins)."""
        return {node.name: node for node in self.tree.body if isinstance(node, ast.ClassDef)}

    @functools.cached_property
    def records(self) -> dict[str, Record]:
        """The record classes of the module's own body, by name (a later class of a record's name that is
        none leaves it one)."""
        found: dict[str, Record] = {}
        for node in self.tree.body:
            record = record_of(node) if isinstance(node, ast.ClassDef) else None
            if record is not None:
                found[node.name] = record
        return found

    @functools.cached_property
    def members(self) -> dict[str, Def]:
        """`defs`, and the defs of those classes' own bodies as `Class.name`."""
        found: dict[str, Def] = {}
        for node in self.tree.body:
            if isinstance(node, FUNCTIONS):
                found[node.name] = node
            elif isinstance(node, ast.ClassDef):
                for inner in node.body:
                    if isinstance(inner, FUNCTIONS):
                        found[f"{node.name}.{inner.name}"] = inner
        return found

    @functools.cached_property
    def _walk(self) -> list[tuple[Scope, Def, bool, bool]]:
        return _defs_in(self.tree.body, into_defs=True)

    @functools.cached_property
    def scoped(self) -> list[tuple[Scope, Def]]:
        """Every def, with the functions and classes around it (outermost first)."""
        return [(scope, node) for scope, node, _, _ in self._walk]

    @functools.cached_property
    def scoped_at(self) -> dict[int, list[tuple[Scope, Def]]]:
        """`scoped` by def line: asking for one line's defs does not walk every def."""
        found: dict[int, list[tuple[Scope, Def]]] = {}
        for scope, node in self.scoped:
            found.setdefault(node.lineno, []).append((scope, node))
        return found

    @functools.cached_property
    def lambdas_at(self) -> dict[int, list[ast.Lambda]]:
        """The module's lambdas by line, in `ast.walk`'s order."""
        found: dict[int, list[ast.Lambda]] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Lambda):
                found.setdefault(node.lineno, []).append(node)
        return found

    @functools.cached_property
    def _scopes(self) -> dict[int, Scope]:
        return {id(node): scope for scope, node, _, _ in self._walk}

    def scope_of(self, function: ast.AST) -> Scope:
        """The functions and classes around `function`, and itself (itself alone: no def here)."""
        scope = self._scopes.get(id(function))
        return [function] if scope is None else scope + [function]

    @functools.cached_property
    def _tables(
        self,
    ) -> tuple[dict[str, list[Def]], dict[str, list[Def]], dict[str, list[Def]], dict[str, list[ast.expr]]]:
        functions: dict[str, list[Def]] = {}
        methods: dict[str, list[Def]] = {}
        nested: dict[str, list[Def]] = {}
        annotations: dict[str, list[ast.expr]] = {}
        for scope, node, direct, _ in self._walk:
            if not scope:
                table = functions
            elif len(scope) == 1 and isinstance(scope[0], ast.ClassDef) and direct:
                table = methods
            else:
                table = nested
            table.setdefault(node.name, []).append(node)
            if node.returns is not None and table is not nested:
                annotations.setdefault(node.name, []).append(node.returns)
        return functions, methods, nested, annotations

    def functions(self, name: str) -> list[Def]:
        """The defs `name` outside every def and class (in any block of the module's statements)."""
        return self._tables[0].get(name, [])

    def methods(self, name: str) -> list[Def]:
        """The defs `name` in the body of a class that is outside every def and class."""
        return self._tables[1].get(name, [])

    def nested(self, name: str) -> list[Def]:
        """The other defs `name`: in a def, in a nested class, in a block of a class's statements."""
        return self._tables[2].get(name, [])

    def declares_number(self, name: str) -> bool:
        """Whether a function or method (`functions`, `methods`) called `name` is annotated to return
        a number, a string or the like (some is enough: `returns` asks all of them to agree)."""
        return any(declared(ast.unparse(a)) is Declared.IMMUTABLE for a in self._tables[3].get(name, ()))

    @functools.cached_property
    def returns(self) -> dict[str, Declared]:
        """The return annotations of the defs at module or class level (not in a def, an `except` or a
        `case` block), by name (a name defined twice with different answers: neither)."""
        found: dict[str, Declared | None] = {}
        for _, function, _, held in _defs_in(self.tree.body, into_defs=False):
            if held:
                continue
            kind = declared(ast.unparse(function.returns)) if function.returns is not None else None
            found[function.name] = kind if found.get(function.name, kind) is kind else None
        return {name: kind for name, kind in found.items() if kind is not None}


def summarisable(node: Def) -> bool:
    """`facts.policy.summarisable` of an `ast` def: whether the analysis summarises its calls (the
    library's rule, which the triage follows to over-approximate it)."""
    return policy_summarisable(node.lineno, node.end_lineno or node.lineno, isinstance(node, ast.AsyncFunctionDef))


def declared_returns_of(text: str) -> dict[str, Declared]:
    """`Symbols.returns` of a source text ({} if CPython cannot parse it)."""
    try:
        return Symbols(ast.parse(text)).returns
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}


def derived_classes(classes: Mapping[str, ast.ClassDef], name: str) -> list[str]:
    """The classes among `classes` (one module's, by name) deriving from class `name` through bases
    named there, at any depth up to 4, in the module's order."""
    found: set[str] = set()
    for _ in range(4):
        more = {
            c.name
            for c in classes.values()
            if c.name not in found and any(isinstance(b, ast.Name) and b.id in found | {name} for b in c.bases)
        }
        if not more:
            break
        found |= more
    return [c for c in classes if c in found]


def _defs_in(body: list[ast.stmt], into_defs: bool) -> list[tuple[Scope, Def, bool, bool]]:
    """Every def in `body` (`into_defs`: also in defs, else at module and class level only), with the
    functions and classes around it, whether it is in the body of the innermost of them (or the
    module's) itself rather than in a block of a statement there, and whether an `except` or `case`
    block holds it. Lambdas are expressions: not walked."""
    found: list[tuple[Scope, Def, bool, bool]] = []
    stack: list[tuple[list[ast.stmt], Scope, bool, bool]] = [(body, [], True, False)]
    while stack:
        body, scope, direct, held = stack.pop()
        for node in body:
            if isinstance(node, FUNCTIONS):
                found.append((scope, node, direct, held))
                if into_defs:
                    stack.append((node.body, scope + [node], True, held))
            elif isinstance(node, ast.ClassDef):
                stack.append((node.body, scope + [node], True, held))
            elif type(node) in _COMPOUND:
                stack.extend((block, scope, False, held or handler) for block, handler in _blocks(node))
    return found


# The statements holding blocks of statements (`_blocks`): a set, to pass the others by cheaply.
_COMPOUND = frozenset(
    kind
    for kind in vars(ast).values()
    if isinstance(kind, type) and issubclass(kind, ast.stmt) and {"body", "handlers", "cases"} & set(kind._fields)
)


def _blocks(node: ast.stmt) -> Iterator[tuple[list[ast.stmt], bool]]:
    """The blocks of a compound statement, each with whether an `except` or `case` holds it."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list):
            yield block, False
    for handler in getattr(node, "handlers", ()):
        yield handler.body, True
    for case in getattr(node, "cases", ()):
        yield case.body, True


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, in functions and classes too, without entering expressions."""
    stack = [body]
    while stack:
        for node in stack.pop():
            yield node
            if type(node) in _COMPOUND:
                stack.extend(block for block, _ in _blocks(node))
