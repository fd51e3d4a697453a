"""`flux-alias-lint verify`: confirm each finding by running it, before and after its fix.

For each flagged loss function: build a probe (probe.py), run it through a Megatron rescale
profile, and see whether the flagged report entry moves. Then fix the file in memory, run
the same function again, and check that the entry holds and that the loss and its gradient
are exactly what they were.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import libcst as cst

from ..finding import Finding
from ..lint import Selection, fix_text, locate
from ..source import SourceError, SourceFile, call_at_depth, nesting_depth, parse, read_source
from ._deps import require_torch
from .assertions import changed_since, snapshot
from .probe import SHAPES, Probe, ProbeError, build_probe, functions
from .rescale import megatron_rescale

torch = require_torch()


@dataclasses.dataclass(frozen=True)
class Settings:
    profile: str = "installed"
    num_microbatches: int = 2
    cp_group_size: int = 1


@dataclasses.dataclass(frozen=True)
class Verdict:
    finding: Finding
    confirmed: bool
    detail: str

    def line(self) -> str:
        status = "CONFIRMED" if self.confirmed else "UNCONFIRMED"
        return f"{self.finding.path}:{self.finding.line}: {self.finding.code} {status} {self.detail}"

    def to_dict(self) -> dict[str, Any]:
        return {**self.finding.to_dict(), "confirmed": self.confirmed, "detail": self.detail}


@dataclasses.dataclass
class _Run:
    moved: dict[str, str]  # report path → factor, for every report tensor that changed
    loss: Any
    grads: list[Any]


def _run(probe: Probe, settings: Settings) -> _Run:
    args, bases = probe.make_args()
    outputs = probe.func(*args)
    if not (isinstance(outputs, (tuple, list)) and len(outputs) in (2, 3) and isinstance(outputs[-1], dict)):
        raise ProbeError("with stand-in inputs the function did not return (loss, ..., report)")
    before = snapshot(outputs[-1])
    loss, _ = megatron_rescale(
        outputs,
        num_microbatches=settings.num_microbatches,
        cp_group_size=settings.cp_group_size,
        profile=settings.profile,
    )
    moved = changed_since(before)
    if torch.is_tensor(loss) and loss.requires_grad:
        loss.sum().backward()
    value = loss.detach().clone() if torch.is_tensor(loss) else loss
    return _Run(moved, value, [b.grad for b in bases])


def _matches(pattern: str, path: str) -> bool:
    """A finding's path may hold `[...]` for a key the checker could not know."""
    regex = re.escape(pattern).replace(re.escape("[...]"), r"\[[^\]]+\]")
    return re.fullmatch(regex + r"(\[[^\]]+\]|\.\w+)*", path) is not None


def _same(a: Any, b: Any) -> bool:
    if torch.is_tensor(a) and torch.is_tensor(b):
        return a.shape == b.shape and bool(torch.equal(a, b))
    if a is None or b is None:  # no gradient: the other must have none either
        return a is b
    return a == b


def _judge(finding: Finding, before: _Run, after: _Run) -> Verdict:
    moved = [(path, factor) for path, factor in before.moved.items() if _matches(finding.report_path, path)]
    if not moved:
        return Verdict(finding, False, f"{finding.report_path} did not move under the rescale")
    still = [path for path, _ in moved if path in after.moved]
    path, factor = moved[0]
    if still:
        return Verdict(finding, False, f"{path} {factor} before fix, still moves after the fix")
    if not (
        _same(before.loss, after.loss) and all(_same(a, b) for a, b in zip(before.grads, after.grads, strict=True))
    ):
        return Verdict(finding, False, f"{path} {factor} before fix, held after; but the fix changed the loss or grad")
    return Verdict(finding, True, f"{path} {factor} before fix, held after; loss and grad unchanged")


def verify_source(source: SourceFile, selection: Selection, settings: Settings) -> list[Verdict]:
    """One verdict per finding in `source`, in finding order."""
    # libcst can crash the process on deep nesting: validate and size the stack first, as `check` does.
    try:
        return call_at_depth(nesting_depth(source), _verify_source, source, selection, settings)
    except RecursionError:
        raise SourceError(source.path, "too deeply nested to analyse") from None


def _run_both(
    module: cst.Module,
    function: cst.FunctionDef | cst.Lambda,
    fixed_module: cst.Module,
    fixed_function: cst.FunctionDef | cst.Lambda,
    settings: Settings,
) -> tuple[_Run, _Run] | str:
    """Both runs with the first stand-in shape the original runs with, or why none did."""
    reason = "no stand-in shape to try"
    for shape in SHAPES:
        try:
            before = _run(build_probe(module, function, shape), settings)
        except ProbeError as exc:
            return str(exc)
        except Exception as exc:  # the user's code raised with these stand-ins: try the next shape
            reason = f"no probe could run it ({type(exc).__name__}: {exc})"
            continue
        try:
            return before, _run(build_probe(fixed_module, fixed_function, shape), settings)
        except Exception as exc:
            return f"the fixed function did not run ({type(exc).__name__}: {exc})"
    return reason


def _verify_source(source: SourceFile, selection: Selection, settings: Settings) -> list[Verdict]:
    module = parse(source)
    located = locate(source, selection, module=module)
    if not located:
        return []
    fixed_module = parse(dataclasses.replace(source, text=fix_text(source, selection).text))
    # The fix only inserts copies, so a function's index in source order finds it in the fixed module.
    original_functions, fixed_functions = functions(module), functions(fixed_module)
    index_of = {id(f): i for i, f in enumerate(original_functions)}
    verdicts = []
    runs: dict[int, tuple[_Run, _Run] | str] = {}
    for item in located:
        index = index_of[id(item.raw.function)]
        if index not in runs:
            runs[index] = _run_both(module, original_functions[index], fixed_module, fixed_functions[index], settings)
        outcome = runs[index]
        if isinstance(outcome, str):
            verdicts.append(Verdict(item.finding, False, outcome))
        else:
            verdicts.append(_judge(item.finding, *outcome))
    return verdicts


def verify_file(path: str, selection: Selection, settings: Settings) -> tuple[list[Verdict], str | None]:
    """Verdicts for one file, or the one-line reason it could not be checked."""
    try:
        return verify_source(read_source(path), selection, settings), None
    except SourceError as exc:
        return [], str(exc)
