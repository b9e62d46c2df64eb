// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p inline | filecheck %s
// RUN: not mlfuse-opt %s -p 'inline{depth=2}' 2>&1 | filecheck %s --check-prefix=BAD

// A private helper is inlined at each of its calls, nested calls included, and erased.
// CHECK-LABEL: func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: %0 = graph.exp %x : tensor<4xf32>
// CHECK-NEXT: %1 = graph.tanh %0 : tensor<4xf32>
// CHECK-NEXT: %2 = graph.exp %1 : tensor<4xf32>
// CHECK-NEXT: %3 = graph.tanh %2 : tensor<4xf32>
// CHECK-NEXT: func.return %3 : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NOT: @outer
// CHECK-NOT: @inner
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @outer(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = func.call @outer(%0) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
func.func private @outer(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @inner(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = graph.tanh %0 : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
func.func private @inner(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// A public callee is inlined too, and kept: someone else may call it.
// CHECK-LABEL: func.func @caller(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: %0 = graph.neg %x : tensor<4xf32>
// CHECK-NEXT: func.return %0 : tensor<4xf32>
// CHECK: func.func @public_callee(%x: tensor<4xf32>) -> tensor<4xf32> {
func.func @caller(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @public_callee(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
func.func @public_callee(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.neg %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// Must not transform: no calls.
// CHECK-LABEL: func.func @no_calls(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: %0 = graph.exp %x : tensor<4xf32>
// CHECK-NEXT: func.return %0 : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: func.func private @unused(%x: tensor<4xf32>) -> tensor<4xf32> {
func.func @no_calls(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
func.func private @unused(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}

// -----

// Invalid: recursion.
func.func @loops(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}inline.mlir:[[# @LINE + 1]]:3: error: @loops calls itself: recursive functions cannot be inlined
  %0 = func.call @loops(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// Invalid: a callee that is only declared.
func.func private @external(tensor<4xf32>) -> tensor<4xf32>
func.func @calls_external(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}inline.mlir:[[# @LINE + 1]]:3: error: cannot inline @external: it is only declared
  %0 = func.call @external(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// BAD: {{.*}}inline{{.*}}depth
