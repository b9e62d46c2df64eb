// The JIT's O3 pipeline vectorizes elementwise kernels, transcendentals included
// (expand-math leaves no libm calls), and keeps the reduction in vector registers.
// RUN: mlfuse-opt %s -p convert-graph-to-loop,convert-loop-to-scf,expand-math,convert-to-llvm -t 'llvm-opt{cpu=skylake-avx512}' | filecheck %s --check-prefix=GELU
// RUN: mlfuse-opt %s -p convert-graph-to-loop,convert-loop-to-scf,expand-math,convert-to-llvm -t 'llvm-opt{cpu=skylake-avx512}' | filecheck %s --check-prefix=SUM

// GELU-LABEL: define void @main__0_gelu(i64
// GELU: load <8 x float>
// GELU: fmul <8 x float>
// GELU: store <8 x float>
// GELU-NOT: call float @tanhf
// GELU: ret void
// SUM-LABEL: define void @main__2_reduce_sum(i64
// SUM: fadd reassoc <8 x float>
func.func @main(%x: tensor<256x256xf32>) -> (tensor<256x256xf32>, tensor<256xf32>) {
  %g = graph.gelu %x {approximate = "tanh"} : tensor<256x256xf32>
  %s = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<256x256xf32> -> tensor<256xf32>
  func.return %g, %s : tensor<256x256xf32>, tensor<256xf32>
}
