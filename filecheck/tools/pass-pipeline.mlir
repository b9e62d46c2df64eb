// RUN: mlfuse-opt %s --pass-pipeline="builtin.module(canonicalize,cse)" | filecheck %s
// RUN: mlfuse-opt %s -p canonicalize,cse | filecheck %s
// RUN: mlfuse-opt %s -p canonicalize --pass-pipeline="builtin.module(cse)" | filecheck %s
// RUN: mlfuse-opt %s --pass-pipeline="builtin.module(canonicalize,cse)" --mlir-print-ir-after-all 2>&1 | filecheck %s --check-prefix=DUMP
// RUN: mlfuse-opt %s --pass-pipeline="builtin.module(canonicalize,cse)" --mlir-timing 2>&1 | filecheck %s --check-prefix=TIMING
// RUN: mlfuse-opt %s --pass-pipeline="builtin.module()" | filecheck %s --check-prefix=EMPTY

// MLIR-style pipeline flags of mlfuse-opt; -p and --pass-pipeline compose (-p first).

// CHECK-LABEL: func.func @main
// CHECK-NEXT:    %e = graph.exp %x : tensor<4xf32>
// CHECK-NEXT:    %s = graph.add %e, %e : tensor<4xf32>
// CHECK-NEXT:    func.return %s : tensor<4xf32>

// IR after each pass goes to stderr, in pipeline order, then the result to stdout.
// DUMP:      // -----// IR Dump After canonicalize //----- //
// DUMP:        %f = graph.exp %x
// DUMP:      // -----// IR Dump After cse //----- //
// DUMP-NOT:    %f = graph.exp
// DUMP:      builtin.module

// TIMING:      Execution time report
// TIMING:      Total Execution Time: {{[0-9.]+}} seconds
// TIMING:      canonicalize
// TIMING-NEXT: cse
// TIMING-NEXT: Total

// EMPTY: %t = graph.transpose %e {perm = array<i64: 0>}

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = graph.exp %x : tensor<4xf32>
  %f = graph.exp %x : tensor<4xf32>
  %t = graph.transpose %e {perm = array<i64: 0>} : tensor<4xf32> -> tensor<4xf32>
  %s = graph.add %t, %f : tensor<4xf32>
  func.return %s : tensor<4xf32>
}
