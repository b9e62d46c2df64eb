"""convert-to-llvm: lower func, arith, math, scf, memref and loop ops to xDSL's llvm dialect.

Memrefs of static shape become bare pointers indexed by inbounds GEPs on the
linearized index (vectorizable); scf.for becomes a CFG; memref.alloc/dealloc call
aligned_alloc/free; loop.parallel_call becomes a GOMP_parallel call with a
generated per-thread wrapper. Buffer arguments are noalias.

Before:
    func.func @main(%x: memref<8xf32>, %y: memref<8xf32>) {
      %v = memref.load %x[%i] : memref<8xf32>
      ...
After:
    llvm.func @main(%x: !llvm.ptr {llvm.noalias}, %y: !llvm.ptr {llvm.noalias}) {
      %p = llvm.getelementptr inbounds %x[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      %v = llvm.load %p {alignment = 4 : i64} : !llvm.ptr -> f32
      ...
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.conversion.to_llvm import convert_to_llvm


@dataclass(frozen=True)
class ConvertToLlvmPass(ModulePass):
    name = "convert-to-llvm"

    fast_math: bool = False
    """Allow nnan, ninf, nsz, arcp and contract on every float op (FMAs, reciprocals)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        convert_to_llvm(op, self.fast_math)
