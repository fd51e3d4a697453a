"""The ways a loss function reaches a caller that rescales its loss in place: one table.

Each entry names a convention the ecosystem writes, says in one paragraph what the index takes as
evidence of it, and names the fixture project (`fixtures/FAL001/<case>/`, shaped like the real
thing) that shows it. The index (`index/`) reads the conventions' data from here; docs/context.md
lists the same entries. Who rescales, in which releases, is the host table's (`facts/hosts.py`): each
schedule call names its row.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class HandOff:
    """A convention shown by how the index resolves calls and returns, with no data of its own."""

    name: str
    doc: str
    fixture: str  # a folder of fixtures/, e.g. "FAL001/pretrain_in_a_main_block"


@dataclasses.dataclass(frozen=True)
class ScheduleCall(HandOff):
    """A call of one of `callees` hands the schedule its `forward_step_func` (by keyword, or at
    `position`); `imported_from`: only where the callee's name is imported from that package."""

    callees: frozenset[str] = frozenset()
    position: int | None = None
    imported_from: str | None = None
    keyword: str = "forward_step_func"  # `loss_func`: what is handed over is the loss function itself
    does: str = "rescales the loss in place"  # what the callee does with it, for the step's text
    host: str = "megatron"  # the row of `facts/hosts.py` that rescales what the schedule is handed


@dataclasses.dataclass(frozen=True)
class Signature(HandOff):
    """A forward step known by its parameters alone (after `self`): each is one of its names, and
    `optional_first` may come before them. Only a guess: a hand-off call found anywhere wins."""

    params: tuple[tuple[str, ...], ...] = ()
    optional_first: tuple[str, ...] = ()
    shown: str = ""  # how the step names it


@dataclasses.dataclass(frozen=True)
class Patch(HandOff):
    """A function installed in place of another (`callees("pkg.mod.Class.name", fn)`, `setattr(owner,
    "name", fn)`, `Owner.name = fn`) takes the context of the function it replaces."""

    callees: frozenset[str] = frozenset()


MEGATRON_SCHEDULE = ScheduleCall(
    "megatron-schedule",
    "The forward step is passed as `forward_step_func` to Megatron's schedule: `get_forward_backward_func()(...)`, "
    "a `forward_backward_*` function, whatever is named `forward_backward_func` (`self.forward_backward_func`), "
    "or `forward_step` (first argument), whatever the forward step's parameter names "
    "(`forward_step(batch_iter, model)`). The call may be anywhere in the project: in a function, a test's "
    "`setup_method`, at module level or under `if __name__ == '__main__':`.",
    "FAL001/loss_object_method",
    callees=frozenset(
        {
            "forward_backward_func",
            "forward_backward_no_pipelining",
            "forward_backward_pipelining_with_interleaving",
            "forward_backward_pipelining_without_interleaving",
            "forward_step",
        }
    ),
    position=0,  # `forward_step`'s; the `forward_backward_*` functions take it by keyword only
)
MEGATRON_LM_PRETRAIN = ScheduleCall(
    "megatron-lm-pretrain",
    "Megatron-LM's `pretrain(datasets_provider, model_provider, model_type, forward_step_func, ...)`.",
    "FAL001/pretrain_in_a_main_block",
    callees=frozenset({"pretrain"}),
    position=3,
)
BRIDGE_ENTRY_POINTS = ScheduleCall(
    "megatron-bridge-entry-points",
    "Megatron-Bridge's `pretrain(config, forward_step_func)` and `finetune(config, forward_step_func)` (second "
    "argument or keyword), imported from `megatron.bridge`: they wrap the forward step "
    "(`prepare_forward_step_func`) and hand it to `forward_backward_func`.",
    "FAL001/bridge_forward_step_functor",
    callees=frozenset({"pretrain", "finetune"}),
    position=1,
    imported_from="megatron.bridge",
    does="hands it to Megatron's schedule",
)
MEGATRON_LM_SIGNATURE = Signature(
    "megatron-lm-signature",
    "A function with Megatron-LM's forward-step signature `(data_iterator, model, ...)` (or `data_iter`, "
    "`dataloader_iter`), when no call handing it over is seen.",
    "FAL001/partial_chosen_in_a_branch",
    params=(("data_iterator", "data_iter", "dataloader_iter"), ("model",)),
    shown="Megatron's forward-step signature (data_iterator, model, ...)",
)
BRIDGE_SIGNATURE = Signature(
    "megatron-bridge-signature",
    "Megatron-Bridge's forward-step signature `(state, data_iterator, model[, return_schedule_plan])`, a function "
    "or a functor class's `__call__(self, state, data_iterator, model)`, when no call handing it over is seen.",
    "FAL001/bridge_forward_step_signature",
    params=(("data_iterator", "data_iter", "dataloader_iter"), ("model",)),
    optional_first=("state", "global_state"),
    shown="Megatron-Bridge's forward-step signature (state, data_iterator, model, ...)",
)
RETURNED_LOSS_FUNCTION = HandOff(
    "returned-loss-function",
    "What a forward step returns second is Megatron's loss function: a closure, a function or method, a "
    "`functools.partial` of one, a lambda and what it calls, what a factory returns (Megatron-Bridge's "
    "`_create_loss_function` returns a `partial` of `masked_next_token_loss`), an instance of a class of the "
    "project (its `__call__`, or where the project defines none its `forward`: a `torch.nn.Module` loss such as "
    "NeMo's `SigLipLoss`), or a method of an attribute whose "
    "class is declared (`self.loss_func: BaseLossFunc`, then `partial(self.loss_func.compute_loss, ...)`: that "
    "class's method and its subclasses' in the project).",
    "FAL001/loss_object_method",
)
MODEL_FORWARD = HandOff(
    "model-forward",
    "The forward step unpacks `loss, loss_dict = model(x)` (its parameter `model`) and returns a closure returning "
    "exactly those two names (NeMo-1's text-to-image models: `def dummy(output_tensor): return loss, loss_dict`): "
    "the `forward` of the class the schedule call's `model=self.model` is an instance of (made in its class by "
    "`Class(...)` or by a method returning one, `self.model = self.model_provider_func()`) returns what the "
    "schedule rescales, and what that `forward` returns in turn (`delegated`).",
    "FAL002/loss_made_in_the_models_forward",
)
BOUND_BY_PARTIAL = HandOff(
    "bound-by-partial",
    "The forward step is handed over as `partial(self.inner_forward_step, forward_func)` and returns that "
    "parameter as the loss function, itself or through a wrapper returning its `(loss, report)`; what the partial "
    "binds is followed back to the callers of the function making it (a method whose receiver's type is not "
    "known is matched by name).",
    "FAL001/loss_passed_through_a_strategy",
)
RETURNED_AS_THE_LOSS = HandOff(
    "returned-as-the-loss",
    "A reached loss function returns, as its loss, what a callable parameter of an enclosing function returns "
    "(AReaL's engine: `loss = process_output_fn(output_, input_)` in a closure of the forward step, then `return "
    "loss, {}`): what that function's callers pass for the parameter returns the loss itself, so its return value "
    "is what is rescaled (a value it keeps is changed too: FAL005). What it returns is checked as the loss, not as "
    "a `(loss, report)` tuple.",
    "FAL005/loss_returned_through_a_callable",
)
DELEGATED = HandOff(
    "delegated",
    "A reached loss function returns the `(loss, report)` of a function it calls (`return loss_func_modelopt(...)`, "
    "or `loss, metrics = "
    "loss_fn(**kwargs)` and then `return loss, metrics`, or a report it `.update`s with `metrics`, as RLinf's "
    "`policy_loss` and its registered losses do): that function takes the caller's context, and so on down.",
    "FAL001/loss_delegated_through_a_registry",
)
REGISTRY = HandOff(
    "decorator-registry",
    "A loss function looked up in a dict a decorator fills (RLinf's `@register_policy_loss('ppo')`, whose "
    "decorator stores `LOSS_REGISTRY[name] = wrapper`, a wrapper returning `fn(...)`; then `get_policy_loss(name)` "
    "returns `LOSS_REGISTRY[name]`) is every function of the project decorated with it.",
    "FAL001/loss_delegated_through_a_registry",
)
CALC_LOSS = ScheduleCall(
    "forward-step-calc-loss",
    "A function passed as `loss_func` to megatron-core's `forward_step_calc_loss` (third argument).",
    "FAL001/calc_loss_called_directly",
    callees=frozenset({"forward_step_calc_loss"}),
    position=2,
    keyword="loss_func",
)
LOSS_REDUCTION = HandOff(
    "nemo-loss-reduction",
    "The `forward` of a subclass of NeMo's `MegatronLossReduction` (NeMo 2 and BioNeMo hand the reduction to "
    "Megatron's schedule through `MegatronParallel`), unless only an FSDP strategy runs it: every strategy its "
    "module makes is an `FSDPStrategy` or `FSDP2Strategy` (they call `forward` themselves) and no other module "
    "imports the class or its module.",
    "FAL002/megatron_loss_reduction",
)
PATCH = Patch(
    "patch-registry",
    "A loss function installed in place of another takes the context of what it replaces: MindSpeed's "
    "`register_patch('pkg.mod.Trainer.loss_func', fn)` (and `register`), `setattr(owner, 'loss_func', fn)`, "
    "`Owner.loss_func = fn`.",
    "FAL001/loss_func_patched_by_a_registry",
    callees=frozenset({"register_patch", "register"}),
)
ENTRY_RETURNED = HandOff(
    "entry-returned",
    "A reached loss function returns as its loss an entry of what a call gave (`output = model(samples)`, then "
    '`return output["loss"], loss_dict`, as LAVIS\' `BaseTask.train_step` does; `return model(x)["loss"]`): the '
    "functions called, a model's `forward` among them, return a dict whose entry is rescaled (`Reach.entry`).",
    "FAL005/own_loop_model_from_a_decorator_registry",
)
CLASS_REGISTRY = HandOff(
    "class-registry",
    "A model picked by name from a registry of classes is an instance of each class it may hold, and calling it runs "
    "that class's `forward`: a decorator storing the class it decorates (LAVIS' `@registry.register_model(\"opt\")`, "
    "read by `registry.get_model_class(name)`, then `model_cls.from_config(cfg)`), a dict display of classes, a "
    "module's namespace (`models_llama_adapter.__dict__[args.model](args)`, fixture "
    "`FAL005/own_loop_model_from_a_module_namespace`); through `DistributedDataParallel(model)` too. A constant key "
    "keeps its entry; a parameter nothing resolves is no class.",
    "FAL005/own_loop_model_from_a_decorator_registry",
)
IN_PLACE_CALLER = HandOff(
    "in-place-caller",
    "A caller unpacks `loss, report = f(...)` (or three names), or binds `loss = f(...)` (the loss returned whole: "
    "FAL005's captures of it; or `c_loss = f(...)`, then `loss = c_loss`; or `result = f(...)`, then "
    '`loss = result["loss"]`, the captures of that entry: timm\'s `_forward`), and then rescales `loss` in place '
    "(`loss *= k`, `loss /= n`, `loss.div_(n)`, "
    "`loss.mul_(k)`; not by 1, which changes nothing): context `in-place-caller`.",
    "FAL002/in_place_caller_tuple_report",
)

HAND_OFFS: tuple[HandOff, ...] = (
    MEGATRON_SCHEDULE,
    BRIDGE_ENTRY_POINTS,  # before Megatron-LM's `pretrain`: the first entry a call matches is its
    MEGATRON_LM_PRETRAIN,
    MEGATRON_LM_SIGNATURE,
    BRIDGE_SIGNATURE,
    RETURNED_LOSS_FUNCTION,
    MODEL_FORWARD,
    BOUND_BY_PARTIAL,
    RETURNED_AS_THE_LOSS,
    DELEGATED,
    REGISTRY,
    CALC_LOSS,
    LOSS_REDUCTION,
    PATCH,
    ENTRY_RETURNED,
    CLASS_REGISTRY,
    IN_PLACE_CALLER,
)

# Megatron's getter of the schedule: calling what it returns runs the schedule.
SCHEDULE_GETTER = "get_forward_backward_func"

SCHEDULE_CALLS = tuple(entry for entry in HAND_OFFS if isinstance(entry, ScheduleCall))
SIGNATURES = tuple(entry for entry in HAND_OFFS if isinstance(entry, Signature))
