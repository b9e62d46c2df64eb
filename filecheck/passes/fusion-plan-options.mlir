// Options of fusion-plan: invalid values are diagnostics (exit 1), the time limit
// is reported, and --fusion-report / --fusion-dot explain every decision.

// RUN: not mlfuse-opt %s -p 'fusion-plan{planner=fast}' 2>&1 | filecheck %s --check-prefix=PLANNER
// PLANNER: <pass-pipeline>:1:1: error: invalid pass pipeline 'fusion-plan{planner=fast}': unknown planner 'fast' (expected one of ilp, xla, tvm, greedy, none)
// PLANNER-NOT: Traceback

// RUN: not mlfuse-opt %s -p 'fusion-plan{target=tpu}' 2>&1 | filecheck %s --check-prefix=TARGET
// TARGET: <pass-pipeline>:1:1: error: invalid pass pipeline 'fusion-plan{target=tpu}': unknown target 'tpu' (expected one of gpu, cpu)

// RUN: not mlfuse-opt %s -p 'fusion-plan{time-limit=0}' 2>&1 | filecheck %s --check-prefix=TIME
// TIME: error: invalid pass pipeline 'fusion-plan{time-limit=0}': time-limit must be positive, got 0.0

// RUN: not mlfuse-opt %s -p 'fusion-plan{max-group-size=0}' 2>&1 | filecheck %s --check-prefix=SIZE
// SIZE: error: invalid pass pipeline 'fusion-plan{max-group-size=0}': max-group-size must be at least 1, got 0

// RUN: not mlfuse-opt %s -p 'fusion-plan{params="bogus:1"}' 2>&1 | filecheck %s --check-prefix=PARAM
// PARAM: error: invalid pass pipeline 'fusion-plan{params="bogus:1"}': unknown cost-model parameter 'bogus' (known: {{.*}}launch_us{{.*}})

// RUN: not mlfuse-opt %s -p 'fusion-plan{params="launch_us"}' 2>&1 | filecheck %s --check-prefix=PARAMFORM
// PARAMFORM: error: invalid pass pipeline 'fusion-plan{params="launch_us"}': cost-model override 'launch_us' must look like name:value

// RUN: not mlfuse-opt %s -p 'fusion-plan{no-fuse="%nothing"}' 2>&1 | filecheck %s --check-prefix=NOFUSE
// NOFUSE: fusion-plan-options.mlir:{{[0-9]+}}:1: error: fusion-plan: no-fuse entry '%nothing' is neither a graph op name nor the name of a value
// NOFUSE-NOT: Traceback

// RUN: not mlfuse-opt %s -p 'fusion-plan{planner=1}' 2>&1 | filecheck %s --check-prefix=TYPE
// TYPE: error: invalid pass pipeline 'fusion-plan{planner=1}': Incompatible types

// Overrides change the model: the kernel's modeled time drops by 3 us with a 1 us launch.
// RUN: mlfuse-opt %s -p 'fusion-plan{summary=false}' | filecheck %s --check-prefix=DEFAULT
// RUN: mlfuse-opt %s -p 'fusion-plan{params="launch_us:1,max_operands:8" summary=false}' | filecheck %s --check-prefix=OVERRIDE
// DEFAULT: fusion.group "fused_exp_matmul_add" kind = "gemm" {{.*}}modeled_time_us = 5.769500e+00
// OVERRIDE: fusion.group "fused_exp_matmul_add" kind = "gemm" {{.*}}modeled_time_us = 2.769500e+00

// A time limit that runs out falls back to the greedy plan, and says so.
// RUN: mlfuse-opt %s -p 'fusion-plan{time-limit=0.000000001}' 2>&1 >/dev/null | filecheck %s --check-prefix=FALLBACK
// FALLBACK: fusion-plan @main: planner=ilp target=gpu: 3 ops -> 1 kernel {{.*}} [fallback] (ILP with time-limit 1e-09 s: the time limit ran out before an acyclic plan was found; using the greedy plan)

// RUN: mlfuse-opt %s -p 'fusion-plan{no-fuse="%m" summary=false}' --fusion-report=%t.json --fusion-dot=%t.dot | filecheck %s --check-prefix=IR
// RUN: filecheck %s --check-prefix=JSON --input-file=%t.json
// RUN: filecheck %s --check-prefix=DOT --input-file=%t.dot
// IR:      fusion.group "exp" kind = "single"
// IR:      fusion.group "matmul" kind = "single"
// IR:      fusion.group "add" kind = "single"

// JSON:      "planner": "ilp",
// JSON:      "target": "gpu",
// JSON:      "functions": [
// JSON:        "function": "main",
// JSON:        "status": "optimal",
// JSON:        "kernels": 3,
// JSON:        "edges": [
// JSON:          "producer": 0,
// JSON-NEXT:     "consumer": 1,
// JSON-NEXT:     "value": "%e",
// JSON:          "decision": "split",
// JSON-NEXT:     "reason": "no-fuse",
// JSON-NEXT:     "detail": "'graph.matmul' #1 (%m) is named in no-fuse"
// JSON:          "producer": 1,
// JSON-NEXT:     "consumer": 2,
// JSON:          "reason": "no-fuse",

// DOT:      digraph fusion {
// DOT:        subgraph cluster_fn0 { label="@main (ilp)";
// DOT:          subgraph cluster_fn0_k0 { label="exp\nsingle, {{.*}}";
// DOT:            n0_0 [label="'graph.exp' #0 (%e)"];
// DOT:          n0_0 -> n0_1 [style=dashed];

func.func @main(%x: tensor<32x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %e = graph.exp %x : tensor<32x64xf32>
  %m = graph.matmul %e, %w : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x32xf32>
  %a = graph.add %m, %b : tensor<32x32xf32>
  func.return %a : tensor<32x32xf32>
}
