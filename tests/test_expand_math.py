"""Accuracy of expand-math's f32 expansions, in ulps against numpy's float64.

The bounds are the ones stated in mlfuse/conversion/expand_math.py. The error of a
result is |got - f(x)| / spacing(float32(f(x))), f evaluated in float64: a denormal
result's ulp is 2^-149, so "rounded like numpy's to within 1 denormal ulp" is the
same bound. The sweep: seeded random bit patterns (every binade, both signs, NaNs and
infinities), dense samples of the ranges where the expansions switch or saturate,
and the special values one by one, which must match numpy exactly (NaN for NaN, the
sign of zero, +-inf, +-1, 0). The host evaluates the polynomials with FMA when it has
it; the GPU simulator evaluates them unfused, in numpy float32, and must meet the
same bounds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

import mlfuse

F64 = {"exp": np.exp, "tanh": np.tanh, "erf": special.erf, "log": np.log}
# Max errors in ulp, with room for a target without FMA (measured: exp 0.90, tanh 2.53,
# erf 6.41, log 0.75 with FMA over every 257th f32; unfused on the simulator, 100k samples:
# exp 1.01, tanh 1.5, erf 5.5)
ULP_BOUND = {"exp": 1.5, "tanh": 3.0, "erf": 7.0, "log": 1.5}

INF, NAN = math.inf, math.nan
TINY = 1e-45  # the smallest denormal, 2^-149
SPECIAL = {
    # x: numpy's float32 result (exact, sign of zero included)
    # above 88.8 only n is capped (at 128): x - 128 ln2 stays in the polynomial, which must
    # still overflow, up to the largest float; a NaN with its sign bit set passes the cap
    "exp": [(NAN, NAN), (-NAN, NAN), (INF, INF), (-INF, 0.0), (0.0, 1.0), (-0.0, 1.0), (88.8, INF), (89.0, INF),
            (100.0, INF), (1000.0, INF), (1e30, INF), (3.4e38, INF), (-104.0, 0.0), (-110.0, 0.0), (-1e30, 0.0),
            (TINY, 1.0), (-TINY, 1.0)],
    "tanh": [(NAN, NAN), (INF, 1.0), (-INF, -1.0), (0.0, 0.0), (-0.0, -0.0), (9.02, 1.0), (-9.02, -1.0),
             (9.5, 1.0), (20.0, 1.0), (-1e30, -1.0), (TINY, TINY), (-TINY, -TINY), (1e-30, 1e-30)],
    # beyond 4: x^2 is clamped to 16 (and overflows to inf from 1.9e19), |x| R(16) to 1
    "erf": [(NAN, NAN), (-NAN, NAN), (INF, 1.0), (-INF, -1.0), (0.0, 0.0), (-0.0, -0.0), (4.0, 1.0), (-4.0, -1.0),
            (10.0, 1.0), (1e20, 1.0), (-1e30, -1.0), (3.4e38, 1.0)],
    "log": [(NAN, NAN), (INF, INF), (-INF, NAN), (0.0, -INF), (-0.0, -INF), (-1.0, NAN), (1.0, 0.0)],
}


def sweep(seed: int = 0, n: int = 1 << 16) -> np.ndarray:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    parts = [
        bits,
        rng.uniform(-12, 12, n),  # tanh's and erf's whole non-saturated range
        rng.uniform(-1, 1, n),
        rng.uniform(-105, 90, n),  # exp from underflow through denormals to overflow
        np.float32(2.0) ** rng.uniform(-149, -100, n // 8) * rng.choice([-1, 1], n // 8),  # denormal and tiny x
        np.linspace(88.3, 88.8, 4096),  # exp's last binade and overflow
        np.linspace(-104.5, -87.0, 4096),  # exp's denormal results
        np.linspace(8.9, 9.1, 4096),  # tanh's saturation
        np.linspace(3.8, 4.1, 4096),  # erf's clamp
        rng.uniform(0, 3, n),  # log's main range
    ]
    return np.concatenate([np.asarray(p, np.float32) for p in parts])


def ulp_errors(name: str, x: np.ndarray, got: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        want = F64[name](x.astype(np.float64))
        want32 = want.astype(np.float32)
        spacing = np.spacing(np.abs(want32)).astype(np.float64)
        err = np.abs(got.astype(np.float64) - want) / spacing
    # infinities and NaNs: exact or infinitely wrong
    special_want = ~np.isfinite(want32)
    same = (got == want32) | (np.isnan(got) & np.isnan(want32))
    err[special_want] = np.where(same[special_want], 0.0, np.inf)
    err[~special_want & ~np.isfinite(got)] = np.inf
    return err


def unary(name: str, n: int) -> str:
    t = f"tensor<{n}xf32>"
    return f"func.func @main(%x: {t}) -> {t} {{\n  %y = graph.{name} %x : {t}\n  func.return %y : {t}\n}}"


def run(name: str, x: np.ndarray, target: str = "cpu") -> np.ndarray:
    (got,) = mlfuse.compile(unary(name, x.size), target=target)(x)
    return np.asarray(got)


def worst(name: str, x: np.ndarray, err: np.ndarray, got: np.ndarray) -> str:
    i = int(np.argmax(err))
    return f"{name}: {err[i]:.2f} ulp at x = {x[i]!r} (got {got[i]!r}, float64 {F64[name](np.float64(x[i]))!r})"


@pytest.mark.parametrize("name", sorted(ULP_BOUND))
def test_ulp_error_over_the_f32_range(name):
    x = sweep(seed=sorted(ULP_BOUND).index(name))
    got = run(name, x)
    err = ulp_errors(name, x, got)
    assert err.max() <= ULP_BOUND[name], worst(name, x, err, got)


@pytest.mark.parametrize("name", sorted(SPECIAL))
def test_special_values_exactly(name):
    x = np.array([c[0] for c in SPECIAL[name]], np.float32)
    want = np.array([c[1] for c in SPECIAL[name]], np.float32)
    with np.errstate(all="ignore"):  # numpy agrees with the table
        np.testing.assert_array_equal(F64[name](x.astype(np.float64)).astype(np.float32), want)
    got = run(name, x)
    for xi, g, w in zip(x.tolist(), got.tolist(), want.tolist()):
        ok = (math.isnan(g) and math.isnan(w)) or (g == w and math.copysign(1, g) == math.copysign(1, w))
        assert ok, f"{name}({xi!r}) = {g!r}, numpy {w!r}"


def test_exp_denormal_results_round_once():
    """e^x for x in [-103.97, -87.34] is denormal; the two-factor scaling rounds it once."""
    x = np.linspace(-103.9, -87.4, 50_000).astype(np.float32)
    got = run("exp", x)
    want = np.exp(x.astype(np.float64))
    assert np.all(np.abs(got - want) <= 2.0**-149), "denormal exp off by more than one denormal ulp"
    assert np.all(got > 0)


def test_tanh_and_erf_stay_within_one():
    """Near saturation the results are 1 - a few ulp and then exactly 1, never above:
    tanh's quotient m / (m + 2) and erf's clamp at 4 cannot overshoot."""
    x = np.linspace(0, 12, 200_001).astype(np.float32)
    for name in ("tanh", "erf"):
        got = run(name, x)
        assert np.all((got >= 0) & (got <= 1.0)), name
        assert np.all(got[x >= 9.02] == 1.0), name
        np.testing.assert_array_equal(run(name, -x), -got)  # odd, bit for bit


@pytest.mark.parametrize("name", ["exp", "tanh", "erf"])
def test_unfused_evaluation_on_the_gpu_simulator(name):
    """The simulator's numpy float32 arithmetic never fuses a multiply-add: the bounds
    hold without FMA too."""
    x = np.concatenate([sweep(seed=7, n=512), np.array([c[0] for c in SPECIAL[name]], np.float32)])
    got = run(name, x, target="gpu-sim")
    err = ulp_errors(name, x, got)
    assert err.max() <= ULP_BOUND[name], worst(name, x, err, got)
