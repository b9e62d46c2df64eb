"""loop-flatten-windows end to end: depthwise convs and poolings over output rows of at
most 16 run over flat positions of rows as wide as their padded input's, inside their
tile bands, and give float64 numpy's results within fp32 rounding; outputs poisoned."""

from __future__ import annotations

import numpy as np
import pytest

import mlfuse
from mlfuse import pipelines
from mlfuse.api import run_pipeline
from mlfuse.frontend.builder import GraphBuilder
from mlfuse.poly.flatten_windows import flatten_windows


def flattened(module) -> int:
    """How many nests the pipeline's loop-flatten-windows flattens in `module` (depthwise
    convs as window nests, not the depthwise kernels' products)."""
    steps = pipelines.cpu_pipeline(depthwise=False)
    return flatten_windows(run_pipeline(module.clone(), steps[: steps.index("loop-flatten-windows")]))


def windows(x: np.ndarray, k: int, pad: float) -> np.ndarray:
    """[n, c, h, w, k, k]: the k x k windows of x padded by k // 2 with `pad` (float64)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (k // 2,) * 2, (k // 2,) * 2), constant_values=pad)
    return np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))


@pytest.mark.parametrize("channels, h, w, k", [(24, 7, 7, 5), (16, 14, 13, 3), (8, 5, 16, 3)])
def test_depthwise_conv_with_hardswish(channels, h, w, k):
    """MobileNetV3's depthwise conv + bias + hardswish, same padding: flattened, within
    fp32 rounding of k * k-term sums (atol 1e-5 of the output's range), and within 1e-6
    of the pipeline without the pass (LLVM contracts products differently)."""
    rng = np.random.default_rng(channels * 100 + h)
    x = rng.standard_normal((1, channels, h, w)).astype(np.float32)
    wt = rng.standard_normal((channels, 1, k, k)).astype(np.float32)
    bias = rng.standard_normal(channels).astype(np.float32)
    b = GraphBuilder()
    y = b.conv2d(b.input("x", x.shape, "f32"), b.constant(wt, "f32"), [1, 1], [k // 2] * 4, [1, 1], channels)
    y = y + b.broadcast_to(b.constant(bias, "f32").reshape(1, channels, 1, 1), y.shape)
    gate = b.minimum(b.maximum(y * b.constant(np.float32(1 / 6), "f32") + b.constant(np.float32(0.5), "f32"),
                               b.constant(np.float32(0), "f32")), b.constant(np.float32(1), "f32"))
    b.output(y * gate)
    module = b.module()
    assert flattened(module) == 1
    out = np.full((1, channels, h, w), np.nan, np.float32)
    mlfuse.compile(module, passes=pipelines.cpu_pipeline(depthwise=False))(x, out=[out])
    conv = np.einsum("nchwij,cij->nchw", windows(x, k, 0), wt[:, 0].astype(np.float64)) + bias[None, :, None, None]
    want = conv * np.clip(conv / 6 + 0.5, 0, 1)
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-5 * np.abs(want).max())
    steps = [s for s in pipelines.cpu_pipeline(depthwise=False) if s != "loop-flatten-windows"]
    (unflattened,) = mlfuse.compile(module, passes=steps)(x)
    np.testing.assert_allclose(out, unflattened, rtol=0, atol=1e-6 * np.abs(want).max())


def test_max_pool_keeps_nan_and_infinities():
    """2x, a 3 x 3 max pool (stride 1, padding 1) over 9 x 9, then + 1: the pool flattened
    in the tile, bit for bit numpy's, NaN and infinities included (the positions past each
    row read them too, and nothing reads what they compute)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 9, 9)).astype(np.float32)
    x[0, 1, 4, 4], x[0, 2, 0, 8], x[0, 3, 8, 0] = np.nan, -np.inf, np.inf
    b = GraphBuilder()
    pooled = b.max_pool2d(b.input("x", x.shape, "f32") * b.constant(np.float32(2), "f32"), [3, 3], [1, 1], [1] * 4)
    b.output(pooled + b.constant(np.float32(1), "f32"))
    module = b.module()
    assert flattened(module) == 1
    out = np.full((1, 4, 9, 9), np.nan, np.float32)
    mlfuse.compile(module)(x, out=[out])
    want = windows(x * np.float32(2), 3, -np.inf).max(axis=(4, 5)).astype(np.float32) + np.float32(1)
    np.testing.assert_array_equal(out, want)
