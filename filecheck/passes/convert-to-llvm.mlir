// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p convert-to-llvm | filecheck %s

// Buffers are noalias pointers; loads are inbounds GEPs on the linearized index.
// CHECK-LABEL: llvm.func @load_store(%{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: i64, %{{.*}}: i64)
// CHECK: %[[ROW:.*]] = llvm.mul %{{.*}}, %{{.*}} overflow<nsw> : i64
// CHECK: %[[LIN:.*]] = llvm.add %[[ROW]], %{{.*}} overflow<nsw> : i64
// CHECK: llvm.getelementptr inbounds %{{.*}}[%[[LIN]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK: llvm.store
func.func @load_store(%x: memref<4x8xf32>, %y: memref<4x8xf32>, %i: index, %j: index) {
  %v = memref.load %x[%i, %j] : memref<4x8xf32>
  memref.store %v, %y[%i, %j] : memref<4x8xf32>
  func.return
}

// -----

// cmpf's "false" and "true" predicates (xDSL's llvm.fcmp has no such flags): never and
// always, as ord & uno and ord | uno of the same operands.
// CHECK-LABEL: llvm.func @cmpf_constant_predicates
// CHECK: %[[O:.*]] = llvm.fcmp "ord" %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: %[[U:.*]] = llvm.fcmp "uno" %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: llvm.and %[[O]], %[[U]] : i1
// CHECK: %[[O2:.*]] = llvm.fcmp "ord" %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: %[[U2:.*]] = llvm.fcmp "uno" %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: llvm.or %[[O2]], %[[U2]] : i1
func.func @cmpf_constant_predicates(%x: f32, %y: f32) -> i1 {
  %a = arith.cmpf false, %x, %y : f32
  %b = arith.cmpf true, %x, %y : f32
  %c = arith.xori %a, %b : i1
  func.return %c : i1
}

// -----

// loop.aligned_window rounds the element's address up to the alignment with
// llvm.ptrmask (which LLVM's alignment analysis reads); skip is (-address mod 64) / 4.
// CHECK-LABEL: llvm.func @aligned_window
// CHECK: %[[FIRST:.*]] = llvm.getelementptr inbounds %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: %[[AHEAD:.*]] = llvm.getelementptr %[[FIRST]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: %[[WINDOW:.*]] = llvm.call_intrinsic "llvm.ptrmask.p0.i64"(%[[AHEAD]], %{{.*}}) : (!llvm.ptr, i64) -> !llvm.ptr
// CHECK: %[[ADDRESS:.*]] = llvm.ptrtoint %[[FIRST]] : !llvm.ptr to i64
// CHECK: %[[GAP:.*]] = llvm.and %{{.*}}, %{{.*}} : i64
// CHECK: %[[SKIP:.*]] = llvm.lshr exact %[[GAP]], %{{.*}} : i64
// CHECK: llvm.getelementptr inbounds %[[WINDOW]][%[[SKIP]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
func.func @aligned_window(%y: memref<4x1001xf32>, %i: index, %j: index, %v: f32) {
  %skip, %w = loop.aligned_window %y[%i, %j] {alignment = 64 : i64} : memref<4x1001xf32> -> memref<4004xf32>
  memref.store %v, %w[%skip] : memref<4004xf32>
  func.return
}

// -----

// vector.load and vector.store of a memref: a vector access at the element's
// address; the non-temporal mark carries over (backend/streaming.py tags it).
// CHECK-LABEL: llvm.func @vector_line
// CHECK: %[[FROM:.*]] = llvm.getelementptr inbounds %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: %[[V:.*]] = llvm.load %[[FROM]] {alignment = 4 : i64} : !llvm.ptr -> vector<16xf32>
// CHECK: %[[TO:.*]] = llvm.getelementptr inbounds %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: llvm.store %[[V]], %[[TO]] {alignment = 4 : i64, nontemporal} : vector<16xf32>, !llvm.ptr
func.func @vector_line(%a: memref<16xf32>, %y: memref<64xf32>, %i: index) {
  %c0 = arith.constant 0 : index
  %v = vector.load %a[%c0] : memref<16xf32>, vector<16xf32>
  vector.store %v, %y[%i] {nontemporal = true} : memref<64xf32>, vector<16xf32>
  func.return
}

// -----

// scf.for becomes a header block with the induction variable as argument.
// CHECK-LABEL: llvm.func @loop
// CHECK: llvm.br ^[[HEAD:.*]](%{{.*}} : i64)
// CHECK: ^[[HEAD]](%[[IV:.*]]: i64):
// CHECK: llvm.icmp "slt" %[[IV]]
// CHECK: llvm.cond_br
// CHECK: llvm.add %[[IV]], %{{.*}} overflow<nsw> : i64
func.func @loop(%y: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    memref.store %one, %y[%i] : memref<8xf32>
  }
  func.return
}

// -----

// Allocation is 64-byte aligned; max/min keep numpy's NaN semantics (llvm.maximum).
// CHECK-LABEL: llvm.func @alloc_and_max
// CHECK: llvm.call @aligned_alloc(%{{.*}}, %{{.*}}) : (i64, i64) -> !llvm.ptr
// CHECK: llvm.call_intrinsic "llvm.maximum.f32"
// CHECK: llvm.call @free
func.func @alloc_and_max(%a: f32, %b: f32) -> f32 {
  %m = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  %r = arith.maximumf %a, %b : f32
  memref.dealloc %m : memref<16xf32>
  func.return %r : f32
}

// -----

// A parallel call packs its arguments and its schedule's state (home blocks:
// 8 words per 64-byte line, 65 lines) and runs a per-thread wrapper on the
// thread pool (mlfuse_parallel); the wrapper runs the chunks mlfuse_team_claim
// hands its thread, whose number the pool passes (mlfuse/backend/home_blocks.py
// gives the schedule's functions their bodies at translation). The team is at
// most trip / grain = 8 threads.
// CHECK-LABEL: llvm.func internal @body__omp
// CHECK-SAME: (%{{.*}}: !llvm.ptr, %[[T:.*]]: i32)
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
// CHECK: %[[STATE:.*]] = llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.call @mlfuse_team_claim(%[[STATE]], %[[LO:[0-9]+]], %[[HI:[0-9]+]], %[[T]])
// CHECK: llvm.call @body(
// CHECK: llvm.call @mlfuse_team_claim(%[[STATE]], %[[LO]], %[[HI]], %[[T]])
// CHECK-NOT: GOMP_loop
// CHECK-LABEL: llvm.func @par
// CHECK: %[[WORDS:.*]] = llvm.mlir.constant(520) : i64
// CHECK: %[[ST:.*]] = llvm.alloca %[[WORDS]] x i64 {alignment = 64 : i64}
// CHECK: llvm.call @omp_get_max_threads()
// CHECK: llvm.mlir.constant(8 : i32) : i32
// CHECK: llvm.call @body(
// CHECK: %[[N:.*]] = llvm.sext
// CHECK: %[[TRIP:.*]] = llvm.mlir.constant(64) : i64
// CHECK: %[[GRAIN:.*]] = llvm.mlir.constant(8) : i64
// CHECK: llvm.call @mlfuse_team_init(%[[ST]], %[[N]], %[[TRIP]], %[[GRAIN]])
// CHECK: %[[FN:.*]] = llvm.mlir.addressof @body__omp
// CHECK: llvm.call @mlfuse_parallel(%[[FN]], %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, i32) -> ()
// CHECK-NOT: GOMP
func.func private @body(%lo: index, %hi: index, %y: memref<64xf32>) {
  func.return
}
func.func @par(%y: memref<64xf32>) {
  loop.parallel_call @body(%y) range 64 {grain = 8 : i64} : memref<64xf32>
  func.return
}

// -----

// loop.gemm: a team call of a generated kernel whose name carries the element type
// and the shape (batch x m x n x k); its body is written at translation (see
// gemm-kernels.mlir).
// Two GEMMs of one shape share the kernel and its wrapper.
// CHECK: llvm.func @mlfuse_gemm_f32_2x4x3x8(i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr)
// CHECK: llvm.func internal @mlfuse_gemm_f32_2x4x3x8__omp
// CHECK-NOT: llvm.func internal @mlfuse_gemm_f32_2x4x3x8__omp
// CHECK-LABEL: llvm.func @gemm
// CHECK-COUNT-2: llvm.mlir.addressof @mlfuse_gemm_f32_2x4x3x8__omp
// CHECK-NOT: mlfuse_sgemm
func.func @gemm(%a: memref<2x4x8xf32>, %b: memref<2x8x3xf32>, %c: memref<2x4x3xf32>, %d: memref<2x4x3xf32>) {
  loop.gemm %a, %b into %c : memref<2x4x8xf32>, memref<2x8x3xf32>, memref<2x4x3xf32>
  loop.gemm %a, %b into %d : memref<2x4x8xf32>, memref<2x8x3xf32>, memref<2x4x3xf32>
  func.return
}

// -----

// f64 loop.gemm: a generated kernel too.
// CHECK-LABEL: llvm.func @gemm64
// CHECK: llvm.mlir.addressof @mlfuse_gemm_f64_2x4x3x8__omp
// CHECK-NOT: mlfuse_dgemm
func.func @gemm64(%a: memref<2x4x8xf64>, %b: memref<2x8x3xf64>, %c: memref<2x4x3xf64>) {
  loop.gemm %a, %b into %c : memref<2x4x8xf64>, memref<2x8x3xf64>, memref<2x4x3xf64>
  func.return
}

// A product with no element in C lowers to nothing (its task count divided by zero).
// CHECK-LABEL: llvm.func @empty_gemm
// CHECK-NOT: mlfuse_gemm
// CHECK: llvm.return
func.func @empty_gemm(%a: memref<2x4x8xf32>, %b: memref<2x8x0xf32>, %c: memref<2x4x0xf32>) {
  loop.gemm %a, %b into %c : memref<2x4x8xf32>, memref<2x8x0xf32>, memref<2x4x0xf32>
  func.return
}

// f64 transcendentals call libm.
// CHECK-LABEL: llvm.func @libm
// CHECK: llvm.call @exp(%{{.*}}) : (f64) -> f64
func.func @libm(%x: f64) -> f64 {
  %e = math.exp %x : f64
  func.return %e : f64
}

// -----

// sin and cos call libm at f32 too (expand-math has no polynomial for them).
// CHECK-LABEL: llvm.func @libm_sin
// CHECK: llvm.call @sinf(%{{.*}}) : (f32) -> f32
func.func @libm_sin(%x: f32) -> f32 {
  %s = math.sin %x : f32
  func.return %s : f32
}
// CHECK-LABEL: llvm.func @libm_cos
// CHECK: llvm.call @cos(%{{.*}}) : (f64) -> f64
func.func @libm_cos(%y: f64) -> f64 {
  %c = math.cos %y : f64
  func.return %c : f64
}

// -----

// scf.if with a result and a loop with an iteration argument: cf blocks whose
// arguments are i64 (index) and f32; no unrealized cast is left.
// CHECK-LABEL: llvm.func @control(%{{.*}}: i1, %{{.*}}: !llvm.ptr {llvm.noalias}) -> f32
// CHECK-NOT: unrealized_conversion_cast
// CHECK: llvm.cond_br %{{.*}}, ^[[THEN:.*]], ^[[ELSE:.*]]
// CHECK: ^{{.*}}(%{{.*}}: i64, %{{.*}}: f32):
// CHECK: llvm.fadd
// CHECK: llvm.return %{{.*}} : f32
func.func @control(%c: i1, %x: memref<8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %start = scf.if %c -> (index) {
    scf.yield %c1 : index
  } else {
    scf.yield %c0 : index
  }
  %sum = scf.for %i = %start to %c8 step %c1 iter_args(%acc = %zero) -> (f32) {
    %v = memref.load %x[%i] : memref<8xf32>
    %s = arith.addf %acc, %v : f32
    scf.yield %s : f32
  }
  func.return %sum : f32
}

// -----

// The runtime contract (mlfuse.abi): an entry's outputs and arena are 64-byte
// aligned, inputs are not; the arena size is a global the runtime reads.
// CHECK: llvm.mlir.global weak_odr constant @entry__arena_bytes(4096 : i64)
// CHECK-LABEL: llvm.func @entry(%{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias, llvm.align = 64 : i64}, %{{.*}}: !llvm.ptr {llvm.noalias, llvm.align = 64 : i64})
func.func @entry(%x: memref<16xf32>, %y: memref<16xf32>, %arena: memref<4096xi8>) attributes {mlfuse.num_inputs = 1 : i64, mlfuse.arena_bytes = 4096 : i64} {
  func.return
}

// -----

// Must not transform: a module already in the llvm dialect is left as it is.
// CHECK-LABEL: llvm.func @already(%{{.*}}: i64) -> i64
// CHECK-NEXT:    llvm.return %{{.*}} : i64
llvm.func @already(%a: i64) -> i64 {
  llvm.return %a : i64
}

// -----

// CHECK: convert-to-llvm.mlir:[[# @LINE + 1]]:1: error: @pair: functions with several results are not lowered to LLVM
func.func @pair(%a: f32) -> (f32, f32) {
  func.return %a, %a : f32, f32
}

// -----

func.func @half_exp(%a: f16) -> f16 {
  // CHECK: convert-to-llvm.mlir:[[# @LINE + 1]]:3: error: 'math.exp' on f16 has no CPU lowering
  %e = math.exp %a : f16
  func.return %e : f16
}

// -----

// CHECK: convert-to-llvm.mlir:[[# @LINE + 1]]:1: error: cannot lower top-level 'memref.alloca_scope' to LLVM
"memref.alloca_scope"() ({
  "memref.alloca_scope.return"() : () -> ()
}) : () -> ()

// -----

// Functions on tensors must be bufferized first; ops with no LLVM lowering are
// reported with their location.
// CHECK: convert-to-llvm.mlir:[[# @LINE + 1]]:1: error: @on_tensors works on tensors: bufferize it first (convert-graph-to-loop)
func.func @on_tensors(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}

// -----

func.func @bad(%x: memref<4xf32>) {
  // CHECK: convert-to-llvm.mlir:[[# @LINE + 1]]:3: error: cannot lower 'memref.copy' to LLVM
  "memref.copy"(%x, %x) : (memref<4xf32>, memref<4xf32>) -> ()
  func.return
}

// -----

// fast-math=true: every float op may contract into FMAs, use reciprocals and ignore
// NaN, inf and the sign of zero; not reassoc (expand-math rounds with x + c - c).
// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p 'convert-to-llvm{fast-math=true}' | filecheck %s --check-prefix=FAST
// FAST-LABEL: llvm.func @fma_candidate
// FAST: llvm.fmul %{{.*}}, %{{.*}} {fastmathFlags = #llvm.fastmath<nnan,ninf,nsz,arcp,contract>} : f32
// FAST: llvm.fadd %{{.*}}, %{{.*}} {fastmathFlags = #llvm.fastmath<nnan,ninf,nsz,arcp,contract>} : f32
// CHECK-LABEL: llvm.func @fma_candidate
// CHECK: llvm.fmul %{{.*}}, %{{.*}} : f32
func.func @fma_candidate(%a: f32, %b: f32, %c: f32) -> f32 {
  %m = arith.mulf %a, %b : f32
  %s = arith.addf %m, %c : f32
  func.return %s : f32
}

// -----

// gemm=blas: one Fortran-convention BLAS call per matrix, B first (row-major
// C = A B is column-major C^T = B^T A^T).
// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p 'convert-to-llvm{gemm=blas}' | filecheck %s --check-prefix=BLAS
// BLAS-LABEL: llvm.func @gemm64
// BLAS-COUNT-2: llvm.call @mlfuse_dgemm
// BLAS-NOT: llvm.call @mlfuse_dgemm
// BLAS-LABEL: llvm.func @gemm_blas
// BLAS: llvm.call @mlfuse_sgemm
// BLAS-NOT: mlfuse_gemm_f32_{{[0-9x]+}}(
func.func @gemm_blas(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x3xf32>) {
  loop.gemm %a, %b into %c : memref<4x8xf32>, memref<8x3xf32>, memref<4x3xf32>
  func.return
}

// RUN: not mlfuse-opt %s -p 'convert-to-llvm{gemm=mkl}' 2>&1 | filecheck %s --check-prefix=BADOPT
// BADOPT: gemm must be 'generated' or 'blas', got 'mkl'

// -----

// loop.gemm over a window's patches: the kernel's name carries the window and the
// padded image (kh x kw x hp x wp), whose packing reads the patches. With gemm=blas
// too: BLAS has no implicit im2col.
// CHECK-LABEL: llvm.func @gemm_window
// BLAS-LABEL: llvm.func @gemm_window
// BLAS: llvm.mlir.addressof @mlfuse_gemm_f32_1x4x9x18_w3x3x5x5__omp
// CHECK: llvm.mlir.addressof @mlfuse_gemm_f32_1x4x9x18_w3x3x5x5__omp
func.func @gemm_window(%a: memref<1x4x18xf32>, %x: memref<1x2x5x5xf32>, %c: memref<1x4x9xf32>) {
  loop.gemm %a, %x into %c {window = array<i64: 3, 3>} : memref<1x4x18xf32>, memref<1x2x5x5xf32>, memref<1x4x9xf32>
  func.return
}

// -----

// A multiply and an add or subtract that both allow contraction, the product used there
// only, are one llvm.fmuladd (to_llvm.MultiplyAddContraction): an FMA wherever the
// target has one, however the vectorizers cut the code. c - a * b negates a, a * b - c
// negates c.
// CHECK-LABEL: llvm.func @contracted
// CHECK-NEXT: %[[P:.*]] = llvm.call_intrinsic "llvm.fmuladd.f32"(%[[A:.*]], %[[B:.*]], %[[C:.*]]) : (f32, f32, f32) -> f32
// CHECK-NEXT: %[[NA:.*]] = llvm.fneg %[[A]] : f32
// CHECK-NEXT: %[[Q:.*]] = llvm.call_intrinsic "llvm.fmuladd.f32"(%[[NA]], %[[B]], %[[P]]) : (f32, f32, f32) -> f32
// CHECK-NEXT: %[[NQ:.*]] = llvm.fneg %[[Q]] : f32
// CHECK-NEXT: %[[R:.*]] = llvm.call_intrinsic "llvm.fmuladd.f32"(%[[A]], %[[C]], %[[NQ]]) : (f32, f32, f32) -> f32
// CHECK-NEXT: llvm.call_intrinsic "llvm.fmuladd.v8f32"
// CHECK-NOT: llvm.fmul
func.func @contracted(%a: f32, %b: f32, %c: f32, %v: vector<8xf32>) -> f32 {
  %m = arith.mulf %a, %b fastmath<contract> : f32
  %p = arith.addf %c, %m fastmath<contract> : f32
  %m2 = arith.mulf %a, %b fastmath<contract> : f32
  %q = arith.subf %p, %m2 fastmath<contract> : f32
  %m3 = arith.mulf %a, %c fastmath<fast> : f32
  %r = arith.subf %m3, %q fastmath<fast> : f32
  %vm = arith.mulf %v, %v fastmath<contract> : vector<8xf32>
  %vs = arith.addf %vm, %v fastmath<contract> : vector<8xf32>
  func.return %r : f32
}

// -----

// Not contracted: a product without the flag, an add without it, a product used twice.
// CHECK-LABEL: llvm.func @kept_apart
// CHECK-NOT: llvm.fmuladd
// CHECK-COUNT-3: llvm.fmul
// CHECK-NOT: llvm.fmuladd
func.func @kept_apart(%a: f32, %b: f32, %c: f32) -> f32 {
  %m = arith.mulf %a, %b : f32
  %p = arith.addf %c, %m fastmath<contract> : f32
  %m2 = arith.mulf %a, %p fastmath<contract> : f32
  %q = arith.addf %m2, %c : f32
  %m3 = arith.mulf %q, %b fastmath<contract> : f32
  %r = arith.addf %m3, %c fastmath<contract> : f32
  %s = arith.addf %m3, %r fastmath<contract> : f32
  func.return %s : f32
}

// -----

// Constants are byte arrays. xDSL packs an i1 true as the byte -1; LLVM reads an i1 from
// a byte of 0 or 1 (vectorized code extends the whole byte), so their bytes are 0/1.
// CHECK-LABEL: llvm.mlir.global internal constant @mask()
// CHECK-SAME: mlfuse.bytes = dense<[1, 0, 1, 0, 1, 1]> : tensor<6xi8>
// CHECK-LABEL: llvm.mlir.global internal constant @ones()
// CHECK-SAME: mlfuse.bytes = dense<1> : tensor<4xi8>
// CHECK-LABEL: llvm.mlir.global internal constant @values()
// CHECK-SAME: mlfuse.bytes = dense<[0, 0, -128, 63, 0, 0, 0, -64]> : tensor<8xi8>
"memref.global"() <{sym_name = "mask", sym_visibility = "private", type = memref<2x3xi1>, initial_value = dense<[[true, false, true], [false, true, true]]> : tensor<2x3xi1>, constant}> : () -> ()
"memref.global"() <{sym_name = "ones", sym_visibility = "private", type = memref<4xi1>, initial_value = dense<true> : tensor<4xi1>, constant}> : () -> ()
"memref.global"() <{sym_name = "values", sym_visibility = "private", type = memref<2xf32>, initial_value = dense<[1.0, -2.0]> : tensor<2xf32>, constant}> : () -> ()
