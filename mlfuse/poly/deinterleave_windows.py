"""A window read at column stride 2 reads a buffer whose rows are split into their even and
odd columns (loop-deinterleave-windows).

A depthwise conv or pooling at stride 2 reads its padded input at column 2 * ow + kw. The
loop vectorizer, running along ow, loads 2 x VF columns per tap and keeps every other one
(an interleaved group with a gap), and since the last vector would read past the row it
leaves the last VF outputs of every row to scalar code: a 56-wide row ran 48 columns
vectorized and 8 scalar, which took a third of MobileNetV2's 96-channel 112 -> 56
depthwise conv. With the row stored as its even columns, then its odd ones,

    P'[..., r, p, j] = P[..., r, 2 * j + p]      (p = 0, 1;  j < ceil(W / 2))

tap kw reads P'[..., r, (kw + c0) mod 2, ow + (kw + c0) floordiv 2]: unit stride along ow,
and once LLVM unrolls the taps, the phase and offset of each are constants. Each output
sums its taps in the same order as before, so the results are the same bits. Side by
side at 2 threads (time with over without, medians of 11-21): depthwise 3x3 stride-2
convs 96 x 112 x 112 0.67 (206 -> 138 us; onnxruntime 146), 144 x 56 x 56 0.88,
192 x 28 x 28 0.95; MobileNetV2 0.98, MobileNetV3-small 0.97, ResNet-18 0.99 (its max
pool 213 -> 207 us: bound then by its max chain, since shortened by
scalar.reduction_max_min).

The nests that write the buffer write the new layout:
- a copy into the interior at column d + c (d from 0 to an even n) runs over (t, e) with
  d = 2 * t + e, e innermost: it reads its source at 2 * t + e, both columns of each
  pair (an interleaved group with no gap), and writes phase (e + c) mod 2 at
  t + (e + c) floordiv 2, which for constant c is affine in e (c even: e, t + c / 2;
  c odd: 1 - e, t + e + (c - 1) / 2);
- a fill of whole rows (no inputs, column d from 0 to W) fills both phases.

The pass's docstring (passes/loop_deinterleave_windows.py) shows a max pool before and after.

Deinterleaved when all of these hold (else the buffer is left as it is):
- the buffer is a tile-local `memref.alloca` of rank >= 2 that only nests use, each
  either reading it or writing it;
- at least one nest reads it at column 2 * ow + kw + c0 or 2 * ow + c0 (a stride-2
  window, dilation 1), and every nest that reads it does so;
- every nest that writes it is a copy or a fill as above, whose column dimension names
  no other index of the buffer and runs from 0 to a constant; no body names a dimension.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import Rewriter

from mlfuse.dialects import loop
from mlfuse.poly.delinearize import linear
from mlfuse.poly.program import rebuild_nest, with_maps

# the window reads' column stride that this pass takes
STRIDE = 2


@dataclass(frozen=True)
class WindowRead:
    """A nest reading the buffer at column 2 * ow + kw + c0 (kw None: 2 * ow + c0)."""

    nest: loop.NestOp
    operand: int
    ow: int
    kw: int | None
    c0: int


@dataclass(frozen=True)
class ColumnWrite:
    """A nest writing the buffer at column d + c, d from 0 to `extent`; `fill`: a nest with
    no inputs writing whole rows (c = 0, extent the row's width), whatever its parity."""

    nest: loop.NestOp
    operand: int
    d: int
    c: int
    extent: int
    fill: bool


@dataclass(frozen=True)
class Deinterleaving:
    buffer: SSAValue
    reads: list[WindowRead]
    writes: list[ColumnWrite]


def deinterleave_windows(fn: Operation) -> int:
    """Deinterleave every buffer under `fn` that qualifies; how many were."""
    done = 0
    for alloca in [op for op in fn.walk() if isinstance(op, memref.AllocaOp)]:
        plan = deinterleaving(alloca.memref)
        if isinstance(plan, Deinterleaving):
            deinterleave(plan)
            done += 1
    return done


def deinterleaving(buffer: SSAValue) -> Deinterleaving | str:
    """The plan for `buffer`, or why it is left alone."""
    t = buffer.type
    if not isinstance(t, MemRefType) or len(t.get_shape()) < 2:
        return "not a buffer of rank 2 or more"
    reads, writes = [], []
    for use in buffer.uses:
        nest = use.operation
        if not isinstance(nest, loop.NestOp) or any(op.name == "loop.index" for op in nest.body.walk()):
            return "a use that is no nest, or a body that names a dimension"
        if [*nest.ins, *nest.outs].count(buffer) != 1:
            return "a nest that uses it twice (reads and writes it)"
        access = window_read(nest, use.index - len(nest.syms)) if buffer in nest.ins else column_write(nest, use.index - len(nest.syms), t.get_shape()[-1])
        if isinstance(access, str):
            return access
        (reads if isinstance(access, WindowRead) else writes).append(access)
    return Deinterleaving(buffer, reads, writes) if reads else "no window reads it at column stride 2"


def column_of(nest: loop.NestOp, operand: int) -> tuple[dict[int, int], int] | None:
    """The linear form of the operand's column index, when no other index of it uses
    the dimensions it does."""
    results = nest.access_maps[operand].results
    form = linear(results[-1])
    if form is None or any(e.used_dims() & set(form[0]) for e in results[:-1]):
        return None
    return form


def window_read(nest: loop.NestOp, operand: int) -> WindowRead | str:
    why = "a read that is not a window at column stride 2"
    form = column_of(nest, operand)
    if form is None:
        return why
    terms, c0 = form
    strided = [d for d, k in terms.items() if k == STRIDE]
    taps = [d for d, k in terms.items() if k == 1]
    if len(strided) != 1 or len(taps) > 1 or len(terms) != len(strided) + len(taps):
        return why
    return WindowRead(nest, operand, strided[0], taps[0] if taps else None, c0)


def column_write(nest: loop.NestOp, operand: int, width: int) -> ColumnWrite | str:
    form = column_of(nest, operand)
    if form is None or len(form[0]) != 1 or next(iter(form[0].values())) != 1:
        return "a write that is not at column d + c"
    (d,), c = list(form[0]), form[1]
    lower, upper = loop.constant_of(nest.lower.data[d].data), loop.constant_of(nest.upper.data[d].data)
    if lower != 0 or upper is None or nest.iterator_kinds[d] != loop.PARALLEL:
        return "a write whose column runs over other bounds"
    fill = not nest.ins and c == 0 and upper == width
    if upper % 2 and not fill:
        return "a write of an odd number of columns that is no fill of whole rows"
    return ColumnWrite(nest, operand, d, c, upper, fill)


def deinterleave(plan: Deinterleaving) -> None:
    """Rewrite the plan's buffer as rows of even then odd columns, and its nests."""
    alloca = plan.buffer.owner
    t = plan.buffer.type
    assert isinstance(alloca, memref.AllocaOp) and isinstance(t, MemRefType)
    shape = t.get_shape()
    new = memref.AllocaOp.get(t.get_element_type(), alloca.alignment, [*shape[:-1], STRIDE, -(-shape[-1] // STRIDE)])
    Rewriter.replace_op(alloca, new)
    for read in plan.reads:
        Rewriter.replace_op(read.nest, with_maps(read.nest, read_maps(read)))
    for write in plan.writes:
        Rewriter.replace_op(write.nest, fill_by_phase(write) if write.fill else copy_by_pairs(write))


def replace_column(m: AffineMap, phase: AffineExpr, offset: AffineExpr, dims: int | None = None) -> AffineMap:
    return AffineMap(m.num_dims if dims is None else dims, m.num_symbols, (*m.results[:-1], phase, offset))


def read_maps(read: WindowRead) -> list[AffineMap]:
    """The window read at (kw + c0) mod 2, ow + (kw + c0) floordiv 2."""
    maps = list(read.nest.access_maps)
    tap = (AffineExpr.dimension(read.kw) if read.kw is not None else AffineExpr.constant(0)) + read.c0
    maps[read.operand] = replace_column(maps[read.operand], tap % STRIDE, AffineExpr.dimension(read.ow) + tap // STRIDE)
    return maps


def fill_by_phase(write: ColumnWrite) -> loop.NestOp:
    """A fill of whole rows over both phases: its column dimension runs over the phase,
    a new innermost one over the half row."""
    nest = write.nest
    rank = nest.rank
    m = nest.access_maps[write.operand]
    half = -(-write.extent // STRIDE)
    maps = [replace_column(m, AffineExpr.dimension(write.d), AffineExpr.dimension(rank), rank + 1)]
    lower = [b.data for b in nest.lower.data] + [AffineMap.constant_map(0)]
    upper = [b.data for b in nest.upper.data] + [AffineMap.constant_map(half)]
    upper[write.d] = AffineMap.constant_map(STRIDE)
    return rebuild_nest(nest, list(nest.syms), lower, upper, maps, iterators=[*nest.iterator_kinds, loop.PARALLEL])


def copy_by_pairs(write: ColumnWrite) -> loop.NestOp:
    """The write over (t, e), d = 2 * t + e with e a new innermost dimension; column
    2 * t + e + c goes to phase (e + c) mod 2 at t + (e + c) floordiv 2."""
    nest = write.nest
    rank = nest.rank
    t, e = AffineExpr.dimension(write.d), AffineExpr.dimension(rank)
    dims = [AffineExpr.dimension(i) for i in range(rank)]
    dims[write.d] = t * STRIDE + e

    def substituted(m: AffineMap) -> AffineMap:
        results = [r.replace_dims_and_symbols(dims, [AffineExpr.symbol(s) for s in range(m.num_symbols)]) for r in m.results]
        return AffineMap(rank + 1, m.num_symbols, tuple(results))

    maps = [substituted(m) for m in nest.access_maps]
    if write.c % STRIDE:  # odd c: phase 1 - e, offset t + e + (c - 1) / 2
        phase, offset = e * -1 + 1, t + e + (write.c - 1) // STRIDE  # (not 1 - e: xDSL 0.74's __rsub__ gives e - 1)
    else:
        phase, offset = e, t + write.c // STRIDE
    maps[write.operand] = replace_column(maps[write.operand], phase, offset)
    lower = [b.data for b in nest.lower.data] + [AffineMap.constant_map(0)]
    upper = [b.data for b in nest.upper.data] + [AffineMap.constant_map(STRIDE)]
    upper[write.d] = AffineMap.constant_map(write.extent // STRIDE)
    return rebuild_nest(nest, list(nest.syms), lower, upper, maps, iterators=[*nest.iterator_kinds, loop.PARALLEL])
