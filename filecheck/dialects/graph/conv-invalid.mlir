// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier errors of graph.conv2d, graph.max_pool2d and graph.avg_pool2d, one per case.

func.func @conv_rank(%x: tensor<3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.conv2d' input must have rank 4 (NCHW), got 3x8x8
  %y = graph.conv2d %x, %w : (tensor<3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_int(%x: tensor<1x3x8x8xi32>, %w: tensor<4x3x3x3xi32>) -> tensor<1x4x6x6xi32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.conv2d' expects a floating-point input, got element type i32
  %y = graph.conv2d %x, %w : (tensor<1x3x8x8xi32>, tensor<4x3x3x3xi32>) -> tensor<1x4x6x6xi32>
  func.return %y : tensor<1x4x6x6xi32>
}

// -----

func.func @conv_mixed(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf16>) -> tensor<1x4x6x6xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.conv2d' element types differ: input f32, weight f16, result f32
  %y = graph.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf16>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.conv2d' weight 4x2x3x3 has 2 input channels per group, but the input has 3 channels in 1 group(s) (expected 3)
  %y = graph.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_groups(%x: tensor<1x6x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.conv2d' groups = 3 must divide both the 6 input channels and the 4 output channels
  %y = graph.conv2d %x, %w {groups = 3 : i64} : (tensor<1x6x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_zero_groups(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.conv2d' groups must be >= 1, got 0
  %y = graph.conv2d %x, %w {groups = 0 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_stride_count(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.conv2d' strides must have 2 entries, got [1, 1, 1]
  %y = graph.conv2d %x, %w {strides = array<i64: 1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_zero_stride(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.conv2d' strides must be >= 1, got [0, 1]
  %y = graph.conv2d %x, %w {strides = array<i64: 0, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_zero_dilation(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.conv2d' dilations must be >= 1, got [1, 0]
  %y = graph.conv2d %x, %w {dilations = array<i64: 1, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_negative_pad(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.conv2d' pads must be non-negative, got [0, -1, 0, 1]
  %y = graph.conv2d %x, %w {pads = array<i64: 0, -1, 0, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_too_small(%x: tensor<1x3x2x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x0x6xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.conv2d' window of 3x3 (dilations [1, 1]) does not fit the padded 2x8 input with pads [0, 0, 0, 0]
  %y = graph.conv2d %x, %w : (tensor<1x3x2x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x0x6xf32>
  func.return %y : tensor<1x4x0x6xf32>
}

// -----

func.func @conv_result(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.conv2d' must produce 1x4x6x6, got 1x4x8x8
  %y = graph.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// -----

func.func @pool_no_kernel(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: {{.*}}property 'kernel' expected
  %y = graph.max_pool2d %x : tensor<1x3x8x8xf32> -> tensor<1x3x8x8xf32>
  func.return %y : tensor<1x3x8x8xf32>
}

// -----

func.func @pool_kernel_count(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x6x6xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.max_pool2d' kernel must have 2 entries, got [3, 3, 3]
  %y = graph.max_pool2d %x {kernel = array<i64: 3, 3, 3>} : tensor<1x3x8x8xf32> -> tensor<1x3x6x6xf32>
  func.return %y : tensor<1x3x6x6xf32>
}

// -----

func.func @pool_zero_kernel(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x9x8xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.avg_pool2d' kernel sizes must be >= 1, got [0, 1]
  %y = graph.avg_pool2d %x {kernel = array<i64: 0, 1>} : tensor<1x3x8x8xf32> -> tensor<1x3x9x8xf32>
  func.return %y : tensor<1x3x9x8xf32>
}

// -----

func.func @pool_pad_too_big(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x11x7xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.max_pool2d' pads [2, 0, 2, 0] must be smaller than the window extent [2, 2]
  %y = graph.max_pool2d %x {kernel = array<i64: 2, 2>, pads = array<i64: 2, 0, 2, 0>} : tensor<1x3x8x8xf32> -> tensor<1x3x11x7xf32>
  func.return %y : tensor<1x3x11x7xf32>
}

// -----

func.func @pool_element_type(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf16> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.max_pool2d' changes the element type from f32 to f16
  %y = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf16>
  func.return %y : tensor<1x3x4x4xf16>
}

// -----

func.func @max_pool_bool(%x: tensor<1x3x8x8xi1>) -> tensor<1x3x4x4xi1> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.max_pool2d' does not accept i1 tensors
  %y = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<1x3x8x8xi1> -> tensor<1x3x4x4xi1>
  func.return %y : tensor<1x3x4x4xi1>
}

// -----

func.func @avg_pool_int(%x: tensor<1x3x8x8xi32>) -> tensor<1x3x4x4xi32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.avg_pool2d' expects a floating-point tensor, got element type i32
  %y = graph.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<1x3x8x8xi32> -> tensor<1x3x4x4xi32>
  func.return %y : tensor<1x3x4x4xi32>
}

// -----

func.func @avg_pool_result(%x: tensor<2x3x8x8xf32>) -> tensor<2x3x3x3xf32> {
  // CHECK: conv-invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.avg_pool2d' must produce 2x3x4x4, got 2x3x3x3
  %y = graph.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, count_include_pad} : tensor<2x3x8x8xf32> -> tensor<2x3x3x3xf32>
  func.return %y : tensor<2x3x3x3xf32>
}
