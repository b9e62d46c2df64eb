// RUN: mlfuse-opt %s --split-input-file -p 'loop-tile{sizes=8,16},loop-post-tile-fuse' | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p 'loop-tile{sizes=8,16},loop-post-tile-fuse,loop-storage-reduce' | filecheck %s --check-prefix=REDUCED
// RUN: mlfuse-opt %s --split-input-file -p 'loop-tile{sizes=8,16},loop-post-tile-fuse{remarks=true}' 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A 2-stage blur: the consumer's tile band computes the producer's overlapped tile
// (rows [8 T0, 8 T0 + 10): two halo rows) into per-tile scratch before using it; the
// full intermediate and the top-level producer are gone. Storage reduction then
// shrinks the scratch to the 10x16 box of one tile, indexed relative to its origin.
// CHECK-LABEL: func.func @blur
// CHECK-NEXT: loop.band "blur_y.tiles" upper [4, 2] attributes {tile_sizes = array<i64: 8, 16>} {
// CHECK-NEXT: ^{{.*}}(%[[T0:.*]]: index, %[[T1:.*]]: index):
// CHECK-NEXT: %[[S:.*]] = memref.alloca() : memref<34x32xf32>
// CHECK-NEXT: loop.nest "blur_x" syms(%[[T0]], %[[T1]]) lower [affine_map<()[s0, s1] -> ((s0 * 8))>, affine_map<()[s0, s1] -> ((s1 * 16))>] upper [affine_map<()[s0, s1] -> (((s0 * 8) + 10))>, affine_map<()[s0, s1] -> (((s1 * 16) + 16))>] iterators ["parallel", "parallel"] ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<34x34xf32>, memref<34x34xf32>, memref<34x34xf32>) outs(%[[S]] : memref<34x32xf32>)
// CHECK: loop.nest "blur_y" syms(%[[T0]], %[[T1]]) lower [affine_map<()[s0, s1] -> ((s0 * 8))>, affine_map<()[s0, s1] -> ((s1 * 16))>] upper [affine_map<()[s0, s1] -> (((s0 * 8) + 8))>, affine_map<()[s0, s1] -> (((s1 * 16) + 16))>] iterators ["parallel", "parallel"] ins(%[[S]], %[[S]], %[[S]] : memref<34x32xf32>, memref<34x32xf32>, memref<34x32xf32>)
// CHECK-NOT: memref.alloc()
// CHECK-NOT: memref.dealloc
// CHECK: func.return
// REDUCED-LABEL: func.func @blur
// REDUCED-NEXT: loop.band "blur_y.tiles"
// REDUCED-NEXT: ^
// REDUCED-NEXT: %[[S:.*]] = memref.alloca() : memref<10x16xf32>
// REDUCED-NEXT: loop.nest "blur_x" {{.*}} outs(%[[S]] : memref<10x16xf32>) maps [{{.*}}, affine_map<(d0, d1)[s0, s1] -> ((d0 + (s0 * -8)), (d1 + (s1 * -16)))>]
// REDUCED: loop.nest "blur_y" {{.*}} ins(%[[S]], %[[S]], %[[S]] : memref<10x16xf32>, memref<10x16xf32>, memref<10x16xf32>) outs(%{{.*}} : memref<32x32xf32>) maps [affine_map<(d0, d1)[s0, s1] -> ((d0 + (s0 * -8)), (d1 + (s1 * -16)))>, affine_map<(d0, d1)[s0, s1] -> (((d0 + 1) + (s0 * -8)), (d1 + (s1 * -16)))>, affine_map<(d0, d1)[s0, s1] -> (((d0 + 2) + (s0 * -8)), (d1 + (s1 * -16)))>, affine_map<(d0, d1)[s0, s1] -> (d0, d1)>]
// REDUCED-NOT: memref.alloc()
// REDUCED: func.return
func.func @blur(%x: memref<34x34xf32>, %y: memref<32x32xf32>) {
  %bx = memref.alloc() {alignment = 64 : i64} : memref<34x32xf32>
  loop.nest "blur_x" lower [0, 0] upper [34, 32] iterators ["parallel", "parallel"] ins(%x, %x, %x : memref<34x34xf32>, memref<34x34xf32>, memref<34x34xf32>) outs(%bx : memref<34x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1 + 1)>, affine_map<(d0, d1) -> (d0, d1 + 2)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %c : f32
    loop.yield %t : f32
  }
  loop.nest "blur_y" lower [0, 0] upper [32, 32] iterators ["parallel", "parallel"] ins(%bx, %bx, %bx : memref<34x32xf32>, memref<34x32xf32>, memref<34x32xf32>) outs(%y : memref<32x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0 + 1, d1)>, affine_map<(d0, d1) -> (d0 + 2, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %c : f32
    loop.yield %t : f32
  }
  memref.dealloc %bx : memref<34x32xf32>
  func.return
}

// -----

// An illegal fusion is not made: 'smooth' overwrites %x, which 'double' reads. In
// tile T, the fused 'double' would read x[16 T - 1], which tile T - 1 writes: a
// dependence the parallel band would violate. 'double' stays whole, before the band.
// REMARK: post-tile-fuse.mlir:[[# @LINE + 9]]:3: remark: 'double' not fused into the tiles: a dependence would cross tiles: 'double' and 'smooth' touch the same elements of {{.*}} in different tiles
// CHECK-LABEL: func.func @war
// CHECK-NEXT: %[[T:.*]] = memref.alloc() : memref<66xf32>
// CHECK-NEXT: loop.nest "double" lower [0] upper [66]
// CHECK: loop.band "smooth.tiles" upper [5]
// CHECK-NOT: loop.nest "double"
// CHECK: loop.nest "smooth" syms(%{{.*}}) lower [affine_map<()[s0] -> ((s0 * 16), 1)>] upper [affine_map<()[s0] -> (((s0 * 16) + 16), 65)>] iterators ["parallel"] ins(%[[T]], %[[T]] : memref<66xf32>, memref<66xf32>)
func.func @war(%x: memref<66xf32>) {
  %t = memref.alloc() : memref<66xf32>
  loop.nest "double" lower [0] upper [66] iterators ["parallel"] ins(%x : memref<66xf32>) outs(%t : memref<66xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    loop.yield %s : f32
  }
  loop.nest "smooth" lower [1] upper [65] iterators ["parallel"] ins(%t, %t : memref<66xf32>, memref<66xf32>) outs(%x : memref<66xf32>) maps [affine_map<(d0) -> (d0 - 1)>, affine_map<(d0) -> (d0 + 1)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    loop.yield %s : f32
  }
  memref.dealloc %t : memref<66xf32>
  func.return
}

// -----

// Multiple live-outs: the shared producer is fused into both bands because its
// extensions there ([0, 50) and [50, 100)) do not intersect: no work is repeated.
// CHECK-LABEL: func.func @two_outputs
// CHECK-NEXT: loop.band "left.tiles" upper [4]
// CHECK: loop.nest "square" syms(%{{.*}}) lower [affine_map<()[s0] -> ((s0 * 16))>] upper [affine_map<()[s0] -> (((s0 * 16) + 16), 50)>]
// CHECK: loop.nest "left"
// CHECK: loop.band "right.tiles" upper [4]
// CHECK: loop.nest "square" syms(%{{.*}}) lower [affine_map<()[s0] -> (((s0 * 16) + 50))>] upper [affine_map<()[s0] -> (((s0 * 16) + 66), 100)>]
// CHECK: loop.nest "right"
// CHECK-NOT: loop.nest "square"
func.func @two_outputs(%x: memref<100xf32>, %y1: memref<50xf32>, %y2: memref<50xf32>) {
  %t = memref.alloc() : memref<100xf32>
  loop.nest "square" lower [0] upper [100] iterators ["parallel"] ins(%x : memref<100xf32>) outs(%t : memref<100xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    loop.yield %s : f32
  }
  loop.nest "left" lower [0] upper [50] iterators ["parallel"] ins(%t : memref<100xf32>) outs(%y1 : memref<50xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.nest "right" lower [0] upper [50] iterators ["parallel"] ins(%t : memref<100xf32>) outs(%y2 : memref<50xf32>) maps [affine_map<(d0) -> (d0 + 50)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  memref.dealloc %t : memref<100xf32>
  func.return
}

// -----

// ... but not when the extensions intersect ([0, 50) and [40, 90)): fusing would
// compute [40, 50) twice. The producer stays, once, before both bands.
// REMARK: post-tile-fuse.mlir:[[# @LINE + 7]]:3: remark: 'square' not fused into the tiles: shared producer: its extensions for the different live-out bands intersect (fusing would add redundant work)
// CHECK-LABEL: func.func @two_outputs_overlap
// CHECK-NEXT: memref.alloc
// CHECK-NEXT: loop.nest "square" lower [0] upper [100]
// CHECK-NOT: loop.nest "square"
func.func @two_outputs_overlap(%x: memref<100xf32>, %y1: memref<50xf32>, %y2: memref<50xf32>) {
  %t = memref.alloc() : memref<100xf32>
  loop.nest "square" lower [0] upper [100] iterators ["parallel"] ins(%x : memref<100xf32>) outs(%t : memref<100xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    loop.yield %s : f32
  }
  loop.nest "left" lower [0] upper [50] iterators ["parallel"] ins(%t : memref<100xf32>) outs(%y1 : memref<50xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.nest "shifted" lower [0] upper [50] iterators ["parallel"] ins(%t : memref<100xf32>) outs(%y2 : memref<50xf32>) maps [affine_map<(d0) -> (d0 + 40)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  memref.dealloc %t : memref<100xf32>
  func.return
}

// -----

// A reduction is fused whole along its reduced dimension: each column tile sums its
// own columns. The row dimension is left untiled by loop-tile, since the column sums
// do not move with it (tiling it would recompute them in every row tile).
// CHECK-LABEL: func.func @column_mean
// CHECK-NEXT: loop.band "center.tiles" upper [2] attributes {tile_sizes = array<i64: 0, 16>} {
// CHECK: %[[M:.*]] = memref.alloca() : memref<32xf32>
// CHECK-NEXT: loop.nest "init_sum" syms(%{{.*}}) lower [affine_map<()[s0] -> ((s0 * 16))>] upper [affine_map<()[s0] -> (((s0 * 16) + 16))>]
// CHECK: loop.nest "colsum" syms(%{{.*}}) lower [0, affine_map<()[s0] -> ((s0 * 16))>] upper [64, affine_map<()[s0] -> (((s0 * 16) + 16))>] iterators ["reduction", "parallel"] ins(%{{.*}} : memref<64x32xf32>) outs(%[[M]] : memref<32xf32>)
// CHECK: loop.nest "center"
// REDUCED-LABEL: func.func @column_mean
// REDUCED: memref.alloca() : memref<16xf32>
func.func @column_mean(%x: memref<64x32xf32>, %y: memref<64x32xf32>) {
  %m = memref.alloc() : memref<32xf32>
  loop.nest "init_sum" lower [0] upper [32] iterators ["parallel"] ins() outs(%m : memref<32xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "colsum" lower [0, 0] upper [64, 32] iterators ["reduction", "parallel"] ins(%x : memref<64x32xf32>) outs(%m : memref<32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>] {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    loop.yield %s : f32
  }
  loop.nest "center" lower [0, 0] upper [64, 32] iterators ["parallel", "parallel"] ins(%x, %m : memref<64x32xf32>, memref<32xf32>) outs(%y : memref<64x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %d = arith.subf %a, %s : f32
    loop.yield %d : f32
  }
  memref.dealloc %m : memref<32xf32>
  func.return
}

// -----

// An intermediate also read outside tile bands is needed whole: not fused.
// REMARK: post-tile-fuse.mlir:[[# @LINE + 6]]:3: remark: 'neg' not fused into the tiles: it is used outside tile bands (by 'sym')
// CHECK-LABEL: func.func @used_outside
// CHECK-NEXT: memref.alloc
// CHECK-NEXT: loop.nest "neg" lower [0] upper [64]
func.func @used_outside(%x: memref<64xf32>, %y: memref<64xf32>, %z: memref<64xf32>, %c0: index) {
  %t = memref.alloc() : memref<64xf32>
  loop.nest "neg" lower [0] upper [64] iterators ["parallel"] ins(%x : memref<64xf32>) outs(%t : memref<64xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    loop.yield %n : f32
  }
  loop.nest "copy_out" lower [0] upper [64] iterators ["parallel"] ins(%t : memref<64xf32>) outs(%y : memref<64xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.nest "sym" syms(%c0) lower [affine_map<()[s0] -> (s0)>] upper [64] iterators ["parallel"] ins(%t : memref<64xf32>) outs(%z : memref<64xf32>) maps [affine_map<(d0)[s0] -> (d0)>, affine_map<(d0)[s0] -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  memref.dealloc %t : memref<64xf32>
  func.return
}

// -----

// Parallelism guard: a full reduction has no parallel dimension that follows the
// tiles; fused, every tile would redo all of it (or the band would serialize).
// REMARK: post-tile-fuse.mlir:[[# @LINE + 8]]:3: remark: 'init_sum' not fused into the tiles: parallelism guard: only 0 parallel dimension(s) of 'init_sum' follow the tiles, the band needs 1
// CHECK-LABEL: func.func @total
// CHECK-NEXT: memref.alloc
// CHECK-NEXT: loop.nest "init_sum" lower [0] upper [1]
// CHECK: loop.nest "sum" lower [0, 0] upper [64, 32]
// CHECK: loop.band "center.tiles" upper [8, 2]
func.func @total(%x: memref<64x32xf32>, %y: memref<64x32xf32>) {
  %m = memref.alloc() : memref<1xf32>
  loop.nest "init_sum" lower [0] upper [1] iterators ["parallel"] ins() outs(%m : memref<1xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "sum" lower [0, 0] upper [64, 32] iterators ["reduction", "reduction"] ins(%x : memref<64x32xf32>) outs(%m : memref<1xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0)>] {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    loop.yield %s : f32
  }
  loop.nest "center" lower [0, 0] upper [64, 32] iterators ["parallel", "parallel"] ins(%x, %m : memref<64x32xf32>, memref<1xf32>) outs(%y : memref<64x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %d = arith.subf %a, %s : f32
    loop.yield %d : f32
  }
  memref.dealloc %m : memref<1xf32>
  func.return
}

// -----

// The tile shape follows the footprint: the consumer reads t[i, i + j], so a tile of
// 8 rows needs a parallelogram of t, which the fused producer computes exactly (the
// bounds of its dimension 1 use d0): 128 points, not the 184 of the 8x23 box around
// them. Storage reduction keeps the box.
// CHECK-LABEL: func.func @shear
// CHECK-NEXT: loop.band "shear.tiles" upper [2] attributes {tile_sizes = array<i64: 8, 0>}
// CHECK: loop.nest "double" syms(%{{.*}}) lower [affine_map<()[s0] -> ((s0 * 8))>, affine_map<(d0)[s0] -> (d0)>] upper [affine_map<()[s0] -> (((s0 * 8) + 8))>, affine_map<(d0)[s0] -> ((d0 + 16))>]
// CHECK: loop.nest "shear"
// REDUCED-LABEL: func.func @shear
// REDUCED: memref.alloca() : memref<8x23xf32>
func.func @shear(%x: memref<16x32xf32>, %y: memref<16x16xf32>) {
  %t = memref.alloc() : memref<16x32xf32>
  loop.nest "double" lower [0, 0] upper [16, 32] iterators ["parallel", "parallel"] ins(%x : memref<16x32xf32>) outs(%t : memref<16x32xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    loop.yield %s : f32
  }
  loop.nest "shear" lower [0, 0] upper [16, 16] iterators ["parallel", "parallel"] ins(%t : memref<16x32xf32>) outs(%y : memref<16x16xf32>) maps [affine_map<(d0, d1) -> (d0, d0 + d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  memref.dealloc %t : memref<16x32xf32>
  func.return
}

// -----

// Invalid options are rejected before anything runs.
// RUN: not mlfuse-opt %s -p 'loop-post-tile-fuse{max-recompute=0.5}' 2>&1 | filecheck %s --check-prefix=OPTION
// OPTION: error: loop-post-tile-fuse: max-recompute must be >= 1, got 0.5
