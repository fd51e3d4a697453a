"""Run the installed megatron-core's own rescale on a loss function's outputs, on a CPU.

Releases that have ``forward_step_calc_loss`` (0.14 on) take the pipeline stage and the
context-parallel size as arguments. Older ones only have ``forward_step``, which asks
``parallel_state`` for both; those queries are patched for the duration of the call so no
process group is needed. Everything else ``forward_step`` touches is given a stand-in.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Sequence
from typing import Any
from unittest import mock

from ._deps import quiet, require, require_torch

require_torch()


def _schedules() -> types.ModuleType:
    with quiet():
        return require("megatron.core.pipeline_parallel.schedules", "megatron-core")


def installed_megatron_version() -> str:
    """The version of the megatron-core that ``import megatron.core`` finds."""
    _schedules()
    return require("megatron.core.package_info", "megatron-core").__version__


class _StandInModel:
    """What ``forward_step`` asks of a model when the loss function's outputs are given."""

    def __init__(self, model_type: Any) -> None:
        self.model_type = model_type

    def set_input_tensor(self, input_tensor: Any) -> None:
        pass


def rescale_with_installed(
    outputs: Sequence[Any],
    *,
    num_microbatches: int,
    cp_group_size: int,
    calculate_per_token_loss: bool,
) -> tuple[Any, Any]:
    """Hand ``outputs`` to the installed release as its loss function's return value."""
    schedules = _schedules()
    config = types.SimpleNamespace(
        calculate_per_token_loss=calculate_per_token_loss, timers=None, enable_autocast=False
    )
    with quiet():
        return _rescale(schedules, outputs, num_microbatches, cp_group_size, config)


def _rescale(
    schedules: types.ModuleType, outputs: Sequence[Any], num_microbatches: int, cp_group_size: int, config: Any
) -> tuple[Any, Any]:
    store: list[Any] = []

    def loss_func(output_tensor: Any) -> Sequence[Any]:
        return outputs

    if hasattr(schedules, "forward_step_calc_loss"):
        output_tensor, _num_tokens = schedules.forward_step_calc_loss(
            None,
            outputs[0],
            loss_func,
            config,
            None,
            False,
            num_microbatches,
            store,
            cp_group_size=cp_group_size,
            is_last_stage=True,
        )
    else:
        with _single_process_parallel_state(schedules.parallel_state, cp_group_size):
            result = schedules.forward_step(
                lambda data_iterator, model: (outputs[0], loss_func),
                None,
                _StandInModel(require("megatron.core.enums", "megatron-core").ModelType.encoder_or_decoder),
                num_microbatches,
                None,
                store,
                config,
            )
        # Up to 0.6 forward_step returns the tensor, later ``(tensor, num_tokens)``.
        output_tensor = result[0] if isinstance(result, tuple) else result
    return output_tensor, store[-1]


@contextlib.contextmanager
def _single_process_parallel_state(parallel_state: types.ModuleType, cp_group_size: int) -> Any:
    """The last pipeline stage of a single-stage pipeline, with ``cp_group_size`` context ranks."""
    answers = {
        "is_pipeline_last_stage": True,
        "is_pipeline_stage_after_split": False,  # asked by 0.6 - 0.11 for encoder-decoder models
        "get_context_parallel_world_size": cp_group_size,
    }
    with contextlib.ExitStack() as stack:
        for name, answer in answers.items():
            if hasattr(parallel_state, name):
                stack.enter_context(
                    mock.patch.object(parallel_state, name, lambda *args, _answer=answer, **kwargs: _answer)
                )
        yield
