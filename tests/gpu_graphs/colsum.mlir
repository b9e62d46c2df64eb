func.func @main(%x: tensor<4096x64xf32>) -> tensor<64xf32> {
  %r = fusion.group "colsum" kind = "reduce" (%x) : (tensor<4096x64xf32>) -> tensor<64xf32> {
  ^bb0(%a: tensor<4096x64xf32>):
    %e = graph.exp %a : tensor<4096x64xf32>
    %s = graph.reduce_sum %e {axes = array<i64: 0>} : tensor<4096x64xf32> -> tensor<64xf32>
    fusion.yield %s : tensor<64xf32>
  }
  func.return %r : tensor<64xf32>
}
