"""A loss function keeping its own loss, detached, on a module-level state object: every host that rescales
the returned loss in place changes the kept value."""

import types

STATE = types.SimpleNamespace()


def loss_func(output_tensor):
    loss = (output_tensor * output_tensor).sum()
    STATE.last_loss = loss.detach()
    return loss
