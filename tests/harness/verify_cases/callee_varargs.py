# Shaped like a loss function that hands its logits to a project helper taking `*values`: no parameter to name them.


def scaled(*values):
    return values[0] * 0.5


def loss_func(logits, data):
    loss = scaled(logits).mean()
    return loss, {"half": loss.detach()}
