"""Random graphs (dozens of ops of mixed kinds) compile for the CPU and match the reference.

Graphs are built op by op over a pool of values of two shapes ([R, C] and
[R, 1]): elementwise ops, reductions with keepdims, broadcasts back to [R, C],
transposes when square, slices, pads and matmuls. Ops are chosen to keep values
well-conditioned (squashing unary ops, no division), so a fixed tolerance
(rtol 1e-4 plus 1e-5 of the output's magnitude) holds for dozens of chained ops.

A failing example is reported as its IR text (reduce it with `mlfuse-opt --shrink`),
and not shrunk by Hypothesis: each shrink step is a compile, and shrinking a
30-op graph took longer than the suite's time budget, which looked like a hang.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

import mlfuse
from mlfuse.dialects import graph

UNARY = [graph.NegOp, graph.AbsOp, graph.TanhOp, graph.SigmoidOp, graph.ReluOp]
BINARY = [graph.AddOp, graph.SubOp, graph.MulOp, graph.MaxOp, graph.MinOp]
REDUCE = [graph.ReduceSumOp, graph.ReduceMaxOp, graph.ReduceMeanOp, graph.ReduceMinOp]


def build(draw, rows: int, cols: int, n_ops: int) -> ModuleOp:
    full = TensorType(f32, [rows, cols])
    n_inputs = draw(st.integers(1, 3))
    block = Block(arg_types=[full] * n_inputs)
    b = Builder(InsertPoint.at_end(block))
    pool: list[SSAValue] = list(block.args)  # values of shape [rows, cols]
    for _ in range(n_ops):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduce", "move", "matmul"]))
        pick = lambda: pool[draw(st.integers(0, len(pool) - 1))]  # noqa: E731
        if kind == "unary":
            op = draw(st.sampled_from(UNARY))(pick())
            if isinstance(op, graph.TanhOp) and draw(st.booleans()):
                b.insert(op)
                op = graph.GeluOp(op.result, "tanh")
        elif kind == "binary":
            op = draw(st.sampled_from(BINARY))(pick(), pick())
        elif kind == "reduce":
            r = b.insert(draw(st.sampled_from(REDUCE))(pick(), [1], keepdims=True))
            op = graph.BroadcastOp(r.result, [0, 1], [rows, cols])
        elif kind == "move":
            x = pick()
            if rows == cols and draw(st.booleans()):
                op = graph.TransposeOp(x, [1, 0])
            else:
                s = b.insert(graph.SliceOp(x, [0, 1 if cols > 1 else 0], [rows, cols], [1, 1]))
                op = graph.PadOp(s.result, [0, 0], [0, cols - graph.shape_of(s.result)[1]], draw(st.sampled_from([0.0, 1.0])))
        else:
            w = b.insert(graph.TransposeOp(pick(), [1, 0])) if rows == cols else None
            if w is None:
                op = graph.TanhOp(pick())
            else:
                m = b.insert(graph.MatmulOp(pick(), w.result))
                op = graph.TanhOp(m.result)  # keep magnitudes bounded
        b.insert(op)
        pool.append(op.results[0])
    n_out = draw(st.integers(1, min(3, len(pool))))
    outputs = pool[-n_out:]
    b.insert(func.ReturnOp(*outputs))
    fn = func.FuncOp("main", ([full] * n_inputs, [v.type for v in outputs]), Region(block))
    return ModuleOp([fn])


@dataclass(frozen=True)
class RandomGraph:
    """A drawn graph as IR text: what Hypothesis prints for a failing example."""

    text: str

    def __repr__(self) -> str:
        return f"RandomGraph(text=\"\"\"\n{self.text}\n\"\"\")"


@st.composite
def graphs(draw):
    rows = draw(st.sampled_from([1, 3, 7, 16, 33]))
    cols = draw(st.sampled_from([1, 5, 16, 33, 130]))
    n_ops = draw(st.integers(3, 30))
    return RandomGraph(str(build(draw, rows, cols, n_ops)))


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(graph_=graphs(), seed=st.integers(0, 2**31))
def test_random_graph_matches_reference(graph_: RandomGraph, seed: int):
    module = mlfuse.parse(graph_.text)
    fn_op = next(iter(module.ops))
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(tuple(t.get_shape())).astype(np.float32) for t in fn_op.function_type.inputs.data]
    want = mlfuse.reference(module)(*inputs)
    compiled = mlfuse.compile(module.clone())
    outs = [np.full(w.shape, np.nan, np.float32) for w in want]
    got = compiled(*inputs, out=outs)
    for g, w in zip(got, want):
        scale = float(np.max(np.abs(w), initial=1.0))
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * scale)
