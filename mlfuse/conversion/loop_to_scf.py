"""Lower `loop.nest` to scf.for loops with memref loads and stores.

Each nest becomes a loop per dimension in domain order (the order graph-to-loop
chose for contiguous innermost accesses). A nest with a parallel dimension and
enough work is outlined into a private function `@<fn>__<k>_<name>(lo, hi,
buffers...)` that runs its first parallel dimension over [lo, hi); the call site
becomes a `loop.parallel_call`, which splits the range across threads. Nests too
small to pay for threads stay inline, or, with `outline_serial` (the CPU pipeline's
choice), become functions `@<fn>__<k>_<name>(operands...)` of their own, called
directly, with the loops they would have inline. Bounds of a dimension that use outer
dimensions (parallelogram tiles) are computed inside the enclosing loop.

A `loop.band` with enough work is outlined the same way, over all its iterations
numbered row-major as one range (so a 3 x 64 x 8 band of tiles splits evenly over
any number of threads; the ivs are recovered by division); its scratch allocas
are made once per thread, at the top of the outlined function.

Stores that stream get `nontemporal = true` (see `streaming_outputs`): pure,
unit-stride writes to buffers of at least NONTEMPORAL_MIN_BYTES, which no later
reader finds in cache anyway; loads that stream into the nests of a row band get
`mlfuse.prefetch` (see PREFETCH_ATTR). mlfuse/backend/streaming.py makes the stores
non-temporal and adds the prefetches after LLVM has vectorized them.

The conversion is two xDSL patterns, `BandToScf` and `NestToScf`, applied in one
`PatternRewriteWalker` pass after an analysis step: the streaming marks (which
look at whole nests) and the numbering of each function's kernels (the `k` in
the outlined names).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.dialects import arith, func, memref, scf, vector
from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    UnitAttr,
    VectorType,
    i64,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from mlfuse.abi import element_bytes
from mlfuse.conversion.expand_math import EXPANDED
from mlfuse.conversion.to_llvm import ROW_LOOP, ROW_LOOP_TRIPS, STRIDED_LOOP
from mlfuse.dialects import loop

# Outline a nest for threads only if it has at least this many points; smaller
# nests cost less than waking the thread team (~5 us). 2^14, not 2^15: between regions
# of a call the team spins, and a squeeze-excite block's scaling of 120 x 196 (23520
# points) ran on one thread over data the team had just written. Side by side at 2
# threads, time with 2^14 over 2^15 (fast | slow state): MobileNetV3-small 0.983 | 0.988,
# ResNet-18 0.994 | 0.985, MobileNetV2 1.003 | 0.993, BERT 1.002 | 1.005.
PARALLEL_MIN_POINTS = 1 << 14
# ... counting each point of a nest that reads an input across its rows (`reads_across`:
# a conv product's unpack to NCHW with its epilogue, computed pixel-major) as this
# many: a load a row apart per point, which LLVM does not vectorize. MobileNetV3-small's
# squeeze-excite unpacks (576 x 49, 28224 points) took 19 us each on one thread.
ACROSS_POINT_WORK = 4
# Each thread's chunk should hold at least this many points.
GRAIN_POINTS = 1 << 13
# A nest is split along its first parallel dimension of at least this many iterations
# (the rows, not the 3 channels, of an image's padding copy [1, 3, 224, 224]): with 3
# iterations, libgomp's guided schedule gave one of two threads 2 of them: MobileNetV3-small's
# input padding at 2 threads, timed per parallel region in one run each way (medians of
# 200 calls), kept both threads busy 0.72-0.75 of its time split by channels and 0.90-0.91
# split by rows, and took 0.85x the time.
SPLIT_MIN_TRIP = 16
# Outputs at least this large are written with non-temporal stores: 32 MiB is
# beyond the last-level caches of the CPUs we target, so a later reader would not
# find the data in cache, and skipping the read for ownership saves a third of
# the traffic of a copy (bench: Adam at 65536x1024, 2 threads, 46.5 -> 37.0 ms).
NONTEMPORAL_MIN_BYTES = 1 << 25
STREAMING_ATTR = "mlfuse.nontemporal"
# Inputs of row-band nests (stitched rows: a reduction phase, then a phase that
# writes; in_row_phases) that stream from memory get software prefetches a few rows ahead: the
# hardware prefetcher stalls while a row's phases run from L1 (LayerNorm at
# 65536x1024, 1 thread: 18.1 -> 10.9 ms). Loads marked with PREFETCH_ATTR;
# mlfuse/backend/streaming.py inserts the prefetches after vectorization. So do the
# inputs of any nest that computes a transcendental (expand_math.EXPANDED): between
# two loads it spends so long in the polynomial that the hardware prefetcher falls
# behind (16M f32, 2 threads, time over a copy's: exp 1.39-1.44 -> 1.17-1.23, tanh
# 1.50-1.64 -> 1.21-1.25, erf 1.52-1.66 -> 1.23-1.42; GELU with bias at 65536x1024
# 26-32 -> 12 ms); light streaming nests (row and column sums) gained nothing (two
# runs read them 8-18% slower, within this machine's noise), so they go without.
PREFETCH_ATTR = "mlfuse.prefetch"
# A nest that streams an output stores it from the first element of each innermost
# row at a cache-line address on (loop.aligned_window; the elements before it, and
# the partial line after the last whole one, go through loops of their own), and a
# row's partial lines combine with its neighbours' in a per-thread line (LineCarry):
# x86 has no unaligned non-temporal vector store, so rows that do not start a whole
# number of lines into the buffer (outputs from np.empty are 16-byte aligned; rows of
# 1001 floats), and chunks of 1-D nests split across threads, were written with plain
# stores or in 16-byte pieces. 2 threads, ms before -> after, out= aligned / from
# np.empty: LayerNorm 65536x1024 13.3 / 15.3 -> 13.2 / 13.6, 65536x1001 19.7 / 19.6
# -> 13.6 / 13.7, 65536x1004 23.2 / 22.7 -> 13.1 / 13.0; RMSNorm 11.5 / 15.4 -> 11.5
# / 11.5; Adam 63.5 / 73.8 -> 58.4 / 59.6. Other streamed outputs of a nest without a
# carry (chunks of 1-D nests) get windows of their own, used when their chunks start as
# far from a line (companion_windows): Adam, three outputs, 60.0-60.4 / 62.6-67.2 -> 53.5
# / 58.2-59.1.
STREAM_ALIGNMENT = 64


def index_const(b: Builder, v: int) -> SSAValue:
    return b.insert(arith.ConstantOp(IntegerAttr(v, IndexType()))).result


def emit_affine(b: Builder, expr: AffineExpr, dims: Sequence[SSAValue], syms: Sequence[SSAValue]) -> SSAValue:
    """Compute an affine expression on index values with arith ops."""
    match expr:
        case AffineConstantExpr():
            return index_const(b, expr.value)
        case AffineDimExpr():
            return dims[expr.position]
        case AffineSymExpr():
            return syms[expr.position]
        case AffineBinaryOpExpr():
            lhs = emit_affine(b, expr.lhs, dims, syms)
            if expr.kind == AffineBinaryOpKind.Add and isinstance(expr.rhs, AffineConstantExpr) and expr.rhs.value == 0:
                return lhs
            rhs = emit_affine(b, expr.rhs, dims, syms)
            if expr.kind == AffineBinaryOpKind.Mod:  # affine mod is never negative
                r = b.insert(arith.RemSIOp(lhs, rhs)).result
                negative = b.insert(arith.CmpiOp(r, index_const(b, 0), "slt")).result
                wrapped = b.insert(arith.AddiOp(r, rhs)).result
                return b.insert(arith.SelectOp(negative, wrapped, r)).result
            op = {
                AffineBinaryOpKind.Add: arith.AddiOp,
                AffineBinaryOpKind.Mul: arith.MuliOp,
                AffineBinaryOpKind.FloorDiv: arith.FloorDivSIOp,
                AffineBinaryOpKind.CeilDiv: arith.CeilDivSIOp,
            }[expr.kind]
            return b.insert(op(lhs, rhs)).result
    raise NotImplementedError(f"affine expression {expr}")


def emit_bound(b: Builder, bound, syms: Sequence[SSAValue], upper: bool, dims: Sequence[SSAValue] = ()) -> SSAValue:
    """A multi-result bound is a max (lower) or min (upper) of its results; `dims` are the
    ivs of the outer loops (a bound of dimension k may use d0..d(k-1))."""
    values = [emit_affine(b, e, dims, syms) for e in bound.data.results]
    result = values[0]
    for v in values[1:]:
        result = b.insert((arith.MinSIOp if upper else arith.MaxSIOp)(result, v)).result
    return result


def emit_nest_loops(
    b: Builder,
    nest: loop.NestOp,
    syms: Sequence[SSAValue],
    buffers: Sequence[SSAValue],
    override: dict[int, tuple[SSAValue, SSAValue]] | None = None,
    carry: LineCarry | None = None,
) -> None:
    """Emit the loops of `nest` at `b`, reading its buffers from `buffers` (ins, outs).
    A peeled output's rows (see STREAM_ALIGNMENT) combine their partial lines through
    `carry` (the enclosing band's), or through a carry of the nest's own over its
    outer loops."""
    override = override or {}

    def uses_dims(d: int) -> bool:
        return nest.lower.data[d].data.num_dims > 0 or nest.upper.data[d].data.num_dims > 0

    def bounds_at(builder: Builder, d: int, ivs: Sequence[SSAValue]) -> tuple[SSAValue, SSAValue]:
        if d in override:
            return override[d]
        return (
            emit_bound(builder, nest.lower.data[d], syms, False, ivs),
            emit_bound(builder, nest.upper.data[d], syms, True, ivs),
        )

    peel = peeled_output(nest) if nest.rank else None
    if carry is None and peel is not None and nest.rank > 1:
        carry = own_carry = LineCarry.create(b, buffers[len(nest.ins) + peel])
    else:
        own_carry = None
    # bounds that use no outer iv are computed before the loops (hoisted), the others in place
    hoisted = {d: bounds_at(b, d, ()) for d in range(nest.rank) if not uses_dims(d)}
    one = index_const(b, 1)
    ivs: list[SSAValue] = []
    inner = b
    row = innermost_output_dim(nest)  # taps inside it: a row loop once LLVM unrolls them
    for d in range(nest.rank - 1):
        lo, hi = hoisted[d] if d in hoisted else bounds_at(inner, d, ivs)
        inner, iv = open_loop(inner, lo, hi, one)
        ivs.append(iv)
        if d == row:
            iv.owner.parent_op().attributes[ROW_LOOP] = UnitAttr()  # type: ignore[union-attr]
        elif strided_around_short(nest, d):
            iv.owner.parent_op().attributes[STRIDED_LOOP] = UnitAttr()  # type: ignore[union-attr]
    if nest.rank == 0:
        emit_nest_body(inner, nest, ivs, syms, buffers)
    else:
        d = nest.rank - 1
        lo, hi = hoisted[d] if d in hoisted else bounds_at(inner, d, ivs)
        emit_innermost_loop(inner, nest, (lo, hi, one), ivs, syms, buffers, peel, carry)
    for iv in reversed(ivs):
        close_loop(iv)
    if own_carry is not None:
        own_carry.flush(b)


def strided_around_short(nest: loop.NestOp, d: int) -> bool:
    """Whether dimension d of `nest` runs around short dimensions only (constant, fewer
    than ROW_LOOP_TRIPS.start points each: LLVM unrolls them fully) and no access's last
    subscript names it. Once they are unrolled, d's loop is innermost and LLVM's loop
    vectorizer would take it, its lanes a row apart: gathered and scattered by scalar
    loads, stores and inserts. MobileNetV2's copy of a stride-2 depthwise tile's rows
    into their even and odd columns (loop-deinterleave-windows: 28 rows of 14 x 2)
    became 450 of each in one block, which took LLVM 0.6 s. Left scalar, the rows'
    unrolled statements go to the SLP vectorizer, which reads them a row at a time."""
    inner = range(d + 1, nest.rank)
    if not inner or any((nest.constant_trip(e) or ROW_LOOP_TRIPS.start) >= ROW_LOOP_TRIPS.start for e in inner):
        return False
    return not any(m.results and d in m.results[-1].used_dims() for m in nest.access_maps)


def open_loop(b: Builder, lo: SSAValue, hi: SSAValue, step: SSAValue) -> tuple[Builder, SSAValue]:
    """An scf.for over [lo, hi) at `b`: a builder into its body, and its iv (close_loop ends the body)."""
    body = Block(arg_types=[IndexType()])
    b.insert(scf.ForOp(lo, hi, step, [], body))
    return Builder(InsertPoint.at_end(body)), body.args[0]


def close_loop(iv: SSAValue) -> None:
    Builder(InsertPoint.at_end(iv.owner)).insert(scf.YieldOp())  # type: ignore[arg-type]


def emit_innermost_loop(
    b: Builder,
    nest: loop.NestOp,
    bounds: tuple[SSAValue, SSAValue, SSAValue],
    ivs: list[SSAValue],
    syms: Sequence[SSAValue],
    buffers: Sequence[SSAValue],
    peel: int | None,
    carry: LineCarry | None = None,
) -> None:
    """The innermost loop of `nest` over `bounds` (lo, hi, step 1) with the body. With
    `peel` (an output that streams, see STREAM_ALIGNMENT), three loops: up to the
    output's first element at an aligned address, whole aligned lines of it through a
    window, and the rest; with `carry`, the first and the last go through its line."""
    lo, hi, one = bounds
    if peel is None:
        inner, iv = open_loop(b, lo, hi, one)
        emit_nest_body(inner, nest, [*ivs, iv], syms, buffers)
        close_loop(iv)
        return
    k = len(nest.ins) + peel
    first, aligned = row_window(b, nest, k, buffers, [*ivs, lo], syms)
    start = b.insert(arith.MinSIOp(b.insert(arith.AddiOp(lo, aligned.skip)).result, hi)).result
    per_line = elements_per_line(buffers[k])
    rest = b.insert(arith.AndIOp(b.insert(arith.SubiOp(hi, start)).result, index_const(b, per_line - 1))).result
    end = b.insert(arith.SubiOp(hi, rest)).result
    head = carry.begin_row(b, buffers[k], first, aligned.skip, start, lo) if carry is not None else None
    line = (carry.scratch, head.offset) if carry is not None and head is not None else None
    emit_row_part(b, nest, (lo, start, one), ivs, syms, buffers, peel, line)  # up to the first aligned element
    if carry is not None and head is not None:
        # the tail's place is known already: said now, nothing of the head stays live
        # through the whole lines (LLVM spilled registers in their loop)
        carry.set_pending(b, b.insert(arith.AddiOp(head.first, b.insert(arith.SubiOp(end, lo)).result)).result, rest)
    lines = (start, b.insert(arith.SubiOp(end, start)).result, one)
    others = companion_windows(b, nest, ivs, lo, syms, buffers, peel, aligned) if carry is None else []
    if not others:
        emit_whole_lines(b, nest, ivs, syms, buffers, lines, {peel: aligned.window})
    else:  # the other streamed outputs' windows serve when their rows start as misaligned
        same = all_true(b, [b.insert(arith.CmpiOp(skip, aligned.skip, "eq")).result for _, skip, _ in others])
        alone: dict[int, SSAValue] = {peel: aligned.window}
        together: dict[int, SSAValue] = {**alone, **{j: w for j, _, w in others}}
        both = Block(), Block()
        for block, windows in zip(both, (together, alone)):
            inner = Builder(InsertPoint.at_end(block))
            emit_whole_lines(inner, nest, ivs, syms, buffers, lines, windows)
            inner.insert(scf.YieldOp())
        b.insert(scf.IfOp(same, [], Region(both[0]), Region(both[1])))
    if carry is not None and head is not None:
        # after the whole lines: by then the head's stores to the scratch have reached
        # the cache; read back at once, they stalled the load of the line (store
        # forwarding fails for a load spanning several stores: 7% of LayerNorm's samples)
        carry.write_head(b, head, aligned.window)
    line = (carry.scratch, index_const(b, 0)) if carry is not None else None  # the tail waits for the next row
    emit_row_part(b, nest, (end, hi, one), ivs, syms, buffers, peel, line)


def emit_whole_lines(
    b: Builder,
    nest: loop.NestOp,
    ivs: list[SSAValue],
    syms: Sequence[SSAValue],
    buffers: Sequence[SSAValue],
    lines: tuple[SSAValue, SSAValue, SSAValue],
    windows: dict[int, SSAValue],
) -> None:
    """The loop over a peeled row's whole lines (`lines`: the row's first aligned element,
    the count, step), counted from 0 as the windows are (from the first element on, LLVM
    lost the alignment of window[iv - start]); unit stride along the innermost dimension
    makes the row's element start + t each window's element t."""
    start, count, one = lines
    inner, t = open_loop(b, index_const(b, 0), count, one)
    at = inner.insert(arith.AddiOp(start, t)).result
    emit_nest_body(inner, nest, [*ivs, at], syms, buffers, windows={k: (w, t) for k, w in windows.items()})
    close_loop(t)


def companion_windows(
    b: Builder,
    nest: loop.NestOp,
    ivs: list[SSAValue],
    lo: SSAValue,
    syms: Sequence[SSAValue],
    buffers: Sequence[SSAValue],
    peel: int,
    aligned: loop.AlignedWindowOp,
) -> list[tuple[int, SSAValue, SSAValue]]:
    """(output, skip, window) of each other streamed output of `nest` with the peeled
    one's element type: their whole lines stream too when their rows start as far from a
    line as the peeled one's (all outputs aligned alike: the runtime's own buffers)."""
    found = []
    el = aligned.window.type.get_element_type()  # type: ignore[attr-defined]
    for j in marked(nest, STREAMING_ATTR):
        buffer = buffers[len(nest.ins) + j]
        if j == peel or buffer.type.get_element_type() != el:  # type: ignore[attr-defined]
            continue
        _, window = row_window(b, nest, len(nest.ins) + j, buffers, [*ivs, lo], syms)
        found.append((j, window.skip, window.window))
    return found


def row_window(
    b: Builder, nest: loop.NestOp, k: int, buffers: Sequence[SSAValue], point: list[SSAValue], syms: Sequence[SSAValue]
) -> tuple[list[SSAValue], loop.AlignedWindowOp]:
    """Buffer k's indices at the row's first point, and its aligned window from there."""
    first = [emit_affine(b, e, point, syms) for e in nest.access_maps[k].results]
    return first, b.insert(loop.AlignedWindowOp(buffers[k], first, STREAM_ALIGNMENT))


def elements_per_line(buffer: SSAValue) -> int:
    """How many of `buffer`'s elements a STREAM_ALIGNMENT-byte line holds."""
    return STREAM_ALIGNMENT // element_bytes(buffer.type.get_element_type())  # type: ignore[attr-defined]


def all_true(b: Builder, conditions: Sequence[SSAValue]) -> SSAValue:
    """The i1 conjunction of `conditions` (at least one)."""
    result = conditions[0]
    for condition in conditions[1:]:
        result = b.insert(arith.AndIOp(result, condition)).result
    return result


def emit_row_part(
    b: Builder,
    nest: loop.NestOp,
    bounds: tuple[SSAValue, SSAValue, SSAValue],
    ivs: list[SSAValue],
    syms: Sequence[SSAValue],
    buffers: Sequence[SSAValue],
    peel: int,
    line: tuple[SSAValue, SSAValue] | None,
) -> None:
    """A loop over part of a peeled row (`bounds`: lo, hi, step). With `line` (a carry's
    scratch line, a slot in it), output `peel` goes to line[slot + iv - lo], plainly."""
    lo, hi, one = bounds
    inner, iv = open_loop(b, lo, hi, one)
    if line is None:
        emit_nest_body(inner, nest, [*ivs, iv], syms, buffers)
    else:
        at = inner.insert(arith.AddiOp(line[1], inner.insert(arith.SubiOp(iv, lo)).result)).result
        emit_nest_body(inner, nest, [*ivs, iv], syms, buffers, windows={peel: (line[0], at)}, streaming=False)
    close_loop(iv)


def peeled_output(nest: loop.NestOp) -> int | None:
    """The streaming output whose rows (innermost loops) are peeled: the first, if any."""
    streamed = marked(nest, STREAMING_ATTR)
    return streamed[0] if streamed else None


@dataclass
class RowHead:
    """Where a row's head goes in the carry's scratch (`offset`: the end of the tail's line
    if it completes it, else of the second line), the flat index of the row's first element
    (`first`), the head's length, whether it completes the line the previous row's tail
    left (`joins`, an i1), and that tail (`key`: its line's flat index, `waiting`: its length)."""

    offset: SSAValue
    first: SSAValue
    length: SSAValue
    joins: SSAValue
    key: SSAValue
    waiting: SSAValue


@dataclass
class LineCarry:
    """Software write-combining of a peeled output's partial lines, per thread.

    Consecutive rows of a buffer whose rows do not start on a line boundary share a
    line: the tail of one row and the head of the next. Written in two parts, at two
    times, that line costs a read of it from memory (a plain store) or a partial write
    (a non-temporal one): LayerNorm at 65536x1024 into np.empty took 1.18x the aligned
    call in 16-byte pieces and 1.25x peeled. So a row's tail waits in the first line of
    `scratch` (two lines, per thread), the next row's head joins it there, and the whole
    line goes out with one aligned non-temporal store; a head that does not join (the
    first row of a thread's range) goes to the second line, and then out plainly, as
    does a tail nothing joins. Both plain copies come after the head: before it, the
    copy of a waiting tail made LLVM spill the row's reductions (LayerNorm backward into
    np.empty 1.26x the aligned call, 1.07x without it). `state` holds the flat index of
    the waiting line's first element and how many of its elements wait (0: none);
    `flat` is the output seen as 1-D."""

    scratch: SSAValue
    state: SSAValue
    flat: SSAValue
    line: int

    @staticmethod
    def create(b: Builder, buffer: SSAValue) -> LineCarry:
        t = buffer.type
        assert isinstance(t, MemRefType)
        el = t.get_element_type()
        line = elements_per_line(buffer)
        scratch = b.insert(memref.AllocaOp.get(el, STREAM_ALIGNMENT, [2 * line])).memref
        state = b.insert(memref.AllocaOp.get(i64, 8, [2])).memref  # i64: LLVM has no index memory
        carry = LineCarry(scratch, state, b.insert(loop.ViewOp(buffer, MemRefType(el, [t.element_count()]))).result, line)
        carry.set_pending(b, index_const(b, 0), index_const(b, 0))  # nothing waits (an unset load would be poison)
        return carry

    def set_pending(self, b: Builder, key: SSAValue, count: SSAValue) -> None:
        """`count` elements wait in the first line, for the line at flat index `key`."""
        for i, v in enumerate((key, count)):
            b.insert(memref.StoreOp.get(b.insert(arith.IndexCastOp(v, i64)).result, self.state, [index_const(b, i)]))

    def pending(self, b: Builder) -> tuple[SSAValue, SSAValue]:
        """(flat index of the waiting line, elements waiting)"""
        key, count = (b.insert(memref.LoadOp.get(self.state, [index_const(b, i)])).res for i in (0, 1))
        return b.insert(arith.IndexCastOp(key, IndexType())).result, b.insert(arith.IndexCastOp(count, IndexType())).result

    def copy_out(self, b: Builder, count: SSAValue, source: SSAValue, target: SSAValue) -> None:
        """flat[target + e] = scratch[source + e] for e < count, plain stores: a loop over
        a whole line with the copy under a condition, since a loop up to `count` became
        a memcpy call (LayerNorm into np.empty 1.07-1.08x the aligned call with it,
        1.04-1.05x without)."""
        inner, e = open_loop(b, index_const(b, 0), index_const(b, self.line), index_const(b, 1))
        then = Block()
        cond = Builder(InsertPoint.at_end(then))
        value = cond.insert(memref.LoadOp.get(self.scratch, [cond.insert(arith.AddiOp(source, e)).result])).res
        cond.insert(memref.StoreOp.get(value, self.flat, [cond.insert(arith.AddiOp(target, e)).result]))
        cond.insert(scf.YieldOp())
        inner.insert(scf.IfOp(inner.insert(arith.CmpiOp(e, count, "slt")).result, [], Region(then)))
        close_loop(e)

    def begin_row(self, b: Builder, buffer: SSAValue, first: Sequence[SSAValue], skip: SSAValue, start: SSAValue, lo: SSAValue) -> RowHead:
        """Before a row's head: does it complete the waiting tail's line?"""
        t = buffer.type
        assert isinstance(t, MemRefType)
        shape = t.get_shape()
        flat_first = index_const(b, 0)
        for d, idx in enumerate(first):
            term = b.insert(arith.MuliOp(idx, index_const(b, math.prod(shape[d + 1 :])))).result
            flat_first = b.insert(arith.AddiOp(flat_first, term)).result
        length = b.insert(arith.SubiOp(start, lo)).result
        ends = b.insert(arith.SubiOp(index_const(b, self.line), skip)).result  # the head ends a line
        key, waiting = self.pending(b)
        line_start = b.insert(arith.AddiOp(flat_first, b.insert(arith.SubiOp(skip, index_const(b, self.line))).result)).result
        same_line = b.insert(arith.CmpiOp(key, line_start, "eq")).result
        fills = b.insert(arith.CmpiOp(waiting, ends, "eq")).result  # the tail and the head make the line
        whole_head = b.insert(arith.CmpiOp(length, skip, "eq")).result  # the row reaches the next line
        some = b.insert(arith.CmpiOp(skip, index_const(b, 0), "sgt")).result
        joins = all_true(b, [same_line, fills, whole_head, some])
        second = b.insert(arith.SelectOp(joins, index_const(b, 0), index_const(b, self.line))).result
        return RowHead(b.insert(arith.AddiOp(second, ends)).result, flat_first, length, joins, key, waiting)

    def write_head(self, b: Builder, head: RowHead, window: SSAValue) -> None:
        """The head is in the scratch: if it joined a tail, the whole line streams (one
        vector: a copy loop would become a memcpy, whose stores do not stream), else the
        waiting tail and the head go out plainly."""
        then = Block()
        inner = Builder(InsertPoint.at_end(then))
        el = self.scratch.type.get_element_type()  # type: ignore[attr-defined]
        line = inner.insert(vector.LoadOp(self.scratch, [index_const(inner, 0)], VectorType(el, [self.line]))).result
        before = index_const(inner, -self.line)  # the line before the window
        inner.insert(vector.StoreOp(line, window, [before], nontemporal=BoolAttr.from_bool(True)))
        inner.insert(scf.YieldOp())
        b.insert(scf.IfOp(head.joins, [], Region(then)))
        zero = index_const(b, 0)
        self.copy_out(b, b.insert(arith.SelectOp(head.joins, zero, head.waiting)).result, zero, head.key)
        self.copy_out(b, b.insert(arith.SelectOp(head.joins, zero, head.length)).result, head.offset, head.first)

    def flush(self, b: Builder) -> None:
        """After the rows: a tail still waiting goes out plainly."""
        key, waiting = self.pending(b)
        self.copy_out(b, waiting, index_const(b, 0), key)
        self.set_pending(b, key, index_const(b, 0))


def emit_nest_body(
    b: Builder,
    nest: loop.NestOp,
    ivs,
    syms,
    buffers,
    windows: dict[int, tuple[SSAValue, SSAValue]] | None = None,
    streaming: bool = True,
) -> None:
    """The body of `nest` at `b` for the point `ivs`. With `windows` (output k: a 1-D
    window, an index), output k is stored at window[index] instead of its access map;
    without `streaming`, no store is non-temporal."""
    n_in = len(nest.ins)
    maps = nest.access_maps
    indices = [[emit_affine(b, e, ivs, syms) for e in m.results] for m in maps]
    prefetched = marked(nest, PREFETCH_ATTR)
    loads = [b.insert(memref.LoadOp.get(buf, idx)) for buf, idx in zip(buffers, indices)]
    for k in prefetched:
        loads[k].attributes[PREFETCH_ATTR] = UnitAttr()
    elements = [load.res for load in loads]
    inits = nest.init_values
    if any(v is not None for v in inits):
        first = first_reduction_step(b, nest, ivs, syms)
        for k, v in enumerate(inits):
            if v is not None:
                start = b.insert(arith.ConstantOp(v)).result
                elements[n_in + k] = b.insert(arith.SelectOp(first, start, elements[n_in + k])).result
    mapping = dict(zip(nest.block.args, elements))
    yielded: list[SSAValue] = []
    for op in nest.block.ops:
        if isinstance(op, loop.YieldOp):
            yielded = [mapping.get(v, v) for v in op.values]
            break
        if isinstance(op, loop.IndexOp):
            mapping[op.result] = (ivs if op.kind.data == "dim" else syms)[op.position.value.data]
            continue
        if isinstance(op, loop.ReadOp):  # a data-dependent load from the input's buffer
            source = buffers[op.buffer_position()]
            mapping[op.result] = b.insert(memref.LoadOp.get(source, [mapping.get(i, i) for i in op.indices])).res
            continue
        b.insert(op.clone(value_mapper=mapping))
    streamed = marked(nest, STREAMING_ATTR) if streaming else []
    for k, (value, buf, idx) in enumerate(zip(yielded, buffers[n_in:], indices[n_in:])):
        if windows and k in windows:
            buf, idx = windows[k][0], [windows[k][1]]
        store = b.insert(memref.StoreOp.get(value, buf, idx))
        if k in streamed:
            store.properties["nontemporal"] = BoolAttr.from_bool(True)


def first_reduction_step(b: Builder, nest: loop.NestOp, ivs: Sequence[SSAValue], syms: Sequence[SSAValue]) -> SSAValue:
    """i1: the point `ivs` is an output element's first reduction step (every reduction
    dimension at its lower bound), where a nest's `init` replaces the element read."""
    first: SSAValue | None = None
    for d, kind in enumerate(nest.iterator_kinds):
        if kind != loop.REDUCTION:
            continue
        lo = emit_bound(b, nest.lower.data[d], syms, False, ivs[:d])
        at_lo = b.insert(arith.CmpiOp(ivs[d], lo, "eq")).result
        first = at_lo if first is None else b.insert(arith.AndIOp(first, at_lo)).result
    return first if first is not None else b.insert(arith.ConstantOp.from_int_and_width(1, 1)).result


def marked(nest: loop.NestOp, attr: str) -> list[int]:
    """The operand positions that mark_streaming_accesses put in `nest`'s attribute `attr`."""
    value = nest.attributes.get(attr)
    return [a.data for a in value.data if isinstance(a, IntAttr)] if isinstance(value, ArrayAttr) else []


def innermost_stride(m: AffineMap, shape: Sequence[int], rank: int) -> int | None:
    """Elements between consecutive iterations of the innermost dimension in the
    row-major buffer, or None when the access is not linear in it."""
    strides = [math.prod(shape[i + 1 :]) for i in range(len(shape))]

    def offset(step: int) -> int:
        dims = [0] * rank
        dims[rank - 1] = step
        return sum(v * s for v, s in zip(m.eval(dims, [0] * m.num_symbols), strides))

    one, two = offset(1) - offset(0), offset(2) - offset(0)
    return one if two == 2 * one else None


def is_streamed(buf: SSAValue, m: AffineMap, nest: loop.NestOp, min_bytes: int) -> bool:
    """A buffer of at least `min_bytes`, accessed contiguously along the innermost dimension."""
    t = buf.type
    if not isinstance(t, MemRefType) or nest.rank == 0:
        return False
    shape = t.get_shape()
    if any(d < 0 for d in shape) or math.prod(shape) * element_bytes(t.get_element_type()) < min_bytes:
        return False
    return innermost_stride(m, shape, nest.rank) == 1


def prefetched_inputs(nest: loop.NestOp, min_bytes: int = NONTEMPORAL_MIN_BYTES) -> list[int]:
    """The inputs that stream from memory of a nest that is one of several passes over a
    band's rows (in_row_phases) or that computes a transcendental (see PREFETCH_ATTR)."""
    if not in_row_phases(nest) and not computes_transcendental(nest):
        return []
    return [k for k, (buf, m) in enumerate(zip(nest.ins, nest.access_maps)) if is_streamed(buf, m, nest, min_bytes)]


def in_row_phases(nest: loop.NestOp) -> bool:
    """Is `nest` one of several passes over a loop.band's rows (nests with loops; a row's
    init and its write-out have none)? A band of one pass (a row sum) streams its input
    once, which the hardware prefetcher follows: prefetched, a row sum at 65536x1024
    took 1.2x the time on one thread."""
    band = nest.parent_op()
    return isinstance(band, loop.BandOp) and sum(isinstance(op, loop.NestOp) and op.rank > 0 for op in band.body.walk()) > 1


def computes_transcendental(nest: loop.NestOp) -> bool:
    """Does `nest`'s body call a function that expand-math writes as a polynomial?"""
    return any(isinstance(op, EXPANDED) for op in nest.body.walk())


def streaming_outputs(nest: loop.NestOp, min_bytes: int = NONTEMPORAL_MIN_BYTES) -> list[int]:
    """The outputs of `nest` worth non-temporal stores: written and never read by
    the nest (not accumulated, not also an input), contiguous along the innermost
    dimension, to a buffer of at least `min_bytes`."""
    n_in = len(nest.ins)
    maps = nest.access_maps[n_in:]
    result = []
    for k, (buf, m) in enumerate(zip(nest.outs, maps)):
        if nest.block.args[n_in + k].uses or buf in nest.ins:
            continue
        if is_streamed(buf, m, nest, min_bytes) and nest.iterator_kinds[-1] == loop.PARALLEL:
            result.append(k)
    return result


def mark_streaming_accesses(fn: func.FuncOp, min_bytes: int = NONTEMPORAL_MIN_BYTES) -> None:
    for nest in fn.walk():
        if isinstance(nest, loop.NestOp):
            for attr, picked in ((STREAMING_ATTR, streaming_outputs(nest, min_bytes)), (PREFETCH_ATTR, prefetched_inputs(nest, min_bytes))):
                if picked:
                    nest.attributes[attr] = ArrayAttr([IntAttr(k) for k in picked])


def parallel_plan(nest: loop.NestOp) -> tuple[int, int, int] | None:
    """(dimension, trip count, grain) to split across threads, or None to stay serial:
    the first parallel dimension of at least SPLIT_MIN_TRIP iterations, else the first
    of 2 or more."""
    bounds = nest.static_bounds()
    if bounds is None:
        return None
    sizes = [hi - lo for lo, hi in bounds]
    points = math.prod(sizes)
    if points * (ACROSS_POINT_WORK if reads_across(nest) else 1) < PARALLEL_MIN_POINTS:
        return None
    parallel = [d for d, kind in enumerate(nest.iterator_kinds) if kind == loop.PARALLEL and sizes[d] >= 2]
    if not parallel:
        return None
    d = next((d for d in parallel if sizes[d] >= SPLIT_MIN_TRIP), parallel[0])
    grain = max(1, -(-GRAIN_POINTS // (points // sizes[d])))
    return d, sizes[d], grain


def reads_across(nest: loop.NestOp) -> bool:
    """Does `nest` read an input across its rows: one whose innermost index is a loop
    dimension other than the output's innermost one, which indexes it further out (a
    transpose)? Then consecutive points of the nest read that input a row apart."""
    if len(nest.outs) != 1 or not nest.out_maps[0].results:
        return False
    last = nest.out_maps[0].results[-1]
    if not isinstance(last, AffineDimExpr):
        return False
    for m in nest.in_maps:
        inner = m.results[-1] if m.results else None
        if isinstance(inner, AffineDimExpr) and inner != last and any(last.position in loop.dims_of(e) for e in m.results[:-1]):
            return True
    return False


def symbol_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def outlined_function(fn: func.FuncOp, k: int, name: str, block: Block) -> func.FuncOp:
    """The private function `@<fn>__<k>_<name>` around `block` (which takes lo, hi, operands)."""
    symbol = f"{fn.sym_name.data}__{k}_{symbol_name(name)}"
    outlined = func.FuncOp(symbol, (list(block.arg_types), []), Region(block), visibility="private")
    outlined.attributes["mlfuse.kernel"] = StringAttr(name)
    return outlined


def outline_nest(fn: func.FuncOp, nest: loop.NestOp, k: int, plan: tuple[int, int, int]) -> tuple[func.FuncOp, loop.ParallelCallOp]:
    """The function running `nest` over [lo, hi) of its dimension `plan[0]`, and the call replacing it."""
    dim, trip, grain = plan
    # Unique buffers only: the same buffer read and written is one parameter.
    operands = list(dict.fromkeys([*nest.syms, *nest.ins, *nest.outs]))
    block = Block(arg_types=[IndexType(), IndexType(), *[v.type for v in operands]])
    lo_arg, hi_arg, *params = block.args
    param_of = dict(zip(operands, params))
    b = Builder(InsertPoint.at_end(block))
    lo0 = nest.static_bounds()[dim][0]  # type: ignore[index]
    offset = index_const(b, lo0)
    lo = b.insert(arith.AddiOp(lo_arg, offset)).result
    hi = b.insert(arith.AddiOp(hi_arg, offset)).result
    emit_nest_loops(
        b,
        nest,
        [param_of[s] for s in nest.syms],
        [param_of[v] for v in (*nest.ins, *nest.outs)],
        override={dim: (lo, hi)},
    )
    b.insert(func.ReturnOp())
    outlined = outlined_function(fn, k, nest.nest_name.data, block)
    return outlined, loop.ParallelCallOp(outlined.sym_name.data, trip, operands, grain)


def nest_points(nest: loop.NestOp) -> int:
    """Points of a nest; with symbolic bounds (a tile), those of its first tile (symbols 0)."""
    bounds = nest.static_bounds()
    if bounds is not None:
        return math.prod(hi - lo for lo, hi in bounds)
    zeros = [0] * len(nest.syms)
    points = 1
    outer: list[int] = []  # outer ivs at their first value
    for lo, hi in zip(nest.lower.data, nest.upper.data):
        first = max(e.eval(outer[: lo.data.num_dims], zeros) for e in lo.data.results)
        last = min(e.eval(outer[: hi.data.num_dims], zeros) for e in hi.data.results)
        points *= max(0, last - first)
        outer.append(first)
    return max(1, points)


def band_work(band: loop.BandOp) -> int:
    """Points computed by the whole band: iterations times the points of its nests."""
    inner = sum(nest_points(op) for op in band.block.ops if isinstance(op, loop.NestOp))
    return math.prod(band.sizes) * max(1, inner)


def emit_band_iteration(
    b: Builder, band: loop.BandOp, ivs: Sequence[SSAValue], mapping: dict[SSAValue, SSAValue], carries: dict[loop.NestOp, LineCarry]
) -> None:
    """One iteration of the band body: its nests as loops, other ops cloned; a small
    window reduction and the pointwise nest right after it that reads its result
    (`consumer_of`) as one loop nest (emit_reduction_and_consumer)."""
    mapping.update(zip(band.block.args, ivs))

    def m(v: SSAValue) -> SSAValue:
        return mapping.get(v, v)

    consumer = None  # emitted with the reduction before it (neither has a peeled output, so no carry)
    for op in band.block.ops:
        if op is consumer:
            continue
        if isinstance(op, loop.NestOp):
            consumer = consumer_of(op)
            if consumer is not None:
                emit_reduction_and_consumer(b, op, consumer, m)
                continue
            emit_nest_loops(b, op, [m(v) for v in op.syms], [m(v) for v in (*op.ins, *op.outs)], carry=carries.get(op))
        elif not isinstance(op, memref.AllocaOp):
            b.insert(op.clone(value_mapper=mapping))


def innermost_output_dim(nest: loop.NestOp) -> int | None:
    """The innermost parallel dimension of more than one point of a reduction `nest` whose
    reductions of more than one point all run inside it (NestOp.sums_inside_outputs)
    and no parallel dimension does, its peeled output none: once the loops inside it
    end, the output element there is complete. None for other nests."""
    kinds = nest.iterator_kinds
    if loop.REDUCTION not in kinds or peeled_output(nest) is not None or not nest.sums_inside_outputs():
        return None
    wide = [d for d, kind in enumerate(kinds) if kind == loop.PARALLEL and not nest.at_most_one_point(d)]
    return wide[-1] if wide and loop.PARALLEL not in kinds[wide[-1] + 1 :] else None


def consumer_of(nest: loop.NestOp) -> loop.NestOp | None:
    """The nest right after reduction `nest` (innermost_output_dim) that reads its one
    output at the iteration that completes it: all parallel, the same symbols, its
    dimensions `nest`'s parallel ones with the same bounds, and one read of the output by
    `nest`'s map of it (renamed); it writes other buffers and is not peeled."""
    last = innermost_output_dim(nest)
    consumer = nest.next_op
    if last is None or len(nest.outs) != 1 or not isinstance(consumer, loop.NestOp) or peeled_output(consumer) is not None:
        return None
    if loop.REDUCTION in consumer.iterator_kinds or list(consumer.syms) != list(nest.syms):
        return None
    out = nest.outs[0]
    reads = [k for k, v in enumerate(consumer.ins) if v is out]
    if len(reads) != 1 or any(loop.view_root(v) is loop.view_root(out) for v in consumer.outs):
        return None
    return consumer if nest.walks_output(0, consumer, consumer.in_maps[reads[0]]) else None


def emit_reduction_and_consumer(b: Builder, nest: loop.NestOp, consumer: loop.NestOp, m: Callable[[SSAValue], SSAValue]) -> None:
    """`nest`'s loops with the body of `consumer` after the reduction loops inside its
    innermost output dimension: the consumer reads each output element as soon as it
    is complete, while it is still in registers, and its own loops go away."""
    last = innermost_output_dim(nest)
    assert last is not None
    syms, buffers = [m(v) for v in nest.syms], [m(v) for v in (*nest.ins, *nest.outs)]
    one = index_const(b, 1)
    ivs: list[SSAValue] = []
    builders = [b]
    for d in range(nest.rank):
        lo = emit_bound(builders[-1], nest.lower.data[d], syms, False, ivs)
        hi = emit_bound(builders[-1], nest.upper.data[d], syms, True, ivs)
        inner, iv = open_loop(builders[-1], lo, hi, one)
        builders.append(inner)
        ivs.append(iv)
    emit_nest_body(builders[-1], nest, ivs, syms, buffers)
    for iv in reversed(ivs[last + 1 :]):
        close_loop(iv)
    row = ivs[last].owner.parent_op()  # the loop of the output's innermost dimension:
    assert isinstance(row, scf.ForOp)  # a row loop to LLVM once it unrolls the taps
    row.attributes[ROW_LOOP] = UnitAttr()
    parallel = [ivs[d] for d, kind in enumerate(nest.iterator_kinds) if kind == loop.PARALLEL]
    emit_nest_body(builders[last + 1], consumer, parallel, syms, [m(v) for v in (*consumer.ins, *consumer.outs)])
    for iv in reversed(ivs[: last + 1]):
        close_loop(iv)


def emit_band(b: Builder, band: loop.BandOp, mapping: dict[SSAValue, SSAValue], linear: tuple[SSAValue, SSAValue] | None = None) -> None:
    """The band's loops at `b`; scratch allocas go first, outside every loop (one per thread).

    With `linear = (lo, hi)`, one loop runs over [lo, hi) of the band's iterations
    numbered row-major (what a thread gets of the collapsed band), and the ivs are
    recovered by division; otherwise one loop per dimension."""
    for op in band.block.ops:
        if isinstance(op, memref.AllocaOp):
            mapping[op.memref] = b.insert(op.clone()).memref
    carries = band_carries(b, band, mapping)
    one = index_const(b, 1)
    loops: list[SSAValue] = []
    inner = b
    ranges = [linear] if linear is not None else [(index_const(b, 0), index_const(b, n)) for n in band.sizes]
    for lo, hi in ranges:
        inner, iv = open_loop(inner, lo, hi, one)
        loops.append(iv)
    ivs = delinearize(inner, loops[0], band.sizes) if linear is not None else loops
    emit_band_iteration(inner, band, ivs, mapping, carries)
    for iv in reversed(loops):
        close_loop(iv)
    for carry in carries.values():
        carry.flush(b)


def band_carries(b: Builder, band: loop.BandOp, mapping: dict[SSAValue, SSAValue]) -> dict[loop.NestOp, LineCarry]:
    """A LineCarry for each nest of the band with a peeled output that lives outside
    the band and that nothing else in the band touches (a tail waits in the carry until
    the next row, or the end of the thread's rows: a later nest of the same row must
    not read it, nor write the line)."""
    carries: dict[loop.NestOp, LineCarry] = {}
    for op in band.block.ops:
        peel = peeled_output(op) if isinstance(op, loop.NestOp) and op.rank else None
        if not isinstance(op, loop.NestOp) or peel is None:
            continue
        buffer = op.outs[peel]
        root = loop.view_root(buffer)
        touched = any(
            loop.view_root(v) is root for other in band.walk() if other is not op and not op.is_ancestor(other) for v in other.operands
        )
        if not touched and (buffer in mapping or not band.is_ancestor(buffer.owner)):
            carries[op] = LineCarry.create(b, mapping.get(buffer, buffer))
    return carries


def delinearize(b: Builder, index: SSAValue, sizes: Sequence[int]) -> list[SSAValue]:
    """Row-major multi-index of `index` in a box of `sizes`."""
    ivs: list[SSAValue] = []
    rest = index
    for d in range(len(sizes) - 1, 0, -1):
        n = index_const(b, sizes[d])
        ivs.append(b.insert(arith.RemSIOp(rest, n)).result)
        rest = b.insert(arith.DivSIOp(rest, n)).result
    ivs.append(rest)
    return ivs[::-1]


def captured_values(band: loop.BandOp) -> list[SSAValue]:
    inside = {band}
    captured: dict[SSAValue, None] = {}
    for op in band.walk():
        inside.add(op)
    for op in band.walk():
        for v in op.operands:
            owner = v.owner
            owner_op = owner if isinstance(owner, Operation) else owner.parent_op()
            if owner_op not in inside:
                captured[v] = None
    return list(captured)


def outline_band(fn: func.FuncOp, band: loop.BandOp, k: int) -> tuple[func.FuncOp, loop.ParallelCallOp]:
    """The function running [lo, hi) of the band's collapsed iterations, and the call replacing it."""
    operands = captured_values(band)
    block = Block(arg_types=[IndexType(), IndexType(), *[v.type for v in operands]])
    lo, hi, *params = block.args
    b = Builder(InsertPoint.at_end(block))
    emit_band(b, band, dict(zip(operands, params)), linear=(lo, hi))
    b.insert(func.ReturnOp())
    outlined = outlined_function(fn, k, band.band_name.data, block)
    # all the band's dimensions are split across threads as one collapsed range
    iterations = math.prod(band.sizes)
    per_iteration = band_work(band) // max(1, iterations)
    grain = max(1, -(-GRAIN_POINTS // max(1, per_iteration)))
    return outlined, loop.ParallelCallOp(outlined.sym_name.data, iterations, operands, grain)


def band_is_parallel(band: loop.BandOp) -> bool:
    """A band directly in a function, of 2+ iterations and enough work for the thread team."""
    return (
        isinstance(band.parent_op(), func.FuncOp)
        and math.prod(band.sizes) >= 2
        and band_work(band) >= PARALLEL_MIN_POINTS
    )


def outline_serial(
    fn: func.FuncOp, k: int, name: str, operands: Sequence[SSAValue], emit: Callable[[Builder, dict[SSAValue, SSAValue]], None]
) -> tuple[func.FuncOp, func.CallOp]:
    """The function `@<fn>__<k>_<name>(operands...)` running a kernel too small for threads,
    its loops exactly as they would be inline (`emit` writes them, given the parameter of
    each operand), and the call replacing it. Each kernel is then a function of its own,
    which LLVM optimizes and the CPU backend compiles and caches on its own (repeated
    kernels once), and whose buffers are noalias parameters."""
    block = Block(arg_types=[v.type for v in operands])
    b = Builder(InsertPoint.at_end(block))
    emit(b, dict(zip(operands, block.args)))
    b.insert(func.ReturnOp())
    outlined = outlined_function(fn, k, name, block)
    return outlined, func.CallOp(outlined.sym_name.data, list(operands), [])


def replace_by_call(
    rewriter: PatternRewriter, op: Operation, fn: func.FuncOp, outlined: func.FuncOp, call: loop.ParallelCallOp | func.CallOp
) -> None:
    """`outlined` goes right after `fn` (so the module lists the last kernel first, as it
    always has), and `call` in place of `op`."""
    rewriter.insert(outlined, InsertPoint.after(fn))
    rewriter.replace(op, call)


@dataclass
class NestToScf(RewritePattern):
    """A loop.nest outside any band -> scf.for loops in place, or, with `parallel` and
    enough work (`parallel_plan`), an outlined function called by loop.parallel_call.

    `kernels` numbers each function's kernels in walk order (the k of the outlined
    names, see `number_kernels`); a nest without a number stays inline."""

    kernels: dict[Operation, int]
    parallel: bool = True
    outline_serial: bool = False

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loop.NestOp, rewriter: PatternRewriter) -> None:
        fn, k = op.parent_op(), self.kernels.get(op)
        if isinstance(fn, loop.BandOp):
            return  # BandToScf emits the nests of a band
        plan = parallel_plan(op) if self.parallel and k is not None and isinstance(fn, func.FuncOp) else None
        if plan is not None and k is not None and isinstance(fn, func.FuncOp):
            replace_by_call(rewriter, op, fn, *outline_nest(fn, op, k, plan))
            return
        if self.outline_serial and k is not None and isinstance(fn, func.FuncOp):
            operands = list(dict.fromkeys([*op.syms, *op.ins, *op.outs]))

            def emit(b: Builder, param: dict[SSAValue, SSAValue]) -> None:
                emit_nest_loops(b, op, [param[v] for v in op.syms], [param[v] for v in (*op.ins, *op.outs)])

            replace_by_call(rewriter, op, fn, *outline_serial(fn, k, op.nest_name.data, operands, emit))
            return
        emit_nest_loops(rewriter, op, list(op.syms), [*op.ins, *op.outs])
        rewriter.erase(op)


@dataclass
class BandToScf(RewritePattern):
    """A loop.band -> its loops in place (scratch allocas first), or, with `parallel`
    and enough work (`band_is_parallel`), an outlined function over its iterations."""

    kernels: dict[Operation, int]
    parallel: bool = True
    outline_serial: bool = False

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loop.BandOp, rewriter: PatternRewriter) -> None:
        fn, k = op.parent_op(), self.kernels.get(op)
        if self.parallel and k is not None and isinstance(fn, func.FuncOp) and band_is_parallel(op):
            replace_by_call(rewriter, op, fn, *outline_band(fn, op, k))
            return
        if self.outline_serial and k is not None and isinstance(fn, func.FuncOp):
            emit = lambda b, param: emit_band(b, op, dict(param))  # noqa: E731
            replace_by_call(rewriter, op, fn, *outline_serial(fn, k, op.band_name.data, captured_values(op), emit))
            return
        emit_band(rewriter, op, {})
        rewriter.erase(op)


def number_kernels(fn: func.FuncOp) -> dict[Operation, int]:
    """The function's kernels (bands, and nests outside bands) numbered in walk order."""
    kernels = [
        op
        for op in fn.walk()
        if isinstance(op, loop.BandOp) or (isinstance(op, loop.NestOp) and not isinstance(op.parent_op(), loop.BandOp))
    ]
    return {op: k for k, op in enumerate(kernels)}


def loop_to_scf_patterns(
    kernels: dict[Operation, int], parallel: bool = True, outline_serial: bool = False
) -> list[RewritePattern]:
    return [BandToScf(kernels, parallel, outline_serial), NestToScf(kernels, parallel, outline_serial)]


def convert_loop_to_scf(
    module: ModuleOp,
    parallel: bool = True,
    streaming: bool = True,
    outline_serial: bool = False,
    streaming_min_bytes: int = NONTEMPORAL_MIN_BYTES,
) -> None:
    """Mark the streaming accesses (an analysis of whole nests, before any is lowered),
    number the kernels, then lower every band and nest in one walk of the patterns
    (no DCE: an unused constant stays, as it always has; LLVM removes it). With
    `outline_serial`, kernels too small for threads become functions too (`outline_serial`)."""
    kernels: dict[Operation, int] = {}
    for fn in module.ops:
        if isinstance(fn, func.FuncOp):
            if streaming:
                mark_streaming_accesses(fn, streaming_min_bytes)
            kernels.update(number_kernels(fn))
    applier = GreedyRewritePatternApplier(loop_to_scf_patterns(kernels, parallel, outline_serial), dce_enabled=False)
    PatternRewriteWalker(applier, apply_recursively=False).rewrite_module(module)
