// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s

// One case per verifier and custom-syntax error of the stablehlo and chlo dialects;
// each message is checked with the file:line:col of the op (or token) that caused it.

func.func @main(%x: tensor<4xf32>, %y: tensor<4xf64>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.add' operands and result must have one type, got tensor<4xf32>, tensor<4xf64> -> tensor<4xf32>
  %r = stablehlo.add %x, %y : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf64> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.exponential' result type tensor<4xf64> differs from the operand type tensor<4xf32>
  %r = stablehlo.exponential %x : (tensor<4xf32>) -> tensor<4xf64>
  func.return %r : tensor<4xf64>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<8xi32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.convert' operands and result must have the same shape, got tensor<4xf32>, tensor<8xi32>
  %r = stablehlo.convert %x : (tensor<4xf32>) -> tensor<8xi32>
  func.return %r : tensor<8xi32>
}

// -----

func.func @main(%p: tensor<4xi32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.select' predicate must have element type i1, got i32
  %r = stablehlo.select %p, %x, %x : tensor<4xi32>, tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @main(%p: tensor<2xi1>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.select' predicate must be rank 0 or have the result's shape, got tensor<2xi1>
  %r = stablehlo.select %p, %x, %x : tensor<2xi1>, tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @main(%lo: tensor<2xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.clamp' min must be rank 0 or have the operand's type, got tensor<2xf32>
  %r = stablehlo.clamp %lo, %x, %lo : (tensor<2xf32>, tensor<4xf32>, tensor<2xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.compare' result must be the operands' shape with element type i1, got tensor<4xf32>
  %r = stablehlo.compare LT, %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xi1> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:26: error: Expected `EQ`, `NE`, `GE`, `GT`, `LE`, or `LT`.
  %r = stablehlo.compare BELOW, %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  func.return %r : tensor<4xi1>
}

// -----

func.func @main() -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.constant' value type tensor<2xf32> differs from the result type tensor<4xf32>
  %r = "stablehlo.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @main() -> tensor<4xi32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.iota' dimension 1 is out of range for rank 1
  %r = stablehlo.iota dim = 1 : tensor<4xi32>
  func.return %r : tensor<4xi32>
}

// -----

func.func @main(%x: tensor<3xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.broadcast_in_dim' operand dimension 0 of size 3 cannot broadcast to result dimension 1 of size 8
  %r = stablehlo.broadcast_in_dim %x, dims = [1] : (tensor<3xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// -----

func.func @main(%x: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.broadcast_in_dim' dims has 2 entries but the operand has rank 1
  %r = stablehlo.broadcast_in_dim %x, dims = [0, 1] : (tensor<8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// -----

func.func @main(%x: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.broadcast_in_dim' dims entry 2 is out of range for rank 2
  %r = stablehlo.broadcast_in_dim %x, dims = [2] : (tensor<8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.transpose' dims [0, 0] is not a permutation of 0..1
  %r = stablehlo.transpose %x, dims = [0, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %r : tensor<8x4xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.transpose' result must have shape [8, 4] and the operand's element type, got tensor<4x8xf32>
  %r = stablehlo.transpose %x, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<30xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reshape' cannot reshape tensor<4x8xf32> to tensor<30xf32>
  %r = stablehlo.reshape %x : (tensor<4x8xf32>) -> tensor<30xf32>
  func.return %r : tensor<30xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<2x4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.slice' range 0:9:2 of dimension 1 is invalid for size 8
  %r = stablehlo.slice %x [1:3, 0:9:2] : (tensor<4x8xf32>) -> tensor<2x4xf32>
  func.return %r : tensor<2x4xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<2x4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.slice' must produce shape [2, 3], got tensor<2x4xf32>
  %r = stablehlo.slice %x [1:3, 0:8:3] : (tensor<4x8xf32>) -> tensor<2x4xf32>
  func.return %r : tensor<2x4xf32>
}

// -----

func.func @main(%x: tensor<2x4xf32>, %v: tensor<1xf32>) -> tensor<3x6xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.pad' padding value must be a rank-0 tensor of the operand's element type, got tensor<1xf32>
  %r = stablehlo.pad %x, %v, low = [1, 0], high = [0, 2], interior = [0, 0] : (tensor<2x4xf32>, tensor<1xf32>) -> tensor<3x6xf32>
  func.return %r : tensor<3x6xf32>
}

// -----

func.func @main(%x: tensor<2x4xf32>, %v: tensor<f32>) -> tensor<3x6xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.pad' must produce shape [3, 9], got tensor<3x6xf32>
  %r = stablehlo.pad %x, %v, low = [1, 0], high = [0, 2], interior = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<3x6xf32>
  func.return %r : tensor<3x6xf32>
}

// -----

func.func @main(%x: tensor<2x4xf32>, %y: tensor<3x4xf32>) -> tensor<2x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.concatenate' operand shapes tensor<3x4xf32> and tensor<2x4xf32> differ outside dimension 1
  %r = stablehlo.concatenate %x, %y, dim = 1 : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x8xf32>
  func.return %r : tensor<2x8xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>, %z: tensor<f32>) -> tensor<8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reduce' result must be tensor<4xf32>, got tensor<8xf32>
  %r = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
  func.return %r : tensor<8xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>, %z: tensor<i32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reduce' init value tensor<i32> must be a rank-0 tensor of f32
  %r = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<i32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>, %z: tensor<f32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:46: error: 'stablehlo.reduce' applies must name a binary stablehlo op, got 'stablehlo.select'
  %r = stablehlo.reduce(%x init: %z) applies stablehlo.select across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>, %z: tensor<f32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reduce' body must end in stablehlo.return of (tensor<f32>)
  %r = stablehlo.reduce(%x init: %z) across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s, %s : tensor<f32>, tensor<f32>
  }
  func.return %r : tensor<4xf32>
}

// -----

func.func @main(%a: tensor<4x8xf32>, %b: tensor<7x3xf32>) -> tensor<4x3xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.dot_general' contracting dimensions 1 and 0 differ in size: 8 vs 7
  %r = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<7x3xf32>) -> tensor<4x3xf32>
  func.return %r : tensor<4x3xf32>
}

// -----

func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<3x4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.dot_general' must produce shape [4, 3], got tensor<3x4xf32>
  %r = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<3x4xf32>
  func.return %r : tensor<3x4xf32>
}

// -----

func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<4x3xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:38: error: unexpected 'contracting' in 'stablehlo.dot_general' (expected batching_dims, contracting_dims or precision)
  %r = stablehlo.dot_general %a, %b, contracting = [1] x [0] : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  func.return %r : tensor<4x3xf32>
}

// -----

func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: convolution layout [b, f, 0, 2] must name b and f once and the spatial dimensions 0..n-1 once each
  %y = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 2] : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// -----

func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.convolution' window_strides must have 2 entries
  %y = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// -----

func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:103: error: unexpected 'step' in convolution window (expected stride, pad, lhs_dilate, rhs_dilate, reverse)
  %y = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {step = [1, 1]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// -----

func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:56: error: unexpected 'c' in convolution dimension numbers (expected b, f, i, o or a number)
  %y = stablehlo.convolution(%x, %w) dim_numbers = [b, c, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1] : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf64> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'chlo.erf' result type tensor<4xf64> differs from the operand type tensor<4xf32>
  %r = chlo.erf %x : tensor<4xf32> -> tensor<4xf64>
  func.return %r : tensor<4xf64>
}

// -----

func.func @main(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.convolution' must produce shape [1, 4, 6, 6], got tensor<1x4x8x8xf32>
  %y = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1] {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// -----

func.func @main(%x: tensor<1x4x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.convolution' input features (4) must be the kernel's input features (3) times feature_group_count (1)
  %y = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1] {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// -----

func.func @main(%x: tensor<6x7xf32>) -> tensor<6x7xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reverse' dims entry 2 is out of range for rank 2
  %r = stablehlo.reverse %x, dims = [0, 2] : tensor<6x7xf32>
  func.return %r : tensor<6x7xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf64> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'chlo.square' result type tensor<4xf64> differs from the operand type tensor<4xf32>
  %r = chlo.square %x : tensor<4xf32> -> tensor<4xf64>
  func.return %r : tensor<4xf64>
}

// -----

func.func @main(%x: tensor<6x7xf32>, %i: tensor<3x1xi32>) -> tensor<3x7xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:122: error: unexpected 'offset_dim' in #stablehlo.gather (expected one of offset_dims, collapsed_slice_dims, operand_batching_dims, start_indices_batching_dims, start_index_map, index_vector_dim)
  %r = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], offset_dim = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 7>}> : (tensor<6x7xf32>, tensor<3x1xi32>) -> tensor<3x7xf32>
  func.return %r : tensor<3x7xf32>
}

// -----

func.func @main(%x: tensor<6x7xf32>, %i: tensor<3x1xi32>) -> tensor<3x7xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:116: error: repeated 'index_vector_dim' in #stablehlo.gather
  %r = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<index_vector_dim = 1, offset_dims = [1], index_vector_dim = 1>, slice_sizes = array<i64: 1, 7>}> : (tensor<6x7xf32>, tensor<3x1xi32>) -> tensor<3x7xf32>
  func.return %r : tensor<3x7xf32>
}

// -----

func.func @main(%x: tensor<6x7xf32>, %i: tensor<3x1xi32>) -> tensor<3x7xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:89: error: '[' expected
  %r = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = 1, index_vector_dim = 1>, slice_sizes = array<i64: 1, 7>}> : (tensor<6x7xf32>, tensor<3x1xi32>) -> tensor<3x7xf32>
  func.return %r : tensor<3x7xf32>
}

// -----

func.func @main(%x: tensor<6x7xf32>, %i: tensor<3x1xi32>) -> tensor<3x6xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.gather' must produce shape [3, 7] of the operand's element type, got tensor<3x6xf32>
  %r = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 7>}> : (tensor<6x7xf32>, tensor<3x1xi32>) -> tensor<3x6xf32>
  func.return %r : tensor<3x6xf32>
}

// -----

func.func @main(%x: tensor<6x7xf32>, %i: tensor<3x2xi32>) -> tensor<3x7xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.gather' start_index_map has 1 entries but the index vectors have 2
  %r = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 7>}> : (tensor<6x7xf32>, tensor<3x2xi32>) -> tensor<3x7xf32>
  func.return %r : tensor<3x7xf32>
}

// -----

func.func @main(%x: tensor<6x7xf32>, %i: tensor<3x1xi32>) -> tensor<3x7xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.gather' slice size of collapsed or batching dimension 0 must be at most 1, got 2
  %r = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 2, 7>}> : (tensor<6x7xf32>, tensor<3x1xi32>) -> tensor<3x7xf32>
  func.return %r : tensor<3x7xf32>
}

// -----

func.func @main(%x: tensor<6x7xf32>, %z: tensor<f32>) -> tensor<6x7xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reduce_window' result must be tensor<6x4xf32>, got tensor<6x7xf32>
  %r = "stablehlo.reduce_window"(%x, %z) <{padding = dense<1> : tensor<2x2xi64>, window_dimensions = array<i64: 3, 3>, window_strides = array<i64: 1, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<6x7xf32>, tensor<f32>) -> tensor<6x7xf32>
  func.return %r : tensor<6x7xf32>
}

// -----

func.func @main(%x: tensor<6x7xf32>, %z: tensor<f32>) -> tensor<6x7xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reduce_window' window_strides must have 2 entries (the input rank)
  %r = "stablehlo.reduce_window"(%x, %z) <{window_dimensions = array<i64: 1, 1>, window_strides = array<i64: 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<6x7xf32>, tensor<f32>) -> tensor<6x7xf32>
  func.return %r : tensor<6x7xf32>
}

// -----

func.func @main(%x: tensor<6x7xf32>, %z: tensor<f32>) -> tensor<6x7xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reduce_window' body must end in stablehlo.return of (tensor<f32>)
  %r = "stablehlo.reduce_window"(%x, %z) <{window_dimensions = array<i64: 1, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m, %m : tensor<f32>, tensor<f32>
  }) : (tensor<6x7xf32>, tensor<f32>) -> tensor<6x7xf32>
  func.return %r : tensor<6x7xf32>
}

// -----

func.func @main(%x: tensor<4x5xf32>, %i: tensor<i32>) -> tensor<5x2xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.dynamic_slice' slice size 5 of dimension 0 is invalid for size 4
  %s = stablehlo.dynamic_slice %x, %i, %i, sizes = [5, 2] : (tensor<4x5xf32>, tensor<i32>, tensor<i32>) -> tensor<5x2xf32>
  func.return %s : tensor<5x2xf32>
}

// -----

func.func @main(%x: tensor<4x5xf32>, %i: tensor<i32>) -> tensor<2x2xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.dynamic_slice' needs 2 start indices (the operand rank), got 1
  %s = stablehlo.dynamic_slice %x, %i, sizes = [2, 2] : (tensor<4x5xf32>, tensor<i32>) -> tensor<2x2xf32>
  func.return %s : tensor<2x2xf32>
}

// -----

func.func @main(%x: tensor<4x5xf32>, %u: tensor<2x2xf32>, %f: tensor<f32>) -> tensor<4x5xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.dynamic_update_slice' start indices must be rank-0 integer tensors, got tensor<f32>
  %w = stablehlo.dynamic_update_slice %x, %u, %f, %f : (tensor<4x5xf32>, tensor<2x2xf32>, tensor<f32>, tensor<f32>) -> tensor<4x5xf32>
  func.return %w : tensor<4x5xf32>
}

// -----

func.func @main(%x: tensor<4x5xf32>, %k: tensor<4x5xi32>) -> tensor<4x5xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.sort' comparator must take (tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>)
  %o:2 = "stablehlo.sort"(%x, %k) <{dimension = 1 : i64}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %lt = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) : (tensor<4x5xf32>, tensor<4x5xi32>) -> (tensor<4x5xf32>, tensor<4x5xi32>)
  func.return %o#0 : tensor<4x5xf32>
}

// -----

func.func @main(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.sort' dimension 2 is out of range for rank 2
  %o = "stablehlo.sort"(%x) <{dimension = 2 : i64}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %lt = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) : (tensor<4x5xf32>) -> tensor<4x5xf32>
  func.return %o : tensor<4x5xf32>
}

// -----

func.func @main(%x: tensor<8xf32>, %i: tensor<4x1xi32>, %v: tensor<4xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.scatter' update_computation must take (tensor<f32>, tensor<f32>)
  %r = "stablehlo.scatter"(%x, %i, %v) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    stablehlo.return %b : tensor<i32>
  }) : (tensor<8xf32>, tensor<4x1xi32>, tensor<4xf32>) -> tensor<8xf32>
  func.return %r : tensor<8xf32>
}

// -----

func.func @main(%x: tensor<8xf32>, %i: tensor<4x1xi32>, %v: tensor<4xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:89: error: unexpected 'window_dims' in #stablehlo.scatter (expected one of update_window_dims, inserted_window_dims, input_batching_dims, scatter_indices_batching_dims, scatter_dims_to_operand_dims, index_vector_dim)
  %r = "stablehlo.scatter"(%x, %i, %v) <{scatter_dimension_numbers = #stablehlo.scatter<window_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    stablehlo.return %b : tensor<f32>
  }) : (tensor<8xf32>, tensor<4x1xi32>, tensor<4xf32>) -> tensor<8xf32>
  func.return %r : tensor<8xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.while' cond must end in stablehlo.return of (tensor<i1>)
  %r = stablehlo.while(%iterArg = %x) : tensor<4xf32>
   cond {
    stablehlo.return %iterArg : tensor<4xf32>
  } do {
    stablehlo.return %iterArg : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}

// -----

func.func @is_finite_of_integers(%x: tensor<4xi32>) -> tensor<4xi1> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.is_finite' takes floats to i1, got tensor<4xi32> -> tensor<4xi1>
  %r = stablehlo.is_finite %x : (tensor<4xi32>) -> tensor<4xi1>
  func.return %r : tensor<4xi1>
}

// -----

func.func @main(%x: tensor<4xf32>, %i: tensor<i32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.case' branch 1 must take no arguments and end in stablehlo.return of the results (tensor<4xf32>)
  %r = "stablehlo.case"(%i) ({
    stablehlo.return %x : tensor<4xf32>
  }, {
    %c = stablehlo.constant dense<0.0> : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<i32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>, %i: tensor<i64>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.case' index must be tensor<i32>, got tensor<i64>
  %r = "stablehlo.case"(%i) ({
    stablehlo.return %x : tensor<4xf32>
  }) : (tensor<i64>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
