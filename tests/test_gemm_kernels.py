"""Generated GEMM kernels (mlfuse/backend/gemm_kernels.py) against float64 numpy.

Tolerance: each C element is one fma chain in k order, so |C - exact| <= k * u *
(|A| @ |B|) with u = 2^-24 (the standard dot-product bound); we allow 2x that.
Outputs are poisoned with NaN first, so a tile the kernel skips fails the test.
"""

from __future__ import annotations

import ctypes
import mmap
from dataclasses import replace

import llvmlite.ir as ir
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mlfuse
from mlfuse import pipelines
from mlfuse.api import aligned_empty, module_text, run_pipeline
from mlfuse.backend import cpu
from mlfuse.backend.gemm_kernels import (
    CHANNEL_TILE_ROW_WIDTHS,
    I64,
    MAX_DEPTH_BLOCK,
    PTR,
    ROW_SLICE,
    TASK_COLUMNS,
    Blocking,
    Frame,
    GemmShape,
    Window,
    blocking_for,
    channel_tile_rows,
    channel_tile_widths,
    define_gemm_kernels,
    depth_block,
    prepack_a,
    prepack_b,
    shape_blocking,
)
from mlfuse.frontend.builder import GraphBuilder

UNIT_ROUNDOFF = {"f32": 2.0**-24, "f64": 2.0**-53}
NUMPY = {"f32": np.float32, "f64": np.float64}
FEATURES = {"avx512": "+avx512f,+avx2,+avx,+fma", "avx2": "+avx2,+avx,+fma", "sse": "+sse4.2"}
_JITS: list = []  # compiled kernels stay alive for the session (like mlfuse.compile's cache)


def kernel_module(shape: GemmShape, features: str) -> ir.Module:
    """A module declaring the kernel of `shape`, its body written for `features`."""
    module = ir.Module()
    ir.Function(module, ir.FunctionType(ir.VoidType(), [I64, I64, PTR, PTR, PTR]), name=shape.symbol)
    assert define_gemm_kernels(module, features) == [shape.symbol]
    return module


def kernel(shape: GemmShape, features: str):
    module = kernel_module(shape, features)
    module.triple = cpu.target_machine().triple
    jit = cpu.JitModule(cpu.compile_object(str(module)))
    _JITS.append(jit)
    signature = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    return signature(jit.address(shape.symbol))


def check(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    exact = np.matmul(a.astype(np.longdouble), b.astype(np.longdouble))
    u = UNIT_ROUNDOFF["f64" if c.dtype == np.float64 else "f32"]
    bound = 2 * a.shape[-1] * u * np.matmul(np.abs(a).astype(np.longdouble), np.abs(b).astype(np.longdouble))
    assert not np.isnan(c).any()
    assert np.all(np.abs(c - exact) <= bound + 1e-300)


def operands(rng, shape: GemmShape):
    t = NUMPY[shape.dtype]
    a = rng.standard_normal((shape.batch, shape.m, shape.k)).astype(t)
    b = rng.standard_normal((shape.batch, shape.k, shape.n)).astype(t)
    c = np.full((shape.batch, shape.m, shape.n), np.nan, t)
    return a, b, c


def test_blocking_follows_the_vector_registers():
    assert blocking_for(FEATURES["avx512"]) == Blocking(vw=16, mr=8, nr_vecs=3, kc=MAX_DEPTH_BLOCK, prefetch_tiles=True, wraps_in_place=True, narrow_by_columns=True)
    assert blocking_for(FEATURES["avx2"]) == Blocking(vw=8, mr=6, nr_vecs=2, kc=256)
    assert blocking_for("-avx512f," + FEATURES["sse"]).nr == 8
    narrow, conv, wide = GemmShape(1, 32, 4096, 288), GemmShape(1, 512, 49, 4608, window=Window(3, 3, 9, 9)), GemmShape(1, 768, 768, 768)
    assert blocking_for(FEATURES["avx2"], narrow) == blocking_for(FEATURES["avx2"], conv) == Blocking(vw=8, mr=4, nr_vecs=3, kc=256)
    assert blocking_for(FEATURES["avx2"], wide) == blocking_for(FEATURES["avx2"])
    assert blocking_for(FEATURES["avx512"], narrow) == replace(blocking_for(FEATURES["avx512"]), kc=288)
    assert [depth_block(k) for k in (1, 288, 1024, 1025, 2304, 3072, 4608)] == [1, 288, 1024, 513, 768, 1024, 922]
    for features in FEATURES.values():
        for shape in (None, narrow, conv, wide):
            blk = blocking_for(features, shape)
            assert TASK_COLUMNS % blk.nr == 0 and ROW_SLICE % blk.mr == 0


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_micro_kernels_prefetch_the_next_tiles_on_avx512_only(isa):
    """The prefetches of prefetch_next_tiles (one per depth step, for prepacked A and
    B) are in AVX-512 micro-kernels only: on Zen 3's AVX2 they cost time (see
    NEXT_PANEL_LOCALITY). The element type keeps the blocking's choice (f64)."""
    for dtype in ("f32", "f64"):
        shape = GemmShape(1, 64, 96, 64, dtype, packed_a=True, packed_b=True)
        module = ir.Module()
        ir.Function(module, ir.FunctionType(ir.VoidType(), [I64, I64, PTR, PTR, PTR]), name=shape.symbol)
        define_gemm_kernels(module, FEATURES[isa])
        micros = [fn for fn in module.functions if "_micro" in fn.name]
        assert micros
        prefetches = [str(fn).count("@\"llvm.prefetch.p0\"") for fn in micros]
        assert all(prefetches) if isa == "avx512" else not any(prefetches)


def test_helpers_stay_out_of_line():
    """Micro-kernels and packing loops are noinline and optsize (_Kernels.function: the
    compile time of inlined and unrolled copies), the task function is neither."""
    shape = GemmShape(1, 50, 100, 300, window=None)
    module = ir.Module()
    ir.Function(module, ir.FunctionType(ir.VoidType(), [I64, I64, PTR, PTR, PTR]), name=shape.symbol)
    define_gemm_kernels(module, FEATURES["avx512"])
    helpers = [fn for fn in module.functions if "_micro" in fn.name or "_pack" in fn.name]
    assert len(helpers) >= 3  # a micro-kernel per row tail and panel width, a packing loop
    assert all({"noinline", "optsize"} <= set(fn.attributes) for fn in helpers)
    task = module.get_global(shape.symbol)
    assert not {"noinline", "optsize"} & set(task.attributes)


def test_symbol_round_trip():
    shape = GemmShape(12, 128, 64, 128)
    assert GemmShape.from_symbol(shape.symbol) == shape
    assert GemmShape.from_symbol(GemmShape(1, 2, 3, 4, "f64").symbol) == GemmShape(1, 2, 3, 4, "f64")
    assert GemmShape.from_symbol(shape.symbol + "_micro8x48") is None
    assert GemmShape.from_symbol("mlfuse_sgemm") is None
    for packed in (GemmShape(2, 3, 4, 5, packed_a=True), GemmShape(2, 3, 4, 5, packed_b=True, packed_a=True)):
        assert GemmShape.from_symbol(packed.symbol) == packed
    framed = GemmShape(1, 64, 3136, 576, window=Window(3, 3, 58, 58, 2, 2), packed_a=True, frame=Frame(56, 58, 58, 1, 1))
    assert framed.symbol == "mlfuse_gemm_f32_1x64x3136x576_w3x3x58x58s2x2_c56x58x58x1x1_pa"
    assert GemmShape.from_symbol(framed.symbol) == framed
    part = replace(framed, frame=Frame(56, 58, 58, 1, 1, channel=64))
    assert part.symbol == "mlfuse_gemm_f32_1x64x3136x576_w3x3x58x58s2x2_c56x58x58x1x1x64_pa"
    assert GemmShape.from_symbol(part.symbol) == part
    assert shape.tasks == 12 * 2


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("isa", sorted(FEATURES))
@pytest.mark.parametrize(
    "dims",
    [(1, 1, 1, 1), (1, 8, 48, 256), (2, 13, 50, 17), (1, 20, 97, 300), (3, 9, 7, 513), (1, 64, 144, 40),
     (1, 131, 49, 70), (2, 77, 20, 33)],
)
def test_kernel_matches_numpy(isa, dims, dtype):
    shape = GemmShape(*dims, dtype)
    a, b, c = operands(np.random.default_rng(sum(dims)), shape)
    kernel(shape, FEATURES[isa])(0, shape.tasks, a.ctypes.data, b.ctypes.data, c.ctypes.data)
    check(c, a, b)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_empty_sum_writes_zeros(dtype):
    """k = 0: every element of C is the empty sum, 0 (the kernel had run no depth block
    and left C as it was); outputs poisoned."""
    shape = GemmShape(2, 5, 37, 0, dtype)
    a, b, c = operands(np.random.default_rng(0), shape)
    kernel(shape, FEATURES["avx2"])(0, shape.tasks, a.ctypes.data, b.ctypes.data, c.ctypes.data)
    np.testing.assert_array_equal(c, np.zeros_like(c))


@pytest.mark.parametrize(
    "isa, dims, dtype, packing",
    # both operands laid out, for each ISA and element type, over partial panels, several
    # depth blocks and batches, and m <= MR; each operand alone once; AVX2's wide tiles once
    [(isa, dims, dtype, (True, True)) for isa in sorted(FEATURES) for dtype in ("f32", "f64")
     for dims in ((3, 13, 49, 520), (2, 5, 64, 16))]
    + [("avx2", (1, 20, 37, 300), "f32", (False, True)), ("avx2", (1, 20, 37, 300), "f32", (True, False)),
       ("avx2", (1, 100, 37, 300), "f32", (True, True))],  # AVX2's 6 x 16 tiles (4 x 24 below NARROW_ROWS)
)
def test_prepacked_operands_give_the_same_bits(isa, dims, dtype, packing):
    """Constants laid out at compile time as the kernel reads them (prepack_a: row panels;
    prepack_b: column panels, no packing at run time) give the plain kernel's result bit
    for bit: the same fma chains. The shapes cover partial panels, several depth blocks,
    batches and m <= MR (which the plain kernel runs unpacked)."""
    packed_a, packed_b = packing
    plain = GemmShape(*dims, dtype=dtype)
    packed = GemmShape(*dims, dtype=dtype, packed_b=packed_b, packed_a=packed_a)
    a, b, want = operands(np.random.default_rng(sum(dims)), plain)
    got = np.full_like(want, np.nan)
    aa = aligned_copy(prepack_a(a, packed, FEATURES[isa]) if packed_a else a)  # as the loader binds constants
    bb = aligned_copy(prepack_b(b, packed, FEATURES[isa]) if packed_b else b)
    kernel(plain, FEATURES[isa])(0, plain.tasks, a.ctypes.data, b.ctypes.data, want.ctypes.data)
    kernel(packed, FEATURES[isa])(0, packed.tasks, aa.ctypes.data, bb.ctypes.data, got.ctypes.data)
    check(want, a, b)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape, packs_b", [
    (GemmShape(1, 64, 300, 520, packed_a=True), False),  # a 1x1 conv: W (row panels) @ x, x read in place
    (GemmShape(1, 5, 300, 520), False),  # at most MR rows: each element of B is used once
    (GemmShape(1, 64, 300, 520), True),  # two activations: B is packed
    (GemmShape(1, 64, 36, 63, window=Window(3, 3, 8, 8), packed_a=True), True),  # rows of 6: the packing reads the patches
    # (7 input channels: a Winograd kernel takes 8 or more)
    (GemmShape(1, 64, 196, 72, window=Window(3, 3, 16, 16)), False),  # rows of 14: read in place
])
def test_b_is_packed_only_where_the_copy_pays(shape, packs_b):
    """Which kernels pack B at run time (see _Kernels.unpacked). Kernels that read B in
    place call `_direct` micro-kernels over B's rows, n apart (the bits are the packed
    kernel's: test_prepacked_operands_give_the_same_bits)."""
    text = str(kernel_module(shape, FEATURES["avx512"]))
    assert (f'define internal void @"{shape.symbol}_pack48"' in text) == packs_b
    reads_b = "_wrap" if shape.window is not None else "_direct"
    assert (f'@"{shape.symbol}_micro' in text) and ((reads_b in text) != packs_b)


@pytest.mark.parametrize("isa, window, in_row, wrapping", [
    ("avx512", Window(3, 3, 58, 58), True, True),  # rows of 56: some panels of 48 lie in one row, the others wrap
    ("avx512", Window(3, 3, 16, 16), False, True),  # rows of 14: every panel wraps, up to 3 rows a vector
    ("avx512", Window(3, 3, 8, 8), False, False),  # rows of 6: a vector's 16 lanes span up to 4 rows
    ("avx512", Window(3, 3, 114, 114, 2, 2), False, False),  # strided: the panel's columns are not contiguous
    ("avx2", Window(3, 3, 58, 58), True, False),  # AVX2 packs the panels that wrap
])
def test_window_panels_are_read_in_place(isa, window, in_row, wrapping):
    """A window's panels within one output row are read from the image by `_window`
    micro-kernels (at the table's row offsets), on AVX-512 those that wrap onto the
    next rows by `_wrap` ones (WRAPPED_ROWS_MIN_WIDTH), the others packed
    (READ_WINDOW_IN_PLACE; the bits: test_window_reads_the_patches_of_an_image)."""
    shape = GemmShape(1, 16, window.out_h * window.out_w, 2 * window.kh * window.kw, window=window)
    text = str(kernel_module(shape, FEATURES[isa]))
    blk = shape_blocking(FEATURES[isa], shape)
    micro = f'define internal void @"{shape.symbol}_micro{blk.mr}x{blk.nr}'
    assert (f'define internal void @"{shape.symbol}_pack{blk.nr}"' in text) != wrapping
    assert (f'{micro}_window"' in text) == in_row
    assert (f'{micro}_wrap"' in text) == wrapping


@pytest.mark.parametrize("isa", sorted(FEATURES))
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("batch, m, c, window, packed_a, frame", [
    (1, 20, 3, Window(3, 3, 58, 58), False, Frame(56, 58, 58, 1, 1)),  # rows of 56: vectors cross row ends
    (2, 9, 2, Window(3, 3, 16, 16), True, Frame(14, 17, 18, 2, 3)),  # rows of 14 (channel tiles on AVX-512)
    (1, 33, 2, Window(3, 3, 9, 9), True, Frame(7, 9, 9, 1, 1)),  # 7 x 7: tiles of two rows, a vector over three rows
    (1, 8, 4, None, False, Frame(5, 7, 7, 1, 1)),  # a plain product (a 1x1 conv) into rows of 5
    (1, 12, 3, Window(3, 3, 18, 18), True, Frame(16, 18, 18, 1, 1, channel=5)),  # images 5-16 of a concat's 20
])
def test_a_frame_writes_the_interior_of_images(isa, dtype, batch, m, c, window, packed_a, frame):
    """With a frame the kernel writes C's rows into the interiors of images: the bits of
    the kernel without one, the border (poisoned) never written, for any split of the
    tasks; with a channel, into images channel.. of a concat of 20 (the others untouched)."""
    t = NUMPY[dtype]
    rng = np.random.default_rng(m * c + batch)
    if window is not None:
        k, n = c * window.kh * window.kw, window.out_h * window.out_w
        b = before_unreadable_page(rng.standard_normal((batch, c, window.hp, window.wp)).astype(t))
    else:
        k, n = c, frame.ow * 4
        b = rng.standard_normal((batch, k, n)).astype(t)
    a = rng.standard_normal((batch, m, k)).astype(t)
    plain = GemmShape(batch, m, n, k, dtype, window, packed_a=packed_a)
    framed = replace(plain, frame=frame)
    a_in = aligned_copy(prepack_a(a, plain, FEATURES[isa])) if packed_a else a
    want = np.full((batch, m, n), np.nan, t)
    kernel(plain, FEATURES[isa])(0, plain.tasks, a_in.ctypes.data, b.ctypes.data, want.ctypes.data)
    images = np.full((batch, 20 if frame.channel else m, frame.hp, frame.wp), np.inf, t)
    run = kernel(framed, FEATURES[isa])
    for lo, hi in zip([0, framed.tasks // 3], [framed.tasks // 3, framed.tasks]):
        run(lo, hi, a_in.ctypes.data, b.ctypes.data, images.ctypes.data)
    oh = n // frame.ow
    part = (slice(None), slice(frame.channel, frame.channel + m), slice(frame.top, frame.top + oh),
            slice(frame.left, frame.left + frame.ow))
    np.testing.assert_array_equal(images[part].reshape(batch, m, n), want)
    untouched = np.ones(images.shape, bool)
    untouched[part] = False
    assert np.all(images[untouched] == np.inf)


@pytest.mark.parametrize("isa", sorted(FEATURES))
@pytest.mark.parametrize("kh, stride, size, packed_a", [
    (1, 2, 30, True),  # a downsample: 1x1 at stride 2 onto 15 x 15 (channel tiles on AVX-512)
    (1, 2, 56, False),  # ... onto 28 x 28, the row kernel
    (3, 1, 20, True),  # a 3x3 window over the interior of a bigger image
])
def test_a_window_over_the_interior_of_images(isa, kh, stride, size, packed_a):
    """A window over the interiors of images (Window.border: a downsample reading the next
    conv's padded input) gives the bits of the window over the interiors copied out;
    the border holds NaN, which no patch may read."""
    rng = np.random.default_rng(size + kh)
    m, c, border = 19, 3, (1, 2, 2, 1)
    interior = rng.standard_normal((1, c, size, size)).astype(np.float32)
    images = np.full((1, c, size + 3, size + 3), np.nan, np.float32)
    images[:, :, 1 : 1 + size, 2 : 2 + size] = interior
    plain_window = Window(kh, kh, size, size, stride, stride)
    window = Window(kh, kh, size + 3, size + 3, stride, stride, border)
    assert (window.out_h, window.out_w) == (plain_window.out_h, plain_window.out_w)
    k, n = c * kh * kh, window.out_h * window.out_w
    plain = GemmShape(1, m, n, k, window=plain_window, packed_a=packed_a)
    bordered = GemmShape(1, m, n, k, window=window, packed_a=packed_a)
    assert GemmShape.from_symbol(bordered.symbol) == bordered
    a = rng.standard_normal((1, m, k)).astype(np.float32)
    a_in = aligned_copy(prepack_a(a, plain, FEATURES[isa])) if packed_a else a
    want, got = np.full((1, m, n), np.nan, np.float32), np.full((1, m, n), np.nan, np.float32)
    kernel(plain, FEATURES[isa])(0, plain.tasks, a_in.ctypes.data, interior.ctypes.data, want.ctypes.data)
    kernel(bordered, FEATURES[isa])(0, bordered.tasks, a_in.ctypes.data, images.ctypes.data, got.ctypes.data)
    np.testing.assert_array_equal(got, want)


def aligned_copy(x: np.ndarray) -> np.ndarray:
    out = aligned_empty(x.shape, x.dtype)
    out[...] = x
    return out


def test_tall_narrow_products_slice_rows():
    """Too few column slices for a team: rows are sliced too, in multiples of every MR,
    and the tasks cover every row exactly once (the last slice takes the remainder)."""
    assert GemmShape(12, 128, 64, 128).row_tasks == 1  # batches and columns give enough tasks
    shape = GemmShape(1, 512, 196, 4608)  # w @ patches of a 512-channel 14x14 conv
    assert (shape.column_tasks, shape.row_tasks, shape.tasks) == (5, 4, 20)
    assert shape.slice_rows % 24 == 0 and shape.slice_rows * (shape.row_tasks - 1) < shape.m
    shape = GemmShape(1, 1280, 49, 320, packed_a=True)  # a 1x1 conv at 7x7: more row slices
    assert (shape.column_tasks, shape.slice_rows, shape.row_tasks) == (2, 48, 27)
    conv = GemmShape(1, 1280, 49, 2880, window=Window(3, 3, 9, 9), packed_a=True)  # packs B per task on AVX2
    assert (conv.column_tasks, conv.row_tasks) == (2, 8)
    assert GemmShape(1, 30, 10, 5).row_tasks == 2  # slices of 24 rows and 6


_GUARDED: list = []  # the mappings of before_unreadable_page, alive for the session


def before_unreadable_page(x: np.ndarray) -> np.ndarray:
    """A copy of x that ends where an unreadable page starts: a read past its last element faults."""
    page = mmap.PAGESIZE
    size = -(-x.nbytes // page) * page
    region = mmap.mmap(-1, size + page)
    libc = ctypes.CDLL(None, use_errno=True)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    assert libc.mprotect(ctypes.c_void_p(base + size), ctypes.c_size_t(page), 0) == 0  # PROT_NONE
    _GUARDED.append(region)
    out = np.frombuffer(region, dtype=x.dtype, count=x.size, offset=size - x.nbytes).reshape(x.shape)
    out[...] = x
    return out


def im2col(image: np.ndarray, window: Window) -> np.ndarray:
    """B[batch, (c, i, j), (y, x)] = image[batch, c, y*sh + i, x*sw + j]: the patches, materialized."""
    batch, c = image.shape[:2]
    h, w, sh, sw = window.out_h, window.out_w, window.sh, window.sw
    rows = [image[:, :, i : i + (h - 1) * sh + 1 : sh, j : j + (w - 1) * sw + 1 : sw]
            for i in range(window.kh) for j in range(window.kw)]
    return np.stack(rows, axis=2).reshape(batch, c * window.kh * window.kw, window.out_h * window.out_w)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("isa", sorted(FEATURES))
@pytest.mark.parametrize(
    "m, c, window",
    [(64, 8, Window(3, 3, 58, 58)),  # rows of 56: panels wrap onto the next row
     (16, 3, Window(3, 3, 18, 18)),  # 16: panels align with the rows
     (10, 5, Window(3, 3, 9, 9)),  # rows of 7, shorter than a vector: up to 4 rows per vector
     (24, 3, Window(3, 3, 16, 16)), (9, 2, Window(3, 3, 10, 10)),  # rows of 14 and 8: up to 3 rows per vector
     (7, 2, Window(1, 1, 4, 50)), (5, 4, Window(2, 5, 6, 9)),  # m < MR (never unpacked); 2x5
     # strided: a stem's 7x7 at stride 2 (rows of 16), rows of 4 (4 rows per vector),
     # rows of 25 with one column left over, and unequal strides
     (8, 3, Window(7, 7, 37, 37, 2, 2)), (12, 4, Window(3, 3, 9, 9, 2, 2)),
     (16, 2, Window(3, 3, 52, 52, 2, 2)), (5, 4, Window(2, 5, 6, 9, 3, 2))],
)
def test_window_reads_the_patches_of_an_image(isa, m, c, window, dtype):
    """B as an image's patches (a conv's im2col, never materialized) computes the same
    bits as the same kernel over the materialized patches, at strides too; the image
    sits at the end of a page-aligned buffer whose next page is never read (strided
    loads must not read past the last element they keep)."""
    rng = np.random.default_rng(m * c)
    k, n = c * window.kh * window.kw, window.out_h * window.out_w
    t = NUMPY[dtype]
    image = before_unreadable_page(rng.standard_normal((1, c, window.hp, window.wp)).astype(t))
    patches = im2col(image, window)
    a = rng.standard_normal((1, m, k)).astype(t)
    got, want = (np.full((1, m, n), np.nan, t) for _ in range(2))
    shape = GemmShape(1, m, n, k, dtype, window)
    assert GemmShape.from_symbol(shape.symbol) == shape
    kernel(shape, FEATURES[isa])(0, shape.tasks, a.ctypes.data, image.ctypes.data, got.ctypes.data)
    plain = GemmShape(1, m, n, k, dtype)
    kernel(plain, FEATURES[isa])(0, plain.tasks, a.ctypes.data, patches.ctypes.data, want.ctypes.data)
    np.testing.assert_array_equal(got, want)
    check(got, a, patches)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("m, n, c, window", [
    (13, 52, 58, None),  # B itself (read in place under a prepacked A): the last panel is 4 columns
    (21, 49, 1, None),  # one column left over, rows in a tail of 5
    (24, 196, 3, Window(3, 3, 9, 30)),  # a 3x3 conv at 7x28: the last 4 columns lie in the last row
    (203, 49, 20, None),  # row slices of 48: one column in groups of 3 row tiles, then a tile and a tail of 3 rows
    (128, 194, 3, None),  # 2 columns in groups of 3 row tiles, then 2 tiles alone
    (72, 50, 120, None),  # 2 columns in groups of 3 row tiles; two depth blocks (k = 1080)
])
def test_narrow_panels_accumulate_along_columns(m, n, c, window, dtype):
    """Under a prepacked A, AVX-512 kernels accumulate a panel of at most NARROW_COLUMNS
    columns along its columns (one fma of MR lanes per column: 8 f32 lanes, where rows
    take 16), several row tiles at once where the columns are few (column_groups), and
    give the bits of the kernel over the unpacked A, whose micro-kernels run along the
    rows; with several depth blocks (k > KC), the partial sums go through C and back."""
    k = c * 9
    packed = GemmShape(1, m, n, k, dtype, window, packed_a=True)
    plain = GemmShape(1, m, n, k, dtype, window)
    if dtype == "f32":
        assert "llvm.fma.v8f32" in str(kernel_module(packed, FEATURES["avx512"]))
        assert "llvm.fma.v8f32" not in str(kernel_module(plain, FEATURES["avx512"]))
    rng = np.random.default_rng(m * n)
    t = NUMPY[dtype]
    b = rng.standard_normal((1, c, window.hp, window.wp) if window else (1, k, n)).astype(t)
    a = rng.standard_normal((1, m, k)).astype(t)
    got, want = (np.full((1, m, n), np.nan, t) for _ in range(2))
    aa = aligned_copy(prepack_a(a, packed, FEATURES["avx512"]))
    kernel(packed, FEATURES["avx512"])(0, packed.tasks, aa.ctypes.data, b.ctypes.data, got.ctypes.data)
    kernel(plain, FEATURES["avx512"])(0, plain.tasks, a.ctypes.data, b.ctypes.data, want.ctypes.data)
    np.testing.assert_array_equal(got, want)
    check(got, a, im2col(b, window) if window else b)


def test_channel_tiles_take_convs_over_short_rows_at_strides_1_and_2():
    """AVX-512 kernels of a conv with prepacked weights over output rows of
    CHANNEL_TILE_ROW_WIDTHS (7 to 23 positions, stride 1 or 2) take channel tiles; other rows,
    strides, activations as weights and AVX2 keep the row-vector kernel."""
    def blocking(window: Window, packed_a: bool = True, isa: str = "avx512") -> Blocking:
        return shape_blocking(FEATURES[isa], GemmShape(1, 64, window.out_h * window.out_w, 72, window=window, packed_a=packed_a))

    assert blocking(Window(3, 3, 16, 16)).channel_tiles  # rows of 14
    assert blocking(Window(3, 3, 10, 25)).channel_tiles  # rows of 23
    assert blocking(Window(3, 3, 9, 9)).channel_tiles  # rows of 7: tiles of two rows
    assert not blocking(Window(3, 3, 8, 8)).channel_tiles  # rows of 6
    assert not blocking(Window(3, 3, 30, 30)).channel_tiles  # rows of 28
    assert blocking(Window(3, 3, 29, 29, 2, 2)).channel_tiles  # rows of 14 at stride 2
    assert not blocking(Window(3, 3, 43, 43, 3, 3)).channel_tiles  # stride 3
    assert not blocking(Window(3, 3, 16, 16), packed_a=False).channel_tiles
    assert not blocking(Window(3, 3, 16, 16), isa="avx2").channel_tiles
    assert channel_tile_widths(14) == [14] and channel_tile_widths(23) == [12, 11] and channel_tile_rows(7) == 2


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("batch, m, c, window", [
    (1, 64, 8, Window(3, 3, 16, 16)),  # rows of 14: one tile each, whole panels of 32 rows
    (1, 48, 6, Window(3, 3, 9, 9)),  # rows of 7: tiles of two rows, the last of one
    (2, 40, 5, Window(3, 3, 12, 14)),  # rows of 12, two batches, a short panel of 8 rows
    (1, 33, 3, Window(5, 5, 9, 27)),  # rows of 23: tiles of 12 and 11, a panel of 1 row
    (1, 32, 4, Window(3, 3, 15, 15, 2, 2)),  # stride 2 onto rows of 7: tiles of two rows
    (2, 40, 3, Window(3, 3, 29, 30, 2, 2)),  # stride 2 onto rows of 14, an image column left over
])
def test_channel_tiles_give_the_bits_of_the_row_vector_kernel(batch, m, c, window, dtype):
    """A channel-tiled kernel (lanes along C's rows, each position splatted from the
    image) gives the bits of the row-vector kernel over the unpacked weights (each C
    element is one fma chain in k order in both), for any split of its tasks among
    threads; the image ends before an unreadable page."""
    got, a, image = channel_tiles_against_rows(batch, m, c, window, dtype, m * c + batch, split=True)
    check(got, a, im2col(image, window))


def channel_tiles_against_rows(batch: int, m: int, c: int, window: Window, dtype: str, seed: int, split: bool = False):
    """Run the channel-tiled kernel (its tasks in pieces with `split`) and the row-vector
    kernel over the same random conv, assert the same bits; (C, A, the image)."""
    k, n = c * window.kh * window.kw, window.out_h * window.out_w
    t = NUMPY[dtype]
    rng = np.random.default_rng(seed)
    image = before_unreadable_page(rng.standard_normal((batch, c, window.hp, window.wp)).astype(t))
    a = rng.standard_normal((batch, m, k)).astype(t)
    tiled = GemmShape(batch, m, n, k, dtype, window, packed_a=True)
    rows = GemmShape(batch, m, n, k, dtype, window)
    assert shape_blocking(FEATURES["avx512"], tiled).channel_tiles
    assert f'@"{tiled.symbol}_channels' in str(kernel_module(tiled, FEATURES["avx512"]))
    want = np.full((batch, m, n), np.nan, t)
    kernel(rows, FEATURES["avx512"])(0, rows.tasks, a.ctypes.data, image.ctypes.data, want.ctypes.data)
    packed = aligned_copy(prepack_a(a, tiled, FEATURES["avx512"]))
    run = kernel(tiled, FEATURES["avx512"])
    got = np.full_like(want, np.nan)
    cuts = sorted({0, 1, tiled.tasks // 2, tiled.tasks}) if split else [0, tiled.tasks]
    for lo, hi in zip(cuts, cuts[1:]):
        run(lo, hi, packed.ctypes.data, image.ctypes.data, got.ctypes.data)
    np.testing.assert_array_equal(got, want)
    return got, a, image


@pytest.mark.parametrize("dims", [(2, 11, 150, 300), (1, 131, 49, 70)])
def test_tasks_split_anywhere(dims):
    """Any partition of the task range (what threads get) computes the same bits."""
    shape = GemmShape(*dims)
    a, b, whole = operands(np.random.default_rng(7), shape)
    run = kernel(shape, FEATURES["avx512"])
    run(0, shape.tasks, a.ctypes.data, b.ctypes.data, whole.ctypes.data)
    pieces = np.full_like(whole, np.nan)
    cuts = [0, 1, 3, 4, shape.tasks]
    assert shape.tasks > 4
    for lo, hi in zip(cuts, cuts[1:]):
        run(lo, hi, a.ctypes.data, b.ctypes.data, pieces.ctypes.data)
    np.testing.assert_array_equal(pieces, whole)
    check(whole, a, b)


@pytest.mark.parametrize("dims", [(1, 256, 196, 2304), (1, 49, 512, 4608), (1, 128, 784, 1152), (1, 512, 49, 4608),
                                  (2, 30, 100, 7), (1, 131, 49, 70), (1, 64, 3136, 576)])
def test_task_order_spreads_the_work(dims):
    """A batch's tasks run in an order (a permutation) whose first half, the first of two
    threads' home block (mlfuse/backend/home_blocks.py), holds half the multiply-adds to within one
    task, and never more than the plain numbering's first half did."""
    shape = GemmShape(*dims)
    order = shape.task_order()
    assert sorted(order) == list(range(shape.column_tasks * shape.row_tasks))

    def work(t: int) -> int:
        rows, cols = shape.task_extent(t)
        return rows * cols

    total, half = sum(map(work, order)), (len(order) + 1) // 2
    share = sum(map(work, order[:half])) / total
    assert abs(share - 0.5) <= max(map(work, order)) / total
    assert share <= sum(map(work, range(half))) / total


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 3), m=st.integers(1, 40), n=st.integers(1, 130), k=st.integers(1, 600),
    isa=st.sampled_from(sorted(FEATURES)), dtype=st.sampled_from(["f32", "f64"]),
)
def test_random_shapes(batch, m, n, k, isa, dtype):
    shape = GemmShape(batch, m, n, k, dtype)
    a, b, c = operands(np.random.default_rng(batch * m * n * k), shape)
    kernel(shape, FEATURES[isa])(0, shape.tasks, a.ctypes.data, b.ctypes.data, c.ctypes.data)
    check(c, a, b)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(
    batch=st.integers(1, 2), m=st.integers(1, 70), c=st.integers(1, 4), kh=st.integers(1, 5), kw=st.integers(1, 5),
    out_h=st.integers(1, 5), out_w=st.sampled_from(list(CHANNEL_TILE_ROW_WIDTHS)), stride=st.sampled_from([1, 2]),
    dtype=st.sampled_from(["f32", "f64"]),
)
def test_channel_tiles_random_shapes(batch, m, c, kh, kw, out_h, out_w, stride, dtype):
    """Channel tiles over random convs (rows, kernels, strides, short panels, batches):
    the row kernel's bits over the unpacked weights, the image before an unreadable page
    (derandomized: the same examples every run)."""
    window = Window(kh, kw, (out_h - 1) * stride + kh, (out_w - 1) * stride + kw, stride, stride)
    channel_tiles_against_rows(batch, m, c, window, dtype, m * out_h * out_w * c * kh * kw + batch)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("dims", [(1, 64, 300, 520), (3, 100, 90, 70)])
def test_compiled_graph_uses_the_kernel_on_threads(dims, dtype):
    """End to end: a matmul big enough for loop.gemm, on the thread team, with the
    outputs poisoned; `gemm=blas` computes the same product through BLAS."""
    batch, m, n, k = dims
    t = NUMPY[dtype]
    b = GraphBuilder()
    x = b.input("x", (batch, m, k) if batch > 1 else (m, k), dtype)
    w = b.input("w", (batch, k, n) if batch > 1 else (k, n), dtype)
    b.output(b.matmul(x, w))
    module = b.module()
    assert GemmShape(batch, m, n, k, dtype).symbol in module_text(run_pipeline(module.clone(), pipelines.cpu_pipeline()))
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((batch, m, k) if batch > 1 else (m, k)).astype(t)
    ws = rng.standard_normal((batch, k, n) if batch > 1 else (k, n)).astype(t)
    out = np.full((batch, m, n) if batch > 1 else (m, n), np.nan, t)
    mlfuse.compile(module)(xs, ws, out=out)
    check(out.reshape(batch, m, n), xs.reshape(batch, m, k), ws.reshape(batch, k, n))
    blas_steps = [s if s != "convert-to-llvm" else "convert-to-llvm{gemm=blas}" for s in pipelines.cpu_pipeline()]
    (blas_out,) = mlfuse.compile(module, passes=blas_steps)(xs, ws)
    np.testing.assert_allclose(blas_out, out, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("dims, dtype", [((1, 64, 300, 520), "f32"), ((3, 40, 90, 80), "f64"), ((1, 1, 1000, 300), "f32")])
def test_constant_weights_are_laid_out_as_panels(dims, dtype):
    """x @ W with W a constant: the kernel reads W's panels as the translation laid them
    out (`_pb`, no packing at run time), with the result of the kernel that packs W from
    an input (the same fma chains, so the same bits); W @ x likewise reads W's row panels
    (`_pa`); outputs poisoned first."""
    batch, m, n, k = dims
    t = NUMPY[dtype]
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((batch, m, k)).astype(t)
    ws = rng.standard_normal((batch, k, n)).astype(t)
    b = GraphBuilder()
    b.output(b.matmul(b.input("x", (batch, m, k), dtype), b.constant(ws)))
    module = b.module()
    assert GemmShape(batch, m, n, k, dtype, packed_b=True).symbol in module_text(
        run_pipeline(module.clone(), pipelines.cpu_pipeline()))
    out = np.full((batch, m, n), np.nan, t)
    mlfuse.compile(module)(xs, out=out)
    check(out, xs, ws)
    given = GraphBuilder()
    given.output(given.matmul(given.input("x", (batch, m, k), dtype), given.input("w", (batch, k, n), dtype)))
    (plain,) = mlfuse.compile(given.module())(xs, ws)
    np.testing.assert_array_equal(out, plain)
    # and a constant A (W @ x: a convolution's weights over its patches), as row panels
    wa = rng.standard_normal((batch, m, k)).astype(t)
    xb = rng.standard_normal((batch, k, n)).astype(t)
    left = GraphBuilder()
    left.output(left.matmul(left.constant(wa), left.input("x", (batch, k, n), dtype)))
    assert GemmShape(batch, m, n, k, dtype, packed_a=True).symbol in module_text(
        run_pipeline(left.module(), pipelines.cpu_pipeline()))
    out_a = np.full((batch, m, n), np.nan, t)
    mlfuse.compile(left.module())(xb, out=out_a)
    (plain_a,) = mlfuse.compile(given.module())(wa, xb)
    np.testing.assert_array_equal(out_a, plain_a)


def test_freed_engines_leave_the_compiler_working():
    """An execution engine owns its target machine and frees it with itself; the
    compiler's shared one must survive engines that are garbage-collected."""
    import gc

    shape = GemmShape(1, 9, 50, 20)
    for seed in range(3):  # each round frees the previous round's engine
        module = ir.Module()
        module.triple = cpu.target_machine().triple
        ir.Function(module, ir.FunctionType(ir.VoidType(), [I64, I64, PTR, PTR, PTR]), name=shape.symbol)
        define_gemm_kernels(module, FEATURES["avx2"])
        text = str(module).replace(shape.symbol, f"{shape.symbol}_{seed}")  # defeat the object cache
        jit = cpu.JitModule(cpu.compile_object(text))
        run = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
            jit.address(f"{shape.symbol}_{seed}")
        )
        a, b, c = operands(np.random.default_rng(seed), shape)
        run(0, shape.tasks, a.ctypes.data, b.ctypes.data, c.ctypes.data)
        check(c, a, b)
        del run, jit
        gc.collect()
