"""Trainer steps whose model methods hand back Python numbers.

Modelled on RLHF trainers: `get_loss_and_metrics` ends in `return loss_mean.item(), metrics` in
another module, and the trainer step unpacks it, logs it and returns `(loss, {..., "loss": loss})`.
The module imports torch, but a method's result unpacked into names is a tuple: nothing shows that
`loss_mean` is a tensor, and `loss_mean.clone()` would raise on a float.
"""

import torch


class Trainer:
    def __init__(self, model, optimizer, scheduler):
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler

    def train_single_step(self, global_batch):
        self.optimizer.zero_grad()
        self.model.prepare_for_training_step()
        loss_mean, metrics = self.model.get_loss_and_metrics(batch=global_batch, forward_only=False)
        self.model.finish_training_step()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.scheduler.step()
        trainer_metrics = {"grad_norm": float(grad_norm), "lr": self.optimizer.param_groups[0]["lr"]}
        trainer_metrics.update({"loss": loss_mean})
        return loss_mean, {**metrics, **trainer_metrics}

    def validation_step(self, global_batch):
        self.model.prepare_for_validation_step()
        loss_mean, metrics = self.model.get_loss_and_metrics(batch=global_batch, forward_only=True)
        self.model.finish_validation_step()
        return loss_mean, {"val_loss": loss_mean, **metrics}

    def rollout_step(self, batch):
        reward, (length, stats) = self.model.score(batch)
        return reward, {"reward": reward, "length": length, "stats": stats}
