// RUN: mlfuse-opt %s -p cse | filecheck %s
// RUN: not mlfuse-opt %s -p "cse{bogus=1}" 2>&1 | filecheck %s --check-prefix=BADOPT

// xDSL's cse on graph ops: they are Pure, so identical ops (same name, operands,
// properties and result types) merge; any difference in a property keeps both.

// BADOPT: <pass-pipeline>:1:1: error: invalid pass pipeline 'cse{bogus=1}': Provided arguments ["bogus"] not found in expected arguments []

// CHECK-LABEL: func.func @duplicates
// CHECK-NEXT:    %a = graph.exp %x : tensor<4x8xf32>
// CHECK-NEXT:    %c = graph.add %a, %x : tensor<4x8xf32>
// CHECK-NEXT:    %m = graph.reduce_max %x {axes = array<i64: 1>, keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %k = graph.constant dense<2.000000e+00> : tensor<4x8xf32>
// CHECK-NEXT:    func.return %c, %c, %m, %m, %k, %k
func.func @duplicates(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = graph.exp %x : tensor<4x8xf32>
  %b = graph.exp %x : tensor<4x8xf32>
  %c = graph.add %a, %x : tensor<4x8xf32>
  %d = graph.add %b, %x : tensor<4x8xf32>
  %m = graph.reduce_max %x {axes = array<i64: 1>, keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %n = graph.reduce_max %x {axes = array<i64: 1>, keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %k = graph.constant dense<2.0> : tensor<4x8xf32>
  %l = graph.constant dense<2.0> : tensor<4x8xf32>
  func.return %c, %d, %m, %n, %k, %l : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @different_properties
// CHECK-NEXT:    %s0 = graph.reduce_sum %x {axes = array<i64: 0>}
// CHECK-NEXT:    %s1 = graph.reduce_sum %x {axes = array<i64: 1>}
// CHECK-NEXT:    %lt = graph.compare lt, %x, %y
// CHECK-NEXT:    %gt = graph.compare gt, %x, %y
// CHECK-NEXT:    %g0 = graph.gelu %x : tensor<4x4xf32>
// CHECK-NEXT:    %g1 = graph.gelu %x {approximate = "tanh"} : tensor<4x4xf32>
// CHECK-NEXT:    %t0 = graph.transpose %x {perm = array<i64: 1, 0>}
// CHECK-NEXT:    %t1 = graph.transpose %x {perm = array<i64: 0, 1>}
// CHECK-NEXT:    %c0 = graph.constant dense<1.000000e+00> : tensor<4x4xf32>
// CHECK-NEXT:    %c1 = graph.constant dense<2.000000e+00> : tensor<4x4xf32>
// CHECK-NEXT:    %sub0 = graph.sub %x, %y
// CHECK-NEXT:    %sub1 = graph.sub %y, %x
// CHECK-NEXT:    "test.op"
// CHECK-NEXT:    func.return
func.func @different_properties(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) {
  %s0 = graph.reduce_sum %x {axes = array<i64: 0>} : tensor<4x4xf32> -> tensor<4xf32>
  %s1 = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<4x4xf32> -> tensor<4xf32>
  %lt = graph.compare lt, %x, %y : tensor<4x4xf32>
  %gt = graph.compare gt, %x, %y : tensor<4x4xf32>
  %g0 = graph.gelu %x : tensor<4x4xf32>
  %g1 = graph.gelu %x {approximate = "tanh"} : tensor<4x4xf32>
  %t0 = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<4x4xf32> -> tensor<4x4xf32>
  %t1 = graph.transpose %x {perm = array<i64: 0, 1>} : tensor<4x4xf32> -> tensor<4x4xf32>
  %c0 = graph.constant dense<1.0> : tensor<4x4xf32>
  %c1 = graph.constant dense<2.0> : tensor<4x4xf32>
  %sub0 = graph.sub %x, %y : tensor<4x4xf32>
  %sub1 = graph.sub %y, %x : tensor<4x4xf32>
  "test.op"(%s0, %s1, %lt, %gt, %g0, %g1, %t0, %t1, %c0, %c1, %sub0, %sub1) : (tensor<4xf32>, tensor<4xf32>, tensor<4x4xi1>, tensor<4x4xi1>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  func.return
}

// Inside a fusion group duplicates merge; the groups themselves (kernels with
// regions) are left alone even when identical.
// CHECK-LABEL: func.func @inside_groups
// CHECK:         %r = fusion.group "g" kind = "loop" (%x)
// CHECK-NEXT:    ^bb0(%a: tensor<8xf32>):
// CHECK-NEXT:      %e = graph.exp %a : tensor<8xf32>
// CHECK-NEXT:      %s = graph.add %e, %e : tensor<8xf32>
// CHECK-NEXT:      fusion.yield %s
// CHECK:         %q = fusion.group "g" kind = "loop" (%x)
// CHECK:         func.return %r, %q
func.func @inside_groups(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %r = fusion.group "g" kind = "loop" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    %e = graph.exp %a : tensor<8xf32>
    %f = graph.exp %a : tensor<8xf32>
    %s = graph.add %e, %f : tensor<8xf32>
    fusion.yield %s : tensor<8xf32>
  }
  %q = fusion.group "g" kind = "loop" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    %e = graph.exp %a : tensor<8xf32>
    fusion.yield %e : tensor<8xf32>
  }
  func.return %r, %q : tensor<8xf32>, tensor<8xf32>
}
