"""StableHLO reduce of several inputs (jnp.argmax, jnp.argmin, lax.reduce of tuples):
`mlfuse.jax.jit` against `jax.jit`. The body is evaluated as a tree along each reduced
axis (neighbours combined, the earlier one as lhs), so indices and values must match
exactly: the first index among ties, the first NaN (jax's argmax and argmin pick it),
index 0 where every element is -inf (argmax) or the integer minimum."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from test_stablehlo_sort import check, special_floats  # noqa: E402

import mlfuse.jax as mjax  # noqa: E402
from mlfuse.diagnostics import Diagnostic  # noqa: E402


def ints(rng, shape, low=-4, high=5):
    return rng.integers(low, high, shape).astype(np.int32)  # few values: many ties


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 33, 64, 1000])
def test_argmax_argmin_of_lengths(n):
    rng = np.random.default_rng(40 + n)
    y = rng.standard_normal(n).astype(np.float32)
    check(lambda y: jnp.argmax(y), y)
    check(lambda y: jnp.argmin(y), y)
    k = ints(rng, (n,))
    check(lambda k: (jnp.argmax(k), jnp.argmin(k)), k)


def test_index_by_argmax():
    rng = np.random.default_rng(41)
    x, y = rng.standard_normal((9, 5)).astype(np.float32), rng.standard_normal(9).astype(np.float32)
    check(lambda x, y: x[jnp.argmax(y)], x, y)
    check(lambda x, y: x[:, jnp.argmin(x[0])] * y[jnp.argmax(y)], x, y)


def test_argmax_of_image_rows_and_argmin_of_columns():
    rng = np.random.default_rng(42)
    img = rng.standard_normal((3, 29, 17)).astype(np.float32)
    check(lambda a: jnp.argmax(a, axis=1), img)
    check(lambda a: jnp.argmin(a, axis=0), img)
    check(lambda a: jnp.argmin(a, axis=1, keepdims=True), img)
    check(lambda a: jnp.argmax(a.reshape(3, -1), axis=-1), img)


@pytest.mark.parametrize("axis", [0, 1, None])
def test_nan_first_one_wins(axis):
    """Every row has two or more NaNs at random places: both argmax and argmin give the
    first; and ±0.0, ±inf and equal values elsewhere."""
    rng = np.random.default_rng(43)
    x = special_floats(rng, (6, 23))
    check(lambda x: (jnp.argmax(x, axis=axis), jnp.argmin(x, axis=axis)), x)
    check(lambda x: (jnp.argmax(x.T, axis=axis), jnp.argmin(x.T, axis=axis)), x)
    x[:, 5:] = np.nan  # rows with NaN from 5 on (and perhaps before)
    check(lambda x: (jnp.argmax(x, axis=axis), jnp.argmin(x, axis=axis)), x)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_ties_first_index_wins(axis):
    rng = np.random.default_rng(44)
    k = ints(rng, (5, 19, 6), -2, 3)
    check(lambda k: (jnp.argmax(k, axis=axis), jnp.argmin(k, axis=axis)), k)
    f = k.astype(np.float32)
    check(lambda f: (jnp.argmax(f, axis=axis), jnp.argmin(f, axis=axis)), f)


def test_infinities_only_and_integer_extremes():
    rng = np.random.default_rng(45)
    x = np.full((4, 11), -np.inf, np.float32)
    x[1, 6] = x[1, 9] = -3.0  # one row with two equal maxima
    check(lambda x: (jnp.argmax(x, axis=1), jnp.argmax(x), jnp.argmin(-x, axis=1)), x)
    k = np.full((3, 13), np.iinfo(np.int32).min, np.int32)
    k[2] = rng.integers(-(2**31), 2**31 - 1, 13, dtype=np.int64).astype(np.int32)
    check(lambda k: (jnp.argmax(k, axis=1), jnp.argmin(k, axis=1), jnp.argmax(k[:, ::-1], axis=1)), k)


def test_wide_integers():
    rng = np.random.default_rng(46)
    k = rng.integers(-(2**31), 2**31 - 1, (7, 300), dtype=np.int64).astype(np.int32)
    check(lambda k: (jnp.argmax(k, axis=1), jnp.argmin(k, axis=0), jnp.argmax(k)), k)


def argmax_body(a, b):
    """jax's argmax comparator written out: the larger value (NaN first), ties to the lower index."""
    (x, i), (y, j) = a, b
    first = (x > y) | (x != x)
    pick = first | ((x == y) & (i < j))
    return lax.select(first, x, y), lax.select(pick, i, j)


def test_lax_reduce_of_a_tuple_over_several_axes():
    """lax.reduce of (values, flat index) over axes (0, 2) and all axes: one variadic
    reduce over several dimensions; the values returned too (zeros' signs included)."""
    rng = np.random.default_rng(47)
    x = special_floats(rng, (4, 5, 12))

    def argmax_over(x, dims):
        idx = lax.broadcasted_iota(jnp.int32, x.shape, dims[0]) * 1000 + lax.broadcasted_iota(jnp.int32, x.shape, dims[-1])
        return lax.reduce((x, idx), (np.float32(-np.inf), np.int32(0)), argmax_body, dims)

    check(lambda x: argmax_over(x, (0, 2)), x)
    check(lambda x: argmax_over(x, (0, 1, 2)), x)
    y = rng.standard_normal((4, 5, 12)).astype(np.float32)
    check(lambda y: argmax_over(y, (0, 2)), y)


def test_lax_reduce_of_a_tuple_with_inits_that_are_not_identities():
    """Two reductions at once (an integer sum and a max) with inits 7 and 100: the
    inits are combined once."""
    rng = np.random.default_rng(48)
    a, b = ints(rng, (6, 9), -50, 50), ints(rng, (6, 9), -200, 200)

    def both(a, b):
        return lax.reduce((a, b), (np.int32(7), np.int32(100)), lambda p, q: (p[0] + q[0], jnp.maximum(p[1], q[1])), (1,))

    check(both, a, b)


def test_body_op_that_cannot_convert_is_a_located_diagnostic():
    """Located at the op inside the body (mlfuse has no int4 tensors)."""

    def f(x):
        return lax.reduce((x, x), (np.int32(0), np.int32(1)),
                          lambda p, q: (p[0] + q[0], p[1].astype(jnp.int4).astype(jnp.int32) + q[1]), (0,))

    g = mjax.jit(f)
    x = np.arange(1, 5, dtype=np.int32)
    with pytest.raises(Diagnostic) as info:
        g(x)
    assert "'stablehlo.convert' on" in info.value.message and "element type i4 is not supported" in info.value.message
    text = g.lowered_text(x)
    line = next(n for n, ln in enumerate(text.split("\n"), 1) if "-> tensor<i4>" in ln)
    assert info.value.location.startswith(f"<input>:{line}:")
