# Shaped like a loss function that divides its logits by a sampling temperature it checks against 0.


def loss_func(logits, data):
    temperature = data["temperature"]
    if temperature <= 0.0:  # one number: a tensor of several has no truth
        raise ValueError("the temperature must be positive")
    logits = logits / temperature.item()
    loss = logits.logsumexp(-1).mean()
    return loss, {"lse": loss.detach()}
