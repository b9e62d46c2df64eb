// RUN: mlfuse-opt %s --split-input-file -p loop-deinterleave-windows | filecheck %s
// RUN: not mlfuse-opt %s -p 'loop-deinterleave-windows{stride=3}' 2>&1 | filecheck %s --check-prefix=BAD

// loop-deinterleave-windows (mlfuse/poly/deinterleave_windows.py): a tile-local buffer
// that windows read at column stride 2 becomes rows of its even, then its odd columns;
// the fill and the copy that write it write that layout.

// BAD: stride

// A 3x3 stride-2 max pool over 8x8 padded by one on the top and left (9x9): the fill
// covers both phases of 5; the copy runs over column pairs (d2, d3), its column
// 2 * d2 + d3 + 1 odd, so phase 1 - d3 at d2 + d3; each tap kw reads phase kw mod 2 at
// ow + kw floordiv 2.
// CHECK-LABEL: func.func @pool
// CHECK: %p = memref.alloca() : memref<1x9x2x5xf32>
// CHECK: loop.nest "pad_fill" lower [0, 0, 0, 0] upper [1, 9, 2, 5]
// CHECK-SAME: maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]
// CHECK: loop.nest "pad_copy" lower [0, 0, 0, 0] upper [1, 8, 4, 2]
// CHECK-SAME: maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, ((d2 * 2) + d3))>, affine_map<(d0, d1, d2, d3) -> (d0, (d1 + 1), ((d3 * -1) + 1), (d2 + d3))>]
// CHECK: loop.nest "pool_max" lower [0, 0, 0, 0, 0] upper [1, 4, 4, 3, 3]
// CHECK-SAME: maps [affine_map<(d0, d1, d2, d3, d4) -> (d0, ((d1 * 2) + d3), (d4 mod 2), (d2 + (d4 floordiv 2)))>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>]
func.func @pool(%x: memref<1x8x8xf32>, %y: memref<1x4x4xf32>) {
  %p = memref.alloca() : memref<1x9x9xf32>
  loop.nest "pad_fill" lower [0, 0, 0] upper [1, 9, 9] iterators ["parallel", "parallel", "parallel"] ins() outs(%p : memref<1x9x9xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%o: f32):
    %c = arith.constant 0xFF800000 : f32
    loop.yield %c : f32
  }
  loop.nest "pad_copy" lower [0, 0, 0] upper [1, 8, 8] iterators ["parallel", "parallel", "parallel"] ins(%x : memref<1x8x8xf32>) outs(%p : memref<1x9x9xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1 + 1, d2 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "pool_max" lower [0, 0, 0, 0, 0] upper [1, 4, 4, 3, 3] iterators ["parallel", "parallel", "parallel", "reduction", "reduction"] ins(%p : memref<1x9x9xf32>) outs(%y : memref<1x4x4xf32>) maps [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 * 2 + d3, d2 * 2 + d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %acc: f32):
    %m = arith.maximumf %acc, %v : f32
    loop.yield %m : f32
  }
  func.return
}

// -----

// Inside a channel tile (a symbol), the copy with a bias (a second input, by channel)
// into a buffer padded by two on the left: column d3 + 2 is even, so phase d4 at d3 + 1.
// A 1x1 window at stride 2 reads phase 0 at ow + 1 (column 2 * ow + 2).
// CHECK-LABEL: func.func @in_tile
// CHECK: %p = memref.alloca() : memref<1x1x6x2x5xf32>
// CHECK: loop.nest "pad_copy" syms(%t) lower [0, affine_map<()[s0] -> (s0)>, 0, 0, 0] upper [1, affine_map<()[s0] -> ((s0 + 1))>, 6, 4, 2]
// CHECK-SAME: maps [affine_map<(d0, d1, d2, d3, d4)[s0] -> (d0, d1, d2, ((d3 * 2) + d4))>, affine_map<(d0, d1, d2, d3, d4)[s0] -> (d1)>, affine_map<(d0, d1, d2, d3, d4)[s0] -> (d0, (d1 + (s0 * -1)), d2, d4, (d3 + 1))>]
// CHECK: loop.nest "sample" syms(%t)
// CHECK-SAME: maps [affine_map<(d0, d1, d2, d3)[s0] -> (d0, (d1 + (s0 * -1)), d2, 0, (d3 + 1))>
func.func @in_tile(%x: memref<1x2x6x8xf32>, %b: memref<2xf32>, %y: memref<1x2x6x4xf32>) {
  loop.band "tiles" upper [2] {
  ^bb0(%t: index):
    %p = memref.alloca() : memref<1x1x6x10xf32>
    loop.nest "pad_fill" syms(%t) lower [0, affine_map<()[s0] -> (s0)>, 0, 0] upper [1, affine_map<()[s0] -> (s0 + 1)>, 6, 10] iterators ["parallel", "parallel", "parallel", "parallel"] ins() outs(%p : memref<1x1x6x10xf32>) maps [affine_map<(d0, d1, d2, d3)[s0] -> (d0, d1 - s0, d2, d3)>] {
    ^bb0(%o: f32):
      %c = arith.constant 0.0 : f32
      loop.yield %c : f32
    }
    loop.nest "pad_copy" syms(%t) lower [0, affine_map<()[s0] -> (s0)>, 0, 0] upper [1, affine_map<()[s0] -> (s0 + 1)>, 6, 8] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%x, %b : memref<1x2x6x8xf32>, memref<2xf32>) outs(%p : memref<1x1x6x10xf32>) maps [affine_map<(d0, d1, d2, d3)[s0] -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3)[s0] -> (d1)>, affine_map<(d0, d1, d2, d3)[s0] -> (d0, d1 - s0, d2, d3 + 2)>] {
    ^bb0(%v: f32, %bias: f32, %o: f32):
      %s = arith.addf %v, %bias : f32
      loop.yield %s : f32
    }
    loop.nest "sample" syms(%t) lower [0, affine_map<()[s0] -> (s0)>, 0, 0] upper [1, affine_map<()[s0] -> (s0 + 1)>, 6, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%p : memref<1x1x6x10xf32>) outs(%y : memref<1x2x6x4xf32>) maps [affine_map<(d0, d1, d2, d3)[s0] -> (d0, d1 - s0, d2, d3 * 2 + 2)>, affine_map<(d0, d1, d2, d3)[s0] -> (d0, d1, d2, d3)>] {
    ^bb0(%v: f32, %o: f32):
      loop.yield %v : f32
    }
  }
  func.return
}

// -----

// Kept: a window at column stride 1 beside the strided one, a copy of an odd number of
// columns, a fill of part of a row, and a buffer a view reads.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-4: memref.alloca() : memref<1x9x9xf32>
// CHECK-NOT: x2x
func.func @kept(%x: memref<1x8x8xf32>, %x7: memref<1x8x7xf32>, %y: memref<1x4x4xf32>, %z: memref<1x7x7xf32>) {
  %a = memref.alloca() : memref<1x9x9xf32>
  loop.nest "pad_copy" lower [0, 0, 0] upper [1, 8, 8] iterators ["parallel", "parallel", "parallel"] ins(%x : memref<1x8x8xf32>) outs(%a : memref<1x9x9xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "strided" lower [0, 0, 0, 0] upper [1, 4, 4, 3] iterators ["parallel", "parallel", "parallel", "reduction"] ins(%a : memref<1x9x9xf32>) outs(%y : memref<1x4x4xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 * 2 + d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    loop.yield %s : f32
  }
  loop.nest "unit_stride" lower [0, 0, 0, 0] upper [1, 7, 7, 3] iterators ["parallel", "parallel", "parallel", "reduction"] ins(%a : memref<1x9x9xf32>) outs(%z : memref<1x7x7xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 + d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    loop.yield %s : f32
  }
  %b = memref.alloca() : memref<1x9x9xf32>
  loop.nest "odd_copy" lower [0, 0, 0] upper [1, 8, 7] iterators ["parallel", "parallel", "parallel"] ins(%x7 : memref<1x8x7xf32>) outs(%b : memref<1x9x9xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "strided" lower [0, 0, 0, 0] upper [1, 4, 4, 3] iterators ["parallel", "parallel", "parallel", "reduction"] ins(%b : memref<1x9x9xf32>) outs(%y : memref<1x4x4xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 * 2 + d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    loop.yield %s : f32
  }
  %c = memref.alloca() : memref<1x9x9xf32>
  loop.nest "part_fill" lower [0, 0, 0] upper [1, 9, 1] iterators ["parallel", "parallel", "parallel"] ins() outs(%c : memref<1x9x9xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%o: f32):
    %k = arith.constant 0.0 : f32
    loop.yield %k : f32
  }
  loop.nest "strided" lower [0, 0, 0, 0] upper [1, 4, 4, 3] iterators ["parallel", "parallel", "parallel", "reduction"] ins(%c : memref<1x9x9xf32>) outs(%y : memref<1x4x4xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 * 2 + d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    loop.yield %s : f32
  }
  %d = memref.alloca() : memref<1x9x9xf32>
  loop.nest "strided" lower [0, 0, 0, 0] upper [1, 4, 4, 3] iterators ["parallel", "parallel", "parallel", "reduction"] ins(%d : memref<1x9x9xf32>) outs(%y : memref<1x4x4xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 * 2 + d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    loop.yield %s : f32
  }
  %dv = loop.view %d : memref<1x9x9xf32> to memref<1x81xf32>
  func.return
}
