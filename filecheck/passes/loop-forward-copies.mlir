// RUN: mlfuse-opt %s --split-input-file -p loop-forward-copies | filecheck %s
// RUN: not mlfuse-opt %s -p 'loop-forward-copies{depth=2}' 2>&1 | filecheck %s --check-prefix=BAD

// loop-forward-copies (mlfuse/poly/forward_copies.py): a copy nest whose source nothing
// else reads goes, and the source's writers write the copy's destination.

// BAD: depth

// A concat of two pieces, then the pad copy of the concat: the pieces write the padded
// interior, after the fill (moved up with the padded buffer); the concat's buffer goes.
// CHECK-LABEL: func.func @concat_into_pad
// CHECK-NEXT: %p = memref.alloc() : memref<1x4x6x6xf32>
// CHECK-NEXT: loop.nest "pad_fill"
// CHECK: loop.nest "concat" {{.*}} ins(%a : memref<1x2x4x4xf32>) outs(%p : memref<1x4x6x6xf32>)
// CHECK-SAME: affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 + 1), (d3 + 1))>]
// CHECK: loop.nest "concat" {{.*}} ins(%b : memref<1x2x4x4xf32>) outs(%p : memref<1x4x6x6xf32>)
// CHECK-SAME: affine_map<(d0, d1, d2, d3) -> (d0, (d1 + 2), (d2 + 1), (d3 + 1))>]
// CHECK-NOT: pad_copy
// CHECK-NOT: memref<1x4x4x4xf32>
// CHECK: loop.nest "window"
func.func @concat_into_pad(%a: memref<1x2x4x4xf32>, %b: memref<1x2x4x4xf32>, %out: memref<1x4x4x4xf32>) {
  %y = memref.alloc() : memref<1x4x4x4xf32>
  loop.nest "concat" lower [0, 0, 0, 0] upper [1, 2, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%a : memref<1x2x4x4xf32>) outs(%y : memref<1x4x4x4xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "concat" lower [0, 0, 0, 0] upper [1, 2, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%b : memref<1x2x4x4xf32>) outs(%y : memref<1x4x4x4xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1 + 2, d2, d3)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  %p = memref.alloc() : memref<1x4x6x6xf32>
  loop.nest "pad_fill" lower [0, 0, 0, 0] upper [1, 4, 6, 6] iterators ["parallel", "parallel", "parallel", "parallel"] ins() outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "pad_copy" lower [0, 0, 0, 0] upper [1, 4, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%y : memref<1x4x4x4xf32>) outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 + 1, d3 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  memref.dealloc %y : memref<1x4x4x4xf32>
  loop.nest "window" lower [0, 0, 0, 0] upper [1, 4, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%p, %p, %p : memref<1x4x6x6xf32>, memref<1x4x6x6xf32>, memref<1x4x6x6xf32>) outs(%out : memref<1x4x4x4xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 + 1, d3 + 2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 + 2, d3 + 1)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%u: f32, %v: f32, %w: f32, %o: f32):
    %s = arith.addf %u, %v : f32
    %t = arith.mulf %s, %w : f32
    loop.yield %t : f32
  }
  memref.dealloc %p : memref<1x4x6x6xf32>
  func.return
}

// -----

// A chain: the exp nest's result is copied into a concat's half, the concat into the
// padded buffer; both copies go, and the exp writes the padded interior (through a view).
// CHECK-LABEL: func.func @chain
// CHECK: loop.nest "exp" {{.*}} ins(%a : memref<2x3x3xf32>) outs(%pv : memref<2x5x5xf32>)
// CHECK-SAME: maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, (d1 + 1), (d2 + 1))>]
// CHECK-NOT: "copy"
// CHECK: loop.nest "sum"
func.func @chain(%a: memref<2x3x3xf32>, %out: memref<2x3x3xf32>) {
  %t = memref.alloc() : memref<2x3x3xf32>
  loop.nest "exp" lower [0, 0, 0] upper [2, 3, 3] iterators ["parallel", "parallel", "parallel"] ins(%a : memref<2x3x3xf32>) outs(%t : memref<2x3x3xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %o: f32):
    %e = math.exp %v : f32
    loop.yield %e : f32
  }
  %y = memref.alloc() : memref<2x3x3xf32>
  loop.nest "copy" lower [0, 0, 0] upper [2, 3, 3] iterators ["parallel", "parallel", "parallel"] ins(%t : memref<2x3x3xf32>) outs(%y : memref<2x3x3xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  memref.dealloc %t : memref<2x3x3xf32>
  %p = memref.alloc() : memref<1x2x5x5xf32>
  %pv = loop.view %p : memref<1x2x5x5xf32> to memref<2x5x5xf32>
  loop.nest "pad_fill" lower [0, 0, 0] upper [2, 5, 5] iterators ["parallel", "parallel", "parallel"] ins() outs(%pv : memref<2x5x5xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%o: f32):
    %z = arith.constant 1.5 : f32
    loop.yield %z : f32
  }
  loop.nest "copy" lower [0, 0, 0] upper [2, 3, 3] iterators ["parallel", "parallel", "parallel"] ins(%y : memref<2x3x3xf32>) outs(%pv : memref<2x5x5xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1 + 1, d2 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  memref.dealloc %y : memref<2x3x3xf32>
  loop.nest "sum" lower [0, 0, 0] upper [2, 3, 3] iterators ["parallel", "parallel", "parallel"] ins(%pv, %pv : memref<2x5x5xf32>, memref<2x5x5xf32>) outs(%out : memref<2x3x3xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1 + 2, d2 + 1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %s = arith.subf %u, %v : f32
    loop.yield %s : f32
  }
  memref.dealloc %p : memref<1x2x5x5xf32>
  func.return
}

// -----

// One nest writes both halves of a concat (jax.random's key split): its first output's
// copy is forwarded, and then the nest writes the concat's buffer and the second half's
// source; it is that source's writer, not a fill of the destination to move before itself,
// so the second copy stays (this had been an internal error).
// CHECK-LABEL: func.func @writer_of_both_halves
// CHECK-NEXT: %b = memref.alloc() : memref<1xi32>
// CHECK-NEXT: %y = memref.alloc() : memref<2xi32>
// CHECK-NEXT: loop.nest "both" {{.*}} outs(%y, %b : memref<2xi32>, memref<1xi32>)
// CHECK: loop.nest "concat" {{.*}} ins(%b : memref<1xi32>) outs(%y : memref<2xi32>)
// CHECK-NOT: loop.nest "concat"
func.func @writer_of_both_halves(%out: memref<2xi32>) {
  %a = memref.alloc() : memref<1xi32>
  %b = memref.alloc() : memref<1xi32>
  loop.nest "both" lower [0] upper [1] iterators ["parallel"] ins() outs(%a, %b : memref<1xi32>, memref<1xi32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%o: i32, %p: i32):
    %c = arith.constant 3 : i32
    %d = arith.constant 4 : i32
    loop.yield %c, %d : i32, i32
  }
  %y = memref.alloc() : memref<2xi32>
  loop.nest "concat" lower [0] upper [1] iterators ["parallel"] ins(%a : memref<1xi32>) outs(%y : memref<2xi32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%v: i32, %o: i32):
    loop.yield %v : i32
  }
  memref.dealloc %a : memref<1xi32>
  loop.nest "concat" lower [0] upper [1] iterators ["parallel"] ins(%b : memref<1xi32>) outs(%y : memref<2xi32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0 + 1)>] {
  ^bb0(%v: i32, %o: i32):
    loop.yield %v : i32
  }
  memref.dealloc %b : memref<1xi32>
  loop.nest "use" lower [0] upper [2] iterators ["parallel"] ins(%y : memref<2xi32>) outs(%out : memref<2xi32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%v: i32, %o: i32):
    loop.yield %v : i32
  }
  memref.dealloc %y : memref<2xi32>
  func.return
}

// -----

// A reduction writer keeps its `init` (loop-fold-init's), now over the destination.
// CHECK-LABEL: func.func @reduction_writer
// CHECK: loop.nest "sum" {{.*}} outs(%p : memref<6xf32>) maps [{{.*}}, affine_map<(d0, d1) -> ((d0 + 1))>] init [1.500000e+00 : f32]
// CHECK-NOT: "copy"
func.func @reduction_writer(%x: memref<4x8xf32>, %out: memref<6xf32>) {
  %y = memref.alloc() : memref<4xf32>
  loop.nest "sum" lower [0, 0] upper [4, 8] iterators ["parallel", "reduction"] ins(%x : memref<4x8xf32>) outs(%y : memref<4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>] init [1.5 : f32] {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %acc, %a : f32
    loop.yield %t : f32
  }
  %p = memref.alloc() : memref<6xf32>
  loop.nest "fill" lower [0] upper [6] iterators ["parallel"] ins() outs(%p : memref<6xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %z = arith.constant -3.0 : f32
    loop.yield %z : f32
  }
  loop.nest "copy" lower [0] upper [4] iterators ["parallel"] ins(%y : memref<4xf32>) outs(%p : memref<6xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  memref.dealloc %y : memref<4xf32>
  loop.nest "twice" lower [0] upper [6] iterators ["parallel"] ins(%p : memref<6xf32>) outs(%out : memref<6xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%v: f32, %o: f32):
    %s = arith.addf %v, %v : f32
    loop.yield %s : f32
  }
  memref.dealloc %p : memref<6xf32>
  func.return
}

// -----

// Not forwarded: the source has another reader (the sum), the source is an argument,
// the copy reads a part of its source, the copy converts.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-4: loop.nest "copy"
func.func @kept(%a: memref<4x4xf32>, %out: memref<4x4xf32>, %o2: memref<4x4xf32>, %o3: memref<2x4xf32>, %o4: memref<4x4xf64>) {
  %y = memref.alloc() : memref<4x4xf32>
  loop.nest "neg" lower [0, 0] upper [4, 4] iterators ["parallel", "parallel"] ins(%a : memref<4x4xf32>) outs(%y : memref<4x4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    loop.yield %n : f32
  }
  loop.nest "copy" lower [0, 0] upper [4, 4] iterators ["parallel", "parallel"] ins(%y : memref<4x4xf32>) outs(%out : memref<4x4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "sum" lower [0, 0] upper [4, 4] iterators ["parallel", "parallel"] ins(%y, %a : memref<4x4xf32>, memref<4x4xf32>) outs(%o2 : memref<4x4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %s = arith.addf %u, %v : f32
    loop.yield %s : f32
  }
  %z = memref.alloc() : memref<4x4xf32>
  loop.nest "copy" lower [0, 0] upper [4, 4] iterators ["parallel", "parallel"] ins(%a : memref<4x4xf32>) outs(%z : memref<4x4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  %w = memref.alloc() : memref<4x4xf32>
  loop.nest "neg" lower [0, 0] upper [4, 4] iterators ["parallel", "parallel"] ins(%z : memref<4x4xf32>) outs(%w : memref<4x4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    loop.yield %n : f32
  }
  loop.nest "copy" lower [0, 0] upper [2, 4] iterators ["parallel", "parallel"] ins(%w : memref<4x4xf32>) outs(%o3 : memref<2x4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  %u = memref.alloc() : memref<4x4xf32>
  loop.nest "neg" lower [0, 0] upper [4, 4] iterators ["parallel", "parallel"] ins(%a : memref<4x4xf32>) outs(%u : memref<4x4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    loop.yield %n : f32
  }
  loop.nest "copy" lower [0, 0] upper [4, 4] iterators ["parallel", "parallel"] ins(%u : memref<4x4xf32>) outs(%o4 : memref<4x4xf64>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%v: f32, %o: f64):
    %x = arith.extf %v : f32 to f64
    loop.yield %x : f64
  }
  memref.dealloc %y : memref<4x4xf32>
  memref.dealloc %z : memref<4x4xf32>
  memref.dealloc %w : memref<4x4xf32>
  memref.dealloc %u : memref<4x4xf32>
  func.return
}

// -----

// Not forwarded: the writer is a product's epilogue (loop-gemm-epilogue-fuse moves it
// into the GEMM kernel, which writes a contiguous output), and a destination that is
// read before the copy (by a nest, or by a nest inside a band).
// CHECK-LABEL: func.func @gemm_epilogue
// CHECK: loop.nest "relu" {{.*}} outs(%y : memref<1x4x4xf32>)
// CHECK: loop.nest "copy"
// CHECK-LABEL: func.func @destination_read_first
// CHECK: loop.nest "neg" {{.*}} outs(%y : memref<4xf32>)
// CHECK: loop.nest "copy"
// CHECK-LABEL: func.func @destination_read_in_a_band
// CHECK: loop.nest "neg" {{.*}} outs(%y : memref<8xf32>)
// CHECK: loop.nest "copy"
func.func @gemm_epilogue(%a: memref<1x4x8xf32>, %b: memref<1x8x4xf32>, %out: memref<1x6x6xf32>) {
  %c = memref.alloc() : memref<1x4x4xf32>
  loop.gemm %a, %b into %c : memref<1x4x8xf32>, memref<1x8x4xf32>, memref<1x4x4xf32>
  %y = memref.alloc() : memref<1x4x4xf32>
  loop.nest "relu" lower [0, 0, 0] upper [1, 4, 4] iterators ["parallel", "parallel", "parallel"] ins(%c : memref<1x4x4xf32>) outs(%y : memref<1x4x4xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %o: f32):
    %z = arith.constant 0.0 : f32
    %m = arith.maximumf %v, %z : f32
    loop.yield %m : f32
  }
  loop.nest "copy" lower [0, 0, 0] upper [1, 4, 4] iterators ["parallel", "parallel", "parallel"] ins(%y : memref<1x4x4xf32>) outs(%out : memref<1x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1 + 1, d2 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  memref.dealloc %c : memref<1x4x4xf32>
  memref.dealloc %y : memref<1x4x4xf32>
  func.return
}
func.func @destination_read_first(%a: memref<4xf32>, %out: memref<4xf32>) {
  %y = memref.alloc() : memref<4xf32>
  loop.nest "neg" lower [0] upper [4] iterators ["parallel"] ins(%a : memref<4xf32>) outs(%y : memref<4xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    loop.yield %n : f32
  }
  %p = memref.alloc() : memref<4xf32>
  loop.nest "fill" lower [0] upper [4] iterators ["parallel"] ins() outs(%p : memref<4xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %z = arith.constant 2.0 : f32
    loop.yield %z : f32
  }
  loop.nest "double" lower [0] upper [4] iterators ["parallel"] ins(%p : memref<4xf32>) outs(%out : memref<4xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%v: f32, %o: f32):
    %s = arith.addf %v, %v : f32
    loop.yield %s : f32
  }
  loop.nest "copy" lower [0] upper [4] iterators ["parallel"] ins(%y : memref<4xf32>) outs(%p : memref<4xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  memref.dealloc %y : memref<4xf32>
  memref.dealloc %p : memref<4xf32>
  func.return
}
func.func @destination_read_in_a_band(%a: memref<8xf32>, %out: memref<8xf32>) {
  %y = memref.alloc() : memref<8xf32>
  loop.nest "neg" lower [0] upper [8] iterators ["parallel"] ins(%a : memref<8xf32>) outs(%y : memref<8xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    loop.yield %n : f32
  }
  %p = memref.alloc() : memref<8xf32>
  loop.nest "fill" lower [0] upper [8] iterators ["parallel"] ins() outs(%p : memref<8xf32>) maps [affine_map<(d0) -> (d0)>] {
  ^bb0(%o: f32):
    %z = arith.constant 2.0 : f32
    loop.yield %z : f32
  }
  loop.band "double.tiles" upper [2] attributes {tile_sizes = array<i64: 4>} {
  ^bb0(%i: index):
    loop.nest "double" syms(%i) lower [affine_map<()[s0] -> (s0 * 4)>] upper [affine_map<()[s0] -> (s0 * 4 + 4)>] iterators ["parallel"] ins(%p : memref<8xf32>) outs(%out : memref<8xf32>) maps [affine_map<(d0)[s0] -> (d0)>, affine_map<(d0)[s0] -> (d0)>] {
    ^bb0(%v: f32, %o: f32):
      %s = arith.addf %v, %v : f32
      loop.yield %s : f32
    }
  }
  loop.nest "copy" lower [0] upper [8] iterators ["parallel"] ins(%y : memref<8xf32>) outs(%p : memref<8xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  memref.dealloc %y : memref<8xf32>
  memref.dealloc %p : memref<8xf32>
  func.return
}

// -----

// Forwarded: the product's only reader scatters its rows into 2 x 2 pixels (U-Net's
// ConvTranspose): not element for element as it writes, so no epilogue of it.
// CHECK-LABEL: func.func @gemm_scattered
// CHECK: loop.gemm
// CHECK: loop.nest "fill"
// CHECK: loop.nest "scatter" {{.*}} outs(%p : memref<1x2x6x6xf32>) maps [{{.*}}, affine_map<(d0, d1, d2, d3, d4) -> (0, d0, (((d1 * 2) + d2) + 1), (((d3 * 2) + d4) + 1))>]
// CHECK-NOT: loop.nest "copy"
// CHECK: loop.nest "use"
func.func @gemm_scattered(%a: memref<1x8x4xf32>, %b: memref<1x4x4xf32>, %out: memref<1x2x6x6xf32>) {
  %p = memref.alloc() : memref<1x2x6x6xf32>
  %c = memref.alloc() : memref<1x8x4xf32>
  loop.gemm %a, %b into %c : memref<1x8x4xf32>, memref<1x4x4xf32>, memref<1x8x4xf32>
  %y = memref.alloc() : memref<1x2x4x4xf32>
  loop.nest "scatter" lower [0, 0, 0, 0, 0] upper [2, 2, 2, 2, 2] iterators ["parallel", "parallel", "parallel", "parallel", "parallel"] ins(%c : memref<1x8x4xf32>) outs(%y : memref<1x2x4x4xf32>) maps [affine_map<(d0, d1, d2, d3, d4) -> (0, d0 * 4 + d2 * 2 + d4, d1 * 2 + d3)>, affine_map<(d0, d1, d2, d3, d4) -> (0, d0, d1 * 2 + d2, d3 * 2 + d4)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "fill" lower [0, 0, 0, 0] upper [1, 2, 6, 6] iterators ["parallel", "parallel", "parallel", "parallel"] ins() outs(%p : memref<1x2x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "copy" lower [0, 0, 0, 0] upper [1, 2, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%y : memref<1x2x4x4xf32>) outs(%p : memref<1x2x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 + 1, d3 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "use" lower [0, 0, 0, 0] upper [1, 2, 6, 6] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%p : memref<1x2x6x6xf32>) outs(%out : memref<1x2x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    loop.yield %n : f32
  }
  memref.dealloc %c : memref<1x8x4xf32>
  memref.dealloc %y : memref<1x2x4x4xf32>
  memref.dealloc %p : memref<1x2x6x6xf32>
  func.return
}

// -----

// Forwarded: the pad copy of a product (its epilogue already folded in): the product
// writes the interior of the padded images itself (c_frame = top, left, oh, ow), after
// the fill; its buffer and the copy go.
// CHECK-LABEL: func.func @gemm_frame
// CHECK-NEXT: %p = memref.alloc() : memref<4x6x6xf32>
// CHECK-NEXT: loop.nest "fill"
// CHECK: %[[V:.*]] = loop.view %p : memref<4x6x6xf32> to memref<1x4x6x6xf32>
// CHECK-NEXT: loop.gemm %a, %b into %[[V]] epilogue ins(%bias : memref<4xf32>) {
// CHECK: c_frame = array<i64: 1, 1, 4, 4>
// CHECK-SAME: : memref<1x4x8xf32>, memref<1x8x16xf32>, memref<1x4x6x6xf32>
// CHECK-NOT: loop.nest "copy"
// CHECK-NOT: memref<1x4x16xf32>
// CHECK: loop.nest "use"
func.func @gemm_frame(%a: memref<1x4x8xf32>, %b: memref<1x8x16xf32>, %bias: memref<4xf32>, %out: memref<4x6x6xf32>) {
  %c = memref.alloc() : memref<1x4x16xf32>
  loop.gemm %a, %b into %c epilogue ins(%bias : memref<4xf32>) {
  ^bb0(%acc: f32, %v: f32):
    %s = arith.addf %acc, %v : f32
    loop.yield %s : f32
  } {epilogue_maps = [affine_map<(d0, d1, d2) -> (d1)>]} : memref<1x4x8xf32>, memref<1x8x16xf32>, memref<1x4x16xf32>
  %cv = loop.view %c : memref<1x4x16xf32> to memref<4x4x4xf32>
  %p = memref.alloc() : memref<4x6x6xf32>
  loop.nest "fill" lower [0, 0, 0] upper [4, 6, 6] iterators ["parallel", "parallel", "parallel"] ins() outs(%p : memref<4x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "copy" lower [0, 0, 0] upper [4, 4, 4] iterators ["parallel", "parallel", "parallel"] ins(%cv : memref<4x4x4xf32>) outs(%p : memref<4x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1 + 1, d2 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "use" lower [0, 0, 0] upper [4, 6, 6] iterators ["parallel", "parallel", "parallel"] ins(%p : memref<4x6x6xf32>) outs(%out : memref<4x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    loop.yield %n : f32
  }
  memref.dealloc %c : memref<1x4x16xf32>
  memref.dealloc %p : memref<4x6x6xf32>
  func.return
}

// -----

// Not framed: a product that something else reads as well, a copy that transposes the
// images, and one that shifts the channels (not a pad of the last two dimensions).
// CHECK-LABEL: func.func @gemm_frame_kept
// CHECK-NOT: c_frame
// CHECK: loop.nest "copy"
// CHECK: loop.nest "other_reader"
// CHECK: loop.nest "transposed"
// CHECK: loop.nest "shifted"
func.func @gemm_frame_kept(%a: memref<1x4x8xf32>, %b: memref<1x8x16xf32>, %out: memref<4x6x6xf32>, %o2: memref<4x6x6xf32>, %o3: memref<5x6x6xf32>) {
  %c = memref.alloc() : memref<1x4x16xf32>
  loop.gemm %a, %b into %c : memref<1x4x8xf32>, memref<1x8x16xf32>, memref<1x4x16xf32>
  %cv = loop.view %c : memref<1x4x16xf32> to memref<4x4x4xf32>
  %p = memref.alloc() : memref<4x6x6xf32>
  loop.nest "copy" lower [0, 0, 0] upper [4, 4, 4] iterators ["parallel", "parallel", "parallel"] ins(%cv : memref<4x4x4xf32>) outs(%p : memref<4x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1 + 1, d2 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "other_reader" lower [0, 0, 0] upper [4, 4, 4] iterators ["parallel", "parallel", "parallel"] ins(%cv : memref<4x4x4xf32>) outs(%out : memref<4x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  %c2 = memref.alloc() : memref<1x4x16xf32>
  loop.gemm %a, %b into %c2 : memref<1x4x8xf32>, memref<1x8x16xf32>, memref<1x4x16xf32>
  %c2v = loop.view %c2 : memref<1x4x16xf32> to memref<4x4x4xf32>
  %p2 = memref.alloc() : memref<4x6x6xf32>
  loop.nest "fill" lower [0, 0, 0] upper [4, 6, 6] iterators ["parallel", "parallel", "parallel"] ins() outs(%p2 : memref<4x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "transposed" lower [0, 0, 0] upper [4, 4, 4] iterators ["parallel", "parallel", "parallel"] ins(%c2v : memref<4x4x4xf32>) outs(%p2 : memref<4x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d2 + 1, d1 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  %c3 = memref.alloc() : memref<1x4x16xf32>
  loop.gemm %a, %b into %c3 : memref<1x4x8xf32>, memref<1x8x16xf32>, memref<1x4x16xf32>
  %c3v = loop.view %c3 : memref<1x4x16xf32> to memref<4x4x4xf32>
  %p3 = memref.alloc() : memref<5x6x6xf32>
  loop.nest "fill" lower [0, 0, 0] upper [5, 6, 6] iterators ["parallel", "parallel", "parallel"] ins() outs(%p3 : memref<5x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "shifted" lower [0, 0, 0] upper [4, 4, 4] iterators ["parallel", "parallel", "parallel"] ins(%c3v : memref<4x4x4xf32>) outs(%p3 : memref<5x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0 + 1, d1 + 1, d2 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "use" lower [0, 0, 0] upper [4, 6, 6] iterators ["parallel", "parallel", "parallel"] ins(%p2, %p3 : memref<4x6x6xf32>, memref<5x6x6xf32>) outs(%o2 : memref<4x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %s = arith.addf %v, %w : f32
    loop.yield %s : f32
  }
  memref.dealloc %c : memref<1x4x16xf32>
  memref.dealloc %p : memref<4x6x6xf32>
  memref.dealloc %c2 : memref<1x4x16xf32>
  memref.dealloc %p2 : memref<4x6x6xf32>
  memref.dealloc %c3 : memref<1x4x16xf32>
  memref.dealloc %p3 : memref<5x6x6xf32>
  func.return
}

// -----

// Framed with a residual reader: a later product reads the source in its epilogue (at
// the identity), and reads the images' interiors instead ((j floordiv ow + top,
// j mod ow + left)); the images live until that read (their dealloc moves after it).
// CHECK-LABEL: func.func @gemm_frame_residual
// CHECK: %[[V:.*]] = loop.view %p : memref<4x6x6xf32> to memref<1x4x6x6xf32>
// CHECK-NEXT: loop.gemm %a, %b into %[[V]] {c_frame = array<i64: 1, 1, 4, 4>}
// CHECK: loop.nest "use"
// CHECK: loop.gemm %w, %b into %y epilogue ins(%[[V]] : memref<1x4x6x6xf32>)
// CHECK: epilogue_maps = [affine_map<(d0, d1, d2) -> (d0, d1, ((d2 floordiv 4) + 1), ((d2 mod 4) + 1))>]
// CHECK-NOT: loop.nest "copy"
// CHECK: memref.dealloc %p
// CHECK-NEXT: func.return
func.func @gemm_frame_residual(%a: memref<1x4x8xf32>, %b: memref<1x8x16xf32>, %w: memref<1x4x8xf32>, %out: memref<4x6x6xf32>, %y: memref<1x4x16xf32>) {
  %c = memref.alloc() : memref<1x4x16xf32>
  loop.gemm %a, %b into %c : memref<1x4x8xf32>, memref<1x8x16xf32>, memref<1x4x16xf32>
  %cv = loop.view %c : memref<1x4x16xf32> to memref<4x4x4xf32>
  %p = memref.alloc() : memref<4x6x6xf32>
  loop.nest "fill" lower [0, 0, 0] upper [4, 6, 6] iterators ["parallel", "parallel", "parallel"] ins() outs(%p : memref<4x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "copy" lower [0, 0, 0] upper [4, 4, 4] iterators ["parallel", "parallel", "parallel"] ins(%cv : memref<4x4x4xf32>) outs(%p : memref<4x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1 + 1, d2 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "use" lower [0, 0, 0] upper [4, 6, 6] iterators ["parallel", "parallel", "parallel"] ins(%p : memref<4x6x6xf32>) outs(%out : memref<4x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    loop.yield %n : f32
  }
  memref.dealloc %p : memref<4x6x6xf32>
  loop.gemm %w, %b into %y epilogue ins(%c : memref<1x4x16xf32>) {
  ^bb0(%acc: f32, %r: f32):
    %s = arith.addf %acc, %r : f32
    loop.yield %s : f32
  } {epilogue_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>]} : memref<1x4x8xf32>, memref<1x8x16xf32>, memref<1x4x16xf32>
  memref.dealloc %c : memref<1x4x16xf32>
  func.return
}

// -----

// Framed with a window reader: a later product (a 1x1 downsample at stride 2) reads the
// source as the image under its window, and reads the images' interior instead
// (window_border = top, left, bottom, right).
// CHECK-LABEL: func.func @gemm_frame_window_reader
// CHECK: %[[V:.*]] = loop.view %p : memref<4x6x6xf32> to memref<1x4x6x6xf32>
// CHECK-NEXT: loop.gemm %a, %b into %[[V]] {c_frame = array<i64: 1, 1, 4, 4>}
// CHECK: loop.gemm %w, %[[V]] into %y {window = array<i64: 1, 1, 2, 2>, window_border = array<i64: 1, 1, 1, 1>} : memref<1x4x4xf32>, memref<1x4x6x6xf32>, memref<1x4x4xf32>
// CHECK-NOT: loop.nest "copy"
func.func @gemm_frame_window_reader(%a: memref<1x4x8xf32>, %b: memref<1x8x16xf32>, %w: memref<1x4x4xf32>, %out: memref<4x6x6xf32>, %y: memref<1x4x4xf32>) {
  %c = memref.alloc() : memref<1x4x16xf32>
  loop.gemm %a, %b into %c : memref<1x4x8xf32>, memref<1x8x16xf32>, memref<1x4x16xf32>
  %cv = loop.view %c : memref<1x4x16xf32> to memref<4x4x4xf32>
  %p = memref.alloc() : memref<4x6x6xf32>
  loop.nest "fill" lower [0, 0, 0] upper [4, 6, 6] iterators ["parallel", "parallel", "parallel"] ins() outs(%p : memref<4x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "copy" lower [0, 0, 0] upper [4, 4, 4] iterators ["parallel", "parallel", "parallel"] ins(%cv : memref<4x4x4xf32>) outs(%p : memref<4x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1 + 1, d2 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "use" lower [0, 0, 0] upper [4, 6, 6] iterators ["parallel", "parallel", "parallel"] ins(%p : memref<4x6x6xf32>) outs(%out : memref<4x6x6xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>] {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    loop.yield %n : f32
  }
  memref.dealloc %p : memref<4x6x6xf32>
  %ci = loop.view %c : memref<1x4x16xf32> to memref<1x4x4x4xf32>
  loop.gemm %w, %ci into %y {window = array<i64: 1, 1, 2, 2>} : memref<1x4x4xf32>, memref<1x4x4x4xf32>, memref<1x4x4xf32>
  memref.dealloc %c : memref<1x4x16xf32>
  func.return
}

// -----

// Framed into a concat's part: the copy places the product's images at channel 2 of
// padded images [1, 4, 6, 6] whose channels 0-1 another nest writes (a disjoint part,
// left where it is); the product writes its part itself (c_frame's fifth value, the
// channel), and a nest that read the product's images (a pool of a skip connection)
// reads them there, through the copy's map.
// CHECK-LABEL: func.func @gemm_frame_concat_part
// CHECK-NEXT: %p = memref.alloc() : memref<1x4x6x6xf32>
// CHECK-NEXT: loop.nest "fill"
// CHECK-NEXT: ^bb0
// CHECK: loop.gemm %a, %b into %p {c_frame = array<i64: 1, 1, 4, 4, 2>} : memref<1x2x8xf32>, memref<1x8x16xf32>, memref<1x4x6x6xf32>
// CHECK-NEXT: loop.nest "pool" {{.*}} ins(%p : memref<1x4x6x6xf32>) {{.*}} maps [affine_map<(d0, d1, d2, d3) -> (d0, (d1 + 2), ((d2 * 2) + 1), ((d3 * 2) + 1))>
// CHECK: loop.nest "piece" {{.*}} outs(%p : memref<1x4x6x6xf32>)
// CHECK-NOT: loop.nest "copy"
// CHECK: loop.nest "use"
// CHECK-NOT: memref<1x2x4x4xf32>
func.func @gemm_frame_concat_part(%a: memref<1x2x8xf32>, %b: memref<1x8x16xf32>, %x: memref<1x2x4x4xf32>, %pooled: memref<1x2x2x2xf32>, %out: memref<1x4x6x6xf32>) {
  %s = memref.alloc() : memref<1x2x4x4xf32>
  %sv = loop.view %s : memref<1x2x4x4xf32> to memref<1x2x16xf32>
  loop.gemm %a, %b into %sv : memref<1x2x8xf32>, memref<1x8x16xf32>, memref<1x2x16xf32>
  loop.nest "pool" lower [0, 0, 0, 0] upper [1, 2, 2, 2] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%s : memref<1x2x4x4xf32>) outs(%pooled : memref<1x2x2x2xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 * 2, d3 * 2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  %p = memref.alloc() : memref<1x4x6x6xf32>
  loop.nest "fill" lower [0, 0, 0, 0] upper [1, 4, 6, 6] iterators ["parallel", "parallel", "parallel", "parallel"] ins() outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "piece" lower [0, 0, 0, 0] upper [1, 2, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%x : memref<1x2x4x4xf32>) outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 + 1, d3 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "copy" lower [0, 0, 0, 0] upper [1, 2, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%s : memref<1x2x4x4xf32>) outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1 + 2, d2 + 1, d3 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "use" lower [0, 0, 0, 0] upper [1, 4, 6, 6] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%p : memref<1x4x6x6xf32>) outs(%out : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    loop.yield %n : f32
  }
  memref.dealloc %s : memref<1x2x4x4xf32>
  memref.dealloc %p : memref<1x4x6x6xf32>
  func.return
}

// -----

// Not framed into a concat's part: another nest writes channels 1-2 of the images, which
// overlap the part the copy writes (channels 2-3).
// CHECK-LABEL: func.func @gemm_frame_concat_kept
// CHECK-NOT: c_frame
// CHECK: loop.nest "copy"
func.func @gemm_frame_concat_kept(%a: memref<1x2x8xf32>, %b: memref<1x8x16xf32>, %x: memref<1x2x4x4xf32>, %out: memref<1x4x6x6xf32>) {
  %s = memref.alloc() : memref<1x2x4x4xf32>
  %sv = loop.view %s : memref<1x2x4x4xf32> to memref<1x2x16xf32>
  loop.gemm %a, %b into %sv : memref<1x2x8xf32>, memref<1x8x16xf32>, memref<1x2x16xf32>
  %p = memref.alloc() : memref<1x4x6x6xf32>
  loop.nest "fill" lower [0, 0, 0, 0] upper [1, 4, 6, 6] iterators ["parallel", "parallel", "parallel", "parallel"] ins() outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "overlapping" lower [0, 0, 0, 0] upper [1, 2, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%x : memref<1x2x4x4xf32>) outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1 + 1, d2 + 1, d3 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "copy" lower [0, 0, 0, 0] upper [1, 2, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%s : memref<1x2x4x4xf32>) outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1 + 2, d2 + 1, d3 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "use" lower [0, 0, 0, 0] upper [1, 4, 6, 6] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%p : memref<1x4x6x6xf32>) outs(%out : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  memref.dealloc %s : memref<1x2x4x4xf32>
  memref.dealloc %p : memref<1x4x6x6xf32>
  func.return
}

// -----

// Not forwarded: a nest writing another part of the destination comes before the
// source's writer, where the destination's allocation would have to move (above its use).
// CHECK-LABEL: func.func @part_written_before_the_source
// CHECK: loop.nest "piece"
// CHECK: loop.nest "writer"
// CHECK: loop.nest "copy"
func.func @part_written_before_the_source(%x: memref<1x2x4x4xf32>, %out: memref<1x4x6x6xf32>) {
  %p = memref.alloc() : memref<1x4x6x6xf32>
  loop.nest "fill" lower [0, 0, 0, 0] upper [1, 4, 6, 6] iterators ["parallel", "parallel", "parallel", "parallel"] ins() outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "piece" lower [0, 0, 0, 0] upper [1, 2, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%x : memref<1x2x4x4xf32>) outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 + 1, d3 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  %s = memref.alloc() : memref<1x2x4x4xf32>
  loop.nest "writer" lower [0, 0, 0, 0] upper [1, 2, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%x : memref<1x2x4x4xf32>) outs(%s : memref<1x2x4x4xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    loop.yield %n : f32
  }
  loop.nest "copy" lower [0, 0, 0, 0] upper [1, 2, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%s : memref<1x2x4x4xf32>) outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1 + 2, d2 + 1, d3 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "use" lower [0, 0, 0, 0] upper [1, 4, 6, 6] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%p : memref<1x4x6x6xf32>) outs(%out : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  memref.dealloc %s : memref<1x2x4x4xf32>
  memref.dealloc %p : memref<1x4x6x6xf32>
  func.return
}

// -----

// Forwarded through a part: the same with the other part written after the source's
// writer; the writer writes its part of the destination, the piece stays.
// CHECK-LABEL: func.func @part_written_after_the_source
// CHECK: loop.nest "writer" {{.*}} outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, (d1 + 2), (d2 + 1), (d3 + 1))>]
// CHECK: loop.nest "piece"
// CHECK-NOT: loop.nest "copy"
func.func @part_written_after_the_source(%x: memref<1x2x4x4xf32>, %out: memref<1x4x6x6xf32>) {
  %s = memref.alloc() : memref<1x2x4x4xf32>
  loop.nest "writer" lower [0, 0, 0, 0] upper [1, 2, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%x : memref<1x2x4x4xf32>) outs(%s : memref<1x2x4x4xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    loop.yield %n : f32
  }
  %p = memref.alloc() : memref<1x4x6x6xf32>
  loop.nest "fill" lower [0, 0, 0, 0] upper [1, 4, 6, 6] iterators ["parallel", "parallel", "parallel", "parallel"] ins() outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "piece" lower [0, 0, 0, 0] upper [1, 2, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%x : memref<1x2x4x4xf32>) outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 + 1, d3 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "copy" lower [0, 0, 0, 0] upper [1, 2, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%s : memref<1x2x4x4xf32>) outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1 + 2, d2 + 1, d3 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "use" lower [0, 0, 0, 0] upper [1, 4, 6, 6] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%p : memref<1x4x6x6xf32>) outs(%out : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  memref.dealloc %s : memref<1x2x4x4xf32>
  memref.dealloc %p : memref<1x4x6x6xf32>
  func.return
}

// -----

// Not framed: the nest that reads the product's images comes after the copy (a writer of
// the destination in between could change what it would read there).
// CHECK-LABEL: func.func @gemm_frame_reader_after_copy
// CHECK-NOT: c_frame
// CHECK: loop.nest "copy"
// CHECK: loop.nest "pool" {{.*}} ins(%s : memref<1x2x4x4xf32>)
func.func @gemm_frame_reader_after_copy(%a: memref<1x2x8xf32>, %b: memref<1x8x16xf32>, %pooled: memref<1x2x2x2xf32>, %out: memref<1x4x6x6xf32>) {
  %s = memref.alloc() : memref<1x2x4x4xf32>
  %sv = loop.view %s : memref<1x2x4x4xf32> to memref<1x2x16xf32>
  loop.gemm %a, %b into %sv : memref<1x2x8xf32>, memref<1x8x16xf32>, memref<1x2x16xf32>
  %p = memref.alloc() : memref<1x4x6x6xf32>
  loop.nest "fill" lower [0, 0, 0, 0] upper [1, 4, 6, 6] iterators ["parallel", "parallel", "parallel", "parallel"] ins() outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%o: f32):
    %z = arith.constant 0.0 : f32
    loop.yield %z : f32
  }
  loop.nest "copy" lower [0, 0, 0, 0] upper [1, 2, 4, 4] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%s : memref<1x2x4x4xf32>) outs(%p : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1 + 2, d2 + 1, d3 + 1)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "pool" lower [0, 0, 0, 0] upper [1, 2, 2, 2] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%s : memref<1x2x4x4xf32>) outs(%pooled : memref<1x2x2x2xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 * 2, d3 * 2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  loop.nest "use" lower [0, 0, 0, 0] upper [1, 4, 6, 6] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%p : memref<1x4x6x6xf32>) outs(%out : memref<1x4x6x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>] {
  ^bb0(%v: f32, %o: f32):
    loop.yield %v : f32
  }
  memref.dealloc %s : memref<1x2x4x4xf32>
  memref.dealloc %p : memref<1x4x6x6xf32>
  func.return
}
