"""The Python graph builder: numpy semantics, the ops it emits, and its errors.

Each numeric test builds a function, evaluates it with mlfuse.reference on
random data and compares with the same expression written in numpy (fp32,
rtol 1e-6 elementwise, 1e-5 for reductions and matmuls).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from mlfuse.dialects import graph
from mlfuse.frontend.builder import GraphBuilder, Tensor
from mlfuse.ir import parse_module
from mlfuse.reference import reference

from conftest import random_array


def evaluate(build: Callable[..., Tensor | tuple], inputs: dict[str, np.ndarray]):
    """Build `build(builder, *inputs)`, check it parses back, and run the reference."""
    b = GraphBuilder()
    args = [b.input(name, a.shape, a.dtype) for name, a in inputs.items()]
    out = build(b, *args)
    b.output(*(out if isinstance(out, tuple) else (out,)))
    module = b.module()
    assert str(parse_module(str(module))) == str(module)
    results = reference(module)(*inputs.values())
    return results if isinstance(out, tuple) else results[0]


def ops_of(b: GraphBuilder) -> list[str]:
    return [op.name for op in b.module().walk() if op.name.startswith("graph.")]


def close(got, want, rtol=1e-6):
    want = np.asarray(want)
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6)


def test_softmax_example(rng):
    x = random_array(rng, (64, 128))

    def softmax(b, x):
        e = b.exp(x - b.reduce_max(x, axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    got = evaluate(softmax, {"x": x})
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    close(got, e / e.sum(axis=-1, keepdims=True), rtol=1e-5)


def test_function_signature_names_and_outputs():
    b = GraphBuilder(name="layer")
    x = b.input("x", (4, 8))
    bias = b.input("bias", (8,), np.float32)
    b.output(x + bias)
    b.output(b.relu(x), x)
    fn = b.function()
    assert fn.sym_name.data == "layer"
    assert [a.name_hint for a in fn.body.block.args] == ["x", "bias"]
    assert [str(t) for t in fn.function_type.outputs.data] == ["tensor<4x8xf32>"] * 3
    text = str(b.module())
    assert "func.func @layer(%x: tensor<4x8xf32>, %bias: tensor<8xf32>)" in text
    # the builder stays usable: another module later sees the new output too
    b.output(b.exp(x))
    assert len(b.function().function_type.outputs.data) == 4


def test_operators_with_scalars_on_either_side(rng):
    x, y = random_array(rng, (3, 5)), random_array(rng, (3, 5))

    def build(b, x, y):
        return (x + y, x - 2.0, 2.0 - x, x * 3, np.float32(0.5) * y, x / y, 1.0 / x, -x, abs(y), abs(x) ** 1.5, 2.0 ** y)

    got = evaluate(build, {"x": x, "y": y})
    f = np.float32
    want = (x + y, x - f(2), f(2) - x, x * f(3), f(0.5) * y, x / y, f(1) / x, -x, np.abs(y), np.abs(x) ** f(1.5), f(2) ** y)
    for g, w in zip(got, want, strict=True):
        close(g, w)


def test_comparisons_and_where(rng):
    x, y = random_array(rng, (2, 7)), random_array(rng, (2, 7))

    def build(b, x, y):
        return (x < y, x <= 0.5, x > y, x >= y, b.equal(x, x), b.not_equal(x, y), b.where(x > y, x, 0.0), b.where(x < 0, -1.0, y))

    got = evaluate(build, {"x": x, "y": y})
    want = (x < y, x <= 0.5, x > y, x >= y, x == x, x != y, np.where(x > y, x, np.float32(0)), np.where(x < 0, np.float32(-1), y))
    for g, w in zip(got, want, strict=True):
        close(g, w)


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [((4, 8), (8,)), ((4, 8), (4, 1)), ((4, 1), (1, 8)), ((2, 1, 8), (3, 1)), ((), (3, 2)), ((5,), (1,))],
)
def test_implicit_broadcasting_matches_numpy(a_shape, b_shape, rng):
    a, c = random_array(rng, a_shape), random_array(rng, b_shape)
    close(evaluate(lambda b, x, y: x * y - y, {"a": a, "c": c}), a * c - c)


def test_broadcasting_emits_one_broadcast_per_stretched_operand():
    b = GraphBuilder()
    x, v = b.input("x", (4, 8)), b.input("v", (8,))
    b.output(x + v, x + x)
    assert ops_of(b) == ["graph.broadcast", "graph.add", "graph.add"]
    (bcast,) = [op for op in b.module().walk() if isinstance(op, graph.BroadcastOp)]
    assert bcast.dim_map == (1,)
    assert graph.shape_of(bcast.result) == (4, 8)


def test_scalars_become_broadcast_rank0_constants_of_the_tensor_dtype():
    b = GraphBuilder()
    i = b.input("i", (3,), "i32")
    b.output(i * 2)
    (constant,) = [op for op in b.module().walk() if isinstance(op, graph.ConstantOp)]
    assert str(constant.result.type) == "tensor<i32>"
    assert constant.value.get_values() == (2,)
    (broadcast,) = [use.operation for use in constant.result.uses]
    assert isinstance(broadcast, graph.BroadcastOp) and str(broadcast.result.type) == "tensor<3xi32>"


UNARY_METHODS = {
    "exp": np.exp,
    "log": lambda x: np.log(np.abs(x)),
    "tanh": np.tanh,
    "sigmoid": lambda x: (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32),
    "relu": lambda x: np.maximum(x, np.float32(0)),
    "sqrt": lambda x: np.sqrt(np.abs(x)),
    "rsqrt": lambda x: (1 / np.sqrt(np.abs(x).astype(np.float64))).astype(np.float32),
    "reciprocal": lambda x: np.float32(1) / x,
    "abs": np.abs,
    "neg": np.negative,
}


@pytest.mark.parametrize("name", list(UNARY_METHODS))
def test_unary_methods(name, rng):
    x = random_array(rng, (3, 4))
    uses_abs = name in ("log", "sqrt", "rsqrt")
    got = evaluate(lambda b, x: getattr(b, name)(b.abs(x) if uses_abs else x), {"x": x})
    close(got, UNARY_METHODS[name](x))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate, rng):
    from scipy.special import erf

    x = random_array(rng, (16,)).astype(np.float64)
    got = evaluate(lambda b, x: b.gelu(x, approximate=approximate), {"x": x})
    if approximate == "tanh":
        want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    else:
        want = 0.5 * x * (1 + erf(x / np.sqrt(2)))
    close(got, want, rtol=1e-12)


def test_maximum_minimum_pow(rng):
    x, y = random_array(rng, (6,)), random_array(rng, (6,))
    got = evaluate(lambda b, x, y: (b.maximum(x, y), b.minimum(x, 0.0), b.pow(b.abs(x), y)), {"x": x, "y": y})
    close(got[0], np.maximum(x, y))
    close(got[1], np.minimum(x, np.float32(0)))
    close(got[2], np.abs(x) ** y, rtol=1e-5)


def test_cast_and_astype(rng):
    x = random_array(rng, (5,)) * 3
    got = evaluate(lambda b, x: (b.cast(x, "i32"), x.astype(np.float64), (x > 0).astype("f32")), {"x": x})
    close(got[0], np.trunc(x).astype(np.int32))
    close(got[1], x.astype(np.float64))
    close(got[2], (x > 0).astype(np.float32))


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (-1, 0)])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min", "prod"])
def test_reductions(kind, axis, keepdims, rng):
    x = rng.uniform(0.8, 1.25, (3, 4, 5)).astype(np.float32)
    got = evaluate(lambda b, x: getattr(x, kind)(axis=axis, keepdims=keepdims), {"x": x})
    want = getattr(np, kind)(x, axis=axis, keepdims=keepdims).astype(np.float32)
    close(got, want, rtol=1e-5)


def test_reduce_names_on_the_builder(rng):
    x = rng.uniform(0.5, 1.5, (4, 6)).astype(np.float32)  # positive: sums do not cancel
    got = evaluate(lambda b, x: (b.reduce_sum(x, 1), b.reduce_mean(x), b.reduce_min(x, 0, True), b.reduce_prod(x, -1)), {"x": x})
    close(got[0], x.sum(1), 1e-5)
    close(got[1], np.asarray(x.mean(), np.float32), 1e-5)
    close(got[2], x.min(0, keepdims=True))
    close(got[3], x.prod(-1), 1e-5)


def test_data_movement(rng):
    x = random_array(rng, (2, 3, 4))

    def build(b, x):
        return (
            x.T,
            x.transpose(1, 0, 2),
            b.transpose(x, (2, 0, 1)),
            x.reshape(6, -1),
            x.reshape((24,)),
            b.pad(x, 1, value=-2.0),
            b.pad(x, ((0, 0), (1, 2), (3, 0))),
            b.concat([x, x * 2], axis=-1),
            b.broadcast_to(x[:, :1], (2, 3, 4)),
        )

    got = evaluate(build, {"x": x})
    want = (
        x.T,
        x.transpose(1, 0, 2),
        x.transpose(2, 0, 1),
        x.reshape(6, -1),
        x.reshape(24),
        np.pad(x, 1, constant_values=-2.0),
        np.pad(x, ((0, 0), (1, 2), (3, 0))),
        np.concatenate([x, x * 2], axis=-1),
        np.broadcast_to(x[:, :1], (2, 3, 4)),
    )
    for g, w in zip(got, want, strict=True):
        close(g, w)


INDICES = [
    np.s_[1],
    np.s_[-1, 2],
    np.s_[:, 1:3],
    np.s_[::2, ::-1][:1],  # (slice(None, None, 2),)
    np.s_[..., 1],
    np.s_[None, 0, :, None],
    np.s_[0:1, 5:1],
    np.s_[1:, 2:7:2, -3:],
    np.s_[...],
]


@pytest.mark.parametrize("index", INDICES, ids=str)
def test_getitem_matches_numpy(index, rng):
    x = random_array(rng, (3, 5, 4))
    close(evaluate(lambda b, x: x[index], {"x": x}), x[index])


def test_full_slice_emits_nothing():
    b = GraphBuilder()
    x = b.input("x", (3, 4))
    assert x[:, :] is x
    assert x[...] is x


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [((4, 8), (8, 3)), ((2, 4, 8), (2, 8, 3)), ((2, 4, 8), (8, 3)), ((8,), (8, 3)), ((4, 8), (8,)), ((2, 1, 4, 8), (3, 8, 2))],
)
def test_matmul_matches_numpy(a_shape, b_shape, rng):
    a, c = random_array(rng, a_shape), random_array(rng, b_shape)
    close(evaluate(lambda b, x, y: x @ y, {"a": a, "c": c}), a @ c, rtol=1e-5)


def test_matmul_ops():
    b = GraphBuilder()
    x, w, bx, bw = b.input("x", (4, 8)), b.input("w", (8, 3)), b.input("bx", (2, 4, 8)), b.input("bw", (2, 8, 3))
    b.output(x @ w, bx @ bw, bx @ w)
    assert ops_of(b) == [
        "graph.matmul",
        "graph.batch_matmul",
        "graph.reshape",  # (2, 4, 8) @ (8, 3): one 2-D matmul over 8 rows
        "graph.matmul",
        "graph.reshape",
    ]


def test_constants(rng):
    table = random_array(rng, (2, 3))
    got = evaluate(
        lambda b, x: (x + b.constant(table), b.constant([1, 2, 3]), b.constant(np.array([True, False])), b.full((2,), 7, "i64")),
        {"x": random_array(rng, (2, 3))},
    )
    assert got[1].dtype == np.int64 and got[2].dtype == np.bool_
    np.testing.assert_array_equal(got[1], [1, 2, 3])
    np.testing.assert_array_equal(got[3], [7, 7])


def test_conv_and_pooling_shapes():
    b = GraphBuilder()
    x, w = b.input("x", (1, 3, 8, 8)), b.input("w", (4, 3, 3, 3))
    y = b.conv2d(x, w, strides=(2, 2), pads=(1, 1, 1, 1))
    b.output(y, b.max_pool2d(y, (2, 2), (2, 2)), b.avg_pool2d(y, (3, 3), pads=(1, 1, 1, 1), count_include_pad=True))
    outs = [str(t) for t in b.function().function_type.outputs.data]
    assert outs == ["tensor<1x4x4x4xf32>", "tensor<1x4x2x2xf32>", "tensor<1x4x4x4xf32>"]


def test_dtypes():
    b = GraphBuilder()
    for dtype, text in [("f16", "f16"), ("bf16", "bf16"), (np.float64, "f64"), ("i1", "i1"), (np.int32, "i32"), (np.dtype("int64"), "i64")]:
        assert b.input(f"x_{text}", (2,), dtype).dtype == text


# --- errors ---------------------------------------------------------------------------------


def error_of(build: Callable[[GraphBuilder], object]) -> str:
    b = GraphBuilder()
    with pytest.raises(ValueError) as info:
        build(b)
    return str(info.value)


def test_shape_errors():
    assert "shapes (4, 8) and (3,) cannot be broadcast together" in error_of(
        lambda b: b.input("x", (4, 8)) + b.input("y", (3,))
    )
    assert "cannot reshape (4, 8) (32 elements) to (5, 7) (35 elements)" in error_of(
        lambda b: b.input("x", (4, 8)).reshape(5, 7)
    )
    assert "cannot reshape (4, 8) to (3, -1)" in error_of(lambda b: b.input("x", (4, 8)).reshape(3, -1))
    assert "axis 2 is out of range for rank 2" in error_of(lambda b: b.input("x", (4, 8)).sum(axis=2))
    assert "repeated axis in [1, -1]" in error_of(lambda b: b.input("x", (4, 8)).sum(axis=(1, -1)))
    assert "[0, 0] is not a permutation of 0..1" in error_of(lambda b: b.input("x", (4, 8)).transpose(0, 0))
    assert "matmul: contraction sizes differ: (4, 8) @ (7, 3) (8 != 7)" in error_of(
        lambda b: b.input("x", (4, 8)) @ b.input("w", (7, 3))
    )
    assert "batch dimensions (2,) and (3,) cannot be broadcast" in error_of(
        lambda b: b.input("x", (2, 4, 8)) @ b.input("w", (3, 8, 3))
    )
    assert "cannot broadcast shape (3,) to (4, 8)" in error_of(lambda b: b.broadcast_to(b.input("x", (3,)), (4, 8)))
    assert "shape (4, 7) does not match (4, 8) outside axis 0" in error_of(
        lambda b: b.concat([b.input("x", (4, 8)), b.input("y", (4, 7))])
    )
    assert "expects a rank-4 (NCHW) tensor, got shape (3, 8, 8)" in error_of(
        lambda b: b.max_pool2d(b.input("x", (3, 8, 8)), (2, 2))
    )


def test_index_errors():
    assert "index 3 is out of bounds for dimension 0 of size 3" in error_of(lambda b: b.input("x", (3, 4))[3])
    assert "only positive steps are supported" in error_of(lambda b: b.input("x", (3, 4))[::-1])
    assert "too many indices for a tensor of rank 2" in error_of(lambda b: b.input("x", (3, 4))[0, 0, 0])
    assert "unsupported index" in error_of(lambda b: b.input("x", (3, 4))[[0, 1]])


def test_dtype_errors():
    assert "operand dtypes differ (f32, f64); cast one of them first" in error_of(
        lambda b: b.input("x", (4,)) + b.input("y", (4,), "f64")
    )
    assert "scalar 0.5 cannot be combined with a i32 tensor without a cast" in error_of(
        lambda b: b.input("i", (4,), "i32") * 0.5
    )
    assert "'graph.exp' expects a floating-point tensor, got element type i32" in error_of(
        lambda b: b.exp(b.input("i", (4,), "i32"))
    )
    assert "the condition must be an i1 tensor, got f32" in error_of(
        lambda b: b.where(b.input("c", (4,)), 1.0, 0.0)
    )
    assert "unsupported dtype 'c8'" in error_of(lambda b: b.input("x", (4,), "c8"))
    assert "approximate must be 'none' or 'tanh', got 'fast'" in error_of(lambda b: b.gelu(b.input("x", (2,)), "fast"))


def test_usage_errors():
    assert "input 'x' is declared twice" in error_of(lambda b: (b.input("x", (1,)), b.input("x", (1,))))
    assert "is not a valid SSA name" in error_of(lambda b: b.input("2x", (1,)))
    assert "function @main has no outputs" in error_of(lambda b: b.module())
    assert "the tensor belongs to another GraphBuilder" in error_of(lambda b: b.exp(GraphBuilder().input("x", (2,))))
    assert "output expects a Tensor, got float" in error_of(lambda b: b.output(1.0))
    with pytest.raises(TypeError, match="no truth value"):
        b = GraphBuilder()
        x = b.input("x", (2,))
        if x > 0:
            pass


# --- the shared broadcasting and dtype table (also used by the ONNX importer) ---------------


@pytest.mark.parametrize(
    "shapes",
    [((4, 1), (3,)), ((0, 1), (1, 5)), ((), (2, 3)), ((2, 1, 3), (4, 1)), ((1,), (0,))],
)
def test_broadcast_shapes_is_numpys(shapes):
    from mlfuse.frontend.builder import broadcast_shapes

    assert broadcast_shapes(*shapes) == np.broadcast_shapes(*shapes)


def test_broadcast_shapes_and_op_refuse_what_numpy_refuses():
    from xdsl.dialects.builtin import TensorType, f32
    from xdsl.ir import Block

    from mlfuse.frontend.builder import broadcast_op, broadcast_shapes

    with pytest.raises(ValueError):
        broadcast_shapes((4, 8), (3,))
    x = Block(arg_types=[TensorType(f32, [3, 1])]).args[0]
    assert broadcast_op(x, (3, 1)) is None
    op = broadcast_op(x, (2, 3, 5))
    assert op is not None and list(op.dims.get_values()) == [1, 2] and graph.shape_of(op.result) == (2, 3, 5)
    with pytest.raises(ValueError, match=r"cannot broadcast shape \(3, 1\) to \(2, 5\)"):
        broadcast_op(x, (2, 5))


def test_one_dtype_table_derived_from_the_graph_dialect():
    from mlfuse.frontend import builder

    assert builder.NUMPY_ELEMENT_TYPES == {dtype: t for t, dtype in graph.ELEMENT_TYPES.values()}
    for name, (t, dtype) in graph.ELEMENT_TYPES.items():
        assert builder.element_type(name) == builder.element_type(dtype) == t
