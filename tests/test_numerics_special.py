"""Numerics at the edges, compiled end to end and compared with numpy.

- integer division: numpy's answers where the hardware traps (x / 0 is 0,
  INT_MIN / -1 wraps to INT_MIN), bit-exact, on the CPU and the GPU simulator;
- IEEE special values of pow, tanh, exp, log and erf, listed one by one, in f32
  (branch-free polynomials of expand-math) and f64 (libm), against numpy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

import mlfuse
from mlfuse.frontend.builder import GraphBuilder

POISON = {np.dtype(np.int32): -12345, np.dtype(np.int64): -12345, np.dtype(np.float32): 1.25e30, np.dtype(np.float64): 1.25e300}


def numpy_trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's integer division truncated towards zero: a - fmod(a, b) is an exact
    multiple of b, so floor_divide of it truncates; x / 0 -> 0 and MIN / -1 -> MIN
    are numpy's own answers (under errstate)."""
    with np.errstate(all="ignore"):
        return np.floor_divide(a - np.fmod(a, b), b)


def binary_module(op: str, dtype: str, n: int):
    b = GraphBuilder()
    x, y = b.input("x", (n,), dtype), b.input("y", (n,), dtype)
    b.output(getattr(b, op)(x, y))
    return b.module()


def unary_module(op: str, dtype: str, n: int):
    b = GraphBuilder()
    x = b.input("x", (n,), dtype)
    b.output(getattr(b, op)(x))
    return b.module()


def run_poisoned(fn, *args):
    spec = fn.outputs[0]
    out = np.full(spec.shape, POISON[np.dtype(spec.dtype)], dtype=spec.dtype)
    (got,) = fn(*args, out=[out])
    return got


def division_operands(rng: np.random.Generator, dtype: np.dtype, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Random pairs with zero divisors, INT_MIN / -1, INT_MIN / other and INT_MAX / -1 mixed in."""
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    small = rng.integers(-9, 10, n).astype(dtype)
    b = np.where(rng.random(n) < 0.5, small, rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True))
    special_a = np.array([info.min, info.min, info.min, info.max, 7, -7, 0, info.min, 1, -1], dtype)
    special_b = np.array([-1, 0, 3, -1, 0, 0, 0, 1, info.min, info.min], dtype)
    a[: len(special_a)], b[: len(special_b)] = special_a, special_b
    assert (b == 0).sum() >= 4
    return a, b


@pytest.mark.parametrize("target", ["cpu", "gpu-sim"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_division_matches_numpy(target, dtype):
    n = 1000 if target == "cpu" else 64
    rng = np.random.default_rng(15)
    a, b = division_operands(rng, np.dtype(dtype), n)
    fn = mlfuse.compile(binary_module("div", dtype, n), target=target)
    got = run_poisoned(fn, a, b) if target == "cpu" else fn(a, b)[0]
    want = numpy_trunc_div(a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    (ref,) = mlfuse.reference(binary_module("div", dtype, n))(a, b)
    np.testing.assert_array_equal(ref, want)


def test_integer_division_cases_by_hand():
    """The trap cases, spelled out: numpy's values, not C's or Python's."""
    m = np.iinfo(np.int32).min
    a = np.array([m, 7, -7, m, m, -9], np.int32)
    b = np.array([-1, 0, 0, 3, 2, 4], np.int32)
    fn = mlfuse.compile(binary_module("div", "int32", 6))
    np.testing.assert_array_equal(run_poisoned(fn, a, b), [m, 0, 0, -715827882, -(2**30), -2])


# --- IEEE special values ------------------------------------------------------------------

INF, NAN = math.inf, math.nan
# Every (x, y) of this cross product is checked: signed zeros, +-1, +-inf, NaN, negative
# bases with integral (odd, even) and non-integral exponents, tiny and huge magnitudes.
POW_X = [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 0.5, -0.5, 2.0, -2.0, 3.7, -3.7, 1e-30, -1e30]
POW_Y = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 2.5, -2.5, INF, -INF, NAN, 1e9, 1e9 + 1]
# The cases the issue reported, spelled out: (x, y, numpy's answer)
POW_NAMED = [(1.0, NAN, 1.0), (-1.0, INF, 1.0), (-1.0, -INF, 1.0), (-0.0, -1.0, -INF), (-0.0, -3.0, -INF),
             (-0.0, 3.0, -0.0), (-0.0, 2.0, 0.0), (-0.0, -2.0, INF), (-INF, 3.0, -INF), (-INF, -3.0, -0.0),
             (-INF, 0.5, INF), (-INF, -0.5, 0.0), (-2.0, 0.5, NAN), (NAN, 0.0, 1.0), (0.0, NAN, NAN)]
UNARY_X = [0.0, -0.0, INF, -INF, NAN, 1e-45, -1e-45, 1e-30, -1e-30, 0.3, -0.3, 0.625, -0.625, 0.7, -0.7, 5.0, -5.0, 9.0, -9.0, 50.0, -50.0, 88.7, -88.7, 89.0, -104.0, 3e38, -3e38]
UNARY = {"tanh": np.tanh, "exp": np.exp, "log": np.log, "erf": special.erf, "sin": np.sin, "cos": np.cos}
# f32 goes through expand-math's polynomials (errors stated there), f64 through libm
RTOL = {"float32": 2e-6, "float64": 1e-14}


def assert_ieee_equal(got: np.ndarray, want: np.ndarray, rtol: float, what: list) -> None:
    """NaN where numpy has NaN; infinities and zeros exactly, sign included; finite values
    within `rtol` (relative)."""
    bad = []
    for g, w, case in zip(got.tolist(), want.tolist(), what):
        if math.isnan(w) or math.isinf(w) or w == 0:
            ok = (math.isnan(g) and math.isnan(w)) or (g == w and math.copysign(1, g) == math.copysign(1, w))
        else:
            ok = math.isfinite(g) and abs(g - w) <= rtol * abs(w)
        if not ok:
            bad.append(f"{case}: got {g!r}, numpy {w!r}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_special_values(dtype):
    pairs = [(x, y) for x in POW_X for y in POW_Y] + [(x, y) for x, y, _ in POW_NAMED]
    x = np.array([p[0] for p in pairs], dtype)
    y = np.array([p[1] for p in pairs], dtype)
    fn = mlfuse.compile(binary_module("pow", dtype, len(pairs)))
    got = run_poisoned(fn, x, y)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
        (ref,) = mlfuse.reference(binary_module("pow", dtype, len(pairs)))(x, y)
    assert_ieee_equal(got, want, RTOL[dtype], pairs)
    assert_ieee_equal(ref, want, 0.0, pairs)
    named = np.array([w for _, _, w in POW_NAMED], dtype)
    assert_ieee_equal(want[-len(POW_NAMED):], named, 0.0, POW_NAMED)  # numpy says what we say it says


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("exponent", [1.0, 2.0, 3.0])
def test_powers_by_small_integer_constants(exponent, dtype):
    """pow(x, c) for c = 1, 2, 3 becomes multiplies (canonicalize: PowBySmallIntegers):
    x and x * x are numpy's exactly, (x * x) * x within one rounding of its correctly
    rounded cube; special values, overflow and underflow as numpy has them."""
    rng = np.random.default_rng(21)
    special = [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 1e-30, -1e-30, 3e38, -3e38, 1e13, -1e13, 1e-15]
    x = np.concatenate([np.array(special), rng.standard_normal(500) * 10.0 ** rng.integers(-6, 7, 500)]).astype(dtype)
    b = GraphBuilder()
    xs = b.input("x", x.shape, dtype)
    b.output(b.pow(xs, b.constant(exponent, dtype)))
    got = run_poisoned(mlfuse.compile(b.module()), x)
    with np.errstate(all="ignore"):
        want = np.power(x, np.array(exponent, dtype))
    eps = float(np.finfo(dtype).eps)
    assert_ieee_equal(got, want, 0.0 if exponent < 3 else 2 * eps, x.tolist())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_values(name, dtype):
    x = np.array(UNARY_X, dtype)
    fn = mlfuse.compile(unary_module(name, dtype, len(x)))
    got = run_poisoned(fn, x)
    with np.errstate(all="ignore"):
        want = UNARY[name](x).astype(dtype)
        (ref,) = mlfuse.reference(unary_module(name, dtype, len(x)))(x)
    assert_ieee_equal(got, want, RTOL[dtype] * (3 if name == "erf" else 1), UNARY_X)
    assert_ieee_equal(ref, want, 0.0, UNARY_X)


def test_special_values_on_the_gpu_simulator():
    """The simulator runs the same f32 expansions (the device has no libm)."""
    pairs = [(x, y) for x, y, _ in POW_NAMED]
    x = np.array([p[0] for p in pairs], np.float32)
    y = np.array([p[1] for p in pairs], np.float32)
    (got,) = mlfuse.compile(binary_module("pow", "float32", len(pairs)), target="gpu-sim")(x, y)
    assert_ieee_equal(got, np.array([w for _, _, w in POW_NAMED], np.float32), 0.0, pairs)
    t = np.array(UNARY_X, np.float32)
    (got,) = mlfuse.compile(unary_module("tanh", "float32", len(t)), target="gpu-sim")(t)
    with np.errstate(all="ignore"):
        assert_ieee_equal(got, np.tanh(t), RTOL["float32"], UNARY_X)


@pytest.mark.parametrize("target", ["gpu-sim", "ptx"])
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_and_cos_are_refused_on_the_gpu_at_their_op(name, target):
    """The device has no libm (sin and cos call it on the CPU), and the simulator runs
    what the device runs: a located diagnostic either way."""
    from mlfuse.backend.gpu.ptx import device_module

    text = (f"func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {{\n"
            f"  %y = graph.{name} %x : tensor<8xf32>\n  func.return %y : tensor<8xf32>\n}}")
    with pytest.raises(mlfuse.Diagnostic) as info:
        if target == "ptx":
            device_module(mlfuse.run_pipeline(mlfuse.parse(text), ["fusion-plan{target=gpu}", "gpu-map-kernels"]))
        else:
            mlfuse.compile(text, target=target)
    assert str(info.value).startswith("<input>:2:3: error:"), str(info.value)


MINMAX_VALUES = [0.0, -0.0, 1.5, -1.5, math.inf, -math.inf, math.nan, -math.nan]


@pytest.mark.parametrize("target", ["cpu", "gpu-sim"])
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_max_min_and_relu_follow_numpy_bit_for_bit(op, target):
    """numpy's maximum/minimum on every pair of special values, signs of zero included
    (np.maximum(0.0, -0.0) is -0.0: of two equal values the second), NaN from either
    side; ReLU is np.maximum(x, 0.0) (so ReLU(-0.0) is +0.0) and clip bounds take the
    constant-bound form. Compared as bits (NaN payloads aside)."""
    pairs = [(x, y) for x in MINMAX_VALUES for y in MINMAX_VALUES]
    x = np.array([p[0] for p in pairs], np.float32)
    y = np.array([p[1] for p in pairs], np.float32)
    b = GraphBuilder()
    xs, ys = b.input("x", x.shape, "f32"), b.input("y", y.shape, "f32")
    bound = 0.5 if op == "maximum" else -0.5
    combine = b.maximum if op == "maximum" else b.minimum
    b.output(combine(xs, ys), b.relu(xs), combine(xs, bound))
    got = mlfuse.compile(b.module(), target=target)(x, y)
    npop = getattr(np, op)
    for value, want in zip(got, (npop(x, y), np.maximum(x, np.float32(0.0)), npop(x, np.float32(bound)))):
        same = (np.isnan(value) & np.isnan(want)) | (value.view(np.int32) == want.view(np.int32))
        assert same.all(), [(pairs[i], value[i], want[i]) for i in np.flatnonzero(~same)]


@pytest.mark.parametrize("target", ["cpu", "gpu-sim"])
@pytest.mark.parametrize("width", [8, 40])
def test_max_pool_and_column_max_propagate_nan_and_infinities(width, target):
    """A max pool's window and a column max: a NaN anywhere in the window (or column)
    gives NaN, infinities win or lose as numbers, over rows narrow enough to keep the
    taps outside and wide enough to take them innermost (graph_to_loop.ROW_IN_REGISTERS).
    Ties of +0 and -0 keep the first value (numpy keeps the last): compared with
    signed zeros ignored, bit for bit otherwise."""
    rng = np.random.default_rng(width)
    x = rng.standard_normal((1, 3, 6, width)).astype(np.float32)
    flat = x.reshape(-1)
    spots = rng.choice(flat.size, 12, replace=False)
    flat[spots] = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0] * 2, np.float32)
    b = GraphBuilder()
    xs = b.input("x", x.shape, "f32")
    b.output(b.max_pool2d(xs, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1)), b.reduce_max(xs, axis=2))
    got_pool, got_col = mlfuse.compile(b.module(), target=target)(x)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    for got, want in ((got_pool, windows.max(axis=(4, 5))), (got_col, x.max(axis=2))):
        same = (np.isnan(got) & np.isnan(want)) | (got == want)
        assert same.all(), np.argwhere(~same)
