func.func @main(%x: tensor<64x32768xf32>) -> tensor<64x32768xf32> {
  %r = fusion.group "softmax" kind = "stitch" (%x) : (tensor<64x32768xf32>) -> tensor<64x32768xf32> {
  ^bb0(%a: tensor<64x32768xf32>):
    %m = graph.reduce_max %a {axes = array<i64: 1>, keepdims} : tensor<64x32768xf32> -> tensor<64x1xf32>
    %mb = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<64x1xf32> -> tensor<64x32768xf32>
    %d = graph.sub %a, %mb : tensor<64x32768xf32>
    %e = graph.exp %d : tensor<64x32768xf32>
    %s = graph.reduce_sum %e {axes = array<i64: 1>, keepdims} : tensor<64x32768xf32> -> tensor<64x1xf32>
    %sb = graph.broadcast %s {dims = array<i64: 0, 1>} : tensor<64x1xf32> -> tensor<64x32768xf32>
    %y = graph.div %e, %sb : tensor<64x32768xf32>
    fusion.yield %y : tensor<64x32768xf32>
  }
  func.return %r : tensor<64x32768xf32>
}
