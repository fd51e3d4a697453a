"""Reports made by helpers (issue 46): a helper returning one dict that holds both the loss and the report,
which the loss function takes apart by literal keys, and a report filled with `store.setdefault(key,
[]).append(value)`, inline or by a helper, or with `extend`/`update` from another parameter; a helper's
`.detach()` showing its argument is a tensor in a module that never imports torch. Each is summarised as any
helper is (`analysis/summaries.py`), and the triage keeps the unit wherever the analysis finds something."""

from __future__ import annotations

import textwrap

import pytest

from flux_alias_lint import triage
from flux_alias_lint.lint import check_source

SOURCE = textwrap.dedent(
    """
    import torch

    LOG = {{}}


    def _compute(output_tensor):
        loss = torch.sum(output_tensor)
        return {{"loss": loss, "report": {{"lm loss": {kept}}}}}


    def _log(store, key, value):
        store.setdefault(key, []).append(value)


    def _log_all(store, key, values):
        store.setdefault(key, []).extend(values)


    def _add_all(report, parts):
        report.update(parts)


    def loss_func(output_tensor):
        {body}


    def forward_step(data_iterator, model):
        return model(next(data_iterator)), loss_func
    """
)
ONE_DICT = 'parts = _compute(output_tensor)\n    return parts["loss"], {report}'
SETDEFAULT = "loss = torch.sum(output_tensor)\n    report = {{}}\n    {call}\n    return loss, report"


def _found(kept: str, body: str) -> list[tuple[str, str, bool, str]]:
    source = SOURCE.format(kept=kept, body=body)
    return [(f.code, f.report_path, f.fixable, f.context) for f in check_source(source)]


@pytest.mark.parametrize(
    ("kept", "body", "found"),
    [
        # Shown at the call, where no copy fits (the helper made the entry): not fixable there.
        ("loss.detach()", ONE_DICT.format(report='parts["report"]'), [("FAL001", 'report["lm loss"]', False)]),
        ("loss.detach().clone()", ONE_DICT.format(report='parts["report"]'), []),
        ("loss.detach()", ONE_DICT.format(report='{"n": 1}'), []),  # the helper's report is not returned
        # The helper's whole dict returned as the report: it holds the loss itself.
        ("loss.detach().clone()", ONE_DICT.format(report="parts"), [("FAL002", 'report["loss"]', False)]),
        ("0", SETDEFAULT.format(call='report.setdefault("lm", []).append(loss.detach())'),
         [("FAL001", 'report["lm"][...]', True)]),
        ("0", SETDEFAULT.format(call='_log(report, "lm", loss.detach())'), [("FAL001", "report[...][...]", True)]),
        ("0", SETDEFAULT.format(call='_log(report, "lm", loss.detach().clone())'), []),
        # A helper's parameter extended with, or updated from, another: the caller's list or dict, looked up at the call.
        ("0", SETDEFAULT.format(call='_log_all(report, "lm", [loss.detach()])'), [("FAL001", "report[...][...]", True)]),
        ("0", SETDEFAULT.format(call='_log_all(report, "lm", [loss.detach().clone()])'), []),
        ("0", SETDEFAULT.format(call='_add_all(report, {"lm": loss.detach()})'), [("FAL001", "report[...]", True)]),
        ("0", SETDEFAULT.format(call='_add_all(report, {"lm": loss.detach().clone()})'), []),
        # `get` gives the default without storing it: what is appended to it is not in the report.
        ("0", SETDEFAULT.format(call='report.get("lm", []).append(loss.detach())'), []),
        # A module-level dict filled the same way keeps the loss that Megatron rescales (FAL005).
        ("0", SETDEFAULT.format(call='LOG.setdefault("lm", []).append(loss.detach())'),
         [("FAL005", 'LOG.setdefault("lm", [])[...]', True)]),
    ],
)  # fmt: skip
@pytest.mark.parametrize("triaged", [True, False])
def test_a_report_made_by_a_helper(kept: str, body: str, found: list, triaged: bool, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(triage, "ENABLED", triaged)
    assert _found(kept, body) == [(*f, "megatron") for f in found]


def test_the_message_says_the_helper_made_the_entry():
    [finding] = check_source(SOURCE.format(kept="loss.detach()", body=ONE_DICT.format(report='parts["report"]')))
    assert finding.message.startswith(
        'report["lm loss"], made in `_compute()`, is a detached alias of the backprop tensor `parts["loss"]`'
    )


WITHOUT_TORCH = """\
def kept(value):
    return value.detach().reshape(1)


def loss_func(output_tensor):
    loss = output_tensor.sum()
    return loss, {"lm loss": kept(loss)}


def forward_step(data_iterator, model):
    return model(next(data_iterator)), loss_func
"""


@pytest.mark.parametrize("triaged", [True, False])
def test_a_helpers_detach_is_evidence_in_a_module_that_never_imports_torch(
    triaged: bool, monkeypatch: pytest.MonkeyPatch
):
    # `.detach()` is a tensor's method alone: the helper's parameter, and so the loss given for it, is a tensor.
    monkeypatch.setattr(triage, "ENABLED", triaged)
    found = [(f.code, f.report_path, f.context) for f in check_source(WITHOUT_TORCH)]
    assert found == [("FAL003", 'report["lm loss"]', "megatron")]
    copied = WITHOUT_TORCH.replace("value.detach()", "value.detach().clone()")
    assert check_source(copied) == []
