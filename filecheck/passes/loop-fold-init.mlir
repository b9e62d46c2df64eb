// RUN: mlfuse-opt %s --split-input-file -p loop-fold-init | filecheck %s
// RUN: not mlfuse-opt %s -p 'loop-fold-init{points=3}' 2>&1 | filecheck %s --check-prefix=BAD

// loop-fold-init (mlfuse/poly/init_folding.py): the constant a nest writes over a
// small window reduction's output becomes the reduction's `init`, read by each output
// element's first reduction step; the init nest goes away.

// BAD: points

// The taps (d2, d3) run inside the output's dimensions: folded.
// CHECK-LABEL: func.func @taps_inside
// CHECK-NOT: "conv_init"
// CHECK: loop.nest "conv2d" lower [0, 0, 0, 0] upper [4, 6, 3, 3] {{.*}} init [0.000000e+00 : f32] {
func.func @taps_inside(%x: memref<6x8xf32>, %w: memref<3x3xf32>, %y: memref<4x6xf32>) {
  loop.nest "conv_init" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins() outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "conv2d" lower [0, 0, 0, 0] upper [4, 6, 3, 3] iterators ["parallel", "parallel", "reduction", "reduction"] ins(%x, %w : memref<6x8xf32>, memref<3x3xf32>) outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0 + d2, d1 + d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1)>] {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    loop.yield %s : f32
  }
  func.return
}

// -----

// In a tile (bounds in the band's index), other nests in between writing other buffers.
// CHECK-LABEL: func.func @in_a_tile
// CHECK: loop.band
// CHECK-NOT: "pool_init"
// CHECK: loop.nest "pad"
// CHECK: loop.nest "pool" {{.*}} init [0xff800000 : f32] {
func.func @in_a_tile(%x: memref<8x8xf32>, %y: memref<8x6xf32>) {
  loop.band "pool.tiles" upper [4] {
  ^bb0(%t: index):
    %p = memref.alloca() : memref<2x8xf32>
    loop.nest "pool_init" syms(%t) lower [affine_map<()[s0] -> (s0 * 2)>, 0] upper [affine_map<()[s0] -> (s0 * 2 + 2)>, 6] iterators ["parallel", "parallel"] ins() outs(%y : memref<8x6xf32>) maps [affine_map<(d0, d1)[s0] -> (d0, d1)>] {
    ^bb0(%o: f32):
      %m = arith.constant 0xFF800000 : f32
      loop.yield %m : f32
    }
    loop.nest "pad" syms(%t) lower [affine_map<()[s0] -> (s0 * 2)>, 0] upper [affine_map<()[s0] -> (s0 * 2 + 2)>, 8] iterators ["parallel", "parallel"] ins(%x : memref<8x8xf32>) outs(%p : memref<2x8xf32>) maps [affine_map<(d0, d1)[s0] -> (d0, d1)>, affine_map<(d0, d1)[s0] -> (d0 - s0 * 2, d1)>] {
    ^bb0(%a: f32, %o: f32):
      loop.yield %a : f32
    }
    loop.nest "pool" syms(%t) lower [affine_map<()[s0] -> (s0 * 2)>, 0, 0] upper [affine_map<()[s0] -> (s0 * 2 + 2)>, 6, 3] iterators ["parallel", "parallel", "reduction"] ins(%p : memref<2x8xf32>) outs(%y : memref<8x6xf32>) maps [affine_map<(d0, d1, d2)[s0] -> (d0 - s0 * 2, d1 + d2)>, affine_map<(d0, d1, d2)[s0] -> (d0, d1)>] {
    ^bb0(%a: f32, %acc: f32):
      %m = arith.maximumf %acc, %a : f32
      loop.yield %m : f32
    }
  }
  func.return
}

// -----

// Not folded: the taps run outside a dimension of the output (its first step and the
// others would meet in one loop), a read of the buffer in between, other bounds, a
// start value that is not a constant, a long reduction, a reduction that reads its
// output, an empty reduction (it never takes a first step: the zeros must be written).
// CHECK-LABEL: func.func @not_folded
// CHECK-COUNT-7: loop.nest "init"
func.func @not_folded(%x: memref<6x8xf32>, %w: memref<3x3xf32>, %y: memref<4x6xf32>, %r: memref<4x6xf32>, %long: memref<4x128xf32>, %s: memref<4xf32>) {
  loop.nest "init" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins() outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "taps_outside" lower [0, 0, 0, 0] upper [4, 3, 3, 6] iterators ["parallel", "reduction", "reduction", "parallel"] ins(%x, %w : memref<6x8xf32>, memref<3x3xf32>) outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0 + d1, d3 + d2)>, affine_map<(d0, d1, d2, d3) -> (d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d3)>] {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %q = arith.addf %acc, %p : f32
    loop.yield %q : f32
  }
  loop.nest "init" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins() outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "read" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins(%y : memref<4x6xf32>) outs(%r : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.nest "after_a_read" lower [0, 0, 0] upper [4, 6, 3] iterators ["parallel", "parallel", "reduction"] ins(%x : memref<6x8xf32>) outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1 + d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] {
  ^bb0(%a: f32, %acc: f32):
    %q = arith.addf %acc, %a : f32
    loop.yield %q : f32
  }
  loop.nest "init" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins() outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "other_bounds" lower [0, 0, 0] upper [4, 5, 3] iterators ["parallel", "parallel", "reduction"] ins(%x : memref<6x8xf32>) outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1 + d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] {
  ^bb0(%a: f32, %acc: f32):
    %q = arith.addf %acc, %a : f32
    loop.yield %q : f32
  }
  loop.nest "init" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins(%r : memref<4x6xf32>) outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.nest "copied_start" lower [0, 0, 0] upper [4, 6, 3] iterators ["parallel", "parallel", "reduction"] ins(%x : memref<6x8xf32>) outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1 + d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] {
  ^bb0(%a: f32, %acc: f32):
    %q = arith.addf %acc, %a : f32
    loop.yield %q : f32
  }
  loop.nest "init" lower [0] upper [4] iterators ["parallel"] ins() outs(%s : memref<4xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "long" lower [0, 0] upper [4, 128] iterators ["parallel", "reduction"] ins(%long : memref<4x128xf32>) outs(%s : memref<4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>] {
  ^bb0(%a: f32, %acc: f32):
    %q = arith.addf %acc, %a : f32
    loop.yield %q : f32
  }
  loop.nest "init" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins() outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "reads_its_output" lower [0, 0, 0] upper [4, 6, 3] iterators ["parallel", "parallel", "reduction"] ins(%y : memref<4x6xf32>) outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>] {
  ^bb0(%a: f32, %acc: f32):
    %q = arith.addf %acc, %a : f32
    loop.yield %q : f32
  }
  loop.nest "init" lower [0] upper [4] iterators ["parallel"] ins() outs(%s : memref<4xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "empty" lower [0, 0] upper [4, 0] iterators ["parallel", "reduction"] ins(%long : memref<4x128xf32>) outs(%s : memref<4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>] {
  ^bb0(%a: f32, %acc: f32):
    %q = arith.addf %acc, %a : f32
    loop.yield %q : f32
  }
  func.return
}
