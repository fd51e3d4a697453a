"""The project-wide index: which functions Megatron's schedule (or an in-place caller) really calls.

A finding is only as convincing as the evidence that something rescales the loss it reports. This
module reads the whole project the checked files belong to (the git work tree, else the directory
of the nearest `pyproject.toml`), not only the files handed over, so a pre-commit run on one file
gets the context a whole-tree run gets.

A cheap byte-level gate picks the files that can hold evidence; only those are parsed (CPython's
`ast`), and the modules their names resolve into on demand. The evidence, each a `Step`, is one
entry each of the table in `handoffs.py` (Megatron's schedule calls, Megatron-Bridge's entry points,
forward-step signatures as a guess, the loss function a forward step returns, partials binding it,
`forward_step_calc_loss`, NeMo's `MegatronLossReduction`, patches installing a function in place of
one with a context, and callers rescaling an unpacked loss in place: context "in-place-caller").

Functions are named by (real path, line of their `def` or `lambda`), which both `ast` and libcst give.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import multiprocessing
import os
import re
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence

from .handoffs import PATCH, SCHEDULE_CALLS, SIGNATURES, ScheduleCall, Signature
from .source import SourceError, collections_paused, read_bytes

MEGATRON = "megatron"
IN_PLACE_CALLER = "in-place-caller"
# FAL005: the write changing the capture is in the function itself, whoever calls it.
IN_FUNCTION = "in-function"
UNREACHED = "unreached"

_LOSS_REDUCTION = "MegatronLossReduction"
# Where Megatron's schedule calls the loss function, in the layouts of megatron-core and of the
# Megatron-LM releases before it: a project carrying its own copy of Megatron imports these.
_SCHEDULE_MODULES = ("megatron.core.pipeline_parallel.schedules", "megatron.schedules")
_SCHEDULE_LOSS_FUNC = "loss_func"  # the name the schedule gives what the forward step returns

# A file can hold evidence only if it hands a function to a schedule (not merely passes its own
# `forward_step_func` parameter on), calls `forward_step_calc_loss`, subclasses the loss reduction,
# defines a forward-step signature, or unpacks a call into a name it then rescales in place. One
# pattern per kind, each tried only where its word is in the file and found by a literal it starts
# with (an alternation of them scans slowly: most of the index's time on NeMo).
_MEGATRON_GATES = (
    (b"forward_step_func", re.compile(rb"forward_step_func\s*=\s*(?!forward_step_func\b)[\w(]")),
    (b"pretrain", re.compile(rb"\bpretrain\(\s*\w")),
    (b"finetune", re.compile(rb"\bfinetune\(\s*\w")),  # Megatron-Bridge's
    (b"forward_step", re.compile(rb"\bforward_step(?:_calc_loss)?\(\s*\w")),
    (_LOSS_REDUCTION.encode(), re.compile(rb"class \w+\([^)]*" + _LOSS_REDUCTION.encode())),
    # `def f(data_iterator, model`: found from the parameter, its `def` checked on the line before it.
    (b"_iter", re.compile(rb"(?<=[(,\s])(?:data|dataloader)_iter(?:ator)?\s*(?::[^,]*)?,\s*model\b")),
)
_SIGNATURE_START = re.compile(
    rb"def \w+\(\s*(?:self,\s*)?(?:(?:"
    + b"|".join(name.encode() for signature in SIGNATURES for name in signature.optional_first)
    + rb")\s*(?::[^,]*)?,\s*)?\Z"
)
_RESCALES = (b"*=", b"/=", b".div_(", b".mul_(")
_RESCALING_METHODS = ("div_", "mul_")


def _gates(data: bytes) -> tuple[set[int], set[int]]:
    """The lines that may hold Megatron evidence, and those that may rescale an unpacked result in
    place. Plain substring tests first: most files have none of the words."""
    megatron: set[int] = set()
    for word, pattern in _MEGATRON_GATES:
        if word in data:
            for match in pattern.finditer(data):
                start = match.start()
                if data[max(start - 4, 0) : start] == b"def ":
                    continue  # a definition of `pretrain` or `forward_step` hands nothing over
                if word == b"_iter":
                    start = data.rfind(b"def ", 0, start)
                    if start == -1 or not _SIGNATURE_START.match(data, start, match.start()):
                        continue
                megatron.add(_line_of(data, start))
    rescaling: set[int] = set()
    for name, at in _rescaled_names(data):
        if re.search(rb"^[ \t]*" + re.escape(name) + rb"[ \t]*,[^=\n]*=[ \t]*[\w.]+\(", data, re.M):
            rescaling.add(_line_of(data, at))
    return megatron, rescaling


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _rescaled_names(data: bytes) -> Iterator[tuple[bytes, int]]:
    """The name before each `*=`, `/=`, `.div_(`, `.mul_(`, with its offset (found with `bytes.find`:
    a regex without a literal prefix costs more than the whole gate)."""
    for marker in _RESCALES:
        at = data.find(marker)
        while at != -1:
            end = at
            while end > 0 and data[end - 1] in b" \t":
                end -= 1
            begin = end
            while begin > 0 and (chr(data[begin - 1]).isalnum() or data[begin - 1] == ord("_")):
                begin -= 1
            if begin < end:
                yield data[begin:end], at
            at = data.find(marker, at + len(marker))


_SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".nox", "build"})


@dataclasses.dataclass(frozen=True)
class Step:
    """One link from a loss function to the call that rescales its loss."""

    path: str
    line: int
    what: str

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Reach:
    context: str  # MEGATRON or IN_PLACE_CALLER
    steps: tuple[Step, ...]
    guessed: bool = False  # from a forward-step signature alone: any hand-off call found replaces it
    # What is rescaled is the function's return value itself, which a loss function returns as its loss
    # (`handoffs.RETURNED_AS_THE_LOSS`), not the first element of a tuple it returns.
    whole_return: bool = False


UNREACHED_REACH = Reach(UNREACHED, ())

Key = tuple[str, int]  # (real path, line of the def or lambda)
Reaches = Mapping[int, Reach]  # the reached functions of one file, by the line of their def or lambda


def project_root(path: str, known: dict[str, tuple[str | None, str | None]] | None = None) -> str:
    """The git work tree `path` is in, else the directory of its nearest `pyproject.toml`, else its
    own directory. `known`: see `_markers_above`."""
    start = os.path.realpath(path)
    directory = start if os.path.isdir(start) else os.path.dirname(start)
    git, pyproject = _markers_above(directory, known)
    return git or pyproject or directory


def _markers_above(
    directory: str, known: dict[str, tuple[str | None, str | None]] | None = None
) -> tuple[str | None, str | None]:
    """(the nearest directory at or above `directory` with a `.git`, the nearest with a
    `pyproject.toml` when there is no `.git`); `known`: answers for directories already asked,
    so that sibling directories look at their shared parents once."""
    known = {} if known is None else known
    chain: list[str] = []
    current = directory
    while current not in known:
        if os.path.exists(os.path.join(current, ".git")):
            known[current] = (current, None)
            break
        parent = os.path.dirname(current)
        if parent == current:  # the filesystem's root
            known[current] = (None, current if os.path.isfile(os.path.join(current, "pyproject.toml")) else None)
            break
        chain.append(current)
        current = parent
    for below in reversed(chain):
        git, pyproject = known[os.path.dirname(below)]
        if git is None and os.path.isfile(os.path.join(below, "pyproject.toml")):
            pyproject = below
        known[below] = (git, pyproject)
    return known[directory]


def project_roots(paths: Iterable[str]) -> list[str]:
    """The projects the files `paths` belong to (`project_root`), each once."""
    roots: dict[str, str] = {}
    known: dict[str, tuple[str | None, str | None]] = {}
    for path in paths:
        directory = os.path.dirname(os.path.abspath(path))
        if directory not in roots:
            roots[directory] = project_root(path, known)
    return sorted(set(roots.values()))


def python_files(root: str) -> Iterator[str]:
    """Every `*.py` under `root` (real paths), and every script without an extension that starts
    with a `python` shebang (pre-commit's `types: [python]` hands those over too), skipping VCS,
    virtualenv and build directories. The directory entries tell files from the rest: no stat per
    file (a warm run stats each one once, for the index cache's key)."""
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in _SKIP_DIRS and not entry.name.endswith(".egg-info"):
                        subdirs.append(entry.path)
                elif (
                    entry.name.endswith(".py")
                    and entry.is_file()
                    or "." not in entry.name
                    and entry.is_file()
                    and python_script(entry.path)
                ):
                    yield entry.path
            except OSError:
                continue
        stack.extend(reversed(subdirs))


def python_script(path: str) -> bool:
    """A file whose first line is a shebang naming python (`#!/usr/bin/env python3`)."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def real_path(path: str) -> str:
    """`os.path.realpath`, with one lstat for the file instead of one per component of its path:
    the directories are resolved once each (asked for every file of a run)."""
    if os.path.islink(path):
        return os.path.realpath(path)
    directory, name = os.path.split(path)
    return os.path.join(_real_directory(directory or os.curdir, os.getcwd()), name)


@functools.lru_cache(maxsize=4096)
def _real_directory(directory: str, cwd: str) -> str:  # `cwd`: a relative directory means another one there
    return os.path.realpath(directory)


def find_module(importer: str, dotted: str, level: int) -> str | None:
    """The file of module `dotted` as `importer` imports it (`level`: the dots of a relative import),
    found the way Python's path would: relative to the importer's package, else from each directory
    above it up to its project root, then the root's `src/` (so `src/` layouts and nested packages
    resolve, also from outside `src/`). None: outside
    the project."""
    importer = os.path.realpath(importer)
    parts = dotted.split(".") if dotted else []
    directory = os.path.dirname(importer)
    if level:
        for _ in range(level - 1):
            directory = os.path.dirname(directory)
        bases = [directory]
    else:
        root = project_root(importer)
        bases = []
        while directory == root or directory.startswith(root + os.sep):
            bases.append(directory)
            directory = os.path.dirname(directory)
        bases.append(os.path.join(root, "src"))  # a `src/` layout's packages, from its scripts and tests
    for base in bases:
        candidate = os.path.join(base, *parts)
        for path in (candidate + ".py", os.path.join(candidate, "__init__.py")):
            if path != importer and os.path.isfile(path):
                return path
    return None


@dataclasses.dataclass
class _Module:
    path: str
    tree: ast.Module
    imports: dict[str, tuple[str, int]]  # local name -> (dotted target "pkg.mod" or "pkg.mod.name", level)
    functions: dict[str, ast.AST]  # module-level defs by name
    classes: dict[str, ast.ClassDef]


Evidence = list[tuple[Key, Reach]]  # what one file shows, in the order it is found


@dataclasses.dataclass(frozen=True)
class _Bound:
    """The arguments a `functools.partial` at a hand-off gives a forward step's parameters, with
    where the partial is (to resolve them there)."""

    module: _Module
    scope: list[ast.AST]  # the functions and classes around the partial, innermost last
    call: ast.Call
    arguments: dict[str, ast.expr]  # parameter name -> the argument bound to it


# What a name bound to a loss function may be assigned (`_named`).
_CALLABLE_VALUES = (ast.Lambda, ast.Call, ast.Name, ast.Attribute, ast.IfExp)

# Below this many files, forking workers for the index costs more than it saves.
_FORK_FILES = 256


def collect_evidence(
    roots: Sequence[str], files: Mapping[str, Sequence[str]], jobs: int = 1
) -> tuple[dict[str, Evidence], dict[str, set[str]]]:
    """`ProjectIndex(roots, files)`'s `evidence` and `depends_on`. Each file's are its own (what it
    resolves against is read whatever else is collected), so `jobs` forked processes collect a
    share of the files each: the index is most of what a cold run does before checking any file."""
    count = sum(len(paths) for paths in files.values())
    if jobs <= 1 or count < _FORK_FILES or sys.platform != "linux":
        return _collected(roots, files)
    shares = [{root: list(paths[k::jobs]) for root, paths in files.items()} for k in range(jobs)]
    evidence: dict[str, Evidence] = {}
    depends_on: dict[str, set[str]] = {}
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        for found, deps in pool.map(functools.partial(_collected, roots), shares):
            evidence.update(found)
            depends_on.update(deps)
    return evidence, depends_on


def _collected(
    roots: Sequence[str], files: Mapping[str, Sequence[str]]
) -> tuple[dict[str, Evidence], dict[str, set[str]]]:
    with collections_paused():
        index = ProjectIndex(roots, files)
    return index.evidence, index.depends_on


class ProjectIndex:
    """Contexts of the functions in one or more projects, by (real path, def line).

    Each file's evidence is also kept apart (`evidence`, for the files the gate let through), with
    the other files read to resolve it (`depends_on`): a later run re-derives only the files whose
    own text or whose dependencies changed (`cache.project_reached`), and `merged` puts the pieces
    together exactly as one run over every file would."""

    def __init__(self, roots: Iterable[str], files: Mapping[str, Sequence[str]] | None = None) -> None:
        self.roots = sorted(set(roots))
        self._files = {root: list(files[root]) if files else list(python_files(root)) for root in self.roots}
        self._parsed: dict[str, _Module | None] = {}
        self.reached: dict[Key, Reach] = {}
        self.evidence: dict[str, Evidence] = {}
        self.depends_on: dict[str, set[str]] = {}
        self._current: str | None = None  # the file whose evidence is being collected
        self._copying: dict[str, bool] = {}  # `_schedule_copies`, by the schedule module's path
        self._schedules: dict[str, str | None] = {}  # the schedule module found from each directory
        self._project_files: dict[str, list[str]] = {}  # every file of a root, for `_callers` (files may be a part)
        self._mentions: dict[tuple[str, str], list[str]] = {}  # `_mentioning`
        for root in self.roots:
            for path in self._files[root]:
                self._current = path
                self._collect(path)
        self._current = None

    @classmethod
    def merged(cls, evidence: Iterable[Evidence]) -> ProjectIndex:
        """The index whose files showed `evidence` (in the order one run would collect them)."""
        index = cls([])
        for found in evidence:
            for (path, line), reach in found:
                index._merge((path, line), reach)
        return index

    @classmethod
    def for_paths(cls, paths: Iterable[str]) -> ProjectIndex:
        """The index of every project the files `paths` belong to."""
        return cls(project_roots(paths))

    @classmethod
    def of_source(cls, text: str, path: str = "<string>") -> ProjectIndex:
        """The index of one module on its own (stdin, the Python API): the evidence in its own text."""
        index = cls([])
        index._current = path
        index._collect(path, text.encode("utf-8", "surrogatepass"))
        index._current = None
        return index

    def reached_by_path(self) -> dict[str, dict[int, Reach]]:
        """The reached functions of each file (by real path), by the line of their def or lambda."""
        out: dict[str, dict[int, Reach]] = {}
        for (path, line), reach in self.reached.items():
            out.setdefault(path, {})[line] = reach
        return out

    # ---- reading ----------------------------------------------------------------------

    def _collect(self, path: str, data: bytes | None = None) -> None:
        if data is None:
            try:  # a regular file only: a FIFO or a link to a device must not hang the index
                data = read_bytes(path)
            except SourceError:
                return
        megatron, rescaling = _gates(data)
        if not (megatron or rescaling):
            return
        self.evidence[path], self.depends_on[path] = [], set()
        module = self._module(path, data)
        if module is None:
            return
        for scope, function in _functions(module.tree):
            lines = range(function.lineno, (function.end_lineno or function.lineno) + 1)
            if any(line in lines for line in megatron):
                self._megatron_evidence(module, scope, function)
            if any(line in lines for line in rescaling):
                self._in_place_evidence(module, scope, function)
        if megatron:
            self._megatron_evidence(module, [], module.tree)
            for cls in module.classes.values():
                if self._is_loss_reduction(module, cls, depth=0):
                    for stmt in cls.body:
                        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "forward":
                            self._reach(
                                module.path,
                                stmt,
                                Reach(
                                    MEGATRON, (self._step(module, stmt, f"forward of {cls.name}, a {_LOSS_REDUCTION}"),)
                                ),
                            )
        self._patch_evidence(path)
        self._delegated_evidence(path)
        self._returned_as_the_loss(path)

    def _module(self, path: str, data: bytes | None = None) -> _Module | None:
        if self._current is not None and path != self._current:
            self.depends_on[self._current].add(path)
        if path in self._parsed:
            return self._parsed[path]
        self._parsed[path] = None
        try:
            if data is None:
                data = read_bytes(path)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(data)
        except (SourceError, SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        module = _Module(path, tree, {}, {}, {})
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                module.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                module.classes[node.name] = node
        for node in _statements(tree.body):  # imports anywhere: inside functions too
            if isinstance(node, ast.Import):
                for alias in node.names:
                    head = alias.name.split(".")[0]
                    module.imports[alias.asname or head] = (alias.name if alias.asname else head, 0)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name != "*":
                        target = f"{node.module}.{alias.name}" if node.module else alias.name
                        module.imports[alias.asname or alias.name] = (target, node.level)
        self._parsed[path] = module
        return module

    # ---- resolving names to functions ---------------------------------------------------

    def _resolve(
        self, module: _Module, scope: list[ast.AST], node: ast.expr, depth: int = 0
    ) -> list[tuple[_Module, ast.AST]]:
        """The functions (defs or lambdas) an expression naming a callable may be, in the project."""
        if depth > 4:
            return []
        if isinstance(node, ast.Lambda):
            found = [(module, node)]
            if isinstance(node.body, ast.Call):
                found += self._resolve(module, scope, node.body.func, depth + 1)
            return found
        if isinstance(node, ast.Call) and _last_name(node.func) == "partial" and node.args:
            return self._resolve(module, scope, node.args[0], depth + 1)
        if isinstance(node, ast.Call):
            # An instance of a class of the project (a functor: calling it runs its `__call__`), or a
            # factory: what the functions it may be return (a callable or a partial, not a call's result).
            instances = [
                (class_module, method)
                for class_module, cls in self._classes(module, node.func)
                for method in self._methods(class_module, cls, "__call__", 0)
            ]
            return instances + [
                found
                for target_module, factory in self._resolve(module, scope, node.func, depth + 1)
                if not isinstance(factory, ast.Lambda)
                for stmt in _body_walk(factory)
                if isinstance(stmt, ast.Return) and stmt.value is not None and _callable_value(stmt.value)
                for found in self._resolve(target_module, _scope_of(target_module, factory), stmt.value, depth + 1)
            ]
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):  # `LOSS_REGISTRY[name]`
            return self._registered(module, node.value.id, depth + 1)
        if isinstance(node, ast.IfExp):
            return self._resolve(module, scope, node.body, depth + 1) + self._resolve(
                module, scope, node.orelse, depth + 1
            )
        if isinstance(node, ast.Name):
            # A closure, or a name bound to a partial or lambda in an enclosing function or the module.
            defs, values = self._named(module, scope, node.id)
            if defs:
                return [(module, d) for d in defs]
            if values:
                return [found for value in values for found in self._resolve(module, scope, value, depth + 1)]
            if node.id in module.functions:
                return [(module, module.functions[node.id])]
            if node.id in module.imports:
                return self._resolve_dotted(module, *module.imports[node.id], depth + 1)
            return []
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            cls = next((f for f in reversed(scope) if isinstance(f, ast.ClassDef)), None)
            if cls is not None:
                methods = self._methods(module, cls, node.attr, 0) + self._overrides(module, cls, node.attr)
                return [(module, m) for m in methods]
        if isinstance(node, ast.Attribute) and _is_self_attribute(node.value):
            # `self.loss_func.compute_loss`, `self.loss_func` declared (or made) as an instance of a
            # class of the project: that class's method, or any of its subclasses' in the project.
            cls = next((f for f in reversed(scope) if isinstance(f, ast.ClassDef)), None)
            declared = self._attribute_classes(module, cls, node.value.attr) if cls is not None else []
            return [
                found
                for class_module, declared_cls in declared
                for found in self._subclass_methods(class_module, declared_cls, node.attr)
            ]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in module.classes:
            return [(module, m) for m in self._methods(module, module.classes[node.value.id], node.attr, 0)]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in module.imports:
            target, level = module.imports[node.value.id]
            return self._resolve_dotted(module, f"{target}.{node.attr}", level, depth + 1)
        return []

    def _registered(self, module: _Module, registry: str, depth: int) -> list[tuple[_Module, ast.AST]]:
        """The functions a decorator of `module` files into its dict `registry` (`handoffs.REGISTRY`):
        the decorator stores its parameter (`REGISTRY[name] = fn`, or a wrapper returning `fn(...)`),
        and is used as `@decorator` or, made by a factory returning it, as `@factory("name")`."""
        found = []
        for scope, function in _functions(module.tree):
            params = _parameters(function)
            stores = [
                stmt
                for stmt in _body_walk(function)
                if isinstance(stmt, ast.Assign)
                and any(isinstance(t, ast.Subscript) and _last_name(t.value) == registry for t in stmt.targets)
            ]
            if not params or not any(_hands_on(function, stmt.value, params[0]) for stmt in stores):
                continue
            outer = scope[-1] if scope else None
            made = isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(r, ast.Return) and isinstance(r.value, ast.Name) and r.value.id == function.name
                for r in _body_walk(outer)
            )
            found += self._decorated(module, outer if made else function, depth)
        return found

    def _decorated(self, module: _Module, decorator: ast.AST, depth: int) -> list[tuple[_Module, ast.AST]]:
        """The functions of the project decorated with `decorator` (`@decorator`, `@decorator(...)`)."""
        found = []
        paths = self._mentioning(module.path, f"@{decorator.name}")
        for other in [module, *(m for m in map(self._module, paths) if m is not None and m is not module)]:
            for scope, function in _functions(other.tree):
                for node in function.decorator_list:
                    callee = node.func if isinstance(node, ast.Call) else node
                    if _last_name(callee) != decorator.name:
                        continue
                    if any(target is decorator for _, target in self._resolve(other, scope, callee, depth + 1)):
                        found.append((other, function))
        return found

    def _classes(self, module: _Module, node: ast.expr) -> list[tuple[_Module, ast.ClassDef]]:
        """The class of the project `node` (`Name`, `alias.Name`) names, if it names one."""
        if isinstance(node, ast.Name) and node.id in module.classes:
            return [(module, module.classes[node.id])]
        dotted = _imported_from(module, node)
        if "." not in dotted:
            return []
        owner, _, name = dotted.rpartition(".")
        level = module.imports[node.id if isinstance(node, ast.Name) else node.value.id][1]
        path = find_module(module.path, owner, level)
        target = self._module(path) if path is not None else None
        return [(target, target.classes[name])] if target is not None and name in target.classes else []

    def _attribute_classes(self, module: _Module, cls: ast.ClassDef, attr: str) -> list[tuple[_Module, ast.ClassDef]]:
        """The classes of the project that `self.<attr>` of `cls` is declared as (`self.attr: Base`,
        `attr: Base` in the class body) or made from (`self.attr = Base(...)`)."""
        named = [
            stmt.annotation
            for stmt in cls.body
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == attr
        ]
        for node in ast.walk(cls):
            if isinstance(node, ast.AnnAssign) and _is_self_attribute(node.target) and node.target.attr == attr:
                named.append(node.annotation)
            elif (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and any(_is_self_attribute(t) and t.attr == attr for t in node.targets)
            ):
                named.append(node.value.func)
        return [found for node in named for found in self._classes(module, node)]

    def _subclass_methods(self, module: _Module, cls: ast.ClassDef, name: str) -> list[tuple[_Module, ast.AST]]:
        """Method `name` of `cls` (or what it inherits) and the overrides of its subclasses in the
        project: those of its own module, and of the modules naming it whose classes derive from it."""
        found = [(module, m) for m in self._methods(module, cls, name, 0) + self._overrides(module, cls, name)]
        for other in map(self._module, self._mentioning(module.path, cls.name)):
            if other is None or other is module:
                continue
            for subclass in other.classes.values():
                bases = (c for base in subclass.bases for _, c in self._classes(other, base))
                if any(base is cls for base in bases):
                    found += [(other, m) for m in self._methods(other, subclass, name, 0)]
                    found += [(other, m) for m in self._overrides(other, subclass, name)]
        return found

    def _named(self, module: _Module, scope: list[ast.AST], name: str) -> tuple[list[ast.AST], list[ast.expr]]:
        """What `name` means in the innermost function of `scope` (or the module) that binds it: every
        def of it there (each branch of an `if` may define its own), else every callable assigned to
        it (a lambda, a call such as a partial, a name or attribute, a conditional of them: each
        branch may assign its own). A class body is no enclosing scope of its methods: `name` there
        is not `self.name`."""
        for function in [*(f for f in reversed(scope) if not isinstance(f, ast.ClassDef)), module.tree]:
            nodes = list(_body_walk(function))
            defs = [n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
            if defs:
                return defs, []
            values = [
                stmt.value
                for stmt in nodes
                if isinstance(stmt, ast.Assign)
                and isinstance(stmt.value, _CALLABLE_VALUES)
                and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
            ]
            if values:
                return [], values
        return [], []

    def _resolve_dotted(self, importer: _Module, dotted: str, level: int, depth: int) -> list[tuple[_Module, ast.AST]]:
        """`pkg.mod.f` (or `pkg.mod.Class.f`), imported by `importer`, to the function in the project."""
        parts = dotted.split(".")
        for cut in (len(parts) - 1, len(parts) - 2):
            if cut < (0 if level else 1):
                continue
            path = find_module(importer.path, ".".join(parts[:cut]), level)
            target = self._module(path) if path is not None else None
            if target is None:
                continue
            rest = parts[cut:]
            if len(rest) == 1 and rest[0] in target.functions:
                return [(target, target.functions[rest[0]])]
            if len(rest) == 1 and rest[0] in target.imports and depth < 4:  # re-exported
                return self._resolve_dotted(target, *target.imports[rest[0]], depth + 1)
            if len(rest) == 2 and rest[0] in target.classes:
                return [(target, m) for m in self._methods(target, target.classes[rest[0]], rest[1], 0)]
        return []

    def _methods(self, module: _Module, cls: ast.ClassDef, name: str, depth: int) -> list[ast.AST]:
        for stmt in cls.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                return [stmt]
        if depth < 4:  # inherited from a base class of the same module
            for base in cls.bases:
                if isinstance(base, ast.Name) and base.id in module.classes:
                    found = self._methods(module, module.classes[base.id], name, depth + 1)
                    if found:
                        return found
        return []

    def _overrides(self, module: _Module, cls: ast.ClassDef, name: str) -> list[ast.AST]:
        """The methods `name` of the classes of the module that derive from `cls`: `self.name` in
        `cls` may run any of them (a base class's `forward_step` is often abstract)."""
        return [
            m
            for subclass in derived_classes(module.classes, cls.name)
            for m in module.classes[subclass].body
            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == name
        ]

    def _is_loss_reduction(self, module: _Module, cls: ast.ClassDef, depth: int) -> bool:
        for base in cls.bases:
            if _last_name(base) == _LOSS_REDUCTION:
                return True
            inherited = depth < 4 and isinstance(base, ast.Name) and base.id in module.classes
            if inherited and self._is_loss_reduction(module, module.classes[base.id], depth + 1):
                return True
        return False

    # ---- evidence -----------------------------------------------------------------------

    @staticmethod
    def _step(module: _Module, node: ast.AST, what: str) -> Step:
        return Step(_shown(module.path), node.lineno, what)

    def _reach(self, path: str, function: ast.AST, reach: Reach) -> None:
        key = (path, function.lineno)
        if self._current is not None:
            self.evidence[self._current].append((key, reach))
        self._merge(key, reach)

    def _merge(self, key: Key, reach: Reach) -> None:
        old = self.reached.get(key)
        if old is None or _stronger(reach, old):
            self.reached[key] = reach

    def _schedule_copies(self, importer: _Module) -> bool:
        """Whether the schedule `importer` runs is the project's own copy of Megatron's (a fork such as
        Megatron-DeepSpeed), and that copy divides a copy of the loss (`output_tensor = loss /
        num_microbatches`, megatron-core up to 0.6) instead of rescaling it in place: then handing a
        function to it rescales nothing. A schedule outside the project is taken to be a current one."""
        directory = os.path.dirname(importer.path)
        if directory not in self._schedules:  # one lookup per directory: every gated file asks
            # Asked for the directory, not a file in it: the schedule module itself gets the same answer.
            anyone = os.path.join(directory, "<importer>")
            found = (find_module(anyone, dotted, 0) for dotted in _SCHEDULE_MODULES)
            self._schedules[directory] = next((path for path in found if path is not None), None)
        path = self._schedules[directory]
        schedule = self._module(path) if path is not None else None  # a dependency of the importer's evidence
        if path is None or schedule is None:
            return False
        if path not in self._copying:
            callers = [
                r for _, f in _functions(schedule.tree) if (r := _rescaled_results(f, _SCHEDULE_LOSS_FUNC)) is not None
            ]
            self._copying[path] = bool(callers) and not any(callers)
        return self._copying[path]

    def _megatron_evidence(self, module: _Module, scope: list[ast.AST], function: ast.AST) -> None:
        """`function`: a def, or the module itself (`pretrain(...)` under `if __name__ == "__main__":`)."""
        if self._schedule_copies(module):
            return
        inner = scope + [function] if not isinstance(function, ast.Module) else scope
        signature = None if isinstance(function, ast.Module) else _forward_step_signature(function)
        if signature is not None:
            what = f"{function.name} has {signature.shown}"
            self._forward_step(module, inner, function, self._step(module, function, what), guessed=True)
        nodes = list(_body_walk(function))
        bound = {  # names bound to `get_forward_backward_func()` here: calling them runs the schedule
            _last_name(t)
            for stmt in nodes
            if isinstance(stmt, ast.Assign)
            and isinstance(stmt.value, ast.Call)
            and _last_name(stmt.value.func) == "get_forward_backward_func"
            for t in stmt.targets
        }
        for call in nodes:
            if not isinstance(call, ast.Call):
                continue
            name = _last_name(call.func)
            schedule = name in bound or _calls_getter(call)
            entry = None if schedule else _schedule_call(module, call, name)
            keyword = entry.keyword if entry else "forward_step_func"
            handed = _argument(call, keyword, entry.position if entry else None)
            if handed is None or not (schedule or entry):
                continue
            does = entry.does if entry else "rescales the loss in place"
            what = f"passed as {keyword} to {name or 'get_forward_backward_func()'}, which {does}"
            if keyword != "forward_step_func":  # the loss function itself
                for target_module, target in self._resolve(module, inner, handed):
                    self._reach(target_module.path, target, Reach(MEGATRON, (self._step(module, call, what),)))
            else:
                partial = self._partial(module, inner, handed)
                for target_module, target in self._resolve(module, inner, handed):
                    if isinstance(target, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        scope_of_target = _scope_of(target_module, target)
                        arguments = _Bound(module, inner, partial, _bindings(partial, target)) if partial else None
                        why = self._step(module, call, what)
                        self._forward_step(target_module, scope_of_target, target, why, arguments)

    def _forward_step(
        self,
        module: _Module,
        scope: list[ast.AST],
        function: ast.AST,
        why: Step,
        bound: _Bound | None = None,
        guessed: bool = False,
    ) -> None:
        """A forward-step function: whatever it returns second is Megatron's loss_func. `bound`: the
        partial it was handed over as, whose arguments its parameters are (a loss function may be one)."""
        for stmt in _body_walk(function):
            if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple) and len(stmt.value.elts) == 2:
                handed = stmt.value.elts[1]
                steps = (self._step(module, stmt, f"returned as the loss function by {function.name}"), why)
                for target_module, target in self._resolve(module, scope, handed):
                    self._reach(target_module.path, target, Reach(MEGATRON, steps, guessed))
                    if bound is not None and target in _body_walk(function):  # a closure of the forward step
                        for call, parameter in _delegations(target, bound.arguments):
                            what = f"called by {target.name}, which returns its (loss, report)"
                            self._reach_argument(bound, parameter, (self._step(target_module, call, what), *steps))
                parameter = _callee_name(handed)
                if bound is not None and parameter in bound.arguments:  # `return output, partial(loss_fn, ...)`
                    self._reach_argument(bound, parameter, steps)

    def _partial(self, module: _Module, scope: list[ast.AST], node: ast.expr) -> ast.Call | None:
        """`functools.partial(...)` as handed over: the call itself, or the one a name is bound to."""
        values = self._named(module, scope, node.id)[1] if isinstance(node, ast.Name) else [node]
        return next((v for v in values if isinstance(v, ast.Call) and _last_name(v.func) == "partial" and v.args), None)

    def _reach_argument(self, bound: _Bound, parameter: str, steps: tuple[Step, ...]) -> None:
        """What the hand-off's partial binds to `parameter` is a loss function Megatron calls: the
        functions it names, or, if it is a parameter of the function making the partial, what that
        function's callers pass for it."""
        argument = bound.arguments[parameter]
        steps = (self._step(bound.module, bound.call, f"bound to {parameter} by partial"), *steps)
        for target_module, target in self._resolve(bound.module, bound.scope, argument):
            self._reach(target_module.path, target, Reach(MEGATRON, steps))
        maker = bound.scope[-1] if bound.scope else None
        passed_in = isinstance(maker, (ast.FunctionDef, ast.AsyncFunctionDef)) and isinstance(argument, ast.Name)
        if passed_in and argument.id in _parameters(maker):
            self._callers(bound.module, bound.scope, argument.id, steps)

    def _callers(
        self,
        module: _Module,
        scope: list[ast.AST],
        parameter: str,
        steps: tuple[Step, ...],
        like: Reach | None = None,
    ) -> None:
        """The calls of `scope[-1]` and the functions each passes as `parameter`, reached by Megatron
        (or as `like` is: its context, guess and `whole_return`). A nested function is
        called in its enclosing one; any other where a call names it (resolved as any callee is), and a
        method also wherever a call of that name has a receiver of unknown type (`self.strategy.m(...)`).
        Other files are searched only in a project on disk (not for stdin): every file is read for
        them, so each is a dependency of this evidence."""
        function = scope[-1]
        assert isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        method = len(scope) > 1 and isinstance(scope[-2], ast.ClassDef)
        params = _positional(function, through_attribute=method)
        position = params.index(parameter) if parameter in params else None
        nested = len(scope) > 1 and isinstance(scope[-2], (ast.FunctionDef, ast.AsyncFunctionDef))
        paths = [] if nested else self._mentioning(module.path, f"{function.name}(")
        callers = [module, *(m for m in map(self._module, paths) if m is not None and m is not module)]
        for caller in callers:
            places = [(scope[:-2], scope[-2])] if nested else [*_functions(caller.tree), ([], caller.tree)]
            for caller_scope, node in places:
                inner = caller_scope + [node] if not isinstance(node, ast.Module) else caller_scope
                for call in _body_walk(node):
                    if not (isinstance(call, ast.Call) and _last_name(call.func) == function.name):
                        continue
                    callees = [target for _, target in self._resolve(caller, inner, call.func)]
                    unknown_receiver = method and isinstance(call.func, ast.Attribute) and not callees
                    passed = _argument(call, parameter, position)
                    if passed is None or not (function in callees or unknown_receiver):
                        continue
                    step = self._step(caller, call, f"passed as {parameter} to {function.name}")
                    reach = Reach(MEGATRON, (step, *steps))
                    if like is not None:
                        reach = dataclasses.replace(like, steps=reach.steps)
                    for target_module, target in self._resolve(caller, inner, passed):
                        self._reach(target_module.path, target, reach)

    def _mentioning(self, path: str, word: str) -> list[str]:
        """The files of `path`'s project whose text holds `word`. All of them were read, so each is a
        dependency of the evidence being collected."""
        root = next((r for r in self.roots if path == r or path.startswith(r + os.sep)), None)
        if root is None:  # one module on its own (stdin, the Python API): nothing else is read
            return []
        if root not in self._project_files:
            self._project_files[root] = list(python_files(root))
        files = self._project_files[root]
        if self._current is not None:
            self.depends_on[self._current].update(f for f in files if f != self._current)
        key = (root, word)
        if key not in self._mentions:
            self._mentions[key] = [f for f in files if word.encode() in _text_of(f)]
        return self._mentions[key]

    def _patch_evidence(self, path: str) -> None:
        """A function installed in place of one this file's evidence reached takes its context, and of
        any installed in its place in turn (`handoffs.PATCH`). Found from this file's own evidence,
        so it is the same whichever other files are collected with it."""
        evidence = self.evidence[path]
        seen: dict[Key, Reach] = {}
        at = 0
        while at < len(evidence):  # grows as replacements are reached
            key, reach = evidence[at]
            at += 1
            if key in seen and not _stronger(reach, seen[key]):
                continue
            seen[key] = reach
            for module, scope, site, replacement, what in self._replacements(key):
                step = self._step(module, site, what)
                for target_module, target in self._resolve(module, scope, replacement):
                    self._reach(target_module.path, target, Reach(reach.context, (step, *reach.steps), reach.guessed))

    def _delegated_evidence(self, path: str) -> None:
        """A reached loss function returning the `(loss, report)` of a function it calls (`loss, metrics =
        loss_fn(**kwargs)`, then `return loss, metrics`, or a report it `.update`s with `metrics`): that
        function is reached too, and so on down (`handoffs.DELEGATED`). Found from this file's own
        evidence, as patches are."""
        # The evidence grows as callees are reached: the iteration meets what it adds.
        for reach, module, scope, function in self._reached_functions(self.evidence[path]):
            for assign in _returned_unpacked(function):
                step = self._step(module, assign, f"its (loss, report) is returned by {function.name}")
                for target_module, target in self._resolve(module, [*scope, function], assign.value.func):
                    self._reach(target_module.path, target, dataclasses.replace(reach, steps=(step, *reach.steps)))

    def _reached_functions(
        self, evidence: Iterable[tuple[Key, Reach]]
    ) -> Iterator[tuple[Reach, _Module, list[ast.AST], ast.AST]]:
        """Each reached function of `evidence` with its strongest reach so far, once per reach that is
        stronger than the one before (a whole return is not followed on)."""
        seen: dict[Key, Reach] = {}
        for key, reach in evidence:
            if reach.whole_return or (key in seen and not _stronger(reach, seen[key])):
                continue
            seen[key] = reach
            found = self._function_at(key)
            if found is not None:
                yield reach, *found

    def _function_at(self, key: Key) -> tuple[_Module, list[ast.AST], ast.AST] | None:
        """The module, the enclosing scopes and the function a reach's key (path, def line) names."""
        module = self._module(key[0])
        found = next(((s, f) for s, f in _functions(module.tree) if f.lineno == key[1]), None) if module else None
        return None if module is None or found is None else (module, *found)

    def _returned_as_the_loss(self, path: str) -> None:
        """A reached loss function whose loss is what a callable parameter of an enclosing function
        returns (`loss = process_output_fn(output, inputs)`, then `return loss, {}`): the functions that
        enclosing function's callers pass for it return the loss itself (`handoffs.RETURNED_AS_THE_LOSS`).
        Found from this file's own evidence, as patches are."""
        # What this adds returns its loss whole, which is not followed on: the evidence as it is now.
        for reach, module, scope, function in self._reached_functions(list(self.evidence[path])):
            for call, owner in _loss_from_a_parameter(function, scope):
                assert isinstance(call.func, ast.Name)
                step = self._step(module, call, f"its result is returned as the loss by {function.name}")
                like = dataclasses.replace(reach, whole_return=True)
                self._callers(module, scope[: scope.index(owner) + 1], call.func.id, (step, *reach.steps), like)

    def _replacements(self, key: Key) -> Iterator[tuple[_Module, list[ast.AST], ast.AST, ast.expr, str]]:
        """The patches installing something in place of the function at `key` (a module's function
        or a method of a module's class), in its module or any file of the project naming it:
        (module, scope, the patch, what it installs, the step's text)."""
        owner = self._module(key[0])
        function = next(
            (f for scope, f in _functions(owner.tree) if f.lineno == key[1] and len(scope) <= 1) if owner else (), None
        )
        if owner is None or function is None:
            return
        name = function.name
        marker = re.compile(rb"[.'\"]" + re.escape(name.encode()) + rb"""(?:['"]|\s*=[^=])""")
        others = (p for p in self._mentioning(owner.path, name) if p != owner.path and marker.search(_text_of(p)))
        for module in [owner, *map(self._module, others)]:
            if module is None:
                continue
            for scope, node in [*_functions(module.tree), ([], module.tree)]:
                inner = [*scope, node] if not isinstance(node, ast.Module) else scope
                for site in _body_walk(node):
                    patch = _patch(site, name)
                    if patch is None:
                        continue
                    replaced, replacement, how = patch
                    if isinstance(replaced, str):
                        targets = self._resolve_dotted(module, replaced, 0, 0)
                    else:
                        targets = self._resolve(module, inner, replaced)
                    if any(target is function for _, target in targets):
                        yield module, inner, site, replacement, f"installed by {how} in place of {name}"

    def _in_place_evidence(self, module: _Module, scope: list[ast.AST], function: ast.AST) -> None:
        nodes = list(_body_walk(function))
        rescaled = _rescaled_in_place(nodes)
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
            for target_module, target in self._resolve(module, scope + [function], callee):
                steps = (
                    self._step(module, assign, f"its (loss, report) is unpacked by {function.name}"),
                    Step(_shown(module.path), line, f"which rescales {name} in place"),
                )
                self._reach(target_module.path, target, Reach(IN_PLACE_CALLER, steps))


def _stronger(new: Reach, old: Reach) -> bool:
    """Megatron's schedule beats an in-place caller; a hand-off call beats a signature guess."""
    if new.context != old.context:
        return new.context == MEGATRON
    return old.guessed and not new.guessed


def _shown(path: str) -> str:
    """A path as findings show it: relative to the working directory when under it."""
    relative = os.path.relpath(path)
    return path if relative.startswith(os.pardir) else relative


def _last_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _argument(call: ast.Call, keyword: str, position: int | None) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if position is not None and len(call.args) > position and not any(isinstance(a, ast.Starred) for a in call.args):
        return call.args[position]
    return None


def _patch(node: ast.AST, name: str) -> tuple[str | ast.expr, ast.expr, str] | None:
    """(what is replaced: a dotted string or an expression, what replaces it, how) if `node` installs a
    function as `name` (`handoffs.PATCH`): `register_patch("pkg.mod.Class.name", fn)`,
    `setattr(owner, "name", fn)`, `owner.name = fn`."""
    if isinstance(node, ast.Call) and len(node.args) >= 2 and not node.keywords:
        first = node.args[0]
        if _last_name(node.func) in PATCH.callees and isinstance(first, ast.Constant):
            dotted = first.value
            if isinstance(dotted, str) and dotted.endswith(f".{name}"):
                return dotted, node.args[1], _last_name(node.func)
        if _last_name(node.func) == "setattr" and len(node.args) == 3:
            attribute = node.args[1]
            if isinstance(attribute, ast.Constant) and attribute.value == name:
                return ast.Attribute(first, name, ast.Load()), node.args[2], "setattr"
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        owner_named = isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
        if owner_named and target.attr == name and target.value.id not in ("self", "cls"):
            return target, node.value, "assignment"
    return None


def _callable_value(node: ast.expr) -> bool:
    """What a factory may return as a callable: not a call's result, except a `functools.partial`."""
    return not isinstance(node, ast.Call) or _last_name(node.func) == "partial"


def _is_self_attribute(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _calls_getter(call: ast.Call) -> bool:
    """`get_forward_backward_func()(...)`."""
    return isinstance(call.func, ast.Call) and _last_name(call.func.func) == "get_forward_backward_func"


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


def _text_of(path: str) -> bytes:
    try:
        return read_bytes(path)
    except SourceError:
        return b""


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = function.args
    return [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]


def _positional(function: ast.FunctionDef | ast.AsyncFunctionDef, through_attribute: bool) -> list[str]:
    """The parameters a call fills by position; `through_attribute`: called as `obj.m`, so a method's
    `self` or a classmethod's `cls` is given already (a staticmethod's first parameter is not)."""
    names = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    static = any(_last_name(d) == "staticmethod" for d in function.decorator_list)
    return names[1:] if through_attribute and names and names[0] in ("self", "cls") and not static else names


def _bindings(partial: ast.Call, function: ast.AST) -> dict[str, ast.expr]:
    """The parameters of `function` that `partial(function_expr, *args, **keywords)` binds, to their
    arguments. A partial of a partial binds nothing known here."""
    head = partial.args[0]
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or isinstance(head, ast.Call):
        return {}
    bound: dict[str, ast.expr] = {}
    for name, value in zip(_positional(function, isinstance(head, ast.Attribute)), partial.args[1:], strict=False):
        if isinstance(value, ast.Starred):
            break
        bound[name] = value
    names = _parameters(function)
    bound.update((k.arg, k.value) for k in partial.keywords if k.arg is not None and k.arg in names)
    return bound


def _callee_name(node: ast.expr) -> str | None:
    """`name` for `name` or `partial(name, ...)`: a callable handed over as it is."""
    if isinstance(node, ast.Call) and _last_name(node.func) == "partial" and node.args:
        node = node.args[0]
    return node.id if isinstance(node, ast.Name) else None


def _delegations(function: ast.AST, parameters: Mapping[str, ast.expr]) -> Iterator[tuple[ast.Call, str]]:
    """The calls in `function` of one of `parameters` (an enclosing function's) whose `(loss, report)`
    it returns: `return loss_fn(x)`, or `loss, report = loss_fn(x)` and then `return loss, report`."""
    nodes = list(_body_walk(function))
    returned = {
        stmt.value.elts[0].id
        for stmt in nodes
        if isinstance(stmt, ast.Return)
        and isinstance(stmt.value, ast.Tuple)
        and stmt.value.elts
        and isinstance(stmt.value.elts[0], ast.Name)
    }
    for stmt in nodes:
        value = stmt.value if isinstance(stmt, (ast.Return, ast.Assign)) else None
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in parameters):
            continue
        if isinstance(stmt, ast.Return) or any(
            isinstance(t, ast.Tuple) and t.elts and isinstance(t.elts[0], ast.Name) and t.elts[0].id in returned
            for t in stmt.targets
        ):
            yield value, value.func.id


def _loss_from_a_parameter(function: ast.AST, scope: list[ast.AST]) -> Iterator[tuple[ast.Call, ast.AST]]:
    """The calls in `function` of a parameter of an enclosing function (of `scope`, outermost first)
    whose result it returns as its loss (`return fn(x), {}`, or `loss = fn(x)` and then `return loss,
    report`), each with the function whose parameter it is."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return
    nodes = list(_body_walk(function))
    firsts = [
        stmt.value.elts[0]
        for stmt in nodes
        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple) and len(stmt.value.elts) in (2, 3)
    ]
    returned = {e.id for e in firsts if isinstance(e, ast.Name)}
    calls = [e for e in firsts if isinstance(e, ast.Call)] + [
        stmt.value
        for stmt in nodes
        if isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Call)
        and any(isinstance(t, ast.Name) and t.id in returned for t in stmt.targets)
    ]
    own = set(_parameters(function)) | _bound_names(nodes)
    for call in calls:
        if isinstance(call.func, ast.Name) and call.func.id not in own:
            owner = _parameter_owner(scope, call.func.id)
            if owner is not None:
                yield call, owner


def _returned_unpacked(function: ast.AST) -> Iterator[ast.Assign]:
    """The statements `loss, report = f(...)` (or three names) of `function` whose loss it returns first
    and whose report it returns last, itself or in a dict it `.update`s with it. Not where it stores
    into that report: it may replace the entries by copies (a loop averaging them), which only its own
    analysis tells."""
    nodes = list(_body_walk(function))
    returned = [
        stmt.value.elts
        for stmt in nodes
        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple) and len(stmt.value.elts) in (2, 3)
    ]
    updates = [
        (node.func.value.id, node.args[0].id)
        for node in nodes
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "update"
        and isinstance(node.func.value, ast.Name)
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
    ]
    stored = {
        node.value.id
        for node in nodes
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name)
    }
    for stmt in nodes:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call)):
            continue
        target = stmt.targets[0]
        if not (isinstance(target, ast.Tuple) and len(target.elts) in (2, 3)):
            continue
        if not all(isinstance(e, ast.Name) for e in target.elts):
            continue
        loss, report = target.elts[0].id, target.elts[-1].id
        reports = {report} | {into for into, given in updates if given == report}
        if reports & stored:
            continue
        if any(
            isinstance(elts[0], ast.Name)
            and elts[0].id == loss
            and isinstance(elts[-1], ast.Name)
            and elts[-1].id in reports
            for elts in returned
        ):
            yield stmt


def _hands_on(function: ast.AST, value: ast.expr, parameter: str) -> bool:
    """Whether `value`, stored by `function`, is its `parameter` or a def of it returning `parameter(...)`
    (a `functools.wraps` wrapper)."""
    if isinstance(value, ast.Name) and value.id == parameter:
        return True
    wrappers = [
        node
        for node in _body_walk(function)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and isinstance(value, ast.Name)
        and node.name == value.id
    ]
    return any(
        isinstance(r, ast.Return)
        and isinstance(r.value, ast.Call)
        and isinstance(r.value.func, ast.Name)
        and r.value.func.id == parameter
        for wrapper in wrappers
        for r in _body_walk(wrapper)
    )


def _parameter_owner(scope: list[ast.AST], name: str) -> ast.AST | None:
    """The innermost function of `scope` whose parameter `name` is, unless a function inside it binds
    `name` itself. A class body is no enclosing scope of its methods."""
    for function in reversed(scope):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if name in _parameters(function):
            return function
        if name in _bound_names(_body_walk(function)):
            return None
    return None


def _bound_names(nodes: Iterable[ast.AST]) -> set[str]:
    """The names `nodes` (one function's own) assign, define or import."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _rescaled_results(function: ast.AST, callee: str) -> set[str] | None:
    """The names holding what `function`'s calls of `callee` returned (directly, or unpacked from
    it) that it then rescales in place (`x /= n`, `x *= k`, `x.div_(n)`, `x.mul_(k)`); None: it
    never calls `callee`."""
    nodes = list(_body_walk(function))
    results: set[str] = set()
    for _ in range(2):  # `outputs = loss_func(x)`, then `loss, report = outputs`
        for stmt in nodes:
            if not isinstance(stmt, ast.Assign):
                continue
            value = stmt.value
            called = isinstance(value, ast.Call) and _last_name(value.func) == callee
            if called or (isinstance(value, ast.Name) and value.id in results):
                for target in stmt.targets:
                    elements = target.elts if isinstance(target, ast.Tuple) else [target]
                    results.update(e.id for e in elements if isinstance(e, ast.Name))
    return results & set(_rescaled_in_place(nodes)) if results else None


def _rescaled_in_place(nodes: Iterable[ast.AST]) -> dict[str, int]:
    """The names rescaled in place among `nodes` (`x /= n`, `x *= k`, `x.div_(n)`, `x.mul_(k)` as a
    statement), each with the first line doing it."""
    rescaled: dict[str, int] = {}
    for stmt in nodes:
        target = None
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, (ast.Mult, ast.Div)):
            target = stmt.target
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            func = stmt.value.func
            target = func.value if isinstance(func, ast.Attribute) and func.attr in _RESCALING_METHODS else None
        if isinstance(target, ast.Name):
            rescaled.setdefault(target.id, stmt.lineno)
    return rescaled


def _forward_step_signature(function: ast.AST) -> Signature | None:
    """The forward-step signature (`handoffs.SIGNATURES`) `function`'s parameters have, if any."""
    args = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    if args and args[0] in ("self", "cls"):
        args = args[1:]
    for signature in SIGNATURES:
        rest = args[1:] if args and args[0] in signature.optional_first else args
        pairs = zip(rest, signature.params, strict=False)
        if len(rest) >= len(signature.params) and all(name in allowed for name, allowed in pairs):
            return signature
    return None


def _schedule_call(module: _Module, call: ast.Call, name: str | None) -> ScheduleCall | None:
    """The first entry of `handoffs.SCHEDULE_CALLS` that `call` (of `name`) is, if any."""
    for entry in SCHEDULE_CALLS:
        if name not in entry.callees:
            continue
        if entry.imported_from is None or _imported_from(module, call.func).startswith(entry.imported_from + "."):
            return entry
    return None


def _imported_from(module: _Module, func: ast.expr) -> str:
    """The dotted name a callee `name` or `alias.name` is imported as ("" if it is not imported)."""
    if isinstance(func, ast.Name) and func.id in module.imports:
        return module.imports[func.id][0]
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in module.imports:
        return f"{module.imports[func.value.id][0]}.{func.attr}"
    return ""


def _functions(tree: ast.Module) -> Iterator[tuple[list[ast.AST], ast.AST]]:
    """Every def, with the functions and classes enclosing it (outermost first). Lambdas are found
    where they are handed over (`_resolve`), so only statements are walked."""
    stack: list[tuple[list[ast.stmt], list[ast.AST]]] = [(tree.body, [])]
    while stack:
        body, scope = stack.pop()
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield scope, node
                stack.append((node.body, scope + [node]))
            elif isinstance(node, ast.ClassDef):
                stack.append((node.body, scope + [node]))
            else:
                stack.extend((block, scope) for block in _blocks(node))


def _blocks(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list):
            yield block
    for handler in getattr(node, "handlers", ()):
        yield handler.body
    for case in getattr(node, "cases", ()):
        yield case.body


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, in functions and classes too, without entering expressions."""
    stack = [body]
    while stack:
        for node in stack.pop():
            yield node
            stack.extend(_blocks(node))


def _scope_of(module: _Module, target: ast.AST) -> list[ast.AST]:
    for scope, function in _functions(module.tree):
        if function is target:
            return scope + [function]
    return [target]


def _body_walk(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's own body, not those of the functions and classes inside it."""
    body = function.body if isinstance(function.body, list) else [function.body]
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        kind = type(node)
        if kind in _SCOPES:
            continue
        children = []
        for field in kind._fields:  # `ast.iter_child_nodes`, without its generator per node
            value = getattr(node, field, None)
            if type(value) is list:
                children.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                children.append(value)
        children.reverse()
        stack.extend(children)


_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda})
