// A GEMM writing its rows as the interiors of images from image 2 on of a concat of
// padded images (loop.gemm {c_frame = top, left, oh, ow, channel}, U-Net's skip
// connection written into the decoder's padded input): the symbol names the channel
// (_c<ow>x<hp>x<wp>x<top>x<left>x<channel>), and the kernel's stores start 2 images
// (2 x 81 elements) plus a row and a column (10) into C.
// RUN: mlfuse-opt %s -p convert-to-llvm -t 'llvm{features="+avx2,+avx,+fma"}' | filecheck %s

// CHECK-LABEL: define void @"mlfuse_gemm_f32_1x8x49x18_w3x3x9x9_c7x9x9x1x1x2"
// CHECK-LABEL: define internal void @"mlfuse_gemm_f32_1x8x49x18_w3x3x9x9_c7x9x9x1x1x2_micro4x24"
// CHECK: add i64 %{{.*}}, 172
// CHECK: ret void
// CHECK-NOT: mlfuse_gemm_f32_1x8x49x18_w3x3x9x9_c7x9x9x1x1"

func.func @main(%a: memref<1x8x18xf32>, %x: memref<1x2x9x9xf32>, %c: memref<1x10x9x9xf32>) {
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>, c_frame = array<i64: 1, 1, 7, 7, 2>} : memref<1x8x18xf32>, memref<1x2x9x9xf32>, memref<1x10x9x9xf32>
  func.return
}
