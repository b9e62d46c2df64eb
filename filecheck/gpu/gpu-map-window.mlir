// RUN: mlfuse-opt %s --split-input-file -p gpu-map-kernels --verify-diagnostics | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p gpu-schedule | filecheck %s --check-prefix=SCHED

// A conv with bias, relu and a residual add is one direct window kernel: one thread per
// output element (grid-stride), the Cin x KH x KW reduction in a register (loads guarded
// on the padded axes by unsigned compares), the epilogue on the accumulated value, one store.
// SCHED:      gpu.schedule = {mapping = "window", block = [256 : i64, 1 : i64, 1 : i64], grid = [2 : i64, 1 : i64, 1 : i64], reason = "'graph.conv2d' over 4x3x3: {{.*}}", variant = "direct"}
// CHECK:      kernel.func @conv_bias_relu_add(%{{.*}}: memref<1x4x8x8xf32, 1 : i64>, %{{.*}}: memref<8x4x3x3xf32, 1 : i64>, %{{.*}}: memref<8xf32, 1 : i64>, %{{.*}}: memref<1x8x8x8xf32, 1 : i64>, %[[OUT:.*]]: memref<1x8x8x8xf32, 1 : i64>)
// CHECK:        scf.for %[[E:[0-9]+]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:          %[[ACC0:[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK:          scf.for %[[C:[0-9]+]] = {{.*}} iter_args(%{{.*}} = %[[ACC0]]) -> (f32) {
// CHECK:            scf.for %[[I:[0-9]+]] = {{.*}} -> (f32) {
// CHECK:              arith.cmpi ult
// CHECK:              scf.for %[[J:[0-9]+]] = {{.*}} -> (f32) {
// CHECK:                arith.cmpi ult
// CHECK:                scf.if %{{.*}} -> (f32) {
// CHECK-NEXT:             memref.load %{{.*}}[%{{.*}}, %[[C]], %{{.*}}, %{{.*}}] : memref<1x4x8x8xf32, 1 : i64>
// CHECK:                } else {
// CHECK:                memref.load %{{.*}}[%{{.*}}, %[[C]], %[[I]], %[[J]]] : memref<8x4x3x3xf32, 1 : i64>
// CHECK-NEXT:           arith.mulf {{.*}} fastmath<contract>
// CHECK-NEXT:           arith.addf
// CHECK:          memref.load %{{.*}} : memref<8xf32, 1 : i64>
// CHECK-NEXT:     arith.addf
// CHECK:          arith.cmpf ugt
// CHECK-NEXT:     arith.select
// CHECK:          memref.load %{{.*}} : memref<1x8x8x8xf32, 1 : i64>
// CHECK-NEXT:     arith.addf
// CHECK-NEXT:     memref.store %{{.*}}, %[[OUT]]
// CHECK-NOT:      memref.store
// CHECK:        kernel.return
// CHECK:      func.func @main(
// CHECK-NEXT:   kernel.launch @conv_bias_relu_add({{.*}}) {grid = array<i64: 2, 1, 1>, block = array<i64: 256, 1, 1>, dynamic_shared = 0 : i64}
// CHECK-NEXT:   func.return
func.func @main(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>, %bias: tensor<8xf32>, %res: tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32> {
  %r = fusion.group "conv_bias_relu_add" kind = "stitch" (%x, %w, %bias, %res) : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>, tensor<8xf32>, tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32> {
  ^bb0(%a: tensor<1x4x8x8xf32>, %k: tensor<8x4x3x3xf32>, %b: tensor<8xf32>, %q: tensor<1x8x8x8xf32>):
    %y = graph.conv2d %a, %k {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x8x8xf32>
    %bb = graph.broadcast %b {dims = array<i64: 1>} : tensor<8xf32> -> tensor<1x8x8x8xf32>
    %z = graph.add %y, %bb : tensor<1x8x8x8xf32>
    %relu = graph.relu %z : tensor<1x8x8x8xf32>
    %out = graph.add %relu, %q : tensor<1x8x8x8xf32>
    fusion.yield %out : tensor<1x8x8x8xf32>
  }
  func.return %r : tensor<1x8x8x8xf32>
}

// -----

// A lone max pool (no group: wrapped as a singleton) without padding: no guards, NaN-propagating maximumf
// from -inf.
// SCHED:      gpu.schedule = {mapping = "window", {{.*}}reason = "'graph.max_pool2d' over 2x2: {{.*}}", variant = "direct"}
// CHECK:      kernel.func @graph_max_pool2d(
// CHECK:        arith.constant 0xff800000 : f32
// CHECK-NOT:    arith.cmpi ult
// CHECK-NOT:    scf.if
// CHECK:        arith.maximumf {{.*}} fastmath<nsz>
// CHECK:        memref.store
// CHECK:      kernel.launch @graph_max_pool2d
func.func @main(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32> {
  %y = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  func.return %y : tensor<1x4x4x4xf32>
}

// -----

// Average pooling that reaches into the padding, without count_include_pad: the number of
// positions inside the input is counted next to the sum and divides it.
// CHECK:      kernel.func @graph_avg_pool2d(
// CHECK:        scf.for {{.*}} -> (f32, f32) {
// CHECK:          scf.for {{.*}} -> (f32, f32) {
// CHECK:            arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK:        arith.divf
// CHECK:        memref.store
func.func @main(%x: tensor<1x2x6x6xf32>) -> tensor<1x2x3x3xf32> {
  %y = graph.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x6x6xf32> -> tensor<1x2x3x3xf32>
  func.return %y : tensor<1x2x3x3xf32>
}
