// Streaming accesses: pure, unit-stride writes to buffers of at least 32 MiB get
// `nontemporal = true`, and unit-stride loads of such buffers in one of several
// passes over a loop.band's rows or in a nest that computes a transcendental get
// `mlfuse.prefetch`; mlfuse/backend/streaming.py turns both into machine
// code after LLVM vectorizes. Serial lowering keeps the checks short.
// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p 'convert-loop-to-scf{parallel=false}' | filecheck %s
// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p 'convert-loop-to-scf{parallel=false streaming=false}' | filecheck %s --check-prefix=OFF
// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p 'convert-loop-to-scf' | filecheck %s --check-prefix=PAR
// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p 'convert-loop-to-scf{parallel=false streaming-min-bytes=65536}' | filecheck %s --check-prefix=LOW
// RUN: not mlfuse-opt %s -p 'convert-loop-to-scf{streaming-min-bytes=0}' 2>&1 | filecheck %s --check-prefix=BAD
// BAD: error: invalid pass pipeline {{.*}}streaming-min-bytes must be at least 1, got 0

// A 64 MiB output written once, row by row: streams; exp's input is prefetched.
// CHECK-LABEL: func.func @stream
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}] {mlfuse.prefetch} : memref<4096x4096xf32>
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}] {nontemporal = true} : memref<16777216xf32>
// OFF-LABEL: func.func @stream
// OFF-NOT: nontemporal = true
func.func @stream(%x: memref<4096x4096xf32>, %y: memref<4096x4096xf32>) {
  loop.nest "exp" lower [0, 0] upper [4096, 4096] iterators ["parallel", "parallel"] ins(%x : memref<4096x4096xf32>) outs(%y : memref<4096x4096xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    loop.yield %e : f32
  }
  func.return
}

// -----

// Does not stream: a small output (a later reader finds it in cache). With the
// threshold lowered (streaming-min-bytes, for tests) it streams, peeled.
// CHECK-LABEL: func.func @small
// CHECK-NOT: nontemporal = true
// LOW-LABEL: func.func @small
// LOW: loop.aligned_window
// LOW: nontemporal = true
func.func @small(%x: memref<256x256xf32>, %y: memref<256x256xf32>) {
  loop.nest "exp" lower [0, 0] upper [256, 256] iterators ["parallel", "parallel"] ins(%x : memref<256x256xf32>) outs(%y : memref<256x256xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    loop.yield %e : f32
  }
  func.return
}

// -----

// Does not stream: an accumulation reads what it writes.
// CHECK-LABEL: func.func @accumulate
// CHECK-NOT: nontemporal = true
func.func @accumulate(%x: memref<4096x4096xf32>, %y: memref<4096x4096xf32>) {
  loop.nest "acc" lower [0, 0] upper [4096, 4096] iterators ["parallel", "parallel"] ins(%x : memref<4096x4096xf32>) outs(%y : memref<4096x4096xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    loop.yield %s : f32
  }
  func.return
}

// -----

// Does not stream: a transposed write strides through memory. No prefetch either:
// a copy outside a band keeps up with the hardware prefetcher.
// CHECK-LABEL: func.func @transpose
// CHECK-NOT: nontemporal = true
// CHECK-NOT: mlfuse.prefetch
func.func @transpose(%x: memref<4096x4096xf32>, %y: memref<4096x4096xf32>) {
  loop.nest "t" lower [0, 0] upper [4096, 4096] iterators ["parallel", "parallel"] ins(%x : memref<4096x4096xf32>) outs(%y : memref<4096x4096xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1, d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  func.return
}

// -----

// Inside a loop.band (a stitched row), loads that stream from a large input are
// marked for software prefetching; the small per-row scratch is not.
// CHECK-LABEL: func.func @rows
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}] {mlfuse.prefetch} : memref<16384x1024xf32>
// CHECK-NOT: memref.load %{{.*}}[%{{.*}}] {mlfuse.prefetch} : memref<1xf32>
// OFF-LABEL: func.func @rows
// OFF-NOT: mlfuse.prefetch
func.func @rows(%x: memref<16384x1024xf32>, %y: memref<16384x1024xf32>) {
  loop.band "rows" upper [16384] {
  ^bb0(%r: index):
    %acc = memref.alloca() {alignment = 64 : i64} : memref<1xf32>
    loop.nest "sum" syms(%r) lower [0] upper [1024] iterators ["reduction"] ins(%x : memref<16384x1024xf32>) outs(%acc : memref<1xf32>) maps [affine_map<(d0)[s0] -> (s0, d0)>, affine_map<(d0)[s0] -> (0)>] {
    ^bb0(%a: f32, %s: f32):
      %t = arith.addf %s, %a fastmath<reassoc> : f32
      loop.yield %t : f32
    }
    loop.nest "scale" syms(%r) lower [0] upper [1024] iterators ["parallel"] ins(%x, %acc : memref<16384x1024xf32>, memref<1xf32>) outs(%y : memref<16384x1024xf32>) maps [affine_map<(d0)[s0] -> (s0, d0)>, affine_map<(d0)[s0] -> (0)>, affine_map<(d0)[s0] -> (s0, d0)>] {
    ^bb0(%a: f32, %s: f32, %o: f32):
      %t = arith.mulf %a, %s : f32
      loop.yield %t : f32
    }
  }
  func.return
}

// -----

// A band of one pass over its rows (a row sum: its init and its write-out have no
// loops) streams its input once, which the hardware prefetcher follows: no
// prefetches.
// CHECK-LABEL: func.func @row_sum
// CHECK-NOT: mlfuse.prefetch
// CHECK: func.return
func.func @row_sum(%x: memref<65536x1024xf32>, %y: memref<65536xf32>) {
  loop.band "reduce_sum" upper [65536] {
  ^bb0(%r: index):
    %acc = memref.alloca() {alignment = 64 : i64} : memref<1xf32>
    loop.nest "init_0" syms(%r) lower [] upper [] iterators [] ins() outs(%acc : memref<1xf32>) maps [affine_map<()[s0] -> (0)>] {
    ^bb0(%o: f32):
      %z = arith.constant 0.000000e+00 : f32
      loop.yield %z : f32
    }
    loop.nest "sum" syms(%r) lower [0] upper [1024] iterators ["reduction"] ins(%x : memref<65536x1024xf32>) outs(%acc : memref<1xf32>) maps [affine_map<(d0)[s0] -> (s0, d0)>, affine_map<(d0)[s0] -> (0)>] {
    ^bb0(%a: f32, %s: f32):
      %t = arith.addf %s, %a fastmath<reassoc> : f32
      loop.yield %t : f32
    }
    loop.nest "row_outputs" syms(%r) lower [] upper [] iterators [] ins(%acc : memref<1xf32>) outs(%y : memref<65536xf32>) maps [affine_map<()[s0] -> (0)>, affine_map<()[s0] -> (s0)>] {
    ^bb0(%a: f32, %o: f32):
      loop.yield %a : f32
    }
  }
  func.return
}

// -----

// Rows of 1001 floats start anywhere in a cache line: each row is peeled. The
// nest's own carry (two lines of scratch, the waiting tail's flat index and length,
// the output seen as 1-D) is made before the row loop and flushed after it. Per row:
// the head goes into the scratch (the waiting tail's line if it completes it, else
// the second line); the state records where this row's tail will wait; whole lines
// through the window (counted from 0); if the head joined the tail, their line
// streams as one vector before the window, else the waiting tail and the head go out
// plainly (copies under a condition); the tail goes into the first line.
// CHECK-LABEL: func.func @odd_rows
// CHECK: %[[LINE:.*]] = memref.alloca() {alignment = 64 : i64} : memref<32xf32>
// CHECK: %[[STATE:.*]] = memref.alloca() {alignment = 8 : i64} : memref<2xi64>
// CHECK: %[[FLAT:.*]] = loop.view %{{.*}} : memref<8400x1001xf32> to memref<8408400xf32>
// CHECK: scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step %[[ONE:.*]] {
// CHECK: %[[SKIP:.*]], %[[WINDOW:.*]] = loop.aligned_window %{{.*}}[%[[ROW]], %[[LO:.*]]] {alignment = 64 : i64} : memref<8400x1001xf32> -> memref<8408400xf32>
// CHECK: %[[START:.*]] = arith.minsi %{{.*}}, %[[HI:.*]] : index
// CHECK: %[[REST:.*]] = arith.andi %{{.*}}, %{{.*}} : index
// CHECK: %[[END:.*]] = arith.subi %[[HI]], %[[REST]] : index
// CHECK: memref.load %[[STATE]]
// CHECK-COUNT-3: arith.andi %{{.*}}, %{{.*}} : i1
// CHECK: arith.select %[[JOINS:.*]], %{{.*}}, %{{.*}} : index
// CHECK: scf.for %[[J:.*]] = %[[LO]] to %[[START]] step %[[ONE]] {
// CHECK: memref.store %{{.*}}, %[[LINE]][%{{.*}}] : memref<32xf32>
// CHECK: memref.store %{{.*}}, %[[STATE]][%{{.*}}] : memref<2xi64>
// CHECK: %[[LINES:.*]] = arith.subi %[[END]], %[[START]] : index
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %[[LINES]] step %[[ONE]] {
// CHECK: %[[AT:.*]] = arith.addi %[[START]], %[[T]] : index
// CHECK: memref.load %{{.*}}[%[[ROW]], %[[AT]]] {mlfuse.prefetch} : memref<8400x1001xf32>
// CHECK: memref.store %{{.*}}, %[[WINDOW]][%[[T]]] {nontemporal = true} : memref<8408400xf32>
// CHECK: scf.if %[[JOINS]] {
// CHECK: %[[WHOLE:.*]] = vector.load %[[LINE]][%{{.*}}] : memref<32xf32>, vector<16xf32>
// CHECK: vector.store %[[WHOLE]], %[[WINDOW]][%{{.*}}] {nontemporal = true} : memref<8408400xf32>, vector<16xf32>
// CHECK: scf.for
// CHECK: scf.if
// CHECK: memref.store %{{.*}}, %[[FLAT]][%{{.*}}] : memref<8408400xf32>
// CHECK: scf.for
// CHECK: scf.if
// CHECK: memref.store %{{.*}}, %[[FLAT]][%{{.*}}] : memref<8408400xf32>
// CHECK: scf.for %[[K:.*]] = %[[END]] to %[[HI]] step %[[ONE]] {
// CHECK: memref.store %{{.*}}, %[[LINE]][%{{.*}}] : memref<32xf32>
// CHECK: memref.load %[[STATE]]
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %[[FLAT]][%{{.*}}] : memref<8408400xf32>
// CHECK: func.return
// OFF-LABEL: func.func @odd_rows
// OFF-NOT: loop.aligned_window
func.func @odd_rows(%x: memref<8400x1001xf32>, %y: memref<8400x1001xf32>) {
  loop.nest "exp" lower [0, 0] upper [8400, 1001] iterators ["parallel", "parallel"] ins(%x : memref<8400x1001xf32>) outs(%y : memref<8400x1001xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    loop.yield %e : f32
  }
  func.return
}

// -----

// A band whose rows stream: the carry is the band's (made before its loop, flushed
// after), so the rows of one thread's iterations combine their partial lines.
// CHECK-LABEL: func.func @band_rows
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<32xf32>
// CHECK: scf.for
// CHECK: loop.aligned_window
// CHECK: vector.store
// CHECK: }
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<16809984xf32>
// CHECK: func.return
func.func @band_rows(%x: memref<16384x1026xf32>, %y: memref<16384x1026xf32>) {
  loop.band "rows" upper [16384] {
  ^bb0(%r: index):
    loop.nest "scale" syms(%r) lower [0] upper [1026] iterators ["parallel"] ins(%x : memref<16384x1026xf32>) outs(%y : memref<16384x1026xf32>) maps [affine_map<(d0)[s0] -> (s0, d0)>, affine_map<(d0)[s0] -> (s0, d0)>] {
    ^bb0(%a: f32, %o: f32):
      %t = arith.mulf %a, %a : f32
      loop.yield %t : f32
    }
  }
  func.return
}

// -----

// A later nest of the same band reads the streamed output: a tail must not wait
// in a carry past its row, so the rows are peeled without one.
// CHECK-LABEL: func.func @band_reader
// CHECK-NOT: vector.store
// CHECK: loop.aligned_window
// CHECK-NOT: vector.store
// CHECK: func.return
func.func @band_reader(%x: memref<16384x1026xf32>, %y: memref<16384x1026xf32>, %z: memref<16384xf32>) {
  loop.band "rows" upper [16384] {
  ^bb0(%r: index):
    loop.nest "scale" syms(%r) lower [0] upper [1026] iterators ["parallel"] ins(%x : memref<16384x1026xf32>) outs(%y : memref<16384x1026xf32>) maps [affine_map<(d0)[s0] -> (s0, d0)>, affine_map<(d0)[s0] -> (s0, d0)>] {
    ^bb0(%a: f32, %o: f32):
      %t = arith.mulf %a, %a : f32
      loop.yield %t : f32
    }
    loop.nest "sum" syms(%r) lower [0] upper [1026] iterators ["reduction"] ins(%y : memref<16384x1026xf32>) outs(%z : memref<16384xf32>) maps [affine_map<(d0)[s0] -> (s0, d0)>, affine_map<(d0)[s0] -> (s0)>] {
    ^bb0(%a: f32, %o: f32):
      %t = arith.addf %o, %a : f32
      loop.yield %t : f32
    }
  }
  func.return
}

// -----

// A 1-D nest split across threads: each thread's chunk starts where the split put
// it, so the chunk is peeled (at lo, the outlined function's first parameter).
// PAR-LABEL: func.func private @flat__0_exp(
// PAR-SAME: %[[LO:[^:]*]]: index, %[[HI:[^:]*]]: index
// PAR: %[[FROM:.*]] = arith.addi %[[LO]], %{{.*}} : index
// PAR: %{{.*}}, %[[WINDOW:.*]] = loop.aligned_window %{{.*}}[%[[FROM]]] {alignment = 64 : i64} : memref<16777216xf32> -> memref<16777216xf32>
// PAR: memref.store %{{.*}}, %[[WINDOW]][%{{.*}}] {nontemporal = true} : memref<16777216xf32>
func.func @flat(%x: memref<16777216xf32>, %y: memref<16777216xf32>) {
  loop.nest "exp" lower [0] upper [16777216] iterators ["parallel"] ins(%x : memref<16777216xf32>) outs(%y : memref<16777216xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    loop.yield %e : f32
  }
  func.return
}

// -----

// Two streamed outputs of one chunked nest: the second gets a window of its own, and
// when its chunk starts as far from a line as the first's (the runtime's own buffers
// are aligned alike) both stream whole lines; else only the first does.
// PAR-LABEL: func.func private @two_outputs__0_pair(
// PAR: %[[SKIP:.*]], %[[FIRST:.*]] = loop.aligned_window %{{.*}}[%{{.*}}] {alignment = 64 : i64}
// PAR: %[[SKIP2:.*]], %[[SECOND:.*]] = loop.aligned_window %{{.*}}[%{{.*}}] {alignment = 64 : i64}
// PAR: %[[SAME:.*]] = arith.cmpi eq, %[[SKIP2]], %[[SKIP]] : index
// PAR: scf.if %[[SAME]] {
// PAR: memref.store %{{.*}}, %[[FIRST]][%[[T:.*]]] {nontemporal = true}
// PAR: memref.store %{{.*}}, %[[SECOND]][%[[T]]] {nontemporal = true}
// PAR: } else {
// PAR: memref.store %{{.*}}, %[[FIRST]][%{{.*}}] {nontemporal = true}
// PAR-NOT: %[[SECOND]]
// PAR: }
func.func @two_outputs(%x: memref<16777216xf32>, %y: memref<16777216xf32>, %z: memref<16777216xf32>) {
  loop.nest "pair" lower [0] upper [16777216] iterators ["parallel"] ins(%x : memref<16777216xf32>) outs(%y, %z : memref<16777216xf32>, memref<16777216xf32>) maps [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] {
  ^bb0(%a: f32, %o: f32, %p: f32):
    %e = math.exp %a : f32
    loop.yield %e, %a : f32, f32
  }
  func.return
}
