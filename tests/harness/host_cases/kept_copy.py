"""The same, keeping a copy: no host can change it."""

import types

STATE = types.SimpleNamespace()


def loss_func(output_tensor):
    loss = (output_tensor * output_tensor).sum()
    STATE.last_loss = loss.detach().clone()
    return loss
