// Resource limits and hostile input: one located error line, exit status 1, no traceback.

// A splat the size of the issue's example is refused by the parser before it allocates.
// RUN: python -c "print('func.func @main() -> tensor<10000x10000xf32> {\n  %%c = graph.constant dense<0.125> : tensor<10000x10000xf32>\n  func.return %%c : tensor<10000x10000xf32>\n}\n', end='')" > %t.splat.mlir
// RUN: not mlfuse-opt %t.splat.mlir 2>&1 | filecheck %s --check-prefix=SPLAT
// SPLAT: splat.mlir:2:38: error: dense literal of 100000000 elements is too large (the limit is 2^22 = 4194304); write a large splat as graph.broadcast of a rank-0 graph.constant
// SPLAT-NOT: Traceback

// A dimension past 2^31 - 1, and a huge integer literal in a dense value.
// RUN: python -c "print('func.func @main(%%x: tensor<99999999999999999999999xf32>) {\n  func.return\n}\n', end='')" > %t.dim.mlir
// RUN: not mlfuse-opt %t.dim.mlir 2>&1 | filecheck %s --check-prefix=DIM
// DIM: dim.mlir:1:28: error: dimension 99999999999999999999999 is too large (the limit is 2^31 - 1)
// RUN: python -c "print('func.func @main(%%x: tensor<65536x65536x65536xf32>) {\n  func.return\n}\n', end='')" > %t.elements.mlir
// RUN: not mlfuse-opt %t.elements.mlir 2>&1 | filecheck %s --check-prefix=ELEMENTS
// ELEMENTS: elements.mlir:1:28: error: shape 65536x65536x65536 has more than 2^40 elements
// RUN: python -c "print('func.func @main() -> tensor<2xi32> {\n  %%c = graph.constant dense<99999999999999999999999> : tensor<2xi32>\n  func.return %%c : tensor<2xi32>\n}\n', end='')" > %t.int.mlir
// RUN: not mlfuse-opt %t.int.mlir 2>&1 | filecheck %s --check-prefix=INT
// INT: int.mlir:2:28: error: Integer value 99999999999999999999999 is out of range for type i32
// INT-NOT: Traceback

// 5000 nested types, and 3000 nested regions: a nesting limit, not a RecursionError.
// RUN: python -c "print('func.func @main(%%x: ' + 'tensor<' * 5000 + 'f32' + '>' * 5000 + ') {\n  func.return\n}')" > %t.deep.mlir
// RUN: not mlfuse-opt %t.deep.mlir 2>&1 | filecheck %s --check-prefix=DEEP
// DEEP: deep.mlir:1:{{[0-9]+}}: error: nesting deeper than 32 levels (regions, types or attributes) is not supported
// DEEP-NOT: Recursion
// RUN: python -c "print('builtin.module {\n' * 3000 + '}\n' * 3000)" > %t.regions.mlir
// RUN: not mlfuse-opt %t.regions.mlir 2>&1 | filecheck %s --check-prefix=REGIONS
// REGIONS: regions.mlir:33:1: error: nesting deeper than 32 levels

// The same limits in mlfuse-run, and for its --shape values.
// RUN: not mlfuse-run %t.splat.mlir 2>&1 | filecheck %s --check-prefix=SPLAT
// RUN: not mlfuse-run %s --shape x=99999999999999999999999 2>&1 | filecheck %s --check-prefix=SHAPE
// SHAPE: <command line>: error: --shape 'x=99999999999999999999999' is too large (dimensions up to 2^31 - 1, 2^40 elements in all)

// bf16 inside a graph: located before the CPU backend fails on it.
// RUN: not mlfuse-run %s --entry bf16 2>&1 | filecheck %s --check-prefix=BF16
// RUN: not mlfuse-opt %s -p 'canonicalize,fusion-plan{target=cpu},convert-graph-to-loop,assign-buffers,convert-loop-to-scf,expand-math,convert-to-llvm' 2>&1 | filecheck %s --check-prefix=BF16
// BF16: limits.mlir:46:3: error: bf16 is not supported by the CPU backend
// BF16-NOT: Traceback

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}

func.func @bf16(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = graph.cast %x : tensor<4xf32> -> tensor<4xbf16>
  %b = graph.exp %a : tensor<4xbf16>
  %y = graph.cast %b : tensor<4xbf16> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
