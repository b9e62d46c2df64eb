"""Loop coalescing: two adjacent dimensions of a nest that every access walks as one
contiguous run become one dimension (the buffers seen through `loop.view` with the
two memref dimensions merged).

    for c, h < 28, w < 28:  y[0, c, h, w] = max(t[0, c, h, w] + b[c], 0)
->  for c, hw < 784:        y'[0, c, hw]  = max(t'[0, c, hw] + b[c], 0)

Dimensions d and d + 1 (constant bounds from 0, the same iterator kind) merge when
every access map either uses neither of them, or has two adjacent results that are
exactly d and d + 1 where the memref's second dimension is as long as the loop over
d + 1 (so d * S + (d + 1) is the linear position of both), and uses them nowhere else.
The iteration order is unchanged, so results are bitwise the same, reductions
included. Dimensions that a `loop.index` in the body names are left alone.

Why: an epilogue over a 28 x 28 or 7 x 7 image made its inner loop 28 or 7 long,
which LLVM vectorizes with a scalar remainder per row (or not at all), then unrolls
fully and SLP-vectorizes across rows: 0.6-1.4 s of O3 for one 75-line kernel. One
loop of 784 vectorizes with one remainder.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Block, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from mlfuse.dialects import loop


def merged_result(m: AffineMap, d: int) -> int | None:
    """The position k of results (d, d + 1) in `m` when they are exactly those dimensions
    and no other result uses them; -1 when no result uses them; None otherwise."""
    uses = [k for k, e in enumerate(m.results) if e.used_dims() & {d, d + 1}]
    if not uses:
        return -1
    if len(uses) != 2 or uses[1] != uses[0] + 1:
        return None
    k = uses[0]
    first, second = m.results[k], m.results[k + 1]
    if not (isinstance(first, AffineDimExpr) and isinstance(second, AffineDimExpr)):
        return None
    return k if (first.position, second.position) == (d, d + 1) else None


def named_dims(nest: loop.NestOp) -> set[int]:
    return {op.position.value.data for op in nest.block.ops if isinstance(op, loop.IndexOp) and op.kind.data == "dim"}


def buffer_merges(nest: loop.NestOp, d: int, inner: int) -> dict[SSAValue, int] | None:
    """For each buffer an access of `nest` merges at dims (d, d + 1): the memref dimension
    k whose k and k + 1 merge; None if some access does not allow the merge."""
    merges: dict[SSAValue, int] = {}
    for buffer, m in zip([*nest.ins, *nest.outs], nest.access_maps, strict=True):
        k = merged_result(m, d)
        t = buffer.type
        if k is None or not isinstance(t, MemRefType):
            return None
        if k >= 0 and t.get_shape()[k + 1] != inner:
            return None  # the loop does not cover whole rows of the buffer
        if merges.setdefault(buffer, k) != k:
            return None  # one buffer read two ways
    return merges


def coalescible_pair(nest: loop.NestOp) -> tuple[int, dict[SSAValue, int]] | None:
    """The innermost pair (d, d + 1) of `nest` that can merge, with its buffer merges."""
    bounds = nest.static_bounds()
    if bounds is None:
        return None
    kinds, named = nest.iterator_kinds, named_dims(nest)
    for d in reversed(range(nest.rank - 1)):
        (lo0, _), (lo1, hi1) = bounds[d], bounds[d + 1]
        if lo0 or lo1 or kinds[d] != kinds[d + 1] or {d, d + 1} & named:
            continue
        merges = buffer_merges(nest, d, hi1)
        if merges is not None:
            return d, merges
    return None


def merge_dims_of_map(m: AffineMap, d: int, k: int) -> AffineMap:
    """`m` over one dimension fewer: d and d + 1 are one (results k and k + 1 one, when k >= 0)."""
    dims = [AffineExpr.dimension(j if j <= d else j - 1) for j in range(m.num_dims)]
    results = [
        e.replace_dims_and_symbols(dims, [AffineExpr.symbol(s) for s in range(m.num_symbols)]) for e in m.results
    ]
    if k >= 0:
        del results[k + 1]
        results[k] = AffineExpr.dimension(d)
    return AffineMap(m.num_dims - 1, m.num_symbols, tuple(results))


def merged_view(buffer: SSAValue, k: int) -> MemRefType:
    t = buffer.type
    assert isinstance(t, MemRefType)
    shape = list(t.get_shape())
    shape[k : k + 2] = [shape[k] * shape[k + 1]]
    return MemRefType(t.get_element_type(), shape)


def view_merged(rewriter: PatternRewriter, nest: loop.NestOp, buffer: SSAValue, k: int) -> SSAValue:
    """`buffer` with dimensions k and k + 1 merged: a view of it, or of its source if it is a
    view itself (the pass merges pairs one at a time; the views in between are dropped)."""
    owner = buffer.owner
    source = owner.source if isinstance(owner, loop.ViewOp) else buffer
    view = loop.ViewOp(source, merged_view(buffer, k))
    rewriter.insert(view, InsertPoint.before(nest))
    return view.result


def drop_unused_view(rewriter: PatternRewriter, buffer: SSAValue) -> None:
    if isinstance(buffer.owner, loop.ViewOp) and not buffer.uses:
        rewriter.erase(buffer.owner)


def renumber_index_ops(block: Block, d: int) -> None:
    """loop.index dim j > d + 1 is dim j - 1 after the merge."""
    for op in block.ops:
        if isinstance(op, loop.IndexOp) and op.kind.data == "dim" and op.position.value.data > d + 1:
            op.properties["position"] = type(op.position)(op.position.value.data - 1, op.position.type)


def coalesce_once(rewriter: PatternRewriter, nest: loop.NestOp, d: int, merges: dict[SSAValue, int]) -> loop.NestOp:
    """Replace `nest` by the nest with dimensions d and d + 1 merged (views inserted before it)."""
    views: dict[SSAValue, SSAValue] = {}
    for buffer, k in merges.items():
        if k >= 0:
            views[buffer] = view_merged(rewriter, nest, buffer, k)
    bounds = nest.static_bounds()
    assert bounds is not None
    lower, upper = list(nest.lower.data), list(nest.upper.data)
    lower[d : d + 2] = [loop.constant_bound(0)]
    upper[d : d + 2] = [loop.constant_bound(bounds[d][1] * bounds[d + 1][1])]
    kinds = nest.iterator_kinds
    del kinds[d + 1]
    buffers = [*nest.ins, *nest.outs]
    maps = [merge_dims_of_map(m, d, merges[b]) for b, m in zip(buffers, nest.access_maps, strict=True)]
    renumber_index_ops(nest.block, d)
    new = loop.NestOp(
        nest.nest_name.data,
        (lower, upper),
        kinds,
        [views.get(b, b) for b in nest.ins],
        [views.get(b, b) for b in nest.outs],
        maps,
        nest.detach_region(nest.body),
        list(nest.syms),
    )
    new.attributes.update(nest.attributes)
    rewriter.replace(nest, new)
    for buffer in views:
        drop_unused_view(rewriter, buffer)
    return new


class CoalesceNest(RewritePattern):
    """A nest directly in a function (not in a band, whose tile bounds move) with every
    mergeable pair of dimensions merged, innermost first."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, nest: loop.NestOp, rewriter: PatternRewriter) -> None:
        if not isinstance(nest.parent_op(), func.FuncOp):
            return
        while (pair := coalescible_pair(nest)) is not None:
            nest = coalesce_once(rewriter, nest, *pair)


def coalesce_loops(module: ModuleOp) -> None:
    PatternRewriteWalker(CoalesceNest(), apply_recursively=False).rewrite_module(module)
