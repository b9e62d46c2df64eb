"""Explaining a fusion plan: every edge's decision and reason, DOT, one summary line.

Edge reasons (the `reason` field of the JSON report):

- `fused`: both ops are in one kernel; `stitch` says where the value lives;
- `no-fuse`: an end of the edge was named in the pass's no-fuse option;
- `op-class`: an end cannot share a kernel (large GEMM, opaque op, GEMM with a
  reduction, two GEMMs, a grid barrier in a horizontal pack);
- `cycle`: another path joins the two ops through an op that cannot join them, or
  merging their kernels would make kernels wait on each other;
- `resource-limit`: operands, registers, threads or shared memory over the limit
  (for the two ops, or for the merge of their two kernels);
- `size-limit`: over max-group-size;
- `cost`: merging their kernels is possible but the modeled time is not lower;
- `pruned`: the merge would be cheaper but candidate generation did not offer it;
- `planner-rule`: a rule-based planner's rule refused it (the rule is in `detail`).

`function_report` also lists every kernel (ops, kind, bytes, time, stitching,
shared memory, registers, recomputation, barriers) and the solver's statistics.
"""

from __future__ import annotations

import json
from typing import Any

from mlfuse.analysis.candidates import check_pattern
from mlfuse.analysis.cost_model import CostModel
from mlfuse.analysis.fusion_graph import FusionGraph, Partition, bits
from mlfuse.analysis.planners import Plan
from mlfuse.analysis.rewrite import group_name
from mlfuse.diagnostics import format_location


class SplitExplainer:
    """Why producer p and consumer c of an edge ended up in different kernels."""

    def __init__(self, fgraph: FusionGraph, model: CostModel, plan: Plan, max_group_size: int):
        self.graph, self.model, self.plan = fgraph, model, plan
        self.max_group_size = max_group_size
        self.owner = {i: gi for gi, m in enumerate(plan.groups) for i in bits(m)}
        self.names = kernel_names(fgraph, plan)
        self.partition = Partition(fgraph, plan.groups)

    def explain(self, p: int, c: int) -> tuple[str, str]:
        g, model, plan = self.graph, self.model, self.plan
        for i in (p, c):
            if g.nodes[i].no_fuse:
                return "no-fuse", f"{g.node_label(i)} is named in no-fuse"
        for i in (p, c):
            if not g.nodes[i].fusible:
                return "op-class", f"{g.node_label(i)} is a {g.nodes[i].info.describe()}: it runs alone"
        if (p, c) in plan.edge_reasons:
            return plan.edge_reasons[(p, c)]
        pair = (1 << p) | (1 << c)
        closure = g.convex_closure(pair)
        if closure != pair:
            via = ", ".join(g.node_label(i) for i in list(bits(closure & ~pair))[:3])
            return "cycle", f"another path from producer to consumer runs through {via}"
        verdict = check_pattern(g, model, pair, self.max_group_size)
        if not verdict.ok:
            return verdict.category, verdict.reason
        # the ops could share a kernel: why were their two kernels not merged?
        a, b = plan.groups[self.owner[p]], plan.groups[self.owner[c]]
        merged = a | b
        what = f"merging kernels {self.names[self.owner[p]]} and {self.names[self.owner[c]]}"
        verdict = check_pattern(g, model, merged, self.max_group_size)
        if not verdict.ok:
            return verdict.category, f"{what}: {verdict.reason}"
        part = self.partition
        if part.creates_cycle(part.group_of(p), part.group_of(c)):
            return "cycle", f"{what} would make them wait on each other through a third kernel"
        t_merged, t_apart = model.time(merged), model.time(a) + model.time(b)
        if t_merged >= t_apart:
            return "cost", f"{what} takes {t_merged:.3f} us against {t_apart:.3f} us apart"
        if plan.pool is not None and merged not in plan.pool.by_mask:
            return "pruned", f"{what} would save {t_apart - t_merged:.3f} us but was not a candidate"
        return "cost", (f"{what} saves {t_apart - t_merged:.3f} us here, "
                        "but the plan as a whole is cheaper without it")


def node_entry(fgraph: FusionGraph, i: int) -> dict[str, Any]:
    node = fgraph.nodes[i]
    return {
        "id": i,
        "op": node.op.name,
        "class": node.info.describe(),
        "loc": format_location(node.op.location),
        "result": fgraph.value_name(node.results[0]) if node.results else None,
    }


def function_report(fgraph: FusionGraph, model: CostModel, plan: Plan, baseline: Plan,
                    max_group_size: int) -> dict[str, Any]:
    owner: dict[int, int] = {}
    for gi, m in enumerate(plan.groups):
        for i in bits(m):
            owner[i] = gi
    names = kernel_names(fgraph, plan)
    explainer = SplitExplainer(fgraph, model, plan, max_group_size)
    edges = []
    for c in range(len(fgraph)):
        for p in fgraph.preds[c]:
            values = sorted({v for v in fgraph.nodes[c].operands if fgraph.values[v].producer == p})
            entry: dict[str, Any] = {
                "producer": p,
                "consumer": c,
                "value": fgraph.value_name(values[0]),
                "bytes": sum(fgraph.values[v].nbytes for v in values),
            }
            if owner[p] == owner[c]:
                gi = owner[p]
                entry.update(decision="fused", reason="fused", kernel=names[gi],
                             stitch=plan.costs[gi].stitch.get(p, "register"),
                             detail=f"{plan.costs[gi].kind} kernel {names[gi]}")
            else:
                category, detail = explainer.explain(p, c)
                entry.update(decision="split", reason=category, detail=detail)
            edges.append(entry)
    solve = plan.solve
    return {
        "function": fgraph.fn.sym_name.data if fgraph.fn is not None else "",
        "planner": plan.planner,
        "status": plan.status,
        "message": plan.message,
        "ops": len(fgraph),
        "kernels": plan.kernels,
        "modeled_bytes": plan.bytes,
        "modeled_time_us": round(plan.time_us, 4),
        "unfused": {"kernels": baseline.kernels, "modeled_bytes": baseline.bytes,
                    "modeled_time_us": round(baseline.time_us, 4)},
        "plan_time_s": round(plan.plan_time_s, 4),
        "solver": None if solve is None else {
            "status": solve.status,
            "message": solve.message,
            "solve_time_s": round(solve.solve_time_s, 4),
            "candidates": solve.candidates,
            "conflict_pairs": solve.conflicts,
            "cycle_cuts": solve.cycle_cuts,
            "rounds": solve.rounds,
            "rejected_patterns": dict(plan.pool.rejected) if plan.pool is not None else {},
        },
        "nodes": [node_entry(fgraph, i) for i in range(len(fgraph))],
        "kernels_detail": [
            {
                "name": names[gi],
                "kind": cost.kind,
                "ops": list(bits(m)),
                "modeled_bytes": cost.bytes,
                "modeled_time_us": round(cost.time_us, 4),
                "stitch": {str(i): s for i, s in sorted(cost.stitch.items())},
                "shared_bytes": cost.smem_bytes,
                "registers": cost.registers,
                "recompute_flops": cost.recompute_flops,
                "global_barriers": cost.global_barriers,
            }
            for gi, (m, cost) in enumerate(zip(plan.groups, plan.costs))
        ],
        "edges": edges,
    }


def kernel_names(fgraph: FusionGraph, plan: Plan) -> list[str]:
    used: dict[str, int] = {}
    names = []
    for m in plan.groups:
        name = group_name(fgraph, m)
        k = used.get(name, 0)
        used[name] = k + 1
        names.append(name if k == 0 else f"{name}_{k}")
    return names


def write_report(path: str, header: dict[str, Any], functions: list[dict[str, Any]]) -> None:
    with open(path, "w") as f:
        json.dump({**header, "functions": functions}, f, indent=1)
        f.write("\n")


def dot_text(items: list[tuple[FusionGraph, Plan]]) -> str:
    """Graphviz: one cluster per kernel, fused edges labelled with their stitching."""
    lines = ["digraph fusion {", "  compound=true;", "  node [shape=box, fontsize=10];"]
    for fi, (fgraph, plan) in enumerate(items):
        fname = fgraph.fn.sym_name.data if fgraph.fn is not None else f"f{fi}"
        owner: dict[int, int] = {}
        names = kernel_names(fgraph, plan)
        lines.append(f'  subgraph cluster_fn{fi} {{ label="@{fname} ({plan.planner})";')
        for gi, (m, cost) in enumerate(zip(plan.groups, plan.costs)):
            lines.append(
                f'    subgraph cluster_fn{fi}_k{gi} {{ label="{names[gi]}\\n{cost.kind}, '
                f'{cost.time_us:.2f} us, {cost.bytes} B"; style=rounded;'
            )
            for i in bits(m):
                owner[i] = gi
                label = fgraph.node_label(i).replace('"', '\\"')
                lines.append(f'      n{fi}_{i} [label="{label}"];')
            lines.append("    }")
        for c in range(len(fgraph)):
            for p in fgraph.preds[c]:
                if owner[p] == owner[c]:
                    scheme = plan.costs[owner[p]].stitch.get(p, "register")
                    lines.append(f'    n{fi}_{p} -> n{fi}_{c} [label="{scheme}"];')
                else:
                    lines.append(f"    n{fi}_{p} -> n{fi}_{c} [style=dashed];")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def format_bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def summary_line(fgraph: FusionGraph, plan: Plan, baseline: Plan, target: str) -> str:
    fname = fgraph.fn.sym_name.data if fgraph.fn is not None else "?"
    status = plan.status if plan.planner == "ilp" else "rules"
    note = f" ({plan.message})" if plan.status in ("time-limit", "fallback") else ""
    kernels = "kernel" if plan.kernels == 1 else "kernels"
    return (
        f"fusion-plan @{fname}: planner={plan.planner} target={target}: {len(fgraph)} ops -> "
        f"{plan.kernels} {kernels} (unfused {baseline.kernels}), {format_bytes(plan.bytes)} moved "
        f"(unfused {format_bytes(baseline.bytes)}), {plan.time_us:.2f} us modeled "
        f"(unfused {baseline.time_us:.2f} us), planned in {plan.plan_time_s:.3f} s [{status}]{note}"
    )
