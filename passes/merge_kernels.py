"""merge-kernels: private functions with identical bodies become one (mlfuse.merge_kernels).

Twins are private definitions of one type, with the same argument and result
attributes and structurally equivalent bodies. The first in module order is kept;
the calls of every later twin (func.call, loop.parallel_call: any reference to its
symbol) call the first, and the twin is erased. The CPU pipeline runs it after
convert-loop-to-scf has outlined each kernel, so that repeated layers are lowered
once (MobileNetV2: 117 kernels, 68 bodies).

Before (-p merge-kernels):
    func.func @main(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
      func.call @main__0_exp(%x, %y) : (memref<8xf32>, memref<8xf32>) -> ()
      func.call @main__1_exp(%y, %z) : (memref<8xf32>, memref<8xf32>) -> ()
      func.return
    }
    func.func private @main__0_exp(%a: memref<8xf32>, %b: memref<8xf32>) { ...the same body... }
    func.func private @main__1_exp(%a: memref<8xf32>, %b: memref<8xf32>) { ...the same body... }
After:
    func.func @main(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
      func.call @main__0_exp(%x, %y) : (memref<8xf32>, memref<8xf32>) -> ()
      func.call @main__0_exp(%y, %z) : (memref<8xf32>, memref<8xf32>) -> ()
      func.return
    }
    func.func private @main__0_exp(%a: memref<8xf32>, %b: memref<8xf32>) { ... }
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.merge_kernels import merge_kernels


@dataclass(frozen=True)
class MergeKernelsPass(ModulePass):
    name = "merge-kernels"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        merge_kernels(op)
