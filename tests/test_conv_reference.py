"""Reference semantics of graph.conv2d, graph.max_pool2d and graph.avg_pool2d.

The numpy reference (sliding windows + einsum) is checked against a direct
definition that loops over output pixels, on small random inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.builder import ImplicitBuilder
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32, f64, i32
from xdsl.utils.exceptions import VerifyException

from mlfuse.dialects import graph
from mlfuse.reference import reference

RNG = np.random.default_rng(0)


def run_single(build, inputs: list[np.ndarray], element_type=f32) -> np.ndarray:
    """Wrap one op built by `build(*args)` in @main and evaluate it with the reference."""
    types = [TensorType(element_type, list(a.shape)) for a in inputs]
    fn = func.FuncOp("main", (types, []))
    with ImplicitBuilder(fn.body.block) as args:
        op = build(*args)
        func.ReturnOp(op.result)
    fn.function_type = func.FunctionType.from_lists(types, [op.result.type])
    module = ModuleOp([fn])
    module.verify()
    (out,) = reference(module)(*inputs)
    assert out.shape == graph.shape_of(op.result)
    return out


def padded(x, pads, value):
    top, left, bottom, right = pads
    return np.pad(x, [(0, 0), (0, 0), (top, bottom), (left, right)], constant_values=value)


def direct_windows(x, kernel, strides, pads, dilations, value):
    """Yield (i, j, window[N, C, KH, KW]) for every output pixel."""
    xp = padded(x, pads, value)
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    for i in range(oh):
        for j in range(ow):
            rows = i * sh + dh * np.arange(kh)
            cols = j * sw + dw * np.arange(kw)
            yield i, j, oh, ow, xp[:, :, rows[:, None], cols[None, :]]


def direct_conv(x, w, strides, pads, dilations, groups):
    n, c = x.shape[:2]
    o, cg, kh, kw = w.shape
    out = None
    for i, j, oh, ow, win in direct_windows(x, (kh, kw), strides, pads, dilations, 0):
        if out is None:
            out = np.zeros((n, o, oh, ow), np.float64)
        for oc in range(o):
            g = oc // (o // groups)
            out[:, oc, i, j] = np.sum(
                win[:, g * cg : (g + 1) * cg].astype(np.float64) * w[oc].astype(np.float64),
                axis=(1, 2, 3),
            )
    return out


CONV_CASES = [
    # (N, C, H, W), (O, KH, KW), strides, pads, dilations, groups
    ((1, 3, 8, 8), (4, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 3, 9, 7), (5, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    ((1, 2, 7, 9), (3, 3, 2), (1, 2), (0, 1, 2, 0), (2, 1), 1),
    ((1, 6, 6, 6), (4, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 2),
    ((2, 8, 6, 5), (8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 8),  # depthwise
    ((1, 4, 10, 10), (8, 3, 3), (3, 2), (2, 0, 1, 2), (2, 3), 4),
]


@pytest.mark.parametrize("in_shape, w_shape, strides, pads, dilations, groups", CONV_CASES)
def test_conv2d_matches_direct_definition(in_shape, w_shape, strides, pads, dilations, groups):
    x = RNG.standard_normal(in_shape).astype(np.float32)
    o, kh, kw = w_shape
    w = RNG.standard_normal((o, in_shape[1] // groups, kh, kw)).astype(np.float32)
    out = run_single(lambda a, b: graph.Conv2dOp(a, b, strides, pads, dilations, groups), [x, w])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, direct_conv(x, w, strides, pads, dilations, groups), rtol=1e-5, atol=1e-5)


def test_conv2d_f64_keeps_dtype():
    x = RNG.standard_normal((1, 2, 5, 5))
    w = RNG.standard_normal((3, 2, 2, 2))
    out = run_single(lambda a, b: graph.Conv2dOp(a, b), [x, w], element_type=f64)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, direct_conv(x, w, (1, 1), (0,) * 4, (1, 1), 1), rtol=1e-12)


POOL_CASES = [
    # (N, C, H, W), kernel, strides, pads, dilations
    ((1, 3, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1)),
    ((2, 2, 9, 9), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ((1, 2, 7, 6), (3, 2), (1, 2), (2, 0, 1, 1), (1, 1)),
    ((1, 2, 9, 9), (2, 3), (1, 1), (1, 2, 0, 1), (2, 2)),
    ((2, 1, 5, 5), (5, 5), (1, 1), (0, 0, 0, 0), (1, 1)),  # global
]


@pytest.mark.parametrize("in_shape, kernel, strides, pads, dilations", POOL_CASES)
def test_max_pool2d_matches_direct_definition(in_shape, kernel, strides, pads, dilations):
    # all-negative inputs: a zero-padded maximum would be visibly wrong
    x = -np.abs(RNG.standard_normal(in_shape)).astype(np.float32) - 0.5
    out = run_single(lambda a: graph.MaxPool2dOp(a, kernel, strides, pads, dilations), [x])
    expected = np.empty_like(out)
    for i, j, _, _, win in direct_windows(x, kernel, strides, pads, dilations, -np.inf):
        expected[:, :, i, j] = win.max(axis=(2, 3))
    np.testing.assert_array_equal(out, expected)
    assert np.all(np.isfinite(out))


def test_max_pool2d_on_integers():
    x = RNG.integers(-1000, -1, (1, 2, 6, 6)).astype(np.int32)
    out = run_single(lambda a: graph.MaxPool2dOp(a, (3, 3), (2, 2), (1, 1, 1, 1)), [x], element_type=i32)
    assert out.dtype == np.int32
    expected = np.empty_like(out)
    for i, j, _, _, win in direct_windows(x, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), np.iinfo(np.int32).min):
        expected[:, :, i, j] = win.max(axis=(2, 3))
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("in_shape, kernel, strides, pads, dilations", POOL_CASES)
def test_avg_pool2d_matches_direct_definition(in_shape, kernel, strides, pads, dilations, count_include_pad):
    x = RNG.standard_normal(in_shape).astype(np.float32) + 2.0
    out = run_single(
        lambda a: graph.AvgPool2dOp(a, kernel, strides, pads, dilations, count_include_pad), [x]
    )
    assert out.dtype == np.float32
    expected = np.empty(out.shape, np.float64)
    inside = np.ones((1, 1, *in_shape[2:]))
    windows = zip(
        direct_windows(x, kernel, strides, pads, dilations, 0),
        direct_windows(inside, kernel, strides, pads, dilations, 0),
    )
    for (i, j, _, _, win), (_, _, _, _, mask) in windows:
        count = kernel[0] * kernel[1] if count_include_pad else mask.sum(axis=(2, 3))
        expected[:, :, i, j] = win.sum(axis=(2, 3)) / count
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_avg_pool2d_padding_changes_the_divisor():
    x = np.full((1, 1, 2, 2), 3.0, np.float32) + RNG.random((1, 1, 2, 2), np.float32)
    include = run_single(lambda a: graph.AvgPool2dOp(a, (2, 2), (1, 1), (1, 1, 0, 0), count_include_pad=True), [x])
    exclude = run_single(lambda a: graph.AvgPool2dOp(a, (2, 2), (1, 1), (1, 1, 0, 0)), [x])
    # the top-left window holds only x[0, 0] and three padded zeros
    assert exclude[0, 0, 0, 0] == pytest.approx(x[0, 0, 0, 0])
    assert include[0, 0, 0, 0] == pytest.approx(x[0, 0, 0, 0] / 4)


def test_builders_omit_default_properties():
    x = func.FuncOp("f", ([TensorType(f32, [1, 4, 6, 6]), TensorType(f32, [4, 1, 3, 3])], []))
    a, w = x.body.block.args
    conv = graph.Conv2dOp(a, w, pads=(1, 1, 1, 1), groups=4)
    assert set(conv.properties) == {"pads", "groups"}
    assert graph.shape_of(conv.result) == (1, 4, 6, 6)
    assert conv.stride_values == (1, 1) and conv.dilation_values == (1, 1) and conv.group_count == 4
    pool = graph.AvgPool2dOp(a, (2, 2), strides=(2, 2), count_include_pad=True)
    assert set(pool.properties) == {"kernel", "strides", "count_include_pad"}
    assert graph.shape_of(pool.result) == (1, 4, 3, 3)


def test_verifier_rejects_grouping_mismatch():
    fn = func.FuncOp("f", ([TensorType(f32, [1, 6, 6, 6]), TensorType(f32, [4, 2, 3, 3])], []))
    a, w = fn.body.block.args
    with pytest.raises(VerifyException, match="groups = 4 must divide both the 6 input channels"):
        graph.Conv2dOp(a, w, groups=4).verify()
