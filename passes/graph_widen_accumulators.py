"""graph-widen-accumulators: ops that add up many terms (the `Accumulates` trait: sums,
means, products, matrix products, convolutions, average pools) on f16 or bf16 run on
f32 copies of their operands and round their result once (mlfuse.widen_accumulators),
as numpy and onnxruntime keep their partial sums wide. Ops on other types, and
the ops that only pick an element (max, min, max pools), are left alone.

It runs in every graph pipeline (mlfuse.pipelines.GRAPH_CLEANUP), after inline.

Before (-p graph-widen-accumulators):
    %y = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<4x64xf16> -> tensor<4xf16>
After:
    %0 = graph.cast %x : tensor<4x64xf16> -> tensor<4x64xf32>
    %1 = graph.reduce_sum %0 {axes = array<i64: 1>} : tensor<4x64xf32> -> tensor<4xf32>
    %y = graph.cast %1 : tensor<4xf32> -> tensor<4xf16>
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.widen_accumulators import widen_accumulators


@dataclass(frozen=True)
class GraphWidenAccumulatorsPass(ModulePass):
    name = "graph-widen-accumulators"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        widen_accumulators(op)
