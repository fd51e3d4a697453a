# A 3-tuple loss function: under calculate_per_token_loss Megatron leaves it as it is.
import torch


def loss_func(loss_mask, output_tensor):
    mask = loss_mask.view(-1).float()
    total = torch.sum(output_tensor.view(-1).float() * mask)
    num_tokens = mask.sum().to(torch.int)
    return total, num_tokens, {"total": total.detach()}
