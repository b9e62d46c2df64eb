"""ONNX quantization: QuantizeLinear, DequantizeLinear and the integer products.

    QuantizeLinear    y = saturate(round(x / scale) + zero_point)
    DequantizeLinear  y = (x - zero_point) * scale
    MatMulInteger     y = (a - a_zero) @ (b - b_zero)                               (int32)
    ConvInteger       y = conv(x - x_zero, w - w_zero)                              (int32)
    QLinearMatMul     y = saturate(round(((a - a_zero) @ (b - b_zero)) * a_scale * b_scale / y_scale) + y_zero)
    QLinearConv       y = saturate(round((conv(x - x_zero, w - w_zero) + bias) * x_scale * w_scale / y_scale) + y_zero)

`round` takes halves to even. `saturate` clamps to the 8- or 16-bit integer type of the
zero point, or of `output_dtype`, or uint8. NaN becomes the type's lowest value and
infinities its ends, as in onnxruntime. (onnx's reference evaluator casts through int32
first, which wraps them.)

A scale or zero point is a scalar (per tensor) or a vector along `axis` (per axis).
With `block_size`, it has the input's shape, except along `axis`, where one entry
covers `block_size` elements.

The integer products are computed as float products of the zero-point-shifted
operands. Every partial sum is an integer, so the result is exact as long as the sums
stay below 2**24 in float32. That holds when a bound from the operands' types and
constant values (weights) allows it. Otherwise the product runs in float64, which is
exact below 2**53. Padding adds zeros to the shifted input, that is, the zero point to
the quantized one, as onnxruntime does.

The float8, 4-bit and 2-bit types are rejected at import like every type mlfuse lacks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import IntegerType, Signedness, f32, f64, i32, i64
from xdsl.ir import Attribute, SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, fmt_shape, is_float, shape_of
from mlfuse.frontend.onnx_composite import composite, float_input
from mlfuse.frontend.onnx_ops import (
    Node,
    Value,
    along,
    broadcast_all,
    broadcast_shape,
    broadcast_to,
    conv,
    dense_from_numpy,
    matmul,
    normalize_axis,
)

CONV_ATTRIBUTES = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
QUANTIZED_TYPES = {np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16)}
EXACT_IN_F32 = 2.0**24
ui8 = IntegerType(8, Signedness.UNSIGNED)


# --- scales and zero points ---------------------------------------------------------------------


def quant_param(node: Node, p: SSAValue, shape: Sequence[int], axis: int, block_size: int, what: str) -> SSAValue:
    """A scale or zero point broadcast to `shape`: per tensor, per axis or per block."""
    sp = shape_of(p)
    if math.prod(sp) == 1 and len(sp) <= 1:
        return broadcast_to(node, node.reshape(p, ()), shape)
    axis = normalize_axis(node, axis, len(shape))
    if block_size == 0:
        if sp != (shape[axis],):
            raise node.error(f"{what} of shape {fmt_shape(sp)} is neither a scalar nor {shape[axis]} values along axis {axis}")
        return along(node, p, axis, shape)
    if block_size < 0:
        raise node.error(f"block_size must be positive, got {block_size}")
    blocks = tuple(-(-n // block_size) if d == axis else n for d, n in enumerate(shape))
    if sp != blocks:
        raise node.error(f"{what} of shape {fmt_shape(sp)} does not give one value per block of {block_size} "
                         f"along axis {axis} of {fmt_shape(shape)} (expected {fmt_shape(blocks)})")
    block_of = np.arange(shape[axis], dtype=np.int64) // block_size
    index = node.emit(graph.ConstantOp(dense_from_numpy(block_of, i64)))
    return node.emit(graph.GatherOp(p, index, axis))


def quantized_type(node: Node, zero_point_index: int, default: Attribute) -> Attribute:
    """The quantized element type: the zero point's, else output_dtype's, else `default`."""
    el = default
    if node.attr("output_dtype", 0):
        el = node.element_type(int(node.attr("output_dtype")), "output_dtype")
    if node.has_input(zero_point_index):
        zero = element_type_of(node.input(zero_point_index))
        if node.attr("output_dtype", 0) and zero != el:
            raise node.error(f"output_dtype {el} differs from the zero point's type {zero}")
        el = zero
    if graph.numpy_dtype(el) not in QUANTIZED_TYPES:
        raise node.error(f"the quantized type must be an 8- or 16-bit integer, got {el}")
    return el


def saturate(node: Node, q: SSAValue, target: Attribute) -> SSAValue:
    """Integral floats q clamped to the range of `target` and cast to it (NaN: its lowest)."""
    info = np.iinfo(graph.numpy_dtype(target))
    return node.cast(clamped(node, q, int(info.min), int(info.max)), target)


def clamped(node: Node, q: SSAValue, lo: int, hi: int) -> SSAValue:
    """Floats q clamped to [lo, hi], NaN to lo."""
    low, high = node.scalar_like(lo, q), node.scalar_like(hi, q)
    inside = node.emit(graph.MinOp(node.emit(graph.MaxOp(q, low)), high))
    return node.emit(graph.SelectOp(node.emit(graph.CompareOp("ne", q, q)), low, inside))


def zero_point_added(node: Node, q: SSAValue, index: int, axis: int = 1, block_size: int = 0) -> SSAValue:
    """q plus the node's zero point input `index` (when given), in q's type."""
    if not node.has_input(index):
        return q
    zero = quant_param(node, node.input(index), shape_of(q), axis, block_size, "the zero point")
    return node.emit(graph.AddOp(q, node.cast(zero, element_type_of(q))))


# --- QuantizeLinear and DequantizeLinear --------------------------------------------------------


@composite("QuantizeLinear", attributes=("axis", "block_size", "output_dtype", "precision", "saturate"))
def convert_quantize_linear(node: Node) -> list[Value]:
    """x / scale rounded; the zero point added in float32 or wider, exact in every 16-bit
    range. (Narrow targets: onnx_narrow.convert_quantize.)"""
    target = quantized_type(node, 2, ui8)
    axis, block_size = int(node.attr("axis", 1)), int(node.attr("block_size", 0))
    q = node.emit(graph.RoundOp(scaled(node, axis, block_size)))
    q = node.cast(q, f64 if element_type_of(q) == f64 else f32)
    return [saturate(node, zero_point_added(node, q, 2, axis, block_size), target)]


def scaled(node: Node, axis: int, block_size: int) -> SSAValue:
    """x / scale in x's type (or `precision`; float64 for integer x, as numpy promotes it)."""
    x, scale = node.input(0), float_input(node, 1)
    if node.attr("precision", 0):
        compute = node.element_type(int(node.attr("precision")), "precision")
    else:
        compute = element_type_of(x) if is_float(element_type_of(x)) else f64
    x = node.cast(x, compute)
    scale = node.cast(quant_param(node, scale, shape_of(x), axis, block_size, "the scale"), compute)
    return node.emit(graph.DivOp(x, scale))


@composite("DequantizeLinear", attributes=("axis", "block_size", "output_dtype"))
def convert_dequantize_linear(node: Node) -> list[Value]:
    """(x - zero point) * scale in float32, then the scale's type (or output_dtype)."""
    x = node.input(0)
    if is_float(element_type_of(x)):
        raise node.error(f"x must be an integer tensor, got {element_type_of(x)}")
    return [dequantized(node, node.cast(x, f32), node.input(2) if node.has_input(2) else None)]


def dequantized(node: Node, dx: SSAValue, zero: SSAValue | None) -> SSAValue:
    """(dx - zero) * scale for float32 dx, in the scale's type (or output_dtype)."""
    scale = float_input(node, 1)
    out = element_type_of(scale)
    if node.attr("output_dtype", 0):
        out = node.element_type(int(node.attr("output_dtype")), "output_dtype")
    axis, block_size = int(node.attr("axis", 1)), int(node.attr("block_size", 0))
    if zero is not None:
        zero = quant_param(node, zero, shape_of(dx), axis, block_size, "the zero point")
        dx = node.emit(graph.SubOp(dx, node.cast(zero, f32)))
    scale = node.cast(quant_param(node, scale, shape_of(dx), axis, block_size, "the scale"), f32)
    return node.cast(node.emit(graph.MulOp(dx, scale)), out)


# --- exact integer products ---------------------------------------------------------------------


def shifted(node: Node, index: int, zero_index: int, vector_axis: int | None = None) -> tuple[SSAValue, np.ndarray | float]:
    """Input `index` minus its zero point as float32, with the zero point's entries along
    `vector_axis` when it is a vector. Also the magnitudes of the shifted values: an array
    for a constant input and zero point (weights, shifted here once), else a bound from the
    input's type."""
    v = node.input(index)
    dtype = graph.numpy_dtype(element_type_of(v))
    if dtype not in QUANTIZED_TYPES:
        raise node.error(f"input {index} must be an 8- or 16-bit integer tensor, got {element_type_of(v)}")
    zero = node.input(zero_index) if node.has_input(zero_index) else node.splat(0, element_type_of(v), ())
    known_v = node.constant(index)
    known_zero = node.constant(zero_index) if node.has_input(zero_index) else np.zeros((), dtype)
    if vector_axis is not None and len(shape_of(zero)) == 1 and shape_of(zero)[0] > 1:
        vector_shape = [1] * len(shape_of(v))
        vector_shape[vector_axis % len(vector_shape)] = shape_of(zero)[0]
        zero = node.reshape(zero, vector_shape)
        known_zero = None if known_zero is None else known_zero.reshape(vector_shape)
    if known_v is not None and known_zero is not None:
        values = known_v.astype(np.float64) - known_zero
        return node.emit(graph.ConstantOp(dense_from_numpy(values.astype(np.float32), f32))), np.abs(values)
    if node.has_input(zero_index):
        shape = broadcast_shape(node, shape_of(v), shape_of(zero))
        dv = node.emit(graph.SubOp(broadcast_to(node, node.cast(v, f32), shape), broadcast_to(node, node.cast(zero, f32), shape)))
    else:  # no zero point: nothing to subtract at run time
        dv = node.cast(v, f32)
    info = np.iinfo(dtype)
    if known_zero is None:
        return dv, float(int(info.max) - int(info.min))
    return dv, float(np.abs(np.array([info.min, info.max], np.float64)[:, None] - known_zero.reshape(-1)).max())


def sum_bound(magnitudes: np.ndarray | float, axes: Sequence[int], depth: int) -> float:
    """A bound on the sums of `depth` shifted values along `axes` (exact for constants)."""
    if not isinstance(magnitudes, np.ndarray):
        return magnitudes * depth
    return float(magnitudes.sum(axis=tuple(axes) if magnitudes.ndim >= 2 else None).max(initial=0.0))


def exact_type(bound: float) -> Attribute:
    """float32 where every partial sum of the integer product stays below 2**24, else float64."""
    return f32 if bound < EXACT_IN_F32 else f64


def largest(magnitudes: np.ndarray | float) -> float:
    return float(magnitudes.max(initial=0.0)) if isinstance(magnitudes, np.ndarray) else magnitudes


def integer_matmul(node: Node, a_zero_index: int, b_index: int, b_zero_index: int) -> SSAValue:
    """(a - a_zero) @ (b - b_zero) as exact integers in a float type; a's zero point is per
    tensor or per row, b's per tensor or per column."""
    a, a_sizes = shifted(node, 0, a_zero_index, vector_axis=-2)
    b, b_sizes = shifted(node, b_index, b_zero_index)
    depth = shape_of(a)[-1]
    bound = min(largest(a_sizes) * sum_bound(b_sizes, [-2], depth), sum_bound(a_sizes, [-1], depth) * largest(b_sizes))
    t = exact_type(bound)
    return matmul(node, node.cast(a, t), node.cast(b, t))


def integer_conv(node: Node, x_zero_index: int, w_index: int, w_zero_index: int) -> SSAValue:
    """conv(x - x_zero, w - w_zero) as exact integers in a float type; w's zero point is per
    tensor or per output channel."""
    x, x_sizes = shifted(node, 0, x_zero_index)
    w, w_sizes = shifted(node, w_index, w_zero_index, vector_axis=0)
    taps = shape_of(w)[1:]
    t = exact_type(largest(x_sizes) * sum_bound(w_sizes, range(1, len(taps) + 1), math.prod(taps)))
    return conv(node, node.cast(x, t), node.cast(w, t))


def requantized(node: Node, acc: SSAValue, multiplier: SSAValue, zero_index: int, zero_axis: int) -> SSAValue:
    """saturate(round(acc * multiplier) + zero point) in the zero point's type (else the
    input's), in float64 as onnx's reference computes an int32 accumulator times float32
    scales."""
    target = quantized_type(node, zero_index, element_type_of(node.input(0)))
    acc, multiplier = broadcast_all(node, node.cast(acc, f64), node.cast(multiplier, f64))
    y = node.emit(graph.RoundOp(node.emit(graph.MulOp(acc, multiplier))))
    return saturate(node, zero_point_added(node, y, zero_index, axis=zero_axis), target)


def scale_vector(node: Node, index: int, vector_axis: int, rank: int) -> SSAValue:
    """A scale input: a scalar, or a vector placed along `vector_axis` for broadcasting."""
    scale = float_input(node, index)
    if len(shape_of(scale)) == 1 and shape_of(scale)[0] > 1:
        vector_shape = [1] * rank
        vector_shape[vector_axis % rank] = shape_of(scale)[0]
        return node.reshape(scale, vector_shape)
    return node.reshape(scale, ()) if math.prod(shape_of(scale)) == 1 else scale


def multiplier(node: Node, scales: Sequence[tuple[int, int]], rank: int) -> SSAValue:
    """a_scale * b_scale / y_scale, in the scales' type: scales[i] = (input index, the axis
    a vector scale lies along)."""
    (a, a_axis), (b, b_axis), (y, y_axis) = scales
    product = node.emit(graph.MulOp(*broadcast_all(node, scale_vector(node, a, a_axis, rank), scale_vector(node, b, b_axis, rank))))
    return node.emit(graph.DivOp(*broadcast_all(node, product, scale_vector(node, y, y_axis, rank))))


@composite("MatMulInteger")
def convert_matmul_integer(node: Node) -> list[Value]:
    return [node.cast(integer_matmul(node, 2, 1, 3), i32)]


@composite("ConvInteger", attributes=CONV_ATTRIBUTES)
def convert_conv_integer(node: Node) -> list[Value]:
    return [node.cast(integer_conv(node, 2, 1, 3), i32)]


@composite("QLinearMatMul")
def convert_qlinear_matmul(node: Node) -> list[Value]:
    """Inputs a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero; a's and y's
    parameters per tensor or per row, b's per tensor or per column."""
    acc = integer_matmul(node, 2, 3, 5)
    scale = multiplier(node, [(1, -2), (4, -1), (6, -2)], len(shape_of(acc)))
    return [requantized(node, acc, scale, 7, zero_axis=-2)]


@composite("QLinearConv", attributes=CONV_ATTRIBUTES)
def convert_qlinear_conv(node: Node) -> list[Value]:
    """Inputs x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero and an int32 bias;
    w's parameters per tensor or per output channel."""
    acc = integer_conv(node, 2, 3, 5)
    if node.has_input(8):
        bias = node.input(8)
        if shape_of(bias) != (shape_of(acc)[1],):
            raise node.error(f"bias must have shape {shape_of(acc)[1]}, got {fmt_shape(shape_of(bias))}")
        acc = node.emit(graph.AddOp(node.cast(acc, f64), along(node, node.cast(bias, f64), 1, shape_of(acc))))
    scale = multiplier(node, [(1, 1), (4, 1), (6, 1)], len(shape_of(acc)))
    return [requantized(node, acc, scale, 7, zero_axis=1)]
