"""f16 sums, products and convolutions accumulate in f32 (graph-widen-accumulators).

Compiled end to end on random data (seeded), outputs poisoned with NaN first, against
the exact (float64) result rounded to f16: every element within one f16 ulp of it (f32
partial sums rounded once can differ from the exact rounding by one ulp). Accumulated
in f16, the product below was 2.7 off (about 50 ulps) before the pass.
"""

from __future__ import annotations

import numpy as np
import pytest

import mlfuse
from mlfuse.frontend.builder import GraphBuilder

SEED = 20261203


def compile_f16(build, *arrays: np.ndarray):
    b = GraphBuilder()
    inputs = [b.input(f"x{i}", a.shape, "f16") for i, a in enumerate(arrays)]
    b.output(build(b, *inputs))
    return mlfuse.compile(b.module())


def assert_within_one_ulp_of_exact(f, arrays: list[np.ndarray], exact: np.ndarray) -> None:
    out = np.full(exact.shape, np.nan, np.float16)
    f(*arrays, out=[out])
    rounded = exact.astype(np.float16)
    ulp = np.spacing(np.abs(rounded)).astype(np.float64)
    error = np.abs(out.astype(np.float64) - rounded.astype(np.float64))
    assert np.all(error <= ulp), f"seed {SEED}: max error {error.max()} ulps {np.max(error / ulp)}"


@pytest.mark.parametrize("k", [64, 2048])
def test_f16_matmul_accumulates_in_f32(k):
    rng = np.random.default_rng(SEED)
    a = rng.standard_normal((8, k)).astype(np.float16)
    w = rng.standard_normal((k, 16)).astype(np.float16)
    f = compile_f16(lambda b, x, y: b.matmul(x, y), a, w)
    assert_within_one_ulp_of_exact(f, [a, w], a.astype(np.float64) @ w.astype(np.float64))


def test_f16_row_sum_and_mean_accumulate_in_f32():
    rng = np.random.default_rng(SEED + 1)
    x = rng.uniform(0.5, 1.5, (4, 4096)).astype(np.float16)  # one sign: no cancellation to hide the error
    f = compile_f16(lambda b, v: b.reduce_sum(v, [1]), x)
    assert_within_one_ulp_of_exact(f, [x], x.astype(np.float64).sum(1))
    f = compile_f16(lambda b, v: b.reduce_mean(v, [1]), x)
    assert_within_one_ulp_of_exact(f, [x], x.astype(np.float64).mean(1))


def test_f16_conv_accumulates_in_f32():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(SEED + 2)
    x = rng.standard_normal((1, 32, 6, 6)).astype(np.float16)
    w = rng.standard_normal((8, 32, 3, 3)).astype(np.float16)
    f = compile_f16(lambda b, v, k: b.conv2d(v, k, pads=(1, 1, 1, 1)), x, w)
    exact = torch.nn.functional.conv2d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64),
                                       padding=1).numpy()
    assert_within_one_ulp_of_exact(f, [x, w], exact)
