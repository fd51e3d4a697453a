import collections
import dataclasses
import warnings

import pytest
import torch

from flux_alias_lint.facts.tensor_ops import AliasKind
from flux_alias_lint.harness import (
    ReportAliasError,
    ReportAliasWarning,
    check_loss_outputs,
    find_report_aliases,
    guard_loss_func,
)

Pair = collections.namedtuple("Pair", "value count")


@dataclasses.dataclass
class Metrics:
    loss: object
    extra: object = None


def make_loss():
    return (torch.tensor([3.0, 5.0], requires_grad=True) * 1.0).sum()


def paths(outputs):
    return [(alias.path, alias.kind) for alias in find_report_aliases(outputs)]


def test_seed_report_names_the_detached_numerator():
    loss = make_loss()
    assert paths((loss, {"loss": (loss.detach(), torch.tensor(4).detach())})) == [
        ('report["loss"][0]', AliasKind.DETACH)
    ]


def test_aliases_found_in_every_container_and_named_by_path():
    loss = make_loss()
    report = {
        "same": loss,
        "data": [loss.data],
        "pair": Pair(loss.detach().view(1), 3),
        "metrics": Metrics(loss=loss.detach().reshape(1, 1)),
        "nested": {1: ({"deep": loss.detach().unsqueeze(0).t()},)},
        "fresh": loss.detach().clone(),
        "text": "lm loss",
    }
    assert paths((loss, report)) == [
        ('report["same"]', AliasKind.SAME),
        ('report["data"][0]', AliasKind.DETACH),
        ('report["pair"].value', AliasKind.VIEW),
        ('report["metrics"].loss', AliasKind.VIEW),
        ('report["nested"][1][0]["deep"]', AliasKind.VIEW),
    ]


def test_three_tuple_report_is_the_last_element():
    loss = make_loss()
    assert paths((loss, torch.tensor(4), {"lm loss": loss.detach()})) == [('report["lm loss"]', AliasKind.DETACH)]


def test_disjoint_slices_of_one_buffer_are_not_aliases():
    losses = torch.arange(1.0, 11.0, requires_grad=True) * 1.0
    loss = losses[1]
    assert (
        paths((loss, {"rest": losses[2:].detach(), "first": losses[0].detach(), "evens": losses[::2].detach()})) == []
    )
    # Byte ranges overlap but no element does; the one that holds element 1 is caught.
    assert paths((loss, {"every third from 1": losses[1::3].detach()})) == [
        ('report["every third from 1"]', AliasKind.VIEW)
    ]


def test_a_view_that_reinterprets_the_bytes_is_caught():
    loss = make_loss()
    assert paths((loss, {"bits": loss.detach().view(torch.int32)})) == [('report["bits"]', AliasKind.VIEW)]


def test_a_report_that_contains_itself_is_walked_once():
    loss = make_loss()
    report = {"loss": loss.detach()}
    report["self"] = report
    assert paths((loss, report)) == [('report["loss"]', AliasKind.DETACH)]


def test_check_loss_outputs_raises_a_value_error_naming_path_and_rule():
    loss = make_loss()
    outputs = (loss, {"loss": (loss.detach(), torch.tensor(4))})
    with pytest.raises(ReportAliasError) as caught:
        check_loss_outputs(outputs)
    assert isinstance(caught.value, ValueError)
    assert 'report["loss"][0] shares storage with the backprop tensor (a .detach()/.data alias of it; FAL001' in str(
        caught.value
    )
    assert [alias.code for alias in caught.value.aliases] == ["FAL001"]


def test_check_loss_outputs_returns_clean_outputs_unchanged():
    loss = make_loss()
    outputs = (loss, {"loss": (loss.detach().clone(), torch.tensor(4))})
    assert check_loss_outputs(outputs) is outputs


def test_guard_decorator_raises_or_warns():
    @guard_loss_func
    def strict(output_tensor):
        loss = output_tensor.sum()
        return loss, {"lm loss": loss.detach()}  # noqa: FAL001 -- deliberate alias under test

    @guard_loss_func(on_alias="warn")
    def lenient(output_tensor):
        loss = output_tensor.sum()
        return loss, {"lm loss": loss.detach()}  # noqa: FAL001 -- deliberate alias under test

    with pytest.raises(ReportAliasError, match=r'report\["lm loss"\]'):
        strict(torch.ones(3))
    with pytest.warns(ReportAliasWarning, match=r'report\["lm loss"\]') as caught:
        outputs = lenient(torch.ones(3))
    assert caught[0].filename == __file__  # points at the caller, not at the guard
    assert outputs[1]["lm loss"].item() == 3.0
    assert strict.__name__ == "strict"


def test_guarded_clean_loss_func_is_silent():
    @guard_loss_func
    def loss_func(output_tensor):
        loss = output_tensor.sum()
        return loss, {"lm loss": loss.detach().clone()}

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert loss_func(torch.ones(3))[1]["lm loss"].item() == 3.0


def test_bad_shapes_are_type_errors():
    with pytest.raises(TypeError, match=r"returns \(loss, report\)"):
        find_report_aliases((make_loss(),))
    with pytest.raises(TypeError, match="must be a tensor"):
        find_report_aliases((1.0, {}))
    with pytest.raises(ValueError, match="on_alias"):
        guard_loss_func(on_alias="ignore")
