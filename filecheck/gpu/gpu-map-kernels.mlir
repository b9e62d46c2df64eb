// RUN: mlfuse-opt %s --split-input-file -p gpu-map-kernels --verify-diagnostics | filecheck %s

// Elementwise: 4 elements per thread in a grid-stride loop; the result is an output argument.
// CHECK:      kernel.func @bias(%{{.*}}: memref<512x768xf32, 1 : i64>, %{{.*}}: memref<768xf32, 1 : i64>, %{{.*}}: memref<512x768xf32, 1 : i64>) attributes {block = array<i64: 256, 1, 1>}
// CHECK:        scf.for
// CHECK-COUNT-4: memref.store
// CHECK:      func.func @main(%x: memref<512x768xf32, 1 : i64>, %b: memref<768xf32, 1 : i64>, %[[OUT:.*]]: memref<512x768xf32, 1 : i64>) attributes {kernel.results = 1 : i64}
// CHECK-NEXT:   kernel.launch @bias(%x, %b, %[[OUT]]) {grid = array<i64: 384, 1, 1>, block = array<i64: 256, 1, 1>, dynamic_shared = 0 : i64}
// CHECK-NEXT:   func.return
func.func @main(%x: tensor<512x768xf32>, %b: tensor<768xf32>) -> tensor<512x768xf32> {
  %r = fusion.group "bias" kind = "loop" (%x, %b) : (tensor<512x768xf32>, tensor<768xf32>) -> tensor<512x768xf32> {
  ^bb0(%a: tensor<512x768xf32>, %c: tensor<768xf32>):
    %cb = graph.broadcast %c {dims = array<i64: 1>} : tensor<768xf32> -> tensor<512x768xf32>
    %s = graph.add %a, %cb : tensor<512x768xf32>
    fusion.yield %s : tensor<512x768xf32>
  }
  func.return %r : tensor<512x768xf32>
}

// -----

// Warp per row: butterfly shuffles, the row's values kept in registers for the second pass.
// CHECK:      kernel.func @rows
// CHECK-COUNT-8: memref.load
// CHECK:        kernel.shuffle xor %{{.*}}, 16 : f32
// CHECK:        kernel.shuffle xor %{{.*}}, 1 : f32
// CHECK-NOT:    memref.load
// CHECK-COUNT-8: memref.store
// CHECK:        kernel.return
func.func @main(%x: tensor<64x256xf32>) -> tensor<64x256xf32> {
  %r = fusion.group "rows" kind = "stitch" (%x) : (tensor<64x256xf32>) -> tensor<64x256xf32> {
  ^bb0(%a: tensor<64x256xf32>):
    %m = graph.reduce_sum %a {axes = array<i64: 1>, keepdims} : tensor<64x256xf32> -> tensor<64x1xf32>
    %mb = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<64x1xf32> -> tensor<64x256xf32>
    %d = graph.sub %a, %mb : tensor<64x256xf32>
    fusion.yield %d : tensor<64x256xf32>
  }
  func.return %r : tensor<64x256xf32>
}

// -----

// Block per row: warp partials through shared memory behind a barrier.
// CHECK:      kernel.func @blockrow
// CHECK:        kernel.shared_alloc : memref<8xf32, 3 : i64>
// CHECK:        scf.for
// CHECK:        kernel.shuffle xor
// CHECK:        kernel.barrier
// CHECK:      kernel.launch @blockrow({{.*}}) {grid = array<i64: 16, 1, 1>, block = array<i64: 256, 1, 1>
func.func @main(%x: tensor<16x2048xf32>) -> tensor<16xf32> {
  %r = fusion.group "blockrow" kind = "reduce" (%x) : (tensor<16x2048xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16x2048xf32>):
    %m = graph.reduce_max %a {axes = array<i64: 1>} : tensor<16x2048xf32> -> tensor<16xf32>
    fusion.yield %m : tensor<16xf32>
  }
  func.return %r : tensor<16xf32>
}

// -----

// Split rows: atomics into the output, which the host zeroes first.
// CHECK:      kernel.func @graph_reduce_sum
// CHECK:        kernel.atomic_add
// CHECK:      func.func @main(%x: memref<4x100000xf32, 1 : i64>, %[[OUT:.*]]: memref<4xf32, 1 : i64>)
// CHECK-NEXT:   kernel.memset %[[OUT]]
// CHECK-NEXT:   kernel.launch @graph_reduce_sum
func.func @main(%x: tensor<4x100000xf32>) -> tensor<4xf32> {
  %s = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<4x100000xf32> -> tensor<4xf32>
  func.return %s : tensor<4xf32>
}

// -----

// Global stitching: scratch buffer, grid barrier, cooperative kernel; an intermediate buffer
// between two kernels, a non-splat constant uploaded by the host, an input returned as is.
// CHECK:      kernel.func @center({{.*}}) attributes {block = array<i64: 256, 1, 1>, min_blocks_per_sm = 2 : i64, cooperative}
// CHECK:        kernel.grid_sync
// CHECK:      sym_name = "__constant_{{[0-9]+}}", type = memref<4xf32, 1 : i64>, initial_value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]>
// CHECK:      kernel.func @graph_mul
// CHECK:      func.func @main(%x: memref<1024x4xf32, 1 : i64>, %[[O0:.*]]: memref<1024x4xf32, 1 : i64>, %[[O1:.*]]: memref<1024x4xf32, 1 : i64>) attributes {kernel.results = 2 : i64}
// CHECK:        %[[T:.*]] = memref.alloc() : memref<1024x4xf32, 1 : i64>
// CHECK:        kernel.memset
// CHECK:        kernel.launch @center(%x, %[[T]], {{.*}}) {grid = array<i64: 16, 1, 1>
// CHECK:        memref.get_global
// CHECK:        kernel.launch @graph_mul({{.*}}%[[O0]])
// CHECK:        "memref.copy"(%x, %[[O1]])
func.func @main(%x: tensor<1024x4xf32>) -> (tensor<1024x4xf32>, tensor<1024x4xf32>) {
  %r = fusion.group "center" kind = "global" (%x) : (tensor<1024x4xf32>) -> tensor<1024x4xf32> {
  ^bb0(%a: tensor<1024x4xf32>):
    %m = graph.reduce_mean %a {axes = array<i64: 0>, keepdims} : tensor<1024x4xf32> -> tensor<1x4xf32>
    %mb = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<1x4xf32> -> tensor<1024x4xf32>
    %d = graph.sub %a, %mb : tensor<1024x4xf32>
    fusion.yield %d : tensor<1024x4xf32>
  }
  %c = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %cb = graph.broadcast %c {dims = array<i64: 1>} : tensor<4xf32> -> tensor<1024x4xf32>
  %y = graph.mul %r, %cb : tensor<1024x4xf32>
  func.return %y, %x : tensor<1024x4xf32>, tensor<1024x4xf32>
}

// -----

// Not a tensor function: left alone.
// CHECK:      func.func @scalar(%a: i32) -> i32
func.func @scalar(%a: i32) -> i32 {
  func.return %a : i32
}

// -----

// Only functions with tensor arguments are mapped: a function of scalars and a host function
// mapped before (with its kernel) stay as they are, so mapping twice changes nothing; no
// conversion cast is left behind.
// CHECK-NOT:  unrealized_conversion_cast
// CHECK:      kernel.func @done(%{{.*}}: memref<4xf32, 1 : i64>) attributes {block = array<i64: 32, 1, 1>} {
// CHECK-NEXT:   kernel.return
// CHECK:      func.func @scalar(%a: f32) -> f32 {
// CHECK-NEXT:   %{{.*}} = arith.negf %a : f32
// CHECK:      func.func @host(%x: memref<4xf32, 1 : i64>) attributes {kernel.results = 0 : i64} {
// CHECK-NEXT:   kernel.launch @done(%x) {grid = array<i64: 1, 1, 1>, block = array<i64: 32, 1, 1>, dynamic_shared = 0 : i64}
// CHECK-NEXT:   func.return
// CHECK:      kernel.func @graph_neg
// CHECK:      func.func @main(%y: memref<4xf32, 1 : i64>, %[[OUT:.*]]: memref<4xf32, 1 : i64>) attributes {kernel.results = 1 : i64} {
// CHECK-NEXT:   kernel.launch @graph_neg(%y, %[[OUT]])
// CHECK-NEXT:   func.return
// CHECK-NOT:  unrealized_conversion_cast
kernel.func @done(%x: memref<4xf32, 1>) attributes {block = array<i64: 32, 1, 1>} {
  kernel.return
}
func.func @scalar(%a: f32) -> f32 {
  %n = arith.negf %a : f32
  func.return %n : f32
}
func.func @host(%x: memref<4xf32, 1>) attributes {kernel.results = 0 : i64} {
  kernel.launch @done(%x) {grid = array<i64: 1, 1, 1>, block = array<i64: 32, 1, 1>, dynamic_shared = 0 : i64} : memref<4xf32, 1>
  func.return
}
func.func @main(%y: tensor<4xf32>) -> tensor<4xf32> {
  %z = graph.neg %y : tensor<4xf32>
  func.return %z : tensor<4xf32>
}

// -----

// Invalid inputs: each is reported at its location, before the module changes.
// CHECK: {{.*}}gpu-map-kernels.mlir:[[# @LINE + 3]]:3: error: the GPU backend cannot map 'arith.constant' outside a fusion group
// CHECK-NOT: kernel.func
func.func @foreign(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.constant 1.0 : f32
  %y = graph.exp %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

// CHECK: {{.*}}gpu-map-kernels.mlir:[[# @LINE + 2]]:3: error: the GPU backend does not support unsigned integer tensors (ui32) yet
func.func @unsigned(%x: tensor<4xui32>) -> tensor<4xui32> {
  %y = graph.neg %x : tensor<4xui32>
  func.return %y : tensor<4xui32>
}

// -----

// CHECK: {{.*}}gpu-map-kernels.mlir:[[# @LINE + 1]]:1: error: @mixed: the GPU backend maps functions of tensors, got i32
func.func @mixed(%x: tensor<4xf32>, %n: i32) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}

// -----

// CHECK: {{.*}}gpu-map-kernels.mlir:[[# @LINE + 1]]:1: error: @declared: the GPU backend maps functions with a body of one block
func.func private @declared(tensor<4xf32>) -> tensor<4xf32>

// -----

// Code generation can still fail, inside the conversion: the error is the pattern's own,
// at the op's location, and nothing is printed for the chunk.
// CHECK: {{.*}}gpu-map-kernels.mlir:[[# @LINE + 3]]:3: error: the GPU backend cannot generate code for 'graph.gather'
// CHECK-NOT: func.func
func.func @gather(%x: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  %y = graph.gather %x, %i {axis = 0 : i64} : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}
