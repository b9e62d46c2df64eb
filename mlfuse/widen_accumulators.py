"""Low-precision accumulations computed in f32 (the graph-widen-accumulators pass).

An op with the `Accumulates` trait (sums, means, products, matrix products,
convolutions, average pools) on f16 or bf16 adds up many terms per result element.
Lowered as it is, each partial sum is rounded to the narrow type: a product over
2048 f16 terms came out 2.7 off where the correctly rounded result is 0.05 off.
numpy (whose half-precision sums accumulate in float) and onnxruntime keep the
partial sums wide, and the ONNX node suite's expected values are theirs. So the op
runs on f32 copies of its low-precision operands and its result is rounded once:

    %y = graph.matmul %a, %b : (tensor<4x64xf16>, tensor<64x8xf16>) -> tensor<4x8xf16>
becomes
    %0 = graph.cast %a : tensor<4x64xf16> -> tensor<4x64xf32>
    %1 = graph.cast %b : tensor<64x8xf16> -> tensor<64x8xf32>
    %2 = graph.matmul %0, %1 : (tensor<4x64xf32>, tensor<64x8xf32>) -> tensor<4x8xf32>
    %y = graph.cast %2 : tensor<4x8xf32> -> tensor<4x8xf16>

The casts are elementwise ops the planner fuses like any other.
"""

from __future__ import annotations

from xdsl.dialects.builtin import BFloat16Type, Float16Type, ModuleOp, TensorType, f32
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

from mlfuse.dialects import graph

NARROW_FLOATS = (Float16Type, BFloat16Type)


def is_narrow_float(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType) and isinstance(graph.element_type_of(value), NARROW_FLOATS)


class WidenAccumulation(RewritePattern):
    """op(x: f16, ..) -> cast(op(cast(x, f32), ..), f16) for an op that Accumulates."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if graph.trait_of(op, graph.Accumulates) is None or len(op.results) != 1 or not is_narrow_float(op.results[0]):
            return
        narrow = graph.element_type_of(op.results[0])
        new_ops: list[Operation] = []
        operands = []
        for v in op.operands:
            if is_narrow_float(v):
                new_ops.append(graph.CastOp(v, f32))
                v = new_ops[-1].results[0]
            operands.append(v)
        wide = type(op).create(
            operands=operands,
            result_types=[TensorType(f32, graph.shape_of(op.results[0]))],
            properties=dict(op.properties),
            attributes=dict(op.attributes),
        )
        back = graph.CastOp(wide.results[0], narrow)
        for new in (*new_ops, wide, back):
            new.location = op.location
        rewriter.replace(op, [*new_ops, wide, back], [back.results[0]])


def widen_accumulators(module: ModuleOp) -> None:
    PatternRewriteWalker(WidenAccumulation(), apply_recursively=False).rewrite_module(module)
