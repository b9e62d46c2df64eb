"""loop-gemm-epilogue-fuse{remarks=false}: fold the elementwise nest that reads a
`loop.gemm`'s product into the product's epilogue (mlfuse.poly.gemm_epilogue_fusion).

A product into a fresh buffer C that only one nest reads, right after it (allocs,
deallocs and views between), where the nest walks C's shape in parallel, reads C by
the identity map and writes one new output of C's shape, becomes one product into
that output whose `epilogue` region is the nest's body; C goes away. The generated
kernel applies the epilogue to its register tile before the last store
(mlfuse/backend/gemm_kernels.py). Not folded: C read by anything else, a nest that
reduces, reads the output, broadcasts C or uses an op the kernel does not generate
(math.exp, a loop.read: mlfuse/conversion/gemm_epilogue.py), ops in between that
touch memory.

Before (-p loop-gemm-epilogue-fuse):
    %c = memref.alloc() : memref<1x64x3136xf32>
    loop.gemm %w, %x into %c : memref<1x64x576xf32>, memref<1x576x3136xf32>, memref<1x64x3136xf32>
    loop.nest "relu" lower [0, 0, 0] upper [1, 64, 3136] iterators [3 x "parallel"]
        ins(%c, %bias : ...) outs(%y : memref<1x64x3136xf32>)
        maps [(d0, d1, d2) -> (d0, d1, d2), (d0, d1, d2) -> (d1), (d0, d1, d2) -> (d0, d1, d2)] {
    ^bb0(%p: f32, %b: f32, %o: f32):
      %s = arith.addf %p, %b : f32
      ...relu of %s...
      loop.yield %r : f32
    }
    memref.dealloc %c : memref<1x64x3136xf32>
After:
    loop.gemm %w, %x into %y epilogue ins(%bias : memref<64xf32>) {
    ^bb0(%p: f32, %b: f32):
      %s = arith.addf %p, %b : f32
      ...relu of %s...
      loop.yield %r : f32
    } {epilogue_maps = [affine_map<(d0, d1, d2) -> (d1)>]} : memref<1x64x576xf32>, memref<1x576x3136xf32>, memref<1x64x3136xf32>
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.poly.gemm_epilogue_fusion import fuse_gemm_epilogues
from mlfuse.poly.program import print_remark


@dataclass(frozen=True)
class LoopGemmEpilogueFusePass(ModulePass):
    name = "loop-gemm-epilogue-fuse"

    remarks: bool = False
    """Say on stderr why a product's nest was not folded."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse_gemm_epilogues(op, print_remark if self.remarks else None)
