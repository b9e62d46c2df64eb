// The GEMM kernels convert-to-llvm declares get their bodies at translation,
// blocked for the target's vectors (mlfuse/backend/gemm_kernels.py).
// 20x30 @ 30x50: AVX-512 tiles are 8 rows x 48 columns (3 x <16 x float>), so
// there are full 8-row tiles, a 4-row remainder, and a last panel 2 columns wide
// whose loads and stores are masked.
// RUN: mlfuse-opt %s -p convert-to-llvm -t 'llvm{features="+avx512f,+avx2,+avx,+fma"}' | filecheck %s --check-prefix=AVX512
// RUN: mlfuse-opt %s -p convert-to-llvm -t 'llvm{features="+avx2,+avx,+fma"}' | filecheck %s --check-prefix=AVX2
// RUN: mlfuse-opt %s -p convert-to-llvm -t 'llvm-opt{cpu=skylake-avx512 features="+avx512f,+avx2,+avx,+fma"}' | filecheck %s --check-prefix=OPT

// AVX512-LABEL: define void @"mlfuse_gemm_f32_1x20x50x30"(i64 %".1", i64 %".2", ptr noalias %".3", ptr noalias %".4", ptr noalias %".5")
// AVX512: alloca [1440 x float], align 64
// (every panel of a task's 48 columns, 30 deep: the depth is one block of at most 1024)
// AVX512-LABEL: define internal void @"mlfuse_gemm_f32_1x20x50x30_pack2"
// AVX512: call <16 x float> @"llvm.masked.load.v16f32.p0"
// AVX512-LABEL: define internal void @"mlfuse_gemm_f32_1x20x50x30_pack48"
// AVX512-NOT: masked.load
// AVX512-LABEL: define internal void @"mlfuse_gemm_f32_1x20x50x30_micro8x2"
// AVX512-COUNT-8: call <16 x float> @"llvm.fma.v16f32"
// AVX512-NOT: call <16 x float> @"llvm.fma.v16f32"
// AVX512: call void @"llvm.masked.store.v16f32.p0"
// AVX512-LABEL: define internal void @"mlfuse_gemm_f32_1x20x50x30_micro4x2"
// AVX512-LABEL: define internal void @"mlfuse_gemm_f32_1x20x50x30_micro8x48"
// AVX512-COUNT-24: call <16 x float> @"llvm.fma.v16f32"
// AVX512-NOT: masked.store
// AVX512-LABEL: define internal void @"mlfuse_gemm_f32_1x20x50x30_micro4x48"
// AVX512-COUNT-12: call <16 x float> @"llvm.fma.v16f32"

// AVX2 tiles of products this narrow (20 rows: at most NARROW_ROWS) are 4 rows x 24
// columns (3 x <8 x float>), 12 accumulators; the last panel is 2 columns wide.
// AVX2-LABEL: define internal void @"mlfuse_gemm_f32_1x20x50x30_micro4x2"
// AVX2-COUNT-4: call <8 x float> @"llvm.fma.v8f32"
// AVX2-NOT: call <8 x float> @"llvm.fma.v8f32"
// AVX2-LABEL: define internal void @"mlfuse_gemm_f32_1x20x50x30_micro4x24"
// AVX2-COUNT-12: call <8 x float> @"llvm.fma.v8f32"
// AVX2-NOT: micro6x16

// After O3 (micro-kernels inlined) the k loops carry their accumulators as
// vector phis: values in registers, not memory.
// OPT-LABEL: define void @mlfuse_gemm_f32_1x20x50x30(
// OPT-COUNT-24: phi <16 x float>
// OPT: call <16 x float> @llvm.fma.v16f32

func.func @main(%a: memref<20x30xf32>, %b: memref<30x50xf32>, %c: memref<20x50xf32>) {
  loop.gemm %a, %b into %c : memref<20x30xf32>, memref<30x50xf32>, memref<20x50xf32>
  func.return
}
