"""ONNX ScatterND and ScatterElements with indices known at compile time.

Exporters write `x[:, 0] = v`, shift_tokens_right, index_fill and max-unpooling as
scatters whose indices come from shape arithmetic, so they are constants. The
scatter is then a gather: numpy works out, for every output element, which update
element lands there (the last one written, or each of them in order for a
reduction), and the graph selects between a gather of the updates and the data:

    out = select(written, gather(updates.flat, source), data)
    reduction add/mul/max/min: out = combine(out, select(written_d, gather(.., source_d), identity))
                               for each depth d of repeated writes to one element

Indices only known at run time are a diagnostic ("must be a constant").
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import i1, i64
from xdsl.ir import SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import fmt_shape, shape_of
from mlfuse.frontend.onnx_composite import composite
from mlfuse.frontend.onnx_ops import Node, Value, dense_from_numpy, normalize_axis, same_element_type

COMBINE = {"add": graph.AddOp, "mul": graph.MulOp, "max": graph.MaxOp, "min": graph.MinOp}


def wrapped(node: Node, indices: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Negative indices counted from the end; any out of range is a diagnostic."""
    indices = np.where(indices < 0, indices + sizes, indices)
    if np.any(indices < 0) or np.any(indices >= sizes):
        raise node.error(f"an index is out of range for the data's dimensions {sizes.tolist()}")
    return indices


def write_levels(positions: np.ndarray, count: int) -> list[np.ndarray]:
    """For writes of update element i (in order) to flat output position positions[i]:
    level d maps each output position to the update written there d-th (-1: none)."""
    levels: list[np.ndarray] = []
    order = np.argsort(positions, kind="stable")
    sorted_positions = positions[order]
    starts = np.searchsorted(sorted_positions, sorted_positions, side="left")
    depth = np.arange(len(positions)) - starts  # 0 for the first write to a position, 1 for the second...
    for d in range(int(depth.max(initial=-1)) + 1):
        level = np.full(count, -1, np.int64)
        at = depth == d
        level[sorted_positions[at]] = order[at]
        levels.append(level)
    return levels


def last_writes(positions: np.ndarray, count: int) -> np.ndarray:
    """Each output position's last update (-1: none), as onnx's reference loop leaves it."""
    last = np.full(count, -1, np.int64)
    unique, first_from_end = np.unique(positions[::-1], return_index=True)
    last[unique] = len(positions) - 1 - first_from_end
    return last


def scatter(node: Node, data: SSAValue, updates: SSAValue, positions: np.ndarray) -> SSAValue:
    """data with update element i written at flat position positions[i], by the node's reduction."""
    shape = shape_of(data)
    reduction = node.attr("reduction", "none")
    if reduction != "none" and reduction not in COMBINE:
        raise node.error(f"reduction {reduction!r} is not none, add, mul, max or min")
    levels = write_levels(positions, math.prod(shape)) if reduction != "none" else [last_writes(positions, math.prod(shape))]
    flat = node.reshape(updates, [math.prod(shape_of(updates))])
    out = data
    for level in levels:
        written = level >= 0
        source = node.emit(graph.ConstantOp(dense_from_numpy(np.where(written, level, 0).reshape(shape), i64)))
        value = node.emit(graph.GatherOp(flat, node.reshape(source, [math.prod(shape)]), 0))
        value = node.reshape(value, shape)
        if reduction != "none":
            value = node.emit(COMBINE[reduction](out, value))
        mask = node.emit(graph.ConstantOp(dense_from_numpy(written.reshape(shape), i1)))
        out = node.emit(graph.SelectOp(mask, value, out))
    return out


def scatter_operands(node: Node) -> tuple[SSAValue, np.ndarray, SSAValue]:
    """(data, the compile-time indices, updates) of a scatter node."""
    data, updates = node.input(0), node.input(2)
    same_element_type(node, data, updates)
    indices = node.const_input(1, "indices")
    assert indices is not None
    return data, indices, updates


@composite("ScatterND", attributes=("reduction",), static_inputs=(1,))
def convert_scatter_nd(node: Node) -> list[Value]:
    data, indices, updates = scatter_operands(node)
    shape = shape_of(data)
    k = indices.shape[-1] if indices.ndim else 0
    if indices.ndim < 1 or k > len(shape) or shape_of(updates) != (*indices.shape[:-1], *shape[k:]):
        raise node.error(f"indices {list(indices.shape)} and updates {fmt_shape(shape_of(updates))} do not fit "
                         f"data {fmt_shape(shape)}")
    tuples = wrapped(node, indices.reshape(-1, k).astype(np.int64), np.array(shape[:k]))
    block = math.prod(shape[k:])
    starts = np.asarray(np.ravel_multi_index(tuple(tuples.T), shape[:k])) * block if k else np.zeros(len(tuples), np.int64)
    positions = (starts[:, None] + np.arange(block)).reshape(-1)
    return [scatter(node, data, updates, positions)]


@composite("ScatterElements", attributes=("axis", "reduction"), static_inputs=(1,))
def convert_scatter_elements(node: Node) -> list[Value]:
    data, indices, updates = scatter_operands(node)
    shape = shape_of(data)
    axis = normalize_axis(node, int(node.attr("axis", 0)), len(shape))
    if indices.shape != shape_of(updates) or indices.ndim != len(shape) or any(
            i > d for a, (i, d) in enumerate(zip(indices.shape, shape)) if a != axis):
        raise node.error(f"indices {list(indices.shape)} and updates {fmt_shape(shape_of(updates))} do not fit "
                         f"data {fmt_shape(shape)} off axis {axis}")
    target: list[np.ndarray] = [np.asarray(t) for t in np.indices(indices.shape)]
    target[axis] = wrapped(node, indices.astype(np.int64), np.array(shape[axis]))
    positions = np.asarray(np.ravel_multi_index(tuple(t.reshape(-1) for t in target), shape))
    return [scatter(node, data, updates, positions)]
