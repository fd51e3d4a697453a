# Shaped like a policy loss that gathers the log-probabilities of the sampled tokens.
import torch


def loss_func(output_tensor, batch):
    targets = batch["sampled"]
    logprobs = torch.gather(output_tensor.log_softmax(-1), -1, targets.unsqueeze(-1)).squeeze(-1)
    weights = batch["weights"]
    loss = -(logprobs * weights).mean()
    return loss, {"policy": loss.detach()}
