"""ONNX operators that make tensors from shapes, types and small static inputs.

mlfuse's shapes are static, so most of these are compile-time constants however their
inputs arrive (a node whose inputs are all constants is folded before it gets here;
these handlers take the nodes whose inputs are graph inputs frozen with `input_values`,
or whose only runtime input is looked at for its shape or type):

- Size, EyeLike: read only the shape of their input, so they are constants.
- ConstantOfShape, Range: their inputs must be compile-time constants (the output's
  shape depends on them).
- CastLike: a Cast to the element type of its second input, whose values are unused.
- OneHot: `indices` at run time, compared with 0..depth-1 along a new axis and
  selected between the off and on values (which may be run-time too).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import i64
from xdsl.ir import Attribute

from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, shape_of
from mlfuse.frontend.builder import NUMPY_ELEMENT_TYPES
from mlfuse.frontend.onnx_composite import composite, constant_array
from mlfuse.frontend.onnx_ops import Node, Value, broadcast_to, dense_from_numpy, normalize_axis, slice_axis


def input_element_type(node: Node, index: int) -> Attribute:
    """The element type of input `index`, without materializing a constant one."""
    array = node.constant(index)
    if array is None:
        return element_type_of(node.input(index))
    el = NUMPY_ELEMENT_TYPES.get(array.dtype)
    if el is None:
        raise node.error(f"input {index} has element type {array.dtype}, which mlfuse does not support")
    return el


def static_scalar(node: Node, index: int, what: str) -> np.ndarray:
    """Input `index` as a compile-time scalar (one element, any rank)."""
    value = node.const_input(index, what)
    if value is None:
        raise node.error(f"input {index} ({what}) is missing")
    if value.size != 1:
        raise node.error(f"input {index} ({what}) must have one element, got shape {list(value.shape)}")
    return value.reshape(())


@composite("CastLike", attributes=("saturate", "round_mode"))
def convert_cast_like(node: Node) -> list[Value]:
    # `saturate` and `round_mode` only affect float8/float4 targets, which mlfuse rejects anyway
    return [node.cast(node.input(0), input_element_type(node, 1))]


@composite("Size")
def convert_size(node: Node) -> list[Value]:
    return [np.array(int(np.prod(node.importer.shape_of_value(node.proto.input[0]))), dtype=np.int64)]


@composite("ConstantOfShape", attributes=("value",), static_inputs=(0,))
def convert_constant_of_shape(node: Node) -> list[Value]:
    shape = node.const_input(0, "the output shape")
    if shape is None or shape.ndim != 1 or shape.dtype.kind not in "iu":
        raise node.error("input 0 (the output shape) must be a 1-D integer tensor")
    if (shape < 0).any():
        raise node.error(f"the output shape {shape.tolist()} has a negative dimension")
    value = node.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    if value.size != 1:
        raise node.error(f"attribute 'value' must have one element, got {value.size}")
    return [np.full(tuple(int(d) for d in shape), value.reshape(-1)[0], dtype=value.dtype)]


@composite("Range", attributes=("stash_type",), static_inputs=(0, 1, 2))
def convert_range(node: Node) -> list[Value]:
    """onnx's definition: max(ceil((limit - start) / delta), 0) elements start + i * delta,
    in the type of `start` (numpy's arange, as onnx's reference evaluates it); f16 starts
    are computed in `stash_type` (opset 27: f32 or f64) when it is given."""
    start, limit, delta = (static_scalar(node, i, what) for i, what in enumerate(("start", "limit", "delta")))
    if delta == 0:
        raise node.error("delta is 0")
    stash = {1: np.float32, 11: np.float64}.get(int(node.attr("stash_type", 0)))
    if stash is not None and start.dtype == np.float16:
        return [np.arange(float(start), float(limit), float(delta), dtype=stash).astype(start.dtype)]
    return [np.arange(start.item(), limit.item(), delta.item()).astype(start.dtype)]


@composite("EyeLike", attributes=("dtype", "k"))
def convert_eye_like(node: Node) -> list[Value]:
    shape = node.importer.shape_of_value(node.proto.input[0])
    if len(shape) != 2:
        raise node.error(f"input 0 must be 2-D, got shape {list(shape)}")
    el = (node.element_type(int(node.attr("dtype")), "the output type") if node.attr("dtype") is not None
          else input_element_type(node, 0))
    eye = np.eye(shape[0], shape[1], k=int(node.attr("k", 0)), dtype=graph.numpy_dtype(el))
    return [node.emit(graph.ConstantOp(dense_from_numpy(eye, el)))]


@composite("OneHot", attributes=("axis",), static_inputs=(1,))
def convert_one_hot(node: Node) -> list[Value]:
    """y[..., j, ...] = on if wrap(indices[...]) == j else off, j in 0..depth-1 along `axis`
    (wrap adds depth to a negative index; one out of range gives all off)."""
    indices, values = node.input(0), node.input(2)
    if not graph.is_int(element_type_of(indices)) and not graph.is_float(element_type_of(indices)):
        raise node.error(f"indices must be numbers, got {element_type_of(indices)}")
    depth = int(static_scalar(node, 1, "depth"))
    if depth < 1:
        raise node.error(f"depth must be positive, got {depth}")
    if shape_of(values) != (2,):
        raise node.error(f"values must have shape [2] (off, on), got {list(shape_of(values))}")
    rank = len(shape_of(indices))
    axis = normalize_axis(node, int(node.attr("axis", -1)), rank + 1)
    out_shape = [*shape_of(indices)[:axis], depth, *shape_of(indices)[axis:]]
    if graph.is_float(element_type_of(indices)):  # onnx casts float indices to integers (toward zero)
        indices = node.cast(indices, i64)
    wrapped = node.emit(graph.SelectOp(
        node.emit(graph.CompareOp("lt", indices, node.scalar_like(0, indices))),
        node.emit(graph.AddOp(indices, node.scalar_like(depth, indices))), indices))
    wrapped = broadcast_to(node, node.reshape(wrapped, [*shape_of(indices)[:axis], 1, *shape_of(indices)[axis:]]),
                           out_shape)
    positions = np.arange(depth).reshape([depth if i == axis else 1 for i in range(rank + 1)])
    hit = node.emit(graph.CompareOp("eq", wrapped, broadcast_to(node, constant_array(node, positions, indices), out_shape)))
    off, on = (broadcast_to(node, node.reshape(slice_axis(node, values, 0, i, i + 1), []), out_shape) for i in (0, 1))
    return [node.emit(graph.SelectOp(hit, on, off))]


@composite("OptionalHasElement")
def convert_optional_has_element(node: Node) -> list[Value]:
    """Whether the optional input holds a value: a tensor does, a missing input does not
    (graph inputs of an optional type are not supported: a compiled function's inputs are
    arrays, and whether one is empty would change the function)."""
    return [np.array(node.has_input(0))]


@composite("OptionalGetElement")
def convert_optional_get_element(node: Node) -> list[Value]:
    """The tensor an optional holds (a tensor input: itself)."""
    if not node.has_input(0):
        raise node.error("the optional input is empty")
    return [node.input(0)]
