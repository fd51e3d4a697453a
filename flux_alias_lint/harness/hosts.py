"""Run code that returns a bare loss under the host that rescales that loss in place, and see what it kept.

A host is whoever receives the loss a function returns and rescales it in place (hosts.md): transformers'
``Trainer.training_step`` (4.46.0–4.46.1, ``loss *= gradient_accumulation_steps``), its ``compute_loss``
(``loss *= num_processes`` with ``average_tokens_across_devices``), accelerate's ``Accelerator.backward``
(0.11–0.12, ``loss /= gradient_accumulation_steps``), Composer's ``_train_microbatch`` and the project's own
accumulation loop. ``HOSTS`` is the one table from a finding's context to its host.

Where a host is installable its real release runs: each pinned release lives in its own directory of the
user's cache (``install``; releases of one distribution conflict, so none goes into the environment), and a
subprocess (``host_worker.py``) runs with that directory first on ``sys.path``, two gloo ranks on 127.0.0.1
where the factor is the world size. Elsewhere, or when the release is not in the cache, the host's recorded
in-place line is applied to the returned loss in this process, and the run says so (``HostRun.ran``).

A host's line is the one ``facts/hosts.py`` records. A project's own pin picks the release (``for_project``: the
host row whose distribution it declares, the lowest release it allows that the harness can run, the setting it
sets), so a negative runs under the release that leaves its kept value alone, and ``in_place_twin`` under the
first that does not.

What runs is a ``Subject``: the user's function as the host calls it, rebuilt in whichever process runs the
host (a probe of a flagged function, replaying the path ``verify`` found; or a fixture module's function).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import json
import linecache
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import libcst as cst

import flux_alias_lint

from ..facts import hosts as facts
from ..facts.reports import RESCALING_METHODS, RESCALING_OPERATORS
from ..index.reach import IN_PLACE_CALLER, Step
from ..index.releases import declarations
from ..index.settings import setting as project_setting
from ..index.versions import Versions, allowed, any_of, key, relation

# The contexts of the third-party hosts (index/reach.py; facts/hosts.py holds their facts).
TRAINING_STEP = "transformers-training-step"
COMPUTE_LOSS = "transformers-compute-loss"
ACCELERATE_BACKWARD = "accelerate-backward"
COMPOSER = "composer"
COMPOSER_TOTAL = "composer-total"

# The factors a run uses: gradient accumulation steps and world size 2, Composer's microbatch 2 of a batch of 4.
STEPS = 2
WORLD_SIZE = 2
MICROBATCH, BATCH = 2, 4
# A stand-in for a caller's operand that the code does not spell as a number (`loss /= accum`).
OPERAND = 2.0
# A release's pip install and a host run, bounded.
INSTALL_SECONDS = 900
RUN_SECONDS = 300

CACHE_ENV = "FLUX_ALIAS_LINT_HOSTS_CACHE"


def cache_dir() -> Path:
    """Where pinned host releases are installed: ``$FLUX_ALIAS_LINT_HOSTS_CACHE``, else the user's cache."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "flux-alias-lint" / "hosts"


@dataclasses.dataclass(frozen=True)
class Release:
    """One pinned release and the small dependencies it imports, each pinned and installed without its own
    dependencies (torch, numpy, packaging, PyYAML and filelock come from the harness's environment: pip never
    picks a torch here)."""

    dist: str
    version: str
    requirements: tuple[str, ...]

    @property
    def path(self) -> Path:
        return cache_dir() / f"{self.dist}-{self.version}"

    def installed(self) -> bool:
        return (self.path / _COMPLETE).is_file()

    def __str__(self) -> str:
        return f"{self.dist} {self.version}"


_COMPLETE = "flux-alias-lint-complete"  # written last: a directory without it is not a whole install

# transformers' Trainer needs accelerate>=0.26 at run time (not as a pip dependency).
TRANSFORMERS_4_46_0 = Release(
    "transformers",
    "4.46.0",
    (
        "transformers==4.46.0",
        "tokenizers==0.20.3",
        "huggingface-hub==0.26.2",
        "safetensors==0.4.5",
        "regex==2024.9.11",
        "requests==2.32.3",
        "urllib3==2.2.3",
        "idna==3.10",
        "certifi==2024.8.30",
        "charset-normalizer==3.4.0",
        "tqdm==4.66.6",
        "accelerate==1.0.1",
        "psutil==6.1.0",
    ),
)
# The first release whose base `compute_loss` multiplies a `compute_loss_func`'s loss, `average_tokens_across_devices`
# off by default (on from 4.54.0).
TRANSFORMERS_4_49_0 = Release(
    "transformers",
    "4.49.0",
    (
        "transformers==4.49.0",
        "tokenizers==0.21.0",
        "huggingface-hub==0.28.1",
        "safetensors==0.5.2",
        "regex==2024.11.6",
        "requests==2.32.3",
        "urllib3==2.3.0",
        "idna==3.10",
        "certifi==2025.1.31",
        "charset-normalizer==3.4.1",
        "tqdm==4.67.1",
        "accelerate==1.4.0",
        "psutil==6.1.1",
    ),
)
TRANSFORMERS_4_57_1 = Release(
    "transformers",
    "4.57.1",
    (
        "transformers==4.57.1",
        "tokenizers==0.22.1",
        "huggingface-hub==0.35.3",
        "safetensors==0.6.2",
        "regex==2025.9.18",
        "requests==2.32.5",
        "urllib3==2.5.0",
        "idna==3.10",
        "certifi==2025.8.3",
        "charset-normalizer==3.4.3",
        "tqdm==4.67.1",
        "accelerate==1.10.1",
        "psutil==7.1.0",
    ),
)
ACCELERATE_0_12_0 = Release("accelerate", "0.12.0", ("accelerate==0.12.0", "psutil==6.1.0"))
# The first release after the in-place ones: a pin there is a negative, run to show nothing moves.
ACCELERATE_0_13_0 = Release("accelerate", "0.13.0", ("accelerate==0.13.0", "psutil==6.1.0"))
# Lightning's own out-of-place line (facts.OUT_OF_PLACE) runs from this release.
LIGHTNING_2_4_0 = Release(
    "lightning",
    "2.4.0",
    (
        "lightning==2.4.0",
        "lightning-utilities==0.11.7",
        "torchmetrics==1.4.2",
        "fsspec==2024.9.0",
        "tqdm==4.66.6",
        "PyYAML==6.0.2",
    ),
)
RELEASES: tuple[Release, ...] = (
    TRANSFORMERS_4_46_0,
    TRANSFORMERS_4_49_0,
    TRANSFORMERS_4_57_1,
    ACCELERATE_0_12_0,
    ACCELERATE_0_13_0,
    LIGHTNING_2_4_0,
)


# The rescales the index finds a caller doing (facts/reports.py), as the in-place tensor method each one is.
_AUGMENTED = {type(ast.parse(f"x {op} k").body[0].op): "mul" if op == "*=" else "div" for op in RESCALING_OPERATORS}
_METHODS = {method: method.rstrip("_") for method in RESCALING_METHODS}


def _in_place(text: str) -> tuple[str, str] | None:
    """``loss /= k`` or ``loss.div_(k)``: ("div", "k"); None for anything else."""
    try:
        [stmt] = ast.parse(text).body
    except (SyntaxError, ValueError):
        return None
    if isinstance(stmt, ast.AugAssign) and type(stmt.op) in _AUGMENTED:
        return _AUGMENTED[type(stmt.op)], ast.unparse(stmt.value)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        if isinstance(call.func, ast.Attribute) and call.func.attr in _METHODS and len(call.args) == 1:
            return _METHODS[call.func.attr], ast.unparse(call.args[0])
    return None


@dataclasses.dataclass(frozen=True)
class Host:
    """Who rescales a returned loss in place, and how a run reproduces it."""

    name: str  # as a verdict names it: "Trainer.training_step"
    line: str  # the recorded line
    op: str  # "mul" or "div": what the line does
    factor: float  # by what, in the run
    setting: str  # what sets the factor in the run: "gradient_accumulation_steps=2"
    release: Release | None = None  # None: emulated, for `emulated_because`
    emulated_because: str = ""
    driver: str = ""  # host_worker's function that runs the real release
    world_size: int = 1
    in_place: bool = True  # False: this release (or setting) does not do `line` in place
    on: bool = True  # the setting the rescale depends on (average_tokens_across_devices), as the run sets it
    shown: str = ""  # where `in_place` is False: the releases that do `line` in place, said
    profile: str = ""  # a megatron-core profile (profiles.py) that rescales the returned `(loss, report)`
    entry: str = ""  # the entry of a returned dict the host takes as its loss (facts.hosts.Host.entry)
    pair: bool = False  # the project's loop hands the host the first of the `(loss, report)` the function returns
    trainer: str = ""  # "path:Class": the project's Trainer subclass a model's forward runs under (else transformers')

    @property
    def said(self) -> str:
        """What the run does, said: "`loss /= k` with k=2", or "not `loss /= k` (accelerate 0.11–0.12 only) ..."."""
        with_setting = f" with {self.setting}" if self.setting else ""
        if self.in_place or not self.shown:
            return f"`{self.line}`{with_setting}"
        return f"not `{self.line}`{f' ({self.shown} only)' if self.shown else ''}{with_setting}"

    def emulated(self, why: str) -> str:
        return f"emulated: {self.said}; {why}"


def _recorded(context: str) -> tuple[str, str]:
    """A host row's line as facts/hosts.py records it, and what it does in place ("mul" or "div")."""
    line = facts.BY_NAME[context].operation.strip("`")
    parsed = _in_place(line)
    assert parsed is not None, f"facts/hosts.py's {context} line is no in-place rescale: {line}"
    return line, parsed[0]


# One row per context a finding can have whose host rescales a bare returned loss. `in-place-caller` is not
# here: its line is the caller's own (`caller_host`).
HOSTS: dict[str, Host] = {
    TRAINING_STEP: Host(
        "Trainer.training_step",
        *_recorded(TRAINING_STEP),
        STEPS,
        f"gradient_accumulation_steps={STEPS}",
        TRANSFORMERS_4_46_0,
        driver="training_step",
    ),
    COMPUTE_LOSS: Host(
        "Trainer.compute_loss",
        *_recorded(COMPUTE_LOSS),
        WORLD_SIZE,
        f"average_tokens_across_devices on, {WORLD_SIZE} processes",
        TRANSFORMERS_4_57_1,
        driver="compute_loss",
        world_size=WORLD_SIZE,
    ),
    ACCELERATE_BACKWARD: Host(
        "Accelerator.backward",
        *_recorded(ACCELERATE_BACKWARD),
        STEPS,
        f"gradient_accumulation_steps={STEPS}",
        ACCELERATE_0_12_0,
        driver="backward",
    ),
    COMPOSER: Host(
        "Composer's Trainer._train_microbatch",
        *_recorded(COMPOSER),
        MICROBATCH / BATCH,
        f"a microbatch of {MICROBATCH} in a batch of {BATCH}",
        emulated_because="no public case to run it on (Composer's trainer needs a whole ComposerModel and dataloader)",
    ),
    # 0.10 and later: `microbatch_loss = self.state.loss['total']`, then the recorded `microbatch_loss.mul_(...)`;
    # a loss without 'total' summed into a new tensor first (`returned_loss`).
    COMPOSER_TOTAL: Host(
        "Composer's Trainer._train_microbatch",
        *_recorded(COMPOSER_TOTAL),
        MICROBATCH / BATCH,
        f"a microbatch of {MICROBATCH} in a batch of {BATCH}, the dict's 'total' taken as the loss (0.10+)",
        emulated_because="Composer's trainer is heavy (it needs a whole ComposerModel, dataloader and its "
        "dependencies): its recorded 0.10+ lines run instead",
        entry=facts.COMPOSER_TOTAL.entry or "",
    ),
}


def caller_host(step: Step) -> Host:
    """The host of an ``in-place-caller`` finding: the caller's own in-place line at ``step``, emulated. A number
    it spells is its factor; a name gets ``OPERAND``."""
    text = _line(step)
    where = f"the caller at {step.path}:{step.line}"
    parsed = _in_place(text)
    if parsed is None:
        return Host(
            where, text or "?", "mul", 1.0, "", emulated_because=f"its line is not an in-place rescale: {text!r}"
        )
    op, operand = parsed
    try:
        factor = float(ast.literal_eval(operand))
        setting = f"{operand} as written"
    except (ValueError, SyntaxError, TypeError):
        factor, setting = OPERAND, f"{operand} = {OPERAND:g}"
    return Host(where, text, op, factor, setting, emulated_because="it is the project's own code")


def host_of(context: str, steps: Sequence[Step]) -> Host | None:
    """The host of a finding's context; None if none is known. An in-place caller's is the last step of its
    chain that is an in-place rescale (the chain ends there), else its last step."""
    if context == IN_PLACE_CALLER and steps:
        rescales = [step for step in steps if _in_place(_line(step)) is not None]
        return caller_host((rescales or list(steps))[-1])
    return HOSTS.get(context)


def _line(step: Step) -> str:
    linecache.checkcache(step.path)  # the file as it is now, not as an earlier read cached it
    return linecache.getline(step.path, step.line).strip()


# What runs under a host.


class Made:
    """A subject, made in the process that runs the host: the user's function as the host calls it."""

    returned: Any = None  # the loss it returned, which the host rescales
    entry: str = ""  # the host takes this entry of a returned dict as the loss (Host.entry)
    pair: bool = False  # the host is handed the first of the `(loss, report)` it returns (Host.pair)
    owner: type | None = None  # the class whose method it is (a Trainer subclass's `compute_loss`), made by the host

    def __call__(self, handed: Any, *host_args: Any, **host_kwargs: Any) -> Any:
        """Run the function; ``handed``: the model's output, for a function of one argument; ``host_args`` and
        ``host_kwargs``: what the host itself passes, for a function that takes them."""
        raise NotImplementedError

    def moved(self) -> dict[str, str]:
        """Where → how each value it kept moved since it kept it."""
        raise NotImplementedError

    def grads(self) -> list[Any]:
        return []


@dataclasses.dataclass
class ProbeSubject:
    """A flagged function's probe (probe.py) replaying one path ``verify`` found; its marked entries' values are
    the kept ones. Pickled whole, so the entry nodes stay nodes of the pickled module."""

    module: cst.Module
    function: cst.FunctionDef | cst.Lambda
    entries: list[tuple[cst.CSTNode, int]]
    fixes: list[tuple[cst.CSTNode, str, str]]
    shape: tuple[int, ...]
    faithful: bool
    path: str
    taken: tuple[bool, ...]
    roles: dict[str, str]

    def make(self) -> Made:
        from .probe import build_probe

        probe = build_probe(
            self.module,
            self.function,
            self.shape,
            {id(node): key for node, key in self.entries},
            path=self.path,
            faithful=self.faithful,
            fixes={id(node): (before, after) for node, before, after in self.fixes},
        )
        return _MadeProbe(probe, self.taken, self.roles)


class _MadeProbe(Made):
    def __init__(self, probe: Any, taken: tuple[bool, ...], roles: dict[str, str]) -> None:
        self._probe, self._taken, self._roles = probe, taken, roles
        self._execution: Any = None

    def __call__(self, handed: Any, *host_args: Any, **host_kwargs: Any) -> Any:
        execution = self._probe.execute(self._taken, self._roles)
        if execution.error is not None:
            raise execution.error
        if execution.taken != self._taken[: len(execution.taken)]:  # fewer: the host's real values decided the rest
            raise RuntimeError("the probe took another path")
        self._execution, self.returned = execution, execution.outputs
        return _loss(execution.outputs, self.entry, self.pair)

    def moved(self) -> dict[str, str]:
        return self._execution.captures.moved() if self._execution is not None else {}

    def grads(self) -> list[Any]:
        return [base.grad for base in self._execution.bases] if self._execution is not None else []


@dataclasses.dataclass
class ModuleSubject:
    """A function of a module file (a fixture), called as its host calls it; what it keeps in containers of its
    module or its frames is watched (captures.py's tracing). ``function``: a name, a class whose instances are
    called (``Criterion``), or ``Class.method`` (the host makes the instance)."""

    path: str
    function: str = "loss_func"

    def make(self) -> Made:
        return _MadeModule(self.path, self.function)


class _MadeModule(Made):
    def __init__(self, path: str, function: str) -> None:
        import importlib.util

        from .captures import CaptureWatch

        name = f"_flux_hosted_{Path(path).stem.replace('.', '_')}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found: Any = module
        for part in function.split("."):
            self.owner = found if isinstance(found, type) else None
            found = getattr(found, part)
        self._func = found() if isinstance(found, type) else found
        self._path = os.path.realpath(path)
        self._watch = CaptureWatch()

    def __call__(self, handed: Any, *host_args: Any, **host_kwargs: Any) -> Any:
        args, kwargs = (host_args, host_kwargs) if host_args and _takes(self._func, host_args) else ((handed,), {})
        with self._watch.tracing(self._path):
            self.returned = self._func(*args, **kwargs)
        returned = self.returned
        if isinstance(returned, tuple) and len(returned) in (2, 3):
            returned = returned[0]  # a Megatron `(loss, report)`: the schedule rescales its first element
        return _loss(returned, self.entry)

    def moved(self) -> dict[str, str]:
        return self._watch.moved()


def _takes(func: Any, args: tuple[Any, ...]) -> bool:
    """Whether ``func`` takes these positional arguments (a host's own call), not just one."""
    import inspect

    try:
        inspect.signature(func).bind_partial(*args)
    except TypeError:
        return False
    return True


def returned_loss(returned: Any, entry: str = "", pair: bool = False) -> Any:
    """The loss a host takes from what the function returned: the tensor itself, or a model output's loss
    (``outputs["loss"]`` of a mapping such as transformers' ``ModelOutput``, a tuple's first element, else
    ``outputs.loss``); None if none.
    ``entry``: a host taking that entry of a returned dict as its loss (Composer 0.10+'s ``'total'``), which sums
    anything else into a new tensor first, as the release does (``microbatch_loss.add_(loss.mean())`` on zeros).
    ``pair``: the project's loop unpacks a ``(loss, report)`` and hands the host its first element
    (``loss, metrics = step(...)``, then ``accelerator.backward(loss)``)."""
    from ._deps import require_torch

    torch = require_torch()
    if pair and isinstance(returned, tuple) and len(returned) in (2, 3) and torch.is_tensor(returned[0]):
        return returned[0]
    if entry:
        if isinstance(returned, Mapping) and torch.is_tensor(returned.get(entry)):
            return returned[entry]
        if isinstance(returned, Mapping):
            values = list(returned.values())
        else:
            values = list(returned) if isinstance(returned, (tuple, list)) else [returned]
        if not values or not all(torch.is_tensor(v) for v in values):
            return None
        return sum((v.mean() for v in values), torch.zeros(1))
    if torch.is_tensor(returned):
        return returned
    if (
        isinstance(returned, tuple)
        and returned
        and torch.is_tensor(returned[0])
        and not any(isinstance(value, Mapping) for value in returned[1:])
    ):  # a model's tuple output, its loss first (transformers' `outputs[0]`); not a Megatron `(loss, report)`
        return returned[0]
    loss = returned.get("loss") if isinstance(returned, Mapping) else getattr(returned, "loss", None)
    return loss if torch.is_tensor(loss) else None


def _loss(returned: Any, entry: str = "", pair: bool = False) -> Any:
    loss = returned_loss(returned, entry, pair)
    if loss is None:
        raise TypeError(f"it returned a {type(returned).__name__}, not a loss tensor or a model output with one")
    return loss


Subject = ProbeSubject | ModuleSubject


@dataclasses.dataclass
class HostRun:
    """What one subject's run under a host showed."""

    moved: dict[str, str]  # where → how each kept value moved after the host
    loss: list[float] | None  # the loss after the host, as a list
    grads: list[list[float] | None]  # the gradients the backward step left, in order
    ran: str  # "transformers 4.46.0, real" or "emulated: ..."
    error: str = ""  # why the subject did not run under the host

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _values(tensor: Any) -> list[float] | None:
    return None if tensor is None else [float(v) for v in tensor.detach().flatten().tolist()]


def observe(made: Made, ran: str, extra_grads: Sequence[Any] = (), loss: Any = None) -> HostRun:
    """A subject after its host ran: its kept values, its loss (``loss``: the one the host took, where it is not
    what the function returned), its gradients and those of the host's model."""
    returned = made.returned[0] if isinstance(made.returned, tuple) else made.returned  # a `(loss, report)`'s loss
    if loss is None and isinstance(returned, Mapping):  # a model's output: `{"loss": loss, "logits": logits}`
        returned = returned_loss(returned)
    returned = returned if loss is None else loss
    return HostRun(made.moved(), _values(returned), [_values(g) for g in [*made.grads(), *extra_grads]], ran)


def emulate(host: Host, subject: Subject, why: str) -> HostRun:
    """The host's recorded line applied to the subject's returned loss, in this process; a backward step after."""
    from ._deps import require_torch

    torch = require_torch()
    made = subject.make()
    made.entry, made.pair = host.entry, host.pair
    base = torch.tensor((0.5, 1.25, 2.0, 3.5), requires_grad=True)
    ran = host.emulated(why)
    taken = None
    try:
        loss = taken = made(base * 1.0)  # a non-leaf model output, as a host hands it
        if host.profile:
            from .profiles import PROFILES

            loss, _report = PROFILES[host.profile].apply(made.returned, num_microbatches=int(host.factor))
        elif host.in_place:
            getattr(loss, f"{host.op}_")(host.factor)
        else:
            loss = getattr(torch, host.op)(loss, host.factor)
        if loss.requires_grad and loss.numel() == 1:
            loss.backward()
    except Exception as exc:  # the subject's code refused; the caller says so
        return HostRun(made.moved(), None, [], ran, f"{type(exc).__name__}: {exc}")
    return observe(made, ran, [base.grad], taken if host.entry else None)


def run_under_host(host: Host, subjects: Sequence[Subject], install_missing: bool = False) -> list[HostRun]:
    """One run per subject: under the real release when it is in the cache (or ``install_missing``), else the
    host's recorded line, emulated. A real run that cannot start falls back to the emulation, saying why."""
    if host.release is None:
        return [emulate(host, subject, host.emulated_because) for subject in subjects]
    if not host.release.installed():
        if not install_missing:
            why = f"{host.release} is not in {cache_dir()} (python -m flux_alias_lint.harness.hosts install)"
            return [emulate(host, subject, why) for subject in subjects]
        install(host.release)
    try:
        return _run_real(host, subjects)
    except HostError as exc:
        return [emulate(host, subject, f"the real {host.release} did not run: {exc}") for subject in subjects]


class HostError(Exception):
    """The real release could not be run; ``str()`` says why."""


def _run_real(host: Host, subjects: Sequence[Subject]) -> list[HostRun]:
    assert host.release is not None
    root = str(Path(flux_alias_lint.__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory(prefix="flux-host-") as work:
        job = Path(work) / "job.pickle"
        try:
            job.write_bytes(pickle.dumps((host, list(subjects))))
        except (RecursionError, pickle.PicklingError) as exc:  # a syntax tree nested too deep to pickle
            raise HostError(f"its code could not be handed to another process ({type(exc).__name__})") from None
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(host.release.path), root, os.environ.get("PYTHONPATH")])),
            "GLOO_SOCKET_IFNAME": "lo",
            "OMP_NUM_THREADS": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "HF_HUB_OFFLINE": "1",
        }
        if host.world_size > 1:
            env |= {
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(_free_port()),
                "WORLD_SIZE": str(host.world_size),
                "LOCAL_WORLD_SIZE": str(host.world_size),
            }
        ranks = []
        for rank in range(host.world_size):
            out = Path(work) / f"rank{rank}.json"
            rank_env = env | ({"RANK": str(rank), "LOCAL_RANK": str(rank)} if host.world_size > 1 else {})
            command = [sys.executable, "-m", "flux_alias_lint.harness.host_worker", str(job), str(out), str(work)]
            log = open(Path(work) / f"rank{rank}.log", "w")  # noqa: SIM115 -- closed below, after the process ends
            ranks.append((subprocess.Popen(command, env=rank_env, stdout=log, stderr=subprocess.STDOUT), out, log))
        try:
            for process, _out, _log in ranks:
                process.wait(timeout=RUN_SECONDS)
        except subprocess.TimeoutExpired:
            raise HostError(f"still running after {RUN_SECONDS} s") from None
        finally:
            for process, _out, log in ranks:
                if process.poll() is None:
                    process.kill()
                    process.wait()
                log.close()
        for rank, (process, out, log) in enumerate(ranks):
            if process.returncode != 0 or not out.is_file():
                tail = Path(log.name).read_text(errors="replace").strip().splitlines()[-1:]
                raise HostError(f"rank {rank} exited {process.returncode}: {' '.join(tail)}")
        answers = [json.loads(out.read_text()) for _process, out, _log in ranks]
    return [HostRun(**answer) for answer in answers[0]]


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def install(release: Release) -> Path:
    """Install ``release`` into its cache directory (once: a whole install is kept); HostError if pip fails.
    Into a sibling first, then renamed, so a directory is never half-written."""
    if release.installed():
        return release.path
    release.path.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{release.path.name}-", dir=release.path.parent))
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(partial)]
    try:
        done = subprocess.run(
            [*command, *release.requirements], capture_output=True, text=True, timeout=INSTALL_SECONDS, check=False
        )
        if done.returncode != 0:
            raise HostError(f"pip could not install {release}: {done.stderr.strip().splitlines()[-1:]}")
        (partial / _COMPLETE).write_text(" ".join(release.requirements) + "\n")
        shutil.rmtree(release.path, ignore_errors=True)  # an earlier, incomplete one
        os.replace(partial, release.path)
    except subprocess.TimeoutExpired:
        raise HostError(f"pip did not install {release} within {INSTALL_SECONDS} s") from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return release.path


def releases() -> list[Release]:
    """Every host release a run may use, once: the in-place ones and those a negative's pin names."""
    return list(RELEASES)


def run_fixtures(
    context: str, paths: Sequence[str], steps: Sequence[Step] = (), install_missing: bool = False
) -> list[HostRun]:
    """Each fixture's ``loss_func`` run under the host of ``context`` (``steps``: an in-place caller's chain), one
    host run for them all: the fixture corpus's runtime test's entry."""
    host = host_of(context, steps)
    if host is None:
        raise ValueError(f"no host runs the context {context!r}")
    return run_under_host(host, [ModuleSubject(path) for path in paths], install_missing)


# Which release runs: the one a project's own pin names (a negative), or the first that rescales in place (its twin).

MEGATRON = facts.MEGATRON.name
# Megatron's runs: num_microbatches 2, through the profile (profiles.py) of the release.
NUM_MICROBATCHES = 2


def _candidates(distribution: str) -> list[str]:
    """The releases of ``distribution`` a run can use: installable ones, or megatron-core's profiled ones."""
    if distribution == facts.MEGATRON.distribution:
        from .profiles import PROFILES

        return sorted({v for profile in PROFILES.values() for v in profile.pinned_to}, key=key)
    return sorted((r.version for r in RELEASES if r.dist == distribution), key=key)


def _lowest(distribution: str, wanted: Versions) -> str | None:
    """The lowest release of ``distribution`` a run can use that ``wanted`` allows."""
    return next((v for v in _candidates(distribution) if relation(allowed(f"=={v}"), wanted) != "excludes"), None)


def _declared(path: str, *distributions: str) -> tuple[Versions, int]:
    """The releases of ``distributions`` (one project's names) the project of ``path`` allows in its own files
    (index/releases.py reads them; the install beside the linter does not count), empty where it declares none; and
    how deep the directory declaring them is (the nearest to ``path`` is the one meant)."""
    found, files = declarations(path, *distributions)
    lines = () if found is None else tuple(d for d in found.lines if d.where != "installed")
    if found is None or not lines:
        return (), -1
    # The directories are read from `path` upwards, so the declaring file is the last read with its name.
    where = next(f for f in reversed(files) if f.replace(os.sep, "/").endswith("/" + lines[0].where))
    return found.versions, where.count(os.sep)


def under(context: str, version: str, on: bool = True) -> Host:
    """The host of ``context`` as ``version`` of its distribution runs it, its setting ``on`` or off: real where the
    release is installable, else (megatron-core) its profile. In place only where facts/hosts.py says so."""
    row = facts.BY_NAME[context]
    rescales = relation(allowed(f"=={version}"), any_of(row.releases)) != "excludes"
    if row.setting is not None and row.setting.off_stops_it and not on:
        rescales = False
    if context == MEGATRON:
        from .profiles import profile_for_release

        profile = profile_for_release(version)
        divided = "output_tensor /= num_microbatches" if profile.in_place else "output_tensor / num_microbatches"
        return Host(
            "megatron-core's schedule",
            divided,
            "div",
            NUM_MICROBATCHES,
            f"num_microbatches={NUM_MICROBATCHES}",
            emulated_because=f"megatron-core {version} as profiles.py's profile {profile.name} has it ({profile.description})",
            in_place=profile.in_place,
            profile=profile.name,
        )
    base = HOSTS[context]
    release = next((r for r in RELEASES if (r.dist, r.version) == (row.distribution, version)), None)
    if release is None:
        raise ValueError(f"no installable {row.distribution} {version} (harness/hosts.py RELEASES)")
    setting = base.setting if on else f"{row.setting.name if row.setting else 'its setting'}=False"
    return dataclasses.replace(base, release=release, in_place=rescales, on=on, shown=row.shown, setting=setting)


def out_of_place(name: str, in_place: bool = False) -> Host:
    """A host that rescales out of place (facts.OUT_OF_PLACE), its own release running its line; ``in_place``: the
    line made in place (``/=``) in that release's process, to show a kept alias would move under it."""
    row = facts.OUT_OF_PLACE_BY_NAME[name]
    release = next(r for r in RELEASES if r.dist == row.distribution)
    assign = ast.parse(row.operation.strip("`")).body[0]
    assert isinstance(assign, ast.Assign) and isinstance(assign.value, ast.BinOp)
    target, operand = ast.unparse(assign.targets[0]), ast.unparse(assign.value.right)
    line = f"{target} /= {operand}" if in_place else row.operation.strip("`")
    made_in_place = ", made in place here (emulated: no release does it)" if in_place else ""
    return Host(
        row.receives,
        line,
        "div",
        STEPS,
        f"{row.factor}={STEPS}{made_in_place}",
        release,
        driver=name,
        in_place=in_place,
    )


def for_project(path: str) -> tuple[str, Host]:
    """The host of the project of ``path`` as its own pin and settings have it: the host row (or out-of-place host)
    whose distribution it declares, a row whose setting it sets first; the lowest release its pin allows. And the
    row's name."""
    rows: list[facts.Host | facts.OutOfPlace] = [*facts.HOSTS, *facts.OUT_OF_PLACE]
    depth = {row.name: _declared(path, *row.distributions)[1] for row in rows}
    nearest = max(depth.values())
    if nearest < 0:
        raise ValueError(f"the project of {path} declares no host's distribution")
    rows = [row for row in rows if depth[row.name] == nearest]
    if isinstance(rows[0], facts.OutOfPlace):
        return rows[0].name, out_of_place(rows[0].name)
    hosted = [row for row in rows if isinstance(row, facts.Host)]
    set_here = [row for row in hosted if row.setting is not None and project_setting(path, row.setting.name)]
    row = (set_here or hosted)[0]
    version = _lowest(row.distribution, _declared(path, *row.distributions)[0])
    if version is None:
        raise ValueError(f"the project of {path} pins no {row.distribution} release a run can use")
    value = project_setting(path, row.setting.name) if row.setting is not None else None
    return row.name, under(row.name, version, on=value is None or value[1])


def in_place_twin(name: str) -> Host:
    """The host ``name`` as its first in-place release runs it, its setting on (a negative's positive twin)."""
    if name in facts.OUT_OF_PLACE_BY_NAME:
        return out_of_place(name, in_place=True)
    row = facts.BY_NAME[name]
    version = _lowest(row.distribution, any_of(row.releases))
    assert version is not None, f"no release of {row.distribution} in {row.releases} to run"
    return under(name, version)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m flux_alias_lint.harness.hosts install``: put every pinned host release in the cache."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["install"]:
        print("usage: python -m flux_alias_lint.harness.hosts install", file=sys.stderr)
        return 2
    for release in releases():
        try:
            print(f"{release}: {install(release)}")
        except HostError as exc:
            print(f"{release}: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
