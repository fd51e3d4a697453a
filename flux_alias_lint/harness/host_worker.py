"""The subprocess that runs a real host release (hosts.py): ``python -m flux_alias_lint.harness.host_worker JOB OUT DIR``.

Started with the release's cache directory first on ``sys.path`` (and, for a host whose factor is the world
size, as one of several gloo ranks on 127.0.0.1). It unpickles ``(host, subjects)`` from JOB, checks that the
release it imports is the pinned one from that directory, runs each subject under the host's own code (a
fresh host object each, on a tiny CPU model) and writes one ``HostRun`` per subject as JSON to OUT.
"""

from __future__ import annotations

import importlib
import json
import pickle
import sys
import warnings
from pathlib import Path
from typing import Any

from .hosts import Host, HostRun, Made, observe

BASE = (0.5, 1.25, 2.0, 3.5)  # the tiny model's input: no zero, so every factor shows


def _accumulating_arguments(host: Host, work: str) -> Any:
    """A CPU run's `TrainingArguments` accumulating `host.factor` steps, logging and saving nothing."""
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=work,
        gradient_accumulation_steps=int(host.factor),
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
    )


def _tiny_model(torch: Any) -> Any:
    class Tiny(torch.nn.Module):
        """One parameter: ``{"loss": mean(w * x), "logits": w * x}``, a model output with a gradient to reach, as a
        Trainer expects (a mapping with its loss, keyword inputs, loss keyword arguments accepted)."""

        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(()))

        def forward(self, x: Any = None, labels: Any = None, **kwargs: Any) -> Any:
            logits = self.w * x
            return {"loss": logits.mean(), "logits": logits}

    return Tiny()


def _checked(host: Host) -> str:
    """How the run is named (``transformers 4.46.0, real``); RuntimeError unless the release imported is the
    pinned one from its cache directory."""
    release = host.release
    assert release is not None
    module = importlib.import_module(release.dist)
    where = Path(module.__file__ or "").resolve()
    if module.__version__ != release.version or release.path.resolve() not in where.parents:
        raise RuntimeError(
            f"imported {release.dist} {module.__version__} from {where}, not {release} from {release.path}"
        )
    return f"{release}, real: {host.said}"


def _trainer(host: Host, made: Made) -> Any:
    """The Trainer class the subject runs in: its own Trainer subclass (its ``compute_loss`` the subject), else one
    whose ``compute_loss`` calls the subject on the model's logits."""
    from transformers import Trainer

    if made.owner is not None and issubclass(made.owner, Trainer):

        class Own(made.owner):  # type: ignore[misc,name-defined]
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                return made(
                    None, self, model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
                )

        return Own

    class Hosted(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            return made(model(**inputs)["logits"])

    return Hosted


def training_step(host: Host, made: Made, work: str) -> list[Any]:
    """transformers' real ``Trainer.training_step``, the subject as the Trainer subclass's ``compute_loss``."""
    import torch

    model = _tiny_model(torch)
    args = _accumulating_arguments(host, work)
    trainer = _trainer(host, made)(model=model, args=args)
    trainer.current_gradient_accumulation_steps = int(host.factor)  # set by the train loop in releases that read it
    trainer.training_step(trainer.model, {"x": torch.tensor(BASE)})
    return [model.w.grad]


def model_forward(host: Host, made: Made, work: str) -> list[Any]:
    """transformers' real ``Trainer.training_step`` and base ``Trainer.compute_loss`` (or the project's Trainer subclass,
    ``host.trainer``, its own ``compute_loss``) on the subject's own model (its
    class made as a Trainer's user makes it: from its ``config_class``'s defaults, else with no argument), the
    subject its ``forward`` (with its own signature, which the Trainer reads, and its class's attributes) on a batch of
    token ids and labels; on several ranks, with the batch's token count as the train loop gives it."""
    import inspect

    import torch
    from transformers import Trainer

    cls = made.owner
    model = cls(cls.config_class()) if getattr(cls, "config_class", None) is not None else cls()

    def forward(**inputs: Any) -> Any:
        made(None, model, **inputs)
        return made.returned

    forward.__signature__ = inspect.signature(model.forward)  # type: ignore[attr-defined]
    model.forward = forward
    args = _accumulating_arguments(host, work)
    trainer = _project_trainer(host.trainer, Trainer)(model=model, args=args)
    trainer.current_gradient_accumulation_steps = int(host.factor)  # set by the train loop in releases that read it
    if host.world_size > 1 and trainer.accelerator.num_processes != host.world_size:
        raise RuntimeError(f"{trainer.accelerator.num_processes} processes, not {host.world_size}")
    ids = torch.tensor([[1, 2, 3, 4]])
    # On several ranks (`Trainer.compute_loss`'s world-size write), the count of tokens the train loop hands over.
    counted = {"num_items_in_batch": torch.tensor(ids.numel())} if host.world_size > 1 else {}
    trainer.training_step(trainer.model, {"input_ids": ids, "labels": ids + 1}, **counted)
    return [p.grad for p in model.parameters()]


def _project_trainer(where: str, default: type) -> type:
    """The project's Trainer subclass at ``where`` ("path:Class", its own `compute_loss` and all), else ``default``."""
    if not where:
        return default
    import importlib.util

    path, _, name = where.rpartition(":")
    spec = importlib.util.spec_from_file_location(f"_flux_trainer_{Path(path).stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)  # type: ignore[no-any-return]


def compute_loss(host: Host, made: Made, work: str) -> list[Any]:
    """transformers' real ``Trainer.training_step`` and base ``Trainer.compute_loss``, ``average_tokens_across_devices``
    as the run sets it, on this rank of the process group; the subject as its ``compute_loss_func``, called with
    the model's output and the labels (a function of one argument: with the logits)."""
    import torch
    from transformers import Trainer, TrainingArguments

    model = _tiny_model(torch)
    args = TrainingArguments(
        output_dir=work, use_cpu=True, report_to=[], save_strategy="no", average_tokens_across_devices=host.on
    )
    trainer = Trainer(
        model=model,
        args=args,
        compute_loss_func=lambda outputs, labels, num_items_in_batch=None: made(
            outputs["logits"], outputs, labels, num_items_in_batch=num_items_in_batch
        ),
    )
    if trainer.accelerator.num_processes != host.world_size:
        raise RuntimeError(f"{trainer.accelerator.num_processes} processes, not {host.world_size}")
    # Logits of one sequence of two tokens over two classes, as a causal LM's are (batch, tokens, classes).
    inputs = {"x": torch.tensor(BASE).view(1, 2, 2), "labels": torch.zeros(1, 2, dtype=torch.long)}
    trainer.training_step(trainer.model, inputs, num_items_in_batch=torch.tensor(len(BASE)))
    return [model.w.grad]


def backward(host: Host, made: Made, work: str) -> list[Any]:
    """accelerate's real ``Accelerator.backward`` on the loss the subject returns from the tiny model's output (and a
    label, for a criterion that takes one)."""
    import torch
    from accelerate import Accelerator

    model = _tiny_model(torch)
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=int(host.factor))
    logits = model(x=torch.tensor(BASE))["logits"]
    accelerator.backward(made(logits, logits, torch.tensor(0)))
    return [model.w.grad]


def lightning(host: Host, made: Made, work: str) -> list[Any]:
    """Lightning's real ``ClosureResult.from_training_step_output``, which divides what ``training_step`` returned by
    ``accumulate_grad_batches`` (its ``normalize``); the subject as a LightningModule's ``training_step``. Made in
    place (``host.in_place``), the same division is emulated in this process instead."""
    import torch
    from lightning.pytorch.loops.optimization.automatic import ClosureResult

    model = _tiny_model(torch)
    module = made.owner(lambda inputs: model(x=inputs)["logits"]) if made.owner is not None else None
    batch = (torch.tensor(BASE), torch.tensor(0))
    loss = made(model(x=batch[0])["logits"], module, batch, 0)
    if host.in_place:
        loss.div_(host.factor)
    else:
        loss = ClosureResult.from_training_step_output(loss, int(host.factor)).closure_loss
    loss.backward()
    return [model.w.grad]


def main(argv: list[str]) -> int:
    job, out, work = argv
    host, subjects = pickle.loads(Path(job).read_bytes())
    driver = globals()[host.driver]
    runs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ran = _checked(host)  # else no run: the caller emulates, saying why
        for subject in subjects:
            made = subject.make()
            made.pair = host.pair
            try:
                runs.append(observe(made, ran, driver(host, made, work)))
            except Exception as exc:  # the subject's code (or the host on it) refused: said in the verdict
                runs.append(HostRun(made.moved(), None, [], ran, f"{type(exc).__name__}: {exc}"))
    Path(out).write_text(json.dumps([run.to_dict() for run in runs]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
