// A GEMM over a window's patches (loop.gemm {window}): the packing reads B's rows
// from the image at offsets from a table (row (c, i, j) at c*hp*wp + i*wp + j), with
// one load per vector when the panel's columns lie in one output row, and a chain of
// masked loads, one per output row, when they wrap. Here the output rows are 7 wide
// (a 3x3 window over 9x9), shorter than an AVX2 vector of 8: a vector may touch 2 rows.
// RUN: mlfuse-opt %s -p convert-to-llvm -t 'llvm{features="+avx2,+avx,+fma"}' | filecheck %s
// RUN: mlfuse-opt %s -p convert-to-llvm -t 'llvm{features="+avx2,+avx,+fma"}' | filecheck %s --check-prefix=TABLE
// RUN: mlfuse-opt %s -p convert-to-llvm -t 'llvm{features="+avx2,+avx,+fma"}' | filecheck %s --check-prefix=STRIDED

// TABLE: @"mlfuse_gemm_f32_1x8x49x18_w3x3x9x9_rows" = internal constant [18 x i32] [i32 0, i32 1, i32 2, i32 9, i32 10, i32 11, i32 18, i32 19, i32 20, i32 81,
// CHECK-LABEL: define void @"mlfuse_gemm_f32_1x8x49x18_w3x3x9x9"
// CHECK-LABEL: define internal void @"mlfuse_gemm_f32_1x8x49x18_w3x3x9x9_pack1"
// (AVX2 tiles over an image are 4 x 24: panels of 24 columns; the packing prefetches
// the row PACK_PREFETCH_ROWS on, since rows of the patches are far apart)
// CHECK-LABEL: define internal void @"mlfuse_gemm_f32_1x8x49x18_w3x3x9x9_pack24"
// CHECK: load i32
// CHECK: call void @"llvm.prefetch.p0"
// CHECK: load <8 x float>
// CHECK-COUNT-2: call <8 x float> @"llvm.masked.load.v8f32.p0"
// (the micro-kernels prefetch no next tiles on AVX2: Blocking.prefetch_tiles)
// CHECK-LABEL: define internal void @"mlfuse_gemm_f32_1x8x49x18_w3x3x9x9_micro4x24"
// CHECK-NOT: llvm.prefetch
// CHECK: ret void

func.func @main(%a: memref<1x8x18xf32>, %x: memref<1x2x9x9xf32>, %c: memref<1x8x49xf32>) {
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>} : memref<1x8x18xf32>, memref<1x2x9x9xf32>, memref<1x8x49xf32>
  func.return
}

// At strides (2, 2) (window = array<i64: 3, 3, 2, 2>, a stem's conv) the symbol
// names them, and each vector of 8 columns is a masked load of the 16 elements
// its columns span, every other one enabled, then one shuffle keeping lanes 0, 2, ..
// The output rows are 4 wide (3x3 at stride 2 over 9x9): a vector touches 3 rows.
// STRIDED-LABEL: define void @"mlfuse_gemm_f32_1x8x16x18_w3x3x9x9s2x2"
// STRIDED-LABEL: define internal void @"mlfuse_gemm_f32_1x8x16x18_w3x3x9x9s2x2_pack16"
// STRIDED: shufflevector <8 x i1>
// STRIDED: call <16 x float> @"llvm.masked.load.v16f32.p0"
// STRIDED: shufflevector <16 x float> %{{.*}}, <16 x float> <{{(float undef(, )?)+}}>, <8 x i32> <i32 0, i32 2, i32 4, i32 6, i32 8, i32 10, i32 12, i32 14>
// STRIDED-COUNT-3: call <16 x float> @"llvm.masked.load.v16f32.p0"
// STRIDED: ret void

func.func @strided(%a: memref<1x8x18xf32>, %x: memref<1x2x9x9xf32>, %c: memref<1x8x16xf32>) {
  loop.gemm %a, %x into %c {window = array<i64: 3, 3, 2, 2>} : memref<1x8x18xf32>, memref<1x2x9x9xf32>, memref<1x8x16xf32>
  func.return
}
