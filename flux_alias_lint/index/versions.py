"""PEP 440 versions and specifiers, as sets of versions: which releases a declaration allows.

The plain linter depends on libcst alone, so this is a small evaluator of its own: a specifier set
(`>=4.46,<4.47`, `==0.8.*`, `~=0.11.0`, `!=4.46.1`) becomes a union of intervals over the version
order (dev < pre-releases < the release < post-releases), and two such sets are compared: whether
one lies within the other, overlaps it or excludes it. As PEP 440 says, `<V` excludes V's
pre-releases and `>V` V's post-releases. Local versions (`+cu121`) are ignored.
"""

from __future__ import annotations

import functools
import re

Key = tuple  # a version's place in the order (`key`)
# (low, low included, high, high included); None: unbounded.
Interval = tuple[Key | None, bool, Key | None, bool]
Versions = tuple[Interval, ...]  # a union of intervals

EVERY: Versions = ((None, False, None, False),)
NONE: Versions = ()

_VERSION = re.compile(
    r"v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre>a|b|c|rc|alpha|beta|pre|preview)[-_.]?(?P<pre_n>\d*))?"
    r"(?:-(?P<post_implicit>\d+)|[-_.]?(?P<post>post|rev|r)[-_.]?(?P<post_n>\d*))?"
    r"(?:[-_.]?(?P<dev>dev)[-_.]?(?P<dev_n>\d*))?"
    r"(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?",
    re.IGNORECASE,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
_SPECIFIER = re.compile(r"\s*(~=|===|==|!=|<=|>=|<|>)\s*([^\s,;]+)\s*")


def release(text: str) -> tuple[int, ...]:
    """The release numbers of a version as written (`0.11.0` -> (0, 11, 0)); ValueError if it is none."""
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a PEP 440 version: {text!r}")
    return tuple(int(part) for part in match["release"].split("."))


def _trimmed(numbers: tuple[int, ...]) -> tuple[int, ...]:
    end = len(numbers)
    while end > 1 and numbers[end - 1] == 0:
        end -= 1
    return numbers[:end]


@functools.cache
def key(text: str) -> Key:
    """A version's place in PEP 440's order; ValueError if it is not one."""
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a PEP 440 version: {text!r}")
    numbers = _trimmed(tuple(int(part) for part in match["release"].split(".")))
    post_n = match["post_implicit"] or match["post_n"]
    has_post = match["post_implicit"] is not None or match["post"] is not None
    if match["pre"]:
        pre: tuple[int, ...] = (0, _PRE_RANK[match["pre"].lower()], int(match["pre_n"] or 0))
    elif match["dev"] and not has_post:
        pre = (-1,)  # `1.0.dev1` comes before `1.0a1`
    else:
        pre = (1,)
    post = (0, int(post_n or 0)) if has_post else (-1,)
    dev = (0, int(match["dev_n"] or 0)) if match["dev"] else (1,)
    return (numbers, pre, post, dev)


def _below(numbers: tuple[int, ...]) -> Key:
    """Below every version of the release `numbers` (its dev and pre-releases too)."""
    return (_trimmed(numbers), (-2,))


def _above(numbers: tuple[int, ...]) -> Key:
    """Above every version of the release `numbers` (its post-releases too)."""
    return (_trimmed(numbers), (2,))


def _final(text: str) -> bool:
    """Whether a version is a plain release (no pre, post or dev part)."""
    parts = key(text)
    return parts[1:] == ((1,), (-1,), (1,))


def _prefix(version: str) -> Versions:
    """`==V.*`: every version whose release starts with V's numbers."""
    numbers = release(version)
    bumped = (*numbers[:-1], numbers[-1] + 1)
    return ((_below(numbers), True, _below(bumped), False),)


def _one(operator: str, version: str) -> Versions:
    if version.endswith(".*"):
        if operator not in ("==", "!="):
            raise ValueError(f"a wildcard only goes with == or !=: {operator}{version}")
        matching = _prefix(version[:-2])
        return matching if operator == "==" else complement(matching)
    at = key(version)
    if operator in ("==", "==="):
        return ((at, True, at, True),)
    if operator == "!=":
        return complement(((at, True, at, True),))
    if operator == "<":
        return ((None, False, _below(release(version)) if _final(version) else at, False),)
    if operator == "<=":
        return ((None, False, at, True),)
    if operator == ">":
        return ((_above(release(version)) if _final(version) else at, False, None, False),)
    if operator == ">=":
        return ((at, True, None, False),)
    # `~=V`: `>=V` and `==` V's release without its last number `.*`.
    numbers = release(version)
    if len(numbers) < 2:
        raise ValueError(f"~= needs a release of two numbers or more: ~={version}")
    return intersect(((at, True, None, False),), _prefix(".".join(map(str, numbers[:-1]))))


@functools.cache
def allowed(specifiers: str) -> Versions:
    """The versions a specifier set allows (`">=4.46,<4.47"`; "" allows every version). ValueError
    names what is not a specifier."""
    versions = EVERY
    for part in specifiers.split(","):
        if not part.strip():
            continue
        match = _SPECIFIER.fullmatch(part)
        if match is None:
            raise ValueError(f"not a version specifier: {part.strip()!r}")
        versions = intersect(versions, _one(match[1], match[2]))
    return versions


def poetry_specifiers(constraint: str) -> str:
    """A poetry constraint as a PEP 440 specifier set: `^1.2.3` is `>=1.2.3,<2.0.0` (the first nonzero
    number may not change), `~1.2.3` is `>=1.2.3,<1.3.0` (`~1` is `>=1,<2`), a bare version is `==` it,
    `*` is any, and the rest is PEP 440 already (`>=1.2 <2` with a space or a comma). ValueError for
    what it cannot say as one set (`^1 || ^2`)."""
    if "||" in constraint:
        raise ValueError(f"an alternative of poetry constraints: {constraint!r}")
    parts = []
    for part in re.split(r"\s*,\s*|\s+(?=[<>=!~^])", constraint.strip()):
        if part in ("", "*"):
            continue
        if part.startswith(("^", "~")) and not part.startswith("~="):
            version = part[1:].strip()
            numbers = release(version)
            if part[0] == "^":
                nonzero = next((at for at, number in enumerate(numbers) if number), len(numbers) - 1)
                upper = (*numbers[:nonzero], numbers[nonzero] + 1)
            else:
                upper = (*numbers[:1], numbers[1] + 1) if len(numbers) > 1 else (numbers[0] + 1,)
            parts += [f">={version}", f"<{'.'.join(map(str, upper))}"]
        elif _SPECIFIER.fullmatch(part):
            parts.append(part)
        else:
            release(part.removesuffix(".*"))  # a bare version (`1.2.*` too), or ValueError
            parts.append(f"=={part}")
    return ",".join(parts)


def any_of(specifier_sets: tuple[str, ...]) -> Versions:
    """The versions any of `specifier_sets` allows."""
    return tuple(interval for specifiers in specifier_sets for interval in allowed(specifiers))


def _low(a: Interval, b: Interval) -> tuple[Key | None, bool]:
    if a[0] is None or (b[0] is not None and b[0] > a[0]):
        return b[0], b[1]
    if b[0] is None or a[0] > b[0]:
        return a[0], a[1]
    return a[0], a[1] and b[1]


def _high(a: Interval, b: Interval) -> tuple[Key | None, bool]:
    if a[2] is None or (b[2] is not None and b[2] < a[2]):
        return b[2], b[3]
    if b[2] is None or a[2] < b[2]:
        return a[2], a[3]
    return a[2], a[3] and b[3]


def _nonempty(interval: Interval) -> bool:
    low, low_in, high, high_in = interval
    return low is None or high is None or low < high or (low == high and low_in and high_in)


def intersect(a: Versions, b: Versions) -> Versions:
    return tuple(
        interval
        for x in a
        for y in b
        if _nonempty(interval := (*_low(x, y), *_high(x, y)))  # type: ignore[arg-type]
    )


def complement(versions: Versions) -> Versions:
    """Every version not in `versions`."""
    result = EVERY
    for low, low_in, high, high_in in versions:
        gaps: list[Interval] = []
        if low is not None:
            gaps.append((None, False, low, not low_in))
        if high is not None:
            gaps.append((high, not high_in, None, False))
        result = intersect(result, tuple(gaps))
    return result


def relation(declared: Versions, releases: Versions) -> str:
    """How what a project declares relates to the releases that do something: "within" (every
    declared version does it), "excludes" (none does) or "overlaps"."""
    if not intersect(declared, releases):
        return "excludes"
    if not intersect(declared, complement(releases)):
        return "within"
    return "overlaps"
