func.func @main(%x: tensor<64x128xf32>, %w: tensor<128x32xf32>) -> (tensor<128x64xf32>, tensor<66x130xf32>, tensor<64x32xf32>) {
  %t = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<64x128xf32> -> tensor<128x64xf32>
  %p = graph.pad %x {low = array<i64: 1, 1>, high = array<i64: 1, 1>, value = 0.0 : f32} : tensor<64x128xf32> -> tensor<66x130xf32>
  %m = graph.matmul %x, %w : (tensor<64x128xf32>, tensor<128x32xf32>) -> tensor<64x32xf32>
  func.return %t, %p, %m : tensor<128x64xf32>, tensor<66x130xf32>, tensor<64x32xf32>
}
