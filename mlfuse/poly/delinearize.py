"""A nest dimension that its accesses only divide and take remainders of splits in two
(the loop-delinearize pass).

A reshape that splits a dimension, lowered together with a transpose, reads through
`d floordiv k` and `d mod k`: attention's output, 1x4x128x64 transposed and reshaped
to 128 x 256, is a nest over [128, 256] reading (d1 floordiv 64, d0, d1 mod 64). LLVM
computes the division for every element and vectorizes nothing. With d = k * a + b
(a < n / k, b < k) every access becomes plain affine, (a, d0, b), and the rows of 64
are copied as vectors.

    loop.nest "t" lower [0, 0] upper [128, 256]
        maps [(d0, d1) -> (d1 floordiv 64, d0, d1 mod 64), (d0, d1) -> (d0, d1)]
becomes
    loop.nest "t" lower [0, 0, 0] upper [128, 4, 64]
        maps [(d0, d1, d2) -> (d1, d0, d2), (d0, d1, d2) -> (d0, d1 * 64 + d2)]

Divisions that the extents make exact go first, with no split: a reshape there and back
reads x[(d0 floordiv 128) * 128 + d0 mod 128] over d0 < 128, which is x[d0] (GELU's
nest in a transformer's MLP); x floordiv 1 is x.

The points run in the same order (d1 = 64 a + b, a outer), so results are bitwise the
same, reductions included. A split is made only when it removes every floordiv and mod
of that dimension (divisors k of its extent are tried from the smallest); nests whose
body names a dimension (`loop.index dim`), or whose bounds are not constants from 0,
are left alone.
"""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.dialects import func
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)
from xdsl.rewriter import Rewriter

from mlfuse.dialects import loop
from mlfuse.poly.program import rebuild_nest, with_maps

# A linear form: {dimension: coefficient}, constant; None where the expression is not one.
Linear = tuple[dict[int, int], int]


def linear(e: AffineExpr) -> Linear | None:
    """`e` as a sum of dimensions times constants plus a constant (None with symbols,
    products of dimensions, or any floordiv, ceildiv or mod)."""
    if isinstance(e, AffineDimExpr):
        return {e.position: 1}, 0
    if isinstance(e, AffineConstantExpr):
        return {}, e.value
    if not isinstance(e, AffineBinaryOpExpr):
        return None
    lhs, rhs = linear(e.lhs), linear(e.rhs)
    if lhs is None or rhs is None:
        return None
    if e.kind == AffineBinaryOpKind.Add:
        terms = dict(lhs[0])
        for d, c in rhs[0].items():
            terms[d] = terms.get(d, 0) + c
        return {d: c for d, c in terms.items() if c}, lhs[1] + rhs[1]
    if e.kind == AffineBinaryOpKind.Mul and (not lhs[0] or not rhs[0]):
        (terms, const), factor = (rhs, lhs[1]) if not lhs[0] else (lhs, rhs[1])
        return {d: c * factor for d, c in terms.items() if c * factor}, const * factor
    return None


def from_linear(form: Linear) -> AffineExpr:
    terms, const = form
    parts = [AffineExpr.dimension(d) * c for d, c in sorted(terms.items())]
    if const or not parts:
        parts.append(AffineExpr.constant(const))
    e = parts[0]
    for part in parts[1:]:
        e = e + part
    return e


def simplify(e: AffineExpr, extents: list[int]) -> AffineExpr:
    """`e` with every floordiv and mod by a constant c of a linear form L removed where
    L's terms not divisible by c stay within [0, c) over the dimensions' extents: then
    L floordiv c is the divisible terms over c, and L mod c the rest."""
    if not isinstance(e, AffineBinaryOpExpr):
        return e
    lhs, rhs = simplify(e.lhs, extents), simplify(e.rhs, extents)
    if e.kind in (AffineBinaryOpKind.FloorDiv, AffineBinaryOpKind.Mod) and isinstance(rhs, AffineConstantExpr) and rhs.value == 1:
        return lhs if e.kind == AffineBinaryOpKind.FloorDiv else AffineExpr.constant(0)
    if e.kind in (AffineBinaryOpKind.FloorDiv, AffineBinaryOpKind.Mod) and isinstance(rhs, AffineConstantExpr) and rhs.value > 0:
        form = linear(lhs)
        if form is not None:
            c = rhs.value
            quotient = {d: a // c for d, a in form[0].items() if a // c}
            rest = {d: a % c for d, a in form[0].items() if a % c}
            reach = form[1] % c + sum(a * (extents[d] - 1) for d, a in rest.items())
            if reach < c:
                kept = (quotient, form[1] // c) if e.kind == AffineBinaryOpKind.FloorDiv else (rest, form[1] % c)
                return from_linear(kept)
    rebuilt = AffineBinaryOpExpr(e.kind, lhs, rhs)
    form = linear(rebuilt)  # folds what the simplification left: 0 * 128 + d0 is d0
    return rebuilt if form is None else from_linear(form)


def divisions(e: AffineExpr) -> Iterator[tuple[AffineExpr, int]]:
    """(dividend, c) of every floordiv and mod by a constant c in `e`."""
    if not isinstance(e, AffineBinaryOpExpr):
        return
    if e.kind in (AffineBinaryOpKind.FloorDiv, AffineBinaryOpKind.Mod, AffineBinaryOpKind.CeilDiv) and isinstance(e.rhs, AffineConstantExpr):
        yield e.lhs, e.rhs.value
    yield from divisions(e.lhs)
    yield from divisions(e.rhs)


def divides(m: AffineMap, d: int) -> bool:
    return any(d in loop.dims_of(dividend) for e in m.results for dividend, _ in divisions(e))


def division_count(maps: list[AffineMap]) -> int:
    return sum(1 for m in maps for e in m.results for _ in divisions(e))


def zero_based_extents(nest: loop.NestOp) -> list[int] | None:
    """The extent of each dimension of `nest`, when every bound is a constant and the
    lower ones are 0 (the ranges simplify() reasons with); else None."""
    bounds = nest.static_bounds()
    if bounds is None or any(lo for lo, _ in bounds):
        return None
    return [hi for _, hi in bounds]


def split_extents(extents: list[int], d: int, k: int) -> list[int]:
    return extents[:d] + [extents[d] // k, k] + extents[d + 1 :]


def split_maps(maps: list[AffineMap], d: int, k: int, extents: list[int]) -> list[AffineMap] | None:
    """The maps over the dimensions with d split into (d, d + 1) = (d // k, d % k),
    simplified; None if a floordiv or mod of the split dimension is left."""
    rank = len(extents)
    new_extents = split_extents(extents, d, k)
    dims: list[AffineExpr] = [AffineExpr.dimension(j if j < d else j + 1) for j in range(rank)]
    dims[d] = AffineExpr.dimension(d) * k + AffineExpr.dimension(d + 1)
    out = []
    for m in maps:
        results = tuple(simplify(e.replace_dims_and_symbols(dims, [AffineExpr.symbol(s) for s in range(m.num_symbols)]), new_extents)
                        for e in m.results)
        split = AffineMap(rank + 1, m.num_symbols, results)
        if divides(split, d) or divides(split, d + 1):
            return None
        out.append(split)
    return out


def tidied_nest(nest: loop.NestOp) -> loop.NestOp | None:
    """`nest` with the divisions its dimensions' extents make exact simplified away
    (x floordiv 128 + x mod 128 over x < 128: x), as a new nest; None if none is."""
    extents = zero_based_extents(nest)
    if extents is None:
        return None
    maps = nest.access_maps
    tidied = [AffineMap(m.num_dims, m.num_symbols, tuple(simplify(e, extents) for e in m.results)) for m in maps]
    if division_count(tidied) == division_count(maps):
        return None
    return with_maps(nest, tidied)


def delinearize_nest(nest: loop.NestOp) -> loop.NestOp | None:
    """`nest` with its first dimension that can be split (see the module docstring)
    split, as a new nest in its place; None if none can be."""
    extents = zero_based_extents(nest)
    if extents is None or nest.syms:
        return None
    if any(isinstance(op, loop.IndexOp) and op.kind.data == loop.IndexKind.DIM for op in nest.body.walk()):
        return None  # its dimensions are named by position
    maps = nest.access_maps
    for d in range(nest.rank):
        divisors = sorted({c for m in maps for e in m.results for dividend, c in divisions(e) if d in loop.dims_of(dividend)})
        for k in divisors:
            if k <= 1 or k >= extents[d] or extents[d] % k:
                continue
            split = split_maps(maps, d, k, extents)
            if split is None:
                continue
            new_extents = split_extents(extents, d, k)
            kinds = nest.iterator_kinds
            lower = [AffineMap.constant_map(0) for _ in new_extents]
            upper = [AffineMap.constant_map(n) for n in new_extents]
            return rebuild_nest(nest, [], lower, upper, split, iterators=kinds[:d] + [kinds[d], kinds[d]] + kinds[d + 1 :])
    return None


def delinearize(fn: func.FuncOp) -> int:
    """Split every dimension of `fn`'s nests that can be (see the module docstring);
    the number of splits."""
    count = 0
    for nest in [op for op in fn.walk() if isinstance(op, loop.NestOp)]:
        while (made := tidied_nest(nest) or delinearize_nest(nest)) is not None:
            Rewriter.replace_op(nest, made)
            nest = made
            count += 1
    return count
