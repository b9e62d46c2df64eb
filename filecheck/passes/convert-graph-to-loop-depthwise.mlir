// RUN: mlfuse-opt %s --split-input-file -p 'convert-graph-to-loop{depthwise=true}' | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p convert-graph-to-loop | filecheck %s --check-prefix=NEST
// RUN: not mlfuse-opt %s -p 'convert-graph-to-loop{depthwise=maybe}' 2>&1 | filecheck %s --check-prefix=BAD

// convert-graph-to-loop{depthwise}: a depthwise conv of one image at stride 1 whose
// output rows are its input's length (the left and right pads make up the window), or at
// stride 2 whose output rows are as long as its input's even columns, and whose plane
// has at most 1024 positions is a product batched over its channels: the
// input seen as C images of one channel, read with its pads (`window_pads`, zeros not in
// memory), the taps as C rows, the output as C rows (mlfuse/backend/depthwise_kernels.py
// runs it). Without the option it is a window nest over a padded copy.
// BAD: depthwise=maybe

// CHECK-LABEL: func.func @depthwise_7x7
// CHECK-NOT:   loop.nest "pad_copy"
// CHECK:       %[[X:.*]] = loop.view %{{.*}} : memref<1x8x7x7xf32> to memref<8x1x7x7xf32>
// CHECK:       %[[W:.*]] = loop.view %{{.*}} : memref<8x1x3x3xf32> to memref<8x1x9xf32>
// CHECK:       %[[Y:.*]] = loop.view %{{.*}} : memref<1x8x7x7xf32> to memref<8x1x49xf32>
// CHECK:       loop.gemm %[[W]], %[[X]] into %[[Y]] {window = array<i64: 3, 3>, window_pads = array<i64: 1, 1, 1, 1>} : memref<8x1x9xf32>, memref<8x1x7x7xf32>, memref<8x1x49xf32>
// NEST-LABEL:  func.func @depthwise_7x7
// NEST:        loop.nest "pad_copy"
// NEST:        loop.nest "conv2d"
// NEST-NOT:    loop.gemm
func.func @depthwise_7x7(%x: tensor<1x8x7x7xf32>, %w: tensor<8x1x3x3xf32>) -> tensor<1x8x7x7xf32> {
  %y = graph.conv2d %x, %w {groups = 8 : i64, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x8x7x7xf32>, tensor<8x1x3x3xf32>) -> tensor<1x8x7x7xf32>
  func.return %y : tensor<1x8x7x7xf32>
}

// -----

// A 5x5 window over a 16x12 image (192 positions), pads 2; f64.
// CHECK-LABEL: func.func @depthwise_5x5_f64
// CHECK:       loop.gemm %{{.*}}, %{{.*}} into %{{.*}} {window = array<i64: 5, 5>, window_pads = array<i64: 2, 2, 2, 2>} : memref<3x1x25xf64>, memref<3x1x16x12xf64>, memref<3x1x192xf64>
func.func @depthwise_5x5_f64(%x: tensor<1x3x16x12xf64>, %w: tensor<3x1x5x5xf64>) -> tensor<1x3x16x12xf64> {
  %y = graph.conv2d %x, %w {groups = 3 : i64, pads = array<i64: 2, 2, 2, 2>} : (tensor<1x3x16x12xf64>, tensor<3x1x5x5xf64>) -> tensor<1x3x16x12xf64>
  func.return %y : tensor<1x3x16x12xf64>
}

// -----

// Stride 2: 14x14 -> 7x7 (TF's "SAME" pads, after), the strides on the window.
// CHECK-LABEL: func.func @depthwise_stride_2
// CHECK:       loop.gemm %{{.*}}, %{{.*}} into %{{.*}} {window = array<i64: 3, 3, 2, 2>, window_pads = array<i64: 0, 0, 1, 1>} : memref<4x1x9xf32>, memref<4x1x14x14xf32>, memref<4x1x49xf32>
func.func @depthwise_stride_2(%x: tensor<1x4x14x14xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x7x7xf32> {
  %y = graph.conv2d %x, %w {groups = 4 : i64, pads = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x4x14x14xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x7x7xf32>
  func.return %y : tensor<1x4x7x7xf32>
}

// -----

// Not transformed: a plane of 33x33 = 1089 positions (more than the kernels hold), a
// stride of 2 whose rows of 6 are shorter than the input's 7 even columns, two images, a valid (unpadded) conv whose rows shrink, a grouped conv of
// two channels a group, and a dense conv.
// CHECK-LABEL: func.func @not_depthwise_products
// CHECK-NOT:   window_pads
// CHECK:       func.return
func.func @not_depthwise_products(%a: tensor<1x4x33x33xf32>, %b: tensor<1x4x14x14xf32>, %c: tensor<2x4x7x7xf32>, %d: tensor<1x4x9x9xf32>,
                                  %e: tensor<1x4x7x7xf32>, %w: tensor<4x1x3x3xf32>, %g: tensor<2x2x3x3xf32>, %f: tensor<4x4x3x3xf32>)
    -> (tensor<1x4x33x33xf32>, tensor<1x4x7x6xf32>, tensor<2x4x7x7xf32>, tensor<1x4x7x7xf32>, tensor<1x2x7x7xf32>, tensor<1x4x7x7xf32>) {
  %large = graph.conv2d %a, %w {groups = 4 : i64, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x33x33xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x33x33xf32>
  %strided = graph.conv2d %b, %w {groups = 4 : i64, pads = array<i64: 1, 0, 1, 0>, strides = array<i64: 2, 2>} : (tensor<1x4x14x14xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x7x6xf32>
  %batched = graph.conv2d %c, %w {groups = 4 : i64, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x7x7xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x7x7xf32>
  %valid = graph.conv2d %d, %w {groups = 4 : i64} : (tensor<1x4x9x9xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x7x7xf32>
  %grouped = graph.conv2d %e, %g {groups = 2 : i64, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x7x7xf32>, tensor<2x2x3x3xf32>) -> tensor<1x2x7x7xf32>
  %dense = graph.conv2d %e, %f {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x7x7xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x7x7xf32>
  func.return %large, %strided, %batched, %valid, %grouped, %dense : tensor<1x4x33x33xf32>, tensor<1x4x7x6xf32>, tensor<2x4x7x7xf32>, tensor<1x4x7x7xf32>, tensor<1x2x7x7xf32>, tensor<1x4x7x7xf32>
}
