// The GPU target's default pipeline (mlfuse.pipelines.default_pipeline("gpu"); the
// string is checked against it in tests/test_targets.py) plans examples/layernorm.mlir
// into one kernel, and mlfuse-run --target gpu-sim runs that kernel against numpy.
// RUN: mlfuse-opt %s -p 'inline,graph-widen-accumulators,canonicalize,cse,graph-duplicate-broadcasts,fusion-plan{planner=ilp target=gpu summary=false},gpu-map-kernels' -t ptx | filecheck %s
// RUN: mlfuse-run %s --target gpu-sim --check | filecheck %s --check-prefix=SIM
// RUN: mlfuse-run %s --target gpu-sim --no-fuse --check | filecheck %s --check-prefix=SIM
// RUN: not mlfuse-run %s --target nope 2>&1 | filecheck %s --check-prefix=BAD

// CHECK:     .visible .entry fused_reduce_mean_sub_mul_reduce_mean_add_rsqrt_mul_and_2_more(
// CHECK-NOT: .entry
// SIM:       check result0: ok
// BAD:       <command line>: error: --target: unknown target 'nope' (known targets: cpu, gpu, gpu-sim)

// examples/layernorm.mlir with 8 rows instead of 4096 (the simulator is slow): the same
// block-per-row kernel, 256 threads per row of 1024
func.func @main(%x: tensor<8x1024xf32>, %gamma: tensor<1024xf32>, %beta: tensor<1024xf32>) -> tensor<8x1024xf32> {
  %mean = graph.reduce_mean %x {axes = array<i64: 1>, keepdims} : tensor<8x1024xf32> -> tensor<8x1xf32>
  %mean_b = graph.broadcast %mean {dims = array<i64: 0, 1>} : tensor<8x1xf32> -> tensor<8x1024xf32>
  %d = graph.sub %x, %mean_b : tensor<8x1024xf32>
  %d2 = graph.mul %d, %d : tensor<8x1024xf32>
  %var = graph.reduce_mean %d2 {axes = array<i64: 1>, keepdims} : tensor<8x1024xf32> -> tensor<8x1xf32>
  %eps = graph.constant dense<1.0e-05> : tensor<8x1xf32>
  %ve = graph.add %var, %eps : tensor<8x1xf32>
  %r = graph.rsqrt %ve : tensor<8x1xf32>
  %r_b = graph.broadcast %r {dims = array<i64: 0, 1>} : tensor<8x1xf32> -> tensor<8x1024xf32>
  %n = graph.mul %d, %r_b : tensor<8x1024xf32>
  %g = graph.broadcast %gamma {dims = array<i64: 1>} : tensor<1024xf32> -> tensor<8x1024xf32>
  %b = graph.broadcast %beta {dims = array<i64: 1>} : tensor<1024xf32> -> tensor<8x1024xf32>
  %s = graph.mul %n, %g : tensor<8x1024xf32>
  %y = graph.add %s, %b : tensor<8x1024xf32>
  %y2 = graph.reshape %y : tensor<8x1024xf32> -> tensor<8x1024xf32>
  func.return %y2 : tensor<8x1024xf32>
}
