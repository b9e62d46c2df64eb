"""loop-forward-copies: a copy nest whose source nothing else reads goes; the nests that
wrote the source write the copy's destination through the copy's map
(mlfuse.poly.forward_copies). U-Net's decoder: the concat's pieces and the upsampled
image write the interior of the next conv's padded input, no pad copy of the concat.

Before (-p loop-forward-copies):
    %y = memref.alloc() : memref<1x4x8x8xf32>
    loop.nest "concat" lower [0, 0, 0, 0] upper [1, 2, 8, 8] ins(%a) outs(%y)
        maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]
    loop.nest "concat" lower [0, 0, 0, 0] upper [1, 2, 8, 8] ins(%b) outs(%y)
        maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1 + 2, d2, d3)>]
    %p = memref.alloc() : memref<1x4x10x10xf32>
    loop.nest "pad_copy" lower [0, 0, 0, 0] upper [1, 4, 8, 8] ins(%y) outs(%p)
        maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 + 1, d3 + 1)>]
After:
    %p = memref.alloc() : memref<1x4x10x10xf32>
    loop.nest "concat" ... ins(%a) outs(%p) maps [..., affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 + 1, d3 + 1)>]
    loop.nest "concat" ... ins(%b) outs(%p) maps [..., affine_map<(d0, d1, d2, d3) -> (d0, d1 + 2, d2 + 1, d3 + 1)>]

Not forwarded: a source that anything else reads, a function argument, a writer that
is a GEMM's epilogue (loop-gemm-epilogue-fuse wants it), a copy that converts or reads
part of its source.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.poly.forward_copies import forward_copies
from mlfuse.poly.program import functions


@dataclass(frozen=True)
class LoopForwardCopiesPass(ModulePass):
    name = "loop-forward-copies"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in functions(op):
            forward_copies(fn)
