"""The ILP finds the optimal plan: brute force over every valid plan agrees.

Random graphs of up to 12 ops (elementwise chains, row and column reductions with
broadcasts back, transposes, small GEMMs) are planned by the ILP and by an
independent exhaustive search: every valid pattern (`check_pattern`: size, convexity,
cost-model feasibility) is enumerated, and a dynamic program over the downward-closed
sets of ops (a plan is acyclic exactly when its kernels can be run one after another,
each after all of its producers) finds the cheapest partition into valid patterns.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.dialects import func

from mlfuse.analysis.candidates import DEFAULT_MAX_GROUP_SIZE, check_pattern
from mlfuse.analysis.cost_model import CostModel, TargetParams
from mlfuse.analysis.fusion_graph import FusionGraph, bits
from mlfuse.analysis.ilp import find_kernel_cycle
from mlfuse.analysis.planners import plan_function
from mlfuse.frontend.builder import GraphBuilder, Tensor

# Plans, not speed, are checked here: a generous limit keeps a loaded machine (candidate
# generation eats into the budget) from turning "optimal" into the greedy fallback.
# Solve time is measured by bench/plan_table.py.
SOLVE_LIMIT_S = 300.0

N = 8  # tensors are N x N so that transposes and GEMMs compose with everything
MAX_OPS = 12

# action -> ops it adds
ACTIONS = {"unary": 1, "binary": 1, "row_reduce": 3, "column_reduce": 3, "transpose": 1, "matmul": 1,
           "expensive": 1}


def random_graph(steps: list[tuple[int, int, int]]) -> FusionGraph:
    """Build a function from (action, pick, pick) triples; stop before MAX_OPS ops."""
    b = GraphBuilder()
    full: list[Tensor] = [b.input("x", (N, N)), b.input("y", (N, N))]
    used: set[int] = set()

    def pick(k: int) -> Tensor:
        t = full[k % len(full)]
        used.add(id(t))
        return t

    ops = 0
    for action, p, q in steps:
        kind = list(ACTIONS)[action % len(ACTIONS)]
        if ops + ACTIONS[kind] > MAX_OPS:
            break
        ops += ACTIONS[kind]
        if kind == "unary":
            t = b.neg(pick(p)) if q % 2 else b.relu(pick(p))
        elif kind == "expensive":
            t = b.exp(pick(p)) if q % 2 else b.tanh(pick(p))
        elif kind == "binary":
            a, c = pick(p), pick(q)
            t = a + c if (p + q) % 3 else a * c
        elif kind == "row_reduce":
            t = pick(p) - b.max(pick(p), axis=-1, keepdims=True)  # reduce, broadcast, sub
        elif kind == "column_reduce":
            t = pick(p) * b.sum(pick(p), axis=0, keepdims=True)
        elif kind == "transpose":
            t = b.transpose(pick(p), (1, 0))
        else:
            t = b.matmul(pick(p), pick(q))
        full.append(t)
    sinks = [t for t in full[2:] if id(t) not in used] or [full[-1]]
    b.output(*sinks)
    module = b.module()
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return FusionGraph.from_function(fn)


def brute_force_optimum(fgraph: FusionGraph, model: CostModel) -> float:
    n = len(fgraph)
    valid, costs, needs = [], [], []
    for mask in range(1, 1 << n):
        if check_pattern(fgraph, model, mask, DEFAULT_MAX_GROUP_SIZE).ok:
            valid.append(mask)
            costs.append(model.time(mask))
            needs.append(fgraph.external_preds(mask))
    masks = np.array(valid, dtype=np.int64)
    cost = np.array(costs)
    preds = np.array(needs, dtype=np.int64)
    best = np.full(1 << n, np.inf)
    best[0] = 0.0
    for done in range(1 << n):  # every step adds ops, so states only grow numerically
        if not np.isfinite(best[done]):
            continue
        ok = ((masks & done) == 0) & ((preds & ~done) == 0)
        np.minimum.at(best, masks[ok] | done, best[done] + cost[ok])
    return float(best[(1 << n) - 1])


steps_strategy = st.lists(
    st.tuples(st.integers(0, 100), st.integers(0, 100), st.integers(0, 100)), min_size=1, max_size=12
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps_strategy, target=st.sampled_from(["gpu", "cpu"]))
def test_ilp_matches_brute_force(steps, target):
    fgraph = random_graph(steps)
    assert 1 <= len(fgraph) <= MAX_OPS
    model = CostModel(fgraph, TargetParams.for_target(target))
    plan = plan_function(fgraph, model, "ilp", time_limit=SOLVE_LIMIT_S)
    assert plan.status == "optimal"
    covered = 0
    for m in plan.groups:
        assert not covered & m
        covered |= m
        assert check_pattern(fgraph, model, m, DEFAULT_MAX_GROUP_SIZE).ok
    assert covered == fgraph.all_mask
    assert find_kernel_cycle(fgraph, plan.groups) is None
    optimum = brute_force_optimum(fgraph, model)
    assert abs(plan.time_us - optimum) <= 1e-9 * max(1.0, optimum)


def test_brute_force_sees_the_cheaper_fused_plan():
    """The brute force itself is not trivially 'all singletons'."""
    fgraph = random_graph([(0, 0, 0), (6, 2, 1), (1, 2, 3)])
    model = CostModel(fgraph, TargetParams.for_target("gpu"))
    unfused = sum(model.singleton_time(i) for i in range(len(fgraph)))
    assert brute_force_optimum(fgraph, model) < unfused


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps_strategy)
def test_pruned_candidates_never_beat_the_optimum(steps):
    """With pruned candidates (no exhaustive enumeration) the ILP plan is valid and
    no better than the optimum, and no worse than the rule-based planners."""
    fgraph = random_graph(steps)
    model = CostModel(fgraph, TargetParams.for_target("gpu"))
    pruned = plan_function(fgraph, model, "ilp", time_limit=SOLVE_LIMIT_S, exhaustive_limit=0)
    exact = plan_function(fgraph, model, "ilp", time_limit=SOLVE_LIMIT_S)
    assert find_kernel_cycle(fgraph, pruned.groups) is None
    assert sorted(i for m in pruned.groups for i in bits(m)) == list(range(len(fgraph)))
    assert pruned.time_us >= exact.time_us - 1e-9
    for rule in ("xla", "tvm", "greedy"):
        assert pruned.time_us <= plan_function(fgraph, model, rule).time_us + 1e-9
