"""loop-storage-reduce: intermediates used only inside a tile become tile-local buffers.

1. A top-level `memref.alloc` used only inside one tile band, where every tile
   reads only elements it wrote earlier, moves into the band as per-tile scratch.
2. Every scratch buffer of a tile band shrinks to the box its tile touches: the
   origin is an affine function O(T) of the tile index and the size the largest
   extent over all tiles (isl), so `memref<1002x1000xf32>` becomes
   `memref<66x256xf32>` and an access `x` becomes `x - O(T)`.
3. Intermediates with no use left but their dealloc disappear.

Before (after loop-post-tile-fuse):
    loop.band "blur_y.tiles" upper [16, 4] {
    ^bb0(%t0: index, %t1: index):
      %s = memref.alloca() : memref<1002x1000xf32>
      loop.nest "blur_x" syms(%t0, %t1) ... outs(%s) maps [..., (d0, d1)[s0, s1] -> (d0, d1)]
      loop.nest "blur_y" syms(%t0, %t1) ... ins(%s, ...) maps [(d0, d1)[s0, s1] -> (d0 + 1, d1), ...]
    }
After:
      %s = memref.alloca() : memref<66x256xf32>
      loop.nest "blur_x" ... maps [..., (d0, d1)[s0, s1] -> (d0 - s0 * 64, d1 - s1 * 256)]
      loop.nest "blur_y" ... maps [(d0, d1)[s0, s1] -> (d0 + 1 - s0 * 64, d1 - s1 * 256), ...]
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.poly.program import functions
from mlfuse.poly.storage import storage_reduce


@dataclass(frozen=True)
class LoopStorageReducePass(ModulePass):
    name = "loop-storage-reduce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in functions(op):
            storage_reduce(fn)
