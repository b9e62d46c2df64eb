"""loop-trim-fills: a fill writes only the elements that the next writer of its buffer
leaves, as disjoint boxes (mlfuse.poly.fill_trimming): a pad's fill inside a tile
writes the border, not the interior its copy then overwrites.

Before (-p loop-trim-fills):
    loop.nest "pad_fill" lower [0, 0] upper [6, 6] iterators ["parallel", "parallel"]
        ins() outs(%p : memref<6x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>] {
      %z = arith.constant 0.0 : f32
      loop.yield %z : f32
    }
    loop.nest "pad_copy" lower [0, 0] upper [4, 4] iterators ["parallel", "parallel"]
        ins(%x : memref<4x4xf32>) outs(%p : memref<6x6xf32>)
        maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0 + 1, d1 + 1)>] {...}
After:
    loop.nest "pad_fill" lower [0, 0] upper [1, 6] ... {...}   // the top row
    loop.nest "pad_fill" lower [1, 0] upper [5, 1] ... {...}   // the left column
    loop.nest "pad_fill" lower [1, 5] upper [5, 6] ... {...}   // the right column
    loop.nest "pad_fill" lower [5, 0] upper [6, 6] ... {...}   // the bottom row
    loop.nest "pad_copy" ...
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.poly.fill_trimming import trim_fills
from mlfuse.poly.program import functions


@dataclass(frozen=True)
class LoopTrimFillsPass(ModulePass):
    name = "loop-trim-fills"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in functions(op):
            trim_fills(fn)
