"""Op classes of the fusion planner (mlfuse.analysis.op_classes)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, TensorType, f32, i1, i32, i64
from xdsl.ir import Block

from mlfuse.analysis.op_classes import (
    ContractionSize,
    OpClass,
    ReductionLayout,
    classify,
    contraction_flops,
    reduction_layout,
)
from mlfuse.dialects import graph
from mlfuse.frontend.builder import GraphBuilder


def last_op(build):
    b = GraphBuilder()
    build(b)
    return list(b._block.ops)[-1]


@pytest.mark.parametrize(
    "build, expected",
    [
        (lambda b: b.input("x", (4, 8)) + b.input("y", (4, 8)), OpClass.LIGHT_ELEMENTWISE),
        (lambda b: b.input("x", (4, 8)) * b.input("y", (4, 8)), OpClass.LIGHT_ELEMENTWISE),
        (lambda b: b.maximum(b.input("x", (4,)), b.input("y", (4,))), OpClass.LIGHT_ELEMENTWISE),
        (lambda b: b.relu(b.input("x", (4,))), OpClass.LIGHT_ELEMENTWISE),
        (lambda b: b.less(b.input("x", (4,)), b.input("y", (4,))), OpClass.LIGHT_ELEMENTWISE),
        (lambda b: b.cast(b.input("x", (4,)), "i32"), OpClass.LIGHT_ELEMENTWISE),
        (lambda b: b.exp(b.input("x", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.log(b.input("x", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.tanh(b.input("x", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.erf(b.input("x", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.sqrt(b.input("x", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.rsqrt(b.input("x", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.gelu(b.input("x", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.input("x", (4,)) / b.input("y", (4,)), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.pow(b.input("x", (4,)), b.input("y", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.broadcast_to(b.input("x", (8,)), (4, 8)), OpClass.BROADCAST),
        (lambda b: b.transpose(b.input("x", (4, 8))), OpClass.INJECTIVE),
        (lambda b: b.reshape(b.input("x", (4, 8)), (32,)), OpClass.INJECTIVE),
        (lambda b: b.slice(b.input("x", (4, 8)), (0, 0), (2, 8)), OpClass.INJECTIVE),
        (lambda b: b.pad(b.input("x", (4, 8)), 1), OpClass.INJECTIVE),
        (lambda b: b.concat([b.input("x", (4, 8)), b.input("y", (4, 8))]), OpClass.INJECTIVE),
        (lambda b: b.sum(b.input("x", (4, 8)), axis=1), OpClass.REDUCTION),
        (lambda b: b.matmul(b.input("x", (4, 8)), b.input("y", (8, 2))), OpClass.CONTRACTION),
        (lambda b: b.constant(np.arange(4.0, dtype=np.float32)), OpClass.CONSTANT),
    ],
)
def test_classes(build, expected):
    info = classify(last_op(build))
    assert info.op_class is expected
    assert info.fusible == (expected is not OpClass.CONSTANT)


def test_expensive_ops_cost_more_than_light_ones():
    light = classify(last_op(lambda b: b.input("x", (4,)) + b.input("y", (4,))))
    exp = classify(last_op(lambda b: b.exp(b.input("x", (4,)))))
    div = classify(last_op(lambda b: b.input("x", (4,)) / b.input("y", (4,))))
    assert light.element_cost == 1.0
    assert exp.element_cost > div.element_cost > light.element_cost


def test_foreign_ops_are_opaque():
    op = arith.ConstantOp(IntegerAttr(1, i32))
    info = classify(op)
    assert info.op_class is OpClass.OPAQUE and not info.fusible


@pytest.mark.parametrize(
    "shape, axes, layout",
    [
        ((4, 8), (1,), ReductionLayout.ROW),
        ((2, 4, 8), (1, 2), ReductionLayout.ROW),
        ((4, 8, 1), (1,), ReductionLayout.ROW),  # trailing unit dims do not count
        ((4, 8), (0,), ReductionLayout.COLUMN),
        ((2, 4, 8), (1,), ReductionLayout.COLUMN),  # a middle axis is strided
        ((2, 4, 8), (0, 1), ReductionLayout.COLUMN),
        ((4, 8), (0, 1), ReductionLayout.FULL),
        ((1, 8), (1,), ReductionLayout.FULL),  # every non-unit axis
        ((4, 1), (1,), ReductionLayout.ROW),  # only a unit axis: one element per output
    ],
)
def test_reduction_layout(shape, axes, layout):
    assert reduction_layout(shape, axes) is layout


def test_reduction_info_from_ops():
    row = classify(last_op(lambda b: b.mean(b.input("x", (16, 32)), axis=-1, keepdims=True)))
    col = classify(last_op(lambda b: b.sum(b.input("x", (16, 32)), axis=0)))
    full = classify(last_op(lambda b: b.max(b.input("x", (16, 32)))))
    assert (row.reduction, row.row_length) == (ReductionLayout.ROW, 32)
    assert (col.reduction, col.row_length) == (ReductionLayout.COLUMN, 16)
    assert (full.reduction, full.row_length) == (ReductionLayout.FULL, 512)


def test_contractions_split_by_size():
    small = last_op(lambda b: b.matmul(b.input("q", (12, 128, 64)), b.input("k", (12, 64, 128))))
    large = last_op(lambda b: b.matmul(b.input("x", (128, 768)), b.input("w", (768, 768))))
    assert contraction_flops(small) == 2 * 12 * 128 * 64 * 128
    assert classify(small).contraction is ContractionSize.FINE and classify(small).fusible
    assert classify(large).contraction is ContractionSize.LARGE and not classify(large).fusible
    # the threshold is a parameter
    assert classify(small, fine_gemm_flops=1000).contraction is ContractionSize.LARGE
    assert classify(large, fine_gemm_flops=2**40).contraction is ContractionSize.FINE


def test_a_wide_matrix_vector_product_is_large():
    """One row against at least WIDE_MATVEC_MIN_BYTES of weights (a classifier head) is
    large, however few its flops: the GEMM kernel splits its columns across the team,
    where a stitched band of one row ran on one thread. Narrower weights or more rows
    stay fine-grained."""
    head = last_op(lambda b: b.matmul(b.input("x", (1, 512)), b.input("w", (512, 1000))))
    narrow = last_op(lambda b: b.matmul(b.input("x", (1, 64)), b.input("w", (64, 1000))))
    rows = last_op(lambda b: b.matmul(b.input("x", (2, 512)), b.input("w", (512, 1000))))
    assert contraction_flops(head) <= 2**26
    assert classify(head).contraction is ContractionSize.LARGE
    assert classify(narrow).contraction is ContractionSize.FINE
    assert classify(rows).contraction is ContractionSize.FINE


# --- op facts: every graph op carries exactly the traits the planner and the code
# generators query (dialects/graph.py, "op facts"), so that adding an op means
# touching the dialect (and, for an elementwise op, mlfuse.conversion.scalar) only.

FACTS = (graph.Elementwise, graph.Injective, graph.Reduction, graph.Contraction, graph.Window)
# ops that are none of the above: materialized constants
NO_FACTS = {graph.ConstantOp}


def facts_of(op_type) -> list[type]:
    return [f for f in FACTS if op_type.has_trait(f)]


@pytest.mark.parametrize("op_type", list(graph.Graph.operations), ids=lambda t: t.name)
def test_every_graph_op_carries_one_fact(op_type):
    facts = facts_of(op_type)
    if op_type in NO_FACTS:
        assert facts == []
    else:
        assert len(facts) == 1, f"{op_type.name} has facts {facts}"
    elementwise = op_type.get_trait(graph.Elementwise)
    if elementwise is not None:
        assert elementwise.cost >= 1.0
        assert issubclass(op_type, graph.ELEMENTWISE_OPS)
    injective = op_type.get_trait(graph.Injective)
    if injective is not None:  # one index map per injective op, defined on the op
        assert callable(getattr(op_type, "source_index", None))
        assert "source_index" in {name for cls in op_type.__mro__ if cls.__module__ == graph.__name__ for name in vars(cls)}
    if op_type.has_trait(graph.Reduction):
        assert op_type.get_trait(graph.Reduction).kind in ("sum", "max", "min", "mean", "prod")


# (op name, op class, element cost): the planner's view of every graph op
EXPECTED = {
    **{n: (OpClass.LIGHT_ELEMENTWISE, 1.0) for n in (
        "add", "sub", "mul", "max", "min", "neg", "abs", "relu", "floor", "ceil", "round", "compare", "select", "cast",
        "bitand", "bitor", "bitxor", "shl", "shr", "bitnot", "bitcast")},
    "div": (OpClass.EXPENSIVE_ELEMENTWISE, 4.0), "rem": (OpClass.EXPENSIVE_ELEMENTWISE, 6.0),
    "sqrt": (OpClass.EXPENSIVE_ELEMENTWISE, 4.0), "rsqrt": (OpClass.EXPENSIVE_ELEMENTWISE, 4.0),
    "reciprocal": (OpClass.EXPENSIVE_ELEMENTWISE, 4.0), "exp": (OpClass.EXPENSIVE_ELEMENTWISE, 8.0),
    "log": (OpClass.EXPENSIVE_ELEMENTWISE, 8.0), "tanh": (OpClass.EXPENSIVE_ELEMENTWISE, 10.0),
    "erf": (OpClass.EXPENSIVE_ELEMENTWISE, 10.0), "sigmoid": (OpClass.EXPENSIVE_ELEMENTWISE, 10.0),
    "sin": (OpClass.EXPENSIVE_ELEMENTWISE, 20.0), "cos": (OpClass.EXPENSIVE_ELEMENTWISE, 20.0),
    "pow": (OpClass.EXPENSIVE_ELEMENTWISE, 16.0), "gelu": (OpClass.EXPENSIVE_ELEMENTWISE, 20.0),
    "broadcast": (OpClass.BROADCAST, 0.0),
    **{n: (OpClass.INJECTIVE, 0.0) for n in (
        "transpose", "reshape", "slice", "pad", "concat", "gather", "gather_elements")},
    **{f"reduce_{k}": (OpClass.REDUCTION, 1.0) for k in ("sum", "max", "min", "mean", "prod")},
    "matmul": (OpClass.CONTRACTION, 0.0), "batch_matmul": (OpClass.CONTRACTION, 0.0),
    "constant": (OpClass.CONSTANT, 0.0),
    **{n: (OpClass.WINDOW, 0.0) for n in ("conv2d", "max_pool2d", "avg_pool2d")},
}


def test_planner_classes_of_every_graph_op():
    """classify reads the facts on the op: the same classes and costs the planner's
    own tables used to give, for every op of the dialect."""
    names = {t.name.removeprefix("graph.") for t in graph.Graph.operations}
    assert names == set(EXPECTED)
    for op in sample_ops():
        name = op.name.removeprefix("graph.")
        info = classify(op)
        assert (info.op_class, info.element_cost) == EXPECTED[name], name
    assert {op.name.removeprefix("graph.") for op in sample_ops()} == names


def sample_ops() -> list:
    """One instance of every graph op."""
    t = lambda shape, el=f32: TensorType(el, shape)  # noqa: E731
    x, y, v, w, p, q, ids, idx, img, k, c = Block(arg_types=[
        t([4, 8]), t([4, 8]), t([8]), t([8, 2]), t([2, 4, 8]), t([2, 8, 3]), t([3], i64), t([4, 2], i64),
        t([1, 2, 6, 6]), t([3, 2, 3, 3]), t([4, 8], i1),
    ]).args
    n = Block(arg_types=[t([4, 8], i32)]).args[0]
    ops = [cls(x) for cls in (graph.NegOp, graph.AbsOp, graph.ExpOp, graph.LogOp, graph.SqrtOp, graph.RsqrtOp,
                              graph.ReciprocalOp, graph.TanhOp, graph.ErfOp, graph.SinOp, graph.CosOp, graph.SigmoidOp, graph.ReluOp, graph.GeluOp,
                              graph.FloorOp, graph.CeilOp, graph.RoundOp)]
    ops += [cls(x, y) for cls in (graph.AddOp, graph.SubOp, graph.MulOp, graph.DivOp, graph.MaxOp, graph.MinOp,
                                  graph.RemOp, graph.PowOp)]
    ops += [graph.CompareOp("lt", x, y), graph.SelectOp(c, x, y), graph.CastOp(x, i32)]
    ops += [cls(n, n) for cls in (graph.BitAndOp, graph.BitOrOp, graph.BitXorOp, graph.ShiftLeftOp, graph.ShiftRightOp)]
    ops += [graph.BitNotOp(n), graph.BitcastOp(x, i32)]
    ops += [cls(x, [1]) for cls in (graph.ReduceSumOp, graph.ReduceMaxOp, graph.ReduceMinOp, graph.ReduceMeanOp,
                                    graph.ReduceProdOp)]
    ops += [
        graph.BroadcastOp(v, [1], [4, 8]), graph.TransposeOp(x, [1, 0]), graph.ReshapeOp(x, [32]),
        graph.SliceOp(x, [0, 0], [2, 8]), graph.PadOp(x, [1, 1], [1, 1]), graph.ConcatOp([x, y], 0),
        graph.GatherOp(x, ids, 0), graph.GatherElementsOp(x, idx, 1),
        graph.MatmulOp(x, w), graph.BatchMatmulOp(p, q), graph.ConstantOp.from_numpy(np.arange(4.0), f32),
        graph.Conv2dOp(img, k), graph.MaxPool2dOp(img, [2, 2]), graph.AvgPool2dOp(img, [2, 2]),
    ]
    return ops


def test_window_facts():
    conv = last_op(lambda b: b.conv2d(b.input("x", (1, 2, 8, 8)), b.input("w", (4, 2, 3, 3)), strides=(2, 2), pads=(1, 1, 1, 1)))
    assert graph.is_window_op(conv) and not graph.is_window_op(last_op(lambda b: b.exp(b.input("x", (4,)))))
    geometry = graph.Window.geometry(conv)
    assert geometry == graph.WindowGeometry((3, 3), (2, 2), (1, 1, 1, 1), (1, 1))
    info = classify(conv)  # 1x4x4x4 outputs, each 2 x 3 x 3 multiply-adds; a 2-wide halo
    assert (info.op_class, info.window_flops, info.halo, info.fusible) == (OpClass.WINDOW, 2 * 64 * 18, (2, 2), True)
    pool = last_op(lambda b: b.max_pool2d(b.input("x", (1, 2, 8, 8)), (3, 3), dilations=(2, 2)))
    assert (classify(pool).window_flops, classify(pool).halo) == (2 * 4 * 4 * 9, (4, 4))


def test_index_maps_agree_across_builders():
    """The one index map per op, on affine expressions and on plain integers: the
    affine result evaluated at a point is the integer result at that point."""
    import itertools

    from xdsl.ir.affine import AffineExpr, AffineMap

    class Ints:
        def constant(self, n): return n
        def plus(self, a, b): return a + b
        def shift(self, a, n): return a + n
        def times(self, a, n): return a * n
        def floordiv(self, a, n): return a // n
        def mod(self, a, n): return a % n

    b = GraphBuilder()
    x = b.input("x", (2, 3, 4))
    ops = [b.transpose(x, (2, 0, 1)), b.reshape(x, (6, 4)), b.reshape(x, (2, 12)), b.reshape(x, (4, 1, 6)),
           b.slice(x, (0, 1, 1), (2, 3, 4), (1, 1, 2)), b.broadcast_to(b.input("r", (3, 1)), (2, 3, 5))]
    for op in (v.value.owner for v in ops):
        shape = graph.shape_of(op.results[0])
        rank = len(shape)
        dims = [AffineExpr.dimension(i) for i in range(rank)]
        m = AffineMap(rank, 0, tuple(op.source_index(0, dims, graph.AFFINE)))
        for point in itertools.product(*(range(n) for n in shape)):
            assert list(m.eval(list(point), [])) == op.source_index(0, list(point), Ints()), op.name
