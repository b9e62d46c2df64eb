"""Fusion planners on the graph suite: kernels, bytes moved, modeled time, solve time.

    .venv/bin/python bench/plan_table.py                 # GPU model, every graph
    .venv/bin/python bench/plan_table.py --target cpu --graphs layernorm softmax
    .venv/bin/python bench/plan_table.py --json plans.json

The first table counts kernels per planner, in the spirit of FusionStitching's
Table 2 (memory-intensive kernels under TF / XLA / FusionStitching); the second
gives, per graph and planner, the kernels, the bytes moved to and from memory, the
modeled time and the time the planner took. Everything is under one cost model
(mlfuse/analysis/cost_model.py), so the columns compare plans, not code generators.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.graphs import SUITE, WINDOW_SUITE, entry_function  # noqa: E402

GRAPHS = {**SUITE, **WINDOW_SUITE}
from mlfuse.analysis.cost_model import CostModel, TargetParams  # noqa: E402
from mlfuse.analysis.fusion_graph import FusionGraph  # noqa: E402
from mlfuse.analysis.planners import PLANNERS, plan_function  # noqa: E402

ORDER = ("none", "xla", "tvm", "greedy", "ilp")
assert set(ORDER) == set(PLANNERS)
SOLVE_BUDGET_S = 2.0  # the ILP must plan the BERT layer and the 500-op stack within this


def run(names: list[str], target: str, time_limit: float) -> list[dict]:
    rows = []
    for name in names:
        fgraph = FusionGraph.from_function(entry_function(GRAPHS[name].build()))
        model = CostModel(fgraph, TargetParams.for_target(target))
        for planner in ORDER:
            start = time.perf_counter()
            plan = plan_function(fgraph, model, planner, time_limit=time_limit)
            elapsed = time.perf_counter() - start
            rows.append({
                "graph": name,
                "ops": len(fgraph),
                "planner": planner,
                "kernels": plan.kernels,
                "bytes": plan.bytes,
                "time_us": plan.time_us,
                "solve_s": elapsed,
                "status": plan.status if planner == "ilp" else "",
                "candidates": plan.solve.candidates if plan.solve else None,
            })
    return rows


def print_tables(rows: list[dict], target: str, out=sys.stdout) -> list[str]:
    graphs = list(dict.fromkeys(r["graph"] for r in rows))
    by = {(r["graph"], r["planner"]): r for r in rows}
    print(f"\n== fusion plans, target {target} ==\n", file=out)
    head = f"{'kernels':<26}{'ops':>5}" + "".join(f"{p:>8}" for p in ORDER)
    print(head, file=out)
    print("-" * len(head), file=out)
    for g in graphs:
        print(f"{g:<26}{by[(g, 'none')]['ops']:>5}" + "".join(f"{by[(g, p)]['kernels']:>8}" for p in ORDER),
              file=out)
    total = {p: sum(by[(g, p)]["kernels"] for g in graphs) for p in ORDER}
    print(f"{'total':<31}" + "".join(f"{total[p]:>8}" for p in ORDER), file=out)

    print(file=out)
    head = (f"{'graph':<26}{'planner':<8}{'kernels':>8}{'MB moved':>11}{'time us':>11}"
            f"{'vs none':>9}{'solve s':>9}  status")
    print(head, file=out)
    print("-" * len(head), file=out)
    problems = []
    for g in graphs:
        base = by[(g, "none")]["time_us"]
        for p in ORDER:
            r = by[(g, p)]
            print(f"{g if p == ORDER[0] else '':<26}{p:<8}{r['kernels']:>8}{r['bytes'] / 1e6:>11.3f}"
                  f"{r['time_us']:>11.2f}{base / r['time_us']:>8.2f}x{r['solve_s']:>9.3f}  {r['status']}",
                  file=out)
        ilp = by[(g, "ilp")]
        worse = [p for p in ("xla", "tvm", "greedy") if ilp["time_us"] > by[(g, p)]["time_us"] * (1 + 1e-12)]
        if worse:
            problems.append(f"{g}: ILP plan slower than {', '.join(worse)} under the model")
        if g in ("bert_layer", "stacked_bert") and ilp["solve_s"] > SOLVE_BUDGET_S:
            problems.append(f"{g}: ILP planning took {ilp['solve_s']:.2f} s > {SOLVE_BUDGET_S} s")
        if ilp["status"] != "optimal":
            problems.append(f"{g}: ILP status {ilp['status']}")
    print(file=out)
    for g in ("layernorm", "softmax", "bert_layer"):
        if (g, "ilp") in by:
            ilp_k, xla_k = by[(g, "ilp")]["kernels"], by[(g, "xla")]["kernels"]
            mark = "ok" if ilp_k < xla_k else "NOT FEWER"
            print(f"{g}: ILP {ilp_k} kernels vs XLA {xla_k} ({mark})", file=out)
            if ilp_k >= xla_k:
                problems.append(f"{g}: ILP does not use fewer kernels than XLA")
    for g in ("bert_layer", "stacked_bert"):
        if (g, "ilp") in by:
            r = by[(g, "ilp")]
            print(f"{g} ({r['ops']} ops): ILP planned in {r['solve_s']:.3f} s (budget {SOLVE_BUDGET_S} s)",
                  file=out)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=("gpu", "cpu", "both"), default="gpu")
    parser.add_argument("--graphs", nargs="*", default=list(GRAPHS), choices=list(GRAPHS), metavar="GRAPH",
                        help=f"graphs to plan (default all: {', '.join(GRAPHS)})")
    parser.add_argument("--time-limit", type=float, default=10.0, help="ILP time limit in seconds")
    parser.add_argument("--json", type=str, default=None, help="also write the rows as JSON")
    args = parser.parse_args(argv)
    targets = ("gpu", "cpu") if args.target == "both" else (args.target,)
    all_rows, problems = {}, []
    for target in targets:
        rows = run(args.graphs, target, args.time_limit)
        all_rows[target] = rows
        problems += [f"[{target}] {p}" for p in print_tables(rows, target)]
    if args.json:
        Path(args.json).write_text(json.dumps(all_rows, indent=1) + "\n")
    if problems:
        print("\nproblems:\n  " + "\n  ".join(problems))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
