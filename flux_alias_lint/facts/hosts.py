"""The hosts that rescale a returned loss in place after the loss function returned it: one table.

Each row is one host: the call through which it receives the user's loss, the in-place operation and
its factor, what the factor depends on, and the releases that do it (PEP 440 specifiers, read by
`index/versions.py`; measured by running each release's own code, docs/context.md "Hosts"). A row's
`name` is the context of the findings it proves (`index/reach.py`). The project's own accumulation
loop (`in-place-caller`) needs no row: it is in the project, whatever the release. Where a host is modelled as
code (`hosts/*.pyi`, `index/host_models.py`: transformers' `Trainer.training_step` and `Trainer.compute_loss`, accelerate's
`Accelerator.backward`), its row's releases (and its setting's: which releases a setting set on turns it on in,
whether setting it off stops it) are the models' and which project functions it reaches is theirs; the row keeps
what a finding says. Out of place, and
so no rows: Lightning, DeepSpeed, torchtitan, Colossal-AI, NeMo, Megatron-Bridge, TRL, axolotl.
"""

from __future__ import annotations

import dataclasses

from ..index import host_models


@dataclasses.dataclass(frozen=True)
class Setting:
    """A setting the factor depends on, read where a literal in the project sets it
    (`index/settings.py`): `name=True`, `cfg.name = True`, `{"name": True}`, `assert cfg.name`."""

    name: str
    effect: str  # what setting it on does, said in a finding's message
    # The in-place releases when the project sets it on (None: as when it does not) ...
    releases_if_on: tuple[str, ...] | None = None
    # ... and whether setting it off (a literal False) turns the rescale off in every release.
    off_stops_it: bool = False
    # On, the rescale leaves a returned `(loss, num_tokens, report)` as it is (Megatron's per-token loss).
    on_spares_three_tuples: bool = False


@dataclasses.dataclass(frozen=True)
class Host:
    """One host that rescales the loss it receives in place."""

    name: str  # the context of its findings
    distribution: str  # the PyPI distribution whose releases do it (a project may declare it under `aliases` too)
    receives: str  # the call through which it receives the user's loss
    does: str  # who does what to it, in a finding's message
    operation: str  # the in-place operation, as the release writes it
    factor: str  # what a kept alias is multiplied by
    depends_on: tuple[str, ...]  # what the factor (or whether it happens) depends on
    releases: tuple[str, ...]  # the releases that do it: PEP 440 specifier sets, any of them
    shown: str  # the same releases, said
    line: str  # where the operation is in those releases
    fixture: str  # a folder of fixtures/ showing it, with its own pin
    doc: str
    setting: Setting | None = None
    # What the loss is next rescaled by once this host returned it (a compute_loss_func's loss goes on
    # to `training_step`): used where this host's own releases are excluded.
    then: str | None = None
    # The loss function may return `(loss, outputs)` instead (`compute_loss(..., return_outputs=True)`): its
    # first element is the loss the host receives bare, so a capture of it is this host's too.
    or_first_of_pair: bool = False
    # The loss function returns a dict and the host rescales in place only its entry under this key (Composer's
    # `'total'`): a capture of that entry is this host's, a bare returned loss is not.
    entry: str | None = None
    # Other names the same releases are published under on PyPI (`composer` is `mosaicml` from 0.13.2).
    aliases: tuple[str, ...] = ()
    # The import package a checkout of the host's own repository is: its `__version__` is the release there.
    package: str | None = None

    @property
    def distributions(self) -> tuple[str, ...]:
        """Every name a project may declare the host's releases under."""
        return (self.distribution, *self.aliases)


MEGATRON = Host(
    "megatron",
    "megatron-core",
    "a forward step handed to Megatron's schedule returns `(output_tensor, loss_func)`; the schedule calls "
    "`loss_func(output_tensor)` (`index/handoffs.py`: the schedule rows)",
    "Megatron divides it in place by num_microbatches",
    "`output_tensor /= num_microbatches` (after `*= cp_size` on the 2-tuple path from 0.12; a 3-tuple's loss also "
    "`/= num_tokens`)",
    "× cp size ÷ num_microbatches (2-tuple); ÷ num_tokens ÷ num_microbatches (3-tuple)",
    ("microbatches", "cp size", "calculate_per_token_loss"),
    (">=0.7.0",),
    "megatron-core 0.7 and later",
    "megatron/core/pipeline_parallel/schedules.py, forward_step_calc_loss (forward_step before 0.15)",
    "FAL005/host_megatron",
    "Megatron's schedule rescales the first element of what the loss function returns, in place, before it "
    "stores the report; 0.6 and older divide out of place.",
    setting=Setting(
        "calculate_per_token_loss",
        "leaves a 3-tuple's loss as it is",
        on_spares_three_tuples=True,
    ),
)
# transformers' `Trainer.__init__` sets the state its `compute_loss` write is under (`self.model_accepts_loss_kwargs`,
# hosts/transformers-4.*.pyi) from the model: its `accepts_loss_kwargs` attribute where it has one, else whether its
# `forward` takes `**kwargs` (4.49.0 trainer.py:633-638, 4.57.1 :635-641; tests/test_host_models.py reads them).
LOSS_KWARGS_STATE = "model_accepts_loss_kwargs"
LOSS_KWARGS_ATTRIBUTE = "accepts_loss_kwargs"
_HANDED_FUNC = ("attribute", "compute_loss_func")  # what the `compute_loss_func` handed to the Trainer returns
TRAINING_STEP = Host(
    "transformers-training-step",
    "transformers",
    "a `Trainer` subclass's `compute_loss` override returns the loss to `Trainer.training_step`",
    "Trainer.training_step multiplies it in place by gradient_accumulation_steps",
    "`loss *= self.args.gradient_accumulation_steps`",
    "× gradient_accumulation_steps",
    ("grad-accum steps",),
    host_models.releases("transformers-training-step"),  # its model: hosts/transformers-4.46.0.pyi
    "transformers 4.46.0–4.46.1",
    "trainer.py:3605 (4.46.0), right after compute_loss returns, before backward",
    "FAL005/host_transformers_training_step",
    "`Trainer.training_step` multiplies whatever `compute_loss` returned in place, before any `log()` or callback; "
    "an alias a `compute_loss` override keeps reads × gradient_accumulation_steps.",
    or_first_of_pair=True,
    package="transformers",
)
COMPUTE_LOSS = Host(
    "transformers-compute-loss",
    "transformers",
    "a `compute_loss_func=` passed to `Trainer(...)` (or a subclass: TRL's `SFTTrainer`) returns the loss to the "
    "base `Trainer.compute_loss`",
    "Trainer.compute_loss multiplies it in place by the world size",
    "`loss *= self.accelerator.num_processes`",
    "× world size",
    ("world size", "average_tokens_across_devices"),
    # its models': those whose setting is on by default (hosts/transformers-4.57.1.pyi)
    host_models.releases("transformers-compute-loss", _HANDED_FUNC, by_default=True),
    "transformers 4.54 and later",
    "trainer.py:3662 (4.46.2), :4154 (4.57), :2162 (5.18), before compute_loss returns",
    "FAL005/host_transformers_compute_loss",
    "The base `Trainer.compute_loss` multiplies the loss a `compute_loss_func` returned in place when "
    "`average_tokens_across_devices` is on (the default from 4.54; set on, from 4.49 for a `compute_loss_func`). An alias a "
    "`compute_loss` override takes after `super().compute_loss` returned is not hit (only `training_step` is).",
    setting=Setting(
        "average_tokens_across_devices",
        "turns the multiplication by the world size on",
        # its models': those whose compute_loss multiplies a compute_loss_func's loss (transformers-4.49.0.pyi on)
        releases_if_on=host_models.releases("transformers-compute-loss", _HANDED_FUNC),
        off_stops_it=host_models.always_under("transformers-compute-loss", "average_tokens_across_devices"),
    ),
    then="transformers-training-step",
    package="transformers",
)
ACCELERATE_BACKWARD = Host(
    "accelerate-backward",
    "accelerate",
    "`loss = f(...)` (or `loss, metrics = f(...)`) then `accelerator.backward(loss)`",
    "Accelerator.backward divides it in place by the grad-accum steps",
    "`loss /= self.gradient_accumulation_steps`",
    "÷ gradient_accumulation_steps",
    ("grad-accum steps",),
    host_models.releases("accelerate-backward"),  # its model: hosts/accelerate-0.12.0.pyi
    "accelerate 0.11.0–0.12.0",
    "accelerator.py:797 (0.11.0) / :878 (0.12.0), Accelerator.backward",
    "FAL005/host_accelerate_backward",
    "`Accelerator.backward` divides the loss it is given in place before backpropagating it; 0.13.0 divides out "
    "of place.",
    package="accelerate",
)
COMPOSER = Host(
    "composer",
    "mosaicml",
    "a `ComposerModel` subclass's `loss(outputs, batch)` returns the loss to `Trainer._train_microbatch`",
    "Composer's trainer multiplies it in place by microbatch/batch size",
    "`loss.mul_(microbatch_num_samples / current_batch_size)`",
    "× microbatch size / batch size",
    ("microbatches",),
    (">=0.2.0,<0.9.0",),
    "Composer 0.2–0.8.2",
    "composer/trainer/trainer.py:1798 (0.8.2), Trainer._train_microbatch, each element of `ensure_tuple(loss)`",
    "FAL005/host_composer",
    "Composer's trainer multiplies every returned loss in place (every element of a tuple, every value of a dict; "
    "emulated: no public case found); 0.9 sums them into a new tensor first; 0.10 and later only a dict loss's "
    "'total' (`composer-total`).",
    aliases=("composer",),
    package="composer",
)
COMPOSER_TOTAL = Host(
    "composer-total",
    "mosaicml",
    "a `ComposerModel` subclass's `loss(outputs, batch)` returns a dict with a `'total'` entry to "
    "`Trainer._train_microbatch`",
    "Composer's trainer multiplies its 'total' entry in place by microbatch/batch size",
    "`microbatch_loss.mul_(microbatch_num_samples / current_batch_size)`",
    "× microbatch size / batch size",
    (
        "microbatches",
        "precision (amp_fp16, the GPU default, scales a copy first)",
        "DeepSpeed before 0.28 (no multiplication)",
    ),
    (">=0.2.0,<0.9.0", ">=0.10.0"),
    "Composer 0.2–0.8.2 and 0.10 and later",
    "composer/trainer/trainer.py:1937–1968 (0.10.0), :2431–2462 (0.16.0), :2962–2990 (0.32.1), "
    "Trainer._train_microbatch: `microbatch_loss = self.state.loss['total']`",
    "FAL005/host_composer_total",
    "From 0.10 Composer's trainer takes a dict loss's 'total' entry itself as the loss to backpropagate and "
    "multiplies it in place; a dict without 'total', a tensor or a tuple is summed into a new tensor first, which "
    "no kept value shares (0.9 sums every loss so). Not when AMP fp16 grad scaling is on (`scaler.scale` makes a "
    "copy) nor under DeepSpeed (0.10–0.27.0; gone in 0.28.0); 0.2–0.8.2 multiply every value of a dict, 'total' too.",
    entry="total",
    aliases=("composer",),
    package="composer",
)

HOSTS: tuple[Host, ...] = (MEGATRON, TRAINING_STEP, COMPUTE_LOSS, ACCELERATE_BACKWARD, COMPOSER, COMPOSER_TOTAL)
BY_NAME: dict[str, Host] = {host.name: host for host in HOSTS}


@dataclasses.dataclass(frozen=True)
class OutOfPlace:
    """A host that rescales the loss it receives out of place, so a kept alias never moves: no findings, and no
    row above. Its line is recorded for the run that proves a negative pinning it (harness/hosts.py)."""

    name: str
    distribution: str
    receives: str  # who receives the loss, as a run names it
    operation: str  # the out-of-place operation, as the release writes it
    factor: str  # the setting that is its factor
    line: str  # where it is

    @property
    def distributions(self) -> tuple[str, ...]:
        return (self.distribution,)


LIGHTNING = OutOfPlace(
    "lightning",
    "lightning",
    "Lightning's automatic optimization",
    "`closure_loss = closure_loss / normalize`",
    "accumulate_grad_batches",
    "lightning/pytorch/loops/optimization/automatic.py, ClosureResult.from_training_step_output (2.4.0)",
)
OUT_OF_PLACE: tuple[OutOfPlace, ...] = (LIGHTNING,)
OUT_OF_PLACE_BY_NAME: dict[str, OutOfPlace] = {host.name: host for host in OUT_OF_PLACE}
