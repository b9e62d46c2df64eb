"""Fusion planners: the ILP and the rule-based baselines, under one cost model.

`plan_function(fgraph, model, planner=...)` returns a `Plan`: a partition of the ops
into kernels (bit masks, in an order that respects dependences), with the modeled
cost of every kernel. Planners:

- `ilp`: candidates (`candidates.py`, seeded with the plans of `xla`, `tvm` and
  `greedy` and their horizontal packs, so it is never worse than they are under the
  model) solved by HiGHS (`ilp.py`). On graphs too large for exhaustive candidates, a
  few rounds of local search follow: packs, pairwise merges and single-op moves
  around the solution become candidates and the ILP is solved again, as long as the
  modeled time drops.
- `xla`: XLA's instruction fusion without duplication: producers (elementwise,
  broadcast, injective) fuse into their consumer when all their users are inside
  it, or as an extra output of a reduction ("input") fusion; reductions are only
  fusion tails; an expensive producer is not fused into a broadcast that would
  recompute it; then sibling multi-output fusion of fusions that read the same value
  over the same domain; at most 64 operands per fusion (the cost model's budget).
- `tvm`: Relay's FuseOps: op patterns (elementwise, broadcast, injective,
  comm-reduce, out-elementwise-fusable, opaque) and the post-dominator rule: an op
  fuses with everything up to its immediate post-dominator when every op on the way
  is at most broadcast (injective for injective ops) and the sink may absorb it;
  reductions never fuse into their consumers.
- `greedy`: edge contraction by largest modeled gain (BladeDISC-like union-find with
  cycle checks), over producer-consumer and sibling pairs, while the gain is positive.
  It is also the ILP's fallback.
- `none`: every op is its own kernel.

Every merge a rule-based planner makes is checked by `check_pattern` (convex, within
size and resource limits) and against kernel-graph cycles; refusals are recorded per
edge with the rule that refused, for the fusion report.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field

from mlfuse.analysis.candidates import (
    DEFAULT_EXHAUSTIVE_LIMIT,
    DEFAULT_MAX_GROUP_SIZE,
    DEFAULT_TOP_K,
    CandidatePool,
    check_pattern,
    generate_candidates,
    independent,
    merge_candidates,
    move_candidates,
    packing_candidates,
)
from mlfuse.analysis.cost_model import CostModel, PatternCost
from mlfuse.analysis.fusion_graph import FusionGraph, Partition, bits
from mlfuse.analysis.ilp import SolveResult, solve_ilp
from mlfuse.analysis.op_classes import ContractionSize, OpClass

PLANNERS = ("ilp", "xla", "tvm", "greedy", "none")
LOCAL_SEARCH_ROUNDS = 3

Edge = tuple[int, int]  # (producer node, consumer node)


@dataclass
class Plan:
    planner: str
    groups: list[int]  # kernels as node masks, dependences respected
    costs: list[PatternCost]
    time_us: float
    bytes: int
    plan_time_s: float
    status: str = "ok"  # ILP: "optimal", "time-limit", "fallback"
    message: str = ""
    edge_reasons: dict[Edge, tuple[str, str]] = field(default_factory=dict)
    solve: SolveResult | None = None
    pool: CandidatePool | None = None

    @property
    def kernels(self) -> int:
        """Kernels launched: groups, less foreign scalar ops that run alone."""
        return sum(1 for c in self.costs if c.time_us > 0)


def order_groups(fgraph: FusionGraph, groups: list[int]) -> list[int]:
    """The groups in a dependence-respecting order, as close to program order as possible."""
    succ = fgraph.kernel_successors(groups)
    indeg = [0] * len(groups)
    for targets in succ:
        for t in targets:
            indeg[t] += 1
    ready = [((m & -m).bit_length(), gi) for gi, m in enumerate(groups) if indeg[gi] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, gi = heapq.heappop(ready)
        order.append(groups[gi])
        for s in succ[gi]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(ready, ((groups[s] & -groups[s]).bit_length(), s))
    if len(order) != len(groups):
        raise ValueError("the kernel graph of the plan is cyclic")
    return order


# --- rule-based planners ---------------------------------------------------------------------


class RulePlanner:
    def __init__(self, fgraph: FusionGraph, model: CostModel, max_group_size: int):
        self.graph = fgraph
        self.model = model
        self.max_group_size = max_group_size
        self.part = Partition(fgraph)
        self.reasons: dict[Edge, tuple[str, str]] = {}

    def refuse(self, edge: Edge, category: str, detail: str) -> None:
        self.reasons.setdefault(edge, (category, detail))

    def try_merge(self, a: int, b: int, edge: Edge | None) -> bool:
        """Merge groups a and b if the union is a valid pattern and no cycle appears."""
        if a == b:
            return True
        union = self.part.mask(a) | self.part.mask(b)
        verdict = check_pattern(self.graph, self.model, union, self.max_group_size)
        if not verdict.ok:
            if edge:
                self.refuse(edge, verdict.category, verdict.reason)
            return False
        if self.part.creates_cycle(a, b):
            if edge:
                self.refuse(edge, "cycle", "the kernels would wait on each other through a third kernel")
            return False
        self.part.merge(a, b)
        return True


def plan_none(fgraph: FusionGraph, model: CostModel, max_group_size: int) -> RulePlanner:
    rp = RulePlanner(fgraph, model, max_group_size)
    for c in range(len(fgraph)):
        for p in fgraph.preds[c]:
            rp.refuse((p, c), "planner-rule", "planner none: no fusion")
    return rp


XLA_PRODUCERS = (OpClass.LIGHT_ELEMENTWISE, OpClass.EXPENSIVE_ELEMENTWISE, OpClass.BROADCAST, OpClass.INJECTIVE)


def plan_xla(fgraph: FusionGraph, model: CostModel, max_group_size: int) -> RulePlanner:
    """XLA's instruction fusion (consumers last to first), then sibling multi-output fusion."""
    rp = RulePlanner(fgraph, model, max_group_size)
    for c in reversed(range(len(fgraph))):
        _xla_fuse_producers(rp, c)
    _xla_fuse_siblings(rp)
    return rp


def _xla_fuse_producers(rp: RulePlanner, c: int) -> None:
    """Fuse the producers of node c into c's fusion where XLA's rules allow it, recording
    the rule that refuses each other edge."""
    g, part = rp.graph, rp.part
    consumer = g.nodes[c]
    if not consumer.fusible or consumer.op_class is OpClass.CONTRACTION:
        for p in g.preds[c]:
            rp.refuse((p, c), "planner-rule", f"xla: {consumer.info.describe()} consumers are not fused into")
        return
    for p in reversed(g.preds[c]):
        edge = (p, c)
        cgid, pgid = part.group_of(c), part.group_of(p)
        if cgid == pgid:
            continue
        why = _xla_producer_refusal(rp, p, pgid, cgid)
        if why is not None:
            rp.refuse(edge, "planner-rule", why)
            continue
        rp.try_merge(pgid, cgid, edge)


def _xla_producer_refusal(rp: RulePlanner, p: int, pgid: int, cgid: int) -> str | None:
    """Why XLA does not fuse producer node p (alone in group pgid) into the fusion cgid,
    or None when it does."""
    g, part = rp.graph, rp.part
    nodes = g.nodes
    producer = nodes[p]
    if producer.op_class is OpClass.REDUCTION:
        return "xla: a reduction is only a fusion tail"
    if not producer.fusible or producer.op_class not in XLA_PRODUCERS:
        return f"xla: a {producer.info.describe()} does not fuse into consumers"
    if part.mask(pgid) != 1 << p:
        return "xla: producer already fused elsewhere (no duplication)"
    cmask = part.mask(cgid)
    users = {u for r in producer.results for u in g.values[r].users}
    escapes = any(g.values[r].escapes for r in producer.results)
    all_inside = not escapes and all((cmask >> u) & 1 for u in users)
    has_reduction = any(nodes[i].op_class is OpClass.REDUCTION for i in bits(cmask))
    if not all_inside and not has_reduction:
        return "xla: producer has users outside a loop fusion (no duplication)"
    if producer.op_class is OpClass.EXPENSIVE_ELEMENTWISE and any(
        nodes[u].op_class is OpClass.BROADCAST for u in users if (cmask >> u) & 1
    ):
        return "xla: an expensive producer is not fused into a broadcast that repeats it"
    return None


def _xla_fuse_siblings(rp: RulePlanner) -> None:
    """Sibling multi-output fusion: fusions reading one value over the same domain."""
    g, part = rp.graph, rp.part
    for value in g.values:
        if value.constant == "splat" or value.numel <= 1:
            continue
        gids = sorted({part.group_of(u) for u in value.users})
        for a_pos in range(len(gids)):
            for b_pos in range(a_pos + 1, len(gids)):
                a, b = part.group_of(gids[a_pos]), part.group_of(gids[b_pos])
                if a != b and _xla_siblings_fusable(g, part.mask(a), part.mask(b)):
                    rp.try_merge(a, b, None)


def _xla_siblings_fusable(g: FusionGraph, ma: int, mb: int) -> bool:
    """Whether two distinct fusions may become one multi-output fusion: both fusible, over
    the same domain, and with no path between them (that would be producer-consumer)."""
    if not (_xla_sibling_ok(g, ma) and _xla_sibling_ok(g, mb)):
        return False
    if _domain(g, ma) != _domain(g, mb):
        return False
    return independent(g, ma, mb)


def _xla_sibling_ok(g: FusionGraph, mask: int) -> bool:
    return all(g.nodes[i].fusible and g.nodes[i].op_class is not OpClass.CONTRACTION for i in bits(mask))


def _domain(g: FusionGraph, mask: int) -> int:
    return max(g.nodes[i].domain for i in bits(mask))


# TVM's OpPatternKind
K_ELEMWISE, K_BROADCAST, K_INJECTIVE, K_COMM_REDUCE, K_OUT_EWISE_FUSABLE, K_OPAQUE = 0, 1, 2, 3, 4, 8


def tvm_pattern(g: FusionGraph, i: int) -> int:
    node = g.nodes[i]
    if not node.fusible:
        return K_OPAQUE
    cls = node.op_class
    if cls.elementwise:
        return K_ELEMWISE
    return {
        OpClass.BROADCAST: K_BROADCAST,
        OpClass.INJECTIVE: K_INJECTIVE,
        OpClass.REDUCTION: K_COMM_REDUCE,
        OpClass.CONTRACTION: K_OUT_EWISE_FUSABLE if node.info.contraction is ContractionSize.FINE else K_OPAQUE,
    }.get(cls, K_OPAQUE)


def post_dominators(g: FusionGraph) -> list[int]:
    """Immediate post-dominator of every node; -1 is the virtual exit (outputs)."""
    n = len(g)
    ipdom = [-1] * n
    depth = [0] * n  # depth below the exit

    def lca(a: int, b: int) -> int:
        while a != b:
            if a == -1 or b == -1:
                return -1
            if depth[a] >= depth[b]:
                a = ipdom[a]
            else:
                b = ipdom[b]
        return a

    for v in reversed(range(n)):
        node = g.nodes[v]
        if any(g.values[r].escapes for r in node.results) or not g.succs[v]:
            ipdom[v], depth[v] = -1, 1
            continue
        d = g.succs[v][0]
        for s in g.succs[v][1:]:
            d = lca(d, s)
        ipdom[v] = d
        depth[v] = 1 if d == -1 else depth[d] + 1
    return ipdom


def plan_tvm(fgraph: FusionGraph, model: CostModel, max_group_size: int) -> RulePlanner:
    """Relay's FuseOps: every op fuses with everything up to its immediate post-dominator
    when the op patterns on the way allow it."""
    rp = RulePlanner(fgraph, model, max_group_size)
    g = fgraph
    ipdom = post_dominators(g)
    kind = [tvm_pattern(g, i) for i in range(len(g))]
    for v in range(len(g)):
        why = _tvm_rule_refusal(g, kind, v, ipdom[v])
        if why is None:
            why = _tvm_fuse_to_post_dominator(rp, v, ipdom[v])
        if why is not None:
            for e in [(v, s) for s in g.succs[v]]:
                rp.refuse(e, *why)
    return rp


def _tvm_rule_refusal(g: FusionGraph, kind: list[int], v: int, d: int) -> tuple[str, str] | None:
    """(category, reason) when TVM's op-pattern rules forbid fusing node v up to its
    immediate post-dominator d (-1: none), or None when they allow it."""
    k = kind[v]
    if k == K_OPAQUE:
        return "planner-rule", "tvm: opaque ops do not fuse"
    if k == K_COMM_REDUCE:
        return "planner-rule", "tvm: kCommReduce does not fuse into its consumers"
    if d == -1:
        return "planner-rule", "tvm: no post-dominator (the value leaves the function)"
    inner = [kind[i] for i in bits(g.desc[v] & g.anc[d])]
    if not _tvm_path_fusable(k, inner, kind[d]):
        return "planner-rule", f"tvm: the path to the post-dominator {g.node_label(d)} is not fusable"
    return None


def _tvm_path_fusable(k: int, inner: list[int], sink: int) -> bool:
    """Whether an op of pattern k fuses through ops of patterns `inner` into a sink of
    pattern `sink`."""
    if k == K_OUT_EWISE_FUSABLE:
        return all(x <= K_BROADCAST for x in inner) and sink <= K_ELEMWISE
    if k <= K_BROADCAST:
        return all(x <= K_BROADCAST for x in inner) and (
            sink <= K_BROADCAST or sink in (K_INJECTIVE, K_COMM_REDUCE, K_OUT_EWISE_FUSABLE)
        )
    # injective
    return all(x <= K_INJECTIVE for x in inner) and sink <= K_INJECTIVE


def _tvm_fuse_to_post_dominator(rp: RulePlanner, v: int, d: int) -> tuple[str, str] | None:
    """Merge the groups of v, its post-dominator d and every node between them; or
    (category, reason) when the union is not a valid pattern or would make a cycle."""
    g, part = rp.graph, rp.part
    members = [v, *bits(g.desc[v] & g.anc[d]), d]
    gids = {part.group_of(i) for i in members}
    union = 0
    for gid in gids:
        union |= part.mask(gid)
    verdict = check_pattern(g, rp.model, union, rp.max_group_size)
    if not verdict.ok:
        return verdict.category, verdict.reason
    if part.creates_cycle(*gids):
        return "cycle", "the kernels would wait on each other through a third kernel"
    keep = gids.pop()
    for gid in gids:
        keep = part.merge(keep, gid)
    return None


def plan_greedy(fgraph: FusionGraph, model: CostModel, max_group_size: int) -> RulePlanner:
    """Edge contraction by largest modeled gain, while the gain is positive."""
    rp = RulePlanner(fgraph, model, max_group_size)
    _greedy_contract(rp)
    _greedy_refusals(rp)
    return rp


def _greedy_gain(rp: RulePlanner, a: int, b: int) -> float | None:
    """Modeled time saved by merging groups a and b; None when the union is not a valid pattern."""
    ma, mb = rp.part.mask(a), rp.part.mask(b)
    union = ma | mb
    if union.bit_count() > rp.max_group_size:
        return None
    verdict = check_pattern(rp.graph, rp.model, union, rp.max_group_size)
    if not verdict.ok:
        return None
    return rp.model.time(ma) + rp.model.time(mb) - rp.model.time(union)


def _greedy_contract(rp: RulePlanner) -> None:
    """Merge the pair of neighbouring groups (producer-consumer or siblings) with the
    largest positive gain, skipping merges that would make a cycle, until none is left."""
    g, part = rp.graph, rp.part

    def neighbours(gid: int) -> set[int]:
        m = part.mask(gid)
        return {part.group_of(j) for j in bits(g.neighbourhood(m) & ~m) if g.nodes[j].fusible}

    heap: list[tuple[float, int, int, int, int]] = []

    def push(a: int) -> None:
        for b in neighbours(a):
            gv = _greedy_gain(rp, a, b)
            if gv is not None and gv > 0:
                heapq.heappush(heap, (-gv, part.mask(a), part.mask(b), a, b))

    for i in range(len(g)):
        if g.nodes[i].fusible:
            push(i)
    while heap:
        _, ma, mb, a, b = heapq.heappop(heap)
        if part.masks.get(a) != ma or part.masks.get(b) != mb:
            continue  # stale: one side has grown since
        if part.creates_cycle(a, b):
            continue
        push(part.merge(a, b))


def _greedy_refusals(rp: RulePlanner) -> None:
    """Record why every edge left between two kernels was not merged."""
    g, part = rp.graph, rp.part
    for c in range(len(g)):
        for p in g.preds[c]:
            if part.group_of(p) != part.group_of(c):
                union = part.mask(part.group_of(p)) | part.mask(part.group_of(c))
                verdict = check_pattern(g, rp.model, union, rp.max_group_size)
                if verdict.ok:
                    rp.refuse((p, c), "cost", "greedy: no gain from merging (or a cycle)")
                else:
                    rp.refuse((p, c), verdict.category, verdict.reason)


RULE_PLANNERS = {"none": plan_none, "xla": plan_xla, "tvm": plan_tvm, "greedy": plan_greedy}


def make_plan(fgraph: FusionGraph, model: CostModel, planner: str, groups: list[int], started: float, **extra) -> Plan:
    ordered = order_groups(fgraph, groups)
    costs = [model.cost(m) for m in ordered]
    return Plan(
        planner,
        ordered,
        costs,
        sum(c.time_us for c in costs),
        sum(c.bytes for c in costs),
        time.perf_counter() - started,
        **extra,
    )


def plan_function(
    fgraph: FusionGraph,
    model: CostModel,
    planner: str = "ilp",
    time_limit: float = 10.0,
    max_group_size: int = DEFAULT_MAX_GROUP_SIZE,
    top_k: int = DEFAULT_TOP_K,
    exhaustive_limit: int = DEFAULT_EXHAUSTIVE_LIMIT,
) -> Plan:
    if planner not in PLANNERS:
        raise ValueError(f"unknown planner '{planner}' (expected one of {', '.join(PLANNERS)})")
    started = time.perf_counter()
    if planner in RULE_PLANNERS:
        rp = RULE_PLANNERS[planner](fgraph, model, max_group_size)
        return make_plan(fgraph, model, planner, rp.part.groups(), started, edge_reasons=rp.reasons)
    return plan_ilp(fgraph, model, time_limit, max_group_size, top_k, exhaustive_limit, started)


def plan_ilp(
    fgraph: FusionGraph,
    model: CostModel,
    time_limit: float,
    max_group_size: int,
    top_k: int,
    exhaustive_limit: int,
    started: float,
) -> Plan:
    seeds = {
        name: RULE_PLANNERS[name](fgraph, model, max_group_size).part.groups()
        for name in ("greedy", "xla", "tvm")
    }
    pool = generate_candidates(fgraph, model, max_group_size, top_k, exhaustive_limit, seeds)
    exhaustive = fgraph.fusible_mask.bit_count() <= exhaustive_limit

    def fallback() -> list[int]:
        return seeds["greedy"]

    def solve(budget: float) -> SolveResult:
        cands = list(pool)
        return solve_ilp(fgraph, [c.mask for c in cands], [c.cost.time_us for c in cands],
                         budget, fallback)

    result = solve(time_limit - (time.perf_counter() - started))
    total_solve = result.solve_time_s
    # local search around the solution: merges, packs and single-op moves become
    # candidates, and the ILP picks the best combination again
    for _ in range(LOCAL_SEARCH_ROUNDS):
        if exhaustive or result.status == "fallback":
            break
        added = packing_candidates(pool, result.groups) + merge_candidates(pool, result.groups)
        added += move_candidates(pool, result.groups)
        if not added:
            break
        again = solve(time_limit - (time.perf_counter() - started))
        total_solve += again.solve_time_s
        if again.status == "fallback" or model.plan_time(again.groups) >= model.plan_time(result.groups) - 1e-9:
            break
        again.rounds += result.rounds
        result = again
    result.solve_time_s = total_solve
    if result.status != "optimal":
        result.message = f"ILP with time-limit {time_limit:g} s: {result.message}"
    return make_plan(fgraph, model, "ilp", result.groups, started,
                     status=result.status, message=result.message, solve=result, pool=pool)
