"""Scatters whose indices come at run time, as gathers by their structure.

onnx_scatter.py turns a scatter with constant indices into a gather of the updates. Two
ONNX scatters write where run-time indices say, but each output element can work out
which input could have been written to it, and check the index:

TensorScatter (a KV cache update): update rows land at write_indices[b] + s along the
sequence axis, so cache position p reads update row p - write_indices[b] (mod the
cache's length when circular) when that row exists, else the past cache:

    offset = p - w[b]              (circular: numpy's mod max_sequence_length)
    present = select(0 <= offset < sequence_length, gather_elements(update, clamp(offset)), past)

MaxUnpool: X and the flat indices I come from a MaxPool, so I[j] lies in window j. An
output position o lies in at most prod(ceil(k / s)) windows (one without overlap); it
takes X[j] for a window j holding it whose index is o, else 0 (every such window took the
same element's value):

    out = 0; for each candidate t: out = select(valid_t & (I[j_t(o)] == o), X[j_t(o)], out)

where j_t and valid_t are compile-time maps of the pooling geometry. Indices that did not
come from such a MaxPool (outside their window) are not written. A larger output_shape
gets the unpooled result padded with zeros at the end, as onnx's reference gives (and
its node test expects; onnxruntime scatters into output_shape's flat positions instead).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from xdsl.dialects.builtin import i1, i64
from xdsl.ir import Attribute, SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, fmt_shape, shape_of
from mlfuse.frontend.onnx_composite import composite
from mlfuse.frontend.onnx_ops import Node, Value, dense_from_numpy, normalize_axis, same_element_type


def constant(node: Node, array: np.ndarray, el: Attribute = i64) -> SSAValue:
    return node.emit(graph.ConstantOp(dense_from_numpy(array, el)))


@composite("TensorScatter", attributes=("axis", "mode"))
def convert_tensor_scatter(node: Node) -> list[Value]:
    past, update = node.input(0), node.input(1)
    same_element_type(node, past, update)
    shape, rows = shape_of(past), shape_of(update)
    axis = normalize_axis(node, int(node.attr("axis", -2)), len(shape))
    mode = node.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise node.error(f"mode must be 'linear' or 'circular', got '{mode}'")
    if axis == 0 or len(rows) != len(shape) or rows[axis] > shape[axis] or any(
            r != s for d, (r, s) in enumerate(zip(rows, shape)) if d != axis):
        raise node.error(f"update {fmt_shape(rows)} does not fit the cache {fmt_shape(shape)} along axis {axis} "
                         "(the batch axis 0 may not be the sequence axis)")
    length, count = shape[axis], rows[axis]
    positions = node.emit(graph.BroadcastOp(constant(node, np.arange(length, dtype=np.int64)), [axis], shape))
    offset = positions
    if node.has_input(2):
        written_at = node.cast(node.input(2), i64)
        if shape_of(written_at) != (shape[0],):
            raise node.error(f"write_indices of shape {fmt_shape(shape_of(written_at))} must hold one index per "
                             f"batch entry ({shape[0]})")
        offset = node.emit(graph.SubOp(positions, node.emit(graph.BroadcastOp(written_at, [0], shape))))
    if mode == "circular":
        offset = node.emit(graph.RemOp(offset, node.splat(length, i64, shape)))
    inside = node.emit(graph.SelectOp(node.emit(graph.CompareOp("ge", offset, node.splat(0, i64, shape))),
                                      node.emit(graph.CompareOp("lt", offset, node.splat(count, i64, shape))),
                                      node.splat(False, i1, shape)))
    row = node.emit(graph.MinOp(node.emit(graph.MaxOp(offset, node.splat(0, i64, shape))), node.splat(count - 1, i64, shape)))
    return [node.emit(graph.SelectOp(inside, node.emit(graph.GatherElementsOp(update, row, axis)), past))]


@composite("MaxUnpool", attributes=("kernel_shape", "pads", "strides"), static_inputs=(2,))
def convert_max_unpool(node: Node) -> list[Value]:
    x, indices = node.input(0), node.cast(node.input(1), i64)
    shape = shape_of(x)
    if len(shape) < 3 or shape_of(indices) != shape:
        raise node.error(f"X {fmt_shape(shape)} and I {fmt_shape(shape_of(indices))} must be the same N x C x spatial shape")
    spatial = len(shape) - 2
    kernel = node.int_list("kernel_shape", [], spatial)
    strides = node.int_list("strides", [1] * spatial, spatial)
    pads = node.int_list("pads", [0] * 2 * spatial, 2 * spatial)
    out_shape = [*shape[:2], *((n - 1) * s - pads[d] - pads[d + spatial] + k
                                for d, (n, s, k) in enumerate(zip(shape[2:], strides, kernel)))]
    given = node.const_input(2, "the output shape")
    if given is not None:
        given_shape = [int(v) for v in given.reshape(-1)]
        if len(given_shape) != len(shape) or given_shape[:2] != list(shape[:2]) or any(
                g < o for g, o in zip(given_shape[2:], out_shape[2:])):
            raise node.error(f"output_shape {given_shape} is smaller than the unpooled shape {out_shape}")
        out = unpooled(node, x, indices, out_shape, kernel, strides, pads[:spatial])
        ends = [g - o for g, o in zip(given_shape, out_shape)]  # the unpooled result, zeros after it
        return [node.emit(graph.PadOp(out, [0] * len(ends), ends, 0.0))] if any(ends) else [out]
    return [unpooled(node, x, indices, out_shape, kernel, strides, pads[:spatial])]


def unpooled(node: Node, x: SSAValue, indices: SSAValue, out_shape: list[int], kernel: list[int],
             strides: list[int], pads_begin: list[int]) -> SSAValue:
    """See the module docstring: one gather of X and of I per candidate window."""
    shape = shape_of(x)
    size = math.prod(out_shape)
    flat_x, flat_i = node.reshape(x, (math.prod(shape),)), node.reshape(indices, (math.prod(shape),))
    coords = np.indices(out_shape)
    own_flat = constant(node, np.arange(size, dtype=np.int64).reshape(out_shape))
    out = node.splat(0, element_type_of(x), out_shape)
    reaches = [-(-k // s) for k, s in zip(kernel, strides)]
    for back in itertools.product(*(range(r) for r in reaches)):
        valid = np.ones(out_shape, bool)
        window = coords[0] * shape[1] + coords[1]
        for d, t in enumerate(back):
            h = coords[2 + d] + pads_begin[d]
            j = h // strides[d] - t
            valid &= (j >= 0) & (j < shape[2 + d]) & (h - j * strides[d] < kernel[d])
            window = window * shape[2 + d] + np.clip(j, 0, shape[2 + d] - 1)
        where = constant(node, np.where(valid, window, 0).reshape(-1))
        source_index = node.reshape(node.emit(graph.GatherOp(flat_i, where, 0)), out_shape)
        value = node.reshape(node.emit(graph.GatherOp(flat_x, where, 0)), out_shape)
        hit = node.emit(graph.SelectOp(constant(node, valid, i1), node.emit(graph.CompareOp("eq", source_index, own_flat)),
                                       node.splat(False, i1, out_shape)))
        out = node.emit(graph.SelectOp(hit, value, out))
    return out
