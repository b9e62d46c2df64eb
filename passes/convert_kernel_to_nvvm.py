"""convert-kernel-to-nvvm: kernel-dialect ops -> llvm dialect with NVVM intrinsics.

Every `kernel.func` becomes an `llvm.func` marked `nvvm.kernel` (translated with the
ptx_kernel calling convention) whose buffer arguments are `!llvm.ptr<1>`; ids,
barriers, shuffles, shared buffers, atomics and grid barriers become NVVM
intrinsics, address-space-3 globals and inline PTX. Host code (`func.func` with
`kernel.launch`) is left as it is; the body's arith/math/scf/memref ops are lowered
by convert-to-llvm's pattern sets, to which mlfuse/backend/gpu/lowering.py adds the
kernel-dialect patterns.

Before:
    kernel.func @k(%x: memref<256xf32, 1>) attributes {block = array<i64: 256, 1, 1>} {
      %t = kernel.thread_id x
      %v = memref.load %x[%t] : memref<256xf32, 1>
      %s = kernel.shuffle xor %v, 16 : f32
      memref.store %s, %x[%t] : memref<256xf32, 1>
      kernel.return
    }
After:
    llvm.func @k(%x: !llvm.ptr<1> {llvm.noalias, llvm.align = 16 : i64})
        attributes {nvvm.kernel, nvvm.maxntid = array<i32: 256, 1, 1>} {
      %0 = llvm.call_intrinsic "llvm.nvvm.read.ptx.sreg.tid.x"() : () -> i32
      %t = llvm.zext %0 : i32 to i64
      %p = llvm.getelementptr inbounds %x[%t] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
      %v = llvm.load %p {alignment = 4 : i64} : !llvm.ptr<1> -> f32
      %m = llvm.mlir.constant(-1 : i32) : i32
      %o = llvm.mlir.constant(16 : i32) : i32
      %c = llvm.mlir.constant(31 : i32) : i32
      %s = llvm.call_intrinsic "llvm.nvvm.shfl.sync.bfly.f32"(%m, %v, %o, %c) : (i32, f32, i32, i32) -> f32
      llvm.store %s, %p {alignment = 4 : i64} : f32, !llvm.ptr<1>
      llvm.return
    }
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.backend.gpu.lowering import lower_kernels


@dataclass(frozen=True)
class ConvertKernelToNvvm(ModulePass):
    name = "convert-kernel-to-nvvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        lower_kernels(op)
