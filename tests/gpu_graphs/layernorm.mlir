func.func @main(%x: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %r = fusion.group "layernorm" kind = "stitch" (%x) : (tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  ^bb0(%a: tensor<256x1024xf32>):
    %m = graph.reduce_mean %a {axes = array<i64: 1>} : tensor<256x1024xf32> -> tensor<256xf32>
    %mb = graph.broadcast %m {dims = array<i64: 0>} : tensor<256xf32> -> tensor<256x1024xf32>
    %d = graph.sub %a, %mb : tensor<256x1024xf32>
    %sq = graph.mul %d, %d : tensor<256x1024xf32>
    %v = graph.reduce_mean %sq {axes = array<i64: 1>} : tensor<256x1024xf32> -> tensor<256xf32>
    %eps = graph.constant dense<1.0e-5> : tensor<256xf32>
    %ve = graph.add %v, %eps : tensor<256xf32>
    %is = graph.rsqrt %ve : tensor<256xf32>
    %ib = graph.broadcast %is {dims = array<i64: 0>} : tensor<256xf32> -> tensor<256x1024xf32>
    %y = graph.mul %d, %ib : tensor<256x1024xf32>
    fusion.yield %y : tensor<256x1024xf32>
  }
  func.return %r : tensor<256x1024xf32>
}
