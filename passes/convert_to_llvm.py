"""convert-to-llvm: lower func, arith, math, scf, memref and loop ops to xDSL's llvm dialect.

The conversion is a set of rewrite patterns (mlfuse.conversion.to_llvm and
mlfuse.conversion.llvm_runtime): scf goes to cf with xDSL's patterns, each other op
has its own, type boundaries are bridged by unrealized casts that a final
reconcile removes, and an op no pattern lowers is reported at its location.
Memrefs of static shape become bare pointers indexed by inbounds GEPs on the
linearized index (vectorizable); scf.for becomes a CFG; memref.alloc/dealloc call
aligned_alloc/free; loop.parallel_call becomes a GOMP_parallel call with a
generated per-thread wrapper. Buffer arguments are noalias. A multiply and an add
that both allow contraction (`contract`), the product used there only, become one
llvm.fmuladd: an fma wherever the target has one. A loop.gemm becomes
a team call of a generated, register-blocked kernel (its body is written when the
module is translated to LLVM IR, for the target's vector width:
mlfuse/backend/gemm_kernels.py); with gemm=blas it calls scipy's BLAS (best with
OMP_WAIT_POLICY=passive: BLAS's threads and a spinning team share the cores).

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

    gemm: str = "generated"
    """How loop.gemm runs: `generated` kernels or `blas` (scipy's BLAS)."""

    output_alignment: int = 64
    """Bytes to which the entry's outputs are aligned (a power of two from 16: the runtime
    compiles a 16-byte variant for out= arrays from np.empty)."""

    def __post_init__(self) -> None:
        if self.gemm not in ("generated", "blas"):
            raise ValueError(f"convert-to-llvm: gemm must be 'generated' or 'blas', got '{self.gemm}'")
        a = self.output_alignment
        if a < 16 or a & (a - 1):
            raise ValueError(f"convert-to-llvm: output-alignment must be a power of two >= 16, got {a}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        convert_to_llvm(op, self.fast_math, self.gemm, self.output_alignment)
