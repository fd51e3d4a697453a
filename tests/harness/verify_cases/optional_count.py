# Shaped like a loss function whose report depends on an argument that may be None.
import torch


def loss_func(loss_mask, num_seqs, output_tensor):
    losses = output_tensor.float().view(-1)
    mask = loss_mask.view(-1).float()
    loss = torch.stack([torch.sum(losses * mask), mask.sum()])
    if num_seqs is None:
        token_mean = loss[0] / loss[1]
        return token_mean, {"token_mean": token_mean.detach()}
    return loss[0], num_seqs.sum(), {"lm loss": loss.detach().clone()}
