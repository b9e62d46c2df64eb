func.func @main(%x: tensor<4x100000xf32>) -> tensor<4xf32> {
  %s = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<4x100000xf32> -> tensor<4xf32>
  func.return %s : tensor<4xf32>
}
