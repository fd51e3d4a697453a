"""The model a project hands to transformers' Trainer (`HostEvidence._models_handed`): its `forward` is what the host
models' `model(**inputs)` runs, so a capture of the loss it returns is reached by the writes after the base
`compute_loss` (tests/test_host_models.py runs each shape's fixture through the real release)."""

from __future__ import annotations

import textwrap

import pytest

from flux_alias_lint.index.project import ProjectIndex

MODEL = """
import torch
from transformers import Trainer, TrainingArguments


class TinyLM(torch.nn.Module):{attribute}
    def forward(self, input_ids, labels{kwargs}):
        loss = torch.nn.functional.cross_entropy(self.head(input_ids), labels)
        self.last_loss = loss.detach()
        return {{"loss": loss}}

    @classmethod
    def load(cls):
        return cls()


def make_model():
    return TinyLM()

"""


def _reached(main: str, kwargs: str = "", attribute: str = "") -> dict[str, tuple[str, bool, str]]:
    """The forward's reaches: context → (the first step, whole return, entry)."""
    attribute = f"\n    accepts_loss_kwargs = {attribute}\n" if attribute else ""
    source = MODEL.format(kwargs=kwargs, attribute=attribute) + textwrap.dedent(main)
    index = ProjectIndex.of_source(source, "train.py")
    line = source.splitlines().index(f"    def forward(self, input_ids, labels{kwargs}):") + 1
    found = {}
    for (_, at), reach in index.reached.items():
        for each in (reach, *reach.also):
            if at == line:
                found[each.context] = (each.steps[0].what, each.whole_return, each.entry)
    return found


@pytest.mark.parametrize(
    "main",
    [
        "Trainer(model=TinyLM(), args=TrainingArguments('out')).train()",
        "Trainer(TinyLM(), TrainingArguments('out')).train()",
        """
        def main():
            model = TinyLM()
            Trainer(model=model, args=TrainingArguments("out")).train()
        """,
        """
        def main():
            model = TinyLM.from_pretrained("ckpt")
            Trainer(model=model).train()
        """,
        "Trainer(model_init=make_model, args=TrainingArguments('out')).train()",
        """
        class MyTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

        MyTrainer(model=TinyLM()).train()
        """,
    ],
    ids=["keyword", "positional", "a-name", "from-pretrained", "model-init", "subclass-calling-the-base"],
)
def test_a_model_handed_to_a_trainer_has_its_forward_reached(main: str) -> None:
    [(context, (first, whole, entry))] = _reached(main).items()
    assert context == "transformers-training-step"
    assert first == "TinyLM is handed as the model to " + ("MyTrainer" if "MyTrainer" in main else "Trainer")
    assert (whole, entry) == (True, "loss")


@pytest.mark.parametrize(
    "main",
    [
        # the subclass's compute_loss never calls the base: the forward's loss is not what the host multiplies
        """
        class MyTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                return model(**inputs)["logits"].sum()

        MyTrainer(model=TinyLM()).train()
        """,
        # a compute_loss_func's loss is the loss then
        "Trainer(model=TinyLM(), compute_loss_func=lambda outputs, labels, num_items_in_batch=None: outputs).train()",
        # another library's Trainer (Lightning's takes no model, a project's own is no host)
        """
        from lightning import Trainer as LightningTrainer
        LightningTrainer(TinyLM()).fit()
        """,
        """
        class Trainer:
            def __init__(self, model):
                self.model = model
        Trainer(TinyLM())
        """,
    ],
    ids=["own-compute-loss", "compute-loss-func", "lightning", "own-trainer"],
)
def test_a_model_the_base_compute_loss_does_not_take_the_loss_of_is_not_reached(main: str) -> None:
    assert _reached(main) == {}


def test_a_forward_taking_kwargs_is_reached_by_the_world_size_write_too() -> None:
    # 4.57.1's `loss *= num_processes` under `model_accepts_loss_kwargs`: a `forward` with `**kwargs`
    main = "Trainer(model=TinyLM()).train()"
    assert set(_reached(main)) == {"transformers-training-step"}
    assert set(_reached(main, ", **kwargs")) == {"transformers-training-step", "transformers-compute-loss"}


def test_only_the_functions_holding_a_hand_off_word_are_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file the host gate lets through (`Trainer(` and `model`) is searched function by function only where a
    function holds a word a hand-off needs: Lightning's `trainer: Trainer` parameters call nothing."""
    from flux_alias_lint.index.hosts import HostEvidence

    searched: list[str] = []
    real = HostEvidence._handed_to_hosts
    monkeypatch.setattr(
        HostEvidence,
        "_handed_to_hosts",
        lambda self, module, scope, function: (
            searched.append(getattr(function, "name", "<module>")) or real(self, module, scope, function)
        ),
    )
    plain = "".join(f"\n\ndef step_{n}(model, trainer: Trainer):\n    return model(trainer)\n" for n in range(50))
    _reached("\n\ndef main():\n    Trainer(model=TinyLM(), args=TrainingArguments('out'))\n" + plain)
    assert searched == ["main", "<module>"]


@pytest.mark.parametrize(
    ("kwargs", "attribute", "written"),
    [
        ("", "True", True),
        (", **kwargs", "False", False),
        (", **kwargs", "None", False),
        ("", "config.use_loss_kwargs", True),
    ],
    ids=["attribute-on", "attribute-off-over-kwargs", "attribute-none", "attribute-computed"],
)
def test_the_models_accepts_loss_kwargs_comes_before_its_forwards_kwargs(
    kwargs: str, attribute: str, written: bool
) -> None:
    # transformers' `Trainer.__init__` (4.49+): `model_accepts_loss_kwargs` is the model's `accepts_loss_kwargs` where
    # it has one (InternVL sets it False over a `forward(..., **kwargs)`), else the forward's `**kwargs`.
    reached = _reached("Trainer(model=TinyLM()).train()", kwargs, attribute)
    assert ("transformers-compute-loss" in reached) is written


@pytest.mark.parametrize(
    ("returned", "entry"),
    [
        ("model(**inputs).loss", "loss"),
        ('model(**inputs)["loss"]', "loss"),
        ("model(**inputs)[0]", ""),
        ("model(**inputs).loss * 2", None),
        ("model(**inputs).logits.sum()", None),
    ],
)
def test_an_override_not_calling_the_base_is_walked_to_the_forward(returned: str, entry: str | None) -> None:
    # FlagEmbedding's `AbsEmbedderTrainer.compute_loss`: its own code returns the model's output's loss, which 4.46.0's
    # `training_step` multiplies in place; a new tensor made from it is not the forward's.
    main = f"""
    class MyTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
            outputs = {returned}
            return (outputs, None) if return_outputs else outputs

    MyTrainer(model=TinyLM()).train()
    """
    reached = _reached(main)
    if entry is None:
        assert reached == {}
    else:
        [(context, (first, whole, got))] = reached.items()
        assert (context, first, got, whole) == (
            "transformers-training-step",
            "TinyLM is handed as the model to MyTrainer",
            entry,
            bool(entry),
        )


def test_a_model_unpacked_from_a_method_the_subclass_overrides_is_the_trainers() -> None:
    # FlagEmbedding's runner: `self.tokenizer, self.model = self.load_tokenizer_and_model()` in the base, the model
    # made by the subclass's override, handed as `model=self.model`.
    main = """
    class Runner:
        def __init__(self):
            self.tokenizer, self.model = self.load()

        def load(self):
            raise NotImplementedError


    class MyRunner(Runner):
        def load(self):
            model = TinyLM()
            return None, model

        def train(self):
            Trainer(model=self.model).train()
    """
    assert set(_reached(main)) == {"transformers-training-step"}
