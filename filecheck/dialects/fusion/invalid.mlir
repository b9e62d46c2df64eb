// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier errors of the fusion dialect, each checked with its file:line:col.

func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  // the kind is an enum attribute: a value outside it is a parse error at the value
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:32: error: 'fusion.group' kind must be one of loop, stitch, reduce, gemm, horizontal, global, window, single, got 'fancy'
  %r = fusion.group "g" kind = "fancy" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    fusion.yield %a : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}

// -----

func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.group' needs a non-empty name
  %r = fusion.group "" kind = "loop" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    fusion.yield %a : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}

// -----

func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.group' region arguments (tensor<4xf32>) do not match its operands (tensor<8xf32>)
  %r = fusion.group "g" kind = "loop" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<4xf32>):
    %c = graph.constant dense<1.0> : tensor<8xf32>
    fusion.yield %c : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}

// -----

func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %r = fusion.group "g" kind = "loop" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: 'graph.exp' op Operation graph.exp terminates block in single-block region but is not a terminator
    %e = graph.exp %a : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}

// -----

func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.yield' types (tensor<f32>) do not match the results of 'fusion.group' (tensor<8xf32>)
  %r = fusion.group "g" kind = "loop" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    %s = graph.reduce_sum %a {axes = array<i64: 0>} : tensor<8xf32> -> tensor<f32>
    fusion.yield %s : tensor<f32>
  }
  func.return %r : tensor<8xf32>
}

// -----

// A group is isolated from above: every value it uses must enter as an operand.
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.group' op Operation using value defined out of its IsolatedFromAbove parent: AddOp(%e = graph.add %a, %x : tensor<8xf32>)
  %r = fusion.group "g" kind = "loop" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    %e = graph.add %a, %x : tensor<8xf32>
    fusion.yield %e : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}

// -----

func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.yield' expects parent op 'fusion.group'
  fusion.yield %x : tensor<8xf32>
}

// -----

func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.group' op Region 'body' at position 0 expected a single block, but got 2 blocks
  %r = fusion.group "g" kind = "loop" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    fusion.yield %a : tensor<8xf32>
  ^bb1:
    fusion.yield %a : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}

// -----

func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:21: error: attribute expected
  %r = fusion.group kind = "loop" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    fusion.yield %a : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}
