"""The values the abstract interpreter computes (`analysis/`): storage tokens, the
chains of alias operations from a storage to a value, containers and their entries, and joins.

Two aliases overlap when they may share memory (`_overlap`); the most doubtful operation between
them says how (`_relative_kind`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import itertools
import typing
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import libcst as cst

from ..facts.tensor_ops import AliasKind

Key = str | int | None  # a container key; None = unknown


class Token(tuple):
    """A storage token: a root (`Param`, `Free`, `Site`, `Item`: where the storage comes from), then
    the constant indices taken from it. ``x[0]`` and ``x[1]`` never overlap; ``x`` and ``x[0]`` do.

    A flat tuple, hashed and compared in C where alias sets are built. Its first element is its
    class, so tokens of different roots never compare equal; `_overlap` compares prefixes, and a
    prefix of a token (what `_merge_aliases` keeps of several) is still a token of its class.
    """

    __slots__ = ()

    def indexed(self, *indices: object) -> Token:
        """This storage's part at the constant `indices`."""
        return tuple.__new__(type(self), self + indices)

    def prefix(self, length: int) -> Token:
        return tuple.__new__(type(self), self[:length])

    def __repr__(self) -> str:
        return type(self).__name__ + repr(tuple(self[1:]))


class Param(Token):
    """What parameter `name` of the def with id `function` holds when the def is entered."""

    __slots__ = ()

    def __new__(cls, function: int, name: str) -> Param:
        return tuple.__new__(cls, (cls, function, name))

    @property
    def function(self) -> int:
        return self[1]

    @property
    def name(self) -> str:
        return self[2]

    @property
    def indices(self) -> tuple[object, ...]:
        return self[3:]


class Free(Token):
    """What a name (or dotted name) not bound in the function holds: a global, a builtin, `self.x`."""

    __slots__ = ()

    def __new__(cls, name: str) -> Free:
        return tuple.__new__(cls, (cls, name))

    @property
    def name(self) -> str:
        return self[1]


class Site(Token):
    """An allocation at the node with id `node`, in the given pass of each enclosing loop: what one
    iteration allocates is never what the next allocates there. `within`: the storage a summarised
    helper allocated (its token), allocated anew at each call (`node`)."""

    __slots__ = ()

    def __new__(cls, node: int, passes: tuple[int, ...], within: Token | None = None) -> Site:
        return tuple.__new__(cls, (cls, node, passes) if within is None else (cls, node, passes, within))

    @property
    def node(self) -> int:
        return self[1]


class Item(Token):
    """The entry at `key` (None: any) of the mapping with storage `base` (`batch["labels"]`): the
    same key read twice is the same object, and it shares nothing with the mapping itself."""

    __slots__ = ()

    def __new__(cls, base: Token, key: Key) -> Item:
        return tuple.__new__(cls, (cls, base, key))

    @property
    def base(self) -> Token:
        return self[1]

    @property
    def key(self) -> Key:
        return self[2]


Items = Sequence[tuple[Key, "Val"]]  # a container's entries, (key, value), each known key once


class Field(str):
    """The key of a record's field (`report.lm`): a `str`, told apart only to be shown as an attribute."""


# The bounds that keep the analysis near-linear (see `ModuleAnalysis._degraded` and docs/internals.md,
# Reliability). Far above what real code reaches: within them the analysis is exact as before.
_MAX_OPS = 32  # longer op chains end in one widened op standing for the rest


_MAX_ALIASES = 32  # larger alias sets merge aliases passing through the same expression


_INDEXED = 32  # containers with more entries find keys through an index, not a scan


_SEVERITY = {
    AliasKind.SAME: 0,
    AliasKind.DETACH: 1,
    AliasKind.VIEW: 2,
    AliasKind.MAY_RETURN_SELF: 3,
}


class Op(NamedTuple):  # a tuple: hashed in C, and alias sets hash their chains of ops on every read
    kind: AliasKind
    label: str  # e.g. ".detach()", "[0]", ".float()"
    unpacked: bool = False  # position i of `a, b = value`: an element, not a view of the whole
    # Stands for several chains of ops (see `_widened`): never known to equal another op.
    widened: bool = False


def _widened(tails: Sequence[Sequence[Op]], detached: bool) -> Op:
    """One op standing for several tails of ops (`detached`: whether every chain they end was detached).

    Its kind is their most doubtful one; it never equals another op, so the aliases it ends overlap
    whatever the tails could have (sound), only less precisely.
    """
    kind = max((op.kind for tail in tails for op in tail), key=_SEVERITY.__getitem__, default=AliasKind.SAME)
    if kind is AliasKind.DETACH and not detached:
        kind = AliasKind.SAME  # a chain that was never detached must keep `.detach()` in its fix
    return Op(kind, "...", widened=True)


@dataclasses.dataclass(frozen=True)
class Alias:
    token: Token
    ops: tuple[Op, ...] = ()
    # The expression that last produced or passed this value: where a finding points.
    entry: cst.BaseExpression | None = None
    # False when `entry` is a container the value was unpacked from (`list(x.chunk(2))`):
    # there is no expression of the value itself to put `.clone()` after.
    fixable: bool = True

    def __hash__(self) -> int:
        # Computed once: an alias is hashed each time a set of them is built (every read of a name),
        # and its chain of ops can be 32 long.
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.token, self.ops, self.entry, self.fixable))
            object.__setattr__(self, "_hash", cached)
        return cached

    @property
    def detached(self) -> bool:
        return any(op.kind is AliasKind.DETACH for op in self.ops)

    def derive(self, op: Op, node: cst.BaseExpression, index: Key | None = None, fixable: bool = True) -> Alias:
        token = self.token if index is None else self.token.indexed(index)
        ops = self.ops + (op,)
        if len(ops) > _MAX_OPS:  # `r = r.view(-1)` repeated: the chain stops growing
            tail = ops[_MAX_OPS - 1 :]
            ops = ops[: _MAX_OPS - 1] + (_widened([tail], any(o.kind is AliasKind.DETACH for o in ops)),)
        return Alias(token, ops, node, fixable)


@dataclasses.dataclass(frozen=True)
class Val:
    """What an expression may evaluate to."""

    aliases: frozenset[Alias] = frozenset()
    container: str | None = None  # "dict", "seq" or "record" (a dataclass or NamedTuple, by `Field`)
    items: Items = ()  # a tuple, or `_Entries` for a large container stored into
    immutable: bool = False  # provably a Python number/str/None: can never alias
    dtype: str | None = None
    length: int | None = None  # size of dimension 0 where known (`torch.stack([a, b])`): resolves x[-1]
    # Positive evidence that it may be a tensor: a torch call or tensor-only method made it, a `Tensor`
    # annotation, any method call in a module that imports torch (not the parts of its result unpacked
    # into names), or arithmetic on such a value.
    tensor: bool = False
    function: cst.FunctionDef | None = None  # a nested def bound to this name: its calls use its summary

    def item(self, key: Key) -> Val:
        if key is not None:
            position = self._position(key)
            if position is not None:
                return self.items[position][1]
        entries = self._entries()
        if entries is not None and key is not None:  # a known key it lacks: only an unknown key's entry may be it
            position = entries.find(None)
            return entries[position][1] if position is not None else Val()
        found = [v for k, v in self.items if key is None or k is None]
        return join_all(found) if found else Val()

    def has(self, key: Key) -> bool:
        """Whether the known `key` has an entry of its own."""
        return key is not None and self._position(key) is not None

    def _position(self, key: Key) -> int | None:
        """Where the known `key` is in `items`. Known keys are unique; a large container looks
        them up in its `_Entries`, so 20,000 stores are not 20,000 scans."""
        entries = self._entries()
        if entries is None:
            return next((i for i, (k, _) in enumerate(self.items) if k == key), None)
        return entries.find(key)

    def _entries(self) -> _Entries | None:
        """The items of a large container as `_Entries` (made once from a tuple: a 20,000-entry
        literal, a join), None for a small one or one whose keys `_Entries` cannot hold."""
        items = self.items
        if isinstance(items, _Entries):
            return items
        if len(items) <= _INDEXED:
            return None
        entries = self.__dict__.get("_as_entries", False)
        if entries is False:
            entries = _Entries.of(items)
            object.__setattr__(self, "_as_entries", entries)
        return entries

    def with_item(self, key: Key, value: Val, *, strong: bool = True) -> Val:
        """Store `value` at `key`; a weak store (unknown key) may or may not overwrite, so it joins."""
        entries = self._entries() if key is not None else None
        if entries is not None:  # a known key in a large container: appended in place, or one entry replaced
            position = entries.find(key)
            if position is None:
                return dataclasses.replace(self, items=entries.appended(key, value))
            stored = value if strong else join(entries[position][1], value)
            return dataclasses.replace(self, items=entries.replaced(position, stored))
        strong = strong and key is not None
        items, found = [], False
        for k, v in self.items:
            if k == key:
                found = True
                items.append((k, value if strong else join(v, value)))
            else:
                items.append((k, v))
        if not found:
            items.append((key, value))
        return dataclasses.replace(self, items=tuple(items))

    def entered_at(self, node: cst.BaseExpression) -> Val:
        """The same value, now passed through ``node`` (its top-level aliases only)."""
        if not self.aliases:
            return self
        # Constructors, not dataclasses.replace: this runs for every name read.
        aliases = frozenset(Alias(a.token, a.ops, node, True) for a in self.aliases)
        if len(aliases) > _MAX_ALIASES:  # all through `node` now: chains of one storage merge
            aliases = _merge_aliases(aliases)
        return Val(
            aliases, self.container, self.items, self.immutable, self.dtype, self.length, self.tensor, self.function
        )


IMMUTABLE = Val(immutable=True)


class _Log:
    """The entries of containers that extend one another, each appended once and shared by them all:
    a container owns the log's first `length` entries (`_Entries`), and the one whose length is the
    log's appends in place; any other takes a copy of its part first."""

    __slots__ = ("entries", "positions")

    def __init__(self, entries: list[tuple[Key, Val]], positions: dict[Key, int]) -> None:
        self.entries = entries
        self.positions = positions  # each key's position (keys are unique in a log)


class _Entries(Sequence[tuple[Key, Val]]):
    """The items of a large container: the first `length` entries of a `_Log`. A store of a new key
    appends to the log instead of copying every entry into a new tuple, which made a function of
    20,000 `report["k<i>"] = ...` stores quadratic (in the copies, and in the collector walking each
    fresh 20,000-entry tuple). `copied`: the entries making it copied (`Work.copied`)."""

    __slots__ = ("_log", "_length", "copied")

    def __init__(self, log: _Log, length: int, copied: int) -> None:
        self._log, self._length, self.copied = log, length, copied

    @classmethod
    def of(cls, items: Sequence[tuple[Key, Val]]) -> _Entries | None:
        """These items in a log of their own; None when a key repeats (a sequence's unknown
        positions after a starred element are all None: only the scan of `with_item` joins them)."""
        positions = {k: i for i, (k, _) in enumerate(items)}
        if len(positions) != len(items):
            return None
        return cls(_Log(list(items), positions), len(items), len(items))

    def find(self, key: Key) -> int | None:
        position = self._log.positions.get(key)
        return position if position is not None and position < self._length else None

    def appended(self, key: Key, value: Val) -> _Entries:
        """These entries and `value` at the new `key` after them."""
        log, copied = self._log, 1
        if len(log.entries) != self._length:  # another container extended this one already: copy our part
            log = _Log(log.entries[: self._length], {k: p for k, p in log.positions.items() if p < self._length})
            copied += self._length
        log.positions[key] = len(log.entries)
        log.entries.append((key, value))
        return _Entries(log, self._length + 1, copied)

    def replaced(self, position: int, value: Val) -> _Entries:
        """These entries with the one at `position` holding `value`: a copy (the log's entries are never changed)."""
        entries = self._log.entries[: self._length]
        entries[position] = (entries[position][0], value)
        positions = {k: p for k, p in self._log.positions.items() if p < self._length}
        return _Entries(_Log(entries, positions), self._length, self._length)

    def prefix_of(self, other: _Entries) -> bool:
        """Whether `other` holds these entries and perhaps more after them (the same log)."""
        return self._log is other._log and self._length <= other._length

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[tuple[Key, Val]]:
        return itertools.islice(self._log.entries, self._length)

    @typing.overload
    def __getitem__(self, index: int) -> tuple[Key, Val]: ...

    @typing.overload
    def __getitem__(self, index: slice) -> tuple[tuple[Key, Val], ...]: ...

    def __getitem__(self, index: int | slice) -> tuple[Key, Val] | tuple[tuple[Key, Val], ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        if not -self._length <= index < self._length:
            raise IndexError(index)
        return self._log.entries[index % self._length]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Entries):
            return self._length == other._length and (self._log is other._log or tuple(self) == tuple(other))
        return tuple(self) == other if isinstance(other, tuple) else NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


def copies(before: Val, after: Val) -> int:
    """The entries `after = before.with_item(...)` copied: every one of a new tuple; for `_Entries`,
    its own count, and `before`'s tuple if it was made from one."""
    if isinstance(after.items, _Entries):
        return after.items.copied + (0 if isinstance(before.items, _Entries) else len(before.items))
    return len(after.items)


def join(a: Val, b: Val) -> Val:
    if a is b:
        return a
    return Val(
        aliases=a.aliases | b.aliases,
        container=a.container or b.container,
        items=_joined_items(a.items, b.items),
        immutable=a.immutable and b.immutable,
        dtype=a.dtype if a.dtype == b.dtype else None,
        length=a.length if a.length == b.length else None,
        tensor=a.tensor or b.tensor,
        function=a.function if a.function is b.function else None,
    )


def _joined_items(a: Items, b: Items) -> Items:
    """The entries of either, those of one key joined. Two branches of which one only added entries
    to a large container share its log: the longer is the join, found without a walk over it."""
    if isinstance(a, _Entries) and isinstance(b, _Entries):
        if a.prefix_of(b):
            return b
        if b.prefix_of(a):
            return a
    items: dict[Key, Val] = {}
    for k, v in itertools.chain(a, b):
        items[k] = join(items[k], v) if k in items else v
    return tuple(items.items())


def _merge_aliases(aliases: frozenset[Alias]) -> frozenset[Alias]:
    """Fewer aliases covering at least the same storage, for findings at the same expressions.

    Branches alternating `r = r.detach()` and `r = r.view(-1)` give 2**n chains of ops: aliases
    through the same expression merge into one over their common token and ops prefix, ending in
    a widened op. Aliases through different expressions stay apart (each is a finding of its own).
    Done where a value is read (`Val.entered_at`), when all its aliases pass through one
    expression: a join only unions what reads made, so sets grow with the code, not exponentially.
    """
    groups: dict[tuple[int, bool, object], list[Alias]] = {}
    for alias in aliases:
        groups.setdefault((id(alias.entry), alias.fixable, alias.token[:2]), []).append(alias)
    several = [group for group in groups.values() if len(group) > 1]
    if not several:
        return aliases  # distinct storages: nothing to merge (and no set to rebuild, which rehashes)
    merged = []
    for group in several:
        token = group[0].token.prefix(len(_common_prefix([a.token for a in group])))
        ops = _common_prefix([a.ops for a in group])
        tails = [a.ops[len(ops) :] for a in group]
        if any(tails):
            ops += (_widened(tails, all(a.detached for a in group)),)
        merged.append(Alias(token, ops, group[0].entry, group[0].fixable))
    return aliases.difference(alias for group in several for alias in group).union(merged)


def _common_prefix(items: Sequence[tuple]) -> tuple:
    shortest = min(items, key=len)
    for i, x in enumerate(shortest):
        if any(item[i] != x or getattr(x, "widened", False) for item in items):
            return shortest[:i]
    return shortest


def join_all(vals: Sequence[Val]) -> Val:
    out = vals[0]
    for v in vals[1:]:
        out = join(out, v)
    return out


Env = dict[str, Val]


def join_envs(envs: Sequence[Env | None]) -> Env | None:
    live = [e for e in envs if e is not None]
    if not live:
        return None
    out = dict(live[0])
    for env in live[1:]:
        for name, val in env.items():
            current = out.get(name)
            if current is None:
                out[name] = val
            elif current is not val:  # most names are untouched by the branches being joined
                out[name] = join(current, val)
    return out


@dataclasses.dataclass(frozen=True)
class RawFinding:
    """A finding before positions, noqa and selection are applied."""

    code: str
    entry: cst.BaseExpression
    report_path: str
    backprop: str
    detached: bool  # the flagged value already went through a detach: the fix is `.clone()` alone
    fixable: bool
    function: cst.FunctionDef | cst.Lambda  # the loss function whose return this is
    # Only a finding if the function is known to be called by Megatron or an in-place caller: the
    # report is not a dict, or nothing shows the loss is a tensor.
    proof_needed: bool = False
    # FAL005: the in-place write changing the captured value (None: the caller's rescale of the loss).
    write: cst.CSTNode | None = None
    # FAL005: the loss rescaled is the function's bare return value, not its tuple's first element: only
    # a reach saying so (`project.Reach.whole_return`) proves it.
    whole_return: bool = False
    # FAL005: the captured value shares storage with these entries of a returned dict (not with a bare or a tuple's
    # first loss): only a host taking one of them as its loss (`facts.hosts.Host.entry`) proves it.
    entries: tuple[str, ...] = ()
    # The length of the returned tuple, 2 `(loss, report)` or 3 `(loss, num_tokens, report)`: what Megatron
    # does to the loss depends on it (0: not known, a capture).
    returned: int = 0
    # The entry is a call of the project's helper that made the value (`parts = helper(x)`, then `return
    # parts["loss"], parts["report"]`): no copy fits at the call, the fix goes into the helper.
    made_by_helper: bool = False


def made_by_helper(alias: Alias) -> bool:
    """Whether `alias` is storage a summarised helper allocated, shown at its call (`Site.within`)."""
    token = alias.token
    return isinstance(token, Site) and len(token) == 4 and alias.entry is not None and token.node == id(alias.entry)


def render_path(path: Sequence[Key]) -> str:
    parts = []
    for key in path:
        if key is None:
            parts.append("[...]")
        elif isinstance(key, Field):
            parts.append("." + key)
        elif isinstance(key, str):
            parts.append('["' + key.replace("\\", "\\\\").replace('"', '\\"') + '"]')
        else:
            parts.append(f"[{key}]")
    return "report" + "".join(parts)


def _overlap(entry: Alias, backprop: Alias) -> bool:
    """Whether two aliases may share memory: the same storage, and not two different subscripts of it."""
    if not _same_storage(entry.token, backprop.token):
        return False
    common = 0
    for x, y in zip(entry.ops, backprop.ops, strict=False):
        if x != y or x.widened:
            # `text[:i]` and `text[i:]`: different parts of one base are assumed disjoint.
            return not (_narrows(x) and _narrows(y)) and not _disjoint_parts(x, y)
        common += 1
    # `loss, extra = out` on one branch, `loss = out` on another: `extra` is an element of a
    # tuple there, never part of `out` as a tensor, so it cannot alias the whole.
    return not (len(backprop.ops) == common < len(entry.ops) and entry.ops[common].unpacked)


def _same_storage(a: Token, b: Token) -> bool:
    """Whether one token is a prefix of the other, an entry at an unknown key (`v` of `out.items()`) being any
    entry of its mapping (`out["loss"]`)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return True
    return type(a) is Item and type(b) is Item and a[1] == b[1] and None in (a[2], b[2]) and a[3:n] == b[3:n]


def _narrows(op: Op) -> bool:
    """A subscript slicing away part of dimension 0 (`[:i]`, `[1:]`), not all of it (`[:]`, `[...]`,
    `[None]`, `[:, 0]`). Constant indices are not this: the storage token tells `x[0]` from `x[1]`
    exactly, and `x[-1]` may be `x[1]`."""
    if not op.label.startswith("["):
        return False
    first = op.label[1:-1].split(",")[0].replace(" ", "")
    return ":" in first and first not in (":", "::")


_FULL = (None, None)  # `:` (and `...`, `None` at the same place in both): the whole of a dimension


def _disjoint_parts(x: Op, y: Op) -> bool:
    """Two subscripts of one base that take disjoint parts of the same dimension, every other
    position a full slice in both: `qkv[:, :, 0]` and `qkv[:, :, 1]`, `x[:, 0:2]` and `x[:, 2]`."""
    if x.widened or y.widened or not (x.label.startswith("[") and y.label.startswith("[")):
        return False
    a, b = _subscript_parts(x.label), _subscript_parts(y.label)
    if a is None or b is None:
        return False
    if len(a) != len(b):
        if "..." in a or "..." in b:
            return False  # the positions after an ellipsis count from the end
        width = max(len(a), len(b))  # trailing positions left out are full slices
        a, b = a + (_FULL,) * (width - len(a)), b + (_FULL,) * (width - len(b))
    differing = [(p, q) for p, q in zip(a, b, strict=True) if p != q or p not in (_FULL, "...", "None")]
    return len(differing) == 1 and _disjoint_ranges(*differing[0])


def _disjoint_ranges(p: object, q: object) -> bool:
    """Whether two positions of a subscript, each a constant index `i` or a constant range `(start,
    stop)` (stop None: to the end), select no common element. A step is ignored (the range is its
    hull: never less than it selects); negative indices compare only with negative ones."""
    if not (isinstance(p, tuple) and isinstance(q, tuple)) or _FULL in (p, q):
        return False
    (p0, p1), (q0, q1) = p, q
    if min(p0, q0) < 0:  # `x[-1]`, `x[1]`: the same row when there are two
        return p1 == p0 + 1 and q1 == q0 + 1 and p0 < 0 and q0 < 0 and p0 != q0
    return (p1 is not None and p1 <= q0) or (q1 is not None and q1 <= p0)


@functools.lru_cache(maxsize=1024)
def _subscript_parts(label: str) -> tuple[object, ...] | None:
    """A subscript's label (`[:, 0, ...]`) read position by position: `_FULL`, `"..."`, `"None"`, a
    constant index `i` as the range `(i, i + 1)`, a constant range `(start, stop)`; None when any
    position is something else (a name, an expression): that overlaps everything."""
    try:
        tree = ast.parse("_" + label, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(tree, ast.Subscript):
        return None
    items = tree.slice.elts if isinstance(tree.slice, ast.Tuple) else [tree.slice]
    parts: list[object] = []
    for item in items:
        if isinstance(item, ast.Slice):
            start, stop, step = (
                _constant_int(e) if e is not None else None for e in (item.lower, item.upper, item.step)
            )
            known = all(
                e is None or c is not None for e, c in ((item.lower, start), (item.upper, stop), (item.step, step))
            )
            if not known or (step is not None and step < 1) or (start or 0) < 0 or (stop is not None and stop < 0):
                return None
            parts.append(_FULL if start in (None, 0) and stop is None else (start or 0, stop))
        elif isinstance(item, ast.Constant) and item.value is Ellipsis:
            parts.append("...")
        elif isinstance(item, ast.Constant) and item.value is None:
            parts.append("None")
        else:
            index = _constant_int(item)
            if index is None:
                return None
            parts.append((index, index + 1))
    while parts and parts[-1] == "...":  # `x[:, 0, ...]` is `x[:, 0]`
        parts.pop()
    return tuple(parts)


def _constant_int(node: ast.expr) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _constant_int(node.operand)
        return -value if value is not None else None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _relative_kind(entry: Alias, backprop: Alias) -> AliasKind:
    """The most doubtful operation separating the report value from the backprop tensor."""
    common = 0
    for x, y in zip(entry.ops, backprop.ops, strict=False):
        if x != y or x.widened:
            break
        common += 1
    rest = entry.ops[common:] + backprop.ops[common:]
    return max((op.kind for op in rest), key=_SEVERITY.__getitem__, default=AliasKind.SAME)


def _leaves(val: Val, path: tuple[Key, ...] = ()) -> Iterator[tuple[tuple[Key, ...], Val]]:
    if val.aliases:
        yield path, val
    for key, item in val.items:
        yield from _leaves(item, path + (key,))


def _as_mapping(param: Val) -> Val:
    """A helper's parameter used as a container: its entries are the caller's, looked up at the call."""
    entries = Val(frozenset(Alias(Item(a.token, None), (), None, True) for a in param.aliases))
    return Val(param.aliases, container="dict", items=((None, entries),))


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a chain of names, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None
