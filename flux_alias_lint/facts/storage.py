"""What Python's builtins and container methods do to storage: one row each, read by both interpreters.

A row says what a call gives (`Gives`) and, for a container method, how it changes its receiver
(`Updates`). The analysis (`analysis/`) and the triage (`triage/`) each hold one transfer per
`Gives` and per `Updates` member, and neither names a builtin or a container method in its own
code: a new row is handled by both or `tests/test_facts.py` fails. A call not listed here is an
unknown call: a fresh value, which can hide a finding but never make a false one.
"""

from __future__ import annotations

import dataclasses
import enum


class Gives(enum.Enum):
    """What a call returns, in terms of the storage of its receiver and arguments."""

    NUMBER = "number"  # a Python number or bool: no storage (`len(x)`, `int(x)`)
    MAPPING = "mapping"  # a new dict of the arguments' entries (`dict(d, k=v)`, `dict(**d)`, `dict(pairs)`)
    SEQUENCE_OF_ELEMENTS = "sequence-of-elements"  # a new list/tuple of the one argument's elements
    TUPLES_OF_ELEMENTS = "tuples-of-elements"  # a sequence of tuples, one element of each argument (`zip`)
    ONE_OF_ARGUMENTS = "one-of-arguments"  # one argument, or an element of the one iterable argument
    DEEP_COPY = "deep-copy"  # the argument's shape with fresh storage everywhere
    SAME_STORAGE = "same-storage"  # a new object over the argument's storage (`copy.copy`)
    UNTRACKED_CONTAINER = "untracked-container"  # a container whose elements are not followed (`set(xs)`)
    ENTRY_OR_DEFAULT = "entry-or-default"  # the receiver's entry at the key, else the default argument
    RECEIVER = "receiver"  # the receiver's entries in a new container (`d.copy()`): the same values
    ENTRIES = "entries"  # a sequence of the receiver's entries (`d.values()`)
    KEY_ENTRY_PAIRS = "key-entry-pairs"  # (key, entry) pairs of the receiver (`d.items()`)
    NOTHING = "nothing"  # None (`append`, `update`, `clear`)


class Updates(enum.Enum):
    """How a container method changes the container it is called on."""

    NOTHING = "nothing"
    ADDS_ARGUMENT = "adds-argument"  # its last positional argument becomes an element (`append`, `insert`)
    ADDS_ELEMENTS = "adds-elements"  # the elements of its argument become elements (`extend`)
    ADDS_ENTRIES = "adds-entries"  # the entries of its mappings and its keywords become entries (`update`)
    ADDS_DEFAULT = "adds-default"  # the default becomes the entry at the key, if there is none (`setdefault`)
    REMOVES_ENTRY = "removes-entry"  # the entry at the key goes (`pop`)
    CLEARS = "clears"  # every entry goes (`clear`)


@dataclasses.dataclass(frozen=True)
class Builtin:
    """A function called by its qualified name."""

    gives: Gives
    doc: str


@dataclasses.dataclass(frozen=True)
class ContainerMethod:
    """A method of `dict` and `list` (of a value the interpreters know to be a container)."""

    gives: Gives
    updates: Updates
    # Whether calling it on a helper's parameter shows the parameter is a container, not a tensor
    # (`report.get(k)`; `x.values()` or `x.copy()` alone would not: tensors have them too).
    shows_a_container: bool
    doc: str


_MAPPING_DOC = "a new dict holding the entries of its arguments: keywords, `**d`, a first dict or list of pairs"

BUILTINS: dict[str, Builtin] = {
    "int": Builtin(Gives.NUMBER, "a Python int"),
    "float": Builtin(Gives.NUMBER, "a Python float: `float(loss)` copies the value out"),
    "len": Builtin(Gives.NUMBER, "a Python int"),
    "bool": Builtin(Gives.NUMBER, "a Python bool"),
    "dict": Builtin(Gives.MAPPING, _MAPPING_DOC),
    "OrderedDict": Builtin(Gives.MAPPING, _MAPPING_DOC),
    "defaultdict": Builtin(Gives.MAPPING, _MAPPING_DOC + " (the first argument is the factory)"),
    "collections.OrderedDict": Builtin(Gives.MAPPING, _MAPPING_DOC),
    "collections.defaultdict": Builtin(Gives.MAPPING, _MAPPING_DOC + " (the first argument is the factory)"),
    "list": Builtin(Gives.SEQUENCE_OF_ELEMENTS, "a new list of the same element objects: a tensor in it is shared"),
    "tuple": Builtin(Gives.SEQUENCE_OF_ELEMENTS, "a new tuple of the same element objects"),
    "set": Builtin(Gives.UNTRACKED_CONTAINER, "a new set of the same objects; its elements are not followed"),
    "zip": Builtin(Gives.TUPLES_OF_ELEMENTS, "tuples of the same element objects, one of each argument"),
    "max": Builtin(Gives.ONE_OF_ARGUMENTS, "one of its arguments (or of its one iterable), the object itself"),
    "min": Builtin(Gives.ONE_OF_ARGUMENTS, "one of its arguments (or of its one iterable), the object itself"),
    "copy.deepcopy": Builtin(Gives.DEEP_COPY, "a copy all the way down: tensors are cloned"),
    "copy.copy": Builtin(Gives.SAME_STORAGE, "a new object; a tensor's copy shares its storage"),
}

# transformers' model outputs (`ModelOutput` subclasses, `transformers.modeling_outputs.CausalLMOutputWithPast`) are
# ordered dicts of the fields they are given, as `dict(...)` makes one: `outputs["loss"]`, which the base
# `Trainer.compute_loss` takes as the loss, is the `loss=` given.
MODEL_OUTPUT_PACKAGE = "transformers"
MODEL_OUTPUT_WORD = "Output"
MODEL_OUTPUT_BASE = "ModelOutput"  # their base class, which a project's own outputs derive (`@dataclass`)


def is_model_output(qualified: str) -> bool:
    """`transformers.modeling_outputs.CausalLMOutputWithPast`: a class of transformers named as its outputs are."""
    return qualified.partition(".")[0] == MODEL_OUTPUT_PACKAGE and MODEL_OUTPUT_WORD in qualified.rpartition(".")[2]


CONTAINER_METHODS: dict[str, ContainerMethod] = {
    "get": ContainerMethod(Gives.ENTRY_OR_DEFAULT, Updates.NOTHING, True, "the entry itself, or the default"),
    "pop": ContainerMethod(
        Gives.ENTRY_OR_DEFAULT, Updates.REMOVES_ENTRY, False, "the entry (a list's last element), removed"
    ),
    "setdefault": ContainerMethod(
        Gives.ENTRY_OR_DEFAULT, Updates.ADDS_DEFAULT, True, "the entry, or the default, which becomes the entry"
    ),
    "update": ContainerMethod(Gives.NOTHING, Updates.ADDS_ENTRIES, True, "puts the given entries in, as they are"),
    "append": ContainerMethod(Gives.NOTHING, Updates.ADDS_ARGUMENT, True, "puts the object itself in"),
    "insert": ContainerMethod(Gives.NOTHING, Updates.ADDS_ARGUMENT, True, "puts the object itself in"),
    "extend": ContainerMethod(Gives.NOTHING, Updates.ADDS_ELEMENTS, True, "puts the iterable's elements in"),
    "clear": ContainerMethod(Gives.NOTHING, Updates.CLEARS, False, "removes every entry"),
    "copy": ContainerMethod(Gives.RECEIVER, Updates.NOTHING, False, "a shallow copy: the same entry objects"),
    "values": ContainerMethod(Gives.ENTRIES, Updates.NOTHING, True, "a view of the entry objects"),
    "items": ContainerMethod(Gives.KEY_ENTRY_PAIRS, Updates.NOTHING, True, "(key, entry object) pairs"),
}

# Views of the tables the interpreters ask often, derived here so that no interpreter spells a name.
NUMBER_BUILTINS = frozenset(name for name, row in BUILTINS.items() if row.gives is Gives.NUMBER)
MAPPING_CONSTRUCTORS = frozenset(name for name, row in BUILTINS.items() if row.gives is Gives.MAPPING)
# Methods that put their arguments into their receiver: what a container that outlives a function keeps.
CONTAINER_MUTATORS = frozenset(
    name
    for name, row in CONTAINER_METHODS.items()
    if row.updates in (Updates.ADDS_ARGUMENT, Updates.ADDS_ELEMENTS, Updates.ADDS_ENTRIES, Updates.ADDS_DEFAULT)
)
# Methods whose call on a value shows the value is a container (a helper's `report` parameter).
CONTAINER_EVIDENCE = frozenset(name for name, row in CONTAINER_METHODS.items() if row.shows_a_container)
# The mutator given a mapping (`x.update({...})`, `x.update(k=v)`) makes its receiver a dict.
MAPPING_UPDATE = next(name for name, row in CONTAINER_METHODS.items() if row.updates is Updates.ADDS_ENTRIES)
# The names a mapping constructor goes by however it is imported or re-exported (`OrderedDict` of
# `collections.OrderedDict`, `typing.OrderedDict`): the triage, which over-approximates, takes any call
# so named for one.
MAPPING_NAMES = frozenset(name.rpartition(".")[2] for name in MAPPING_CONSTRUCTORS)
# The calls that make a new dict, list, tuple or set of their own (not an iterator, not one of their
# arguments): a value bound to one is never a tensor and dies with the function that made it, and its
# arguments' elements are inside it (FAL005's places, in the triage).
CONTAINER_CONSTRUCTORS = frozenset(
    name
    for name, row in BUILTINS.items()
    if row.gives in (Gives.MAPPING, Gives.SEQUENCE_OF_ELEMENTS, Gives.UNTRACKED_CONTAINER)
)
# A loop over a dict's entries takes them by key (`for k in d`, `for k in d.keys()`) or as (key, entry)
# pairs (`for k, v in d.items()`): the no-argument methods giving each.
KEYS_METHOD = "keys"
KEY_ENTRY_PAIRS_METHOD = next(name for name, row in CONTAINER_METHODS.items() if row.gives is Gives.KEY_ENTRY_PAIRS)
