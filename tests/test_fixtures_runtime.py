"""Every fixture is honest at run time: it goes through megatron-core's real in-place rescale.

``forward_step_calc_loss`` calls the fixture's ``loss_func``, rescales the backprop tensor in place
(``*= cp_group_size; /= num_microbatches`` for a 2-tuple, ``/= num_tokens; /= num_microbatches``
for a 3-tuple) and stores the report. A snapshot taken right after ``loss_func`` returns is
compared with the stored report: a positive (or a noqa-suppressed alias) must move, a negative
must not, and a fixed positive must not move while returning the same loss and gradient.

Captures (FAL005) are watched too (``harness.captures.CaptureWatch``, as ``verify`` watches them):
every tensor the fixture's code keeps in a container or on an object (its module's globals, the
locals and closure variables of its frames) is snapshotted when first seen there, and compared with
itself after Megatron's rescale. A FAL005 positive's captured
value must move, a FAL005 negative's must not, and neither may a fixed one's.

A fixture whose loss function returns a bare loss that a host rescales (its findings' context is a row of
``harness.hosts.HOSTS``, or an in-place caller's) runs under that host instead: the real pinned release where
there is one (installed into the cache on first use), else the host's recorded line (``run_through_host``).
"""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
import importlib.util
import itertools
import json
import pathlib
import time
import types

import libcst as cst
import pytest
import torch
from fixture_corpus import (
    CAPTURE_CODE,
    FIXTURES,
    CheckerCase,
    FixerPair,
    Kind,
    api,
    checker_cases,
    fixer_pairs,
    fixture_id,
    read_source,
    report_path_pattern,
)
from megatron.core.pipeline_parallel.schedules import forward_step_calc_loss

from flux_alias_lint.cli import main
from flux_alias_lint.harness import hosts
from flux_alias_lint.harness.captures import CaptureWatch
from flux_alias_lint.harness.probe import SHAPES, build_probe
from flux_alias_lint.harness.verify import _explore
from flux_alias_lint.index.reach import IN_PLACE_CALLER

BASE = (0.5, 1.25, 2.0, 3.5)  # no zero sums or products: every alias visibly moves
NUM_MICROBATCHES = 2
CP_GROUP_SIZE = 3  # != NUM_MICROBATCHES, or the 2-tuple factor cancels

CHECKER_CASES = checker_cases()
FIXER_PAIRS = fixer_pairs()
_module_ids = itertools.count()


def _load_loss_func(path: pathlib.Path):
    """Import a fixture by path under a fresh, unique module name and return its ``loss_func``."""
    name = f"_flux_alias_fixture_{next(_module_ids)}_{path.stem.replace('.', '_')}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.loss_func


def _snapshot(value):
    """A deep copy of a report that shares no storage with anything."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {key: _snapshot(item) for key, item in value.items()}
    if _fields(value):  # a dataclass or a NamedTuple report
        return _record_with(value, {name: _snapshot(getattr(value, name)) for name in _fields(value)})
    if isinstance(value, (list, tuple)):
        return type(value)(_snapshot(item) for item in value)
    return copy.deepcopy(value)


def _fields(value) -> tuple[str, ...]:
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return value._fields
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(field.name for field in dataclasses.fields(value))
    return ()


def _record_with(value, fields: dict):
    return value._replace(**fields) if isinstance(value, tuple) else dataclasses.replace(value, **fields)


def _key(key) -> str:
    """A report path step spelled as in ``.expected`` files: ``["lm loss"]``, ``[0]``."""
    return f"[{json.dumps(key, ensure_ascii=False)}]" if isinstance(key, str) else f"[{key!r}]"


def _differences(before, after, path: str = "report") -> dict[str, str]:
    """Where two (snapshot, stored) values differ, by report path: structure, dtype or values."""
    if isinstance(before, torch.Tensor) or isinstance(after, torch.Tensor):
        if not (isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor)):
            return {path: f"{before!r} -> {after!r}"}
        after = after.detach()
        if before.dtype != after.dtype or before.shape != after.shape or not torch.equal(before, after):
            return {path: f"{before.tolist()} -> {after.tolist()}"}
        return {}
    if isinstance(before, dict) and isinstance(after, dict) and before.keys() == after.keys():
        items = [(_key(key), before[key], after[key]) for key in before]
    elif _fields(before) and type(before) is type(after):
        items = [(f".{name}", getattr(before, name), getattr(after, name)) for name in _fields(before)]
    elif isinstance(before, (list, tuple)) and type(before) is type(after) and len(before) == len(after):
        items = [(_key(index), b, a) for index, b, a in zip(itertools.count(), before, after)]
    else:
        return {} if before == after else {path: f"{before!r} -> {after!r}"}
    return {p: d for step, b, a in items for p, d in _differences(b, a, path + step).items()}


@dataclasses.dataclass
class Run:
    moved: dict[str, str]  # report path -> how the stored report differs from the snapshot at return
    loss: object  # the backprop value after Megatron's rescale (snapshot)
    grad: torch.Tensor | None  # d(sum of rescaled loss) / d(base)
    captures_moved: dict[str, str] = dataclasses.field(default_factory=dict)  # kept tensors that changed


# Fixtures a host runs whose expected files cannot say so (a negative names no context): fixture id pattern
# (fnmatch, e.g. "FAL005/trainer_*") → context. A positive is run by its findings' context.
HOST_CASES: dict[str, str] = {}
HOST_CASES_DIR = pathlib.Path(__file__).resolve().parent / "harness" / "host_cases"


def run_through_megatron(path: pathlib.Path, like: pathlib.Path | None = None) -> Run:
    """``path``'s ``loss_func`` through Megatron's rescale, or through its host when a host rescales its bare
    returned loss; ``like``: the file whose findings say which (a fixer pair's input, for its output)."""
    host = _host_of(like or path)
    if host is not None:
        [run] = run_through_host(host, [path])
        return run
    return run_loss_func(path)


def _host_of(path: pathlib.Path) -> hosts.Host | None:
    """The host that rescales the bare loss ``path``'s ``loss_func`` returns, if one does."""
    for pattern, context in HOST_CASES.items():
        if fnmatch.fnmatch(fixture_id(path), pattern):
            return hosts.HOSTS[context]
    if not isinstance(_load_loss_func(path)(torch.tensor(BASE, requires_grad=True) * 1.0), torch.Tensor):
        return None  # a (loss, report): Megatron's rescale, or an in-place caller standing in for it
    for finding in api("check_source")(read_source(path).text, str(path)):
        if finding.context in hosts.HOSTS or finding.context == IN_PLACE_CALLER:
            return hosts.host_of(finding.context, finding.reached_by)
    return None


def run_through_host(host: hosts.Host, paths: list[pathlib.Path]) -> list[Run]:
    """Each file's ``loss_func`` under ``host`` (one run for them all): the values it kept that moved, its loss
    and its gradients (its own, then those of the host's model)."""
    runs = hosts.run_under_host(host, [hosts.ModuleSubject(str(path)) for path in paths], install_missing=True)
    for path, run in zip(paths, runs, strict=True):
        assert not run.error, f"{path} under {host.name} ({run.ran}): {run.error}"
    return [Run({}, tuple(run.loss or ()), tuple(map(tuple, run.grads)), run.moved) for run in runs]


def run_loss_func(path: pathlib.Path) -> Run:
    """`path`'s `loss_func` through `forward_step_calc_loss`: what moved, the loss and its gradient."""
    loss_func = _load_loss_func(path)
    base = torch.tensor(BASE, requires_grad=True)
    output_tensor = base * 1.0  # a non-leaf, as Megatron's in-place rescale requires
    snapshots = []

    def recording_loss_func(tensor):
        outputs = loss_func(tensor)
        assert isinstance(outputs, tuple) and len(outputs) in (2, 3), f"not a loss return: {outputs!r}"
        snapshots.append(_snapshot(outputs[-1]))
        return outputs

    forward_data_store: list = []
    config = types.SimpleNamespace(calculate_per_token_loss=False, timers=None)
    watch = CaptureWatch()
    with watch.tracing(str(path)):
        loss, _num_tokens = _calc_loss(output_tensor, recording_loss_func, config, forward_data_store)
    assert len(snapshots) == 1 and len(forward_data_store) == 1
    grad = None
    if isinstance(loss, torch.Tensor) and loss.requires_grad:
        (grad,) = torch.autograd.grad(loss.sum(), base, allow_unused=True)
    return Run(_differences(snapshots[0], forward_data_store[0]), _snapshot(loss), grad, watch.moved())


def _calc_loss(output_tensor, loss_func, config, forward_data_store):
    return forward_step_calc_loss(
        model=None,
        output_tensor=output_tensor,
        loss_func=loss_func,
        config=config,
        vp_stage=None,
        collect_non_loss_data=False,
        num_microbatches=NUM_MICROBATCHES,
        forward_data_store=forward_data_store,
        cp_group_size=CP_GROUP_SIZE,
        is_last_stage=True,
    )


def _same_value(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    return type(a) is type(b) and a == b


def assert_same_training(before: Run, after: Run) -> None:
    """A fix must only change the report: the loss Megatron backpropagates and its gradient stay."""
    assert _same_value(before.loss, after.loss), f"loss changed: {before.loss!r} -> {after.loss!r}"
    assert _same_value(before.grad, after.grad) or (before.grad is None and after.grad is None), (
        f"gradient changed: {before.grad!r} -> {after.grad!r}"
    )


def assert_claim(kind: Kind, run: Run, captures: bool = False) -> None:
    """`captures`: a FAL005 fixture, whose claim is about the values it keeps (other rules' fixtures
    may change a local container's entries they then drop)."""
    moved = {**run.moved, **run.captures_moved} if captures else run.moved
    if kind is Kind.NEGATIVE:
        assert not moved, f"a negative fixture's report or kept values moved under Megatron's rescale: {moved}"
    else:
        assert moved, f"a {kind.value} fixture's report did not move: it does not really alias"


def _captures(path: pathlib.Path) -> bool:
    return path.parent.name == CAPTURE_CODE


@pytest.mark.parametrize("case", CHECKER_CASES, ids=lambda c: c.id)
def test_checker_fixture_is_honest(case: CheckerCase):
    run = run_through_megatron(case.source_path)
    assert_claim(case.kind(), run, _captures(case.source_path))
    if case.expected_captures():
        assert run.captures_moved, "a FAL005 fixture's kept value did not change: nothing writes it in place"
    elif case.rule_dir == CAPTURE_CODE:
        assert not run.captures_moved, f"kept values changed that no finding names: {run.captures_moved}"
    if case.kind() is Kind.POSITIVE:
        # The findings' report paths are exactly the entries that move: none missed, none extra.
        patterns = {path: report_path_pattern(path) for path in case.expected_report_paths()}
        unexpected = [p for p in run.moved if not any(pat.match(p) for pat in patterns.values())]
        assert not unexpected, f"entries move that no expected finding names: {unexpected}"
        still = [path for path, pat in patterns.items() if not any(pat.match(p) for p in run.moved)]
        assert not still, f"expected findings whose report entry does not move at run time: {still}"


@pytest.mark.parametrize("pair", FIXER_PAIRS, ids=lambda p: p.id)
def test_fixer_pair_is_honest(pair: FixerPair):
    kind = pair.kind()
    before = run_through_megatron(pair.in_path)
    after = run_through_megatron(pair.out_path, like=pair.in_path)
    assert_claim(kind, before, _captures(pair.in_path))
    assert_claim(Kind.NEGATIVE if kind is Kind.POSITIVE else kind, after, _captures(pair.in_path))
    assert_same_training(before, after)


def _all_fixable(path: pathlib.Path) -> bool:
    """Whether `fix_source` can edit every finding of `path`: one shown at a helper's call (a report the helper
    made, `parts = helper(x)`) has no expression there to copy, and its fix goes into the helper
    (tests/test_fixtures.py requires that of every other finding)."""
    return all(f.fixable for f in api("check_source")(read_source(path).text, str(path)))


_FIXABLE = [
    (c.id, c.source_path) for c in CHECKER_CASES if c.kind() is Kind.POSITIVE and _all_fixable(c.source_path)
] + [(p.id, p.in_path) for p in FIXER_PAIRS if p.kind() is Kind.POSITIVE]


@pytest.mark.parametrize("path", [path for _, path in _FIXABLE], ids=[fid for fid, _ in _FIXABLE])
def test_fix_source_stops_the_rescale_leaking(path: pathlib.Path, tmp_path: pathlib.Path):
    fix_source = api("fix_source")
    source = read_source(path)
    fixed_path = tmp_path / path.name
    fixed_path.write_bytes(source.encode(fix_source(source.text)))
    before = run_through_megatron(path)
    after = run_through_megatron(fixed_path, like=path)
    assert_claim(Kind.POSITIVE, before, _captures(path))
    assert not after.moved, f"the report still moves after fix_source: {after.moved}"
    if _captures(path):
        assert not after.captures_moved, f"kept values still change after fix_source: {after.captures_moved}"
    assert_same_training(before, after)


@pytest.mark.parametrize("context", sorted(hosts.HOSTS))
def test_a_kept_loss_moves_under_its_host_and_a_copy_does_not(context: str):
    host = hosts.HOSTS[context]
    kept = "kept_total_on_self.py" if host.entry else "kept_on_self.py"  # a host taking a dict's entry gets a dict
    copy = "kept_total_copy.py" if host.entry else "kept_copy.py"
    kept, copied = run_through_host(host, [HOST_CASES_DIR / kept, HOST_CASES_DIR / copy])
    assert_claim(Kind.POSITIVE, kept, captures=True)
    assert_claim(Kind.NEGATIVE, copied, captures=True)
    assert_same_training(kept, copied)


def _host_projects() -> list[pathlib.Path]:
    """The fixture projects (folders) whose expected FAL005 findings name a host's context or an in-place caller."""
    contexts = {*hosts.HOSTS, IN_PLACE_CALLER}
    return sorted(
        expected.parent
        for expected in FIXTURES.glob("FAL*/*/expected")
        if any(
            line.split()[1] == CAPTURE_CODE and line.split()[-1] in contexts
            for line in expected.read_text(encoding="utf-8").splitlines()
            if line.strip()
        )
    )


@pytest.mark.parametrize("project", _host_projects(), ids=fixture_id)
def test_a_host_project_is_confirmed_under_its_host(project: pathlib.Path, capsys: pytest.CaptureFixture[str]):
    # `verify` runs each finding under its host: the real pinned release (installed into the cache on first use),
    # else the recorded line; the kept value must move there and hold after the fix.
    for release in hosts.releases():
        hosts.install(release)
    assert main(["verify", str(project), "--format", "json"]) == 0, capsys.readouterr().out
    verdicts = json.loads(capsys.readouterr().out)
    hosted = [v for v in verdicts if v["code"] == CAPTURE_CODE and v["context"] in {*hosts.HOSTS, IN_PLACE_CALLER}]
    assert hosted, "no finding under a host"
    assert all(v["confirmed"] for v in verdicts), [v["detail"] for v in verdicts if not v["confirmed"]]


# The negative host projects, and how its host calls each one's code (a name, a class whose instances are called,
# or `Class.method`); the release, host and setting each runs under come from the project's own pin and settings
# (`hosts.for_project`: index/releases.py and facts/hosts.py), never from here.
NEGATIVE_HOST_PROJECTS = {
    "FAL005/neg_host_accelerate_backward_0_13": "Criterion",
    "FAL005/neg_host_accelerate_backward_of_an_unpacked_pair_0_13": "Step",
    "FAL005/neg_host_lightning_out_of_place": "Classifier.training_step",
    "FAL005/neg_host_megatron_before_0_7": "loss_func",
    "FAL005/neg_host_transformers_compute_loss_turned_off": "token_loss",
    "FAL005/neg_host_transformers_training_step_after_4_46": "LoggingTrainer.compute_loss",
    "FAL005/neg_host_trainer_imported_under_try_after_4_46": "LoggingTrainer.compute_loss",
}


def test_every_negative_host_project_is_run() -> None:
    assert set(NEGATIVE_HOST_PROJECTS) == {fixture_id(p) for p in FIXTURES.glob("FAL*/neg_host_*") if p.is_dir()}


@pytest.mark.parametrize("fixture", sorted(NEGATIVE_HOST_PROJECTS))
def test_a_negative_host_project_holds_under_its_pinned_release(fixture: str) -> None:
    # Its loss function under the release its own pin names (real where installable, else megatron-core's profile):
    # the kept value holds. The same capture under the host's first in-place release (its positive twin's) moves,
    # so the watch would see it.
    for release in hosts.releases():
        hosts.install(release)
    path = FIXTURES / fixture / "loss.py"
    subject = hosts.ModuleSubject(str(path), NEGATIVE_HOST_PROJECTS[fixture])
    name, pinned = hosts.for_project(str(path))
    twin = hosts.in_place_twin(name)
    assert not pinned.in_place and twin.in_place
    [held] = hosts.run_under_host(pinned, [subject])
    [moved] = hosts.run_under_host(twin, [subject])
    for host, run in ((pinned, held), (twin, moved)):
        assert not run.error, f"{fixture} under {host.name} ({run.ran}): {run.error}"
        real = f"{host.release}, real: " if host.release is not None else f"emulated: `{host.line}`"
        assert run.ran.startswith(real), run.ran
    assert not held.moved, f"kept values moved under {pinned.name} ({held.ran}): {held.moved}"
    assert moved.moved, f"nothing kept moved under {twin.name} ({moved.ran}): the capture is not watched"


# Composer's negatives are other shapes under the same releases, not other releases: the loss method of each, its
# `.detach()`es watched as `verify` watches a finding's, runs under the recorded 0.10+ lines (`composer-total`), and
# what it keeps holds. Its twin: the same run with the kept value taken as the loss (the host taking that entry; a
# bare loss under 0.2-0.8.2's line), where it moves, so the watch would see it.
COMPOSER_SHAPES = {
    "FAL005/neg_composer_total_other_key": ("ce", hosts.COMPOSER_TOTAL),
    "FAL005/neg_composer_no_total": ("ce", hosts.COMPOSER_TOTAL),
    "FAL005/neg_composer_bare_after_0_9": ("", hosts.COMPOSER),
    "FAL005/neg_composer_own_checkout": ("", hosts.COMPOSER),
    "FAL005/neg_composer_classifier_bare_loss_fn": ("", hosts.COMPOSER),
}


def test_every_composer_negative_is_run() -> None:
    assert set(COMPOSER_SHAPES) == {fixture_id(p) for p in FIXTURES.glob("FAL*/neg_composer_*") if p.is_dir()}


class _Detached(cst.CSTVisitor):
    """The `.detach()` calls of a module and the function holding the first: a model's `loss`, or the `loss_fn`
    handed to Composer's `ComposerClassifier`, whose `loss` returns what it returns."""

    def __init__(self) -> None:
        self.loss: cst.FunctionDef | None = None
        self.calls: list[cst.Call] = []
        self._functions: list[cst.FunctionDef] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._functions.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "detach":
            self.calls.append(node)
            if self.loss is None and self._functions:
                self.loss = self._functions[-1]


@pytest.mark.parametrize("fixture", sorted(COMPOSER_SHAPES))
def test_a_composer_negative_holds_under_composers_lines(fixture: str) -> None:
    path = FIXTURES / fixture / "loss.py"
    module = cst.parse_module(path.read_text(encoding="utf-8"))
    found = _Detached()
    module.visit(found)
    assert found.loss is not None and found.calls
    marked = [(node, key) for key, node in enumerate(found.calls)]
    probe = build_probe(module, found.loss, SHAPES[0], {id(n): k for n, k in marked}, path=str(path), faithful=True)
    execution = next(e for e in _explore(probe, time.monotonic() + 60) if e.error is None)
    subject = hosts.ProbeSubject(
        module, found.loss, marked, [], SHAPES[0], True, str(path), execution.taken, dict(execution.roles)
    )
    kept_entry, twin_context = COMPOSER_SHAPES[fixture]
    host = hosts.HOSTS[hosts.COMPOSER_TOTAL]
    twin = dataclasses.replace(host, entry=kept_entry) if kept_entry else hosts.HOSTS[twin_context]
    [held] = hosts.run_under_host(host, [subject])
    [moved] = hosts.run_under_host(twin, [subject])
    for run in (held, moved):
        assert not run.error, f"{fixture} ({run.ran}): {run.error}"
    assert not held.moved, f"kept values moved under {host.name} ({held.ran}): {held.moved}"
    assert moved.moved, f"nothing kept moved with it taken as the loss ({moved.ran}): the capture is not watched"
