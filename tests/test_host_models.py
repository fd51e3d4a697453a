"""The hosts as code (`flux_alias_lint/hosts/*.pyi`, `index/host_models.py`): each model's in-place writes are the
real release's, line for line, and a toy project run through the real release moves what the model predicts."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import sys

import pytest

from flux_alias_lint.harness import hosts
from flux_alias_lint.index import host_models
from flux_alias_lint.index.host_models import models, writes
from flux_alias_lint.index.settings import numbers
from flux_alias_lint.index.versions import allowed, relation

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "FAL005"
KEPT = pathlib.Path(__file__).resolve().parent / "harness" / "host_cases" / "kept_on_self.py"
MODELS = {model.name: model for model in models()}
# How a toy project reaches each host: the project's override returns its loss to the Trainer's loop; the
# project hands its loss to `Accelerator.backward`.
ENTRIES = {
    "transformers": ("Trainer.training_step", ("override", "compute_loss")),
    "accelerate": ("Accelerator.backward", ("parameter", "loss")),
}
CONTEXTS = {"transformers": hosts.TRAINING_STEP, "accelerate": hosts.ACCELERATE_BACKWARD}


def _release(model: host_models.Model) -> hosts.Release:
    return next(r for r in hosts.releases() if (r.dist, r.version) == (model.distribution, model.measured))


def test_every_model_has_its_provenance_and_a_release_the_harness_runs() -> None:
    assert {m.distribution for m in models()} == {"transformers", "accelerate"}
    for model in models():
        assert relation(allowed(f"=={model.measured}"), allowed(model.releases)) == "within", model.name
        assert _release(model), model.name
        assert model.contexts, model.name


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_write_of_a_model_is_the_releases_own_line(name: str) -> None:
    model = MODELS[name]
    release = _release(model)
    hosts.install(release)
    real = next(release.path.rglob(model.file)).read_text(encoding="utf-8").splitlines()
    found = [w for entry in ENTRIES.values() for w in writes(model.distribution, entry[0]) if w.model is model]
    for write in found:
        for step in write.steps:
            line = real[step.line - 1].strip()
            # a model's statement is the release's, or its start where the release goes on (`**kwargs`, a guard)
            assert line.startswith(re.split(r"[(\[]", step.text, maxsplit=1)[0].strip()), (step, line)
        assert real[write.steps[-1].line - 1].strip().startswith(write.steps[-1].text), write.steps[-1]


def _factor(model: host_models.Model) -> float:
    """What the model says a kept alias of the toy's loss reads after one step, at the run's settings."""
    entry, origin = ENTRIES[model.distribution]
    overrides = {"compute_loss": False} if origin[0] == "override" else {}
    factor = 1.0
    for write in writes(model.distribution, entry, overrides):
        if write.model is model and write.origin == origin and not write.guards:
            op = write.steps[-1].text.split()[1]
            factor = factor * hosts.STEPS if op == "*=" else factor / hosts.STEPS
    return factor


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_toy_run_through_the_real_release_moves_as_its_model_says(name: str) -> None:
    model = MODELS[name]
    context = CONTEXTS[model.distribution]
    hosts.install(_release(model))
    host = hosts.under(context, model.measured)
    function = "loss_func"
    subject = hosts.ModuleSubject(str(KEPT), function)
    if model.distribution == "transformers":  # a Trainer subclass's compute_loss keeping its loss
        subject = hosts.ModuleSubject(
            str(FIXTURES / "host_transformers_training_step" / "loss.py"), "LoggingTrainer.compute_loss"
        )
    [run] = hosts.run_under_host(host, [subject])
    assert not run.error and run.ran.startswith(f"{model.distribution} {model.measured}, real"), run
    factor = _factor(model)
    if factor == 1.0:
        assert not run.moved, run.moved
    else:
        assert run.moved and all(f"(×{factor:.2f})" in moved for moved in run.moved.values()), (factor, run.moved)


def test_an_override_of_training_step_not_calling_the_base_never_runs_the_hosts_write() -> None:
    # The model: no write reaches what the override of compute_loss returns; the real 4.46.0: the kept value holds,
    # while the same compute_loss under the base training_step moves by gradient_accumulation_steps.
    assert not writes("transformers", "Trainer.training_step", {"compute_loss": False, "training_step": False})
    assert writes("transformers", "Trainer.training_step", {"compute_loss": False, "training_step": True})
    hosts.install(hosts.TRANSFORMERS_4_46_0)
    host = hosts.under(hosts.TRAINING_STEP, "4.46.0")
    folder = FIXTURES / "neg_trainer_training_step_overridden"
    [held] = hosts.run_under_host(host, [hosts.ModuleSubject(str(folder / "loss.py"), "AdamssTrainer.compute_loss")])
    assert not held.error and held.ran.startswith("transformers 4.46.0, real"), held
    assert not held.moved, held.moved


def test_a_compute_loss_func_is_written_only_where_the_trainers_compute_loss_calls_the_base() -> None:
    handed = ("attribute", "compute_loss_func")
    assert not [
        w for w in writes("transformers", "Trainer.training_step", {"compute_loss": False}) if w.origin == handed
    ]
    called = {
        w.context for w in writes("transformers", "Trainer.training_step", {"compute_loss": True}) if w.origin == handed
    }
    assert called == {hosts.TRAINING_STEP, hosts.COMPUTE_LOSS}


def test_a_write_chain_names_the_hosts_file_and_line() -> None:
    [write] = [w for w in writes("transformers", "Trainer.training_step", {"compute_loss": False})]
    assert write.said == (
        "Trainer.training_step, transformers 4.46.0 trainer.py:3605: loss *= self.args.gradient_accumulation_steps"
    )
    assert write.factor == "gradient_accumulation_steps"


def test_a_write_by_one_step_is_no_finding_and_leaves_the_kept_value() -> None:
    # `gradient_accumulation_steps=1` in the project's TrainingArguments: the factor of the model's write; the real
    # 4.46.0 at one step leaves the kept value as it is, at two it moves.
    folder = FIXTURES / "neg_trainer_gradient_accumulation_steps_one"
    assert host_models.factors(hosts.TRAINING_STEP) == {"gradient_accumulation_steps"}
    assert numbers(str(folder / "loss.py"), "gradient_accumulation_steps") == (
        (f"{folder.relative_to(FIXTURES.parents[1]).as_posix()}/loss.py:16", 1),
    )
    hosts.install(hosts.TRANSFORMERS_4_46_0)
    host = hosts.under(hosts.TRAINING_STEP, "4.46.0")
    subject = hosts.ModuleSubject(str(folder / "loss.py"), "LoggingTrainer.compute_loss")
    [held] = hosts.run_under_host(dataclasses.replace(host, factor=1), [subject])
    [moved] = hosts.run_under_host(host, [subject])
    assert not held.error and held.ran.startswith("transformers 4.46.0, real"), held
    assert not held.moved, held.moved
    assert moved.moved, moved


_ORIGINS = {
    "override": "what a `{}` override returns",
    "attribute": "what the `{}` handed to it returns",
    "forward": "the model's `forward` output's `{}`",
    "parameter": "the `{}` handed to it",
}


def _rows() -> list[str]:
    """docs/context.md's table of the host models: one row per in-place write, with what it reaches (the project
    class overriding nothing, then its `compute_loss`)."""
    found: dict[tuple[str, int], list[host_models.Write]] = {}
    for distribution, (entry, _) in ENTRIES.items():
        for overrides in ({}, {"compute_loss": False}):
            for write in writes(distribution, entry, overrides):
                found.setdefault((write.model.name, write.steps[-1].line), []).append(write)
    rows = []
    for each in found.values():
        first = each[0]
        step = first.steps[-1]
        reaches = sorted(
            {_ORIGINS[kind].format(name if name != "0" else "[0]") for kind, name in (w.origin for w in each)}
        )
        defaults = first.model.defaults
        under = ", ".join(
            f"`{g}`" + (f" (default {'on' if defaults[g][0] else 'off'})" if g in defaults else "")
            for g in first.guards
        )
        under = under or "always"
        rows.append(
            f"| `hosts/{first.model.name}.pyi` | `{first.model.releases}` | {step.method}, {first.model.file}:{step.line} "
            f"`{step.text}` | {under} | {'; '.join(reaches)} | `{first.context}` |"
        )
    return rows


def test_the_context_docs_list_every_model_write_as_the_models_say() -> None:
    lines = (FIXTURES.parents[1] / "docs" / "context.md").read_text(encoding="utf-8").splitlines()
    missing = [row for row in _rows() if row not in lines]
    assert not missing, "docs/context.md 'Hosts' should have these rows:\n" + "\n".join(missing)


# The project's own loop, run through the real accelerate 0.12.0: what it hands to `Accelerator.backward` is the
# loss function's return, or a view of it (the division reaches the kept value), or a new tensor made from it
# (`loss = loss.mean()`: it does not). `check` says the same (the fixtures' expected findings).
LOOP = """
import torch, loss, train
torch.manual_seed(0)
model, batch = torch.nn.Linear(3, 3), (torch.randn(2, 3), torch.randn(2, 3))
fresh = (model(batch[0]) - batch[1]).abs()
train.train(model, [batch])
kept = loss.KEPT[0]
print(float((kept / (fresh if kept.dim() else fresh.mean())).mean()))
"""


@pytest.mark.parametrize(
    ("fixture", "factor"),
    [("accelerate_backward_of_a_view_of_the_loss", 0.25), ("neg_accelerate_backward_of_a_rebound_loss", 1.0)],
)
def test_the_projects_loop_run_through_accelerate_moves_what_check_says(fixture: str, factor: float) -> None:
    release = next(r for r in hosts.releases() if (r.dist, r.version) == ("accelerate", "0.12.0"))
    hosts.install(release)
    folder = FIXTURES / fixture
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(release.path), str(folder)])}
    done = subprocess.run(
        [sys.executable, "-c", LOOP], check=False, env=env, capture_output=True, text=True, cwd=folder
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.split()[-1]) == pytest.approx(factor)
    assert bool((folder / "expected").read_text().strip()) is (factor != 1.0)


# The project's own loop keeping its loss, then handing it to `accelerator.backward`, run through the real accelerate
# 0.12.0: its Accelerator given gradient_accumulation_steps (2) divides the kept value; not given it, by its default 1.
KEPT_IN_THE_LOOP = """
import accelerate, torch, loss
torch.manual_seed(0)
model, batch = torch.nn.Linear(3, 3), torch.randn(2, 3)
trainer = loss.Trainer(model)
trainer.train([batch])
print(accelerate.__version__, float(trainer.kept_loss / (model(batch).abs().mean() / 2)))
"""


@pytest.mark.parametrize(
    ("fixture", "factor"),
    [
        ("host_accelerate_backward_of_a_loss_kept_in_the_loop", 0.5),
        ("neg_accelerate_backward_of_a_loss_kept_in_the_loop_default_steps", 1.0),
    ],
)
def test_a_loss_kept_in_the_loop_before_accelerate_backward_moves_as_the_model_says(
    fixture: str, factor: float
) -> None:
    release = next(r for r in hosts.releases() if (r.dist, r.version) == ("accelerate", "0.12.0"))
    hosts.install(release)
    folder = FIXTURES / fixture
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(release.path), str(folder)])}
    done = subprocess.run(
        [sys.executable, "-c", KEPT_IN_THE_LOOP], check=False, env=env, capture_output=True, text=True, cwd=folder
    )
    assert done.returncode == 0, done.stderr[-2000:]
    version, moved = done.stdout.split()[-2:]
    assert version == "0.12.0"
    assert float(moved) == pytest.approx(factor)
    # The model: the write divides by the Accelerator's gradient_accumulation_steps, 1 unless given (its `__init__`).
    write = host_models.handed_write("backward", "self.accelerator")
    assert write is not None and write.factor == "gradient_accumulation_steps"
    assert host_models.default(hosts.ACCELERATE_BACKWARD, write.factor) == 1
    assert bool((folder / "expected").read_text().strip()) is (factor != 1.0)


def test_only_a_receiver_named_like_the_hosts_class_is_handed_the_write() -> None:
    assert host_models.handed_write("backward", "accelerator") is not None
    assert host_models.handed_write("backward", "loss") is None
    assert host_models.handed_write("step", "accelerator") is None
    assert host_models.handed_methods() == {"backward"}


# A model's `forward` handed to a Trainer (`model=`): its fixture folder, the class whose `forward` it is, the release
# the project pins and the gradient_accumulation_steps it sets, and whether its kept value moves there.
FORWARDS = {
    "host_trainer_model_forward": ("loss.py", "TinyLM", "4.46.0", 2, True),
    "host_trainer_pretrained_model_tuple_output": ("loss.py", "TinyForCausalLM", "4.46.0", 2, True),
    "neg_trainer_model_forward_one_step": ("loss.py", "TinyLM", "4.46.0", 1, False),
    "neg_trainer_model_forward_after_4_46": ("loss.py", "TinyLM", "4.57.1", 2, False),
}


def _forward_writes(folder: pathlib.Path, cls: str) -> list[str]:
    """The chains of the index's findings on the fixture's model file, as it reads the project."""
    from flux_alias_lint.index.project import ProjectIndex

    index = ProjectIndex([str(folder)])
    return [
        " | ".join(step.what for step in reach.steps)
        for (path, _), reach in index.reached.items()
        if path.startswith(str(folder)) and reach.steps and reach.steps[0].what.startswith(f"{cls} is handed")
    ]


@pytest.mark.parametrize("fixture", sorted(FORWARDS))
def test_a_models_forward_handed_to_a_trainer_moves_as_the_models_say(fixture: str) -> None:
    # The model's `forward` run by the real release's `Trainer.training_step` and base `compute_loss` (the project's
    # class, its own signature): the kept value moves ×gradient_accumulation_steps under 4.46.0 and holds at 1 step
    # or under 4.57.1; the fixture's findings (test_fixture_projects.py) say the same.
    file, cls, version, steps, moves = FORWARDS[fixture]
    folder = FIXTURES / fixture
    context = hosts.TRAINING_STEP
    release = next(r for r in hosts.releases() if (r.dist, r.version) == ("transformers", version))
    hosts.install(release)
    host = dataclasses.replace(hosts.HOSTS[context], release=release, factor=steps, driver="model_forward")
    [run] = hosts.run_under_host(host, [hosts.ModuleSubject(str(folder / file), f"{cls}.forward")])
    assert not run.error and run.ran.startswith(f"transformers {version}, real"), run
    if moves:
        assert run.moved and all(f"(×{steps:.2f})" in moved for moved in run.moved.values()), run.moved
        [chain] = _forward_writes(folder.resolve(), cls)
        assert chain.endswith(
            "Trainer.compute_loss, transformers 4.46.0 trainer.py:3625: outputs = model(**inputs)"
            " | Trainer.training_step, transformers 4.46.0 trainer.py:3572: loss = self.compute_loss(model, inputs,"
            " num_items_in_batch=num_items_in_batch)"
            " | Trainer.training_step, transformers 4.46.0 trainer.py:3605: loss *= self.args.gradient_accumulation_steps"
        ), chain
    else:
        assert not run.moved, run.moved


# A model's `forward` under the project's Trainer subclass whose `compute_loss` never calls the base one: what it
# returns of the model's output goes to 4.46.0's `training_step`, which multiplies it in place.
OVERRIDES = {
    "host_trainer_compute_loss_override_returns_the_model_loss": True,
    "neg_trainer_compute_loss_override_returns_a_new_loss": False,
}


@pytest.mark.parametrize("fixture", sorted(OVERRIDES))
def test_a_compute_loss_override_returning_the_models_loss_moves_what_the_forward_kept(fixture: str) -> None:
    folder = FIXTURES / fixture
    release = next(r for r in hosts.releases() if (r.dist, r.version) == ("transformers", "4.46.0"))
    hosts.install(release)
    trainer = f"{folder / 'trainer.py'}:EmbedderTrainer"
    host = dataclasses.replace(
        hosts.HOSTS[hosts.TRAINING_STEP], release=release, driver="model_forward", trainer=trainer
    )
    [run] = hosts.run_under_host(host, [hosts.ModuleSubject(str(folder / "loss.py"), "TinyEmbedder.forward")])
    assert not run.error and run.ran.startswith("transformers 4.46.0, real"), run
    chains = _forward_writes(folder.resolve(), "TinyEmbedder")
    if OVERRIDES[fixture]:
        assert run.moved and all(f"(×{hosts.STEPS:.2f})" in m for m in run.moved.values()), run.moved
        [chain] = chains
        assert "EmbedderTrainer.compute_loss returns the model's output's loss as its loss | " in chain, chain
        assert chain.endswith("trainer.py:3605: loss *= self.args.gradient_accumulation_steps"), chain
    else:
        assert not run.moved, run.moved
        assert chains == []
    assert bool((folder / "expected").read_text().strip()) is OVERRIDES[fixture]


# A model's `forward` under the base `compute_loss` of transformers 4.57.1 on 2 ranks: `loss *= num_processes` runs
# where the Trainer's `model_accepts_loss_kwargs` holds, which its `__init__` takes from the model's class attribute
# `accepts_loss_kwargs` before the forward's `**kwargs`.
ACCEPTS = {
    "host_trainer_model_forward_accepts_loss_kwargs": True,
    "neg_trainer_model_forward_accepts_loss_kwargs_off": False,
}


@pytest.mark.parametrize("fixture", sorted(ACCEPTS))
def test_a_models_accepts_loss_kwargs_decides_the_world_size_write(fixture: str) -> None:
    folder = FIXTURES / fixture
    release = next(r for r in hosts.releases() if (r.dist, r.version) == ("transformers", "4.57.1"))
    hosts.install(release)
    host = dataclasses.replace(hosts.HOSTS[hosts.COMPUTE_LOSS], release=release, driver="model_forward")
    [run] = hosts.run_under_host(host, [hosts.ModuleSubject(str(folder / "loss.py"), "TinyLM.forward")])
    assert not run.error and run.ran.startswith("transformers 4.57.1, real"), run
    # The index: the chain to the world-size write reaches this forward where the Trainer's state holds (4.46.0's
    # training_step reaches it too; the project's pin leaves that release out, as the fixture's findings say).
    written = [c for c in _forward_writes(folder.resolve(), "TinyLM") if "trainer.py:4154" in c]
    if ACCEPTS[fixture]:
        assert run.moved and all(f"(×{hosts.WORLD_SIZE:.2f})" in m for m in run.moved.values()), run.moved
        assert [c.endswith("trainer.py:4154: loss *= self.accelerator.num_processes") for c in written] == [True]
    else:
        assert not run.moved, run.moved
        assert written == []
    assert bool((folder / "expected").read_text().strip()) is ACCEPTS[fixture]


@pytest.mark.parametrize(("name", "line"), [("transformers-4.49.0", 633), ("transformers-4.57.1", 635)])
def test_the_trainer_takes_accepts_loss_kwargs_from_the_model_before_its_forward(name: str, line: int) -> None:
    # The rule `HostEvidence._accepts_loss_kwargs` follows, as each release's `Trainer.__init__` has it.
    release = _release(MODELS[name])
    hosts.install(release)
    real = next(release.path.rglob("trainer.py")).read_text(encoding="utf-8").splitlines()
    attribute, state = hosts.facts.LOSS_KWARGS_ATTRIBUTE, hosts.facts.LOSS_KWARGS_STATE
    assert real[line - 1].strip().startswith("if hasattr(") and f'"{attribute}")' in real[line - 1]
    assert real[line].strip().startswith(f"self.{state} = ") and real[line].strip().endswith(f".{attribute}")
    assert "VAR_KEYWORD" in " ".join(real[line + 1 : line + 6])


def test_a_forward_is_reached_through_the_base_compute_loss_only() -> None:
    # Its loss is `outputs["loss"]` (a dict, a ModelOutput) or `outputs[0]` (a tuple) of the base compute_loss; an
    # override not calling it leaves the forward's loss out; 4.57.1 multiplies it only for a forward taking
    # `**kwargs` (`model_accepts_loss_kwargs`).
    forward = {w.origin for w in writes("transformers", "Trainer.training_step") if w.origin[0] == "forward"}
    assert forward == {("forward", "loss"), ("forward", "0")}
    assert not [
        w for w in writes("transformers", "Trainer.training_step", {"compute_loss": False}) if w.origin[0] == "forward"
    ]
    assert {w.origin[0] for w in writes("transformers", "Trainer.training_step", {"compute_loss": True})} >= {"forward"}
    later = [w for w in writes("transformers", "Trainer.training_step") if w.model.measured == "4.57.1"]
    assert all("model_accepts_loss_kwargs" in w.guards for w in later if w.origin[0] == "forward")


@pytest.mark.parametrize("name", sorted(n for n in MODELS if MODELS[n].defaults))
def test_each_settings_default_of_a_model_is_the_releases_own(name: str) -> None:
    # The line of the field in the release's training_args.py, and the default the installed release's class has.
    import json
    import subprocess
    import sys

    # A host class's own default (`Accelerator`): its `__init__`'s parameter, with its line in the release's file.
    model = MODELS[name]
    release = _release(model)
    hosts.install(release)
    owner = {model.owners[setting] for setting in model.defaults}
    assert len(owner) == 1
    [cls] = owner
    if cls == "TrainingArguments":
        real = next(release.path.rglob("training_args.py")).read_text(encoding="utf-8").splitlines()
        script = "import dataclasses, json, sys; from transformers import TrainingArguments as T; " + (
            "print(json.dumps({f.name: f.default for f in dataclasses.fields(T) if f.name in sys.argv[1:]}))"
        )
    else:
        real = next(release.path.rglob(model.file)).read_text(encoding="utf-8").splitlines()
        script = f"import inspect, json, sys; from {model.distribution} import {cls} as T; " + (
            "print(json.dumps({p.name: p.default for p in inspect.signature(T.__init__).parameters.values()"
            " if p.name in sys.argv[1:]}))"
        )
    ran = subprocess.run(
        [sys.executable, "-c", script, *model.defaults],
        env={"PYTHONPATH": str(release.path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(ran.stdout) == {setting: value for setting, (value, _) in model.defaults.items()}
    for setting, (value, line) in model.defaults.items():
        assert real[line - 1].strip().startswith(f"{setting}:"), (setting, real[line - 1])
        said = " ".join(real[line - 1 : line + 2])
        assert f"default={value}," in said or f"= {value}," in said, (setting, real[line - 1 : line + 2])


COMPUTE_LOSS_MODELS = sorted(
    n for n in MODELS if any(w.context == hosts.COMPUTE_LOSS for w in host_models.own_writes(MODELS[n]))
)


@pytest.mark.parametrize("name", COMPUTE_LOSS_MODELS)
def test_a_compute_loss_func_under_the_real_release_moves_as_its_model_says(name: str) -> None:
    # The fixture's compute_loss_func under the release's real Trainer on 2 gloo ranks: set on, its kept loss moves
    # by the world size where the model's compute_loss multiplies a compute_loss_func's loss; set off, it holds.
    model = MODELS[name]
    handed = [w for w in host_models.own_writes(model) if w.origin == ("attribute", "compute_loss_func")]
    hosts.install(_release(model))
    subject = hosts.ModuleSubject(str(FIXTURES / "host_transformers_compute_loss" / "loss.py"), "token_loss")
    for on in (True, False):
        [run] = hosts.run_under_host(hosts.under(hosts.COMPUTE_LOSS, model.measured, on=on), [subject])
        assert not run.error and run.ran.startswith(f"transformers {model.measured}, real"), run
        if on and handed:
            assert run.moved and all(f"(×{hosts.WORLD_SIZE:.2f})" in m for m in run.moved.values()), run.moved
        else:
            assert not run.moved, (on, run.moved)


def test_the_compute_loss_rows_releases_are_its_models() -> None:
    # Default on from the model whose TrainingArguments says so (4.54.0); a compute_loss_func's loss hit when set on
    # from the first model multiplying it (4.49.0); set off, no model's write runs.
    row = hosts.facts.COMPUTE_LOSS
    assert row.releases == (">=4.54.0",)
    assert row.setting is not None and row.setting.releases_if_on == (">=4.49.0",) and row.setting.off_stops_it
    assert row.shown == f"transformers {row.releases[0].removeprefix('>=').removesuffix('.0')} and later"
    assert host_models.joined((">=4.49.0,<4.54.0", ">=4.54.0", ">=0.1,<0.2")) == (">=0.1,<0.2", ">=4.49.0")
