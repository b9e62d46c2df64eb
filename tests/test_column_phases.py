"""Window nests with a column stride of 2-4 read their padded input in column phases
(graph_to_loop.pad_column_phases): compiled convs and pools against the reference, over
strides, asymmetric pads, rows shorter than the stride, dilations (no phases) and odd
sizes, with the outputs poisoned first. The sums run in the reference's tap order but
not its association (einsum), hence the tolerances."""

from __future__ import annotations

import numpy as np
import pytest

import mlfuse
from mlfuse.api import aligned_empty

RNG = np.random.default_rng(20261204)


def poisoned(fn):
    outs = [aligned_empty(s.shape, s.dtype) for s in fn.outputs]
    for o in outs:
        o.fill(np.nan)
    return outs


def window_attrs(strides, pads, dilations) -> str:
    return (f"strides = array<i64: {strides[0]}, {strides[1]}>, pads = array<i64: {', '.join(map(str, pads))}>, "
            f"dilations = array<i64: {dilations[0]}, {dilations[1]}>")


def out_size(size, k, s, before, after, d):
    return (size + before + after - d * (k - 1) - 1) // s + 1


CASES = [
    # (N, C, H, W), (KH, KW), strides, pads [top, left, bottom, right], dilations
    ((1, 4, 9, 11), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ((2, 3, 8, 12), (3, 3), (2, 2), (0, 1, 1, 0), (1, 1)),
    ((1, 2, 7, 13), (5, 5), (2, 2), (2, 2, 2, 2), (1, 1)),
    ((1, 3, 6, 17), (3, 4), (1, 3), (1, 2, 0, 1), (1, 1)),
    ((1, 2, 9, 10), (2, 4), (3, 4), (0, 3, 2, 1), (1, 1)),
    ((1, 2, 5, 3), (3, 3), (2, 4), (1, 1, 1, 2), (1, 1)),  # a row shorter than the stride
    ((1, 2, 9, 12), (3, 3), (2, 2), (1, 1, 1, 1), (2, 2)),  # dilated: read in place
]


def conv_src(shape, kernel, strides, pads, dilations, groups, per_group_out) -> tuple[str, tuple]:
    n, c, h, w = shape
    o = groups * per_group_out
    oh = out_size(h, kernel[0], strides[0], pads[0], pads[2], dilations[0])
    ow = out_size(w, kernel[1], strides[1], pads[1], pads[3], dilations[1])
    x, wt, y = f"tensor<{n}x{c}x{h}x{w}xf32>", f"tensor<{o}x{c // groups}x{kernel[0]}x{kernel[1]}xf32>", f"tensor<{n}x{o}x{oh}x{ow}xf32>"
    src = f"""func.func @main(%x: {x}, %w: {wt}) -> {y} {{
  %y = graph.conv2d %x, %w {{groups = {groups} : i64, {window_attrs(strides, pads, dilations)}}} : ({x}, {wt}) -> {y}
  %r = graph.relu %y : {y}
  func.return %r : {y}
}}"""
    return src, (o, c // groups, *kernel)


@pytest.mark.parametrize("groups_of", ["depthwise", "multiplier", "grouped"])
@pytest.mark.parametrize("shape, kernel, strides, pads, dilations", CASES)
def test_direct_convs(shape, kernel, strides, pads, dilations, groups_of):
    c = shape[1]
    # grouped: two input channels per group (a dense conv where C is odd: a product)
    groups, per_group_out = {"depthwise": (c, 1), "multiplier": (c, 2), "grouped": (max(1, c // 2), 3)}[groups_of]
    src, w_shape = conv_src(shape, kernel, strides, pads, dilations, groups, per_group_out)
    x = RNG.standard_normal(shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    fn = mlfuse.compile(src)
    outs = poisoned(fn)
    fn(x, w, out=outs)
    np.testing.assert_allclose(outs[0], mlfuse.reference(src)(x, w)[0], rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("kind", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("shape, kernel, strides, pads, dilations", CASES)
def test_pools(shape, kernel, strides, pads, dilations, kind):
    if kind == "avg_pool2d" and dilations != (1, 1):
        pytest.skip("average pooling has no dilations")
    if any(p >= k for p, k in zip(pads[:2], kernel)) or any(p >= k for p, k in zip(pads[2:], kernel)):
        pytest.skip("a window of padding only")
    n, c, h, w = shape
    oh = out_size(h, kernel[0], strides[0], pads[0], pads[2], dilations[0])
    ow = out_size(w, kernel[1], strides[1], pads[1], pads[3], dilations[1])
    x_t, y_t = f"tensor<{n}x{c}x{h}x{w}xf32>", f"tensor<{n}x{c}x{oh}x{ow}xf32>"
    attrs = window_attrs(strides, pads, dilations) if kind == "max_pool2d" else window_attrs(strides, pads, (1, 1)).split(", dilations")[0]
    src = f"""func.func @main(%x: {x_t}) -> {y_t} {{
  %y = graph.{kind} %x {{kernel = array<i64: {kernel[0]}, {kernel[1]}>, {attrs}}} : {x_t} -> {y_t}
  func.return %y : {y_t}
}}"""
    # below zero: a maximum over zero padding would show
    x = (RNG.standard_normal(shape) - 3).astype(np.float32)
    fn = mlfuse.compile(src)
    outs = poisoned(fn)
    fn(x, out=outs)
    np.testing.assert_allclose(outs[0], mlfuse.reference(src)(x)[0], rtol=2e-6, atol=1e-6)
