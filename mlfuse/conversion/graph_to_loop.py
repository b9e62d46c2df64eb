"""Bufferize a graph-level function and lower every graph op to `loop.nest`s.

The function `@f(tensors...) -> (tensors...)` becomes `@f(in buffers..., out
buffers...)`: results are written into caller-provided buffers (destination
passing), intermediates are `memref.alloc`ed 64-byte aligned and freed after their
last use, dense constants become `memref.global`s, and splat constants become
scalars inside the nests that read them. A `fusion.group` becomes one stitched kernel
(group_to_loop.py) or is lowered op by op, its nests keeping the group's name.

The conversion is a set of xDSL rewrite patterns (see "the conversion" below),
applied in one walk by mlfuse.conversion.patterns.apply_once; the per-op
lowerings (`lower_elementwise`, `lower_conv2d`, ...) are plain functions of a
`FunctionLowering`, the state the patterns of one function share.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    UnrealizedConversionCastOp,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.traits import SymbolTable

from mlfuse.abi import ALIGNMENT
from mlfuse.backend.depthwise_kernels import takes_depthwise
from mlfuse.backend.gemm_kernels import GemmShape, Window, channel_tiles_fit
from mlfuse.conversion import scalar
from mlfuse.conversion.patterns import apply_once, is_tensor_function
from mlfuse.diagnostics import Diagnostic, location_of
from mlfuse.dialects import fusion, graph, loop


@functools.lru_cache(maxsize=4096)
def memref_of(t: Attribute) -> MemRefType:
    """The buffer of a tensor type; its element type is the signless storage type.
    Remembered: types are immutable values, and xDSL checks a new MemRefType's parameters
    against their type hints on every construction (MobileNetV2: ~900 of them)."""
    assert isinstance(t, TensorType)
    return MemRefType(graph.storage_type(t.get_element_type()), t.get_shape())


def identity(rank: int) -> AffineMap:
    return AffineMap.identity(rank)


def dims(n: int) -> list[AffineExpr]:
    return [AffineExpr.dimension(i) for i in range(n)]


@dataclass
class Operand:
    """How a nest reads a graph value: a buffer, or (for splats) a scalar constant."""

    buffer: SSAValue | None = None
    splat: float | int | None = None


@dataclass
class FunctionLowering:
    """State of lowering one function: its buffers, and where the ops go.

    `builder` is the pattern rewriter, its insertion point just before the op being
    lowered; `scopes` gives the ops inlined from a fusion group their nests' name
    prefix and, in a window group, their group tag.
    """

    module: ModuleOp
    builder: Builder
    fn: func.FuncOp
    num_inputs: int
    taken: set[str]
    allocated: list[SSAValue] = field(default_factory=list)
    splat_buffers: dict[SSAValue, SSAValue] = field(default_factory=dict)
    scopes: dict[Operation, tuple[str, str | None]] = field(default_factory=dict)
    globals_made: int = 0
    prefix: str = ""
    stitch: bool = True
    conv: str = "gemm"  # how dense convs lower: "gemm" (patches @ weights) or "direct"
    channel_tiles: bool = False  # the target's GEMM kernels take channel tiles (gemm_kernels.has_channel_tiles)
    depthwise: bool = False  # the target has depthwise kernels (depthwise_as_product)
    fallbacks: list[str] = field(default_factory=list)
    group_tag: str | None = None  # the window group whose nests are being emitted

    def enter(self, op: Operation, rewriter: Builder) -> None:
        """Start lowering `op`: emit before it, named after its group."""
        self.builder = rewriter
        self.prefix, self.group_tag = self.scopes.get(op, ("", None))

    @property
    def out_args(self) -> Sequence[SSAValue]:
        return self.fn.body.block.args[self.num_inputs :]

    # --- buffers -----------------------------------------------------------------

    def operand(self, v: SSAValue) -> Operand:
        """How nests read the graph value `v`: the buffer behind its cast, or a splat."""
        owner = v.owner
        if isinstance(owner, UnrealizedConversionCastOp):
            return Operand(buffer=owner.inputs[0])
        if isinstance(owner, graph.ConstantOp) and (splat := graph.splat_value(owner.value)) is not None:
            return Operand(buffer=self.splat_buffers.get(v), splat=splat)
        raise Diagnostic(f"internal error: {v.name_hint or 'a value'} read before it was lowered", location_of(owner))  # type: ignore[arg-type]

    def destination(self, result: SSAValue) -> SSAValue:
        """Where `result` is computed: the caller's buffer when it is returned (at the
        first place it is returned), else a new intermediate."""
        ret = self.fn.body.block.last_op
        if any(use.operation is ret for use in result.uses):
            return self.out_args[list(ret.operands).index(result)]  # type: ignore[union-attr]
        return self.alloc(result.type)

    def alloc(self, t: Attribute) -> SSAValue:
        buf = self.builder.insert(
            memref.AllocOp.get(memref_of(t).get_element_type(), ALIGNMENT, memref_of(t).get_shape())
        ).memref
        self.allocated.append(buf)
        return buf

    def buffer(self, v: SSAValue) -> SSAValue:
        """The buffer holding `v`, materializing a splat when a buffer is needed."""
        operand = self.operand(v)
        if operand.buffer is not None:
            return operand.buffer
        buf = self.alloc(v.type)
        shape = graph.shape_of(v)
        self.nest("fill", shape, [], [buf], lambda b, args: [scalar.const(b, operand.splat, graph.element_type_of(v))], [], [identity(len(shape))])
        self.splat_buffers[v] = buf
        return buf

    # --- nests ----------------------------------------------------------------------

    def nest(
        self,
        name: str,
        bounds: Sequence[int],
        ins: Sequence[SSAValue],
        outs: Sequence[SSAValue],
        body_fn,
        iterators: Sequence[str] | None = None,
        maps: Sequence[AffineMap] = (),
    ) -> loop.NestOp:
        """Emit a nest whose body is built by `body_fn(builder, element_args) -> yielded`."""
        arg_types = [v.type.get_element_type() for v in (*ins, *outs)]  # type: ignore[union-attr]
        block = Block(arg_types=arg_types)
        b = Builder(InsertPoint.at_end(block))
        b.insert(loop.YieldOp(*body_fn(b, list(block.args))))
        maps_form = isinstance(bounds, tuple) and len(bounds) == 2 and not isinstance(bounds[0], int)
        op = loop.NestOp(
            self.prefix + name,
            bounds if maps_form else list(bounds),
            list(iterators or [loop.PARALLEL] * len(bounds)),
            ins,
            outs,
            maps,
            Region(block),
        )
        if self.group_tag is not None:
            op.attributes[loop.GROUP_ATTR] = StringAttr(self.group_tag)
        return self.builder.insert(op)


def lower_elementwise(fl: FunctionLowering, op: Operation, out: SSAValue) -> None:
    shape = graph.shape_of(op.results[0])
    ins, splats = [], []
    for v in op.operands:
        operand = fl.operand(v)
        if operand.buffer is None:
            splats.append((v, operand.splat))
        else:
            ins.append(operand.buffer)
            splats.append((v, None))

    def body(b: Builder, args: list[SSAValue]) -> list[SSAValue]:
        it = iter(args)
        values = [
            next(it) if s is None else scalar.const(b, s, graph.element_type_of(v))
            for v, s in splats
        ]
        return [scalar.emit_elementwise(b, op, values)]

    rank = len(shape)
    fl.nest(short_name(op), shape, ins, [out], body, maps=[identity(rank)] * (len(ins) + 1))


def source_map(op: Operation, operand: int, rank: int) -> AffineMap:
    """The access map of `op`'s operand over the result's domain (its index map)."""
    return AffineMap(rank, 0, tuple(op.source_index(operand, dims(rank), graph.AFFINE)))  # type: ignore[attr-defined]


def lower_broadcast(fl: FunctionLowering, op: graph.BroadcastOp, out: SSAValue) -> None:
    out_shape = graph.shape_of(op.result)
    m = source_map(op, 0, len(out_shape))
    fl.nest("broadcast", out_shape, [fl.buffer(op.input)], [out], lambda b, a: [a[0]], maps=[m, identity(len(out_shape))])


def lower_reduce(fl: FunctionLowering, op: graph.ReduceOp, out: SSAValue) -> None:
    shape = graph.shape_of(op.input)
    axes = set(op.reduce_axes)
    t = graph.element_type_of(op.input)
    out_shape = graph.shape_of(op.result)
    init = scalar.identity_of(op.KIND, t)
    fl.nest(f"init_{op.KIND}", out_shape, [], [out], lambda b, a: [scalar.const(b, init, t)], maps=[identity(len(out_shape))])
    d = dims(len(shape))
    if op.keeps_dims:
        out_index = [AffineExpr.constant(0) if i in axes else d[i] for i in range(len(shape))]
    else:
        out_index = [d[i] for i in range(len(shape)) if i not in axes]
    iterators = [loop.REDUCTION if i in axes else loop.PARALLEL for i in range(len(shape))]

    def body(b: Builder, a: list[SSAValue]) -> list[SSAValue]:
        x, acc = scalar.widen(b, a[0]), scalar.widen(b, a[1])
        return [scalar.narrow(b, scalar.combine(b, op.KIND, acc, x, unsigned=graph.orders_unsigned(t)), t)]

    if not reduce_by_blocks(fl, op, out, body):
        fl.nest(f"reduce_{op.KIND}", shape, [fl.buffer(op.input)], [out], body, iterators,
                [identity(len(shape)), AffineMap(len(shape), 0, tuple(out_index))])
    if op.KIND == "mean":
        count = 1
        for a in axes:
            count *= shape[a]

        def scale(b: Builder, a: list[SSAValue]) -> list[SSAValue]:
            from xdsl.dialects import arith

            x = scalar.widen(b, a[0])
            return [scalar.narrow(b, b.insert(arith.DivfOp(x, scalar.const(b, float(count), x.type))).result, t)]

        fl.nest("mean_scale", out_shape, [out], [out], scale, maps=[identity(len(out_shape))] * 2)


def reduce_by_blocks(fl: FunctionLowering, op: graph.ReduceOp, out: SSAValue, combine) -> bool:
    """Long float sums (means, products) over trailing axes, full reductions included,
    by blocks: each block of ROW_BLOCK elements into its own partial, then the
    partials into `out` (already at the identity). A single accumulator chain per
    vector lane would add n / lanes elements in sequence; blocked, the error grows
    like a pairwise sum's. Blocks run in parallel and each is summed by one thread
    in a fixed order, so the bits do not depend on the thread count. False (nothing
    emitted) for the other reductions. `combine(b, [x, acc])` is the reduction step.
    """
    from mlfuse.conversion.group_to_loop import ROW_BLOCK, ROW_BLOCK_MIN

    shape, t = graph.shape_of(op.input), graph.element_type_of(op.input)
    axes, rank = sorted(op.reduce_axes), len(shape)
    k = rank - len(axes)  # kept (outer) axes
    n = math.prod(shape[k:])
    if op.KIND not in ("sum", "mean", "prod") or not graph.is_float(t) or axes != list(range(k, rank)) or n < ROW_BLOCK_MIN:
        return False
    outer, blocks = list(shape[:k]), -(-n // ROW_BLOCK)
    src = fl.builder.insert(loop.ViewOp(fl.buffer(op.input), MemRefType(t, [*outer, n]))).result
    partial = fl.builder.insert(memref.AllocOp.get(t, ALIGNMENT, [*outer, blocks])).memref
    init = scalar.identity_of(op.KIND, t)
    fl.nest(f"partial_init_{op.KIND}", [*outer, blocks], [], [partial], lambda b, a: [scalar.const(b, init, t)], maps=[identity(k + 1)])
    d = dims(k + 2)  # outer..., block, element
    lower = [loop.constant_bound(0)] * (k + 1) + [AffineMapAttr(AffineMap(k + 1, 0, (d[k] * ROW_BLOCK,)))]
    upper = [loop.constant_bound(v) for v in [*outer, blocks]]
    upper.append(AffineMapAttr(AffineMap(k + 1, 0, (d[k] * ROW_BLOCK + ROW_BLOCK, AffineExpr.constant(n)))))
    fl.nest(f"reduce_{op.KIND}_blocks", (lower, upper), [src], [partial], combine, [loop.PARALLEL] * (k + 1) + [loop.REDUCTION],
            [AffineMap(k + 2, 0, (*d[:k], d[k + 1])), AffineMap(k + 2, 0, tuple(d[: k + 1]))])
    out_index = (*d[:k], *([AffineExpr.constant(0)] * len(axes) if op.keeps_dims else []))
    fl.nest(f"reduce_{op.KIND}", [*outer, blocks], [partial], [out], combine, [loop.PARALLEL] * k + [loop.REDUCTION],
            [identity(k + 1), AffineMap(k + 1, 0, out_index)])
    fl.builder.insert(memref.DeallocOp.get(partial))
    return True


# Transposes that move the innermost dimension run by 8 x 8 tiles, which LLVM
# unrolls and transposes in registers (shuffles), visited block by block of 64 x 64
# so that the pages a block touches stay in the TLB. 4096x4096 f32 at 1 thread:
# 97 ms untiled (every element of a column on a new page), 32 ms with 32 x 32
# tiles (gathers), 15 ms with 8 x 8 tiles in plain order (TLB misses), 10.7 ms
# blocked (6.1 ms at 2 threads; numpy 113 ms).
TRANSPOSE_TILE = 8
TRANSPOSE_BLOCK = 64
TRANSPOSE_TILE_MIN_ELEMENTS = 1 << 16


def lower_transpose(fl: FunctionLowering, op: graph.TransposeOp, out: SSAValue) -> None:
    perm = op.permutation
    rank = len(perm)
    out_shape = graph.shape_of(op.result)
    inverse = [perm.index(j) for j in range(rank)]  # input dimension j is output dimension inverse[j]
    across = inverse[rank - 1]  # the output dimension that walks along the input's rows
    if (
        fl.stitch
        and across != rank - 1
        and math.prod(out_shape) >= TRANSPOSE_TILE_MIN_ELEMENTS
        and min(out_shape[across], out_shape[-1]) >= TRANSPOSE_TILE
    ):
        tiled_transpose(fl, op, out, across)
        return
    m = source_map(op, 0, rank)
    fl.nest("transpose", out_shape, [fl.buffer(op.input)], [out], lambda b, a: [a[0]], maps=[m, identity(rank)])


def tiled_transpose(fl: FunctionLowering, op: graph.TransposeOp, out: SSAValue, across: int) -> None:
    """A parallel `loop.band` over the output: blocks of TRANSPOSE_BLOCK along `across`
    and the last dimension (every index of the others), then the tiles of a block;
    inside, one 2-d nest copies a TRANSPOSE_TILE square (bounds take a min at the
    edges, where a tile may be empty)."""
    out_shape = graph.shape_of(op.result)
    rank, tile, block = len(out_shape), TRANSPOSE_TILE, TRANSPOSE_BLOCK
    tiled = (across, rank - 1)  # the inner loop writes contiguous output
    band_block = Block(arg_types=[IndexType()] * (rank + 2))
    s = [AffineExpr.symbol(k) for k in range(rank + 2)]
    start = {k: s[k] * block + s[rank + i] * tile for i, k in enumerate(tiled)}
    d = (AffineExpr.dimension(0), AffineExpr.dimension(1))
    lower = [AffineMapAttr(AffineMap(0, rank + 2, (start[k],))) for k in tiled]
    upper = [AffineMapAttr(AffineMap(0, rank + 2, (start[k] + tile, AffineExpr.constant(out_shape[k])))) for k in tiled]
    out_index = [d[tiled.index(k)] if k in tiled else s[k] for k in range(rank)]
    in_index = op.source_index(0, out_index, graph.AFFINE)
    t = graph.storage_type(graph.element_type_of(op.result))
    body = Block(arg_types=[t, t])
    Builder(InsertPoint.at_end(body)).insert(loop.YieldOp(body.args[0]))
    nest = loop.NestOp(
        fl.prefix + "transpose", (lower, upper), [loop.PARALLEL] * 2, [fl.buffer(op.input)], [out],
        [AffineMap(2, rank + 2, tuple(in_index)), AffineMap(2, rank + 2, tuple(out_index))], Region(body),
        list(band_block.args),
    )
    Builder(InsertPoint.at_end(band_block)).insert(nest)
    sizes = [-(-n // block) if k in tiled else n for k, n in enumerate(out_shape)] + [block // tile] * 2
    fl.builder.insert(loop.BandOp(fl.prefix + "transpose.tiles", sizes, Region(band_block)))


def copy_nest(fl: FunctionLowering, name: str, src: SSAValue, dst: SSAValue, src_map: AffineMap, dst_map: AffineMap, bounds: Sequence[int]) -> None:
    fl.nest(name, bounds, [src], [dst], lambda b, a: [a[0]], maps=[src_map, dst_map])


def lower_slice(fl: FunctionLowering, op: graph.SliceOp, out: SSAValue) -> None:
    shape = graph.shape_of(op.result)
    copy_nest(fl, "slice", fl.buffer(op.input), out, source_map(op, 0, len(shape)), identity(len(shape)), shape)


def lower_pad(fl: FunctionLowering, op: graph.PadOp, out: SSAValue) -> None:
    low, _ = op.padding
    t = graph.element_type_of(op.result)
    out_shape, in_shape = graph.shape_of(op.result), graph.shape_of(op.input)
    value = op.pad_value
    fl.nest("pad_fill", out_shape, [], [out], lambda b, a: [scalar.const(b, value, t)], maps=[identity(len(out_shape))])
    d = dims(len(in_shape))
    m = AffineMap(len(in_shape), 0, tuple(d[i] + low[i] for i in range(len(in_shape))))
    copy_nest(fl, "pad_copy", fl.buffer(op.input), out, identity(len(in_shape)), m, in_shape)


def lower_concat(fl: FunctionLowering, op: graph.ConcatOp, out: SSAValue) -> None:
    axis, offset = op.concat_axis, 0
    for v in op.inputs:
        shape = graph.shape_of(v)
        d = dims(len(shape))
        m = AffineMap(len(shape), 0, tuple(d[i] + offset if i == axis else d[i] for i in range(len(shape))))
        copy_nest(fl, "concat", fl.buffer(v), out, identity(len(shape)), m, shape)
        offset += shape[axis]


def lower_gather(fl: FunctionLowering, op: graph.GatherBase, out: SSAValue) -> None:
    """One nest over the result: read the index, then the data at it (loop.read).

    The data buffer's own access map is its first element (always in bounds when
    the nest runs at all); the body ignores that element and reads where the
    clamped index says."""
    out_shape, data_shape = graph.shape_of(op.result), graph.shape_of(op.data)
    axis, rank = op.gather_axis, len(out_shape)
    index_map = source_map(op, 1, rank)
    zeros = AffineMap(rank, 0, tuple(AffineExpr.constant(0) for _ in data_shape))

    def body(b: Builder, args: list[SSAValue]) -> list[SSAValue]:
        position = scalar.gather_index(b, args[0], data_shape[axis])
        ivs = [b.insert(loop.IndexOp("dim", i)).result for i in range(rank)]
        return [b.insert(loop.ReadOp(args[1], op.data_index(ivs, position))).result]

    fl.nest(short_name(op), out_shape, [fl.buffer(op.indices), fl.buffer(op.data)], [out], body,
            maps=[index_map, zeros, identity(rank)])


# GEMMs of at least this many multiply-adds per matrix become one loop.gemm (a
# blocked kernel, see mlfuse/backend/gemm_kernels.py) instead of loop nests.
GEMM_KERNEL_MIN_MACS = 1 << 18


# ... or this many for a conv's product of fewer than CONV_GEMM_MIN_ROWS rows with
# constant weights (laid out for the kernel at compile time: gemm_kernels.prepack_b):
# such a product reads each weight once, and the kernel streams them at its pace.
# MobileNetV3-small's squeeze-excite layers (one pixel, 576 x 144 and 288 x 72 weights)
# had been nests reading their weight rows at a third of it; side by side at 2 threads
# the model took 0.953x the time.
CONSTANT_GEMM_KERNEL_MIN_MACS = 1 << 14


def uses_gemm_kernel(a_shape: Sequence[int], b_shape: Sequence[int], el: Attribute, min_macs: int = GEMM_KERNEL_MIN_MACS) -> bool:
    macs = a_shape[-2] * a_shape[-1] * b_shape[-1]
    return str(el) in ("f32", "f64") and macs >= min_macs


def lower_contraction(fl: FunctionLowering, op: Operation, out: SSAValue) -> None:
    a, b = (fl.buffer(v) for v in op.operands)
    emit_matmul(fl, short_name(op), a, b, out, graph.element_type_of(op.results[0]))


def emit_matmul(fl: FunctionLowering, name: str, a: SSAValue, b: SSAValue, out: SSAValue, t: Attribute, gemm: bool = True,
                min_macs: int = GEMM_KERNEL_MIN_MACS) -> None:
    """C[b.., i, j] = sum_k A[b.., i, k] * B[b.., k, j], iterated (b.., i, k, j).

    The reduction dimension sits between i and j so that the innermost loop runs
    along rows of B and C: contiguous, vectorizable, no reassociation needed. A
    f32/f64 product of at least `min_macs` is one `loop.gemm` (packed, register-blocked
    kernels) unless `gemm` is false.
    """
    a_shape, b_shape = memref_shape(a), memref_shape(b)
    if gemm and uses_gemm_kernel(a_shape, b_shape, t, min_macs):
        fl.builder.insert(loop.GemmOp(a, b, out))
        return
    nb = len(a_shape) - 2
    out_shape = [*a_shape[:-1], b_shape[-1]]
    fl.nest(f"{name}_init", out_shape, [], [out], lambda b, a: [scalar.const(b, 0, t)], maps=[identity(len(out_shape))])
    d = dims(nb + 3)
    batch, i, k, j = d[:nb], d[nb], d[nb + 1], d[nb + 2]
    rank = nb + 3
    maps = [AffineMap(rank, 0, (*batch, i, k)), AffineMap(rank, 0, (*batch, k, j)), AffineMap(rank, 0, (*batch, i, j))]
    bounds = [*a_shape, b_shape[-1]]
    iterators = [loop.PARALLEL] * (nb + 1) + [loop.REDUCTION, loop.PARALLEL]

    def body(b: Builder, a: list[SSAValue]) -> list[SSAValue]:
        x, y, acc = (scalar.widen(b, v) for v in a)
        return [scalar.narrow(b, scalar.multiply_add(b, acc, x, y), t)]

    fl.nest(name, bounds, [a, b], [out], body, iterators, maps)


def memref_shape(v: SSAValue) -> tuple[int, ...]:
    assert isinstance(v.type, MemRefType)
    return tuple(v.type.get_shape())


def short_name(op: Operation) -> str:
    return op.name.split(".", 1)[1]


LOWERINGS = {
    graph.BroadcastOp: lower_broadcast,
    graph.TransposeOp: lower_transpose,
    graph.SliceOp: lower_slice,
    graph.PadOp: lower_pad,
    graph.ConcatOp: lower_concat,
    graph.GatherOp: lower_gather,
    graph.GatherElementsOp: lower_gather,
    graph.MatmulOp: lower_contraction,
    graph.BatchMatmulOp: lower_contraction,
}


def lower_op(fl: FunctionLowering, op: Operation, out: SSAValue) -> None:
    if graph.is_elementwise(op):
        lower_elementwise(fl, op, out)
    elif isinstance(op, graph.ReduceOp):
        lower_reduce(fl, op, out)
    elif type(op) in LOWERINGS:
        LOWERINGS[type(op)](fl, op, out)
    else:
        raise Diagnostic(f"'{op.name}' cannot be lowered to loops yet", location_of(op))


def unique_constant_name(fl: FunctionLowering) -> str:
    """`__constant_N` not yet taken in the module: globals are module-wide, and every
    function (or an earlier run of this pass) numbers its constants from 0."""
    while (name := f"__constant_{fl.prefix}{fl.globals_made}") in fl.taken:
        fl.globals_made += 1
    fl.globals_made += 1
    fl.taken.add(name)
    return name


def lower_constant(fl: FunctionLowering, op: graph.ConstantOp) -> Operand:
    value = op.value
    splat = graph.splat_value(value)
    if splat is not None:
        return Operand(splat=splat)
    name = unique_constant_name(fl)
    t = memref_of(op.result.type)
    if t.get_element_type() != value.get_element_type():  # uiN: the same bytes as signless iN
        value = DenseIntOrFPElementsAttr(TensorType(t.get_element_type(), t.get_shape()), value.data)
    fl.module.body.block.insert_op_before(
        memref.GlobalOp.get(StringAttr(name), t, value, constant=UnitAttr(), alignment=ALIGNMENT),
        fl.module.body.block.first_op,
    )
    return Operand(buffer=fl.builder.insert(memref.GetGlobalOp(name, t)).memref)


# --- the conversion: one pattern per kind of op ----------------------------------------------
#
# The walk goes through each function once, in order (pre-order, not recursive): the
# function's signature first, then its ops. A lowered op is replaced by an
# `unrealized_conversion_cast` of its buffer to the old tensor type, so the IR stays
# valid half-way; its users find the buffer behind the cast (`FunctionLowering.operand`).
# The return, the last op, copies what is not yet in the caller's buffers, and
# `finish_function` then drops the casts and places the deallocs.


def lowering_of(op: Operation, state: dict[Operation, FunctionLowering]) -> FunctionLowering | None:
    """The lowering of the function `op` sits in, if that function is being converted."""
    parent = op.parent_op()
    return state.get(parent) if parent is not None else None


def replace_with_buffer(rewriter: PatternRewriter, op: Operation, buffer: SSAValue) -> None:
    """Replace `op`'s one result by `buffer`, cast back to the tensor type for its users."""
    cast = UnrealizedConversionCastOp.get([buffer], [op.results[0].type])
    rewriter.replace(op, cast)


@dataclass
class BufferizeSignature(RewritePattern):
    """`@f(tensors) -> tensors` becomes `@f(in buffers, out buffers)`; the body reads
    the input buffers through casts until its ops are lowered."""

    module: ModuleOp
    state: dict[Operation, FunctionLowering]
    stitch: bool
    conv: str
    channel_tiles: bool
    depthwise: bool
    taken: set[str]  # the module's global names

    @op_type_rewrite_pattern
    def match_and_rewrite(self, fn: func.FuncOp, rewriter: PatternRewriter) -> None:
        if not (is_tensor_function(fn) and fn.body.blocks):
            return
        for t in (*fn.function_type.inputs.data, *fn.function_type.outputs.data):
            if not isinstance(t, TensorType):  # the compiled function takes and fills buffers
                raise Diagnostic(f"@{fn.sym_name.data}: loops are generated for functions of tensors, got {t}", location_of(fn))
        inputs = [memref_of(t) for t in fn.function_type.inputs.data]
        outputs = [memref_of(t) for t in fn.function_type.outputs.data]
        old_block = fn.body.block
        if not isinstance(old_block.last_op, func.ReturnOp):
            raise Diagnostic(f"function '@{fn.sym_name.data}' does not end in func.return", location_of(fn))
        new_block = Block(arg_types=[*inputs, *outputs])
        casts = [UnrealizedConversionCastOp.get([arg], [t]) for arg, t in zip(new_block.args, fn.function_type.inputs.data)]
        new_block.add_ops(casts)
        rewriter.inline_block(old_block, InsertPoint.at_end(new_block), [c.results[0] for c in casts])
        fn.body.add_block(new_block)  # inline_block erased the old one
        fn.function_type = FunctionType.from_lists([*inputs, *outputs], [])
        for name in ("arg_attrs", "res_attrs"):  # they described the tensor signature
            fn.properties.pop(name, None)
        fn.attributes["mlfuse.num_inputs"] = IntegerAttr(len(inputs), i64)
        fn.attributes["mlfuse.num_outputs"] = IntegerAttr(len(outputs), i64)
        rewriter.notify_op_modified(fn)
        self.state[fn] = FunctionLowering(self.module, rewriter, fn, len(inputs), self.taken, stitch=self.stitch, conv=self.conv,
                                          channel_tiles=self.channel_tiles, depthwise=self.depthwise)


@dataclass
class LowerConstant(RewritePattern):
    """A dense constant becomes a `memref.global`; splats stay, read as scalars."""

    state: dict[Operation, FunctionLowering]

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.ConstantOp, rewriter: PatternRewriter) -> None:
        if (fl := lowering_of(op, self.state)) is None or graph.splat_value(op.value) is not None:
            return
        fl.enter(op, rewriter)
        replace_with_buffer(rewriter, op, lower_constant(fl, op).buffer)  # type: ignore[arg-type]


@dataclass
class LowerView(RewritePattern):
    """A reshape is a `loop.view` of its input's buffer; a broadcast or reshape of a
    splat is a splat of the new shape (still one scalar)."""

    state: dict[Operation, FunctionLowering]

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.BroadcastOp | graph.ReshapeOp, rewriter: PatternRewriter) -> None:
        if (fl := lowering_of(op, self.state)) is None:
            return
        fl.enter(op, rewriter)
        source = fl.operand(op.input)
        if source.splat is not None:
            rewriter.replace(op, graph.ConstantOp(splat_like(op.input, op.result.type)))
        elif isinstance(op, graph.ReshapeOp):
            replace_with_buffer(rewriter, op, rewriter.insert(loop.ViewOp(fl.buffer(op.input), memref_of(op.result.type))).result)


@dataclass
class LowerGraphOp(RewritePattern):
    """Any other graph op: its nests write a new buffer, or the caller's buffer when the
    op's result is returned."""

    state: dict[Operation, FunctionLowering]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if (fl := lowering_of(op, self.state)) is None or op.dialect_name() != "graph":
            return
        if isinstance(op, graph.ConstantOp):
            return  # a splat: it stays, and the nests that read it take the scalar
        if len(op.results) != 1:
            raise Diagnostic(f"'{op.name}' cannot be lowered to loops", location_of(op))
        fl.enter(op, rewriter)
        out = fl.destination(op.results[0])
        lower_op(fl, op, out)
        replace_with_buffer(rewriter, op, out)


@dataclass
class LowerGroup(RewritePattern):
    """A fusion group: one stitched kernel when it has such a lowering; else its ops are
    inlined and lowered one by one with the group's name (and a window group's nests
    tagged with it: post-tiling fusion, in the loop-* passes, is its code generator)."""

    state: dict[Operation, FunctionLowering]

    @op_type_rewrite_pattern
    def match_and_rewrite(self, group: fusion.GroupOp, rewriter: PatternRewriter) -> None:
        from mlfuse.conversion.group_to_loop import is_window_group

        if (fl := lowering_of(group, self.state)) is None:
            return
        fl.enter(group, rewriter)
        window = fl.stitch and is_window_group(list(group.block.ops))
        if fl.stitch and not window and (buffers := lower_stitched(fl, group)) is not None:
            casts = [UnrealizedConversionCastOp.get([b], [r.type]) for b, r in zip(buffers, group.outputs)]
            rewriter.replace(group, casts, [c.results[0] for c in casts])
            return
        scope = (group.group_name.data + ".", group.group_name.data if window else None)
        for inner in group.block.ops:
            fl.scopes[inner] = scope
        rewriter.inline_block(group.block, InsertPoint.before(group), group.inputs)
        yield_op = group.prev_op
        assert isinstance(yield_op, fusion.YieldOp)
        rewriter.replace(group, [], list(yield_op.values))
        rewriter.erase(yield_op)


@dataclass
class ReturnIntoOutputs(RewritePattern):
    """The return: what is not yet in its out buffer (an argument, a view, a constant, a
    value returned twice) is copied there; then the function is finished."""

    state: dict[Operation, FunctionLowering]

    @op_type_rewrite_pattern
    def match_and_rewrite(self, ret: func.ReturnOp, rewriter: PatternRewriter) -> None:
        if (fl := lowering_of(ret, self.state)) is None:
            return
        fl.enter(ret, rewriter)
        for value, out in zip(ret.arguments, fl.out_args):
            src = fl.operand(value)
            if src.buffer is out:
                continue
            shape = graph.shape_of(value)
            copy_nest(fl, "copy_result", fl.buffer(value), out, identity(len(shape)), identity(len(shape)), shape)
        rewriter.replace(ret, func.ReturnOp())
        finish_function(fl)


@dataclass
class RejectOtherOps(RewritePattern):
    """An op of another dialect inside a converted function has no lowering here."""

    state: dict[Operation, FunctionLowering]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if lowering_of(op, self.state) is None:
            return
        if isinstance(op, func.CallOp):  # its result would be read as if lowered: say what to do instead
            raise Diagnostic(f"'func.call' of @{op.callee.string_value()} cannot be lowered to loops: inline calls first "
                             "(the inline pass; a function that is only declared has no body to inline)", location_of(op))
        if op.dialect_name() not in ("graph", "fusion", "func"):
            raise Diagnostic(f"'{op.name}' cannot be lowered to loops yet", location_of(op))


def splat_like(v: SSAValue, t: Attribute) -> DenseIntOrFPElementsAttr:
    """The splat constant behind `v`, reshaped to the tensor type `t`."""
    source = v.owner
    while not isinstance(source, graph.ConstantOp):
        source = source.operands[0].owner  # type: ignore[union-attr]
    width = source.value.get_element_type().compile_time_size  # type: ignore[union-attr]
    return DenseIntOrFPElementsAttr(t, BytesAttr(source.value.data.data[:width]))  # type: ignore[arg-type]


def lower_stitched(fl: FunctionLowering, group: fusion.GroupOp) -> list[SSAValue] | None:
    """Lower `group` as one stitched kernel and return its result buffers; None
    (nothing emitted) if it has no such lowering."""
    from mlfuse.conversion.group_to_loop import Fallback, lower_group

    ops = list(group.block.ops)
    if len(ops) <= 2 and not isinstance(ops[0], graph.ReduceOp):
        return None  # one op and the yield: nothing to stitch (a lone reduction still gains one pass)
    inputs = {arg: fl.operand(v) for arg, v in zip(group.block.args, group.inputs)}
    start = len(fl.allocated)
    outputs: list[tuple[SSAValue, SSAValue]] = []
    for res, yielded in zip(group.outputs, group.yield_op.values):
        if yielded in dict(outputs) or yielded in group.block.args:
            return _undo_allocs(fl, start)
        outputs.append((yielded, fl.destination(res)))
    try:
        lower_group(group, inputs, outputs, fl.builder.insert, lambda c: lower_constant(fl, c))
    except Fallback as e:
        fl.fallbacks.append(f"{group.group_name.data}: {e}")
        return _undo_allocs(fl, start)
    return [out for _, out in outputs]


def _undo_allocs(fl: FunctionLowering, start: int) -> None:
    for buf in fl.allocated[start:]:
        op = buf.owner
        op.detach()
        op.erase()
    del fl.allocated[start:]


def finish_function(fl: FunctionLowering) -> None:
    """Drop the materialization casts and the splats, now unused, and free every
    intermediate right after its last use."""
    block = fl.fn.body.block
    for op in reversed(list(block.ops)):
        if isinstance(op, memref.GetGlobalOp) and not op.results[0].uses:
            op.detach()  # a constant read only in another form (a conv's transposed weights)
            op.erase()
        elif isinstance(op, UnrealizedConversionCastOp | graph.ConstantOp):
            if any(r.uses for r in op.results):
                raise Diagnostic(f"internal error: '{op.name}' still used after convert-graph-to-loop", location_of(op))
            op.detach()
            op.erase()
    ret = block.last_op
    for buf in fl.allocated:
        block.insert_op_before(memref.DeallocOp.get(buf), ret)  # type: ignore[arg-type]
    place_deallocs(block, fl.allocated)
    if fl.fallbacks:  # observability: which groups were not stitched, and why
        fl.fn.attributes["mlfuse.unstitched"] = ArrayAttr([StringAttr(r) for r in fl.fallbacks])


def place_deallocs(block: Block, allocated: list[SSAValue]) -> None:
    """Move each dealloc right after the last op that uses its buffer (or a view of it).

    Positions come from one walk of the block: moving deallocs does not reorder the other
    ops, and xDSL's get_operation_index walks the block on every call (quadratic)."""
    position = {op: i for i, op in enumerate(block.ops)}
    for buf in allocated:
        users = [u.operation for u in buf.uses]
        dealloc = next(u for u in users if isinstance(u, memref.DeallocOp))
        views = [u.results[0] for u in users if isinstance(u, loop.ViewOp)]
        users += [u.operation for v in views for u in v.uses]
        # a user nested in a loop.band counts as the band
        tops = [block.find_ancestor_op_in_block(u) for u in users if u is not dealloc]
        last = max((t for t in tops if t is not None), key=position.__getitem__, default=None)
        if last is None:
            continue
        dealloc.detach()
        block.insert_op_after(dealloc, last)


CONV_LOWERINGS = ("gemm", "direct")


def convert_graph_to_loop(module: ModuleOp, stitch: bool = True, conv: str = "gemm", channel_tiles: bool = False,
                          depthwise: bool = False) -> None:
    """Apply the conversion patterns to every function on tensors in `module`."""
    if conv not in CONV_LOWERINGS:
        raise Diagnostic(f"convert-graph-to-loop: conv={conv!r}: expected one of {', '.join(CONV_LOWERINGS)}", "<pass convert-graph-to-loop>")
    state: dict[Operation, FunctionLowering] = {}
    taken = {g.sym_name.data for g in module.body.block.ops if isinstance(g, memref.GlobalOp)}
    before = set(taken)
    patterns = [
        BufferizeSignature(module, state, stitch, conv, channel_tiles, depthwise, taken),
        LowerConstant(state),
        LowerView(state),
        LowerGroup(state),
        ReturnIntoOutputs(state),
        LowerGraphOp(state),
        RejectOtherOps(state),
    ]
    apply_once(module, patterns)
    drop_unread_globals(module, taken - before)


def drop_unread_globals(module: ModuleOp, made: set[str]) -> None:
    """Erase the globals this pass made that nothing reads any more."""
    read = {op.name_.root_reference.data for op in module.walk() if isinstance(op, memref.GetGlobalOp)}
    for op in list(module.body.block.ops):
        if isinstance(op, memref.GlobalOp) and op.sym_name.data in made and op.sym_name.data not in read:
            op.detach()
            op.erase()


# --- stencils: conv2d and pooling --------------------------------------------------------------
#
# Padding is materialized: a pad nest pair (fill, then copy of the interior) writes a
# padded intermediate, and the window nest reads it with shifted affine accesses and no
# guards. Post-tiling fusion then computes the padded tile (halo included) inside each
# tile of the consumer, and storage reduction keeps only that tile.


def pad_spatial(fl: FunctionLowering, src: SSAValue, pads: Sequence[int], value: float | int, border_only: bool = False) -> SSAValue:
    """An NCHW buffer padded by pads = [top, left, bottom, right] with `value` (src if no
    pads): filled, then src copied into its interior. With `border_only` src is copied,
    then only the border filled (`fill_border`), for a reader that is no loop nest (a GEMM's window):
    post-tiling fusion moves a whole fill into the tiles of the nests that read it."""
    if not any(pads):
        return src
    t = src.type
    assert isinstance(t, MemRefType)
    n, c, h, w = t.get_shape()
    top, left, bottom, right = pads
    el = t.get_element_type()
    shape = [n, c, h + top + bottom, w + left + right]
    padded = fl.alloc(TensorType(el, shape))
    if not border_only:
        fl.nest("pad_fill", shape, [], [padded], lambda b, a: [scalar.const(b, value, el)], maps=[identity(4)])
    d = dims(4)
    into = AffineMap(4, 0, (d[0], d[1], d[2] + top, d[3] + left))
    copy_nest(fl, "pad_copy", src, padded, identity(4), into, [n, c, h, w])
    if border_only:  # after the copy: see fill_border
        fill_border(fl, padded, pads, value)
    return padded


def fill_border(fl: FunctionLowering, padded: SSAValue, pads: Sequence[int], value: float | int) -> None:
    """Fill the border that pads = [top, left, bottom, right] leave around the interior of
    the NCHW buffer `padded`: the rows above and below it, then the columns beside it. A
    pair of equal sides is one nest, its two strips a dimension of 2 apart (row
    k * (top + h) + r). A whole fill wrote each padded input twice: ResNet-18's
    64 x 58 x 58 took 92 us at 2 threads, of which 6.8% is border. Side by side at 2
    threads (time with over without, medians of 25): ResNet-18 0.995, U-Net 0.996.

    pad_spatial runs it after the copy (they write disjoint elements): the border shares
    its cache lines with the interior rows (a 16 x 16 plane's rows are one line each),
    which the parallel copy has just brought in, where before the copy one thread took
    every line's miss between two parallel regions. ResNet-18 at 2 threads: the serial
    gaps between regions 1160 -> 650 us in a noisy minute, the model 0.987x the time
    (U-Net 0.996x), same bits."""
    t = padded.type
    assert isinstance(t, MemRefType)
    n, c, hp, wp = t.get_shape()
    top, left, bottom, right = pads
    h, w = hp - top - bottom, wp - left - right
    el = t.get_element_type()
    d = dims(5)

    def fill(bounds: list[int], row: AffineExpr, col: AffineExpr) -> None:
        fl.nest("pad_fill", bounds, [], [padded], lambda b, a: [scalar.const(b, value, el)],
                maps=[AffineMap(len(bounds), 0, (d[0], d[1], row, col))])

    if top and top == bottom:  # both in one nest: d2 picks the side
        fill([n, c, 2, top, wp], d[2] * (top + h) + d[3], d[4])
    else:
        for extent, first in ((top, 0), (bottom, top + h)):
            if extent:
                fill([n, c, extent, wp], d[2] + first, d[3])
    if left and left == right:  # row by row, both sides: d3 picks the side
        fill([n, c, h, 2, left], d[2] + top, d[3] * (left + w) + d[4])
    else:
        for extent, first in ((left, 0), (right, left + w)):
            if extent:
                fill([n, c, h, extent], d[2] + top, d[3] + first)


def window_maps(op: graph.WindowOp, channel: AffineExpr, d: list[AffineExpr], oh: int, kh: int, kw: int, ow: int) -> AffineMap:
    """The padded input read by window position (oh, ow) and kernel offset (kh, kw)."""
    (sh, sw), (dh, dw) = op.stride_values, op.dilation_values
    row = d[oh] * sh + d[kh] * dh if dh != 1 else d[oh] * sh + d[kh]
    col = d[ow] * sw + d[kw] * dw if dw != 1 else d[ow] * sw + d[kw]
    return AffineMap(len(d), 0, (d[0], channel, row, col))


# Fewer rows of patches than this (output pixels): the product is a nest, since packing
# the weights for the GEMM kernel at run time would cost more than the product
# (constant weights are packed at compile time: CONSTANT_GEMM_KERNEL_MIN_MACS).
CONV_GEMM_MIN_ROWS = 16


# A product with fewer output channels than this, over patches larger than
# CONV_GEMM_MAX_PATCH_BYTES that it copies out (im2col), is memory-bound on that copy
# (about o / 4 flops per byte of patches written and read): such convs stay direct nests.
# Up to 4 MiB the copy stays in cache, and a strided direct nest reads its input a
# stride apart: MobileNetV3-small's stem (3 -> 16, stride 2, 1.3 MB of patches) as a
# product made the model 0.86x the time (one thread, one process, medians of 31).
CONV_GEMM_MIN_CHANNELS = 32
CONV_GEMM_MAX_PATCH_BYTES = 4 << 20


def conv_as_matmul(fl: FunctionLowering, op: graph.Conv2dOp) -> bool:
    """Lower `op` as patches @ weights (`lower_conv2d_as_matmul`)? Every dense float
    conv unless conv=direct: against the direct nest, 1.3-4.4x faster on ResNet-18's
    layers at 224x224 and 1.5-6x at 32x32 (one thread). But not a conv with few output
    channels whose patches would be copied out over a large image (`copies_patches`):
    the direct nest took 0.54-0.64x the product's time on a U-Net's 16-channel layers
    at 224x224 when their im2col buffer was 29 MB. Read in place, those patches cost
    nothing to make: U-Net at 224, one process, medians of 15, 0.67x the time at one
    thread and 0.63x at two with its 16-channel convs as products; at stride 2
    (16 -> 16 and 32 -> 16, 3x3 at 224x224, one thread) 0.24-0.26x. Grouped convs
    stay direct nests, which post-tiling fusion tiles with their epilogue, and so do
    depthwise convs unless `depthwise_as_product` takes them."""
    if fl.conv != "gemm" or op.group_count != 1 or not graph.is_float(graph.element_type_of(op.result)):
        return False
    n, o, oh, ow = graph.shape_of(op.result)
    _, c, kh, kw = graph.shape_of(op.weight)
    patch_bytes = n * oh * ow * c * kh * kw * graph.numpy_dtype(graph.element_type_of(op.result)).itemsize
    return o >= CONV_GEMM_MIN_CHANNELS or patch_bytes <= CONV_GEMM_MAX_PATCH_BYTES or not copies_patches(fl, op)


def copies_patches(fl: FunctionLowering, op: graph.Conv2dOp) -> bool:
    """Does the product of `op` copy its patches out (an im2col nest)? Not when it is
    w @ patches (`nchw_product`) and the patches are its input (pointwise) or are read
    in place from its padded input (`reads_patches_in_place`)."""
    if not nchw_product(fl, op):
        return True
    return not (is_pointwise(op) or reads_patches_in_place(op, live_taps(op), takes_channel_tiles(fl, op)))


def live_taps(op: graph.Conv2dOp) -> tuple[range, range]:
    """The kernel rows and columns that read some real input for some output: the
    others read only padding (the 3x3 convs over a 1x1 image of a small CNN input)."""
    _, _, h, w = graph.shape_of(op.input)
    _, _, oh, ow = graph.shape_of(op.result)
    _, _, kh, kw = graph.shape_of(op.weight)
    top, left, _, _ = op.pad_values
    (sh, sw), (dh, dw) = op.stride_values, op.dilation_values

    def live(k: int, out: int, stride: int, dilation: int, before: int, size: int) -> range:
        taps = [t for t in range(k) if any(0 <= o * stride + t * dilation - before < size for o in range(out))]
        return range(taps[0], taps[-1] + 1) if taps else range(0, 1)

    return live(kh, oh, sh, dh, top, h), live(kw, ow, sw, dw, left, w)


def constant_weights(fl: FunctionLowering, weight: SSAValue, rows: range, cols: range) -> np.ndarray | None:
    """w[o, c, kh, kw] over the live taps, if the weight is a constant global (its values
    are known at compile time, so it can be laid out for the product once); else None."""
    values = constant_values(fl, weight)
    if values is None:
        return None
    return graph.dense_to_numpy(values)[:, :, rows.start : rows.stop, cols.start : cols.stop]


def constant_values(fl: FunctionLowering, weight: SSAValue) -> DenseIntOrFPElementsAttr | None:
    """The initial values of the constant global that `weight` reads, if it reads one
    (a test that converts no values: takes_channel_tiles asks it for every conv)."""
    return global_values(fl, fl.buffer(weight))


def global_values(fl: FunctionLowering, buffer: SSAValue) -> DenseIntOrFPElementsAttr | None:
    """The initial values of the constant global that `buffer` is, if it is one."""
    get = buffer.owner
    if isinstance(get, memref.GetGlobalOp):
        glob = SymbolTable.lookup_symbol(fl.module, get.name_)
        if isinstance(glob, memref.GlobalOp) and isinstance(glob.initial_value, DenseIntOrFPElementsAttr):
            return glob.initial_value
    return None


def transposed_weights(fl: FunctionLowering, weight: SSAValue, rows: range, cols: range) -> SSAValue:
    """w[o, c, kh, kw] over the live taps as wt[(c, kh, kw), o]: rows of output
    channels, contiguous for the product's inner loop. A constant weight is transposed
    here, once, into a new global (weights packed at compile time); another one by a
    nest at run time."""
    o, c, _, _ = graph.shape_of(weight)
    kh, kw = len(rows), len(cols)
    el = graph.element_type_of(weight)
    data = constant_weights(fl, weight, rows, cols)
    if data is not None:
        data = data.reshape(o, c * kh * kw).T.copy()
        return lower_constant(fl, graph.ConstantOp.from_numpy(data, el)).buffer  # type: ignore[return-value]
    wt = fl.alloc(TensorType(el, [c, kh, kw, o]))
    d = dims(4)
    read = AffineMap(4, 0, (d[3], d[0], d[1] + rows.start, d[2] + cols.start))
    copy_nest(fl, "conv_weights", fl.buffer(weight), wt, read, identity(4), [c, kh, kw, o])
    return view(fl, wt, [c * kh * kw, o])


def weight_matrix(fl: FunctionLowering, weight: SSAValue, rows: range, cols: range) -> SSAValue:
    """w[o, c, kh, kw] over the live taps as w[1, o, (c, kh, kw)], the left operand of
    an NCHW product: the weight itself when every tap is live, a constant slice of it
    made at compile time, or a copy nest."""
    o, c, kh, kw = graph.shape_of(weight)
    el = graph.element_type_of(weight)
    depth = c * len(rows) * len(cols)
    if (len(rows), len(cols)) == (kh, kw):
        return view(fl, fl.buffer(weight), [1, o, depth])
    data = constant_weights(fl, weight, rows, cols)
    if data is not None:
        sliced = graph.ConstantOp.from_numpy(np.ascontiguousarray(data).reshape(1, o, depth), el)
        return lower_constant(fl, sliced).buffer  # type: ignore[return-value]
    w = fl.alloc(TensorType(el, [o, c, len(rows), len(cols)]))
    d = dims(4)
    read = AffineMap(4, 0, (d[0], d[1], d[2] + rows.start, d[3] + cols.start))
    copy_nest(fl, "conv_weights", fl.buffer(weight), w, read, identity(4), [o, c, len(rows), len(cols)])
    return view(fl, w, [1, o, depth])


def view(fl: FunctionLowering, buffer: SSAValue, shape: Sequence[int]) -> SSAValue:
    """The contiguous `buffer` seen with another static shape."""
    assert isinstance(buffer.type, MemRefType)
    el = buffer.type.get_element_type()
    return fl.builder.insert(loop.ViewOp(buffer, memref_of(TensorType(el, list(shape))))).result


def lower_conv2d_as_matmul(fl: FunctionLowering, op: graph.Conv2dOp, out: SSAValue) -> None:
    """A dense conv as a product of its patches and its weights, in the orientation
    `nchw_product` picks: w @ patches writes NCHW itself, patches @ wt needs an unpack."""
    if nchw_product(fl, op):
        lower_conv2d_as_nchw_matmul(fl, op, out)
    else:
        lower_conv2d_as_nhwc_matmul(fl, op, out)


# Fewer output pixels than this: w @ patches would waste the GEMM kernel's vector lanes,
# which run along the pixels (a 3x3 conv over a 1x1 image has one). A 7x7 image's 49
# fill an AVX-512 tile of 48 and one lane of the next; patches @ wt runs along the
# output channels instead. Whole models, one thread, one process, medians of 21
# (time at 50 over 32, AVX-512): ResNet-18 0.97 (its 7x7 convs at 129 GF/s, were 94),
# MobileNetV3-small 0.97, MobileNetV2 0.98. (On AVX2, 7x7 was even: see nchw_product.)
NCHW_PRODUCT_MIN_PIXELS = 50
# ... except for pointwise convs, whose w @ patches reads the input itself where patches @ wt
# copies it out pixel-major (conv_patches) and unpacks the product: two transposes for
# a 49-lane tail. Side by side at 2 threads (time with 32 over 50, medians of 21):
# MobileNetV2 0.94-0.96 (its 7x7 layers), MobileNetV3-small 0.97-1.01, ResNet-18 (no
# pointwise conv at 7x7) unchanged.
POINTWISE_NCHW_PRODUCT_MIN_PIXELS = 32


def nchw_product(fl: FunctionLowering, op: graph.Conv2dOp) -> bool:
    """Lower as w[o, (c, kh, kw)] @ patches[(c, kh, kw), (oh, ow)] (NCHW out, no unpack)
    rather than patches @ wt? For one image whose output has enough pixels, or whose
    product takes channel tiles (`takes_channel_tiles`), and a product big enough for
    the GEMM kernel.

    patches @ wt writes NHWC, and its unpack to NCHW, fused with the epilogue, reads
    the product a channel apart (a strided gather). w @ patches leaves a contiguous
    epilogue, reads pointwise convs' input as their patches (no im2col), and lays
    patches out as the im2col of NCHW: its rows are the input's rows. ResNet-18's
    layers at 224, one thread, against
    patches @ wt (thread CPU time, one run): 0.78x on the 7x7 stem, 0.94x at 56x56 64->64,
    1.01-1.03x at 28x28 and on the strided 56x56 convs, 0.98-1.00x at 14x14 and 7x7;
    MobileNetV2's pointwise convs went from 1.26-1.55x onnxruntime's time to 1.0-1.06x."""
    n, o, oh, ow = graph.shape_of(op.result)
    _, c, kh, kw = graph.shape_of(op.weight)
    pixels = oh * ow
    if n != 1:
        return False
    if pixels < (POINTWISE_NCHW_PRODUCT_MIN_PIXELS if is_pointwise(op) else NCHW_PRODUCT_MIN_PIXELS) and not takes_channel_tiles(fl, op):
        return False
    return uses_gemm_kernel((o, c * kh * kw), (c * kh * kw, pixels), graph.element_type_of(op.result))


def takes_channel_tiles(fl: FunctionLowering, op: graph.Conv2dOp) -> bool:
    """Will the product w @ patches of `op` take channel tiles, the GEMM kernel's lanes
    along the output channels (gemm_kernels._ChannelKernels), whatever its pixels? Where
    the target's kernels have them, over its patches read in place at rows and strides
    they take (gemm_kernels.channel_tiles_fit: at stride 2 over short rows too), with
    constant weights (laid out for the kernel once). One thread, side by side (time
    over patches @ wt or over the copied-out patches): ResNet-18's 3x3 convs at 7x7
    0.91 (its im2col and unpack gone too), its stride-2 convs onto 14x14 and 7x7 0.93
    and 0.89."""
    if not fl.channel_tiles or is_pointwise(op):
        return False
    taps = live_taps(op)
    out_w, strides = graph.shape_of(op.result)[3], tuple(op.stride_values)
    return (channel_tiles_fit(out_w, (strides[0], strides[1])) and reads_patches_in_place(op, taps, channel_tiles=True)
            and constant_values(fl, op.weight) is not None)


def is_pointwise(op: graph.Conv2dOp) -> bool:
    """A 1x1 conv with stride 1 and no padding: its patches are its input."""
    kh, kw = graph.shape_of(op.weight)[2:]
    return (kh, kw) == (1, 1) and tuple(op.stride_values) == (1, 1) and not any(op.pad_values)


def lower_conv2d_as_nchw_matmul(fl: FunctionLowering, op: graph.Conv2dOp, out: SSAValue) -> None:
    """y[0] = w @ patches, one `loop.gemm` into the output itself:

        patches[(c, kh, kw), (oh, ow)] = xpad[0, c, oh*s + kh*d, ow*s + kw*d]
        y[0, o, (oh, ow)] = sum_(c, kh, kw) w[o, (c, kh, kw)] * patches[(c, kh, kw), (oh, ow)]

    onnxruntime's (MLAS's) orientation. A pointwise conv's patches are its input (no
    copy); an undilated conv's are read from the padded input by the GEMM kernel's
    packing (`loop.gemm {window}`: an implicit im2col); others are copied out. The
    epilogue is a nest over y that start-up fusion joins to its neighbours."""
    _, o, oh, ow = graph.shape_of(op.result)
    c = graph.shape_of(op.weight)[1]
    taps_h, taps_w = live_taps(op)
    kh, kw = len(taps_h), len(taps_w)
    if reads_patches_in_place(op, (taps_h, taps_w), takes_channel_tiles(fl, op)):
        src = pad_spatial(fl, fl.buffer(op.input), op.pad_values, 0, border_only=True)
        w = weight_matrix(fl, op.weight, taps_h, taps_w)
        strides = tuple(op.stride_values)
        window = (kh, kw) if strides == (1, 1) else (kh, kw, *strides)
        fl.builder.insert(loop.GemmOp(w, src, view(fl, out, [1, o, oh * ow]), window=window))
        return
    if is_pointwise(op):
        patches = fl.buffer(op.input)
    else:
        el = graph.element_type_of(op.result)
        src = pad_spatial(fl, fl.buffer(op.input), op.pad_values, 0)
        patches = fl.alloc(TensorType(el, [c, kh, kw, oh, ow]))
        d = dims(5)  # c, kh, kw, oh, ow
        (sh, sw), (dh, dw) = op.stride_values, op.dilation_values
        row, col = d[3] * sh + (d[1] + taps_h.start) * dh, d[4] * sw + (d[2] + taps_w.start) * dw
        read = AffineMap(5, 0, (AffineExpr.constant(0), d[0], row, col))
        copy_nest(fl, "conv_patches", src, patches, read, identity(5), [c, kh, kw, oh, ow])
    b = view(fl, patches, [1, c * kh * kw, oh * ow])
    fl.builder.insert(loop.GemmOp(weight_matrix(fl, op.weight, taps_h, taps_w), b, view(fl, out, [1, o, oh * ow])))


# A strided window's packing gathers each vector of columns with a masked load per
# output row it touches (sw vectors wide): over short rows the copied-out patches
# are faster. One thread, one process, side by side (time with the window over the
# copy, medians of 21): stems at 224x224, 7x7 -> 64 0.94, 3x3 -> 16 0.93, 3x3 -> 32
# 0.97; 3x3 at stride 2 64 -> 128 at 56x56 (rows of 28) 1.00, 128 -> 256 at 28x28
# (rows of 14) 1.14; ResNet-18 0.99, MobileNetV3-small 0.98, MobileNetV2 1.00.
STRIDED_WINDOW_MIN_ROW = 28
# ... and at column strides up to this: each vector of columns loads sw vectors' span, so a
# patch embedding's stride 16 would load 16 vectors for one (measured at stride 2 only)
STRIDED_WINDOW_MAX_COLUMN_STRIDE = 2


def reads_patches_in_place(op: graph.Conv2dOp, taps: tuple[range, range], channel_tiles: bool = False) -> bool:
    """Can the GEMM kernel read `op`'s patches from its padded input (an implicit
    im2col, `loop.gemm {window}`)? An undilated window whose taps (`live_taps`) all
    read some input: the patches are then the padded image seen through the window
    at the conv's strides, if strided, over output rows of at least STRIDED_WINDOW_MIN_ROW
    (unless the product takes `channel_tiles`, which splat single elements) and at a
    column stride of at most STRIDED_WINDOW_MAX_COLUMN_STRIDE."""
    kernel = tuple(graph.shape_of(op.weight)[2:])
    taps_h, taps_w = taps
    undilated = tuple(op.dilation_values) == (1, 1)
    short_rows = graph.shape_of(op.result)[3] < STRIDED_WINDOW_MIN_ROW and not channel_tiles
    if tuple(op.stride_values) != (1, 1) and (short_rows or op.stride_values[1] > STRIDED_WINDOW_MAX_COLUMN_STRIDE):
        return False
    _, c, h, w = graph.shape_of(op.input)
    top, left, bottom, right = op.pad_values
    addressable = c * (h + top + bottom) * (w + left + right) < 2**31  # the kernel's row offsets are i32
    return undilated and addressable and not is_pointwise(op) and (len(taps_h), len(taps_w)) == kernel


def lower_conv2d_as_nhwc_matmul(fl: FunctionLowering, op: graph.Conv2dOp, out: SSAValue) -> None:
    """y = patches @ wt, for convs whose output rows are short (the late layers of a
    CNN, where the weights dominate) or several images:

        patches[(n, oh, ow), (c, kh, kw)] = xpad[n, c, oh*s + kh*d, ow*s + kw*d]
        yt[(n, oh, ow), o] = sum_(c, kh, kw) patches[., (c, kh, kw)] * wt[(c, kh, kw), o]
        y[n, o, oh, ow] = yt[(n, oh, ow), o]

    The product's inner loop runs along o over contiguous rows of wt and yt, so it
    vectorizes whatever the image size; a large one is a `loop.gemm`. Kernel taps that
    read only padding (`live_taps`) are left out of the patches and the weights."""
    n, o, oh, ow = graph.shape_of(op.result)
    c = graph.shape_of(op.weight)[1]
    taps_h, taps_w = live_taps(op)
    kh, kw = len(taps_h), len(taps_w)
    el = graph.element_type_of(op.result)
    src = pad_spatial(fl, fl.buffer(op.input), op.pad_values, 0)
    patches = fl.alloc(TensorType(el, [n, oh, ow, c, kh, kw]))
    d = dims(6)  # n, oh, ow, c, kh, kw
    (sh, sw), (dh, dw) = op.stride_values, op.dilation_values
    row, col = d[1] * sh + (d[4] + taps_h.start) * dh, d[2] * sw + (d[5] + taps_w.start) * dw
    read = AffineMap(6, 0, (d[0], d[3], row, col))
    copy_nest(fl, "conv_patches", src, patches, read, identity(6), [n, oh, ow, c, kh, kw])
    rows = n * oh * ow
    yt = fl.alloc(TensorType(el, [rows, o]))
    a = view(fl, patches, [rows, c * kh * kw])
    wt = transposed_weights(fl, op.weight, taps_h, taps_w)
    few_rows = rows < CONV_GEMM_MIN_ROWS
    laid_out = few_rows and global_values(fl, wt) is not None  # weights laid out at compile time
    emit_matmul(fl, "conv_matmul", a, wt, yt, el, gemm=laid_out or not few_rows,
                min_macs=CONSTANT_GEMM_KERNEL_MIN_MACS if laid_out else GEMM_KERNEL_MIN_MACS)
    d = dims(4)  # n, o, oh, ow
    copy_nest(fl, "conv_unpack", view(fl, yt, [n, oh, ow, o]), out, AffineMap(4, 0, (d[0], d[2], d[3], d[1])), identity(4), [n, o, oh, ow])


# A depthwise conv (one input channel per group) or a pooling with output rows wider
# than this is iterated (n, o, oh, c, ow, kh, kw) (a pool: (n, c, oh, ow, kh, kw)): LLVM
# unrolls the taps, and the loop vectorizer runs along ow with the sum in registers and
# each input row read at unit stride (or stride 2, deinterleaved). Taps outside ow loaded
# and stored the output row once per tap. Depthwise convs at 2 threads, against
# onnxruntime: 96 channels at 112x112 stride 2 0.71 -> 1.19x, 144 at 56x56 stride 2
# 0.70 -> 1.10x, 192 at 28x28 0.83 -> 1.20x; whole models 0.958x (MobileNetV2) and
# 0.941x (MobileNetV3-small) the time, the same bits. Rows of at most 16 keep the taps
# outside: LLVM unrolls those rows and the SLP vectorizer keeps them in registers (576
# at 14x14: 68 us this way, 91 us the other).
ROW_IN_REGISTERS = 16


def lower_conv2d(fl: FunctionLowering, op: graph.Conv2dOp, out: SSAValue) -> None:
    """y[n, o, oh, ow] = sum_{c, kh, kw} xpad[n, g*C/G + c, oh*s + kh*d, ow*s + kw*d] * w[o, c, kh, kw],
    iterated (n, o, oh, c, kh, kw, ow): the window position along W stays innermost, so
    the inner loop is unit-stride (stride 1) and vectorizes without reassociation; for a
    depthwise conv over wide rows (n, o, oh, c, ow, kh, kw), see ROW_IN_REGISTERS.
    Each output sums its taps in the same order either way."""
    if conv_as_matmul(fl, op):
        lower_conv2d_as_matmul(fl, op, out)
        return
    if depthwise_as_product(fl, op):
        lower_depthwise_as_product(fl, op, out)
        return
    t = graph.element_type_of(op.result)
    out_shape = graph.shape_of(op.result)
    fl.nest("conv_init", out_shape, [], [out], lambda b, a: [scalar.const(b, 0, t)], maps=[identity(4)])
    src = pad_spatial(fl, fl.buffer(op.input), op.pad_values, 0)
    o_count, cg, kh, kw = graph.shape_of(op.weight)
    og = o_count // op.group_count
    n, _, oh, ow = out_shape
    # dims n, o, oh, c, then kh, kw, ow; or ow, kh, kw (ROW_IN_REGISTERS)
    i_kh, i_kw, i_ow = (5, 6, 4) if cg == 1 and ow > ROW_IN_REGISTERS else (4, 5, 6)
    d = dims(7)
    channel = d[3] if op.group_count == 1 else (d[1] // og) * cg + d[3]
    maps = [
        window_maps(op, channel, d, 2, i_kh, i_kw, i_ow),
        AffineMap(7, 0, (d[1], d[3], d[i_kh], d[i_kw])),
        AffineMap(7, 0, (d[0], d[1], d[2], d[i_ow])),
    ]
    bounds, iterators = [n, o_count, oh, cg, 0, 0, 0], [loop.PARALLEL] * 3 + [loop.REDUCTION] * 4
    bounds[i_kh], bounds[i_kw], bounds[i_ow], iterators[i_ow] = kh, kw, ow, loop.PARALLEL

    def body(b: Builder, a: list[SSAValue]) -> list[SSAValue]:
        x, w, acc = (scalar.widen(b, v) for v in a)
        return [scalar.narrow(b, scalar.multiply_add(b, acc, x, w, contract=True), t)]

    fl.nest("conv2d", bounds, [src, fl.buffer(op.weight)], [out], body, iterators, maps)


def depthwise_as_product(fl: FunctionLowering, op: graph.Conv2dOp) -> bool:
    """Lower `op` as a product batched over its channels (`lower_depthwise_as_product`)?
    A depthwise conv (a channel per group, one output channel each) of one f32 or f64
    image, undilated, whose product a depthwise kernel takes (`takes_depthwise`: stride
    1 or 2, padded, rows as long as the input's (at stride 2: its even columns), a small
    plane), where the target has those
    kernels (convert-graph-to-loop{depthwise}) and convs are products (conv=gemm)."""
    dtype = str(graph.element_type_of(op.result))
    if not fl.depthwise or fl.conv != "gemm" or dtype not in ("f32", "f64"):
        return False
    n, o, oh, ow = graph.shape_of(op.result)
    _, c, h, w = graph.shape_of(op.input)
    _, cg, kh, kw = graph.shape_of(op.weight)
    if not (n == 1 and cg == 1 and op.group_count == c == o and tuple(op.dilation_values) == (1, 1)):
        return False
    window = Window(kh, kw, h, w, *op.stride_values, pads=tuple(op.pad_values))  # type: ignore[arg-type]
    return takes_depthwise(GemmShape(o, 1, oh * ow, kh * kw, dtype, window))


def lower_depthwise_as_product(fl: FunctionLowering, op: graph.Conv2dOp, out: SSAValue) -> None:
    """y[0, c] = w[c] @ patches(x[0, c]) for each channel c: one `loop.gemm {window}`
    batched over the channels, each batch one image (x seen as C x 1 x h x w, its pads
    `window_pads`: zeros the kernel does not read), one row of taps (w as C x 1 x
    kh*kw) and one output row (y as C x 1 x oh*ow). The depthwise kernel
    (mlfuse/backend/depthwise_kernels.py) runs each channel's plane in registers; the
    epilogue (bias, activation) fuses into it as into any product."""
    _, o, oh, ow = graph.shape_of(op.result)
    _, _, h, w = graph.shape_of(op.input)
    kh, kw = graph.shape_of(op.weight)[2:]
    images = view(fl, fl.buffer(op.input), [o, 1, h, w])
    taps = view(fl, fl.buffer(op.weight), [o, 1, kh * kw])
    window = (kh, kw) if tuple(op.stride_values) == (1, 1) else (kh, kw, *op.stride_values)
    fl.builder.insert(loop.GemmOp(taps, images, view(fl, out, [o, 1, oh * ow]), window=window, window_pads=op.pad_values))


def lower_pool2d(fl: FunctionLowering, op: graph.Pool2dOp, out: SSAValue) -> None:
    """Max or sum over each window of the padded input (max pads with the lowest value,
    so padding never wins); average pooling then divides by the window's element count.
    Iterated (n, c, oh, kh, kw, ow), or (n, c, oh, ow, kh, kw) over rows wider than
    ROW_IN_REGISTERS; each output combines its taps in the same order either way."""
    kind = "max" if isinstance(op, graph.MaxPool2dOp) else "sum"
    t = graph.element_type_of(op.result)
    out_shape = graph.shape_of(op.result)
    init = scalar.identity_of(kind, t)
    fl.nest(f"pool_init_{kind}", out_shape, [], [out], lambda b, a: [scalar.const(b, init, t)], maps=[identity(4)])
    src = pad_spatial(fl, fl.buffer(op.input), op.pad_values, init)
    kh, kw = op.kernel_size
    n, c, oh, ow = out_shape
    d = dims(6)  # n, c, oh, then kh, kw, ow; or ow, kh, kw
    i_kh, i_kw, i_ow = (4, 5, 3) if ow > ROW_IN_REGISTERS else (3, 4, 5)
    maps = [window_maps(op, d[1], d, 2, i_kh, i_kw, i_ow), AffineMap(6, 0, (d[0], d[1], d[2], d[i_ow]))]
    bounds, iterators = [n, c, oh, 0, 0, 0], [loop.PARALLEL] * 3 + [loop.REDUCTION] * 3
    bounds[i_kh], bounds[i_kw], bounds[i_ow], iterators[i_ow] = kh, kw, ow, loop.PARALLEL

    def body(b: Builder, a: list[SSAValue]) -> list[SSAValue]:
        x, acc = scalar.widen(b, a[0]), scalar.widen(b, a[1])
        return [scalar.narrow(b, scalar.combine(b, kind, acc, x, unsigned=graph.orders_unsigned(t)), t)]

    fl.nest(f"pool_{kind}", bounds, [src], [out], body, iterators, maps)
    if isinstance(op, graph.AvgPool2dOp):
        lower_avg_scale(fl, op, out)


def lower_avg_scale(fl: FunctionLowering, op: graph.AvgPool2dOp, out: SSAValue) -> None:
    """out /= number of input elements per window (a constant, or a per-position table)."""
    import numpy as np

    from mlfuse.reference import windows

    t = graph.element_type_of(op.result)
    out_shape = graph.shape_of(op.result)
    h, w = graph.shape_of(op.input)[2:]
    params = (op.kernel_size, op.stride_values, op.pad_values, op.dilation_values)
    counts = windows(np.ones((1, 1, h, w), np.float32), *params, 0).sum(axis=(4, 5))[0, 0]
    if op.counts_padding or np.all(counts == counts.flat[0]):
        count = float(np.prod(op.kernel_size)) if op.counts_padding else float(counts.flat[0])

        def scale(b: Builder, a: list[SSAValue]) -> list[SSAValue]:
            x = scalar.widen(b, a[0])
            return [scalar.narrow(b, b.insert(arith.DivfOp(x, scalar.const(b, count, x.type))).result, t)]

        fl.nest("avg_scale", out_shape, [out], [out], scale, maps=[identity(4)] * 2)
        return
    table = lower_constant(fl, graph.ConstantOp.from_numpy(counts.astype(graph.numpy_dtype(t)), t)).buffer
    d = dims(4)

    def divide(b: Builder, a: list[SSAValue]) -> list[SSAValue]:
        x, n = scalar.widen(b, a[0]), scalar.widen(b, a[1])
        return [scalar.narrow(b, b.insert(arith.DivfOp(x, n)).result, t)]

    fl.nest("avg_scale", out_shape, [out, table], [out], divide,
            maps=[identity(4), AffineMap(4, 0, (d[2], d[3])), identity(4)])


LOWERINGS[graph.Conv2dOp] = lower_conv2d
LOWERINGS[graph.MaxPool2dOp] = lower_pool2d
LOWERINGS[graph.AvgPool2dOp] = lower_pool2d
