// RUN: mlfuse-opt %s --split-input-file -p loop-split-wrapped | filecheck %s
// RUN: not mlfuse-opt %s -p 'loop-split-wrapped{pieces=2}' 2>&1 | filecheck %s --check-prefix=BAD

// loop-split-wrapped (mlfuse/poly/split_wrapped.py): a nest whose innermost dimension
// is read through (d + c) mod n splits into the pieces the wrap cuts it into; inside,
// the mod is gone.

// BAD: pieces

// A pad of one column on each side: three nests, the middle one reads x[d0, d1 - 1].
// CHECK-LABEL: func.func @pad_columns
// CHECK:      loop.nest "relu_pad" lower [0, 0] upper [4, 1] {{.*}} maps [affine_map<(d0, d1) -> (d0, ((d1 + -1) mod 8))>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK-NEXT:   ^bb0
// CHECK:      loop.nest "relu_pad" lower [0, 1] upper [4, 9] {{.*}} maps [affine_map<(d0, d1) -> (d0, (d1 + -1))>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK:      loop.nest "relu_pad" lower [0, 9] upper [4, 10] {{.*}} maps [affine_map<(d0, d1) -> (d0, ((d1 + -1) mod 8))>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK-NOT:  loop.nest
func.func @pad_columns(%x: memref<4x8xf32>, %y: memref<4x10xf32>) {
  loop.nest "relu_pad" lower [0, 0] upper [4, 10] iterators ["parallel", "parallel"] ins(%x : memref<4x8xf32>) outs(%y : memref<4x10xf32>) maps [affine_map<(d0, d1) -> (d0, (d1 - 1) mod 8)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %j = loop.index dim 1
    %c1 = arith.constant 1 : index
    %c9 = arith.constant 9 : index
    %lo = arith.cmpi sge, %j, %c1 : index
    %hi = arith.cmpi slt, %j, %c9 : index
    %in = arith.andi %lo, %hi : i1
    %z = arith.constant 0.0 : f32
    %r = arith.maximumf %a, %z : f32
    %v = arith.select %in, %r, %z : f32
    loop.yield %v : f32
  }
  func.return
}

// -----

// Two reads wrapped at different ends (8 and 9 elements, both from 2 before): the cut
// points of both, three pieces, each read unwrapped where it cannot wrap (the 9 still
// holds the last position). Cut points for more than three pieces keep the nest whole.
// CHECK-LABEL: func.func @two_reads
// CHECK: loop.nest "two" lower [0] upper [2] {{.*}} maps [affine_map<(d0) -> (((d0 + -2) mod 8))>, affine_map<(d0) -> (((d0 + -2) mod 9))>
// CHECK: loop.nest "two" lower [2] upper [10] {{.*}} maps [affine_map<(d0) -> ((d0 + -2))>, affine_map<(d0) -> ((d0 + -2))>
// CHECK: loop.nest "two" lower [10] upper [11] {{.*}} maps [affine_map<(d0) -> (((d0 + -2) mod 8))>, affine_map<(d0) -> ((d0 + -2))>
// CHECK: loop.nest "four" lower [0] upper [11]
// CHECK-NOT: loop.nest
func.func @two_reads(%x: memref<8xf32>, %w: memref<9xf32>, %y: memref<11xf32>) {
  loop.nest "two" lower [0] upper [11] iterators ["parallel"] ins(%x, %w : memref<8xf32>, memref<9xf32>) outs(%y : memref<11xf32>) maps [affine_map<(d0) -> ((d0 - 2) mod 8)>, affine_map<(d0) -> ((d0 - 2) mod 9)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    loop.yield %s : f32
  }
  loop.nest "four" lower [0] upper [11] iterators ["parallel"] ins(%x, %w : memref<8xf32>, memref<9xf32>) outs(%y : memref<11xf32>) maps [affine_map<(d0) -> ((d0 - 2) mod 8)>, affine_map<(d0) -> ((d0 - 1) mod 9)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    loop.yield %s : f32
  }
  func.return
}

// -----

// Kept: the wrap is along the rows only (the vectorized columns read in a line), a
// reshape's mod over a long dimension (loop-delinearize's business), and a wrapped
// read along a reduction dimension (a piece would start its sum again).
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: loop.nest
// CHECK-NOT: loop.nest
func.func @kept(%x: memref<8x16xf32>, %y: memref<10x16xf32>, %f: memref<3136xf32>, %g: memref<3136xf32>, %s: memref<4xf32>) {
  loop.nest "pad_rows" lower [0, 0] upper [10, 16] iterators ["parallel", "parallel"] ins(%x : memref<8x16xf32>) outs(%y : memref<10x16xf32>) maps [affine_map<(d0, d1) -> ((d0 - 1) mod 8, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.nest "reshape" lower [0] upper [3136] iterators ["parallel"] ins(%f : memref<3136xf32>) outs(%g : memref<3136xf32>) maps [affine_map<(d0) -> ((d0 floordiv 56) * 56 + d0 mod 56)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.nest "sum" lower [0, 0] upper [4, 10] iterators ["parallel", "reduction"] ins(%x : memref<8x16xf32>) outs(%s : memref<4xf32>) maps [affine_map<(d0, d1) -> (d0, (d1 - 1) mod 8)>, affine_map<(d0, d1) -> (d0)>] {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %a, %acc : f32
    loop.yield %t : f32
  }
  func.return
}
