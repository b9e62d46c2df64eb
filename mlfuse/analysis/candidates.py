"""Candidate patterns for the fusion ILP.

A pattern (a set of ops that may become one kernel) is *valid* when it

- has at most `max_group_size` ops,
- is convex: no path leaves it and re-enters (else the kernel would wait on itself),
- and the cost model accepts it (op classes that may share a kernel, resources).

Every op alone is always a candidate, so the ILP always has a solution. Small
graphs (at most `exhaustive_limit` fusible ops) get every valid pattern, so the ILP
is exact there. Larger graphs get a pruned enumeration in the spirit of
FusionStitching's PatternReduction:

- *vertical*: ops are visited consumers first; an op's candidates are the op joined
  with combinations of its consumers' candidates (a beam over the consumers, the top-k
  by modeled benefit kept per op). Each combination is closed under convexity (a
  diamond is taken whole) and absorbs producers all of whose users are inside (the
  broadcast of a bias, a scale). Multi-output patterns fall out naturally: a value
  used inside and outside becomes an extra kernel result;
- *siblings*: independent patterns that read the same value (two reductions of `x`)
  are joined, so the shared input is read once;
- *packing*: `packing_candidates` packs independent kernels of a plan (same level of
  its kernel graph, counted from the inputs or from the outputs: no path between
  them) into horizontal kernels within the operand budget, saving launches and
  raising parallelism (FusionStitching's kernel packing). The unfused plan, the
  seeds and the ILP's solutions are packed;
- *seeds*: groups of other plans (the rule-based planners') can be added, which makes
  the ILP never worse than those plans under the model;
- *local search* around an ILP solution: `merge_candidates` (two kernels of the
  solution joined, related or not) and `move_candidates` (one op moved to a
  neighbouring kernel).

A GEMM with an elementwise prologue and epilogue is a vertical pattern like any other
(the cost model keeps large GEMMs out of patterns).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from mlfuse.analysis.cost_model import CostModel, PatternCost
from mlfuse.analysis.fusion_graph import MANY_READERS, FusionGraph, Partition, bits

DEFAULT_TOP_K = 3
DEFAULT_EXHAUSTIVE_LIMIT = 12
DEFAULT_MAX_GROUP_SIZE = 128


@dataclass(frozen=True)
class Verdict:
    ok: bool
    category: str = ""  # "size-limit", "cycle", "op-class", "no-fuse", "resource-limit"
    reason: str = ""


def check_pattern(fgraph: FusionGraph, model: CostModel, mask: int, max_group_size: int) -> Verdict:
    """Whether `mask` may be one kernel, and if not, why."""
    size = mask.bit_count()
    if size == 1:
        return Verdict(True)
    if size > max_group_size:
        return Verdict(False, "size-limit", f"{size} ops > max-group-size {max_group_size}")
    outside = fgraph.convex_violation(mask)
    if outside:
        via = ", ".join(fgraph.node_label(i) for i in list(bits(outside))[:3])
        return Verdict(False, "cycle", f"a path leaves the kernel and re-enters it through {via}")
    cost = model.cost(mask)
    if not cost.feasible:
        return Verdict(False, cost.category, cost.reason)
    return Verdict(True)


@dataclass
class Candidate:
    mask: int
    cost: PatternCost
    origins: set[str] = field(default_factory=set)


class CandidatePool:
    """Valid patterns, each once, with where they came from; rejections are counted."""

    def __init__(self, fgraph: FusionGraph, model: CostModel, max_group_size: int):
        self.graph = fgraph
        self.model = model
        self.max_group_size = max_group_size
        self.by_mask: dict[int, Candidate] = {}
        self.rejected: Counter[str] = Counter()
        self._verdicts: dict[int, Verdict] = {}

    def verdict(self, mask: int) -> Verdict:
        v = self._verdicts.get(mask)
        if v is None:
            v = check_pattern(self.graph, self.model, mask, self.max_group_size)
            self._verdicts[mask] = v
            if not v.ok:
                self.rejected[v.category] += 1
        return v

    def add(self, mask: int, origin: str) -> bool:
        """Add a valid pattern; True only if it is new."""
        if mask in self.by_mask:
            self.by_mask[mask].origins.add(origin)
            return False
        if not self.verdict(mask).ok:
            return False
        self.by_mask[mask] = Candidate(mask, self.model.cost(mask), {origin})
        return True

    def __len__(self) -> int:
        return len(self.by_mask)

    def __iter__(self):
        return iter(self.by_mask.values())

    def benefit(self, mask: int) -> float:
        """Modeled time saved against running every op alone."""
        m = self.model
        return sum(m.singleton_time(i) for i in bits(mask)) - m.time(mask)


def generate_candidates(
    fgraph: FusionGraph,
    model: CostModel,
    max_group_size: int = DEFAULT_MAX_GROUP_SIZE,
    top_k: int = DEFAULT_TOP_K,
    exhaustive_limit: int = DEFAULT_EXHAUSTIVE_LIMIT,
    seeds: dict[str, list[int]] | None = None,
) -> CandidatePool:
    pool = CandidatePool(fgraph, model, max_group_size)
    for i in range(len(fgraph)):
        pool.add(1 << i, "singleton")
    fusible = list(bits(fgraph.fusible_mask))
    if len(fusible) <= exhaustive_limit:
        exhaustive_patterns(pool, fusible)
    else:
        vertical = pattern_reduction(pool, top_k)
        sibling_patterns(pool, vertical)
        packing_candidates(pool, [1 << i for i in range(len(fgraph))])
    for origin, groups in (seeds or {}).items():
        for mask in groups:
            pool.add(mask, origin)
        if len(fusible) > exhaustive_limit:
            packing_candidates(pool, groups)
    return pool


def exhaustive_patterns(pool: CandidatePool, fusible: list[int]) -> None:
    """Every valid pattern over the fusible ops (2^n subsets: small graphs only)."""
    n = len(fusible)
    for subset in range(1, 1 << n):
        if subset & (subset - 1) == 0 or subset.bit_count() > pool.max_group_size:
            continue
        mask = 0
        for k in bits(subset):
            mask |= 1 << fusible[k]
        pool.add(mask, "exhaustive")


def absorb_producers(fgraph: FusionGraph, mask: int, max_size: int) -> int:
    """Add fusible producers whose every user is already in the pattern (stays convex).

    In rounds: every producer whose users are all in the pattern joins, in ascending order,
    until `max_size` ops (which decides which producers make it). Users come after their
    producers, so a producer becomes ready only in the round after its last user joined:
    each round looks at the producers of the ops the previous one added, and a user's
    test is one mask operation (rescanning every external producer of the pattern, taken
    again from each of its ops, was half of MobileNetV2's planning: chains of ~80 rounds)."""
    frontier = fgraph.external_preds(mask)
    while mask.bit_count() < max_size:
        ready = [p for p in bits(frontier & fgraph.absorbable_mask & ~mask) if fgraph.succ_mask[p] & ~mask == 0]
        if not ready:
            break
        frontier = 0
        for p in ready:
            mask |= 1 << p
            frontier |= fgraph.pred_mask[p]
            if mask.bit_count() >= max_size:
                break
    return mask


def pattern_reduction(pool: CandidatePool, top_k: int) -> dict[int, list[int]]:
    """Vertical candidates, consumers first; returns the top-k patterns of every op."""
    g = pool.graph
    max_size = pool.max_group_size
    best: dict[int, list[int]] = {}
    width = max(1, top_k)
    for v in reversed(range(len(g))):
        if not g.nodes[v].fusible:
            best[v] = []
            continue
        beam = [1 << v]
        for c in g.succs[v]:
            if not g.nodes[c].fusible:
                continue
            options = [1 << c, *best[c]]
            grown: dict[int, float] = {m: pool.benefit(m) for m in beam if pool.verdict(m).ok}
            for partial in beam:
                for option in options:
                    m = partial | option
                    if m in grown:
                        continue
                    if m.bit_count() > max_size:
                        continue
                    m = g.convex_closure(m)
                    if m in grown or m.bit_count() > max_size or not pool.verdict(m).ok:
                        continue
                    grown[m] = pool.benefit(m)
            beam = sorted(grown, key=lambda m: (-grown[m], m))[: 2 * width] or [1 << v]
        scored: dict[int, float] = {}
        for m in beam:
            for variant in (m, absorb_producers(g, m, max_size)):
                if variant != 1 << v and variant not in scored and pool.verdict(variant).ok:
                    scored[variant] = pool.benefit(variant)
        best[v] = sorted(scored, key=lambda m: (-scored[m], m))[:top_k]
        for m in best[v]:
            pool.add(m, "pattern")
    return best


def independent(fgraph: FusionGraph, a: int, b: int) -> bool:
    if a & b:
        return False
    down_a = down_b = 0
    for i in bits(a):
        down_a |= fgraph.desc[i]
    for i in bits(b):
        down_b |= fgraph.desc[i]
    return not (down_a & b) and not (down_b & a)


def sibling_patterns(pool: CandidatePool, vertical: dict[int, list[int]]) -> None:
    """Join independent patterns that read one value, so it is read once (not for a value
    read by MANY_READERS or more: its pairs alone would be quadratic in its readers)."""
    g = pool.graph
    for value in g.values:
        users = [u for u in value.users if g.nodes[u].fusible]
        if not 2 <= len(users) < MANY_READERS or value.constant == "splat" or value.numel <= 1:
            continue
        choices = [[*vertical.get(u, [])[:1], 1 << u] for u in users]
        for a in range(len(users)):
            for b in range(a + 1, len(users)):
                for pa in choices[a]:
                    for pb in choices[b]:
                        if independent(g, pa, pb):
                            pool.add(pa | pb, "sibling")
        joined = 0
        for options in choices:
            for option in options:
                if (not joined or independent(g, joined, option)) and pool.verdict(joined | option).ok:
                    joined |= option
                    break
        if joined.bit_count() > 1:
            pool.add(joined, "sibling")


def kernel_levels(fgraph: FusionGraph, groups: list[int], from_outputs: bool = False) -> list[int]:
    """Longest-path level of every group in the kernel graph of an acyclic plan,
    counted from the inputs (as soon as possible) or from the outputs (as late as possible)."""
    owner = {}
    for gi, m in enumerate(groups):
        for i in bits(m):
            owner[i] = gi
    before: list[set[int]] = [set() for _ in groups]
    for gi, m in enumerate(groups):
        near = 0
        for i in bits(m):
            near |= fgraph.succ_mask[i] if from_outputs else fgraph.pred_mask[i]
        for j in bits(near & ~m):
            before[gi].add(owner[j])
    level = [0] * len(groups)
    done: set[int] = set()
    pending = list(range(len(groups)))
    while pending:  # Kahn-style relaxation; the plan is acyclic
        rest = []
        for gi in pending:
            if before[gi] <= done:
                level[gi] = max((level[q] + 1 for q in before[gi]), default=0)
                done.add(gi)
            else:
                rest.append(gi)
        if len(rest) == len(pending):
            raise ValueError("kernel graph is cyclic")
        pending = rest
    return level


def packing_candidates(pool: CandidatePool, groups: list[int]) -> int:
    """Pack independent kernels of a plan, level by level (as soon and as late as
    possible), into horizontal candidates within the operand and size budgets."""
    g = pool.graph
    added = 0
    for from_outputs in (False, True):
        level = kernel_levels(g, groups, from_outputs)
        by_level: dict[int, list[int]] = {}
        for gi, m in enumerate(groups):
            if m & g.fusible_mask == m:
                by_level.setdefault(level[gi], []).append(m)
        for members in by_level.values():
            members.sort(key=lambda m: m & -m)
            pack = 0
            for m in members:
                if pack and pool.verdict(pack | m).ok:
                    pack |= m
                    continue
                if pack and pack not in groups:
                    added += pool.add(pack, "pack")
                pack = m
            if pack and pack not in groups:
                added += pool.add(pack, "pack")
    return added


def merge_candidates(pool: CandidatePool, groups: list[int]) -> int:
    """Greedily merge kernels of a plan, any two at a time (related or independent),
    while the modeled time drops; every valid union met becomes a candidate.

    This finds what the per-op enumeration cannot see: packs of kernels that sit at
    different levels of the kernel graph, or a kernel joining a distant sibling."""
    g, model = pool.graph, pool.model
    part = Partition(g, groups)
    added = 0
    fusible = {gid for gid, m in part.masks.items() if m & g.fusible_mask == m}

    def gain(a: int, b: int) -> float | None:
        union = part.mask(a) | part.mask(b)
        if not pool.verdict(union).ok:
            return None
        return model.time(part.mask(a)) + model.time(part.mask(b)) - model.time(union)

    while True:
        best: tuple[float, int, int] | None = None
        ids = sorted(fusible)
        for x, a in enumerate(ids):
            for b in ids[x + 1:]:
                gv = gain(a, b)
                if gv is None:
                    continue
                added += pool.add(part.mask(a) | part.mask(b), "merge")
                if gv > 1e-12 and (best is None or gv > best[0]) and not part.creates_cycle(a, b):
                    best = (gv, a, b)
        if best is None:
            return added
        _, a, b = best
        keep = part.merge(a, b)
        fusible -= {a, b}
        fusible.add(keep)


def move_candidates(pool: CandidatePool, groups: list[int]) -> int:
    """Neighbours of a plan: one op moved from its kernel into an adjacent one.

    For every kernel G and every op v next to it (producer, consumer, or a reader of
    the same value) in another kernel H, G + v and H - v become candidates; the next
    ILP round can then take any combination of such moves."""
    g = pool.graph
    owner: dict[int, int] = {}
    for gi, m in enumerate(groups):
        for i in bits(m):
            owner[i] = gi
    added = 0
    for m in groups:
        if m & g.fusible_mask != m:
            continue
        for v in bits(g.neighbourhood(m) & ~m & g.fusible_mask):
            added += pool.add(m | (1 << v), "move")
            rest = groups[owner[v]] & ~(1 << v)
            if rest:
                added += pool.add(rest, "move")
    return added
