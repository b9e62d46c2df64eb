"""Index-set splitting of a dimension that a nest reads through `(d + c) mod n` (the
loop-split-wrapped pass).

A register-stitched `graph.pad` reads its input at `(i - low) mod n` and selects the
pad value where `i - low` falls outside [0, n) (always in bounds, branch-free: see
docs/architecture.md). Along the innermost dimension the mod keeps LLVM from
vectorizing the read, so a ReLU + pad of 16 x 224 x 224 ran element by element: 1.18
ms on one thread where onnxruntime took 0.19. Where `0 <= d + c < n` the mod is the
identity, so the nest splits along that dimension into the pieces its wrapped reads
cut it into, and in each piece the mods that cannot wrap there are dropped:

    loop.nest "pad" lower [0] upper [10] ins(%x : memref<8xf32>) ... maps [(d0) -> ((d0 - 1) mod 8), ...]
becomes
    loop.nest "pad" lower [0] upper [1] ... maps [(d0) -> ((d0 - 1) mod 8), ...]
    loop.nest "pad" lower [1] upper [9] ... maps [(d0) -> (d0 - 1), ...]
    loop.nest "pad" lower [9] upper [10] ... maps [(d0) -> ((d0 - 1) mod 8), ...]

Each piece keeps the body, so it computes what the whole nest computed on its points
(the select still picks the pad value at the border), and the results are the same
bits. Only the innermost dimension of more than one iteration (the one LLVM
vectorizes; a wrap along an outer one costs a mod per row) is split, only where it is
parallel with constant bounds, and only where the mods are pad-like: the pieces they do not
wrap in cover at least half of the dimension (a reshape's `d mod 56` over 3136 rows
is loop-delinearize's business). Reduction dimensions stay whole: a piece would start
its reduction again.
"""

from __future__ import annotations

from xdsl.ir import Operation
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineExpr,
    AffineMap,
)
from xdsl.rewriter import InsertPoint, Rewriter

from mlfuse.dialects import loop
from mlfuse.poly.delinearize import linear
from mlfuse.poly.program import rebuild_nest

# The pieces the wrapped reads cut a dimension into: a pad's three (before, inside, after).
MAX_PIECES = 3


def split_wrapped(fn: Operation) -> int:
    """Split every nest of `fn` that has a pad-like wrapped dimension; how many."""
    count = 0
    for nest in [op for op in fn.walk() if isinstance(op, loop.NestOp)]:
        plan = split_plan(nest)
        if plan is not None:
            split_nest(nest, *plan)
            count += 1
    return count


def wrap_of(expr: AffineExpr, dim: int) -> tuple[int, int] | None:
    """(c, n) when `expr` is `(d<dim> + c) mod n` (n > 0), else None."""
    if not (isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Mod):
        return None
    form = linear(expr.lhs)
    if form is None or form[0] != {dim: 1} or not isinstance(expr.rhs, AffineConstantExpr) or expr.rhs.value <= 0:
        return None
    return form[1], expr.rhs.value


def wrapped_offsets(expr: AffineExpr, dim: int) -> set[tuple[int, int]]:
    """The (c, n) of every `(d<dim> + c) mod n` inside `expr`."""
    if not isinstance(expr, AffineBinaryOpExpr):
        return set()
    found = wrapped_offsets(expr.lhs, dim) | wrapped_offsets(expr.rhs, dim)
    wrap = wrap_of(expr, dim)
    return found | {wrap} if wrap is not None else found


def split_plan(nest: loop.NestOp) -> tuple[int, list[tuple[int, int]]] | None:
    """(dimension, its pieces [lo, hi)) when the innermost dimension of more than one
    iteration (the one LLVM vectorizes) is parallel and has pad-like wrapped reads, else None."""
    bounds = nest.static_bounds()
    inner = [d for d, (lo, hi) in enumerate(bounds or []) if hi - lo > 1]
    if bounds is None or not inner or nest.iterator_kinds[inner[-1]] != loop.PARALLEL:
        return None
    dim = inner[-1]
    wraps = set().union(*(wrapped_offsets(r, dim) for m in nest.access_maps for r in m.results))
    lo, hi = bounds[dim]
    cuts = sorted({p for c, n in wraps for p in (-c, n - c) if lo < p < hi})
    pieces = list(zip([lo, *cuts], [*cuts, hi]))
    unwrapped = sum(b - a for a, b in pieces if all(0 <= a + c and b - 1 + c < n for c, n in wraps))
    if len(pieces) < 2 or len(pieces) > MAX_PIECES or 2 * unwrapped < hi - lo:
        return None
    return dim, pieces


def unwrap(expr: AffineExpr, dim: int, lo: int, hi: int) -> AffineExpr:
    """`expr` with every `(d<dim> + c) mod n` that cannot wrap for d in [lo, hi) replaced by `d<dim> + c`."""
    if not isinstance(expr, AffineBinaryOpExpr):
        return expr
    wrap = wrap_of(expr, dim)
    if wrap is not None and 0 <= lo + wrap[0] and hi - 1 + wrap[0] < wrap[1]:
        return expr.lhs
    lhs, rhs = unwrap(expr.lhs, dim, lo, hi), unwrap(expr.rhs, dim, lo, hi)
    return expr if (lhs, rhs) == (expr.lhs, expr.rhs) else AffineBinaryOpExpr(expr.kind, lhs, rhs)


def split_nest(nest: loop.NestOp, dim: int, pieces: list[tuple[int, int]]) -> None:
    """Replace `nest` by one nest per piece [a, b) of `dim`, in order."""
    lower = [b.data for b in nest.lower.data]
    upper = [b.data for b in nest.upper.data]
    split = []
    for a, b in pieces:
        maps = [AffineMap(m.num_dims, m.num_symbols, tuple(unwrap(r, dim, a, b) for r in m.results)) for m in nest.access_maps]
        piece_lower, piece_upper = list(lower), list(upper)
        piece_lower[dim], piece_upper[dim] = constant_like(lower[dim], a), constant_like(upper[dim], b)
        split.append(rebuild_nest(nest, list(nest.syms), piece_lower, piece_upper, maps))
    Rewriter.insert_op(split, InsertPoint.before(nest))
    Rewriter.erase_op(nest)


def constant_like(bound: AffineMap, value: int) -> AffineMap:
    """The constant bound `value` over `bound`'s dimensions and symbols."""
    return AffineMap(bound.num_dims, bound.num_symbols, (AffineExpr.constant(value),))
