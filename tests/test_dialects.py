"""The graph and fusion dialects: round trips, verifiers, purity, canonicalization.

Every op is built programmatically from OP_TABLE, printed, parsed and printed
again (custom and generic form must agree); the table must name every op of the
dialect, so a new op cannot skip the round trip.
"""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp, Signedness, bf16, f16, f32, f64, i1, i32, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.transforms.canonicalize import CanonicalizePass
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.utils.exceptions import VerifyException

from mlfuse.dialects import fusion, graph, loop
from mlfuse.dialects.graph_canonicalize import MAX_FOLDED_ELEMENTS
from mlfuse.ir import make_context, parse_module
from mlfuse.reference import reference

from conftest import make_module, random_array, tensor_type

t = tensor_type


def print_module(module: Operation, generic: bool = False) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    return out.getvalue()


def const(values, el: Attribute = f32) -> graph.ConstantOp:
    return graph.ConstantOp.from_numpy(np.asarray(values, dtype=graph.numpy_dtype(el)), el)


def group_module() -> ModuleOp:
    def build(x, y):
        body = Block(arg_types=[x.type, y.type])
        a, b = body.args
        add = graph.AddOp(a, b)
        e = graph.ExpOp(add.result)
        body.add_ops([add, e, fusion.YieldOp(e.result, add.result)])
        return fusion.GroupOp("fused_add_exp", "loop", [x, y], [x.type, x.type], Region(body))

    return make_module([t((4, 8)), t((4, 8))], build)


X48 = t((4, 8))
# op class -> (argument types, builder of the op from the arguments)
OP_TABLE: dict[type[Operation], tuple[list[Attribute], Callable[..., Operation | list[Operation]]]] = {
    graph.NegOp: ([t((4, 8), i32)], graph.NegOp),
    graph.AbsOp: ([X48], graph.AbsOp),
    graph.ExpOp: ([t((3,), f16)], graph.ExpOp),
    graph.LogOp: ([t((3,), bf16)], graph.LogOp),
    graph.SqrtOp: ([t((2, 2), f64)], graph.SqrtOp),
    graph.RsqrtOp: ([X48], graph.RsqrtOp),
    graph.ReciprocalOp: ([X48], graph.ReciprocalOp),
    graph.TanhOp: ([X48], graph.TanhOp),
    graph.ErfOp: ([X48], graph.ErfOp),
    graph.SinOp: ([X48], graph.SinOp),
    graph.CosOp: ([t((3,), f64)], graph.CosOp),
    graph.SigmoidOp: ([X48], graph.SigmoidOp),
    graph.ReluOp: ([t((5,), i64)], graph.ReluOp),
    graph.GeluOp: ([X48], lambda x: graph.GeluOp(x, "tanh")),
    graph.FloorOp: ([X48], graph.FloorOp),
    graph.CeilOp: ([t((3,), f16)], graph.CeilOp),
    graph.RoundOp: ([t((2, 2), f64)], graph.RoundOp),
    graph.CastOp: ([X48], lambda x: graph.CastOp(x, i32)),
    graph.AddOp: ([X48, X48], graph.AddOp),
    graph.SubOp: ([X48, X48], graph.SubOp),
    graph.MulOp: ([X48, X48], graph.MulOp),
    graph.DivOp: ([t((7,), i32), t((7,), i32)], graph.DivOp),
    graph.MaxOp: ([X48, X48], graph.MaxOp),
    graph.MinOp: ([X48, X48], graph.MinOp),
    graph.PowOp: ([X48, X48], graph.PowOp),
    graph.RemOp: ([t((6,), IntegerType(8, Signedness.UNSIGNED))] * 2, lambda a, b: graph.RemOp(a, b, fmod=True)),
    graph.BitcastOp: ([t((5,), f32)], lambda x: graph.BitcastOp(x, IntegerType(32, Signedness.UNSIGNED))),
    graph.BitAndOp: ([t((5,), i32)] * 2, graph.BitAndOp),
    graph.BitOrOp: ([t((5,), IntegerType(8, Signedness.UNSIGNED))] * 2, graph.BitOrOp),
    graph.BitXorOp: ([t((5,), i64)] * 2, graph.BitXorOp),
    graph.ShiftLeftOp: ([t((5,), IntegerType(16, Signedness.UNSIGNED))] * 2, graph.ShiftLeftOp),
    graph.ShiftRightOp: ([t((5,), i32)] * 2, graph.ShiftRightOp),
    graph.BitNotOp: ([t((5,), IntegerType(8))], graph.BitNotOp),
    graph.CompareOp: ([X48, X48], lambda a, b: graph.CompareOp("le", a, b)),
    graph.SelectOp: ([t((4, 8), i1), X48, X48], graph.SelectOp),
    graph.BroadcastOp: ([t((4, 1))], lambda x: graph.BroadcastOp(x, [1, 2], (3, 4, 8))),
    graph.ReduceSumOp: ([X48], lambda x: graph.ReduceSumOp(x, [1])),
    graph.ReduceMaxOp: ([X48], lambda x: graph.ReduceMaxOp(x, [-1], keepdims=True)),
    graph.ReduceMinOp: ([X48], lambda x: graph.ReduceMinOp(x, [0, 1])),
    graph.ReduceMeanOp: ([X48], lambda x: graph.ReduceMeanOp(x, [0], keepdims=True)),
    graph.ReduceProdOp: ([t((2, 3, 4), i32)], lambda x: graph.ReduceProdOp(x, [0, 2])),
    graph.TransposeOp: ([t((2, 3, 4))], lambda x: graph.TransposeOp(x, [2, 0, 1])),
    graph.ReshapeOp: ([X48], lambda x: graph.ReshapeOp(x, [2, 16])),
    graph.SliceOp: ([X48], lambda x: graph.SliceOp(x, [1, 0], [3, 8], [1, 3])),
    graph.PadOp: ([X48], lambda x: graph.PadOp(x, [0, 1], [2, 0], -1.5)),
    graph.ConcatOp: ([X48, t((4, 3))], lambda a, b: graph.ConcatOp([a, b], 1)),
    graph.GatherOp: ([t((10, 4)), t((2, 3), i64)], lambda d, i: graph.GatherOp(d, i, 0)),
    graph.GatherElementsOp: ([t((4, 5), IntegerType(16)), t((4, 2), i32)], lambda d, i: graph.GatherElementsOp(d, i, 1)),
    graph.MatmulOp: ([X48, t((8, 5))], graph.MatmulOp),
    graph.BatchMatmulOp: ([t((2, 4, 8)), t((2, 8, 3))], graph.BatchMatmulOp),
    graph.ConstantOp: ([], lambda: const([[1.0, -2.5], [3.25, 4.0]])),
    graph.Conv2dOp: (
        [t((1, 4, 8, 8)), t((6, 2, 3, 3))],
        lambda x, w: graph.Conv2dOp(x, w, strides=(2, 1), pads=(1, 1, 1, 1), groups=2),
    ),
    graph.MaxPool2dOp: ([t((1, 2, 9, 9))], lambda x: graph.MaxPool2dOp(x, (3, 3), (2, 2))),
    graph.AvgPool2dOp: (
        [t((1, 2, 8, 8))],
        lambda x: graph.AvgPool2dOp(x, (2, 2), (2, 2), (1, 1, 0, 0), count_include_pad=True),
    ),
}

MODULES: dict[str, Callable[[], ModuleOp]] = {
    op.name: (lambda entry=entry: make_module(*entry)) for op, entry in OP_TABLE.items()
}
MODULES["fusion.group"] = group_module


def test_table_covers_every_graph_op():
    missing = {op.name for op in graph.Graph.operations} - {op.name for op in OP_TABLE}
    assert not missing, f"add the new ops to OP_TABLE: {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_custom_form_round_trips(name: str):
    module = MODULES[name]()
    text = print_module(module)
    assert name in text
    reparsed = parse_module(text)
    assert print_module(reparsed) == text
    assert reparsed.is_structurally_equivalent(module)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_generic_form_round_trips(name: str):
    module = MODULES[name]()
    generic = print_module(module, generic=True)
    assert f'"{name}"' in generic
    reparsed = parse_module(generic)
    assert print_module(reparsed, generic=True) == generic
    assert print_module(reparsed) == print_module(module)


def test_every_graph_op_is_pure():
    # cse and dead-code elimination rely on it
    impure = [op.name for op in graph.Graph.operations if not op.has_trait(Pure)]
    assert not impure


def test_cse_merges_identical_graph_ops_only():
    def build(x):
        e0, e1 = graph.ExpOp(x), graph.ExpOp(x)
        exps = graph.ConcatOp([e0.result, e1.result], 0)
        r0, r1 = graph.ReduceSumOp(x, [0]), graph.ReduceSumOp(x, [1])  # differ in axes only
        r2 = graph.ReduceSumOp(exps.result, [0])
        return [e0, e1, exps, r0, r1, r2, graph.ConcatOp([r0.result, r1.result, r2.result], 0)]

    module = make_module([X48], build)
    CommonSubexpressionElimination().apply(make_context(), module)
    names = [op.name for op in module.walk()]
    assert names.count("graph.exp") == 1
    assert names.count("graph.reduce_sum") == 3


# --- verifiers -------------------------------------------------------------------------

INVALID: list[tuple[str, list[Attribute], Callable[..., Operation], str]] = [
    ("exp of ints", [t((4,), i32)], graph.ExpOp, "'graph.exp' expects a floating-point tensor, got element type i32"),
    ("neg of i1", [t((4,), i1)], graph.NegOp, "'graph.neg' does not accept i1 tensors"),
    ("i4 tensor", [t((4,), IntegerType(4))], graph.AbsOp, "'graph.abs' operand has unsupported element type i4"),
    ("explicitly signed tensor", [t((4,), IntegerType(32, Signedness.SIGNED))], graph.AbsOp,
     "'graph.abs' operand has unsupported element type si32"),
    ("gelu form", [X48], lambda x: graph.GeluOp(x, "fast"), "approximate must be \"none\" or \"tanh\""),
    ("pow of ints", [t((4,), i32)] * 2, graph.PowOp, "'graph.pow' expects a floating-point tensor"),
    ("compare predicate", [X48] * 2, lambda a, b: graph.CompareOp("lesser", a, b),
     "'graph.compare' predicate must be one of eq, ne, lt, le, gt, ge, got 'lesser'"),
    ("select condition", [t((4, 8), i32), X48, X48], graph.SelectOp,
     "'graph.select' condition must have element type i1, got i32"),
    ("broadcast dims order", [t((1, 8))], lambda x: graph.BroadcastOp(x, [1, 0], (8, 8)),
     "'graph.broadcast' dims must be strictly increasing, got [1, 0]"),
    ("broadcast size", [t((3,))], lambda x: graph.BroadcastOp(x, [1], (3, 4)),
     "operand dimension 0 of size 3 cannot broadcast to result dimension 1 of size 4"),
    ("reduce repeated axes", [X48], lambda x: graph.ReduceSumOp(x, [1, 1]), "axes has repeated entries [1, 1]"),
    ("reduce_mean of ints", [t((4,), i32)], lambda x: graph.ReduceMeanOp(x, [0]),
     "'graph.reduce_mean' expects a floating-point tensor"),
    ("transpose perm", [X48], lambda x: graph.TransposeOp(x, [0, 0]), "perm [0, 0] is not a permutation of 0..1"),
    ("reshape size", [X48], lambda x: graph.ReshapeOp(x, [5, 7]),
     "'graph.reshape' cannot reshape 4x8 (32 elements) to 5x7 (35 elements)"),
    ("slice bounds", [X48], lambda x: graph.SliceOp(x, [0, 6], [4, 10]), "bounds [6, 10) in dimension 1 are outside 0..8"),
    ("slice step", [X48], lambda x: _slice_step_zero(x), "step in dimension 1 must be >= 1, got 0"),
    ("pad negative", [X48], lambda x: graph.PadOp(x, [0, -1], [0, 0]), "padding amounts must be non-negative"),
    ("concat shapes", [X48, t((3, 7))], lambda a, b: _concat_mismatch(a, b),
     "operand 1 of shape 3x7 does not match 4x8 outside axis 0"),
    ("matmul K", [X48, t((7, 2))], lambda a, b: _matmul_with_result(a, b, (4, 2)),
     "'graph.matmul' contraction sizes differ: lhs 4x8 has K=8, rhs 7x2 has K=7"),
    ("batch dims", [t((2, 4, 8)), t((3, 8, 2))], lambda a, b: _batch_matmul_with_result(a, b, (2, 4, 2)),
     "'graph.batch_matmul' batch dimensions differ: 2 vs 3"),
    ("conv groups", [t((1, 4, 8, 8)), t((6, 4, 3, 3))], lambda x, w: graph.Conv2dOp(x, w, groups=3),
     "'graph.conv2d' groups = 3 must divide both the 4 input channels and the 6 output channels"),
]


def _slice_step_zero(x: SSAValue) -> Operation:
    op = graph.SliceOp(x, [0, 0], [4, 8])
    op.step = graph.i64_array([1, 0])
    return op


def _concat_mismatch(a: SSAValue, b: SSAValue) -> Operation:
    return graph.ConcatOp.create(
        operands=[a, b], result_types=[t((7, 8))], properties={"axis": IntegerAttr(0, i64)}
    )


def _matmul_with_result(a: SSAValue, b: SSAValue, shape) -> Operation:
    return graph.MatmulOp.create(operands=[a, b], result_types=[t(shape)])


def _batch_matmul_with_result(a: SSAValue, b: SSAValue, shape) -> Operation:
    return graph.BatchMatmulOp.create(operands=[a, b], result_types=[t(shape)])


@pytest.mark.parametrize("case", INVALID, ids=[c[0] for c in INVALID])
def test_verifier_message(case):
    _, arg_types, build, message = case
    block = Block(arg_types=arg_types)
    op = build(*block.args)
    with pytest.raises(VerifyException) as info:
        op.verify()
    assert message in str(info.value)


def test_fusion_group_verifier_messages():
    def group(kind: str = "loop", name: str = "g", yield_types_match: bool = True) -> fusion.GroupOp:
        x = Block(arg_types=[X48]).args[0]
        body = Block(arg_types=[X48])
        e = graph.ExpOp(body.args[0])
        r = graph.ReduceSumOp(body.args[0], [0])
        body.add_ops([e, r, fusion.YieldOp(e.result if yield_types_match else r.result)])
        return fusion.GroupOp(name, kind, [x], [X48], Region(body))

    group().verify()
    with pytest.raises(ValueError, match="kind must be one of loop, stitch"):
        group(kind="fused")  # an enum attribute: the IR cannot hold another kind
    with pytest.raises(VerifyException, match="needs a non-empty name"):
        group(name="").verify()
    with pytest.raises(VerifyException, match=r"'fusion.yield' types \(tensor<8xf32>\) do not match"):
        group(yield_types_match=False).verify()


def test_kinds_are_enum_attributes_that_compare_as_strings():
    """Iterator, index and group kinds are EnumAttributes; the Python API still sees strings."""
    buf = Block(arg_types=[tensor_type((4,))]).args[0]  # any value: the nest is not verified
    body = Block(arg_types=[f32, f32])
    body.add_op(loop.YieldOp(body.args[1]))
    nest = loop.NestOp("n", [4, 8], ["parallel", loop.REDUCTION], [buf], [buf], [], Region(body))
    assert all(isinstance(a, loop.IteratorKindAttr) for a in nest.iterators.data)
    assert nest.iterator_kinds == ["parallel", "reduction"] and loop.PARALLEL == "parallel"
    assert {"parallel": 1}[nest.iterator_kinds[0]] == 1 and f"{nest.iterator_kinds[1]}" == "reduction"
    with pytest.raises(ValueError, match="'loop.nest' iterator must be parallel or reduction, got 'window'"):
        loop.NestOp("n", [4], ["window"], [], [buf], [], Region(Block()))
    with pytest.raises(ValueError, match="'loop.index' kind must be dim or sym, got 'row'"):
        loop.IndexOp("row", 0)
    assert loop.IndexOp("sym", 1).kind.data == "sym"
    g = fusion.GroupOp("g", "stitch", [], [], Region(Block()))
    assert isinstance(g.kind, fusion.GroupKindAttr) and g.kind.data == "stitch" and "stitch" in fusion.GROUP_KINDS


def test_enum_attributes_round_trip_in_generic_form():
    text = '''func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %r = fusion.group "g" kind = "reduce" (%x) : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    fusion.yield %a : tensor<8xf32>
  }
  func.return %r : tensor<8xf32>
}'''
    module = parse_module(text)
    out = StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    assert 'kind = #fusion<group_kind "reduce">' in out.getvalue()
    again = parse_module(out.getvalue())
    assert str(again) == str(module)


# --- canonicalization ----------------------------------------------------------------------


def canonicalized(module: ModuleOp) -> ModuleOp:
    result = module.clone()
    CanonicalizePass().apply(make_context(), result)
    result.verify()
    return result


def op_names(module: ModuleOp) -> list[str]:
    return [op.name for op in module.walk() if op.name.startswith("graph.")]


def assert_same_values(before: ModuleOp, after: ModuleOp, inputs: list[np.ndarray]) -> None:
    for want, got in zip(reference(before)(*inputs), reference(after)(*inputs), strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


permutations = st.integers(2, 4).flatmap(
    lambda rank: st.tuples(st.permutations(range(rank)), st.permutations(range(rank)))
)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(perms=permutations)
def test_transpose_chains_become_one_transpose(perms):
    p1, p2 = perms
    shape = (2, 3, 4, 5)[: len(p1)]
    module = make_module(
        [t(shape)],
        lambda x: [a := graph.TransposeOp(x, p1), graph.TransposeOp(a.result, p2)],
    )
    after = canonicalized(module)
    assert op_names(after).count("graph.transpose") <= 1
    x = random_array(np.random.default_rng(0), shape)
    assert_same_values(module, after, [x])


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    shape=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    lead1=st.lists(st.integers(1, 3), max_size=2),
    lead2=st.lists(st.integers(1, 3), max_size=2),
)
def test_broadcast_chains_become_one_broadcast(shape, lead1, lead2):
    mid = (*lead1, *shape)
    out = (*lead2, *mid)
    module = make_module(
        [t(shape)],
        lambda x: [
            a := graph.BroadcastOp(x, range(len(lead1), len(mid)), mid),
            graph.BroadcastOp(a.result, range(len(lead2), len(out)), out),
        ],
    )
    after = canonicalized(module)
    assert op_names(after).count("graph.broadcast") <= 1
    assert_same_values(module, after, [random_array(np.random.default_rng(1), shape)])


def test_reshape_chain_becomes_one_reshape():
    module = make_module(
        [t((4, 6))],
        lambda x: [a := graph.ReshapeOp(x, [2, 12]), b := graph.ReshapeOp(a.result, [24]), graph.ReshapeOp(b.result, [3, 8])],
    )
    after = canonicalized(module)
    assert op_names(after) == ["graph.reshape"]
    assert_same_values(module, after, [random_array(np.random.default_rng(2), (4, 6))])


FOLDABLE_UNARY = [
    graph.NegOp, graph.AbsOp, graph.ExpOp, graph.LogOp, graph.SqrtOp, graph.RsqrtOp,
    graph.ReciprocalOp, graph.TanhOp, graph.ErfOp, graph.SinOp, graph.CosOp, graph.SigmoidOp, graph.ReluOp,
]
FOLDABLE_BINARY = [graph.AddOp, graph.SubOp, graph.MulOp, graph.DivOp, graph.MaxOp, graph.MinOp, graph.PowOp]


@pytest.mark.parametrize("op_type", FOLDABLE_UNARY + [graph.GeluOp], ids=lambda o: o.name)
def test_unary_ops_on_constants_fold_to_the_reference_value(op_type, rng):
    values = np.abs(random_array(rng, (3, 5)))  # positive: log, sqrt, rsqrt stay finite
    module = make_module([], lambda: [c := const(values), op_type(c.result)])
    after = canonicalized(module)
    assert op_names(after) == ["graph.constant"]
    assert_same_values(module, after, [])


@pytest.mark.parametrize("op_type", FOLDABLE_BINARY, ids=lambda o: o.name)
def test_binary_ops_on_constants_fold_to_the_reference_value(op_type, rng):
    a, b = np.abs(random_array(rng, (2, 8))), random_array(rng, (2, 8))
    module = make_module([], lambda: [x := const(a), y := const(b), op_type(x.result, y.result)])
    after = canonicalized(module)
    assert op_names(after) == ["graph.constant"]
    assert_same_values(module, after, [])


def test_compare_select_cast_fold(rng):
    a, b = random_array(rng, (4,)), random_array(rng, (4,))

    def build():
        x, y = const(a), const(b)
        lt = graph.CompareOp("lt", x.result, y.result)
        sel = graph.SelectOp(lt.result, x.result, y.result)
        return [x, y, lt, sel, graph.CastOp(sel.result, i32)]

    module = make_module([], build)
    after = canonicalized(module)
    assert op_names(after) == ["graph.constant"]
    assert_same_values(module, after, [])


def test_folding_stops_at_the_size_limit(rng):
    small = random_array(rng, (8,))
    rows = MAX_FOLDED_ELEMENTS // 8

    def build(n):
        return lambda: [c := const(small), graph.BroadcastOp(c.result, [1], (n, 8))]

    assert op_names(canonicalized(make_module([], build(rows)))) == ["graph.constant"]
    assert op_names(canonicalized(make_module([], build(rows + 1)))) == ["graph.constant", "graph.broadcast"]


def test_a_large_constant_moved_by_its_only_user_folds(rng):
    """A frozen weight's transpose (any size) folds when nothing else reads the weight;
    with a second user both would be kept, so it does not."""
    w = random_array(rng, (24, 16))
    module = make_module([t((16, 24))], lambda x: [c := const(w), tr := graph.TransposeOp(c.result, [1, 0]),
                                                   graph.AddOp(x, tr.result)])
    after = canonicalized(module)
    assert op_names(after) == ["graph.constant", "graph.add"]
    assert_same_values(module, after, [random_array(np.random.default_rng(3), (16, 24))])

    square = random_array(rng, (16, 16))

    def shared(x):
        c = const(square)
        tr = graph.TransposeOp(c.result, [1, 0])
        a = graph.AddOp(x, c.result)
        return [c, tr, a, graph.AddOp(a.result, tr.result)]

    module = make_module([t((16, 16))], shared)
    kept = canonicalized(module)
    assert "graph.transpose" in op_names(kept)
    assert_same_values(module, kept, [random_array(np.random.default_rng(4), (16, 16))])


def test_folding_keeps_a_large_splat_a_splat():
    module = make_module([], lambda: [c := const(1.5), b := graph.BroadcastOp(c.result, [], (128, 128)), graph.ExpOp(b.result)])
    after = canonicalized(module)
    (constant,) = [op for op in after.walk() if isinstance(op, graph.ConstantOp)]
    assert graph.shape_of(constant.result) == ()  # a large splat is a broadcast scalar
    np.testing.assert_array_equal(constant.to_numpy(), np.exp(np.float32(1.5)))
    (broadcast,) = [op for op in after.walk() if isinstance(op, graph.BroadcastOp)]
    assert graph.shape_of(broadcast.result) == (128, 128)


def test_folded_constant_keeps_the_source_location():
    text = """func.func @main() -> tensor<2xf32> {
  %c = graph.constant dense<[1.0, 4.0]> : tensor<2xf32>
  %s = graph.sqrt %c : tensor<2xf32>
  func.return %s : tensor<2xf32>
}"""
    from mlfuse.diagnostics import location_of, parse_located

    module = parse_located(make_context(), text, "folded.mlir")
    CanonicalizePass().apply(make_context(), module)
    (constant,) = [op for op in module.walk() if isinstance(op, graph.ConstantOp)]
    assert location_of(constant) == "folded.mlir:3:3"


def test_hexadecimal_float_elements_are_bits():
    """MLIR reads `0xFF800000` in a float dense literal as bits, and xDSL prints infinities
    and NaNs that way: they must read back as themselves (diagnostics.HexBits)."""
    from mlfuse.ir import parse_module

    source = """func.func @main() -> (tensor<4xf32>, tensor<2xf16>, tensor<2xf64>, tensor<1xbf16>) {
      %a = graph.constant dense<[0xFF800000, 0x7F800000, 0x7FC00000, 0x80000000]> : tensor<4xf32>
      %b = graph.constant dense<[0xFC00, 0x3C00]> : tensor<2xf16>
      %c = graph.constant dense<[0x7FF0000000000000, -2.5]> : tensor<2xf64>
      %d = graph.constant dense<0xFF80> : tensor<1xbf16>
      func.return %a, %b, %c, %d : tensor<4xf32>, tensor<2xf16>, tensor<2xf64>, tensor<1xbf16>
    }"""
    module = parse_module(source)
    a, b, c, d = [op.value.get_values() for op in module.walk() if isinstance(op, graph.ConstantOp)]
    assert a[:2] == (-np.inf, np.inf) and np.isnan(a[2]) and a[3] == 0.0 and np.signbit(a[3])
    assert b == (-np.inf, 1.0) and c == (np.inf, -2.5) and d == (-np.inf,)
    printed = str(module)
    assert "0xff800000" in printed.lower()
    again = [op.value.get_values() for op in parse_module(printed).walk() if isinstance(op, graph.ConstantOp)]
    assert str(again) == str([a, b, c, d])
    with pytest.raises(Exception, match=r"0x1ffffffff does not fit the 32 bits of f32"):
        parse_module(source.replace("0xFF800000", "0x1FFFFFFFF"))
