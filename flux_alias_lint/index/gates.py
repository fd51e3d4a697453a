"""The byte-level gate: the lines of a file that may hold evidence, found without parsing it.

Only the files it lets through are parsed (CPython's `ast`), and the modules their names resolve
into on demand: most of a tree's files are never parsed by the index.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..facts.reports import RESCALING_METHODS, RESCALING_OPERATORS
from .handoffs import SCHEDULE_CALLS, SCHEDULE_GETTER, SIGNATURES

LOSS_REDUCTION_CLASS = "MegatronLossReduction"


# A file can hold Megatron evidence only if it mentions a host: it calls one of the schedule calls of
# `handoffs.SCHEDULE_CALLS` (or `get_forward_backward_func`), subclasses the loss reduction, or
# defines a forward-step signature. A file mentioning none is skipped; in one that does, the lines
# of the host calls and of every `forward_step_func=` (whatever it passes: a parameter passed on is
# followed to its callers) are where the evidence may be. One pattern per word, each tried only where
# its word is in the file and found by the literal it starts with (an alternation of them scans
# slowly: most of the index's time on NeMo).
_HOST_NAMES = sorted({name for entry in SCHEDULE_CALLS for name in entry.callees} | {SCHEDULE_GETTER})
_MEGATRON_GATES = (
    *((name.encode(), re.compile(rb"\b" + name.encode() + rb"\s*\(")) for name in _HOST_NAMES),
    (LOSS_REDUCTION_CLASS.encode(), re.compile(rb"class \w+\([^)]*" + LOSS_REDUCTION_CLASS.encode())),
    # `def f(data_iterator, model`: found from the parameter, its `def` checked on the line before it.
    (b"_iter", re.compile(rb"(?<=[(,\s])(?:data|dataloader)_iter(?:ator)?\s*(?::[^,]*)?,\s*model\b")),
)
_HANDED = re.compile(rb"\bforward_step_func\s*=\s*[\w(]")

_SIGNATURE_START = re.compile(
    rb"def \w+\(\s*(?:self,\s*)?(?:(?:"
    + b"|".join(name.encode() for signature in SIGNATURES for name in signature.optional_first)
    + rb")\s*(?::[^,]*)?,\s*)?\Z"
)

_RESCALES = tuple(op.encode() for op in RESCALING_OPERATORS) + tuple(f".{m}(".encode() for m in RESCALING_METHODS)


def gates(data: bytes) -> tuple[set[int], set[int]]:
    """The lines that may hold Megatron evidence, and those that may rescale in place a call's result
    (unpacked, or bound whole to a name). Plain substring tests first: most files have none of the words."""
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
    if megatron and b"forward_step_func" in data:
        megatron.update(_line_of(data, match.start()) for match in _HANDED.finditer(data))
    rescaling: set[int] = set()
    for name, at in _rescaled_names(data):
        if _bound_to_a_call(data, name) or any(
            _bound_to_a_call(data, alias) for alias in re.findall(rb"^[ \t]*" + re.escape(name) + _ALIAS, data, re.M)
        ):
            rescaling.add(_line_of(data, at))
    return megatron, rescaling


# `loss = c_loss`: a name bound to another whole (`in_place._through_aliases`), or to an entry of it
# (`loss = result["loss"]`, `in_place._entries_received`).
_ALIAS = rb"[ \t]*=[ \t]*(\w+)(?:\[(?:\"[^\"\n]*\"|'[^'\n]*')\])?[ \t]*(?:#.*)?$"


def _bound_to_a_call(data: bytes, name: bytes) -> bool:
    """Whether `name = f(...)` (or `name, other = f(...)`) starts a line of `data`."""
    return re.search(rb"^[ \t]*" + re.escape(name) + rb"[ \t]*(?:,[^=\n]*)?=[ \t]*[\w.]+\(", data, re.M) is not None


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
