"""Depthwise conv kernels (mlfuse/backend/depthwise_kernels.py) against float64 numpy, and
whole depthwise convs through the CPU pipeline against its window nests (the same bits).

Tolerance: each output is one fma chain over k * k taps from zero, so its error against
float64 is at most k * k * u * sum |x w| (u the unit roundoff), the bound asserted.
Outputs are poisoned with NaN first; images end before an unreadable page (or start
right after one: the masked loads of the pads never touch memory outside the image);
the tasks run in pieces, as threads get them. Seeds are fixed per case.
"""

from __future__ import annotations

import ctypes
import mmap

import numpy as np
import pytest
from test_gemm_epilogue import kernel
from test_gemm_epilogue import programs as epilogue_programs
from test_gemm_kernels import before_unreadable_page

import mlfuse
from mlfuse import pipelines
from mlfuse.api import run_pipeline
from mlfuse.backend.depthwise_kernels import MAX_PIXELS, takes_depthwise
from mlfuse.backend.gemm_epilogue import Epilogue, Operand
from mlfuse.backend.gemm_kernels import Frame, GemmShape, Window, prepack_a, shape_blocking
from mlfuse.dialects import loop
from mlfuse.frontend.builder import GraphBuilder

AVX512 = "+avx512f,+avx2,+avx,+fma"
AVX2 = "+avx2,+avx,+fma"
NUMPY = {"f32": np.float32, "f64": np.float64}
_GUARDED: list = []  # the mappings of after_unreadable_page, alive for the session


def after_unreadable_page(x: np.ndarray) -> np.ndarray:
    """A copy of x that starts where an unreadable page ends: a read before its first element faults."""
    page = mmap.PAGESIZE
    region = mmap.mmap(-1, page + -(-x.nbytes // page) * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    assert ctypes.CDLL(None).mprotect(ctypes.c_void_p(base), ctypes.c_size_t(page), 0) == 0  # PROT_NONE
    _GUARDED.append(region)
    out = np.frombuffer(region, dtype=x.dtype, count=x.size, offset=page).reshape(x.shape)
    out[...] = x
    return out


def depthwise(x: np.ndarray, w: np.ndarray, pads: tuple[int, int, int, int], stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The conv of each channel of x [C, h, w] with its taps w [C, kh, kw] over x padded by
    zeros (top, left, bottom, right) at `stride`, in float64, and the sums of |x w| (the
    error bound's)."""
    top, left, bottom, right = pads
    kh, kw = w.shape[1:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::stride, ::stride]
    wt = w.astype(np.float64)
    return np.einsum("chwij,cij->chw", windows, wt), np.einsum("chwij,cij->chw", np.abs(windows), np.abs(wt))


def dw_shape(channels: int, h: int, w: int, k: int, pads: tuple[int, int, int, int], dtype: str = "f32",
             stride: int = 1, **kwargs) -> GemmShape:
    window = Window(k, k, h, w, stride, stride, pads=pads)
    return GemmShape(channels, 1, window.out_h * window.out_w, k * k, dtype, window, **kwargs)


def test_which_products_take_the_depthwise_kernel():
    """One image per batch under a padded window at stride 1 or 2, rows the output's
    length (at stride 2: the length of the image's even columns), at most MAX_PIXELS
    positions; the others are not depthwise convs (or too large)."""
    assert takes_depthwise(dw_shape(960, 7, 7, 3, (1, 1, 1, 1), packed_a=True))
    assert takes_depthwise(dw_shape(8, 32, 32, 3, (1, 1, 1, 1)))  # 1024 positions
    assert takes_depthwise(dw_shape(8, 12, 9, 5, (0, 2, 4, 2), "f64"))
    assert takes_depthwise(dw_shape(8, 7, 7, 2, (1, 0, 0, 1)))  # an even window, pads on one side
    assert not takes_depthwise(dw_shape(8, 33, 33, 3, (1, 1, 1, 1)))  # 1089 positions
    assert not takes_depthwise(dw_shape(8, 7, 7, 3, (0, 0, 0, 0)))  # no pads: rows shrink
    assert not takes_depthwise(dw_shape(8, 7, 9, 3, (1, 0, 1, 0)))  # rows of 7 over rows of 9
    assert takes_depthwise(dw_shape(8, 14, 14, 3, (1, 1, 1, 1), stride=2))  # 7 x 7 from 14 x 14
    assert takes_depthwise(dw_shape(8, 7, 7, 3, (1, 1, 1, 1), stride=2))  # 4 x 4 from 7 x 7
    assert takes_depthwise(dw_shape(8, 14, 14, 3, (0, 0, 1, 1), stride=2))  # TF's "SAME": pads after
    assert takes_depthwise(dw_shape(8, 64, 64, 3, (1, 1, 1, 1), stride=2))  # 1024 positions
    assert not takes_depthwise(dw_shape(8, 66, 66, 3, (1, 1, 1, 1), stride=2))  # 1089 positions
    assert not takes_depthwise(dw_shape(8, 14, 14, 3, (1, 0, 1, 0), stride=2))  # rows of 6 over 7 even columns
    assert not takes_depthwise(dw_shape(8, 15, 15, 3, (1, 1, 1, 1), stride=3))
    assert not takes_depthwise(GemmShape(8, 1, 28, 9, "f32", Window(3, 3, 7, 7, 1, 2, pads=(1, 1, 1, 1))))  # strided along rows only
    assert not takes_depthwise(GemmShape(1, 8, 49, 18, "f32", Window(3, 3, 7, 7, pads=(1, 1, 1, 1))))  # two channels, 8 outputs
    assert MAX_PIXELS == 1024
    blocking = shape_blocking(AVX512, dw_shape(8, 7, 7, 3, (1, 1, 1, 1)))
    assert blocking.depthwise and blocking.vw == 16
    assert shape_blocking(AVX512, dw_shape(8, 7, 7, 3, (1, 1, 1, 1), "f64")).vw == 8
    assert dw_shape(960, 7, 7, 3, (1, 1, 1, 1)).tasks == 960  # a channel each


def run_in_pieces(shape: GemmShape, features: str, buffers: list) -> None:
    run = kernel(shape, features)
    cuts = sorted({0, 1, shape.tasks // 3, shape.tasks})
    for lo, hi in zip(cuts, cuts[1:]):
        run(lo, hi, *[b.ctypes.data for b in buffers])


CASES = [  # channels, h, w, k, pads, dtype, stride
    (5, 7, 7, 3, (1, 1, 1, 1), "f32"),
    (3, 14, 14, 3, (1, 1, 1, 1), "f32"),
    (4, 14, 14, 5, (2, 2, 2, 2), "f32"),
    (3, 16, 16, 3, (1, 1, 1, 1), "f32"),  # 256 positions: whole vectors
    (2, 28, 28, 3, (1, 1, 1, 1), "f32"),
    (2, 5, 3, 5, (2, 2, 2, 2), "f32"),  # taps wider than the image
    (3, 12, 9, 5, (0, 2, 4, 2), "f32"),  # all the rows' pads below
    (2, 7, 7, 2, (1, 0, 0, 1), "f32"),
    (2, 1, 1, 3, (1, 1, 1, 1), "f32"),  # one position
    (3, 9, 11, 3, (1, 1, 1, 1), "f64"),
    (2, 6, 6, 7, (3, 3, 3, 3), "f64"),
    (5, 14, 14, 3, (1, 1, 1, 1), "f32", 2),  # 7 x 7 from 14 x 14
    (4, 14, 14, 5, (2, 2, 2, 2), "f32", 2),
    (3, 7, 7, 3, (1, 1, 1, 1), "f32", 2),  # odd: the odd phases a row and a column short
    (3, 14, 12, 3, (0, 0, 1, 1), "f32", 2),  # TF's "SAME": the pads after
    (2, 56, 56, 3, (1, 1, 1, 1), "f32", 2),  # rows of 56: two pieces of 32 (AVX-512), four of 16
    (2, 3, 3, 3, (1, 1, 1, 1), "f32", 2),
    (3, 10, 13, 5, (2, 2, 2, 2), "f64", 2),
]


@pytest.mark.parametrize("features", [AVX512, AVX2])
@pytest.mark.parametrize("case", CASES)
def test_kernel_matches_numpy(case, features):
    """Each channel's plane against float64 numpy within k * k * u * sum |x w|; the images
    end before an unreadable page, then start after one; the prepacked taps are the
    taps as they are."""
    channels, h, w, k, pads, dtype, *strided = case
    stride = strided[0] if strided else 1
    shape = dw_shape(channels, h, w, k, pads, dtype, stride, packed_a=True)
    assert takes_depthwise(shape)
    t = NUMPY[dtype]
    rng = np.random.default_rng(channels * 1000 + h * 37 + w * 7 + k)
    x = rng.standard_normal((channels, h, w)).astype(t)
    taps = rng.standard_normal((channels, k, k)).astype(t)
    a = prepack_a(taps.reshape(channels, 1, k * k), shape, features)
    np.testing.assert_array_equal(a, taps.reshape(channels, k * k))
    want, size = depthwise(x, taps, pads, stride)
    bound = k * k * np.finfo(t).eps / 2 * size + np.finfo(t).tiny
    for place in (before_unreadable_page, after_unreadable_page):
        out = np.full((channels, 1, shape.n), np.nan, t)
        run_in_pieces(shape, features, [a, place(x.reshape(channels, 1, h, w)), out])
        got = out.reshape(want.shape)
        assert np.all(np.abs(got - want) <= bound), (place.__name__, np.abs(got - want).max())


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("h, w", [(9, 7), (16, 16)])  # 16 x 16: its middle rows through a loop (f32: 2 steps)
def test_kernel_applies_the_epilogue_and_writes_frames(dtype, h, w):
    """A bias per channel, a residual along the positions and ReLU (cmpugt + select: NaN
    passes), into C's plane and into the interiors of padded images (c_frame: the border
    keeps its poison)."""
    program = epilogue_programs(dtype)["bias_residual_relu"][0]
    channels, k, pads = 6, 3, (1, 1, 1, 1)
    t = NUMPY[dtype]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((channels, h, w)).astype(t)
    x[2, 4, 3] = np.nan
    taps = rng.standard_normal((channels, k * k)).astype(t)
    bias = rng.standard_normal(channels).astype(t)
    residual = rng.standard_normal((channels, h * w)).astype(t)
    operands = (Operand(0, 1, 0, 0), Operand(0, h * w, 0, 1))
    epilogue = Epilogue(operands, tuple(program))
    conv, _ = depthwise(x, taps.reshape(channels, k, k), pads)
    total = conv.reshape(channels, h * w) + bias[:, None] + residual
    want = np.where((total > 0) | np.isnan(total), total, 0)
    plain = dw_shape(channels, h, w, k, pads, dtype, epilogue=epilogue)
    out = np.full((channels, 1, h * w), np.nan, t)
    run_in_pieces(plain, AVX512, [taps, before_unreadable_page(x.reshape(channels, 1, h, w)), out, bias, residual])
    np.testing.assert_allclose(out.reshape(channels, -1), want, rtol=1e-5 if dtype == "f32" else 1e-13, atol=1e-5)
    assert np.isnan(out[2, 0, 4 * w + 3]) and np.count_nonzero(np.isnan(out)) == np.count_nonzero(np.isnan(want))
    framed = dw_shape(channels, h, w, k, pads, dtype, epilogue=epilogue, frame=Frame(w, h + 2, w + 4, 1, 2))
    assert takes_depthwise(framed)
    images = np.full((channels, 1, h + 2, w + 4), np.nan, t)
    run_in_pieces(framed, AVX512, [taps, x.reshape(channels, 1, h, w).copy(), images, bias, residual])
    np.testing.assert_array_equal(images[:, 0, 1 : h + 1, 2 : w + 2], out.reshape(channels, h, w))
    border = np.ones(images.shape[2:], bool)
    border[1 : h + 1, 2 : w + 2] = False
    assert np.all(np.isnan(images[:, 0][:, border]))


def depthwise_block(channels: int, h: int, w: int, k: int, pads: list[int], x: np.ndarray, wt: np.ndarray, stride: int = 1):
    """A depthwise conv + bias + ReLU6 (MobileNet's), its weights constant."""
    rng = np.random.default_rng(channels + h)
    bias = rng.standard_normal(channels).astype(np.float32)
    b = GraphBuilder()
    y = b.conv2d(b.input("x", x.shape, "f32"), b.constant(wt, "f32"), [stride, stride], pads, [1, 1], channels)
    y = y + b.broadcast_to(b.constant(bias, "f32").reshape(1, channels, 1, 1), y.shape)
    b.output(b.minimum(b.maximum(y, b.constant(np.float32(0), "f32")), b.constant(np.float32(6), "f32")))
    return b.module(), bias


def depthwise_products(module) -> int:
    """How many depthwise products (loop.gemm {window_pads}) the CPU pipeline makes of `module`."""
    steps = pipelines.cpu_pipeline()
    lowered = run_pipeline(module.clone(), steps[: pipelines.step_index(steps, "convert-graph-to-loop") + 1])
    return sum(1 for op in lowered.walk() if isinstance(op, loop.GemmOp) and op.window_pads is not None)


@pytest.mark.parametrize("channels, h, w, k, pads, stride", [
    (24, 7, 7, 3, [1, 1, 1, 1], 1),
    (16, 14, 14, 5, [2, 2, 2, 2], 1),
    (8, 16, 16, 3, [1, 1, 1, 1], 1),
    (8, 10, 12, 3, [0, 1, 2, 1], 1),
    (8, 28, 28, 3, [1, 1, 1, 1], 1),
    (8, 33, 33, 3, [1, 1, 1, 1], 1),  # too many positions: the window nest, compared with itself
    (24, 14, 14, 3, [1, 1, 1, 1], 2),
    (16, 14, 14, 5, [2, 2, 2, 2], 2),
    (8, 9, 12, 3, [0, 0, 1, 1], 2),  # TF's "SAME", an odd height
    (8, 56, 56, 3, [1, 1, 1, 1], 2),
    (8, 66, 66, 3, [1, 1, 1, 1], 2),  # too many positions
])
def test_pipeline_takes_the_kernel_with_the_nests_bits(channels, h, w, k, pads, stride):
    """Through the CPU pipeline: one depthwise product where the kernel takes the conv, the
    same bits as the window nests (depthwise=False), NaN, infinities and -0 in the input
    and an infinite tap (0 * inf in the pads: NaN, as numpy's zero padding gives),
    within fp32 rounding of float64 numpy elsewhere."""
    rng = np.random.default_rng(channels * 100 + h)
    x = rng.standard_normal((1, channels, h, w)).astype(np.float32)
    x[0, 1, 2, 3], x[0, 2, 0, 0], x[0, 3, h - 1, w - 1], x[0, 4, 1, 1] = np.nan, np.inf, -np.inf, -0.0
    wt = rng.standard_normal((channels, 1, k, k)).astype(np.float32)
    wt[5, 0, 0, 0] = np.inf
    module, bias = depthwise_block(channels, h, w, k, pads, x, wt, stride)
    oh, ow = (h + pads[0] + pads[2] - k) // stride + 1, (w + pads[1] + pads[3] - k) // stride + 1
    assert depthwise_products(module) == (1 if oh * ow <= MAX_PIXELS else 0)
    out = np.full((1, channels, oh, ow), np.nan, np.float32)
    mlfuse.compile(module)(x, out=[out])
    (nests,) = mlfuse.compile(module, passes=pipelines.cpu_pipeline(depthwise=False))(x)
    np.testing.assert_array_equal(out, nests)
    conv, _ = depthwise(x[0], wt[:, 0], tuple(pads), stride)
    with np.errstate(invalid="ignore"):
        want = np.clip(conv + bias[:, None, None], 0, 6)
    np.testing.assert_allclose(out[0], want, rtol=0, atol=1e-5 * 6)


@pytest.mark.parametrize("seed", range(8))
def test_random_same_convs_match_the_nests(seed):
    """Random depthwise convs at stride 1 (even seeds) and 2 (odd seeds) whose pads make
    them "same" along the rows (odd and even sizes, windows of 2 to 7, the pads split at
    random: what the kernels take when the plane is small): the same bits as the window
    nests and within fp32 rounding of float64 numpy (atol 1e-5 of ReLU6's range). Seeded
    per case (the seed is the case's id)."""
    rng = np.random.default_rng(20261207 + seed)
    stride, k, channels = 1 + seed % 2, int(rng.integers(2, 8)), int(rng.integers(2, 12))  # one channel: a plain conv
    h, w = int(rng.integers(k, 40)), int(rng.integers(k, 40))
    across = max(0, (-(-w // stride) - 1) * stride + k - w)  # the pads that keep ceil(w / stride) columns
    down = max(0, (-(-h // stride) - 1) * stride + k - h) + int(rng.integers(0, 2))
    left, top = int(rng.integers(0, across + 1)), int(rng.integers(0, down + 1))
    pads = [top, left, down - top, across - left]
    oh, ow = (h + down - k) // stride + 1, (w + across - k) // stride + 1
    x = rng.standard_normal((1, channels, h, w)).astype(np.float32)
    wt = rng.standard_normal((channels, 1, k, k)).astype(np.float32)
    module, bias = depthwise_block(channels, h, w, k, pads, x, wt, stride)
    assert depthwise_products(module) == (1 if any(pads) and oh * ow <= MAX_PIXELS else 0)
    out = np.full((1, channels, oh, ow), np.nan, np.float32)
    mlfuse.compile(module)(x, out=[out])
    (nests,) = mlfuse.compile(module, passes=pipelines.cpu_pipeline(depthwise=False))(x)
    np.testing.assert_array_equal(out, nests)
    conv, _ = depthwise(x[0], wt[:, 0], tuple(pads), stride)
    np.testing.assert_allclose(out[0], np.clip(conv + bias[:, None, None], 0, 6), rtol=0, atol=1e-5 * 6)
