// Streaming stores: pure, unit-stride writes to buffers of at least 32 MiB get
// `nontemporal = true`; made non-temporal after LLVM vectorizes them
// (mlfuse/backend/streaming.py). Serial lowering keeps the checks short.
// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p 'convert-loop-to-scf{parallel=false}' | filecheck %s
// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p 'convert-loop-to-scf{parallel=false nontemporal=false}' | filecheck %s --check-prefix=OFF

// A 64 MiB output written once, row by row: streams.
// CHECK-LABEL: func.func @stream
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

// Does not stream: a transposed write strides through memory.
// CHECK-LABEL: func.func @transpose
// CHECK-NOT: nontemporal = true
func.func @transpose(%x: memref<4096x4096xf32>, %y: memref<4096x4096xf32>) {
  loop.nest "t" lower [0, 0] upper [4096, 4096] iterators ["parallel", "parallel"] ins(%x : memref<4096x4096xf32>) outs(%y : memref<4096x4096xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1, d0)>] {
  ^bb0(%a: f32, %o: f32):
    loop.yield %a : f32
  }
  func.return
}
