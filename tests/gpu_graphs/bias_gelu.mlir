func.func @main(%x: tensor<512x768xf32>, %b: tensor<768xf32>) -> tensor<512x768xf32> {
  %r = fusion.group "bias_gelu" kind = "loop" (%x, %b) : (tensor<512x768xf32>, tensor<768xf32>) -> tensor<512x768xf32> {
  ^bb0(%a: tensor<512x768xf32>, %c: tensor<768xf32>):
    %cb = graph.broadcast %c {dims = array<i64: 1>} : tensor<768xf32> -> tensor<512x768xf32>
    %s = graph.add %a, %cb : tensor<512x768xf32>
    %g = graph.gelu %s : tensor<512x768xf32>
    fusion.yield %g : tensor<512x768xf32>
  }
  func.return %r : tensor<512x768xf32>
}
