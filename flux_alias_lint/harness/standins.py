"""Stand-ins for what a loss function gets from its caller and its module, when run on its own.

- ``Stub``: ``self``, ``args``, a helper it cannot see (a host's method writing what it is handed in place,
  ``self.accelerator.backward(loss)``, does its model's write). Attributes, items and calls give
  further stubs; a call with a tensor argument gives a tensor computed from it (so
  ``self.strategy.compute(logits=output)`` is a differentiable loss) and tensor methods act
  on a tensor of its own (``stub.sum()``). Arithmetic with numbers stays a stub, so a report
  of floats never turns into tensors. ``bool(stub)`` is a branch the stand-in cannot decide.
- ``instance_of``: ``self`` as an instance of the method's own class, when the module defines it.
- ``StubType``: a name an import could not provide. A class, so ``isinstance`` answers False
  and classes can derive from it; otherwise it behaves as a ``Stub``.
- ``Flag``: a module-level ``True``/``False`` setting; both values are tried, the module's first.
- ``StandInMapping``: a structured batch. Any key gives a tensor; ``key in batch`` and
  ``batch.get(key)`` are undecidable, so both answers are tried.
- ``single_rank``: ``torch.distributed`` and megatron-core's ``parallel_state`` answer as the
  only rank of every group while the probe runs: world size 1, rank 0, collectives no-ops.
- ``Run``: a probe's source of stand-in tensors and of answers to undecidable branches, one
  execution at a time. While ``undecidable_bools`` is active, ``if tensor:`` on a tensor of
  several values is such a branch too.

Every undecidable branch asks ``Run.choose``, so replaying a run's answers replays its path.
"""

from __future__ import annotations

import contextlib
import dis
import functools
import math
import operator
import re
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

from ..index.host_models import handed_write
from ._deps import require_torch

torch = require_torch()

# More undecidable branches than this in one run: a loop on a stand-in (`while stub:`).
MAX_DECISIONS = 64
# What unpacking or iterating a stub yields: `a, b = self.helper(x)` is the common shape.
STUB_LENGTH = 2


PROBE_FILENAME = "<flux-alias-lint probe>"  # the probe's code, as tracebacks name it


class TooManyDecisions(Exception):
    """A run kept asking undecidable questions: a loop that only a stand-in keeps going."""


class Run:
    """A probe's executions, one at a time: stand-in tensors in creation order, answers to undecidable branches.

    Stand-ins made before an execution (stubs for failed imports) belong to the probe; ``start``
    begins the next execution, and they forget what they handed out in the previous one.
    """

    def __init__(self, shape: tuple[int, ...], literals: tuple[str, ...] = ()) -> None:
        self.shape = shape
        self.roles: dict[str, str] = {}  # a stand-in's name → its layout (ROLES), where one was chosen for it
        self.literals = literals  # the function's string constants: the keys an iterated mapping holds
        self.stub_items: set[str] = set()  # keys of a batch whose item the function uses as an object, not a tensor
        self.mapping_names: set[str] = set()  # the names the function reads as mappings (`output.items()`)
        self.generation = 0
        self.start(())

    def start(self, forced: tuple[bool, ...]) -> None:
        self.forced = forced
        self.taken: list[bool] = []
        self.asked: list[int] = []  # the function's own line each answer was asked at (its innermost frame)
        self.repeats = 0  # answers given again (ask_again)
        self.bases: list[Any] = []  # leaf tensors behind every stand-in tensor, to compare gradients
        self.names: list[str] = []  # the named stand-in tensors made, in order: what a layout search may change
        self.made: dict[str, str] = {}  # name → the layout it was made in, as a verdict shows it
        self.generation += 1

    def choose(self, default: bool = True) -> bool:
        """The answer to the next undecidable branch: replayed if forced, else ``default`` (the other on a later
        execution)."""
        index = len(self.taken)
        if index >= MAX_DECISIONS:
            raise TooManyDecisions(f"more than {MAX_DECISIONS} branches on stand-ins")
        answer = self.forced[index] if index < len(self.forced) else default
        self.taken.append(answer)
        self.asked.append(_probe_line())
        return answer

    def ask_again(self) -> None:
        """A question already answered asked again: counted as a decision is, so `while stub:` still stops."""
        self.repeats += 1
        if self.repeats + len(self.taken) > MAX_DECISIONS:
            raise TooManyDecisions(f"more than {MAX_DECISIONS} branches on stand-ins")

    def tensor(self, name: str = "") -> Any:
        """A fresh non-leaf float tensor that requires grad, like a model output: in-place ops on it are allowed.

        In a 3-D shape (batch, sequence, vocabulary: a language model's logits) a stand-in named like
        token ids is what indexes them (integers below the vocabulary size, one per token), one named like
        a mask has one value per token and one named like a reward one per sample.
        """
        tensor = self._make(name)
        if name and name not in self.names:
            self.names.append(name)
            self.made[name] = (
                "None" if tensor is None else f"{list(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')}"
            )
        return tensor

    def _make(self, name: str) -> Any:
        role = self.roles.get(name)
        if role is not None:
            return self._in_layout(role)
        shape = self.shape
        if len(shape) == 3:
            if _COUNT.search(name):
                return self._in_layout("count")
            if _TOKEN_IDS.search(name):
                return torch.arange(math.prod(shape[:2])).reshape(shape[:2]) % shape[2]
            if _PER_TOKEN.search(name):
                shape = shape[:2]
            elif _PER_SAMPLE.search(name):
                shape = shape[:1]
        size = math.prod(shape)
        values = (torch.arange(1, size + 1, dtype=torch.float32) + len(self.bases)) / size
        base = values.reshape(shape).requires_grad_()
        self.bases.append(base)
        return base * 1.0

    def _in_layout(self, role: str) -> Any:
        """A stand-in in one of the ROLES layouts, as a layout search chose it."""
        if role == "ids":
            return torch.arange(BATCH * SEQUENCE).reshape(BATCH, SEQUENCE) % VOCABULARY
        if role == "count":
            return torch.tensor(BATCH)
        shape = ROLES[role]
        size = max(math.prod(shape), 1)
        values = (torch.arange(1, size + 1, dtype=torch.float32) + len(self.bases)) / size
        base = values.reshape(shape).requires_grad_()
        self.bases.append(base)
        return base * 1.0


def _probe_line() -> int:
    """The line of the probe's own code running now (0 outside it)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename != PROBE_FILENAME:
        frame = frame.f_back  # type: ignore[assignment]
    return frame.f_lineno if frame is not None else 0


# The layouts a search may give a named stand-in, language-model sized: a scalar, one value per sample, one per
# token (a mask, log-probs), integer token ids below the vocabulary (a gather's index, a cross entropy's target),
# logits, and a whole number (a slice's bound, a count of tokens).
BATCH, SEQUENCE, VOCABULARY = 2, 4, 8
ROLES: dict[str, tuple[int, ...]] = {
    "scalar": (),
    "sample": (BATCH,),
    "token": (BATCH, SEQUENCE),
    "ids": (BATCH, SEQUENCE),
    "logits": (BATCH, SEQUENCE, VOCABULARY),
    "count": (),
}

_LOSS = re.compile(r"(^|_)loss$")
_COUNT = re.compile(r"^(num|n)_|_(size|count)$")
_TOKEN_IDS = re.compile(r"(^|_)(ids?|tokens?|labels?|index)$")
_PER_TOKEN = re.compile(r"mask")
_PER_SAMPLE = re.compile(r"reward|advantage|score")


def _unwrap(value: Any) -> Any:
    """A stub's own tensor in place of the stub, in arguments handed to torch."""
    if isinstance(value, Stub):
        return value.as_tensor()
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    return value


def _first_tensor(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return next((a for a in (*args, *kwargs.values()) if torch.is_tensor(a)), None)


_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "pow": "**", "matmul": "@"}
_SYMBOLS.update({"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="})


def _binary(op: Callable[[Any, Any], Any], reflected: bool = False) -> Callable[[Stub, Any], Any]:
    def method(self: Stub, other: Any) -> Any:
        if torch.is_tensor(other):
            mine = self.as_tensor()
            return op(other, mine) if reflected else op(mine, other)
        return self.child(f" {_SYMBOLS[op.__name__]} …")

    return method


# The factor a stand-in host's write is given (`loss /= self.gradient_accumulation_steps`): the host runs' own.
HOST_FACTOR = 2


def _host_write(statement: str, handed: Any, *args: Any, **kwargs: Any) -> None:
    """A host's method writing what it is handed in place, its model's `statement` (`loss /= ...`) by `HOST_FACTOR`."""
    value = _unwrap(handed)
    if torch.is_tensor(value):
        (value.div_ if statement.split()[1] == "/=" else value.mul_)(HOST_FACTOR)


class Stub:
    """An unknown object: see the module docstring."""

    def __init__(self, name: str, run: Run) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_run", run)
        object.__setattr__(self, "_generation", -1)

    @property
    def _made(self) -> dict[Any, Any]:
        """What this stub handed out in the current execution: attributes, items and its own tensor."""
        if self._generation != self._run.generation:
            object.__setattr__(self, "_generation", self._run.generation)
            object.__setattr__(self, "_made_now", {})
        return self._made_now  # type: ignore[no-any-return]

    def child(self, label: str) -> Stub:
        return Stub(f"{self._name}{label}", self._run)

    def as_tensor(self) -> Any:
        if "tensor" not in self._made:
            self._made["tensor"] = self._run.tensor()
        return self._made["tensor"]

    def __getattr__(self, attr: str) -> Any:
        if _protocol(attr):
            raise AttributeError(attr)
        write = handed_write(attr, self._name)
        if write is not None:  # `self.accelerator.backward`: the host's method, its write as its model has it
            return functools.partial(_host_write, write.steps[-1].text)
        if attr in _TENSOR_API:
            return getattr(self.as_tensor(), attr)
        return self._get((".", attr), f".{attr}")

    def __setattr__(self, attr: str, value: Any) -> None:
        self._made[(".", attr)] = value

    def __getitem__(self, key: Any) -> Any:
        return self._get(("[]", repr(key)), f"[{key!r}]")

    def __setitem__(self, key: Any, value: Any) -> None:
        self._made[("[]", repr(key))] = value

    def _get(self, slot: tuple[str, str], label: str) -> Any:
        if slot not in self._made:
            self._made[slot] = self.child(label)
        return self._made[slot]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tensor = _first_tensor(args, kwargs)
        if tensor is None:
            return self.child("()")
        caller = sys._getframe(1)
        stored = stored_after_call(caller) or ""
        if stored in self._run.mapping_names:  # `output = model(samples)`, then `output.items()`, `output["loss"]`
            return StandInMapping(self._run)
        # `outputs = model(**inputs)`: a model called with keyword inputs alone may return a mapping (a
        # transformers ModelOutput, read as `outputs["loss"]`): tried after the tensor, as an undecided branch.
        if not args and not self._run.choose():
            return StandInMapping(self._run)
        # `loss, log = helper(logits)`: the tensor first, then stubs, as many as the caller unpacks. Stored as a
        # loss (`policy_loss, metrics = loss_fn(log_probs)`), it is one value, as a loss is (`loss.item()`).
        result = tensor.mean() if _LOSS.search(stored) else tensor * 1.0
        count = unpacked_after_call(caller)
        if count:
            return (result, *(self.child(f"()[{i}]") for i in range(1, count)))
        return result

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        return func(*_unwrap(tuple(args)), **{k: _unwrap(v) for k, v in (kwargs or {}).items()})

    def __bool__(self) -> bool:
        # One answer per execution: `fused = self.flag and x` hands the stub on, and `if fused:` asks it again.
        if "truth" not in self._made:
            self._made["truth"] = self._run.choose()
        else:
            self._run.ask_again()
        return self._made["truth"]  # type: ignore[no-any-return]

    def __contains__(self, item: Any) -> bool:
        return self._run.choose()

    def __iter__(self) -> Iterator[Stub]:
        count = unpacked_here(sys._getframe(1)) or STUB_LENGTH
        return iter([self[i] for i in range(count)])

    def __len__(self) -> int:
        return STUB_LENGTH

    def __index__(self) -> int:
        return 1

    def __float__(self) -> float:
        return 1.0

    def __enter__(self) -> Stub:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __str__(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"<stand-in {self._name}>"

    def __format__(self, spec: str) -> str:
        return self._name

    __hash__ = object.__hash__
    __add__, __radd__ = _binary(operator.add), _binary(operator.add, reflected=True)
    __sub__, __rsub__ = _binary(operator.sub), _binary(operator.sub, reflected=True)
    __mul__, __rmul__ = _binary(operator.mul), _binary(operator.mul, reflected=True)
    __truediv__, __rtruediv__ = _binary(operator.truediv), _binary(operator.truediv, reflected=True)
    __floordiv__, __rfloordiv__ = _binary(operator.floordiv), _binary(operator.floordiv, reflected=True)
    __pow__, __rpow__ = _binary(operator.pow), _binary(operator.pow, reflected=True)
    __matmul__, __rmatmul__ = _binary(operator.matmul), _binary(operator.matmul, reflected=True)
    # A comparison with a number is a stub, so the branch on it is tried both ways.
    __lt__, __le__ = _binary(operator.lt), _binary(operator.le)
    __gt__, __ge__ = _binary(operator.gt), _binary(operator.ge)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self is other if isinstance(other, Stub) else _binary(operator.eq)(self, other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self is not other if isinstance(other, Stub) else _binary(operator.ne)(self, other)

    def __neg__(self) -> Any:
        return Stub(f"-{self._name}", self._run)


@functools.cache
def _instructions(code: types.CodeType) -> list[dis.Instruction]:
    return [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "PRECALL", "EXTENDED_ARG")]


def unpacked_here(frame: types.FrameType) -> int | None:
    """How many values the instruction ``frame`` is at unpacks (``a, b = x``), if it unpacks."""
    code, offset = frame.f_code, frame.f_lasti
    found = next((i for i in _instructions(code) if i.offset == offset), None)
    return found.arg if found is not None and found.opname == "UNPACK_SEQUENCE" else None


def unpacked_after_call(frame: types.FrameType) -> int | None:
    """How many values the caller unpacks the result of the call ``frame`` is at into, if it does."""
    code, offset = frame.f_code, frame.f_lasti
    following = next((i for i in _instructions(code) if i.offset > offset), None)
    return following.arg if following is not None and following.opname == "UNPACK_SEQUENCE" else None


def stored_after_call(frame: types.FrameType) -> str | None:
    """The name the result of the call ``frame`` is at is stored to (its first value, where it is unpacked)."""
    code, offset = frame.f_code, frame.f_lasti
    following = [i for i in _instructions(code) if i.offset > offset][:2]
    if following and following[0].opname == "UNPACK_SEQUENCE":
        following = following[1:]
    if following and following[0].opname in ("STORE_FAST", "STORE_NAME", "STORE_DEREF", "STORE_GLOBAL"):
        return str(following[0].argval)
    return None


# Special names Python and libraries probe for (copy, pickle, numpy, typing, descriptors): a stub must not
# claim to implement them. Other dunders (`sample.__key__`) are ordinary fields of unknown objects.
_PROTOCOLS = frozenset(
    {
        *dir(object),
        *dir(dict),
        *dir(int),
        *dir(type),
        "__copy__",
        "__deepcopy__",
        "__getstate__",
        "__setstate__",
        "__length_hint__",
        "__array__",
        "__array_interface__",
        "__array_struct__",
        "__array_priority__",
        "__fspath__",
        "__wrapped__",
        "__signature__",
        "__func__",
        "__self__",
        "__get__",
        "__set__",
        "__set_name__",
        "__mro_entries__",
        "__origin__",
        "__args__",
        "__next__",
        "__await__",
        "__aiter__",
        "__anext__",
        "__enter__",
        "__exit__",
        "__call__",
    }
)


def _protocol(attr: str) -> bool:
    return attr.startswith("__") and attr.endswith("__") and attr in _PROTOCOLS


# Tensor methods and properties a stub answers with a tensor of its own. Not `data`, `grad`, `size` or `values`:
# on an unknown object those are more often its own fields (`parallel_state.cp.size > 1`).
_TENSOR_API = frozenset(
    name
    for name in dir(torch.Tensor)
    if not name.startswith("_") and (callable(getattr(torch.Tensor, name, None)) or name in {"shape", "dtype", "ndim"})
) - {"data", "grad", "size", "values", "apply_", "map_", "register_hook"}


def instance_of(cls: type, run: Run) -> Any:
    """An instance of a module's own class for ``self``, made without running ``__init__`` (its code needs
    what the probe cannot give): its methods run for real, and an attribute it lacks is a stub."""

    def missing(self: Any, attr: str) -> Any:
        if _protocol(attr):
            raise AttributeError(attr)
        self.__dict__[attr] = stub = Stub(f"self.{attr}", run)
        return stub

    try:
        return object.__new__(type(cls.__name__, (cls,), {"__getattr__": missing}))
    except TypeError:  # a class object.__new__ cannot make (a builtin's subclass, a metaclass conflict)
        return Stub("self", run)


class _StubMeta(type):
    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return Stub(f"{cls.__name__}.{attr}", cls._flux_run)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return Stub(cls.__name__, cls._flux_run)(*args, **kwargs)


class StubType(metaclass=_StubMeta):
    """Base of the classes that stand in for names an import could not provide."""

    _flux_run: Run


def stub_type(name: str, run: Run) -> type:
    """A class named ``name`` whose attributes and calls are stubs of ``run``."""
    return _StubMeta(name, (StubType,), {"_flux_run": run})


class Flag(int):
    """A module's ``NAME = True`` or ``= False``: a setting its user may flip, so both values are tried, its own first."""

    _run: Run

    def __new__(cls, value: bool, run: Run) -> Flag:
        flag = super().__new__(cls, value)
        flag._run = run
        return flag

    def __bool__(self) -> bool:
        return self._run.choose(default=int(self) != 0)

    def __repr__(self) -> str:
        return repr(int(self) != 0)


class StandInMapping(dict):
    """A structured batch: a tensor for any key; whether a key is present is tried both ways."""

    def __init__(self, run: Run) -> None:
        super().__init__()
        self._run = run
        self._absent: set[Any] = set()

    def __missing__(self, key: Any) -> Any:
        if key in self._absent:
            raise KeyError(key)
        if key in self._run.stub_items:  # `params = batch["packed_seq_params"]; params.cu_seqlens`
            self[key] = value = Stub(key, self._run)
        else:
            self[key] = value = self._run.tensor(key if isinstance(key, str) else "")
        return value

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        if key in self._absent:
            return False
        if not self._run.choose():
            self._absent.add(key)
            return False
        return True

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default  # noqa: SIM401 -- `in` is the undecidable question

    def _filled(self) -> StandInMapping:
        """Iterated while empty, it holds a tensor under each string the function names: `for key, loss in
        losses.items(): if key in ("pg_loss",)` finds its key, and the loss is a tensor, not the sum's 0."""
        if not dict.__len__(self):
            for key in self._run.literals:
                if key not in self._absent:
                    self[key]  # noqa: B018 -- __missing__ makes it
        return self

    def __iter__(self) -> Iterator[Any]:
        return dict.__iter__(self._filled())

    def __len__(self) -> int:
        return dict.__len__(self._filled())

    def keys(self) -> Any:
        return dict.keys(self._filled())

    def items(self) -> Any:
        return dict.items(self._filled())

    def values(self) -> Any:
        return dict.values(self._filled())


# ---- single rank -----------------------------------------------------------------------------


def _no_op(*args: Any, **kwargs: Any) -> None:
    return None


def _all_gather(tensor_list: list[Any], tensor: Any, *args: Any, **kwargs: Any) -> None:
    tensor_list[0].copy_(tensor)


def _into_tensor(output: Any, tensor: Any, *args: Any, **kwargs: Any) -> None:
    output.copy_(tensor)


def _all_gather_object(object_list: list[Any], obj: Any, *args: Any, **kwargs: Any) -> None:
    object_list[0] = obj


_DISTRIBUTED: dict[str, Callable[..., Any]] = {
    "is_available": lambda: True,
    "is_initialized": lambda: True,
    "get_world_size": lambda *a, **k: 1,
    "get_rank": lambda *a, **k: 0,
    "get_global_rank": lambda *a, **k: 0,
    "get_group_rank": lambda *a, **k: 0,
    "get_process_group_ranks": lambda *a, **k: [0],
    "new_group": lambda *a, **k: types.SimpleNamespace(),
    "all_reduce": _no_op,
    "reduce": _no_op,
    "broadcast": _no_op,
    "broadcast_object_list": _no_op,
    "barrier": _no_op,
    "all_gather": _all_gather,
    "all_gather_object": _all_gather_object,
    "all_gather_into_tensor": _into_tensor,
    "reduce_scatter_tensor": _into_tensor,
    "_all_gather_base": _into_tensor,
    "_reduce_scatter_base": _into_tensor,
}


def single_rank_answer(name: str) -> Callable[..., Any] | None:
    """What a ``parallel_state`` query returns on the only rank (None: not a query this knows)."""
    if name.endswith("world_size"):
        return lambda *a, **k: 1
    if name.endswith(("_rank", "_src_rank")) and name.startswith("get_"):
        return lambda *a, **k: 0
    if name.endswith(("_ranks",)):
        return lambda *a, **k: [0]
    if name.startswith("get_") and ("group" in name):
        return lambda *a, **k: types.SimpleNamespace()
    if name.startswith(("is_pipeline_", "is_rank_in_")) or name in {"model_parallel_is_initialized", "is_initialized"}:
        return lambda *a, **k: True
    return None


class SingleRankParallelState(types.SimpleNamespace):
    """Stands in for megatron's ``parallel_state`` (or ``mpu``) when it cannot be imported."""

    def __init__(self, run: Run) -> None:
        super().__init__()
        self._run = run

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return single_rank_answer(attr) or Stub(f"parallel_state.{attr}", self._run)


PARALLEL_STATE_MODULES = ("megatron.core.parallel_state", "megatron.core.mpu", "megatron.mpu")


@contextlib.contextmanager
def single_rank() -> Iterator[None]:
    """``torch.distributed`` and an imported ``parallel_state`` answer as the only rank, for the duration."""
    with contextlib.ExitStack() as stack:
        for name, answer in _DISTRIBUTED.items():
            stack.enter_context(mock.patch.object(torch.distributed, name, answer, create=True))
        for module_name in PARALLEL_STATE_MODULES:
            module = sys.modules.get(module_name)
            for name in dir(module) if module is not None else ():
                answer = single_rank_answer(name)
                if answer is not None and callable(getattr(module, name)):
                    stack.enter_context(mock.patch.object(module, name, answer))
        yield


def _numbers(data: Any) -> Any:
    """``data`` for ``torch.tensor``, each stub in it a number: a stub is a sequence of stubs without end."""
    if isinstance(data, Stub):
        return float(data)
    if isinstance(data, (list, tuple)):
        return type(data)(_numbers(item) for item in data)
    return data


class _StubsAsNumbers(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        if func in (torch.tensor, torch.as_tensor) and args:
            args = (_numbers(args[0]), *args[1:])
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def stubs_as_numbers() -> Iterator[None]:
    """``torch.tensor([count] + list(log.values()))`` with stubs in the list: each is the number 1.0."""
    with _StubsAsNumbers():
        yield


@contextlib.contextmanager
def undecidable_bools(run: Run) -> Iterator[None]:
    """``bool()`` of a tensor of several values (or none) asks ``run`` instead of raising."""
    original = torch._C.TensorBase.__bool__

    def decide(tensor: Any) -> bool:
        return run.choose() if tensor.numel() != 1 else original(tensor)

    with mock.patch.object(torch.Tensor, "__bool__", decide, create=True):
        yield
