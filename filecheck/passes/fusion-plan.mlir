// RUN: mlfuse-opt %s --split-input-file -p 'fusion-plan{summary=false}' | filecheck %s
// RUN: mlfuse-opt %s --split-input-file -p 'fusion-plan{target=cpu summary=false}' | filecheck %s --check-prefix=CPU
// RUN: mlfuse-opt %s --split-input-file -p 'fusion-plan{planner=xla summary=false}' | filecheck %s --check-prefix=XLA
// RUN: mlfuse-opt %s --split-input-file -p 'fusion-plan{no-fuse=exp summary=false}' | filecheck %s --check-prefix=NOFUSE
// RUN: mlfuse-opt %s --split-input-file -p 'fusion-plan{params="max_registers_per_thread:20" summary=false}' | filecheck %s --check-prefix=REGS
// RUN: mlfuse-opt %s --split-input-file -p 'fusion-plan{max-group-size=2 summary=false}' | filecheck %s --check-prefix=SIZE
// RUN: mlfuse-opt %s --split-input-file -p 'fusion-plan{planner=none summary=false}' | filecheck %s --check-prefix=NONE
// RUN: mlfuse-opt %s --split-input-file -p fusion-plan 2>&1 >/dev/null | filecheck %s --check-prefix=SUMMARY

// Decisions of fusion-plan (passes/fusion_plan.py): what must fuse, what must not.

// SUMMARY: fusion-plan @chain: planner=ilp target=gpu: 3 ops -> 1 kernel (unfused 3), {{.*}} [optimal]
// SUMMARY: fusion-plan @softmax: planner=ilp target=gpu: 7 ops -> 1 kernel (unfused 7)
// SUMMARY: fusion-plan @cycle: planner=ilp target=gpu: 3 ops -> 3 kernels (unfused 3)

// --- an elementwise chain fuses into one loop kernel -------------------------------

// CHECK-LABEL: func.func @chain
// CHECK-NEXT:    %m = fusion.group "fused_sub_exp_mul" kind = "loop" (%x, %y) {modeled_bytes = 12288 : i64, modeled_time_us = {{.*}} : f64, stitch = ["register", "register", "none"]} : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32> {
// CHECK-NEXT:    ^bb0(%x_1: tensor<16x64xf32>, %y_1: tensor<16x64xf32>):
// CHECK-NEXT:      %d = graph.sub %x_1, %y_1
// CHECK-NEXT:      %e = graph.exp %d
// CHECK-NEXT:      %m_1 = graph.mul %e, %y_1
// CHECK-NEXT:      fusion.yield %m_1 : tensor<16x64xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %m
// The register limit (16 + 2 per op) keeps at most two ops together:
// REGS-LABEL: func.func @chain
// REGS:         fusion.group "{{.*}}" kind = "{{loop|single}}"
// REGS:         fusion.group "{{.*}}" kind = "{{loop|single}}"
// REGS-NOT:     fusion.group
// REGS:         func.return
// SIZE-LABEL: func.func @chain
// SIZE-COUNT-2: fusion.group
// SIZE-NOT:     fusion.group
// SIZE:         func.return %m
// NOFUSE-LABEL: func.func @chain
// NOFUSE:         %d = fusion.group "sub" kind = "single"
// NOFUSE:         %e = fusion.group "exp" kind = "single"
// NOFUSE:         %m = fusion.group "mul" kind = "single"
// NONE-LABEL: func.func @chain
// NONE-COUNT-3: kind = "single"
func.func @chain(%x: tensor<16x64xf32>, %y: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %d = graph.sub %x, %y : tensor<16x64xf32>
  %e = graph.exp %d : tensor<16x64xf32>
  %m = graph.mul %e, %y : tensor<16x64xf32>
  func.return %m : tensor<16x64xf32>
}

// -----

// --- a reduction fuses with its consumers: stitched through shared memory -----------

// CHECK-LABEL: func.func @softmax
// CHECK-NEXT:    %y = fusion.group "fused_reduce_max_sub_exp_reduce_sum_div" kind = "stitch" (%x) {{{.*}}stitch = ["shared", "register", "register", "shared", "shared", "register", "none"]}
// CHECK:           fusion.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %y
// CPU-LABEL: func.func @softmax
// CPU-NEXT:    fusion.group "fused_reduce_max_sub_exp_reduce_sum_div" kind = "stitch"
// XLA cannot use a reduction as a producer: three kernels.
// XLA-LABEL: func.func @softmax
// XLA-NEXT:    %m = fusion.group "reduce_max" kind = "single"
// XLA:         %e, %s = fusion.group "fused_sub_exp_reduce_sum" kind = "reduce"
// XLA:         %y = fusion.group "fused_div" kind = "loop"
func.func @softmax(%x: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %m = graph.reduce_max %x {axes = array<i64: 1>, keepdims} : tensor<16x64xf32> -> tensor<16x1xf32>
  %mb = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<16x1xf32> -> tensor<16x64xf32>
  %d = graph.sub %x, %mb : tensor<16x64xf32>
  %e = graph.exp %d : tensor<16x64xf32>
  %s = graph.reduce_sum %e {axes = array<i64: 1>, keepdims} : tensor<16x64xf32> -> tensor<16x1xf32>
  %sb = graph.broadcast %s {dims = array<i64: 0, 1>} : tensor<16x1xf32> -> tensor<16x64xf32>
  %y = graph.div %e, %sb : tensor<16x64xf32>
  func.return %y : tensor<16x64xf32>
}

// -----

// --- a column reduction broadcast back needs a grid-wide barrier ----------------------

// CHECK-LABEL: func.func @column
// CHECK-NEXT:    fusion.group "fused_reduce_sum_mul" kind = "global" {{.*}}stitch = ["global", "register", "none"]
func.func @column(%x: tensor<1024x256xf32>) -> tensor<1024x256xf32> {
  %s = graph.reduce_sum %x {axes = array<i64: 0>, keepdims} : tensor<1024x256xf32> -> tensor<1x256xf32>
  %b = graph.broadcast %s {dims = array<i64: 0, 1>} : tensor<1x256xf32> -> tensor<1024x256xf32>
  %y = graph.mul %x, %b : tensor<1024x256xf32>
  func.return %y : tensor<1024x256xf32>
}

// -----

// --- siblings that read one input share a kernel (it is read once) -------------------

// CHECK-LABEL: func.func @siblings
// CHECK-NEXT:    %s, %ss = fusion.group "fused_reduce_sum_mul_reduce_sum" kind = "reduce" (%x)
// XLA-LABEL: func.func @siblings
// XLA-NEXT:    %s, %ss = fusion.group "fused_reduce_sum_mul_reduce_sum" kind = "reduce" (%x)
func.func @siblings(%x: tensor<16x64xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %s = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<16x64xf32> -> tensor<16xf32>
  %sq = graph.mul %x, %x : tensor<16x64xf32>
  %ss = graph.reduce_sum %sq {axes = array<i64: 1>} : tensor<16x64xf32> -> tensor<16xf32>
  func.return %s, %ss : tensor<16xf32>, tensor<16xf32>
}

// -----

// --- must not fuse: exp and add would wait on each other through the large matmul ---

// CHECK-LABEL: func.func @cycle
// CHECK-NEXT:    %e = fusion.group "exp" kind = "single" (%x)
// CHECK:         %m = fusion.group "matmul" kind = "single" (%e, %w)
// CHECK:         %a = fusion.group "add" kind = "single" (%e, %m)
func.func @cycle(%x: tensor<128x768xf32>, %w: tensor<768x768xf32>) -> tensor<128x768xf32> {
  %e = graph.exp %x : tensor<128x768xf32>
  %m = graph.matmul %e, %w : (tensor<128x768xf32>, tensor<768x768xf32>) -> tensor<128x768xf32>
  %a = graph.add %e, %m : tensor<128x768xf32>
  func.return %a : tensor<128x768xf32>
}

// -----

// --- a small GEMM takes its elementwise prologue and epilogue ------------------------

// CHECK-LABEL: func.func @small_gemm
// CHECK-NEXT:    %r = fusion.group "fused_exp_matmul_relu" kind = "gemm" (%x, %w)
func.func @small_gemm(%x: tensor<32x64xf32>, %w: tensor<64x32xf32>) -> tensor<32x32xf32> {
  %e = graph.exp %x : tensor<32x64xf32>
  %m = graph.matmul %e, %w : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x32xf32>
  %r = graph.relu %m : tensor<32x32xf32>
  func.return %r : tensor<32x32xf32>
}

// -----

// --- a value used inside and after the kernel is a second result ---------------------

// CHECK-LABEL: func.func @multi_output
// CHECK-NEXT:    %e, %m = fusion.group "fused_exp_mul" kind = "loop" (%x)
// CHECK-NEXT:    ^bb0(%x_1: tensor<16x64xf32>):
// CHECK-NEXT:      %c = graph.constant dense<2.000000e+00> : tensor<16x64xf32>
// CHECK:           fusion.yield %e_1, %m_1 : tensor<16x64xf32>, tensor<16x64xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %e, %m
func.func @multi_output(%x: tensor<16x64xf32>) -> (tensor<16x64xf32>, tensor<16x64xf32>) {
  %c = graph.constant dense<2.0> : tensor<16x64xf32>
  %e = graph.exp %x : tensor<16x64xf32>
  %m = graph.mul %e, %c : tensor<16x64xf32>
  func.return %e, %m : tensor<16x64xf32>, tensor<16x64xf32>
}

// -----

// --- independent ops are packed into one horizontal kernel ---------------------------

// CHECK-LABEL: func.func @packing
// CHECK-NEXT:    %a, %b = fusion.group "fused_exp_neg" kind = "horizontal" (%x, %y)
func.func @packing(%x: tensor<16x64xf32>, %y: tensor<8x32xf32>) -> (tensor<16x64xf32>, tensor<8x32xf32>) {
  %a = graph.exp %x : tensor<16x64xf32>
  %b = graph.neg %y : tensor<8x32xf32>
  func.return %a, %b : tensor<16x64xf32>, tensor<8x32xf32>
}

// -----

// --- ops of other dialects stay where they are ---------------------------------------

// CHECK-LABEL: func.func @foreign
// CHECK-NEXT:    %n = fusion.group "fused_exp_neg" kind = "loop" (%x)
// CHECK:         %k = arith.constant 3 : i32
// CHECK-NEXT:    func.return %n, %k
func.func @foreign(%x: tensor<16x64xf32>) -> (tensor<16x64xf32>, i32) {
  %e = graph.exp %x : tensor<16x64xf32>
  %k = arith.constant 3 : i32
  %n = graph.neg %e : tensor<16x64xf32>
  func.return %n, %k : tensor<16x64xf32>, i32
}

// -----

// Row and column reductions of one tensor: the GPU plan stitches them with a grid
// barrier; the CPU plan keeps them apart, since the CPU code generator cannot
// stitch them (mlfuse.conversion.group_to_loop.structural_problem).
// CHECK-LABEL: func.func @row_and_column
// CHECK: fusion.group "fused_reduce_sum_reduce_sum"
// CPU-LABEL: func.func @row_and_column
// CPU-NOT: fusion.group "fused_reduce_sum_reduce_sum"
// CPU: fusion.group "reduce_sum"
// CPU: fusion.group "reduce_sum
func.func @row_and_column(%x: tensor<64x64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %r = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<64x64xf32> -> tensor<64xf32>
  %c = graph.reduce_sum %x {axes = array<i64: 0>} : tensor<64x64xf32> -> tensor<64xf32>
  func.return %r, %c : tensor<64xf32>, tensor<64xf32>
}
