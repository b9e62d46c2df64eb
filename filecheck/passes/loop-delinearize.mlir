// RUN: mlfuse-opt %s --split-input-file -p loop-delinearize | filecheck %s
// RUN: not mlfuse-opt %s -p 'loop-delinearize{factor=4}' 2>&1 | filecheck %s --check-prefix=BAD

// loop-delinearize (mlfuse/poly/delinearize.py): a dimension d that the accesses use
// through `d floordiv k` and `d mod k` becomes (d // k, d % k), every access affine.

// BAD: factor

// Attention's output, 1x4x128x64 transposed and reshaped to 128 x 256: the rows of 64
// are read as rows.
// CHECK-LABEL: func.func @attention_out
// CHECK: loop.nest "transpose" lower [0, 0, 0] upper [128, 4, 64] iterators ["parallel", "parallel", "parallel"]
// CHECK-SAME: maps [affine_map<(d0, d1, d2) -> (0, d1, d0, d2)>, affine_map<(d0, d1, d2) -> (d0, ((d1 * 64) + d2))>]
func.func @attention_out(%o: memref<1x4x128x64xf32>, %y: memref<128x256xf32>) {
  loop.nest "transpose" lower [0, 0] upper [128, 256] iterators ["parallel", "parallel"] ins(%o : memref<1x4x128x64xf32>) outs(%y : memref<128x256xf32>) maps [affine_map<(d0, d1) -> ((d1 floordiv 256), ((d1 floordiv 64) mod 4), d0, (d1 mod 64))>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %b: f32):
    loop.yield %a : f32
  }
  func.return
}

// -----

// A depth-to-space: the smallest divisor that removes the divisions is taken (2), and
// a reduced dimension splits into two reduced ones (the points in the same order).
// CHECK-LABEL: func.func @shuffle_and_sum
// CHECK: loop.nest "shuffle" lower [0, 0, 0] upper [8, 16, 2] iterators ["parallel", "parallel", "parallel"]
// CHECK-SAME: maps [affine_map<(d0, d1, d2) -> (d2, d0, d1)>, affine_map<(d0, d1, d2) -> (d0, ((d1 * 2) + d2))>]
// CHECK: loop.nest "sum" lower [0, 0, 0] upper [8, 16, 2] iterators ["parallel", "reduction", "reduction"]
// CHECK-SAME: maps [affine_map<(d0, d1, d2) -> (d2, d0, d1)>, affine_map<(d0, d1, d2) -> (d0)>]
func.func @shuffle_and_sum(%x: memref<2x8x16xf32>, %y: memref<8x32xf32>, %s: memref<8xf32>) {
  loop.nest "shuffle" lower [0, 0] upper [8, 32] iterators ["parallel", "parallel"] ins(%x : memref<2x8x16xf32>) outs(%y : memref<8x32xf32>) maps [affine_map<(d0, d1) -> ((d1 mod 2), d0, (d1 floordiv 2))>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %b: f32):
    loop.yield %a : f32
  }
  loop.nest "sum" lower [0, 0] upper [8, 32] iterators ["parallel", "reduction"] ins(%x : memref<2x8x16xf32>) outs(%s : memref<8xf32>) maps [affine_map<(d0, d1) -> ((d1 mod 2), d0, (d1 floordiv 2))>, affine_map<(d0, d1) -> (d0)>] {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %acc, %a : f32
    loop.yield %t : f32
  }
  func.return
}

// -----

// A reshape there and back over d0 < 128 reads x[d0]; no split is needed. A division by
// one is no division.
// CHECK-LABEL: func.func @exact
// CHECK: loop.nest "gelu" lower [0, 0] upper [128, 64]
// CHECK-SAME: maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK: loop.nest "by_one" lower [0, 0] upper [128, 64]
// CHECK-SAME: maps [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>]
func.func @exact(%x: memref<128x64xf32>, %y: memref<128x64xf32>, %z: memref<128x64xf32>) {
  loop.nest "gelu" lower [0, 0] upper [128, 64] iterators ["parallel", "parallel"] ins(%x : memref<128x64xf32>) outs(%y : memref<128x64xf32>) maps [affine_map<(d0, d1) -> ((((d0 floordiv 128) * 128) + (d0 mod 128)), d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %b: f32):
    %e = math.erf %a : f32
    loop.yield %e : f32
  }
  loop.nest "by_one" lower [0, 0] upper [128, 64] iterators ["parallel", "parallel"] ins(%x : memref<128x64xf32>) outs(%z : memref<128x64xf32>) maps [affine_map<(d0, d1) -> ((d0 floordiv 1), (d1 mod 1))>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %b: f32):
    loop.yield %a : f32
  }
  func.return
}

// -----

// Left alone: a divisor that does not divide the extent (250 by 64), a body that names
// its dimensions (loop.index), and a nest without divisions.
// CHECK-LABEL: func.func @unchanged
// CHECK: loop.nest "ragged" lower [0] upper [250]
// CHECK: loop.nest "indexed" lower [0] upper [256]
// CHECK: loop.nest "plain" lower [0, 0] upper [4, 64]
func.func @unchanged(%x: memref<4x64xf32>, %y: memref<250xf32>, %z: memref<256xf32>, %w: memref<4x64xf32>) {
  loop.nest "ragged" lower [0] upper [250] iterators ["parallel"] ins(%x : memref<4x64xf32>) outs(%y : memref<250xf32>) maps [affine_map<(d0) -> ((d0 floordiv 64), (d0 mod 64))>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %b: f32):
    loop.yield %a : f32
  }
  loop.nest "indexed" lower [0] upper [256] iterators ["parallel"] ins(%x : memref<4x64xf32>) outs(%z : memref<256xf32>) maps [affine_map<(d0) -> ((d0 floordiv 64), (d0 mod 64))>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %b: f32):
    %i = loop.index dim 0
    %c = arith.index_cast %i : index to i32
    %f = arith.sitofp %c : i32 to f32
    %r = arith.addf %a, %f : f32
    loop.yield %r : f32
  }
  loop.nest "plain" lower [0, 0] upper [4, 64] iterators ["parallel", "parallel"] ins(%x : memref<4x64xf32>) outs(%w : memref<4x64xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %b: f32):
    loop.yield %a : f32
  }
  func.return
}
