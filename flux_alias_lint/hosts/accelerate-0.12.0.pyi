"""accelerate 0.11.0-0.12.0: `Accelerator.backward` divides the loss it is handed in place.

A model of the host's code path, read by `index/host_models.py` (never imported): each statement ends with
its line in accelerate 0.12.0's src/accelerate/accelerator.py (0.11.0: :797). 0.13.0 divides out of place. The
class's `gradient_accumulation_steps` is its `__init__`'s default (:165), which it stores as the factor (:267) and
reads from nowhere else: an `Accelerator(...)` not given it divides by 1.
"""

DISTRIBUTION = "accelerate"
RELEASES = ">=0.11.0,<0.13.0"
MEASURED = "0.12.0"
FILE = "accelerator.py"

class Accelerator:
    gradient_accumulation_steps = 1  # 165
    def backward(self, loss, **kwargs):  # 874 accelerate-backward
        loss /= self.gradient_accumulation_steps  # 878
        loss.backward(**kwargs)  # 884
