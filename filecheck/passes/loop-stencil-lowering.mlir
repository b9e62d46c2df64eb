// RUN: mlfuse-opt %s --split-input-file -p convert-graph-to-loop | filecheck %s

// The stencil ops' lowering in convert-graph-to-loop (mlfuse/conversion/graph_to_loop.py,
// lower_conv2d / lower_pool2d): padding is a pad nest pair into a padded intermediate
// (fill, then copy of the interior), and the window nest reads it with shifted
// affine accesses, no guards. A convolution iterates (n, o, oh, c, kh, kw, ow): the
// window position along W is innermost and unit-stride.

// CHECK-LABEL: func.func @conv
// CHECK: loop.nest "conv_init" lower [0, 0, 0, 0] upper [1, 4, 3, 6]
// CHECK: %[[P:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x2x7x8xf32>
// CHECK: loop.nest "pad_fill" lower [0, 0, 0, 0] upper [1, 2, 7, 8] {{.*}} outs(%[[P]] : memref<1x2x7x8xf32>)
// CHECK: loop.nest "pad_copy" lower [0, 0, 0, 0] upper [1, 2, 5, 6] {{.*}} outs(%[[P]] : memref<1x2x7x8xf32>) maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 + 1), (d3 + 1))>]
// CHECK: loop.nest "conv2d" lower [0, 0, 0, 0, 0, 0, 0] upper [1, 4, 3, 2, 3, 3, 6] iterators ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "parallel"] ins(%[[P]], %{{.*}} : memref<1x2x7x8xf32>, memref<4x2x3x3xf32>) outs(%{{.*}} : memref<1x4x3x6xf32>) maps [affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d3, ((d2 * 2) + d4), (d6 + d5))>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d3, d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d6)>]
// CHECK: arith.mulf
// CHECK: arith.addf
func.func @conv(%x: tensor<1x2x5x6xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x3x6xf32> {
  %y = graph.conv2d %x, %w {strides = array<i64: 2, 1>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x2x5x6xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x6xf32>
  func.return %y : tensor<1x4x3x6xf32>
}

// -----

// Groups: output channel o reads input channels (o floordiv (O/G)) * C/G + c.
// CHECK-LABEL: func.func @depthwise
// CHECK: loop.nest "conv2d" lower [0, 0, 0, 0, 0, 0, 0] upper [1, 8, 3, 1, 3, 3, 4] {{.*}} maps [affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, ((d1 floordiv 2) + d3), (d2 + d4), (d6 + d5))>,
func.func @depthwise(%x: tensor<1x4x5x6xf32>, %w: tensor<8x1x3x3xf32>) -> tensor<1x8x3x4xf32> {
  %y = graph.conv2d %x, %w {groups = 4 : i64} : (tensor<1x4x5x6xf32>, tensor<8x1x3x3xf32>) -> tensor<1x8x3x4xf32>
  func.return %y : tensor<1x8x3x4xf32>
}

// -----

// Max pooling pads with -inf, so padding never wins.
// CHECK-LABEL: func.func @maxpool
// CHECK: loop.nest "pool_init_max"
// CHECK-NEXT: ^
// CHECK-NEXT: arith.constant 0xff800000 : f32
// CHECK: loop.nest "pad_fill" lower [0, 0, 0, 0] upper [1, 2, 7, 7]
// CHECK-NEXT: ^
// CHECK-NEXT: arith.constant 0xff800000 : f32
// CHECK: loop.nest "pool_max" lower [0, 0, 0, 0, 0, 0] upper [1, 2, 3, 3, 3, 3] iterators ["parallel", "parallel", "parallel", "reduction", "reduction", "parallel"] {{.*}} maps [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, ((d2 * 2) + d3), ((d5 * 2) + d4))>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d5)>]
// CHECK: arith.maximumf
func.func @maxpool(%x: tensor<1x2x5x6xf32>) -> tensor<1x2x3x3xf32> {
  %y = graph.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 0>} : tensor<1x2x5x6xf32> -> tensor<1x2x3x3xf32>
  func.return %y : tensor<1x2x3x3xf32>
}

// -----

// Average pooling without count_include_pad divides each window by its own count
// of input elements: a constant table over (oh, ow).
// CHECK: "memref.global"() <{sym_name = "__constant_0", type = memref<3x3xf32>, initial_value = dense<{{\[\[}}4.000000e+00, 6.000000e+00, 6.000000e+00], [6.000000e+00, 9.000000e+00, 9.000000e+00], [4.000000e+00, 6.000000e+00, 6.000000e+00]]> : tensor<3x3xf32>
// CHECK-LABEL: func.func @avgpool
// CHECK: loop.nest "pool_sum"
// CHECK: %[[C:.*]] = memref.get_global @__constant_0 : memref<3x3xf32>
// CHECK: loop.nest "avg_scale" {{.*}} ins(%{{.*}}, %[[C]] : memref<1x2x3x3xf32>, memref<3x3xf32>) {{.*}} maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]
// CHECK: arith.divf
func.func @avgpool(%x: tensor<1x2x5x6xf32>) -> tensor<1x2x3x3xf32> {
  %y = graph.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 0>} : tensor<1x2x5x6xf32> -> tensor<1x2x3x3xf32>
  func.return %y : tensor<1x2x3x3xf32>
}
