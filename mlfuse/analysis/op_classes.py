"""Op classes for fusion planning: what kind of kernel an op can take part in.

Every op of a function falls into one class (`classify`), read off the traits the
graph dialect attaches to its ops (dialects/graph.py, "op facts"):

- light elementwise: `graph.Elementwise` with cost 1 (add, sub, mul, max, min, neg,
  abs, relu, compare, select, cast);
- expensive elementwise: `graph.Elementwise` with a higher cost (exp, log, tanh, erf,
  sigmoid, gelu, pow, div, rem, sqrt, rsqrt, reciprocal: transcendental or iterative
  on every target; recomputing them is costly);
- broadcast: `graph.Broadcast`;
- injective: `graph.Injective` (transpose, reshape, slice, pad, concat, and the
  gathers with their indirect index: each output element reads at most one element
  of each operand);
- reduction (`graph.Reduction`), with its layout: *row* (the reduced axes are the
  innermost non-unit axes: contiguous), *column* (an outer or middle axis is
  reduced: strided) or *full* (every non-unit axis is reduced);
- contraction (`graph.Contraction`: matmul, batch_matmul), *fine-grained* when its
  flop count is at most a threshold (small GEMMs that may take an elementwise
  prologue and epilogue into their kernel) and *large* otherwise (a library call:
  never fused);
- constant (graph.constant: materialized inside the kernels that use it);
- opaque: anything else (unknown ops, existing fusion groups); never fused.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from xdsl.ir import Operation

from mlfuse.dialects import graph

# 2 * M * N * K (times the batch) at or below which a contraction is fine-grained:
# 2^26 flops keeps attention's per-head GEMMs (12 x 128 x 128 x 64) small and
# BERT's projections (128 x 768 x 768) large.
DEFAULT_FINE_GEMM_FLOPS = 2**26
# ... but a product of one row (a classifier head, 1 x 512 @ 512 x 1000) whose right
# operand is at least this many bytes is large: stitched, its kernel is a band of one
# row, which runs on one thread, while the GEMM kernel splits the columns (and the
# weights' traffic) across the team.
WIDE_MATVEC_MIN_BYTES = 1 << 20


class OpClass(enum.Enum):
    LIGHT_ELEMENTWISE = "light-elementwise"
    EXPENSIVE_ELEMENTWISE = "expensive-elementwise"
    BROADCAST = "broadcast"
    INJECTIVE = "injective"
    REDUCTION = "reduction"
    CONTRACTION = "contraction"
    WINDOW = "window"  # conv2d, pooling: anchors a post-tiled group with its epilogue
    CONSTANT = "constant"
    OPAQUE = "opaque"

    @property
    def elementwise(self) -> bool:
        return self in (OpClass.LIGHT_ELEMENTWISE, OpClass.EXPENSIVE_ELEMENTWISE)


class ReductionLayout(enum.Enum):
    ROW = "row"
    COLUMN = "column"
    FULL = "full"


class ContractionSize(enum.Enum):
    FINE = "fine-grained"
    LARGE = "large"


@dataclass(frozen=True)
class OpInfo:
    """The class of one op and what the planner needs to know about it."""

    op_class: OpClass
    element_cost: float = 0.0  # light-op units per output element (elementwise ops)
    reduction: ReductionLayout | None = None
    row_length: int = 0  # reduced elements per output element (reductions)
    contraction: ContractionSize | None = None
    gemm_flops: int = 0  # 2 * M * N * K * batch (contractions)
    window_flops: int = 0  # multiply-adds x 2 (conv) or window reads (pools)
    halo: tuple[int, ...] = ()  # (dilation * (kernel - 1)) per spatial axis (window ops)

    @property
    def fusible(self) -> bool:
        """Whether the op may share a kernel with other ops at all."""
        if self.op_class in (OpClass.OPAQUE, OpClass.CONSTANT):
            return False
        return self.contraction is not ContractionSize.LARGE

    def describe(self) -> str:
        if self.reduction is not None:
            return f"{self.reduction.value} reduction"
        if self.contraction is not None:
            return f"{self.contraction.value} contraction"
        return self.op_class.value


def reduction_layout(shape: tuple[int, ...], axes: tuple[int, ...]) -> ReductionLayout:
    """Row, column or full, by the reduced axes versus the row-major layout.

    Unit dimensions are ignored: reducing axis 1 of 4x1x8 is the same access pattern
    as reducing nothing of 4x8.
    """
    non_unit = [d for d, n in enumerate(shape) if n != 1]
    reduced = [d for d in axes if shape[d] != 1]
    if not reduced:
        return ReductionLayout.ROW  # only unit axes: every output reads one element
    if set(reduced) == set(non_unit):
        return ReductionLayout.FULL
    if sorted(reduced) == non_unit[len(non_unit) - len(reduced) :]:
        return ReductionLayout.ROW
    return ReductionLayout.COLUMN


def contraction_flops(op: Operation) -> int:
    lhs, rhs = graph.shape_of(op.operands[0]), graph.shape_of(op.operands[1])
    batch = math.prod(lhs[:-2])
    return 2 * batch * lhs[-2] * lhs[-1] * rhs[-1]


def is_wide_matvec(op: Operation) -> bool:
    """Is contraction `op` one row (of one batch) against a right operand of at least
    WIDE_MATVEC_MIN_BYTES?"""
    lhs, rhs = graph.shape_of(op.operands[0]), graph.shape_of(op.operands[1])
    rows = math.prod(lhs[:-1])
    itemsize = graph.numpy_dtype(graph.element_type_of(op.operands[1])).itemsize
    return rows == 1 and math.prod(rhs) * itemsize >= WIDE_MATVEC_MIN_BYTES


def classify(op: Operation, fine_gemm_flops: int = DEFAULT_FINE_GEMM_FLOPS) -> OpInfo:
    """The `OpInfo` of `op`, from the facts its dialect attaches to it (graph.Elementwise,
    graph.Broadcast, graph.Injective, graph.Reduction, graph.Contraction); a
    contraction is fine-grained up to `fine_gemm_flops`, unless a wide matrix-vector
    product (`is_wide_matvec`)."""
    cost = graph.elementwise_cost(op)
    if cost is not None:
        cls = OpClass.EXPENSIVE_ELEMENTWISE if graph.is_expensive(op) else OpClass.LIGHT_ELEMENTWISE
        return OpInfo(cls, element_cost=cost)
    if op.has_trait(graph.Broadcast):
        return OpInfo(OpClass.BROADCAST)
    if op.has_trait(graph.Injective):
        return OpInfo(OpClass.INJECTIVE)
    if graph.is_reduction(op):
        assert isinstance(op, graph.ReduceOp)
        shape = graph.shape_of(op.input)
        axes = op.reduce_axes
        return OpInfo(
            OpClass.REDUCTION,
            element_cost=1.0,
            reduction=reduction_layout(shape, axes),
            row_length=math.prod(shape[a] for a in axes),
        )
    if graph.is_contraction(op):
        flops = contraction_flops(op)
        fine = flops <= fine_gemm_flops and not is_wide_matvec(op)
        size = ContractionSize.FINE if fine else ContractionSize.LARGE
        return OpInfo(OpClass.CONTRACTION, contraction=size, gemm_flops=flops)
    if graph.is_window_op(op):
        return window_info(op)
    if isinstance(op, graph.ConstantOp):
        return OpInfo(OpClass.CONSTANT)
    return OpInfo(OpClass.OPAQUE)


def window_info(op: Operation) -> OpInfo:
    """A conv's flops (2 x output elements x Cin/groups x KH x KW) or a pool's window
    reads, and the halo a producer tile needs around a consumer tile."""
    geometry = graph.Window.geometry(op)
    window = math.prod(geometry.kernel)
    outputs = math.prod(graph.shape_of(op.results[0]))
    if isinstance(op, graph.Conv2dOp):
        flops = 2 * outputs * graph.shape_of(op.operands[1])[1] * window
    else:
        flops = outputs * window
    halo = tuple(d * (k - 1) for k, d in zip(geometry.kernel, geometry.dilations))
    return OpInfo(OpClass.WINDOW, window_flops=flops, halo=halo)
