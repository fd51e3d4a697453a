"""`flux-alias-lint verify`: confirm each finding by running it, before and after its fix.

For each flagged loss function: build a probe (probe.py) and execute it, trying both answers
wherever a stand-in leaves a branch undecided, until an execution returns the flagged value
in its report. Hand that execution's outputs to Megatron's rescale and see whether the
flagged entry moves. Then fix the file in memory, replay the same path through the fixed
function, and check that the entry holds and that the loss and its gradients are exactly
what they were.

A capture (FAL005) is judged by its own writer instead: the captured value, copied as the
flagged entry makes it, is compared with itself after the in-place write in the function (when the
call returns) or after the rescale of the returned loss; the fix applied to the entry must keep it.

A verdict is only as strong as what was run: "did not move" is said only of a flagged value
seen in the report that was rescaled (or, for a capture, made and then written). A finding no
execution reaches is UNCONFIRMED, with the furthest any execution got.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import libcst as cst

from ..finding import Finding
from ..index.reach import ESCAPES, IN_PLACE_CALLER, MEGATRON, UNREACHED, shown
from ..lint import Located, Reaches, Selection, check_text, fix_text, locate
from ..positions import node_spans
from ..rules import CAPTURE_CODE
from ..runner import unchecked
from ..source import SourceError, SourceFile, call_at_depth, decode, nesting_depth, parse, read_source
from ._deps import require_torch
from .assertions import Snapshot, changed_since, snapshot
from .handover import handover
from .hosts import HOSTS, Host, HostRun, ProbeSubject, host_of, returned_loss, run_under_host
from .megatron import installed_megatron_version
from .own_schedule import OwnSchedule, available
from .per_token import per_token_computed, per_token_setting
from .probe import PROBE_FILENAME, SHAPES, Execution, Probe, ProbeError, ProbeTimeout, build_probe, functions
from .profiles import resolve_profile
from .report import paths_to, render_path, report_tensors
from .rescale import megatron_rescale
from .schedule import run_schedule, shaped_model
from .standins import ROLES, TooManyDecisions

torch = require_torch()

# Executions tried per stand-in shape, and the time one function may take in all: this process's CPU time, so
# a machine busy with other jobs does not cut the search short (a wall clock would make verdicts load-dependent).
MAX_EXECUTIONS = 32
# Executions a search for the layouts of the named stand-ins may take, per stand-in shape.
MAX_LAYOUTS = 48
SECONDS_PER_FUNCTION = 30.0


@dataclasses.dataclass(frozen=True)
class Settings:
    profile: str = "installed"
    num_microbatches: int = 2
    cp_group_size: int = 1
    # Megatron's `calculate_per_token_loss` (a 3-tuple is not rescaled when on); None: as each file's
    # project sets it with a literal (per_token.py), else off, megatron-core's default.
    calculate_per_token_loss: bool | None = None
    per_token_source: str = ""  # what set it: the option given, or where the file's project sets it
    # Where the file's project computes it (per_token.py), no literal turning it on: a run may get either value,
    # so the file is verified with it off, then on (`verify_file`).
    per_token_computed: str = ""
    # The project's own schedule a flagged function is handed to (index/schedule.py), run instead of the
    # installed megatron-core or a profile: the schedule `check` read (own_schedule.py).
    schedule: str = ""

    def for_file(self, path: str) -> Settings:
        """These settings with `calculate_per_token_loss` resolved for the file ``path``."""
        if self.calculate_per_token_loss is not None:
            return self
        where = per_token_setting(path)
        computed = per_token_computed(path) if where is None else None
        if computed is not None:
            source = f"computed at {computed}"
            return dataclasses.replace(
                self, calculate_per_token_loss=False, per_token_source=source, per_token_computed=computed
            )
        return dataclasses.replace(
            self, calculate_per_token_loss=where is not None, per_token_source=f"set at {where}" if where else ""
        )

    def per_token(self) -> str:
        """The per-token setting modelled and where it comes from."""
        if self.calculate_per_token_loss is None:
            return "calculate_per_token_loss as the project sets it, else off"
        state = "on" if self.calculate_per_token_loss else "off"
        if self.per_token_source:
            return f"calculate_per_token_loss {state} ({self.per_token_source})"
        return "calculate_per_token_loss off (megatron-core's default; nothing in the project turns it on)"

    def validate(self) -> None:
        """ValueError naming the bad option; checked once, before any file is read."""
        if self.num_microbatches < 1:
            raise ValueError(f"--num-microbatches must be at least 1, not {self.num_microbatches}")
        if self.cp_group_size < 1:
            raise ValueError(f"--cp-group-size must be at least 1, not {self.cp_group_size}")
        if self.profile == "installed":
            installed_megatron_version()  # HarnessUnavailableError says what to install
        else:
            resolve_profile(self.profile)

    def model(self) -> str:
        """The Megatron run: ``installed megatron-core 0.16.1``, a profile, or the project's own schedule."""
        own = available(self.schedule) if self.schedule else None
        if isinstance(own, OwnSchedule):
            return own.describe()
        if self.profile == "installed":
            return f"installed megatron-core {installed_megatron_version()}"
        profile = resolve_profile(self.profile)
        return f"profile {profile.name} ({profile.description})"

    def describe(self) -> str:
        """The Megatron behaviour modelled, e.g. ``installed megatron-core 0.16.1, 2 microbatches, cp size 1``."""
        return f"{self.model()}, {self.num_microbatches} microbatches, cp size {self.cp_group_size}, {self.per_token()}"


# How a CONFIRMED finding was confirmed: its probe's outputs handed to the installed release's
# forward_step_calc_loss (or a profile's model of it), or, for a finding Megatron's schedule reaches,
# its probe called as the loss function in a real run of forward_backward_no_pipelining as well; a
# capture written in place by the function itself, by the call alone.
BY_RESCALE = "rescale"
BY_SCHEDULE = "forward_backward_no_pipelining"
BY_CALL = "call"
# A capture of a bare returned loss that a host other than Megatron rescales (hosts.py): run under that host.
BY_HOST = "host"


@dataclasses.dataclass(frozen=True)
class Verdict:
    finding: Finding
    confirmed: bool
    detail: str
    confirmed_by: str = ""  # BY_RESCALE or BY_SCHEDULE when confirmed
    modelled: str = ""  # Settings.describe() of the settings its file was run with

    def line(self) -> str:
        status = "CONFIRMED" if self.confirmed else "UNCONFIRMED"
        f = self.finding
        return f"{f.path}:{f.line}:{f.column}: {f.code} {status} {self.detail}"

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.finding.to_dict(),
            "confirmed": self.confirmed,
            "detail": self.detail,
            "confirmed_by": self.confirmed_by or None,
            "modelled": self.modelled,
        }


@dataclasses.dataclass
class _Rescaled:
    moved: dict[str, str]  # report path → factor, for every report tensor that changed
    loss: Any
    grads: list[Any]
    taken: tuple[bool, ...]  # the path the execution took
    paths: set[str]  # every tensor's path in the report


def _rescale(execution: Execution, settings: Settings) -> _Rescaled:
    outputs = execution.outputs
    before = snapshot(outputs[-1])
    paths = {path for path, _tensor, _copy in before}
    scenario = {
        "num_microbatches": settings.num_microbatches,
        "cp_group_size": settings.cp_group_size,
        "calculate_per_token_loss": bool(settings.calculate_per_token_loss),
    }
    if settings.schedule:  # the project's own, which `_verify_function` found it can run
        own = available(settings.schedule)
        assert isinstance(own, OwnSchedule)
        loss, _ = own.rescale(outputs, **scenario)
    else:
        loss, _ = megatron_rescale(outputs, profile=settings.profile, **scenario)
    moved = changed_since(before)
    if loss.requires_grad:
        loss.sum().backward()
    return _Rescaled(moved, loss.detach().clone(), [b.grad for b in execution.bases], execution.taken, paths)


def _same(a: Any, b: Any) -> bool:
    if torch.is_tensor(a) and torch.is_tensor(b):
        return a.shape == b.shape and bool(torch.equal(a, b))
    return a is None and b is None  # no gradient: the other must have none either


class _Furthest:
    """The furthest any execution got towards a finding: the reason it stays UNCONFIRMED."""

    def __init__(self) -> None:
        self.rank: tuple[int, int] = (-1, 0)
        self.reason = f"no execution finished within {SECONDS_PER_FUNCTION:.0f} s of CPU time"

    def note(self, rank: tuple[int, int], reason: str) -> None:
        if rank > self.rank:
            self.rank, self.reason = rank, reason


def _shape_problem(execution: Execution) -> tuple[tuple[int, int], str] | None:
    """Why these outputs cannot go through the rescale, ranked by how far the execution got; None if they can.

    An execution that raised got further the more branches it decided before it did.
    """
    if execution.error is not None:
        error = execution.error
        inputs = f"; furthest with {execution.inputs()}" if execution.made else ""
        at = f" at `{execution.raised_at}`" if execution.raised_at else ""
        return (0, len(execution.taken)), f"no probe could run it ({type(error).__name__}: {error}){at}{inputs}"
    outputs = execution.outputs
    if not (isinstance(outputs, (tuple, list)) and len(outputs) in (2, 3)):
        return (1, 0), f"with stand-in inputs it returned {_describe(outputs)}, not (loss, ..., report)"
    if not torch.is_tensor(outputs[0]):
        return (2, 0), f"with stand-in inputs its loss was {_describe(outputs[0])}, not a tensor"
    if not bool(torch.isfinite(outputs[0].detach()).all()):
        # A mean of nothing (a slice the stand-ins left empty): a factor of nan would confirm anything.
        return (2, 0), f"with stand-in inputs its loss was {outputs[0].detach().flatten()[:4].tolist()}, not finite"
    return None


def _describe(value: Any) -> str:
    text = repr(value) if type(value).__name__ == "Stub" else f"a {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


def _flagged_paths(execution: Execution, key: int, pattern: str, made_by_helper: bool = False) -> list[str]:
    """The report paths of the tensors the flagged entry put there, in an execution that returned.

    A tensor is the flagged value if the entry produced it (or the container it is in), or if it
    shares the storage of a tensor the entry produced: an entry handed to a helper that builds the
    report (`make_report(loss)`) reaches it as the helper's `loss.detach()`. `made_by_helper`: the entry
    is a helper's call whose dict holds the report's values (`RawFinding.made_by_helper`), so every
    tensor in what it produced is. Paths that match the finding's own report path come first.
    """
    report = execution.outputs[-1]
    values = execution.marks.get(key, ())
    where = paths_to(report, {id(value) for value in values}) if values else []
    tensors = [t for value in values for _, t in report_tensors(value)] if made_by_helper else values
    storages = {_storage(value) for value in tensors if torch.is_tensor(value)} - {0}
    paths = [
        render_path(path)
        for path, tensor in report_tensors(report)
        if any(path[: len(prefix)] == prefix for prefix in where) or _storage(tensor) in storages
    ]
    return sorted(paths, key=lambda path: not _matches(pattern, path))


def _storage(tensor: Any) -> int:
    return int(tensor.untyped_storage().data_ptr())


def _matches(pattern: str, path: str) -> bool:
    """A finding's path may hold `[...]` for a key the checker could not know."""
    regex = re.escape(pattern).replace(re.escape("[...]"), r"\[[^\]]+\]")
    return re.fullmatch(regex + r"(\[[^\]]+\]|\.\w+)*", path) is not None


def _explore(probe: Probe, deadline: float) -> Iterator[Execution]:
    """Executions of ``probe``, first with every undecidable branch taken, then flipping one answer at a time.

    The paths flipped from the execution that got furthest (``_progress``: it returned, else the later the
    line of the function it raised at) go first, a best-first search: an ``if``/``elif`` chain whose first
    branches raise is left for its later ones, not flipped again where it raised. An execution that raised
    flips its latest answers first (``if fused and use_entropy: raise`` is decided just before the raise).
    An execution that raises is first refitted (``_fit``): the layouts that got it furthest are kept for the
    executions after it.
    """
    pending: list[tuple[tuple[int, ...], int, tuple[bool, ...]]] = [((), 0, ())]  # a heap: best parent first
    order = itertools.count(1)
    roles = dict(probe.layouts)  # what use asks for first; a search changes them where the code raises
    budget = [MAX_LAYOUTS]
    for _ in range(MAX_EXECUTIONS):
        if not pending or time.process_time() > deadline:
            return
        forced = heapq.heappop(pending)[2]
        execution = probe.execute(forced, roles)
        if execution.error is not None:
            execution = _fit(probe, execution, forced, budget)
            roles = execution.roles
        yield execution
        taken, asked = execution.taken, execution.asked
        end = len(taken)
        if execution.error is not None:
            # The answers asked once the failing statement began (its arguments, the calls it made) did not
            # choose to run it: left as they are.
            while end > len(forced) and asked[end - 1] >= execution.raised_line:
                end -= 1
        flips = [(*taken[:i], not taken[i]) for i in range(len(forced), end)]
        rank = tuple(-n for n in _progress(execution))
        for flip in reversed(flips) if execution.error is not None else flips:
            heapq.heappush(pending, (rank, next(order), flip))


# What inputs that do not fit raise (a shape, a dtype, an unpacking, an attribute of the wrong kind of value).
_INPUT_ERRORS = (TypeError, IndexError, RuntimeError, ValueError, AttributeError, KeyError)
_NOT_INPUT_ERRORS = (NotImplementedError, ProbeTimeout, TooManyDecisions, RecursionError)


def _progress(execution: Execution) -> tuple[int, int, int, int]:
    """How far an execution got: it returned; else the line of the function it raised at, the branches it
    decided, and how deep in the code it called the error was."""
    if execution.error is None:
        return (1, 0, 0, 0)
    line, depth = 0, 0
    trace = execution.error.__traceback__
    while trace is not None:
        depth += 1
        if trace.tb_frame.f_code.co_filename == PROBE_FILENAME:
            line = trace.tb_lineno
        trace = trace.tb_next
    return (0, line, len(execution.taken), depth)


def _fit(probe: Probe, execution: Execution, forced: tuple[bool, ...], budget: list[int]) -> Execution:
    """The execution on the same path with the named stand-ins in the layouts (standins.ROLES) that get it
    furthest: a bounded search, one stand-in at a time, the one made last (nearest the error) first.

    ``budget``: the executions it may still take, shared by every search of one probe (a counter, not a timer).
    """
    if not isinstance(execution.error, _INPUT_ERRORS) or isinstance(execution.error, _NOT_INPUT_ERRORS):
        return execution  # the code refused on purpose, or looped: another path, not another input, may run
    best = execution
    while best.error is not None and budget[0] > 0:
        better = None
        for name in reversed(list(best.made)):
            for role in ROLES:
                if budget[0] <= 0 or role == best.roles.get(name):
                    continue
                budget[0] -= 1
                trial = probe.execute(forced, {**best.roles, name: role})
                if _progress(trial) > _progress(best):
                    better = trial
                    break
            if better is not None:
                break
        if better is None:
            break
        best = better
    return best


def _after_fix(fixed: Execution, before: _Rescaled, settings: Settings) -> _Rescaled | str:
    """The fixed function's execution on the same path, rescaled; or why it cannot be compared."""
    problem = _shape_problem(fixed)
    if problem is not None:
        return f"the fixed function: {problem[1]}"
    if fixed.taken != before.taken:
        return "the fixed function took another path"
    return _rescale(fixed, settings)


def _judge(
    item: Located, paths: list[str], before: _Rescaled, after: _Rescaled | str, settings: Settings, size: int
) -> Verdict:
    """``size``: how many values the function returned (a 3-tuple is not rescaled under per-token loss)."""
    finding = item.finding
    moved = [(path, before.moved[path]) for path in paths if path in before.moved]
    if not moved and size == 3 and settings.calculate_per_token_loss:
        return Verdict(
            finding,
            False,
            f"{paths[0]} held the flagged value and did not move: Megatron does not rescale a 3-tuple "
            f"(loss, num_tokens, report) under {settings.per_token()}",
        )
    if not moved:
        under = f"under {settings.model()}" if settings.schedule else "under the rescale"
        return Verdict(finding, False, f"{paths[0]} held the flagged value and did not move {under}")
    path, factor = moved[0]
    if item.raw.made_by_helper and not finding.fixable:  # taken apart where a helper made it: the fix is the helper's
        return Verdict(finding, True, f"{path} {factor}; no fix at this place to run after", BY_RESCALE)
    if isinstance(after, str):
        return Verdict(finding, False, f"{path} {factor} before fix; {after}")
    if [p for p, _ in moved if p in after.moved]:
        return Verdict(finding, False, f"{path} {factor} before fix, still moves after the fix")
    if [p for p, _ in moved if p not in after.paths]:
        return Verdict(finding, False, f"{path} {factor} before fix; the fixed report has no such tensor")
    if not (
        _same(before.loss, after.loss)
        and len(before.grads) == len(after.grads)
        and all(_same(a, b) for a, b in zip(before.grads, after.grads, strict=True))
    ):
        return Verdict(finding, False, f"{path} {factor} before fix, held after; but the fix changed the loss or grad")
    return Verdict(finding, True, f"{path} {factor} before fix, held after; loss and grad unchanged", BY_RESCALE)


def _schedule_moves(probe: Probe, replayed: Execution, num_microbatches: int, forward_only: bool) -> dict[str, str]:
    """What moved when Megatron's real schedule called the probe as its loss function: report path → factor,
    and each marked entry's key (``"0"``) → how its captured value moved since it was made.

    The forward step runs a stub model whose output has the shape and values of what the probe got where
    Megatron passes the model's output (else the stand-in model on a stand-in batch); its loss function
    replays the probe's path on that output. Each microbatch's report is compared with its values as the
    loss function returned it.
    """
    returned: list[tuple[Execution, Snapshot]] = []
    shaped = torch.is_tensor(replayed.argument) and replayed.argument.is_floating_point()
    model = shaped_model(replayed.argument.detach().clone()) if shaped else None

    def loss_func(output_tensor: Any) -> Any:
        execution = probe.execute(replayed.taken, replayed.roles, output_tensor if shaped else None)
        if execution.error is not None:
            raise execution.error
        returned.append((execution, snapshot(execution.outputs[-1])))
        return execution.outputs

    def forward_step(data_iterator: Iterator[Any], model: Any) -> tuple[Any, Any]:
        return model(next(data_iterator)), loss_func

    run_schedule(forward_step, model, num_microbatches=num_microbatches, forward_only=forward_only)
    moved: dict[str, str] = {}
    for execution, before in returned:
        moved.update({**execution.captures.moved(), **changed_since(before)})
    return moved


def _through_schedule(
    verdict: Verdict,
    probe: Probe,
    fixed_probe: Probe,
    execution: Execution,
    paths: list[str],
    settings: Settings,
    shown: str = "",
) -> Verdict:
    """A CONFIRMED verdict of a finding Megatron's schedule reaches, checked again through that schedule.

    ``paths``: the report paths (or a capture's key) that must move; ``shown``: the name printed for
    them, if not the path itself. A training step where the probe's loss is a scalar; else a
    forward-only one (a validation step), since the backward of a stand-in loss of several values has
    no gradient to start from.
    """
    if settings.schedule:  # the real schedule here is the installed release's, not the one the project runs
        return dataclasses.replace(
            verdict,
            detail=f"{verdict.detail} (not run through the installed {BY_SCHEDULE}: the project runs its own)",
        )
    if settings.profile != "installed" or settings.cp_group_size != 1:
        # The real schedule is the installed release's, on one rank.
        return dataclasses.replace(
            verdict,
            detail=f"{verdict.detail} (not run through {BY_SCHEDULE}: it is the "
            "installed release on one rank, cp size 1)",
        )
    forward_only = execution.outputs[0].numel() != 1
    try:
        before = _schedule_moves(probe, execution, settings.num_microbatches, forward_only)
        after = _schedule_moves(fixed_probe, execution, settings.num_microbatches, forward_only)
    except Exception as exc:  # the schedule refused the stand-ins; the modelled rescale's verdict stands
        return dataclasses.replace(
            verdict, detail=f"{verdict.detail} (not through {BY_SCHEDULE}: it raised {type(exc).__name__}: {exc})"
        )
    moved = [(path, before[path]) for path in paths if path in before]
    if not moved:
        return Verdict(verdict.finding, False, f"{verdict.detail}; but it did not move through {BY_SCHEDULE}")
    if verdict.finding.fixable and any(path in after for path in paths):
        return Verdict(verdict.finding, False, f"{verdict.detail}; but after the fix it moves through {BY_SCHEDULE}")
    path, factor = moved[0]
    mode = "forward-only" if forward_only else "training"
    held = ", held after" if verdict.finding.fixable else ""
    detail = f"{verdict.detail}; through {BY_SCHEDULE} ({mode}): {shown or path} {factor}{held}"
    return Verdict(verdict.finding, True, detail, BY_SCHEDULE)


def _verify_function(
    module: cst.Module,
    function: cst.FunctionDef | cst.Lambda,
    fixed_module: cst.Module,
    fixed_function: cst.FunctionDef | cst.Lambda,
    items: Sequence[Located],
    settings: Settings,
    path: str,
) -> list[Verdict]:
    """One verdict per item, all flagged in ``function``: captures by their writers, the rest by the rescale."""
    hosted = [item for item in items if _hosted(item)]
    captures = [item for item in items if item.finding.code == CAPTURE_CODE and not _hosted(item)]
    reports = [item for item in items if item.finding.code != CAPTURE_CODE]
    verdict_of: dict[int, Verdict] = {}
    own = available(settings.schedule) if settings.schedule else None
    if isinstance(own, str):  # never judged under a schedule other than the one the project runs
        declined = (
            f"declined: it is handed to the project's own schedule {shown(settings.schedule)}, the one `check` "
            f"read, which cannot be run here: {own}; the installed megatron-core's is not the schedule it runs"
        )
        verdict_of.update({id(item): Verdict(item.finding, False, declined) for item in [*captures, *reports]})
        captures = reports = []
    if settings.calculate_per_token_loss:  # said before any run: no stand-in input changes what Megatron skips
        spared = [item for item in reports if item.raw.returned == 3]
        verdict_of.update({id(item): _per_token(item, settings) for item in spared})
        reports = [item for item in reports if item.raw.returned != 3]
    if hosted:
        found = _verify_hosted(module, function, hosted, path)
        verdict_of.update({id(item): verdict for item, verdict in zip(hosted, found, strict=True)})
    if reports:
        found = _verify_reports(module, function, fixed_module, fixed_function, reports, settings, path)
        verdict_of.update({id(item): verdict for item, verdict in zip(reports, found, strict=True)})
    if captures:
        found = _verify_captures(module, function, captures, settings, path)
        verdict_of.update({id(item): verdict for item, verdict in zip(captures, found, strict=True)})
    return [verdict_of[id(item)] for item in items]


def _per_token(item: Located, settings: Settings) -> Verdict:
    """A report entry of a returned 3-tuple under per-token loss: Megatron leaves its loss as it is, so it is
    declined for that reason, not run."""
    return Verdict(
        item.finding,
        False,
        f"declined, per-token: Megatron does not rescale the 3-tuple (loss, num_tokens, report) it returns under "
        f"{settings.per_token()}, so {item.finding.report_path} keeps its value",
    )


def _verify_reports(
    module: cst.Module,
    function: cst.FunctionDef | cst.Lambda,
    fixed_module: cst.Module,
    fixed_function: cst.FunctionDef | cst.Lambda,
    items: Sequence[Located],
    settings: Settings,
    path: str,
) -> list[Verdict]:
    """One verdict per item, each an entry of the report ``function`` returns."""
    entries: dict[int, int] = {}  # id of an entry node → the key its values are recorded under
    for item in items:  # two findings may flag one entry (under two report paths)
        entries.setdefault(id(item.raw.entry), len(entries))
    verdicts: dict[int, Verdict] = {}
    furthest = [_Furthest() for _ in items]
    deadline = time.process_time() + SECONDS_PER_FUNCTION
    output = _output_parameter(function, items)
    # First as faithful as the probe can be (the project's own modules, `self` of its own class), then
    # with those stubbed too: a stub goes where real code needs what a probe cannot give.
    for shape, faithful in itertools.product(SHAPES, (True, False)):
        try:
            probe = build_probe(module, function, shape, entries, path=path, faithful=faithful, output=output)
            fixed_probe = build_probe(fixed_module, fixed_function, shape, path=path, faithful=faithful, output=output)
        except ProbeError as exc:
            return [verdicts.get(key) or Verdict(item.finding, False, str(exc)) for key, item in enumerate(items)]
        for execution in _explore(probe, deadline):
            pending = [key for key in range(len(items)) if key not in verdicts]
            problem = _shape_problem(execution)
            if problem is not None:
                for key in pending:
                    furthest[key].note(*problem)
                continue
            reached = {
                key: paths
                for key in pending
                if (
                    paths := _flagged_paths(
                        execution,
                        entries[id(items[key].raw.entry)],
                        items[key].finding.report_path,
                        items[key].raw.made_by_helper,
                    )
                )
            }
            for key in pending:
                if key not in reached:
                    furthest[key].note((3, 0), "it returned, but never with the flagged value in its report")
            if not reached:
                continue
            try:
                before = _rescale(execution, settings)
            except Exception as exc:  # Megatron's rescale refused these outputs
                for key in reached:
                    furthest[key].note((4, 0), f"the rescale raised {type(exc).__name__}: {exc}")
                continue
            after = _after_fix(fixed_probe.execute(execution.taken, execution.roles), before, settings)
            for key, paths in reached.items():
                verdict = _judge(items[key], paths, before, after, settings, len(execution.outputs))
                if verdict.confirmed and verdict.finding.context == MEGATRON:
                    verdict = _through_schedule(verdict, probe, fixed_probe, execution, paths, settings)
                verdicts[key] = verdict
            if len(verdicts) == len(items):
                break
        if len(verdicts) == len(items):
            break
    return [verdicts.get(key) or Verdict(item.finding, False, furthest[key].reason) for key, item in enumerate(items)]


def _output_parameter(function: cst.FunctionDef | cst.Lambda, items: Sequence[Located]) -> str | None:
    """The parameter Megatron fills with the model's output, as the forward step in a finding's chain hands the
    function over (handover.py); None where no chain says."""
    params = function.params
    names = [p.name.value for p in (*params.posonly_params, *params.params)]
    if names[:1] in (["self"], ["cls"]):
        names = names[1:]  # `partial(self.loss_func, ...)` is bound to its instance already
    for item in items:
        how = handover(item.finding)
        if how is not None:
            return how.parameter(names)
    return None


@dataclasses.dataclass
class _Observed:
    """One execution of a capture's function, watched: its captured values after each writer."""

    at_return: dict[str, str]  # entry key → how its captured value moved by the time the call returned
    after_rescale: dict[str, str] | None  # the same after Megatron's rescale; None: its outputs cannot be rescaled
    unrescaled: str  # why not
    loss: Any
    grads: list[Any]
    taken: tuple[bool, ...]


def _observe(execution: Execution, settings: Settings, whole_return: bool = False) -> _Observed:
    """Watch an execution that returned: its captures at return, then its outputs rescaled.
    `whole_return`: the function returns the bare loss that a reached loss function hands on as its own
    (`Reach.whole_return`): rescaled as the loss of `(returned, {})`."""
    at_return = execution.captures.moved()
    if whole_return and torch.is_tensor(execution.outputs):
        execution = dataclasses.replace(execution, outputs=(execution.outputs, {}))
    problem = _shape_problem(execution)
    if problem is not None:
        return _Observed(at_return, None, problem[1], None, [], execution.taken)
    try:
        rescaled = _rescale(execution, settings)
    except Exception as exc:  # Megatron's rescale refused these outputs
        return _Observed(at_return, None, f"the rescale raised {type(exc).__name__}: {exc}", None, [], execution.taken)
    return _Observed(at_return, execution.captures.moved(), "", rescaled.loss, rescaled.grads, execution.taken)


def _writer(module: cst.Module, item: Located) -> str:
    """The writer of a capture, as a verdict names it."""
    write = item.raw.write
    if write is None:
        return "the rescale"
    code = " ".join(module.code_for_node(write).split())
    return f"`{code if len(code) <= 40 else code[:37] + '...'}`"


def _judge_capture(item: Located, key: str, writer: str, before: dict[str, str], after: _Observed | str) -> Verdict:
    """``before``: how the captured values moved after the writer; ``after``: the fixed function on the same path."""
    finding, place = item.finding, item.finding.report_path
    if key not in before:
        return Verdict(finding, False, f"{place} held the captured value and it did not move after {writer}")
    moved = f"{place} {before[key]} after {writer}"
    if isinstance(after, str):
        return Verdict(finding, False, f"{moved} before fix; {after}")
    fixed_moves = after.at_return if item.raw.write is not None else after.after_rescale
    if fixed_moves is None:
        return Verdict(finding, False, f"{moved} before fix; the fixed function: {after.unrescaled}")
    if key in fixed_moves:
        return Verdict(finding, False, f"{moved} before fix, still moves after the fix")
    return Verdict(finding, True, f"{moved} before fix, held after; loss and grad unchanged", BY_CALL)


def _verify_captures(
    module: cst.Module, function: cst.FunctionDef | cst.Lambda, items: Sequence[Located], settings: Settings, path: str
) -> list[Verdict]:
    """One verdict per capture flagged in ``function``: its captured value must move after its writer and,
    with the finding's own fix applied to the entry, hold, while the loss and gradients stay."""
    entries: dict[int, int] = {}
    for item in items:
        entries.setdefault(id(item.raw.entry), len(entries))
    # The fix applied to the entry itself, not the fixed file: the fixed entry's value must be marked to be
    # watched, and only the original module's nodes are known to be the flagged ones.
    fixes = {id(i.raw.entry): (i.finding.fix_before, i.finding.fix_after) for i in items if i.finding.fixable}
    verdicts: dict[int, Verdict] = {}
    furthest = [_Furthest() for _ in items]
    whole_return = any(item.raw.whole_return for item in items)  # a function returns a tuple or not
    deadline = time.process_time() + SECONDS_PER_FUNCTION
    output = _output_parameter(function, items)
    for shape, faithful in itertools.product(SHAPES, (True, False)):
        try:
            probe = build_probe(module, function, shape, entries, path=path, faithful=faithful, output=output)
            fixed_probe = build_probe(
                module, function, shape, entries, path=path, faithful=faithful, fixes=fixes, output=output
            )
        except ProbeError as exc:
            return [verdicts.get(key) or Verdict(item.finding, False, str(exc)) for key, item in enumerate(items)]
        for execution in _explore(probe, deadline):
            pending = [key for key in range(len(items)) if key not in verdicts]
            if execution.error is not None:
                problem = _shape_problem(execution)
                assert problem is not None
                for key in pending:
                    furthest[key].note(*problem)
                continue
            observed = _observe(execution, settings, whole_return)
            fixed: _Observed | str | None = None  # the fixed function on the same path, run once it is needed
            for key in pending:
                item, mark = items[key], entries[id(items[key].raw.entry)]
                if mark not in execution.marks:
                    furthest[key].note((1, 0), "it returned, but never made the captured value")
                    continue
                moves = observed.at_return if item.raw.write is not None else observed.after_rescale
                if moves is None:
                    furthest[key].note((2, 0), observed.unrescaled)
                    continue
                if fixed is None:
                    fixed = _observe_fixed(
                        fixed_probe.execute(execution.taken, execution.roles), observed, settings, whole_return
                    )
                verdict = _judge_capture(item, str(mark), _writer(module, item), moves, fixed)
                if verdict.confirmed and item.raw.write is None:
                    verdict = dataclasses.replace(verdict, confirmed_by=BY_RESCALE)
                    # A bare returned loss reaches the schedule only inside another function's tuple.
                    if item.finding.context == MEGATRON and not whole_return:
                        verdict = _through_schedule(
                            verdict, probe, fixed_probe, execution, [str(mark)], settings, item.finding.report_path
                        )
                verdicts[key] = verdict
            if len(verdicts) == len(items):
                break
        if len(verdicts) == len(items):
            break
    return [verdicts.get(key) or Verdict(item.finding, False, furthest[key].reason) for key, item in enumerate(items)]


def _hosted(item: Located) -> bool:
    """A capture of the loss its function returns that a host other than Megatron rescales: a third-party host
    (hosts.HOSTS) whatever the function returns it in, or an in-place caller of a bare returned loss or of an
    entry of a returned dict (`Located.entry`)."""
    finding = item.finding
    if finding.code != CAPTURE_CODE or item.raw.write is not None:
        return False
    return finding.context in HOSTS or (finding.context == IN_PLACE_CALLER and (item.raw.whole_return or item.entry))


def _verify_hosted(
    module: cst.Module, function: cst.FunctionDef | cst.Lambda, items: Sequence[Located], path: str
) -> list[Verdict]:
    """One verdict per capture of the returned loss in ``function``: the first execution that makes the captured
    value and returns a bare loss is replayed under the finding's host (hosts.py), before and after the fix."""
    entries: dict[int, int] = {}
    nodes: dict[int, cst.CSTNode] = {}
    for item in items:
        entries.setdefault(id(item.raw.entry), len(entries))
        nodes[id(item.raw.entry)] = item.raw.entry
    marked = [(node, entries[key]) for key, node in nodes.items()]
    fixes = [(i.raw.entry, i.finding.fix_before, i.finding.fix_after) for i in items if i.finding.fixable]
    verdicts: dict[int, Verdict] = {}
    furthest = [_Furthest() for _ in items]
    deadline = time.process_time() + SECONDS_PER_FUNCTION
    # The entry of a returned dict the findings' host takes as its loss (Composer's 'total', the key an in-place
    # caller reads), if it takes one.
    entry = next((e for i in items if (e := _entry(i))), "")
    # The project's loop unpacks the function's `(loss, report)` and hands the host the loss (`index/hosts.py`).
    pair = not entry and not any(item.raw.whole_return for item in items)
    for shape, faithful in itertools.product(SHAPES, (True, False)):
        try:
            probe = build_probe(module, function, shape, entries, path=path, faithful=faithful)
        except ProbeError as exc:
            return [verdicts.get(key) or Verdict(item.finding, False, str(exc)) for key, item in enumerate(items)]
        for explored in _explore(probe, deadline):
            pending = [key for key in range(len(items)) if key not in verdicts]
            problem = _shape_problem(explored) if explored.error is not None else None
            if problem is None and returned_loss(explored.outputs, entry, pair) is None:
                what = _describe(explored.outputs)
                problem = ((2, 0), f"with stand-in inputs it returned {what}, not a loss or a model output with one")
            if problem is not None:
                for key in pending:
                    furthest[key].note(*problem)
                continue
            execution = _with_scalar_loss(probe, explored, entry, pair)
            by_host: dict[Host, list[int]] = collections.defaultdict(list)
            for key in pending:
                if entries[id(items[key].raw.entry)] in execution.marks:
                    finding = items[key].finding
                    host = host_of(finding.context, finding.reached_by)
                    assert host is not None
                    by_host[dataclasses.replace(host, entry=_entry(items[key]), pair=pair)].append(key)
                else:
                    furthest[key].note((1, 0), "it returned, but never made the captured value")
            for host, keys in by_host.items():
                subject = ProbeSubject(
                    module, function, marked, [], shape, faithful, path, execution.taken, dict(execution.roles)
                )
                before, after = run_under_host(host, [subject, dataclasses.replace(subject, fixes=fixes)])
                for key in keys:
                    verdicts[key] = _judge_hosted(
                        items[key], str(entries[id(items[key].raw.entry)]), host, before, after
                    )
            if len(verdicts) == len(items):
                break
        if len(verdicts) == len(items):
            break
    return [verdicts.get(key) or Verdict(item.finding, False, furthest[key].reason) for key, item in enumerate(items)]


def _entry(item: Located) -> str:
    """The entry of a returned dict that the host of ``item`` takes as its loss; "" for a bare loss."""
    host = HOSTS.get(item.finding.context)
    return item.entry or (host.entry if host is not None else "")


def _with_scalar_loss(probe: Probe, execution: Execution, entry: str = "", pair: bool = False) -> Execution:
    """The execution, or the same path with one named stand-in a scalar (the one made last first) where that makes
    the returned loss a single value: a host's backward step needs one, as a real loss is (`outputs["loss"]`)."""
    if returned_loss(execution.outputs, entry, pair).numel() == 1:
        return execution
    for name in reversed(list(execution.made)):
        if execution.roles.get(name) == "scalar":
            continue
        trial = probe.execute(execution.taken, {**execution.roles, name: "scalar"})
        loss = returned_loss(trial.outputs, entry, pair) if trial.error is None else None
        if (
            loss is not None
            and loss.numel() == 1
            and trial.taken == execution.taken
            and trial.marks.keys() >= execution.marks.keys()
        ):
            return trial
    return execution


def _judge_hosted(item: Located, key: str, host: Host, before: HostRun, after: HostRun) -> Verdict:
    """``before``, ``after``: the function and the fixed function on the same path, each under ``host``."""
    finding, place = item.finding, item.finding.report_path
    under = f"{host.name} ({before.ran})"
    if before.error:
        return Verdict(finding, False, f"under {under} it raised {before.error}")
    if key not in before.moved:
        return Verdict(finding, False, f"{place} held the captured value and it did not move after {under}")
    moved = f"{place} {before.moved[key]} after {under}"
    if after.error:
        return Verdict(finding, False, f"{moved} before fix; the fixed function raised {after.error}")
    if key in after.moved:
        return Verdict(finding, False, f"{moved} before fix, still moves after the fix")
    if (before.loss, before.grads) != (after.loss, after.grads):
        return Verdict(finding, False, f"{moved} before fix, held after; but the fix changed the loss or grad")
    return Verdict(finding, True, f"{moved} before fix, held after; loss and grad unchanged", BY_HOST)


def _observe_fixed(fixed: Execution, before: _Observed, settings: Settings, whole_return: bool) -> _Observed | str:
    """The fixed function's execution on the same path, watched; or why it cannot be compared."""
    if fixed.error is not None:
        return f"the fixed function: no probe could run it ({type(fixed.error).__name__}: {fixed.error})"
    if fixed.taken != before.taken:
        return "the fixed function took another path"
    after = _observe(fixed, settings, whole_return)
    if not (
        _same(before.loss, after.loss)
        and len(before.grads) == len(after.grads)
        and all(_same(a, b) for a, b in zip(before.grads, after.grads, strict=True))
    ):
        return "the fix changed the loss or grad"
    return after


def verify_source(
    source: SourceFile,
    selection: Selection,
    settings: Settings,
    reaches: Reaches | None = None,
    schedules: Mapping[int, str] | None = None,
) -> list[Verdict]:
    """One verdict per finding in `source`, in finding order; `reaches` as `check` is given them, `schedules` the
    project's own schedule each function (by its def line) is handed to (`ProjectIndex.schedules_by_path`)."""
    # libcst can crash the process on deep nesting: validate and size the stack first, as `check` does.
    try:
        return call_at_depth(nesting_depth(source), _verify_source, source, selection, settings, reaches, schedules)
    except RecursionError:
        raise SourceError(source.path, "too deeply nested to analyse") from None


def _verify_source(
    source: SourceFile,
    selection: Selection,
    settings: Settings,
    reaches: Reaches | None,
    schedules: Mapping[int, str] | None,
) -> list[Verdict]:
    if not check_text(source, selection, reaches=reaches)[0]:  # triaged: most files never reach libcst
        return []
    module = parse(source)
    located = locate(source, selection, module=module, reaches=reaches)
    if not located:
        return []
    fixed_module = parse(dataclasses.replace(source, text=fix_text(source, selection, reaches).text))
    # The fix only inserts copies, so a function's index in source order finds it in the fixed module.
    original_functions, fixed_functions = functions(module), functions(fixed_module)
    index_of = {id(f): i for i, f in enumerate(original_functions)}
    by_function: dict[int, list[Located]] = collections.defaultdict(list)
    for item in located:
        by_function[index_of[id(item.raw.function)]].append(item)
    spans = node_spans(module, source.text) if schedules else {}
    verdict_of: dict[int, Verdict] = {}
    for index, items in by_function.items():
        function = original_functions[index]
        line = spans[function.name if isinstance(function, cst.FunctionDef) else function][0][0] if spans else 0
        schedule = (schedules or {}).get(line, "")
        scheduled = any(item.finding.context in _SCHEDULED for item in items)
        scenario = dataclasses.replace(settings, schedule=schedule) if schedule and scheduled else settings
        found = _verify_function(module, function, fixed_module, fixed_functions[index], items, scenario, source.path)
        modelled = scenario.describe()
        verdict_of.update(
            {
                id(item): dataclasses.replace(verdict, modelled=modelled)
                for item, verdict in zip(items, found, strict=True)
            }
        )
    return [verdict_of[id(item)] for item in located]


# The contexts of a finding whose function's hand-off reaches the project's own schedule (`schedules`): Megatron's,
# or none where that schedule divides a copy (`check` then says `unreached`, or `escapes` from elsewhere).
_SCHEDULED = frozenset({MEGATRON, UNREACHED, ESCAPES})


def _both(off: Verdict, on: Verdict) -> Verdict:
    """One verdict from a file verified with ``calculate_per_token_loss`` off (``off``) and on (``on``), as the
    project computes it: both are said where they differ; confirmed if either is, as a run may get either."""
    name = "calculate_per_token_loss"
    modelled = f"{off.modelled}; then with it on"
    if (off.confirmed, off.detail) == (on.confirmed, on.detail):
        return dataclasses.replace(off, detail=f"{off.detail} (the same with {name} on)", modelled=modelled)
    said = {True: "CONFIRMED", False: "UNCONFIRMED"}
    detail = (
        f"with {name} off: {said[off.confirmed]} {off.detail}; with it on: {said[on.confirmed]} {on.detail} "
        "(a run may get either)"
    )
    first = off if off.confirmed or not on.confirmed else on
    return Verdict(off.finding, first.confirmed, detail, first.confirmed_by, modelled)


def verify_file(
    path: str,
    selection: Selection,
    settings: Settings,
    reaches: Reaches | None = None,
    schedules: Mapping[int, str] | None = None,
    data: bytes | None = None,
) -> tuple[list[Verdict], str | None]:
    """Verdicts for one file (`data`: its text read elsewhere, stdin's), or the one-line reason it could
    not be checked. A file that cannot be read, decoded or parsed is an unconfirmed FAL000, as `check` reports it.
    Where the project computes ``calculate_per_token_loss``, the file is verified with it off and on (`_both`)."""
    try:
        source = decode(data, path) if data is not None else read_source(path)
        scenario = settings.for_file(path)
        verdicts = verify_source(source, selection, scenario, reaches, schedules)
        if scenario.per_token_computed:
            on = dataclasses.replace(scenario, calculate_per_token_loss=True)
            both = zip(verdicts, verify_source(source, selection, on, reaches, schedules), strict=True)
            verdicts = [_both(off, on) for off, on in both]
        return verdicts, None
    except SourceError as exc:
        return [Verdict(f, False, f"not checked: {f.message}") for f in unchecked(exc, selection).findings], None
    except OSError as exc:
        return [], f"{path}: cannot read: {exc.strerror or exc}"


def print_verdicts(verdicts: Sequence[Verdict], settings: Settings, output_format: str) -> None:
    if output_format == "json":
        print(json.dumps([{**v.to_dict(), "modelled": v.modelled or settings.describe()} for v in verdicts], indent=2))
        return
    for verdict in verdicts:
        print(verdict.line())
    confirmed = sum(v.confirmed for v in verdicts)
    scheduled = sum(v.confirmed_by == BY_SCHEDULE for v in verdicts)
    print(
        f"{len(verdicts)} finding(s): {confirmed} confirmed ({scheduled} also through {BY_SCHEDULE}), "
        f"{len(verdicts) - confirmed} unconfirmed (modelled: {settings.describe()})."
    )
    if settings.calculate_per_token_loss is None:
        turned_on = sorted({v.modelled for v in verdicts if "calculate_per_token_loss on" in v.modelled})
        for modelled in turned_on:
            print(f"  where a project turns it on: {modelled}")
        computed = sorted({v.modelled for v in verdicts if v.modelled.endswith("; then with it on")})
        for modelled in computed:
            print(f"  where a project computes it (run both ways): {modelled}")
    for modelled in sorted({v.modelled for v in verdicts if v.modelled.startswith("the project's own schedule")}):
        print(f"  where a project runs its own schedule: {modelled}")
