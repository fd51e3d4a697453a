"""Where a function is named in the project: the references `escapes.py` follows.

For a def, the expressions whose value is the function: its name where the def binds it (a closure
in its enclosing function; a module-level def in its module and in every module importing it, under
another name or through an `__init__` re-export, or reading it off the module); for a method,
`self.m`, `cls.m`, `super().m` and `Class.m` (`Class()` too, and a name bound to `Class(...)`) in
its class and its subclasses, found from the files that read the name `m`, the classes told apart
by their bases through imports and re-exports; for a functor's `__call__` (or, with none, its
`forward`), every instance made of its class or a subclass. A `getattr` with a computed key on the
module, the class or `self` is a lookup that may give it.

The files are found by their text first (the name, and the module's or package's name), and only
those are parsed. The analyses of one process share the files' texts, trees and node tables, each
reused while the file's stamp holds. The modules asked for one function are bounded (`_MODULES`):
beyond, `Bound` is raised.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from collections.abc import Iterator
from typing import NamedTuple

from .files import python_files
from .modules import text_of
from .nodes import bound_names, dotted, last_name
from .resolve import Resolver
from .symbols import FUNCTIONS, PARSE_ERRORS, Symbols

_MODULES = 32  # modules parsed for one function before it counts as escaping


class Bound(Exception):
    """More modules than `_MODULES` were asked for."""


_DEPTH = 3  # re-exports under another name followed this deep
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_SCOPE_KINDS = frozenset(_SCOPES)
SELF = ("self", "cls")
_FUNCTOR = ("__call__", "forward")  # the method an instance runs when called (`Resolver._resolve`)


class Ref(NamedTuple):
    """An expression naming a function."""

    module: Symbols
    node: ast.expr
    instance: str | None = None  # an instance of the functor's class (`C(...)`): calling it runs this method
    lookup: bool = False  # a `getattr` whose key is computed: it may give the function


class _Tree:
    """One module's nodes with their parents and enclosing scopes, and its names and attributes."""

    def __init__(self, tree: ast.Module) -> None:
        self.parent: dict[int, ast.AST] = {}
        self.scope: dict[int, tuple[ast.AST, ...]] = {}
        self.names: dict[str, list[ast.Name]] = {}
        self.attributes: dict[str, list[ast.Attribute]] = {}
        stack: list[tuple[ast.AST, tuple[ast.AST, ...]]] = [(tree, ())]
        while stack:
            node, scope = stack.pop()
            kind = type(node)
            inner = (*scope, node) if kind in _SCOPE_KINDS else scope
            for field in kind._fields:  # `ast.iter_child_nodes`, without its generator per node
                value = getattr(node, field, None)
                for child in value if type(value) is list else (value,):
                    if not isinstance(child, ast.AST):
                        continue
                    self.parent[id(child)] = node
                    self.scope[id(child)] = inner
                    if type(child) is ast.Name:
                        self.names.setdefault(child.id, []).append(child)
                    elif type(child) is ast.Attribute:
                        self.attributes.setdefault(child.attr, []).append(child)
                    stack.append((child, inner))
        for nodes in (*self.names.values(), *self.attributes.values()):
            nodes.sort(key=lambda n: (n.lineno, n.col_offset))


Stamp = tuple[int, int]  # a file's (mtime_ns, size): what it was read at


@dataclasses.dataclass
class _Store:
    """What the analyses of one process share about one project's files, each with the stamp it
    was read at, reused only while the file's stamp is the same (a long-running editor session sees
    every change)."""

    texts: dict[str, tuple[Stamp, bytes]] = dataclasses.field(default_factory=dict)
    parsed: dict[str, tuple[Stamp, Symbols | None]] = dataclasses.field(default_factory=dict)
    trees: dict[str, tuple[Symbols, _Tree]] = dataclasses.field(default_factory=dict)
    # The files holding each word, by root, for the stamps of every file of the root in `snapshot`.
    words: dict[str, dict[str, set[str]]] = dataclasses.field(default_factory=dict)
    snapshot: dict[str, dict[str, Stamp | None]] = dataclasses.field(default_factory=dict)
    listing: dict[str, tuple[dict[str, Stamp | None], list[str]]] = dataclasses.field(default_factory=dict)
    imports: dict[str, tuple[bytes, list[tuple[bytes, bytes, bytes]]]] = dataclasses.field(default_factory=dict)


_STORES: dict[tuple[str, ...], _Store] = {}


def _stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


# `from .mod import a, b as c` (or a parenthesised list), and `import a.b, c as d`, read from the text.
_FROM_IMPORT = re.compile(rb"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_IMPORT = re.compile(rb"^[ \t]*import[ \t]+([\w., \t]+)", re.M)


_CLASS = re.compile(rb"^[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]*)\)", re.M)


def _imported(text: bytes, name: str) -> bool:
    return any(name.encode() in re.split(rb"[\s,()]+", names) for _, _, names in _FROM_IMPORT.findall(text))


class References(Resolver):
    """The project `roots` (none: the checked text alone) as the escape analysis reads it, with the
    checked file `path` read from `text` (an editor's buffer may differ from the disk)."""

    def __init__(self, roots: list[str], path: str, text: str, tree: ast.Module | None = None) -> None:
        super().__init__(roots)
        self._path = path
        self._trees: dict[int, _Tree] = {}
        self._bound_names: dict[int, set[str]] = {}
        self._words: dict[str, dict[str, set[str]]] = {}  # the store's, once this analysis saw it is current
        self._shared = _STORES.setdefault(tuple(roots), _Store()) if roots else _Store()
        self._stamps: dict[str, Stamp | None] = {}  # each file's, asked once by this analysis
        # The modules asked for the function being followed: beyond `_MODULES` it escapes. Every
        # module asked counts, read before or not, so that the answer is the same in every process.
        self._asked: set[str] = set()
        self._references_of: dict[int, list[Ref]] = {}  # `_references`, by id of the def
        self._derived: dict[tuple[int, int], bool] = {}  # `_derives`
        self._families: dict[int, tuple[list[tuple[Symbols, ast.ClassDef]], list[Ref]]] = {}  # `_family`
        try:  # `tree`: the text's, when the caller has it (no second parse)
            self._parsed[path] = Symbols(ast.parse(text.removeprefix("\ufeff")) if tree is None else tree, path)
        except PARSE_ERRORS:
            self._parsed[path] = None

    def _fresh(self) -> None:
        """Before one function's references: what was computed beyond the files' readings is its
        own, and the modules it asks for are counted afresh."""
        self._asked = set()
        self._references_of, self._derived, self._families = {}, {}, {}

    # ---- references -----------------------------------------------------------------

    def _references(self, module: Symbols, scope: list[ast.AST], function: ast.AST) -> list[Ref]:
        """The expressions naming `function` (a def, in `scope`)."""
        if id(function) not in self._references_of:
            self._references_of[id(function)] = self._find_references(module, scope, function)
        return self._references_of[id(function)]

    def _find_references(self, module: Symbols, scope: list[ast.AST], function: ast.AST) -> list[Ref]:
        assert isinstance(function, FUNCTIONS)
        if scope and isinstance(scope[-1], ast.ClassDef):
            return self._method_references(module, scope, function)
        if scope:  # nested: named in its enclosing function only
            return [Ref(module, n) for n in self._loads(module, function.name, scope[-1])]
        return self._name_references(module, function.name, 0, set())

    def _name_references(
        self, module: Symbols, name: str, depth: int, asked: set[tuple[str, str]], lookups: bool = True
    ) -> list[Ref]:
        """The reads of module-level `name` of `module`: in the module, and in the modules importing
        it (under another name too, and through re-exports), or reading it off the module object
        (`lookups`: by `getattr` with a computed key too; a class's own name is not asked so)."""
        asked.add((module.path, name))
        found: list[Ref] = [Ref(module, n) for n in self._loads(module, name, None)]
        if not self.roots or depth > _DEPTH:
            return found
        stem = os.path.splitext(os.path.basename(module.path))[0]
        package = os.path.basename(os.path.dirname(module.path))
        words = (package if stem == "__init__" else stem, package)
        # An importer has a `from ... import name` of a module that is this one or may re-export it;
        # reading it off the module imports the module; `getattr(mod, key)` does not name `name`.
        # Told from the text, so that only these are parsed.
        naming = [p for p in self._candidates(module.path, (name, *words)) if self._imports_name(p, module, name)]
        objects = {p for p in self._candidates(module.path, (f".{name}", words[0])) if self._imports_module(p, module)}
        if lookups:
            objects.update(
                p for p in self._candidates(module.path, ("getattr", words[0])) if self._imports_module(p, module)
            )
        for path in sorted({*naming, *objects}):
            other = self._module(path)
            if other is None or other is module:
                continue
            if path in objects:
                found += self._module_attribute_reads(other, module, name)
            for local, (target, level) in other.targets.items():
                if (other.path, local) in asked or not self._binds(other, target, level, module, name, 0):
                    continue
                # An `__init__` re-exports what it imports, any module what it renames: their
                # importers are searched too; any other importer's reads are its own.
                if local != name or other.path.endswith(os.sep + "__init__.py"):
                    found += self._name_references(other, local, depth + 1, asked, lookups)
                else:
                    asked.add((other.path, local))
                    found += [Ref(other, n) for n in self._loads(other, local, None)]
        return found

    def _imports_name(self, path: str, module: Symbols, name: str) -> bool:
        """Whether the text of `path` has a `from X import ..., name` with X this module, or a module
        that itself imports `name` (a re-export)."""
        for dots, source, names in self._from_imports(path):
            if name.encode() not in re.split(rb"[\s,()]+", names):
                continue
            found = self._find(path, source.decode(), len(dots))
            if found == module.path or (found is not None and _imported(self._text(found), name)):
                return True
        return False

    def _imports_module(self, path: str, module: Symbols) -> bool:
        """Whether the text of `path` imports `module` itself (`import a.b`, `from a import b`)."""
        text = self._text(path)
        stem = os.path.splitext(os.path.basename(module.path))[0]
        last = (os.path.basename(os.path.dirname(module.path)) if stem == "__init__" else stem).encode()
        for names in _IMPORT.findall(text):
            for imported in re.split(rb"\s*,\s*", names.strip()):
                head = imported.split()[0] if imported.strip() else b""
                if head.rpartition(b".")[2] == last and self._find(path, head.decode(), 0) == module.path:
                    return True
        for dots, source, names in self._from_imports(path):
            for imported in re.split(rb"[\s,()]+", names):
                dotted = f"{source.decode()}.{imported.decode()}" if source else imported.decode()
                if imported == last and self._find(path, dotted, len(dots)) == module.path:
                    return True
        return False

    def _binds(self, importer: Symbols, dotted: str, level: int, module: Symbols, name: str, depth: int) -> bool:
        """Whether `from <dotted's module> import <its last name>` in `importer` binds module-level
        `name` of `module`, itself or re-exported (`from .losses import f` in an `__init__`)."""
        source, _, imported = dotted.rpartition(".")
        if imported != name:
            return False
        path = self._find(importer.path, source, level) if level or source else None
        if path is None:
            return False
        if path == module.path:
            return imported == name
        other = self._module(path) if depth < _DEPTH else None
        if other is None or imported not in other.targets:
            return False
        return self._binds(other, *other.targets[imported], module, name, depth + 1)

    def _module_attribute_reads(self, other: Symbols, module: Symbols, name: str) -> list[Ref]:
        """`mod.name` (or `pkg.mod.name`) in `other`, `mod` being `module` imported, and
        `getattr(mod, key)` where the key may be `name` (a computed one: a lookup)."""
        tree = self._tree(other)
        found: list[Ref] = [
            Ref(other, attribute)
            for attribute in tree.attributes.get(name, [])
            if isinstance(attribute.ctx, ast.Load) and self._names_module(other, attribute.value, module)
        ]
        for call in self._getattr_calls(other):
            if self._names_module(other, call.args[0], module) and _may_look_up(call, name):
                found.append(Ref(other, call, lookup=_computed(call)))
        return found

    def _names_module(self, other: Symbols, node: ast.expr, module: Symbols) -> bool:
        chain = dotted(node)
        if chain is None:
            return False
        head, _, rest = chain.partition(".")
        if head not in other.targets:
            return False
        target, level = other.targets[head]
        full = f"{target}.{rest}" if rest else target
        return self._find(other.path, full, level) == module.path

    def _method_references(self, module: Symbols, scope: list[ast.AST], function: ast.AST) -> list[Ref]:
        """The reads of method `m`: `self.m`, `cls.m`, `super().m` in the class and its subclasses,
        `Class.m`, `Class().m` and `x.m` where `x = Class(...)`, `getattr` on those with a computed key;
        for a functor's method, every instance made of the class or a subclass (`Class(...)`)."""
        assert isinstance(function, FUNCTIONS) and isinstance(scope[-1], ast.ClassDef)
        name, cls = function.name, scope[-1]
        functor = name == _FUNCTOR[0] or (name == _FUNCTOR[1] and not self._methods(module, cls, _FUNCTOR[0], 0))
        found: list[Ref] = []
        if functor:  # the files of the class and its subclasses (a functor's method name is common)
            family, named = self._family(module, cls)
            files = [m.path for m in dict.fromkeys(m for m, _ in family)]
        else:  # the files reading the name and naming the class or a subclass
            named = []
            top = cls in module.classes.values()
            others = self._candidates(module.path, (name, *self._family_names(module, cls))) if top else []
            files = [module.path, *(p for p in others if p != module.path)]
        for path in files:
            other = self._module(path)
            if other is None:
                continue
            tree = self._tree(other)
            for attribute in tree.attributes.get(name, []):
                if isinstance(attribute.ctx, ast.Load) and self._of_class(other, attribute.value, attribute, cls):
                    found.append(Ref(other, attribute))
            for call in self._getattr_calls(other):
                if _may_look_up(call, name) and self._of_class(other, call.args[0], call, cls):
                    found.append(Ref(other, call, lookup=_computed(call)))
        for other, ref, _, lookup in named:
            parent = self._tree(other).parent.get(id(ref))
            if lookup:  # a class looked up by a computed name, then made
                found.append(Ref(other, ref, lookup=True))
            elif isinstance(parent, ast.Call) and parent.func is ref:  # an instance
                found.append(Ref(other, parent, name))
        unique = {(id(f.node), f.instance): f for f in found}
        return sorted(
            unique.values(),
            key=lambda f: (f.module.path != module.path, f.module.path, f.node.lineno, f.node.col_offset),
        )

    def _family_names(self, module: Symbols, cls: ast.ClassDef) -> list[str]:
        """The names of `cls` and of the classes whose `class X(...)` line names one of them, told
        from the text: every file reading a method of one names one (as its base, or to make one)."""
        names = [cls.name]
        for name in names:  # grows as subclasses are found
            for path in self._candidates(module.path, (name,)):
                for subclass, bases in _CLASS.findall(self._text(path)):
                    found = subclass.decode()
                    if re.search(rb"\b" + re.escape(name.encode()) + rb"\b", bases) and found not in names:
                        names.append(found)
            if len(names) > _MODULES:
                raise Bound
        return names

    def _of_class(self, module: Symbols, receiver: ast.expr, at: ast.AST, cls: ast.ClassDef) -> bool:
        """Whether `receiver` (at `at`) is `cls` or a subclass, or an instance of one: `self`, `cls`,
        `super()` in a method of one, the class named, made there (`Class()`), a name the function
        binds to `Class(...)`."""
        scope = self._scope_list(module, at)
        if (isinstance(receiver, ast.Name) and receiver.id in SELF) or (
            isinstance(receiver, ast.Call) and last_name(receiver.func) == "super"
        ):
            classes = [s for s in scope if isinstance(s, ast.ClassDef)]
            return bool(classes) and self._derives(module, classes[-1], cls, 0)
        made = [receiver.func] if isinstance(receiver, ast.Call) else [receiver]
        if isinstance(receiver, ast.Name):
            function = self._innermost_def(module, at)
            made += [
                stmt.value.func
                for stmt in ast.walk(function or module.tree)
                if isinstance(stmt, ast.Assign)
                and isinstance(stmt.value, ast.Call)
                and any(isinstance(t, ast.Name) and t.id == receiver.id for t in stmt.targets)
            ]
        classes = [c for node in made for c in self._class_of(module, node)]
        return any(self._derives(m, c, cls, 0) for m, c in classes)

    def _class_of(self, module: Symbols, node: ast.expr) -> list[tuple[Symbols, ast.ClassDef]]:
        """The class of the project `node` names (`Name`, `mod.Name`), through imports and re-exports."""
        if isinstance(node, ast.Name) and node.id in module.classes:
            return [(module, module.classes[node.id])]
        if isinstance(node, ast.Name) and node.id in module.targets:
            origin = self._origin(module, *module.targets[node.id], 0)
            return [] if origin is None else self._class_of(origin[0], ast.Name(origin[1]))
        chain = dotted(node.value) if isinstance(node, ast.Attribute) else None
        if chain is None or chain.partition(".")[0] not in module.targets:
            return []
        head, _, rest = chain.partition(".")
        target, level = module.targets[head]
        path = self._find(module.path, f"{target}.{rest}" if rest else target, level)
        other = self._module(path) if path is not None else None
        return [] if other is None else self._class_of(other, ast.Name(node.attr))  # type: ignore[attr-defined]

    def _origin(self, importer: Symbols, dotted: str, level: int, depth: int) -> tuple[Symbols, str] | None:
        """The module defining what `from <module> import <name>` binds, and the name there."""
        source, _, name = dotted.rpartition(".")
        path = self._find(importer.path, source, level) if level or source else None
        other = self._module(path) if path is not None else None
        if other is None:
            return None
        if name in other.targets and name not in other.classes and name not in other.defs and depth < _DEPTH:
            return self._origin(other, *other.targets[name], depth + 1)
        return other, name

    def _derives(self, module: Symbols, cls: ast.ClassDef, base: ast.ClassDef, depth: int) -> bool:
        """Whether `cls` (of `module`) is `base` or derives from it, through bases the project shows."""
        if cls is base:
            return True
        key = (id(cls), id(base))
        if key not in self._derived:
            self._derived[key] = depth < _DEPTH * 2 and any(
                self._derives(m, c, base, depth + 1) for b in cls.bases for m, c in self._class_of(module, b)
            )
        return self._derived[key]

    def _family(self, module: Symbols, cls: ast.ClassDef) -> tuple[list[tuple[Symbols, ast.ClassDef]], list[Ref]]:
        """`cls` and its subclasses in the project, and every place naming one of them."""
        if id(cls) in self._families:
            return self._families[id(cls)]
        family = [(module, cls)]
        named: list[Ref] = []
        for class_module, member in family:  # grows as subclasses are found
            if member in class_module.classes.values():
                refs = self._name_references(class_module, member.name, 0, set(), lookups=False)
            else:  # a class of a function: named in it
                outer = self._innermost_def(class_module, member)
                refs = [Ref(class_module, n) for n in self._loads(class_module, member.name, outer)]
            for ref in refs:
                named.append(ref)
                parent = self._tree(ref.module).parent.get(id(ref.node))
                subclass = isinstance(parent, ast.ClassDef) and any(b is ref.node for b in parent.bases)
                if subclass and all(parent is not c for _, c in family) and len(family) < _MODULES:
                    family.append((ref.module, parent))
        self._families[id(cls)] = family, named
        return family, named

    def _attribute_reads(
        self, module: Symbols, cls: ast.ClassDef, attr: str
    ) -> Iterator[tuple[Symbols, ast.Attribute, bool]]:
        """The reads of attribute `attr` of the instances of `cls`: `self.attr` in it and its subclasses
        (known: True), and `x.attr` on another receiver in its module and the modules naming the
        class (False)."""
        top = cls in module.classes.values()
        others = self._candidates(module.path, (attr,)) if top else []
        naming = set(self._candidates(module.path, (attr, cls.name))) if top else set()
        for path in [module.path, *(p for p in others if p != module.path)]:
            other = self._module(path)
            if other is None:
                continue
            for read in self._tree(other).attributes.get(attr, []):
                if not isinstance(read.ctx, ast.Load):
                    continue
                on_self = isinstance(read.value, ast.Name) and read.value.id in SELF
                if on_self and self._of_class(other, read.value, read, cls):
                    yield other, read, True
                elif not on_self and (other is module or path in naming):
                    yield other, read, False

    # ---- small readings -------------------------------------------------------------

    def _tree(self, module: Symbols) -> _Tree:
        tree = self._trees.get(id(module.tree))
        if tree is None:
            shared = self._shared.trees.get(module.path) if module.path != self._path else None
            tree = shared[1] if shared is not None and shared[0] is module else _Tree(module.tree)
            self._trees[id(module.tree)] = tree
            if module.path != self._path:
                self._shared.trees[module.path] = module, tree
        return tree

    def _loads(self, module: Symbols, name: str, within: ast.AST | None) -> list[ast.Name]:
        """The reads of `name` in `within` (a function; None: the module), not those in a nested
        function binding the name itself."""
        tree = self._tree(module)
        found = []
        for node in tree.names.get(name, []):
            if not isinstance(node.ctx, ast.Load):
                continue
            scopes = tree.scope.get(id(node), ())
            if within is not None and not any(s is within for s in scopes):
                continue
            inner = scopes[scopes.index(within) + 1 :] if within is not None else scopes
            if any(isinstance(s, (*FUNCTIONS, ast.Lambda)) and name in self._locals_of(s) for s in inner):
                continue
            found.append(node)
        return found

    def _locals_of(self, function: ast.AST) -> set[str]:
        """The names `function` binds: its parameters and the names stored in it."""
        names = self._bound_names.get(id(function))
        if names is None:
            arguments = function.args  # type: ignore[attr-defined]
            names = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
            names |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
            if not isinstance(function, ast.Lambda):
                names |= bound_names(ast.walk(function)) - {function.name}  # type: ignore[attr-defined]
            self._bound_names[id(function)] = names
        return names

    def _getattr_calls(self, module: Symbols) -> Iterator[ast.Call]:
        tree = self._tree(module)
        for name in tree.names.get("getattr", []):
            call = tree.parent.get(id(name))
            if isinstance(call, ast.Call) and call.func is name and len(call.args) >= 2:
                yield call

    def _innermost_def(self, module: Symbols, node: ast.AST) -> ast.AST | None:
        scopes = self._tree(module).scope.get(id(node), ())
        return next((s for s in reversed(scopes) if isinstance(s, FUNCTIONS)), None)

    def _scope_list(self, module: Symbols, node: ast.AST) -> list[ast.AST]:
        return [s for s in self._tree(module).scope.get(id(node), ()) if not isinstance(s, ast.Lambda)]

    def _candidates(self, path: str, words: tuple[str, ...]) -> list[str]:
        """The files of `path`'s project holding `words[0]` and one of the others (or `words[0]`
        alone), each read once for every question about it. All of them are dependencies."""
        root = next((r for r in self.roots if path.startswith(r + os.sep)), None)
        if root is None:
            return []
        if root not in self._project_files:
            self._project_files[root] = self._listing(root)
        files = self._project_files[root]
        holding = [self._holding(root, files, word) for word in words]
        return [f for f in files if f in holding[0] and (len(words) == 1 or any(f in h for h in holding[1:]))]

    def _mentioning(self, path: str, word: str) -> list[str]:
        """`Modules._mentioning` read from this analysis' store of texts (the resolution's own
        searches, such as `calls._caller_files`, ask it too)."""
        return self._candidates(path, (word,))

    def _listing(self, root: str) -> list[str]:
        """`files.python_files(root)`, from the process's store while the directories holding them
        (and those above, up to the root) have their stamps: a file added or removed there changes
        its directory's. A file added under a directory that holds no Python file is seen once
        another change makes the listing be read again."""
        stored = self._shared.listing.get(root)
        if stored is not None and all(_stamp(d) == stamp for d, stamp in stored[0].items()):
            return stored[1]
        files = list(python_files(root))
        directories = {root}
        for path in files:
            directory = os.path.dirname(path)
            while directory not in directories and directory.startswith(root + os.sep):
                directories.add(directory)
                directory = os.path.dirname(directory)
        self._shared.listing[root] = {d: _stamp(d) for d in directories}, files
        return files

    def _from_imports(self, path: str) -> list[tuple[bytes, bytes, bytes]]:
        """`_FROM_IMPORT` read from the text of `path`, kept with that text in the store."""
        text = self._text(path)
        stored = self._shared.imports.get(path)
        if stored is None or stored[0] is not text:
            stored = self._shared.imports[path] = text, _FROM_IMPORT.findall(text)
        return stored[1]

    def _holding(self, root: str, files: list[str], word: str) -> set[str]:
        """The files holding `word`: from the process's store while no file of the project changed."""
        words = self._words.get(root)
        if words is None:
            for other in files:  # each read, and so stamped, before the snapshot below
                self._text(other)
            stamps = {f: self._stamps[f] for f in files}
            if self._shared.snapshot.get(root) != stamps:
                self._shared.snapshot[root], self._shared.words[root] = stamps, {}
            words = self._words[root] = self._shared.words[root]
        if word not in words:
            words[word] = {f for f in files if word.encode() in self._text(f)}
        return words[word]

    def _module(self, path: str, data: bytes | None = None) -> Symbols | None:
        """`Modules._module`, counting the modules asked for one function (beyond `_MODULES`, its
        references are not followed further: `Bound`), from the process's store where the file
        is as it was read."""
        if path != self._path and path not in self._asked:
            self._asked.add(path)
            if len(self._asked) > _MODULES:
                raise Bound
        if path in self._parsed:
            return self._parsed[path]
        stamp = self._stamp_of(path)
        stored = self._shared.parsed.get(path)
        if stored is not None and stamp is not None and stored[0] == stamp:
            self._parsed[path] = stored[1]
            return stored[1]
        module = super()._module(path, data)
        if stamp is not None:
            self._shared.parsed[path] = stamp, module
        return module

    def _read_text(self, path: str) -> bytes:
        """`Modules._read_text`, from the process's store where the file is as it was read."""
        stamp = self._stamp_of(path)
        stored = self._shared.texts.get(path)
        if stored is not None and stamp is not None and stored[0] == stamp:
            return stored[1]
        data = text_of(path)
        if stamp is not None:
            self._shared.texts[path] = stamp, data
        return data

    def _stamp_of(self, path: str) -> Stamp | None:
        if path not in self._stamps:
            self._stamps[path] = _stamp(path)
        return self._stamps[path]

    def files(self) -> list[str]:
        """The other files read: what the answers depend on."""
        return sorted(path for path in self._parsed if path != self._path)


def _computed(call: ast.Call) -> bool:
    """Whether the key of `getattr(obj, key)` is computed: not a string constant."""
    key = call.args[1]
    return not (isinstance(key, ast.Constant) and isinstance(key.value, str))


def _may_look_up(call: ast.Call, name: str) -> bool:
    """Whether `getattr(obj, key)` may look up `name`: a computed key, or `name` itself."""
    return _computed(call) or call.args[1].value == name  # type: ignore[attr-defined]
