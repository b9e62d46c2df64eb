// Streaming accesses: pure, unit-stride writes to buffers of at least 32 MiB get
// `nontemporal = true`, and unit-stride loads of such buffers inside a loop.band
// or in a nest that computes a transcendental get `mlfuse.prefetch`; mlfuse/backend/streaming.py turns both into machine
// code after LLVM vectorizes. Serial lowering keeps the checks short.
// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p 'convert-loop-to-scf{parallel=false}' | filecheck %s
// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p 'convert-loop-to-scf{parallel=false streaming=false}' | filecheck %s --check-prefix=OFF

// A 64 MiB output written once, row by row: streams; exp's input is prefetched.
// CHECK-LABEL: func.func @stream
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}] {mlfuse.prefetch} : memref<4096x4096xf32>
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] {nontemporal = true} : memref<4096x4096xf32>
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

// Does not stream: a small output (a later reader finds it in cache).
// CHECK-LABEL: func.func @small
// CHECK-NOT: nontemporal = true
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
