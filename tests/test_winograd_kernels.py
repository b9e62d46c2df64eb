"""Winograd F(2x2, 3x3) conv kernels (mlfuse/backend/winograd_kernels.py) against float64
numpy and against the direct GEMM kernel.

Tolerance: F(2x2, 3x3) sums 16 products of depth C per output, each of transformed
values (U's entries are sums of up to 9 weights over 4, V's of up to 4 inputs); its
error is bounded here by 4 k u (|A| @ |B|) with k = 9C (2x the direct kernel's bound in
test_gemm_kernels; measured errors are 0.2-0.5x the direct kernel's own). Outputs are
poisoned with NaN first, images end before an unreadable page, and the tasks run in
pieces (what threads get).
"""

from __future__ import annotations

import re

import llvmlite.ir as ir
import numpy as np
import pytest
from test_gemm_epilogue import kernel as epilogue_kernel
from test_gemm_kernels import aligned_copy, before_unreadable_page, im2col

import mlfuse
from mlfuse import pipelines
from mlfuse.api import module_text, run_pipeline
from mlfuse.backend.gemm_epilogue import Epilogue, Operand
from mlfuse.backend.gemm_kernels import (
    I64,
    PTR,
    Frame,
    GemmShape,
    Window,
    define_gemm_kernels,
    prepack_a,
    shape_blocking,
)
from mlfuse.backend.llvm_translate import host_features
from mlfuse.backend.winograd_kernels import segments, takes_winograd
from mlfuse.frontend.builder import GraphBuilder

AVX512 = "+avx512f,+avx2,+avx,+fma"
U = 2.0**-24


def kernel(shape: GemmShape, features: str = AVX512):
    """The shape's kernel (test_gemm_epilogue's), asserting its body is Winograd's exactly
    where its blocking says so."""
    module = ir.Module()
    buffers = 3 + (len(shape.epilogue.operands) if shape.epilogue else 0)
    ir.Function(module, ir.FunctionType(ir.VoidType(), [I64, I64] + [PTR] * buffers), name=shape.symbol)
    define_gemm_kernels(module, features)
    assert ("_winograd_" in str(module)) == shape_blocking(features, shape).winograd
    return epilogue_kernel(shape, features)


def run_in_pieces(shape: GemmShape, buffers: list) -> None:
    run = kernel(shape)
    cuts = sorted({0, 1, shape.tasks // 3, shape.tasks})
    for lo, hi in zip(cuts, cuts[1:]):
        run(lo, hi, *[x.ctypes.data for x in buffers])


def conv(window: Window, m: int, c: int, batch: int = 1, **kwargs) -> GemmShape:
    return GemmShape(batch, m, window.out_h * window.out_w, 9 * c, "f32", window, packed_a=True, **kwargs)


def test_which_convs_take_winograd():
    """3x3 at stride 1, constant weights, f32, even output sides, 8k output channels, 8 to
    64 input channels, rows too long for channel tiles; AVX-512 only."""
    assert takes_winograd(conv(Window(3, 3, 226, 226), 16, 32))
    assert takes_winograd(conv(Window(3, 3, 58, 58), 64, 64))
    assert takes_winograd(conv(Window(3, 3, 10, 34, border=(1, 1, 1, 1)), 8, 8))
    assert takes_winograd(conv(Window(3, 3, 30, 30), 128, 128))
    assert not takes_winograd(conv(Window(3, 3, 30, 30), 128, 129))  # too deep for V in cache
    assert not takes_winograd(conv(Window(3, 3, 58, 58), 64, 7))  # too shallow to pay
    assert not takes_winograd(conv(Window(3, 3, 58, 58), 60, 64))  # a short row panel
    assert not takes_winograd(conv(Window(3, 3, 57, 58), 64, 64))  # odd output rows
    assert not takes_winograd(conv(Window(3, 3, 16, 16), 64, 64))  # rows of 14: channel tiles
    assert not takes_winograd(conv(Window(3, 3, 58, 58, 2, 2), 64, 64))  # stride 2
    assert not takes_winograd(conv(Window(5, 5, 60, 60), 64, 64))
    assert not takes_winograd(GemmShape(1, 64, 56 * 56, 576, "f32", Window(3, 3, 58, 58)))  # weights not constant
    assert not takes_winograd(GemmShape(1, 64, 56 * 56, 576, "f64", Window(3, 3, 58, 58), packed_a=True))
    assert not shape_blocking("+avx2,+avx,+fma", conv(Window(3, 3, 58, 58), 64, 64)).winograd


def test_segments_cut_tile_rows_evenly_in_vectors():
    """Long rows of tiles: segments of up to 3 vectors along the row; rows of at most 16
    tiles: a vector per tile row, as many rows as divide the image up to 3."""
    def widths(tiles: int, rows: int = 1) -> list:
        return [(x0, [t for _, _, t in groups]) for x0, groups in segments(tiles, rows)]

    assert widths(112) == [(0, [16, 16, 16]), (48, [16, 16]), (80, [16, 16])]
    assert widths(28) == [(0, [16, 12])]
    assert widths(50) == [(0, [16, 16]), (32, [16, 2])]
    assert segments(14, 14) == [(0, ((0, 0, 14), (1, 0, 14)))]  # 28 x 28 outputs: units of two tile rows
    assert segments(12, 3) == [(0, ((0, 0, 12), (1, 0, 12), (2, 0, 12)))]
    assert segments(16, 5) == [(0, ((0, 0, 16),))]


@pytest.mark.parametrize("batch, m, c, window", [
    (1, 16, 8, Window(3, 3, 10, 34)),  # rows of 16 tiles: one segment, one vector
    (2, 24, 9, Window(3, 3, 12, 60)),  # 29 tiles: a partial vector; two images
    (1, 8, 64, Window(3, 3, 6, 102)),  # 50 tiles: segments of 32 and 18; the deepest V
    (1, 16, 12, Window(3, 3, 12, 30, border=(1, 1, 1, 1))),  # the interior of a padded image
    (1, 24, 16, Window(3, 3, 30, 30)),  # rows of 14 tiles: units of two tile rows
    (2, 8, 10, Window(3, 3, 8, 26)),  # rows of 12 tiles: units of three tile rows, two images
])
def test_winograd_conv_against_float64_and_the_direct_kernel(batch, m, c, window):
    rng = np.random.default_rng(batch * 1000 + m * c)
    n, k = window.out_h * window.out_w, 9 * c
    image = before_unreadable_page(rng.standard_normal((batch, c, window.hp, window.wp)).astype(np.float32))
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    shape = conv(window, m, c, batch)
    assert shape_blocking(AVX512, shape).winograd
    got = np.full((batch, m, n), np.nan, np.float32)
    run_in_pieces(shape, [aligned_copy(prepack_a(a, shape, AVX512)), image, got])
    top, left, bottom, right = window.border
    interior = image[:, :, top : window.hp - bottom, left : window.wp - right]
    patches = im2col(interior, Window(3, 3, *interior.shape[2:])).astype(np.float64)
    exact = np.matmul(a.astype(np.float64), patches)
    assert np.all(np.abs(got - exact) <= 4 * k * U * np.matmul(np.abs(a).astype(np.float64), np.abs(patches)))
    direct = GemmShape(batch, m, n, k, "f32", window)
    want = np.full_like(got, np.nan)
    kernel(direct)(0, direct.tasks, a.ctypes.data, image.ctypes.data, want.ctypes.data)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * np.abs(exact).max())


def test_winograd_takes_the_epilogue_a_framed_residual_and_a_framed_c():
    """bias + residual (read from a padded image's interior) + ReLU, written into the
    interior of the next conv's padded input (Frame): float64 numpy's within the
    tolerance above, the frame's border untouched (NaN)."""
    rng = np.random.default_rng(3)
    m, c, window = 16, 8, Window(3, 3, 10, 34)
    oh, ow = window.out_h, window.out_w
    image = before_unreadable_page(rng.standard_normal((1, c, window.hp, window.wp)).astype(np.float32))
    a = rng.standard_normal((1, m, 9 * c)).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    residual = rng.standard_normal((1, m, oh, ow)).astype(np.float32)
    images = np.full((1, m, oh + 2, ow + 2), np.nan, np.float32)
    images[:, :, 1:-1, 1:-1] = residual
    hp, wp = images.shape[-2:]
    zero = "k" + np.float32(0).tobytes().hex()
    relu = Epilogue((Operand(0, 0, 1, 0), Operand(wp + 1, m * hp * wp, hp * wp, 1, ow, wp)),
                    ("c", "i0", "add", "i1", "add", zero, "cmpugt", "c", "i0", "add", "i1", "add", zero, "sel"))
    shape = conv(window, m, c, epilogue=relu, frame=Frame(ow, hp, wp, 1, 1))
    assert GemmShape.from_symbol(shape.symbol) == shape and shape_blocking(AVX512, shape).winograd
    got = np.full((1, m, hp, wp), np.nan, np.float32)
    run_in_pieces(shape, [aligned_copy(prepack_a(a, shape, AVX512)), image, got, bias, images])
    product = np.matmul(a.astype(np.float64), im2col(image, window).astype(np.float64)).reshape(1, m, oh, ow)
    want = np.maximum(product + bias[None, :, None, None] + residual, 0)
    np.testing.assert_allclose(got[:, :, 1:-1, 1:-1], want, rtol=0, atol=2e-6 * np.abs(want).max())
    border = np.ones((hp, wp), bool)
    border[1:-1, 1:-1] = False
    assert np.isnan(got[:, :, border]).all()


def test_a_model_conv_runs_on_the_winograd_kernel():
    """End to end on an AVX-512 host: a 3x3 conv 16 -> 16 over 12 x 32 pixels with bias
    and ReLU compiles to a Winograd kernel (its GEMM symbol takes one), and gives float64
    numpy's conv within the tolerance above; outputs poisoned."""
    if not shape_blocking(host_features(), conv(Window(3, 3, 58, 58), 64, 64)).winograd:
        pytest.skip("the host has no AVX-512: no Winograd kernels")
    rng = np.random.default_rng(17)
    x = rng.standard_normal((1, 16, 12, 32)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(16).astype(np.float32)
    b = GraphBuilder()
    y = b.conv2d(b.input("x", x.shape, "f32"), b.constant(w, "f32"), [1, 1], [1] * 4, [1, 1], 1)
    b.output(b.relu(y + b.broadcast_to(b.constant(bias, "f32").reshape(1, 16, 1, 1), y.shape)))
    module = b.module()
    text = module_text(run_pipeline(module.clone(), pipelines.cpu_pipeline()))
    shapes = [GemmShape.from_symbol(s) for s in set(re.findall(r"mlfuse_gemm_[A-Za-z0-9_.]*", text))]
    assert any(s is not None and shape_blocking(host_features(), s).winograd for s in shapes)
    out = np.full((1, 16, 12, 32), np.nan, np.float32)
    mlfuse.compile(module)(x, out=[out])
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv64 = sum(np.einsum("oc,nchw->nohw", w[:, :, i, j].astype(np.float64), xp[:, :, i : i + 12, j : j + 32])
                 for i in range(3) for j in range(3))
    want = np.maximum(conv64 + bias[None, :, None, None], 0)
    np.testing.assert_allclose(out, want, rtol=0, atol=2e-6 * np.abs(want).max())


def test_non_finite_inputs_give_the_direct_convs_values():
    """NaN, infinities and values whose transform overflows (3e38) in the image: the
    segments that hold them fall back to the direct conv (a transform would spread them
    over whole 2 x 2 tiles, and turn an infinity times U's zeros into NaN), so every
    output is NaN, +-inf or finite exactly where the direct kernel's is (the fallback
    is its fma chain: the same bits there), the other segments within the tolerance."""
    rng = np.random.default_rng(23)
    m, c, window = 16, 8, Window(3, 3, 10, 66)  # rows of 32 tiles: segments of 32, two rows of them
    n = window.out_h * window.out_w
    image = rng.standard_normal((1, c, window.hp, window.wp)).astype(np.float32)
    image[0, 2, 3, 5], image[0, 5, 7, 40], image[0, 1, 1, 63] = np.nan, np.inf, -np.inf
    image[0, 0, 8, 20] = 3e38
    image = before_unreadable_page(image)
    a = rng.standard_normal((1, m, 9 * c)).astype(np.float32)
    shape = conv(window, m, c)
    got = np.full((1, m, n), np.nan, np.float32)
    run_in_pieces(shape, [aligned_copy(prepack_a(a, shape, AVX512)), image, got])
    direct = GemmShape(1, m, n, 9 * c, "f32", window)
    want = np.full_like(got, np.nan)
    kernel(direct)(0, direct.tasks, a.ctypes.data, image.ctypes.data, want.ctypes.data)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got) & (got > 0), np.isinf(want) & (want > 0))
    np.testing.assert_array_equal(np.isinf(got) & (got < 0), np.isinf(want) & (want < 0))
    assert np.isnan(want).any() and np.isinf(want).any()
    finite = np.isfinite(want)
    scale = np.abs(want[finite & (np.abs(want) < 1e30)]).max()
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-6, atol=2e-6 * scale)
