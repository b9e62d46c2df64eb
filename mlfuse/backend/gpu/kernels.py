"""Kernel bodies for the four mappings of mlfuse.backend.gpu.mapping.

Each builder fills the entry block of a `kernel.func` with scf/arith/math/memref
code and kernel-dialect ops; element values come from `Scalars` (thread
composition), and each mapping stitches reduction results its own way:
registers (a thread reduces its row), warp shuffles (xor butterfly: every lane
ends with the result), shared memory behind a barrier (block), or global
scratch behind a grid barrier (global; split reductions add atomically).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IntegerAttr, MemRefType
from xdsl.ir import Attribute, SSAValue

from mlfuse.backend.gpu.mapping import GroupInfo, Schedule, cdiv
from mlfuse.backend.gpu.scalar import (
    IR,
    Index,
    Scalars,
    combine,
    finish,
    identity,
    reduced_extent,
)
from mlfuse.dialects import graph, kernel


def global_memref(shape: Sequence[int], el: Attribute) -> MemRefType:
    return MemRefType(el, list(shape), memory_space=IntegerAttr(kernel.GLOBAL_SPACE, 64))


def shared_memref(shape: Sequence[int], el: Attribute) -> MemRefType:
    return MemRefType(el, list(shape), memory_space=IntegerAttr(kernel.SHARED_SPACE, 64))


@dataclass
class KernelContext:
    """A kernel under construction: its IR builder and the buffers its arguments are."""

    ir: IR
    info: GroupInfo
    schedule: Schedule
    buffers: dict[SSAValue, SSAValue]  # group inputs -> kernel arguments
    outputs: list[SSAValue]  # kernel arguments, one per group output
    scratch: dict[SSAValue, SSAValue] = field(default_factory=dict)  # reduction -> global scratch
    counter: SSAValue | None = None
    dynamic_shared: int = 0

    def shared(self, shape: Sequence[int], el: Attribute, dynamic: bool = False) -> SSAValue:
        t = shared_memref(shape, el)
        if not dynamic:
            return self.ir.op(kernel.SharedAllocOp(t))
        offset = self.dynamic_shared
        self.dynamic_shared += cdiv(kernel.memref_bytes(t), 16) * 16
        return self.ir.op(kernel.SharedAllocOp(t, offset))

    def store_output(self, ir: IR, k: int, value: SSAValue, idx: Index) -> None:
        ir.op(memref.StoreOp.get(value, self.outputs[k], idx))


def thread_x(ir: IR) -> SSAValue:
    return ir.op(kernel.ThreadIdOp("x"))


def block_x(ir: IR) -> SSAValue:
    return ir.op(kernel.BlockIdOp("x"))


def grid_stride(ir: IR, threads: int, count: int, body) -> None:
    """for item in [global thread id, count) step (grid size x threads): body(ir, item)."""
    gid = ir.add(ir.mul_const(block_x(ir), threads), thread_x(ir))
    stride = ir.mul_const(ir.op(kernel.GridDimOp("x")), threads)

    def loop(inner: IR, item: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
        body(inner, item)
        return []

    ir.for_loop(gid, ir.index(count), stride, [], loop)


def warp_allreduce(ir: IR, kind: str, value: SSAValue, lanes: int = 32) -> SSAValue:
    """Butterfly over `lanes` lanes: every lane ends with the combined value."""
    offset = lanes // 2
    while offset >= 1:
        other = ir.op(kernel.ShuffleOp("xor", value, offset))
        value = combine(ir, kind, value, other)
        offset //= 2
    return value


def outputs_by_shape(info: GroupInfo) -> dict[tuple[int, ...], list[int]]:
    groups: dict[tuple[int, ...], list[int]] = {}
    for k, v in enumerate(info.outputs):
        groups.setdefault(graph.shape_of(v), []).append(k)
    return groups


# --- elementwise (and the final phase of global) ---------------------------------------------


def emit_outputs_grid_stride(ctx: KernelContext, resolved: dict, vector: int) -> None:
    threads = ctx.schedule.block[0]
    for shape, ks in outputs_by_shape(ctx.info).items():
        n = math.prod(shape)
        v = vector if shape and shape[-1] % vector == 0 else 1
        full_shape = shape or (1,)

        def body(ir: IR, item: SSAValue, ks=ks, shape=shape, v=v, full_shape=full_shape) -> None:
            base = ir.delinearize(ir.mul_const(item, v), full_shape)
            scalars = Scalars(ir, ctx.buffers, resolved)
            for lane in range(v):
                idx = [*base[:-1], ir.add_const(base[-1], lane)] if shape else []
                for k in ks:
                    ctx.store_output(ir, k, scalars.value(ctx.info.outputs[k], idx), idx)

        grid_stride(ctx.ir, threads, cdiv(n, v), body)


def build_elementwise(ctx: KernelContext) -> None:
    emit_outputs_grid_stride(ctx, {}, ctx.schedule.vector)


# --- row reductions ------------------------------------------------------------------------------


class CachedScalars(Scalars):
    """Scalars whose group-input loads at the current element go through a per-row cache."""

    def __init__(self, ir, buffers, resolved, element: Index, cache: dict, position: Index, stored: set):
        super().__init__(ir, buffers, resolved)
        self.element = element
        self.cache = cache  # input -> shared buffer [rows_per_block, cols]
        self.position = position  # [row within block, column]
        self.stored = stored  # inputs already in the cache (earlier passes)
        self.storing: set[SSAValue] = set()

    def _compute(self, v: SSAValue, idx: Index) -> SSAValue:
        if v in self.cache and v in self.buffers and idx is self.element:
            if v in self.stored:
                return self.ir.op(memref.LoadOp.get(self.cache[v], self.position))
            value = self.ir.op(memref.LoadOp.get(self.buffers[v], idx))
            # the same thread reads it back in a later pass: no barrier needed
            self.ir.op(memref.StoreOp.get(value, self.cache[v], self.position))
            self.storing.add(v)
            return value
        return super()._compute(v, idx)


def build_row(ctx: KernelContext) -> None:
    s = ctx.schedule
    info = ctx.info
    ir = ctx.ir
    if s.variant == "split":
        return build_row_split(ctx)
    first = info.reductions[0]
    kept, reduced = reduced_extent(first)
    in_shape = graph.shape_of(first.input)
    prefix = [in_shape[d] for d in kept]
    suffix = [in_shape[d] for d in reduced]
    per_row, per_block = s.threads_per_row, s.rows_per_block
    tid = thread_x(ir)
    lane = ir.rem_const(tid, per_row) if per_row > 1 else ir.index(0)
    local_row = ir.div_const(tid, per_row) if per_block > 1 else ir.index(0)
    row = ir.add(ir.mul_const(block_x(ir), per_block), local_row)

    cache: dict[SSAValue, SSAValue] = {}
    if s.cache in ("shared", "dynamic_shared"):
        for v in info.inputs:
            if graph.shape_of(v) == tuple(prefix + suffix):
                cache[v] = ctx.shared([per_block, s.cols], graph.element_type_of(v), s.cache == "dynamic_shared")
    partials: dict[graph.ReduceOp, SSAValue] = {}
    if s.variant == "block":
        for r in info.reductions:
            partials[r] = ctx.shared([per_row // 32], graph.element_type_of(r.result))

    def in_row(body_ir: IR) -> list[SSAValue]:
        emit_row_body(ctx, body_ir, row, lane, local_row, prefix, suffix, cache, partials)
        return []

    if s.rows % per_block and s.variant != "block":
        # the last block has rows past the end; whole warps share a row, so the guard is warp-uniform
        ir.if_then(ir.lt(row, ir.index(s.rows)), in_row)
    else:
        in_row(ir)
    ir.op(kernel.ReturnOp())


@dataclass
class RowBody:
    """One row of a row-mapped kernel under construction: what the steps of `emit_row_body` share.

    The row's reduced dimensions (`suffix`) are walked by the `threads_per_row` lanes of
    the row, strided; `resolved` maps each finished reduction to its value, and `stored`
    holds the group inputs already in the per-row cache (so later passes read them back).
    """

    ctx: KernelContext
    ir: IR
    lane: SSAValue
    local_row: SSAValue
    prefix: list[int]
    suffix: list[int]
    cache: dict[SSAValue, SSAValue]
    partials: dict[graph.ReduceOp, SSAValue]
    row_idx: Index
    resolved: dict = field(default_factory=dict)
    stored: set[SSAValue] = field(default_factory=set)
    reg_scalars: list[Scalars] = field(default_factory=list)  # cache "registers": one per element held
    reg_elements: list[Index] = field(default_factory=list)

    @property
    def registers(self) -> bool:
        """Whether each lane holds its elements of the row in registers."""
        return self.ctx.schedule.cache == "registers"

    def element(self, inner: IR, col: SSAValue) -> Index:
        """Index of the row's element at (linear) column `col`."""
        return [*self.row_idx, *inner.delinearize(col, self.suffix)] if self.suffix else list(self.row_idx)

    def reduced_index(self, shape: Sequence[int]) -> Index:
        """Index of the row in a reduced value of `shape` (kept dimensions only, or reduced ones as 0)."""
        if tuple(shape) == tuple(self.prefix):
            return list(self.row_idx)
        return [*self.row_idx, *[self.ir.index(0)] * len(self.suffix)]

    def cached_scalars(self, inner: IR, col: SSAValue, idx: Index) -> CachedScalars:
        """Scalars at element `idx` (column `col`) whose input loads go through the row cache."""
        return CachedScalars(inner, self.ctx.buffers, self.resolved, idx, self.cache, [self.local_row, col],
                             self.stored)

    def hold_registers(self) -> None:
        """Cache "registers": the element indices (and their scalar caches) this lane holds."""
        per_row = self.ctx.schedule.threads_per_row
        for k in range(self.ctx.schedule.cols // per_row):
            self.reg_elements.append(self.element(self.ir, self.ir.add_const(self.lane, k * per_row)))
            self.reg_scalars.append(Scalars(self.ir, self.ctx.buffers, self.resolved))

    def reduce_level(self, level: list[graph.ReduceOp]) -> None:
        """Reduce one level of independent reductions over the row, combine the lanes'
        partial results, and resolve each reduction to its finished value."""
        s, ir = self.ctx.schedule, self.ir
        per_row = s.threads_per_row
        kinds = [r.KIND for r in level]
        types = [graph.element_type_of(r.result) for r in level]
        inits = [ir.scalar(identity(k, t), t) for k, t in zip(kinds, types)]
        accs = self.accumulate_registers(level, inits) if self.registers else self.accumulate_loop(level, inits)
        if per_row > 1:
            accs = [warp_allreduce(ir, k, a, min(per_row, 32)) for k, a in zip(kinds, accs)]
        if per_row > 32:
            accs = block_allreduce(self.ctx, ir, level, accs, self.partials)
        for r, a in zip(level, accs):
            value = finish(ir, r, a, s.cols)
            self.resolved[r.result] = lambda sc, idx, value=value: value

    def accumulate_registers(self, level: list[graph.ReduceOp], accs: list[SSAValue]) -> list[SSAValue]:
        """This lane's partial results of `level`, from the elements it holds in registers."""
        for sc, idx in zip(self.reg_scalars, self.reg_elements):
            accs = [combine(self.ir, r.KIND, a, sc.value(r.input, idx)) for a, r in zip(accs, level)]
        return accs

    def accumulate_loop(self, level: list[graph.ReduceOp], inits: list[SSAValue]) -> list[SSAValue]:
        """This lane's partial results of `level`, from a strided loop over the row's columns;
        inputs the loop loads are cached for the later passes."""
        s = self.ctx.schedule
        storing: list[set[SSAValue]] = []

        def body(inner: IR, col: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
            idx = self.element(inner, col)
            sc = self.cached_scalars(inner, col, idx)
            out = [combine(inner, r.KIND, a, sc.value(r.input, idx)) for a, r in zip(carried, level)]
            storing.append(sc.storing)
            return out

        accs = self.ir.for_loop(self.lane, self.ir.index(s.cols), self.ir.index(s.threads_per_row), inits, body)
        for st in storing:
            self.stored.update(st)
        return accs

    def store_row_outputs(self, ks: list[int]) -> None:
        """Store the group outputs `ks` that have the row's full shape, element by element."""
        s, info = self.ctx.schedule, self.ctx.info
        if self.registers:
            for sc, idx in zip(self.reg_scalars, self.reg_elements):
                for k in ks:
                    self.ctx.store_output(self.ir, k, sc.value(info.outputs[k], idx), idx)
            return

        def write(inner: IR, col: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
            idx = self.element(inner, col)
            sc = self.cached_scalars(inner, col, idx)
            for k in ks:
                self.ctx.store_output(inner, k, sc.value(info.outputs[k], idx), idx)
            return []

        self.ir.for_loop(self.lane, self.ir.index(s.cols), self.ir.index(s.threads_per_row), [], write)

    def store_reduced_outputs(self, ks: list[int]) -> None:
        """Store the reduced group outputs `ks` (one value per row) from the row's first lane."""
        info = self.ctx.info

        def first_lane(inner: IR) -> list[SSAValue]:
            sc = Scalars(inner, self.ctx.buffers, self.resolved)
            for k in ks:
                idx = self.reduced_index(graph.shape_of(info.outputs[k]))
                self.ctx.store_output(inner, k, sc.value(info.outputs[k], idx), idx)
            return []

        if self.ctx.schedule.threads_per_row > 1:
            self.ir.if_then(self.ir.eq(self.lane, self.ir.index(0)), first_lane)
        else:
            first_lane(self.ir)


def emit_row_body(
    ctx: KernelContext,
    ir: IR,
    row: SSAValue,
    lane: SSAValue,
    local_row: SSAValue,
    prefix: list[int],
    suffix: list[int],
    cache: dict[SSAValue, SSAValue],
    partials: dict[graph.ReduceOp, SSAValue],
) -> None:
    """The body of one row: every reduction level, then the row-shaped and reduced outputs."""
    body = RowBody(ctx, ir, lane, local_row, prefix, suffix, cache, partials,
                   ir.delinearize(row, prefix) if prefix else [])
    if body.registers:
        body.hold_registers()
    for level in ctx.info.levels:
        body.reduce_level(level)
    full = tuple(prefix + suffix)
    row_outputs = [k for k, v in enumerate(ctx.info.outputs) if graph.shape_of(v) == full]
    reduced_outputs = [k for k, v in enumerate(ctx.info.outputs) if graph.shape_of(v) != full]
    if row_outputs:
        body.store_row_outputs(row_outputs)
    if reduced_outputs:
        body.store_reduced_outputs(reduced_outputs)


def block_allreduce(ctx, ir: IR, level, accs, partials) -> list[SSAValue]:
    """Warp results -> shared memory -> every thread combines all warps' results."""
    tid = thread_x(ir)
    warp = ir.div_const(tid, 32)
    lane = ir.rem_const(tid, 32)
    warps = ctx.schedule.threads_per_row // 32

    def publish(inner: IR) -> list[SSAValue]:
        for r, a in zip(level, accs):
            inner.op(memref.StoreOp.get(a, partials[r], [warp]))
        return []

    ir.if_then(ir.eq(lane, ir.index(0)), publish)
    ir.op(kernel.BarrierOp())
    out = []
    for r in level:
        total = ir.op(memref.LoadOp.get(partials[r], [ir.index(0)]))
        for w in range(1, warps):
            total = combine(ir, r.KIND, total, ir.op(memref.LoadOp.get(partials[r], [ir.index(w)])))
        out.append(total)
    return out


def build_row_split(ctx: KernelContext) -> None:
    """S blocks per row; each adds its block's partial sum to the (zeroed) output atomically."""
    s, info, ir = ctx.schedule, ctx.info, ctx.ir
    first = info.reductions[0]
    kept, reduced = reduced_extent(first)
    in_shape = graph.shape_of(first.input)
    prefix = [in_shape[d] for d in kept]
    suffix = [in_shape[d] for d in reduced]
    threads = s.threads_per_row
    chunk = cdiv(cdiv(s.cols, s.split), threads) * threads
    bid = block_x(ir)
    row = ir.div_const(bid, s.split)
    part = ir.rem_const(bid, s.split)
    row_idx = ir.delinearize(row, prefix) if prefix else []
    start = ir.add(ir.mul_const(part, chunk), thread_x(ir))
    end = ir.min(ir.add_const(ir.mul_const(part, chunk), chunk), ir.index(s.cols))
    level = info.levels[0]
    types = [graph.element_type_of(r.result) for r in level]

    def body(inner: IR, col: SSAValue, carried):
        idx = [*row_idx, *inner.delinearize(col, suffix)]
        sc = Scalars(inner, ctx.buffers, {})
        return [combine(inner, r.KIND, a, sc.value(r.input, idx)) for r, a in zip(level, carried)]

    inits = [ir.scalar(identity(r.KIND, t), t) for r, t in zip(level, types)]
    accs = ir.for_loop(start, end, ir.index(threads), inits, body)
    accs = [warp_allreduce(ir, r.KIND, a) for r, a in zip(level, accs)]
    partials = {r: ctx.shared([threads // 32], t) for r, t in zip(level, types)}
    accs = block_allreduce(ctx, ir, level, accs, partials)
    tid = thread_x(ir)

    def add(inner: IR) -> list[SSAValue]:
        for r, a in zip(level, accs):
            value = finish(inner, r, a, s.cols)
            for k, out in enumerate(info.outputs):
                if out is r.result:
                    shape = graph.shape_of(out)
                    idx = list(row_idx) if tuple(shape) == tuple(prefix) else [*row_idx, *[inner.index(0)] * len(suffix)]
                    inner.op(kernel.AtomicAddOp(value, ctx.outputs[k], idx))
        return []

    ir.if_then(ir.eq(tid, ir.index(0)), add)
    ir.op(kernel.ReturnOp())


# --- column reductions ---------------------------------------------------------------------------


def build_column(ctx: KernelContext) -> None:
    s, info, ir = ctx.schedule, ctx.info, ctx.ir
    first = info.reductions[0]
    kept, reduced = reduced_extent(first)
    in_shape = graph.shape_of(first.input)
    prefix = [in_shape[d] for d in reduced]  # leading, reduced
    suffix = [in_shape[d] for d in kept]  # trailing, kept
    tile_cols, tile_rows = s.block[0], s.block[1]
    tx, ty = thread_x(ir), ir.op(kernel.ThreadIdOp("y"))
    col = ir.add(ir.mul_const(block_x(ir), tile_cols), tx)
    valid = ir.lt(col, ir.index(s.cols))
    # out-of-range columns read the last column (in bounds) and store nothing
    col_idx = ir.delinearize(ir.min(col, ir.index(s.cols - 1)), suffix)
    chunk = cdiv(cdiv(s.rows, s.split), tile_rows) * tile_rows
    part = ir.op(kernel.BlockIdOp("y"))
    start = ir.add(ir.mul_const(part, chunk), ty)
    end = ir.min(ir.add_const(ir.mul_const(part, chunk), chunk), ir.index(s.rows))
    level = info.levels[0]
    types = [graph.element_type_of(r.result) for r in level]

    def body(inner: IR, r_: SSAValue, carried):
        idx = [*inner.delinearize(r_, prefix), *col_idx]
        sc = Scalars(inner, ctx.buffers, {})
        return [combine(inner, r.KIND, a, sc.value(r.input, idx)) for r, a in zip(level, carried)]

    inits = [ir.scalar(identity(r.KIND, t), t) for r, t in zip(level, types)]
    accs = ir.for_loop(start, end, ir.index(tile_rows), inits, body)
    tiles = [ctx.shared([tile_rows, tile_cols + 1], t) for t in types]  # +1: no bank conflicts
    for tile, a in zip(tiles, accs):
        ir.op(memref.StoreOp.get(a, tile, [ty, tx]))
    ir.op(kernel.BarrierOp())
    resolved: dict = {}
    totals = []
    for r, tile in zip(level, tiles):
        total = ir.op(memref.LoadOp.get(tile, [ir.index(0), tx]))
        for k in range(1, tile_rows):
            total = combine(ir, r.KIND, total, ir.op(memref.LoadOp.get(tile, [ir.index(k), tx])))
        totals.append(total)
        value = finish(ir, r, total, s.rows)
        resolved[r.result] = lambda sc, idx, value=value: value
    first_row = ir.eq(ty, ir.index(0))
    store = ir.op(arith.AndIOp(first_row, valid))

    def write(inner: IR) -> list[SSAValue]:
        sc = Scalars(inner, ctx.buffers, resolved)
        for k, out in enumerate(info.outputs):
            shape = graph.shape_of(out)
            idx = list(col_idx) if tuple(shape) == tuple(suffix) else [*[inner.index(0)] * len(prefix), *col_idx]
            value = sc.value(out, idx)
            if s.split > 1:
                inner.op(kernel.AtomicAddOp(value, ctx.outputs[k], idx))
            else:
                ctx.store_output(inner, k, value, idx)
        return []

    ir.if_then(store, write)
    ir.op(kernel.ReturnOp())


# --- global: scratch buffers and grid barriers ------------------------------------------------


def global_split(r: graph.ReduceOp, total_threads: int) -> int:
    """How many threads share one output of a reduction (atomically), in the global mapping."""
    outputs = math.prod(graph.shape_of(r.result))
    _, reduced = reduced_extent(r)
    count = math.prod(graph.shape_of(r.input)[d] for d in reduced)
    if r.KIND not in ("sum", "mean") or not kernel_atomic_type(graph.element_type_of(r.result)):
        return 1
    if outputs >= total_threads:
        return 1
    return max(1, min(count, total_threads // outputs))


def kernel_atomic_type(t: Attribute) -> bool:
    from mlfuse.backend.gpu.mapping import atomic_type

    return atomic_type(t)


def build_global(ctx: KernelContext) -> None:
    s, info, ir = ctx.schedule, ctx.info, ctx.ir
    threads = s.block[0]
    total_threads = s.grid[0] * threads
    resolved: dict = {}
    for level in info.levels:
        for r in level:
            emit_global_reduction(ctx, r, global_split(r, total_threads), resolved)
        assert ctx.counter is not None
        ir.op(kernel.GridSyncOp(ctx.counter))
        for r in level:
            scratch = ctx.scratch[r.result]
            _, reduced = reduced_extent(r)
            count = math.prod(graph.shape_of(r.input)[d] for d in reduced)

            def read(sc: Scalars, idx: Index, r=r, scratch=scratch, count=count) -> SSAValue:
                total = sc.ir.op(memref.LoadOp.get(scratch, idx))
                return finish(sc.ir, r, total, count)

            resolved[r.result] = read
    emit_outputs_grid_stride(ctx, resolved, 1)
    ir.op(kernel.ReturnOp())


def emit_global_reduction(ctx: KernelContext, r: graph.ReduceOp, split: int, resolved: dict) -> None:
    ir = ctx.ir
    threads = ctx.schedule.block[0]
    out_shape = graph.shape_of(r.result)
    outputs = math.prod(out_shape)
    in_shape = graph.shape_of(r.input)
    kept, reduced = reduced_extent(r)
    extent = [in_shape[d] for d in reduced]
    kept_extent = [in_shape[d] for d in kept]
    count = math.prod(extent)
    el = graph.element_type_of(r.result)
    scratch = ctx.scratch[r.result]

    def item_body(inner: IR, item: SSAValue) -> None:
        j = inner.rem_const(item, outputs) if split > 1 else item
        part = inner.div_const(item, outputs) if split > 1 else inner.index(0)
        kept_idx = inner.delinearize(j, kept_extent) if kept_extent else []

        def body(b: IR, k: SSAValue, carried):
            full: list = [None] * len(in_shape)
            for d, i in zip(kept, kept_idx):
                full[d] = i
            for d, i in zip(reduced, b.delinearize(k, extent)):
                full[d] = i
            return [combine(b, r.KIND, carried[0], Scalars(b, ctx.buffers, resolved).value(r.input, full))]

        acc = inner.for_loop(part, inner.index(count), inner.index(split), [inner.scalar(identity(r.KIND, el), el)], body)[0]
        out_idx = inner.delinearize(j, out_shape) if out_shape else []
        if split > 1:
            inner.op(kernel.AtomicAddOp(acc, scratch, out_idx))
        else:
            inner.op(memref.StoreOp.get(acc, scratch, out_idx))

    grid_stride(ir, threads, outputs * split, item_body)


def build_window(ctx: KernelContext) -> None:
    """Conv/pool groups: mlfuse.backend.gpu.window (imported here: it builds on this module)."""
    from mlfuse.backend.gpu.window import build_window as build

    build(ctx)


BUILDERS = {
    "elementwise": build_elementwise,
    "row": build_row,
    "column": build_column,
    "global": build_global,
    "window": build_window,
}


def build_body(ctx: KernelContext) -> None:
    BUILDERS[ctx.schedule.mapping](ctx)
    if ctx.schedule.mapping == "elementwise":
        ctx.ir.op(kernel.ReturnOp())
