// Streaming stores after O3: the vector stores of a large output, proven 64-byte
// aligned (the runtime aligns outputs; rows of 1024 floats keep it), become
// non-temporal, and the kernel fences before it returns. The rows start whole
// cache lines into the buffer, so LLVM folds their peel away (rows of 1001 floats
// keep it: nontemporal-unaligned.mlir).
// RUN: mlfuse-opt %s -p convert-graph-to-loop,assign-buffers,convert-loop-to-scf,expand-math,convert-to-llvm -t 'llvm-opt{cpu=skylake-avx512 features="+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx2,+avx,+fma"}' | filecheck %s

// CHECK-LABEL: define {{.*}}@main(
// CHECK-SAME: ptr noalias align 64
// CHECK-NOT: llvm.ptrmask
// CHECK: store <{{8|16}} x float> {{.*}}, align {{32|64}}, {{.*}}!nontemporal
// CHECK: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: ret void
func.func @main(%x: tensor<16384x1024xf32>) -> tensor<16384x1024xf32> {
  %y = graph.exp %x : tensor<16384x1024xf32>
  func.return %y : tensor<16384x1024xf32>
}
