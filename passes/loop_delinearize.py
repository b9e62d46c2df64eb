"""loop-delinearize: a nest dimension d that the accesses use only through
`d floordiv k` and `d mod k` (a reshape lowered with a transpose) becomes two, d = k * a + b
(mlfuse.poly.delinearize).

Divisions that the dimensions' extents make exact are simplified first (x floordiv 128
and x mod 128 over x < 128: 0 and x). Each access is then plain affine, and the nest's
points run in the same order
(bitwise the same results). Divisors k of the extent are tried from the smallest; a
split is made only when no floordiv or mod of the dimension is left. Nests whose body
names a dimension (`loop.index dim`), or whose bounds are not constants from 0, stay
as they are.

Before (-p loop-delinearize):
    loop.nest "transpose" lower [0, 0] upper [128, 256] iterators ["parallel", "parallel"]
        ins(%o : memref<1x4x128x64xf32>) outs(%y : memref<128x256xf32>)
        maps [affine_map<(d0, d1) -> (d1 floordiv 256, (d1 floordiv 64) mod 4, d0, d1 mod 64)>,
              affine_map<(d0, d1) -> (d0, d1)>] {...}
After:
    loop.nest "transpose" lower [0, 0, 0] upper [128, 4, 64] iterators ["parallel", "parallel", "parallel"]
        ins(%o : memref<1x4x128x64xf32>) outs(%y : memref<128x256xf32>)
        maps [affine_map<(d0, d1, d2) -> (0, d1, d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d1 * 64 + d2)>] {...}
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.poly.delinearize import delinearize
from mlfuse.poly.program import functions


@dataclass(frozen=True)
class LoopDelinearizePass(ModulePass):
    name = "loop-delinearize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in functions(op):
            delinearize(fn)
