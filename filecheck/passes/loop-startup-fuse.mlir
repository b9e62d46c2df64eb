// RUN: mlfuse-opt %s --split-input-file -p loop-startup-fuse | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p 'loop-startup-fuse{merge=false}' | filecheck %s --check-prefix=NOMERGE

// A slice is a copy: its reader reads the source through the composed map, and
// the copy and its buffer disappear. Then the two pointwise nests merge into one.
// CHECK-LABEL: func.func @slice_then_pointwise
// CHECK-NEXT: loop.nest "neg" lower [0, 0] upper [8, 6] iterators ["parallel", "parallel"] ins(%{{.*}} : memref<8x8xf32>) outs(%{{.*}} : memref<8x6xf32>) maps [affine_map<(d0, d1) -> (d0, (d1 + 2))>, affine_map<(d0, d1) -> (d0, d1)>] {
// CHECK-NEXT: ^{{.*}}(%[[A:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[E:.*]] = math.exp %[[A]] : f32
// CHECK-NEXT: %[[N:.*]] = arith.negf %[[E]] : f32
// CHECK-NEXT: loop.yield %[[N]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: func.return
// NOMERGE-LABEL: func.func @slice_then_pointwise
// NOMERGE-NEXT: memref.alloc
// NOMERGE-NEXT: loop.nest "exp" {{.*}} ins(%{{.*}} : memref<8x8xf32>) {{.*}} maps [affine_map<(d0, d1) -> (d0, (d1 + 2))>, affine_map<(d0, d1) -> (d0, d1)>]
// NOMERGE: loop.nest "neg"
func.func @slice_then_pointwise(%x: memref<8x8xf32>, %y: memref<8x6xf32>) {
  %s = memref.alloc() : memref<8x6xf32>
  loop.nest "slice" lower [0, 0] upper [8, 6] iterators ["parallel", "parallel"] ins(%x : memref<8x8xf32>) outs(%s : memref<8x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1 + 2)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  %e = memref.alloc() : memref<8x6xf32>
  loop.nest "exp" lower [0, 0] upper [8, 6] iterators ["parallel", "parallel"] ins(%s : memref<8x6xf32>) outs(%e : memref<8x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    loop.yield %r : f32
  }
  memref.dealloc %s : memref<8x6xf32>
  loop.nest "neg" lower [0, 0] upper [8, 6] iterators ["parallel", "parallel"] ins(%e : memref<8x6xf32>) outs(%y : memref<8x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %r = arith.negf %a : f32
    loop.yield %r : f32
  }
  memref.dealloc %e : memref<8x6xf32>
  func.return
}

// -----

// A transpose and a broadcast are copies too (maps compose); a producer read by
// two consumers merges into the first and stays an output of the merged nest.
// CHECK-LABEL: func.func @transpose_broadcast
// CHECK-NEXT: %[[T:.*]] = memref.alloc() : memref<4x6xf32>
// CHECK-NEXT: loop.nest "add" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins(%{{.*}}, %{{.*}} : memref<6x4xf32>, memref<6xf32>) outs(%[[T]], %{{.*}} : memref<4x6xf32>, memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK: loop.nest "mul" {{.*}} ins(%[[T]]
func.func @transpose_broadcast(%x: memref<6x4xf32>, %b: memref<6xf32>, %y: memref<4x6xf32>, %z: memref<4x6xf32>) {
  %t = memref.alloc() : memref<4x6xf32>
  loop.nest "transpose" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins(%x : memref<6x4xf32>) outs(%t : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  %bb = memref.alloc() : memref<4x6xf32>
  loop.nest "broadcast" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins(%b : memref<6xf32>) outs(%bb : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  %u = memref.alloc() : memref<4x6xf32>
  loop.nest "exp" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins(%t : memref<4x6xf32>) outs(%u : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    loop.yield %r : f32
  }
  loop.nest "add" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins(%u, %bb : memref<4x6xf32>, memref<4x6xf32>) outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %r = arith.addf %a, %c : f32
    loop.yield %r : f32
  }
  loop.nest "mul" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins(%u, %u : memref<4x6xf32>, memref<4x6xf32>) outs(%z : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %r = arith.mulf %a, %c : f32
    loop.yield %r : f32
  }
  memref.dealloc %t : memref<4x6xf32>
  memref.dealloc %bb : memref<4x6xf32>
  memref.dealloc %u : memref<4x6xf32>
  func.return
}

// -----

// Not fused at start-up: a stencil (the consumer reads the producer shifted), a
// reduction producer, and a copy whose source is overwritten before the read.
// CHECK-LABEL: func.func @kept
// CHECK: loop.nest "double"
// CHECK: loop.nest "stencil"
// CHECK: loop.nest "sum"
// CHECK: loop.nest "use_sum"
// CHECK: loop.nest "copy"
// CHECK: loop.nest "overwrite"
// CHECK: loop.nest "use_copy"
func.func @kept(%x: memref<10xf32>, %y: memref<8xf32>, %z: memref<10xf32>, %w: memref<10xf32>) {
  %t = memref.alloc() : memref<10xf32>
  loop.nest "double" lower [0] upper [10] iterators ["parallel"] ins(%x : memref<10xf32>) outs(%t : memref<10xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %a : f32
    loop.yield %r : f32
  }
  loop.nest "stencil" lower [0] upper [8] iterators ["parallel"] ins(%t, %t : memref<10xf32>, memref<10xf32>) outs(%y : memref<8xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0 + 2)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    loop.yield %r : f32
  }
  %s = memref.alloc() : memref<1xf32>
  loop.nest "sum" lower [0] upper [10] iterators ["reduction"] ins(%x : memref<10xf32>) outs(%s : memref<1xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (0)>] {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    loop.yield %r : f32
  }
  loop.nest "use_sum" lower [0] upper [10] iterators ["parallel"] ins(%s : memref<1xf32>) outs(%z : memref<10xf32>) maps [affine_map<(d0) -> (0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  %c = memref.alloc() : memref<10xf32>
  loop.nest "copy" lower [0] upper [10] iterators ["parallel"] ins(%w : memref<10xf32>) outs(%c : memref<10xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.nest "overwrite" lower [0] upper [10] iterators ["parallel"] ins(%x : memref<10xf32>) outs(%w : memref<10xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.nest "use_copy" lower [0] upper [10] iterators ["parallel"] ins(%c, %z : memref<10xf32>, memref<10xf32>) outs(%z : memref<10xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    loop.yield %r : f32
  }
  memref.dealloc %t : memref<10xf32>
  memref.dealloc %s : memref<1xf32>
  memref.dealloc %c : memref<10xf32>
  func.return
}
