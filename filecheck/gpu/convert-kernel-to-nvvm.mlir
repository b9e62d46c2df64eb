// RUN: mlfuse-opt %s --split-input-file -p convert-kernel-to-nvvm --verify-diagnostics | filecheck %s

// Kernel signature, ids, shuffles, barrier, shared memory.
// CHECK:      llvm.mlir.global internal @__shared_k_0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<8 x f32>
// CHECK:      llvm.func @k(%x: !llvm.ptr<1> {llvm.noalias, llvm.align = 16 : i64})
// CHECK-SAME: attributes {nvvm.kernel, nvvm.maxntid = array<i32: 256, 1, 1>, nvvm.minctasm = 2 : i32}
// CHECK:        llvm.call_intrinsic "llvm.nvvm.read.ptx.sreg.tid.x"() : () -> i32
// CHECK:        llvm.call_intrinsic "llvm.nvvm.read.ptx.sreg.ctaid.y"() : () -> i32
// CHECK:        llvm.call_intrinsic "llvm.nvvm.read.ptx.sreg.laneid"() : () -> i32
// CHECK:        llvm.getelementptr inbounds %x[{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK:        llvm.call_intrinsic "llvm.nvvm.shfl.sync.bfly.f32"({{.*}}) : (i32, f32, i32, i32) -> f32
// CHECK:        llvm.call_intrinsic "llvm.nvvm.shfl.sync.down.f32"({{.*}}) : (i32, f32, i32, i32) -> f32
// CHECK:        llvm.mlir.addressof @__shared_k_0 : !llvm.ptr<3>
// CHECK:        llvm.store {{.*}} : f32, !llvm.ptr<3>
// CHECK:        llvm.call_intrinsic "llvm.nvvm.barrier0"() : () -> ()
// CHECK:        llvm.return
kernel.func @k(%x: memref<256xf32, 1>) attributes {block = array<i64: 256, 1, 1>, min_blocks_per_sm = 2 : i64} {
  %t = kernel.thread_id x
  %b = kernel.block_id y
  %l = kernel.lane_id
  %v = memref.load %x[%t] : memref<256xf32, 1>
  %s = kernel.shuffle xor %v, 16 : f32
  %d = kernel.shuffle down %s, 1 : f32
  %sh = kernel.shared_alloc : memref<8xf32, 3>
  %c0 = arith.constant 0 : index
  memref.store %d, %sh[%c0] : memref<8xf32, 3>
  kernel.barrier
  kernel.return
}

// -----

// Atomics, grid barrier and dynamic shared memory; scf inside the kernel.
// CHECK:      llvm.mlir.global external @__mlfuse_dynamic_shared() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK:      llvm.func @coop(%acc: !llvm.ptr<1> {{.*}}, %c: !llvm.ptr<1> {{.*}}) attributes {nvvm.kernel, nvvm.maxntid = array<i32: 128, 1, 1>, mlfuse.dynamic_shared = 64 : i64, mlfuse.cooperative}
// CHECK:        llvm.mlir.addressof @__mlfuse_dynamic_shared : !llvm.ptr<3>
// CHECK-NEXT:   llvm.getelementptr inbounds %{{.*}}[32] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK:        llvm.cond_br
// CHECK:        llvm.inline_asm has_side_effects "red.global.add.f32 [$0], $1;", "l,f,~{memory}"
// CHECK:        llvm.inline_asm has_side_effects "{{.*}}atom.add.release.gpu.global.u32{{.*}}", "l,~{memory}" %c
kernel.func @coop(%acc: memref<4xf32, 1>, %c: memref<1xi32, 1>) attributes {block = array<i64: 128, 1, 1>, cooperative, dynamic_shared = 64 : i64} {
  %dyn = kernel.shared_alloc {dynamic, offset = 32 : i64} : memref<4xf32, 3>
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c4 step %c1 {
    kernel.atomic_add %one, %acc[%i] : f32, memref<4xf32, 1>
  }
  kernel.grid_sync %c : memref<1xi32, 1>
  kernel.return
}

// -----

// Host code is left alone; launches may target the lowered kernel.
// CHECK:      llvm.func @h(
// CHECK:      func.func @main(%[[X:.*]]: memref<4xf32, 1 : i64>)
// CHECK-NEXT:   kernel.launch @h(%[[X]])
kernel.func @h(%x: memref<4xf32, 1>) attributes {block = array<i64: 32, 1, 1>} {
  kernel.return
}
func.func @main(%x: memref<4xf32, 1>) {
  kernel.launch @h(%x) {grid = array<i64: 1, 1, 1>, block = array<i64: 32, 1, 1>, dynamic_shared = 0 : i64} : memref<4xf32, 1>
  func.return
}

// -----

// No transformation without kernels.
// CHECK:      func.func @plain(%a: i32) -> i32 {
// CHECK-NEXT:   func.return %a : i32
func.func @plain(%a: i32) -> i32 {
  func.return %a : i32
}

// -----

// f64 transcendentals would call libm, which a GPU does not have.
// CHECK: convert-kernel-to-nvvm.mlir:[[# @LINE + 1]]:1: error: kernel @libm calls 'exp', which does not exist on the GPU
kernel.func @libm(%x: memref<4xf64, 1>) attributes {block = array<i64: 32, 1, 1>} {
  %c0 = arith.constant 0 : index
  %v = memref.load %x[%c0] : memref<4xf64, 1>
  %e = math.exp %v : f64
  memref.store %e, %x[%c0] : memref<4xf64, 1>
  kernel.return
}
