// A product's epilogue runs in the GEMM kernel's micro-kernel, on the register tile,
// before the last depth block's store (mlfuse/backend/gemm_kernels.py,
// mlfuse/backend/gemm_epilogue.py); earlier depth blocks store the partial sums.
// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p convert-to-llvm -t 'llvm{features="+avx512f,+avx2,+avx,+fma"}' | filecheck %s
// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p 'convert-to-llvm{gemm=blas}' | filecheck %s --check-prefix=BLAS

// 20x300 @ 300x50 with a bias per row and a residual along the rows: two depth blocks
// of 256 and 44; the kernel takes the operands after C, and the last, 2-column panel
// loads the residual masked. With gemm=blas a product with an epilogue still runs the
// generated kernel.
// BLAS-LABEL: llvm.func @bias_times_residual
// BLAS-NOT: blas
// BLAS: llvm.call @mlfuse_gemm_f32_1x20x50x300_e.o0x0x1x0.o0x0x50x1.c.i0.add.i1.mul(
// CHECK-LABEL: define void @"mlfuse_gemm_f32_1x20x50x300_e.o0x0x1x0.o0x0x50x1.c.i0.add.i1.mul"(i64 %".1", i64 %".2", ptr noalias %".3", ptr noalias %".4", ptr noalias %".5", ptr %".6", ptr %".7")
// CHECK-LABEL: define internal void @"mlfuse_gemm_f32_1x20x50x300_e.o0x0x1x0.o0x0x50x1.c.i0.add.i1.mul_micro8x2"(ptr noalias %".1", ptr noalias %".2", ptr noalias %".3", i64 %".4", i1 %".5", i1 %".6", i64 %".7", i64 %".8", i64 %".9", ptr %".10", ptr %".11")
// CHECK: br i1 %".6", label %{{.*}}, label %{{.*}}
// CHECK: load float
// CHECK: call <16 x float> @"llvm.masked.load.v16f32.p0"
// CHECK: fadd <16 x float>
// CHECK: fmul <16 x float>
// CHECK: call void @"llvm.masked.store.v16f32.p0"
func.func @bias_times_residual(%a: memref<20x300xf32>, %b: memref<300x50xf32>, %c: memref<20x50xf32>, %bias: memref<20xf32>, %res: memref<20x50xf32>) {
  loop.gemm %a, %b into %c epilogue ins(%bias, %res : memref<20xf32>, memref<20x50xf32>) {
  ^bb0(%p: f32, %q: f32, %r: f32):
    %s = arith.addf %p, %q : f32
    %t = arith.mulf %s, %r : f32
    loop.yield %t : f32
  } {epilogue_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>]} : memref<20x300xf32>, memref<300x50xf32>, memref<20x50xf32>
  func.return
}

// -----

// f64: vectors of 8 doubles, constants as their 8 bytes.
// CHECK-LABEL: define internal void @"mlfuse_gemm_f64_1x16x24x16_e.c.k000000000000f03f.sub_micro8x24"
// CHECK: fsub <8 x double> %{{.*}}, <double 0x3ff0000000000000
func.func @f64_minus_one(%a: memref<16x16xf64>, %b: memref<16x24xf64>, %c: memref<16x24xf64>) {
  loop.gemm %a, %b into %c epilogue {
  ^bb0(%p: f64):
    %one = arith.constant 1.0 : f64
    %s = arith.subf %p, %one : f64
    loop.yield %s : f64
  } : memref<16x16xf64>, memref<16x24xf64>, memref<16x24xf64>
  func.return
}

// -----

// SiLU: math.exp is expand-math's expansion in the kernel (the exponent's bits cut
// with integer shifts), no call.
// CHECK-LABEL: define internal void @"mlfuse_gemm_f32_1x16x16x16_e.c.c.neg.exp.k0000803f.add.div_micro8x16"
// CHECK-NOT: call {{.*}}exp
// CHECK: shl <16 x i32>
// CHECK: fdiv <16 x float>
// CHECK: ret void
func.func @silu(%a: memref<16x16xf32>, %b: memref<16x16xf32>, %c: memref<16x16xf32>) {
  loop.gemm %a, %b into %c epilogue {
  ^bb0(%p: f32):
    %n = arith.negf %p : f32
    %e = math.exp %n : f32
    %one = arith.constant 1.0 : f32
    %d = arith.addf %e, %one : f32
    %s = arith.divf %p, %d : f32
    loop.yield %s : f32
  } : memref<16x16xf32>, memref<16x16xf32>, memref<16x16xf32>
  func.return
}

// -----

// An epilogue the kernel does not generate (math.log; math.exp on f64; or a transposed
// operand) is refused at the product, before anything is lowered.
// CHECK: gemm-epilogue.mlir:[[# @LINE + 2]]:3: error: loop.gemm's epilogue is not one the generated kernel applies
func.func @log(%a: memref<16x16xf32>, %b: memref<16x16xf32>, %c: memref<16x16xf32>) {
  loop.gemm %a, %b into %c epilogue {
  ^bb0(%p: f32):
    %e = math.log %p : f32
    loop.yield %e : f32
  } : memref<16x16xf32>, memref<16x16xf32>, memref<16x16xf32>
  func.return
}

// -----

// CHECK: gemm-epilogue.mlir:[[# @LINE + 2]]:3: error: loop.gemm's epilogue is not one the generated kernel applies
func.func @exp_f64(%a: memref<16x16xf64>, %b: memref<16x16xf64>, %c: memref<16x16xf64>) {
  loop.gemm %a, %b into %c epilogue {
  ^bb0(%p: f64):
    %e = math.exp %p : f64
    loop.yield %e : f64
  } : memref<16x16xf64>, memref<16x16xf64>, memref<16x16xf64>
  func.return
}

// -----

// CHECK: gemm-epilogue.mlir:[[# @LINE + 2]]:3: error: loop.gemm's epilogue is not one the generated kernel applies
func.func @transposed(%a: memref<16x16xf32>, %b: memref<16x16xf32>, %c: memref<16x16xf32>, %t: memref<16x16xf32>) {
  loop.gemm %a, %b into %c epilogue ins(%t : memref<16x16xf32>) {
  ^bb0(%p: f32, %q: f32):
    %s = arith.addf %p, %q : f32
    loop.yield %s : f32
  } {epilogue_maps = [affine_map<(d0, d1) -> (d1, d0)>]} : memref<16x16xf32>, memref<16x16xf32>, memref<16x16xf32>
  func.return
}

// -----

// The region is not isolated from above: a value from outside it (here the function's
// argument, which is not the product) is refused, not read as a block argument.
// CHECK: gemm-epilogue.mlir:[[# @LINE + 2]]:3: error: loop.gemm's epilogue is not one the generated kernel applies
func.func @outside(%a: memref<16x16xf32>, %b: memref<16x16xf32>, %c: memref<16x16xf32>, %s: f32) {
  loop.gemm %a, %b into %c epilogue {
  ^bb0(%p: f32):
    %t = arith.addf %p, %s : f32
    loop.yield %t : f32
  } : memref<16x16xf32>, memref<16x16xf32>, memref<16x16xf32>
  func.return
}

// -----

// A multiply and an add that allow contraction stay arith in the epilogue region (the
// kernel reads them: to_llvm.MultiplyAddContraction leaves epilogues alone).
// CHECK-LABEL: define void @"mlfuse_gemm_f32_1x20x50x300_e.o0x0x1x0.o0x0x50x1.c.i1.mul.i0.add"(
// CHECK-LABEL: define void @"contract_in_epilogue"(
func.func @contract_in_epilogue(%a: memref<20x300xf32>, %b: memref<300x50xf32>, %c: memref<20x50xf32>, %bias: memref<20xf32>, %res: memref<20x50xf32>) {
  loop.gemm %a, %b into %c epilogue ins(%bias, %res : memref<20xf32>, memref<20x50xf32>) {
  ^bb0(%p: f32, %q: f32, %r: f32):
    %t = arith.mulf %p, %r fastmath<contract> : f32
    %s = arith.addf %t, %q fastmath<contract> : f32
    loop.yield %s : f32
  } {epilogue_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>]} : memref<20x300xf32>, memref<300x50xf32>, memref<20x50xf32>
  func.return
}
