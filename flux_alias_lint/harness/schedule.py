"""Run a forward step through megatron-core's real schedule on one CPU rank, and compare its reports.

``get_forward_backward_func()`` → ``forward_backward_no_pipelining`` → ``forward_step`` →
``forward_step_calc_loss`` → ``backward_step``, all unmodified: the only patches are the CUDA
redirections of cpu.py, and only where torch has no GPU. The schedule needs torch.distributed and
Megatron's parallel state, both process-global: ``single_rank_megatron()`` sets up one gloo rank on
the loopback address and tears down what it set up.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from unittest import mock

from ._deps import quiet, require, require_torch
from .assertions import scale_factor
from .cpu import on_cpu_unless_gpu
from .guard import callable_name
from .megatron import installed_megatron_version
from .report import iter_report_tensors

torch = require_torch()

ForwardStepFunc = Callable[[Iterator[Any], Any], tuple[Any, Callable[..., Any]]]

# What the stand-in model takes: a batch of 2 samples of 4 features, distinct non-zero values.
DEFAULT_BATCH = torch.arange(1.0, 9.0).view(2, 4)


def _megatron(module: str) -> Any:
    with quiet():
        return require(f"megatron.core{module}", "megatron-core")


@contextlib.contextmanager
def single_rank_megatron() -> Iterator[None]:
    """torch.distributed and Megatron's parallel state as one rank (tp 1, pp 1, cp 1), for the duration.

    Whatever is already initialized (a test session's own process group) is used as it is and left
    alone; what this sets up, it destroys on exit, so a later test starts from a clean process.
    """
    distributed, parallel_state = torch.distributed, _megatron(".parallel_state")
    with contextlib.ExitStack() as stack:
        if not distributed.is_initialized():
            # Gloo binds the interface GLOO_SOCKET_IFNAME names; port 0: the store picks a free one.
            stack.enter_context(mock.patch.dict(os.environ, {"GLOO_SOCKET_IFNAME": "lo"}))
            store = distributed.TCPStore("127.0.0.1", 0, 1, is_master=True)
            distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
            stack.callback(distributed.destroy_process_group)
        if not parallel_state.model_parallel_is_initialized():
            with quiet():
                parallel_state.initialize_model_parallel(1, 1)
            stack.callback(parallel_state.destroy_model_parallel)
        yield


@functools.cache
def _stand_in_model_class() -> type:
    module = _megatron(".transformer.module")
    config = _megatron(".transformer.transformer_config")

    class StandInModel(module.MegatronModule):
        """The smallest model Megatron's schedule accepts: one linear layer over 4 features."""

        def __init__(self) -> None:
            super().__init__(
                config.TransformerConfig(
                    num_layers=1, hidden_size=4, num_attention_heads=1, use_cpu_initialization=True
                )
            )
            self.linear = torch.nn.Linear(4, 4)

        def set_input_tensor(self, input_tensor: Any) -> None:
            pass  # a single pipeline stage takes its input from the batch

        def forward(self, batch: Any) -> Any:
            return self.linear(batch)

    return StandInModel


@functools.cache
def _shaped_model_class() -> type:
    module = _megatron(".transformer.module")
    config = _megatron(".transformer.transformer_config")

    class ShapedModel(module.MegatronModule):
        """A model whose output is a given tensor times one parameter: the shape and values a loss function
        consumes, with a gradient for Megatron's backward step to reach."""

        def __init__(self, output: Any) -> None:
            super().__init__(
                config.TransformerConfig(
                    num_layers=1, hidden_size=4, num_attention_heads=1, use_cpu_initialization=True
                )
            )
            self.scale = torch.nn.Parameter(torch.ones(()))
            self.output = output

        def set_input_tensor(self, input_tensor: Any) -> None:
            pass  # a single pipeline stage takes its input from the batch

        def forward(self, batch: Any) -> Any:
            return self.scale * self.output

    return ShapedModel


def shaped_model(output: Any) -> Any:
    """A stub ``MegatronModule`` whose ``model(batch)`` is ``output`` (a float tensor), through a parameter."""
    with quiet():
        return _shaped_model_class()(output)


def stand_in_model() -> Any:
    """A tiny ``MegatronModule`` (``TransformerConfig(use_cpu_initialization=True)``): ``model(batch)`` for a [n, 4] batch."""
    with quiet():  # TransformerConfig warns about settings the stand-in does not use
        return _stand_in_model_class()()


def run_schedule(
    forward_step_func: ForwardStepFunc,
    model: Any = None,
    *,
    batch: Any = DEFAULT_BATCH,
    num_microbatches: int,
    forward_only: bool = False,
    collect_non_loss_data: bool = False,
) -> list[Any]:
    """Megatron's ``forward_data_store`` after one step: one report per microbatch, in order.

    Every microbatch gets ``batch`` (the data iterator repeats it). ``model`` defaults to
    ``stand_in_model()``; like Megatron's training loop it is in train mode for a training step and
    in eval mode for a ``forward_only`` one (its mode is restored after), and it is given
    ``model_type`` if it has none, as Megatron's ``get_model`` does.
    """
    model = stand_in_model() if model is None else model
    if not hasattr(model, "model_type"):
        model.model_type = _megatron(".enums").ModelType.encoder_or_decoder
    was_training = model.training
    model.train(not forward_only)
    try:
        with single_rank_megatron(), on_cpu_unless_gpu():
            return _megatron(".pipeline_parallel").get_forward_backward_func()(
                forward_step_func=forward_step_func,
                data_iterator=itertools.repeat(batch),
                model=[model],
                num_microbatches=num_microbatches,
                seq_length=1,  # seq_length and micro_batch_size: unused without pipelining
                micro_batch_size=1,
                forward_only=forward_only,
                collect_non_loss_data=collect_non_loss_data,
            )
    finally:
        model.train(was_training)


class _LossRecorder:
    """Wraps a forward step to note each loss it returns (before Megatron rescales it) and its loss function's name."""

    def __init__(self, forward_step_func: ForwardStepFunc) -> None:
        self.forward_step_func = forward_step_func
        self.losses: list[Any] = []
        self.names: list[str] = []

    def __call__(self, data_iterator: Iterator[Any], model: Any) -> tuple[Any, Callable[..., Any]]:
        output_tensor, loss_func = self.forward_step_func(data_iterator, model)
        self.names.append(callable_name(loss_func))

        def recorded(*args: Any, **kwargs: Any) -> Any:
            outputs = loss_func(*args, **kwargs)
            self.losses.append(outputs[0].detach().clone())
            return outputs

        return output_tensor, recorded


def _agrees(reference: Any, tensor: Any) -> bool:
    if reference.shape != tensor.shape:
        return False
    if reference.is_floating_point() or reference.is_complex():
        # A tolerance for a GPU's non-deterministic reductions; any rescale is far outside it.
        return bool(torch.allclose(tensor, reference, rtol=1e-5, atol=0.0, equal_nan=True))
    return bool(torch.equal(tensor, reference))


def _disagreements(reference: Any, reports: Sequence[Any]) -> list[str]:
    """``report["loss"][0] ×0.50`` for each report leaf of any microbatch that differs from ``reference``."""
    expected = dict(iter_report_tensors(reference))
    found: dict[str, None] = {}  # ordered and without repeats: microbatches usually agree with each other
    with torch.no_grad():
        for report in reports:
            for path, tensor in iter_report_tensors(report):
                if path not in expected:
                    found[f"{path} is not in the report at 1 microbatch"] = None
                elif not _agrees(expected[path], tensor):
                    found[f"{path} {_moved(expected[path], tensor)}"] = None
    return list(found)


def _moved(reference: Any, tensor: Any) -> str:
    if reference.shape != tensor.shape:
        return f"has shape {list(tensor.shape)}, not {list(reference.shape)}"
    return scale_factor(reference, tensor)


def report_disagreements(
    forward_step_func: ForwardStepFunc, model: Any = None, *, batch: Any = DEFAULT_BATCH, num_microbatches: int = 2
) -> list[str]:
    """How the reports at ``num_microbatches`` differ from the report at 1, in training and in forward-only mode.

    One line per mode and report leaf, e.g. ``training, 2 microbatches: report["loss"][0] ×0.50``;
    empty if every leaf agrees. ValueError if every loss was zero: no rescale could show.
    """
    return _compare(_LossRecorder(forward_step_func), model, batch, num_microbatches)


def _compare(recorder: _LossRecorder, model: Any, batch: Any, num_microbatches: int) -> list[str]:
    if num_microbatches < 2:
        raise ValueError(f"compare against at least 2 microbatches, not {num_microbatches}")
    model = stand_in_model() if model is None else model  # one model for every run: the same weights
    lines = []
    with single_rank_megatron():
        for forward_only in (False, True):
            mode = "forward-only" if forward_only else "training"
            [reference] = run_schedule(recorder, model, batch=batch, num_microbatches=1, forward_only=forward_only)
            reports = run_schedule(
                recorder, model, batch=batch, num_microbatches=num_microbatches, forward_only=forward_only
            )
            lines += [f"{mode}, {num_microbatches} microbatches: {line}" for line in _disagreements(reference, reports)]
    if not any(bool(torch.any(loss != 0)) for loss in recorder.losses):
        raise ValueError(
            "every loss was zero, so no rescale can show in the report; give a batch that makes a non-zero loss"
        )
    return lines


def assert_reports_agree(
    forward_step_func: ForwardStepFunc, model: Any = None, *, batch: Any = DEFAULT_BATCH, num_microbatches: int = 2
) -> None:
    """Fail, naming each report path and its factor, if any report leaf differs between 1 and ``num_microbatches``.

    Runs ``forward_step_func`` through Megatron's real schedule (cp size 1, so the microbatch factor
    shows undisguised) in training and in forward-only mode; see ``run_schedule`` for ``model`` and ``batch``.
    """
    __tracebackhide__ = True
    recorder = _LossRecorder(forward_step_func)
    lines = _compare(recorder, model, batch, num_microbatches)
    if lines:
        raise AssertionError(
            f"the report of {recorder.names[0]} changes with the number of microbatches "
            f"(megatron-core {installed_megatron_version()}, forward_backward_no_pipelining, cp size 1; "
            "compared with 1 microbatch):\n"
            + "".join(f"  {line}\n" for line in lines)
            + "Megatron rescales the loss in place (loss /= num_microbatches) before it stores the report, "
            "so a report value sharing its storage moves with it. Put a copy in the report: loss.detach().clone()"
        )
