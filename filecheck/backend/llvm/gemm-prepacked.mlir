// A GEMM whose B is a constant that nothing else reads (a linear layer's weights):
// convert-to-llvm marks the global with the kernel that reads it (`_pb`) and gives it
// room for the panels under any blocking (20 columns -> 48, x 4 rows x 4 bytes = 768);
// the translation writes the bytes as the kernel's panels, and the kernel packs nothing.
// A constant A (a convolution's weights) likewise becomes row panels (`_pa`).
// RUN: mlfuse-opt %s --split-input-file -p convert-to-llvm | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p convert-to-llvm -t 'llvm{features="+avx2,+avx,+fma"}' | filecheck %s --check-prefix=IR
// RUN: mlfuse-opt %s --split-input-file -p 'convert-to-llvm{gemm=blas}' | filecheck %s --check-prefix=BLAS

// CHECK: llvm.mlir.global internal constant @w() {{.*}}mlfuse.packed_b = "mlfuse_gemm_f32_1x8x20x4_pb"{{.*}} : !llvm.array<768 x i8>
// CHECK: llvm.func @mlfuse_gemm_f32_1x8x20x4_pb(i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr)
// IR: @"w" = internal constant [768 x i8] c"
// IR-LABEL: define void @"mlfuse_gemm_f32_1x8x20x4_pb"
// IR-NOT: _pack
// IR-LABEL: define internal void @"mlfuse_gemm_f32_1x8x20x4_pb_micro4x20"
// BLAS-NOT: _pb
// BLAS: llvm.call @mlfuse_sgemm
"memref.global"() <{sym_name = "w", type = memref<4x20xf32>, initial_value = dense<0.5> : tensor<4x20xf32>, sym_visibility = "private", constant, alignment = 64 : i64}> : () -> ()
func.func @linear(%x: memref<1x8x4xf32>, %y: memref<1x8x20xf32>) {
  %w = memref.get_global @w : memref<4x20xf32>
  %b = loop.view %w : memref<4x20xf32> to memref<1x4x20xf32>
  loop.gemm %x, %b into %y : memref<1x8x4xf32>, memref<1x4x20xf32>, memref<1x8x20xf32>
  func.return
}

// -----

// Must not lay the weights out as panels: the global is also read as it is (by a load).
// The A of a product read by nothing else is laid out (8 rows -> 24, x 4 x 4 bytes = 384).
// CHECK: // -----
// CHECK-NOT: mlfuse.packed_b
// CHECK: llvm.mlir.global internal constant @lhs() {{.*}}mlfuse.packed_a = "mlfuse_gemm_f32_1x8x20x4_pa"{{.*}} : !llvm.array<384 x i8>
// CHECK-NOT: mlfuse.packed_b
// CHECK: llvm.func @mlfuse_gemm_f32_1x8x20x4(
// CHECK: llvm.func @mlfuse_gemm_f32_1x8x20x4_pa(
"memref.global"() <{sym_name = "shared", type = memref<4x20xf32>, initial_value = dense<0.5> : tensor<4x20xf32>, sym_visibility = "private", constant, alignment = 64 : i64}> : () -> ()
"memref.global"() <{sym_name = "lhs", type = memref<8x4xf32>, initial_value = dense<0.25> : tensor<8x4xf32>, sym_visibility = "private", constant, alignment = 64 : i64}> : () -> ()
func.func @not_packed(%x: memref<1x8x4xf32>, %y: memref<1x8x20xf32>, %z: memref<1x20x20xf32>, %v: memref<f32>) {
  %w = memref.get_global @shared : memref<4x20xf32>
  %b = loop.view %w : memref<4x20xf32> to memref<1x4x20xf32>
  loop.gemm %x, %b into %y : memref<1x8x4xf32>, memref<1x4x20xf32>, memref<1x8x20xf32>
  %c0 = arith.constant 0 : index
  %e = memref.load %w[%c0, %c0] : memref<4x20xf32>
  memref.store %e, %v[] : memref<f32>
  %l = memref.get_global @lhs : memref<8x4xf32>
  %a = loop.view %l : memref<8x4xf32> to memref<1x8x4xf32>
  loop.gemm %a, %b into %y : memref<1x8x4xf32>, memref<1x4x20xf32>, memref<1x8x20xf32>
  func.return
}
