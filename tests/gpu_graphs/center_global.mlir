func.func @main(%x: tensor<1024x64xf32>) -> tensor<1024x64xf32> {
  %r = fusion.group "center" kind = "global" (%x) : (tensor<1024x64xf32>) -> tensor<1024x64xf32> {
  ^bb0(%a: tensor<1024x64xf32>):
    %m = graph.reduce_mean %a {axes = array<i64: 0>, keepdims} : tensor<1024x64xf32> -> tensor<1x64xf32>
    %mb = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<1x64xf32> -> tensor<1024x64xf32>
    %d = graph.sub %a, %mb : tensor<1024x64xf32>
    fusion.yield %d : tensor<1024x64xf32>
  }
  func.return %r : tensor<1024x64xf32>
}
