"""A Trainer subclass's compute_loss keeping its loss, detached, on the trainer: the host rescales the returned
loss in place after compute_loss returns, so the kept value moves with it."""

import torch

# What a real project hands `Accelerator(**ACCELERATOR)`: accelerate 0.11-0.12 divide by its default 1 otherwise.
ACCELERATOR = {"gradient_accumulation_steps": 2}


class KeepingTrainer:  # a transformers Trainer subclass in a real project
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = torch.nn.functional.mse_loss(inputs["x"], torch.zeros_like(inputs["x"]))
        self.last_loss = loss.detach()
        return loss
