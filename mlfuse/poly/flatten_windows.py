"""A window nest over narrow output rows runs over the rows' flat positions in the input's
pitch (loop-flatten-windows).

A depthwise conv or pooling with output rows of at most 16 (graph_to_loop.ROW_IN_REGISTERS)
is iterated (..., oh, kh, kw, ow): LLVM unrolls the row and the SLP vectorizer writes it
in pieces (a 7-wide row: 4 + 2 + 1 lanes, no 16-lane vector at all). Seen flat, output
position p = oh * wp + ow of a buffer whose rows are as wide as the input's (wp) reads
input element p + kh * wp + kw: the nest becomes (..., p, kh, kw), p from 0 to
(OH - 1) * wp + OW, and the loop vectorizer takes p with the sum in registers, the taps
unrolled inside. The positions with ow >= OW compute what nothing reads (their reads stay
in the input buffer: the last one read is its last element). The output buffer, a
tile-local `memref.alloca` that only nests use, becomes wp wide; its other nests read
and write it by the same indices. Where the window input is such a buffer too, p runs on
to a whole number of 64-byte vectors (`VECTOR_BYTES`), both buffers a few rows taller
for the extra positions' reads and writes, which nothing else touches: the loop
vectorizer had split a 7 x 7 image's 61 positions into 8-lane vectors, then 4 lanes and
single ones; 64 are four 16-lane vectors (one thread, side by side, same bits: depthwise
conv + ReLU6 over 960 x 7 x 7 0.93x the time, 576 x 14 x 14 0.94x). Each output sums its
taps in the same order (LLVM may contract other products into fused multiply-adds: the
bodies' `contract` allows it).

Flattened when all of these hold (else the nest is left as it is):
- the last three dimensions are (kh, kw, ow): reductions, then a parallel one, from 0 to
  constants; an outer parallel dimension oh from 0 to a constant; bounds use no dimension;
- one input reads (..., oh + kh + r0, ow + kw + c0) (stride and dilation 1), its last two
  indices, and the output is written at (..., oh, ow), its last two indices; no other
  index, and no other operand, uses oh or ow, and only the window input uses kh and kw
  together with them;
- the output is one tile-local `memref.alloca` whose rows are OW wide, used by nests only;
- the body does not name a dimension (`loop.index`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from mlfuse.abi import element_bytes
from mlfuse.dialects import loop
from mlfuse.poly.delinearize import linear
from mlfuse.poly.program import rebuild_nest

# Rows wider than this are iterated with the taps inside already (graph_to_loop.ROW_IN_REGISTERS).
NARROW_ROW = 16
# The flat positions run to a multiple of this many bytes (an AVX-512 vector, a cache line)
# where the window input may grow (see the module docstring).
VECTOR_BYTES = 64


@dataclass(frozen=True)
class Flattening:
    """How a window nest flattens: its dimensions oh, kh, kw, ow and their extents; the
    window input's operand index and its row pitch wp; the first input element read (r0, c0)."""

    nest: loop.NestOp
    oh: int
    kh: int
    kw: int
    ow: int
    extents: tuple[int, int, int, int]  # of oh, kh, kw, ow
    window: int
    pitch: int
    origin: tuple[int, int]


def flatten_windows(fn: Operation) -> int:
    """Flatten every window nest under `fn` that qualifies; how many were. Each nest is
    planned after the ones before it are flattened: a widened output may be a later
    nest's window input, whose pitch is then the widened one."""
    flattened = 0
    for nest in [op for op in fn.walk() if isinstance(op, loop.NestOp)]:
        plan = flattening(nest)
        if isinstance(plan, Flattening):
            flatten(plan)
            flattened += 1
    return flattened


def constant_extent(nest: loop.NestOp, d: int) -> int | None:
    """Dimension d's extent when it runs from 0 to a constant."""
    lower, upper = loop.constant_of(nest.lower.data[d].data), loop.constant_of(nest.upper.data[d].data)
    return upper if lower == 0 else None


def flattening(nest: loop.NestOp) -> Flattening | str:
    """The plan for `nest`, or why it is left alone."""
    rank = len(nest.iterators.data)
    kinds = nest.iterator_kinds
    if rank < 4 or kinds[-3:] != [loop.REDUCTION, loop.REDUCTION, loop.PARALLEL] or len(nest.outs) != 1:
        return "not (..., kh, kw, ow) with one output"
    if any(m.data.used_dims() for m in (*nest.lower.data, *nest.upper.data)):
        return "bounds that use dimensions"
    if any(op.name == "loop.index" for op in nest.body.walk()):
        return "a body that names a dimension"
    kh, kw, ow = rank - 3, rank - 2, rank - 1
    out_map = nest.access_maps[len(nest.ins)]
    if len(out_map.results) < 2 or out_map.results[-1] != AffineExpr.dimension(ow):
        return "an output not written at (..., ow)"
    row = out_map.results[-2]
    oh = row.position if hasattr(row, "position") else None  # pyright: ignore[reportAttributeAccessIssue]
    if oh is None or kinds[oh] != loop.PARALLEL:
        return "an output not written at (..., oh, ow)"
    extents = tuple(constant_extent(nest, d) for d in (oh, kh, kw, ow))
    if None in extents or extents[3] > NARROW_ROW:  # type: ignore[operator]
        return "rows wider than NARROW_ROW, or bounds that are not constants"
    window = window_input(nest, (oh, kh, kw, ow))
    if isinstance(window, str):
        return window
    index, origin = window
    source = nest.ins[index].type
    assert isinstance(source, MemRefType)
    if loop.view_root(nest.ins[index]) is nest.outs[0]:
        return "a window read of the output itself"
    if not output_widens(nest.outs[0], extents[3]):  # type: ignore[arg-type]
        return "an output that is not a tile-local buffer of rows OW wide, used by nests only"
    return Flattening(nest, oh, kh, kw, ow, extents, index, source.get_shape()[-1], origin)  # type: ignore[arg-type]


def window_input(nest: loop.NestOp, window: tuple[int, int, int, int]) -> tuple[int, tuple[int, int]] | str:
    """The input read at (..., oh + kh + r0, ow + kw + c0), and (r0, c0), or why none is."""
    oh, kh, kw, ow = window
    found = None
    for i, m in enumerate(nest.access_maps):
        used = set().union(*(e.used_dims() for e in m.results[-2:])) if len(m.results) >= 2 else set()
        if not used & {oh, ow}:
            if any(e.used_dims() & {oh, ow} for e in m.results):
                return "an operand indexed by oh or ow elsewhere"
            continue
        if i >= len(nest.ins):  # the output, at (..., oh, ow) as the caller checked
            if any(e.used_dims() & {oh, kh, kw, ow} for e in m.results[:-2]):
                return "an output indexed by oh or ow elsewhere"
            continue
        results = list(m.results)  # (a list: pyright reads the tuple's length off the check above)
        rows, cols = linear(results[-2]), linear(results[-1])
        if rows is None or cols is None or rows[0] != {oh: 1, kh: 1} or cols[0] != {ow: 1, kw: 1}:
            return "a window read with strides or dilations, or not at (oh + kh, ow + kw)"
        if any(e.used_dims() & {oh, kh, kw, ow} for e in m.results[:-2]) or found is not None:
            return "a window read by other indices too, or two window reads"
        found = (i, (rows[1], cols[1]))
    return found if found is not None else "no window read"


def output_widens(buffer: SSAValue, row: int) -> bool:
    """Whether `buffer` is a `memref.alloca` with rows `row` wide that only nests use."""
    t = buffer.type
    return (
        isinstance(buffer.owner, memref.AllocaOp)
        and isinstance(t, MemRefType)
        and t.get_shape()[-1] == row
        and all(isinstance(use.operation, loop.NestOp) for use in buffer.uses)
    )


def flatten(plan: Flattening) -> None:
    """Rewrite the plan's nest over flat positions, its output buffer wp wide."""
    nest, wp = plan.nest, plan.pitch
    rank = len(nest.iterators.data)
    oh_extent, kh_extent, kw_extent, ow_extent = plan.extents
    outer = [d for d in range(rank) if d not in (plan.oh, plan.kh, plan.kw, plan.ow)]
    new_dims = {d: i for i, d in enumerate(outer)}
    p, kh, kw = len(outer), len(outer) + 1, len(outer) + 2
    new_dims.update({plan.kh: kh, plan.kw: kw})
    substitution = [AffineExpr.dimension(new_dims[d]) if d in new_dims else AffineExpr.constant(0) for d in range(rank)]

    def moved(e: AffineExpr, symbols: int) -> AffineExpr:
        return e.replace_dims_and_symbols(substitution, [AffineExpr.symbol(s) for s in range(symbols)])

    last = (oh_extent - 1) * wp + ow_extent  # one past the last output's position
    points = whole_vectors(plan, last)
    if points > last:  # the extra positions read up to points - last elements past the input
        source = nest.ins[plan.window]
        grow_alloca(source, source.type.get_shape()[-2] + -(-(points - last) // wp))  # type: ignore[union-attr]
    wide = widen_alloca(nest.outs[0], wp, -(-points // wp))  # the nest's output is now `wide`
    r0, c0 = plan.origin
    flat_in = AffineExpr.dimension(p) + AffineExpr.dimension(kh) * wp + AffineExpr.dimension(kw) + (r0 * wp + c0)
    flat = {plan.window: flat_in, len(nest.ins): AffineExpr.dimension(p)}  # operand index -> its flat index
    maps, buffers = [], {}
    for i, (m, value) in enumerate(zip(nest.access_maps, [*nest.ins, wide])):
        results = [moved(e, m.num_symbols) for e in m.results]
        if i in flat:
            results = [*results[:-2], flat[i]]
            buffers[value] = flat_view(nest, value)
        maps.append(AffineMap(rank - 1, m.num_symbols, tuple(results)))
    bounds = [nest.lower.data[d].data for d in outer], [nest.upper.data[d].data for d in outer]
    lower = [*bounds[0], *(AffineMap.constant_map(0) for _ in range(3))]
    upper = [*bounds[1], *(AffineMap.constant_map(n) for n in (points, kh_extent, kw_extent))]
    kinds = nest.iterator_kinds
    iterators = [kinds[d] for d in outer] + [kinds[plan.ow], kinds[plan.kh], kinds[plan.kw]]
    Rewriter.replace_op(nest, rebuild_nest(nest, list(nest.syms), lower, upper, maps, buffers, iterators))


def whole_vectors(plan: Flattening, points: int) -> int:
    """`points` flat positions rounded up to whole vectors (VECTOR_BYTES) where the window
    input is a tile-local buffer that only nests use (so it may grow), else `points`."""
    source = plan.nest.ins[plan.window]
    t = source.type
    assert isinstance(t, MemRefType)
    grows = isinstance(source.owner, memref.AllocaOp) and all(isinstance(u.operation, loop.NestOp) for u in source.uses)
    if not grows:
        return points
    lanes = max(1, VECTOR_BYTES // element_bytes(t.get_element_type()))
    return -(-points // lanes) * lanes


def grow_alloca(buffer: SSAValue, rows: int) -> SSAValue:
    """Replace `buffer`'s `memref.alloca` by one of `rows` rows, its rows as wide."""
    return widen_alloca(buffer, buffer.type.get_shape()[-1], rows)  # type: ignore[union-attr]


def widen_alloca(buffer: SSAValue, pitch: int, rows: int = 0) -> SSAValue:
    """Replace `buffer`'s `memref.alloca` by one whose rows are `pitch` wide, and at least
    `rows` of them."""
    alloca = buffer.owner
    assert isinstance(alloca, memref.AllocaOp) and isinstance(buffer.type, MemRefType)
    shape = [*buffer.type.get_shape()[:-1], pitch]
    shape[-2] = max(shape[-2], rows)
    wide = memref.AllocaOp.get(buffer.type.get_element_type(), alloca.alignment, shape)
    Rewriter.replace_op(alloca, wide)
    return wide.memref


def flat_view(nest: loop.NestOp, buffer: SSAValue) -> SSAValue:
    """`buffer` with its last two dimensions seen as one, made just before `nest`."""
    t = buffer.type
    assert isinstance(t, MemRefType)
    shape = t.get_shape()
    view = loop.ViewOp(buffer, MemRefType(t.get_element_type(), [*shape[:-2], shape[-2] * shape[-1]]))
    Rewriter.insert_op(view, InsertPoint.before(nest))
    return view.result
