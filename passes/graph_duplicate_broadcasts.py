"""graph-duplicate-broadcasts: a broadcast read by several ops is given to each reader
the fusion planner may fuse as a copy of its own (mlfuse.duplicate_broadcasts), so
that the readers' kernels read the broadcast's small input instead of a shared,
materialized broadcast. Readers that cannot fuse it (large GEMMs, opaque ops, the
function's return) share the original.

It runs right before fusion-plan in the fusing pipelines (mlfuse.pipelines), after
CSE, which would merge the copies again.

Before (-p graph-duplicate-broadcasts):
    %b = graph.broadcast %m {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
    %0 = graph.add %x, %b : tensor<4x8xf32>
    %1 = graph.mul %y, %b : tensor<4x8xf32>
After:
    %b = graph.broadcast %m {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
    %0 = graph.add %x, %b : tensor<4x8xf32>
    %b1 = graph.broadcast %m {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
    %1 = graph.mul %y, %b1 : tensor<4x8xf32>
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.duplicate_broadcasts import duplicate_broadcasts


@dataclass(frozen=True)
class GraphDuplicateBroadcastsPass(ModulePass):
    name = "graph-duplicate-broadcasts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        duplicate_broadcasts(op)
