"""Stitched code generation: one `fusion.group` -> one kernel whose intermediates stay on chip.

`lower_group` dispatches on what the group holds (the planner's `kind` says the
same thing, but the code decides from the ops so hand-written groups work too):

- **elementwise/injective chains** (no reduction, no contraction): one
  `loop.nest` per distinct output shape over that shape; every intermediate is
  recomputed in registers from the group inputs by *index propagation* (each op
  maps the index at which its result is needed to the indices of its operands:
  broadcasts drop or zero dimensions, transposes permute, slices shift and
  stride, reshapes linearize). Thread composition, in FusionStitching's terms.
- **row stitching** (reductions over the last axis and small GEMMs, with
  producers and consumers that broadcast results back: softmax, LayerNorm,
  RMSNorm, bias+residual+LayerNorm, attention scores with scale, mask and
  softmax): a `loop.band` over the rows (all dimensions but the last), split
  across threads, and inside it a sequence of *phases*, one nest over the row
  per dependence level. A reduction's result is a per-row scalar in a
  one-element scratch, a GEMM's result row lives in a row-sized scratch; values
  needed by several phases are recomputed when cheap and kept in a row scratch
  when expensive (transcendentals, divisions). Scratch is `memref.alloca`,
  private to the thread and small enough to stay in L1/L2: the CPU analogue of
  shared-memory (block) composition. Variance is computed two-pass-in-cache:
  the row is re-read from cache for the second pass, which is exact where
  E[x^2] - E[x]^2 cancels and as fast as Welford for rows that fit in cache.
- **column stitching** (reductions over the same leading axes, their elementwise
  producers, and same-shape elementwise outputs: bias gradients, dgamma/dbeta):
  one nest over the reduced tensor, `reduction` on the reduced axes and
  `parallel` on the kept ones, accumulating straight into the outputs; threads
  split the kept columns, so partial results combine deterministically.
- anything else (concat, reductions over mixed axes, groups mixing row
  shapes) raises `Fallback`, and the caller lowers the group op by op: correct,
  never silently wrong, only slower. `explain_fallback` says why.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import AffineMapAttr, IndexType, i32
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineExpr, AffineMap, AffineSymExpr
from xdsl.rewriter import InsertPoint

from mlfuse.conversion import scalar
from mlfuse.conversion.graph_to_loop import TRANSPOSE_TILE, Operand
from mlfuse.dialects import fusion, graph, loop

# Column reductions of at least 2 * COLUMN_BLOCK_MIN_ROWS rows are summed by at most
# COLUMN_BLOCKS row blocks in parallel (see GroupLowering.lower_column_blocks).
COLUMN_BLOCKS = 32
COLUMN_BLOCK_MIN_ROWS = 256
# Float row sums of at least ROW_BLOCK_MIN elements add ROW_BLOCK-element blocks into
# per-row partials, then add the partials (GroupLowering.blocked_bounds): LLVM's
# vector accumulators (VF x interleave lanes) each add row / lanes elements in
# sequence, so error grows with the row; blocked, with the block's length.
# A 65536-element f32 row sum: 3.2e-4 from the exact sum unblocked, numpy 4.9e-5.
# Shorter rows are not blocked: with AVX-512's 64 lanes a 1024-element row's mean
# error was 1.03x numpy's blocked or not (2048: 1.22x unblocked, 4096: 1.36x), and
# blocked, LayerNorm and RMSNorm at 65536x1024 took 1.08x and 1.14x the time.
ROW_BLOCK = 256
ROW_BLOCK_MIN = 8 * ROW_BLOCK
# A stitched output that transposes the innermost dimension is written by tiles from
# this many elements on (GroupLowering.lower_transposed).
STITCHED_TRANSPOSE_MIN_ELEMENTS = 1 << 12


class Fallback(Exception):
    """This group has no stitched lowering; lower it op by op."""


Index = tuple[AffineExpr, ...]


def const_expr(v: int) -> AffineExpr:
    return AffineExpr.constant(v)


def is_staged(op: Operation | None) -> bool:
    """Reductions and contractions: their results exist only once their phase is done."""
    return isinstance(op, Operation) and (graph.is_reduction(op) or graph.is_contraction(op))


def stitchable(op: Operation) -> bool:
    """Whether the stitched code generator can compute `op` inside a kernel: from the
    facts on the op (graph.Elementwise, graph.Injective, ...)."""
    if isinstance(op, graph.ConcatOp):
        return False  # selects among operands: no branch-free form yet
    return graph.is_elementwise(op) or op.has_trait(graph.Injective) or is_staged(op)


def strides(shape: Sequence[int]) -> list[int]:
    return [math.prod(shape[i + 1 :]) for i in range(len(shape))]


@dataclass
class Body:
    """A nest body under construction: inputs are added as the emitter discovers them."""

    rank: int
    nsyms: int
    block: Block = field(default_factory=Block)
    ins: list[tuple[SSAValue, AffineMap]] = field(default_factory=list)
    outs: list[tuple[SSAValue, AffineMap, SSAValue | None]] = field(default_factory=list)
    memo: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.b = Builder(InsertPoint.at_end(self.block))

    def read(self, buffer: SSAValue, index: Index) -> SSAValue:
        key = ("read", buffer, index)
        if key not in self.memo:
            arg = self.block.insert_arg(buffer.type.get_element_type(), len(self.ins))  # type: ignore[union-attr]
            self.ins.append((buffer, AffineMap(self.rank, self.nsyms, index)))
            self.memo[key] = arg
        return self.memo[key]

    def out(self, buffer: SSAValue, index: Index) -> SSAValue:
        """Declare an output; returns the block argument holding its current element."""
        arg = self.block.insert_arg(buffer.type.get_element_type(), len(self.block.args))  # type: ignore[union-attr]
        self.outs.append((buffer, AffineMap(self.rank, self.nsyms, index), None))
        return arg

    def set_out(self, k: int, value: SSAValue) -> None:
        buf, m, _ = self.outs[k]
        self.outs[k] = (buf, m, value)

    def finish(self, name: str, bounds, iterators: Sequence[str], syms: Sequence[SSAValue]) -> loop.NestOp:
        """`bounds`: sizes, or (lower, upper) bound maps as loop.NestOp takes them."""
        self.b.insert(loop.YieldOp(*[v for _, _, v in self.outs]))
        return loop.NestOp(
            name,
            bounds if isinstance(bounds, tuple) else list(bounds),
            list(iterators),
            [b for b, _ in self.ins],
            [b for b, _, _ in self.outs],
            [m for _, m in self.ins] + [m for _, m, _ in self.outs],
            Region(self.block),
            syms,
        )


@dataclass
class Stage:
    """Where a staged value (reduction, GEMM row, materialized value) lives after its phase."""

    buffer: SSAValue
    phase: int
    per_row: bool  # True: one element per row (row scalar); False: a whole row


@dataclass
class RowPhase:
    """What one phase of a row kernel needs: its number, every value's level, the
    group's outputs with the phase that writes each, the values kept in row scratch
    (value -> the phase that stores it) and the row's index (band symbols, d0)."""

    phase: int
    level: dict[SSAValue, int]
    outputs: list[tuple[SSAValue, SSAValue]]
    out_level: dict[SSAValue, int]
    keep: dict[SSAValue, int]
    row_index: Index


class GroupLowering:
    """Emits one group as one kernel into a detached block (`self.kernel`), so that a
    Fallback half-way leaves nothing behind; `lower_group` moves the ops out."""

    def __init__(self, group: fusion.GroupOp, inputs: dict[SSAValue, object]):
        self.group = group
        self.inputs = dict(inputs)  # block arg (or output written before the band) -> graph_to_loop.Operand
        self.ops = [op for op in group.block.ops if not isinstance(op, fusion.YieldOp)]
        self.kernel = Block()
        self.band_blocks: list[Block] = []  # filled before their band is emitted into the kernel
        self.builder = Builder(InsertPoint.at_end(self.kernel))
        self.outer: tuple[int, ...] = ()
        self.row = 0
        self.syms: list[SSAValue] = []
        self.stages: dict[SSAValue, Stage] = {}
        self.phase = 0
        self.constants: dict[SSAValue, object] = {}

    def emit_op(self, op: Operation) -> Operation:
        """Insert `op` at the builder's insertion point (the kernel, or a band's body)."""
        return self.builder.insert(op)

    @contextmanager
    def inserting_at_end(self, block: Block) -> Iterator[None]:
        """Emit into `block` (a band's body) for the duration of the with-block."""
        saved = self.builder.insertion_point
        self.band_blocks.append(block)
        self.builder.insertion_point = InsertPoint.at_end(block)
        try:
            yield
        finally:
            self.builder.insertion_point = saved

    def discard(self) -> None:
        """Erase everything emitted so far, so that no op is left holding a use of the
        caller's buffers: the kernel, and the band bodies whose band a Fallback kept from
        being emitted (their nests read the caller's buffers too)."""
        for block in [*reversed(self.band_blocks), self.kernel]:
            for op in reversed(list(block.ops)):
                block.erase_op(op, safe_erase=False)

    # --- recomputation by index propagation ----------------------------------------

    def value(self, body: Body, v: SSAValue, index: Index) -> SSAValue:
        key = ("value", v, index)
        if key in body.memo:
            return body.memo[key]
        result = self._value(body, v, index)
        body.memo[key] = result
        return result

    def _value(self, body: Body, v: SSAValue, index: Index) -> SSAValue:
        stage = self.stages.get(v)
        if stage is not None and stage.phase < self.phase:
            return body.read(stage.buffer, self.scratch_index(v, index, stage))
        if v in self.inputs or v in self.constants:
            operand = self.inputs.get(v) or self.constants[v]
            if operand.buffer is None:  # type: ignore[union-attr]
                return scalar.const(body.b, operand.splat, graph.element_type_of(v))  # type: ignore[union-attr]
            return body.read(operand.buffer, index)  # type: ignore[union-attr]
        op = v.owner
        assert isinstance(op, Operation)
        if stage is not None or is_staged(op):
            raise Fallback(f"'{op.name}' result is needed before it is complete")
        if isinstance(op, graph.DivOp) and graph.is_float(graph.element_type_of(v)) and self.row_invariant(op.rhs):
            # x / s for a per-row s: one reciprocal per row (LLVM hoists it out of the
            # row loop) and a multiply per element; within 1 ulp of the division
            x = scalar.widen(body.b, self.value(body, op.lhs, index))
            d = scalar.widen(body.b, self.value(body, op.rhs, index))
            recip = body.b.insert(arith.DivfOp(scalar.const(body.b, 1.0, d.type), d)).result
            return scalar.narrow(body.b, body.b.insert(arith.MulfOp(x, recip)).result, graph.element_type_of(v))
        if graph.is_elementwise(op):
            args = [self.value(body, o, index) for o in op.operands]
            return scalar.emit_elementwise(body.b, op, args)
        if isinstance(op, graph.PadOp):
            return self.padded(body, op, index)
        if isinstance(op, graph.GatherBase):
            return self.gathered(body, op, index)
        if not graph.is_plain_injective(op):
            raise Fallback(f"'{op.name}' cannot be recomputed in registers")
        return self.value(body, op.operands[0], tuple(op.source_index(0, index, graph.AFFINE)))  # type: ignore[attr-defined]

    def gathered(self, body: Body, op: graph.GatherBase, index: Index) -> SSAValue:
        """data[index with the axis replaced by the clamped index value]: the index is
        recomputed like any value, the data read from its buffer (loop.read), so the
        data must be a kernel input or a dense constant."""
        from mlfuse.conversion.loop_to_scf import emit_affine

        operand = self.inputs.get(op.data) or self.constants.get(op.data)
        if operand is None or operand.buffer is None:  # type: ignore[union-attr]
            raise Fallback(f"'{op.name}' reads data computed inside the kernel")
        data_shape = graph.shape_of(op.data)
        idx = self.value(body, op.indices, tuple(op.source_index(1, index, graph.AFFINE)))
        b = body.b
        position = scalar.gather_index(b, idx, data_shape[op.gather_axis])
        dims = [b.insert(loop.IndexOp("dim", d)).result for d in range(body.rank)]
        syms = [b.insert(loop.IndexOp("sym", s)).result for s in range(body.nsyms)]
        # the data's index with None where the position goes; the rest from `index`
        where = op.data_index(list(index), None)
        at = [position if e is None else emit_affine(b, e, dims, syms) for e in where]
        source = body.read(operand.buffer, tuple(const_expr(0) for _ in data_shape))  # type: ignore[union-attr]
        return b.insert(loop.ReadOp(source, at)).result

    def padded(self, body: Body, op: graph.PadOp, index: Index) -> SSAValue:
        """select(inside, operand[(i - low) mod n], value): the wrapped read is always in bounds."""
        from mlfuse.conversion.loop_to_scf import emit_affine

        source = op.source_index(0, index, graph.AFFINE)
        guarded = op.guarded_dims()
        inner = list(source)
        for d, n in guarded:
            inner[d] = source[d] % n
        x = self.value(body, op.input, tuple(inner))
        b = body.b
        dims = [b.insert(loop.IndexOp("dim", d)).result for d in range(body.rank)]
        syms = [b.insert(loop.IndexOp("sym", s)).result for s in range(body.nsyms)]
        inside: SSAValue | None = None
        for d, n in guarded:
            i = emit_affine(b, source[d], dims, syms)
            lo_ok = b.insert(arith.CmpiOp(i, b.insert(arith.ConstantOp.from_int_and_width(0, IndexType())).result, "sge")).result
            hi_ok = b.insert(arith.CmpiOp(i, b.insert(arith.ConstantOp.from_int_and_width(n, IndexType())).result, "slt")).result
            both = b.insert(arith.AndIOp(lo_ok, hi_ok)).result
            inside = both if inside is None else b.insert(arith.AndIOp(inside, both)).result
        if inside is None:
            return x
        fill = scalar.const(b, op.pad_value, graph.element_type_of(op.result))
        return b.insert(arith.SelectOp(inside, x, fill)).result

    def row_invariant(self, v: SSAValue) -> bool:
        """A per-row value broadcast along the row (constant in the row loop)."""
        if not self.outer:
            return False
        while isinstance(v.owner, graph.BroadcastOp):
            v = v.owner.input
        return v not in self.group.block.args and self.is_row_scalar(v) and graph.shape_of(v) != (*self.outer, self.row)

    def scratch_index(self, v: SSAValue, index: Index, stage: Stage) -> Index:
        """A staged value is per row: its index must name this band iteration's row."""
        k = len(self.outer)
        row_part = index[:k]
        if any(not (isinstance(e, AffineSymExpr) and e.position == i) for i, e in enumerate(row_part)):
            raise Fallback(f"a row-local value is needed by another row ({', '.join(map(str, index))})")
        rest = index[k:]
        if stage.per_row:
            if self.row != 1 and any(not (isinstance(e, AffineConstantExpr) and e.value == 0) for e in rest):
                raise Fallback("a row scalar is indexed inside the row")
            return (const_expr(0),)
        if len(rest) != 1:
            raise Fallback("row scratch needs one inner index")
        return (rest[0],)

    # --- planning ---------------------------------------------------------------------

    def staged_ops(self) -> list[Operation]:
        return [op for op in self.ops if is_staged(op)]

    def levels(self) -> dict[SSAValue, int]:
        level: dict[SSAValue, int] = {a: 0 for a in self.group.block.args}

        def avail(v: SSAValue) -> int:
            return level[v] + (1 if is_staged(v.owner) else 0)

        for op in self.ops:
            lv = max((avail(o) for o in op.operands), default=0)
            for r in op.results:
                level[r] = lv
        return level

    def row_shape(self) -> None:
        """Find the rows: every staged op must produce or consume rows of one shape."""
        outer: tuple[int, ...] | None = None
        row: int | None = None
        for op in self.staged_ops():
            if isinstance(op, graph.ReduceOp):
                shape = graph.shape_of(op.input)
                if op.reduce_axes != (len(shape) - 1,) or len(shape) < 2:
                    raise Fallback(f"'{op.name}' does not reduce only the last axis of a rank >= 2 tensor")
                o, n = shape[:-1], shape[-1]
            else:
                shape = graph.shape_of(op.results[0])
                o, n = shape[:-1], shape[-1]
            if outer is None:
                outer, row = o, n
            elif (o, n) != (outer, row):
                raise Fallback("the group's reductions and GEMMs have different row shapes")
        assert outer is not None and row is not None
        self.outer, self.row = tuple(outer), row

    def is_row_value(self, v: SSAValue) -> bool:
        return graph.shape_of(v) == (*self.outer, self.row)

    def moved_row(self, value: SSAValue, row_index: Index) -> tuple[SSAValue, Index] | None:
        """A value that is transposes/reshapes of a row value, and where the row's elements land in it."""
        chain: list[Operation] = []
        v = value
        while not self.is_row_value(v):
            op = v.owner
            if not isinstance(op, graph.TransposeOp | graph.ReshapeOp) or op.parent_op() is not self.group:
                return None
            chain.append(op)
            v = op.input
        index = row_index
        for op in reversed(chain):  # forward, from the row value to the output
            if isinstance(op, graph.TransposeOp):
                index = tuple(index[p] for p in op.permutation)
            else:
                index = tuple(graph.reshape_index(graph.shape_of(op.input), graph.shape_of(op.result), index, graph.AFFINE))
        return v, index

    def is_row_scalar(self, v: SSAValue) -> bool:
        s = graph.shape_of(v)
        return s == self.outer or s == (*self.outer, 1)

    def plan_materialization(self, level: dict[SSAValue, int], outputs: dict[SSAValue, int]) -> dict[SSAValue, int]:
        """Values worth keeping in a row scratch: expensive and needed by several phases."""
        phases: dict[SSAValue, set[int]] = {}
        keep: dict[SSAValue, int] = {}
        consumers: dict[SSAValue, list[Operation]] = {}
        for op in self.ops:
            for o in op.operands:
                consumers.setdefault(o, []).append(op)
        for op in reversed(self.ops):
            for r in op.results:
                where: set[int] = set()
                for c in consumers.get(r, []):
                    cr = c.results[0]
                    if is_staged(c):
                        where.add(level[cr])
                    elif cr in keep:
                        where.add(keep[cr])
                    else:
                        where |= phases.get(cr, set())
                if r in outputs:
                    where.add(outputs[r])
                phases[r] = where
                if graph.is_expensive(op) and len(where) > 1 and self.is_row_value(r):
                    keep[r] = min(where)
        return keep

    # --- emission ---------------------------------------------------------------------

    def alloca(self, shape: Sequence[int], t: Attribute) -> SSAValue:
        """Scratch of graph element type `t` (held as its signless storage type)."""
        return self.emit_op(memref.AllocaOp.get(graph.storage_type(t), 64, list(shape))).memref

    def emit_rank0(self, name: str, writes: list[tuple[SSAValue, Index, SSAValue | None]], compute) -> None:
        """A one-point nest: `compute(body, out_args) -> values` written to `writes`."""
        body = Body(0, len(self.syms))
        args = [body.out(buf, idx) for buf, idx, _ in writes]
        for k, value in enumerate(compute(body, args)):
            body.set_out(k, value)
        self.emit_op(body.finish(name, [], [], self.syms))

    def lower_elementwise(self, outputs: list[tuple[SSAValue, SSAValue]]) -> None:
        """No staged op (or outputs computed before any, `apart_from_rows`): one
        all-parallel nest per distinct output shape."""
        by_shape: dict[tuple[int, ...], list[tuple[SSAValue, SSAValue]]] = {}
        for value, buf in outputs:
            by_shape.setdefault(graph.shape_of(value), []).append((value, buf))
        for shape, items in by_shape.items():
            across = next((a for v, _ in items if (a := self.transposed_dimension(v)) is not None), None)
            if across is not None:
                self.lower_transposed(items, shape, across)
                continue
            rank = len(shape)
            index = tuple(AffineExpr.dimension(i) for i in range(rank))
            body = Body(rank, 0)
            for _, buf in items:
                body.out(buf, index)
            for k, (value, _) in enumerate(items):
                body.set_out(k, self.value(body, value, index))
            self.emit_op(body.finish(self.group.group_name.data, shape, [loop.PARALLEL] * rank, []))

    def transposed_dimension(self, value: SSAValue) -> int | None:
        """The output dimension along which `value`, a transpose of the group that moves its
        input's innermost dimension, reads that input contiguously, where tiles pay
        (graph_to_loop.TRANSPOSE_TILE squares of an output of STITCHED_TRANSPOSE_MIN_ELEMENTS
        or more); else None."""
        op = value.owner
        if not isinstance(op, graph.TransposeOp) or op.parent_op() is not self.group:
            return None
        rank, shape = len(op.permutation), graph.shape_of(value)
        across = op.permutation.index(rank - 1)
        tile = TRANSPOSE_TILE
        if across == rank - 1 or shape[across] % tile or shape[-1] % tile or math.prod(shape) < STITCHED_TRANSPOSE_MIN_ELEMENTS:
            return None
        return across

    def lower_transposed(self, items: list[tuple[SSAValue, SSAValue]], shape: tuple[int, ...], across: int) -> None:
        """Outputs of `shape` that transpose the innermost dimension: a parallel band over
        TRANSPOSE_TILE squares of (across, last), each a 2-d nest that LLVM unrolls and
        transposes in registers, as graph_to_loop.tiled_transpose does for a lone transpose.
        A flat nest read the input a row apart for every element: attention's K^T
        (128x768 -> 1x4x64x128) took 42.8 us, its Q (1x4x128x64) 17.3 us (one thread)."""
        rank, tile = len(shape), TRANSPOSE_TILE
        band_block = Block(arg_types=[IndexType()] * rank)
        saved, self.syms = self.syms, list[SSAValue](band_block.args)
        s = [AffineExpr.symbol(k) for k in range(rank)]
        index = tuple(s[k] * tile + AffineExpr.dimension(0) if k == across
                      else s[k] * tile + AffineExpr.dimension(1) if k == rank - 1 else s[k] for k in range(rank))
        with self.inserting_at_end(band_block):
            body = Body(2, rank)
            for _, buf in items:
                body.out(buf, index)
            for k, (value, _) in enumerate(items):
                body.set_out(k, self.value(body, value, index))
            self.emit_op(body.finish(self.group.group_name.data, [tile, tile], [loop.PARALLEL] * 2, self.syms))
        self.syms = saved
        sizes = [n // tile if k in (across, rank - 1) else n for k, n in enumerate(shape)]
        self.emit_op(loop.BandOp(self.group.group_name.data + ".tiles", sizes, Region(band_block)))

    def lower_rows(self, outputs: list[tuple[SSAValue, SSAValue]]) -> None:
        """Row stitching: a band over the rows, one nest per phase inside, then the
        row-scalar outputs (see the module docstring)."""
        self.row_shape()
        level = self.levels()
        k = len(self.outer)
        row_index: Index = (*(AffineExpr.symbol(i) for i in range(k)), AffineExpr.dimension(0))
        apart = [(v, b) for v, b in outputs if self.apart_from_rows(v, level, row_index)]
        if apart:
            self.lower_elementwise(apart)
            outputs = [(v, b) for v, b in outputs if (v, b) not in apart]
            for v, b in apart:  # the rows read it, complete before the band, instead of recomputing it
                self.inputs[v] = Operand(buffer=b)
        out_level = self.output_phases(outputs, level, row_index)
        keep = self.plan_materialization(level, out_level)
        band_block = Block(arg_types=[IndexType()] * k)
        self.syms = list(band_block.args)
        last = max([level[op.results[0]] for op in self.staged_ops()] + list(out_level.values()) + list(keep.values()), default=0)
        with self.inserting_at_end(band_block):
            for phase in range(last + 1):
                self.phase = phase
                self.emit_phase(RowPhase(phase, level, outputs, out_level, keep, row_index))
            self.phase = last + 1
            self.emit_row_scalars([(v, b) for v, b in outputs if v not in out_level], row_index[:k])
        self.emit_op(loop.BandOp(self.group.group_name.data, list(self.outer), Region(band_block)))

    def apart_from_rows(self, value: SSAValue, level: dict[SSAValue, int], row_index: Index) -> bool:
        """An output that no reduction or GEMM of the group precedes and that has no
        place in the rows (a horizontal pack's other part, a mask broadcast into the
        rows): a nest of its own writes it, from the kernel's inputs, before the band,
        and the rows read it there (a mask recomputed per element through a gather
        made BERT's softmax kernel 6x slower than the next layer's)."""
        if level[value] != 0 or is_staged(value.owner):  # type: ignore[arg-type]
            return False
        return not (self.is_row_value(value) or self.is_row_scalar(value) or self.moved_row(value, row_index))

    def output_phases(self, outputs: list[tuple[SSAValue, SSAValue]], level: dict[SSAValue, int], row_index: Index) -> dict[SSAValue, int]:
        """The phase that writes each row-shaped output (row scalars are left out: they
        are written after the last phase). Outputs that are a transpose or reshape of a
        row value go to `self.moved`: (the row value, where its elements land)."""
        out_level: dict[SSAValue, int] = {}
        self.moved: dict[SSAValue, tuple[SSAValue, Index]] = {}
        for value, _ in outputs:
            owner = value.owner
            if graph.is_reduction(owner):  # type: ignore[arg-type]
                continue  # a row scalar: written once the row is done
            if graph.is_contraction(owner):  # type: ignore[arg-type]
                out_level[value] = level[value] + 1  # copied out of its row scratch
            elif self.is_row_value(value):
                out_level[value] = level[value]
            elif (moved := self.moved_row(value, row_index)) is not None:
                source, _ = moved
                self.moved[value] = moved
                out_level[value] = level[source] + (1 if graph.is_contraction(source.owner) else 0)  # type: ignore[arg-type]
            elif not self.is_row_scalar(value):
                raise Fallback(f"output of shape {graph.shape_of(value)} is neither a row nor a row scalar")
        return out_level

    def emit_phase(self, ph: RowPhase) -> None:
        """One dependence level of a row: its GEMMs, then one nest that accumulates the
        reductions of this level and writes the outputs and kept values complete in it."""
        for op in self.staged_ops():
            if graph.is_contraction(op) and ph.level[op.results[0]] == ph.phase:
                self.emit_contraction(op)
        reductions = [op for op in self.staged_ops() if graph.is_reduction(op) and ph.level[op.results[0]] == ph.phase]
        accs = self.init_accumulators(reductions, ph.phase)
        # long float sums: the nest's d0 runs over blocks, d1 over the row (see ROW_BLOCK)
        blocks = self.row_blocks([op for op, _ in accs])
        targets = self.init_partials(accs, blocks) if blocks > 1 else accs
        # float max/min: NaN-ignoring maxnum/minnum (llvm.maximum vectorizes badly on
        # x86); a separate NaN scan of the row (below) restores numpy's NaN result
        flagged = [op for op, _ in accs if op.KIND in ("max", "min") and graph.is_float(graph.element_type_of(op.results[0]))]
        writes = self.emit_phase_nest(ph, accs, targets, blocks, flagged)
        if blocks > 1:
            self.combine_partials(targets, accs, flagged)
        for op, acc in accs:
            if op in flagged:
                self.emit_nan_scan(op, acc, ph.row_index)
        for op, acc in accs:
            self.stages[op.results[0]] = Stage(acc, ph.phase, per_row=True)
            if op.KIND == "mean":
                self.emit_mean_scale(op, acc)
        for value, buf, _ in writes:
            if ph.keep.get(value) == ph.phase:
                self.stages[value] = Stage(buf, ph.phase, per_row=False)

    def init_accumulators(self, reductions: list[Operation], phase: int) -> list[tuple[Operation, SSAValue]]:
        """A one-element scratch per reduction (a row scalar), set to its identity by one
        one-point nest."""
        accs = [(op, self.alloca([1], graph.element_type_of(op.results[0]))) for op in reductions]
        if accs:
            self.emit_rank0(
                f"init_{phase}",
                [(acc, (const_expr(0),), None) for _, acc in accs],
                lambda body, args: [
                    scalar.const(body.b, scalar.identity_of(op.KIND, graph.element_type_of(op.results[0])), graph.element_type_of(op.results[0]))
                    for op, _ in accs
                ],
            )
        return accs

    def emit_phase_nest(self, ph: RowPhase, accs, targets, blocks: int, flagged) -> list[tuple[SSAValue, SSAValue, Index]]:
        """The phase's nest over the row (or over its blocks and their elements): the
        reductions accumulate into `targets`; returns the (value, buffer, index) written."""
        k = len(self.outer)
        elem = AffineExpr.dimension(1 if blocks > 1 else 0)
        syms = list(ph.row_index[:k])
        at = lambda index: tuple(e.replace_dims_and_symbols([elem], syms) for e in index)  # noqa: E731
        phase_index = at(ph.row_index)
        body = Body(2 if blocks > 1 else 1, k)
        acc_index = (AffineExpr.dimension(0),) if blocks > 1 else (const_expr(0),)
        acc_args = [(op, body.out(buf, acc_index)) for op, buf in targets]
        writes = self.phase_writes(ph, at, phase_index, elem)
        for _, buf, index in writes:
            body.out(buf, index)
        for k_out, (op, acc_arg) in enumerate(acc_args):
            x = scalar.widen(body.b, self.value(body, op.input, phase_index))
            t = graph.element_type_of(op.results[0])
            combined = scalar.combine(body.b, op.KIND, scalar.widen(body.b, acc_arg), x, ignore_nan=op in flagged,
                                      unsigned=scalar.reduction_unsigned(op))
            body.set_out(k_out, scalar.narrow(body.b, combined, t))
        for j, (value, _, _) in enumerate(writes):
            body.set_out(len(acc_args) + j, self.value(body, value, phase_index))
        if body.outs:
            names = [op.name.split(".")[1] for op, _ in accs] or ["rows"]
            bounds = self.blocked_bounds(blocks) if blocks > 1 else [self.row]
            # d0 is not parallel for the row outputs written beside the sums (they use d1 only)
            iterators = [loop.REDUCTION, loop.REDUCTION] if blocks > 1 else [loop.REDUCTION if accs else loop.PARALLEL]
            self.emit_op(body.finish(f"{self.group.group_name.data}.{ph.phase}_{'_'.join(names)}", bounds, iterators, self.syms))
        return writes

    def phase_writes(self, ph: RowPhase, at, phase_index: Index, elem: AffineExpr) -> list[tuple[SSAValue, SSAValue, Index]]:
        """(value, buffer, index): the outputs complete in this phase, then the values
        kept in a row scratch for later phases."""
        writes = [
            (self.moved[v][0], buf, at(self.moved[v][1])) if v in self.moved else (v, buf, phase_index)
            for v, buf in ph.outputs
            if ph.out_level.get(v) == ph.phase
        ]
        for value, p in ph.keep.items():
            if p == ph.phase:
                scratch = self.alloca([self.row], graph.element_type_of(value))
                writes.append((value, scratch, (elem,)))
        return writes

    def emit_row_scalars(self, scalars: list[tuple[SSAValue, SSAValue]], syms_index: Index) -> None:
        """The row-scalar outputs, once everything is available: one one-point nest."""
        if not scalars:
            return
        k = len(syms_index)

        def index_of(v: SSAValue) -> Index:
            return (*syms_index, *([const_expr(0)] * (len(graph.shape_of(v)) - k)))

        self.emit_rank0(
            "row_outputs",
            [(b, index_of(v), None) for v, b in scalars],
            lambda body, args: [self.value(body, v, index_of(v)) for v, _ in scalars],
        )

    def row_blocks(self, reductions: list[Operation]) -> int:
        """Blocks a row reduction phase sums separately: 1 unless a float sum/mean/prod
        runs over at least ROW_BLOCK_MIN elements (max/min are exact in any order)."""
        long_float = self.row >= ROW_BLOCK_MIN and any(
            op.KIND in ("sum", "mean", "prod") and graph.is_float(graph.element_type_of(op.results[0])) for op in reductions
        )
        return -(-self.row // ROW_BLOCK) if long_float else 1

    def blocked_bounds(self, blocks: int):
        """d0 over the blocks, d1 over block d0's elements [d0 * B, min(d0 * B + B, row))."""
        nsyms = len(self.syms)
        d0 = AffineExpr.dimension(0)
        lower = [loop.constant_bound(0), AffineMapAttr(AffineMap(1, nsyms, (d0 * ROW_BLOCK,)))]
        upper = [loop.constant_bound(blocks), AffineMapAttr(AffineMap(1, nsyms, (d0 * ROW_BLOCK + ROW_BLOCK, const_expr(self.row))))]
        return (lower, upper)

    def init_partials(self, accs: list[tuple[Operation, SSAValue]], blocks: int) -> list[tuple[Operation, SSAValue]]:
        """One scratch element per block and reduction, at the reduction's identity."""
        partials = [(op, self.alloca([blocks], graph.element_type_of(op.results[0]))) for op, _ in accs]
        init = Body(1, len(self.syms))
        for _, buf in partials:
            init.out(buf, (AffineExpr.dimension(0),))
        for j, (op, _) in enumerate(partials):
            t = graph.element_type_of(op.results[0])
            init.set_out(j, scalar.const(init.b, scalar.identity_of(op.KIND, t), t))
        self.emit_op(init.finish(f"{self.group.group_name.data}.partial_init", [blocks], [loop.PARALLEL], self.syms))
        return partials

    def combine_partials(self, partials, accs, flagged) -> None:
        """acc = the block partials combined; LLVM adds them in vector lanes, then a tree."""
        blocks = partials[0][1].type.get_shape()[0]
        body = Body(1, len(self.syms))
        outs = [body.out(acc, (const_expr(0),)) for _, acc in accs]
        for j, ((op, part), acc) in enumerate(zip(partials, outs)):
            x = scalar.widen(body.b, body.read(part, (AffineExpr.dimension(0),)))
            combined = scalar.combine(body.b, op.KIND, scalar.widen(body.b, acc), x, ignore_nan=op in flagged,
                                      unsigned=scalar.reduction_unsigned(op))
            body.set_out(j, scalar.narrow(body.b, combined, graph.element_type_of(op.results[0])))
        self.emit_op(body.finish(f"{self.group.group_name.data}.partial_combine", [blocks], [loop.REDUCTION], self.syms))

    def is_column_group(self, staged: list[Operation]) -> bool:
        """Reductions over the same leading axes of one shape, the last axis kept."""
        if not all(isinstance(op, graph.ReduceOp) for op in staged):
            return False
        first = staged[0]
        shape, axes = graph.shape_of(first.input), first.reduce_axes
        same = all(graph.shape_of(op.input) == shape and op.reduce_axes == axes for op in staged)
        return same and len(shape) - 1 not in axes

    def lower_columns(self, staged: list[Operation], outputs: list[tuple[SSAValue, SSAValue]]) -> None:
        """One nest over the reduced tensor's domain, accumulating straight into the outputs.

        Iterators are `reduction` on the reduced (leading) axes and `parallel` on the
        rest, so the threads split the kept columns: every thread owns whole
        accumulators and adds rows in order, which is deterministic, and the
        innermost loop runs along contiguous columns.
        """
        shape, axes = graph.shape_of(staged[0].input), staged[0].reduce_axes
        rank = len(shape)
        dims = tuple(AffineExpr.dimension(i) for i in range(rank))
        out_buf = dict(outputs)
        for op in staged:
            if op.results[0] not in out_buf:
                raise Fallback("a column reduction's result is used inside the group")
        for value, _ in outputs:
            if not isinstance(value.owner, graph.ReduceOp) and graph.shape_of(value) != shape:
                raise Fallback(f"output of shape {graph.shape_of(value)} next to column reductions of {shape}")

        def reduced_index(op: graph.ReduceOp) -> Index:
            if op.keeps_dims:
                return tuple(const_expr(0) if d in axes else dims[d] for d in range(rank))
            return tuple(dims[d] for d in range(rank) if d not in axes)

        if axes == (0,) and shape[0] >= 2 * COLUMN_BLOCK_MIN_ROWS:
            self.lower_column_blocks(staged, outputs, reduced_index)
            return
        for op in staged:
            out_shape = graph.shape_of(op.results[0])
            t = graph.element_type_of(op.results[0])
            init = Body(len(out_shape), 0)
            init.out(out_buf[op.results[0]], tuple(AffineExpr.dimension(i) for i in range(len(out_shape))))
            init.set_out(0, scalar.const(init.b, scalar.identity_of(op.KIND, t), t))
            self.emit_op(init.finish(f"{self.group.group_name.data}.init", out_shape, [loop.PARALLEL] * len(out_shape), []))
        body = Body(rank, 0)
        self.accumulate_columns(body, staged, [(out_buf[op.results[0]], reduced_index(op)) for op in staged], outputs, dims)
        iterators = [loop.REDUCTION if d in axes else loop.PARALLEL for d in range(rank)]
        self.emit_op(body.finish(self.group.group_name.data, shape, iterators, []))
        self.emit_column_means(staged, out_buf, math.prod(shape[a] for a in axes))

    def accumulate_columns(self, body: Body, staged, targets, outputs, index: Index) -> None:
        """Each reduction adds its input at `index` into its (buffer, index) target; the
        group's elementwise outputs are written at `index` in the same pass."""
        accs = [body.out(buf, idx) for buf, idx in targets]
        elementwise = [(v, b) for v, b in outputs if not isinstance(v.owner, graph.ReduceOp)]
        for _, buf in elementwise:
            body.out(buf, index)
        for k, (op, acc) in enumerate(zip(staged, accs)):
            t = graph.element_type_of(op.results[0])
            x = scalar.widen(body.b, self.value(body, op.input, index))
            body.set_out(k, scalar.narrow(body.b, scalar.combine(body.b, op.KIND, scalar.widen(body.b, acc), x, unsigned=scalar.reduction_unsigned(op)), t))
        for j, (value, _) in enumerate(elementwise):
            body.set_out(len(staged) + j, self.value(body, value, index))

    def emit_column_means(self, staged: list[Operation], out_buf: dict[SSAValue, SSAValue], count: int) -> None:
        for op in staged:
            if op.KIND == "mean":
                out_shape = graph.shape_of(op.results[0])
                buf = out_buf[op.results[0]]
                scale = Body(len(out_shape), 0)
                index = tuple(AffineExpr.dimension(i) for i in range(len(out_shape)))
                x = scalar.widen(scale.b, scale.read(buf, index))
                scale.out(buf, index)
                r = scale.b.insert(arith.DivfOp(x, scalar.const(scale.b, float(count), x.type))).result
                scale.set_out(0, scalar.narrow(scale.b, r, graph.element_type_of(op.results[0])))
                self.emit_op(scale.finish(f"{self.group.group_name.data}.mean", out_shape, [loop.PARALLEL] * len(out_shape), []))

    def lower_column_blocks(self, staged: list[Operation], outputs: list[tuple[SSAValue, SSAValue]], reduced_index) -> None:
        """Column reductions over axis 0 of a tall tensor, by blocks of rows.

        A band over a fixed number of row blocks (split across threads) sums each
        block into its own row of partial results, reading whole contiguous rows;
        one nest then combines the partials block by block, in order. The result
        does not depend on the number of threads, and every thread streams
        contiguous memory (splitting the columns instead makes each thread read
        short pieces of every row).
        """
        shape = graph.shape_of(staged[0].input)
        rows, rest = shape[0], tuple(shape[1:])
        blocks = min(COLUMN_BLOCKS, -(-rows // COLUMN_BLOCK_MIN_ROWS))
        block_rows = -(-rows // blocks)
        blocks = -(-rows // block_rows)
        out_buf = dict(outputs)
        partials = []
        for op in staged:
            t = graph.element_type_of(op.results[0])
            partials.append(self.emit_op(memref.AllocOp.get(graph.storage_type(t), 64, [blocks, *rest])).memref)
        band_block = Block(arg_types=[IndexType()])
        with self.inserting_at_end(band_block):
            name = self.group.group_name.data
            inner = tuple(AffineExpr.dimension(i) for i in range(len(rest)))
            s0 = AffineExpr.symbol(0)
            # this block's partials start at the reduction's identity
            init = Body(len(rest), 1)
            for part in partials:
                init.out(part, (s0, *inner))
            for k, op in enumerate(staged):
                t = graph.element_type_of(op.results[0])
                init.set_out(k, scalar.const(init.b, scalar.identity_of(op.KIND, t), t))
            self.emit_op(init.finish(f"{name}.partial_init", rest, [loop.PARALLEL] * len(rest), [band_block.args[0]]))
            # the block's rows: [s0 * block_rows, min((s0 + 1) * block_rows, rows))
            rank = len(shape)
            d = tuple(AffineExpr.dimension(i) for i in range(rank))
            index = (s0 * block_rows + d[0], *d[1:])
            body = Body(rank, 1)
            self.accumulate_columns(body, staged, [(part, (s0, *d[1:])) for part in partials], outputs, index)
            body.b.insert(loop.YieldOp(*[v for _, _, v in body.outs]))
            lower = [loop.constant_bound(0)] * rank
            upper = [AffineMapAttr(AffineMap(0, 1, (const_expr(block_rows), const_expr(rows) - s0 * block_rows)))]
            upper += [loop.constant_bound(n) for n in rest]
            self.emit_op(
                loop.NestOp(
                    f"{name}.blocks", (lower, upper), [loop.REDUCTION] + [loop.PARALLEL] * len(rest),
                    [b for b, _ in body.ins], [b for b, _, _ in body.outs],
                    [m for _, m in body.ins] + [m for _, m, _ in body.outs], Region(body.block), [band_block.args[0]],
                )
            )
        self.emit_op(loop.BandOp(f"{name}.blocks", [blocks], Region(band_block)))
        # combine the partials in block order into the outputs
        for op, part in zip(staged, partials):
            out_shape = graph.shape_of(op.results[0])
            t = graph.element_type_of(op.results[0])
            dst = out_buf[op.results[0]]
            init_out = Body(len(out_shape), 0)
            init_out.out(dst, tuple(AffineExpr.dimension(i) for i in range(len(out_shape))))
            init_out.set_out(0, scalar.const(init_out.b, scalar.identity_of(op.KIND, t), t))
            self.emit_op(init_out.finish(f"{name}.init", out_shape, [loop.PARALLEL] * len(out_shape), []))
            combine = Body(1 + len(rest), 0)
            dims = tuple(AffineExpr.dimension(i) for i in range(1 + len(rest)))
            out_index = reduced_index(op)  # over the input's dims: (d0 = block, d1.. = rest)
            acc = combine.out(dst, out_index)
            x = scalar.widen(combine.b, combine.read(part, dims))
            combine.set_out(0, scalar.narrow(combine.b, scalar.combine(combine.b, op.KIND, scalar.widen(combine.b, acc), x, unsigned=scalar.reduction_unsigned(op)), t))
            self.emit_op(combine.finish(f"{name}.combine", (blocks, *rest), [loop.REDUCTION] + [loop.PARALLEL] * len(rest), []))
            self.emit_op(memref.DeallocOp.get(part))
        self.emit_column_means(staged, out_buf, rows)

    def emit_nan_scan(self, op: graph.ReduceOp, acc: SSAValue, row_index: Index) -> None:
        """acc = NaN if the reduced row holds one (numpy's max/min): an OR over the row
        in its own nest (sharing the max's nest would keep that loop scalar)."""
        flag = self.alloca([1], i32)
        self.emit_rank0("nan_init", [(flag, (const_expr(0),), None)], lambda b, args: [scalar.const(b.b, 0, i32)])
        scan = Body(1, len(self.syms))
        flag_arg = scan.out(flag, (const_expr(0),))
        x = scalar.widen(scan.b, self.value(scan, op.input, row_index))
        scan.set_out(0, scalar.flag_nan(scan.b, flag_arg, x))
        self.emit_op(scan.finish(f"{self.group.group_name.data}.nan_scan", [self.row], [loop.REDUCTION], self.syms))

        def restore(body: Body, args):
            seen = body.read(flag, (const_expr(0),))
            any_nan = body.b.insert(arith.CmpiOp(seen, scalar.const(body.b, 0, i32), "ne")).result
            zero = scalar.const(body.b, 0.0, acc.type.get_element_type())
            nan = body.b.insert(arith.DivfOp(zero, zero)).result  # NaN without a NaN attribute
            return [body.b.insert(arith.SelectOp(any_nan, nan, args[0])).result]

        self.emit_rank0("nan_restore", [(acc, (const_expr(0),), None)], restore)

    def emit_mean_scale(self, op: graph.ReduceOp, acc: SSAValue) -> None:
        count = graph.shape_of(op.input)[-1]

        def compute(body: Body, args):
            x = scalar.widen(body.b, args[0])
            r = body.b.insert(arith.DivfOp(x, scalar.const(body.b, float(count), x.type))).result
            return [scalar.narrow(body.b, r, acc.type.get_element_type())]

        self.emit_rank0("mean", [(acc, (const_expr(0),), None)], compute)

    def emit_contraction(self, op: Operation) -> None:
        """C[row, :] = sum_k A[row, k] * B[k, :] into a row scratch, prologues recomputed."""
        a, b = op.operands
        k_size = graph.shape_of(a)[-1]
        t = graph.element_type_of(op.results[0])
        crow = self.alloca([self.row], t)
        init = Body(1, len(self.syms))
        init.out(crow, (AffineExpr.dimension(0),))
        init.set_out(0, scalar.const(init.b, 0, t))
        self.emit_op(init.finish(f"{self.group.group_name.data}.gemm_init", [self.row], [loop.PARALLEL], self.syms))
        nb = len(self.outer) - 1  # batch dims before M
        syms = tuple(AffineExpr.symbol(i) for i in range(len(self.outer)))
        dk, dj = AffineExpr.dimension(0), AffineExpr.dimension(1)
        body = Body(2, len(self.syms))
        acc = body.out(crow, (dj,))
        x = scalar.widen(body.b, self.value(body, a, (*syms, dk)))
        y = scalar.widen(body.b, self.value(body, b, (*syms[:nb], dk, dj)))
        r = scalar.multiply_add(body.b, scalar.widen(body.b, acc), x, y)
        body.set_out(0, scalar.narrow(body.b, r, t))
        self.emit_op(body.finish(f"{self.group.group_name.data}.gemm", [k_size, self.row], [loop.REDUCTION, loop.PARALLEL], self.syms))
        self.stages[op.results[0]] = Stage(crow, self.phase, per_row=False)


# What a window group may hold besides its window ops: per-element work and the
# index shifts that post-tiling fusion handles as affine accesses.
AROUND_WINDOWS = (graph.BroadcastOp, graph.PadOp, graph.SliceOp, graph.ConstantOp)


def is_window_group(ops: Sequence[Operation]) -> bool:
    """A group that post-tiling fusion lowers (convert-graph-to-loop emits its ops one nest
    each, tagged with the group; the loop-* passes in scope "group" fuse them into tiles):
    it holds a window op (conv, pooling), or reads one value by slices at several offsets
    that overlap (a stencil written with slices), where stitching would recompute every
    neighbour in registers. Slices that do not overlap (attention's packed QKV split in
    three) read each element once: they are stitched like any injective op."""
    if any(graph.is_window_op(op) for op in ops):
        return True
    boxes: dict[SSAValue, list[tuple[tuple[int, ...], tuple[tuple[int, int], ...]]]] = {}
    for op in ops:
        if isinstance(op, graph.SliceOp):
            boxes.setdefault(op.input, []).append((op.bounds[0], slice_box(op)))
    return any(
        start != other_start and boxes_overlap(box, other)
        for reads in boxes.values() for k, (start, box) in enumerate(reads) for other_start, other in reads[k + 1:]
    )


def boxes_overlap(p: Sequence[tuple[int, int]], q: Sequence[tuple[int, int]]) -> bool:
    """Do the half-open boxes p and q (a range per dimension) share a point?"""
    return all(max(p0, q0) < min(p1, q1) for (p0, p1), (q0, q1) in zip(p, q))


def slice_box(op: graph.SliceOp) -> tuple[tuple[int, int], ...]:
    """Per dimension, the half-open range of the input's indices that `op` reads between."""
    start, stop, step = op.bounds
    return tuple((a, b) if s > 0 else (b + 1, a + 1) for a, b, s in zip(start, stop, step))


def window_group_problem(ops: Sequence[Operation]) -> str | None:
    """Why `ops` (holding a window op) cannot be one post-tiled CPU kernel; None if they can."""
    for op in ops:
        if not (graph.is_window_op(op) or graph.is_elementwise(op) or isinstance(op, AROUND_WINDOWS)):
            return f"'{op.name}' cannot join a window group (post-tiling fusion takes windows, elementwise ops, pads and slices)"
    return None


def structural_problem(ops: Sequence[Operation]) -> str | None:
    """Why a set of graph ops cannot be one stitched CPU kernel, from their structure alone.

    The fusion planner asks this for target=cpu so that it plans only kernels this
    code generator can emit (lower_group may still fall back on subtler cases,
    e.g. a row value read across rows, and says so). Groups with window ops are
    post-tiled rather than stitched (window_group_problem).
    """
    if any(graph.is_window_op(op) for op in ops):
        return window_group_problem(ops)
    inside = set(ops)
    for op in ops:
        if not (stitchable(op) or isinstance(op, graph.ConstantOp)):
            return f"'{op.name}' has no stitched CPU lowering"
        if isinstance(op, graph.GatherBase) and isinstance(op.data.owner, Operation) and op.data.owner in inside \
                and not isinstance(op.data.owner, graph.ConstantOp):
            return f"'{op.name}' reads data computed inside the kernel (a data-dependent read needs it in memory)"
    reductions = [op for op in ops if graph.is_reduction(op)]
    if not reductions:
        return None
    shapes = {graph.shape_of(op.input) for op in reductions}
    axes = {op.reduce_axes for op in reductions}
    if len(shapes) > 1 or len(axes) > 1:
        return "reductions of different shapes or axes cannot share one CPU kernel"
    (shape,), (reduced,) = shapes, axes
    if reduced == (len(shape) - 1,) and len(shape) >= 2:
        return None  # rows
    if len(shape) - 1 in reduced:
        return "a reduction over the last axis together with others has no stitched CPU lowering"
    for op in reductions:  # columns: results may only leave the kernel
        if any(use.operation in inside for use in op.results[0].uses):
            return "a column reduction's result is used inside the kernel (needs a grid-wide barrier)"
    return None


def lower_group(group: fusion.GroupOp, inputs: dict[SSAValue, object], outputs: list[tuple[SSAValue, SSAValue]], emit_op, constant) -> None:
    """Emit `group` as one kernel, or raise Fallback having emitted nothing.

    `inputs` maps the group's block arguments to graph_to_loop Operands, `outputs`
    pairs each yielded value with its destination buffer, `emit_op(op)` inserts
    an op where the kernel goes and `constant(op)` lowers a graph.constant.
    """
    lowering = GroupLowering(group, inputs)
    for op in lowering.ops:
        if not (stitchable(op) or isinstance(op, graph.ConstantOp)):
            raise Fallback(f"'{op.name}' has no stitched lowering")
    for op in lowering.ops:
        if isinstance(op, graph.ConstantOp):
            lowering.constants[op.result] = constant(op)
    staged = lowering.staged_ops()
    try:
        if not staged:
            lowering.lower_elementwise(outputs)
        elif lowering.is_column_group(staged):
            lowering.lower_columns(staged, outputs)
        else:
            lowering.lower_rows(outputs)
    except Fallback:
        lowering.discard()
        raise
    for op in list(lowering.kernel.ops):
        op.detach()
        emit_op(op)
