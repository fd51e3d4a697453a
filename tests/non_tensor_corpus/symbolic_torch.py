"""Symbols built by a library's functions in a module that imports torch (a compiler's index rewriting)."""

import sympy
import torch


def index_symbols(nodes, offset=None):
    row = sympy.Symbol("row", integer=True)
    col = sympy.Symbol("col", integer=True)
    symbols = {node: sympy.Symbol(str(node), integer=True) for node in nodes}
    symbols["row"] = row
    symbols["col"] = col if offset is None else offset
    return row, col, symbols


def on_device(name):
    return name, {"name": name, "cuda": torch.cuda.is_available()}
