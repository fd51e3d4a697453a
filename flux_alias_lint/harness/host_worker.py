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


def _tiny_model(torch: Any) -> Any:
    class Tiny(torch.nn.Module):
        """One parameter: ``{"logits": w * x}``, a model output with a gradient to reach, as a Trainer expects
        (a mapping, keyword inputs, loss keyword arguments accepted)."""

        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(()))

        def forward(self, x: Any = None, labels: Any = None, **kwargs: Any) -> Any:
            return {"logits": self.w * x}

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
    return f"{release}, real: `{host.line}` with {host.setting}"


def training_step(host: Host, made: Made, work: str) -> list[Any]:
    """transformers' real ``Trainer.training_step``, the subject as the Trainer subclass's ``compute_loss``."""
    import torch
    from transformers import Trainer, TrainingArguments

    class Hosted(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            return made(model(**inputs)["logits"])

    model = _tiny_model(torch)
    args = TrainingArguments(
        output_dir=work,
        gradient_accumulation_steps=int(host.factor),
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
    )
    trainer = Hosted(model=model, args=args)
    trainer.training_step(trainer.model, {"x": torch.tensor(BASE)})
    return [model.w.grad]


def compute_loss(host: Host, made: Made, work: str) -> list[Any]:
    """transformers' real base ``Trainer.compute_loss`` with ``average_tokens_across_devices`` (on by default in
    the pinned release) on this rank of the process group, the subject as its ``compute_loss_func``."""
    import torch
    from transformers import Trainer, TrainingArguments

    model = _tiny_model(torch)
    args = TrainingArguments(
        output_dir=work, use_cpu=True, report_to=[], save_strategy="no", average_tokens_across_devices=True
    )
    trainer = Trainer(
        model=model,
        args=args,
        compute_loss_func=lambda outputs, labels, num_items_in_batch=None: made(outputs["logits"]),
    )
    if trainer.accelerator.num_processes != host.world_size:
        raise RuntimeError(f"{trainer.accelerator.num_processes} processes, not {host.world_size}")
    inputs = {"x": torch.tensor(BASE), "labels": torch.zeros(len(BASE), dtype=torch.long)}
    loss = trainer.compute_loss(trainer.model, inputs, num_items_in_batch=torch.tensor(len(BASE)))
    if loss.requires_grad and loss.numel() == 1:
        loss.backward()  # as training_step does next
    return [model.w.grad]


def backward(host: Host, made: Made, work: str) -> list[Any]:
    """accelerate's real ``Accelerator.backward`` on the loss the subject returns from the tiny model's output."""
    import torch
    from accelerate import Accelerator

    model = _tiny_model(torch)
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=int(host.factor))
    accelerator.backward(made(model(x=torch.tensor(BASE))["logits"]))
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
            try:
                runs.append(observe(made, ran, driver(host, made, work)))
            except Exception as exc:  # the subject's code (or the host on it) refused: said in the verdict
                runs.append(HostRun(made.moved(), None, [], ran, f"{type(exc).__name__}: {exc}"))
    Path(out).write_text(json.dumps([run.to_dict() for run in runs]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
