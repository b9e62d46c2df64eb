// Stitched lowering of fusion.groups by convert-graph-to-loop (mlfuse/conversion/group_to_loop.py).
// RUN: mlfuse-opt %s --split-input-file -p convert-graph-to-loop | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p 'convert-graph-to-loop{stitch=false}' | filecheck %s --check-prefix=UNSTITCHED

// An elementwise chain is one nest: the broadcast becomes an access map, the
// intermediates are registers.
// CHECK-LABEL: func.func @chain
// CHECK-NOT: memref.alloc
// CHECK: loop.nest "fused_mul_add_tanh" lower [0, 0] upper [4, 8] iterators ["parallel", "parallel"]
// CHECK-SAME: maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: math.tanh
// CHECK-NOT: loop.nest
// UNSTITCHED-LABEL: func.func @chain
// UNSTITCHED: memref.alloc
// UNSTITCHED-COUNT-4: loop.nest
func.func @chain(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = fusion.group "fused_mul_add_tanh" kind = "loop" (%x, %w) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %v: tensor<8xf32>):
    %wb = graph.broadcast %v {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
    %m = graph.mul %a, %wb : tensor<4x8xf32>
    %s = graph.add %m, %a : tensor<4x8xf32>
    %t = graph.tanh %s : tensor<4x8xf32>
    fusion.yield %t : tensor<4x8xf32>
  }
  func.return %r : tensor<4x8xf32>
}

// -----

// Softmax: a band over rows; phase 0 the max (maxnum, with a separate NaN scan that
// restores numpy's NaN result), phase 1 exp and sum (exp kept in a row scratch,
// since phase 2 needs it), phase 2 the division.
// CHECK-LABEL: func.func @softmax
// CHECK: loop.band "fused_softmax" upper [4] {
// CHECK-NEXT: ^{{.*}}(%[[ROW:.*]]: index):
// CHECK: %[[MAX:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1xf32>
// CHECK: loop.nest "fused_softmax.0_reduce_max" syms(%[[ROW]]) lower [0] upper [8] iterators ["reduction"]
// CHECK: arith.maxnumf
// CHECK: loop.nest "fused_softmax.nan_scan" syms(%[[ROW]]) lower [0] upper [8] iterators ["reduction"]
// CHECK: arith.cmpf uno
// CHECK: loop.nest "nan_restore"
// CHECK: %[[SUM:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1xf32>
// CHECK: %[[EXP:.*]] = memref.alloca() {alignment = 64 : i64} : memref<8xf32>
// CHECK: loop.nest "fused_softmax.1_reduce_sum" syms(%[[ROW]]) {{.*}} outs(%[[SUM]], %[[EXP]] : memref<1xf32>, memref<8xf32>)
// CHECK: math.exp
// CHECK: loop.nest "fused_softmax.2_rows" syms(%[[ROW]]) lower [0] upper [8] iterators ["parallel"] ins(%[[EXP]], %[[SUM]] : memref<8xf32>, memref<1xf32>)
// CHECK-NOT: math.exp
// CHECK: arith.divf
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = fusion.group "fused_softmax" kind = "stitch" (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %m = graph.reduce_max %a {axes = array<i64: 1>, keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
    %mb = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<4x1xf32> -> tensor<4x8xf32>
    %d = graph.sub %a, %mb : tensor<4x8xf32>
    %e = graph.exp %d : tensor<4x8xf32>
    %s = graph.reduce_sum %e {axes = array<i64: 1>, keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
    %sb = graph.broadcast %s {dims = array<i64: 0, 1>} : tensor<4x1xf32> -> tensor<4x8xf32>
    %y = graph.div %e, %sb : tensor<4x8xf32>
    fusion.yield %y : tensor<4x8xf32>
  }
  func.return %r : tensor<4x8xf32>
}

// -----

// A GEMM with a scale epilogue and a row softmax: the GEMM row accumulates in a
// row scratch inside the band, the epilogue reads it.
// CHECK-LABEL: func.func @scores
// CHECK: loop.band "fused_scores" upper [2, 4]
// CHECK: %[[C:.*]] = memref.alloca() {alignment = 64 : i64} : memref<6xf32>
// CHECK: loop.nest "fused_scores.gemm" syms(%{{.*}}, %{{.*}}) lower [0, 0] upper [5, 6] iterators ["reduction", "parallel"]
// CHECK-SAME: maps [affine_map<(d0, d1)[s0, s1] -> (s0, s1, d0)>, affine_map<(d0, d1)[s0, s1] -> (s0, d0, d1)>, affine_map<(d0, d1)[s0, s1] -> (d1)>]
// CHECK: loop.nest "fused_scores.1_reduce_max"
func.func @scores(%q: tensor<2x4x5xf32>, %k: tensor<2x5x6xf32>) -> tensor<2x4x6xf32> {
  %r = fusion.group "fused_scores" kind = "gemm" (%q, %k) : (tensor<2x4x5xf32>, tensor<2x5x6xf32>) -> tensor<2x4x6xf32> {
  ^bb0(%a: tensor<2x4x5xf32>, %b: tensor<2x5x6xf32>):
    %s = graph.batch_matmul %a, %b : (tensor<2x4x5xf32>, tensor<2x5x6xf32>) -> tensor<2x4x6xf32>
    %c = graph.constant dense<0.125> : tensor<2x4x6xf32>
    %t = graph.mul %s, %c : tensor<2x4x6xf32>
    %m = graph.reduce_max %t {axes = array<i64: 2>, keepdims} : tensor<2x4x6xf32> -> tensor<2x4x1xf32>
    %mb = graph.broadcast %m {dims = array<i64: 0, 1, 2>} : tensor<2x4x1xf32> -> tensor<2x4x6xf32>
    %d = graph.sub %t, %mb : tensor<2x4x6xf32>
    fusion.yield %d : tensor<2x4x6xf32>
  }
  func.return %r : tensor<2x4x6xf32>
}

// -----

// Column reductions accumulate straight into the outputs, columns in parallel.
// CHECK-LABEL: func.func @column
// CHECK: loop.nest "fused_tanh_reduce_sum.init" lower [0] upper [8]
// CHECK: loop.nest "fused_tanh_reduce_sum" lower [0, 0] upper [4, 8] iterators ["reduction", "parallel"]
// CHECK-SAME: affine_map<(d0, d1) -> (d1)>
func.func @column(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  %r = fusion.group "fused_tanh_reduce_sum" kind = "reduce" (%x) : (tensor<4x8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %t = graph.tanh %a : tensor<4x8xf32>
    %s = graph.reduce_sum %t {axes = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
    fusion.yield %s : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}

// -----

// A long float row sum (2048+ elements) adds blocks of 256 into per-row partials,
// the last block partial (2100 = 8 * 256 + 52), then combines the partials: error
// like a pairwise sum's. Unstitched, the same blocks over a partials buffer.
// CHECK-LABEL: func.func @long_row
// CHECK: loop.band "fused_row" upper [2]
// CHECK: %[[P:.*]] = memref.alloca() {alignment = 64 : i64} : memref<9xf32>
// CHECK: loop.nest "fused_row.partial_init" syms(%{{.*}}) lower [0] upper [9]
// CHECK: loop.nest "fused_row.0_reduce_sum" syms(%{{.*}}) lower [0, affine_map<(d0)[s0] -> ((d0 * 256))>] upper [9, affine_map<(d0)[s0] -> (((d0 * 256) + 256), 2100)>] iterators ["reduction", "reduction"]
// CHECK-SAME: maps [affine_map<(d0, d1)[s0] -> (s0, d1)>, affine_map<(d0, d1)[s0] -> (d0)>]
// CHECK: loop.nest "fused_row.partial_combine" syms(%{{.*}}) lower [0] upper [9] iterators ["reduction"] ins(%[[P]] : memref<9xf32>)
// UNSTITCHED-LABEL: func.func @long_row
// UNSTITCHED: loop.nest "fused_row.reduce_sum_blocks" lower [0, 0, affine_map<(d0, d1) -> ((d1 * 256))>] upper [2, 9, affine_map<(d0, d1) -> (((d1 * 256) + 256), 2100)>] iterators ["parallel", "parallel", "reduction"]
// UNSTITCHED: loop.nest "fused_row.reduce_sum" lower [0, 0] upper [2, 9] iterators ["parallel", "reduction"]
// UNSTITCHED: memref.dealloc
func.func @long_row(%x: tensor<2x2100xf32>) -> tensor<2xf32> {
  %r = fusion.group "fused_row" kind = "reduce" (%x) : (tensor<2x2100xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2x2100xf32>):
    %s = graph.reduce_sum %a {axes = array<i64: 1>} : tensor<2x2100xf32> -> tensor<2xf32>
    fusion.yield %s : tensor<2xf32>
  }
  func.return %r : tensor<2xf32>
}

// -----

// A shorter row sum is not blocked: LLVM's vector accumulators (64 lanes with
// AVX-512) each add a few elements already (a 1024-element row: 16), and blocked
// it was as accurate (1.03x numpy's error either way) and took 1.1x the time.
// CHECK-LABEL: func.func @short_row
// CHECK-NOT: partial
// CHECK: loop.nest "fused_row.0_reduce_sum" syms(%{{.*}}) lower [0] upper [1100] iterators ["reduction"]
// CHECK-NOT: partial
// CHECK: func.return
// UNSTITCHED-LABEL: func.func @short_row
// UNSTITCHED-NOT: blocks
// UNSTITCHED: func.return
func.func @short_row(%x: tensor<2x1100xf32>) -> tensor<2xf32> {
  %r = fusion.group "fused_row" kind = "reduce" (%x) : (tensor<2x1100xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2x1100xf32>):
    %s = graph.reduce_sum %a {axes = array<i64: 1>} : tensor<2x1100xf32> -> tensor<2xf32>
    fusion.yield %s : tensor<2xf32>
  }
  func.return %r : tensor<2xf32>
}

// -----

// A tall column reduction: a band over row blocks sums each block into its own
// partial row, then one nest combines the partials in block order.
// CHECK-LABEL: func.func @tall_column
// CHECK: %[[P:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
// CHECK: loop.band "fused_col.blocks" upper [4]
// CHECK: loop.nest "fused_col.partial_init"
// CHECK: loop.nest "fused_col.blocks" syms(%{{.*}}) lower [0, 0] upper [affine_map<()[s0] -> (256, ((s0 * -256) + 1024))>, 8] iterators ["reduction", "parallel"]
// CHECK: loop.nest "fused_col.combine" lower [0, 0] upper [4, 8] iterators ["reduction", "parallel"] ins(%[[P]] : memref<4x8xf32>)
// CHECK: memref.dealloc %[[P]]
func.func @tall_column(%x: tensor<1024x8xf32>) -> tensor<8xf32> {
  %r = fusion.group "fused_col" kind = "reduce" (%x) : (tensor<1024x8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<1024x8xf32>):
    %t = graph.tanh %a : tensor<1024x8xf32>
    %s = graph.reduce_sum %t {axes = array<i64: 0>} : tensor<1024x8xf32> -> tensor<8xf32>
    fusion.yield %s : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}

// -----

// A pad inside a chain: wrapped read plus a bounds select, no intermediate buffer.
// CHECK-LABEL: func.func @padded
// CHECK-NOT: memref.alloc
// CHECK: loop.nest "fused_pad_exp" lower [0] upper [6]
// CHECK-SAME: affine_map<(d0) -> (((d0 + -1) mod 4))>
// CHECK: loop.index dim 0
// CHECK: arith.select
func.func @padded(%x: tensor<4xf32>) -> tensor<6xf32> {
  %r = fusion.group "fused_pad_exp" kind = "loop" (%x) : (tensor<4xf32>) -> tensor<6xf32> {
  ^bb0(%a: tensor<4xf32>):
    %p = graph.pad %a {low = array<i64: 1>, high = array<i64: 1>, value = 0.0 : f32} : tensor<4xf32> -> tensor<6xf32>
    %e = graph.exp %p : tensor<6xf32>
    fusion.yield %e : tensor<6xf32>
  }
  func.return %r : tensor<6xf32>
}

// -----

// Not stitched (row and column reductions together): lowered op by op, and the
// function says why.
// CHECK-LABEL: func.func @mixed
// CHECK-SAME: mlfuse.unstitched = ["fused_mixed: 'graph.reduce_sum' does not reduce only the last axis of a rank >= 2 tensor"]
// CHECK-COUNT-2: loop.nest "fused_mixed.init_sum"
func.func @mixed(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %r:2 = fusion.group "fused_mixed" kind = "reduce" (%x) : (tensor<4x8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %rows = graph.reduce_sum %a {axes = array<i64: 1>} : tensor<4x8xf32> -> tensor<4xf32>
    %cols = graph.reduce_sum %a {axes = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
    fusion.yield %rows, %cols : tensor<4xf32>, tensor<8xf32>
  }
  func.return %r#0, %r#1 : tensor<4xf32>, tensor<8xf32>
}
