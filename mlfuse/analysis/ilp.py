"""The fusion ILP, solved by HiGHS through `scipy.optimize.milp`.

    minimize    sum_P time(P) * y_P                      (modeled time of the plan)
    subject to  sum_{P containing v} y_P = 1             for every op v
                y_P + y_Q <= 1                           P, Q mutually reachable
                sum_{P in C} y_P <= |C| - 1              C a kernel cycle
                y_P in {0, 1}

Candidates are convex and already satisfy the resource limits (infeasible patterns
never become candidates). Two chosen kernels P and Q form a cycle when some op of P
reaches Q and some op of Q reaches P. There can be very many such pairs (a
quadratic number on exhaustive candidate sets), so they are generated lazily: the
ILP is solved, the chosen kernels' graph is checked for a cycle, every conflicting
pair of the candidates on the cycle is added, and longer cycles (three kernels that
each look fine pairwise) are cut directly; then the ILP is solved again. The time
limit covers all rounds; when it runs out the best incumbent is used if it is
acyclic, and otherwise (or when HiGHS fails) the caller's fallback plan is returned.
Every outcome is reported in `SolveResult.status`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, OptimizeResult, milp
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
    conflicts: int = 0  # conflicting pairs added as constraints
    cycle_cuts: int = 0  # cuts for cycles of three or more kernels
    mip_gap: float | None = None


def find_kernel_cycle(fgraph: FusionGraph, groups: Sequence[int]) -> list[int] | None:
    """Indices (into `groups`) of a cycle of the kernel graph, or None if acyclic."""
    succ = fgraph.kernel_successors(list(groups))
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


class ConflictIndex:
    """Which candidates would wait on each other, computed row by row on demand.

    For convex P, a disjoint convex Q forms a cycle with P exactly when Q holds both a
    strict descendant and a strict ancestor of P (then P reaches Q and Q reaches P).
    Only candidates with two or more ops can be in such a pair.
    """

    def __init__(self, fgraph: FusionGraph, masks: Sequence[int]):
        self.masks = masks
        self.multi = np.array([k for k, m in enumerate(masks) if m & (m - 1)], dtype=np.int64)
        n = len(fgraph)
        sub = [masks[k] for k in self.multi]
        down, up = [], []
        for m in sub:
            d = u = 0
            for i in bits(m):
                d |= fgraph.desc[i]
                u |= fgraph.anc[i]
            down.append(d & ~m)
            up.append(u & ~m)
        self.members = _as_words(sub, n)
        self.below = _as_words(down, n)
        self.above = _as_words(up, n)
        self.row_of = {int(k): r for r, k in enumerate(self.multi)}

    def conflicts_of(self, k: int) -> list[int]:
        """Candidates (indices into masks) that conflict with candidate k."""
        r = self.row_of.get(k)
        if r is None:
            return []
        hit_down = ((self.members & self.below[r]) != 0).any(axis=1)
        hit_up = ((self.members & self.above[r]) != 0).any(axis=1)
        return self.multi[hit_down & hit_up].tolist()

    def all_pairs(self) -> list[tuple[int, int]]:
        pairs = []
        for k in self.multi.tolist():
            pairs += [(k, q) for q in self.conflicts_of(k) if k < q]
        return pairs


@dataclass
class _Lazy:
    """The constraints added so far, and the bookkeeping reported in `SolveResult`."""

    pairs: set[tuple[int, int]] = field(default_factory=set)  # conflicting pairs (a < b)
    expanded: set[int] = field(default_factory=set)  # candidates whose conflicts are in `pairs`
    cuts: list[list[int]] = field(default_factory=list)  # candidate sets of which one must go
    rounds: int = 0
    gap: float | None = None


def _cover_entries(masks: Sequence[int]) -> tuple[list[int], list[int]]:
    """(row, column) entries of the cover constraints: op `row` is in candidate `column`."""
    cover_rows, cover_cols = [], []
    for col, m in enumerate(masks):
        for i in bits(m):
            cover_rows.append(i)
            cover_cols.append(col)
    return cover_rows, cover_cols


def _constraints(n: int, k: int, cover: tuple[list[int], list[int]], lazy: _Lazy) -> LinearConstraint:
    """The cover rows (= 1), then one row per conflicting pair (<= 1) and per cut (<= |C| - 1)."""
    rows, cols = list(cover[0]), list(cover[1])
    lower, upper = [1.0] * n, [1.0] * n
    row = n
    for a, b in sorted(lazy.pairs):
        rows += [row, row]
        cols += [a, b]
        lower.append(-np.inf)
        upper.append(1.0)
        row += 1
    for cycle in lazy.cuts:
        rows += [row] * len(cycle)
        cols += cycle
        lower.append(-np.inf)
        upper.append(len(cycle) - 1.0)
        row += 1
    matrix = csr_array((np.ones(len(rows)), (rows, cols)), shape=(row, k))
    # scipy takes a bound per row; pyright reads the type of its default (a float)
    return LinearConstraint(matrix, lower, upper)  # pyright: ignore[reportArgumentType]


def _add_cuts(lazy: _Lazy, conflicts: ConflictIndex, on_cycle: list[int]) -> None:
    """Forbid the cycle through candidates `on_cycle`: every conflict of each becomes a
    pair constraint, and the cycle itself a cut when it is longer than two kernels or
    brought no new pair."""
    before = len(lazy.pairs)
    for col in on_cycle:
        if col not in lazy.expanded:
            lazy.expanded.add(col)
            lazy.pairs.update((min(col, q), max(col, q)) for q in conflicts.conflicts_of(col))
    if len(on_cycle) > 2 or len(lazy.pairs) == before:
        lazy.cuts.append(on_cycle)


def _no_incumbent(res: OptimizeResult) -> str:
    """Why HiGHS returned no solution."""
    return "the time limit ran out without an incumbent" if res.status == 1 else f"HiGHS: {res.message}"


def _acyclic_outcome(res: OptimizeResult, gap: float | None) -> tuple[str, str]:
    """(status, message) for an acyclic solution: optimal, or the incumbent at the time limit."""
    if res.status == 0:
        return "optimal", "optimal"
    return "time-limit", (f"the time limit ran out: best incumbent used (MIP gap "
                          f"{gap if gap is not None else float('nan'):.3g})")


# HiGHS's presolve is most of a solve of these set-partitioning problems and finds
# nothing to remove: without it MobileNetV2's two solves (1062 and 1142 candidates) take
# 0.035 s each instead of 0.14, MobileNetV3-small's 0.06 s in all instead of 0.14, random
# chains of 1000 ops 0.11 s instead of 0.31; the optimum is the same on every zoo model.
PRESOLVE = False


def solve_ilp(
    fgraph: FusionGraph,
    masks: Sequence[int],
    costs: Sequence[float],
    time_limit: float,
    fallback: Callable[[], list[int]],
) -> SolveResult:
    """Choose one candidate per op minimizing the summed cost, without kernel cycles.

    Conflicting pairs are added lazily: whenever a solution has a cycle, every
    conflict of the candidates on it becomes a constraint, and the cycle itself a cut.
    """
    start = time.perf_counter()
    n, k = len(fgraph), len(masks)
    if n == 0:
        return SolveResult([], 0.0, "optimal", "nothing to plan", 0.0, 0)
    cover = _cover_entries(masks)
    conflicts = ConflictIndex(fgraph, masks)
    lazy = _Lazy()
    c = np.asarray(costs, dtype=float)

    def result(groups: list[int], objective: float, status: str, message: str) -> SolveResult:
        return SolveResult(groups, objective, status, message, time.perf_counter() - start,
                           lazy.rounds, k, len(lazy.pairs), len(lazy.cuts), lazy.gap)

    def fall_back(why: str) -> SolveResult:
        return result(fallback(), float("nan"), "fallback", f"{why}; using the greedy plan")

    while True:
        lazy.rounds += 1
        constraints = _constraints(n, k, cover, lazy)
        remaining = time_limit - (time.perf_counter() - start)
        if remaining <= 0:
            return fall_back("the time limit ran out before an acyclic plan was found")
        try:
            res = milp(
                c,
                constraints=constraints,
                integrality=np.ones(k),
                bounds=Bounds(0, 1),
                options={"time_limit": remaining, "disp": False, "presolve": PRESOLVE},
            )
        except Exception as e:  # HiGHS failure: never silent
            return fall_back(f"HiGHS failed: {type(e).__name__}: {e}")
        lazy.gap = getattr(res, "mip_gap", None)
        if res.x is None:
            return fall_back(_no_incumbent(res))
        chosen = [col for col in range(k) if res.x[col] > 0.5]
        groups = [masks[col] for col in chosen]
        cycle = find_kernel_cycle(fgraph, groups)
        if cycle is None:
            return result(groups, float(res.fun), *_acyclic_outcome(res, lazy.gap))
        if lazy.rounds >= MAX_CUT_ROUNDS:
            return fall_back(f"still cyclic after {lazy.rounds} rounds of cycle cuts")
        _add_cuts(lazy, conflicts, [chosen[gi] for gi in cycle])
