"""Epilogues in the generated GEMM kernels (loop-gemm-epilogue-fuse,
mlfuse/backend/gemm_epilogue.py) against numpy.

Each C element is the same fma chain with or without an epilogue, and the epilogue's
ops are IEEE single operations in the region's order, so the kernel with an epilogue
must give numpy's epilogue on the plain kernel's product bit for bit (NaN where
numpy has NaN). Outputs are poisoned with NaN first; random data is seeded by the
case's parameters (pytest prints them on failure).
"""

from __future__ import annotations

import ctypes
import zlib

import llvmlite.ir as ir
import numpy as np
import onnx
import pytest
import scipy.special

import mlfuse
from mlfuse import pipelines
from mlfuse.api import module_text, run_pipeline
from mlfuse.backend import cpu
from mlfuse.backend.gemm_epilogue import Epilogue, Operand
from mlfuse.backend.gemm_kernels import I64, PTR, Frame, GemmShape, Window, define_gemm_kernels, prepack_a
from mlfuse.conversion.gemm_epilogue import kernel_epilogue
from mlfuse.dialects import loop
from mlfuse.frontend.builder import GraphBuilder
from mlfuse.frontend.onnx import import_onnx

FEATURES = {"avx512": "+avx512f,+avx2,+avx,+fma", "avx2": "+avx2,+avx,+fma", "sse": "+sse4.2"}
NUMPY = {"f32": np.float32, "f64": np.float64}
_JITS: list = []


def kernel(shape: GemmShape, features: str):
    module = ir.Module()
    module.triple = cpu.target_machine().triple
    buffers = 3 + (len(shape.epilogue.operands) if shape.epilogue else 0)
    ir.Function(module, ir.FunctionType(ir.VoidType(), [I64, I64] + [PTR] * buffers), name=shape.symbol)
    assert define_gemm_kernels(module, features) == [shape.symbol]
    jit = cpu.JitModule(cpu.compile_object(str(module)))
    _JITS.append(jit)
    signature = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, *[ctypes.c_void_p] * buffers)
    return signature(jit.address(shape.symbol))


def constant(value: float, dtype: str) -> str:
    return "k" + np.array(value, NUMPY[dtype]).tobytes().hex()


# (program, numpy of (c, operands)): bias per row, residual, a column bias, a scalar, ReLU
# as cmpf ugt + select (NaN passes), ReLU6 as maximumf / minimumf, and the rest of arith
def programs(dtype: str):
    zero, six, three = constant(0.0, dtype), constant(6.0, dtype), constant(3.0, dtype)
    relu = lambda t: np.where((t > 0) | np.isnan(t), t, t.dtype.type(0))  # noqa: E731
    return {
        "bias_residual_relu": (
            ["c", "i0", "add", "i1", "add", zero, "cmpugt", "c", "i0", "add", "i1", "add", zero, "sel"],
            lambda c, row, full, col, one: relu(c + row + full),
        ),
        "column_bias_relu6": (
            ["c", "i2", "add", zero, "max", six, "min"],
            lambda c, row, full, col, one: np.minimum(np.maximum(c + col, 0), 6),
        ),
        "hardswish_like": (
            ["c", "c", three, "add", zero, "maxnum", six, "minnum", "mul", six, "div"],
            lambda c, row, full, col, one: c * np.fmin(np.fmax(c + 3, 0), 6) / c.dtype.type(6),
        ),
        "constant_predicates": (  # cmpf false / true: never and always, NaN or not
            ["c", "c", "cmpfalse", "i0", "c", "sel", "c", "c", "cmptrue", "i1", "c", "sel", "add"],
            lambda c, row, full, col, one: c + full,
        ),
        "scale_shift_neg": (
            ["c", "i1", "cmpolt", "c", "c", "i3", "mul", "i0", "sub", "neg", "sel"],
            lambda c, row, full, col, one: np.where(c < full, c, -(c * one - row)),
        ),
        "shared_relu6": (  # ONNX Clip(0, 6) after a bias: c + bias and its ReLU kept in slots
            ["c", "i0", "add", "p0", zero, "cmpugt", "g0", zero, "sel", "p1", six, "cmpult", "g1", six, "sel"],
            lambda c, row, full, col, one: np.where((relu(c + row) < 6) | np.isnan(c + row), relu(c + row), 6),
        ),
    }


OPERANDS = lambda m, n: (Operand(0, m, 1, 0), Operand(0, m * n, n, 1), Operand(0, 0, 0, 1), Operand(0, 0, 0, 0))  # noqa: E731


def operand_arrays(rng, batch: int, m: int, n: int, t, special: bool):
    row = rng.standard_normal((batch, m, 1)).astype(t)
    full = rng.standard_normal((batch, m, n)).astype(t)
    col = rng.standard_normal((1, 1, n)).astype(t)
    one = np.array([[[1.5]]], t)
    if special:  # NaN, infinities and signed zeros through the epilogue
        flat = full.reshape(-1)
        flat[rng.choice(flat.size, 4 * batch, replace=False)] = [np.nan, np.inf, -np.inf, -0.0] * batch
        row.reshape(-1)[0] = np.nan
    return row, full, col, one


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("isa", sorted(FEATURES))
@pytest.mark.parametrize("name", ["bias_residual_relu", "column_bias_relu6", "hardswish_like", "constant_predicates", "scale_shift_neg",
                                  "shared_relu6"])
@pytest.mark.parametrize("dims", [(1, 20, 50, 300), (2, 13, 97, 17), (1, 3, 40, 600)])
def test_epilogue_matches_numpy_on_the_product(dims, name, isa, dtype):
    """The shapes cover several depth blocks (the epilogue only at the last), partial
    panels (masked operand loads), rows past whole tiles, batches, m <= MR (B unpacked)."""
    shape = epilogue_against_numpy(dims, name, isa, dtype, seed=(dims, name, dtype))
    assert GemmShape.from_symbol(shape.symbol) == shape
    for helper in ("_micro8x48", "__omp", "_pack24"):  # the kernel's functions are not kernels
        assert GemmShape.from_symbol(shape.symbol + helper) is None


def epilogue_against_numpy(dims: tuple[int, int, int, int], name: str, isa: str, dtype: str, seed: object,
                           packed_a: bool = False) -> GemmShape:
    """Run the kernel of programs()[name] over random A (prepacked with `packed_a`) and B
    and assert numpy's epilogue over the plain kernel's product, bit for bit; the shape."""
    batch, m, n, k = dims
    t = NUMPY[dtype]
    rng = np.random.default_rng(zlib.crc32(repr(seed).encode()))
    program, reference = programs(dtype)[name]
    a = rng.standard_normal((batch, m, k)).astype(t)
    b = rng.standard_normal((batch, k, n)).astype(t)
    row, full, col, one = operand_arrays(rng, batch, m, n, t, special=name in ("bias_residual_relu", "shared_relu6"))
    shape = GemmShape(batch, m, n, k, dtype, packed_a=packed_a, epilogue=Epilogue(OPERANDS(m, n), tuple(program)))
    plain_shape = GemmShape(batch, m, n, k, dtype)
    product = np.full((batch, m, n), np.nan, t)
    kernel(plain_shape, FEATURES[isa])(0, plain_shape.tasks, a.ctypes.data, b.ctypes.data, product.ctypes.data)
    got = np.full((batch, m, n), np.nan, t)
    a_in = np.ascontiguousarray(prepack_a(a, shape, FEATURES[isa])) if packed_a else a
    ptrs = [x.ctypes.data for x in (a_in, b, got, row, full, col, one)]
    kernel(shape, FEATURES[isa])(0, shape.tasks, *ptrs)
    with np.errstate(all="ignore"):
        want = reference(product, row, full, col, one).astype(t)
    np.testing.assert_array_equal(got, want)
    return shape


# x = c + residual, then f32 exp, tanh or erf in the program: GELU in its two forms and
# SiLU, against float64 numpy of the same formula
SQRT2, TANH_C = 1.4142135623730951, 0.7978845608028654
TRANSCENDENTAL = {
    "gelu_erf": (
        ["c", "i1", "add", "c", "i1", "add", constant(SQRT2, "f32"), "div", "erf", constant(1.0, "f32"), "add", "mul",
         constant(0.5, "f32"), "mul"],
        lambda x: x * (1 + scipy.special.erf(x / SQRT2)) * 0.5,
    ),
    "gelu_tanh": (
        ["c", "i1", "add", constant(0.5, "f32"), "mul", "c", "i1", "add", "c", "i1", "add", "c", "i1", "add", "mul",
         "c", "i1", "add", "mul", constant(0.044715, "f32"), "mul", "add", constant(TANH_C, "f32"), "mul", "tanh",
         constant(1.0, "f32"), "add", "mul"],
        lambda x: 0.5 * x * (1 + np.tanh((x + 0.044715 * x * x * x) * TANH_C)),
    ),
    "silu": (
        ["c", "i1", "add", "c", "i1", "add", "neg", "exp", constant(1.0, "f32"), "add", "div"],
        lambda x: x / (1 + np.exp(-x)),
    ),
}


@pytest.mark.parametrize("isa", sorted(FEATURES))
@pytest.mark.parametrize("name", sorted(TRANSCENDENTAL))
@pytest.mark.parametrize("dims", [(1, 20, 50, 300), (2, 13, 97, 17)])
def test_exp_tanh_erf_in_the_epilogue_match_numpy(dims, name, isa):
    """expand-math's f32 exp, tanh and erf emitted into the kernel (LlvmliteF32Emitter)
    agree with float64 numpy of the same formula within the expansions' bounds (erf 6.4
    ulp, tanh 2.5, exp 0.9: 2e-6 relative, and 2e-6 of |x| where 1 + erf(x) cancels);
    NaN, infinities and -0 in x come out as numpy's formula gives them."""
    batch, m, n, k = dims
    rng = np.random.default_rng(zlib.crc32(repr((dims, name)).encode()))
    program, reference = TRANSCENDENTAL[name]
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = (rng.standard_normal((batch, k, n)) / np.sqrt(k) * 3).astype(np.float32)  # x spans the functions' ranges
    row, full, col, one = operand_arrays(rng, batch, m, n, np.float32, special=True)
    shape = GemmShape(batch, m, n, k, "f32", epilogue=Epilogue(OPERANDS(m, n), tuple(program)))
    assert GemmShape.from_symbol(shape.symbol) == shape
    plain_shape = GemmShape(batch, m, n, k, "f32")
    product = np.full((batch, m, n), np.nan, np.float32)
    kernel(plain_shape, FEATURES[isa])(0, plain_shape.tasks, a.ctypes.data, b.ctypes.data, product.ctypes.data)
    got = np.full((batch, m, n), np.nan, np.float32)
    kernel(shape, FEATURES[isa])(0, shape.tasks, *[x.ctypes.data for x in (a, b, got, row, full, col, one)])
    x = product.astype(np.float64) + full
    with np.errstate(all="ignore"):
        want = reference(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(x)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-6, atol=2e-6 * np.abs(x[finite]).max())
    assert np.signbit(got[x == 0]).tolist() == np.signbit(want[x == 0]).tolist()


@pytest.mark.parametrize("name", ["bias_residual_relu", "column_bias_relu6"])
@pytest.mark.parametrize("k", [160, 1100])  # one depth block; two (the partial sums through C)
def test_grouped_narrow_panels_take_the_epilogue(k, name):
    """n = 49 under a prepacked A on AVX-512: the 1-column panel runs 3 row tiles per
    micro-kernel call (column_groups), their epilogues (a residual: its prefetch) in a loop
    over the tiles; the plain kernel's bits, then numpy's epilogue."""
    shape = epilogue_against_numpy((1, 203, 49, k), name, "avx512", "f32", seed=(k, name), packed_a=True)
    module = ir.Module()
    ir.Function(module, ir.FunctionType(ir.VoidType(), [I64, I64] + [PTR] * 7), name=shape.symbol)
    define_gemm_kernels(module, FEATURES["avx512"])
    assert "_micro24x1_direct" in str(module)


@pytest.mark.parametrize("m, oh, ow, k", [(60, 7, 7, 40), (203, 7, 7, 1100), (50, 5, 10, 33)])
def test_grouped_narrow_panels_write_a_framed_c(m, oh, ow, k):
    """Row tiles in groups (1 or 2 columns left over: n = 49, 50) into the interiors of
    padded images (a frame), with a residual read from such images: the plain kernel's
    bits, and the borders (NaN) untouched."""
    got, want = residual_from_images("avx512", np.random.default_rng(m + k), (m, oh * ow, k), (oh, ow), None, True,
                                     packed=(False, True))
    np.testing.assert_array_equal(got[:, :, 1 : 1 + oh, 1 : 1 + ow].reshape(1, m, oh * ow), want)
    assert np.isnan(got[:, :, 0]).all() and np.isnan(got[:, :, :, 0]).all() and np.isnan(got[:, :, :, -1]).all()


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_window_and_prepacked_kernels_take_the_epilogue(isa):
    """A conv's product (B an image's patches, A laid out as row panels) with a bias per
    channel and ReLU: the plain kernel's bits, then numpy's epilogue."""
    rng = np.random.default_rng(11)
    window = Window(3, 3, 12, 14)
    m, c = 10, 4
    k, n = c * 9, window.out_h * window.out_w
    image = rng.standard_normal((1, c, window.hp, window.wp)).astype(np.float32)
    a = rng.standard_normal((1, m, k)).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    zero = constant(0.0, "f32")
    relu = Epilogue((Operand(0, 0, 1, 0),), ("c", "i0", "add", zero, "cmpugt", "c", "i0", "add", zero, "sel"))
    plain = GemmShape(1, m, n, k, window=window)
    fused = GemmShape(1, m, n, k, window=window, packed_a=True, epilogue=relu)
    product, got = np.full((1, m, n), np.nan, np.float32), np.full((1, m, n), np.nan, np.float32)
    kernel(plain, FEATURES[isa])(0, plain.tasks, a.ctypes.data, image.ctypes.data, product.ctypes.data)
    packed = np.ascontiguousarray(prepack_a(a, fused, FEATURES[isa]))
    kernel(fused, FEATURES[isa])(0, fused.tasks, packed.ctypes.data, image.ctypes.data, got.ctypes.data, bias.ctypes.data)
    s = product + bias[None, :, None]
    np.testing.assert_array_equal(got, np.where((s > 0) | np.isnan(s), s, np.float32(0)))


@pytest.mark.parametrize("isa", sorted(FEATURES))
@pytest.mark.parametrize("window, framed_c", [
    (None, False),  # a plain product over rows of 20 (the row kernel; 16 lanes cross row ends)
    (Window(3, 3, 22, 22), True),  # a conv over rows of 20, C framed as well
    (Window(3, 3, 16, 16), True),  # rows of 14: channel tiles on AVX-512
    (Window(3, 3, 9, 9), False),  # 7 x 7: channel tiles of two rows
    (Window(3, 3, 9, 9), True),
])
def test_a_residual_from_padded_images(isa, window, framed_c):
    """A residual read from the interiors of padded images (Operand f<ow>x<wp>: the next
    conv's input, ResNet's block output) gives the bits of one read from a plain
    buffer; the border holds NaN, which no lane may read. Optionally into a framed C."""
    rng = np.random.default_rng(len(isa) * 7 + framed_c)
    m, c, (oh, ow) = 19, 3, ((window.out_h, window.out_w) if window is not None else (3, 20))
    k, n = (c * 9, oh * ow) if window is not None else (35, oh * ow)
    got, want = residual_from_images(isa, rng, (m, n, k), (oh, ow), window, framed_c, packed=(window is not None,) * 2)
    got = got[:, :, 1 : 1 + oh, 1 : 1 + ow].reshape(1, m, n) if framed_c else got
    np.testing.assert_array_equal(got, want)


def residual_from_images(isa: str, rng: np.random.Generator, dims: tuple[int, int, int], out: tuple[int, int],
                         window: Window | None, framed_c: bool, packed: tuple[bool, bool]) -> tuple[np.ndarray, np.ndarray]:
    """(got, want): the product of random A and B (an image under `window`, else k x n) +
    a residual read from the interiors of NaN-bordered images (C framed with `framed_c`:
    got is those images), and the same with the residual from a plain buffer. packed =
    (prepacked A for want's kernel, for got's)."""
    (m, n, k), (oh, ow) = dims, out
    c = k // 9
    b = rng.standard_normal((1, c, window.hp, window.wp) if window is not None else (1, k, n)).astype(np.float32)
    a = rng.standard_normal((1, m, k)).astype(np.float32)
    residual = rng.standard_normal((1, m, n)).astype(np.float32)
    images = np.full((1, m, oh + 3, ow + 2), np.nan, np.float32)  # one row more below than above
    images[:, :, 1 : 1 + oh, 1 : 1 + ow] = residual.reshape(1, m, oh, ow)
    hp, wp = images.shape[-2:]
    add = ("c", "i0", "add")
    plain = GemmShape(1, m, n, k, window=window, packed_a=packed[0], epilogue=Epilogue((Operand(0, m * n, n, 1),), add))
    framed = GemmShape(1, m, n, k, window=window, packed_a=packed[1],
                       epilogue=Epilogue((Operand(wp + 1, m * hp * wp, hp * wp, 1, ow, wp),), add),
                       frame=Frame(ow, oh + 2, ow + 2, 1, 1) if framed_c else None)
    assert GemmShape.from_symbol(framed.symbol) == framed

    # named, so that each lives through its kernel's call (a temporary's memory would not)
    a_plain, a_framed = (np.ascontiguousarray(prepack_a(a, s, FEATURES[isa])) if s.packed_a else a for s in (plain, framed))
    want = np.full((1, m, n), np.nan, np.float32)
    kernel(plain, FEATURES[isa])(0, plain.tasks, a_plain.ctypes.data, b.ctypes.data, want.ctypes.data, residual.ctypes.data)
    got = np.full((1, m, oh + 2, ow + 2) if framed_c else (1, m, n), np.nan, np.float32)
    kernel(framed, FEATURES[isa])(0, framed.tasks, a_framed.ctypes.data, b.ctypes.data, got.ctypes.data, images.ctypes.data)
    return got, want


def conv_block(constant_weight: bool, residual: bool, image: tuple[int, int, int] = (16, 14, 15), channels: int = 24,
               kernel: int = 3, clip: bool = False, seed: int = 5):
    """conv kernel x kernel (stride 1, same padding) + bias [+ residual] + ReLU (with
    `clip`, clipped to [0, 6]), image = (channels, h, w) -> `channels`; by default 16 -> 24
    channels over 14 x 15 pixels: a loop.gemm (above GEMM_KERNEL_MIN_MACS) over the
    padded image."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, *image)).astype(np.float32)
    w = rng.standard_normal((channels, image[0], kernel, kernel)).astype(np.float32)
    bias = rng.standard_normal(channels).astype(np.float32)
    r = rng.standard_normal((1, channels, *image[1:])).astype(np.float32)
    b = GraphBuilder()
    xs = b.input("x", x.shape, "f32")
    ws = b.constant(w, "f32") if constant_weight else b.input("w", w.shape, "f32")
    rs = b.input("r", r.shape, "f32")
    y = b.conv2d(xs, ws, [1, 1], [kernel // 2] * 4, [1, 1], 1)
    y = y + b.broadcast_to(b.constant(bias, "f32").reshape(1, channels, 1, 1), y.shape)
    y = b.relu(y + rs if residual and not clip else y)
    if clip:
        y = b.minimum(y, b.constant(np.float32(6), "f32"))
    b.output(y + rs if residual and clip else y)
    inputs = [x] + ([] if constant_weight else [w]) + [r]
    return b.module(), inputs, (x, w, bias, r)


@pytest.mark.parametrize("constant_weight, residual", [(True, True), (False, False), (True, False)])
def test_conv_epilogue_runs_in_the_kernel(constant_weight, residual):
    """End to end: the conv's epilogue is the product's (no nest reads the product), the
    output is the pipeline's without loop-gemm-epilogue-fuse bit for bit, and float64
    numpy's within fp32 rounding of 144-term sums (atol 1e-5 of the output's range);
    outputs poisoned, allocating and out= calls."""
    module, inputs, (x, w, bias, r) = conv_block(constant_weight, residual)
    steps = pipelines.cpu_pipeline()
    assert "loop-gemm-epilogue-fuse" in steps
    lowered = run_pipeline(module.clone(), steps[: steps.index("loop-gemm-epilogue-fuse") + 1])
    gemms = [op for op in lowered.walk() if isinstance(op, loop.GemmOp)]
    assert len(gemms) == 1 and gemms[0].epilogue is not None
    assert not [op for op in lowered.walk() if isinstance(op, loop.NestOp) and loop.view_root(gemms[0].c) in
                {loop.view_root(v) for v in op.ins}]
    assert "_e." in module_text(run_pipeline(module.clone(), steps))
    out = np.full((1, 24, 14, 15), np.nan, np.float32)
    mlfuse.compile(module)(*inputs, out=[out])
    (allocated,) = mlfuse.compile(module)(*inputs)
    without = [s for s in steps if s != "loop-gemm-epilogue-fuse"]
    (nest,) = mlfuse.compile(module, passes=without)(*inputs)
    np.testing.assert_array_equal(out, nest)
    np.testing.assert_array_equal(allocated, nest)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = sum(np.einsum("oc,nchw->nohw", w[:, :, i, j].astype(np.float64), xp[:, :, i : i + 14, j : j + 15])
               for i in range(3) for j in range(3))
    want = np.maximum(conv + bias[None, :, None, None] + (r if residual else 0), 0)
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-5 * np.abs(want).max())


ACTIVATIONS = {  # GraphBuilder's form and float64 numpy's of each activation
    "gelu_erf": (lambda b, z: z * (b.erf(z / np.float32(SQRT2)) + np.float32(1)) * np.float32(0.5),
                 TRANSCENDENTAL["gelu_erf"][1]),
    "gelu_tanh": (lambda b, z: z * np.float32(0.5) * (b.tanh((z + z * z * z * np.float32(0.044715)) * np.float32(TANH_C)) + np.float32(1)),
                  TRANSCENDENTAL["gelu_tanh"][1]),
    "silu": (lambda b, z: z / (b.exp(-z) + np.float32(1)), TRANSCENDENTAL["silu"][1]),
}


@pytest.mark.parametrize("bias", [True, False])  # without: loop-coalesce makes the activation's nest 1-D
@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_linear_layer_and_its_activation_are_one_kernel(activation, bias):
    """A linear layer (+ bias) + GELU or SiLU: one loop.gemm with the activation as its
    epilogue and no nest at all; the output is the pipeline's without
    loop-gemm-epilogue-fuse bit for bit (the same expansions, the same order), and
    float64 numpy's within fp32 rounding of 128-term sums and the expansions' bounds;
    outputs poisoned."""
    rng = np.random.default_rng(zlib.crc32(repr((activation, bias)).encode()))
    x = rng.standard_normal((64, 128)).astype(np.float32)
    w = (rng.standard_normal((128, 96)) / 4).astype(np.float32)
    c = rng.standard_normal(96).astype(np.float32)
    build, reference = ACTIVATIONS[activation]
    b = GraphBuilder()
    z = b.input("x", x.shape, "f32") @ b.constant(w, "f32")
    if bias:
        z = z + b.broadcast_to(b.constant(c, "f32").reshape(1, 96), z.shape)
    b.output(build(b, z))
    module = b.module()
    steps = pipelines.cpu_pipeline()
    lowered = run_pipeline(module.clone(), steps[: steps.index("loop-gemm-epilogue-fuse") + 1])
    gemms = [op for op in lowered.walk() if isinstance(op, loop.GemmOp)]
    assert len(gemms) == 1 and gemms[0].epilogue is not None
    assert not [op for op in lowered.walk() if isinstance(op, loop.NestOp)]
    out = np.full((64, 96), np.nan, np.float32)
    mlfuse.compile(module)(x, out=[out])
    (nest,) = mlfuse.compile(module, passes=[s for s in steps if s != "loop-gemm-epilogue-fuse"])(x)
    np.testing.assert_array_equal(out, nest)
    z64 = x.astype(np.float64) @ w.astype(np.float64) + (c if bias else 0)
    np.testing.assert_allclose(out, reference(z64), rtol=1e-5, atol=1e-5 * np.abs(z64).max())


def test_concat_is_written_into_the_padded_input_of_the_conv():
    """U-Net's decoder: the concat of an elementwise result and an input feeds a 3x3 conv
    whose GEMM reads its padded input in place. loop-forward-copies has the concat's
    piece of x2 and the exp nest (whose result only the concat read) write the padded
    interior: no pad copy is left, nor the exp's piece of the concat. Against float64 numpy within fp32 rounding of 144-term
    sums (atol 1e-5 of the output's range), outputs poisoned."""
    rng = np.random.default_rng(11)
    x1, x2 = (rng.standard_normal((1, 8, 16, 16)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    b = GraphBuilder()
    a1, a2 = b.input("x1", x1.shape, "f32"), b.input("x2", x2.shape, "f32")
    joined = b.concat([b.exp(a1), a2], axis=1)
    b.output(b.conv2d(joined, b.constant(w, "f32"), [1, 1], [1] * 4, [1, 1], 1))
    module = b.module()
    steps = pipelines.cpu_pipeline()
    lowered = run_pipeline(module.clone(), steps[: steps.index("loop-forward-copies") + 1])
    names = [op.nest_name.data for op in lowered.walk() if isinstance(op, loop.NestOp)]
    assert not [n for n in names if "pad_copy" in n] and sum(n.endswith("concat") for n in names) == 1, names  # x2's piece
    out = np.full((1, 16, 16, 16), np.nan, np.float32)
    mlfuse.compile(module)(x1, x2, out=[out])
    xp = np.pad(np.concatenate([np.exp(x1.astype(np.float64)), x2], axis=1), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum("oc,nchw->nohw", w[:, :, i, j].astype(np.float64), xp[:, :, i : i + 16, j : j + 16])
               for i in range(3) for j in range(3))
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_a_product_scattered_into_pixels_is_written_into_the_concat(tmp_path):
    """U-Net's decoder: a ConvTranspose 2 x 2 stride 2 is a product whose rows the next
    nest scatters into 2 x 2 pixels (+ bias), no epilogue of it, so that nest writes its
    piece of the concat in the next conv's padded input directly: no copy of it is left.
    Against float64 numpy within fp32 rounding (atol 1e-5 of the output's range),
    outputs poisoned."""
    rng = np.random.default_rng(12)
    x1 = rng.standard_normal((1, 32, 32, 32)).astype(np.float32)
    x2 = rng.standard_normal((1, 8, 64, 64)).astype(np.float32)
    wt, bt = rng.standard_normal((32, 16, 2, 2)).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    w = rng.standard_normal((8, 24, 3, 3)).astype(np.float32)
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("ConvTranspose", ["x1", "wt", "bt"], ["up"], strides=[2, 2]),
         onnx.helper.make_node("Concat", ["up", "x2"], ["cat"], axis=1),
         onnx.helper.make_node("Conv", ["cat", "w"], ["y"], pads=[1, 1, 1, 1])],
        "unet_decoder",
        [onnx.helper.make_tensor_value_info("x1", 1, x1.shape), onnx.helper.make_tensor_value_info("x2", 1, x2.shape)],
        [onnx.helper.make_tensor_value_info("y", 1, [1, 8, 64, 64])],
        [onnx.numpy_helper.from_array(a, n) for a, n in ((wt, "wt"), (bt, "bt"), (w, "w"))],
    )
    path = tmp_path / "decoder.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), path)
    steps = pipelines.cpu_pipeline()
    lowered = run_pipeline(import_onnx(onnx.load(path)), steps[: steps.index("loop-forward-copies") + 1])
    names = [op.nest_name.data for op in lowered.walk() if isinstance(op, loop.NestOp)]
    assert sum(n.endswith("concat") for n in names) == 1, names  # x2's piece only
    out = np.full((1, 8, 64, 64), np.nan, np.float32)
    mlfuse.compile(str(path))(x1, x2, out=[out])
    up = np.einsum("ncij,coab->noiajb", x1.astype(np.float64), wt).reshape(1, 16, 64, 64) + bt[None, :, None, None]
    xp = np.pad(np.concatenate([up, x2], axis=1), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum("oc,nchw->nohw", w[:, :, i, j].astype(np.float64), xp[:, :, i : i + 64, j : j + 64])
               for i in range(3) for j in range(3))
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-5 * np.abs(want).max())


def conv_relu_conv(path, rng, channels: int, size: int, residual: bool) -> tuple[np.ndarray, np.ndarray]:
    """Save conv 3x3 (+ bias) -> relu -> conv 3x3 (+ relu's output again with `residual`)
    over a channels x size x size image as ONNX at `path`; (its input, float64 numpy's output)."""
    x = rng.standard_normal((1, channels, size, size)).astype(np.float32)
    w1, w2 = (rng.standard_normal((channels, channels, 3, 3)).astype(np.float32) / channels for _ in range(2))
    b1 = rng.standard_normal(channels).astype(np.float32)
    nodes = [onnx.helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             onnx.helper.make_node("Relu", ["c1"], ["r1"]),
             onnx.helper.make_node("Conv", ["r1", "w2"], ["c2" if residual else "y"], pads=[1, 1, 1, 1])]
    if residual:
        nodes.append(onnx.helper.make_node("Add", ["c2", "r1"], ["y"]))
    graph = onnx.helper.make_graph(
        nodes, "conv_relu_conv", [onnx.helper.make_tensor_value_info("x", 1, x.shape)],
        [onnx.helper.make_tensor_value_info("y", 1, x.shape)],
        [onnx.numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"))])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), path)

    def conv(image, w):
        padded = np.pad(image, ((0, 0), (0, 0), (1, 1), (1, 1)))
        return sum(np.einsum("oc,nchw->nohw", w[:, :, i, j].astype(np.float64), padded[:, :, i : i + size, j : j + size])
                   for i in range(3) for j in range(3))

    r1 = np.maximum(conv(x.astype(np.float64), w1) + b1[None, :, None, None], 0)
    return x, conv(r1, w2) + (r1 if residual else 0)


@pytest.mark.parametrize("channels, size", [
    (16, 40),  # the row kernel: vectors of 16 cross the ends of rows of 40
    (24, 14),  # channel tiles over rows of 14 (the row kernel where AVX-512 is missing)
    (40, 7),  # channel tiles of two rows of 7
])
@pytest.mark.parametrize("residual", [False, True])
def test_a_conv_writes_the_padded_input_of_the_next(tmp_path, channels, size, residual):
    """conv -> relu -> conv: the first product (its bias and relu its epilogue) writes the
    interior of the second conv's padded input (c_frame), no pad copy between them;
    unless relu's output has another reader (a residual add), which keeps the copy.
    Against float64 numpy within fp32 rounding (atol 1e-5 of the output's range),
    outputs poisoned."""
    x, want = conv_relu_conv(tmp_path / "m.onnx", np.random.default_rng(channels * size), channels, size, residual)
    steps = pipelines.cpu_pipeline()
    lowered = run_pipeline(import_onnx(onnx.load(tmp_path / "m.onnx")), steps[: steps.index("assign-buffers")])
    gemms = [op for op in lowered.walk() if isinstance(op, loop.GemmOp)]
    copies = [op for op in lowered.walk() if isinstance(op, loop.NestOp) and op.nest_name.data.endswith("pad_copy")]
    assert [g.frame for g in gemms] == [None if residual else (1, 1, size, size), None]
    assert len(copies) == 1 + residual  # the input's pad copy (and relu's output's)
    out = np.full(x.shape, np.nan, np.float32)
    mlfuse.compile(str(tmp_path / "m.onnx"))(x, out=[out])
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-5 * np.abs(want).max())


def residual_block(path, rng, channels: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Save r = relu(conv(x)); y = conv(relu(conv(relu(conv(r))))) + r (3x3 convs with
    biases, a residual over two convs) as ONNX at `path`; (x, float64 numpy's y)."""
    x = rng.standard_normal((1, channels, size, size)).astype(np.float32)
    weights = [rng.standard_normal((channels, channels, 3, 3)).astype(np.float32) / channels for _ in range(4)]
    biases = [rng.standard_normal(channels).astype(np.float32) for _ in range(4)]
    node = onnx.helper.make_node
    nodes = [node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]), node("Relu", ["c0"], ["r"]),
             node("Conv", ["r", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), node("Relu", ["c1"], ["r1"]),
             node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]), node("Relu", ["c2"], ["r2"]),
             node("Conv", ["r2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]), node("Add", ["c3", "r"], ["y"])]
    inits = [onnx.numpy_helper.from_array(a, f"{n}{i}") for i, (w, b) in enumerate(zip(weights, biases)) for a, n in ((w, "w"), (b, "b"))]
    graph = onnx.helper.make_graph(nodes, "residual_block", [onnx.helper.make_tensor_value_info("x", 1, x.shape)],
                                   [onnx.helper.make_tensor_value_info("y", 1, x.shape)], inits)
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), path)

    def conv(image, i):
        padded = np.pad(image, ((0, 0), (0, 0), (1, 1), (1, 1)))
        return biases[i][None, :, None, None] + sum(
            np.einsum("oc,nchw->nohw", weights[i][:, :, a, b].astype(np.float64), padded[:, :, a : a + size, b : b + size])
            for a in range(3) for b in range(3))

    r = np.maximum(conv(x.astype(np.float64), 0), 0)
    return x, conv(np.maximum(conv(np.maximum(conv(r, 1), 0), 2), 0), 3) + r


@pytest.mark.parametrize("channels, size", [(16, 40), (24, 14), (40, 7)])
def test_a_residual_is_read_from_the_padded_input_it_became(tmp_path, channels, size):
    """A conv's output that the next conv reads padded and a later conv's epilogue reads
    as its residual: the product writes the padded images, the residual is read from
    their interior (Operand f<ow>x<wp>), and the images outlive that read (the arena
    would give their bytes to the convs between). No pad copy but the input's.
    Against float64 numpy within fp32 rounding (atol 1e-5 of the output's range),
    outputs poisoned."""
    x, want = residual_block(tmp_path / "m.onnx", np.random.default_rng(channels + size), channels, size)
    steps = pipelines.cpu_pipeline()
    lowered = run_pipeline(import_onnx(onnx.load(tmp_path / "m.onnx")), steps[: steps.index("assign-buffers")])
    gemms = [op for op in lowered.walk() if isinstance(op, loop.GemmOp)]
    copies = [op for op in lowered.walk() if isinstance(op, loop.NestOp) and op.nest_name.data.endswith("pad_copy")]
    assert [g.frame for g in gemms] == [(1, 1, size, size)] * 3 + [None] and len(copies) == 1
    assert kernel_epilogue(gemms[-1]).operands[-1].ow == size  # type: ignore[union-attr]
    out = np.full(x.shape, np.nan, np.float32)
    mlfuse.compile(str(tmp_path / "m.onnx"))(x, out=[out])
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("channels, size", [(64, 28), (128, 14)])  # downsamples big enough for loop.gemm
def test_a_downsample_reads_the_padded_input_it_became(tmp_path, channels, size):
    """ResNet's downsampling block: r = relu(conv(x) + b) is read by a 3x3 conv at stride 2
    (padded) and by a 1x1 downsample at stride 2; the product writes the padded images
    and the downsample's window runs over their interior (window_border). Against
    float64 numpy within fp32 rounding (atol 1e-5 of the output's range), outputs
    poisoned."""
    rng = np.random.default_rng(channels * size)
    x = rng.standard_normal((1, channels, size, size)).astype(np.float32)
    w0, w1, w2 = (rng.standard_normal((channels, channels, 3, 3)).astype(np.float32) / channels for _ in range(3))
    wd = rng.standard_normal((channels, channels, 1, 1)).astype(np.float32) / channels
    b0, b1, b2, bd = (rng.standard_normal(channels).astype(np.float32) for _ in range(4))
    node = onnx.helper.make_node
    nodes = [node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]), node("Relu", ["c0"], ["r"]),
             node("Conv", ["r", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]), node("Relu", ["c1"], ["r1"]),
             node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]), node("Conv", ["r", "wd", "bd"], ["d"], strides=[2, 2]),
             node("Add", ["c2", "d"], ["y"])]
    half = size // 2
    inits = [onnx.numpy_helper.from_array(a, n) for a, n in ((w0, "w0"), (w1, "w1"), (w2, "w2"), (wd, "wd"), (b0, "b0"), (b1, "b1"), (b2, "b2"), (bd, "bd"))]
    graph = onnx.helper.make_graph(nodes, "downsample", [onnx.helper.make_tensor_value_info("x", 1, x.shape)],
                                   [onnx.helper.make_tensor_value_info("y", 1, [1, channels, half, half])], inits)
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), tmp_path / "m.onnx")

    def conv(image, w, b, stride=1, pad=1):
        padded = np.pad(image, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        out = (padded.shape[-1] - w.shape[-1]) // stride + 1
        return b[None, :, None, None] + sum(
            np.einsum("oc,nchw->nohw", w[:, :, i, j].astype(np.float64), padded[:, :, i : i + stride * out : stride, j : j + stride * out : stride])
            for i in range(w.shape[2]) for j in range(w.shape[3]))

    r = np.maximum(conv(x.astype(np.float64), w0, b0), 0)
    want = conv(np.maximum(conv(r, w1, b1, 2), 0), w2, b2) + conv(r, wd, bd, 2, 0)
    steps = pipelines.cpu_pipeline()
    lowered = run_pipeline(import_onnx(onnx.load(tmp_path / "m.onnx")), steps[: steps.index("assign-buffers")])
    gemms = [op for op in lowered.walk() if isinstance(op, loop.GemmOp)]
    assert gemms[0].frame == (1, 1, size, size)
    assert [g.border for g in gemms if g.window_size == (1, 1)] == [(1, 1, 1, 1)]
    out = np.full((1, channels, half, half), np.nan, np.float32)
    mlfuse.compile(str(tmp_path / "m.onnx"))(x, out=[out])
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("channel_tiles", [True, False])
def test_3x3_conv_over_49_pixels_takes_channel_tiles_where_the_target_has_them(channel_tiles):
    """A dense 3x3 conv over a 7 x 7 image (ResNet-18's last stage) with constant weights:
    with channel tiles (convert-graph-to-loop{channel-tiles}) one w @ patches over the
    padded input, read in place, whose kernel runs along the output channels in tiles
    of two output rows (AVX-512; the row kernel elsewhere); without, the patches copied
    out for patches @ wt. The same bits either way (one fma chain in k order per
    element), and float64 numpy's within fp32 rounding of 432-term sums (atol 1e-5 of
    the output's range); bias, ReLU and a residual in the kernel, outputs poisoned."""
    module, _, (x, w, bias, r) = conv_block(True, True, image=(48, 7, 7), channels=64, seed=9)
    steps = pipelines.cpu_pipeline(channel_tiles=channel_tiles)
    lowered = run_pipeline(module.clone(), steps[: steps.index("loop-gemm-epilogue-fuse") + 1])
    (gemm,) = [op for op in lowered.walk() if isinstance(op, loop.GemmOp)]
    assert (gemm.window is not None) == channel_tiles
    patches = [op for op in lowered.walk() if isinstance(op, loop.NestOp) and "conv_patches" in op.nest_name.data]
    assert bool(patches) != channel_tiles
    outs = []
    for these in (steps, pipelines.cpu_pipeline(channel_tiles=not channel_tiles)):
        outs.append(np.full((1, 64, 7, 7), np.nan, np.float32))
        mlfuse.compile(module, passes=these)(x, r, out=[outs[-1]])
    np.testing.assert_array_equal(outs[0], outs[1])
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = sum(np.einsum("oc,nchw->nohw", w[:, :, i, j].astype(np.float64), xp[:, :, i : i + 7, j : j + 7])
               for i in range(3) for j in range(3))
    want = np.maximum(conv + bias[None, :, None, None] + r, 0)
    np.testing.assert_allclose(outs[0], want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_pointwise_conv_over_49_pixels_is_w_at_input():
    """A pointwise conv over a 7 x 7 image (MobileNetV2's last stage) is one w @ x product
    over its input, no patches copied out and no unpack (POINTWISE_NCHW_PRODUCT_MIN_PIXELS),
    its 49 columns a tile of 48 and a tail of one: bias, clip to [0, 6] and a residual in
    the kernel. Against float64 numpy within fp32 rounding of 64-term sums (atol 1e-5 of
    the output's range), outputs poisoned."""
    module, _, (x, w, bias, r) = conv_block(True, True, image=(64, 7, 7), channels=96, kernel=1, clip=True, seed=7)
    steps = pipelines.cpu_pipeline()
    lowered = run_pipeline(module.clone(), steps[: steps.index("loop-gemm-epilogue-fuse") + 1])
    (gemm,) = [op for op in lowered.walk() if isinstance(op, loop.GemmOp)]
    assert [t.get_shape() for t in (gemm.a.type, gemm.b.type, gemm.c.type)] == [(1, 96, 64), (1, 64, 49), (1, 96, 49)]
    assert not [op for op in lowered.walk() if isinstance(op, loop.NestOp)]
    out = np.full((1, 96, 7, 7), np.nan, np.float32)
    mlfuse.compile(module)(x, r, out=[out])
    conv = np.einsum("oc,nchw->nohw", w[:, :, 0, 0].astype(np.float64), x.astype(np.float64))
    want = np.minimum(np.maximum(conv + bias[None, :, None, None], 0), 6) + r
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_a_value_the_epilogue_uses_twice_is_computed_once():
    """A 1x1 conv 32 -> 64 over 14 x 14 + bias + Clip(0, 6) (MobileNetV2's expand): the epilogue keeps c + bias
    and its ReLU in slots (p0, p1) and reads them back (g0, g1) instead of writing c + bias
    out four times; the kernel's result is the nest's bit for bit."""
    rng = np.random.default_rng(29)
    x = rng.standard_normal((1, 32, 14, 14)).astype(np.float32) * 3
    w = rng.standard_normal((64, 32, 1, 1)).astype(np.float32)
    bias = rng.standard_normal(64).astype(np.float32)
    b = GraphBuilder()
    y = b.conv2d(b.input("x", x.shape, "f32"), b.constant(w, "f32"), [1, 1], [0] * 4, [1, 1], 1)
    y = y + b.broadcast_to(b.constant(bias, "f32").reshape(1, 64, 1, 1), y.shape)
    b.output(b.minimum(b.maximum(y, 0.0), 6.0))
    module = b.module()
    steps = pipelines.cpu_pipeline()
    lowered = run_pipeline(module.clone(), steps[: steps.index("loop-gemm-epilogue-fuse") + 1])
    (gemm,) = [op for op in lowered.walk() if isinstance(op, loop.GemmOp)]
    program = kernel_epilogue(gemm).program  # type: ignore[union-attr]
    assert program[:4] == ("c", "i0", "add", "p0") and program.count("add") == 1 and "g0" in program, program
    out = np.full((1, 64, 14, 14), np.nan, np.float32)
    mlfuse.compile(module)(x, out=[out])
    (nest,) = mlfuse.compile(module, passes=[s for s in steps if s != "loop-gemm-epilogue-fuse"])(x)
    np.testing.assert_array_equal(out, nest)
    assert 0 < (out == 6).mean() < 1 and 0 < (out == 0).mean() < 1
