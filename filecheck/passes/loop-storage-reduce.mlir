// RUN: mlfuse-opt %s --split-input-file -p loop-storage-reduce | filecheck %s

// A per-tile scratch of the full intermediate's shape (what loop-post-tile-fuse
// leaves) shrinks to the box one tile touches, rows [16 T - 1, 16 T + 17) here: an
// 18-element buffer, accesses rebased by the origin 16 T - 1.
// CHECK-LABEL: func.func @shrink
// CHECK-NEXT: loop.band "smooth.tiles" upper [4] attributes {tile_sizes = array<i64: 16>} {
// CHECK-NEXT: ^{{.*}}(%{{.*}}: index):
// CHECK-NEXT: %[[S:.*]] = memref.alloca() : memref<18xf32>
// CHECK-NEXT: loop.nest "double" {{.*}} outs(%[[S]] : memref<18xf32>) maps [affine_map<(d0)[s0] -> ((d0 + 1))>, affine_map<(d0)[s0] -> ((d0 + ((s0 * -16) + 1)))>]
// CHECK: loop.nest "smooth" {{.*}} ins(%[[S]], %[[S]] : memref<18xf32>, memref<18xf32>) outs(%{{.*}} : memref<64xf32>) maps [affine_map<(d0)[s0] -> (((d0 + -1) + ((s0 * -16) + 1)))>, affine_map<(d0)[s0] -> (((d0 + 1) + ((s0 * -16) + 1)))>, affine_map<(d0)[s0] -> (d0)>]
func.func @shrink(%x: memref<66xf32>, %y: memref<64xf32>) {
  loop.band "smooth.tiles" upper [4] attributes {tile_sizes = array<i64: 16>} {
  ^bb0(%t: index):
    %s = memref.alloca() : memref<64xf32>
    loop.nest "double" syms(%t) lower [affine_map<()[s0] -> (s0 * 16 - 1, 0)>] upper [affine_map<()[s0] -> (s0 * 16 + 17, 64)>] iterators ["parallel"] ins(%x : memref<66xf32>) outs(%s : memref<64xf32>) maps [affine_map<(d0)[s0] -> (d0 + 1)>, affine_map<(d0)[s0] -> (d0)>] {
    ^bb0(%a: f32, %o: f32):
      %d = arith.addf %a, %a : f32
      loop.yield %d : f32
    }
    loop.nest "smooth" syms(%t) lower [affine_map<()[s0] -> (s0 * 16, 1)>] upper [affine_map<()[s0] -> (s0 * 16 + 16, 63)>] iterators ["parallel"] ins(%s, %s : memref<64xf32>, memref<64xf32>) outs(%y : memref<64xf32>) maps [affine_map<(d0)[s0] -> (d0 - 1)>, affine_map<(d0)[s0] -> (d0 + 1)>, affine_map<(d0)[s0] -> (d0)>] {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %r = arith.addf %a, %b : f32
      loop.yield %r : f32
    }
  }
  func.return
}

// -----

// An intermediate used only inside one tile band, each tile reading only what it
// wrote, becomes tile-local: the full-size alloc and its dealloc disappear.
// CHECK-LABEL: func.func @privatize
// CHECK-NOT: memref.alloc()
// CHECK: loop.band "scale.tiles"
// CHECK-NEXT: ^
// CHECK-NEXT: %[[S:.*]] = memref.alloca() : memref<8x32xf32>
// CHECK-NEXT: loop.nest "square" {{.*}} outs(%[[S]] : memref<8x32xf32>) maps [affine_map<(d0, d1)[s0] -> (d0, d1)>, affine_map<(d0, d1)[s0] -> ((d0 + (s0 * -8)), d1)>]
// CHECK-NOT: memref.dealloc
// CHECK: func.return
func.func @privatize(%x: memref<32x32xf32>, %y: memref<32x32xf32>) {
  %t = memref.alloc() : memref<32x32xf32>
  loop.band "scale.tiles" upper [4] attributes {tile_sizes = array<i64: 8, 0>} {
  ^bb0(%i: index):
    loop.nest "square" syms(%i) lower [affine_map<()[s0] -> (s0 * 8)>, 0] upper [affine_map<()[s0] -> (s0 * 8 + 8)>, 32] iterators ["parallel", "parallel"] ins(%x : memref<32x32xf32>) outs(%t : memref<32x32xf32>) maps [affine_map<(d0, d1)[s0] -> (d0, d1)>, affine_map<(d0, d1)[s0] -> (d0, d1)>] {
    ^bb0(%a: f32, %o: f32):
      %m = arith.mulf %a, %a : f32
      loop.yield %m : f32
    }
    loop.nest "scale" syms(%i) lower [affine_map<()[s0] -> (s0 * 8)>, 0] upper [affine_map<()[s0] -> (s0 * 8 + 8)>, 32] iterators ["parallel", "parallel"] ins(%t : memref<32x32xf32>) outs(%y : memref<32x32xf32>) maps [affine_map<(d0, d1)[s0] -> (d0, d1)>, affine_map<(d0, d1)[s0] -> (d0, d1)>] {
    ^bb0(%a: f32, %o: f32):
      %m = arith.addf %a, %a : f32
      loop.yield %m : f32
    }
  }
  memref.dealloc %t : memref<32x32xf32>
  func.return
}

// -----

// Not privatized: buffers also used outside the band (%t is computed before it,
// %u read after it). A buffer nobody uses any more is removed.
// CHECK-LABEL: func.func @kept
// CHECK-NEXT: %[[T:.*]] = memref.alloc() : memref<33x32xf32>
// CHECK-NEXT: %[[U:.*]] = memref.alloc() : memref<32x32xf32>
// CHECK-NOT: memref.alloc
// CHECK: loop.band "shifted.tiles"
// CHECK-NOT: memref.alloca
// CHECK: func.return
func.func @kept(%x: memref<33x32xf32>, %y: memref<32x32xf32>) {
  %t = memref.alloc() : memref<33x32xf32>
  %u = memref.alloc() : memref<32x32xf32>
  %dead = memref.alloc() : memref<32x32xf32>
  loop.nest "before" lower [0, 0] upper [33, 32] iterators ["parallel", "parallel"] ins(%x : memref<33x32xf32>) outs(%t : memref<33x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.band "shifted.tiles" upper [4] attributes {tile_sizes = array<i64: 8, 0>} {
  ^bb0(%i: index):
    loop.nest "square" syms(%i) lower [affine_map<()[s0] -> (s0 * 8)>, 0] upper [affine_map<()[s0] -> (s0 * 8 + 8)>, 32] iterators ["parallel", "parallel"] ins(%x : memref<33x32xf32>) outs(%u : memref<32x32xf32>) maps [affine_map<(d0, d1)[s0] -> (d0, d1)>, affine_map<(d0, d1)[s0] -> (d0, d1)>] {
    ^bb0(%a: f32, %o: f32):
      %m = arith.mulf %a, %a : f32
      loop.yield %m : f32
    }
    loop.nest "shifted" syms(%i) lower [affine_map<()[s0] -> (s0 * 8)>, 0] upper [affine_map<()[s0] -> (s0 * 8 + 8)>, 32] iterators ["parallel", "parallel"] ins(%t, %u : memref<33x32xf32>, memref<32x32xf32>) outs(%y : memref<32x32xf32>) maps [affine_map<(d0, d1)[s0] -> (d0 + 1, d1)>, affine_map<(d0, d1)[s0] -> (d0, d1)>, affine_map<(d0, d1)[s0] -> (d0, d1)>] {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %r = arith.addf %a, %b : f32
      loop.yield %r : f32
    }
  }
  loop.nest "reuse" lower [0, 0] upper [32, 32] iterators ["parallel", "parallel"] ins(%u : memref<32x32xf32>) outs(%y : memref<32x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    loop.yield %s : f32
  }
  memref.dealloc %t : memref<33x32xf32>
  memref.dealloc %u : memref<32x32xf32>
  memref.dealloc %dead : memref<32x32xf32>
  func.return
}
