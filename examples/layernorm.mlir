// LayerNorm over the last axis of a 4096x1024 activation, with scale and bias:
// y = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta
func.func @main(%x: tensor<4096x1024xf32>, %gamma: tensor<1024xf32>, %beta: tensor<1024xf32>) -> tensor<4096x1024xf32> {
  %mean = graph.reduce_mean %x {axes = array<i64: 1>, keepdims} : tensor<4096x1024xf32> -> tensor<4096x1xf32>
  %mean_b = graph.broadcast %mean {dims = array<i64: 0, 1>} : tensor<4096x1xf32> -> tensor<4096x1024xf32>
  %d = graph.sub %x, %mean_b : tensor<4096x1024xf32>
  %d2 = graph.mul %d, %d : tensor<4096x1024xf32>
  %var = graph.reduce_mean %d2 {axes = array<i64: 1>, keepdims} : tensor<4096x1024xf32> -> tensor<4096x1xf32>
  %eps = graph.constant dense<1.0e-05> : tensor<4096x1xf32>
  %ve = graph.add %var, %eps : tensor<4096x1xf32>
  %r = graph.rsqrt %ve : tensor<4096x1xf32>
  %r_b = graph.broadcast %r {dims = array<i64: 0, 1>} : tensor<4096x1xf32> -> tensor<4096x1024xf32>
  %n = graph.mul %d, %r_b : tensor<4096x1024xf32>
  %g = graph.broadcast %gamma {dims = array<i64: 1>} : tensor<1024xf32> -> tensor<4096x1024xf32>
  %b = graph.broadcast %beta {dims = array<i64: 1>} : tensor<1024xf32> -> tensor<4096x1024xf32>
  %s = graph.mul %n, %g : tensor<4096x1024xf32>
  %y = graph.add %s, %b : tensor<4096x1024xf32>
  // identity reshapes, as importers leave them: canonicalize removes them
  %y2 = graph.reshape %y : tensor<4096x1024xf32> -> tensor<4096x1024xf32>
  func.return %y2 : tensor<4096x1024xf32>
}
