"""Index arithmetic over a symbolic-math library, the way a kernel generator vectorizes a loop."""

import sympy


def vectorized_index(index, var, width):
    lane = sympy.Symbol("lane", integer=True, nonnegative=True)
    stride = index.diff(var)
    expr = index.subs(var, var * width + lane)
    return expr, {"stride": stride, "lane": lane, "base": expr}


def split_range(size, factor):
    outer = sympy.Symbol("outer", integer=True)
    inner = sympy.Symbol("inner", integer=True)
    combined = outer * factor + inner
    return combined, {"outer": outer, "inner": inner, "range": (size // factor, factor)}


def simplify_modular(expr, modulus):
    reduced = sympy.Mod(expr, modulus)
    return reduced, {"expr": reduced.args[0], "mod": reduced}
