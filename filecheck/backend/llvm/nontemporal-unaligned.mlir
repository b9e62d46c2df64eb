// Rows of 1001 floats start anywhere in a cache line, so LLVM could not prove a
// vector store of them aligned (and x86 has no unaligned non-temporal vector
// store). convert-loop-to-scf peels each row (loop.aligned_window): the whole lines
// of the row stream with aligned non-temporal stores (256-bit: skylake-avx512
// prefers them), and the partial lines at either end combine with the neighbouring
// rows' in a line of scratch that streams as one vector (or go out plainly).
// RUN: mlfuse-opt %s -p convert-graph-to-loop,assign-buffers,convert-loop-to-scf,expand-math,convert-to-llvm -t 'llvm-opt{cpu=skylake-avx512 features="+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx2,+avx,+fma"}' | filecheck %s

// CHECK-LABEL: define void @main__0_exp(
// CHECK: call align 64 ptr @llvm.ptrmask.p0.i64(ptr %{{.*}}, i64 -64)
// CHECK-DAG: store <8 x float> %{{.*}}, ptr %{{.*}}, align 32, !tbaa !{{[0-9]+}}, !nontemporal
// CHECK-DAG: store <16 x float> %{{.*}}, ptr %{{.*}}, align 64, !tbaa !{{[0-9]+}}, !nontemporal
// CHECK: call void @llvm.x86.sse.sfence()
func.func @main(%x: tensor<16384x1001xf32>) -> tensor<16384x1001xf32> {
  %y = graph.exp %x : tensor<16384x1001xf32>
  func.return %y : tensor<16384x1001xf32>
}
