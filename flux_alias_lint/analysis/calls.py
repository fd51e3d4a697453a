"""Calls: of builtins and container methods (by the rows of `facts.storage`, through `GIVES` and
`UPDATES`), of torch functions and tensor methods (`facts.tensor_ops`), of records; calls of the
project's own functions are `summaries.py`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import libcst as cst

from ..evidence import Declared
from ..facts.storage import (
    BUILTINS,
    CONTAINER_EVIDENCE,
    CONTAINER_METHODS,
    CONTAINER_MUTATORS,
    KEY_ENTRY_PAIRS_METHOD,
    MAPPING_UPDATE,
    ContainerMethod,
    Gives,
    Updates,
    is_model_output,
)
from ..facts.tensor_ops import (
    AMBIGUOUS_METHODS,
    ARRAY_LIBRARIES,
    ARRAY_METHODS,
    COPY_KEYWORD,
    DTYPE_ARGUMENT_METHODS,
    DTYPE_KEEPING_COPIES,
    DTYPE_KEYWORD,
    DTYPE_OF_ARGUMENT_METHODS,
    DTYPE_OF_METHOD,
    NUMBER_METHODS,
    NUMBER_WITHOUT_ARGUMENTS,
    STACKING_FUNCTIONS,
    TORCH_DTYPES,
    AliasKind,
    is_tensor_method,
    method_alias_kind,
    torch_function_alias_kind,
    writes_in_place,
)
from ..index.host_models import handed_write
from ..library import Library
from .captures import entry_holder
from .statements import _constant_index
from .values import (
    IMMUTABLE,
    Alias,
    Env,
    Field,
    Key,
    Op,
    Token,
    Val,
    _as_mapping,
    dotted_name,
    join,
    join_all,
)


class _Method(NamedTuple):
    """A container method's call (`x.get(k)`, `x.append(v)`): what its transfers in `GIVES` and
    `UPDATES` read, its receiver and arguments evaluated already."""

    receiver: Val
    row: ContainerMethod
    key: Key  # the constant its first positional argument is (None: unknown, or none given)
    present: bool  # the receiver has an entry at `key`, a known key
    positional: list[Val]
    keywords: dict[str, Val]


class Calls:
    """Mixin of `ModuleAnalysis`: what a call gives and changes, by what is called."""

    def _eval_Call(self, node: cst.Call, env: Env) -> Val:
        func = node.func
        qualified = self._qualified(func, env)
        if qualified is not None and qualified.partition(".")[0] in ARRAY_LIBRARIES:
            self._args(node, env)
            self._array_sites.add(id(node))
            return self._fresh(node)  # `jnp.einsum(...)`, `np.zeros(n)`: an array, never a tensor
        if qualified is not None:
            handled = self._call_function(qualified, node, env)
            if handled is not None:
                return handled
        summarised = self._call_summarised(func, node, env)
        if summarised is not None:
            return summarised
        record = self._call_record(func, node, env)
        if record is not None:
            return record
        kind = self._declared_return(func, env)
        if isinstance(func, cst.Attribute) and kind is None:
            return self._call_method(func, node, env)
        callee = self._eval(func, env)
        for arg in node.args:
            self._eval(arg.value, env)
        if kind is Declared.IMMUTABLE:
            return IMMUTABLE
        # An unknown function (`runtime_of(node)`, a callable argument) is no evidence of a tensor, even in a
        # module that imports torch: only its annotation is, or a torch function having made the callee
        # (`loss_fct = torch.nn.CrossEntropyLoss()`). Methods are (`_call_method`).
        return self._fresh(node, tensor=kind is Declared.TENSOR or callee.tensor)

    def _call_record(self, func: cst.BaseExpression, node: cst.Call, env: Env) -> Val | None:
        """`Report(lm=loss.detach(), n=n)`: a record of the file or of the project, holding what it is given."""
        if not isinstance(func, cst.Name) or func.value in env or self.library is None:
            return None
        record = self.library.record(func.value)
        if record is None:
            return None
        result = Val(container="dict" if record.mapping else "record")  # a `ModelOutput`'s fields are its entries
        position: int | None = 0 if record.positional else None  # None: which field is not known
        for arg in node.args:
            val = self._eval(arg.value, env)
            key: Key = None
            if arg.keyword is not None:
                key = Field(arg.keyword.value)
            elif arg.star:  # `*values`, `**fields`: any field may get any of their entries
                position = None
                if val.container and not val.items:
                    continue  # `**{}`: nothing given
                val = join_all([v for _, v in val.items]) if val.container else val
            elif position is not None and position < len(record.fields):
                key, position = Field(record.fields[position]), position + 1
            result = self._with_item(result, key, val, strong=key is not None)
        return result

    def _declared_return(self, func: cst.BaseExpression, env: Env) -> Declared | None:
        """What the return annotation of a function of this file says its calls give: `f(...)`, `self.m(...)`."""
        if isinstance(func, cst.Name) and func.value not in env:
            return self.returns.get(func.value)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            return self.returns.get(func.attr.value)
        return None

    def _args(self, node: cst.Call, env: Env) -> tuple[list[Val], dict[str, Val]]:
        positional: list[Val] = []
        keywords: dict[str, Val] = {}
        for arg in node.args:
            val = self._eval(arg.value, env)
            if arg.keyword is not None:
                keywords[arg.keyword.value] = val
            elif arg.star == "":
                positional.append(val)
        return positional, keywords

    def _call_function(self, name: str, node: cst.Call, env: Env) -> Val | None:
        """Calls by qualified name: builtins (`facts.storage.BUILTINS`, by what each gives) and `torch.*`."""
        row = BUILTINS.get(name)
        if row is not None:
            return GIVES[row.gives](self, node, env, None)
        if is_model_output(name):  # `CausalLMOutputWithPast(loss=loss, logits=logits)`: a dict of its fields
            return self._call_dict(node, env)
        if name.startswith("torch."):
            return self._call_torch(name[len("torch.") :], node, env)
        return None

    def _call_dict(self, node: cst.Call, env: Env) -> Val:
        """`dict(d, k=v)`, `dict(**d)`, `dict([(k, v), ...])`, `OrderedDict(...)`, `defaultdict(factory)`."""
        result = Val(container="dict")
        for index, arg in enumerate(node.args):
            val = self._eval(arg.value, env)
            if arg.keyword is not None:
                result = self._with_item(result, arg.keyword.value, val)
            elif arg.star == "**":
                for key, item in val.items:
                    result = self._with_item(result, key, item, strong=key is not None)
            elif index == 0 and arg.star == "" and val.container == "dict":
                result = dataclasses.replace(val, aliases=frozenset())
            elif index == 0 and arg.star == "" and val.container == "seq":
                for _, pair in val.items:  # pairs: the keys are not tracked, the values are
                    result = self._with_item(result, None, pair.item(1), strong=False)
        return result

    def _call_torch(self, name: str, node: cst.Call, env: Env) -> Val:
        positional, _ = self._args(node, env)
        dtype = _keyword_dtype(node)
        kind = torch_function_alias_kind(name)
        if name in STACKING_FUNCTIONS and positional and _literal_length(positional[0]) is not None:
            return dataclasses.replace(self._fresh(node, dtype, tensor=True), length=_literal_length(positional[0]))
        if kind is None or not positional:
            return self._fresh(node, dtype, tensor=True)
        self._tensor_tokens.update(a.token for a in positional[0].aliases)
        source = dataclasses.replace(positional[0], tensor=True)
        if kind is AliasKind.MAY_RETURN_SELF:
            if dtype is not None and source.dtype is not None and dtype != source.dtype:
                return self._fresh(node, dtype, tensor=True)
            dtype = dtype or source.dtype
        else:
            dtype = source.dtype
        return self._derived(source, Op(kind, f"torch.{name}()"), node, dtype)

    def _derived(self, source: Val, op: Op, node: cst.BaseExpression, dtype: str | None) -> Val:
        """Apply an aliasing op to every storage `source` may share (or to a tracked container)."""
        if not source.aliases:
            return Val(immutable=source.immutable, dtype=dtype)
        length = source.length if op.kind is not AliasKind.VIEW else None  # detach, `self`: same shape
        return Val(
            frozenset(a.derive(op, node) for a in source.aliases), dtype=dtype, length=length, tensor=source.tensor
        )

    def _call_method(self, func: cst.Attribute, node: cst.Call, env: Env) -> Val:
        name = func.attr.value
        receiver = self._eval(func.value, env)
        positional, keywords = self._args(node, env)
        if name in CONTAINER_MUTATORS and self._escapes(func.value, env):
            self._capture_arguments(func, name, receiver, positional, keywords, node, env)
        if not receiver.container and name in CONTAINER_MUTATORS and self._is_tracked_entry(func.value, env):
            keyed = CONTAINER_METHODS[name].updates in (Updates.ADDS_ENTRIES, Updates.ADDS_DEFAULT)
            receiver = Val(container="dict" if keyed else "seq")  # a defaultdict's new entry
        if not receiver.container and name in CONTAINER_EVIDENCE and self._is_summarised_parameter(receiver):
            receiver = _as_mapping(receiver)  # a helper's `report` or `metrics`: a dict until shown otherwise
        if not receiver.container and receiver.aliases and _updates_a_mapping(node):
            receiver = _as_mapping(receiver)  # `metric.update({"lm": ...})`, `metric.update(lm=...)`
        if not receiver.container and receiver.aliases and name == KEY_ENTRY_PAIRS_METHOD and not node.args:
            receiver = _as_mapping(receiver)  # `output.items()` of a model's output: its entries, `output["loss"]` too
        if receiver.container:
            result, updated = self._container_method(receiver, name, node, env, positional, keywords)
            if updated is not None:
                self._write_back(func.value, updated, env)
            return result
        of_module = (dotted_name(func.value) or "").partition(".")[0] in self.imports
        if writes_in_place(name) and not of_module:  # `scf.for_(...)`: a function of a module
            self._written(receiver, node, env)
        if positional and handed_write(name, dotted_name(func.value) or "") is not None:
            self._written(positional[0], node, env)  # `accelerator.backward(loss)`: the host divides it in place
        # `.item()`, `.tolist()`, `.type()` (a str), and any method of a str/int/float (`text.partition(...)`).
        if name in NUMBER_METHODS or receiver.immutable or (name in NUMBER_WITHOUT_ARGUMENTS and not node.args):
            return IMMUTABLE
        kind = method_alias_kind(name)
        if name in ARRAY_METHODS and receiver.aliases:  # the copy must go before `.numpy()`: keep the receiver's entry
            op = Op(AliasKind.VIEW, f".{name}()")
            return Val(frozenset(Alias(a.token, a.ops + (op,), a.entry, a.fixable) for a in receiver.aliases))
        if is_tensor_method(name) or (self.torch_module and kind is not None and name not in AMBIGUOUS_METHODS):
            self._tensor_tokens.update(a.token for a in receiver.aliases)
        # A method of a value in a module that imports torch is evidence; a function of an imported
        # module (`sympy.Symbol(...)`, `math.floor(...)`) is not.
        tensor = receiver.tensor or (self.torch_module and not of_module) or is_tensor_method(name)
        if kind is None:
            dtype = receiver.dtype if name in DTYPE_KEEPING_COPIES else None
            if tensor and not (receiver.tensor or is_tensor_method(name)):
                self._guessed_sites.add(id(node))
            return self._fresh(node, dtype, tensor=tensor)
        dtype = receiver.dtype
        if kind is AliasKind.MAY_RETURN_SELF:
            target = self._conversion_dtype(name, positional, keywords, node)
            copies = COPY_KEYWORD in keywords and _is_true(node, COPY_KEYWORD)
            if copies or (target is not None and receiver.dtype is not None and target != receiver.dtype):
                return self._fresh(node, target, tensor=tensor)
            dtype = target or receiver.dtype
        return self._derived(dataclasses.replace(receiver, tensor=tensor), Op(kind, f".{name}()"), node, dtype)

    def _conversion_dtype(
        self, name: str, positional: list[Val], keywords: dict[str, Val], node: cst.Call
    ) -> str | None:
        if name in DTYPE_OF_METHOD:
            return DTYPE_OF_METHOD[name]
        if name in DTYPE_ARGUMENT_METHODS:
            found = _keyword_dtype(node)
            if found is not None:
                return found
            for arg in node.args:
                if arg.keyword is None:
                    found = _dtype_literal(arg.value)
                    if found is not None:
                        return found
        if name in DTYPE_OF_ARGUMENT_METHODS and positional:
            return positional[0].dtype  # `.to(other_tensor)`, `.type_as(other_tensor)`
        return None

    def _capture_arguments(
        self,
        func: cst.Attribute,
        name: str,
        receiver: Val,
        positional: list[Val],
        keywords: dict[str, Val],
        node: cst.Call,
        env: Env,
    ) -> None:
        """`self.losses.append(v)`, `metrics.update({...})`: what a container that outlives the function
        is given. An `update` only of a container or given a mapping (`meter.update(loss)` may copy)."""
        if name == MAPPING_UPDATE and not (receiver.container or _updates_a_mapping(node)):
            return
        given = [*positional, *keywords.values()]
        if given:
            place = self.module.code_for_node(func.value) + "[...]"
            self._capture(place, join_all(given), env)

    def _is_tracked_entry(self, target: cst.BaseExpression, env: Env) -> bool:
        """`report[k]` where `report` is a tracked dict (or a helper's parameter used as one)."""
        if not isinstance(target, cst.Subscript):
            return False
        owner = dotted_name(target.value)
        base = env.get(owner) if owner is not None else None
        return base is not None and (base.container == "dict" or self._is_summarised_parameter(base))

    def _write_back(self, target: cst.BaseExpression, updated: Val, env: Env) -> None:
        """Store a mutated container where it came from: a name (`report.update(...)`) or an entry of a
        tracked container (`report["k"].append(v)`, a `defaultdict(list)`)."""
        owner = dotted_name(target)
        if owner is not None:
            env[owner] = updated
        elif isinstance(target, cst.Subscript):
            self._store_item(target, updated, env)
        elif (holder := entry_holder(target)) is not None:  # `report.setdefault(k, []).append(v)`
            assert isinstance(target, cst.Call)
            name = dotted_name(holder)
            current = env.get(name) if name is not None else None
            if current is not None and current.container == "dict":
                arg = target.args[0] if target.args and target.args[0].keyword is None else None
                key = _constant_index(arg.value) if arg is not None else None
                self._write_back(holder, current.with_item(key, updated, strong=key is not None), env)

    def _container_method(
        self, receiver: Val, name: str, node: cst.Call, env: Env, positional: list[Val], keywords: dict[str, Val]
    ) -> tuple[Val, Val | None]:
        """dict/list methods (`facts.storage.CONTAINER_METHODS`, by what each gives and how it changes its
        receiver): (what the call gives, the container after it when it changes it)."""
        row = CONTAINER_METHODS.get(name)
        if row is None:
            return IMMUTABLE, None
        key = _constant_index(node.args[0].value) if node.args and node.args[0].keyword is None else None
        present = receiver.has(key)
        method = _Method(receiver, row, key, present, positional, keywords)
        return GIVES[row.gives](self, node, env, method), UPDATES[row.updates](self, node, method)

    # ---- what a row gives (`GIVES`): a builtin's transfer evaluates its arguments (`method` is None) ----

    def _gives_number(self, node: cst.Call, env: Env, method: _Method | None) -> Val | None:
        if method is None:
            self._args(node, env)
        return IMMUTABLE

    def _gives_mapping(self, node: cst.Call, env: Env, method: _Method | None) -> Val | None:
        return self._call_dict(node, env)

    def _gives_sequence_of_elements(self, node: cst.Call, env: Env, method: _Method | None) -> Val | None:
        positional, _ = self._args(node, env)
        if not positional:
            return Val(container="seq")
        return Val(container="seq", items=((None, self._element_of(positional[0], node)),))

    def _gives_tuples_of_elements(self, node: cst.Call, env: Env, method: _Method | None) -> Val | None:
        positional, _ = self._args(node, env)
        pair = Val(container="seq", items=tuple((i, self._element_of(v, node)) for i, v in enumerate(positional)))
        return Val(container="seq", items=((None, pair),))

    def _gives_one_of_arguments(self, node: cst.Call, env: Env, method: _Method | None) -> Val | None:
        positional, _ = self._args(node, env)
        if len(positional) == 1:
            positional = [self._element_of(positional[0], node)]
        return join_all(positional).entered_at(node) if positional else self._fresh(node)

    def _gives_deep_copy(self, node: cst.Call, env: Env, method: _Method | None) -> Val | None:
        positional, _ = self._args(node, env)
        return _without_aliases(positional[0]) if positional else Val()

    def _gives_same_storage(self, node: cst.Call, env: Env, method: _Method | None) -> Val | None:
        positional, _ = self._args(node, env)
        return positional[0].entered_at(node) if positional else self._fresh(node)

    def _gives_untracked_container(self, node: cst.Call, env: Env, method: _Method | None) -> Val | None:
        return None  # an unknown call's value (`_eval_Call` goes on): it may hide a finding, never make one

    def _gives_entry_or_default(self, node: cst.Call, env: Env, method: _Method | None) -> Val | None:
        assert method is not None
        receiver, key, present, positional = method.receiver, method.key, method.present, method.positional
        if positional:
            default = positional[1] if len(positional) > 1 else IMMUTABLE
            if method.row.updates is Updates.ADDS_DEFAULT and not present:
                result = default  # it becomes the entry (`UPDATES`), as it is
            else:
                result = receiver.item(key) if present else join(receiver.item(key), default)
            return result.entered_at(node)
        if method.row.updates is Updates.REMOVES_ENTRY and receiver.container == "seq":
            return receiver.item(None).entered_at(node) if receiver.items else Val()  # `stack.pop()`: the last element
        return IMMUTABLE

    def _gives_receiver(self, node: cst.Call, env: Env, method: _Method | None) -> Val | None:
        assert method is not None
        return method.receiver

    def _gives_entries(self, node: cst.Call, env: Env, method: _Method | None) -> Val | None:
        assert method is not None
        receiver = method.receiver
        return Val(container="seq", items=((None, receiver.item(None)),)) if receiver.items else Val(container="seq")

    def _gives_key_entry_pairs(self, node: cst.Call, env: Env, method: _Method | None) -> Val | None:
        assert method is not None
        receiver = method.receiver
        pair = Val(container="seq", items=((0, IMMUTABLE), (1, receiver.item(None) if receiver.items else Val())))
        return Val(container="seq", items=((None, pair),))

    def _gives_nothing(self, node: cst.Call, env: Env, method: _Method | None) -> Val | None:
        return IMMUTABLE

    # ---- how a container method changes its receiver (`UPDATES`): None, not at all ----------------

    def _updates_nothing(self, node: cst.Call, method: _Method) -> Val | None:
        return None

    def _adds_argument(self, node: cst.Call, method: _Method) -> Val | None:
        if not method.positional:
            return None
        return self._with_item(method.receiver, None, method.positional[-1], strong=False)

    def _adds_elements(self, node: cst.Call, method: _Method) -> Val | None:
        if not method.positional:
            return None
        given = method.positional[0]
        element = self._element_of(given, node)
        if self._is_summarised_parameter(
            given
        ):  # a helper's `values`: the caller's list, its elements looked up at the call
            element = join(element, _as_mapping(given).item(None))
        return self._with_item(method.receiver, None, element, strong=False)

    def _adds_entries(self, node: cst.Call, method: _Method) -> Val | None:
        updated = method.receiver
        for given in method.positional:
            # A helper's `parts`: the caller's dict, its entries looked up at the call.
            val = _as_mapping(given) if self._is_summarised_parameter(given) else given
            for k, v in val.items:
                updated = self._with_item(updated, k, v, strong=k is not None)
        for k, v in method.keywords.items():
            updated = self._with_item(updated, k, v)
        return updated

    def _adds_default(self, node: cst.Call, method: _Method) -> Val | None:
        if not method.positional or method.present:
            return None
        default = method.positional[1] if len(method.positional) > 1 else IMMUTABLE
        return self._with_item(method.receiver, method.key, default)

    def _removes_entry(self, node: cst.Call, method: _Method) -> Val | None:
        if not method.positional or not method.present:
            return None
        items = tuple((k, v) for k, v in method.receiver.items if k != method.key)
        return dataclasses.replace(method.receiver, items=items)

    def _clears(self, node: cst.Call, method: _Method) -> Val | None:
        return dataclasses.replace(method.receiver, items=())

    # Provided by the other parts of `ModuleAnalysis`.
    _array_sites: set[int]
    _guessed_sites: set[int]
    imports: dict[str, str]
    library: Library | None
    module: cst.Module
    returns: dict[str, Declared]
    _tensor_tokens: set[Token]
    torch_module: bool
    _call_summarised: Callable[[cst.BaseExpression, cst.Call, Env], Val | None]
    _capture: Callable[[str, Val, Env], None]
    _element_of: Callable[..., Val]
    _escapes: Callable[[cst.BaseExpression, Env], bool]
    _eval: Callable[[cst.BaseExpression, Env], Val]
    _fresh: Callable[..., Val]
    _is_summarised_parameter: Callable[[Val], bool]
    _qualified: Callable[[cst.BaseExpression, Env], str | None]
    _store_item: Callable[[cst.Subscript, Val, Env], None]
    _with_item: Callable[..., Val]
    _written: Callable[[Val, cst.CSTNode, Env], None]


# One transfer per member of `facts.storage.Gives` and `Updates`: every row of the facts is handled.
GIVES: dict[Gives, Callable[[Calls, cst.Call, Env, _Method | None], Val | None]] = {
    Gives.NUMBER: Calls._gives_number,
    Gives.MAPPING: Calls._gives_mapping,
    Gives.SEQUENCE_OF_ELEMENTS: Calls._gives_sequence_of_elements,
    Gives.TUPLES_OF_ELEMENTS: Calls._gives_tuples_of_elements,
    Gives.ONE_OF_ARGUMENTS: Calls._gives_one_of_arguments,
    Gives.DEEP_COPY: Calls._gives_deep_copy,
    Gives.SAME_STORAGE: Calls._gives_same_storage,
    Gives.UNTRACKED_CONTAINER: Calls._gives_untracked_container,
    Gives.ENTRY_OR_DEFAULT: Calls._gives_entry_or_default,
    Gives.RECEIVER: Calls._gives_receiver,
    Gives.ENTRIES: Calls._gives_entries,
    Gives.KEY_ENTRY_PAIRS: Calls._gives_key_entry_pairs,
    Gives.NOTHING: Calls._gives_nothing,
}
UPDATES: dict[Updates, Callable[[Calls, cst.Call, _Method], Val | None]] = {
    Updates.NOTHING: Calls._updates_nothing,
    Updates.ADDS_ARGUMENT: Calls._adds_argument,
    Updates.ADDS_ELEMENTS: Calls._adds_elements,
    Updates.ADDS_ENTRIES: Calls._adds_entries,
    Updates.ADDS_DEFAULT: Calls._adds_default,
    Updates.REMOVES_ENTRY: Calls._removes_entry,
    Updates.CLEARS: Calls._clears,
}


def _updates_a_mapping(node: cst.Call) -> bool:
    """`x.update(...)` given a dict display or keywords: `x` is a mapping (`pbar.update(1)` is not)."""
    if not (isinstance(node.func, cst.Attribute) and node.func.attr.value == MAPPING_UPDATE):
        return False
    return any(
        arg.keyword is not None or arg.star == "**" or isinstance(arg.value, (cst.Dict, cst.DictComp))
        for arg in node.args
    )


def _literal_length(val: Val) -> int | None:
    """The length of a list or tuple display with no starred element."""
    if val.container == "seq" and all(isinstance(k, int) for k, _ in val.items):
        return len(val.items)
    return None


def _without_aliases(val: Val) -> Val:
    return dataclasses.replace(val, aliases=frozenset(), items=tuple((k, _without_aliases(v)) for k, v in val.items))


def _dtype_literal(node: cst.BaseExpression) -> str | None:
    """`torch.bfloat16` → "bfloat16"; strings like "torch.FloatTensor" are not tracked."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "torch":
        return TORCH_DTYPES.get(node.attr.value)
    return None


def _keyword_dtype(node: cst.Call) -> str | None:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == DTYPE_KEYWORD:
            return _dtype_literal(arg.value)
    return None


def _is_true(node: cst.Call, keyword: str) -> bool:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return isinstance(arg.value, cst.Name) and arg.value.value == "True"
    return False
