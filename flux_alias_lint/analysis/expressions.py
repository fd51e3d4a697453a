"""Expressions: what each kind of expression evaluates to (`_eval_<node type>`), calls aside (`calls.py`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import libcst as cst

from ..facts.tensor_ops import AliasKind, attribute_alias_kind
from .statements import Work, _constant_index, _OtherKeys
from .values import IMMUTABLE, Alias, Env, Field, Free, Item, Key, Op, Site, Token, Val, dotted_name, join


class Expressions:
    """Mixin of `ModuleAnalysis`: `_eval` and its handlers, one per kind of expression."""

    def _fresh(self, node: cst.CSTNode, dtype: str | None = None, tensor: bool = False) -> Val:
        """A new value allocated at `node` (a copy, an arithmetic result, an unknown call); `tensor`:
        there is evidence that it is a tensor."""
        # Tagged with the loop passes it happens in: what one iteration allocates is never the
        # object the next iteration allocates at the same place.
        return Val(frozenset({Alias(Site(id(node), self._passes), (), node)}), dtype=dtype, tensor=tensor)

    def _eval(self, node: cst.BaseExpression, env: Env) -> Val:
        method = getattr(self, "_eval_" + type(node).__name__, None)
        if method is not None:
            val = method(node, env)
            self.work.aliases += len(val.aliases)
            return val
        if isinstance(node, (cst.BaseNumber, cst.BaseString, cst.Ellipsis)):
            return IMMUTABLE
        for child in node.children:
            if isinstance(child, cst.BaseExpression):
                self._eval(child, env)
        return self._fresh(node)

    def _eval_Name(self, node: cst.Name, env: Env) -> Val:
        if node.value in env:
            return env[node.value].entered_at(node)
        if node.value in ("None", "True", "False"):
            return IMMUTABLE
        return Val(frozenset({Alias(Free(node.value), (), node)}))

    def _eval_Attribute(self, node: cst.Attribute, env: Env) -> Val:
        qualified = self._qualified(node, env)
        if qualified is not None and qualified.startswith("torch."):
            return IMMUTABLE  # torch.float32, torch.bfloat16 and the like
        dotted = dotted_name(node)
        if dotted is not None and dotted in env:
            return env[dotted].entered_at(node)
        base = self._eval(node.value, env)
        if base.container == "record":  # only a record has the field: what it gives went through one
            return base.item(Field(node.attr.value)).entered_at(node)
        kind = attribute_alias_kind(node.attr.value)
        if kind is not None and self.torch_module:  # `.data`, `.T` in a torch module: a tensor's
            self._tensor_tokens.update(a.token for a in base.aliases)
        if kind is not None and base.aliases:
            op = Op(kind, "." + node.attr.value)
            length = base.length if kind is AliasKind.DETACH else None
            aliases = frozenset(a.derive(op, node) for a in base.aliases)
            return Val(aliases, dtype=base.dtype, length=length, tensor=base.tensor)
        if dotted is not None:
            return Val(frozenset({Alias(Free(dotted), (), node)}))
        return self._fresh(node)

    def _eval_Subscript(self, node: cst.Subscript, env: Env) -> Val:
        base = self._eval(node.value, env)
        indices = [self._eval_slice(s.slice, env) for s in node.slice]
        if base.container:
            key = indices[0][0] if len(indices) == 1 and indices[0][1] == "const" else None
            if isinstance(key, int) and key < 0 and base.container == "seq":
                key += len(base.items)
            return base.item(key).entered_at(node) if base.items else Val()
        if not base.aliases:
            return Val(immutable=base.immutable)
        if len(indices) == 1 and isinstance(indices[0][0], str):
            # `batch["labels"]`: a lookup in a mapping, never a view of a tensor. The same key read
            # twice is the same object; it shares nothing with the mapping itself.
            return Val(frozenset(Alias(Item(a.token, indices[0][0]), (), node, True) for a in base.aliases))
        if all(kind in ("const", "basic") for _, kind in indices):
            consts = [key for key, kind in indices if kind == "const" and isinstance(key, int)]
            # A single constant index narrows the storage (x[0] and x[1] are disjoint). A negative
            # one only where the length is known: x[-1] is x[1] when x has two rows.
            index = consts[0] if len(indices) == 1 and consts else None
            if index is not None and index < 0:
                index = index + base.length if base.length is not None and index + base.length >= 0 else None
            op = Op(AliasKind.VIEW, "[" + ", ".join(self.module.code_for_node(s.slice) for s in node.slice) + "]")
            aliases = frozenset(a.derive(op, node, index) for a in base.aliases)
            return Val(aliases, dtype=base.dtype, tensor=base.tensor)
        return self._fresh(node, base.dtype, tensor=base.tensor)  # advanced indexing copies

    def _eval_slice(self, item: cst.BaseSlice, env: Env) -> tuple[Key, str]:
        """Classify one index: a constant, a basic view index, or anything else."""
        if isinstance(item, cst.Slice):
            for part in (item.lower, item.upper, item.step):
                if part is not None:
                    self._eval(part, env)
            return None, "basic"
        assert isinstance(item, cst.Index)
        value = item.value
        const = self._key_of(value)
        if const is not None:
            return const, "const"
        if isinstance(value, (cst.Ellipsis)) or (isinstance(value, cst.Name) and value.value == "None"):
            return None, "basic"
        val = self._eval(value, env)
        return None, "basic" if val.immutable else "other"

    def _eval_Tuple(self, node: cst.Tuple, env: Env) -> Val:
        return self._sequence(node.elements, env)

    def _eval_List(self, node: cst.List, env: Env) -> Val:
        return self._sequence(node.elements, env)

    def _sequence(self, elements: Sequence[cst.BaseElement], env: Env) -> Val:
        items: list[tuple[Key, Val]] = []
        unknown = False
        for element in elements:
            val = self._eval(element.value, env)
            if isinstance(element, cst.StarredElement):
                items.append((None, self._element_of(val, element.value)))
                unknown = True
            else:
                items.append((None if unknown else len(items), val))
        return Val(container="seq", items=tuple(items))

    def _eval_Dict(self, node: cst.Dict, env: Env) -> Val:
        # Built in one go, as `with_item` would entry by entry: a 20,000-entry literal is not
        # 20,000 copies of a growing tuple. An unknown key (None) may be any other: it joins.
        items: list[tuple[Key, Val]] = []
        positions: dict[Key, int] = {}
        for element in node.elements:
            if isinstance(element, cst.StarredDictElement):
                pairs: Sequence[tuple[Key, Val]] = self._eval(element.value, env).items
            else:
                self._eval(element.key, env)
                pairs = [(_constant_index(element.key), self._eval(element.value, env))]
            for key, val in pairs:
                position = positions.get(key)
                if position is None:
                    positions[key] = len(items)
                    items.append((key, val))
                else:
                    items[position] = (key, val if key is not None else join(items[position][1], val))
        return Val(container="dict", items=tuple(items))

    def _eval_IfExp(self, node: cst.IfExp, env: Env) -> Val:
        self._eval(node.test, env)
        return join(self._eval(node.body, env), self._eval(node.orelse, env))

    def _eval_BooleanOperation(self, node: cst.BooleanOperation, env: Env) -> Val:
        return join(self._eval(node.left, env), self._eval(node.right, env))

    def _eval_NamedExpr(self, node: cst.NamedExpr, env: Env) -> Val:
        val = self._eval(node.value, env)
        self._bind(node.target, val, env)
        return val

    def _eval_BinaryOperation(self, node: cst.BinaryOperation, env: Env) -> Val:
        left, right = self._eval(node.left, env), self._eval(node.right, env)
        if left.immutable and right.immutable:
            return IMMUTABLE
        return self._fresh(node, tensor=left.tensor or right.tensor)

    def _eval_UnaryOperation(self, node: cst.UnaryOperation, env: Env) -> Val:
        val = self._eval(node.expression, env)
        if val.immutable or isinstance(node.operator, cst.Not):
            return IMMUTABLE
        return self._fresh(node, tensor=val.tensor)

    def _eval_Comparison(self, node: cst.Comparison, env: Env) -> Val:
        self._eval(node.left, env)
        for target in node.comparisons:
            self._eval(target.comparator, env)
        return self._fresh(node)

    def _eval_Lambda(self, node: cst.Lambda, env: Env) -> Val:
        self._analyze_function(node, env)
        return IMMUTABLE

    def _comprehension_env(self, node: cst.BaseComp, env: Env) -> Env:
        inner = dict(env)
        clause: cst.CompFor | None = node.for_in
        while clause is not None:
            self._bind(clause.target, self._element_of(self._eval(clause.iter, inner), clause.iter), inner)
            for cond in clause.ifs:
                self._eval(cond.test, inner)
            clause = clause.inner_for_in
        return inner

    def _eval_ListComp(self, node: cst.ListComp, env: Env) -> Val:
        inner = self._comprehension_env(node, env)
        return Val(container="seq", items=((None, self._element(node.elt, inner)),))

    _eval_GeneratorExp = _eval_ListComp

    def _eval_SetComp(self, node: cst.SetComp, env: Env) -> Val:
        self._eval(node.elt, self._comprehension_env(node, env))
        return self._fresh(node)

    def _eval_DictComp(self, node: cst.DictComp, env: Env) -> Val:
        inner = self._comprehension_env(node, env)
        self._eval(node.key, inner)
        return Val(container="dict", items=((None, self._element(node.value, inner)),))

    def _element(self, node: cst.BaseExpression, inner: Env) -> Val:
        """A comprehension's element. A copy put there is put on every element: only where a tensor
        method or attribute made each (`[x.detach() for x in xs]`) is it a fix; a bare element
        (`{k: v for k, v in kwargs.items()}`, bools and None among them), or one in a tuple
        (`dict((k, v) for ...)`), is flagged, not fixed."""
        return _unfixable_unless_made_by_a_method(self._eval(node, inner))

    # Provided by the other parts of `ModuleAnalysis`.
    module: cst.Module
    _passes: tuple[int, ...]
    _tensor_tokens: set[Token]
    torch_module: bool
    work: Work
    _analyze_function: Callable[[cst.FunctionDef | cst.Lambda, Env], None]
    _bind: Callable[[cst.BaseExpression, Val, Env], None]
    _element_of: Callable[..., Val]
    _key_of: Callable[..., Key | _OtherKeys]
    _qualified: Callable[[cst.BaseExpression, Env], str | None]


def _unfixable_unless_made_by_a_method(val: Val) -> Val:
    """`val`, each alias of it or of its entries not made by a tensor method or attribute marked unfixable."""
    aliases = frozenset(
        a if not a.fixable or (a.ops and a.ops[-1].label.startswith(".")) else dataclasses.replace(a, fixable=False)
        for a in val.aliases
    )
    items = tuple((key, _unfixable_unless_made_by_a_method(item)) for key, item in val.items)
    return dataclasses.replace(val, aliases=aliases, items=items)
