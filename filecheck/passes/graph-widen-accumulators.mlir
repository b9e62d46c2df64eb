// RUN: mlfuse-opt %s -p graph-widen-accumulators | filecheck %s
// RUN: not mlfuse-opt %s -p "graph-widen-accumulators{type=f64}" 2>&1 | filecheck %s --check-prefix=BADOPT

// Ops that add up many terms (the Accumulates trait) on f16 / bf16 run on f32 copies
// of their operands and round their result once (mlfuse/widen_accumulators.py).

// BADOPT: error: invalid pass pipeline 'graph-widen-accumulators{type=f64}': Provided arguments ["type"] not found in expected arguments []

// CHECK-LABEL: func.func @matmul_f16
// CHECK-NEXT:    %[[A:.*]] = graph.cast %a : tensor<4x64xf16> -> tensor<4x64xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.cast %b : tensor<64x8xf16> -> tensor<64x8xf32>
// CHECK-NEXT:    %[[P:.*]] = graph.matmul %[[A]], %[[B]] : (tensor<4x64xf32>, tensor<64x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.cast %[[P]] : tensor<4x8xf32> -> tensor<4x8xf16>
// CHECK-NEXT:    func.return %[[Y]] : tensor<4x8xf16>
func.func @matmul_f16(%a: tensor<4x64xf16>, %b: tensor<64x8xf16>) -> tensor<4x8xf16> {
  %y = graph.matmul %a, %b : (tensor<4x64xf16>, tensor<64x8xf16>) -> tensor<4x8xf16>
  func.return %y : tensor<4x8xf16>
}

// CHECK-LABEL: func.func @sum_and_mean_bf16
// CHECK-NEXT:    %[[X1:.*]] = graph.cast %x : tensor<4x64xbf16> -> tensor<4x64xf32>
// CHECK-NEXT:    %[[S:.*]] = graph.reduce_sum %[[X1]] {axes = array<i64: 1>} : tensor<4x64xf32> -> tensor<4xf32>
// CHECK-NEXT:    %[[S16:.*]] = graph.cast %[[S]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK-NEXT:    %[[X2:.*]] = graph.cast %x : tensor<4x64xbf16> -> tensor<4x64xf32>
// CHECK-NEXT:    %[[M:.*]] = graph.reduce_mean %[[X2]] {axes = array<i64: 0>} : tensor<4x64xf32> -> tensor<64xf32>
// CHECK-NEXT:    %[[M16:.*]] = graph.cast %[[M]] : tensor<64xf32> -> tensor<64xbf16>
// CHECK-NEXT:    func.return %[[S16]], %[[M16]]
func.func @sum_and_mean_bf16(%x: tensor<4x64xbf16>) -> (tensor<4xbf16>, tensor<64xbf16>) {
  %s = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<4x64xbf16> -> tensor<4xbf16>
  %m = graph.reduce_mean %x {axes = array<i64: 0>} : tensor<4x64xbf16> -> tensor<64xbf16>
  func.return %s, %m : tensor<4xbf16>, tensor<64xbf16>
}

// CHECK-LABEL: func.func @conv_and_avg_pool_f16
// CHECK-NEXT:    %[[X:.*]] = graph.cast %x : tensor<1x3x8x8xf16> -> tensor<1x3x8x8xf32>
// CHECK-NEXT:    %[[W:.*]] = graph.cast %w : tensor<4x3x3x3xf16> -> tensor<4x3x3x3xf32>
// CHECK-NEXT:    %[[C:.*]] = graph.conv2d %[[X]], %[[W]] {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
// CHECK-NEXT:    %[[C16:.*]] = graph.cast %[[C]] : tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf16>
// CHECK-NEXT:    %[[C32:.*]] = graph.cast %[[C16]] : tensor<1x4x8x8xf16> -> tensor<1x4x8x8xf32>
// CHECK-NEXT:    %[[P:.*]] = graph.avg_pool2d %[[C32]] {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
// CHECK-NEXT:    %[[P16:.*]] = graph.cast %[[P]] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf16>
// CHECK-NEXT:    func.return %[[P16]]
func.func @conv_and_avg_pool_f16(%x: tensor<1x3x8x8xf16>, %w: tensor<4x3x3x3xf16>) -> tensor<1x4x4x4xf16> {
  %c = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xf16>, tensor<4x3x3x3xf16>) -> tensor<1x4x8x8xf16>
  %p = graph.avg_pool2d %c {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<1x4x8x8xf16> -> tensor<1x4x4x4xf16>
  func.return %p : tensor<1x4x4x4xf16>
}

// Not transformed: f32 and f64 accumulations, integer sums, ops that only pick an
// element (max, min, max pool) and elementwise ops.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     graph.cast
// CHECK:         func.return
func.func @left_alone(%a: tensor<4x64xf32>, %b: tensor<64x8xf32>, %i: tensor<4x64xi32>, %h: tensor<4x64xf16>, %d: tensor<4x64xf64>,
                      %img: tensor<1x3x8x8xf16>) -> (tensor<4x8xf32>, tensor<4xi32>, tensor<4xf16>, tensor<4x64xf16>, tensor<4xf64>, tensor<1x3x4x4xf16>) {
  %m = graph.matmul %a, %b : (tensor<4x64xf32>, tensor<64x8xf32>) -> tensor<4x8xf32>
  %s = graph.reduce_sum %i {axes = array<i64: 1>} : tensor<4x64xi32> -> tensor<4xi32>
  %x = graph.reduce_max %h {axes = array<i64: 1>} : tensor<4x64xf16> -> tensor<4xf16>
  %e = graph.add %h, %h : tensor<4x64xf16>
  %sd = graph.reduce_sum %d {axes = array<i64: 1>} : tensor<4x64xf64> -> tensor<4xf64>
  %p = graph.max_pool2d %img {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<1x3x8x8xf16> -> tensor<1x3x4x4xf16>
  func.return %m, %s, %x, %e, %sd, %p : tensor<4x8xf32>, tensor<4xi32>, tensor<4xf16>, tensor<4x64xf16>, tensor<4xf64>, tensor<1x3x4x4xf16>
}
