// RUN: mlfuse-opt %s -p graph-duplicate-broadcasts | filecheck %s
// RUN: not mlfuse-opt %s -p "graph-duplicate-broadcasts{all=true}" 2>&1 | filecheck %s --check-prefix=BADOPT
// RUN: not mlfuse-opt %S/Inputs/graph-duplicate-broadcasts-invalid.mlir -p graph-duplicate-broadcasts 2>&1 | filecheck %s --check-prefix=INVALID

// A broadcast read by several ops the planner may fuse: each reader gets a copy of its
// own, just before it (mlfuse/duplicate_broadcasts.py); the first keeps the original.

// Invalid input is rejected with its location before the pass runs.
// INVALID: graph-duplicate-broadcasts-invalid.mlir:3:3: error: 'graph.broadcast' operand dimension 0 of size 3 cannot broadcast to result dimension 1 of size 8

// BADOPT: error: invalid pass pipeline 'graph-duplicate-broadcasts{all=true}': Provided arguments ["all"] not found in expected arguments []

// CHECK-LABEL: func.func @two_readers
// CHECK-NEXT:    %b = graph.broadcast %m {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %0 = graph.add %x, %b : tensor<4x8xf32>
// CHECK-NEXT:    %[[B1:.*]] = graph.broadcast %m {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %1 = graph.mul %0, %[[B1]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[B2:.*]] = graph.broadcast %m {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %2 = graph.reduce_sum %[[B2]] {axes = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
// CHECK-NEXT:    func.return %1, %2
func.func @two_readers(%x: tensor<4x8xf32>, %m: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %b = graph.broadcast %m {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
  %0 = graph.add %x, %b : tensor<4x8xf32>
  %1 = graph.mul %0, %b : tensor<4x8xf32>
  %2 = graph.reduce_sum %b {axes = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
  func.return %1, %2 : tensor<4x8xf32>, tensor<8xf32>
}

// An op that reads the broadcast twice is one reader: one copy.
// CHECK-LABEL: func.func @one_reader_twice
// CHECK-NEXT:    %b = graph.broadcast %m
// CHECK-NEXT:    %0 = graph.add %x, %b
// CHECK-NEXT:    %[[B1:.*]] = graph.broadcast %m
// CHECK-NEXT:    %1 = graph.mul %[[B1]], %[[B1]] : tensor<4x8xf32>
// CHECK-NEXT:    func.return %0, %1
func.func @one_reader_twice(%x: tensor<4x8xf32>, %m: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %b = graph.broadcast %m {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
  %0 = graph.add %x, %b : tensor<4x8xf32>
  %1 = graph.mul %b, %b : tensor<4x8xf32>
  func.return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// Readers that cannot fuse a broadcast (the return, a large matmul) share the original;
// each fusible reader gets a copy.
// CHECK-LABEL: func.func @unfusible_readers_share
// CHECK-NEXT:    %b = graph.broadcast %m {dims = array<i64: 1>} : tensor<1024xf32> -> tensor<1024x1024xf32>
// CHECK-NEXT:    %[[B1:.*]] = graph.broadcast %m {dims = array<i64: 1>} : tensor<1024xf32> -> tensor<1024x1024xf32>
// CHECK-NEXT:    %0 = graph.add %x, %[[B1]] : tensor<1024x1024xf32>
// CHECK-NEXT:    %1 = graph.matmul %x, %b : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
// CHECK-NEXT:    func.return %0, %1, %b
func.func @unfusible_readers_share(%x: tensor<1024x1024xf32>, %m: tensor<1024xf32>) -> (tensor<1024x1024xf32>, tensor<1024x1024xf32>, tensor<1024x1024xf32>) {
  %b = graph.broadcast %m {dims = array<i64: 1>} : tensor<1024xf32> -> tensor<1024x1024xf32>
  %0 = graph.add %x, %b : tensor<1024x1024xf32>
  %1 = graph.matmul %x, %b : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  func.return %0, %1, %b : tensor<1024x1024xf32>, tensor<1024x1024xf32>, tensor<1024x1024xf32>
}

// Not transformed: a broadcast with one reader, and ops that are not broadcasts.
// CHECK-LABEL: func.func @left_alone
// CHECK-NEXT:    %b = graph.broadcast %m
// CHECK-NEXT:    %0 = graph.add %x, %b
// CHECK-NEXT:    %1 = graph.exp %0
// CHECK-NEXT:    %2 = graph.add %1, %0
// CHECK-NEXT:    %3 = graph.mul %2, %0
// CHECK-NEXT:    func.return %3
func.func @left_alone(%x: tensor<4x8xf32>, %m: tensor<8xf32>) -> tensor<4x8xf32> {
  %b = graph.broadcast %m {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
  %0 = graph.add %x, %b : tensor<4x8xf32>
  %1 = graph.exp %0 : tensor<4x8xf32>
  %2 = graph.add %1, %0 : tensor<4x8xf32>
  %3 = graph.mul %2, %0 : tensor<4x8xf32>
  func.return %3 : tensor<4x8xf32>
}
