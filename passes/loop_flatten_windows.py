"""loop-flatten-windows: a window nest over output rows of at most 16 runs over the rows'
flat positions in the input's row pitch, with the taps inside (mlfuse.poly.flatten_windows).
Its tile-local output buffer becomes as wide as the input's rows; the positions past
each row compute what nothing reads. MobileNetV3-small's 5x5 depthwise convs at 7x7:
rows of 7 had no vector wider than 4 lanes.

Before (-p loop-flatten-windows):
    %o = memref.alloca() : memref<1x7x7xf32>
    loop.nest "conv2d" lower [0, 0, 0, 0] upper [7, 5, 5, 7]
        iterators ["parallel", "reduction", "reduction", "parallel"]
        ins(%x, %w : memref<1x11x11xf32>, memref<5x5xf32>) outs(%o : memref<1x7x7xf32>)
        maps [affine_map<(d0, d1, d2, d3) -> (0, d0 + d1, d3 + d2)>, affine_map<(d0, d1, d2, d3) -> (d1, d2)>,
              affine_map<(d0, d1, d2, d3) -> (0, d0, d3)>] {...}
After:
    %o = memref.alloca() : memref<1x7x11xf32>
    %xf = loop.view %x : memref<1x11x11xf32> to memref<1x121xf32>
    %of = loop.view %o : memref<1x7x11xf32> to memref<1x77xf32>
    loop.nest "conv2d" lower [0, 0, 0] upper [73, 5, 5] iterators ["parallel", "reduction", "reduction"]
        ins(%xf, %w : memref<1x121xf32>, memref<5x5xf32>) outs(%of : memref<1x77xf32>)
        maps [affine_map<(d0, d1, d2) -> (0, d0 + d1 * 11 + d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>,
              affine_map<(d0, d1, d2) -> (0, d0)>] {...}

Not flattened: rows wider than 16, strides or dilations, an output that is not a
tile-local `memref.alloca` used by nests only, a body that names a dimension.
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.poly.flatten_windows import flatten_windows
from mlfuse.poly.program import functions


@dataclass(frozen=True)
class LoopFlattenWindowsPass(ModulePass):
    name = "loop-flatten-windows"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in functions(op):
            flatten_windows(fn)
