"""The same, keeping a copy: no host can change it."""

import types

STATE = types.SimpleNamespace()


def loss_func(output_tensor):
    total = (output_tensor * output_tensor).sum()
    STATE.last_total = total.detach().clone()
    return {"total": total}
