"""ONNX DeformConv (2-D): a convolution whose every tap reads X at its own offset.

As onnx's reference computes it, output position (i, j) and kernel tap (a, b) of offset
group g sample X bilinearly (zero outside the image) at

    h = i * stride_h - pad_top + a * dilation_h + offset[n, g, a, b, 0, i, j]
    w = j * stride_w - pad_left + b * dilation_w + offset[n, g, a, b, 1, i, j]

times mask[n, g, a, b, i, j]; the samples of all taps are the columns of an im2col, and
the convolution is their product with the weights (per group), plus the bias. The
sampling is GridSample's (onnx_grid_sample.axis_taps and sampled): per tap combination
one GatherElements of each offset group's flattened image.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import f32
from xdsl.ir import SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, fmt_shape, shape_of
from mlfuse.frontend.onnx_composite import composite, float_input
from mlfuse.frontend.onnx_grid_sample import axis_taps, sampled
from mlfuse.frontend.onnx_math import Ops
from mlfuse.frontend.onnx_ops import Node, Value, dense_from_numpy, matmul


@composite("DeformConv", attributes=("dilations", "group", "kernel_shape", "offset_group", "pads", "strides"))
def convert_deform_conv(node: Node) -> list[Value]:
    x, w, offset = float_input(node, 0), float_input(node, 1), float_input(node, 2)
    sx, sw, so = shape_of(x), shape_of(w), shape_of(offset)
    if len(sx) != 4 or len(sw) != 4 or len(so) != 4:
        raise node.error(f"only 2-D DeformConv is supported: X {fmt_shape(sx)}, W {fmt_shape(sw)}, offset {fmt_shape(so)}")
    n, c, height, width = sx
    m, per_group = sw[0], sw[1]
    kh, kw = node.int_list("kernel_shape", sw[2:], 2)
    sh, stw = node.int_list("strides", [1, 1], 2)
    dh, dw = node.int_list("dilations", [1, 1], 2)
    pads = node.int_list("pads", [0, 0, 0, 0], 4)
    groups, offset_groups = int(node.attr("group", 1)), int(node.attr("offset_group", 1))
    oh, ow = so[2:]
    taps = kh * kw
    if (c != per_group * groups or m % groups or c % offset_groups or so[:2] != (n, offset_groups * taps * 2)
            or (oh, ow) != ((height + pads[0] + pads[2] - (kh - 1) * dh - 1) // sh + 1,
                            (width + pads[1] + pads[3] - (kw - 1) * dw - 1) // stw + 1)):
        raise node.error(f"X {fmt_shape(sx)}, W {fmt_shape(sw)} and offset {fmt_shape(so)} do not fit group {groups}, "
                         f"offset_group {offset_groups}, kernel {kh}x{kw}, strides, dilations and pads")
    points = taps * oh * ow
    batches = n * offset_groups  # each offset group's channels sample at their own points
    o = Ops(node, node.splat(0.0, f32, (batches, points)))
    moved = node.cast(node.reshape(offset, (batches, taps, 2, oh * ow)), f32)

    def position(axis: int, base: np.ndarray) -> SSAValue:
        along = node.reshape(node.emit(graph.SliceOp(moved, [0, 0, axis, 0], [batches, taps, axis + 1, oh * ow])),
                             (batches, points))
        return o.add(along, node.emit(graph.ConstantOp(dense_from_numpy(
            np.broadcast_to(base.reshape(1, points), (batches, points)).astype(np.float32), f32))))

    a, b, i, j = np.meshgrid(np.arange(kh), np.arange(kw), np.arange(oh), np.arange(ow), indexing="ij")
    rows = position(0, (i * sh - pads[0] + a * dh).astype(np.float64))
    cols = position(1, (j * stw - pads[1] + b * dw).astype(np.float64))
    channels = c // offset_groups
    flat = node.reshape(x, (batches, channels, height * width))
    wide = (batches, channels, points)
    samples = sampled(node, o, flat, [axis_taps(o, rows, height, width, "linear", "zeros", (0.0, height - 1.0)),
                                      axis_taps(o, cols, width, 1, "linear", "zeros", (0.0, width - 1.0))])
    if node.has_input(4):
        mask = node.reshape(float_input(node, 4), (batches, points))
        samples = node.emit(graph.MulOp(samples, node.emit(graph.BroadcastOp(node.cast(mask, element_type_of(x)), [0, 2], wide))))
    columns = node.reshape(samples, (n, groups, per_group * taps, oh * ow))
    weights = node.reshape(w, (groups, m // groups, per_group * taps))
    y = node.reshape(matmul(node, weights, columns), (n, m, oh, ow))
    if node.has_input(3):
        bias = node.emit(graph.BroadcastOp(float_input(node, 3), [1], (n, m, oh, ow)))
        y = node.emit(graph.AddOp(y, bias))
    return [y]
