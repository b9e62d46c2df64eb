// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p convert-loop-to-scf | filecheck %s
// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p 'convert-loop-to-scf{parallel=false}' | filecheck %s --check-prefix=SERIAL

// A small nest stays inline: loads, the body, a store, one scf.for per dimension.
// CHECK-LABEL: func.func @small
// CHECK-NOT: loop.parallel_call
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT: %[[A:.*]] = memref.load %{{.*}}[%[[I]]] : memref<8xf32>
// CHECK-NEXT: %[[O:.*]] = memref.load %{{.*}}[%[[I]]] : memref<8xf32>
// CHECK-NEXT: %[[E:.*]] = math.exp %[[A]] : f32
// CHECK-NEXT: memref.store %[[E]], %{{.*}}[%[[I]]] : memref<8xf32>
func.func @small(%x: memref<8xf32>, %y: memref<8xf32>) {
  loop.nest "exp" lower [0] upper [8] iterators ["parallel"] ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    loop.yield %e : f32
  }
  func.return
}

// -----

// Under PARALLEL_MIN_POINTS points (288 x 49 = 14112), a nest that reads its input
// across the rows (the unpack of a product computed pixel-major, with a bias) counts
// each point ACROSS_POINT_WORK times and runs on the team; the same nest reading along
// the rows stays inline.
// CHECK-LABEL: func.func @unpack_across_rows
// CHECK: loop.parallel_call @unpack_across_rows__0_unpack(%{{.*}}, %{{.*}}, %{{.*}}) range 288
// CHECK-LABEL: func.func @copy_along_rows
// CHECK-NOT: loop.parallel_call
func.func @unpack_across_rows(%yt: memref<49x288xf32>, %b: memref<288xf32>, %y: memref<288x49xf32>) {
  loop.nest "unpack" lower [0, 0] upper [288, 49] iterators ["parallel", "parallel"] ins(%yt, %b : memref<49x288xf32>, memref<288xf32>) outs(%y : memref<288x49xf32>) maps [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    loop.yield %s : f32
  }
  func.return
}
func.func @copy_along_rows(%x: memref<288x49xf32>, %b: memref<288xf32>, %y: memref<288x49xf32>) {
  loop.nest "copy" lower [0, 0] upper [288, 49] iterators ["parallel", "parallel"] ins(%x, %b : memref<288x49xf32>, memref<288xf32>) outs(%y : memref<288x49xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    loop.yield %s : f32
  }
  func.return
}

// -----

// A large nest is outlined over a range of its first parallel dimension and
// called through loop.parallel_call; shifted maps become index arithmetic.
// CHECK-LABEL: func.func @large
// CHECK: loop.parallel_call @large__0_shift(%{{.*}}, %{{.*}}) range 256 : i64 {grain = 32 : i64}
// CHECK: func.func private @large__0_shift(%[[LO:.*]]: index, %[[HI:.*]]: index, %{{.*}}: memref<258x256xf32>, %{{.*}}: memref<256x256xf32>) attributes {mlfuse.kernel = "shift"}
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[C2:.*]] = arith.constant 2 : index
// CHECK-NEXT: %[[I2:.*]] = arith.addi %[[I]], %[[C2]] : index
// CHECK-NEXT: memref.load %{{.*}}[%[[I2]], %[[J]]] : memref<258x256xf32>
// SERIAL-LABEL: func.func @large
// SERIAL-NOT: loop.parallel_call
func.func @large(%x: memref<258x256xf32>, %y: memref<256x256xf32>) {
  loop.nest "shift" lower [0, 0] upper [256, 256] iterators ["parallel", "parallel"] ins(%x : memref<258x256xf32>) outs(%y : memref<256x256xf32>) maps [affine_map<(d0, d1) -> (d0 + 2, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  func.return
}

// -----

// Three channels are too few iterations to split across a team: the nest is split
// along its rows (SPLIT_MIN_TRIP), and each chunk runs every channel.
// CHECK-LABEL: func.func @few_channels
// CHECK: loop.parallel_call @few_channels__0_copy(%{{.*}}, %{{.*}}) range 224 : i64 {grain = 13 : i64}
// CHECK: func.func private @few_channels__0_copy(%[[LO:.*]]: index, %[[HI:.*]]: index,
// CHECK: %[[ROW0:.*]] = arith.addi %[[LO]], %{{.*}} : index
// CHECK: %[[ROW1:.*]] = arith.addi %[[HI]], %{{.*}} : index
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step
// CHECK: scf.for %{{.*}} = %[[ROW0]] to %[[ROW1]] step
func.func @few_channels(%x: memref<1x3x224x224xf32>, %y: memref<1x3x226x226xf32>) {
  loop.nest "copy" lower [0, 0, 0, 0] upper [1, 3, 224, 224] iterators ["parallel", "parallel", "parallel", "parallel"] ins(%x : memref<1x3x224x224xf32>) outs(%y : memref<1x3x226x226xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 + 1, d3 + 1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  func.return
}

// -----

// A column reduction: the parallel dimension is the inner one; it is the one split.
// CHECK-LABEL: func.func @column_sum
// CHECK: loop.parallel_call @column_sum__0_colsum(%{{.*}}, %{{.*}}) range 512
// SERIAL-LABEL: func.func @column_sum
// SERIAL: scf.for
// SERIAL: scf.for
func.func @column_sum(%x: memref<512x512xf32>, %y: memref<512xf32>) {
  loop.nest "colsum" lower [0, 0] upper [512, 512] iterators ["reduction", "parallel"] ins(%x : memref<512x512xf32>) outs(%y : memref<512xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>] {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    loop.yield %s : f32
  }
  func.return
}

// -----

// Symbolic bounds: max of lower results, min of upper results; no threads.
// CHECK-LABEL: func.func @tile
// CHECK-NOT: loop.parallel_call
// CHECK: arith.minsi
// CHECK: scf.for
func.func @tile(%y: memref<100xf32>, %t: index) {
  loop.nest "tile" syms(%t) lower [affine_map<()[s0] -> (s0)>] upper [affine_map<()[s0] -> (s0 + 32, 100)>] iterators ["parallel"] ins() outs(%y : memref<100xf32>) maps [affine_map<(d0)[s0] -> (d0)>] {
  ^bb0(%o: f32):
    %c = arith.constant 0.0 : f32
    loop.yield %c : f32
  }
  func.return
}

// -----

// Ops that are not loop nests are untouched.
// CHECK-LABEL: func.func @untouched
// CHECK-NEXT: %{{.*}} = memref.alloc() : memref<4xf32>
// CHECK-NEXT: func.return
func.func @untouched() {
  %a = memref.alloc() : memref<4xf32>
  func.return
}

// -----

// An invalid option value is rejected before anything runs.
// RUN: not mlfuse-opt %s -p 'convert-loop-to-scf{parallel=maybe}' 2>&1 | filecheck %s --check-prefix=OPTION
// OPTION: <pass-pipeline>:1:1: error: invalid pass pipeline

// -----

// Kernels are numbered per function in walk order (the k of @<fn>__<k>_<name>),
// the small ones included; each outlined function goes right after its caller,
// so the module lists the last kernel first. A band's nests are the band's.
// CHECK-LABEL: func.func @several
// CHECK: loop.parallel_call @several__0_first(
// CHECK: scf.for
// CHECK: loop.parallel_call @several__2_rows(
// CHECK: func.func private @several__2_rows(
// CHECK: func.func private @several__0_first(
// CHECK-NOT: loop.
// SERIAL-LABEL: func.func @several
// SERIAL-NOT: loop.
func.func @several(%x: memref<256x256xf32>, %y: memref<256x256xf32>, %s: memref<8xf32>) {
  loop.nest "first" lower [0, 0] upper [256, 256] iterators ["parallel", "parallel"] ins(%x : memref<256x256xf32>) outs(%y : memref<256x256xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.nest "small" lower [0] upper [8] iterators ["parallel"] ins(%s : memref<8xf32>) outs(%s : memref<8xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  loop.band "rows" upper [256] {
  ^bb0(%r: index):
    loop.nest "row" syms(%r) lower [0] upper [256] iterators ["parallel"] ins(%x : memref<256x256xf32>) outs(%y : memref<256x256xf32>) maps [affine_map<(d0)[s0] -> (s0, d0)>, affine_map<(d0)[s0] -> (s0, d0)>] {
    ^bb0(%a: f32, %o: f32):
      %e = math.exp %a : f32
      loop.yield %e : f32
    }
  }
  func.return
}

// -----

// A reduction's `init` (loop-fold-init): the first reduction step of each output element
// (every reduction iv at its lower bound) reads the constant instead of the buffer.
// CHECK-LABEL: func.func @reduction_init
// CHECK: scf.for %[[I:.*]] =
// CHECK: scf.for %[[K:.*]] =
// CHECK: %[[OLD:.*]] = memref.load %{{.*}}[%[[I]]] : memref<4xf32>
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[K]], %{{.*}} : index
// CHECK: %[[START:.*]] = arith.constant 0xff800000 : f32
// CHECK: %[[ACC:.*]] = arith.select %[[FIRST]], %[[START]], %[[OLD]] : f32
// CHECK: arith.maximumf %[[ACC]]
func.func @reduction_init(%x: memref<4x3xf32>, %y: memref<4xf32>) {
  loop.nest "pool" lower [0, 0] upper [4, 3] iterators ["parallel", "reduction"] ins(%x : memref<4x3xf32>) outs(%y : memref<4xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>] init [0xFF800000 : f32] {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.maximumf %acc, %a : f32
    loop.yield %m : f32
  }
  func.return
}

// -----

// In a band, a small reduction whose taps run inside its output's dimensions and the
// pointwise nest right after it that reads each element it completes: one loop nest,
// the consumer's body right after the taps' loops, inside the row loop.
// CHECK-LABEL: func.func @reduction_then_consumer
// CHECK: scf.for
// CHECK: scf.for %[[ROW:[a-z0-9]+]] =
// CHECK: scf.for %[[COL:[a-z0-9]+]] =
// CHECK: scf.for
// CHECK: scf.for
// CHECK: arith.mulf
// CHECK: memref.store %{{.*}}, %[[ACC:[a-z0-9]+]][%[[ROW]], %[[COL]]] : memref<4x6xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: %[[DONE:.*]] = memref.load %[[ACC]][%[[ROW]], %[[COL]]] : memref<4x6xf32>
// CHECK: arith.maximumf %[[DONE]]
// CHECK-NEXT: memref.store %{{.*}}, %{{.*}}[%[[ROW]], %[[COL]]] : memref<4x6xf32>
// CHECK-NEXT: }
// CHECK-NEXT: }
// A consumer that reads another element than the one just completed (the row mirrored)
// keeps its loops.
// CHECK-LABEL: func.func @consumer_reads_a_neighbour
// CHECK-COUNT-2: arith.constant 4 : index
func.func @reduction_then_consumer(%x: memref<6x8xf32>, %w: memref<3x3xf32>, %y: memref<4x6xf32>) {
  loop.band "conv.tiles" upper [1] {
  ^bb0(%t: index):
    %acc = memref.alloca() : memref<4x6xf32>
    loop.nest "conv" lower [0, 0, 0, 0] upper [4, 6, 3, 3] iterators ["parallel", "parallel", "reduction", "reduction"] ins(%x, %w : memref<6x8xf32>, memref<3x3xf32>) outs(%acc : memref<4x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0 + d2, d1 + d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1)>] init [0.0 : f32] {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %o, %p : f32
      loop.yield %s : f32
    }
    loop.nest "relu" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins(%acc : memref<4x6xf32>) outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
    ^bb0(%a: f32, %o: f32):
      %z = arith.constant 0.0 : f32
      %r = arith.maximumf %a, %z : f32
      loop.yield %r : f32
    }
  }
  func.return
}

func.func @consumer_reads_a_neighbour(%x: memref<6x8xf32>, %w: memref<3x3xf32>, %y: memref<4x6xf32>) {
  loop.band "conv.tiles" upper [1] {
  ^bb0(%t: index):
    %acc = memref.alloca() : memref<4x6xf32>
    loop.nest "conv" lower [0, 0, 0, 0] upper [4, 6, 3, 3] iterators ["parallel", "parallel", "reduction", "reduction"] ins(%x, %w : memref<6x8xf32>, memref<3x3xf32>) outs(%acc : memref<4x6xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0 + d2, d1 + d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1)>] init [0.0 : f32] {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %o, %p : f32
      loop.yield %s : f32
    }
    loop.nest "mirrored" lower [0, 0] upper [4, 6] iterators ["parallel", "parallel"] ins(%acc : memref<4x6xf32>) outs(%y : memref<4x6xf32>) maps [affine_map<(d0, d1) -> (d0, 5 - d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
    ^bb0(%a: f32, %o: f32):
      loop.yield %a : f32
    }
  }
  func.return
}

// -----

// A loop around short loops only (under to_llvm.ROW_LOOP_TRIPS.start = 17 points each:
// LLVM unrolls them fully) whose index no access's last subscript names is marked
// mlfuse.strided_loop (vectorize.width 1 in LLVM: its lanes would be a row apart):
// 28 rows copied into their even and odd columns. Not marked: the loop of a transpose's
// rows (its index is the input's last subscript), a loop around a 17-point loop, and
// the short loops themselves.
// CHECK-LABEL: func.func @pairs
// CHECK: } {mlfuse.strided_loop}
// CHECK-NEXT: func.return
// CHECK-LABEL: func.func @transpose
// CHECK-NOT: mlfuse.strided_loop
// CHECK-LABEL: func.func @long_rows
// CHECK-NOT: mlfuse.strided_loop
func.func @pairs(%x: memref<28x28xf32>, %y: memref<28x2x14xf32>) {
  loop.nest "pairs" lower [0, 0, 0] upper [28, 14, 2] iterators ["parallel", "parallel", "parallel"] ins(%x : memref<28x28xf32>) outs(%y : memref<28x2x14xf32>) maps [affine_map<(d0, d1, d2) -> (d0, d1 * 2 + d2)>, affine_map<(d0, d1, d2) -> (d0, d2, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  func.return
}
func.func @transpose(%x: memref<8x28xf32>, %y: memref<28x8xf32>) {
  loop.nest "transpose" lower [0, 0] upper [28, 8] iterators ["parallel", "parallel"] ins(%x : memref<8x28xf32>) outs(%y : memref<28x8xf32>) maps [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  func.return
}
func.func @long_rows(%x: memref<28x17xf32>, %y: memref<28x17xf32>) {
  loop.nest "long" lower [0, 0] upper [28, 17] iterators ["parallel", "parallel"] ins(%x : memref<28x17xf32>) outs(%y : memref<28x17xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  func.return
}
