// RUN: mlfuse-opt --help | filecheck %s
// RUN: xdsl-opt -p canonicalize %s | filecheck %s --check-prefix=XDSL
// CHECK: usage: mlfuse-opt
// CHECK: --pass-pipeline
// CHECK: --mlir-print-ir-after-all
// CHECK: --mlir-timing
// CHECK: --reproducer-dir
// XDSL: graph.add
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.add %x, %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
