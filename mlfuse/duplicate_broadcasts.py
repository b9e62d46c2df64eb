"""A broadcast read by several ops, given to each fusible reader as a copy of its own
(the graph-duplicate-broadcasts pass).

CSE leaves one broadcast for all its readers: BERT's attention mask, broadcast to
1x4x128x128, and the scale 0.125, broadcast to the same shape, are each read by every
layer's softmax. A value read by two fusion groups crosses the boundary between them
through memory, so the plan had the first layer's softmax kernel write both
broadcasts out (256 KB each) for the second layer's kernel to read back.

A broadcast only maps an output index to an input index, so a reader that fuses its
own copy reads the small input instead: never more bytes, no more arithmetic. So each
reader the planner may fuse (`OpInfo.fusible`: not a large GEMM, not an opaque op)
gets a copy just before it; the readers that cannot fuse it (and the function's
return) share the original, or else the first reader keeps it.

    %b = graph.broadcast %m {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
    %0 = graph.add %x, %b : tensor<4x8xf32>
    %1 = graph.mul %y, %b : tensor<4x8xf32>
becomes
    %b = graph.broadcast %m {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
    %0 = graph.add %x, %b : tensor<4x8xf32>
    %b1 = graph.broadcast %m {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
    %1 = graph.mul %y, %b1 : tensor<4x8xf32>

It runs right before fusion-plan (CSE would merge the copies again).
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.traits import IsTerminator

from mlfuse.analysis.op_classes import classify
from mlfuse.dialects import graph


def fuses_a_copy(reader: Operation) -> bool:
    """Whether the planner may put a broadcast into `reader`'s kernel."""
    return not reader.has_trait(IsTerminator) and classify(reader).fusible


def in_program_order(op: Operation, readers: dict[Operation, None]) -> list[Operation]:
    """`readers` of `op` in program order (those in nested regions, which the walk along
    `op`'s block does not meet, last)."""
    ordered = []
    following = op.next_op
    while following is not None and len(ordered) < len(readers):
        if following in readers:
            ordered.append(following)
        following = following.next_op
    return ordered + [r for r in readers if r not in ordered]


class DuplicateSharedBroadcast(RewritePattern):
    """broadcast(x) read by ops r1..rn -> one broadcast(x) per fusible reader."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.BroadcastOp, rewriter: PatternRewriter) -> None:
        readers = {use.operation: None for use in op.result.uses}  # each op once
        if len(readers) < 2:
            return  # before the walk that orders them: most broadcasts have one reader
        readers = in_program_order(op, readers)
        fusing = [r for r in readers if fuses_a_copy(r)]
        if len(fusing) == len(readers):
            fusing = fusing[1:]  # the first reader keeps the original
        for reader in fusing:
            copy = op.clone()
            rewriter.insert(copy, InsertPoint.before(reader))
            rewriter.replace_uses_with_if(op.result, copy.result, lambda use, r=reader: use.operation is r)


def duplicate_broadcasts(module: ModuleOp) -> None:
    PatternRewriteWalker(DuplicateSharedBroadcast(), apply_recursively=False).rewrite_module(module)
