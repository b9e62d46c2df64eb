"""StableHLO in: jax's lowered text parses (pretty and generic form), converts to the
graph dialect, and `mlfuse.jax.jit` matches `jax.jit` on the mission's workloads.

Tolerances: float32 throughout, rtol 1e-5 and an absolute tolerance of 1e-6 times
the largest magnitude of the reference (sums of up to a few hundred products, and
exp/erf/tanh as mlfuse's polynomials, expand-math, which state errors of a few ulp).
"""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import mlfuse  # noqa: E402
import mlfuse.api  # noqa: E402  (used as mlfuse.api.*; `import mlfuse` alone does not load it)
import mlfuse.jax as mjax  # noqa: E402
from mlfuse.diagnostics import Diagnostic  # noqa: E402
from mlfuse.frontend.stablehlo import contains_stablehlo  # noqa: E402


def assert_close(got, want, rtol=1e-5, atol_scale=1e-6):
    want = np.asarray(want)
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol_scale * max(1.0, float(np.max(np.abs(want)))))


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# --- the workloads -------------------------------------------------------------------


def layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * gamma + beta


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def gelu_erf(x):
    return jax.nn.gelu(x, approximate=False)


def gelu_tanh(x):
    return jax.nn.gelu(x, approximate=True)


def attention(q, k, v, mask):
    scores = q @ jnp.swapaxes(k, -1, -2) / np.float32(np.sqrt(q.shape[-1]))
    scores = jnp.where(mask, scores, -1e9)
    return jax.nn.softmax(scores, axis=-1) @ v


def conv_block(x, w, b):
    y = lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return jax.nn.relu(y + b[None, :, None, None])


def workloads(rng):
    return {
        "layer_norm": (layer_norm, (randn(rng, 64, 256), randn(rng, 256), randn(rng, 256))),
        "softmax": (softmax, (randn(rng, 64, 256) * 4,)),
        "gelu_erf": (gelu_erf, (randn(rng, 64, 256) * 3,)),
        "gelu_tanh": (gelu_tanh, (randn(rng, 64, 256) * 3,)),
        "attention": (attention, (randn(rng, 2, 4, 32, 16), randn(rng, 2, 4, 32, 16), randn(rng, 2, 4, 32, 16), rng.random((32, 32)) > 0.3)),
        "conv_block": (conv_block, (randn(rng, 2, 3, 16, 16), randn(rng, 8, 3, 3, 3), randn(rng, 8))),
    }


NAMES = ["layer_norm", "softmax", "gelu_erf", "gelu_tanh", "attention", "conv_block"]


@pytest.mark.parametrize("name", NAMES)
def test_jit_matches_jax(name):
    fn, args = workloads(np.random.default_rng(0))[name]
    got = mjax.jit(fn)(*args)
    assert isinstance(got, np.ndarray)
    assert_close(got, jax.jit(fn)(*args))


@pytest.mark.parametrize("name", ["softmax", "attention", "conv_block"])
def test_generic_form_compiles(name):
    """The generic form of jax's module (property syntax, func.call) compiles to the same results."""
    fn, args = workloads(np.random.default_rng(1))[name]
    ir = jax.jit(fn).lower(*args).compiler_ir("stablehlo")
    generic = ir.operation.get_asm(print_generic_op_form=True)
    assert '"stablehlo.' in generic
    (got,) = mlfuse.compile(generic)(*args)
    assert_close(got, jax.jit(fn)(*args))


@pytest.mark.parametrize("name", NAMES)
def test_pretty_text_round_trips(name):
    """jax's as_text() parses, and mlfuse prints it so that it parses to the same text."""
    from mlfuse.diagnostics import parse_located
    from mlfuse.ir import make_context

    fn, args = workloads(np.random.default_rng(2))[name]
    text = jax.jit(fn).lower(*args).as_text()
    first = mlfuse.api.module_text(parse_located(make_context(), text, "jax"))
    second = mlfuse.api.module_text(parse_located(make_context(), first, "printed"))
    assert first == second
    assert contains_stablehlo(parse_located(make_context(), text, "jax"))


def test_parse_converts_to_graph():
    text = jax.jit(softmax).lower(np.zeros((4, 8), np.float32)).as_text()
    module = mlfuse.api.parse(text)
    assert not contains_stablehlo(module)
    names = {op.name for op in module.walk()}
    assert {"graph.reduce_max", "graph.exp", "graph.reduce_sum", "graph.div"} <= names
    assert "func.call" not in names


def test_negative_infinity_constant():
    """jax writes -inf as dense<0xFF800000>: a bit pattern, not the integer 4286578688."""
    x = np.array([[-np.inf, -np.inf], [1.0, 2.0]], np.float32)
    got = mjax.jit(lambda x: jnp.max(x, axis=1))(x)
    np.testing.assert_array_equal(got, [-np.inf, 2.0])


def test_cache_per_signature():
    f = mjax.jit(lambda x: jnp.exp(x) * 2)
    a = np.ones((4, 8), np.float32)
    f(a)
    f(a + 1)
    assert len(f._compiled) == 1
    f(np.ones((2, 8), np.float32))
    f(np.ones((4, 8), np.float64))  # canonicalized to float32, as jax does: the same signature
    assert len(f._compiled) == 2


def test_jax_arrays_in_jax_arrays_out():
    f = mjax.jit(lambda x, y: (x + y, x * y))
    x = jnp.arange(8, dtype=jnp.float32)
    s, p = f(x, 2.0)
    assert isinstance(s, jax.Array) and isinstance(p, jax.Array)
    np.testing.assert_allclose(np.asarray(s), np.arange(8) + 2.0)
    n = f(np.arange(8, dtype=np.float32), np.float32(3))
    assert isinstance(n, tuple) and all(isinstance(a, np.ndarray) for a in n)


def test_pytrees_and_unused_arguments():
    f = mjax.jit(lambda d, unused: {"y": d["a"] @ d["b"], "z": d["a"].sum()})
    rng = np.random.default_rng(3)
    a, b = randn(rng, 4, 8), randn(rng, 8, 3)
    out = f({"a": a, "b": b}, np.zeros(5, np.float32))
    assert set(out) == {"y", "z"}
    assert_close(out["y"], a @ b)
    assert_close(out["z"], a.sum())


def many_ops(x, y, i):
    """Ops beyond the workloads: slices, pads, concatenation, iota, integer math,
    min/prod reductions, a plain dot, comparisons, clamp, remainder, power, casts."""
    s = x[1:5, ::2]
    p = jnp.pad(s, ((1, 0), (0, 2)), constant_values=0.5)
    c = jnp.concatenate([x, y], axis=1)
    iota = lax.broadcasted_iota(jnp.int32, x.shape, 1).astype(jnp.float32)
    w = jnp.where((x > 0) & (y < 1), x, y) + jnp.clip(x, -0.5, 0.5)
    r = lax.rem(x, y + 3.0) + jnp.abs(y) ** 1.5 + lax.rsqrt(jnp.abs(x) + 1) + jax.nn.sigmoid(x) + jnp.sin(x) * jnp.cos(y)
    ints = (i * 3 + 1) // 2 - jnp.maximum(i, 2)
    return p, c, iota + w, r, x.min(axis=0), jnp.prod(y[:, :4] * 0.5 + 1, axis=1), x @ y.T, ints, (x > y).astype(jnp.float32)


def test_many_ops_match_jax():
    rng = np.random.default_rng(4)
    args = (randn(rng, 6, 8), randn(rng, 6, 8), rng.integers(-20, 20, (6, 8)).astype(np.int32))
    got = mjax.jit(many_ops)(*args)
    want = jax.jit(many_ops)(*args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == np.asarray(w).dtype
        assert_close(g, w)


def test_nhwc_depthwise_convolution():
    def f(x, w):
        return lax.conv_general_dilated(
            x, w, (2, 1), ((1, 1), (0, 2)), rhs_dilation=(1, 2), dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=4
        )

    rng = np.random.default_rng(5)
    x, w = randn(rng, 2, 9, 9, 4), randn(rng, 3, 3, 1, 8)
    assert_close(mjax.jit(f)(x, w), jax.jit(f)(x, w))


def test_unsupported_op_is_a_located_diagnostic():
    f = mjax.jit(lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME") + 1)
    x, w = np.ones((1, 6, 6, 2), np.float32), np.ones((3, 3, 2, 4), np.float32)
    with pytest.raises(Diagnostic) as info:
        f(x, w)
    text = f.lowered_text(x, w)
    line = next(n for n, ln in enumerate(text.split("\n"), 1) if "stablehlo.convolution" in ln)
    assert info.value.location == f"<input>:{line}:5"
    assert "'stablehlo.convolution' with lhs_dilate [2, 2] (a transposed convolution) is not supported" in info.value.message


def test_argmax_matches_jax():
    """argmax's reduce of two inputs (tests/test_stablehlo_argmax.py has NaN, ties, infinities)."""
    x = randn(np.random.default_rng(12), 4, 8)
    got, want = mjax.jit(lambda x: jnp.argmax(x, axis=1))(x), jax.jit(lambda x: jnp.argmax(x, axis=1))(x)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# --- image processing and stencils: reverse, chlo.square, reduce_window, gather -------
#
# Data movement, max/min windows and integer sums must be exact (assert_array_equal);
# float sums (avg pools, convolve2d, std, cumsum) within rtol 1e-5 and an absolute
# 1e-6 times the largest magnitude of the reference (assert_close), 1e-5 times it for
# cumulative sums over 300 elements (a product with a triangular matrix, summed in
# another order than XLA's).


def assert_exact(got, want):
    want = np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def max_pool_same(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (3, 3), (1, 2), "SAME")


def int_max_pool(x):
    return lax.reduce_window(x, jnp.iinfo(jnp.int32).min, lax.max, (2, 3), (1, 1), "SAME")


EXACT = {
    "flip_rows": (lambda x: x[::-1], "f32"),
    "flip_both": (lambda x: x[::-1, ::-1], "f32"),
    "pad_reflect": (lambda x: jnp.pad(x, ((2, 1), (3, 2)), mode="reflect"), "f32"),
    "pad_symmetric": (lambda x: jnp.pad(x, ((1, 3), (2, 2)), mode="symmetric"), "f32"),
    "max_pool_same": (max_pool_same, "f32"),
    "max_pool_int32": (int_max_pool, "i32"),
    "cumsum_int32": (lambda x: jnp.cumsum(x, axis=0), "i32"),
    "gather_rows": (lambda x: x[jnp.array([0, 3, 2, 5, 3])], "f32"),
    "gather_cols": (lambda x: x[:, jnp.array([6, 0, 3])], "f32"),
    "gather_negative": (lambda x: x[jnp.array([-1, 2, -6])], "f32"),
    "take_2d": (lambda x: jnp.take(x, jnp.array([[0, 3], [2, 6]]), axis=1), "f32"),
    "take_2d_fill": (lambda x: jnp.take(x, jnp.array([[0, 9], [-3, 6]]), axis=0), "f32"),
    # bools order False < True (compared as signed bits, these had been wrong)
    "select_conditions": (lambda x: jnp.select([x < -1, x > 1], [x * 0, x * 2], x), "f32"),
    "bool_compare": (lambda x: jnp.stack([(x > 0) > (x > 0.5)[::-1], (x > 0) <= (x < 0.5)]), "f32"),
    "bool_max_min": (lambda x: jnp.stack([jnp.max(x > 0, axis=0), jnp.min(x > -0.5, axis=0)]), "f32"),
    "bool_argmax": (lambda x: jnp.argmax(x > 0.5, axis=1), "f32"),
    # jax.random's threefry on uint32 (its key split had been an internal error in loop-forward-copies)
    "random_uniform": (lambda x: x + jax.random.uniform(jax.random.PRNGKey(3), x.shape), "f32"),
    "random_permutation": (lambda x: jax.random.permutation(jax.random.PRNGKey(5), x[0]), "f32"),
    # lax.pad's interior padding (upsampling by zeros), with negative edges
    "pad_interior": (lambda x: lax.pad(x, 0.5, ((1, 2, 1), (0, -2, 2))), "f32"),
    "pad_interior_int": (lambda x: lax.pad(x, 7, ((-2, 0, 3), (1, 1, 1))), "i32"),
    # lax.cond and lax.switch (stablehlo.case): every branch runs, the index selects
    "cond_sum": (lambda x: lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: -v, x), "f32"),
    "cond_negated": (lambda x: lax.cond((-x).sum() > 0, lambda v: v * 2, lambda v: -v, x), "f32"),
    "switch_from_data": (lambda x: lax.switch(jnp.int32(jnp.abs(x[0, 0]) * 3), [lambda v: v * 2, lambda v: -v, lambda v: v + 1], x), "f32"),
    "cond_nested_pair": (lambda x: lax.cond(x[0, 0] > 0, lambda v: lax.cond(v[0, 1] > 0, lambda w: (w + 1, w.max()), lambda w: (w - 1, w.min()), v),
                                            lambda v: (v * 0, v.sum()), x)[1], "f32"),
    "cond_in_fori_loop": (lambda x: lax.fori_loop(0, 4, lambda i, v: lax.cond(i % 2 == 0, lambda w: w * 2, lambda w: w - 1, v), x), "f32"),
    # binary morphology: windows of bools
    "dilate": (lambda b: lax.reduce_window(b, False, lax.bitwise_or, (3, 3), (1, 1), "SAME"), "bool"),
    "erode_strided": (lambda b: lax.reduce_window(b, True, lax.bitwise_and, (2, 3), (2, 1), "VALID"), "bool"),
    "bool_max_window": (lambda b: lax.reduce_window(b, False, lax.max, (3, 1), (1, 1), "SAME"), "bool"),
    "or_window_init_true": (lambda b: lax.reduce_window(b, True, lax.bitwise_or, (2, 2), (1, 1), "VALID"), "bool"),
}


def operand(rng, kind, shape=(6, 7)):
    if kind == "i32":
        return rng.integers(-1000, 1000, shape).astype(np.int32)
    if kind == "bool":
        return rng.standard_normal(shape) > 0.7
    return randn(rng, *shape)


@pytest.mark.parametrize("name", list(EXACT))
def test_stencil_ops_exact(name):
    fn, kind = EXACT[name]
    x = operand(np.random.default_rng(10), kind)
    assert_exact(mjax.jit(fn)(x), jax.jit(fn)(x))


def test_gather_of_runtime_indices():
    """Indices from an argument: jax wraps negative ones, stablehlo.gather clamps the rest."""

    def f(x, i):
        return x[i], x[:, i]

    rng = np.random.default_rng(11)
    x, i = randn(rng, 6, 7), np.array([5, -2, 0, 9, -9, 3], np.int32)
    for got, want in zip(mjax.jit(f)(x, i), jax.jit(f)(x, i)):
        assert_exact(got, want)


def convolve_same(x, k):
    return jax.scipy.signal.convolve2d(x, k, mode="same")


def avg_pool(x):
    return lax.reduce_window(x, 0.0, lax.add, (2, 2), (2, 2), "VALID") / 4


def dilated_window_sum(x):
    return lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "VALID", window_dilation=(2, 1))


SUMS = {
    "std": (lambda x: (jnp.std(x), jnp.var(x, axis=1), x**2), (6, 7)),
    "avg_pool": (avg_pool, (6, 7)),
    "window_dilation": (dilated_window_sum, (6, 7)),
    "cumsum_axis0": (lambda x: jnp.cumsum(x, axis=0), (6, 7)),
    "cumsum_axis1": (lambda x: jnp.cumsum(x, axis=1), (6, 7)),
    "cumsum_300": (lambda x: jnp.cumsum(x, axis=1), (3, 300)),
    "reverse_cumsum_300": (lambda x: lax.cumsum(x, axis=0, reverse=True), (300, 3)),
    "sliding_sum_101": (lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 101), (1, 3), "SAME"), (2, 300)),
    # its gathers put the indices' dimension before the operand's (a transpose of numpy.take)
    "quantile_rows": (lambda x: jnp.quantile(x, jnp.array([0.1, 0.5, 0.9]), axis=1), (6, 7)),
}


@pytest.mark.parametrize("name", list(SUMS))
def test_stencil_sums(name):
    fn, shape = SUMS[name]
    x = randn(np.random.default_rng(12), *shape)
    got, want = mjax.jit(fn)(x), jax.jit(fn)(x)
    atol_scale = 1e-5 if shape[0] * shape[1] >= 600 else 1e-6
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert g.shape == np.shape(w)
        assert_close(g, w, atol_scale=atol_scale)


def test_convolve2d_same():
    rng = np.random.default_rng(13)
    x, k = randn(rng, 9, 11), randn(rng, 3, 4)
    assert_close(mjax.jit(convolve_same)(x, k), jax.jit(convolve_same)(x, k))


CONVOLUTIONS = {
    "convolve_same": (lambda x, k: jnp.convolve(x, k, mode="same"), (50,), (5,)),
    "convolve_full": (lambda x, k: jnp.convolve(x, k), (50,), (4,)),
    "correlate_valid": (lambda x, k: jnp.correlate(x, k, mode="valid"), (50,), (7,)),
    "conv1d_nwc_strided_dilated": (
        lambda x, k: lax.conv_general_dilated(x, k, (2,), "SAME", rhs_dilation=(2,), dimension_numbers=("NWC", "WIO", "NWC")),
        (2, 40, 3), (3, 3, 4)),
    "convolve3d_same": (lambda x, k: jax.scipy.signal.convolve(x, k, mode="same"), (6, 7, 8), (3, 3, 3)),
    "conv3d_strided_grouped": (
        lambda x, k: lax.conv_general_dilated(x, k, (2, 1, 2), ((1, 0), (1, 1), (0, 2)), rhs_dilation=(1, 2, 1),
                                              feature_group_count=2),
        (1, 4, 7, 8, 9), (6, 2, 3, 2, 3)),
}


@pytest.mark.parametrize("name", list(CONVOLUTIONS))
def test_1d_and_3d_convolutions(name):
    """1-D convolutions are 2-D ones of height 1, 3-D ones one 2-D convolution with the
    depth taps in the channels (as ONNX's 3-D Conv)."""
    fn, x_shape, k_shape = CONVOLUTIONS[name]
    rng = np.random.default_rng(14)
    x, k = randn(rng, *x_shape), randn(rng, *k_shape)
    assert_close(mjax.jit(fn)(x, k), jax.jit(fn)(x, k))


def test_cumsum_300_int32_exact():
    x = np.random.default_rng(14).integers(-1000, 1000, (3, 300)).astype(np.int32)
    fn = lambda x: jnp.cumsum(x, axis=1)  # noqa: E731
    assert_exact(mjax.jit(fn)(x), jax.jit(fn)(x))


def test_long_cumsum_is_a_product_not_300_slices():
    x = np.ones((3, 300), np.float32)
    ops = [op.name for op in mlfuse.api.parse(jax.jit(lambda x: jnp.cumsum(x, axis=1)).lower(x).as_text()).walk()]
    assert ops.count("graph.matmul") == 1
    assert ops.count("graph.slice") == 0


@pytest.mark.parametrize("name", ["max_pool_same", "take_2d", "flip_both"])
def test_stencil_text_round_trips(name):
    """jax's as_text() of reduce_window, gather and reverse prints as it parses."""
    from mlfuse.diagnostics import parse_located
    from mlfuse.ir import make_context

    fn, kind = EXACT[name]
    text = jax.jit(fn).lower(operand(np.random.default_rng(15), kind)).as_text()
    first = mlfuse.api.module_text(parse_located(make_context(), text, "jax"))
    second = mlfuse.api.module_text(parse_located(make_context(), first, "printed"))
    assert first == second
    assert any(word in first for word in ("stablehlo.reduce_window", "#stablehlo.gather<", "stablehlo.reverse"))


def stencil_pipeline(x):
    return jnp.pad(x, 2, mode="reflect")[jnp.array([0, 3, -1])], max_pool_same(x), jnp.cumsum(x, 0), jnp.std(x)


def test_stencil_generic_form_compiles():
    """The generic form of reverse, gather, reduce_window and chlo.square compiles too."""
    x = randn(np.random.default_rng(16), 6, 7)
    generic = jax.jit(stencil_pipeline).lower(x).compiler_ir("stablehlo").operation.get_asm(print_generic_op_form=True)
    assert '"stablehlo.reverse"' in generic and '"chlo.square"' in generic
    got = mlfuse.compile(generic)(x)
    want = jax.jit(stencil_pipeline)(x)
    assert len(got) == len(want)
    for g, w in zip(got[:2], want[:2]):
        assert_exact(g, w)
    for g, w in zip(got[2:], want[2:]):
        assert_close(g, w)


def test_reduce_window_padded_init_is_a_located_diagnostic():
    """StableHLO pads with the init, XLA skips the padding: refused where they differ."""
    f = mjax.jit(lambda x: lax.reduce_window(x, 1.5, lax.add, (2, 3), (1, 1), "SAME"))
    with pytest.raises(Diagnostic) as info:
        f(np.ones((3, 4), np.float32))
    assert "'stablehlo.reduce_window' with padding and an init value (1.5)" in info.value.message
    assert info.value.location.startswith("<input>:")


# --- tan, cbrt, atan2, erf_inv (MoreMathPattern); popcnt, clz (BitCountPattern) -----------------


def test_more_math_within_a_few_ulps():
    """Against jax: relative error under 5e-7 where the result is finite, the same
    infinities, NaNs and signs (atan2 of signed zeros and infinities included)."""
    rng = np.random.default_rng(15)
    y = np.concatenate([rng.standard_normal(300) * 10, [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e30, -8.0, 27.0]])
    u = np.concatenate([rng.uniform(-1, 1, 300), [0.0, -0.0, 1.0, -1.0, 0.9999999, -0.99999994, 1e-30, np.nan, 1.5, -2.0]])
    a = np.concatenate([rng.standard_normal(100), [0.0, -0.0, 0.0, -0.0, np.inf, -np.inf, np.inf, -np.inf, 1.0, -1.0, np.nan]])
    b = np.concatenate([rng.standard_normal(100), [0.0, 0.0, -0.0, -0.0, np.inf, np.inf, -np.inf, -np.inf, np.inf, -np.inf, 1.0]])
    cases = [(jnp.tan, (y,)), (jnp.cbrt, (y,)), (jax.scipy.special.erfinv, (u,)), (jnp.arctan2, (a, b))]
    for fn, args in cases:
        args = [np.asarray(v, np.float32) for v in args]
        got, want = np.asarray(mjax.jit(fn)(*args)), np.asarray(jax.jit(fn)(*args))
        finite = np.isfinite(want)
        np.testing.assert_array_equal(got[~finite], want[~finite])
        numbers = ~np.isnan(want)  # a NaN's sign bit means nothing
        np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))
        np.testing.assert_allclose(got[finite], want[finite], rtol=5e-7, atol=1e-37, err_msg=fn.__name__)


def test_random_normal_matches_jax():
    f = lambda x: x + jax.random.normal(jax.random.PRNGKey(0), x.shape)  # noqa: E731
    x = np.zeros((6, 9), np.float32)
    np.testing.assert_allclose(np.asarray(mjax.jit(f)(x)), np.asarray(jax.jit(f)(x)), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32])
def test_popcnt_and_clz_exact(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(16)
    x = np.concatenate([rng.integers(info.min, info.max, 200, endpoint=True), [0, 1, -1 if info.min else 2, info.min, info.max]])
    x = x.astype(dtype)
    f = lambda v: jnp.stack([lax.population_count(v), lax.clz(v)])  # noqa: E731
    assert_exact(np.asarray(mjax.jit(f)(x)), jax.jit(f)(x))


# --- float to integer conversions saturate, as XLA's do ---------------------------------------

OUT_OF_RANGE = [np.nan, np.inf, -np.inf, -0.0, -2.5, -1.0, 3e9, -3e9, 255.7, 127.9, 40000.0, -40000.0, 65535.9, 32767.5]


@pytest.mark.parametrize("source", [np.float32, np.float16])
@pytest.mark.parametrize("target", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32])
def test_float_to_int_saturates(source, target):
    """-2.5 to uint8 is 0 and 3e9 is 255 (numpy wraps: 254 and 0), NaN is 0; f16 sources
    clamp in f32 (32767 rounds up to 32768 in f16)."""
    rng = np.random.default_rng(14)
    with np.errstate(over="ignore"):
        x = np.concatenate([OUT_OF_RANGE, rng.standard_normal(50) * 300]).astype(source)
    f = lambda x: x.astype(target)  # noqa: E731
    assert_exact(np.asarray(mjax.jit(f)(x)), jax.jit(f)(x))


# --- is_finite, rounding, log1p and expm1 (FloatMathPattern) --------------------------

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997, -0.49999997,
           1e-30, -1e-30, 1e-8, -0.999999, 88.0, -88.0, 100.0, -100.0]


def special_and_random(rng) -> np.ndarray:
    """Special values and random ones at several scales, small ones near 0 included."""
    scales = [rng.standard_normal(200) * 3, rng.standard_normal(100) * 1e-4, rng.uniform(-0.6, 0.6, 100)]
    return np.concatenate([*scales, SPECIAL]).astype(np.float32)


@pytest.mark.parametrize("name, fn", [
    ("isfinite", jnp.isfinite),
    ("round_even", jnp.round),
    ("round_away", lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO)),
])
def test_is_finite_and_rounding_exact(name, fn):
    x = special_and_random(np.random.default_rng(15))
    got, want = np.asarray(mjax.jit(fn)(x)), np.asarray(jax.jit(fn)(x))
    assert_exact(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("name, fn, exact", [("log1p", jnp.log1p, np.log1p), ("expm1", jnp.expm1, np.expm1)])
def test_log1p_and_expm1_within_4_ulps(name, fn, exact):
    """Within 4 ulps of the float64 value everywhere, near 0 too (where log(1 + x) and
    e^x - 1 lose every digit); inf, -inf, -1, NaN and -0.0 as numpy gives them."""
    x = special_and_random(np.random.default_rng(16))
    got = np.asarray(mjax.jit(fn)(x))
    with np.errstate(all="ignore"):
        want = exact(x.astype(np.float64))
    finite = np.isfinite(want) & (np.abs(want) < np.finfo(np.float32).max)
    ulps = np.abs(got[finite] - want[finite]) / np.spacing(np.abs(want[finite]).astype(np.float32))
    assert ulps.max() <= 4, f"{ulps.max()} ulps at x = {x[finite][np.argmax(ulps)]!r}"
    np.testing.assert_array_equal(got[~finite], want[~finite].astype(np.float32))
    np.testing.assert_array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0]))


@pytest.mark.parametrize("name, fn", [
    ("logsumexp", lambda x: jax.nn.logsumexp(x[:420].reshape(60, 7), axis=1)),
    ("softplus", jax.nn.softplus),
])
def test_logsumexp_and_softplus(name, fn):
    """jax builds them from is_finite and log1p; denormal results aside (XLA flushes them)."""
    x = special_and_random(np.random.default_rng(17))
    got, want = np.asarray(mjax.jit(fn)(x)), np.asarray(jax.jit(fn)(x))
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=np.finfo(np.float32).tiny)


# --- bit operations on integers (LogicalPattern, ShiftPattern, BitcastConvertPattern) ---

def bit_ops(a, b, s):
    return (a & b, a | b, a ^ b, ~a, lax.shift_left(a, s), lax.shift_right_arithmetic(a, s),
            lax.shift_right_logical(a, s))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint32, np.int64, np.uint64])
def test_bit_operations_exact(dtype):
    """and/or/xor/not and the three shifts, bit for bit as jax computes them, over the whole
    range of each type; shift amounts from -3 to the width + 2 (a negative one reads as a
    large unsigned one: 0, or the sign bits of an arithmetic right shift)."""
    rng = np.random.default_rng(18)
    info = np.iinfo(dtype)
    a, b = (rng.integers(info.min, info.max, 64, dtype=dtype, endpoint=True) for _ in range(2))
    s = rng.integers(-3, info.bits + 3, 64).astype(dtype)
    for got, want in zip(mjax.jit(bit_ops)(a, b, s), jax.jit(bit_ops)(a, b, s)):
        assert_exact(np.asarray(got), want)


def exponent_and_negated(x):
    """A float's exponent field, and the float with its sign bit flipped by integer ops."""
    exponent = (lax.bitcast_convert_type(x, jnp.int32) >> 23) & 0xFF
    flipped = lax.bitcast_convert_type(x, jnp.uint32) ^ np.uint32(1 << 31)
    return exponent, lax.bitcast_convert_type(flipped, jnp.float32)


def test_bitcast_convert_exact():
    x = special_and_random(np.random.default_rng(19))
    (exponent, negated), (want_exponent, want_negated) = mjax.jit(exponent_and_negated)(x), jax.jit(exponent_and_negated)(x)
    assert_exact(np.asarray(exponent), want_exponent)
    assert_exact(np.asarray(negated).view(np.uint32), np.asarray(want_negated).view(np.uint32))  # NaNs by their bits


# --- scatter of single elements (ScatterPattern) -------------------------------------

SCATTERS = {
    "bincount": lambda x, i, v: jnp.bincount(i[:, 0], length=10),
    "bincount weights": lambda x, i, v: jnp.bincount(i[:, 1] + 3, v, length=10),
    "add": lambda x, i, v: x.at[i[:, 0], i[:, 1]].add(v),
    "max": lambda x, i, v: x.at[i[:, 0], i[:, 1]].max(v),
    "min": lambda x, i, v: x.at[i[:, 0], i[:, 1]].min(v),
    "multiply": lambda x, i, v: x.at[i[:, 0], i[:, 1]].multiply(v),
    "add to a row, dropping": lambda x, i, v: x[:, 0].at[i[:, 0]].add(v, mode="drop"),
}


@pytest.mark.parametrize("name", list(SCATTERS))
def test_scatter_of_runtime_indices(name):
    """Indices from -7 to 7 into a 6x5 operand: jax wraps the negative ones and drops what
    is still out of bounds (StableHLO skips those updates); repeated indices combine."""
    fn = SCATTERS[name]
    rng = np.random.default_rng(20)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    i = rng.integers(-7, 8, (40, 2)).astype(np.int32)
    v = rng.standard_normal(40).astype(np.float32)
    got, want = np.asarray(mjax.jit(fn)(x, i, v)), np.asarray(jax.jit(fn)(x, i, v))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # sums in another order


def test_scatter_set_of_distinct_indices():
    x = np.arange(30, dtype=np.float32).reshape(6, 5)
    i = np.array([[0, 1], [2, 3], [5, 4], [1, 1], [9, 0]], np.int32)
    v = -np.arange(1, 6, dtype=np.float32)
    def fn(x, i, v):
        return x.at[i[:, 0], i[:, 1]].set(v, mode="drop")

    assert_exact(np.asarray(mjax.jit(fn)(x, i, v)), jax.jit(fn)(x, i, v))


def test_scatter_of_rows_is_a_located_diagnostic():
    fn = mjax.jit(lambda x, i, v: x.at[i].add(v))
    x, i, v = np.zeros((6, 5), np.float32), np.array([1, 3], np.int32), np.ones((2, 5), np.float32)
    with pytest.raises(Diagnostic) as info:
        fn(x, i, v)
    assert "'stablehlo.scatter' with update windows or batching dimensions is not supported" in info.value.message
    line = next(n for n, ln in enumerate(fn.lowered_text(x, i, v).split("\n"), 1) if "stablehlo.scatter" in ln)
    assert info.value.location.startswith(f"<input>:{line}:")


# --- while loops of a known trip count (unroll_loops) ---------------------------------

def searches(a, v, x):
    """searchsorted both sides, interp, digitize and a fori_loop: jax lowers each to a
    stablehlo.while of a counter from a constant to a constant."""
    return (jnp.searchsorted(a, v), jnp.searchsorted(a, v, side="right"), jnp.digitize(v, a),
            jnp.interp(v, a, jnp.cos(a)), lax.fori_loop(0, 5, lambda i, y: y * 0.5 + i, v))


def test_loops_of_known_trip_count_unroll():
    rng = np.random.default_rng(21)
    a = np.sort(rng.standard_normal(20).astype(np.float32))
    v = np.concatenate([rng.standard_normal(30), a[:4], [np.nan, np.inf, -np.inf]]).astype(np.float32)
    got, want = mjax.jit(searches)(a, v, v), jax.jit(searches)(a, v, v)
    for g, w in zip(got[:3], want[:3]):
        assert_exact(np.asarray(g), w)
    for g, w in zip(got[3:], want[3:]):  # interp's and the loop's arithmetic, in another order
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=1e-6)


def test_histogram_of_an_image():
    """jnp.histogram: searchsorted (a loop) for the bins, then a scatter-add of ones."""
    img = np.random.default_rng(22).uniform(-0.1, 1.1, (24, 24)).astype(np.float32)

    def hist(x):
        return jnp.histogram(x, bins=10, range=(0.0, 1.0))[0]

    assert_exact(np.asarray(mjax.jit(hist)(img)), jax.jit(hist)(img))


def test_loop_of_unknown_trip_count_is_a_located_diagnostic():
    def until_small(x):
        return lax.while_loop(lambda y: jnp.max(y) > 1.0, lambda y: y * 0.5, x)

    f = mjax.jit(until_small)
    x = np.full(4, 10.0, np.float32)
    with pytest.raises(Diagnostic) as info:
        f(x)
    assert "'stablehlo.while' is not supported unless its trip count is known" in info.value.message
    line = next(n for n, ln in enumerate(f.lowered_text(x).split("\n"), 1) if "stablehlo.while" in ln)
    assert info.value.location.startswith(f"<input>:{line}:")


# --- gathers of single elements (GatherPattern.elements) ------------------------------

def element_gathers(x, i, c):
    return (jnp.take_along_axis(x, i, axis=1), jnp.take_along_axis(x, i[:3] - 2, axis=0), x[i[:, 0], i[:, 1]],
            jax.scipy.ndimage.map_coordinates(x, [c[0], c[1]], order=0, mode="nearest"))


def test_gathers_of_single_elements_exact():
    """Indices from -8 to 8 into 5x6: jax wraps or clamps them itself, and what is left
    out of bounds StableHLO clamps (gather start indices)."""
    rng = np.random.default_rng(23)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    i = rng.integers(-8, 9, (5, 6)).astype(np.int32)
    c = rng.uniform(-1, 7, (2, 9)).astype(np.float32)
    for got, want in zip(mjax.jit(element_gathers)(x, i, c), jax.jit(element_gathers)(x, i, c)):
        assert_exact(np.asarray(got), want)


def test_map_coordinates_bilinear():
    rng = np.random.default_rng(24)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    c = rng.uniform(-1, 7, (2, 9)).astype(np.float32)

    def warp(x, c):
        return jax.scipy.ndimage.map_coordinates(x, [c[0], c[1]], order=1)

    np.testing.assert_allclose(np.asarray(mjax.jit(warp)(x, c)), np.asarray(jax.jit(warp)(x, c)), rtol=1e-6, atol=1e-6)
