// RUN: mlfuse-opt %s | mlfuse-opt | filecheck %s
// RUN: mlfuse-opt %s --print-op-generic | mlfuse-opt | filecheck %s
// RUN: mlfuse-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// fusion.group in its custom form, with one and several results, every kind,
// extra attributes kept, and nested in a function next to graph ops.

// CHECK-LABEL: func.func @softmax_row
func.func @softmax_row(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %m = graph.reduce_max %x {axes = array<i64: 1>, keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
  // CHECK-NEXT: %e = fusion.group "fused_broadcast_sub_exp" kind = "loop" (%x, %m) {modeled_bytes = 256 : i64} : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x1xf32>):
  // CHECK-NEXT:   %bb = graph.broadcast %b {dims = array<i64: 0, 1>} : tensor<4x1xf32> -> tensor<4x8xf32>
  // CHECK-NEXT:   %d = graph.sub %a, %bb : tensor<4x8xf32>
  // CHECK-NEXT:   %ex = graph.exp %d : tensor<4x8xf32>
  // CHECK-NEXT:   fusion.yield %ex : tensor<4x8xf32>
  // CHECK-NEXT: }
  // CHECK-NEXT: func.return %e : tensor<4x8xf32>
  %m = graph.reduce_max %x {axes = array<i64: 1>, keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %e = fusion.group "fused_broadcast_sub_exp" kind = "loop" (%x, %m) {modeled_bytes = 256 : i64} : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x1xf32>):
    %bb = graph.broadcast %b {dims = array<i64: 0, 1>} : tensor<4x1xf32> -> tensor<4x8xf32>
    %d = graph.sub %a, %bb : tensor<4x8xf32>
    %ex = graph.exp %d : tensor<4x8xf32>
    fusion.yield %ex : tensor<4x8xf32>
  }
  func.return %e : tensor<4x8xf32>
}

// GENERIC-LABEL: "func.func"() <{sym_name = "softmax_row"
// GENERIC: %e = "fusion.group"(%x, %m) <{group_name = "fused_broadcast_sub_exp", kind = #fusion<group_kind "loop">}> ({
// GENERIC: "fusion.yield"(%ex) : (tensor<4x8xf32>) -> ()
// GENERIC: }) {modeled_bytes = 256 : i64} : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>

// CHECK-LABEL: func.func @kinds
func.func @kinds(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<f32>) {
  // CHECK-NEXT: %s, %t = fusion.group "fused_horizontal" kind = "horizontal" (%x, %y) : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // CHECK-NEXT: ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
  // CHECK-NEXT:   %e = graph.exp %a : tensor<8xf32>
  // CHECK-NEXT:   %l = graph.tanh %b : tensor<8xf32>
  // CHECK-NEXT:   fusion.yield %e, %l : tensor<8xf32>, tensor<8xf32>
  // CHECK-NEXT: }
  // CHECK-NEXT: %r = fusion.group "reduce_sum" kind = "reduce" (%s) : (tensor<8xf32>) -> tensor<f32> {
  // CHECK:      %st = fusion.group "stitch" kind = "stitch" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  // CHECK:      %gm = fusion.group "gemm" kind = "gemm" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  // CHECK:      %gl = fusion.group "global" kind = "global" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  // CHECK:      %sg = fusion.group "single" kind = "single" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  // CHECK:      %none = fusion.group "empty_inputs" kind = "single" () : () -> tensor<8xf32> {
  // CHECK-NEXT:   %c = graph.constant dense<1.000000e+00> : tensor<8xf32>
  // CHECK-NEXT:   fusion.yield %c : tensor<8xf32>
  // CHECK-NEXT: }
  %s, %t = fusion.group "fused_horizontal" kind = "horizontal" (%x, %y) : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    %e = graph.exp %a : tensor<8xf32>
    %l = graph.tanh %b : tensor<8xf32>
    fusion.yield %e, %l : tensor<8xf32>, tensor<8xf32>
  }
  %r = fusion.group "reduce_sum" kind = "reduce" (%s) : (tensor<8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<8xf32>):
    %sum = graph.reduce_sum %a {axes = array<i64: 0>} : tensor<8xf32> -> tensor<f32>
    fusion.yield %sum : tensor<f32>
  }
  %st = fusion.group "stitch" kind = "stitch" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    fusion.yield %a : tensor<8xf32>
  }
  %gm = fusion.group "gemm" kind = "gemm" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    fusion.yield %a : tensor<8xf32>
  }
  %gl = fusion.group "global" kind = "global" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    fusion.yield %a : tensor<8xf32>
  }
  %sg = fusion.group "single" kind = "single" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    fusion.yield %a : tensor<8xf32>
  }
  %none = fusion.group "empty_inputs" kind = "single" () : () -> tensor<8xf32> {
    %c = graph.constant dense<1.0> : tensor<8xf32>
    fusion.yield %c : tensor<8xf32>
  }
  func.return %t, %r : tensor<8xf32>, tensor<f32>
}
