"""transformers 4.46.0-4.46.1: `Trainer.training_step` multiplies what `compute_loss` returned in place.

A model of the host's code path, read by `index/host_models.py` (never imported): each statement ends with
its line in the release's src/transformers/trainer.py. Measured: a kept alias of the returned loss reads
x gradient_accumulation_steps (hosts.md); tests/test_host_models.py runs the release to confirm it.
"""

DISTRIBUTION = "transformers"
RELEASES = ">=4.46.0,<4.46.2"
MEASURED = "4.46.0"
FILE = "trainer.py"

class Trainer:
    def training_step(self, model, inputs, num_items_in_batch=None):  # 3542 transformers-training-step
        loss = self.compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)  # 3572
        loss *= self.args.gradient_accumulation_steps  # 3605
        self.accelerator.backward(loss)  # 3606
        return loss.detach() / self.args.gradient_accumulation_steps  # 3608

    def compute_loss(
        self, model, inputs, return_outputs=False, num_items_in_batch=None
    ):  # 3610 transformers-compute-loss
        labels = inputs.pop("labels")  # 3617
        outputs = model(**inputs)  # 3625
        if self.compute_loss_func is not None:  # 3638
            loss = self.compute_loss_func(outputs, labels, num_items_in_batch=num_items_in_batch)  # 3639
        else:
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs[0]  # 3651
        return (loss, outputs) if return_outputs else loss  # 3653
