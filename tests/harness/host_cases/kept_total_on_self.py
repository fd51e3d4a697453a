"""A loss function returning a dict of losses and keeping its 'total', detached, on a module-level state object: a
host that takes the dict's 'total' as its loss and rescales it in place (Composer 0.10+) changes the kept value."""

import types

STATE = types.SimpleNamespace()


def loss_func(output_tensor):
    total = (output_tensor * output_tensor).sum()
    STATE.last_total = total.detach()
    return {"total": total}
