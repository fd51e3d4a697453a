# A forward step hands Megatron a partial of a loss function that consumes 3-D logits.
import functools


def loss_func(loss_mask, output_tensor):
    last = output_tensor[:, -1, :].log_softmax(-1)
    loss = -(last.sum(-1) * loss_mask[:, -1]).mean()
    return loss, {"lm loss": loss.detach()}


def forward_step(data_iterator, model):
    batch = next(data_iterator)
    output_tensor = model(batch["tokens"])
    return output_tensor, functools.partial(loss_func, batch["loss_mask"])
