// Rows of 1001 floats: LLVM cannot prove the vector stores 64-byte aligned, and
// x86 has no unaligned non-temporal vector store, so the stores stay plain.
// RUN: mlfuse-opt %s -p convert-graph-to-loop,assign-buffers,convert-loop-to-scf,expand-math,convert-to-llvm -t 'llvm-opt{cpu=skylake-avx512 features="+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx2,+avx,+fma"}' | filecheck %s

// CHECK-LABEL: define {{.*}}@main(
// CHECK-NOT: !nontemporal
// CHECK-NOT: sfence
func.func @main(%x: tensor<16384x1001xf32>) -> tensor<16384x1001xf32> {
  %y = graph.exp %x : tensor<16384x1001xf32>
  func.return %y : tensor<16384x1001xf32>
}
