func.func @main(%x: tensor<100000x8xf32>) -> tensor<100000x8xf32> {
  %m = graph.reduce_max %x {axes = array<i64: 1>, keepdims} : tensor<100000x8xf32> -> tensor<100000x1xf32>
  %mb = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<100000x1xf32> -> tensor<100000x8xf32>
  %d = graph.sub %x, %mb : tensor<100000x8xf32>
  func.return %d : tensor<100000x8xf32>
}
