// RUN: mlfuse-opt %s --split-input-file -p 'loop-tile{sizes=32,16}' | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p 'loop-tile{sizes=8,8 shape=parallelogram}' | filecheck %s --check-prefix=PARA
// Why something was not tiled, on stderr:
// RUN: mlfuse-opt %s --split-input-file -p 'loop-tile{sizes=32,16 remarks=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: mlfuse-opt %s --split-input-file -p 'loop-tile{sizes=8,8 shape=parallelogram remarks=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=PREMARK

// A live-out is cut into 32x16 tiles of its own index space: a band over tile
// indices, bounds affine in them, a min at the last (partial) tile.
// CHECK-LABEL: func.func @rect
// CHECK-NEXT: loop.band "exp.tiles" upper [4, 5] attributes {tile_sizes = array<i64: 32, 16>} {
// CHECK-NEXT: ^{{.*}}(%[[T0:.*]]: index, %[[T1:.*]]: index):
// CHECK-NEXT: loop.nest "exp" syms(%[[T0]], %[[T1]]) lower [affine_map<()[s0, s1] -> ((s0 * 32))>, affine_map<()[s0, s1] -> ((s1 * 16))>] upper [affine_map<()[s0, s1] -> (((s0 * 32) + 32), 100)>, affine_map<()[s0, s1] -> (((s1 * 16) + 16), 70)>] iterators ["parallel", "parallel"] ins(%{{.*}} : memref<100x70xf32>) outs(%{{.*}} : memref<100x70xf32>) maps [affine_map<(d0, d1)[s0, s1] -> (d0, d1)>, affine_map<(d0, d1)[s0, s1] -> (d0, d1)>]
// CHECK: math.exp
// PARA-LABEL: func.func @rect
// PARA: loop.band "exp.tiles" upper [13, 9] attributes {tile_sizes = array<i64: 8, 8>}
func.func @rect(%x: memref<100x70xf32>, %y: memref<100x70xf32>) {
  loop.nest "exp" lower [0, 0] upper [100, 70] iterators ["parallel", "parallel"] ins(%x : memref<100x70xf32>) outs(%y : memref<100x70xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    loop.yield %e : f32
  }
  func.return
}

// -----

// Every writer of the live-out moves into the band (the init and the reduction);
// sizes apply to trailing dimensions, and a reduced dimension stays whole.
// CHECK-LABEL: func.func @rowsum
// CHECK-NEXT: loop.band "reduce_sum.tiles" upper [7] attributes {tile_sizes = array<i64: 16>} {
// CHECK: loop.nest "init_sum" syms(%{{.*}}) lower [affine_map<()[s0] -> ((s0 * 16))>] upper [affine_map<()[s0] -> (((s0 * 16) + 16), 100)>]
// CHECK: loop.nest "reduce_sum" syms(%{{.*}}) lower [affine_map<()[s0] -> ((s0 * 16))>, 0] upper [affine_map<()[s0] -> (((s0 * 16) + 16), 100)>, 70] iterators ["parallel", "reduction"]
// CHECK-NOT: loop.nest
// CHECK: func.return
func.func @rowsum(%x: memref<100x70xf32>, %y: memref<100xf32>) {
  loop.nest "init_sum" lower [0] upper [100] iterators ["parallel"] ins() outs(%y : memref<100xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "reduce_sum" lower [0, 0] upper [100, 70] iterators ["parallel", "reduction"] ins(%x : memref<100x70xf32>) outs(%y : memref<100xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>] {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    loop.yield %s : f32
  }
  func.return
}

// -----

// y[i, j] = y[i-1, j-1] + x[i, j] in place: rectangular tiles would cut the
// dependence (1, 1), so with shape=rect nothing is tiled. With
// shape=parallelogram the tiles are diagonal strips (hyperplane i - j, which no
// dependence crosses): the bounds of j depend on i.
// REMARK: tile.mlir:[[# @LINE + 8]]:3: remark: 'diag' not tiled: a dependence crosses tiles: 'diag' and 'diag' touch the same elements of {{.*}} in different tiles
// CHECK-LABEL: func.func @diag
// CHECK-NEXT: loop.nest "diag" lower [1, 1] upper [40, 50]
// PARA-LABEL: func.func @diag
// PARA-NEXT: loop.band "diag.tiles" upper [12] attributes {tile_sizes = array<i64: 8>, tile_planes = array<i64: 1, -1>} {
// PARA-NEXT: ^{{.*}}(%[[T:.*]]: index):
// PARA-NEXT: loop.nest "diag" syms(%[[T]]) lower [affine_map<()[s0] -> (((s0 * 8) + -55), 1)>, affine_map<(d0)[s0] -> (((d0 + (s0 * -8)) + 49), 1)>] upper [affine_map<()[s0] -> (((s0 * 8) + 1), 40)>, affine_map<(d0)[s0] -> (((d0 + (s0 * -8)) + 57), 50)>] iterators ["reduction", "reduction"]
func.func @diag(%x: memref<40x50xf32>, %y: memref<40x50xf32>) {
  loop.nest "diag" lower [1, 1] upper [40, 50] iterators ["reduction", "reduction"] ins(%y, %x : memref<40x50xf32>, memref<40x50xf32>) outs(%y : memref<40x50xf32>) maps [affine_map<(d0, d1) -> (d0 - 1, d1 - 1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%p: f32, %a: f32, %o: f32):
    %s = arith.addf %p, %a : f32
    loop.yield %s : f32
  }
  func.return
}

// -----

// A recurrence along both axes (distances (1, 0) and (0, 1)) has no direction free
// of dependences: no tile shape keeps it parallel.
// PREMARK: tile.mlir:[[# @LINE + 4]]:3: remark: 'sat' not tiled: every direction carries a dependence: tiles would depend on each other
// PARA-LABEL: func.func @sat
// PARA-NEXT: loop.nest "sat"
func.func @sat(%y: memref<20x20xf32>) {
  loop.nest "sat" lower [1, 1] upper [20, 20] iterators ["reduction", "reduction"] ins(%y, %y : memref<20x20xf32>, memref<20x20xf32>) outs(%y : memref<20x20xf32>) maps [affine_map<(d0, d1) -> (d0 - 1, d1)>, affine_map<(d0, d1) -> (d0, d1 - 1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    loop.yield %s : f32
  }
  func.return
}

// -----

// Not tiled: intermediates (only live-outs are), nests with symbolic bounds, a
// buffer that fits one tile.
// REMARK: tile.mlir:[[# @LINE + 15]]:3: remark: 'sym' not tiled: a writer has symbolic bounds
// REMARK: tile.mlir:[[# @LINE + 19]]:3: remark: 'small' not tiled: the tile covers the whole buffer
// CHECK-LABEL: func.func @untouched
// CHECK-NEXT: memref.alloc
// CHECK-NEXT: loop.nest "fill" lower [0, 0] upper [64, 64]
// CHECK: loop.nest "sym" syms(%{{.*}}) lower [affine_map<()[s0] -> (s0)>, 0]
// CHECK: loop.nest "small" lower [0, 0] upper [8, 8]
// CHECK-NOT: loop.band
func.func @untouched(%y: memref<100x100xf32>, %z: memref<8x8xf32>, %n: index) {
  %t = memref.alloc() : memref<64x64xf32>
  loop.nest "fill" lower [0, 0] upper [64, 64] iterators ["parallel", "parallel"] ins() outs(%t : memref<64x64xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%o: f32):
    %c = arith.constant 1.0 : f32
    loop.yield %c : f32
  }
  loop.nest "sym" syms(%n) lower [affine_map<()[s0] -> (s0)>, 0] upper [100, 100] iterators ["parallel", "parallel"] ins() outs(%y : memref<100x100xf32>) maps [affine_map<(d0, d1)[s0] -> (d0, d1)>] {
  ^bb0(%o: f32):
    %c = arith.constant 1.0 : f32
    loop.yield %c : f32
  }
  loop.nest "small" lower [0, 0] upper [8, 8] iterators ["parallel", "parallel"] ins() outs(%z : memref<8x8xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%o: f32):
    %c = arith.constant 1.0 : f32
    loop.yield %c : f32
  }
  memref.dealloc %t : memref<64x64xf32>
  func.return
}

// -----

// An empty domain (an extent of 0: what a slice to nothing leaves, as in ONNX's expanded
// rotary embedding) is left as it is, with the default sizes too (they divided by a row
// of 0 bytes: an internal error).
// RUN: mlfuse-opt %s --split-input-file -p loop-tile | filecheck %s --check-prefix=DEFAULT
// CHECK-LABEL: func.func @empty_rows
// CHECK-NOT: loop.band
// CHECK: loop.nest "exp" lower [0, 0] upper [4, 0]
// DEFAULT-LABEL: func.func @empty_rows
// DEFAULT-NOT: loop.band
// DEFAULT: loop.nest "exp" lower [0, 0] upper [4, 0]
func.func @empty_rows(%x: memref<4x0xf32>, %y: memref<4x0xf32>) {
  loop.nest "exp" lower [0, 0] upper [4, 0] iterators ["parallel", "parallel"] ins(%x : memref<4x0xf32>) outs(%y : memref<4x0xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    loop.yield %e : f32
  }
  func.return
}

// -----

// Default sizes leave dimensions of extent 1 out: rows are those of the others (a 1x1
// conv's patches, [1, 7, 7, 960, 1, 1], in tiles of 1 x 7 x 480 rather than of one
// element each: 47040 tiles of a few loads). Rows longer than 512 are cut into equal
// pieces (balanced_row): 480 and 480, not 512 and 448.
// DEFAULT-LABEL: func.func @unit_dims
// DEFAULT: loop.band "patches.tiles" upper [7, 2] attributes {tile_sizes = array<i64: 0, 1, 0, 480, 0, 0>}
func.func @unit_dims(%x: memref<1x960x7x7xf32>, %y: memref<1x7x7x960x1x1xf32>) {
  loop.nest "patches" lower [0, 0, 0, 0, 0, 0] upper [1, 7, 7, 960, 1, 1] iterators ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel"] ins(%x : memref<1x960x7x7xf32>) outs(%y : memref<1x7x7x960x1x1xf32>) maps [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d3, d1, d2)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4, d5)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  func.return
}

// -----

// Invalid options are rejected before anything runs.
// RUN: not mlfuse-opt %s -p 'loop-tile{sizes=4,-1}' 2>&1 | filecheck %s --check-prefix=NEG
// NEG: error: loop-tile: tile sizes must be >= 0 (0: not tiled), got [4, -1]
// RUN: not mlfuse-opt %s -p 'loop-tile{shape=hexagon}' 2>&1 | filecheck %s --check-prefix=SHAPE
// SHAPE: error: loop-tile: shape must be one of rect, parallelogram, got 'hexagon'
