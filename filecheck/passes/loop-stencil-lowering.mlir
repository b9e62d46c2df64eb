// RUN: mlfuse-opt %s --split-input-file -p 'convert-graph-to-loop{conv=direct}' | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p convert-graph-to-loop | filecheck %s --check-prefix=GEMM
// RUN: not mlfuse-opt %s -p 'convert-graph-to-loop{conv=winograd}' 2>&1 | filecheck %s --check-prefix=BAD

// The stencil ops' lowering in convert-graph-to-loop (mlfuse/conversion/graph_to_loop.py,
// lower_conv2d / lower_pool2d): padding is a pad nest pair into a padded intermediate
// (fill, then copy of the interior), and the window nest reads it with shifted
// affine accesses, no guards. With conv=direct a convolution iterates
// (n, o, oh, c, kh, kw, ow): the window position along W is innermost and unit-stride.
// By default (conv=gemm) a dense conv is patches @ weights: an im2col nest, the weights
// transposed to (c, kh, kw) x o, a product, and an unpack into NCHW.

// BAD: error: convert-graph-to-loop: conv='winograd': expected one of gemm, direct

// GEMM-LABEL: func.func @conv
// GEMM: loop.nest "pad_copy"
// GEMM: %[[PATCHES:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x3x6x2x3x3xf32>
// GEMM: loop.nest "conv_patches" lower [0, 0, 0, 0, 0, 0] upper [1, 3, 6, 2, 3, 3] {{.*}} outs(%[[PATCHES]] : memref<1x3x6x2x3x3xf32>) maps [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d3, ((d1 * 2) + d4), (d2 + d5))>
// GEMM: %[[A:.*]] = loop.view %[[PATCHES]] : memref<1x3x6x2x3x3xf32> to memref<18x18xf32>
// GEMM: loop.nest "conv_weights" lower [0, 0, 0, 0] upper [2, 3, 3, 4] {{.*}} maps [affine_map<(d0, d1, d2, d3) -> (d3, d0, d1, d2)>
// GEMM: loop.nest "conv_matmul" lower [0, 0, 0] upper [18, 18, 4] iterators ["parallel", "reduction", "parallel"] ins(%[[A]], %{{.*}} : memref<18x18xf32>, memref<18x4xf32>)
// GEMM: loop.nest "conv_unpack" lower [0, 0, 0, 0] upper [1, 4, 3, 6] {{.*}} maps [affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, d1)>
// GEMM-NOT: loop.nest "conv2d"

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

// Groups: output channel o reads input channels (o floordiv (O/G)) * C/G + c. A grouped
// conv stays one window nest with conv=gemm too.
// GEMM-LABEL: func.func @depthwise
// GEMM-NOT: conv_patches
// GEMM: loop.nest "conv2d" lower [0, 0, 0, 0, 0, 0, 0] upper [1, 8, 3, 1, 3, 3, 4]
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
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[MAX:.*]] = arith.maximumf %[[X]], %[[ACC]] fastmath<nsz> : f32
// CHECK-NEXT: loop.yield %[[MAX]] : f32
func.func @maxpool(%x: tensor<1x2x5x6xf32>) -> tensor<1x2x3x3xf32> {
  %y = graph.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 0>} : tensor<1x2x5x6xf32> -> tensor<1x2x3x3xf32>
  func.return %y : tensor<1x2x3x3xf32>
}

// -----

// Output rows wider than graph_to_loop.ROW_IN_REGISTERS (16): the taps run innermost,
// (n, c, oh, ow, kh, kw), so the max of each output stays in registers.
// CHECK-LABEL: func.func @maxpool_wide_rows
// CHECK: loop.nest "pool_max" lower [0, 0, 0, 0, 0, 0] upper [1, 2, 2, 20, 2, 2] iterators ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"] {{.*}} maps [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, ((d2 * 2) + d4), ((d3 * 2) + d5))>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>]
func.func @maxpool_wide_rows(%x: tensor<1x2x4x40xf32>) -> tensor<1x2x2x20xf32> {
  %y = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<1x2x4x40xf32> -> tensor<1x2x2x20xf32>
  func.return %y : tensor<1x2x2x20xf32>
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

// -----

// A 3x3 conv over a 1x1 image: only the center tap reads the image, so the patches and
// the weights hold that tap alone. The constant weights are sliced and transposed at
// compile time into a new global; the original global, unread, is dropped.
// GEMM: "memref.global"() <{sym_name = "{{[^"]*}}", type = memref<2x3xf32>, initial_value = dense<{{\[}}[4.000000e+00, 2.200000e+01, 4.000000e+01], [1.300000e+01, 3.100000e+01, 4.900000e+01]]>
// GEMM-NOT: memref<3x2x3x3xf32>
// GEMM-LABEL: func.func @one_pixel
// GEMM: loop.nest "conv_patches" lower [0, 0, 0, 0, 0, 0] upper [1, 1, 1, 2, 1, 1] {{.*}} maps [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d3, (d1 + (d4 + 1)), (d2 + (d5 + 1)))>
// GEMM: loop.nest "conv_matmul" lower [0, 0, 0] upper [1, 2, 3]
// CHECK-LABEL: func.func @one_pixel
// CHECK: loop.nest "conv2d" lower [0, 0, 0, 0, 0, 0, 0] upper [1, 3, 1, 2, 3, 3, 1]
func.func @one_pixel(%x: tensor<1x2x1x1xf32>) -> tensor<1x3x1x1xf32> {
  %w = graph.constant dense<[[[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]], [[9.0, 10.0, 11.0], [12.0, 13.0, 14.0], [15.0, 16.0, 17.0]]], [[[18.0, 19.0, 20.0], [21.0, 22.0, 23.0], [24.0, 25.0, 26.0]], [[27.0, 28.0, 29.0], [30.0, 31.0, 32.0], [33.0, 34.0, 35.0]]], [[[36.0, 37.0, 38.0], [39.0, 40.0, 41.0], [42.0, 43.0, 44.0]], [[45.0, 46.0, 47.0], [48.0, 49.0, 50.0], [51.0, 52.0, 53.0]]]]> : tensor<3x2x3x3xf32>
  %y = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x2x1x1xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x1x1xf32>
  func.return %y : tensor<1x3x1x1xf32>
}

// -----

// A pointwise conv (1x1, stride 1, no padding) over one image with many pixels is
// w @ x in NCHW: its patches are its input, seen as (c, pixels); the product writes
// the output itself (no im2col, no unpack).
// GEMM-LABEL: func.func @pointwise
// GEMM-NOT: conv_patches
// GEMM-SAME: (%[[XA:[^:]*]]: memref<1x32x16x16xf32>, %[[WA:[^:]*]]: memref<64x32x1x1xf32>, %[[YA:[^:]*]]: memref<1x64x16x16xf32>)
// GEMM: %[[X:.*]] = loop.view %[[XA]] : memref<1x32x16x16xf32> to memref<1x32x256xf32>
// GEMM: %[[W:.*]] = loop.view %[[WA]] : memref<64x32x1x1xf32> to memref<1x64x32xf32>
// GEMM: %[[Y:.*]] = loop.view %[[YA]] : memref<1x64x16x16xf32> to memref<1x64x256xf32>
// GEMM: loop.gemm %[[W]], %[[X]] into %[[Y]]
// GEMM-NOT: conv_unpack
func.func @pointwise(%x: tensor<1x32x16x16xf32>, %w: tensor<64x32x1x1xf32>) -> tensor<1x64x16x16xf32> {
  %y = graph.conv2d %x, %w : (tensor<1x32x16x16xf32>, tensor<64x32x1x1xf32>) -> tensor<1x64x16x16xf32>
  func.return %y : tensor<1x64x16x16xf32>
}

// -----

// A 3x3 conv whose output has no more pixels than channels (a late CNN layer) is
// w @ patches too: the patches (c, kh, kw) x (oh, ow) of the padded input, which the
// GEMM kernel reads in place (stride 1: no im2col).
// GEMM-LABEL: func.func @late_layer
// GEMM-NOT: conv_patches
// GEMM: %[[W:.*]] = loop.view %{{.*}} : memref<128x32x3x3xf32> to memref<1x128x288xf32>
// GEMM: loop.gemm %[[W]], %{{.*}} into %{{.*}} {window = array<i64: 3, 3>} : memref<1x128x288xf32>, memref<1x32x10x10xf32>, memref<1x128x64xf32>
// GEMM-NOT: conv_unpack
func.func @late_layer(%x: tensor<1x32x8x8xf32>, %w: tensor<128x32x3x3xf32>) -> tensor<1x128x8x8xf32> {
  %y = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x32x8x8xf32>, tensor<128x32x3x3xf32>) -> tensor<1x128x8x8xf32>
  func.return %y : tensor<1x128x8x8xf32>
}

// -----

// A 3x3 conv with more output pixels than channels (an early CNN layer) is w @ patches
// as well: its epilogue then reads the product contiguously. At stride 2 the patches
// are copied out (im2col); at stride 1 the kernel reads them from the padded input.
// GEMM-LABEL: func.func @many_pixels
// GEMM: loop.nest "conv_patches" lower [0, 0, 0, 0, 0] upper [32, 3, 3, 8, 8]
// GEMM: loop.gemm %{{.*}}, %{{.*}} into %{{.*}} : memref<1x64x288xf32>, memref<1x288x64xf32>, memref<1x64x64xf32>
// GEMM-NOT: conv_unpack
// GEMM-NOT: conv_patches
// GEMM: loop.gemm %{{.*}}, %{{.*}} into %{{.*}} {window = array<i64: 3, 3>} : memref<1x64x288xf32>, memref<1x32x18x18xf32>, memref<1x64x256xf32>
// GEMM-NOT: conv_unpack
func.func @many_pixels(%x: tensor<1x32x16x16xf32>, %w: tensor<64x32x3x3xf32>) -> (tensor<1x64x8x8xf32>, tensor<1x64x16x16xf32>) {
  %s = graph.conv2d %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x32x16x16xf32>, tensor<64x32x3x3xf32>) -> tensor<1x64x8x8xf32>
  %y = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x32x16x16xf32>, tensor<64x32x3x3xf32>) -> tensor<1x64x16x16xf32>
  func.return %s, %y : tensor<1x64x8x8xf32>, tensor<1x64x16x16xf32>
}

// -----

// Not w @ patches: two images (the product has one batch of weights), or an output of
// fewer pixels than NCHW_PRODUCT_MIN_PIXELS (the kernel's vectors run along them).
// GEMM-LABEL: func.func @two_images
// GEMM: loop.nest "conv_patches"
// GEMM: loop.nest "conv_unpack"
func.func @two_images(%x: tensor<2x32x16x16xf32>, %w: tensor<64x32x1x1xf32>) -> tensor<2x64x16x16xf32> {
  %y = graph.conv2d %x, %w : (tensor<2x32x16x16xf32>, tensor<64x32x1x1xf32>) -> tensor<2x64x16x16xf32>
  func.return %y : tensor<2x64x16x16xf32>
}
// GEMM-LABEL: func.func @few_pixels
// GEMM: loop.nest "conv_patches" lower [0, 0, 0, 0, 0, 0] upper [1, 7, 7, 64, 3, 3]
// GEMM: loop.nest "conv_unpack"
func.func @few_pixels(%x: tensor<1x64x7x7xf32>, %w: tensor<256x64x3x3xf32>) -> tensor<1x256x7x7xf32> {
  %y = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x64x7x7xf32>, tensor<256x64x3x3xf32>) -> tensor<1x256x7x7xf32>
  func.return %y : tensor<1x256x7x7xf32>
}
// A pointwise conv's w @ patches reads its input as the patches: from
// POINTWISE_NCHW_PRODUCT_MIN_PIXELS (32) on, not only from 50 (7 x 7 here; 5 x 5 below).
// GEMM-LABEL: func.func @pointwise_few_pixels
// GEMM-NOT: conv_patches
// GEMM: loop.gemm %{{.*}}, %{{.*}} into %{{.*}} : memref<1x256x64xf32>, memref<1x64x49xf32>, memref<1x256x49xf32>
// GEMM-NOT: conv_unpack
func.func @pointwise_few_pixels(%x: tensor<1x64x7x7xf32>, %w: tensor<256x64x1x1xf32>) -> tensor<1x256x7x7xf32> {
  %y = graph.conv2d %x, %w : (tensor<1x64x7x7xf32>, tensor<256x64x1x1xf32>) -> tensor<1x256x7x7xf32>
  func.return %y : tensor<1x256x7x7xf32>
}
// GEMM-LABEL: func.func @pointwise_fewer_pixels
// GEMM: loop.nest "conv_patches"
// GEMM: loop.nest "conv_unpack"
func.func @pointwise_fewer_pixels(%x: tensor<1x64x5x5xf32>, %w: tensor<256x64x1x1xf32>) -> tensor<1x256x5x5xf32> {
  %y = graph.conv2d %x, %w : (tensor<1x64x5x5xf32>, tensor<256x64x1x1xf32>) -> tensor<1x256x5x5xf32>
  func.return %y : tensor<1x256x5x5xf32>
}

// -----

// Not a product: few output channels over a large image whose patches would be copied
// out (dilated: no window in place), which the direct window nest runs as fast (see
// conv_as_matmul).
// GEMM-LABEL: func.func @few_channels_large_image_dilated
// GEMM-NOT: conv_patches
// GEMM: loop.nest "conv2d" lower [0, 0, 0, 0, 0, 0, 0] upper [1, 16, 224, 16, 3, 3, 224]
func.func @few_channels_large_image_dilated(%x: tensor<1x16x224x224xf32>, %w: tensor<16x16x3x3xf32>) -> tensor<1x16x224x224xf32> {
  %y = graph.conv2d %x, %w {pads = array<i64: 2, 2, 2, 2>, dilations = array<i64: 2, 2>} : (tensor<1x16x224x224xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x224x224xf32>
  func.return %y : tensor<1x16x224x224xf32>
}

// -----

// A product: at stride 2 over rows of 112 the patches are read in place at the
// window's strides (a 4x faster conv than the direct nest, one thread).
// GEMM-LABEL: func.func @few_channels_large_image_strided
// GEMM-NOT: conv_patches
// GEMM: loop.gemm %{{.*}}, %{{.*}} into %{{.*}} {window = array<i64: 3, 3, 2, 2>} : memref<1x16x144xf32>, memref<1x16x226x226xf32>, memref<1x16x12544xf32>
// GEMM-NOT: loop.nest "conv2d"
func.func @few_channels_large_image_strided(%x: tensor<1x16x224x224xf32>, %w: tensor<16x16x3x3xf32>) -> tensor<1x16x112x112xf32> {
  %y = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x16x224x224xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x112x112xf32>
  func.return %y : tensor<1x16x112x112xf32>
}

// -----

// A product after all: at stride 1 the patches are read in place (no copy), so few
// output channels do not matter.
// GEMM-LABEL: func.func @few_channels_large_image
// GEMM-NOT: conv_patches
// GEMM: loop.gemm %{{.*}}, %{{.*}} into %{{.*}} {window = array<i64: 3, 3>} : memref<1x16x144xf32>, memref<1x16x114x114xf32>, memref<1x16x12544xf32>
// GEMM-NOT: loop.nest "conv2d"
func.func @few_channels_large_image(%x: tensor<1x16x112x112xf32>, %w: tensor<16x16x3x3xf32>) -> tensor<1x16x112x112xf32> {
  %y = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x16x112x112xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x112x112xf32>
  func.return %y : tensor<1x16x112x112xf32>
}
