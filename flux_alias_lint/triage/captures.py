"""FAL005 in the triage: what `captures.py` may take for a capture (a kept value, a returned report's
entries) and what an in-place write may change, with their places in the unit, and then whether the
flow's storage lets a write reach a capture."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from ..facts.reports import KEEPING_KINDS, KEEPING_NAMES
from ..facts.storage import CONTAINER_CONSTRUCTORS, CONTAINER_MUTATORS
from ..facts.tensor_ops import torch_function_alias_kind, writes_in_place
from ..index.host_models import handed_write
from ..index.nodes import leaves_unchanged_write
from ..index.symbols import FUNCTIONS, Def
from .calls import _copies, _helper_call
from .syntax import _CHILD_FIELDS, _LEAF_FIELDS, _LEAVES, _dotted, _owner, _parameters
from .values import D, S, Token, _named, _overlap, _union

if TYPE_CHECKING:
    from .summaries import _Helpers


@dataclasses.dataclass
class _Captures:
    """What `captures.py` may take for a capture and what an in-place write may change, in one unit."""

    kept: list[ast.expr] = dataclasses.field(
        default_factory=list
    )  # given to a container method, set as an entry or attribute
    reports: list[ast.expr] = dataclasses.field(
        default_factory=list
    )  # what a return may be a report tuple's last element of
    written: list[ast.expr] = dataclasses.field(default_factory=list)  # `x` of `x op= v`, `x.mul_(v)`
    # What a kept alias may be made of (`captures._kept`): what a detach or a conversion is applied to in
    # the unit, by the id of the call. (A helper's summary detaching its argument is not followed here:
    # a known gap.)
    keeping: dict[int, ast.expr] = dataclasses.field(default_factory=dict)
    # What is put into a container (a display's element, a stored entry, a mutator's or helper's
    # argument): `captures._written` marks a report's entries only once they are in one.
    entries: list[ast.expr] = dataclasses.field(default_factory=list)
    where: dict[int, _Where] = dataclasses.field(default_factory=dict)  # of each node in the lists above
    stored_in: dict[int, ast.expr] = dataclasses.field(default_factory=dict)  # kept by `owner[i] = v`: owner


class _Level(NamedTuple):
    scope: int  # the id of a def
    position: tuple[int, int]  # (line, column) in it of the node, or of the def holding the node
    loops: frozenset[int]  # the ids of the loops around that in the def
    branches: frozenset[tuple[int, bool]]  # (the id of an `if` around it in the def, whether in its `else`)


_Where = tuple[_Level, ...]  # a node's place, from the unit's def down to its own


_DISPLAYS = frozenset(
    {ast.Dict, ast.List, ast.Tuple, ast.Set, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp}
)


def _display_elements(display: ast.expr) -> list[ast.expr | None]:
    kind = type(display)
    if kind is ast.Dict:
        return display.values
    if kind is ast.DictComp:
        return [display.value]
    return [display.elt] if kind in (ast.ListComp, ast.SetComp, ast.GeneratorExp) else display.elts


def _may_follow(later: _Where, earlier: _Where) -> bool:
    """Whether the analysis may meet `later` after `earlier` in the flow of `earlier`'s def: further on
    or in a loop around both, there or in a def nested there after `earlier` (a nested def is analysed
    where it is defined, with the env of that point as its closure; what it does stays in it)."""
    depth = len(earlier)
    if len(later) < depth or any(a.scope != b.scope for a, b in zip(later[:depth], earlier, strict=True)):
        return False
    here, there = later[depth - 1], earlier[-1]
    if here.loops & there.loops:
        return True
    # Not in the other branch of an `if` both are in (a loop around both is a loop around the `if`).
    other = {(branch, not orelse) for branch, orelse in there.branches}
    return here.position >= there.position and other.isdisjoint(here.branches)


# The levels above a def, the def's id, the loops and `if` branches around (as `_Level`).
_Context = tuple[_Where, int, frozenset[int], frozenset[tuple[int, bool]]]


def _placed(tree: ast.AST) -> Iterator[tuple[ast.AST, _Context]]:
    """Every node of `tree` but its leaves (as `_walk`), with its context (one object for the nodes
    of a def outside its loops, and so on)."""
    frontier: list[tuple[ast.AST, _Context]] = [(tree, ((), id(tree), frozenset(), frozenset()))]
    while frontier:
        node, context = frontier.pop()
        yield node, context
        kind = type(node)
        if kind is ast.Lambda or kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            pass
        elif kind is ast.For or kind is ast.AsyncFor or kind is ast.While or kind is ast.comprehension:
            context = (context[0], context[1], context[2] | {id(node)}, context[3])
        fields = _CHILD_FIELDS.get(kind)
        if fields is None:
            fields = _CHILD_FIELDS[kind] = tuple(f for f in kind._fields if f not in _LEAF_FIELDS)
        for name in fields:
            value = getattr(node, name, None)
            here = context
            if kind is ast.If and name != "test":
                here = (context[0], context[1], context[2], context[3] | {(id(node), name == "orelse")})
            for child in value if type(value) is list else (value,):
                if child is None or type(child) in _LEAVES or not isinstance(child, ast.AST):
                    continue
                child_kind = type(child)
                if child_kind is ast.Lambda or child_kind is ast.FunctionDef or child_kind is ast.AsyncFunctionDef:
                    outer, scope, loops, branches = here
                    level = _Level(scope, _position(child), loops, branches)
                    frontier.append((child, ((*outer, level), id(child), frozenset(), frozenset())))
                else:
                    frontier.append((child, here))


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _keeping_functions(imports: frozenset[tuple[str, str]]) -> frozenset[str]:
    """The local names of the torch functions of the table that keep a value (`from torch import detach`)."""
    return frozenset(
        local
        for local, full in imports
        if full.startswith("torch.") and torch_function_alias_kind(full[len("torch.") :]) in KEEPING_KINDS
    )


def _captures_and_writes(
    tree: ast.AST,
    imports: frozenset[tuple[str, str]],
    keeping_functions: frozenset[str],
    reports: bool,
    helpers: _Helpers,
) -> _Captures:
    """What `tree` may capture and write in place; its returned reports' entries only if `reports`
    (a return may be a report tuple). `helpers`: which calls the analysis may summarise (a helper
    may keep what it is given)."""
    found = _Captures()
    keeping_calls: set[int] = set()
    bindings: list[tuple[list[ast.expr | None], ast.expr]] = []
    modules = {local for local, _ in imports}
    torch_names = {local for local, full in imports if full == "torch" or full.startswith("torch.")}
    defs: dict[int, Def | ast.Lambda] = {}
    # Decided once the unit is walked, and only if it may capture at all: (value, owner, def) of a
    # value given to or stored into `owner`; (target, def) of `name op= v`.
    stores: list[tuple[ast.expr, ast.expr, int]] = []
    # What is given to a helper of the project (which may keep it), and the call and def it is in.
    handed: list[ast.expr] = []
    handed_to: dict[int, tuple[ast.Call, int]] = {}
    augmented: list[tuple[ast.Name, int]] = []

    def put(into: list[ast.expr], value: ast.expr, node: ast.AST, context: _Context) -> None:
        into.append(value)
        outer, scope, loops, branches = context
        found.where[id(value)] = (*outer, _Level(scope, _position(node), loops, branches))

    bound: dict[int, dict[str, list[ast.expr | None]]] = {}  # per def: `_bind_names`
    for node, context in _placed(tree):
        kind = type(node)
        if kind in _NAME_BINDINGS:
            # A def's own name is bound in the def around it (whose context the def's node is not in).
            scope = context[0][-1].scope if kind in FUNCTIONS and context[0] else context[1]
            _bind_names(node, bound.setdefault(scope, {}))
        if kind in _DISPLAYS:
            if not reports:
                continue
            for element in _display_elements(node):
                if element is not None:
                    put(found.entries, element.value if type(element) is ast.Starred else element, node, context)
        elif kind is ast.AugAssign:
            if not leaves_unchanged_write(node):  # `x *= 1` writes no value
                put(found.written, node.target, node, context)
            if type(node.target) is ast.Name:
                augmented.append((node.target, context[1]))
        elif kind is ast.Call:
            func = node.func
            attribute = func.attr if type(func) is ast.Attribute else None
            given = [a.value if type(a) is ast.Starred else a for a in node.args]
            given += [keyword.value for keyword in node.keywords]
            # A method (`x.detach()`, `x.cpu()`) or torch function of the table.
            root = (_dotted(func.value) or "").partition(".")[0] if attribute is not None else ""
            if attribute in KEEPING_NAMES and root not in modules - torch_names and not _copies(node):
                # What is kept is the receiver's storage (`x.to(device)`), or a torch function's first argument.
                receiver = (node.args or [None])[0] if root in torch_names else func.value
                if receiver is not None:
                    found.keeping[id(node)] = receiver
                keeping_calls.add(id(node))
            elif type(func) is ast.Name and func.id in keeping_functions and node.args:
                found.keeping[id(node)] = node.args[0]
                keeping_calls.add(id(node))
            if attribute is not None and node.args and handed_write(attribute, _dotted(func.value) or ""):
                put(found.written, node.args[0], node, context)  # `accelerator.backward(loss)`: the host writes it
            if attribute is not None and writes_in_place(attribute):
                # `scf.for_(...)`: a function of an imported module, not a tensor's method; `x.mul_(1)`: no write.
                if root not in modules and not leaves_unchanged_write(node):
                    put(found.written, func.value, node, context)
            elif attribute in CONTAINER_MUTATORS:
                for value in given:
                    if reports:
                        put(found.entries, value, node, context)
                    put(found.kept, value, node, context)
                    stores.append((value, func.value, context[1]))
            else:
                if reports and (_helper_call(node) is not None or (_dotted(func) or "") in CONTAINER_CONSTRUCTORS):
                    for value in given:  # a helper may put its arguments into what it returns
                        put(found.entries, value, node, context)
                if given and (_helper_call(node) is not None or _held_object_call(func)):
                    for value in given:  # and keep them (`analysis.summaries.Summary.kept`): asked last
                        put(handed, value, node, context)
                        handed_to[id(value)] = (node, context[1])
        elif kind is ast.Return and node.value is not None and reports:
            put(found.reports, node.value, node, context)
        elif kind is ast.Lambda or kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            defs[id(node)] = node
        if kind in _BINDINGS:
            targets = (
                node.targets if kind is ast.Assign else [node.optional_vars if kind is ast.withitem else node.target]
            )
            value = node.iter if kind in (ast.For, ast.AsyncFor, ast.comprehension) else getattr(node, "value", None)
            if kind is ast.withitem:
                value = node.context_expr
            if value is not None:
                bindings.append((targets, value))
            stored = _assigned_into(node)
            for target in stored:  # `x.a = v`, `x[k] = v`, `a, x.b = v` and `x.a: T = v` alike
                if reports:
                    put(found.entries, value, node, context)
                put(found.kept, value, node, context)
                stores.append((value, target.value, context[1]))
                key = target.slice if type(target) is ast.Subscript else None
                if len(stored) == 1 and key is not None and not (type(key) is ast.Constant and type(key.value) is str):
                    # `x[i] = v` keeps `v` only in a container (`analysis.statements._store_item`): a tensor's is a write.
                    found.stored_in[id(value)] = target.value
    if not found.written or not (found.kept or handed or found.reports):
        return found
    # Only a value a detach or conversion of the unit made can be a kept alias (`captures._kept`): one
    # holding such a call, or a name bound (through any chain of names) to one.
    # A dotted name holds what is bound to it, to an attribute of it (`self` holds `self.x`) or to an
    # owner of it (`out.x` holds `out`'s), not what is bound to a sibling (`self.y`).
    parts: dict[int, tuple[bool, set[str], set[str]]] = {}  # per value: such a call in it, its names, their heads
    kept_names: set[str] = set()
    kept_heads: set[str] = set()  # the kept names and their prefixes

    def parts_of(value: ast.AST) -> tuple[bool, set[str], set[str]]:
        found_parts = parts.get(id(value))
        if found_parts is None:
            calls, names = False, set()
            for node in _walk_storage(value):
                calls = calls or id(node) in keeping_calls
                if type(node) is ast.Name or type(node) is ast.Attribute:
                    name = _dotted(node)
                    if name is not None:
                        names.add(name)
            found_parts = parts[id(value)] = (calls, names, _with_heads(names))
        return found_parts

    def holds_kept(value: ast.AST) -> bool:
        calls, names, heads = parts_of(value)
        return calls or not kept_names.isdisjoint(heads) or not kept_heads.isdisjoint(names)

    grew = bool(found.kept or handed)
    while grew:
        grew = False
        for targets, value in bindings:
            names = {name for target in targets if target is not None for name in _bound_names(target)} - kept_names
            if names and holds_kept(value):
                kept_names |= names
                kept_heads |= _with_heads(names)
                grew = True
    found.kept = [value for value in found.kept if holds_kept(value)]
    for value in handed:  # given to a helper that may keep it: the costlier question, asked of these only
        call, scope = handed_to[id(value)]
        if holds_kept(value) and may_keep_arguments(call, helpers):
            found.kept.append(value)
            stores.append((value, call.func, scope))
    if not (found.kept or found.reports):
        return found
    local_names: dict[int, _Locals] = {}

    def names_of(scope: int) -> _Locals:
        if scope not in local_names:
            local_names[scope] = _locals_of(defs[scope], bound.get(scope, {}))
        return local_names[scope]

    # Kept only where it may outlive the call; no tensor write to a name bound only to containers.
    kept = {id(value) for value in found.kept}
    escaping = {
        id(value) for value, owner, scope in stores if id(value) in kept and _may_escape(owner, names_of(scope).own)
    }
    found.kept = [value for value in found.kept if id(value) in escaping]
    containers = {id(target) for target, scope in augmented if target.id in names_of(scope).containers}
    found.written = [target for target in found.written if id(target) not in containers]
    return found


def may_keep_arguments(call: ast.Call, helpers: _Helpers, depth: int = 0) -> bool:
    """Whether the analysis may summarise `call` (from a flow at `depth`) and capture what its
    helper keeps of the arguments: a helper it may summarise that may keep something
    (`helper(buf, v)`, `self.record(v)`), or a method of an object `self` holds
    (`self.meter.update(v)`: its class, found by the analysis, may be in any module)."""
    helper = _helper_call(call)
    if helper is not None:
        return helpers.may_summarise(*helper, depth) and helpers.may_keep(*helper, depth)
    return _held_object_call(call.func)


def _held_object_call(func: ast.expr) -> bool:
    """`self.meter.update`: a method of an object `self` holds."""
    return type(func) is ast.Attribute and type(func.value) is ast.Attribute and _dotted(func.value.value) == "self"


def _assigned_into(node: ast.AST) -> list[ast.Attribute | ast.Subscript]:
    """The attributes and entries an assignment (`=`, or an annotated one with a value) stores into."""
    kind = type(node)
    if kind is ast.Assign:
        return list(_stored_into(node.targets))
    return list(_stored_into([node.target])) if kind is ast.AnnAssign and node.value is not None else []


def _stored_into(targets: list[ast.expr]) -> Iterator[ast.Attribute | ast.Subscript]:
    """The attributes and entries an assignment stores into, inside tuple targets too."""
    for target in targets:
        kind = type(target)
        if kind is ast.Attribute or kind is ast.Subscript:
            yield target
        elif kind is ast.Tuple or kind is ast.List:
            yield from _stored_into(target.elts)
        elif kind is ast.Starred:
            yield from _stored_into([target.value])


def _walk_storage(value: ast.AST) -> Iterator[ast.AST]:
    """The nodes of `value` that may give it storage: not its subscripts' keys (`x[i]` shares storage
    with `x`, never with `i`), nor what a dotted name is made of (`self.y` is not `self`)."""
    frontier = [value]
    while frontier:
        node = frontier.pop()
        yield node
        kind = type(node)
        if kind is ast.Subscript:
            frontier.append(node.value)
        elif kind is not ast.Attribute or _dotted(node) is None:
            frontier.extend(ast.iter_child_nodes(node))


def _with_heads(names: set[str]) -> set[str]:
    """`names` and every dotted prefix of one (`self.x.y`: `self.x`, `self`)."""
    heads = set(names)
    for name in names:
        head = name
        while "." in head:
            head = head.rpartition(".")[0]
            heads.add(head)
    return heads


def _bound_names(target: ast.AST) -> Iterator[str]:
    """The dotted names a target binds, and the owners of the entries it stores into (`d` of `d[k]`)."""
    kind = type(target)
    if kind is ast.Name or kind is ast.Attribute or kind is ast.Subscript:
        name = _owner(target)
        if name is not None:
            yield name
    elif kind is ast.Tuple or kind is ast.List:
        for element in target.elts:
            yield from _bound_names(element)
    elif kind is ast.Starred:
        yield from _bound_names(target.value)


_BINDINGS = frozenset(
    {ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.For, ast.AsyncFor, ast.comprehension, ast.withitem}
)
# Values that are a new Python container or string: never a tensor, whatever `+=` does to them.
_CONTAINER_VALUES = (
    ast.Dict, ast.List, ast.Set, ast.Tuple, ast.DictComp, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.JoinedStr,
)  # fmt: skip
_DEFS = (*FUNCTIONS, ast.ClassDef)
_NAME_BINDINGS = frozenset(
    {ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.Global, ast.Nonlocal, ast.Import, ast.ImportFrom, ast.For}
    | {ast.AsyncFor, ast.comprehension, ast.withitem, *_DEFS}
)


@dataclasses.dataclass(frozen=True)
class _Locals:
    """What one def's own names are bound to, as far as `captures.py` cares."""

    own: frozenset[str]  # bound only to objects made in the def: stored into, they die with the call
    containers: frozenset[str]  # bound only to Python containers or strings: no in-place tensor write


def _locals_of(function: Def | ast.Lambda, bound: dict[str, list[ast.expr | None]]) -> _Locals:
    """A parameter, a global or closure variable, and a name bound to a call the analysis may summarise
    (`helper(x)`, `self.m()`: it may return a parameter) may be an object the caller holds
    (`captures._escapes`); a name bound only to names of the def's own objects is one of them.
    `bound`: what each name is bound to in the def (None: by a loop, `with`, an import, `global`...)."""
    bound = {name: list(values) for name, values in bound.items()}
    for argument in _parameters(function.args):
        bound.setdefault(argument.arg, []).append(None)
    containers = frozenset(
        name for name, values in bound.items() if all(_is_container_value(value) for value in values)
    )
    own = {name for name, values in bound.items() if None not in values}
    grew = True
    while grew:  # drop the names bound to what may not be the def's own, until none is left to drop
        grew = False
        for name in list(own):
            if not all(_is_own_value(value, own) for value in bound[name]):
                own.discard(name)
                grew = True
    return _Locals(frozenset(own), containers)


def _bind_names(node: ast.AST, bound: dict[str, list[ast.expr | None]]) -> None:
    """Note what `node` binds in its def (`_locals_of`)."""
    kind = type(node)
    if kind is ast.Assign or kind is ast.AnnAssign or kind is ast.NamedExpr:
        if node.value is None:
            return
        for target in node.targets if kind is ast.Assign else [node.target]:
            if type(target) is ast.Name:
                bound.setdefault(target.id, []).append(node.value)
                continue
            for name in ast.walk(target):
                if type(name) is ast.Name:
                    bound.setdefault(name.id, []).append(None)
    elif kind is ast.Global or kind is ast.Nonlocal:
        for name in node.names:
            bound.setdefault(name, []).append(None)
    elif kind is ast.Import or kind is ast.ImportFrom:
        for alias in node.names:
            bound.setdefault((alias.asname or alias.name).partition(".")[0], []).append(None)
    elif kind in (ast.For, ast.AsyncFor, ast.comprehension, ast.withitem):
        target = node.optional_vars if kind is ast.withitem else node.target
        for name in ast.walk(target) if target is not None else ():
            if type(name) is ast.Name:
                bound.setdefault(name.id, []).append(None)
    elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.ClassDef:
        bound.setdefault(node.name, []).append(None)


def _is_container_value(value: ast.expr | None) -> bool:
    if value is None:
        return False
    if isinstance(value, _CONTAINER_VALUES):
        return True
    if type(value) is ast.Constant:
        return type(value.value) in (str, bytes)
    return type(value) is ast.Call and (_dotted(value.func) or "") in CONTAINER_CONSTRUCTORS


def _is_own_value(value: ast.expr | None, own: set[str]) -> bool:
    kind = type(value)
    if kind is ast.Name:
        return value.id in own or value.id in ("None", "True", "False")
    if kind is ast.IfExp:
        return _is_own_value(value.body, own) and _is_own_value(value.orelse, own)
    if kind is ast.BoolOp:
        return all(_is_own_value(part, own) for part in value.values)
    if kind is ast.NamedExpr:
        return _is_own_value(value.value, own)
    if kind is ast.Call:
        return _helper_call(value) is None or (_dotted(value.func) or "") in CONTAINER_CONSTRUCTORS
    return kind not in (ast.Attribute, ast.Subscript, ast.Starred, ast.Await, ast.Yield, ast.YieldFrom)


def _may_escape(owner: ast.expr, own: frozenset[str]) -> bool:
    """Whether the object `owner` names (`self.log`, `metrics`, `LOG[k]`) may outlive the call."""
    while type(owner) in (ast.Attribute, ast.Subscript):
        owner = owner.value
    return type(owner) is not ast.Name or owner.id not in own


class _CaptureQuestions:
    """`_Flow`'s questions about captures: may an in-place write change what a capture holds."""

    def captured_may_be_written(self, found: _Captures) -> bool:
        """Whether a capture may hold storage a later in-place write changes: a report entry (a
        returned name only if it may be a sequence), or a kept value holding the result of a detach
        or conversion whose receiver that write changes."""
        self._settle()
        reports = [value for value in found.reports if self._returnable(value)]  # as `_report_elements`
        if not (reports or found.kept):
            return False
        self._settle_storage()
        written = [(self._storage(target), found.where[id(target)]) for target in found.written]

        def changed_after(where: _Where) -> frozenset[Token]:
            return _union(storage for storage, at in written if _may_follow(at, where))

        # A write changes a report's entry only once its storage is in a container.
        entries = [(self._storage(entry), found.where[id(entry)]) for entry in found.entries]
        into_entries = [
            (storage, at)
            for storage, at in written
            if any(_may_follow(at, put) and _overlap(storage, stored) for stored, put in entries)
        ]
        for returned in reports:
            where = found.where[id(returned)]
            changed = _union(storage for storage, at in into_entries if _may_follow(where, at))
            if any(_overlap(self._storage(report), changed) for report in self._report_elements([returned])):
                return True
        # A kept alias is the receiver's storage through the call: a value holds one only if it holds the
        # call's own result (its node's token, or a part of it), and a write changes it only if it
        # overlaps that receiver.
        receivers = {call: self._storage(receiver) for call, receiver in found.keeping.items()}
        if not _overlap(_union(iter(receivers.values())), _union(storage for storage, _ in written)):
            return False
        for value in found.kept:
            made = _union(receivers[named] for named in map(_named, self._storage(value)) if named in receivers)
            owner = found.stored_in.get(id(value))  # `x[i] = v` keeps `v` only in a container
            if _overlap(made, changed_after(found.where[id(value)])) and (
                owner is None or bool(self._eval(owner) & (D | S))
            ):
                return True
        return False

    def report_may_be_written(self, written: list[ast.expr], returned: list[ast.expr]) -> bool:
        """`captured_may_be_written` for report entries, in any order of writes and returns."""
        self._settle()
        if not any(self._returnable(value) for value in returned):
            return False  # no report tuple (`_report_elements`): storage need not be settled
        self._settle_storage()
        changed = _union(self._storage(target) for target in written)
        return any(_overlap(self._storage(report), changed) for report in self._report_elements(returned))
