"""Run a project's own copy of Megatron's schedule (a fork's vendored one) on a loss function's outputs.

`check` reads the schedule a hand-off reaches (`index/schedule.py`: the project's own copy when it ships one);
`verify` runs that one, not the installed megatron-core. The copy is imported from the project, under the name
its packages give it (`megatron.core.pipeline_parallel.schedules` in a fork of Megatron-LM; Primus' overlay is
`primus.backends.megatron.core...` and imports the installed `megatron.core`): its import root goes first on
``sys.path`` and the modules of its top package already imported are set aside while it is imported and while it
runs, then put back, so the rest of the process keeps the installed release. Its ``forward_step_calc_loss``
(megatron-core 0.14 on), else its ``forward_step``, gets the outputs as its loss function's, each argument given
by its name (the releases and forks order them differently); the pipeline-stage queries of its own
``parallel_state`` answer as the last stage of one, as for the installed release (`megatron.py`).

A fork imports more than its schedule runs, some of it not installed on a machine without a GPU (Megatron-LM's
MoE kernels `import triton` at the top of a module its `megatron.core` imports; Primus imports Megatron-LM's
`megatron.training`, which megatron-core does not ship). A module outside the fork's own package that an import
names and this machine lacks is stood in for (`_Absent`) and the import tried again from nothing, so the schedule
is run as long as what it runs does not need the module; once imported, a stand-in it uses raises
ModuleNotFoundError naming what it needed, and `verify` says so. `describe()` names every stand-in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import os
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..index.reach import shown
from ..index.schedule import schedule_module
from ._deps import quiet
from .megatron import _single_process_parallel_state, _StandInModel

# Where Megatron's schedule calls the loss function, newest first.
_ENTRIES = ("forward_step_calc_loss", "forward_step")
# At most this many absent modules are stood in for: past it the fork needs too much that is not here.
_MAX_ABSENT = 8


class ScheduleUnavailable(Exception):
    """The project's own schedule cannot be run here; ``str()`` says why."""


@dataclasses.dataclass(frozen=True)
class OwnSchedule:
    """A project's own schedule module, imported from the project, and the function calling the loss function."""

    path: str
    module: types.ModuleType
    entry: str
    modules: dict[str, types.ModuleType]  # the project's `megatron` modules and stand-ins, put in place while it runs
    absent: tuple[str, ...] = ()  # the modules not installed here that its imports named, stood in for

    def rescale(
        self, outputs: Sequence[Any], *, num_microbatches: int, cp_group_size: int, calculate_per_token_loss: bool
    ) -> tuple[Any, Any]:
        """Hand ``outputs`` to the project's schedule as its loss function's return value: ``(backprop tensor,
        report)`` after it, as `megatron_rescale` gives them."""
        store: list[Any] = []
        given = _given(
            outputs, store, _model_type(self.module), num_microbatches, cp_group_size, calculate_per_token_loss
        )
        function = getattr(self.module, self.entry)
        arguments = {name: given[name] for name in inspect.signature(function).parameters if name in given}
        parallel_state = getattr(self.module, "parallel_state", None)
        with self._in_place(), quiet(), contextlib.ExitStack() as stack:
            if isinstance(parallel_state, types.ModuleType):
                stack.enter_context(_single_process_parallel_state(parallel_state, cp_group_size))
            result = function(**arguments)
        if not store:
            raise RuntimeError(f"its {self.entry} stored no report")
        # `forward_step` returns the tensor (up to 0.6) or `(tensor, num_tokens)`; so does `forward_step_calc_loss`.
        return (result[0] if isinstance(result, tuple) else result), store[-1]

    def describe(self) -> str:
        if not self.absent:
            return f"the project's own schedule {shown(self.path)} ({self.entry})"
        absent = ", ".join(self.absent)
        return f"the project's own schedule {shown(self.path)} ({self.entry}; {absent} not installed here: stood in)"

    @contextlib.contextmanager
    def _in_place(self) -> Iterator[None]:
        with _set_aside((self.module.__name__.partition(".")[0], *self.absent), self.modules):
            yield


def _model_type(module: types.ModuleType) -> Any:
    """The schedule's own `ModelType.encoder_or_decoder`, which its `forward_step` compares a model's with."""
    model_type = getattr(module, "ModelType", None)
    return getattr(model_type, "encoder_or_decoder", None)


def _under(name: str, packages: Sequence[str]) -> bool:
    """Whether module ``name`` is one of ``packages`` or in one."""
    return any(name == package or name.startswith(package + ".") for package in packages)


@contextlib.contextmanager
def _set_aside(tops: Sequence[str], replacement: dict[str, types.ModuleType]) -> Iterator[dict[str, types.ModuleType]]:
    """The modules of packages ``tops`` in ``sys.modules`` replaced by ``replacement`` for the duration; the dict
    yielded holds those there at the end (what an import inside added), and the originals go back after."""
    saved = {name: sys.modules.pop(name) for name in [name for name in sys.modules if _under(name, tops)]}
    sys.modules.update(replacement)
    present: dict[str, types.ModuleType] = {}
    try:
        yield present
    finally:
        for name in [name for name in sys.modules if _under(name, tops)]:
            present[name] = sys.modules.pop(name)
        sys.modules.update(saved)


@functools.cache
def available(path: str) -> OwnSchedule | str:
    """`load`, once per path: the schedule, or why it cannot be run here."""
    try:
        return load(path)
    except ScheduleUnavailable as exc:
        return str(exc)


def load(path: str) -> OwnSchedule:
    """The project's own schedule module at ``path``, imported from the project; ScheduleUnavailable saying why
    it cannot be (it does not import here, or it has no function calling the loss function that can be run)."""
    found = schedule_module(path)
    if found is None:
        raise ScheduleUnavailable(f"{shown(path)} is not where Megatron's schedule module is")
    root, dotted = _package_of(path, *found)
    top = dotted.partition(".")[0]
    absent: list[str] = []
    sys.path.insert(0, root)
    importlib.invalidate_caches()
    try:
        while True:
            finder = _AbsentFinder(absent)
            sys.meta_path.append(finder)
            try:
                with quiet(), _set_aside((top, *absent), {}) as imported:
                    module = importlib.import_module(dotted)
                finder.importing = False
                break
            except ModuleNotFoundError as exc:
                missing = exc.name or ""
                if not _may_stand_in(missing, top, absent):
                    raise ScheduleUnavailable(f"it does not import here ({type(exc).__name__}: {exc})") from None
                absent.append(missing)  # and try again from nothing: `_set_aside` dropped what the attempt imported
            except Exception as exc:  # the fork's own C++ parts, a release of a library it does not support, ...
                raise ScheduleUnavailable(f"it does not import here ({type(exc).__name__}: {exc})") from None
            finally:
                sys.meta_path.remove(finder)
    finally:
        sys.path.remove(root)
    where = os.path.realpath(getattr(module, "__file__", None) or "")
    if where != os.path.realpath(path):
        raise ScheduleUnavailable(f"`import {dotted}` gave {where or 'a module without a file'}, not the project's")
    entry = next((name for name in _ENTRIES if callable(getattr(module, name, None))), None)
    if entry is None:
        raise ScheduleUnavailable(f"it defines neither {' nor '.join(_ENTRIES)}")
    _check_arguments(getattr(module, entry), entry)
    return OwnSchedule(path, module, entry, imported, tuple(absent))


def _package_of(path: str, root: str, dotted: str) -> tuple[str, str]:
    """Where to import the schedule at ``path`` from, and its name there: the packages above it (each folder with
    an `__init__.py`) where they reach further than ``dotted`` does (Primus' `primus.backends.megatron.core...`,
    an overlay importing the installed `megatron.core`); else ``root`` and ``dotted`` (namespace packages)."""
    parts = [os.path.basename(path).removesuffix(".py")]
    folder = os.path.dirname(path)
    while os.path.isfile(os.path.join(folder, "__init__.py")) and os.path.dirname(folder) != folder:
        parts.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    if len(parts) > dotted.count(".") + 1:
        return folder, ".".join(parts)
    return root, dotted


def _may_stand_in(missing: str, top: str, absent: Sequence[str]) -> bool:
    """Whether ``missing``, a module an import of the fork named, is one not installed here that a stand-in may
    replace: not a part of the fork's own package, not one present but broken, not past the bound."""
    if not missing or _under(missing, (top,)) or missing in absent or len(absent) >= _MAX_ABSENT:
        return False
    try:
        return importlib.util.find_spec(missing) is None
    except (ImportError, ValueError):
        return False


class _AbsentFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on ``sys.meta_path`` while the fork is imported: a module (and its submodules) under one of ``tops``,
    which nothing before it found, is an `_AbsentModule`. Once the import is done (`importing` off), using a
    stand-in raises ModuleNotFoundError: the schedule needs the module to run."""

    def __init__(self, tops: Sequence[str]) -> None:
        self.tops = tuple(tops)
        self.importing = True

    def used(self, name: str) -> None:
        if not self.importing:
            module = next(package for package in self.tops if _under(name.removesuffix("()"), (package,)))
            raise ModuleNotFoundError(
                f"No module named {module!r}: stood in to import the schedule, which needs {name}"
            )

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.machinery.ModuleSpec(name, self, is_package=True) if _under(name, self.tops) else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _AbsentModule(spec.name, self)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []
        module.__version__ = "0.0.0"  # read by version checks at import time (`triton.__version__ >= 3`): the oldest


class _Absent:
    """What a name from a module not installed here stands for while the schedule is imported: any attribute is
    another stand-in; a call with one callable is a decorator giving it back (`@triton.jit`), any other call another
    stand-in; it can be a base class."""

    def __init__(self, name: str, finder: _AbsentFinder) -> None:
        self._name = name
        self._finder = finder

    def __getattr__(self, name: str) -> _Absent:
        if name.startswith("__"):
            raise AttributeError(name)
        self._finder.used(f"{self._name}.{name}")
        return _Absent(f"{self._name}.{name}", self._finder)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._finder.used(f"{self._name}()")
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return _Absent(f"{self._name}()", self._finder)

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)

    def __repr__(self) -> str:
        return f"<{self._name}: not installed here>"


class _AbsentModule(types.ModuleType):
    def __init__(self, name: str, finder: _AbsentFinder) -> None:
        super().__init__(name)
        self._finder = finder

    def __getattr__(self, name: str) -> _Absent:
        if name.startswith("__"):
            raise AttributeError(name)
        self._finder.used(f"{self.__name__}.{name}")
        return _Absent(f"{self.__name__}.{name}", self._finder)


def _given(
    outputs: Sequence[Any],
    store: list[Any],
    model_type: Any,
    num_microbatches: int,
    cp_group_size: int,
    calculate_per_token_loss: bool,
) -> dict[str, Any]:
    """Every argument a release of Megatron's schedule passes where it calls the loss function, by its name."""

    def loss_func(*args: Any, **kwargs: Any) -> Sequence[Any]:
        return outputs

    config = types.SimpleNamespace(
        calculate_per_token_loss=calculate_per_token_loss, timers=None, enable_autocast=False
    )
    loss = outputs[0] if outputs else None
    return {
        "forward_step_func": lambda data_iterator, model: (loss, loss_func),
        "data_iterator": None,
        "model": _StandInModel(model_type),
        "num_microbatches": num_microbatches,
        "input_tensor": None,
        "forward_data_store": store,
        "config": config,
        "timers": None,
        "collect_non_loss_data": False,
        "output_tensor": loss,
        "loss_func": loss_func,
        "cp_group_size": cp_group_size,
        "is_last_stage": True,
        "vp_stage": None,
    }


_GIVEN = frozenset(_given((), [], None, 1, 1, False))


def _check_arguments(function: Callable[..., Any], entry: str) -> None:
    """ScheduleUnavailable if ``function`` needs an argument this cannot give (one with no default, not named as
    Megatron's releases name them)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError) as exc:
        raise ScheduleUnavailable(f"its {entry} has no signature to call it by ({exc})") from None
    needed = [
        p.name
        for p in parameters
        if p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        and p.name not in _GIVEN
    ]
    if needed:
        raise ScheduleUnavailable(f"its {entry} needs {', '.join(needed)}, which Megatron's releases do not pass")
