// RUN: mlfuse-opt %s --split-input-file -p gpu-schedule --verify-diagnostics | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p 'gpu-schedule{arch=sm_80}' --verify-diagnostics | filecheck %s --check-prefix=SM80
// RUN: not mlfuse-opt %s -p 'gpu-schedule{arch=sm_70}' 2>&1 | filecheck %s --check-prefix=BADARCH

// BADARCH: error: unknown GPU architecture 'sm_70' (known: sm_90, sm_80)

// Elementwise: vectors of 4 (16-byte accesses) when the innermost dimension allows.
// CHECK-LABEL: func.func @bias
// CHECK: gpu.schedule = {mapping = "elementwise", block = [256 : i64, 1 : i64, 1 : i64], grid = [384 : i64, 1 : i64, 1 : i64], reason = "no reduction: one thread per 4 element(s), grid-stride loop", vector = 4 : i64}
func.func @bias(%x: tensor<512x768xf32>, %b: tensor<768xf32>) -> tensor<512x768xf32> {
  %r = fusion.group "bias" kind = "loop" (%x, %b) : (tensor<512x768xf32>, tensor<768xf32>) -> tensor<512x768xf32> {
  ^bb0(%a: tensor<512x768xf32>, %c: tensor<768xf32>):
    %cb = graph.broadcast %c {dims = array<i64: 1>} : tensor<768xf32> -> tensor<512x768xf32>
    %s = graph.add %a, %cb : tensor<512x768xf32>
    fusion.yield %s : tensor<512x768xf32>
  }
  func.return %r : tensor<512x768xf32>
}

// -----

// Odd innermost size: one element per thread.
// CHECK-LABEL: func.func @odd
// CHECK: mapping = "elementwise"
// CHECK-NOT: vector
func.func @odd(%x: tensor<7x5xf32>) -> tensor<7x5xf32> {
  %y = graph.exp %x : tensor<7x5xf32>
  func.return %y : tensor<7x5xf32>
}

// -----

// Softmax over rows of 256: warp per row, 8 rows packed per block, the row in registers.
// CHECK-LABEL: func.func @softmax
// CHECK: mapping = "row"
// CHECK-SAME: variant = "warp", rows = 1024 : i64, cols = 256 : i64, rows_per_block = 8 : i64, threads_per_row = 32 : i64, cache = "registers", stitch = ["warp", "warp"]
func.func @softmax(%x: tensor<1024x256xf32>) -> tensor<1024x256xf32> {
  %r = fusion.group "softmax" kind = "stitch" (%x) : (tensor<1024x256xf32>) -> tensor<1024x256xf32> {
  ^bb0(%a: tensor<1024x256xf32>):
    %m = graph.reduce_max %a {axes = array<i64: 1>, keepdims} : tensor<1024x256xf32> -> tensor<1024x1xf32>
    %mb = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<1024x1xf32> -> tensor<1024x256xf32>
    %d = graph.sub %a, %mb : tensor<1024x256xf32>
    %e = graph.exp %d : tensor<1024x256xf32>
    %s = graph.reduce_sum %e {axes = array<i64: 1>, keepdims} : tensor<1024x256xf32> -> tensor<1024x1xf32>
    %sb = graph.broadcast %s {dims = array<i64: 0, 1>} : tensor<1024x1xf32> -> tensor<1024x256xf32>
    %y = graph.div %e, %sb : tensor<1024x256xf32>
    fusion.yield %y : tensor<1024x256xf32>
  }
  func.return %r : tensor<1024x256xf32>
}

// -----

// Long rows: block per row; 32768 floats per row exceed 48 KiB, so the row is kept in
// dynamic shared memory; on sm_80 as well (163 KiB opt-in).
// CHECK-LABEL: func.func @long_softmax
// CHECK: variant = "block", rows = 64 : i64, cols = 32768 : i64, rows_per_block = 1 : i64, threads_per_row = 1024 : i64, cache = "dynamic_shared", shared_bytes = 131072 : i64, stitch = ["block", "block"]
// SM80-LABEL: func.func @long_softmax
// SM80: cache = "dynamic_shared"
func.func @long_softmax(%x: tensor<64x32768xf32>) -> tensor<64x32768xf32> {
  %r = fusion.group "softmax" kind = "stitch" (%x) : (tensor<64x32768xf32>) -> tensor<64x32768xf32> {
  ^bb0(%a: tensor<64x32768xf32>):
    %m = graph.reduce_max %a {axes = array<i64: 1>, keepdims} : tensor<64x32768xf32> -> tensor<64x1xf32>
    %mb = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<64x1xf32> -> tensor<64x32768xf32>
    %d = graph.sub %a, %mb : tensor<64x32768xf32>
    %e = graph.exp %d : tensor<64x32768xf32>
    %s = graph.reduce_sum %e {axes = array<i64: 1>, keepdims} : tensor<64x32768xf32> -> tensor<64x1xf32>
    %sb = graph.broadcast %s {dims = array<i64: 0, 1>} : tensor<64x1xf32> -> tensor<64x32768xf32>
    %y = graph.div %e, %sb : tensor<64x32768xf32>
    fusion.yield %y : tensor<64x32768xf32>
  }
  func.return %r : tensor<64x32768xf32>
}

// -----

// Rows too long for shared memory (60000 floats = 240 KB): the shared-memory fallback
// reads the row again from global memory.
// CHECK-LABEL: func.func @huge_rows
// CHECK: reason = "{{.*}}rows exceed shared memory: inputs are read again from global memory", variant = "block"{{.*}}cache = "reload"
func.func @huge_rows(%x: tensor<256x60000xf32>) -> tensor<256x60000xf32> {
  %r = fusion.group "center" kind = "stitch" (%x) : (tensor<256x60000xf32>) -> tensor<256x60000xf32> {
  ^bb0(%a: tensor<256x60000xf32>):
    %m = graph.reduce_mean %a {axes = array<i64: 1>} : tensor<256x60000xf32> -> tensor<256xf32>
    %mb = graph.broadcast %m {dims = array<i64: 0>} : tensor<256xf32> -> tensor<256x60000xf32>
    %d = graph.sub %a, %mb : tensor<256x60000xf32>
    fusion.yield %d : tensor<256x60000xf32>
  }
  func.return %r : tensor<256x60000xf32>
}

// -----

// Short rows: one thread per row, stitched in registers.
// CHECK-LABEL: func.func @short_rows
// CHECK: variant = "thread", rows = 100000 : i64, cols = 8 : i64, rows_per_block = 256 : i64, threads_per_row = 1 : i64{{.*}}stitch = ["register"]
func.func @short_rows(%x: tensor<100000x8xf32>) -> tensor<100000xf32> {
  %s = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<100000x8xf32> -> tensor<100000xf32>
  func.return %s : tensor<100000xf32>
}

// -----

// Few long rows: rows split over blocks, partial sums added atomically.
// CHECK-LABEL: func.func @few_long_rows
// CHECK: mapping = "row"{{.*}}variant = "split"{{.*}}split = 48 : i64, stitch = ["global"]
// SM80-LABEL: func.func @few_long_rows
// SM80: split = 48 : i64
func.func @few_long_rows(%x: tensor<4x100000xf32>) -> tensor<4xf32> {
  %s = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<4x100000xf32> -> tensor<4xf32>
  func.return %s : tensor<4xf32>
}

// -----

// A max cannot be added atomically: no split, one block per row.
// CHECK-LABEL: func.func @few_long_max
// CHECK: variant = "block"
func.func @few_long_max(%x: tensor<4x100000xf32>) -> tensor<4xf32> {
  %s = graph.reduce_max %x {axes = array<i64: 1>} : tensor<4x100000xf32> -> tensor<4xf32>
  func.return %s : tensor<4xf32>
}

// -----

// Column reduction: 32x8 tiles through shared memory; few tiles -> rows split with atomics.
// CHECK-LABEL: func.func @colsum
// CHECK: mapping = "column", block = [32 : i64, 8 : i64, 1 : i64], grid = [2 : i64, 16 : i64, 1 : i64]{{.*}}variant = "split"
func.func @colsum(%x: tensor<4096x64xf32>) -> tensor<64xf32> {
  %s = graph.reduce_sum %x {axes = array<i64: 0>} : tensor<4096x64xf32> -> tensor<64xf32>
  func.return %s : tensor<64xf32>
}

// -----

// CHECK-LABEL: func.func @colmax
// CHECK: mapping = "column", block = [32 : i64, 8 : i64, 1 : i64], grid = [32 : i64, 1 : i64, 1 : i64]{{.*}}variant = "tiled"{{.*}}stitch = ["block"]
func.func @colmax(%x: tensor<512x1024xf32>) -> tensor<1024xf32> {
  %s = graph.reduce_max %x {axes = array<i64: 0>} : tensor<512x1024xf32> -> tensor<1024xf32>
  func.return %s : tensor<1024xf32>
}

// -----

// Column statistics broadcast back over all rows: global stitching with a grid barrier,
// at most one wave (2 blocks of 256 threads per SM: 264 on sm_90, 216 on sm_80).
// CHECK-LABEL: func.func @center_columns
// CHECK: mapping = "global", block = [256 : i64, 1 : i64, 1 : i64], grid = [264 : i64, 1 : i64, 1 : i64]{{.*}}cooperative = true, stitch = ["global"]
// SM80-LABEL: func.func @center_columns
// SM80: mapping = "global", block = [256 : i64, 1 : i64, 1 : i64], grid = [216 : i64, 1 : i64, 1 : i64]
func.func @center_columns(%x: tensor<1024x128xf32>) -> tensor<1024x128xf32> {
  %r = fusion.group "center" kind = "global" (%x) : (tensor<1024x128xf32>) -> tensor<1024x128xf32> {
  ^bb0(%a: tensor<1024x128xf32>):
    %m = graph.reduce_mean %a {axes = array<i64: 0>, keepdims} : tensor<1024x128xf32> -> tensor<1x128xf32>
    %mb = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<1x128xf32> -> tensor<1024x128xf32>
    %d = graph.sub %a, %mb : tensor<1024x128xf32>
    fusion.yield %d : tensor<1024x128xf32>
  }
  func.return %r : tensor<1024x128xf32>
}

// -----

// Groups are wrapped around single ops; non-splat constants become group inputs.
// CHECK-LABEL: func.func @singles
// CHECK:      %[[C:.*]] = graph.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK:      fusion.group "scaled" kind = "loop" (%x, %[[C]])
// CHECK:      fusion.group "graph_neg" kind = "single" (%{{.*}})
func.func @singles(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = fusion.group "scaled" kind = "loop" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %c = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
    %m = graph.mul %a, %c : tensor<4xf32>
    fusion.yield %m : tensor<4xf32>
  }
  %n = graph.neg %r : tensor<4xf32>
  func.return %n : tensor<4xf32>
}
