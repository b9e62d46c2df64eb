// Files the tools write, and crashes: a plain located error, exit status 1, no traceback.

// -o into a missing folder, checked before any work.
// RUN: not mlfuse-opt %s -o %t.missing/out.mlir 2>&1 | filecheck %s --check-prefix=OUT
// OUT: out.mlir: error: cannot write the output to '{{.*}}.missing/out.mlir': no such directory
// OUT-NOT: Traceback

// --reproducer-dir naming a file.
// RUN: echo > %t.file
// RUN: not mlfuse-opt %s -p canonicalize,convert-func-to-x86-func --reproducer-dir %t.file 2>&1 | filecheck %s --check-prefix=REPRODIR
// REPRODIR: mlfuse-opt: error: --reproducer-dir '{{.*}}.file' is not a directory
// REPRODIR-NOT: Traceback

// A bad --fusion-report or --fusion-dot path is no crash of fusion-plan, and leaves no reproducer.
// RUN: not mlfuse-opt %s -p 'fusion-plan{target=cpu}' --fusion-report=%t.missing/plan.json 2>&1 | filecheck %s --check-prefix=REPORT
// REPORT: plan.json: error: cannot write the fusion report to '{{.*}}.missing/plan.json': no such directory
// REPORT-NOT: reproducer
// RUN: not mlfuse-opt %s -p 'fusion-plan{target=cpu}' --fusion-dot=%t.file/plan.dot 2>&1 | filecheck %s --check-prefix=DOT
// DOT: plan.dot: error: cannot write the fusion graph to '{{.*}}.file/plan.dot': no such directory
// RUN: mkdir -p %t.dir
// RUN: not mlfuse-opt %s -p 'fusion-plan{target=cpu}' --fusion-dot=%t.dir 2>&1 | filecheck %s --check-prefix=DOTDIR
// DOTDIR: error: cannot write the fusion graph to '{{.*}}': it is a directory

// Two functions that both hold constants: one module, unique constant symbols.
// RUN: mlfuse-opt %s -p 'canonicalize,fusion-plan{target=cpu},convert-graph-to-loop' | filecheck %s --check-prefix=CONST
// CONST-DAG: sym_name = "__constant_0"
// CONST-DAG: sym_name = "__constant_1"
// RUN: mlfuse-run %s --entry other | filecheck %s --check-prefix=EXEC
// RUN: mlfuse-run %s | filecheck %s --check-prefix=EXEC
// RUN: mlfuse-run %s --entry other --check | filecheck %s --check-prefix=VERIFY
// RUN: mlfuse-opt %S/../passes/canonicalize.mlir -p 'canonicalize,fusion-plan{target=cpu},convert-graph-to-loop,assign-buffers,convert-loop-to-scf,expand-math,convert-to-llvm' -o /dev/null
// EXEC-NOT: Redefinition
// EXEC: output result0: float32[4]
// VERIFY: check result0: ok

// mlfuse-run's input may have any name; a folder is an error, not a parse of its path.
// RUN: not mlfuse-run %t.dir 2>&1 | filecheck %s --check-prefix=FOLDER
// FOLDER: error: could not open input file: Is a directory

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %y = graph.add %x, %c : tensor<4xf32>
  func.return %y : tensor<4xf32>
}

func.func @other(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = graph.constant dense<[5.0, 6.0, 7.0, 8.0]> : tensor<4xf32>
  %y = graph.mul %x, %c : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
