"""fusion-plan: decide which graph ops become one kernel, and wrap each kernel in a fusion.group.

The plan is solved for, not derived from fixed rules: candidate patterns (convex
subgraphs, pruned PatternReduction-style; every valid pattern on small graphs) are
chosen by an ILP (HiGHS via scipy.optimize.milp) that covers every op exactly once,
forbids kernel cycles and minimizes the modeled time of a per-target cost model
(bytes across kernel boundaries, launches, recomputation, on-chip limits, stitching).
The rule-based planners xla, tvm, greedy and none are kept for comparison under the
same model. Library code: mlfuse/analysis/ (op_classes, cost_model, candidates, ilp,
planners, rewrite, report, plan_module).

Options:
  planner=ilp|xla|tvm|greedy|none   (default ilp)
  target=cpu|gpu                    cost-model parameter set (default gpu)
  time-limit=SECONDS                planning budget (candidates and ILP rounds); when it
                                    runs out the best incumbent is used,
                                    on failure the greedy plan; both are reported
  max-group-size=N                  ops per kernel (default 128)
  no-fuse=a,b,...                   ops (exp, or "graph.exp") or values (e, or "%e") kept
                                    alone; entries with '.' or '%' need quotes
  params="name:value,..."           cost-model overrides (see cost_model.TargetParams);
                                    quoted, since ':' is not a bare token
  top-k=K                           candidates kept per op (default 3)
  report=FILE.json, dot=FILE.dot    explanations (mlfuse-opt --fusion-report/--fusion-dot)
  summary=true|false                one line per function on stderr (default true)

Every kernel becomes `fusion.group "<name>" kind = "<kind>"`, named after its ops
(`fused_sub_exp_reduce_sum_div`, broadcasts left out; a single op keeps its own name;
repeated names get a suffix _1, _2, ...), with kind one of fusion.GROUP_KINDS:

  single      one op (every graph op but constants ends up in a group, large GEMMs too)
  loop        elementwise / broadcast / injective ops, everything in registers
  reduce      reductions as tails (or siblings reading one input), no barrier
  stitch      some value is kept in shared memory: a row reduction broadcast back,
              a value needed in two phases, an expensive value broadcast
  global      some value needs a grid-wide barrier (a column or full reduction that
              is broadcast back, or a spilled value)
  gemm        one fine-grained contraction with its elementwise prologue/epilogue
  horizontal  independent parts (no path between them) packed into one kernel; each
              part is a loop/reduce/stitch kernel of its own on its own blocks (no
              grid barrier and no GEMM inside a pack)

and these attributes, which the code generators read:

  modeled_bytes   : i64    bytes the kernel moves to and from memory (model)
  modeled_time_us : f64    its modeled time in microseconds
  stitch          : array of strings, one per op of the region in order: where that
                    op's result lives for its consumers inside the kernel:
                    "register" (the consuming thread computes it, recomputing
                    it if it is read through a broadcast), "shared" (GPU shared memory / CPU per-core
                    scratch; a block barrier separates producer and consumer), "global"
                    (memory plus a grid-wide barrier) or "none" (only used outside).

A value defined in a kernel and used after it is a result of the group
(multi-output); groups are emitted in dependence order; splat constants are cloned
into the groups that use them, dense constants stay outside and are group operands.

Before (-p 'fusion-plan{target=gpu}'):

    func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %m = graph.reduce_max %x {axes = array<i64: 1>, keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
      %b = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<4x1xf32> -> tensor<4x8xf32>
      %d = graph.sub %x, %b : tensor<4x8xf32>
      %e = graph.exp %d : tensor<4x8xf32>
      func.return %e : tensor<4x8xf32>
    }

After:

    func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %e = fusion.group "fused_reduce_max_sub_exp" kind = "stitch" (%x) {modeled_bytes = 256 : i64,
          modeled_time_us = 5.179600e+00 : f64, stitch = ["shared", "register", "register", "none"]}
          : (tensor<4x8xf32>) -> tensor<4x8xf32> {
      ^bb0(%x_1: tensor<4x8xf32>):
        %m = graph.reduce_max %x_1 {axes = array<i64: 1>, keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
        %b = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<4x1xf32> -> tensor<4x8xf32>
        %d = graph.sub %x_1, %b : tensor<4x8xf32>
        %e_1 = graph.exp %d : tensor<4x8xf32>
        fusion.yield %e_1 : tensor<4x8xf32>
      }
      func.return %e : tensor<4x8xf32>
    }

and on stderr: `fusion-plan @main: planner=ilp target=gpu: 4 ops -> 1 kernel (unfused 4),
256 B moved (unfused 928 B), 5.18 us modeled (unfused 20.28 us), planned in 0.006 s [optimal]`.
Existing fusion.group ops and ops of other dialects are left as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.analysis.candidates import DEFAULT_MAX_GROUP_SIZE, DEFAULT_TOP_K
from mlfuse.analysis.plan_module import PlanOptions, fuse_module, parse_param_overrides


@dataclass(frozen=True)
class FusionPlanPass(ModulePass):
    name = "fusion-plan"

    planner: str = "ilp"
    target: str = "gpu"
    time_limit: float | int = 10.0
    max_group_size: int = DEFAULT_MAX_GROUP_SIZE
    no_fuse: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    top_k: int = DEFAULT_TOP_K
    report: str = ""
    dot: str = ""
    summary: bool = True

    def __post_init__(self) -> None:
        self.options().check()  # bad options fail when the pipeline is built

    def options(self) -> PlanOptions:
        return PlanOptions(
            planner=self.planner,
            target=self.target,
            time_limit=float(self.time_limit),
            max_group_size=self.max_group_size,
            no_fuse=tuple(self.no_fuse),
            params=parse_param_overrides(tuple(self.params)),
            top_k=self.top_k,
        )

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse_module(op, self.options(), report=self.report, dot=self.dot, summary=self.summary)
