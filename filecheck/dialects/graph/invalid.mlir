// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s

// One case per verifier error of the graph dialect; each message is checked
// with the file:line:col of the op that caused it.

func.func @main(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.exp' operand must have a static shape, got tensor<?x4xf32>
  %y = graph.exp %x : tensor<?x4xf32>
  func.return %y : tensor<?x4xf32>
}

// -----

func.func @main(%x: tensor<4xi4>) -> tensor<4xi4> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.neg' operand has unsupported element type i4 (expected f16, f32, f64, i1, i8, i16, i32, i64, ui8, ui16, ui32, ui64 or bf16)
  %y = graph.neg %x : tensor<4xi4>
  func.return %y : tensor<4xi4>
}

// -----

func.func @main(%x: tensor<4xsi32>) -> tensor<4xsi32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.neg' operand has unsupported element type si32
  %y = graph.neg %x : tensor<4xsi32>
  func.return %y : tensor<4xsi32>
}

// -----

func.func @main(%x: tensor<4xi32>) -> tensor<4xi32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.exp' expects a floating-point tensor, got element type i32
  %y = graph.exp %x : tensor<4xi32>
  func.return %y : tensor<4xi32>
}

// -----

func.func @main(%x: tensor<4xi1>) -> tensor<4xi1> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.abs' does not accept i1 tensors
  %y = graph.abs %x : tensor<4xi1>
  func.return %y : tensor<4xi1>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.gelu' approximate must be "none" or "tanh", got "fast"
  %y = graph.gelu %x {approximate = "fast"} : tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<2x2xi32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.cast' changes the shape from 4 to 2x2; only the element type may change
  %y = graph.cast %x : tensor<4xf32> -> tensor<2x2xi32>
  func.return %y : tensor<2x2xi32>
}

// -----

func.func @main(%x: tensor<4xi32>) -> tensor<4xi32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.pow' expects a floating-point tensor, got element type i32
  %y = graph.pow %x, %x : tensor<4xi32>
  func.return %y : tensor<4xi32>
}

// -----

func.func @main(%x: tensor<4xf32>, %z: tensor<4xf64>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.add' op attribute tensor<4xf32> expected from variable 'T', but got tensor<4xf64>
  %y = "graph.add"(%x, %z) : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xi1> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.compare' predicate must be one of eq, ne, lt, le, gt, ge, got 'less'
  %y = "graph.compare"(%x, %x) <{predicate = "less"}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  func.return %y : tensor<4xi1>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.compare' result must be tensor<4xi1>, got tensor<4xf32>
  %y = "graph.compare"(%x, %x) <{predicate = "lt"}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

func.func @main(%c: tensor<4xi32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.select' condition must have element type i1, got i32
  %y = graph.select %c, %x, %x : tensor<4xi32>, tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

func.func @main(%c: tensor<2x2xi1>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.select' condition shape 2x2 differs from value shape 4
  %y = graph.select %c, %x, %x : tensor<2x2xi1>, tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<3x4xf64> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.broadcast' changes the element type from f32 to f64
  %y = graph.broadcast %x {dims = array<i64: 1>} : tensor<4xf32> -> tensor<3x4xf64>
  func.return %y : tensor<3x4xf64>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<3x4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.broadcast' dims has 2 entries but the operand has rank 1
  %y = graph.broadcast %x {dims = array<i64: 0, 1>} : tensor<4xf32> -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}

// -----

func.func @main(%x: tensor<1x4xf32>) -> tensor<3x4x5xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.broadcast' dims must be strictly increasing, got [1, 0]
  %y = graph.broadcast %x {dims = array<i64: 1, 0>} : tensor<1x4xf32> -> tensor<3x4x5xf32>
  func.return %y : tensor<3x4x5xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<3x4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.broadcast' dims entry 2 is out of range for rank 2
  %y = graph.broadcast %x {dims = array<i64: 2>} : tensor<4xf32> -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}

// -----

func.func @main(%x: tensor<3xf32>) -> tensor<3x4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.broadcast' operand dimension 0 of size 3 cannot broadcast to result dimension 1 of size 4
  %y = graph.broadcast %x {dims = array<i64: 1>} : tensor<3xf32> -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.reduce_sum' axes entry 2 is out of range for rank 2
  %y = graph.reduce_sum %x {axes = array<i64: 2>} : tensor<4x8xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<f32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.reduce_max' axes has repeated entries [1, 1]
  %y = graph.reduce_max %x {axes = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<f32>
  func.return %y : tensor<f32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<4xf16> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.reduce_min' changes the element type from f32 to f16
  %y = graph.reduce_min %x {axes = array<i64: 1>} : tensor<4x8xf32> -> tensor<4xf16>
  func.return %y : tensor<4xf16>
}

// -----

func.func @main(%x: tensor<4x8xi1>) -> tensor<4xi1> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.reduce_sum' does not accept i1 tensors
  %y = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<4x8xi1> -> tensor<4xi1>
  func.return %y : tensor<4xi1>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.reduce_sum' over axes [1] of 4x8 must produce 4x1, got 4
  %y = graph.reduce_sum %x {axes = array<i64: 1>, keepdims} : tensor<4x8xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4x8xi32>) -> tensor<4xi32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.reduce_mean' expects a floating-point tensor
  %y = graph.reduce_mean %x {axes = array<i64: 1>} : tensor<4x8xi32> -> tensor<4xi32>
  func.return %y : tensor<4xi32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.transpose' perm [1, 1] is not a permutation of 0..1
  %y = graph.transpose %x {perm = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %y : tensor<8x4xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.transpose' with perm [1, 0] of 4x8 must produce 8x4, got 4x8
  %y = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<8x4xf64> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.transpose' changes the element type from f32 to f64
  %y = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf64>
  func.return %y : tensor<8x4xf64>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<30xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.reshape' cannot reshape 4x8 (32 elements) to 30 (30 elements)
  %y = graph.reshape %x : tensor<4x8xf32> -> tensor<30xf32>
  func.return %y : tensor<30xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.slice' start, stop and step must each have 2 entries (the operand rank), got 1, 2, 2
  %y = graph.slice %x {start = array<i64: 0>, stop = array<i64: 2, 8>, step = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.slice' step in dimension 1 must be >= 1, got 0
  %y = graph.slice %x {start = array<i64: 0, 0>, stop = array<i64: 2, 8>, step = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.slice' bounds [3, 5) in dimension 0 are outside 0..4
  %y = graph.slice %x {start = array<i64: 3, 0>, stop = array<i64: 5, 8>, step = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.slice' must produce 2x4, got 2x8
  %y = graph.slice %x {start = array<i64: 0, 0>, stop = array<i64: 2, 8>, step = array<i64: 1, 2>} : tensor<4x8xf32> -> tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<6x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.pad' low and high must each have 2 entries, got 1 and 2
  %y = graph.pad %x {low = array<i64: 1>, high = array<i64: 1, 0>, value = 0.0 : f32} : tensor<4x8xf32> -> tensor<6x8xf32>
  func.return %y : tensor<6x8xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<4x7xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.pad' padding amounts must be non-negative
  %y = graph.pad %x {low = array<i64: 0, -1>, high = array<i64: 0, 0>, value = 0.0 : f32} : tensor<4x8xf32> -> tensor<4x7xf32>
  func.return %y : tensor<4x7xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<6x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.pad' value must be a scalar attribute of type f32, got 0 : i32
  %y = graph.pad %x {low = array<i64: 1, 0>, high = array<i64: 1, 0>, value = 0 : i32} : tensor<4x8xf32> -> tensor<6x8xf32>
  func.return %y : tensor<6x8xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<6x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.pad' must produce 5x8, got 6x8
  %y = graph.pad %x {low = array<i64: 1, 0>, high = array<i64: 0, 0>, value = 0.0 : f32} : tensor<4x8xf32> -> tensor<6x8xf32>
  func.return %y : tensor<6x8xf32>
}

// -----

func.func @main() -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.concat' needs at least one operand
  %y = "graph.concat"() <{axis = 0 : i64}> : () -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<8x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.concat' axis 2 is out of range for rank 2
  %y = graph.concat %x, %x {axis = 2 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  func.return %y : tensor<8x8xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>, %z: tensor<4x7xf32>) -> tensor<8x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.concat' operand 1 of shape 4x7 does not match 4x8 outside axis 0
  %y = graph.concat %x, %z {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4x7xf32>) -> tensor<8x8xf32>
  func.return %y : tensor<8x8xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.concat' must produce 8x8, got 4x8
  %y = graph.concat %x, %x {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x2xf16>) -> tensor<4x2xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.matmul' element types differ: f32, f16 -> f32
  %y = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x2xf16>) -> tensor<4x2xf32>
  func.return %y : tensor<4x2xf32>
}

// -----

func.func @main(%x: tensor<4x8xi1>, %w: tensor<8x2xi1>) -> tensor<4x2xi1> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.matmul' does not accept i1 tensors
  %y = graph.matmul %x, %w : (tensor<4x8xi1>, tensor<8x2xi1>) -> tensor<4x2xi1>
  func.return %y : tensor<4x2xi1>
}

// -----

func.func @main(%x: tensor<2x4x8xf32>, %w: tensor<2x8x2xf32>) -> tensor<2x4x2xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.matmul' expects operands of rank 2, got 2x4x8 and 2x8x2
  %y = graph.matmul %x, %w : (tensor<2x4x8xf32>, tensor<2x8x2xf32>) -> tensor<2x4x2xf32>
  func.return %y : tensor<2x4x2xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> tensor<4x2xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.batch_matmul' expects operands of equal ranks >= 3, got 4x8 and 8x2
  %y = graph.batch_matmul %x, %w : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  func.return %y : tensor<4x2xf32>
}

// -----

func.func @main(%x: tensor<2x4x8xf32>, %w: tensor<3x8x2xf32>) -> tensor<2x4x2xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.batch_matmul' batch dimensions differ: 2 vs 3
  %y = graph.batch_matmul %x, %w : (tensor<2x4x8xf32>, tensor<3x8x2xf32>) -> tensor<2x4x2xf32>
  func.return %y : tensor<2x4x2xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>, %w: tensor<7x2xf32>) -> tensor<4x2xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.matmul' contraction sizes differ: lhs 4x8 has K=8, rhs 7x2 has K=7
  %y = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<7x2xf32>) -> tensor<4x2xf32>
  func.return %y : tensor<4x2xf32>
}

// -----

func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> tensor<4x3xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.matmul' must produce 4x2, got 4x3
  %y = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x3xf32>
  func.return %y : tensor<4x3xf32>
}

// -----

func.func @main() -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.constant' value type tensor<2xf32> differs from result type tensor<4xf32>
  %y = "graph.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xi1> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:22: error: unknown comparison predicate 'less' (expected one of eq, ne, lt, le, gt, ge)
  %y = graph.compare less, %x, %x : tensor<4xf32>
  func.return %y : tensor<4xi1>
}

// -----

func.func @main() -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:23: error: 'graph.constant' expects a dense elements attribute such as dense<1.0> : tensor<4xf32>
  %y = graph.constant 1.0 : f32
  func.return %y : tensor<4xf32>
}

// -----

func.func @main(%t: tensor<10x4xf32>, %i: tensor<3xf32>) -> tensor<3x4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.gather' indices must have element type i32 or i64, got f32
  %y = graph.gather %t, %i {axis = 0} : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}

// -----

func.func @main(%t: tensor<10x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.gather' axis 2 is out of range for data of rank 2
  %y = graph.gather %t, %i {axis = 2} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}

// -----

func.func @main(%t: tensor<10x4xf32>, %i: tensor<3xi64>) -> tensor<4x3xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.gather' must produce 3x4, got 4x3
  %y = graph.gather %t, %i {axis = 0} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  func.return %y : tensor<4x3xf32>
}

// -----

func.func @main(%t: tensor<0x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.gather' gathers from axis 0 of size 0
  %y = graph.gather %t, %i {axis = 0} : (tensor<0x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}

// -----

func.func @main(%t: tensor<10x4xf32>, %i: tensor<3xi64>) -> tensor<3xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.gather_elements' indices of rank 1 must have the rank of data (2)
  %y = graph.gather_elements %t, %i {axis = 0} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}

// -----

func.func @main(%t: tensor<10x4xf32>, %i: tensor<3x5xi64>) -> tensor<3x5xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.gather_elements' indices dimension 1 of size 5 exceeds data's size 4
  %y = graph.gather_elements %t, %i {axis = 0} : (tensor<10x4xf32>, tensor<3x5xi64>) -> tensor<3x5xf32>
  func.return %y : tensor<3x5xf32>
}

// -----

func.func @main(%x: tensor<4xi1>) -> tensor<4xi1> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.rem' does not accept i1 tensors
  %y = graph.rem %x, %x : tensor<4xi1>
  func.return %y : tensor<4xi1>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.bitand' expects an integer tensor, got element type f32
  %y = graph.bitand %x, %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

func.func @main(%x: tensor<4xi1>) -> tensor<4xi1> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.shl' expects an integer tensor, got element type i1
  %y = graph.shl %x, %x : tensor<4xi1>
  func.return %y : tensor<4xi1>
}

// -----

func.func @main(%x: tensor<4xf16>) -> tensor<4xf16> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.bitnot' expects an integer tensor, got element type f16
  %y = graph.bitnot %x : tensor<4xf16>
  func.return %y : tensor<4xf16>
}

// -----

func.func @main(%x: tensor<4xf32>) -> tensor<4xf16> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.bitcast' from f32 to f16 changes the width (32 to 16 bits)
  %y = graph.bitcast %x : tensor<4xf32> -> tensor<4xf16>
  func.return %y : tensor<4xf16>
}

// -----

func.func @main(%x: tensor<4xi1>) -> tensor<4xi8> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'graph.bitcast' does not take i1 tensors (bools are not bits)
  %y = graph.bitcast %x : tensor<4xi1> -> tensor<4xi8>
  func.return %y : tensor<4xi8>
}
