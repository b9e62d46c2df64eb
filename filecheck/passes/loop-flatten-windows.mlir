// RUN: mlfuse-opt %s --split-input-file -p loop-flatten-windows | filecheck %s
// RUN: not mlfuse-opt %s -p 'loop-flatten-windows{rows=8}' 2>&1 | filecheck %s --check-prefix=BAD

// loop-flatten-windows (mlfuse/poly/flatten_windows.py): a window nest over rows of at
// most 16 runs over the flat positions of rows as wide as its input's, taps inside.

// BAD: rows

// A 5x5 depthwise window over a 7x7 tile: positions 0..72 of rows 11 wide, the taps
// inside; the tile-local output is 11 wide, and its reader keeps its indices.
// CHECK-LABEL: func.func @dw5x5
// CHECK: %o = memref.alloca() : memref<1x7x11xf32>
// CHECK: loop.view %x : memref<1x11x11xf32> to memref<1x121xf32>
// CHECK: loop.view %o : memref<1x7x11xf32> to memref<1x77xf32>
// CHECK: loop.nest "conv2d" lower [0, 0, 0] upper [73, 5, 5] iterators ["parallel", "reduction", "reduction"]
// CHECK-SAME: maps [affine_map<(d0, d1, d2) -> (0, ((d0 + (d1 * 11)) + d2))>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (0, d0)>]
// CHECK: loop.nest "bias" {{.*}} ins(%o, %b : memref<1x7x11xf32>, memref<1xf32>)
// CHECK-SAME: affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @dw5x5(%x: memref<1x11x11xf32>, %w: memref<5x5xf32>, %b: memref<1xf32>, %y: memref<1x7x7xf32>) {
  %o = memref.alloca() : memref<1x7x7xf32>
  loop.nest "conv_init" lower [0, 0, 0] upper [1, 7, 7] iterators ["parallel", "parallel", "parallel"] ins() outs(%o : memref<1x7x7xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%acc: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "conv2d" lower [0, 0, 0, 0] upper [7, 5, 5, 7] iterators ["parallel", "reduction", "reduction", "parallel"] ins(%x, %w : memref<1x11x11xf32>, memref<5x5xf32>) outs(%o : memref<1x7x7xf32>) maps [affine_map<(d0, d1, d2, d3) -> (0, d0 + d1, d3 + d2)>, affine_map<(d0, d1, d2, d3) -> (d1, d2)>, affine_map<(d0, d1, d2, d3) -> (0, d0, d3)>] {
  ^bb0(%v: f32, %k: f32, %acc: f32):
    %m = arith.mulf %v, %k fastmath<contract> : f32
    %s = arith.addf %acc, %m fastmath<contract> : f32
    loop.yield %s : f32
  }
  loop.nest "bias" lower [0, 0, 0] upper [1, 7, 7] iterators ["parallel", "parallel", "parallel"] ins(%o, %b : memref<1x7x7xf32>, memref<1xf32>) outs(%y : memref<1x7x7xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %c: f32, %o2: f32):
    %s = arith.addf %v, %c : f32
    loop.yield %s : f32
  }
  func.return
}

// -----

// Inside a tile band (the channel a symbol), with the window's origin shifted by (1, 1):
// the flat read starts 1 * 9 + 1 = 10 elements on; the channel index keeps its symbol.
// CHECK-LABEL: func.func @in_band
// CHECK: %o = memref.alloca() : memref<1x1x4x9xf32>
// CHECK: %[[X:.*]] = loop.view %x : memref<1x2x9x9xf32> to memref<1x2x81xf32>
// CHECK: %[[O:.*]] = loop.view %o : memref<1x1x4x9xf32> to memref<1x1x36xf32>
// CHECK: loop.nest "pool_max" syms(%t) lower [0, affine_map<()[s0] -> (s0)>, 0, 0, 0] upper [1, affine_map<()[s0] -> ((s0 + 1))>, 31, 3, 3]
// CHECK-SAME: iterators ["parallel", "parallel", "parallel", "reduction", "reduction"]
// CHECK-SAME: ins(%[[X]] : memref<1x2x81xf32>) outs(%[[O]] : memref<1x1x36xf32>)
// CHECK-SAME: maps [affine_map<(d0, d1, d2, d3, d4)[s0] -> (d0, d1, (((d2 + (d3 * 9)) + d4) + 10))>, affine_map<(d0, d1, d2, d3, d4)[s0] -> (d0, (d1 + (s0 * -1)), d2)>]
// CHECK: loop.nest "copy" {{.*}} ins(%o : memref<1x1x4x9xf32>)
func.func @in_band(%x: memref<1x2x9x9xf32>, %y: memref<1x2x4x4xf32>) {
  loop.band "pool.tiles" upper [2] {
  ^bb0(%t: index):
    %o = memref.alloca() : memref<1x1x4x4xf32>
    loop.nest "pool_max" syms(%t) lower [0, affine_map<()[s0] -> (s0)>, 0, 0, 0, 0] upper [1, affine_map<()[s0] -> (s0 + 1)>, 4, 3, 3, 4] iterators ["parallel", "parallel", "parallel", "reduction", "reduction", "parallel"] ins(%x : memref<1x2x9x9xf32>) outs(%o : memref<1x1x4x4xf32>) maps [affine_map<(d0, d1, d2, d3, d4, d5)[s0] -> (d0, d1, d2 + d3 + 1, d5 + d4 + 1)>, affine_map<(d0, d1, d2, d3, d4, d5)[s0] -> (d0, d1 - s0, d2, d5)>] {
    ^bb0(%v: f32, %acc: f32):
      %m = arith.maximumf %acc, %v : f32
      loop.yield %m : f32
    }
    loop.nest "copy" syms(%t) lower [0, affine_map<()[s0] -> (s0)>, 0, 0] upper [1, affine_map<()[s0] -> (s0 + 1)>, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%o : memref<1x1x4x4xf32>) outs(%y : memref<1x2x4x4xf32>) maps [affine_map<(d0, d1, d2, d3)[s0] -> (d0, d1 - s0, d2, d3)>, affine_map<(d0, d1, d2, d3)[s0] -> (d0, d1, d2, d3)>] {
    ^bb0(%v: f32, %o2: f32):
      loop.yield %v : f32
    }
  }
  func.return
}

// -----

// A tile-local padded input (filled, then copied into): the 61 positions of a 7x7 3x3
// window over rows 9 wide run on to 64 (four 16-lane vectors); the input grows by a row
// (the last position reads element 63 + 2 * 9 + 2 = 83 of 90), the output to 8 rows of 9.
// Its fill and copy keep their indices.
// CHECK-LABEL: func.func @rounded
// CHECK: %p = memref.alloca() : memref<1x10x9xf32>
// CHECK: loop.nest "fill" {{.*}} upper [1, 9, 9]
// CHECK-SAME: outs(%p : memref<1x10x9xf32>)
// CHECK: loop.nest "copy" {{.*}} upper [1, 7, 7]
// CHECK-SAME: outs(%p : memref<1x10x9xf32>)
// CHECK: %o = memref.alloca() : memref<1x8x9xf32>
// CHECK: loop.view %p : memref<1x10x9xf32> to memref<1x90xf32>
// CHECK: loop.view %o : memref<1x8x9xf32> to memref<1x72xf32>
// CHECK: loop.nest "conv2d" lower [0, 0, 0] upper [64, 3, 3]
// CHECK: loop.nest "relu" {{.*}} upper [1, 7, 7] {{.*}} ins(%o : memref<1x8x9xf32>)
func.func @rounded(%x: memref<1x7x7xf32>, %w: memref<3x3xf32>, %y: memref<1x7x7xf32>) {
  %p = memref.alloca() : memref<1x9x9xf32>
  loop.nest "fill" lower [0, 0, 0] upper [1, 9, 9] iterators ["parallel", "parallel", "parallel"] ins() outs(%p : memref<1x9x9xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%o2: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "copy" lower [0, 0, 0] upper [1, 7, 7] iterators ["parallel", "parallel", "parallel"] ins(%x : memref<1x7x7xf32>) outs(%p : memref<1x9x9xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1 + 1, d2 + 1)>] {
  ^bb0(%v: f32, %o2: f32):
    loop.yield %v : f32
  }
  %o = memref.alloca() : memref<1x7x7xf32>
  loop.nest "conv2d" lower [0, 0, 0, 0] upper [7, 3, 3, 7] iterators ["parallel", "reduction", "reduction", "parallel"] ins(%p, %w : memref<1x9x9xf32>, memref<3x3xf32>) outs(%o : memref<1x7x7xf32>) maps [affine_map<(d0, d1, d2, d3) -> (0, d0 + d1, d3 + d2)>, affine_map<(d0, d1, d2, d3) -> (d1, d2)>, affine_map<(d0, d1, d2, d3) -> (0, d0, d3)>] {
  ^bb0(%v: f32, %k: f32, %acc: f32):
    %m = arith.mulf %v, %k fastmath<contract> : f32
    %s = arith.addf %acc, %m fastmath<contract> : f32
    loop.yield %s : f32
  }
  loop.nest "relu" lower [0, 0, 0] upper [1, 7, 7] iterators ["parallel", "parallel", "parallel"] ins(%o : memref<1x7x7xf32>) outs(%y : memref<1x7x7xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %o2: f32):
    %z = arith.constant 0.0 : f32
    %r = arith.maximumf %v, %z : f32
    loop.yield %r : f32
  }
  func.return
}

// -----

// Not rounded: the tile-local input is also read through a view (which fixes its shape);
// the positions stop at the last output, 61.
// CHECK-LABEL: func.func @input_viewed
// CHECK: %p = memref.alloca() : memref<1x9x9xf32>
// CHECK: %o = memref.alloca() : memref<1x7x9xf32>
// CHECK: loop.nest "conv2d" lower [0, 0, 0] upper [61, 3, 3]
func.func @input_viewed(%x: memref<1x7x7xf32>, %w: memref<3x3xf32>, %y: memref<1x7x7xf32>, %q: memref<81xf32>) {
  %p = memref.alloca() : memref<1x9x9xf32>
  loop.nest "copy" lower [0, 0, 0] upper [1, 7, 7] iterators ["parallel", "parallel", "parallel"] ins(%x : memref<1x7x7xf32>) outs(%p : memref<1x9x9xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1 + 1, d2 + 1)>] {
  ^bb0(%v: f32, %o2: f32):
    loop.yield %v : f32
  }
  %pv = loop.view %p : memref<1x9x9xf32> to memref<81xf32>
  loop.nest "out" lower [0] upper [81] iterators ["parallel"] ins(%pv : memref<81xf32>) outs(%q : memref<81xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%v: f32, %o2: f32):
    loop.yield %v : f32
  }
  %o = memref.alloca() : memref<1x7x7xf32>
  loop.nest "conv2d" lower [0, 0, 0, 0] upper [7, 3, 3, 7] iterators ["parallel", "reduction", "reduction", "parallel"] ins(%p, %w : memref<1x9x9xf32>, memref<3x3xf32>) outs(%o : memref<1x7x7xf32>) maps [affine_map<(d0, d1, d2, d3) -> (0, d0 + d1, d3 + d2)>, affine_map<(d0, d1, d2, d3) -> (d1, d2)>, affine_map<(d0, d1, d2, d3) -> (0, d0, d3)>] {
  ^bb0(%v: f32, %k: f32, %acc: f32):
    %m = arith.mulf %v, %k fastmath<contract> : f32
    %s = arith.addf %acc, %m fastmath<contract> : f32
    loop.yield %s : f32
  }
  loop.nest "relu" lower [0, 0, 0] upper [1, 7, 7] iterators ["parallel", "parallel", "parallel"] ins(%o : memref<1x7x7xf32>) outs(%y : memref<1x7x7xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %o2: f32):
    loop.yield %v : f32
  }
  func.return
}

// -----

// Kept: a strided window, an output that is an argument, an output a view reads, and
// rows wider than 16.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: loop.view
// CHECK: loop.nest "strided" lower [0, 0, 0, 0] upper [3, 3, 3, 3]
// CHECK: loop.nest "to_argument" lower [0, 0, 0, 0] upper [3, 3, 3, 3]
// CHECK: loop.nest "viewed" lower [0, 0, 0, 0] upper [3, 3, 3, 3]
// CHECK: loop.view %v
// CHECK: loop.nest "wide" lower [0, 0, 0, 0] upper [1, 3, 3, 17]
func.func @kept(%x: memref<9x9xf32>, %xw: memref<3x19xf32>, %y: memref<3x3xf32>) {
  %s = memref.alloca() : memref<3x3xf32>
  loop.nest "strided" lower [0, 0, 0, 0] upper [3, 3, 3, 3] iterators ["parallel", "reduction", "reduction", "parallel"] ins(%x : memref<9x9xf32>) outs(%s : memref<3x3xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0 * 2 + d1, d3 * 2 + d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d3)>] {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.addf %acc, %a : f32
    loop.yield %m : f32
  }
  loop.nest "to_argument" lower [0, 0, 0, 0] upper [3, 3, 3, 3] iterators ["parallel", "reduction", "reduction", "parallel"] ins(%x : memref<9x9xf32>) outs(%y : memref<3x3xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0 + d1, d3 + d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d3)>] {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.addf %acc, %a : f32
    loop.yield %m : f32
  }
  %v = memref.alloca() : memref<3x3xf32>
  loop.nest "viewed" lower [0, 0, 0, 0] upper [3, 3, 3, 3] iterators ["parallel", "reduction", "reduction", "parallel"] ins(%x : memref<9x9xf32>) outs(%v : memref<3x3xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0 + d1, d3 + d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d3)>] {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.addf %acc, %a : f32
    loop.yield %m : f32
  }
  %vv = loop.view %v : memref<3x3xf32> to memref<9xf32>
  %w = memref.alloca() : memref<1x3x17xf32>
  loop.nest "wide" lower [0, 0, 0, 0] upper [1, 3, 3, 17] iterators ["parallel", "reduction", "reduction", "parallel"] ins(%xw : memref<3x19xf32>) outs(%w : memref<1x3x17xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d1, d3 + d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>] {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.addf %acc, %a : f32
    loop.yield %m : f32
  }
  func.return
}
