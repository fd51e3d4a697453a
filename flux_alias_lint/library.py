"""Where the functions a loss function calls are defined: in its file, or in another module of its project.

The analysis summarises a helper (`make_report(loss)`, `self._record(loss)`, `log_into(report, k, v)`)
from the helper's own code. The triage hands libcst only the units that can have a finding, so the
helper is looked up here by name, in the whole file (CPython's `ast` gives its lines) or, for an
import, in the module file it names, and parsed with libcst alone, unit by unit, when first needed.

An import is resolved on disk, the way Python's path would find it from the importing file: a
relative import from its package, an absolute one from each directory above the file up to the
project root (so `src/` layouts and nested packages resolve). Only files under the project root are
read; a module found nowhere there is outside the tree, and its calls keep the ordinary rules.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import warnings

import libcst as cst

from .evidence import Declared
from .facts.storage import MODEL_OUTPUT_BASE
from .index.files import Lookup, find_module
from .index.nodes import statements
from .index.symbols import PARSE_ERRORS, Symbols, derived_classes, summarisable
from .source import SourceError, read_bytes


@dataclasses.dataclass(frozen=True)
class Definition:
    """A function found for a call: its libcst node (parsed alone) and the file it is in."""

    path: str  # "" for the file being checked
    node: cst.FunctionDef
    module: cst.Module  # what `node` was parsed in (for its code)
    library: Library  # the library of the file it is in, for the calls it makes
    owner: str | None = None  # the class it is a method of: what `self.m()` in it means
    lines: int = 0  # how many lines it spans: what its summary is allowed to cost (`analysis.Work`)


@dataclasses.dataclass(frozen=True)
class Record:
    """A class whose instances only hold what they are given: a `@dataclass` or a `NamedTuple`
    with no `__init__`/`__post_init__` of its own (either may copy what it is given)."""

    fields: tuple[str, ...]  # in the order its constructor takes them by position
    positional: bool  # False: a base class may add fields before these, positions are not known
    # A transformers `ModelOutput` subclass: an ordered dict of its fields (`facts.storage.is_model_output`).
    mapping: bool = False


class Library:
    """The module-level functions and methods of one file, and the modules it imports."""

    def __init__(self, path: str, text: str, tree: ast.Module | None = None) -> None:
        self.path = path
        self.text = text
        self._tree = tree
        self._spans: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None
        self._imports: dict[str, tuple[str, int, str]] | None = None  # `Symbols.imported`
        self._parsed: dict[str, Definition | None] = {}
        self._others: dict[str, Library | None] = {}
        self._looked_up: dict[tuple[str, int], str | None] = {}  # (dotted, level): the file `find_module` found
        self._module_imports: dict[str, str] | None = None  # `Symbols.qualified`; None: no `ast` tree
        self._returns: dict[str, Declared] | None = None
        self._records: dict[str, Record] = {}
        self._classes: dict[str, ast.ClassDef] = {}  # the module-level classes, by name
        self._made: dict[str, dict[str, set[str]]] = {}  # `_attribute_classes`, by class
        # The analysis' summaries of this file's functions, by id of their node (None: being computed).
        self.summaries: dict[int, object] = {}
        # What computing each cost (`analysis.summaries.SummaryCost`), charged again wherever it is reused.
        self.summary_costs: dict[int, object] = {}

    def offer_tree(self, tree: ast.Module) -> None:
        """The file's `ast` tree, when the triage already has it: no second parse."""
        if self._spans is None and self._tree is None:
            self._tree = tree

    def imports(self) -> dict[str, str] | None:
        """`Symbols.qualified` of the file: its module-level imports, local name -> what it is (None:
        CPython cannot parse the file)."""
        self._definitions()
        return self._module_imports

    def returns(self) -> dict[str, Declared]:
        """`Symbols.returns` of the file."""
        self._definitions()
        assert self._returns is not None
        return self._returns

    def method(self, name: str, owner: str | None = None) -> Definition | None:
        """`self.name(...)` in a method of class `owner` of this file: its own method `name`, or one it
        inherits from a class of this file; else (or without an owner) the method of the one class of
        this file that defines it."""
        definitions = self._definitions()
        if owner is not None and any(f"{c}.{name}" in definitions for c in derived_classes(self._classes, owner)):
            return None  # `self` may be a subclass's instance, whose own `name` runs: not known which
        for _ in range(5 if owner is not None else 0):  # as deep as the project index follows bases
            if f"{owner}.{name}" in definitions:
                return self.function(f"{owner}.{name}")
            bases = self._bases(owner or "")
            if not bases:
                break
            owner = bases[0]  # the first base first, as Python's method resolution starts
        # Not found along the class's own bases here (they may be in another module): the method of
        # the one class of this file that defines it, if only one does.
        owners = [key for key in definitions if key.partition(".")[2] == name]
        return self.function(owners[0]) if len(owners) == 1 else None

    def attribute_method(self, owner: str | None, attribute: str, name: str) -> Definition | None:
        """`self.<attribute>.name(...)` in a method of class `owner` of this file: the method `name` of
        the one class `self.<attribute>` is made from (`self.meter = Meter()`) or declared as
        (`self.meter: Meter`) in `owner` or its bases here, a class of this file or one it imports."""
        self._definitions()
        if owner not in self._classes:
            return None
        classes = set().union(
            *(self._attribute_classes(cls).get(attribute, ()) for cls in (owner, *self._bases(owner)))
        )
        if len(classes) != 1 or "" in classes:
            return None  # made from no class, or from several: which method runs is not known
        (cls,) = classes
        return self.method(name, cls) if cls in self._classes else self.function(f"{cls}.{name}")

    def _attribute_classes(self, cls: str) -> dict[str, set[str]]:
        """What each `self.<attribute>` of class `cls` is made from or declared as: class names ("" for
        anything else), from one walk of the class."""
        found = self._made.get(cls)
        if found is None:
            found = self._made[cls] = {}
            for node in statements(self._classes[cls]):  # assignments are statements: no expression is walked
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    pairs = [(target, node.value.func) for target in node.targets]
                elif isinstance(node, ast.AnnAssign):
                    pairs = [(node.target, node.annotation)]
                else:
                    continue
                for target, kind in pairs:
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        found.setdefault(target.attr, set()).add(kind.id if isinstance(kind, ast.Name) else "")
        return found

    def _bases(self, name: str) -> list[str]:
        """The bases of class `name` that are classes of this file."""
        cls = self._classes.get(name)
        return [b.id for b in cls.bases if isinstance(b, ast.Name) and b.id in self._classes] if cls else []

    def class_at(self, line: int) -> str | None:
        """The module-level class of this file whose lines hold `line`."""
        self._definitions()
        return next((name for name, c in self._classes.items() if c.lineno <= line <= (c.end_lineno or c.lineno)), None)

    def function(self, name: str) -> Definition | None:
        """A module-level function `name` (or, `Class.name`, a method) of this file, or one it imports."""
        if name not in self._parsed:
            self._parsed[name] = None  # recursion-safe: a module importing itself finds nothing
            self._parsed[name] = self._local(name) or self._imported(name)
        return self._parsed[name]

    def record(self, name: str) -> Record | None:
        """The record class `name` of this file, or one it imports (`from .reports import Report`)."""
        self._definitions()
        found = self._records.get(name)
        if found is not None or self._imports is None or name not in self._imports or not self.path:
            return found
        module_name, level, class_name = self._imports[name]
        other = self._module(module_name, level)
        return other._records_of(class_name) if other is not None else None

    def _records_of(self, name: str) -> Record | None:
        self._definitions()
        return self._records.get(name)  # one import deep, like the functions a summary may call

    def _definitions(self) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        if self._spans is None:
            self._spans, self._imports, self._returns = {}, {}, {}
            tree = self._tree
            if tree is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        tree = ast.parse(self.text)
                    except PARSE_ERRORS:
                        return self._spans
            self._tree = None  # only what the table gives is kept, not the table or the tree
            symbols = Symbols(tree, self.path)
            self._spans, self._classes, self._imports = symbols.members, symbols.classes, symbols.imported
            self._returns, self._module_imports = symbols.returns, symbols.qualified
            for node in tree.body:  # a later class of a record's name that is none leaves it one
                if isinstance(node, ast.ClassDef):
                    record = _record(node)
                    if record is not None:
                        self._records[node.name] = record
        return self._spans

    def _local(self, name: str) -> Definition | None:
        node = self._definitions().get(name)
        if node is None or not summarisable(node):  # the triage asks the same, so that it over-approximates this
            return None
        lines = self.text.splitlines(keepends=True)[
            min(d.lineno for d in [node, *node.decorator_list]) - 1 : node.end_lineno
        ]
        code = "".join(lines)
        if node.col_offset:
            code = "if 1:\n" + code  # a method: its block opened, its columns kept
        try:
            module = cst.parse_module(code)
        except cst.ParserSyntaxError:
            return None
        found = _first_def(module)
        owner = name.partition(".")[0] if "." in name else None
        return Definition(self.path, found, module, self, owner, len(lines)) if found is not None else None

    def _imported(self, name: str) -> Definition | None:
        """`from pkg.mod import f` (or `from .mod import f as g`): `f` in the project's `pkg/mod.py`."""
        self._definitions()
        assert self._imports is not None
        head, _, rest = name.partition(".")
        target = self._imports.get(head)
        if target is None or not self.path:
            return None
        module_name, level, function = target
        other = self._module(module_name, level)
        return other.function(function + ("." + rest if rest else "")) if other is not None else None

    def _module(self, dotted: str, level: int) -> Library | None:
        key = f"{level}:{dotted}"
        if key not in self._others:
            self._others[key] = None
            path = self._looked_up[dotted, level] = find_module(self.path, dotted, level)
            if path is not None:
                self._others[key] = _library_of(path)
        return self._others[key]

    def close(self) -> None:
        """Drop what this file's analysis built: its definitions refer back to it, and the cycle would
        keep their libcst trees alive until the next collection (`source.collections_paused`)."""
        self._parsed.clear()
        self.summaries.clear()
        self.summary_costs.clear()

    def files(self) -> list[str]:
        """The other files whose functions were looked up: a change in any of them can change findings here."""
        return sorted(library.path for library in self._reached() if library is not self)

    def lookups(self) -> list[Lookup]:
        """The modules this file and those files looked for, found or not: another file found for one of
        them (one added, one removed, one that now shadows it) can change findings here too."""
        return sorted(
            Lookup(library.path, dotted, level, found)
            for library in self._reached()
            for (dotted, level), found in library._looked_up.items()
        )

    def _reached(self) -> list[Library]:
        """This library and those of the other files whose functions were looked up."""
        seen = {self.path: self}
        stack = [self]
        while stack:
            for other in stack.pop()._others.values():
                if other is not None and other.path not in seen:
                    seen[other.path] = other
                    stack.append(other)
        return list(seen.values())


_DATACLASS = frozenset({"dataclass", "dataclasses.dataclass"})
_NAMED_TUPLE = frozenset({"NamedTuple", "typing.NamedTuple"})
# Annotations that declare no field of a dataclass (the probe of `verify` builds records by them too).
CLASS_VARIABLES = ("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar")


def _record(node: ast.ClassDef) -> Record | None:
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


def _first_def(module: cst.Module) -> cst.FunctionDef | None:
    body = list(module.body)
    while body:
        node = body.pop(0)
        if isinstance(node, cst.FunctionDef):
            return node
        if isinstance(node, cst.If) and isinstance(node.body, cst.IndentedBlock):
            body = list(node.body.body) + body
    return None


# The project's modules as read by this process (a worker checks many files that import the same
# helpers): by path, while the file's stamp is unchanged.
_LIBRARIES: dict[str, tuple[tuple[int, int], Library | None]] = {}


def _library_of(path: str) -> Library | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    stamp = (st.st_mtime_ns, st.st_size)
    cached = _LIBRARIES.get(path)
    if cached is None or cached[0] != stamp:
        try:  # a regular file only: a FIFO named like a module must not hang the run
            library = Library(path, read_bytes(path).decode("utf-8"))
        except (SourceError, UnicodeDecodeError):
            library = None
        cached = _LIBRARIES[path] = (stamp, library)
    return cached[1]
