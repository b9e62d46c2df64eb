// Command-line errors: one line `location: error: message`, exit status 1, no traceback.

// RUN: not mlfuse-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=UNKNOWN
// UNKNOWN: <pass-pipeline>:1:1: error: invalid pass pipeline 'no-such-pass': Unrecognized passes: ['no-such-pass']
// UNKNOWN-NOT: Traceback

// RUN: not mlfuse-opt %s --pass-pipeline="builtin.module(cse,no-such-pass)" 2>&1 | filecheck %s --check-prefix=UNKNOWN2
// UNKNOWN2: <pass-pipeline>:1:1: error: invalid pass pipeline 'cse,no-such-pass': Unrecognized passes: ['no-such-pass']

// RUN: not mlfuse-opt %s -p "cse{bogus=1}" 2>&1 | filecheck %s --check-prefix=BADOPT
// BADOPT: <pass-pipeline>:1:1: error: invalid pass pipeline 'cse{bogus=1}': Provided arguments ["bogus"] not found in expected arguments []

// RUN: not mlfuse-opt %s -p "cse{" 2>&1 | filecheck %s --check-prefix=MALFORMED
// MALFORMED: <pass-pipeline>:1:1: error: invalid pass pipeline 'cse{': Expected argument name here
// MALFORMED-NOT: Traceback

// RUN: not mlfuse-opt %s --pass-pipeline="func.func(cse)" 2>&1 | filecheck %s --check-prefix=NESTED
// NESTED: <pass-pipeline>:1:1: error: only module-level pipelines are supported: expected builtin.module(...), got 'func.func(cse)'

// RUN: not mlfuse-opt %s --no-such-flag 2>&1 | filecheck %s --check-prefix=FLAG
// FLAG: mlfuse-opt: error: unrecognized arguments: --no-such-flag (see mlfuse-opt --help)

// RUN: not mlfuse-opt %s.does-not-exist 2>&1 | filecheck %s --check-prefix=MISSING
// MISSING: errors.mlir.does-not-exist: error: could not open input file: No such file or directory

// RUN: not mlfuse-opt %s -t 'llvm{bogus=1}' 2>&1 | filecheck %s --check-prefix=BADTARGET
// BADTARGET: mlfuse-opt: error: invalid target 'llvm{bogus=1}': Provided arguments ["bogus"] not found in expected arguments ["features"]
// BADTARGET-NOT: Traceback

// RUN: not mlfuse-opt %s -t 'llvm{features=+avx}' 2>&1 | filecheck %s --check-prefix=BADTARGET2
// BADTARGET2: mlfuse-opt: error: invalid target: Unknown token (quote option values that hold '+' or ',': features="+avx2,+fma")
// BADTARGET2-NOT: Traceback

// RUN: mlfuse-opt %s -p cse | filecheck %s --check-prefix=OK
// OK: graph.exp

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = graph.exp %x : tensor<4xf32>
  func.return %e : tensor<4xf32>
}
