// RUN: mlfuse-opt %s --split-input-file -p loop-trim-fills | filecheck %s
// RUN: not mlfuse-opt %s -p 'loop-trim-fills{pieces=2}' 2>&1 | filecheck %s --check-prefix=BAD

// loop-trim-fills (mlfuse/poly/fill_trimming.py): a constant fill writes only what the
// next writer of its buffer leaves, one nest per box of the difference; nothing if the
// writer covers it all.

// BAD: pieces

// A pad's fill and copy: the border as four boxes, in memory order.
// CHECK-LABEL: func.func @border
// CHECK:      loop.nest "pad_fill" lower [0, 0] upper [1, 6] {{.*}} outs(%p : memref<6x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>]
// CHECK:        arith.constant 0.000000e+00
// CHECK:      loop.nest "pad_fill" lower [1, 0] upper [5, 1]
// CHECK:      loop.nest "pad_fill" lower [1, 5] upper [5, 6]
// CHECK:      loop.nest "pad_fill" lower [5, 0] upper [6, 6]
// CHECK:      loop.nest "pad_copy" lower [0, 0] upper [4, 4]
// CHECK-NOT:  loop.nest
func.func @border(%x: memref<4x4xf32>, %p: memref<6x6xf32>) {
  loop.nest "pad_fill" lower [0, 0] upper [6, 6] iterators ["parallel", "parallel"] ins() outs(%p : memref<6x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "pad_copy" lower [0, 0] upper [4, 4] iterators ["parallel", "parallel"] ins(%x : memref<4x4xf32>) outs(%p : memref<6x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0 + 1, d1 + 1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  func.return
}

// -----

// The writer covers every element the fill writes: the fill goes.
// CHECK-LABEL: func.func @covered
// CHECK-NOT:  "fill"
// CHECK:      loop.nest "copy"
func.func @covered(%x: memref<8xf32>, %p: memref<8xf32>) {
  loop.nest "fill" lower [2] upper [6] iterators ["parallel"] ins() outs(%p : memref<8xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %c = arith.constant -1.5 : f32
    loop.yield %c : f32
  }
  loop.nest "copy" lower [0] upper [8] iterators ["parallel"] ins(%x : memref<8xf32>) outs(%p : memref<8xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  func.return
}

// -----

// A tile's pair (post-tiling fusion's): the fill writes plane s0 of the tile-local
// buffer, the copy its interior; the border's bounds need no symbol, the symbol stays.
// CHECK-LABEL: func.func @in_tile
// CHECK:      loop.band
// CHECK:      loop.nest "pad_fill" syms(%{{.*}}) lower [0, 0, 0] upper [1, 1, 7] {{.*}} maps [affine_map<(d0, d1, d2)[s0] -> (d0, d1, d2)>]
// CHECK:        arith.constant -3.000000e+00
// CHECK:      loop.nest "pad_fill" syms(%{{.*}}) lower [0, 1, 0] upper [1, 6, 2]
// CHECK:      loop.nest "pad_fill" syms(%{{.*}}) lower [0, 1, 6] upper [1, 6, 7]
// CHECK:      loop.nest "pad_fill" syms(%{{.*}}) lower [0, 6, 0] upper [1, 7, 7]
// CHECK:      loop.nest "pad_copy"
func.func @in_tile(%x: memref<3x5x4xf32>, %y: memref<3x5x4xf32>) {
  %t = memref.alloc() : memref<1x7x7xf32>
  loop.band "tiles" upper [3] {
  ^bb0(%s: index):
    loop.nest "pad_fill" syms(%s) lower [affine_map<()[s0] -> (s0)>, 0, 0] upper [affine_map<()[s0] -> (s0 + 1)>, 7, 7] iterators ["parallel", "parallel", "parallel"] ins() outs(%t : memref<1x7x7xf32>) maps [affine_map<(d0, d1, d2)[s0] -> (d0 - s0, d1, d2)>] {
    ^bb0(%o: f32):
      %c = arith.constant -3.0 : f32
      loop.yield %c : f32
    }
    loop.nest "pad_copy" syms(%s) lower [affine_map<()[s0] -> (s0)>, 0, 0] upper [affine_map<()[s0] -> (s0 + 1)>, 5, 4] iterators ["parallel", "parallel", "parallel"] ins(%x : memref<3x5x4xf32>) outs(%t : memref<1x7x7xf32>) maps [affine_map<(d0, d1, d2)[s0] -> (d0, d1, d2)>, affine_map<(d0, d1, d2)[s0] -> (d0 - s0, d1 + 1, d2 + 2)>] {
    ^bb0(%a: f32, %o: f32):
      loop.yield %a : f32
    }
    loop.nest "use" syms(%s) lower [affine_map<()[s0] -> (s0)>, 0, 0] upper [affine_map<()[s0] -> (s0 + 1)>, 5, 4] iterators ["parallel", "parallel", "parallel"] ins(%t : memref<1x7x7xf32>) outs(%y : memref<3x5x4xf32>) maps [affine_map<(d0, d1, d2)[s0] -> (d0 - s0, d1 + 2, d2 + 3)>, affine_map<(d0, d1, d2)[s0] -> (d0, d1, d2)>] {
    ^bb0(%a: f32, %o: f32):
      loop.yield %a : f32
    }
  }
  func.return
}

// -----

// Not trimmed: the next nest that touches the buffer reads it (the fill's values
// reach it), or sums into it (a reduction reads what it adds to), or reads it before
// the copy, or writes every other element (the rest is no few boxes).
// CHECK-LABEL: func.func @kept
// CHECK:      loop.nest "fill_read" lower [0] upper [8]
// CHECK:      loop.nest "fill_sum" lower [0] upper [8]
// CHECK:      loop.nest "fill_between" lower [0] upper [8]
// CHECK:      loop.nest "fill_strided" lower [0] upper [16]
func.func @kept(%x: memref<8xf32>, %a: memref<8xf32>, %b: memref<8xf32>, %c: memref<8xf32>, %d: memref<16xf32>, %y: memref<8xf32>) {
  loop.nest "fill_read" lower [0] upper [8] iterators ["parallel"] ins() outs(%a : memref<8xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "scale" lower [2] upper [6] iterators ["parallel"] ins(%a : memref<8xf32>) outs(%a : memref<8xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%v: f32, %o: f32):
    %s = arith.addf %v, %v : f32
    loop.yield %s : f32
  }
  loop.nest "fill_sum" lower [0] upper [8] iterators ["parallel"] ins() outs(%b : memref<8xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "sum" lower [2, 0] upper [6, 8] iterators ["parallel", "reduction"] ins(%x : memref<8xf32>) outs(%b : memref<8xf32>) maps [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0)>] {
  ^bb0(%v: f32, %o: f32):
    %s = arith.addf %v, %o : f32
    loop.yield %s : f32
  }
  loop.nest "fill_between" lower [0] upper [8] iterators ["parallel"] ins() outs(%c : memref<8xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "read" lower [0] upper [8] iterators ["parallel"] ins(%c : memref<8xf32>) outs(%y : memref<8xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "copy" lower [0] upper [8] iterators ["parallel"] ins(%x : memref<8xf32>) outs(%c : memref<8xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "fill_strided" lower [0] upper [16] iterators ["parallel"] ins() outs(%d : memref<16xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "evens" lower [0] upper [8] iterators ["parallel"] ins(%x : memref<8xf32>) outs(%d : memref<16xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0 * 2)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  func.return
}
