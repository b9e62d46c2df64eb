"""Plan and rewrite every function of a module: the library behind `fusion-plan`.

    results = fuse_module(module, PlanOptions(planner="ilp", target="gpu"))
    for r in results:
        print(r.summary)

`PlanOptions.check()` validates the options (ValueError with a message);
`resolve_no_fuse` maps no-fuse entries to ops. A no-fuse entry is a graph op name
(`graph.exp` or `exp`: every such op) or an SSA value name (`%e` or `e`: the op
defining it); an entry that is neither raises a `Diagnostic`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from mlfuse.analysis.candidates import DEFAULT_EXHAUSTIVE_LIMIT, DEFAULT_MAX_GROUP_SIZE, DEFAULT_TOP_K
from mlfuse.analysis.cost_model import TARGETS, CostModel, TargetParams
from mlfuse.analysis.fusion_graph import FusionGraph
from mlfuse.analysis.planners import PLANNERS, Plan, plan_function
from mlfuse.analysis.report import dot_text, function_report, summary_line, write_report
from mlfuse.analysis.rewrite import apply_plan
from mlfuse.diagnostics import Diagnostic, location_of
from mlfuse.dialects import graph


@dataclass(frozen=True)
class PlanOptions:
    planner: str = "ilp"
    target: str = "gpu"
    time_limit: float = 10.0
    max_group_size: int = DEFAULT_MAX_GROUP_SIZE
    no_fuse: tuple[str, ...] = ()
    params: dict[str, float] = field(default_factory=dict)
    top_k: int = DEFAULT_TOP_K
    exhaustive_limit: int = DEFAULT_EXHAUSTIVE_LIMIT

    def check(self) -> None:
        if self.planner not in PLANNERS:
            raise ValueError(f"unknown planner '{self.planner}' (expected one of {', '.join(PLANNERS)})")
        if self.target not in TARGETS:
            raise ValueError(f"unknown target '{self.target}' (expected one of {', '.join(TARGETS)})")
        if not self.time_limit > 0:
            raise ValueError(f"time-limit must be positive, got {self.time_limit}")
        if self.max_group_size < 1:
            raise ValueError(f"max-group-size must be at least 1, got {self.max_group_size}")
        if self.top_k < 1:
            raise ValueError(f"top-k must be at least 1, got {self.top_k}")
        self.target_params()

    def target_params(self) -> TargetParams:
        return TargetParams.for_target(self.target, **self.params)


def split_entries(entries: tuple[str, ...]) -> list[str]:
    """Option entries, also split at commas inside quoted strings ("a,b")."""
    return [part.strip() for entry in entries for part in entry.split(",") if part.strip()]


def parse_param_overrides(entries: tuple[str, ...]) -> dict[str, float]:
    """`("launch_us:2", "onchip_bytes=16384")` -> {"launch_us": 2.0, ...}."""
    out: dict[str, float] = {}
    for entry in split_entries(entries):
        sep = ":" if ":" in entry else "="
        key, found, value = entry.partition(sep)
        if not found or not key.strip():
            raise ValueError(f"cost-model override '{entry}' must look like name:value")
        try:
            out[key.strip().replace("-", "_")] = float(value)
        except ValueError:
            raise ValueError(f"cost-model override '{entry}': '{value}' is not a number") from None
    return out


def functions_of(module: ModuleOp) -> list[func.FuncOp]:
    return [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks]


def resolve_no_fuse(module: ModuleOp, entries: tuple[str, ...]) -> dict[func.FuncOp, frozenset[int]]:
    """Positions (in the function body) of the ops each function must not fuse."""
    op_names = {op.name for op in graph.Graph.operations}
    pinned: dict[func.FuncOp, set[int]] = {fn: set() for fn in functions_of(module)}
    for entry in split_entries(entries):
        key = entry.removeprefix("%")
        by_op = key if key in op_names else f"graph.{key}" if f"graph.{key}" in op_names else None
        matched = False
        for fn, positions in pinned.items():
            for position, op in enumerate(fn.body.block.ops):
                hit = op.name == by_op if by_op else any(r.name_hint == key for r in op.results)
                if hit:
                    positions.add(position)
                    matched = True
        if not matched and by_op is None:  # a graph op absent here is fine; a stray name is a typo
            raise Diagnostic(
                f"fusion-plan: no-fuse entry '{entry}' is neither a graph op name nor the name of a value",
                location_of(next(iter(pinned), None)),
            )
    return {fn: frozenset(p) for fn, p in pinned.items()}


@dataclass
class FunctionResult:
    name: str
    plan: Plan
    baseline: Plan
    report: dict[str, Any]
    summary: str
    graph: FusionGraph
    groups: list = field(default_factory=list)


def fuse_module(
    module: ModuleOp,
    options: PlanOptions,
    report: str = "",
    dot: str = "",
    summary: bool = True,
) -> list[FunctionResult]:
    """Plan every function with `options`, rewrite it into fusion groups, and explain."""
    options.check()
    params = options.target_params()
    pinned = resolve_no_fuse(module, options.no_fuse)
    results: list[FunctionResult] = []
    for fn in functions_of(module):
        if len(fn.body.blocks) != 1:
            raise Diagnostic(f"fusion-plan: @{fn.sym_name.data} has {len(fn.body.blocks)} blocks; "
                             "only single-block functions can be planned", location_of(fn))
        fgraph = FusionGraph.from_function(fn, params.fine_gemm_flops, pinned.get(fn, frozenset()))
        model = CostModel(fgraph, params)
        plan = plan_function(fgraph, model, options.planner, options.time_limit,
                             options.max_group_size, options.top_k, options.exhaustive_limit)
        baseline = plan if options.planner == "none" else plan_function(fgraph, model, "none")
        entry = function_report(fgraph, model, plan, baseline, options.max_group_size)
        line = summary_line(fgraph, plan, baseline, options.target)
        results.append(FunctionResult(fn.sym_name.data, plan, baseline, entry, line, fgraph))
    if dot:
        with open(dot, "w") as f:
            f.write(dot_text([(r.graph, r.plan) for r in results]))
    if report:
        header = {
            "planner": options.planner,
            "target": options.target,
            "time_limit_s": options.time_limit,
            "max_group_size": options.max_group_size,
            "no_fuse": list(options.no_fuse),
            "params": params.as_dict(),
        }
        write_report(report, header, [r.report for r in results])
    for r in results:
        r.groups = apply_plan(r.graph, r.plan.groups, r.plan.costs)
        if summary:
            print(r.summary, file=sys.stderr)
    return results
