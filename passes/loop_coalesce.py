"""loop-coalesce: merge adjacent dimensions of a nest that every access walks as one
contiguous run (mlfuse.poly.coalesce).

Dimensions d and d + 1 of a nest directly in a function, with constant bounds from 0
and one iterator kind, become one when each access map either leaves both out or has
them as two adjacent results, exactly (d, d + 1), over a memref dimension as long as
the loop over d + 1; those buffers are seen through a `loop.view` with the two
dimensions merged. The order of iterations is unchanged. Not merged: dimensions a
`loop.index` names, windows (d0 + d4), offsets (d1 + 1), partial rows, nests in bands.

Before (-p loop-coalesce):
    func.func @f(%t: memref<1x8x28x28xf32>, %b: memref<8xf32>, %y: memref<1x8x28x28xf32>) {
      loop.nest "relu" lower [0, 0, 0, 0] upper [1, 8, 28, 28] iterators [4 x "parallel"]
          ins(%t, %b : ...) outs(%y : ...)
          maps [(d0, d1, d2, d3) -> (d0, d1, d2, d3), (d0, d1, d2, d3) -> (d1), (d0, d1, d2, d3) -> (d0, d1, d2, d3)] {...}
    }
After:
      %tv = loop.view %t : memref<1x8x28x28xf32> to memref<1x8x784xf32>
      %yv = loop.view %y : memref<1x8x28x28xf32> to memref<1x8x784xf32>
      loop.nest "relu" lower [0, 0, 0] upper [1, 8, 784] iterators [3 x "parallel"]
          ins(%tv, %b : ...) outs(%yv : ...)
          maps [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d1), (d0, d1, d2) -> (d0, d1, d2)] {...}
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.poly.coalesce import coalesce_loops


@dataclass(frozen=True)
class LoopCoalescePass(ModulePass):
    name = "loop-coalesce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        coalesce_loops(op)
