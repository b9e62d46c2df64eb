"""Op classes for fusion planning: what kind of kernel an op can take part in.

Every op of a function falls into one class (`classify`):

- light elementwise: add, sub, mul, max, min, neg, abs, relu, compare, select, cast;
- expensive elementwise: exp, log, tanh, erf, sigmoid, gelu, pow, div, rem, sqrt, rsqrt,
  reciprocal (transcendental or iterative on every target; recomputing them is costly);
- broadcast;
- injective: transpose, reshape, slice, pad, concat, and the gathers with their
  indirect index (each output element reads at most one element of each operand);
- reduction, with its layout: *row* (the reduced axes are the innermost non-unit
  axes: contiguous), *column* (an outer or middle axis is reduced: strided) or
  *full* (every non-unit axis is reduced);
- contraction (matmul, batch_matmul), *fine-grained* when its flop count is at most
  a threshold (small GEMMs that may take an elementwise prologue and epilogue into
  their kernel) and *large* otherwise (a library call: never fused);
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


class OpClass(enum.Enum):
    LIGHT_ELEMENTWISE = "light-elementwise"
    EXPENSIVE_ELEMENTWISE = "expensive-elementwise"
    BROADCAST = "broadcast"
    INJECTIVE = "injective"
    REDUCTION = "reduction"
    CONTRACTION = "contraction"
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


LIGHT_ELEMENTWISE_OPS: tuple[type[Operation], ...] = (
    graph.AddOp,
    graph.SubOp,
    graph.MulOp,
    graph.MaxOp,
    graph.MinOp,
    graph.NegOp,
    graph.AbsOp,
    graph.ReluOp,
    graph.CompareOp,
    graph.SelectOp,
    graph.CastOp,
)

# Relative cost of one element, in light-op units (an add is 1): divisions and roots
# take several instructions, transcendental functions a polynomial or an SFU round trip.
EXPENSIVE_ELEMENT_COST: dict[type[Operation], float] = {
    graph.DivOp: 4.0,
    graph.RemOp: 6.0,  # a division and a fix-up (floats: a libm fmod call on the CPU)
    graph.SqrtOp: 4.0,
    graph.RsqrtOp: 4.0,
    graph.ReciprocalOp: 4.0,
    graph.ExpOp: 8.0,
    graph.LogOp: 8.0,
    graph.TanhOp: 10.0,
    graph.ErfOp: 10.0,
    graph.SigmoidOp: 10.0,
    graph.PowOp: 16.0,
    graph.GeluOp: 20.0,
}

INJECTIVE_OPS: tuple[type[Operation], ...] = (
    graph.TransposeOp,
    graph.ReshapeOp,
    graph.SliceOp,
    graph.PadOp,
    graph.ConcatOp,
    graph.GatherOp,  # an indirect index: one element of the data per output element
    graph.GatherElementsOp,
)

REDUCTION_OPS: tuple[type[Operation], ...] = (
    graph.ReduceSumOp,
    graph.ReduceMaxOp,
    graph.ReduceMinOp,
    graph.ReduceMeanOp,
    graph.ReduceProdOp,
)

CONTRACTION_OPS: tuple[type[Operation], ...] = (graph.MatmulOp, graph.BatchMatmulOp)


@dataclass(frozen=True)
class OpInfo:
    """The class of one op and what the planner needs to know about it."""

    op_class: OpClass
    element_cost: float = 0.0  # light-op units per output element (elementwise ops)
    reduction: ReductionLayout | None = None
    row_length: int = 0  # reduced elements per output element (reductions)
    contraction: ContractionSize | None = None
    gemm_flops: int = 0  # 2 * M * N * K * batch (contractions)

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


def classify(op: Operation, fine_gemm_flops: int = DEFAULT_FINE_GEMM_FLOPS) -> OpInfo:
    """The `OpInfo` of `op`; a contraction is fine-grained up to `fine_gemm_flops`."""
    if isinstance(op, LIGHT_ELEMENTWISE_OPS):
        return OpInfo(OpClass.LIGHT_ELEMENTWISE, element_cost=1.0)
    if type(op) in EXPENSIVE_ELEMENT_COST:
        return OpInfo(OpClass.EXPENSIVE_ELEMENTWISE, element_cost=EXPENSIVE_ELEMENT_COST[type(op)])
    if isinstance(op, graph.BroadcastOp):
        return OpInfo(OpClass.BROADCAST)
    if isinstance(op, INJECTIVE_OPS):
        return OpInfo(OpClass.INJECTIVE)
    if isinstance(op, REDUCTION_OPS):
        assert isinstance(op, graph.ReduceOp)
        shape = graph.shape_of(op.input)
        axes = op.reduce_axes
        return OpInfo(
            OpClass.REDUCTION,
            element_cost=1.0,
            reduction=reduction_layout(shape, axes),
            row_length=math.prod(shape[a] for a in axes),
        )
    if isinstance(op, CONTRACTION_OPS):
        flops = contraction_flops(op)
        size = ContractionSize.FINE if flops <= fine_gemm_flops else ContractionSize.LARGE
        return OpInfo(OpClass.CONTRACTION, contraction=size, gemm_flops=flops)
    if isinstance(op, graph.ConstantOp):
        return OpInfo(OpClass.CONSTANT)
    return OpInfo(OpClass.OPAQUE)
