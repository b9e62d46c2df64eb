"""The numpy reference against hand-written numpy, op by op.

The expected values are written independently of mlfuse.reference (other numpy
spellings, float64 accumulation, explicit loops where cheap), on random data that
is never zero. Sizes include 1, 3 and 1023; hypothesis draws broadcast and
reduction shapes. Tolerances are fp32: rtol 1e-6 for elementwise math, 1e-5 where
the reference accumulates in fp32 (sums, means, products, matmuls).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import f32, f64, i1, i32, i64
from xdsl.ir import Block, Region

from mlfuse.dialects import fusion, graph
from mlfuse.reference import ReferenceError, evaluate, has_semantics, interpreter, reference

from conftest import make_module, random_array
from conftest import tensor_type as t

ELEMENTWISE_RTOL = 1e-6
ACCUMULATE_RTOL = 1e-5
SIZES = [1, 3, 1023]

erf64 = np.vectorize(math.erf, otypes=[np.float64])


def run(module, *inputs):
    return reference(module)(*inputs)


def run_one(arg_types, build, *inputs) -> np.ndarray:
    (out,) = run(make_module(arg_types, build), *inputs)
    return out


def close(got: np.ndarray, want: np.ndarray, rtol: float = ELEMENTWISE_RTOL, atol: float = 1e-7) -> None:
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# --- elementwise ---------------------------------------------------------------------------


def positive(rng, shape, dtype="float32"):
    return np.abs(random_array(rng, shape, dtype))


# op -> (expected in float64, input generator)
UNARY = {
    graph.NegOp: (lambda x: -x, random_array),
    graph.AbsOp: (lambda x: np.where(x < 0, -x, x), random_array),
    graph.ExpOp: (lambda x: np.exp(x), random_array),
    graph.LogOp: (lambda x: np.log(x), positive),
    graph.SqrtOp: (lambda x: x**0.5, positive),
    graph.RsqrtOp: (lambda x: x**-0.5, positive),
    graph.ReciprocalOp: (lambda x: 1.0 / x, random_array),
    graph.TanhOp: (lambda x: (np.exp(2 * x) - 1) / (np.exp(2 * x) + 1), random_array),
    graph.ErfOp: (erf64, random_array),
    graph.SinOp: (np.vectorize(math.sin, otypes=[np.float64]), random_array),
    graph.CosOp: (np.vectorize(math.cos, otypes=[np.float64]), random_array),
    graph.SigmoidOp: (lambda x: 1.0 / (1.0 + np.exp(-x)), random_array),
    graph.ReluOp: (lambda x: np.where(x > 0, x, 0.0), random_array),
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("op_type", list(UNARY), ids=lambda o: o.name)
def test_unary_float(op_type, size, rng):
    expected, generate = UNARY[op_type]
    x = generate(rng, (size,))
    got = run_one([t((size,))], op_type, x)
    close(got, expected(x.astype(np.float64)).astype(np.float32))


@pytest.mark.parametrize("op_type", [graph.NegOp, graph.AbsOp, graph.ReluOp], ids=lambda o: o.name)
def test_unary_integer(op_type, rng):
    x = random_array(rng, (5, 7), "int32")
    want = {graph.NegOp: -x, graph.AbsOp: np.abs(x), graph.ReluOp: np.where(x > 0, x, 0)}[op_type]
    got = run_one([t((5, 7), i32)], op_type, x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("form", ["none", "tanh"])
def test_gelu(form, rng):
    x = random_array(rng, (4, 33)).astype(np.float32)
    x64 = x.astype(np.float64)
    if form == "tanh":
        want = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)))
    else:
        want = 0.5 * x64 * (1 + erf64(x64 / math.sqrt(2)))
    got = run_one([t(x.shape)], lambda v: graph.GeluOp(v, form), x)
    close(got, want.astype(np.float32), rtol=1e-5)


BINARY = {
    graph.AddOp: lambda a, b: a + b,
    graph.SubOp: lambda a, b: a - b,
    graph.MulOp: lambda a, b: a * b,
    graph.DivOp: lambda a, b: a / b,
    graph.MaxOp: lambda a, b: np.where(a >= b, a, b),
    graph.MinOp: lambda a, b: np.where(a <= b, a, b),
    graph.PowOp: lambda a, b: np.exp(b * np.log(a)),
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("op_type", list(BINARY), ids=lambda o: o.name)
def test_binary_float(op_type, size, rng):
    a = positive(rng, (size,)) if op_type is graph.PowOp else random_array(rng, (size,))
    b = random_array(rng, (size,))
    got = run_one([t((size,))] * 2, op_type, a, b)
    want = BINARY[op_type](a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    close(got, want)


def test_integer_division_truncates_towards_zero(rng):
    a = random_array(rng, (64,), "int32") * 7
    b = random_array(rng, (64,), "int32")
    got = run_one([t((64,), i32)] * 2, graph.DivOp, a, b)
    want = np.array([int(x / y) for x, y in zip(a.tolist(), b.tolist())], dtype=np.int32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op_type", [graph.AddOp, graph.SubOp, graph.MulOp, graph.MaxOp, graph.MinOp], ids=lambda o: o.name)
def test_binary_integer(op_type, rng):
    a, b = random_array(rng, (3, 5), "int64"), random_array(rng, (3, 5), "int64")
    got = run_one([t((3, 5), i64)] * 2, op_type, a, b)
    want = np.array(
        [[BINARY[op_type](int(x), int(y)) for x, y in zip(ra, rb)] for ra, rb in zip(a, b)], dtype=np.int64
    )
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("predicate", graph.COMPARE_PREDICATES)
def test_compare(predicate, rng):
    a = random_array(rng, (6, 7))
    b = np.where(rng.random((6, 7)) < 0.3, a, random_array(rng, (6, 7)))  # some ties
    got = run_one([t((6, 7))] * 2, lambda x, y: graph.CompareOp(predicate, x, y), a, b)
    python_op = {"eq": "__eq__", "ne": "__ne__", "lt": "__lt__", "le": "__le__", "gt": "__gt__", "ge": "__ge__"}[predicate]
    want = np.array([getattr(float(x), python_op)(float(y)) for x, y in zip(a.flat, b.flat)]).reshape(6, 7)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, want)


def test_select(rng):
    c = random_array(rng, (4, 9), "bool")
    a, b = random_array(rng, (4, 9)), random_array(rng, (4, 9))
    got = run_one([t((4, 9), i1), t((4, 9)), t((4, 9))], graph.SelectOp, c, a, b)
    want = np.array([x if k else y for k, x, y in zip(c.flat, a.flat, b.flat)], dtype=np.float32).reshape(4, 9)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("source", "target", "convert"),
    [
        (f32, i32, lambda x: np.array([int(v) for v in x.flat], np.int32).reshape(x.shape)),
        (f32, f64, lambda x: x.astype(np.float64)),
        (i32, f32, lambda x: x.astype(np.float32)),
        (f32, i1, lambda x: np.array([v != 0 for v in x.flat]).reshape(x.shape)),
        (i1, f32, lambda x: np.where(x, 1.0, 0.0).astype(np.float32)),
        (i64, i32, lambda x: x.astype(np.int32)),
    ],
    ids=["f32-i32", "f32-f64", "i32-f32", "f32-i1", "i1-f32", "i64-i32"],
)
def test_cast(source, target, convert, rng):
    x = random_array(rng, (3, 11), graph.numpy_dtype(source))
    if source == f32:
        x = x * 3  # values beyond +-1 so truncation matters
    got = run_one([t((3, 11), source)], lambda v: graph.CastOp(v, target), x)
    want = convert(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


# --- broadcast and reductions ------------------------------------------------------------


def broadcast_by_loops(x: np.ndarray, dims, shape) -> np.ndarray:
    out = np.empty(shape, x.dtype)
    for index in itertools.product(*(range(n) for n in shape)):
        source = tuple(0 if x.shape[i] == 1 else index[d] for i, d in enumerate(dims))
        out[index] = x[source]
    return out


@pytest.mark.parametrize(
    ("shape", "dims", "out"),
    [
        ((8,), (1,), (4, 8)),
        ((4, 1), (0, 1), (4, 8)),
        ((), (), (2, 3)),
        ((3,), (0,), (3, 5)),
        ((1, 5), (1, 2), (2, 3, 5)),
        ((1,), (1,), (1, 1023)),
    ],
)
def test_broadcast(shape, dims, out, rng):
    x = random_array(rng, shape)
    got = run_one([t(shape)], lambda v: graph.BroadcastOp(v, dims, out), x)
    np.testing.assert_array_equal(got, broadcast_by_loops(x, dims, out))


@st.composite
def broadcast_cases(draw):
    out = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    dims = sorted(draw(st.sets(st.integers(0, len(out) - 1), max_size=len(out))))
    shape = tuple(draw(st.sampled_from([1, out[d]])) for d in dims)
    return shape, tuple(dims), out


@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=broadcast_cases())
def test_broadcast_random_shapes(case):
    shape, dims, out = case
    x = random_array(np.random.default_rng(len(out)), shape)
    got = run_one([t(shape)], lambda v: graph.BroadcastOp(v, dims, out), x)
    np.testing.assert_array_equal(got, broadcast_by_loops(x, dims, out))


REDUCTIONS = {
    graph.ReduceSumOp: lambda x, axes: np.add.reduce(x, axis=axes),
    graph.ReduceMeanOp: lambda x, axes: np.add.reduce(x, axis=axes) / math.prod(x.shape[a] for a in axes),
    graph.ReduceMaxOp: lambda x, axes: np.maximum.reduce(x, axis=axes),
    graph.ReduceMinOp: lambda x, axes: np.minimum.reduce(x, axis=axes),
    graph.ReduceProdOp: lambda x, axes: np.multiply.reduce(x, axis=axes),
}
ALL_AXES_OF_RANK_3 = [axes for n in range(1, 4) for axes in itertools.combinations(range(3), n)]


def reduction_input(op_type, rng, shape):
    if op_type is graph.ReduceProdOp:
        return rng.uniform(0.8, 1.25, shape).astype(np.float32)  # keeps products near 1
    return random_array(rng, shape)


def expected_reduction(op_type, x, axes, keepdims):
    want = REDUCTIONS[op_type](x.astype(np.float64), tuple(axes))
    if keepdims:
        want = np.expand_dims(want, tuple(axes))
    return np.asarray(want).astype(x.dtype)


def close_reduction(got, x, op_type, axes, keepdims):
    """rtol 1e-5, plus an absolute slack of fp32 rounding of the summed magnitudes.

    A sum that cancels to nearly zero (sum |x| >> |sum x|) carries an error
    proportional to sum |x|, not to its own size.
    """
    want = expected_reduction(op_type, x, axes, keepdims)
    assert got.shape == want.shape and got.dtype == want.dtype
    magnitude = expected_reduction(graph.ReduceSumOp, np.abs(x), axes, keepdims).astype(np.float64)
    if op_type is graph.ReduceMeanOp:
        magnitude /= math.prod(x.shape[a] for a in axes)
    slack = 1e-6 * magnitude if op_type in (graph.ReduceSumOp, graph.ReduceMeanOp) else 0.0
    error = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert np.all(error <= ACCUMULATE_RTOL * np.abs(want) + slack + 1e-7), (got, want)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axes", ALL_AXES_OF_RANK_3, ids=str)
@pytest.mark.parametrize("op_type", list(REDUCTIONS), ids=lambda o: o.name)
def test_reduction_over_every_axis_set(op_type, axes, keepdims, rng):
    shape = (3, 5, 7)
    x = reduction_input(op_type, rng, shape)
    got = run_one([t(shape)], lambda v: op_type(v, axes, keepdims), x)
    close_reduction(got, x, op_type, axes, keepdims)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("op_type", list(REDUCTIONS), ids=lambda o: o.name)
def test_reduction_odd_sizes(op_type, size, rng):
    x = reduction_input(op_type, rng, (2, size))
    got = run_one([t((2, size))], lambda v: op_type(v, [1], True), x)
    close_reduction(got, x, op_type, [1], True)


@st.composite
def reduction_cases(draw):
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=4)))
    axes = sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
    return shape, axes, draw(st.booleans()), draw(st.sampled_from(list(REDUCTIONS)))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=reduction_cases())
def test_reduction_random_shapes(case):
    shape, axes, keepdims, op_type = case
    x = reduction_input(op_type, np.random.default_rng(sum(shape)), shape)
    got = run_one([t(shape)], lambda v: op_type(v, axes, keepdims), x)
    close_reduction(got, x, op_type, axes, keepdims)


def test_integer_sum_and_max(rng):
    x = random_array(rng, (4, 6), "int32")
    got = run_one([t((4, 6), i32)], lambda v: graph.ReduceSumOp(v, [1]), x)
    np.testing.assert_array_equal(got, np.array([sum(row) for row in x.tolist()], np.int32))
    got = run_one([t((4, 6), i32)], lambda v: graph.ReduceMaxOp(v, [0]), x)
    np.testing.assert_array_equal(got, np.array([max(col) for col in x.T.tolist()], np.int32))


# --- data movement ---------------------------------------------------------------------------


@pytest.mark.parametrize("perm", list(itertools.permutations(range(3))), ids=str)
def test_transpose(perm, rng):
    x = random_array(rng, (2, 3, 4))
    got = run_one([t(x.shape)], lambda v: graph.TransposeOp(v, perm), x)
    out_shape = tuple(x.shape[p] for p in perm)
    want = np.empty(out_shape, np.float32)
    for index in itertools.product(*(range(n) for n in out_shape)):
        source = [0] * 3
        for k, p in enumerate(perm):
            source[p] = index[k]
        want[index] = x[tuple(source)]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("shape", "out"), [((4, 6), (24,)), ((4, 6), (2, 3, 4)), ((1023,), (3, 341)), ((1,), ())])
def test_reshape(shape, out, rng):
    x = random_array(rng, shape)
    got = run_one([t(shape)], lambda v: graph.ReshapeOp(v, out), x)
    np.testing.assert_array_equal(got.reshape(-1), np.array(x.flatten().tolist(), np.float32))
    assert got.shape == out


@pytest.mark.parametrize(
    ("start", "stop", "step"),
    [((0, 0), (4, 9), (1, 1)), ((1, 2), (3, 9), (1, 3)), ((3, 0), (4, 1), (2, 5)), ((0, 4), (4, 4), (1, 1))],
)
def test_slice(start, stop, step, rng):
    x = random_array(rng, (4, 9))
    got = run_one([t(x.shape)], lambda v: graph.SliceOp(v, start, stop, step), x)
    rows = list(range(start[0], stop[0], step[0]))
    cols = list(range(start[1], stop[1], step[1]))
    want = np.array([[x[r, c] for c in cols] for r in rows], np.float32).reshape(len(rows), len(cols))
    np.testing.assert_array_equal(got, want)


def test_pad(rng):
    x = random_array(rng, (2, 3))
    got = run_one([t(x.shape)], lambda v: graph.PadOp(v, [1, 0], [2, 3], -4.5), x)
    want = np.full((5, 6), -4.5, np.float32)
    want[1:3, 0:3] = x
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_concat(axis, rng):
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    shapes = [tuple(n + i if d == axis else n for d, n in enumerate(s)) for i, s in enumerate(shapes)]
    xs = [random_array(rng, s) for s in shapes]
    got = run_one([t(s) for s in shapes], lambda *vs: graph.ConcatOp(vs, axis), *xs)
    parts = [np.moveaxis(x, axis, 0) for x in xs]
    want = np.moveaxis(np.array([row for part in parts for row in part]), 0, axis)
    np.testing.assert_array_equal(got, want)


# --- contractions and constants ----------------------------------------------------------------


@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (3, 5, 7), (4, 1023, 3)])
def test_matmul(m, k, n, rng):
    a, b = random_array(rng, (m, k)), random_array(rng, (k, n))
    got = run_one([t(a.shape), t(b.shape)], graph.MatmulOp, a, b)
    want = np.einsum("mk,kn->mn", a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    close(got, want, rtol=ACCUMULATE_RTOL, atol=1e-5)


def test_batch_matmul(rng):
    a, b = random_array(rng, (2, 3, 4, 5)), random_array(rng, (2, 3, 5, 6))
    got = run_one([t(a.shape), t(b.shape)], graph.BatchMatmulOp, a, b)
    want = np.einsum("xymk,xykn->xymn", a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    close(got, want, rtol=ACCUMULATE_RTOL, atol=1e-5)


def test_integer_matmul(rng):
    a, b = random_array(rng, (3, 4), "int32"), random_array(rng, (4, 2), "int32")
    got = run_one([t(a.shape, i32), t(b.shape, i32)], graph.MatmulOp, a, b)
    want = [[sum(a[i, p] * b[p, j] for p in range(4)) for j in range(2)] for i in range(3)]
    np.testing.assert_array_equal(got, np.array(want, np.int32))


def test_constants(rng):
    values = random_array(rng, (3, 4))
    got = run_one([], lambda: graph.ConstantOp.from_numpy(values, f32))
    np.testing.assert_array_equal(got, values)
    splat = run_one([], lambda: graph.ConstantOp.from_numpy(np.full((2, 5), 7, np.int64), i64))
    np.testing.assert_array_equal(splat, np.full((2, 5), 7, np.int64))


# --- whole programs ---------------------------------------------------------------------------


def test_softmax_program_with_a_fusion_group(rng):
    def build(x):
        m = graph.ReduceMaxOp(x, [1], keepdims=True)
        body = Block(arg_types=[x.type, m.result.type])
        a, b = body.args
        bb = graph.BroadcastOp(b, [0, 1], (4, 1023))
        d = graph.SubOp(a, bb.result)
        e = graph.ExpOp(d.result)
        body.add_ops([bb, d, e, fusion.YieldOp(e.result)])
        group = fusion.GroupOp("fused", "loop", [x, m.result], [x.type], Region(body))
        s = graph.ReduceSumOp(group.results[0], [1], keepdims=True)
        sb = graph.BroadcastOp(s.result, [0, 1], (4, 1023))
        return [m, group, s, sb, graph.DivOp(group.results[0], sb.result)]

    x = random_array(rng, (4, 1023)) * 3
    got = run_one([t((4, 1023))], build, x)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    close(got, (e / e.sum(axis=1, keepdims=True)).astype(np.float32), rtol=ACCUMULATE_RTOL)


def test_reference_parses_text():
    text = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %y = graph.mul %x, %x : tensor<3xf32>
  func.return %y : tensor<3xf32>
}"""
    x = np.array([1.5, -2.0, 3.0], np.float32)
    (got,) = reference(text)(x)
    np.testing.assert_array_equal(got, np.array([2.25, 4.0, 9.0], np.float32))


def test_reference_rejects_bad_calls():
    module = make_module([t((3,))], graph.ExpOp)
    with pytest.raises(ValueError, match=r"@main takes 1 arguments, got 2"):
        reference(module)(np.ones(3, np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"argument 0 of @main must have shape \(3,\), got \(4,\)"):
        reference(module)(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="argument 0 of @main must have dtype float32, got float64"):
        reference(module)(np.ones(3))
    with pytest.raises(ReferenceError, match=r"no function '@other' in module \(functions: main\)"):
        reference(module, entry="other")


def test_reference_names_ops_without_semantics():
    text = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %y = arith.addf %x, %x : tensor<3xf32>
  func.return %y : tensor<3xf32>
}"""
    with pytest.raises(ReferenceError, match="no semantics for 'arith.addf'"):
        reference(text)(np.ones(3, np.float32))


def test_reference_rejects_non_tensor_arguments():
    text = """func.func @main(%x: i32) -> i32 {
  func.return %x : i32
}"""
    with pytest.raises(ReferenceError, match="argument 0 of @main has type i32; the reference takes tensors only"):
        reference(text)(np.int32(1))


# --- the interpreter itself ---------------------------------------------------------------------


def test_every_graph_op_has_semantics():
    from xdsl.dialects.builtin import ModuleOp

    interp = interpreter(ModuleOp([]))
    assert [op.name for op in graph.Graph.operations if not interp.implements(op)] == []


def test_evaluate_runs_one_op_as_constant_folding_does(rng):
    module = make_module([t((3,)), t((3,))], graph.SubOp)
    op = next(o for o in module.walk() if isinstance(o, graph.SubOp))
    a, b = random_array(rng, (3,)), random_array(rng, (3,))
    (got,) = evaluate(op, [a, b])
    np.testing.assert_array_equal(got, a - b)
    assert has_semantics(op)
    # only graph ops fold: a group or a return is not one
    group = fusion.GroupOp("g", "loop", [], [], Region(Block()))
    assert not has_semantics(group)
    assert not has_semantics(module.body.block.first_op.body.block.last_op)


def test_errors_propagate_as_raised(monkeypatch):
    """xDSL's interpreter would print the whole module into the error's notes (megabytes of weights)."""
    import mlfuse.reference as ref

    def no_memory(fn, args):
        raise MemoryError

    monkeypatch.setattr(ref, "_elementwise", no_memory)
    with pytest.raises(MemoryError) as info:
        reference(make_module([t((3,))], graph.ExpOp))(np.ones(3, np.float32))
    assert not getattr(info.value, "__notes__", None)

