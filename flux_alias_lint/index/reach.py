"""What the index finds: each function's context, and the steps from it to the call that rescales its loss.

Functions are named by (real path, line of their `def` or `lambda`), which both `ast` and libcst give.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Iterable, Mapping

from .symbols import Symbols

MEGATRON = "megatron"
IN_PLACE_CALLER = "in-place-caller"
# FAL005: the write changing the capture is in the function itself, whoever calls it.
IN_FUNCTION = "in-function"
UNREACHED = "unreached"
# One context per third-party host of `facts/hosts.py` (its row's name): a host's findings are errors too.
TRANSFORMERS_TRAINING_STEP = "transformers-training-step"
TRANSFORMERS_COMPUTE_LOSS = "transformers-compute-loss"
ACCELERATE_BACKWARD = "accelerate-backward"
COMPOSER = "composer"
COMPOSER_TOTAL = "composer-total"
# Unreached, but the function value goes where the index cannot follow it (`escapes.py`): it may
# reach a host. Its steps lead to that place.
ESCAPES = "escapes"


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
    context: str  # MEGATRON, IN_PLACE_CALLER or a host's
    steps: tuple[Step, ...]
    guessed: bool = False  # from a forward-step signature alone: any hand-off call found replaces it
    # What is rescaled is the function's return value itself, which a loss function returns as its loss
    # (`handoffs.RETURNED_AS_THE_LOSS`), not the first element of a tuple it returns.
    whole_return: bool = False
    # The entry of a returned dict the host takes as its loss, for this function alone (a model's `forward`
    # returning `{"loss": loss, ...}` to transformers' `outputs["loss"]`); a host's own is `Host.entry`.
    entry: str = ""
    # Said by `lint.py` from the project's declared releases and settings (`index/releases.py`): which
    # release of the host rescales and where it is pinned; a setting of the project under which the host
    # leaves this value as it is (a warning, not an error).
    release: str = ""
    spared_by: str = ""
    # Where the project computes a setting (`settings.computed`, `file:line`) under which the host would leave
    # this value as it is: the verdict depends on the value a run gets, which the message says.
    depends_on: str = ""
    # The other hosts or callers seen to reach the function (`Found._merge`), strongest first: where the
    # releases a project runs leave this one's value alone, or this one rescales another value (the bare
    # return, not a tuple's first element), the finding reads the next (`lint.py`).
    also: tuple[Reach, ...] = ()


UNREACHED_REACH = Reach(UNREACHED, ())


def lost(step: Step) -> str:
    """The last step of an `ESCAPES` chain, said: how the value goes out of sight (where, the
    finding's chain and its `[escapes at path:line]` say: the message stays one short line)."""
    return f"{step.what}, not followed"


Key = tuple[str, int]  # (real path, line of the def or lambda)
Reaches = Mapping[int, Reach]  # the reached functions of one file, by the line of their def or lambda
Evidence = list[tuple[Key, Reach]]  # what one file shows, in the order it is found


class Found:
    """What the evidence shows: the strongest reach of each function (`reached`), and each gated
    file's own evidence (`evidence`, in the order it is found) while `_current` is collected."""

    def __init__(self) -> None:
        self.reached: dict[Key, Reach] = {}
        self.evidence: dict[str, Evidence] = {}
        self._current: str | None = None  # the file whose evidence is being collected

    def reached_by_path(self) -> dict[str, dict[int, Reach]]:
        """The reached functions of each file (by real path), by the line of their def or lambda."""
        out: dict[str, dict[int, Reach]] = {}
        for (path, line), reach in self.reached.items():
            out.setdefault(path, {})[line] = reach
        return out

    @staticmethod
    def _step(module: Symbols, node: ast.AST, what: str) -> Step:
        return Step(shown(module.path), node.lineno, what)

    def _reach(self, path: str, function: ast.AST, reach: Reach) -> None:
        key = (path, function.lineno)
        if self._current is not None:
            self.evidence[self._current].append((key, reach))
        self._merge(key, reach)

    def _merge(self, key: Key, reach: Reach) -> None:
        old = self.reached.get(key)
        if old is None:
            self.reached[key] = reach
            return
        first, other = (reach, old) if stronger(reach, old) else (old, reach)
        kinds = {(r.context, r.whole_return, r.entry) for r in (first, *first.also)}
        also = list(first.also)
        for candidate in (dataclasses.replace(other, also=()), *other.also):
            if (candidate.context, candidate.whole_return, candidate.entry) not in kinds:
                kinds.add((candidate.context, candidate.whole_return, candidate.entry))
                also.append(candidate)
        self.reached[key] = dataclasses.replace(first, also=tuple(also)) if also != list(first.also) else first


def merged(evidence: Iterable[Evidence]) -> Found:
    """What files whose evidence is `evidence` show together (in the order one run would collect
    them): a warm run puts the cached evidence together without loading the index."""
    found = Found()
    for each in evidence:
        for key, reach in each:
            found._merge(key, reach)
    return found


def stronger(new: Reach, old: Reach) -> bool:
    """Megatron's schedule beats an in-place caller; a hand-off call beats a signature guess."""
    if new.context != old.context:
        return new.context == MEGATRON
    return old.guessed and not new.guessed


def styled(steps: tuple[Step, ...], path: str) -> tuple[Step, ...]:
    """The steps' paths in the style of the finding's `path`: absolute if it is, else relative."""
    style = os.path.abspath if os.path.isabs(path) else os.path.relpath
    return tuple(dataclasses.replace(step, path=style(step.path)) for step in steps)


def shown(path: str) -> str:
    """A path as findings show it: relative to the working directory when under it."""
    relative = os.path.relpath(path)
    return path if relative.startswith(os.pardir) else relative
