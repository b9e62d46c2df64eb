// RUN: mlfuse-opt %s --split-input-file -p loop-gemm-epilogue-fuse | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p 'loop-gemm-epilogue-fuse,convert-loop-to-scf,convert-to-llvm' -t 'llvm{features="+avx2,+avx,+fma"}' | filecheck %s --check-prefix=LLVM
// RUN: mlfuse-opt %s --split-input-file -p 'loop-gemm-epilogue-fuse{remarks=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: not mlfuse-opt %s --split-input-file -p loop-gemm-epilogue-fuse{depth=1} 2>&1 | filecheck %s --check-prefix=BAD

// A conv's product and its epilogue (bias along the channels, a residual, ReLU): the
// nest becomes the product's epilogue, written into the nest's output; C is gone, and
// the output's alloc moves above the product. The kernel's symbol spells the epilogue.
// CHECK-LABEL: func.func @conv_bias_residual_relu
// CHECK-NEXT: %[[Y:.*]] = memref.alloc() : memref<1x8x64xf32>
// CHECK-NEXT: loop.gemm %{{.*}}, %{{.*}} into %[[Y]] epilogue ins(%{{.*}}, %{{.*}} : memref<8xf32>, memref<1x8x64xf32>) {
// CHECK-NEXT: ^bb0(%[[P:.*]]: f32, %[[B:.*]]: f32, %[[R:.*]]: f32):
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[P]], %[[B]] : f32
// CHECK-NEXT: %[[T:.*]] = arith.addf %[[S]], %[[R]] : f32
// CHECK: arith.cmpf ugt, %[[T]]
// CHECK: loop.yield
// CHECK-NEXT: } {window = array<i64: 3, 3>, epilogue_maps = [affine_map<(d0, d1, d2) -> (d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>]}
// CHECK-NOT: loop.nest
// CHECK-NOT: memref.alloc
// CHECK: return %[[Y]]
// LLVM-LABEL: define internal void @"mlfuse_gemm_f32_1x8x64x36_w3x3x10x10_e.o0x0x1x0.o0x512x64x1.c.i0.add.i1.add.p0.k00000000.cmpugt.g0.k00000000.sel_micro4x24"
// LLVM: fcmp ugt <8 x float>
// LLVM: select <8 x i1>
func.func @conv_bias_residual_relu(%w: memref<1x8x36xf32>, %x: memref<1x4x10x10xf32>, %bias: memref<8xf32>, %res: memref<1x8x64xf32>) -> memref<1x8x64xf32> {
  %c = memref.alloc() : memref<1x8x64xf32>
  loop.gemm %w, %x into %c {window = array<i64: 3, 3>} : memref<1x8x36xf32>, memref<1x4x10x10xf32>, memref<1x8x64xf32>
  %y = memref.alloc() : memref<1x8x64xf32>
  loop.nest "relu" lower [0, 0, 0] upper [1, 8, 64] iterators ["parallel", "parallel", "parallel"] ins(%c, %bias, %res : memref<1x8x64xf32>, memref<8xf32>, memref<1x8x64xf32>) outs(%y : memref<1x8x64xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%p: f32, %b: f32, %r: f32, %o: f32):
    %s = arith.addf %p, %b : f32
    %t = arith.addf %s, %r : f32
    %z = arith.constant 0.0 : f32
    %g = arith.cmpf ugt, %t, %z : f32
    %v = arith.select %g, %t, %z : f32
    loop.yield %v : f32
  }
  memref.dealloc %c : memref<1x8x64xf32>
  func.return %y : memref<1x8x64xf32>
}

// -----

// C seen through views, a nest it does not read in between (now after the product),
// the product's element not the first input: a linear layer's bias along the columns
// and a clamp (ReLU6).
// CHECK-LABEL: func.func @views_between
// CHECK-NEXT: loop.gemm %{{.*}}, %{{.*}} into %{{.*}} epilogue ins(%{{.*}} : memref<32xf32>) {
// CHECK-NEXT: ^bb0(%[[P:.*]]: f32, %[[B:.*]]: f32):
// CHECK-NEXT: arith.addf %[[B]], %[[P]]
// CHECK: arith.minimumf
// CHECK: epilogue_maps = [affine_map<(d0, d1) -> (d1)>]
// CHECK-NEXT: loop.nest "other"
// CHECK-NOT: loop.nest
// LLVM-LABEL: define internal void @"mlfuse_gemm_f32_1x16x32x8_e.o0x0x0x1.i0.c.add.k00000000.max.k0000c040.min_micro4x24"
// LLVM: call <8 x float> @"llvm.maximum.v8f32"
// LLVM: call <8 x float> @"llvm.minimum.v8f32"(<8 x float> %{{.*}}, <8 x float> <float 0x4018000000000000
func.func @views_between(%a: memref<16x8xf32>, %b: memref<8x32xf32>, %bias: memref<32xf32>, %u: memref<4xf32>, %v: memref<4xf32>, %y: memref<16x32xf32>) {
  %c = memref.alloc() : memref<512xf32>
  %cv = loop.view %c : memref<512xf32> to memref<16x32xf32>
  loop.gemm %a, %b into %cv : memref<16x8xf32>, memref<8x32xf32>, memref<16x32xf32>
  loop.nest "other" lower [0] upper [4] iterators ["parallel"] ins(%u : memref<4xf32>) outs(%v : memref<4xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%e: f32, %o: f32):
    loop.yield %e : f32
  }
  %cr = loop.view %c : memref<512xf32> to memref<16x32xf32>
  loop.nest "relu6" lower [0, 0] upper [16, 32] iterators ["parallel", "parallel"] ins(%bias, %cr : memref<32xf32>, memref<16x32xf32>) outs(%y : memref<16x32xf32>) maps [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%bb: f32, %p: f32, %o: f32):
    %s = arith.addf %bb, %p : f32
    %z = arith.constant 0.0 : f32
    %six = arith.constant 6.0 : f32
    %lo = arith.maximumf %s, %z : f32
    %hi = arith.minimumf %lo, %six : f32
    loop.yield %hi : f32
  }
  memref.dealloc %c : memref<512xf32>
  func.return
}

// -----

// loop-coalesce merged the batch of one away: the nest walks 8 x 64 while C is 1 x 8 x
// 64. The maps are taken back to C's indices and the output is seen with C's shape.
// CHECK-LABEL: func.func @batch_of_one
// CHECK-NEXT: %[[Y:.*]] = loop.view %{{.*}} : memref<8x64xf32> to memref<1x8x64xf32>
// CHECK-NEXT: loop.gemm %{{.*}}, %{{.*}} into %[[Y]] epilogue ins(%{{.*}}, %{{.*}} : memref<8x1xf32>, memref<8x64xf32>) {
// CHECK: epilogue_maps = [affine_map<(d0, d1, d2) -> (d1, 0)>, affine_map<(d0, d1, d2) -> (d1, d2)>]
// CHECK-NOT: loop.nest
func.func @batch_of_one(%w: memref<1x8x36xf32>, %x: memref<1x4x10x10xf32>, %bias: memref<8x1xf32>, %res: memref<8x64xf32>, %y: memref<8x64xf32>) {
  %c = memref.alloc() : memref<1x8x64xf32>
  loop.gemm %w, %x into %c {window = array<i64: 3, 3>} : memref<1x8x36xf32>, memref<1x4x10x10xf32>, memref<1x8x64xf32>
  %cv = loop.view %c : memref<1x8x64xf32> to memref<8x64xf32>
  loop.nest "add" lower [0, 0] upper [8, 64] iterators ["parallel", "parallel"] ins(%cv, %bias, %res : memref<8x64xf32>, memref<8x1xf32>, memref<8x64xf32>) outs(%y : memref<8x64xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%p: f32, %b: f32, %r: f32, %o: f32):
    %s = arith.addf %p, %b : f32
    %t = arith.mulf %s, %r : f32
    loop.yield %t : f32
  }
  memref.dealloc %c : memref<1x8x64xf32>
  func.return
}

// -----

// A linear layer's bias and GELU (erf form): math.erf is part of the program (the kernel
// emits expand-math's expansion of it), not a call: FC1 + GELU is one kernel.
// CHECK-LABEL: func.func @linear_gelu_erf
// CHECK-NEXT: loop.gemm %{{.*}}, %{{.*}} into %{{.*}} epilogue ins(%{{.*}} : memref<32xf32>) {
// CHECK: math.erf
// CHECK: epilogue_maps = [affine_map<(d0, d1) -> (d1)>]
// CHECK-NOT: loop.nest
// LLVM-LABEL: define internal void @"mlfuse_gemm_f32_1x16x32x8_e.o0x0x0x1.c.i0.add.p0.g0.kf304b53f.div.erf.k0000803f.add.mul.k0000003f.mul_micro4x24"
// LLVM: call <8 x float> @"llvm.fabs.v8f32"
// LLVM-NOT: erf
// LLVM: ret void
func.func @linear_gelu_erf(%a: memref<16x8xf32>, %b: memref<8x32xf32>, %bias: memref<32xf32>, %y: memref<16x32xf32>) {
  %c = memref.alloc() : memref<16x32xf32>
  loop.gemm %a, %b into %c : memref<16x8xf32>, memref<8x32xf32>, memref<16x32xf32>
  loop.nest "gelu" lower [0, 0] upper [16, 32] iterators ["parallel", "parallel"] ins(%c, %bias : memref<16x32xf32>, memref<32xf32>) outs(%y : memref<16x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%p: f32, %bb: f32, %o: f32):
    %x = arith.addf %p, %bb : f32
    %r2 = arith.constant 1.41421354 : f32
    %s = arith.divf %x, %r2 : f32
    %e = math.erf %s : f32
    %one = arith.constant 1.0 : f32
    %e1 = arith.addf %e, %one : f32
    %m = arith.mulf %x, %e1 : f32
    %half = arith.constant 0.5 : f32
    %g = arith.mulf %m, %half : f32
    loop.yield %g : f32
  }
  memref.dealloc %c : memref<16x32xf32>
  func.return
}

// -----

// loop-coalesce made an elementwise nest one-dimensional (GPT-2's tanh GELU over 512
// elements of a 16 x 32 product): the nest walks C's elements in order, so it folds.
// The batch of one and the rows are merged away in the second product: (d0, d1, d2) ->
// (d1 * 32 + d2) takes C's indices to the nest's.
// CHECK-LABEL: func.func @flat_tanh
// CHECK-NEXT: %[[Y:.*]] = loop.view %{{.*}} : memref<512xf32> to memref<16x32xf32>
// CHECK-NEXT: loop.gemm %{{.*}}, %{{.*}} into %[[Y]] epilogue {
// CHECK: math.tanh
// CHECK: %[[Z:.*]] = loop.view %{{.*}} : memref<512xf32> to memref<1x16x32xf32>
// CHECK-NEXT: loop.gemm %{{.*}}, %{{.*}} into %[[Z]] epilogue ins(%{{.*}} : memref<512xf32>) {
// CHECK: math.exp
// CHECK: epilogue_maps = [affine_map<(d0, d1, d2) -> (((d1 * 32) + d2))>]
// CHECK-NOT: loop.nest
func.func @flat_tanh(%a: memref<16x8xf32>, %b: memref<8x32xf32>, %y: memref<512xf32>, %w: memref<1x16x8xf32>, %r: memref<512xf32>, %z: memref<512xf32>) {
  %c = memref.alloc() : memref<16x32xf32>
  loop.gemm %a, %b into %c : memref<16x8xf32>, memref<8x32xf32>, memref<16x32xf32>
  %cf = loop.view %c : memref<16x32xf32> to memref<512xf32>
  loop.nest "tanh" lower [0] upper [512] iterators ["parallel"] ins(%cf : memref<512xf32>) outs(%y : memref<512xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%p: f32, %o: f32):
    %t = math.tanh %p : f32
    loop.yield %t : f32
  }
  memref.dealloc %c : memref<16x32xf32>
  %d = memref.alloc() : memref<1x16x32xf32>
  %b3 = loop.view %b : memref<8x32xf32> to memref<1x8x32xf32>
  loop.gemm %w, %b3 into %d : memref<1x16x8xf32>, memref<1x8x32xf32>, memref<1x16x32xf32>
  %df = loop.view %d : memref<1x16x32xf32> to memref<512xf32>
  loop.nest "silu_res" lower [0] upper [512] iterators ["parallel"] ins(%df, %r : memref<512xf32>, memref<512xf32>) outs(%z : memref<512xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %n = arith.negf %p : f32
    %e = math.exp %n : f32
    %one = arith.constant 1.0 : f32
    %den = arith.addf %e, %one : f32
    %s = arith.divf %p, %den : f32
    %t = arith.addf %s, %q : f32
    loop.yield %t : f32
  }
  memref.dealloc %d : memref<1x16x32xf32>
  func.return
}

// -----

// Not folded: erf on f64 (the kernel has expand-math's f32 expansions only), and a
// one-dimensional nest over C's elements out of order (a flat view read backwards).
// CHECK-LABEL: func.func @not_folded_math
// CHECK-NOT: epilogue
// REMARK: loop-gemm-epilogue-fuse.mlir:[[# @LINE + 5]]:3: remark: no epilogue folded: the GEMM kernel cannot apply 'erf64'
// REMARK: loop-gemm-epilogue-fuse.mlir:[[# @LINE + 12]]:3: remark: no epilogue folded: 'backwards' does not read each element of C once, where it walks it
// CHECK: return
func.func @not_folded_math(%a: memref<16x8xf64>, %b: memref<8x32xf64>, %y: memref<16x32xf64>, %af: memref<16x8xf32>, %bf: memref<8x32xf32>, %z: memref<512xf32>) {
  %c = memref.alloc() : memref<16x32xf64>
  loop.gemm %a, %b into %c : memref<16x8xf64>, memref<8x32xf64>, memref<16x32xf64>
  loop.nest "erf64" lower [0, 0] upper [16, 32] iterators ["parallel", "parallel"] ins(%c : memref<16x32xf64>) outs(%y : memref<16x32xf64>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%p: f64, %o: f64):
    %e = math.erf %p : f64
    loop.yield %e : f64
  }
  memref.dealloc %c : memref<16x32xf64>
  %d = memref.alloc() : memref<16x32xf32>
  loop.gemm %af, %bf into %d : memref<16x8xf32>, memref<8x32xf32>, memref<16x32xf32>
  %df = loop.view %d : memref<16x32xf32> to memref<512xf32>
  loop.nest "backwards" lower [0] upper [512] iterators ["parallel"] ins(%df : memref<512xf32>) outs(%z : memref<512xf32>) maps [affine_map<(d0) -> (511 - d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%p: f32, %o: f32):
    %t = math.tanh %p : f32
    loop.yield %t : f32
  }
  memref.dealloc %d : memref<16x32xf32>
  func.return
}

// -----

// Not folded: C read by two nests; an epilogue that calls math.log (the kernel does not
// generate it: only exp, tanh and erf); a nest that writes into one of its own inputs'
// buffers... and a nest that reads its output (an accumulation into y).
// CHECK-LABEL: func.func @not_folded
// CHECK-NOT: epilogue
// REMARK: loop-gemm-epilogue-fuse.mlir:[[# @LINE + 6]]:3: remark: no epilogue folded: C is read by 2 ops, not by one loop.nest
// REMARK: loop-gemm-epilogue-fuse.mlir:[[# @LINE + 17]]:3: remark: no epilogue folded: the GEMM kernel cannot apply 'log'
// REMARK: loop-gemm-epilogue-fuse.mlir:[[# @LINE + 24]]:3: remark: no epilogue folded: 'accumulate' reads its output
// CHECK: return
func.func @not_folded(%a: memref<16x8xf32>, %b: memref<8x32xf32>, %y: memref<16x32xf32>, %z: memref<16x32xf32>) {
  %c = memref.alloc() : memref<16x32xf32>
  loop.gemm %a, %b into %c : memref<16x8xf32>, memref<8x32xf32>, memref<16x32xf32>
  loop.nest "neg" lower [0, 0] upper [16, 32] iterators ["parallel", "parallel"] ins(%c : memref<16x32xf32>) outs(%y : memref<16x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%p: f32, %o: f32):
    %n = arith.negf %p : f32
    loop.yield %n : f32
  }
  loop.nest "copy" lower [0, 0] upper [16, 32] iterators ["parallel", "parallel"] ins(%c : memref<16x32xf32>) outs(%z : memref<16x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%p: f32, %o: f32):
    loop.yield %p : f32
  }
  memref.dealloc %c : memref<16x32xf32>
  %d = memref.alloc() : memref<16x32xf32>
  loop.gemm %a, %b into %d : memref<16x8xf32>, memref<8x32xf32>, memref<16x32xf32>
  loop.nest "log" lower [0, 0] upper [16, 32] iterators ["parallel", "parallel"] ins(%d : memref<16x32xf32>) outs(%y : memref<16x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%p: f32, %o: f32):
    %e = math.log %p : f32
    loop.yield %e : f32
  }
  memref.dealloc %d : memref<16x32xf32>
  %f = memref.alloc() : memref<16x32xf32>
  loop.gemm %a, %b into %f : memref<16x8xf32>, memref<8x32xf32>, memref<16x32xf32>
  loop.nest "accumulate" lower [0, 0] upper [16, 32] iterators ["parallel", "parallel"] ins(%f : memref<16x32xf32>) outs(%y : memref<16x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%p: f32, %o: f32):
    %s = arith.addf %o, %p : f32
    loop.yield %s : f32
  }
  memref.dealloc %f : memref<16x32xf32>
  func.return
}

// -----

// Not folded: C broadcast (read along one dimension only), a nest after a op between
// that writes the bias it reads, an output that is the product's A, a transposed read
// of C (the unpack of patches @ wt), and a product into a function argument.
// CHECK-LABEL: func.func @not_folded_either
// CHECK-NOT: epilogue
// REMARK: loop-gemm-epilogue-fuse.mlir:[[# @LINE + 7]]:3: remark: no epilogue folded: 'writes_bias' between them writes what 'add' reads
// REMARK: loop-gemm-epilogue-fuse.mlir:[[# @LINE + 19]]:3: remark: no epilogue folded: 'into_a' writes a buffer that it or the product reads
// REMARK: loop-gemm-epilogue-fuse.mlir:[[# @LINE + 25]]:3: remark: no epilogue folded: 'transpose' does not read each element of C once, where it walks it
// REMARK: loop-gemm-epilogue-fuse.mlir:[[# @LINE + 30]]:3: remark: no epilogue folded: C is not a buffer of its own (memref.alloc)
// CHECK: return
func.func @not_folded_either(%a: memref<16x16xf32>, %b: memref<16x16xf32>, %bias: memref<16xf32>, %y: memref<16x16xf32>, %arg: memref<16x16xf32>) {
  %c = memref.alloc() : memref<16x16xf32>
  loop.gemm %a, %b into %c : memref<16x16xf32>, memref<16x16xf32>, memref<16x16xf32>
  loop.nest "writes_bias" lower [0] upper [16] iterators ["parallel"] ins() outs(%bias : memref<16xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %k = arith.constant 1.0 : f32
    loop.yield %k : f32
  }
  loop.nest "add" lower [0, 0] upper [16, 16] iterators ["parallel", "parallel"] ins(%c, %bias : memref<16x16xf32>, memref<16xf32>) outs(%y : memref<16x16xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    loop.yield %s : f32
  }
  memref.dealloc %c : memref<16x16xf32>
  %d = memref.alloc() : memref<16x16xf32>
  loop.gemm %a, %b into %d : memref<16x16xf32>, memref<16x16xf32>, memref<16x16xf32>
  loop.nest "into_a" lower [0, 0] upper [16, 16] iterators ["parallel", "parallel"] ins(%d : memref<16x16xf32>) outs(%a : memref<16x16xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%p: f32, %o: f32):
    loop.yield %p : f32
  }
  memref.dealloc %d : memref<16x16xf32>
  %e = memref.alloc() : memref<16x16xf32>
  loop.gemm %a, %b into %e : memref<16x16xf32>, memref<16x16xf32>, memref<16x16xf32>
  loop.nest "transpose" lower [0, 0] upper [16, 16] iterators ["parallel", "parallel"] ins(%e : memref<16x16xf32>) outs(%y : memref<16x16xf32>) maps [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%p: f32, %o: f32):
    loop.yield %p : f32
  }
  memref.dealloc %e : memref<16x16xf32>
  loop.gemm %a, %b into %arg : memref<16x16xf32>, memref<16x16xf32>, memref<16x16xf32>
  loop.nest "from_arg" lower [0, 0] upper [16, 16] iterators ["parallel", "parallel"] ins(%arg : memref<16x16xf32>) outs(%y : memref<16x16xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%p: f32, %o: f32):
    %n = arith.negf %p : f32
    loop.yield %n : f32
  }
  func.return
}

// -----

// Not folded either: a nest before the product in a block without a terminator (a
// band's: the walk from the product must not run off its end), a nest that computes
// an i1 (C's type is f32), and a chain of 40 squares (each value used twice: written
// out, the program would double at each step; refused once past MAX_TOKENS, at once).
// CHECK-LABEL: func.func @not_folded_either_way
// CHECK-NOT: epilogue
// CHECK: return
// REMARK: loop-gemm-epilogue-fuse.mlir:[[# @LINE + 16]]:5: remark: no epilogue folded: 'e' comes before the product
// REMARK: loop-gemm-epilogue-fuse.mlir:[[# @LINE + 19]]:3: remark: no epilogue folded: 'gt' computes on other types than C's f32
// REMARK: loop-gemm-epilogue-fuse.mlir:[[# @LINE + 27]]:3: remark: no epilogue folded: the GEMM kernel cannot apply 'squares'
func.func @not_folded_either_way(%a: memref<16x8xf32>, %b: memref<8x32xf32>, %x: memref<16x32xf32>, %y: memref<16x32xf32>, %z: memref<2x16x32xf32>, %m: memref<16x32xi1>) {
  %c0 = memref.alloc() : memref<16x32xf32>
  loop.band "b" upper [2] {
  ^bb0(%i: index):
    loop.nest "e" lower [0, 0] upper [16, 32] iterators ["parallel", "parallel"] ins(%c0, %x : memref<16x32xf32>, memref<16x32xf32>) outs(%y : memref<16x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
    ^bb0(%p: f32, %q: f32, %o: f32):
      %n = arith.negf %q : f32
      loop.yield %n : f32
    }
    loop.nest "use" syms(%i) lower [0, 0] upper [16, 32] iterators ["parallel", "parallel"] ins(%y : memref<16x32xf32>) outs(%z : memref<2x16x32xf32>) maps [affine_map<(d0, d1)[s0] -> (d0, d1)>, affine_map<(d0, d1)[s0] -> (s0, d0, d1)>] {
    ^bb0(%p: f32, %o: f32):
      loop.yield %p : f32
    }
    loop.gemm %a, %b into %c0 : memref<16x8xf32>, memref<8x32xf32>, memref<16x32xf32>
  }
  memref.dealloc %c0 : memref<16x32xf32>
  %c1 = memref.alloc() : memref<16x32xf32>
  loop.gemm %a, %b into %c1 : memref<16x8xf32>, memref<8x32xf32>, memref<16x32xf32>
  loop.nest "gt" lower [0, 0] upper [16, 32] iterators ["parallel", "parallel"] ins(%c1 : memref<16x32xf32>) outs(%m : memref<16x32xi1>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%p: f32, %o: i1):
    %zero = arith.constant 0.0 : f32
    %s = arith.cmpf ogt, %p, %zero : f32
    loop.yield %s : i1
  }
  memref.dealloc %c1 : memref<16x32xf32>
  %c = memref.alloc() : memref<16x32xf32>
  loop.gemm %a, %b into %c : memref<16x8xf32>, memref<8x32xf32>, memref<16x32xf32>
  loop.nest "squares" lower [0, 0] upper [16, 32] iterators ["parallel", "parallel"] ins(%c : memref<16x32xf32>) outs(%y : memref<16x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%v0: f32, %o: f32):
    %v1 = arith.mulf %v0, %v0 : f32
    %v2 = arith.mulf %v1, %v1 : f32
    %v3 = arith.mulf %v2, %v2 : f32
    %v4 = arith.mulf %v3, %v3 : f32
    %v5 = arith.mulf %v4, %v4 : f32
    %v6 = arith.mulf %v5, %v5 : f32
    %v7 = arith.mulf %v6, %v6 : f32
    %v8 = arith.mulf %v7, %v7 : f32
    %v9 = arith.mulf %v8, %v8 : f32
    %v10 = arith.mulf %v9, %v9 : f32
    %v11 = arith.mulf %v10, %v10 : f32
    %v12 = arith.mulf %v11, %v11 : f32
    %v13 = arith.mulf %v12, %v12 : f32
    %v14 = arith.mulf %v13, %v13 : f32
    %v15 = arith.mulf %v14, %v14 : f32
    %v16 = arith.mulf %v15, %v15 : f32
    %v17 = arith.mulf %v16, %v16 : f32
    %v18 = arith.mulf %v17, %v17 : f32
    %v19 = arith.mulf %v18, %v18 : f32
    %v20 = arith.mulf %v19, %v19 : f32
    %v21 = arith.mulf %v20, %v20 : f32
    %v22 = arith.mulf %v21, %v21 : f32
    %v23 = arith.mulf %v22, %v22 : f32
    %v24 = arith.mulf %v23, %v23 : f32
    %v25 = arith.mulf %v24, %v24 : f32
    %v26 = arith.mulf %v25, %v25 : f32
    %v27 = arith.mulf %v26, %v26 : f32
    %v28 = arith.mulf %v27, %v27 : f32
    %v29 = arith.mulf %v28, %v28 : f32
    %v30 = arith.mulf %v29, %v29 : f32
    %v31 = arith.mulf %v30, %v30 : f32
    %v32 = arith.mulf %v31, %v31 : f32
    %v33 = arith.mulf %v32, %v32 : f32
    %v34 = arith.mulf %v33, %v33 : f32
    %v35 = arith.mulf %v34, %v34 : f32
    %v36 = arith.mulf %v35, %v35 : f32
    %v37 = arith.mulf %v36, %v36 : f32
    %v38 = arith.mulf %v37, %v37 : f32
    %v39 = arith.mulf %v38, %v38 : f32
    %v40 = arith.mulf %v39, %v39 : f32
    loop.yield %v40 : f32
  }
  memref.dealloc %c : memref<16x32xf32>
  func.return
}

// -----

// The pass takes no options.
// BAD: invalid pass pipeline 'loop-gemm-epilogue-fuse{depth=1}': Provided arguments ["depth"] not found
func.func @f() {
  func.return
}
