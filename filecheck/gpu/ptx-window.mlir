// REQUIRES: ptxas
// RUN: mlfuse-opt %s -p gpu-map-kernels -t 'ptx{verify=true}' | filecheck %s
// RUN: mlfuse-opt %s -p gpu-map-kernels -t 'ptx{arch=sm_80 verify=true}' | filecheck %s --check-prefix=SM80

// A padded conv with bias, inference batch norm and relu, as one group: one .entry that
// ptxas assembles without spills.
// CHECK:      .visible .entry conv_bn_relu(
// CHECK:      .maxntid 256, 1, 1
// CHECK:      fma.rn.f32
// CHECK:      // ptxas sm_90 conv_bn_relu: {{[0-9]+}} registers, 0 bytes smem, 0 bytes spill stores, 0 bytes spill loads
// CHECK-NOT:  .entry
// SM80:       // ptxas sm_80 conv_bn_relu: {{[0-9]+}} registers, 0 bytes smem, 0 bytes spill stores, 0 bytes spill loads
func.func @main(%x: tensor<1x16x14x14xf32>, %w: tensor<32x16x3x3xf32>, %s: tensor<32xf32>, %t: tensor<32xf32>) -> tensor<1x32x14x14xf32> {
  %r = fusion.group "conv_bn_relu" kind = "stitch" (%x, %w, %s, %t) : (tensor<1x16x14x14xf32>, tensor<32x16x3x3xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<1x32x14x14xf32> {
  ^bb0(%a: tensor<1x16x14x14xf32>, %k: tensor<32x16x3x3xf32>, %sc: tensor<32xf32>, %sh: tensor<32xf32>):
    %p = graph.pad %a {low = array<i64: 0, 0, 1, 1>, high = array<i64: 0, 0, 1, 1>, value = 0.0 : f32} : tensor<1x16x14x14xf32> -> tensor<1x16x16x16xf32>
    %y = graph.conv2d %p, %k : (tensor<1x16x16x16xf32>, tensor<32x16x3x3xf32>) -> tensor<1x32x14x14xf32>
    %sb = graph.broadcast %sc {dims = array<i64: 1>} : tensor<32xf32> -> tensor<1x32x14x14xf32>
    %tb = graph.broadcast %sh {dims = array<i64: 1>} : tensor<32xf32> -> tensor<1x32x14x14xf32>
    %n = graph.mul %y, %sb : tensor<1x32x14x14xf32>
    %m = graph.add %n, %tb : tensor<1x32x14x14xf32>
    %relu = graph.relu %m : tensor<1x32x14x14xf32>
    fusion.yield %relu : tensor<1x32x14x14xf32>
  }
  func.return %r : tensor<1x32x14x14xf32>
}
