"""What the flows give a value: its container flags (`flows._FlowFlags`) and the storage tokens it
may share (`flows._FlowStorage`), and how they combine."""

from __future__ import annotations

from collections.abc import Iterator

# What a value may be, as bits. D: a dict container. S: a sequence container. H: a container
# holding a dict somewhere inside. M: no storage and no container (a number, None, a string, or
# the analysis' unknown `Val()`), which a subscript store turns into a dict.
D, S, H, M = 1, 2, 4, 8
ALL = D | S | H | M


def _elements(flags: int) -> int:
    """What indexing, iterating or unpacking a value with these flags may give."""
    out = M if flags & M else 0
    if flags & H:
        return ALL
    if flags & (D | S):
        out |= S | M
    return out


def _holding(flags: int) -> int:
    """The H bit of a container that holds a value with these flags."""
    return H if flags & (D | H) else 0


# An allocation site (node id), a name, ("*", owner): any attribute of it, ("seq", id): a display of
# 2 or 3 elements, ("call", id): a summarised call that may return one of its helper's.
Token = int | str | tuple[str, str] | tuple[str, int]
_NO_TOKENS: frozenset[Token] = frozenset()


def _union(parts: Iterator[frozenset[Token]]) -> frozenset[Token]:
    found = _NO_TOKENS
    for part in parts:
        found = found | part if found else part
    return found


def _narrowed(tokens: frozenset[Token], key: int | str) -> frozenset[Token]:
    """Part `key` of an opaque value: `("at", token, key)` shares storage with `token`, never with
    another part (the analysis' index and item tokens)."""
    # A part of a part stays the first part: coarser, and the tokens of a loop (`x = x[0]`) stay finite.
    return frozenset(t if type(t) is tuple and t[0] in ("*", "seq", "call", "at") else ("at", t, key) for t in tokens)


def _overlap(first: frozenset[Token], second: frozenset[Token]) -> bool:
    if not first.isdisjoint(second):
        return True
    for one, other in ((first, second), (second, first)):
        for token in one:
            if type(token) is tuple and token[0] == "at" and token[1] in other:
                return True  # a part shares storage with what it is part of
            if type(token) is tuple and token[0] == "*":
                prefix = token[1] + "."
                for candidate in other:
                    named = _named(candidate)
                    if type(named) is str and ((named + ".").startswith(prefix) or prefix.startswith(named + ".")):
                        return True
    return False


def _named(token: Token) -> object:
    """The name a token is about: an owner's, a part's whole's, or its own."""
    return token[1] if type(token) is tuple and token[0] in ("*", "at") else token
