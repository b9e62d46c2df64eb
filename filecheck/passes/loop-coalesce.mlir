// RUN: mlfuse-opt %s --split-input-file -p loop-coalesce | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p 'loop-coalesce,convert-loop-to-scf' | filecheck %s --check-prefix=SCF
// RUN: not mlfuse-opt %s -p 'loop-coalesce{depth=2}' 2>&1 | filecheck %s --check-prefix=BAD

// A conv epilogue over NCHW: the 28 x 28 pixels become one dimension of 784 on views
// of the image buffers; the bias read along the channels is left as it was.
// CHECK-LABEL: func.func @epilogue
// CHECK-NEXT: %[[T:.*]] = loop.view %{{.*}} : memref<1x8x28x28xf32> to memref<1x8x784xf32>
// CHECK-NEXT: %[[Y:.*]] = loop.view %{{.*}} : memref<1x8x28x28xf32> to memref<1x8x784xf32>
// CHECK-NEXT: loop.nest "relu" lower [0, 0, 0] upper [1, 8, 784] iterators ["parallel", "parallel", "parallel"] ins(%[[T]], %{{.*}} : memref<1x8x784xf32>, memref<8xf32>) outs(%[[Y]] : memref<1x8x784xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>]
// SCF-LABEL: func.func @epilogue
// SCF-COUNT-3: scf.for
// SCF-NOT: scf.for
func.func @epilogue(%t: memref<1x8x28x28xf32>, %b: memref<8xf32>, %y: memref<1x8x28x28xf32>) {
  loop.nest "relu" lower [0, 0, 0, 0] upper [1, 8, 28, 28] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%t, %b : memref<1x8x28x28xf32>, memref<8xf32>) outs(%y : memref<1x8x28x28xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    loop.yield %s : f32
  }
  func.return
}

// -----

// Reduced dimensions merge too (the order of the sum is the same), and a buffer both
// read and written is one view. A transposed read keeps its own dimensions apart.
// CHECK-LABEL: func.func @mean_and_in_place
// SCF-LABEL: func.func @mean_and_in_place
// CHECK: loop.nest "sum" lower [0, 0] upper [4, 42] iterators ["parallel", "reduction"] {{.*}} maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>]
// CHECK: %[[V:.*]] = loop.view %{{.*}} : memref<4x6x7xf32> to memref<168xf32>
// CHECK-NEXT: loop.nest "scale" lower [0] upper [168] iterators ["parallel"] ins(%[[V]] : memref<168xf32>) outs(%[[V]] : memref<168xf32>)
// CHECK: loop.nest "transpose" lower [0, 0] upper [6, 7]
func.func @mean_and_in_place(%x: memref<4x6x7xf32>, %s: memref<4xf32>, %t: memref<7x6xf32>, %u: memref<6x7xf32>) {
  loop.nest "sum" lower [0, 0, 0] upper [4, 6, 7] iterators ["parallel", "reduction", "reduction"] ins(%x : memref<4x6x7xf32>) outs(%s : memref<4xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %o, %a : f32
    loop.yield %r : f32
  }
  loop.nest "scale" lower [0, 0, 0] upper [4, 6, 7] iterators ["parallel", "parallel", "parallel"] ins(%x : memref<4x6x7xf32>) outs(%x : memref<4x6x7xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %a : f32
    loop.yield %r : f32
  }
  loop.nest "transpose" lower [0, 0] upper [6, 7] iterators ["parallel", "parallel"] ins(%t : memref<7x6xf32>) outs(%u : memref<6x7xf32>) maps [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  func.return
}

// -----

// Not merged: a window (d1 + d2), an offset read (d1 + 1), a loop over part of a row,
// a parallel dimension beside a reduced one, a dimension a loop.index names, and a
// nest in a band (its bounds move with the tile).
// CHECK-LABEL: func.func @not_contiguous
// CHECK-NOT: loop.view
// CHECK: loop.nest "window" lower [0, 0, 0]
// CHECK: loop.nest "offset" lower [0, 0]
// CHECK: loop.nest "part" lower [0, 0]
// CHECK: loop.nest "mixed" lower [0, 0]
// CHECK: loop.nest "named" lower [0, 0]
// CHECK: loop.nest "tile" syms(%{{.*}}) lower [affine_map<()[s0] -> ((s0 * 4))>, affine_map<()[s0] -> (0)>]
func.func @not_contiguous(%x: memref<8x10xf32>, %y: memref<8x8xf32>, %z: memref<8x10xf32>, %r: memref<8xf32>) {
  loop.nest "window" lower [0, 0, 0] upper [8, 8, 3] iterators ["parallel", "parallel", "reduction"] ins(%x : memref<8x10xf32>) outs(%y : memref<8x8xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1 + d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    loop.yield %s : f32
  }
  loop.nest "offset" lower [0, 0] upper [8, 8] iterators ["parallel", "parallel"] ins(%x : memref<8x10xf32>) outs(%y : memref<8x8xf32>) maps [affine_map<(d0, d1) -> (d0, d1 + 1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.nest "part" lower [0, 0] upper [8, 8] iterators ["parallel", "parallel"] ins(%x : memref<8x10xf32>) outs(%y : memref<8x8xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.nest "mixed" lower [0, 0] upper [8, 10] iterators ["parallel", "reduction"] ins(%x : memref<8x10xf32>) outs(%z : memref<8x10xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.nest "named" lower [0, 0] upper [8, 10] iterators ["parallel", "parallel"] ins(%x : memref<8x10xf32>) outs(%z : memref<8x10xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %i = loop.index dim 1
    %c = arith.index_cast %i : index to i64
    %f = arith.sitofp %c : i64 to f32
    %s = arith.addf %a, %f : f32
    loop.yield %s : f32
  }
  loop.band "tiles" upper [2] {
  ^bb0(%t: index):
    loop.nest "tile" syms(%t) lower [affine_map<()[s0] -> (s0 * 4)>, affine_map<()[s0] -> (0)>] upper [affine_map<()[s0] -> (s0 * 4 + 4)>, affine_map<()[s0] -> (10)>] iterators ["parallel", "parallel"] ins(%x : memref<8x10xf32>) outs(%z : memref<8x10xf32>) maps [affine_map<(d0, d1)[s0] -> (d0, d1)>, affine_map<(d0, d1)[s0] -> (d0, d1)>] {
    ^bb0(%a: f32, %o: f32):
      loop.yield %a : f32
    }
  }
  func.return
}

// BAD: error: {{.*}}depth
