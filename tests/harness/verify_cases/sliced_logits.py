# Shaped like a loss function that takes the logits of the last `num_actions` positions.


def loss_func(logits, data):
    num_actions = data["num_actions"]
    action_logits = logits[:, -num_actions - 1 : -1, :]
    entropy = -(action_logits.softmax(-1) * action_logits.log_softmax(-1)).sum(-1)
    loss = entropy.mean()
    return loss, {"entropy": loss.detach()}
