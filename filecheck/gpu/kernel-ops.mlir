// RUN: mlfuse-opt %s | filecheck %s
// RUN: mlfuse-opt %s | mlfuse-opt | filecheck %s
// RUN: mlfuse-opt --print-op-generic %s | mlfuse-opt | filecheck %s

// CHECK:      kernel.func @ops(%x: memref<64x256xf32, 1 : i64>, %m: memref<64xf32, 1 : i64>, %c: memref<1xi32, 1 : i64>)
// CHECK-SAME: attributes {block = array<i64: 256, 1, 1>, dynamic_shared = 1024 : i64, min_blocks_per_sm = 2 : i64, cooperative}
// CHECK-NEXT:   %row = kernel.block_id x
// CHECK-NEXT:   %t = kernel.thread_id x
// CHECK-NEXT:   %n = kernel.block_dim y
// CHECK-NEXT:   %g = kernel.grid_dim z
// CHECK-NEXT:   %l = kernel.lane_id
// CHECK-NEXT:   %v = memref.load %x[%row, %t] : memref<64x256xf32, 1 : i64>
// CHECK-NEXT:   %p = kernel.shuffle xor %v, 16 : f32
// CHECK-NEXT:   %q = kernel.shuffle down %p, 1 : f32
// CHECK-NEXT:   %s = kernel.shared_alloc : memref<8xf32, 3 : i64>
// CHECK-NEXT:   %d = kernel.shared_alloc {dynamic, offset = 16 : i64} : memref<8xf32, 3 : i64>
// CHECK-NEXT:   kernel.barrier
// CHECK-NEXT:   kernel.atomic_add %q, %m[%row] : f32, memref<64xf32, 1 : i64>
// CHECK-NEXT:   kernel.grid_sync %c : memref<1xi32, 1 : i64>
// CHECK-NEXT:   kernel.return
kernel.func @ops(%x: memref<64x256xf32, 1>, %m: memref<64xf32, 1>, %c: memref<1xi32, 1>) attributes {block = array<i64: 256, 1, 1>, cooperative, dynamic_shared = 1024 : i64, min_blocks_per_sm = 2 : i64} {
  %row = kernel.block_id x
  %t = kernel.thread_id x
  %n = kernel.block_dim y
  %g = kernel.grid_dim z
  %l = kernel.lane_id
  %v = memref.load %x[%row, %t] : memref<64x256xf32, 1>
  %p = kernel.shuffle xor %v, 16 : f32
  %q = kernel.shuffle down %p, 1 : f32
  %s = kernel.shared_alloc : memref<8xf32, 3>
  %d = kernel.shared_alloc {dynamic, offset = 16 : i64} : memref<8xf32, 3>
  kernel.barrier
  kernel.atomic_add %q, %m[%row] : f32, memref<64xf32, 1>
  kernel.grid_sync %c : memref<1xi32, 1>
  kernel.return
}

// CHECK:      func.func @main(%x: memref<64x256xf32, 1 : i64>, %m: memref<64xf32, 1 : i64>)
// CHECK-NEXT:   %c = memref.alloc() : memref<1xi32, 1 : i64>
// CHECK-NEXT:   kernel.memset %c : memref<1xi32, 1 : i64>
// CHECK-NEXT:   kernel.launch @ops(%x, %m, %c) {grid = array<i64: 64, 1, 1>, block = array<i64: 256, 1, 1>, dynamic_shared = 1024 : i64}
func.func @main(%x: memref<64x256xf32, 1>, %m: memref<64xf32, 1>) {
  %c = memref.alloc() : memref<1xi32, 1>
  kernel.memset %c : memref<1xi32, 1>
  kernel.launch @ops(%x, %m, %c) {grid = array<i64: 64, 1, 1>, block = array<i64: 256, 1, 1>, dynamic_shared = 1024 : i64} : memref<64x256xf32, 1>, memref<64xf32, 1>, memref<1xi32, 1>
  func.return
}
