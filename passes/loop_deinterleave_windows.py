"""loop-deinterleave-windows: a tile-local buffer that windows read at column stride 2 is
stored as rows of its even columns, then its odd ones, so that each tap reads along its
output row at unit stride (mlfuse.poly.deinterleave_windows); the nests that fill it and
copy into it write the new layout. The results are the same bits. MobileNetV2's
96-channel 112 -> 56 depthwise conv: 48 of each row's 56 outputs had vector code,
the last 8 scalar.

Before (-p loop-deinterleave-windows):
    %p = memref.alloca() : memref<1x9x9xf32>
    loop.nest "pad_fill" lower [0, 0, 0] upper [1, 9, 9] ... outs(%p) maps [(d0, d1, d2) -> (d0, d1, d2)]
    loop.nest "pad_copy" lower [0, 0, 0] upper [1, 8, 8] ins(%x) outs(%p)
        maps [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d0, d1 + 1, d2 + 1)]
    loop.nest "pool_max" lower [0, 0, 0, 0, 0] upper [1, 4, 4, 3, 3] ins(%p) outs(%y)
        maps [(d0, d1, d2, d3, d4) -> (d0, d1 * 2 + d3, d2 * 2 + d4), (d0, d1, d2, d3, d4) -> (d0, d1, d2)]
After:
    %p = memref.alloca() : memref<1x9x2x5xf32>
    loop.nest "pad_fill" lower [0, 0, 0, 0] upper [1, 9, 2, 5] ... maps [(d0, d1, d2, d3) -> (d0, d1, d2, d3)]
    loop.nest "pad_copy" lower [0, 0, 0, 0] upper [1, 8, 4, 2] ins(%x) outs(%p)
        maps [(d0, d1, d2, d3) -> (d0, d1, d2 * 2 + d3), (d0, d1, d2, d3) -> (d0, d1 + 1, 1 - d3, d2 + d3)]
    loop.nest "pool_max" ... ins(%p) outs(%y)
        maps [(d0, d1, d2, d3, d4) -> (d0, d1 * 2 + d3, d4 mod 2, d2 + d4 floordiv 2), ...]

Not deinterleaved: a buffer that is no tile-local alloca used by nests only, one that a
nest reads other than by a stride-2 window, or writes other than by a copy at column
d + c over an even number of columns or a fill of whole rows.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.poly.deinterleave_windows import deinterleave_windows
from mlfuse.poly.program import functions


@dataclass(frozen=True)
class LoopDeinterleaveWindowsPass(ModulePass):
    name = "loop-deinterleave-windows"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in functions(op):
            deinterleave_windows(fn)
