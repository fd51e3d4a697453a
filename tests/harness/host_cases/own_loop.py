"""The project's own accumulation loop: compute_loss keeps its loss, detached, in a module-level list, and the
loop divides the returned loss in place by the accumulation steps."""

import torch

HISTORY = []


def compute_loss(batch):
    loss = torch.nn.functional.mse_loss(batch, torch.zeros_like(batch))
    HISTORY.append(loss.detach())
    return loss


def train(batches, accum):
    for batch in batches:
        loss = compute_loss(batch)
        loss /= accum
        loss.backward()


def train_unscaled(batches):
    for batch in batches:
        loss = compute_loss(batch)
        loss *= 1.0
        loss.backward()
