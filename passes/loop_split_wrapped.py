"""loop-split-wrapped: a nest that reads along its innermost parallel dimension through
`(d + c) mod n` (a register-stitched pad) runs as one nest per piece of that dimension
the wrap cuts it into, the mods dropped where they cannot wrap, so that LLVM
vectorizes the inside (mlfuse.poly.split_wrapped).

Before (-p loop-split-wrapped):
    loop.nest "relu_pad" lower [0, 0] upper [4, 10] iterators ["parallel", "parallel"]
        ins(%x : memref<4x8xf32>) outs(%y : memref<4x10xf32>)
        maps [affine_map<(d0, d1) -> (d0, (d1 - 1) mod 8)>, affine_map<(d0, d1) -> (d0, d1)>] {...}
After:
    loop.nest "relu_pad" lower [0, 0] upper [4, 1] ... maps [affine_map<(d0, d1) -> (d0, (d1 - 1) mod 8)>, ...] {...}
    loop.nest "relu_pad" lower [0, 1] upper [4, 9] ... maps [affine_map<(d0, d1) -> (d0, d1 - 1)>, ...] {...}
    loop.nest "relu_pad" lower [0, 9] upper [4, 10] ... maps [affine_map<(d0, d1) -> (d0, (d1 - 1) mod 8)>, ...] {...}
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.poly.program import functions
from mlfuse.poly.split_wrapped import split_wrapped


@dataclass(frozen=True)
class LoopSplitWrappedPass(ModulePass):
    name = "loop-split-wrapped"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in functions(op):
            split_wrapped(fn)
