"""Element-level code for graph ops: the value of a tensor at one index, as scalar IR.

This is thread composition (XLA's and FusionStitching's "register stitching"):
an elementwise or injective op at index i becomes scalar arith/math on its
operands at the indices its index map gives (a broadcast drops or zeroes
dimensions, a transpose permutes them, a slice offsets them, a pad or concat
selects between sources). Group inputs are loaded from their buffers; what a
schedule has already computed (a reduction finished in registers, in shared or
in global memory) is looked up through `resolved`.

Reductions met here without a resolution are computed in place by a sequential
loop over the reduced elements (a thread reduces alone), and so are matmuls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    TensorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint

from mlfuse.conversion import scalar
from mlfuse.diagnostics import Diagnostic, location_of
from mlfuse.dialects import graph

Index = list[SSAValue]
Resolver = Callable[["Scalars", Index], SSAValue]


class IR:
    """A builder with the few helpers code generation needs, inserting at the end of a block."""

    def __init__(self, block: Block):
        self.block = block
        self.b = Builder(InsertPoint.at_end(block))
        self._consts: dict[tuple, SSAValue] = {}

    def op(self, op: Operation) -> SSAValue | None:
        self.b.insert(op)
        return op.results[0] if op.results else None

    def index(self, n: int) -> SSAValue:
        key = ("index", n)
        if key not in self._consts:
            self._consts[key] = self.op(arith.ConstantOp(IntegerAttr(n, IndexType())))
        return self._consts[key]

    def scalar(self, value: float | int | bool, t: Attribute) -> SSAValue:
        if isinstance(t, IntegerType):
            v = int(value)
            if t.width.data == 1:
                v = -1 if v else 0  # i1 true is -1 as a signed 1-bit value
            return self.op(arith.ConstantOp(IntegerAttr(v, t)))
        return self.op(arith.ConstantOp(FloatAttr(float(value), t)))

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.AddiOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.MuliOp(a, b))

    def add_const(self, a: SSAValue, n: int) -> SSAValue:
        return a if n == 0 else self.add(a, self.index(n))

    def mul_const(self, a: SSAValue, n: int) -> SSAValue:
        return a if n == 1 else self.mul(a, self.index(n))

    def div_const(self, a: SSAValue, n: int) -> SSAValue:
        return a if n == 1 else self.op(arith.DivUIOp(a, self.index(n)))

    def rem_const(self, a: SSAValue, n: int) -> SSAValue:
        return self.index(0) if n == 1 else self.op(arith.RemUIOp(a, self.index(n)))

    def lt(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.CmpiOp(a, b, "ult"))

    def eq(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.CmpiOp(a, b, "eq"))

    def min(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.MinUIOp(a, b))

    def select(self, c: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.SelectOp(c, a, b))

    # --- graph.IndexBuilder: the graph ops' index maps on `index` values ---------------

    def constant(self, n: int) -> SSAValue:
        return self.index(n)

    def plus(self, a: SSAValue, b: SSAValue) -> SSAValue:
        if constant_index(a) == 0:
            return b
        return a if constant_index(b) == 0 else self.add(a, b)

    def shift(self, a: SSAValue, n: int) -> SSAValue:
        return self.op(arith.SubiOp(a, self.index(-n))) if n < 0 else self.add_const(a, n)

    def times(self, a: SSAValue, n: int) -> SSAValue:
        c = constant_index(a)  # the index in a size-1 dimension is often the constant 0
        return self.index(c * n) if c is not None else self.mul_const(a, n)

    def floordiv(self, a: SSAValue, n: int) -> SSAValue:
        return self.div_const(a, n)

    def mod(self, a: SSAValue, n: int) -> SSAValue:
        return self.rem_const(a, n)

    def delinearize(self, linear: SSAValue, shape: Sequence[int]) -> Index:
        """Row-major multi-index of `linear` (< prod(shape)) in `shape`."""
        idx: Index = []
        stride = math.prod(shape)
        for d, size in enumerate(shape):
            stride //= size
            if size == 1:
                idx.append(self.index(0))
                continue
            q = self.div_const(linear, stride)
            idx.append(self.rem_const(q, size) if d > 0 else q)
        return idx

    def linearize(self, idx: Index, shape: Sequence[int]) -> SSAValue:
        total: SSAValue | None = None
        for i, size in zip(idx, shape):
            total = i if total is None else self.add(self.mul_const(total, size), i)
        return total if total is not None else self.index(0)

    def for_loop(
        self,
        lb: SSAValue,
        ub: SSAValue,
        step: SSAValue,
        inits: Sequence[SSAValue],
        body: Callable[[IR, SSAValue, list[SSAValue]], Sequence[SSAValue]],
    ) -> list[SSAValue]:
        """scf.for with loop-carried values; `body(ir, iv, carried)` returns the next values."""
        block = Block(arg_types=[IndexType(), *[v.type for v in inits]])
        inner = IR(block)
        results = body(inner, block.args[0], list(block.args[1:]))
        inner.op(scf.YieldOp(*results))
        loop = scf.ForOp(lb, ub, step, list(inits), block)
        self.b.insert(loop)
        return list(loop.results)

    def if_then(
        self,
        cond: SSAValue,
        then: Callable[[IR], Sequence[SSAValue]],
        otherwise: Callable[[IR], Sequence[SSAValue]] | None = None,
        result_types: Sequence[Attribute] = (),
    ) -> list[SSAValue]:
        then_block = Block()
        then_ir = IR(then_block)
        then_ir.op(scf.YieldOp(*then(then_ir)))
        else_blocks: list[Block] = []
        if otherwise is not None:
            else_block = Block()
            else_ir = IR(else_block)
            else_ir.op(scf.YieldOp(*otherwise(else_ir)))
            else_blocks = [else_block]
        op = scf.IfOp(cond, list(result_types), [then_block], else_blocks or None)
        self.b.insert(op)
        return list(op.results)


# --- reductions -----------------------------------------------------------------------


identity = scalar.identity_of


def combine(ir: IR, kind: str, a: SSAValue, b: SSAValue) -> SSAValue:
    """a (+|*|max|min) b, as every backend combines reduction partials."""
    return scalar.combine(ir.b, kind, a, b)


def finish(ir: IR, op: graph.ReduceOp, total: SSAValue, count: int) -> SSAValue:
    """The reduction's value from its combined total (the mean divides by the count)."""
    if op.KIND != "mean":
        return total
    return ir.op(arith.MulfOp(total, ir.scalar(1.0 / count, total.type)))


def reduced_extent(op: graph.ReduceOp) -> tuple[list[int], list[int]]:
    """(kept dims, reduced dims) of a reduction's operand."""
    shape = graph.shape_of(op.input)
    axes = set(op.reduce_axes)
    return [d for d in range(len(shape)) if d not in axes], sorted(axes)


def operand_index_of_result(op: graph.ReduceOp, result_idx: Index, ir: IR) -> tuple[Index, list[int]]:
    """Operand index with the reduced dimensions left as None placeholders, and those dims."""
    shape = graph.shape_of(op.input)
    kept, reduced = reduced_extent(op)
    full: list[SSAValue | None] = [None] * len(shape)
    if op.keeps_dims:
        for d in kept:
            full[d] = result_idx[d]
    else:
        for d, i in zip(kept, result_idx):
            full[d] = i
    return full, reduced  # type: ignore[return-value]


# --- the element emitter --------------------------------------------------------------


class Scalars:
    """Values of a group's tensors at given indices, emitted into one block (memoised).

    `buffers` maps group inputs (and hoisted constants) to the memrefs that hold
    them; `resolved` maps values a schedule computed already to how to read them.
    """

    def __init__(
        self,
        ir: IR,
        buffers: dict[SSAValue, SSAValue],
        resolved: dict[SSAValue, Resolver] | None = None,
    ):
        self.ir = ir
        self.buffers = buffers
        self.resolved = resolved if resolved is not None else {}
        self.memo: dict[tuple, SSAValue] = {}

    def value(self, v: SSAValue, idx: Index) -> SSAValue:
        key = (v, tuple(id(i) for i in idx))
        if key not in self.memo:
            self.memo[key] = self._compute(v, idx)
        return self.memo[key]

    def _compute(self, v: SSAValue, idx: Index) -> SSAValue:
        ir = self.ir
        if v in self.resolved:
            return self.resolved[v](self, idx)
        if v in self.buffers:
            return ir.op(memref.LoadOp.get(self.buffers[v], idx))
        op = v.owner
        if not isinstance(op, Operation):
            raise Diagnostic("a fused kernel reads a value that is neither an input nor computed in it")
        el = graph.element_type_of(v)
        if graph.is_elementwise(op):  # the scalar semantics every backend shares
            return scalar.emit_elementwise(ir.b, op, [self.value(o, idx) for o in op.operands])
        if graph.is_plain_injective(op):  # broadcast, transpose, slice, reshape
            return self.value(op.operands[0], op.source_index(0, idx, ir))  # type: ignore[attr-defined]
        match op:
            case graph.ConstantOp():
                splat = graph.splat_value(op.value)
                if splat is None:
                    raise Diagnostic("non-splat constant left inside a kernel (it should be an input)", location_of(op))
                return ir.scalar(splat, el)
            case graph.PadOp():
                return self._pad(op, idx, el)
            case graph.ConcatOp():
                return self._concat(op, idx, el)
            case graph.ReduceOp():
                return self._sequential_reduce(op, idx, el)
            case graph.MatmulOp() | graph.BatchMatmulOp():
                return self._dot(op, idx, el)
        raise Diagnostic(f"the GPU backend cannot generate code for '{op.name}'", location_of(op))

    def _pad(self, op: graph.PadOp, idx: Index, el: Attribute) -> SSAValue:
        """The operand where the index falls inside it, else the pad value (scf.if)."""
        ir = self.ir
        src = op.source_index(0, idx, ir)
        inside: SSAValue | None = None
        for d, n in op.guarded_dims():
            # unsigned compare: i - low < 0 wraps around to a huge value
            within = ir.lt(src[d], ir.index(n))
            inside = within if inside is None else ir.op(arith.AndIOp(inside, within))
        if inside is None:
            return self.value(op.input, src)

        def load(body: IR) -> list[SSAValue]:
            return [Scalars(body, self.buffers, self.resolved).value(op.input, src)]

        return ir.if_then(inside, load, lambda e: [e.scalar(op.pad_value, el)], [el])[0]

    def _concat(self, op: graph.ConcatOp, idx: Index, el: Attribute) -> SSAValue:
        """A chain of scf.if on the axis index: the operand whose range holds it."""
        axis, offsets = op.concat_axis, op.offsets

        def emit_from(ir: IR, k: int) -> SSAValue:
            return Scalars(ir, self.buffers, self.resolved).value(op.inputs[k], op.source_index(k, idx, ir))

        def choose(ir: IR, k: int) -> SSAValue:
            if k == len(op.inputs) - 1:
                return emit_from(ir, k)
            return ir.if_then(
                ir.lt(idx[axis], ir.index(offsets[k + 1])),
                lambda t: [emit_from(t, k)],
                lambda e: [choose(e, k + 1)],
                [el],
            )[0]

        return choose(self.ir, 0)

    def _sequential_reduce(self, op: graph.ReduceOp, idx: Index, el: Attribute) -> SSAValue:
        ir = self.ir
        full, reduced = operand_index_of_result(op, idx, ir)
        shape = graph.shape_of(op.input)
        extent = [shape[d] for d in reduced]
        count = math.prod(extent)

        def body(inner: IR, k: SSAValue, acc: list[SSAValue]) -> list[SSAValue]:
            src = list(full)
            for d, i in zip(reduced, inner.delinearize(k, extent)):
                src[d] = i
            x = Scalars(inner, self.buffers, self.resolved).value(op.input, src)
            return [combine(inner, op.KIND, acc[0], x)]

        init = ir.scalar(identity(op.KIND, el), el)
        total = ir.for_loop(ir.index(0), ir.index(count), ir.index(1), [init], body)[0]
        return finish(ir, op, total, count)

    def _dot(self, op: Operation, idx: Index, el: Attribute) -> SSAValue:
        ir = self.ir
        lhs, rhs = op.operands
        k_size = graph.shape_of(lhs)[-1]
        batch, i, j = idx[:-2], idx[-2], idx[-1]

        def body(inner: IR, k: SSAValue, acc: list[SSAValue]) -> list[SSAValue]:
            s = Scalars(inner, self.buffers, self.resolved)
            a = s.value(lhs, [*batch, i, k])
            b = s.value(rhs, [*batch, k, j])
            is_int = isinstance(el, IntegerType)
            prod = inner.op(arith.MuliOp(a, b) if is_int else arith.MulfOp(a, b))
            return [inner.op(arith.AddiOp(acc[0], prod) if is_int else arith.AddfOp(acc[0], prod))]

        return ir.for_loop(ir.index(0), ir.index(k_size), ir.index(1), [ir.scalar(0, el)], body)[0]


def constant_index(v: SSAValue) -> int | None:
    """The value of an `index` constant, None for any other value."""
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr) and isinstance(op.value.type, IndexType):
        return op.value.value.data
    return None


# --- scalar ops ------------------------------------------------------------------------

# Elementwise graph ops (their scalar semantics live in mlfuse.conversion.scalar), for
# isinstance checks; derived from the dialect's graph.Elementwise trait.
ELEMENTWISE_OPS = graph.ELEMENTWISE_OPS


def can_compute(op: Operation) -> bool:
    """Whether `Scalars` generates code for `op` (the ops its `_compute` handles)."""
    trait = graph.injective_trait(op)
    return (
        graph.is_elementwise(op)
        or (trait is not None and not trait.indirect)
        or graph.is_reduction(op)
        or graph.is_contraction(op)
        or isinstance(op, graph.ConstantOp)
    )


def tensor_element(t: Attribute) -> Attribute:
    assert isinstance(t, TensorType)
    return t.get_element_type()
