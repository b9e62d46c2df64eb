"""The fusion ILP, solved by HiGHS through `scipy.optimize.milp`.

    minimize    sum_P time(P) * y_P                      (modeled time of the plan)
    subject to  sum_{P containing v} y_P = 1             for every op v
                y_P + y_Q <= 1                           P, Q mutually reachable
                sum_{P in C} y_P <= |C| - 1              C a kernel cycle found so far
                y_P in {0, 1}

Candidates are convex and already satisfy the resource limits (infeasible patterns
never become candidates). Two chosen kernels P and Q form a cycle when some op of P
reaches Q and some op of Q reaches P; those pairs are excluded up front. Longer
cycles (three kernels that each look fine pairwise) are cut lazily: the solution's
kernel graph is checked, a cycle found becomes a constraint, and the ILP is solved
again. The time limit covers all rounds; when it runs out the best incumbent is
used if it is acyclic, and otherwise (or when HiGHS fails) the caller's fallback
plan is returned. Every outcome is reported in `SolveResult.status`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_array

from mlfuse.analysis.fusion_graph import FusionGraph, bits

MAX_CUT_ROUNDS = 50


@dataclass
class SolveResult:
    groups: list[int]
    objective: float
    status: str  # "optimal", "time-limit", "fallback"
    message: str
    solve_time_s: float
    rounds: int = 1
    candidates: int = 0
    conflicts: int = 0
    cycle_cuts: int = 0
    mip_gap: float | None = None


def find_kernel_cycle(fgraph: FusionGraph, groups: Sequence[int]) -> list[int] | None:
    """Indices (into `groups`) of a cycle of the kernel graph, or None if acyclic."""
    owner: dict[int, int] = {}
    for gi, m in enumerate(groups):
        for i in bits(m):
            owner[i] = gi
    succ: list[set[int]] = [set() for _ in groups]
    for gi, m in enumerate(groups):
        out = 0
        for i in bits(m):
            out |= fgraph.succ_mask[i]
        for j in bits(out & ~m):
            succ[gi].add(owner[j])
    color = [0] * len(groups)  # 0 new, 1 on stack, 2 done
    parent = [-1] * len(groups)
    for root in range(len(groups)):
        if color[root]:
            continue
        stack = [(root, iter(sorted(succ[root])))]
        color[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[node] = 2
                stack.pop()
            elif color[nxt] == 0:
                color[nxt] = 1
                parent[nxt] = node
                stack.append((nxt, iter(sorted(succ[nxt]))))
            elif color[nxt] == 1:
                cycle = [node]
                while cycle[-1] != nxt:
                    cycle.append(parent[cycle[-1]])
                return cycle[::-1]
    return None


def _as_words(masks: Sequence[int], n: int) -> np.ndarray:
    """Bit masks as an (len(masks), words) uint64 array."""
    words = max(1, (n + 63) // 64)
    out = np.zeros((len(masks), words), dtype=np.uint64)
    for row, m in enumerate(masks):
        for w in range(words):
            out[row, w] = (m >> (64 * w)) & 0xFFFFFFFFFFFFFFFF
    return out


def conflicting_pairs(fgraph: FusionGraph, masks: Sequence[int]) -> list[tuple[int, int]]:
    """Pairs (a, b), a < b, of disjoint candidates that would wait on each other.

    For convex P, Q must contain both a strict descendant and a strict ancestor of P.
    Only candidates with two or more ops can be in such a pair.
    """
    multi = [k for k, m in enumerate(masks) if m & (m - 1)]
    if len(multi) < 2:
        return []
    n = len(fgraph)
    sub = [masks[k] for k in multi]
    down, up = [], []
    for m in sub:
        d = u = 0
        for i in bits(m):
            d |= fgraph.desc[i]
            u |= fgraph.anc[i]
        down.append(d & ~m)
        up.append(u & ~m)
    members, below, above = _as_words(sub, n), _as_words(down, n), _as_words(up, n)
    pairs: list[tuple[int, int]] = []
    block = 512
    for start in range(0, len(sub), block):
        stop = min(len(sub), start + block)
        hit_down = np.zeros((stop - start, len(sub)), dtype=bool)
        hit_up = np.zeros_like(hit_down)
        for w in range(members.shape[1]):
            hit_down |= (below[start:stop, w][:, None] & members[None, :, w]) != 0
            hit_up |= (above[start:stop, w][:, None] & members[None, :, w]) != 0
        rows, cols = np.nonzero(hit_down & hit_up)
        for r, c in zip(rows.tolist(), cols.tolist()):
            a, b = start + r, c
            if a < b:
                pairs.append((multi[a], multi[b]))
    return pairs


def solve_ilp(
    fgraph: FusionGraph,
    masks: Sequence[int],
    costs: Sequence[float],
    time_limit: float,
    fallback: Callable[[], list[int]],
) -> SolveResult:
    """Choose one candidate per op minimizing the summed cost, without kernel cycles."""
    start = time.perf_counter()
    n, k = len(fgraph), len(masks)
    cover_rows, cover_cols = [], []
    for col, m in enumerate(masks):
        for i in bits(m):
            cover_rows.append(i)
            cover_cols.append(col)
    pairs = conflicting_pairs(fgraph, masks)
    cuts: list[list[int]] = []
    index = {m: col for col, m in enumerate(masks)}
    c = np.asarray(costs, dtype=float)
    rounds = 0
    gap: float | None = None

    def fall_back(why: str) -> SolveResult:
        groups = fallback()
        return SolveResult(
            groups, float(sum(costs[index[m]] if m in index else 0.0 for m in groups)),
            "fallback", f"{why}; using the greedy plan", time.perf_counter() - start,
            rounds, k, len(pairs), len(cuts), gap,
        )

    while True:
        rounds += 1
        rows, cols, upper = list(cover_rows), list(cover_cols), [1.0] * n
        lower = [1.0] * n
        row = n
        for a, b in pairs:
            rows += [row, row]
            cols += [a, b]
            lower.append(-np.inf)
            upper.append(1.0)
            row += 1
        for cycle in cuts:
            rows += [row] * len(cycle)
            cols += cycle
            lower.append(-np.inf)
            upper.append(len(cycle) - 1.0)
            row += 1
        matrix = csr_array((np.ones(len(rows)), (rows, cols)), shape=(row, k))
        remaining = time_limit - (time.perf_counter() - start)
        if remaining <= 0:
            return fall_back(f"time limit of {time_limit:g} s spent before an acyclic plan was found")
        try:
            res = milp(
                c,
                constraints=LinearConstraint(matrix, lower, upper),
                integrality=np.ones(k),
                bounds=Bounds(0, 1),
                options={"time_limit": remaining, "disp": False},
            )
        except Exception as e:  # HiGHS failure: never silent
            return fall_back(f"HiGHS failed: {type(e).__name__}: {e}")
        gap = getattr(res, "mip_gap", None)
        if res.x is None:
            why = "time limit reached without an incumbent" if res.status == 1 else f"HiGHS: {res.message}"
            return fall_back(why)
        chosen = [col for col in range(k) if res.x[col] > 0.5]
        groups = [masks[col] for col in chosen]
        cycle = find_kernel_cycle(fgraph, groups)
        if cycle is not None:
            if rounds >= MAX_CUT_ROUNDS:
                return fall_back(f"still cyclic after {rounds} rounds of cycle cuts")
            cuts.append([chosen[gi] for gi in cycle])
            continue
        status = "optimal" if res.status == 0 else "time-limit"
        message = (
            "optimal" if res.status == 0
            else f"time limit of {time_limit:g} s reached: best incumbent (gap {gap if gap is not None else float('nan'):.3g})"
        )
        return SolveResult(
            groups, float(res.fun), status, message, time.perf_counter() - start,
            rounds, k, len(pairs), len(cuts), gap,
        )
