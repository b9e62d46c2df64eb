// A stitched row kernel over a 64 MiB input: after O3 each vector load of the
// streamed rows is followed by a software prefetch 8 KiB ahead, and the rows are
// written with non-temporal stores. Without streaming, neither.
// RUN: mlfuse-opt %s -p 'fusion-plan{planner=ilp target=cpu summary=false},convert-graph-to-loop,assign-buffers,convert-loop-to-scf,expand-math,convert-to-llvm' -t 'llvm-opt{cpu=skylake-avx512 features="+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx2,+avx,+fma"}' | filecheck %s
// RUN: mlfuse-opt %s -p 'fusion-plan{planner=ilp target=cpu summary=false},convert-graph-to-loop,assign-buffers,convert-loop-to-scf{streaming=false},expand-math,convert-to-llvm' -t 'llvm-opt{cpu=skylake-avx512 features="+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx2,+avx,+fma"}' | filecheck %s --check-prefix=OFF

// CHECK: %[[V:.*]] = load <{{8|16}} x float>, ptr %[[P:.*]], align 4, !tbaa
// CHECK-NEXT: %[[AHEAD:.*]] = getelementptr i8, ptr %[[P]], i64 8192
// CHECK-NEXT: call void @llvm.prefetch.p0(ptr %[[AHEAD]], i32 0, i32 3, i32 1)
// CHECK: store <{{8|16}} x float> {{.*}}!nontemporal
// CHECK: declare void @llvm.prefetch.p0(ptr, i32, i32, i32)
// OFF-NOT: llvm.prefetch
// OFF-NOT: !nontemporal
func.func @main(%x: tensor<16384x1024xf32>) -> tensor<16384x1024xf32> {
  %s = graph.reduce_sum %x {axes = array<i64: 1>, keepdims} : tensor<16384x1024xf32> -> tensor<16384x1xf32>
  %b = graph.broadcast %s {dims = array<i64: 0, 1>} : tensor<16384x1xf32> -> tensor<16384x1024xf32>
  %y = graph.div %x, %b : tensor<16384x1024xf32>
  func.return %y : tensor<16384x1024xf32>
}
