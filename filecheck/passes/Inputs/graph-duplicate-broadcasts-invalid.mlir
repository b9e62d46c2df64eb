// A broadcast whose operand dimension is neither 1 nor the result's: rejected before the pass runs.
func.func @bad_dims(%x: tensor<4x8xf32>, %m: tensor<3xf32>) -> tensor<4x8xf32> {
  %b = graph.broadcast %m {dims = array<i64: 1>} : tensor<3xf32> -> tensor<4x8xf32>
  %0 = graph.add %x, %b : tensor<4x8xf32>
  %1 = graph.mul %0, %b : tensor<4x8xf32>
  func.return %1 : tensor<4x8xf32>
}
