"""GPU kernels for groups anchored on a window op (graph.conv2d, max_pool2d, avg_pool2d).

A window group is one convolution or pooling op with what the planner may put
around it: an elementwise epilogue on its result (bias through a broadcast,
inference batch norm as a multiply-add by broadcast per-channel values, relu or
clip, a residual add), and a prologue on its input (graph.pad, elementwise ops,
layout changes). It maps to one *direct* kernel (mapping "window"):

- one thread per output element, in a grid-stride loop over the outputs in
  row-major (N, C, OH, OW) order, so that neighbouring threads read neighbouring
  input columns and the same weights;
- the window's reduction (Cin/groups x KH x KW for a convolution, KH x KW for a
  pool) is a loop nest whose accumulator stays in a register (f16 accumulates in
  f32); input positions outside the tensor (the op's own `pads`) are guarded
  with one unsigned compare per axis, only on axes where a window can leave it;
- the epilogue is evaluated in registers on the result by the same index
  propagation as every other mapping (mlfuse.backend.gpu.scalar.Scalars, which
  finds the window value through `resolved`), then each output is stored once.
  The prologue is recomputed for every read, like any stitched producer.

Pool semantics follow mlfuse.reference: max pooling starts at the lowest value
(-inf), padding never wins and a NaN in a window gives NaN (maximumf); average
pooling divides by KH x KW with `count_include_pad`, else by the number of
window positions inside the input.

Shared-memory tiling and implicit GEMM are the next steps; this is the correct
baseline that every window group can take.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import f32
from xdsl.ir import Attribute, Operation, SSAValue

from mlfuse.backend.gpu.mapping import ELEMENTWISE_BLOCKS_PER_SM, THREADS, GroupInfo, Schedule, cdiv
from mlfuse.backend.gpu.scalar import IR, Index, Scalars
from mlfuse.backend.gpu.targets import GpuTarget
from mlfuse.conversion import scalar
from mlfuse.conversion.expand_math import CONTRACT
from mlfuse.dialects import graph, kernel

# ops a window group may hold besides its window op: all computed per element by Scalars
AROUND_WINDOW = (graph.ConstantOp, graph.PadOp, graph.ConcatOp)


# --- what groups qualify (asked by the GPU target's structural_problem) --------------------


def window_ops(ops: Sequence[Operation]) -> list[Operation]:
    return [op for op in ops if graph.is_window_op(op)]


def window_group_problem(ops: Sequence[Operation]) -> str | None:
    """Why `ops` (holding a window op) cannot be one direct window kernel; None if they can.

    One window op per kernel; around it only ops computed per element (elementwise,
    plain injective, pad, concat, splat constants). Nothing downstream of the window
    may broadcast: that would recompute the whole window for every copy."""
    windows = window_ops(ops)
    if len(windows) != 1:
        return f"{len(windows)} window ops in one kernel (the direct window kernel takes one)"
    for op in ops:
        if op is windows[0] or graph.is_elementwise(op) or isinstance(op, AROUND_WINDOW):
            continue
        if not graph.is_plain_injective(op):
            return f"'{op.name}' cannot be stitched to a window op"
    members, seen = set(ops), set()
    pending = list(windows[0].results)
    while pending:  # the group's ops downstream of the window op
        for use in pending.pop().uses:
            user = use.operation
            if user in members and user not in seen:
                if user.has_trait(graph.Broadcast):
                    return f"'{user.name}' would recompute the window op for every copy"
                seen.add(user)
                pending.extend(user.results)
    return None


# --- schedule ------------------------------------------------------------------------------


def window_schedule(info: GroupInfo, gpu: GpuTarget) -> Schedule:
    """One thread per output element, grid-stride over the largest output."""
    op = window_ops(info.ops)[0]
    work = max(math.prod(graph.shape_of(v)) for v in info.outputs)
    grid = max(1, min(cdiv(work, THREADS), gpu.sm_count * ELEMENTWISE_BLOCKS_PER_SM))
    return Schedule(
        "window",
        "direct",
        grid=(grid, 1, 1),
        reason=f"'{op.name}' {reduction_text(op)}: one thread per output element, the window "
        "reduced in registers, the epilogue stitched in registers",
    )


def reduction_text(op: Operation) -> str:
    kh, kw = graph.Window.geometry(op).kernel
    if isinstance(op, graph.Conv2dOp):
        return f"over {graph.shape_of(op.weight)[1]}x{kh}x{kw}"
    return f"over {kh}x{kw}"


# --- kernel body ---------------------------------------------------------------------------


def build_window(ctx) -> None:
    """The body of a window kernel (ctx: mlfuse.backend.gpu.kernels.KernelContext)."""
    from mlfuse.backend.gpu.kernels import emit_outputs_grid_stride  # kernels.py dispatches here

    resolved = {op.results[0]: window_resolver(op) for op in window_ops(ctx.info.ops)}
    emit_outputs_grid_stride(ctx, resolved, 1)
    ctx.ir.op(kernel.ReturnOp())


def window_resolver(op: Operation) -> Callable[[Scalars, Index], SSAValue]:
    if isinstance(op, graph.Conv2dOp):
        return lambda sc, idx: conv_value(sc, op, idx)
    if isinstance(op, graph.MaxPool2dOp):
        return lambda sc, idx: max_pool_value(sc, op, idx)
    assert isinstance(op, graph.AvgPool2dOp)
    return lambda sc, idx: avg_pool_value(sc, op, idx)


Step = Callable[[IR, list[SSAValue], SSAValue | None, list[SSAValue], SSAValue | None], list[SSAValue]]


def window_loops(
    ir: IR, op: graph.Conv2dOp | graph.Pool2dOp, out_hw: Index, channels: int, inits: list[SSAValue], step: Step
) -> list[SSAValue]:
    """for c < channels (none when 0), i < KH, j < KW: carried = step(ir, carried, c, [i, j, ih, iw], inside).

    ih = oh * stride + i * dilation - pad (likewise iw); `inside` says whether (ih, iw)
    lies in the input (None where no window reaches outside it)."""
    g = graph.Window.geometry(op)
    in_hw = graph.shape_of(op.input)[2:]
    out_sizes = graph.shape_of(op.results[0])[2:]
    guarded = [window_leaves_input(g, a, in_hw[a], out_sizes[a]) for a in range(2)]

    def position(b: IR, axis: int, k: SSAValue) -> SSAValue:
        start = b.plus(b.times(out_hw[axis], g.strides[axis]), b.times(k, g.dilations[axis]))
        return b.shift(start, -g.pads[axis])

    def rows(b: IR, c: SSAValue | None, carried: list[SSAValue]) -> list[SSAValue]:
        def row(bi: IR, i: SSAValue, acc: list[SSAValue]) -> list[SSAValue]:
            ih = position(bi, 0, i)
            row_in = bi.lt(ih, bi.index(in_hw[0])) if guarded[0] else None

            def col(bj: IR, j: SSAValue, acc_j: list[SSAValue]) -> list[SSAValue]:
                iw = position(bj, 1, j)
                inside = row_in
                if guarded[1]:
                    col_in = bj.lt(iw, bj.index(in_hw[1]))  # unsigned: a negative position wraps
                    inside = col_in if inside is None else emit(bj, arith.AndIOp(inside, col_in))
                return step(bj, acc_j, c, [i, j, ih, iw], inside)

            return bi.for_loop(bi.index(0), bi.index(g.kernel[1]), bi.index(1), acc, col)

        return b.for_loop(b.index(0), b.index(g.kernel[0]), b.index(1), carried, row)

    if channels == 0:
        return rows(ir, None, inits)
    return ir.for_loop(ir.index(0), ir.index(channels), ir.index(1), inits, rows)


def window_leaves_input(g: graph.WindowGeometry, axis: int, size_in: int, size_out: int) -> bool:
    """Whether some window reaches outside the input along `axis` (into the padding)."""
    low = g.pads[axis]
    last = (size_out - 1) * g.strides[axis] + (g.kernel[axis] - 1) * g.dilations[axis] - low
    return low > 0 or last >= size_in


def input_at(ir: IR, sc: Scalars, v: SSAValue, idx: Index, inside: SSAValue | None, fill) -> SSAValue:
    """v at idx (computed by index propagation) where `inside`, else the constant `fill`."""
    if inside is None:
        return Scalars(ir, sc.buffers, sc.resolved).value(v, idx)
    el = graph.element_type_of(v)
    return ir.if_then(
        inside,
        lambda t: [Scalars(t, sc.buffers, sc.resolved).value(v, idx)],
        lambda e: [e.scalar(fill, el)],
        [el],
    )[0]


def emit(ir: IR, op: Operation) -> SSAValue:
    """Insert an op of one result and return that result (IR.op's, typed)."""
    ir.b.insert(op)
    return op.results[0]


def accumulator_type(el: Attribute) -> Attribute:
    """f16/bf16 windows accumulate in f32 (scalar.widen's type); others in their own type."""
    return f32 if isinstance(el, scalar.HALF_TYPES) else el


def conv_value(sc: Scalars, op: graph.Conv2dOp, idx: Index) -> SSAValue:
    """y[n, o, oh, ow] = sum over c, i, j of x[n, group(o) * C/G + c, ih, iw] * w[o, c, i, j]."""
    ir = sc.ir
    n, o, oh, ow = idx
    count, per_group, _, _ = graph.shape_of(op.weight)
    outs_per_group = count // op.group_count
    first = ir.times(ir.div_const(o, outs_per_group), per_group) if op.group_count > 1 else ir.index(0)
    el = graph.element_type_of(op.result)
    acc_t = accumulator_type(el)

    def step(b: IR, acc: list[SSAValue], c, pos: list[SSAValue], inside) -> list[SSAValue]:
        i, j, ih, iw = pos
        x = input_at(b, sc, op.input, [n, b.plus(first, c), ih, iw], inside, 0)
        w = Scalars(b, sc.buffers, sc.resolved).value(op.weight, [o, c, i, j])
        product = emit(b, arith.MulfOp(scalar.widen(b.b, x), scalar.widen(b.b, w), CONTRACT))
        return [emit(b, arith.AddfOp(acc[0], product, CONTRACT))]  # one FMA on the device

    total = window_loops(ir, op, [oh, ow], per_group, [ir.scalar(0, acc_t)], step)[0]
    return scalar.narrow(ir.b, total, el)


def max_pool_value(sc: Scalars, op: graph.MaxPool2dOp, idx: Index) -> SSAValue:
    """Max over the window from the lowest value; padding reads the lowest value (never wins)."""
    ir = sc.ir
    n, c, oh, ow = idx
    el = graph.element_type_of(op.result)
    lowest = scalar.identity_of("max", el)

    def step(b: IR, acc: list[SSAValue], _, pos: list[SSAValue], inside) -> list[SSAValue]:
        x = scalar.widen(b.b, input_at(b, sc, op.input, [n, c, pos[2], pos[3]], inside, lowest))
        return [scalar.combine(b.b, "max", acc[0], x)]  # maximumf: NaN propagates, as numpy's max

    total = window_loops(ir, op, [oh, ow], 0, [ir.scalar(lowest, accumulator_type(el))], step)[0]
    return scalar.narrow(ir.b, total, el)


def avg_pool_value(sc: Scalars, op: graph.AvgPool2dOp, idx: Index) -> SSAValue:
    """Sum over the window divided by KH x KW (count_include_pad or no padding reached),
    else by the number of positions inside the input, counted alongside the sum."""
    ir = sc.ir
    n, c, oh, ow = idx
    el = graph.element_type_of(op.result)
    acc_t = accumulator_type(el)
    zero, one = ir.scalar(0, acc_t), ir.scalar(1, acc_t)

    def step(b: IR, acc: list[SSAValue], _, pos: list[SSAValue], inside) -> list[SSAValue]:
        x = scalar.widen(b.b, input_at(b, sc, op.input, [n, c, pos[2], pos[3]], inside, 0))
        total = emit(b, arith.AddfOp(acc[0], x))
        if len(acc) == 1:
            return [total]
        here = emit(b, arith.SelectOp(inside, one, zero)) if inside is not None else one
        return [total, emit(b, arith.AddfOp(acc[1], here))]

    g = graph.Window.geometry(op)
    counted = not op.counts_padding and any(
        window_leaves_input(g, a, graph.shape_of(op.input)[2 + a], graph.shape_of(op.result)[2 + a]) for a in range(2)
    )
    inits = [zero, zero] if counted else [zero]
    acc = window_loops(ir, op, [oh, ow], 0, inits, step)
    divisor = acc[1] if counted else ir.scalar(math.prod(g.kernel), acc_t)
    return scalar.narrow(ir.b, emit(ir, arith.DivfOp(acc[0], divisor)), el)
