// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK: 'kernel.func' block [2048, 1, 1] has 2048 threads, more than 1024
kernel.func @too_big(%x: memref<4xf32, 1>) attributes {block = array<i64: 2048, 1, 1>} {
  kernel.return
}

// -----

// CHECK: 'kernel.func' argument 0 must be a statically shaped memref in global memory (memory space 1), got memref<4xf32>
kernel.func @host_memory(%x: memref<4xf32>) attributes {block = array<i64: 32, 1, 1>} {
  kernel.return
}

// -----

// CHECK: 'kernel.thread_id' must be inside a 'kernel.func'
func.func @outside() {
  %t = kernel.thread_id x
  func.return
}

// -----

// CHECK: 'kernel.shuffle' moves f32 or i32 values, got f64
kernel.func @wide(%x: memref<4xf64, 1>) attributes {block = array<i64: 32, 1, 1>} {
  %c = arith.constant 0 : index
  %v = memref.load %x[%c] : memref<4xf64, 1>
  %s = kernel.shuffle xor %v, 1 : f64
  kernel.return
}

// -----

// CHECK: 'kernel.shuffle' offset must be in 1..31, got 32
kernel.func @far(%x: memref<4xf32, 1>) attributes {block = array<i64: 32, 1, 1>} {
  %c = arith.constant 0 : index
  %v = memref.load %x[%c] : memref<4xf32, 1>
  %s = kernel.shuffle xor %v, 32 : f32
  kernel.return
}

// -----

// CHECK: 'kernel.grid_sync' needs a cooperative kernel
kernel.func @not_cooperative(%c: memref<1xi32, 1>) attributes {block = array<i64: 32, 1, 1>} {
  kernel.grid_sync %c : memref<1xi32, 1>
  kernel.return
}

// -----

// CHECK: 'kernel.shared_alloc' ends at byte 48, beyond the kernel's 32 bytes of dynamic shared memory
kernel.func @overflow(%x: memref<4xf32, 1>) attributes {block = array<i64: 32, 1, 1>, dynamic_shared = 32 : i64} {
  %s = kernel.shared_alloc {dynamic, offset = 16 : i64} : memref<8xf32, 3>
  kernel.return
}

// -----

// CHECK: 'kernel.launch' block [128, 1, 1] differs from the block [256, 1, 1] @k was written for
kernel.func @k(%x: memref<4xf32, 1>) attributes {block = array<i64: 256, 1, 1>} {
  kernel.return
}
func.func @main(%x: memref<4xf32, 1>) {
  kernel.launch @k(%x) {grid = array<i64: 1, 1, 1>, block = array<i64: 128, 1, 1>, dynamic_shared = 0 : i64} : memref<4xf32, 1>
  func.return
}

// -----

// CHECK: 'kernel.atomic_add' adds f32 or i32 elements, got f64
kernel.func @atomic64(%x: memref<4xf64, 1>) attributes {block = array<i64: 32, 1, 1>} {
  %c = arith.constant 0 : index
  %v = memref.load %x[%c] : memref<4xf64, 1>
  kernel.atomic_add %v, %x[%c] : f64, memref<4xf64, 1>
  kernel.return
}
