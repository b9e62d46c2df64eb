"""StableHLO sort, dynamic_slice and dynamic_update_slice: `mlfuse.jax.jit` against
`jax.jit` on sorts (jnp.sort, argsort, lax.sort of several operands and keys, a 3x3
median filter) and on slices at runtime starts (clamped out of range as StableHLO
clamps them). Sorts and slices move elements, so results must be exact: same values,
same dtype, and the sign of every zero (jax keeps -0.0 where it sorts it)."""

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
from mlfuse.frontend.stablehlo import SORT_MAX_AXIS  # noqa: E402


def assert_same(got, want):
    """Exact equality of every leaf: shape, dtype, values (NaN where NaN) and zeros' signs."""
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
        if g.dtype.kind == "f":
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


def check(fn, *args):
    assert_same(mjax.jit(fn)(*args), jax.jit(fn)(*args))


def special_floats(rng, shape=(5, 12)):
    """Normal floats with NaN (two in every row along the last axis), -0.0, +0.0, +-inf
    and runs of duplicates in every row (test_stablehlo_argmax uses it too)."""
    x = rng.standard_normal(shape).astype(np.float32)
    for row in x.reshape(-1, shape[-1]):
        cols = rng.permutation(shape[-1])
        row[cols[:2]] = np.nan
        row[cols[2]], row[cols[3]] = -0.0, 0.0
        row[cols[4]], row[cols[5]] = np.inf, -np.inf
        row[cols[6:9]] = row[cols[9]]
    return x


def ints(rng, shape=(5, 12)):
    return rng.integers(-4, 5, shape).astype(np.int32)  # few values: many ties


SORTS = {
    "sort_f32": (lambda x: jnp.sort(x), "f32"),
    "sort_f32_axis0": (lambda x: jnp.sort(x, axis=0), "f32"),
    "sort_int32": (lambda x: jnp.sort(x), "i32"),
    "sort_descending": (lambda x: jnp.sort(x, descending=True), "f32"),
    "sort_reversed": (lambda x: jnp.sort(x)[:, ::-1], "f32"),
    "argsort_f32": (lambda x: jnp.argsort(x), "f32"),
    "argsort_int32_stable_axis0": (lambda x: jnp.argsort(x, axis=0, stable=True), "i32"),
    "argsort_descending": (lambda x: jnp.argsort(x, descending=True), "i32"),
    "sort_3d_middle_axis": (lambda x: jnp.sort(x.reshape(5, 3, 4), axis=1), "f32"),
}


@pytest.mark.parametrize("name", list(SORTS))
def test_sort_matches_jax(name):
    fn, kind = SORTS[name]
    rng = np.random.default_rng(20)
    check(fn, special_floats(rng) if kind == "f32" else ints(rng))


def test_lax_sort_two_operands_one_key():
    """The first operand is the key, ties keep their order (stable): the second follows."""
    rng = np.random.default_rng(21)
    keys, payload = ints(rng), special_floats(rng)
    check(lambda k, v: lax.sort((k, v), num_keys=1), keys, payload)
    check(lambda v, k: lax.sort((v, k), dimension=0, num_keys=1), payload, keys)


def test_lax_sort_two_keys():
    """Lexicographic by (float key, int key), with a third operand carried along."""
    rng = np.random.default_rng(22)
    a, b, c = special_floats(rng), ints(rng), rng.integers(0, 1000, (5, 12)).astype(np.int32)
    check(lambda a, b, c: lax.sort((a, b, c), num_keys=2), a, b, c)
    check(lambda b, a: lax.sort((b, a), num_keys=2), b, a)


def median3(img):
    """3x3 median filter: reflect padding, the 9 shifted windows stacked, median along them."""
    h, w = img.shape
    p = jnp.pad(img, 1, mode="reflect")
    return jnp.median(jnp.stack([p[i : i + h, j : j + w] for i in range(3) for j in range(3)]), axis=0)


def test_median_filter():
    img = np.random.default_rng(23).standard_normal((17, 23)).astype(np.float32)
    check(median3, img)


def test_sort_is_a_constant_number_of_ops():
    """The rank formulation: no op per element of the sorted axis."""
    ops = [op.name for op in mlfuse.api.parse(jax.jit(jnp.sort).lower(np.ones((3, 200), np.float32)).as_text()).walk()]
    assert ops.count("graph.gather_elements") == 1
    assert len(ops) < 100


def test_too_long_sort_axis_is_a_located_diagnostic():
    n = SORT_MAX_AXIS + 1
    f = mjax.jit(jnp.sort)
    x = np.ones((2, n), np.float32)
    with pytest.raises(Diagnostic) as info:
        f(x)
    text = f.lowered_text(x)
    line = next(k for k, ln in enumerate(text.split("\n"), 1) if '"stablehlo.sort"' in ln)
    assert info.value.location == f"<input>:{line}:5"
    assert (
        info.value.message
        == f"'stablehlo.sort' along an axis of {n} elements is not supported (at most {SORT_MAX_AXIS}: it compares every pair)"
    )


# --- dynamic_slice, dynamic_update_slice --------------------------------------------


@pytest.mark.parametrize("start", [0, 2, 3, 9, -1, -7, -100])
def test_dynamic_slice_clamps(start):
    """jax wraps a negative start once (start + n), then StableHLO clamps to [0, n - size]."""
    x = np.random.default_rng(24).standard_normal((6, 7)).astype(np.float32)
    check(lambda x, i: lax.dynamic_slice(x, (i, 1), (3, 4)), x, np.int32(start))
    check(lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 5)), x, np.int32(start), np.int32(-start + 1))


def test_index_of_traced_scalar():
    """x[i] of a traced i is a dynamic_slice (x[jnp.argmax(y)]: tests/test_stablehlo_argmax.py)."""
    rng = np.random.default_rng(25)
    x, i = rng.standard_normal((6, 7)).astype(np.float32), np.int32(4)
    check(lambda x, i: x[i], x, i)
    check(lambda x, i: x[:, i], x, i)
    check(lambda x, i: x[i, i - 1], x, i)


def test_dynamic_slice_of_integers_and_i64_starts():
    rng = np.random.default_rng(26)
    x = rng.integers(-100, 100, (5, 9)).astype(np.int32)
    check(lambda x, i: lax.dynamic_slice(x, (i, i), (5, 3)), x, np.int32(7))
    # i64 starts beyond i32 (jax without x64 gives i32): a module written by hand
    module = """
func.func @main(%x: tensor<5x9xi32>, %i: tensor<i64>) -> tensor<2x3xi32> {
  %s = stablehlo.dynamic_slice %x, %i, %i, sizes = [2, 3] : (tensor<5x9xi32>, tensor<i64>, tensor<i64>) -> tensor<2x3xi32>
  return %s : tensor<2x3xi32>
}
"""
    compiled = mlfuse.compile(module)
    for start in (-3, 1, 6, 2**40):
        s = min(max(start, 0), 3), min(max(start, 0), 6)
        (got,) = compiled(x, np.int64(start))
        np.testing.assert_array_equal(got, x[s[0] : s[0] + 2, s[1] : s[1] + 3])


@pytest.mark.parametrize("start", [0, 1, 4, 9, -2])
def test_dynamic_update_slice_clamps(start):
    rng = np.random.default_rng(27)
    x, u = rng.standard_normal((6, 7)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    check(lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 2 - i)), x, u, np.int32(start))
    check(lambda x, u, i: lax.dynamic_update_slice(x, u[:1] * x[i, 0], (i, 3)), x, u, np.int32(start))
    check(lambda x, u, i: lax.dynamic_update_slice(x[0], u[0], (i,)), x, u, np.int32(start))
