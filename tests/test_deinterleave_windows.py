"""loop-deinterleave-windows end to end: depthwise convs and poolings at stride 2 read their
tile-local padded input split into even and odd columns, and give float64 numpy's results
within fp32 rounding (max pooling: bit for bit, NaN and infinities included), the same
bits as the pipeline without the pass; outputs poisoned. The pipeline keeps depthwise
convs window nests (depthwise=False): the depthwise kernels take these small planes."""

from __future__ import annotations

import numpy as np
import pytest

import mlfuse
from mlfuse import pipelines
from mlfuse.api import run_pipeline
from mlfuse.frontend.builder import GraphBuilder
from mlfuse.poly.deinterleave_windows import deinterleave_windows

PASS = "loop-deinterleave-windows"
STEPS = pipelines.cpu_pipeline(depthwise=False)


def deinterleaved(module) -> int:
    """How many buffers the pipeline's loop-deinterleave-windows splits in `module`."""
    return deinterleave_windows(run_pipeline(module.clone(), STEPS[: STEPS.index(PASS)]))


def compiled(module):
    return mlfuse.compile(module, passes=STEPS)


def without_pass(module, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    return mlfuse.compile(module, passes=[s for s in STEPS if s != PASS])(*inputs)


def windows(x: np.ndarray, k: int, pads: tuple[int, int, int, int], pad: float, stride: int = 2) -> np.ndarray:
    """[n, c, oh, ow, k, k]: the k x k windows at `stride` of x padded by pads = [top, left,
    bottom, right] with `pad` (float64)."""
    top, left, bottom, right = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=pad)
    return np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]


@pytest.mark.parametrize("channels, h, w, k, pads, split", [
    (16, 40, 40, 3, (1, 1, 1, 1), 1),  # MobileNetV2's: rows of 20 outputs
    (8, 38, 36, 5, (2, 2, 2, 2), 1),   # a 5x5 window, an even left pad
    (8, 36, 38, 3, (0, 0, 1, 1), 1),   # padding after the rows only
    (8, 37, 35, 3, (1, 1, 1, 1), 0),   # an odd row: kept
])
def test_depthwise_conv_with_relu6(channels, h, w, k, pads, split):
    """A stride-2 depthwise conv + bias + ReLU6: its padded tile split when its rows are of
    even width, within fp32 rounding of k * k-term sums (atol 1e-5 of the output's
    range) and the same bits as without the pass (the taps sum in the same order)."""
    rng = np.random.default_rng(channels * 100 + w)
    x = rng.standard_normal((1, channels, h, w)).astype(np.float32)
    wt = rng.standard_normal((channels, 1, k, k)).astype(np.float32)
    bias = rng.standard_normal(channels).astype(np.float32)
    b = GraphBuilder()
    y = b.conv2d(b.input("x", x.shape, "f32"), b.constant(wt, "f32"), [2, 2], list(pads), [1, 1], channels)
    y = y + b.broadcast_to(b.constant(bias, "f32").reshape(1, channels, 1, 1), y.shape)
    b.output(b.minimum(b.maximum(y, b.constant(np.float32(0), "f32")), b.constant(np.float32(6), "f32")))
    module = b.module()
    assert deinterleaved(module) == split
    want = np.einsum("nchwij,cij->nchw", windows(x, k, pads, 0), wt[:, 0].astype(np.float64))
    want = np.clip(want + bias[None, :, None, None], 0, 6)
    out = np.full(want.shape, np.nan, np.float32)
    compiled(module)(x, out=[out])
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-5 * np.abs(want).max())
    np.testing.assert_array_equal(out, without_pass(module, x)[0])


def test_max_pool_keeps_nan_and_infinities():
    """ResNet's stem pool (3x3, stride 2, padding 1) after x * 2 over 4 x 32 x 34: split,
    bit for bit numpy's, NaN and infinities on even and odd columns and at the borders."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 4, 32, 34)).astype(np.float32)
    x[0, 0, 5, 6], x[0, 1, 0, 7], x[0, 2, 31, 0], x[0, 3, 9, 33] = np.nan, -np.inf, np.inf, np.nan
    b = GraphBuilder()
    b.output(b.max_pool2d(b.input("x", x.shape, "f32") * b.constant(np.float32(2), "f32"), [3, 3], [2, 2], [1] * 4))
    module = b.module()
    assert deinterleaved(module) == 1
    want = windows(x * np.float32(2), 3, (1, 1, 1, 1), -np.inf).max(axis=(4, 5)).astype(np.float32)
    out = np.full(want.shape, 5.0, np.float32)
    compiled(module)(x, out=[out])
    np.testing.assert_array_equal(out, want)
    assert np.isnan(out[0, 0, 3, 3]) and np.isnan(out[0, 3, 5, 16])


def test_average_pool_counts_real_elements():
    """A 2x2 average pool at stride 2 without padding (it reads its input, no tile of its
    own: kept) and a 3x3 one with padding not counted (split): within fp32 rounding, the
    same bits as without the pass."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 3, 20, 24)).astype(np.float32)
    b = GraphBuilder()
    xin = b.input("x", x.shape, "f32")
    b.output(b.avg_pool2d(xin, [2, 2], [2, 2]))
    b.output(b.avg_pool2d(xin, [3, 3], [2, 2], [1, 1, 1, 1]))
    module = b.module()
    assert deinterleaved(module) == 1
    first = windows(x, 2, (0, 0, 0, 0), 0).mean(axis=(4, 5))
    padded = windows(x, 3, (1, 1, 1, 1), 0).sum(axis=(4, 5))
    counts = windows(np.ones_like(x), 3, (1, 1, 1, 1), 0).sum(axis=(4, 5))
    outs = [np.full(first.shape, np.nan, np.float32), np.full(padded.shape, np.nan, np.float32)]
    compiled(module)(x, out=outs)
    np.testing.assert_allclose(outs[0], first, rtol=2e-7, atol=1e-7)
    np.testing.assert_allclose(outs[1], padded / counts, rtol=2e-7, atol=1e-7)
    for got, plain in zip(outs, without_pass(module, x)):
        np.testing.assert_array_equal(got, plain)
