// RUN: rm -rf %t
// RUN: not mlfuse-opt %s -p canonicalize,convert-func-to-x86-func --reproducer-dir %t 2>&1 | filecheck %s
// RUN: cat %t/mlfuse-repro-*.mlir | filecheck %s --check-prefix=REPRO

// A pass that fails leaves a reproducer: the input IR with the pipeline in a
// RUN comment. No mlfuse pass fails on valid graph IR, so this uses an xDSL pass
// that rejects tensor arguments (convert-func-to-x86-func).

// CHECK: <pass convert-func-to-x86-func>: error: pass 'convert-func-to-x86-func' failed: {{.*}}Cannot lower shaped function parameters
// CHECK-NEXT: reproducer written to {{.*}}mlfuse-repro-{{.*}}.mlir
// CHECK-NOT: Traceback

// REPRO:      // mlfuse-opt reproducer: failing pass 'convert-func-to-x86-func'
// REPRO-NEXT: // {{RUN}}: mlfuse-opt %s -p 'canonicalize,convert-func-to-x86-func'
// REPRO:      func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
// REPRO-NEXT:   %e = graph.exp %x : tensor<4xf32>

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = graph.exp %x : tensor<4xf32>
  func.return %e : tensor<4xf32>
}
