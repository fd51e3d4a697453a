"""Reports made by helpers (issue 46): a helper returning one dict that holds both the loss and the report,
which the loss function takes apart by literal keys, and a report filled with `store.setdefault(key,
[]).append(value)`, inline or by a helper. Each is summarised as any helper is (`analysis/summaries.py`), and
the triage keeps the unit wherever the analysis finds something."""

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
