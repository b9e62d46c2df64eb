"""loop-trim-fills end to end: the pad fills that post-tiling fusion puts in the tiles of
depthwise convs, poolings and pads write only the border their copy leaves, and the
results are float64 numpy's within fp32 rounding (max pooling and pads: bit for bit, NaN
and infinities included), the same bits as the pipeline without the pass; outputs poisoned."""

from __future__ import annotations

import numpy as np
import pytest

import mlfuse
from mlfuse.dialects import loop
from mlfuse.frontend.builder import GraphBuilder
from mlfuse.poly.fill_trimming import is_constant_fill, trim_fills
from mlfuse.poly.program import functions

from conftest import compile_without, cpu_lowered_before

PASS = "loop-trim-fills"


def fill_points(module) -> int:
    """Points the pad fills of a lowered `module` write (a tile's: in one tile)."""
    total = 0
    for op in module.walk():
        if isinstance(op, loop.NestOp) and is_constant_fill(op) and op.nest_name.data.endswith("pad_fill"):
            at_zero = lambda m: m.data.eval([], [0] * m.data.num_symbols)[0]  # noqa: E731 (the first tile)
            extents = [at_zero(hi) - at_zero(lo) for lo, hi in zip(op.lower.data, op.upper.data)]
            total += int(np.prod(extents))
    return total


def trimmed(module) -> tuple[int, int, int]:
    """How many fills the pipeline's loop-trim-fills trims in `module`, and the points the
    pad fills write before and after."""
    lowered = cpu_lowered_before(module, PASS)
    before = fill_points(lowered)
    count = sum(trim_fills(fn) for fn in functions(lowered))
    return count, before, fill_points(lowered)


def windows(x: np.ndarray, k: int, pad: int, value: float, stride: int) -> np.ndarray:
    """[n, c, oh, ow, k, k]: the k x k windows at `stride` of x padded by `pad` with `value` (float64)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=value)
    return np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]


@pytest.mark.parametrize("channels, size, k, stride", [
    (24, 34, 3, 1),  # a 3x3 over a plane larger than the depthwise kernels take
    (16, 66, 3, 2),  # stride 2 (33 x 33 outputs, more than the depthwise kernels take): a deinterleaved tile
    (12, 34, 5, 1),  # a 5x5 over a plane larger than the depthwise kernels take (at most 32 x 32)
    (8, 66, 5, 2),
])
def test_depthwise_conv_tiles_fill_only_their_border(channels, size, k, stride):
    """A depthwise conv + bias + ReLU6 over padded channel tiles: every tile's fill trimmed
    to its border, within fp32 rounding of the k * k-term sums (atol 1e-5 of the output's
    range), the same bits as without the pass."""
    rng = np.random.default_rng(channels * 1000 + size * 10 + k)
    x = rng.standard_normal((1, channels, size, size)).astype(np.float32)
    wt = rng.standard_normal((channels, 1, k, k)).astype(np.float32)
    bias = rng.standard_normal(channels).astype(np.float32)
    pad = k // 2
    b = GraphBuilder()
    y = b.conv2d(b.input("x", x.shape, "f32"), b.constant(wt, "f32"), [stride, stride], [pad] * 4, [1, 1], channels)
    y = y + b.broadcast_to(b.constant(bias, "f32").reshape(1, channels, 1, 1), y.shape)
    b.output(b.minimum(b.maximum(y, b.constant(np.float32(0), "f32")), b.constant(np.float32(6), "f32")))
    module = b.module()
    count, before, after = trimmed(module)
    assert count >= 1 and after < before / 2  # at most the border: 128 of 18 x 18 at 14 x 14, 5 x 5
    want = np.einsum("nchwij,cij->nchw", windows(x, k, pad, 0, stride), wt[:, 0].astype(np.float64))
    want = np.clip(want + bias[None, :, None, None], 0, 6)
    out = np.full(want.shape, np.nan, np.float32)
    mlfuse.compile(module)(x, out=[out])
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-5 * np.abs(want).max())
    np.testing.assert_array_equal(out, compile_without(module, PASS)(x)[0])


def test_max_pool_border_keeps_minus_infinity():
    """A 3x3 max pool, stride 1, padding 1, after x + 1: the -inf border written alone, bit
    for bit numpy's, NaN and infinities at the borders and inside."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 6, 20, 20)).astype(np.float32)
    x[0, 0, 0, 0], x[0, 1, 19, 5], x[0, 2, 7, 0], x[0, 3, 9, 9] = np.nan, -np.inf, np.inf, np.nan
    x[0, 4] = -np.inf  # a whole plane of -inf: the border's -inf is its maximum too
    b = GraphBuilder()
    b.output(b.max_pool2d(b.input("x", x.shape, "f32") + b.constant(np.float32(1), "f32"), [3, 3], [1, 1], [1] * 4))
    module = b.module()
    assert trimmed(module)[0] >= 1
    want = windows(x + np.float32(1), 3, 1, -np.inf, 1).max(axis=(4, 5)).astype(np.float32)
    out = np.full(want.shape, 5.0, np.float32)
    mlfuse.compile(module)(x, out=[out])
    np.testing.assert_array_equal(out, want)
    assert np.isnan(out[0, 0, 0, 0]) and np.isneginf(out[0, 4]).all()


def test_stencil_pipeline_pad_then_blur():
    """The stencil pipeline (post-tiling fusion of a pad into a 3x3 box blur's tiles) trims
    the fill too: numpy's blur of the padded image within fp32 rounding of 9-term sums."""
    from mlfuse.api import run_pipeline
    from mlfuse.pipelines import cpu_stencil_pipeline

    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 3, 40, 36)).astype(np.float32)
    b = GraphBuilder()
    xp = b.pad(b.input("x", x.shape, "f32"), [(0, 0), (0, 0), (1, 1), (1, 1)], 0.25)
    w = np.full((3, 1, 3, 3), 1 / 9, np.float32)
    b.output(b.conv2d(xp, b.constant(w, "f32"), [1, 1], [0] * 4, [1, 1], 3))
    module = b.module()
    passes = cpu_stencil_pipeline("post-tile", (8, 8))
    lowered = run_pipeline(module.clone(), passes[: passes.index(PASS)])
    assert sum(trim_fills(fn) for fn in functions(lowered)) == 1
    want = windows(x, 3, 1, 0.25, 1).mean(axis=(4, 5))
    out = np.full(want.shape, np.nan, np.float32)
    mlfuse.compile(module, passes=passes)(x, out=[out])
    np.testing.assert_allclose(out, want, rtol=0, atol=2e-6 * np.abs(want).max())
    without = mlfuse.compile(module, passes=[p for p in passes if p != PASS])(x)[0]
    np.testing.assert_array_equal(out, without)
