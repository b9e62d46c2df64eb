"""ai.onnx.ml operators on numeric tensors (the string-keyed ones are not supported):

    Binarizer              x > threshold ? 1 : 0, in x's type (NaN: 0, as numpy's compare)
    ArrayFeatureExtractor  x gathered along its last axis at the indices y (a 1-D x: one row)
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import i64

from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, shape_of
from mlfuse.frontend.onnx_ops import Node, Value, onnx_op

DOMAIN = "ai.onnx.ml."


@onnx_op(DOMAIN + "Binarizer", attributes=("threshold",))
def convert_binarizer(node: Node) -> list[Value]:
    x = node.input(0)
    above = node.emit(graph.CompareOp("gt", x, node.scalar_like(float(node.attr("threshold", 0.0)), x)))
    return [node.emit(graph.SelectOp(above, node.scalar_like(1, x), node.scalar_like(0, x)))]


@onnx_op(DOMAIN + "ArrayFeatureExtractor")
def convert_array_feature_extractor(node: Node) -> list[Value]:
    """x[..., indices.ravel()]; a 1-D x gives one row (1, k), as onnxruntime does."""
    x, indices = node.input(0), node.input(1)
    shape = shape_of(x)
    if not shape:
        raise node.error("x must have at least one axis")
    if element_type_of(indices) != i64:
        raise node.error(f"the indices must be int64, got {element_type_of(indices)}")
    flat = node.reshape(indices, (math.prod(shape_of(indices)),))
    picked = node.emit(graph.GatherOp(x, flat, len(shape) - 1))
    return [node.reshape(picked, (1, *shape_of(picked))) if len(shape) == 1 else picked]
