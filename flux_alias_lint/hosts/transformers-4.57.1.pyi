"""transformers 4.54.0 and later: `Trainer.training_step` divides out of place; the base `Trainer.compute_loss`
multiplies its loss (a `compute_loss_func`'s too) in place by the world size under `average_tokens_across_devices`,
on by default from 4.54.0.

A model of the host's code path, read by `index/host_models.py` (never imported): each statement ends with its line
in transformers 4.57.1's src/transformers/trainer.py (4.54.0: the write at :3912); `TrainingArguments`' default with
its line in training_args.py (4.54.0: :1558). 4.46.2-4.48 are not modelled: they divide out of place in
`training_step` too, and their `compute_loss` multiplies under the setting, off by default, a model's loss only.
"""

DISTRIBUTION = "transformers"
RELEASES = ">=4.54.0"
MEASURED = "4.57.1"
FILE = "trainer.py"

class TrainingArguments:
    average_tokens_across_devices = True  # 1585

class Trainer:
    def training_step(self, model, inputs, num_items_in_batch=None):  # 3981 transformers-training-step
        loss = self.compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)  # 4020
        loss = loss / self.current_gradient_accumulation_steps  # 4064
        self.accelerator.backward(loss)  # 4071
        return loss.detach()  # 4073

    def compute_loss(
        self, model, inputs, return_outputs=False, num_items_in_batch=None
    ):  # 4075 transformers-compute-loss
        labels = inputs.pop("labels")  # 4102
        outputs = model(**inputs)  # 4110
        if self.compute_loss_func is not None:  # 4117
            loss = self.compute_loss_func(outputs, labels, num_items_in_batch=num_items_in_batch)  # 4123
        else:
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs[0]  # 4147
        if self.args.average_tokens_across_devices and (
            self.model_accepts_loss_kwargs or self.compute_loss_func
        ):  # 4149
            loss *= self.accelerator.num_processes  # 4154
        return (loss, outputs) if return_outputs else loss  # 4156
