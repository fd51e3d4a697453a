# Shaped like a loss function that dispatches to a helper chosen at run time and unpacks its result.
import torch
from training_helpers import pick_loss  # not installed: a stub that the probe must unpack into two


def loss_function(args, batch, logits):
    num_tokens = sum(torch.clamp_min(mask.sum(), 1) for mask in batch["loss_masks"])
    func = pick_loss(args.loss_type)
    loss, log = func(args, batch, logits)
    return loss, num_tokens, {"keys": list(log.keys()), "raw_loss": loss.detach()}
