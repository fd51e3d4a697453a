"""Every place the harness points CUDA at the CPU, and why: the one list.

megatron-core's schedule and layers assume a GPU in a few spots; on a CPU-only machine each one
fails with "Torch not compiled with CUDA enabled". While ``cuda_is_the_cpu()`` is active:

- ``device="cuda"`` (or a CUDA device index such as ``device=0``) given to any torch function
  means the CPU: ``forward_backward_no_pipelining`` starts with
  ``total_num_tokens = torch.zeros([], dtype=torch.int, device="cuda")``, and training code
  builds tensors on the GPU;
- ``tensor.to("cuda")`` / ``tensor.to(0)`` stays on the CPU, and ``tensor.cuda()`` returns the tensor
  itself, as it does for a tensor already on the GPU: a forward step's ``get_batch`` moves its batch
  to the GPU;
- ``torch.cuda.current_device()`` answers 0, the index of the only GPU (which the first item maps to
  the CPU): megatron-core's ``GlobalMemoryBuffer.get_tensor`` (its attention layers' scratch
  buffers) allocates on ``device=torch.cuda.current_device()``.

``on_cpu_unless_gpu()`` applies them only where torch has no CUDA device: on a GPU the same code
runs Megatron unpatched. The verify probes always apply them: their stand-in tensors live on the CPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

from ._deps import require_torch

torch = require_torch()


def _cpu(device: Any) -> Any:
    if isinstance(device, int) and not isinstance(device, bool):  # a CUDA device index
        return "cpu"
    return "cpu" if isinstance(device, (str, torch.device)) and torch.device(device).type == "cuda" else device


class CudaIsTheCpu(torch.overrides.TorchFunctionMode):
    """The ``device=`` and ``.to()`` / ``.cuda()`` items of the list above."""

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        if func is torch.Tensor.cuda:
            return args[0]
        kwargs = {key: _cpu(value) if key == "device" else value for key, value in (kwargs or {}).items()}
        if func is torch.Tensor.to:
            args = tuple(map(_cpu, args))
        return func(*args, **kwargs)


@contextlib.contextmanager
def cuda_is_the_cpu() -> Iterator[None]:
    """Every redirection of the list above, for the duration."""
    with mock.patch.object(torch.cuda, "current_device", lambda: 0), CudaIsTheCpu():
        yield


def on_cpu_unless_gpu() -> contextlib.AbstractContextManager[None]:
    """``cuda_is_the_cpu()`` where torch has no CUDA device; nothing at all where it has one."""
    return contextlib.nullcontext() if torch.cuda.is_available() else cuda_is_the_cpu()
