// RUN: %roundtrip | filecheck %s
// RUN: %generic-roundtrip | filecheck %s
// RUN: mlfuse-opt --split-input-file --print-op-generic %s | filecheck %s --check-prefix=GENERIC

// Round trips of the stencil ops graph.conv2d, graph.max_pool2d and graph.avg_pool2d.
// Window properties at their defaults (strides 1, pads 0, dilations 1, groups 1) are omitted.

// CHECK-LABEL: func.func @conv_plain
// CHECK:         %{{.*}} = graph.conv2d %{{.*}}, %{{.*}} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
// GENERIC-LABEL: "func.func"() <{sym_name = "conv_plain"
// GENERIC:       "graph.conv2d"(%{{.*}}, %{{.*}}) : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
func.func @conv_plain(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %y = graph.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

// Explicit defaults are dropped by the custom printer (the generic form shows them as given).
// CHECK-LABEL: func.func @conv_strided
// CHECK:         graph.conv2d %{{.*}}, %{{.*}} {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<2x16x4x4xf32>
// GENERIC-LABEL: "func.func"() <{sym_name = "conv_strided"
// GENERIC:       "graph.conv2d"(%{{.*}}, %{{.*}}) <{strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64}>
func.func @conv_strided(%x: tensor<2x3x8x8xf32>, %w: tensor<16x3x3x3xf32>) -> tensor<2x16x4x4xf32> {
  %y = graph.conv2d %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<2x16x4x4xf32>
  func.return %y : tensor<2x16x4x4xf32>
}

// -----

// Asymmetric pads and dilations: OH = (7 + 0 + 2 - 5) // 1 + 1 = 5, OW = (9 + 1 + 0 - 3) // 2 + 1 = 4.
// CHECK-LABEL: func.func @conv_dilated
// CHECK:         graph.conv2d %{{.*}}, %{{.*}} {strides = array<i64: 1, 2>, pads = array<i64: 0, 1, 2, 0>, dilations = array<i64: 2, 1>} : (tensor<1x2x7x9xf64>, tensor<3x2x3x3xf64>) -> tensor<1x3x5x4xf64>
func.func @conv_dilated(%x: tensor<1x2x7x9xf64>, %w: tensor<3x2x3x3xf64>) -> tensor<1x3x5x4xf64> {
  %y = graph.conv2d %x, %w {strides = array<i64: 1, 2>, pads = array<i64: 0, 1, 2, 0>, dilations = array<i64: 2, 1>} : (tensor<1x2x7x9xf64>, tensor<3x2x3x3xf64>) -> tensor<1x3x5x4xf64>
  func.return %y : tensor<1x3x5x4xf64>
}

// -----

// Depthwise (groups == C) and grouped convolutions.
// CHECK-LABEL: func.func @conv_groups
// CHECK:         graph.conv2d %{{.*}}, %{{.*}} {pads = array<i64: 1, 1, 1, 1>, groups = 8 : i64} : (tensor<1x8x6x6xf32>, tensor<8x1x3x3xf32>) -> tensor<1x8x6x6xf32>
// CHECK:         graph.conv2d %{{.*}}, %{{.*}} {groups = 2 : i64} : (tensor<1x8x6x6xf32>, tensor<6x4x1x1xf32>) -> tensor<1x6x6x6xf32>
// GENERIC-LABEL: "func.func"() <{sym_name = "conv_groups"
// GENERIC:       "graph.conv2d"(%{{.*}}, %{{.*}}) <{pads = array<i64: 1, 1, 1, 1>, groups = 8 : i64}>
func.func @conv_groups(%x: tensor<1x8x6x6xf32>, %dw: tensor<8x1x3x3xf32>, %gw: tensor<6x4x1x1xf32>) -> (tensor<1x8x6x6xf32>, tensor<1x6x6x6xf32>) {
  %d = graph.conv2d %x, %dw {pads = array<i64: 1, 1, 1, 1>, groups = 8 : i64} : (tensor<1x8x6x6xf32>, tensor<8x1x3x3xf32>) -> tensor<1x8x6x6xf32>
  %g = graph.conv2d %x, %gw {groups = 2 : i64} : (tensor<1x8x6x6xf32>, tensor<6x4x1x1xf32>) -> tensor<1x6x6x6xf32>
  func.return %d, %g : tensor<1x8x6x6xf32>, tensor<1x6x6x6xf32>
}

// -----

// CHECK-LABEL: func.func @max_pool
// CHECK:         graph.max_pool2d %{{.*}} {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>} : tensor<1x8x9x9xf32> -> tensor<1x8x4x4xf32>
// CHECK:         graph.max_pool2d %{{.*}} {kernel = array<i64: 2, 2>, pads = array<i64: 1, 0, 1, 0>, dilations = array<i64: 2, 2>} : tensor<1x8x9x9xf32> -> tensor<1x8x9x7xf32>
// CHECK:         graph.max_pool2d %{{.*}} {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<2x3x4x4xi32> -> tensor<2x3x2x2xi32>
// GENERIC-LABEL: "func.func"() <{sym_name = "max_pool"
// GENERIC:       "graph.max_pool2d"(%{{.*}}) <{kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>}> : (tensor<1x8x9x9xf32>) -> tensor<1x8x4x4xf32>
func.func @max_pool(%x: tensor<1x8x9x9xf32>, %i: tensor<2x3x4x4xi32>) -> (tensor<1x8x4x4xf32>, tensor<1x8x9x7xf32>, tensor<2x3x2x2xi32>) {
  %a = graph.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>} : tensor<1x8x9x9xf32> -> tensor<1x8x4x4xf32>
  %b = graph.max_pool2d %x {kernel = array<i64: 2, 2>, pads = array<i64: 1, 0, 1, 0>, dilations = array<i64: 2, 2>} : tensor<1x8x9x9xf32> -> tensor<1x8x9x7xf32>
  %c = graph.max_pool2d %i {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<2x3x4x4xi32> -> tensor<2x3x2x2xi32>
  func.return %a, %b, %c : tensor<1x8x4x4xf32>, tensor<1x8x9x7xf32>, tensor<2x3x2x2xi32>
}

// -----

// CHECK-LABEL: func.func @avg_pool
// CHECK:         graph.avg_pool2d %{{.*}} {kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>} : tensor<1x4x5x5xf32> -> tensor<1x4x5x5xf32>
// CHECK:         graph.avg_pool2d %{{.*}} {kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, count_include_pad} : tensor<1x4x5x5xf32> -> tensor<1x4x5x5xf32>
// CHECK:         graph.avg_pool2d %{{.*}} {kernel = array<i64: 5, 5>} : tensor<1x4x5x5xf16> -> tensor<1x4x1x1xf16>
// GENERIC-LABEL: "func.func"() <{sym_name = "avg_pool"
// GENERIC:       "graph.avg_pool2d"(%{{.*}}) <{kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, count_include_pad}>
func.func @avg_pool(%x: tensor<1x4x5x5xf32>, %h: tensor<1x4x5x5xf16>) -> (tensor<1x4x5x5xf32>, tensor<1x4x5x5xf32>, tensor<1x4x1x1xf16>) {
  %a = graph.avg_pool2d %x {kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>} : tensor<1x4x5x5xf32> -> tensor<1x4x5x5xf32>
  %b = graph.avg_pool2d %x {kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, count_include_pad} : tensor<1x4x5x5xf32> -> tensor<1x4x5x5xf32>
  %c = graph.avg_pool2d %h {kernel = array<i64: 5, 5>} : tensor<1x4x5x5xf16> -> tensor<1x4x1x1xf16>
  func.return %a, %b, %c : tensor<1x4x5x5xf32>, tensor<1x4x5x5xf32>, tensor<1x4x1x1xf16>
}
