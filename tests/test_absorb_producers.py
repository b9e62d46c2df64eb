"""candidates.absorb_producers against its definition, on random graphs and every cap.

The planner's candidates (and so its plans) depend on which producers a pattern absorbs
when `max_size` cuts the rounds short; the implementation looks only at the producers of
each round's new members, and must pick exactly what rescanning every external producer
of the pattern in ascending order, round after round, picks."""

from __future__ import annotations

import random

import pytest
from xdsl.dialects import func

from mlfuse.analysis.candidates import absorb_producers
from mlfuse.analysis.fusion_graph import FusionGraph, bits
from mlfuse.frontend.builder import GraphBuilder, Tensor


def absorb_by_definition(g: FusionGraph, mask: int, max_size: int) -> int:
    """Rounds over the pattern's external producers, ascending, each joining when its users
    are all in the pattern (read off the values), until nothing joins or `max_size`."""
    changed = True
    while changed and mask.bit_count() < max_size:
        changed = False
        for p in bits(g.external_preds(mask)):
            node = g.nodes[p]
            if not node.fusible or any(g.values[r].escapes for r in node.results):
                continue
            if all(all((mask >> u) & 1 for u in g.values[r].users) for r in node.results):
                mask |= 1 << p
                changed = True
                if mask.bit_count() >= max_size:
                    break
    return mask


def elementwise(b: GraphBuilder, kind: str, x: Tensor, y: Tensor) -> Tensor:
    if kind == "+":
        return x + y
    if kind == "*":
        return x * y
    return b.exp(x) if kind == "e" else b.maximum(x, y)


def random_graph(seed: int) -> FusionGraph:
    """Elementwise ops on random earlier values (chains, diamonds, values used several
    times), some of them returned."""
    rng = random.Random(seed)
    b = GraphBuilder()
    values = [b.input("x", (4, 8)), b.input("y", (4, 8))]
    for _ in range(rng.randint(8, 30)):
        values.append(elementwise(b, rng.choice("+*em"), rng.choice(values[-6:]), rng.choice(values)))
    b.output(values[-1], *rng.sample(values[2:-1], rng.randint(0, 2)))
    fn = next(op for op in b.module().ops if isinstance(op, func.FuncOp))
    return FusionGraph.from_function(fn)


@pytest.mark.parametrize("seed", range(12))
def test_absorb_producers_picks_what_its_definition_picks(seed):
    g = random_graph(seed)
    rng = random.Random(seed)
    masks = [1 << i for i in range(len(g))] + [rng.getrandbits(len(g)) & g.all_mask for _ in range(10)]
    for mask in filter(None, masks):
        for cap in (1, 2, 3, 5, 8, len(g)):
            assert absorb_producers(g, mask, cap) == absorb_by_definition(g, mask, cap), (mask, cap)
