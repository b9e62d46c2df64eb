// RUN: mlfuse-opt %s --split-input-file -p "canonicalize,cse,fusion-plan{target=cpu summary=false}" | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p "canonicalize,cse,fusion-plan{target=cpu summary=false},convert-graph-to-loop{conv=direct},loop-startup-fuse{scope=group},loop-tile{fusible-only=true scope=group},loop-post-tile-fuse{scope=group},loop-storage-reduce" | filecheck %s --check-prefix=LOOP
// One pipeline for convs and LayerNorms: the conv is its own window group, lowered by
// post-tiling fusion (a tile band over its output channels, the conv fused into it);
// the LayerNorm over channels (after the NHWC transpose) is row-stitched.
// CHECK-LABEL: func.func @conv_ln
// CHECK: fusion.group "conv2d" kind = "single"
// CHECK: fusion.group "fused_relu_transpose_reduce_mean_{{.*}}" kind = "stitch"
// LOOP-LABEL: func.func @conv_ln
// LOOP: loop.band "conv2d.conv2d.tiles"
// LOOP-NEXT: ^
// LOOP: loop.nest "conv2d.conv2d" syms
// LOOP: loop.band "fused_relu_transpose_reduce_mean_{{.*}}" upper [1, 6, 6]
// LOOP: memref.alloca() {alignment = 64 : i64} : memref<1xf32>
builtin.module {
  func.func @conv_ln(%x: tensor<1x8x6x6xf32>, %w: tensor<8x8x3x3xf32>, %g: tensor<8xf32>) -> tensor<1x6x6x8xf32> {
    %0 = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x8x6x6xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x6x6xf32>
    %1 = graph.relu %0 : tensor<1x8x6x6xf32>
    %2 = graph.transpose %1 {perm = array<i64: 0, 2, 3, 1>} : tensor<1x8x6x6xf32> -> tensor<1x6x6x8xf32>
    %3 = graph.reduce_mean %2 {axes = array<i64: 3>, keepdims} : tensor<1x6x6x8xf32> -> tensor<1x6x6x1xf32>
    %4 = graph.broadcast %3 {dims = array<i64: 0, 1, 2, 3>} : tensor<1x6x6x1xf32> -> tensor<1x6x6x8xf32>
    %5 = graph.sub %2, %4 : tensor<1x6x6x8xf32>
    %6 = graph.mul %5, %5 : tensor<1x6x6x8xf32>
    %7 = graph.reduce_mean %6 {axes = array<i64: 3>, keepdims} : tensor<1x6x6x8xf32> -> tensor<1x6x6x1xf32>
    %8 = graph.constant dense<1.000000e-05> : tensor<f32>
    %9 = graph.broadcast %8 {dims = array<i64>} : tensor<f32> -> tensor<1x6x6x1xf32>
    %10 = graph.add %7, %9 : tensor<1x6x6x1xf32>
    %11 = graph.rsqrt %10 : tensor<1x6x6x1xf32>
    %12 = graph.broadcast %11 {dims = array<i64: 0, 1, 2, 3>} : tensor<1x6x6x1xf32> -> tensor<1x6x6x8xf32>
    %13 = graph.mul %5, %12 : tensor<1x6x6x8xf32>
    %14 = graph.broadcast %g {dims = array<i64: 3>} : tensor<8xf32> -> tensor<1x6x6x8xf32>
    %15 = graph.mul %13, %14 : tensor<1x6x6x8xf32>
    func.return %15 : tensor<1x6x6x8xf32>
  }
}

// -----

// Not fused: the conv output is read in two layouts (NCHW by relu, NHWC by a transpose);
// a window group takes only per-element consumers of a window result.
// CHECK-LABEL: func.func @two_layouts
// CHECK: fusion.group "conv2d" kind = "single"
// CHECK: fusion.group "fused_relu_transpose" kind = "loop"
builtin.module {
  func.func @two_layouts(%x: tensor<1x8x6x6xf32>, %w: tensor<8x8x3x3xf32>) -> (tensor<1x8x6x6xf32>, tensor<1x6x6x8xf32>) {
    %0 = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x8x6x6xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x6x6xf32>
    %1 = graph.relu %0 : tensor<1x8x6x6xf32>
    %2 = graph.transpose %0 {perm = array<i64: 0, 2, 3, 1>} : tensor<1x8x6x6xf32> -> tensor<1x6x6x8xf32>
    func.return %1, %2 : tensor<1x8x6x6xf32>, tensor<1x6x6x8xf32>
  }
}

// -----

// Not fused: three chained 7x7 convs would recompute their halo (6 on each side of a
// 16-wide tile per conv after them) more than max_window_recompute (2x): one window
// group per conv, each with its ReLU epilogue.
// CHECK-LABEL: func.func @halo_chain
// CHECK: fusion.group "fused_conv2d_relu" kind = "window"
// CHECK: fusion.group "fused_conv2d_relu_1" kind = "window"
// CHECK: fusion.group "fused_conv2d_relu_2" kind = "window"
builtin.module {
  func.func @halo_chain(%x: tensor<1x4x40x40xf32>, %w: tensor<4x4x7x7xf32>) -> tensor<1x4x40x40xf32> {
    %0 = graph.conv2d %x, %w {pads = array<i64: 3, 3, 3, 3>} : (tensor<1x4x40x40xf32>, tensor<4x4x7x7xf32>) -> tensor<1x4x40x40xf32>
    %1 = graph.relu %0 : tensor<1x4x40x40xf32>
    %2 = graph.conv2d %1, %w {pads = array<i64: 3, 3, 3, 3>} : (tensor<1x4x40x40xf32>, tensor<4x4x7x7xf32>) -> tensor<1x4x40x40xf32>
    %3 = graph.relu %2 : tensor<1x4x40x40xf32>
    %4 = graph.conv2d %3, %w {pads = array<i64: 3, 3, 3, 3>} : (tensor<1x4x40x40xf32>, tensor<4x4x7x7xf32>) -> tensor<1x4x40x40xf32>
    %5 = graph.relu %4 : tensor<1x4x40x40xf32>
    func.return %5 : tensor<1x4x40x40xf32>
  }
}
