"""ONNX GridSample: X (N, C, *S) sampled at the normalized points of grid (N, *O, r);
and RoiAlign, whose bilinear taps are constants when its rois are (convert_roi_align).

The last axis of grid holds one coordinate per spatial axis of X, innermost first
(x for W, y for H, z for D). As onnx's reference evaluator does, per spatial axis of
size d:

    p = (g + 1) / 2 (d - 1)           align_corners = 1
    p = ((g + 1) d - 1) / 2           align_corners = 0
    nearest: p = round(p), halves to even
    outside [lo, hi] ([0, d - 1], or [-0.5, d - 0.5] without align_corners):
        border: p clamped to [0, d - 1] (not for cubic, as onnxruntime and PyTorch
        do; the reference clamps there too, and the cubic taps then differ);
        reflection: p reflected into [lo, hi]

The taps along the axis are floor(p) + {0, 1} (linear, weights 1 - t and t with
t = p - floor(p)), floor(p) + {-1, 0, 1, 2} (cubic, Keys' weights with a = -0.75), or
p itself (nearest). A tap outside [0, d - 1] reads 0 (zeros), the nearest end (border)
or its reflection (reflection). Each output point is the sum over every combination of
one tap per axis of the product of the taps' weights and X at that position: one
GatherElements of X's flattened spatial axes per combination.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from xdsl.dialects.builtin import f32, i1, i64
from xdsl.ir import SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, fmt_shape, shape_of
from mlfuse.frontend.onnx_composite import composite, float_input, opset_of
from mlfuse.frontend.onnx_math import Ops
from mlfuse.frontend.onnx_ops import Node, Value, dense_from_numpy, slice_axis

CUBIC_A = -0.75
MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic", "nearest": "nearest"}


class Tap(NamedTuple):
    """One tap along one spatial axis: the flat index's term, its weight (None: 1), and
    whether it lies inside the axis (None: always)."""

    offset: SSAValue
    weight: SSAValue | None
    inside: SSAValue | None


def reflect(o: Ops, p: SSAValue, lo: float, hi: float) -> SSAValue:
    """p reflected by the nearer bound until it lies in [lo, hi] (onnx's _gs_reflect)."""
    span = hi - lo
    if span == 0:
        return o.c(lo)
    below, above = o.less(p, o.c(lo)), o.less(o.c(hi), p)
    distance = o.where(below, o.sub(o.c(lo), p), o.sub(p, o.c(hi)))
    folds = o.unary(graph.FloorOp, o.div(distance, o.c(span)))
    rest = o.sub(distance, o.mul(folds, o.c(span)))
    even = o.emit(graph.CompareOp("eq", o.emit(graph.RemOp(folds, o.c(2.0))), o.c(0.0)))
    from_below = o.where(even, o.add(o.c(lo), rest), o.sub(o.c(hi), rest))
    from_above = o.where(even, o.sub(o.c(hi), rest), o.add(o.c(lo), rest))
    return o.where(below, from_below, o.where(above, from_above, p))


def clamp(o: Ops, p: SSAValue, lo: float, hi: float) -> SSAValue:
    return o.emit(graph.MinOp(o.emit(graph.MaxOp(p, o.c(lo))), o.c(hi)))


def cubic_weights(o: Ops, t: SSAValue) -> list[SSAValue]:
    """Keys' cubic convolution weights of the taps at -1, 0, 1 and 2 for t in [0, 1)."""
    a = CUBIC_A

    def outer(x: SSAValue) -> SSAValue:  # |x| in [1, 2]
        return o.sub(o.mul(o.add(o.mul(o.sub(o.mul(o.c(a), x), o.c(5 * a)), x), o.c(8 * a)), x), o.c(4 * a))

    def inner(x: SSAValue) -> SSAValue:  # |x| in [0, 1]
        return o.add(o.mul(o.mul(o.sub(o.mul(o.c(a + 2), x), o.c(a + 3)), x), x), o.c(1.0))

    one_minus = o.sub(o.c(1.0), t)
    return [outer(o.add(t, o.c(1.0))), inner(t), inner(one_minus), outer(o.sub(o.c(2.0), t))]


def axis_taps(o: Ops, p: SSAValue, d: int, stride: int, mode: str, padding: str, bounds: tuple[float, float]) -> list[Tap]:
    """The taps along one spatial axis of size d (flat stride `stride`) for positions p."""
    if mode == "nearest":
        base, offsets, weights = p, [0], [None]
    else:
        base = o.unary(graph.FloorOp, p)
        t = o.sub(p, base)
        if mode == "linear":
            offsets, weights = [0, 1], [o.sub(o.c(1.0), t), t]
        else:
            offsets, weights = [-1, 0, 1, 2], cubic_weights(o, t)
    taps = []
    for offset, weight in zip(offsets, weights):
        i = o.add(base, o.c(float(offset))) if offset else base
        inside = None
        if padding == "zeros":
            inside = o.emit(graph.SelectOp(o.less(i, o.c(0.0)), o.node.splat(False, i1, shape_of(i)),
                                           o.emit(graph.CompareOp("le", i, o.c(d - 1.0)))))
        elif padding == "reflection":
            i = o.unary(graph.FloorOp, reflect(o, i, *bounds))  # integral already; floor as int() truncates
        index = o.node.cast(clamp(o, i, 0.0, d - 1.0), i64)
        term = o.emit(graph.MulOp(index, o.node.scalar_like(stride, index))) if stride != 1 else index
        taps.append(Tap(term, weight, inside))
    return taps


def positions(o: Ops, grid: SSAValue, k: int, d: int, align: bool, mode: str, padding: str) -> SSAValue:
    """The positions along spatial axis k, from component rank - 1 - k of grid (N, Q, rank),
    in float32 as onnx's reference computes them."""
    n, q, rank = shape_of(grid)
    g = o.node.cast(o.node.reshape(slice_axis(o.node, grid, 2, rank - 1 - k, rank - k), (n, q)), f32)
    if align:
        p = o.mul(o.mul(o.add(g, o.c(1.0)), o.c(0.5)), o.c(d - 1.0))
    else:
        p = o.mul(o.sub(o.mul(o.add(g, o.c(1.0)), o.c(float(d))), o.c(1.0)), o.c(0.5))
    if mode == "nearest":
        p = o.unary(graph.RoundOp, p)
    lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
    if padding == "border" and mode != "cubic":
        outside = o.emit(graph.SelectOp(o.less(p, o.c(lo)), o.node.splat(True, i1, shape_of(p)), o.less(o.c(hi), p)))
        p = o.where(outside, clamp(o, p, 0.0, d - 1.0), p)
    elif padding == "reflection":
        p = reflect(o, p, lo, hi)
    return p


def product(o: Ops, values: Sequence[SSAValue | None]) -> SSAValue | None:
    """The product of the weights given (None: no weight, nearest's taps)."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    result = present[0]
    for v in present[1:]:
        result = o.mul(result, v)
    return result


@composite("GridSample", attributes=("align_corners", "mode", "padding_mode"))
def convert_grid_sample(node: Node) -> list[Value]:
    x, grid = float_input(node, 0), float_input(node, 1)
    sx, sg = shape_of(x), shape_of(grid)
    rank = len(sx) - 2
    if rank < 1 or len(sg) != rank + 2 or sg[0] != sx[0] or sg[-1] != rank:
        raise node.error(f"grid of shape {fmt_shape(sg)} does not fit X of shape {fmt_shape(sx)}: expected "
                         f"(N, *output, {rank}) with N = {sx[0]}")
    default_mode = "bilinear" if opset_of(node) < 20 else "linear"
    mode = MODES.get(node.attr("mode", default_mode), "")
    padding = node.attr("padding_mode", "zeros")
    if not mode or padding not in ("zeros", "border", "reflection"):
        raise node.error(f"mode \"{node.attr('mode', default_mode)}\" with padding_mode \"{padding}\" is not supported")
    align = bool(node.attr("align_corners", 0))
    n, c, spatial, out = sx[0], sx[1], sx[2:], sg[1:-1]
    q = math.prod(out)
    points = node.reshape(grid, (n, q, rank))
    o = Ops(node, node.splat(0.0, f32, (n, q)))  # constants of the points' shape
    strides = [math.prod(spatial[k + 1:]) for k in range(rank)]
    taps = []
    for k, d in enumerate(spatial):
        bounds = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
        p = positions(o, points, k, d, align, mode, padding)
        taps.append(axis_taps(o, p, d, strides[k], mode, padding, bounds))
    total = sampled(node, o, node.reshape(x, (n, c, math.prod(spatial))), taps)
    return [node.reshape(total, (n, c, *out))]


def sampled(node: Node, o: Ops, flat: SSAValue, taps: Sequence[Sequence[Tap]]) -> SSAValue:
    """The interpolated samples of images `flat` (N, C, pixels) at points (N, Q) whose taps
    along each spatial axis are `taps`: per combination of one tap per axis, a
    GatherElements of the pixels at the summed offsets, zero where a tap lies outside,
    times the product of the taps' weights; summed over the combinations. (N, C, Q)."""
    n, c, _ = shape_of(flat)
    wide = (n, c, shape_of(taps[0][0].offset)[1])
    total = None
    for combination in itertools.product(*taps):
        index = combination[0].offset
        for tap in combination[1:]:
            index = node.emit(graph.AddOp(index, tap.offset))
        value = node.emit(graph.GatherElementsOp(flat, node.emit(graph.BroadcastOp(index, [0, 2], wide)), 2))
        for mask in (t.inside for t in combination if t.inside is not None):
            value = node.emit(graph.SelectOp(node.emit(graph.BroadcastOp(mask, [0, 2], wide)), value,
                                             node.scalar_like(0.0, value)))
        weight = product(o, [t.weight for t in combination])
        if weight is not None:
            weight = node.cast(node.emit(graph.BroadcastOp(weight, [0, 2], wide)), element_type_of(flat))
            value = node.emit(graph.MulOp(value, weight))
        total = value if total is None else node.emit(graph.AddOp(total, value))
    assert total is not None
    return total


ROI_SAMPLES_MAX = 1 << 22  # gathered taps (rois x bins x samples x 4 corners)


def roi_taps(rois: np.ndarray, height: int, width: int, out_h: int, out_w: int, sampling_ratio: int,
             scale: float, half_pixel: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """RoiAlign's bilinear taps as onnx's reference (and onnxruntime) computes them, per roi
    (r), bin (p), sample (s) and corner: flat positions in the image, weights, whether the
    sample exists (rois sample grids of different sizes are padded), and each roi's count."""
    offset = 0.5 if half_pixel else 0.0
    grids = []
    for x1, y1, x2, y2 in rois.astype(np.float64) * scale - offset:
        roi_w, roi_h = x2 - x1, y2 - y1
        if not half_pixel:  # malformed rois are 1x1
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        grid_h = sampling_ratio if sampling_ratio > 0 else int(np.ceil(roi_h / out_h))
        grid_w = sampling_ratio if sampling_ratio > 0 else int(np.ceil(roi_w / out_w))
        grids.append((y1, x1, roi_h / out_h, roi_w / out_w, grid_h, grid_w))
    samples = max(1, max(g[4] * g[5] for g in grids))
    shape = (len(rois), out_h * out_w, samples, 4)
    positions, weights, exists = np.zeros(shape, np.int64), np.zeros(shape), np.zeros(shape[:3], bool)
    counts = np.array([max(g[4] * g[5], 1) for g in grids], np.float64)
    for r, (y0, x0, bin_h, bin_w, grid_h, grid_w) in enumerate(grids):
        for p, (ph, pw) in enumerate(np.ndindex(out_h, out_w)):
            for s, (iy, ix) in enumerate(np.ndindex(grid_h, grid_w)):
                exists[r, p, s] = True
                y = y0 + ph * bin_h + (iy + 0.5) * bin_h / grid_h
                x = x0 + pw * bin_w + (ix + 0.5) * bin_w / grid_w
                if y < -1.0 or y > height or x < -1.0 or x > width:
                    continue  # outside: zero weights at position 0
                y, x = max(y, 0.0), max(x, 0.0)
                y_low, x_low = int(y), int(x)
                y_high, x_high = y_low + 1, x_low + 1
                if y_low >= height - 1:
                    y_high = y_low = height - 1
                    y = float(y_low)
                if x_low >= width - 1:
                    x_high = x_low = width - 1
                    x = float(x_low)
                ly, lx = y - y_low, x - x_low
                positions[r, p, s] = [y_low * width + x_low, y_low * width + x_high, y_high * width + x_low,
                                      y_high * width + x_high]
                weights[r, p, s] = [(1 - ly) * (1 - lx), (1 - ly) * lx, ly * (1 - lx), ly * lx]
    return positions, weights, exists, counts


@composite("RoiAlign", attributes=("coordinate_transformation_mode", "mode", "output_height", "output_width",
                                   "sampling_ratio", "spatial_scale"), static_inputs=(1, 2))
def convert_roi_align(node: Node) -> list[Value]:
    """Each roi's bins sampled bilinearly (a grid of samples per bin, each four weighted
    taps) and averaged or maxed. The rois and their batch indices must be known at compile
    time: the taps are then constants, and the op is one gather of the image's pixels
    (channels last), weighted, and a sum or max over each bin's taps."""
    x = float_input(node)
    n, c, height, width = shape_of(x) if len(shape_of(x)) == 4 else (0, 0, 0, 0)
    rois, batch = node.const_input(1, "rois"), node.const_input(2, "batch_indices")
    assert rois is not None and batch is not None
    if not n or rois.ndim != 2 or rois.shape[1] != 4 or batch.shape != (rois.shape[0],) or np.any((batch < 0) | (batch >= n)):
        raise node.error(f"X {fmt_shape(shape_of(x))}, rois {list(rois.shape)} and batch_indices {batch.tolist()} "
                         "must be N x C x H x W, R x 4 and R indices of N")
    mode = str(node.attr("mode", "avg")).lower()
    transform = str(node.attr("coordinate_transformation_mode", "half_pixel" if opset_of(node) >= 16 else "output_half_pixel"))
    if mode not in ("avg", "max") or transform not in ("half_pixel", "output_half_pixel"):
        raise node.error(f"mode '{mode}' or coordinate_transformation_mode '{transform}' is not supported")
    out_h, out_w = int(node.attr("output_height", 1)), int(node.attr("output_width", 1))
    positions, weights, exists, counts = roi_taps(rois, height, width, out_h, out_w, int(node.attr("sampling_ratio", 0)),
                                                  float(node.attr("spatial_scale", 1.0)), transform == "half_pixel")
    if positions.size > ROI_SAMPLES_MAX:
        raise node.error(f"{positions.size} taps are more than mlfuse gathers ({ROI_SAMPLES_MAX})")
    r, p, s, _ = positions.shape
    el = element_type_of(x)
    pixels = node.reshape(node.emit(graph.TransposeOp(x, [0, 2, 3, 1])), (n * height * width, c))
    flat = (positions + (batch.astype(np.int64) * height * width)[:, None, None, None]).reshape(r, p, s * 4)
    taps = node.emit(graph.GatherOp(pixels, node.emit(graph.ConstantOp(dense_from_numpy(flat, i64))), 0))
    tapped = (r, p, s * 4, c)
    weight = node.emit(graph.ConstantOp(dense_from_numpy(weights.reshape(r, p, s * 4).astype(graph.numpy_dtype(el)), el)))
    values = node.emit(graph.MulOp(taps, node.emit(graph.BroadcastOp(weight, [0, 1, 2], tapped))))
    if mode == "avg":
        total = node.emit(graph.ReduceSumOp(values, [2]))
        share = node.emit(graph.ConstantOp(dense_from_numpy((1 / counts).astype(graph.numpy_dtype(el)), el)))
        pooled = node.emit(graph.MulOp(total, node.emit(graph.BroadcastOp(share, [0], (r, p, c)))))
    else:
        real = node.emit(graph.ConstantOp(dense_from_numpy(np.repeat(exists, 4, axis=2), i1)))
        values = node.emit(graph.SelectOp(node.emit(graph.BroadcastOp(real, [0, 1, 2], tapped)), values,
                                          node.splat(-np.inf, el, tapped)))
        pooled = node.emit(graph.ReduceMaxOp(values, [2]))
    return [node.reshape(node.emit(graph.TransposeOp(pooled, [0, 2, 1])), (r, c, out_h, out_w))]
