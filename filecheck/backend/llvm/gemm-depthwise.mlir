// A depthwise conv's product (`loop.gemm {window_pads}`, convert-graph-to-loop{depthwise}):
// the depthwise kernel (mlfuse/backend/depthwise_kernels.py), one task per channel, the
// 7x7 plane's 49 positions as 4 vectors of 16 lanes (the last with one real lane), each
// tap a load of the image at the vector's first position plus the tap's offset, masked
// to the lanes inside the image (the pads are zeros no one stores), and one fma chain
// per vector over the 9 taps: no packing, no micro-kernel. The symbol names the pads.
// RUN: mlfuse-opt %s --split-input-file -p convert-to-llvm -t 'llvm{features="+avx512f,+avx2,+avx,+fma"}' | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p convert-to-llvm -t 'llvm{features="+avx2,+avx,+fma"}' | filecheck %s --check-prefix=AVX2

// CHECK-LABEL: define void @"mlfuse_gemm_f32_4x1x49x9_w3x3x7x7p1x1x1x1"
// CHECK-NOT:   define
// CHECK-COUNT-36: call <16 x float> @"llvm.fma.v16f32"
// CHECK-NOT:   call <16 x float> @"llvm.fma
// the last vector's store: its one real lane
// CHECK:       call void @"llvm.masked.store.v16f32.p0"(<16 x float> %{{.*}}, ptr %{{.*}}, i32 4, <16 x i1> <i1 true, i1 false,
// CHECK-NOT:   define internal {{.*}}@"mlfuse_gemm
// AVX2-LABEL:  define void @"mlfuse_gemm_f32_4x1x49x9_w3x3x7x7p1x1x1x1"
// AVX2-COUNT-63: call <8 x float> @"llvm.fma.v8f32"
// AVX2-NOT:    call <8 x float> @"llvm.fma
func.func @main(%a: memref<4x1x9xf32>, %x: memref<4x1x7x7xf32>, %c: memref<4x1x49xf32>) {
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>, window_pads = array<i64: 1, 1, 1, 1>} : memref<4x1x9xf32>, memref<4x1x7x7xf32>, memref<4x1x49xf32>
  func.return
}

// -----

// At stride 2 (14x14 -> 7x7): each channel's image split into its four phase planes
// (x[pi::2, pj::2], rows of 7) on the stack, two sets of them (the next channel's split
// while this one's computes), the 14 rows of 14 in pairs through a loop, each one masked
// load and its even and odd lanes (two shuffles: 2 of the odd ones); then each tap a masked load of its phase plane, the same
// 36 fmas as at stride 1.
// CHECK-LABEL: define void @"mlfuse_gemm_f32_4x1x49x9_w3x3x14x14s2x2p1x1x1x1"
// CHECK:       alloca float, i64 392, align 64
// CHECK-COUNT-2: shufflevector <16 x float> {{.*}}, <16 x i32> <i32 1, i32 3, i32 5,
// CHECK-NOT:   <i32 1, i32 3, i32 5,
// CHECK-COUNT-36: call <16 x float> @"llvm.fma.v16f32"
// CHECK-NOT:   call <16 x float> @"llvm.fma
// AVX2-LABEL:  define void @"mlfuse_gemm_f32_4x1x49x9_w3x3x14x14s2x2p1x1x1x1"
// AVX2:        alloca float, i64 392, align 64
// AVX2-COUNT-2: shufflevector <8 x float> {{.*}}, <8 x i32> <i32 1, i32 3, i32 5,
// AVX2-COUNT-63: call <8 x float> @"llvm.fma.v8f32"
func.func @main(%a: memref<4x1x9xf32>, %x: memref<4x1x14x14xf32>, %c: memref<4x1x49xf32>) {
  loop.gemm %a, %x into %c {window = array<i64: 3, 3, 2, 2>, window_pads = array<i64: 1, 1, 1, 1>} : memref<4x1x9xf32>, memref<4x1x14x14xf32>, memref<4x1x49xf32>
  func.return
}

// -----

// A 28x28 plane (784 positions, 49 vectors): steps of 7 vectors (4 rows: every step's
// vectors meet row ends at the same lanes); steps 1-5 read no pad row, so they run as a
// loop with step 1's masks: 21 vectors x 9 taps of code, not 49 x 9.
// CHECK-LABEL: define void @"mlfuse_gemm_f32_2x1x784x9_w3x3x28x28p1x1x1x1"
// CHECK-COUNT-189: call <16 x float> @"llvm.fma.v16f32"
// CHECK-NOT:   call <16 x float> @"llvm.fma
func.func @main(%a: memref<2x1x9xf32>, %x: memref<2x1x28x28xf32>, %c: memref<2x1x784xf32>) {
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>, window_pads = array<i64: 1, 1, 1, 1>} : memref<2x1x9xf32>, memref<2x1x28x28xf32>, memref<2x1x784xf32>
  func.return
}
