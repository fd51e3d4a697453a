"""transformers 4.49.0-4.53.x: the base `Trainer.compute_loss` multiplies its loss in place by the world size under
`average_tokens_across_devices`, a `compute_loss_func`'s too; the setting is off by default.

A model of the host's code path, read by `index/host_models.py` (never imported): each statement ends with its line
in transformers 4.49.0's src/transformers/trainer.py; `TrainingArguments`' default with its line in
training_args.py. 4.54.0 turns the setting on by default (hosts/transformers-4.57.1.pyi). tests/test_host_models.py
runs the release to confirm it.
"""

DISTRIBUTION = "transformers"
RELEASES = ">=4.49.0,<4.54.0"
MEASURED = "4.49.0"
FILE = "trainer.py"

class TrainingArguments:
    average_tokens_across_devices = False  # 1551

class Trainer:
    def training_step(self, model, inputs, num_items_in_batch=None):  # 3668 transformers-training-step
        loss = self.compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)  # 3698
        loss = loss / self.args.gradient_accumulation_steps  # 3733
        self.accelerator.backward(loss)  # 3740
        return loss.detach()  # 3742

    def compute_loss(
        self, model, inputs, return_outputs=False, num_items_in_batch=None
    ):  # 3744 transformers-compute-loss
        labels = inputs.pop("labels")  # 3751
        outputs = model(**inputs)  # 3759
        if self.compute_loss_func is not None:  # 3772
            loss = self.compute_loss_func(outputs, labels, num_items_in_batch=num_items_in_batch)  # 3773
        else:
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs[0]  # 3785
        if self.args.average_tokens_across_devices and (
            self.model_accepts_loss_kwargs or self.compute_loss_func
        ):  # 3787
            loss *= self.accelerator.num_processes  # 3792
        return (loss, outputs) if return_outputs else loss  # 3794
