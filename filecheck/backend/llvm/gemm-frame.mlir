// A GEMM whose C is the interiors of images (loop.gemm {c_frame}, a conv writing the
// next conv's padded input): the kernel's symbol names the frame (_c<ow>x<hp>x<wp>x<top>x<left>),
// and the micro-kernel stores each vector of a row of C where its columns lie in
// the images: one store when they lie in one output row, one masked store per row
// when they cross a row end (here rows of 7 in 9 x 9 images, AVX2 vectors of 8). The
// depth (18) is one block: the micro-kernel never loads C (no masked loads of its pieces).
// RUN: mlfuse-opt %s -p convert-to-llvm -t 'llvm{features="+avx2,+avx,+fma"}' | filecheck %s

// CHECK-LABEL: define void @"mlfuse_gemm_f32_1x8x49x18_w3x3x9x9_c7x9x9x1x1"
// CHECK-LABEL: define internal void @"mlfuse_gemm_f32_1x8x49x18_w3x3x9x9_c7x9x9x1x1_micro4x24"
// CHECK: srem i64
// CHECK-NOT: llvm.masked.load
// CHECK: call void @"llvm.masked.store.v8f32.p0"
// CHECK: store <8 x float>
// CHECK: ret void

func.func @main(%a: memref<1x8x18xf32>, %x: memref<1x2x9x9xf32>, %c: memref<1x8x9x9xf32>) {
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>, c_frame = array<i64: 1, 1, 7, 7>} : memref<1x8x18xf32>, memref<1x2x9x9xf32>, memref<1x8x9x9xf32>
  func.return
}
