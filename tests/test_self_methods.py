"""`self.helper(loss)`: summarised from the method of the caller's own class, when that is known.

The fixture `fixtures/FAL001/self_method_of_its_own_class.py` runs the positive cases through
megatron-core's rescale; these pin where the answer must stay unknown.
"""

from __future__ import annotations

from flux_alias_lint.lint import check_source

OVERRIDDEN = """\
import torch


class Base:
    def _report(self, loss):
        return {"lm": loss.detach()}

    def _step(self, loss):
        return self._report(loss)


class Child(Base):
    def _report(self, loss):
        return {"lm": loss.item()}

    def __call__(self, output_tensor):
        loss = torch.sum(output_tensor)
        return loss, self._step(loss)
"""


def test_an_inherited_method_calling_an_overridden_one_is_not_guessed():
    # `Child()._step` runs `Child._report`, which copies: `Base._report` must not be assumed.
    assert check_source(OVERRIDDEN, "m.py") == []


def test_the_callers_own_method_is_used_when_several_classes_define_it():
    text = OVERRIDDEN.replace("        return loss, self._step(loss)", "        return loss, Base._report(self, loss)")
    text += (
        "\n\nclass Other(Base):\n    def __call__(self, output_tensor):\n"
        "        loss = torch.sum(output_tensor)\n        return loss, self._report(loss)\n"
    )
    found = [(f.line, f.code, f.report_path) for f in check_source(text, "m.py")]
    assert found == [(24, "FAL001", 'report["lm"]')]
