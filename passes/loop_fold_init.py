"""loop-fold-init: a small window reduction reads its start value instead of a nest
writing it first (mlfuse.poly.init_folding).

A constant init nest (all parallel, no inputs) that writes exactly the elements a
following reduction nest sums into, with nothing touching that buffer in between,
goes away; the reduction carries the constant as `init`, read by each output
element's first reduction step (convert-loop-to-scf). Only reductions of at most
MAX_REDUCTION_POINTS points per element over constant bounds (conv and pooling
windows), where LLVM unrolls the taps and the choice folds away.

Before (-p loop-fold-init):
    loop.nest "conv_init" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"]
        ins() outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>] {
      %z = arith.constant 0.0 : f32
      loop.yield %z : f32
    }
    loop.nest "conv2d" lower [0, 0, 0] upper [4, 3, 6] iterators ["parallel", "reduction", "parallel"]
        ins(%xp, %w : ...) outs(%y : memref<4x6xf32>) maps [..., affine_map<(d0, d1, d2) -> (d0, d2)>] {...}
After:
    loop.nest "conv2d" lower [0, 0, 0] upper [4, 3, 6] iterators ["parallel", "reduction", "parallel"]
        ins(%xp, %w : ...) outs(%y : memref<4x6xf32>) maps [..., affine_map<(d0, d1, d2) -> (d0, d2)>]
        init [0.000000e+00 : f32] {...}
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.poly.init_folding import fold_inits
from mlfuse.poly.program import functions


@dataclass(frozen=True)
class LoopFoldInitPass(ModulePass):
    name = "loop-fold-init"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in functions(op):
            fold_inits(fn)
