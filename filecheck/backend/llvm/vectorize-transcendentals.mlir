// exp, tanh and erf alone: expand-math's expansions vectorize (8 lanes for AVX-512
// Skylake's preferred 256-bit vectors), call no libm function, and clamp without
// llvm.minimum/maximum (whose NaN and signed-zero fixups cost extra x86 instructions).
// RUN: mlfuse-opt %s -p convert-graph-to-loop,convert-loop-to-scf,expand-math,convert-to-llvm -t 'llvm-opt{cpu=skylake-avx512}' | filecheck %s

// CHECK-NOT: @llvm.minimum
// CHECK-NOT: @llvm.maximum
// CHECK-NOT: call float @
// CHECK-LABEL: define void @main(
// CHECK: load <8 x float>
// CHECK: call <8 x float> @llvm.fmuladd.v8f32(
// CHECK: fdiv <8 x float>
// CHECK: or <8 x i32>
// CHECK: store <8 x i32>
// CHECK: ret void
// CHECK-NOT: @llvm.minimum
// CHECK-NOT: @llvm.maximum
// CHECK-NOT: call float @
func.func @main(%x: tensor<64x256xf32>) -> (tensor<64x256xf32>, tensor<64x256xf32>, tensor<64x256xf32>) {
  %e = graph.exp %x : tensor<64x256xf32>
  %t = graph.tanh %x : tensor<64x256xf32>
  %r = graph.erf %x : tensor<64x256xf32>
  func.return %e, %t, %r : tensor<64x256xf32>, tensor<64x256xf32>, tensor<64x256xf32>
}
