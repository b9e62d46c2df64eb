"""The ONNX operator table of the importer: one handler per ONNX operator (or family).

A handler gets a `Node` (the ONNX node plus the importer's values) and returns the
node's outputs, each an SSA value of the graph dialect or a numpy array for a value
known at compile time (shapes, axes, folded constants). Handlers make numpy
broadcasting explicit with `graph.broadcast`, so every elementwise graph op sees
operands of one shape. Composite operators (Softmax, LayerNormalization, Gemm,
BatchNormalization, ...) become several graph ops.

Every handler names the ONNX attributes it accepts; any other attribute on a node,
or an accepted attribute with a value mlfuse cannot honour, is a Diagnostic located
at the node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    NameLoc,
    NoneAttr,
    StringAttr,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue

from mlfuse.diagnostics import Diagnostic
from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, fmt_shape, is_float, shape_of
from mlfuse.frontend.builder import NUMPY_ELEMENT_TYPES, broadcast_op, broadcast_shapes

if TYPE_CHECKING:
    from mlfuse.frontend.onnx import OnnxImporter

Value = SSAValue | np.ndarray

# --- element types ---------------------------------------------------------------

# Derived from the one table of element types (graph.ELEMENT_TYPES, as the builder's
# NUMPY_ELEMENT_TYPES) through the numpy dtype onnx maps each data type to. BFLOAT16, the
# float8, 4-bit and 2-bit types have no entry there: they are carried as their storage
# (onnx_narrow). Strings are rejected at import, with the node or value named.


def _onnx_element_types() -> dict[int, Attribute]:
    table = {}
    for onnx_type in TensorProto.DataType.values():
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type))
        except Exception:  # UNDEFINED and the types numpy cannot hold
            continue
        if dtype in NUMPY_ELEMENT_TYPES and dtype != np.dtype(object):
            table[onnx_type] = NUMPY_ELEMENT_TYPES[dtype]
    return table


ELEMENT_TYPES: dict[int, Attribute] = _onnx_element_types()
SUPPORTED_ONNX_TYPES = ", ".join(TensorProto.DataType.Name(t) for t in sorted(ELEMENT_TYPES))
SUPPORTED_NUMPY_TYPES = ", ".join(str(d) for d in NUMPY_ELEMENT_TYPES)


def element_type(onnx_type: int, what: str, location: str | None = None) -> Attribute:
    """The graph element type of an ONNX TensorProto data type."""
    if onnx_type not in ELEMENT_TYPES:
        name = TensorProto.DataType.Name(onnx_type) if onnx_type in TensorProto.DataType.values() else onnx_type
        raise Diagnostic(
            f"{what} has element type {name}, which mlfuse does not support (supported: {SUPPORTED_ONNX_TYPES})",
            location,
        )
    return ELEMENT_TYPES[onnx_type]


def tensor_array(tensor: TensorProto, what: str, location: str | None = None) -> np.ndarray:
    """numpy_helper.to_array, with a malformed tensor (data that does not fill its dims)
    reported as one diagnostic naming it."""
    try:
        return numpy_helper.to_array(tensor)
    except (ValueError, TypeError, MemoryError) as e:
        reason = (str(e).splitlines() or [type(e).__name__])[0]
        raise Diagnostic(f"{what} is malformed: its data does not fit its dims {list(tensor.dims)} ({reason})", location) from None


def dense_from_numpy(array: np.ndarray, el: Attribute) -> DenseIntOrFPElementsAttr:
    """A dense attribute holding `array`, packed straight from its bytes (graph.dense_attr)."""
    return graph.dense_attr(array, el)


# --- the node context --------------------------------------------------------------


class Node:
    """One ONNX node being converted: its attributes, its inputs, and op emission."""

    def __init__(self, importer: OnnxImporter, proto: NodeProto, name: str):
        self.importer = importer
        self.proto = proto
        self.op_type = proto.op_type
        self.name = name
        self.location = NameLoc(StringAttr(name), NoneAttr())
        self.attributes = {a.name: a for a in proto.attribute}
        # inputs of a narrow element type as their values (onnx_narrow.decode_inputs)
        self.decoded: dict[int, SSAValue] = {}

    def error(self, message: str) -> Diagnostic:
        return Diagnostic(f"{self.op_type}: {message}", self.name)

    # attributes

    def attr(self, name: str, default: Any = None) -> Any:
        if name not in self.attributes:
            return default
        value = helper.get_attribute_value(self.attributes[name])
        if isinstance(value, bytes):
            return value.decode()
        if isinstance(value, TensorProto):
            try:
                return tensor_array(value, f"attribute '{name}'")
            except Diagnostic as d:
                raise self.error(d.message) from None
        if isinstance(value, list):
            return [v.decode() if isinstance(v, bytes) else v for v in value]
        return value

    def element_type(self, onnx_type: int, what: str) -> Attribute:
        try:
            return element_type(onnx_type, what)
        except Diagnostic as d:
            raise self.error(d.message) from None

    def int_list(self, name: str, default: Sequence[int], count: int) -> list[int]:
        values = [int(v) for v in self.attr(name, default)]
        if len(values) != count:
            raise self.error(f"attribute '{name}' must have {count} entries, got {values}")
        return values

    # inputs

    def has_input(self, index: int) -> bool:
        return index < len(self.proto.input) and self.proto.input[index] != ""

    def input(self, index: int) -> SSAValue:
        if not self.has_input(index):
            raise self.error(f"input {index} is missing")
        if index in self.decoded:
            return self.decoded[index]
        return self.importer.value(self.proto.input[index])

    def inputs(self) -> list[SSAValue]:
        return [self.input(i) for i in range(len(self.proto.input)) if self.has_input(i)]

    def constant(self, index: int) -> np.ndarray | None:
        """The compile-time value of an input, or None when it is only known at run time."""
        if not self.has_input(index):
            return None
        return self.importer.constant(self.proto.input[index])

    def const_input(self, index: int, what: str) -> np.ndarray | None:
        """An input that must be known at compile time (shapes, axes, pads); None if absent."""
        if not self.has_input(index):
            return None
        value = self.constant(index)
        if value is None:
            raise self.error(
                f"input {index} ({what}, '{self.proto.input[index]}') must be a constant: "
                "mlfuse needs static shapes, so it must come from an initializer or be computable from constants"
            )
        return value

    def wants_output(self, index: int) -> bool:
        return index < len(self.proto.output) and self.proto.output[index] != ""

    # emission

    def emit(self, op: Operation) -> SSAValue:
        return self.importer.emit(op, self)

    def splat(self, value: float | int, el: Attribute, shape: Sequence[int]) -> SSAValue:
        dtype = graph.numpy_dtype(el)
        return self.emit(graph.ConstantOp(graph.dense_attr(np.full(tuple(shape), value, dtype), el)))

    def scalar_like(self, value: float | int, like: SSAValue) -> SSAValue:
        return self.splat(value, element_type_of(like), shape_of(like))

    def reshape(self, v: SSAValue, shape: Sequence[int]) -> SSAValue:
        if shape_of(v) == tuple(shape):
            return v
        return self.emit(graph.ReshapeOp(v, shape))

    def cast(self, v: SSAValue, el: Attribute) -> SSAValue:
        return v if element_type_of(v) == el else self.emit(graph.CastOp(v, el))


# --- registry -------------------------------------------------------------------------


def op_key(proto: NodeProto) -> str:
    """The name OPS knows a node's operator by: its op_type in the default domain, else
    `domain.op_type` (ai.onnx.preview.training.Adam, ai.onnx.ml.Binarizer)."""
    return proto.op_type if proto.domain in ("", "ai.onnx") else f"{proto.domain}.{proto.op_type}"


Handler = Callable[[Node], Sequence[Value]]


@dataclass(frozen=True)
class OpSpec:
    handler: Handler
    attributes: frozenset[str]
    static_inputs: frozenset[int]  # inputs that must be compile-time constants


OPS: dict[str, OpSpec] = {}


def onnx_op(*names: str, attributes: Sequence[str] = (), static_inputs: Sequence[int] = ()):
    def register(fn: Handler) -> Handler:
        for name in names:
            OPS[name] = OpSpec(fn, frozenset(attributes), frozenset(static_inputs))
        return fn

    return register


# --- broadcasting and small helpers ------------------------------------------------------


def broadcast_shape(node: Node, *shapes: Sequence[int]) -> tuple[int, ...]:
    """numpy's broadcast of several shapes (the builder's), or a Diagnostic naming them."""
    try:
        return broadcast_shapes(*shapes)
    except ValueError:
        raise node.error("operand shapes " + ", ".join(fmt_shape(s) for s in shapes) + " do not broadcast") from None


def broadcast_to(node: Node, v: SSAValue, shape: Sequence[int]) -> SSAValue:
    """Unidirectional (numpy) broadcast of `v` to `shape` as an explicit graph.broadcast."""
    try:
        op = broadcast_op(v, shape)
    except ValueError:
        raise node.error(f"cannot broadcast {fmt_shape(shape_of(v))} to {fmt_shape(shape)}") from None
    return v if op is None else node.emit(op)


def broadcast_all(node: Node, *values: SSAValue) -> list[SSAValue]:
    shape = broadcast_shape(node, *(shape_of(v) for v in values))
    return [broadcast_to(node, v, shape) for v in values]


def along(node: Node, v: SSAValue, axis: int, shape: Sequence[int]) -> SSAValue:
    """Broadcast a 1-D per-channel vector along `axis` of `shape`."""
    return node.emit(graph.BroadcastOp(v, [axis], shape))


def same_element_type(node: Node, *values: SSAValue) -> Attribute:
    types = {str(element_type_of(v)) for v in values}
    if len(types) > 1:
        raise node.error(f"operands have different element types ({', '.join(sorted(types))})")
    return element_type_of(values[0])


def normalize_axis(node: Node, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise node.error(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def normalize_axes(node: Node, axes: Sequence[int], rank: int, what: str = "axes") -> list[int]:
    result = [normalize_axis(node, int(a), rank, what) for a in axes]
    if len(set(result)) != len(result):
        raise node.error(f"{what} {list(map(int, axes))} has repeated entries")
    return result


def reduce(node: Node, cls: type[graph.ReduceOp], v: SSAValue, axes: Sequence[int], keepdims: bool = True) -> SSAValue:
    return node.emit(cls(v, axes, keepdims))


# --- elementwise ---------------------------------------------------------------------------

UNARY: dict[str, type[Operation]] = {
    "Neg": graph.NegOp,
    "Abs": graph.AbsOp,
    "Exp": graph.ExpOp,
    "Log": graph.LogOp,
    "Sqrt": graph.SqrtOp,
    "Reciprocal": graph.ReciprocalOp,
    "Tanh": graph.TanhOp,
    "Erf": graph.ErfOp,
    "Sin": graph.SinOp,
    "Cos": graph.CosOp,
    "Sigmoid": graph.SigmoidOp,
    "Relu": graph.ReluOp,
    "Floor": graph.FloorOp,
    "Ceil": graph.CeilOp,
    "Round": graph.RoundOp,
}


@onnx_op(*UNARY)
def convert_unary(node: Node) -> list[Value]:
    return [node.emit(UNARY[node.op_type](node.input(0)))]


BINARY: dict[str, type[graph.BinaryElementwiseOp]] = {
    "Add": graph.AddOp,
    "Sub": graph.SubOp,
    "Mul": graph.MulOp,
    "Div": graph.DivOp,
}


@onnx_op(*BINARY)
def convert_binary(node: Node) -> list[Value]:
    a, b = node.input(0), node.input(1)
    same_element_type(node, a, b)
    a, b = broadcast_all(node, a, b)
    return [node.emit(BINARY[node.op_type](a, b))]


BITWISE: dict[str, type[graph.BinaryElementwiseOp]] = {
    "BitwiseAnd": graph.BitAndOp,
    "BitwiseOr": graph.BitOrOp,
    "BitwiseXor": graph.BitXorOp,
}


@onnx_op(*BITWISE)
def convert_bitwise(node: Node) -> list[Value]:
    a, b = node.input(0), node.input(1)
    integer_operands(node, a, b)
    return [node.emit(BITWISE[node.op_type](*broadcast_all(node, a, b)))]


@onnx_op("BitwiseNot")
def convert_bitwise_not(node: Node) -> list[Value]:
    x = node.input(0)
    integer_operands(node, x)
    return [node.emit(graph.BitNotOp(x))]


@onnx_op("BitShift", attributes=("direction",))
def convert_bit_shift(node: Node) -> list[Value]:
    direction = node.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise node.error(f"direction must be \"LEFT\" or \"RIGHT\", got {direction!r}")
    x, n = node.input(0), node.input(1)
    integer_operands(node, x, n)
    op = graph.ShiftLeftOp if direction == "LEFT" else graph.ShiftRightOp
    return [node.emit(op(*broadcast_all(node, x, n)))]


def integer_operands(node: Node, *values: SSAValue) -> None:
    el = same_element_type(node, *values)
    if not graph.is_int(el) or el == i1:
        raise node.error(f"operands must be integers, got {el}")


@onnx_op("Mod", attributes=("fmod",))
def convert_mod(node: Node) -> list[Value]:
    """fmod = 0: the divisor's sign (numpy's mod; the node suite also has floats with fmod = 0,
    which onnxruntime and onnx's reference evaluate as numpy does); fmod = 1: C's fmod."""
    a, b = node.input(0), node.input(1)
    same_element_type(node, a, b)
    fmod = int(node.attr("fmod", 0))
    if fmod not in (0, 1):
        raise node.error(f"fmod must be 0 or 1, got {fmod}")
    if element_type_of(a) == i1:
        raise node.error("inputs must be numbers, got bool")
    a, b = broadcast_all(node, a, b)
    return [node.emit(graph.RemOp(a, b, fmod=bool(fmod)))]


VARIADIC: dict[str, type[graph.BinaryElementwiseOp]] = {
    "Max": graph.MaxOp,
    "Min": graph.MinOp,
    "Sum": graph.AddOp,
}


@onnx_op(*VARIADIC)
def convert_variadic(node: Node) -> list[Value]:
    values = node.inputs()
    same_element_type(node, *values)
    values = broadcast_all(node, *values)
    result = values[0]
    for v in values[1:]:
        result = node.emit(VARIADIC[node.op_type](result, v))
    return [result]


@onnx_op("Pow")
def convert_pow(node: Node) -> list[Value]:
    base = node.input(0)
    el = element_type_of(base)
    if not is_float(el):
        return [integer_pow(node, base, node.input(1))]
    exponent = node.constant(1)
    if exponent is not None and exponent.size == 1 and float(exponent.reshape(())) in (1.0, 2.0, 0.5):
        # x, x * x and sqrt(x) are cheaper than pow, and exact for negative bases
        x = broadcast_to(node, base, broadcast_shape(node, shape_of(base), exponent.shape))
        power = float(exponent.reshape(()))
        if power == 1.0:
            return [x]
        return [node.emit(graph.MulOp(x, x) if power == 2.0 else graph.SqrtOp(x))]
    base, exponent = broadcast_all(node, base, node.cast(node.input(1), el))
    return [node.emit(graph.PowOp(base, exponent))]


def integer_pow(node: Node, base: SSAValue, exponent: SSAValue) -> SSAValue:
    """An integer base to a power, in the base's type. An integer exponent: by squaring,
    one step per bit of the largest exponent (of its type's width when only known at
    run time), wrapping on overflow as numpy does; a negative exponent gives what
    base ** e truncates to (1 for base 1, +-1 for base -1, else 0) where numpy refuses.
    A floating-point exponent: in float64, truncated to the base's type (onnx's reference)."""
    el, exp_el = element_type_of(base), element_type_of(exponent)
    if not graph.is_int(el):
        raise node.error(f"the base must be a number, got {el}")
    if is_float(exp_el):
        wide = broadcast_all(node, node.cast(base, f64), node.cast(exponent, f64))
        return node.cast(node.emit(graph.PowOp(*wide)), el)
    base, exponent = broadcast_all(node, base, exponent)
    known = node.constant(1)
    width = graph.numpy_dtype(exp_el).itemsize * 8
    steps = max(1, int(np.abs(known.astype(np.int64)).max()).bit_length()) if known is not None and known.size else width
    negative = None if graph.is_unsigned(exp_el) else node.emit(graph.CompareOp("lt", exponent, node.scalar_like(0, exponent)))
    e = exponent if negative is None else node.emit(graph.SelectOp(negative, node.emit(graph.NegOp(exponent)), exponent))
    result, square, two = node.scalar_like(1, base), base, node.scalar_like(2, e)
    for step in range(steps):
        odd = node.emit(graph.CompareOp("ne", node.emit(graph.RemOp(e, two)), node.scalar_like(0, e)))
        result = node.emit(graph.SelectOp(odd, node.emit(graph.MulOp(result, square)), result))
        if step + 1 < steps:
            square = node.emit(graph.MulOp(square, square))
            e = node.emit(graph.DivOp(e, two))
    if negative is None:
        return result
    one, zero = node.scalar_like(1, base), node.scalar_like(0, base)
    is_one = node.emit(graph.CompareOp("eq", base, one))
    minus_one = node.emit(graph.CompareOp("eq", base, node.scalar_like(-1, base)))
    # base -1: result already holds (-1) ** |e|; any other base but 1 truncates to 0
    fraction = node.emit(graph.SelectOp(is_one, one, node.emit(graph.SelectOp(minus_one, result, zero))))
    return node.emit(graph.SelectOp(negative, fraction, result))


@onnx_op("LeakyRelu", attributes=("alpha",))
def convert_leaky_relu(node: Node) -> list[Value]:
    x = node.input(0)
    alpha = float(node.attr("alpha", 0.01))
    negative = node.emit(graph.CompareOp("lt", x, node.scalar_like(0, x)))
    scaled = node.emit(graph.MulOp(x, node.scalar_like(alpha, x)))
    return [node.emit(graph.SelectOp(negative, scaled, x))]


@onnx_op("Gelu", attributes=("approximate",))
def convert_gelu(node: Node) -> list[Value]:
    approximate = node.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise node.error(f"approximate must be \"none\" or \"tanh\", got \"{approximate}\"")
    return [node.emit(graph.GeluOp(node.input(0), approximate))]


@onnx_op("Clip")
def convert_clip(node: Node) -> list[Value]:
    x = node.input(0)
    for index, cls in ((1, graph.MaxOp), (2, graph.MinOp)):
        if node.has_input(index):
            bound = node.input(index)
            if shape_of(bound) not in ((), (1,)):
                raise node.error(f"input {index} must be a scalar, got shape {fmt_shape(shape_of(bound))}")
            same_element_type(node, x, bound)
            x = node.emit(cls(x, broadcast_to(node, node.reshape(bound, ()), shape_of(x))))
    return [x]


COMPARISONS = {
    "Equal": "eq",
    "Less": "lt",
    "LessOrEqual": "le",
    "Greater": "gt",
    "GreaterOrEqual": "ge",
}


@onnx_op(*COMPARISONS)
def convert_compare(node: Node) -> list[Value]:
    a, b = node.input(0), node.input(1)
    same_element_type(node, a, b)
    a, b = broadcast_all(node, a, b)
    return [node.emit(graph.CompareOp(COMPARISONS[node.op_type], a, b))]


@onnx_op("Where")
def convert_where(node: Node) -> list[Value]:
    cond, a, b = node.input(0), node.input(1), node.input(2)
    if element_type_of(cond) != i1:
        raise node.error(f"the condition must be a bool tensor, got {element_type_of(cond)}")
    same_element_type(node, a, b)
    cond, a, b = broadcast_all(node, cond, a, b)
    return [node.emit(graph.SelectOp(cond, a, b))]


@onnx_op("Cast", attributes=("to", "saturate", "round_mode"))
def convert_cast(node: Node) -> list[Value]:
    # `saturate` and `round_mode` only affect float8/float4 targets, which mlfuse rejects anyway
    target = node.element_type(int(node.attr("to")), "the target type")
    return [node.cast(node.input(0), target)]


@onnx_op("BitCast", attributes=("to",))
def convert_bitcast(node: Node) -> list[Value]:
    """The bits of each element as the type `to` of the same width; a bool is 0 or 1."""
    x = node.input(0)
    source, target = element_type_of(x), node.element_type(int(node.attr("to")), "the target type")
    if source == i1 and graph.numpy_dtype(target).itemsize == 1:
        return [node.cast(x, target)]
    if i1 in (source, target) or graph.bit_width(source) != graph.bit_width(target):
        raise node.error(f"cannot reinterpret {source} as {target}: the widths differ")
    return [x if source == target else node.emit(graph.BitcastOp(x, target))]


@onnx_op("Identity")
def convert_identity(node: Node) -> list[Value]:
    return [node.input(0)]


@onnx_op("If", attributes=("then_branch", "else_branch"), static_inputs=(0,))
def convert_if(node: Node) -> list[Value]:
    """An If whose condition is known at compile time is the branch it takes, converted
    in place (the legacy exporter's shape checks: `if x.dim() == 3`); the branch reads
    the enclosing graph's values directly, as ONNX's scoping allows."""
    cond = node.const_input(0, "cond")
    assert cond is not None
    if cond.size != 1:
        raise node.error(f"cond must have one element, got shape {list(cond.shape)}")
    branch = node.attr("then_branch" if bool(cond.reshape(-1)[0]) else "else_branch")
    if any(not o.type.HasField("tensor_type") for o in branch.output):
        raise node.error("the branch taken returns a sequence or an optional (only tensors are supported)")
    importer = node.importer
    for t in branch.initializer:
        importer.constants[t.name] = tensor_array(t, f"initializer '{t.name}'", node.name)
    for index, inner in enumerate(branch.node):
        if not (op_key(inner) in OPS or importer.foldable(inner, importer.constants)):
            raise node.error(f"the branch taken has a node '{inner.name or inner.op_type}' ({inner.op_type}) "
                             "that mlfuse cannot convert")
        importer.convert(index, inner)
    return [importer.constants[o.name] if o.name in importer.constants else importer.value(o.name) for o in branch.output]


@onnx_op("Constant", attributes=("value", "value_float", "value_floats", "value_int", "value_ints"))
def convert_constant(node: Node) -> list[Value]:
    if len(node.attributes) != 1:
        raise node.error(f"needs exactly one value attribute, got {sorted(node.attributes)}")
    (name,) = node.attributes
    value = node.attr(name)
    if name == "value":
        return [value]
    dtype = np.float32 if name.startswith("value_float") else np.int64
    return [np.asarray(value, dtype=dtype)]


@onnx_op("Shape", attributes=("start", "end"))
def convert_shape(node: Node) -> list[Value]:
    # shapes are static, so Shape is a constant
    name = node.proto.input[0]
    shape = node.importer.shape_of_value(name)
    start, end = int(node.attr("start", 0)), node.attr("end", None)
    return [np.array(shape[slice(start, None if end is None else int(end))], dtype=np.int64)]


# --- reductions and normalizations -------------------------------------------------------

REDUCTIONS: dict[str, type[graph.ReduceOp]] = {
    "ReduceSum": graph.ReduceSumOp,
    "ReduceMean": graph.ReduceMeanOp,
    "ReduceMax": graph.ReduceMaxOp,
    "ReduceMin": graph.ReduceMinOp,
}


@onnx_op(*REDUCTIONS, attributes=("axes", "keepdims", "noop_with_empty_axes"), static_inputs=(1,))
def convert_reduce(node: Node) -> list[Value]:
    x = node.input(0)
    rank = len(shape_of(x))
    axes = node.attr("axes")  # an attribute before opset 18 (13 for ReduceSum), an input after
    if axes is None:
        given = node.const_input(1, "axes")
        axes = None if given is None else given.reshape(-1).tolist()
    if not axes:
        if node.attr("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(rank))
    axes = normalize_axes(node, axes, rank)
    if not axes:
        return [x]
    keepdims = bool(node.attr("keepdims", 1))
    if element_type_of(x) == i1 and node.op_type in ("ReduceMax", "ReduceMin"):
        # any / all: the max or min of the values as 0/1 bytes
        as_bytes = node.cast(x, graph.element_type_for(np.dtype(np.uint8)))
        y = reduce(node, REDUCTIONS[node.op_type], as_bytes, axes, keepdims)
        return [node.emit(graph.CompareOp("ne", y, node.scalar_like(0, y)))]
    return [reduce(node, REDUCTIONS[node.op_type], x, axes, keepdims)]


def stable_exp(node: Node, x: SSAValue, axis: int) -> tuple[SSAValue, SSAValue]:
    """(x - max, exp(x - max)) along `axis`, the numerically safe softmax numerator."""
    shape = shape_of(x)
    peak = broadcast_to(node, reduce(node, graph.ReduceMaxOp, x, [axis]), shape)
    shifted = node.emit(graph.SubOp(x, peak))
    return shifted, node.emit(graph.ExpOp(shifted))


@onnx_op("Softmax", attributes=("axis",))
def convert_softmax(node: Node) -> list[Value]:
    x = node.input(0)
    axis = normalize_axis(node, int(node.attr("axis", -1)), len(shape_of(x)))
    _, e = stable_exp(node, x, axis)
    total = broadcast_to(node, reduce(node, graph.ReduceSumOp, e, [axis]), shape_of(x))
    return [node.emit(graph.DivOp(e, total))]


def log_softmax(node: Node, x: SSAValue, axis: int) -> SSAValue:
    """(x - max) - log(sum(exp(x - max))) along `axis`."""
    shifted, e = stable_exp(node, x, axis)
    log_total = node.emit(graph.LogOp(reduce(node, graph.ReduceSumOp, e, [axis])))
    return node.emit(graph.SubOp(shifted, broadcast_to(node, log_total, shape_of(x))))


@onnx_op("LogSoftmax", attributes=("axis",))
def convert_log_softmax(node: Node) -> list[Value]:
    x = node.input(0)
    return [log_softmax(node, x, normalize_axis(node, int(node.attr("axis", -1)), len(shape_of(x))))]


@onnx_op("LayerNormalization", attributes=("axis", "epsilon", "stash_type"))
def convert_layer_norm(node: Node) -> list[Value]:
    x = node.input(0)
    shape, el = shape_of(x), element_type_of(x)
    axis = normalize_axis(node, int(node.attr("axis", -1)), len(shape))
    stash = node.element_type(int(node.attr("stash_type", TensorProto.FLOAT)), "stash_type")
    if not is_float(stash):
        raise node.error(f"stash_type must be a floating-point type, got {stash}")
    axes = list(range(axis, len(shape)))
    xs = node.cast(x, stash)  # statistics are computed in the stash type
    mean = reduce(node, graph.ReduceMeanOp, xs, axes)
    centered = node.emit(graph.SubOp(xs, broadcast_to(node, mean, shape)))
    variance = reduce(node, graph.ReduceMeanOp, node.emit(graph.MulOp(centered, centered)), axes)
    epsilon = float(node.attr("epsilon", 1e-5))
    inv_std = node.emit(graph.RsqrtOp(node.emit(graph.AddOp(variance, node.scalar_like(epsilon, variance)))))
    y = node.cast(node.emit(graph.MulOp(centered, broadcast_to(node, inv_std, shape))), el)
    y = node.emit(graph.MulOp(y, broadcast_to(node, node.input(1), shape)))
    if node.has_input(2):
        y = node.emit(graph.AddOp(y, broadcast_to(node, node.input(2), shape)))
    return [y, mean, inv_std]


def batch_norm_training(node: Node, x: SSAValue) -> list[Value]:
    """training_mode = 1: normalized by the batch's statistics (the variance biased, as
    onnx's reference computes it), and the running statistics updated,
    running = running * momentum + batch * (1 - momentum)."""
    shape = shape_of(x)
    axes = [0, *range(2, len(shape))]
    mean = reduce(node, graph.ReduceMeanOp, x, axes, keepdims=False)
    centered = node.emit(graph.SubOp(x, along(node, mean, 1, shape)))
    var = reduce(node, graph.ReduceMeanOp, node.emit(graph.MulOp(centered, centered)), axes, keepdims=False)
    scale, bias, running_mean, running_var = (node.input(i) for i in range(1, 5))
    epsilon, momentum = float(node.attr("epsilon", 1e-5)), float(node.attr("momentum", 0.9))
    factor = node.emit(graph.MulOp(scale, node.emit(graph.RsqrtOp(node.emit(graph.AddOp(var, node.scalar_like(epsilon, var)))))))
    y = node.emit(graph.AddOp(node.emit(graph.MulOp(centered, along(node, factor, 1, shape))), along(node, bias, 1, shape)))

    def updated(running: SSAValue, batch: SSAValue) -> SSAValue:
        kept = node.emit(graph.MulOp(running, node.scalar_like(momentum, running)))
        return node.emit(graph.AddOp(kept, node.emit(graph.MulOp(batch, node.scalar_like(1.0 - momentum, batch)))))

    return [y, updated(running_mean, mean), updated(running_var, var)]


@onnx_op("BatchNormalization", attributes=("epsilon", "momentum", "training_mode"))
def convert_batch_norm(node: Node) -> list[Value]:
    x = node.input(0)
    shape, el = shape_of(x), element_type_of(x)
    if len(shape) < 2:
        raise node.error(f"the input must have rank >= 2 (N x C x ...), got {fmt_shape(shape)}")
    if node.attr("training_mode", 0):
        return batch_norm_training(node, x)
    if any(node.wants_output(i) for i in range(1, len(node.proto.output))):
        raise node.error("only the Y output is supported (running statistics are training outputs)")
    epsilon = float(node.attr("epsilon", 1e-5))
    params = [node.constant(i) for i in range(1, 5)]
    if all(p is not None for p in params):
        # y = x * a + b with a = scale / sqrt(var + eps), b = B - mean * a, folded at compile time
        scale, bias, mean, var = (p.astype(np.float64) for p in params)
        a = scale / np.sqrt(var + epsilon)
        dtype = graph.numpy_dtype(el)
        a_value = node.emit(graph.ConstantOp(dense_from_numpy(a.astype(dtype), el)))
        b_value = node.emit(graph.ConstantOp(dense_from_numpy((bias - mean * a).astype(dtype), el)))
        y = node.emit(graph.MulOp(x, along(node, a_value, 1, shape)))
        return [node.emit(graph.AddOp(y, along(node, b_value, 1, shape)))]
    scale, bias, mean, var = (node.input(i) for i in range(1, 5))
    factor = node.emit(graph.MulOp(scale, node.emit(graph.RsqrtOp(node.emit(graph.AddOp(var, node.scalar_like(epsilon, var)))))))
    centered = node.emit(graph.SubOp(x, along(node, mean, 1, shape)))
    y = node.emit(graph.MulOp(centered, along(node, factor, 1, shape)))
    return [node.emit(graph.AddOp(y, along(node, bias, 1, shape)))]


@onnx_op("GlobalAveragePool", "GlobalMaxPool")
def convert_global_pool(node: Node) -> list[Value]:
    x = node.input(0)
    rank = len(shape_of(x))
    if rank < 3:
        raise node.error(f"the input must have rank >= 3 (N x C x spatial...), got {fmt_shape(shape_of(x))}")
    cls = graph.ReduceMeanOp if node.op_type == "GlobalAveragePool" else graph.ReduceMaxOp
    return [reduce(node, cls, x, range(2, rank))]


# --- contractions -------------------------------------------------------------------------


def matmul(node: Node, a: SSAValue, b: SSAValue) -> SSAValue:
    """numpy.matmul semantics: 1-D promotion, batch broadcasting."""
    same_element_type(node, a, b)
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        raise node.error("MatMul operands must have rank >= 1")
    if len(sa) == 1:
        a = node.reshape(a, (1, sa[0]))
    if len(sb) == 1:
        b = node.reshape(b, (sb[0], 1))
    ma, mb = shape_of(a), shape_of(b)
    if ma[-1] != mb[-2]:
        raise node.error(
            f"contraction sizes differ: {fmt_shape(sa)} has K={ma[-1]}, {fmt_shape(sb)} has K={mb[-2]}"
        )
    if len(ma) == 2 and len(mb) == 2:
        y = node.emit(graph.MatmulOp(a, b))
    elif len(mb) == 2:
        # (..., M, K) x (K, N): one 2-D product over the flattened batch, no copies of b
        rows = math.prod(ma[:-1])
        y = node.emit(graph.MatmulOp(node.reshape(a, (rows, ma[-1])), b))
        y = node.reshape(y, (*ma[:-1], mb[-1]))
    else:
        batch = broadcast_shape(node, ma[:-2], mb[:-2])
        a = broadcast_to(node, a, (*batch, *ma[-2:]))
        b = broadcast_to(node, b, (*batch, *mb[-2:]))
        if not batch:
            y = node.emit(graph.MatmulOp(a, b))
        else:
            y = node.emit(graph.BatchMatmulOp(a, b))
    out = list(shape_of(y))
    if len(sb) == 1:
        out.pop(-1)
    if len(sa) == 1:
        out.pop(-1 if len(sb) == 1 else -2)
    return node.reshape(y, out)


@onnx_op("MatMul")
def convert_matmul(node: Node) -> list[Value]:
    return [matmul(node, node.input(0), node.input(1))]


@onnx_op("Gemm", attributes=("alpha", "beta", "transA", "transB"))
def convert_gemm(node: Node) -> list[Value]:
    a, b = node.input(0), node.input(1)
    for what, v in (("A", a), ("B", b)):
        if len(shape_of(v)) != 2:
            raise node.error(f"{what} must be a matrix, got shape {fmt_shape(shape_of(v))}")
    if node.attr("transA", 0):
        a = node.emit(graph.TransposeOp(a, [1, 0]))
    if node.attr("transB", 0):
        b = node.emit(graph.TransposeOp(b, [1, 0]))
    y = matmul(node, a, b)
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    if alpha != 1.0:
        y = node.emit(graph.MulOp(y, node.scalar_like(alpha, y)))
    if node.has_input(2) and beta != 0.0:
        c = broadcast_to(node, node.input(2), shape_of(y))
        if beta != 1.0:
            c = node.emit(graph.MulOp(c, node.scalar_like(beta, c)))
        y = node.emit(graph.AddOp(y, c))
    return [y]


# --- data movement ---------------------------------------------------------------------------


@onnx_op("Transpose", attributes=("perm",))
def convert_transpose(node: Node) -> list[Value]:
    x = node.input(0)
    rank = len(shape_of(x))
    perm = [int(p) for p in node.attr("perm", range(rank - 1, -1, -1))]
    if sorted(perm) != list(range(rank)):
        raise node.error(f"perm {perm} is not a permutation of 0..{rank - 1}")
    if perm == list(range(rank)):
        return [x]
    return [node.emit(graph.TransposeOp(x, perm))]


@onnx_op("Reshape", attributes=("allowzero",), static_inputs=(1,))
def convert_reshape(node: Node) -> list[Value]:
    x = node.input(0)
    shape = shape_of(x)
    target = [int(d) for d in node.const_input(1, "shape").reshape(-1)]
    allow_zero = bool(node.attr("allowzero", 0))
    out = [shape[i] if d == 0 and not allow_zero else d for i, d in enumerate(target)]
    if out.count(-1) > 1:
        raise node.error(f"shape {target} has more than one -1")
    known = math.prod(d for d in out if d != -1)
    total = math.prod(shape)
    if -1 in out:
        if known == 0 or total % known:
            raise node.error(f"cannot reshape {fmt_shape(shape)} to {target}")
        out[out.index(-1)] = total // known
    if any(d < 0 for d in out) or math.prod(out) != total:
        raise node.error(f"cannot reshape {fmt_shape(shape)} ({total} elements) to {target}")
    return [node.reshape(x, out)]


@onnx_op("Flatten", attributes=("axis",))
def convert_flatten(node: Node) -> list[Value]:
    x = node.input(0)
    shape = shape_of(x)
    axis = int(node.attr("axis", 1))
    if not -len(shape) <= axis <= len(shape):
        raise node.error(f"axis {axis} is out of range for rank {len(shape)}")
    if axis < 0:
        axis += len(shape)
    return [node.reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:])))]


@onnx_op("Squeeze", static_inputs=(1,))
def convert_squeeze(node: Node) -> list[Value]:
    x = node.input(0)
    shape = shape_of(x)
    given = node.const_input(1, "axes")
    if given is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    else:
        axes = normalize_axes(node, given.reshape(-1).tolist(), len(shape))
    for a in axes:
        if shape[a] != 1:
            raise node.error(f"cannot squeeze axis {a} of size {shape[a]} (shape {fmt_shape(shape)})")
    return [node.reshape(x, [d for i, d in enumerate(shape) if i not in axes])]


@onnx_op("Unsqueeze", static_inputs=(1,))
def convert_unsqueeze(node: Node) -> list[Value]:
    x = node.input(0)
    shape = list(shape_of(x))
    given = node.const_input(1, "axes").reshape(-1).tolist()
    rank = len(shape) + len(given)
    axes = sorted(normalize_axes(node, given, rank))
    for a in axes:
        shape.insert(a, 1)
    return [node.reshape(x, shape)]


@onnx_op("Expand", static_inputs=(1,))
def convert_expand(node: Node) -> list[Value]:
    x = node.input(0)
    target = [int(d) for d in node.const_input(1, "shape").reshape(-1)]
    return [broadcast_to(node, x, broadcast_shape(node, shape_of(x), target))]


@onnx_op("Concat", attributes=("axis",))
def convert_concat(node: Node) -> list[Value]:
    values = node.inputs()
    same_element_type(node, *values)
    rank = len(shape_of(values[0]))
    axis = normalize_axis(node, int(node.attr("axis")), rank)
    for v in values[1:]:
        s, first = shape_of(v), shape_of(values[0])
        if len(s) != rank or any(a != b for d, (a, b) in enumerate(zip(s, first)) if d != axis):
            raise node.error(f"operand shapes {fmt_shape(first)} and {fmt_shape(s)} differ outside axis {axis}")
    if len(values) == 1:
        return values
    return [node.emit(graph.ConcatOp(values, axis))]


def gather_operands(node: Node) -> tuple[SSAValue, SSAValue, int]:
    """(data, indices, axis) of Gather and GatherElements, checked."""
    data, indices = node.input(0), node.input(1)
    if str(element_type_of(indices)) not in graph.INDEX_TYPES:
        raise node.error(f"indices must be int32 or int64, got {element_type_of(indices)}")
    rank = len(shape_of(data))
    if rank == 0:
        raise node.error("data must have rank >= 1")
    return data, indices, normalize_axis(node, int(node.attr("axis", 0)), rank)


@onnx_op("Gather", attributes=("axis",))
def convert_gather(node: Node) -> list[Value]:
    """An index out of range reads the nearest end instead of failing (see graph.gather)."""
    data, indices, axis = gather_operands(node)
    if shape_of(data)[axis] == 0 and math.prod(shape_of(indices)) > 0:
        raise node.error(f"gathers from axis {axis} of size 0")
    return [node.emit(graph.GatherOp(data, indices, axis))]


@onnx_op("GatherElements", attributes=("axis",))
def convert_gather_elements(node: Node) -> list[Value]:
    data, indices, axis = gather_operands(node)
    sd, si = shape_of(data), shape_of(indices)
    if len(si) != len(sd) or any(m > n for d, (n, m) in enumerate(zip(sd, si)) if d != axis):
        raise node.error(f"indices of shape {fmt_shape(si)} do not fit data of shape {fmt_shape(sd)} off axis {axis}")
    if sd[axis] == 0 and math.prod(si) > 0:
        raise node.error(f"gathers from axis {axis} of size 0")
    return [node.emit(graph.GatherElementsOp(data, indices, axis))]


INT64_MAX = np.iinfo(np.int64).max


@onnx_op("Slice", static_inputs=(1, 2, 3, 4))
def convert_slice(node: Node) -> list[Value]:
    x = node.input(0)
    shape = shape_of(x)
    rank = len(shape)
    starts = node.const_input(1, "starts").reshape(-1).tolist()
    ends = node.const_input(2, "ends").reshape(-1).tolist()
    axes_given = node.const_input(3, "axes")
    axes = list(range(len(starts))) if axes_given is None else axes_given.reshape(-1).tolist()
    steps_given = node.const_input(4, "steps")
    steps = [1] * len(starts) if steps_given is None else steps_given.reshape(-1).tolist()
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise node.error(
            f"starts, ends, axes and steps must have equal lengths, got {len(starts)}, {len(ends)}, {len(axes)}, {len(steps)}"
        )
    start, stop, step = [0] * rank, list(shape), [1] * rank
    backwards: list[tuple[int, np.ndarray]] = []
    for a, s, e, st in zip(normalize_axes(node, axes, rank), starts, ends, steps):
        if st == 0:
            raise node.error("steps must be non-zero")
        if st < 0:  # a gather of the positions Python's (and onnx's reference) slicing picks
            backwards.append((a, np.arange(shape[a], dtype=np.int64)[slice(s, e, st)]))
            continue
        n = shape[a]
        s = min(max(s + n if s < 0 else s, 0), n)
        e = min(max(e + n if e < 0 else e, 0), n)
        start[a], stop[a], step[a] = s, max(s, e), st
    y = x
    if start != [0] * rank or stop != list(shape) or step != [1] * rank:
        y = node.emit(graph.SliceOp(x, start, stop, step))
    for a, positions in backwards:
        if positions.size == 0:
            raise node.error(f"the slice of axis {a} with a negative step is empty (empty tensors are not supported)")
        y = node.emit(graph.GatherOp(y, node.emit(graph.ConstantOp(dense_from_numpy(positions, i64))), a))
    return [y]


def slice_axis(node: Node, x: SSAValue, axis: int, lo: int, hi: int) -> SSAValue:
    shape = shape_of(x)
    start, stop = [0] * len(shape), list(shape)
    start[axis], stop[axis] = lo, hi
    return node.emit(graph.SliceOp(x, start, stop))


def pad_axis_by_copies(node: Node, x: SSAValue, axis: int, low: int, high: int, mode: str) -> SSAValue:
    """Pad one axis in mode edge, reflect or wrap as a concatenation of slices of x."""
    n = shape_of(x)[axis]
    limit = {"edge": None, "reflect": n - 1, "wrap": n}[mode]
    if limit is not None and max(low, high) > limit:
        raise node.error(f"{mode} padding of {max(low, high)} exceeds what axis {axis} of size {n} allows ({limit})")
    if mode == "edge":
        def border(index: int, count: int) -> list[SSAValue]:
            edge = slice_axis(node, x, axis, index, index + 1)
            shape = list(shape_of(x))
            shape[axis] = count
            return [node.emit(graph.BroadcastOp(edge, range(len(shape)), shape))]

        before = border(0, low) if low else []
        after = border(n - 1, high) if high else []
    elif mode == "reflect":
        # mirror without repeating the border element: x[low], ..., x[1] | x | x[n-2], ..., x[n-1-high]
        before = [slice_axis(node, x, axis, i, i + 1) for i in range(low, 0, -1)]
        after = [slice_axis(node, x, axis, i, i + 1) for i in range(n - 2, n - 2 - high, -1)]
    else:  # wrap
        before = [slice_axis(node, x, axis, n - low, n)] if low else []
        after = [slice_axis(node, x, axis, 0, high)] if high else []
    return node.emit(graph.ConcatOp([*before, x, *after], axis))


@onnx_op("Pad", attributes=("mode",), static_inputs=(1, 3))
def convert_pad(node: Node) -> list[Value]:
    x = node.input(0)
    shape = shape_of(x)
    rank = len(shape)
    mode = node.attr("mode", "constant")
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise node.error(f"mode \"{mode}\" is not supported (constant, edge, reflect, wrap)")
    pads = node.const_input(1, "pads").reshape(-1).tolist()
    given_axes = node.const_input(3, "axes")
    axes = list(range(rank)) if given_axes is None else normalize_axes(node, given_axes.reshape(-1).tolist(), rank)
    if len(pads) != 2 * len(axes):
        raise node.error(f"pads must have {2 * len(axes)} entries (2 per padded axis), got {len(pads)}")
    low, high = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        low[a], high[a] = int(pads[i]), int(pads[i + len(axes)])
    if any(lo < 0 or hi < 0 for lo, hi in zip(low, high)):
        # negative pads crop
        start = [max(0, -lo) for lo in low]
        stop = [n - max(0, -hi) for n, hi in zip(shape, high)]
        if any(a > b for a, b in zip(start, stop)):
            raise node.error(f"negative pads {pads} remove more than the whole of {fmt_shape(shape)}")
        x = node.emit(graph.SliceOp(x, start, stop))
        low, high = [max(0, p) for p in low], [max(0, p) for p in high]
    if not any(low) and not any(high):
        return [x]
    if mode == "constant":
        if node.has_input(2) and node.constant(2) is None:
            return [pad_with_run_time_value(node, x, low, high, node.input(2))]
        value = node.constant(2)
        fill = 0 if value is None or value.size == 0 else value.reshape(-1)[0].item()
        return [node.emit(graph.PadOp(x, low, high, fill))]
    for axis in range(rank):
        if low[axis] or high[axis]:
            x = pad_axis_by_copies(node, x, axis, low[axis], high[axis], mode)
    return [x]


def pad_with_run_time_value(node: Node, x: SSAValue, low: Sequence[int], high: Sequence[int], value: SSAValue) -> SSAValue:
    """A constant pad whose value is only known at run time (an Attention body's -inf cast
    to the input's type): zeros, then the value selected wherever some padded axis's
    position lies outside x."""
    if math.prod(shape_of(value)) != 1:
        raise node.error(f"constant_value must be one value, got shape {fmt_shape(shape_of(value))}")
    padded = node.emit(graph.PadOp(x, low, high, 0))
    shape = shape_of(padded)
    outside = None
    for axis, (lo, hi) in enumerate(zip(low, high)):
        if not lo and not hi:
            continue
        position = node.emit(graph.ConstantOp(dense_from_numpy(np.arange(shape[axis], dtype=np.int64), i64)))
        position = node.emit(graph.BroadcastOp(position, [axis], shape))
        below = node.emit(graph.CompareOp("lt", position, node.splat(lo, i64, shape)))
        beyond = node.emit(graph.CompareOp("ge", position, node.splat(shape[axis] - hi, i64, shape)))
        here = node.emit(graph.SelectOp(below, below, beyond))
        outside = here if outside is None else node.emit(graph.SelectOp(outside, outside, here))
    assert outside is not None
    fill = broadcast_to(node, node.reshape(node.cast(value, element_type_of(x)), ()), shape)
    return node.emit(graph.SelectOp(outside, fill, padded))


# --- stencils -----------------------------------------------------------------------------------


@dataclass
class Window:
    """Window geometry of a Conv or Pool node over its spatial dimensions."""

    kernel: list[int]
    strides: list[int]
    pads: list[int]  # begins..., ends...
    dilations: list[int]


def window_of(node: Node, x: SSAValue, kernel: Sequence[int], ceil_mode: bool = False) -> tuple[Window, list[int]]:
    """The window of a node (auto_pad resolved) and, for ceil_mode, the extra end padding."""
    spatial = shape_of(x)[2:]
    n = len(spatial)
    strides = node.int_list("strides", [1] * n, n)
    dilations = node.int_list("dilations", [1] * n, n)
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad != "NOTSET" and "pads" in node.attributes:
        raise node.error(f"pads cannot be given together with auto_pad = {auto_pad}")
    if auto_pad == "NOTSET":
        pads = node.int_list("pads", [0] * 2 * n, 2 * n)
    elif auto_pad == "VALID":
        pads = [0] * 2 * n
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for size, k, s, d in zip(spatial, kernel, strides, dilations):
            out = -(-size // s)
            total = max(0, (out - 1) * s + d * (k - 1) + 1 - size)
            small, big = total // 2, total - total // 2
            begins.append(small if auto_pad == "SAME_UPPER" else big)
            ends.append(big if auto_pad == "SAME_UPPER" else small)
        pads = begins + ends
    else:
        raise node.error(f"auto_pad \"{auto_pad}\" is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    if any(p < 0 for p in pads):
        raise node.error(f"pads must be non-negative, got {pads}")
    extra = [0] * n
    if ceil_mode:
        for i, (size, k, s, d) in enumerate(zip(spatial, kernel, strides, dilations)):
            extent = d * (k - 1) + 1
            padded = size + pads[i] + pads[i + n]
            out = -(-(padded - extent) // s) + 1
            if (out - 1) * s >= size + pads[i]:
                out -= 1  # the last window must start inside the input or its leading padding
            extra[i] = max(0, (out - 1) * s + extent - padded)
    return Window(list(kernel), strides, pads, dilations), extra


def to_2d(node: Node, x: SSAValue, window: Window, what: str) -> tuple[SSAValue, Window]:
    """Lift a 1-D window op (N, C, L) to 2-D (N, C, 1, L); 2-D passes through."""
    shape = shape_of(x)
    if len(shape) == 4:
        return x, window
    if len(shape) != 3:
        raise node.error(
            f"only 1-D and 2-D {what} are supported, got an input of shape {fmt_shape(shape)}"
        )
    w = window
    lifted = Window([1, *w.kernel], [1, *w.strides], [0, w.pads[0], 0, w.pads[1]], [1, *w.dilations])
    return node.reshape(x, (*shape[:2], 1, shape[2])), lifted


def from_2d(node: Node, y: SSAValue, rank: int) -> SSAValue:
    if rank == 4:
        return y
    n, c, _, length = shape_of(y)
    return node.reshape(y, (n, c, length))


def pool_as_2d(node: Node, x: SSAValue, window: Window) -> tuple[SSAValue, Window, Callable[[SSAValue], SSAValue]]:
    """A pool as a 2-D one: (x, window, back to the pool's own output). An N-D pool
    whose window spans at most two axes (kernel, stride and dilation 1, no padding on
    the others: the 3-D average pool over (N, 1, C, H, W) that exporters make of
    LocalResponseNorm) pools those two with the others moved into the batch."""
    shape = shape_of(x)
    rank, n, w = len(shape), len(shape) - 2, window
    if rank in (3, 4):
        x2, w2 = to_2d(node, x, window, "pools")
        return x2, w2, lambda y: from_2d(node, y, rank)
    spanned = [i for i in range(n) if (w.kernel[i], w.strides[i], w.dilations[i], w.pads[i], w.pads[i + n]) != (1, 1, 1, 0, 0)]
    if rank < 3 or len(spanned) > 2:
        raise node.error(f"only 1-D and 2-D pools (or windows over at most 2 axes) are supported, got an input of "
                         f"shape {fmt_shape(shape)} and kernel {w.kernel}")
    others = [i for i in range(n) if i not in spanned]
    kept = sorted(spanned + others[len(others) - (2 - len(spanned)):])  # two spatial axes for the 2-D pool
    batch = [i for i in range(n) if i not in kept]
    perm = [0, *(2 + i for i in batch), 1, *(2 + i for i in kept)]
    moved = node.emit(graph.TransposeOp(x, perm))
    folded = node.reshape(moved, [shape[0] * math.prod(shape[2 + i] for i in batch), shape[1], *(shape[2 + i] for i in kept)])
    w2 = Window([w.kernel[i] for i in kept], [w.strides[i] for i in kept],
                [w.pads[i] for i in kept] + [w.pads[i + n] for i in kept], [w.dilations[i] for i in kept])

    def back(y: SSAValue) -> SSAValue:
        unfolded = node.reshape(y, [shape[0], *(shape[2 + i] for i in batch), shape[1], *shape_of(y)[2:]])
        return node.emit(graph.TransposeOp(unfolded, [perm.index(k) for k in range(rank)]))

    return folded, w2, back


def separable_pools(node: Node, x: SSAValue, window: Window, pool: Callable[[SSAValue, Window], SSAValue]) -> SSAValue:
    """`pool` over a window that spans more than two axes (a 3-D pool), as pools over two
    axes and then the next ones (pool_as_2d each). Exact for max and average pools: the
    elements a window covers inside the input are the product of what it covers along
    each axis, so a max is the max of the per-axis maxes and an average's count, with
    or without the pads, is the product of the per-axis counts."""
    n = len(window.kernel)
    spanned = [i for i in range(n) if (window.kernel[i], window.strides[i], window.dilations[i], window.pads[i],
                                       window.pads[i + n]) != (1, 1, 1, 0, 0)]
    for start in range(0, max(len(spanned), 1), 2):
        axes = spanned[start : start + 2]
        part = Window([window.kernel[i] if i in axes else 1 for i in range(n)],
                      [window.strides[i] if i in axes else 1 for i in range(n)],
                      [window.pads[i] if i % n in axes else 0 for i in range(2 * n)],
                      [window.dilations[i] if i in axes else 1 for i in range(n)])
        x2, w2, back = pool_as_2d(node, x, part)
        x = back(pool(x2, w2))
    return x


@onnx_op("Conv", attributes=("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
def convert_conv(node: Node) -> list[Value]:
    return [conv(node, node.input(0), node.input(1), node.input(2) if node.has_input(2) else None)]


def conv(node: Node, x: SSAValue, w: SSAValue, bias: SSAValue | None = None) -> SSAValue:
    """The node's 1-D, 2-D or 3-D convolution of x by w (its attributes: pads, strides, group...)."""
    same_element_type(node, x, w)
    rank = len(shape_of(x))
    if rank not in (3, 4, 5) or len(shape_of(w)) != rank:
        raise node.error(
            f"only 1-D, 2-D and 3-D convolutions are supported, got input {fmt_shape(shape_of(x))} "
            f"and weight {fmt_shape(shape_of(w))}"
        )
    kernel = list(shape_of(w)[2:])
    given = node.attr("kernel_shape")
    if given is not None and [int(k) for k in given] != kernel:
        raise node.error(f"kernel_shape {list(given)} differs from the weight's spatial shape {kernel}")
    window, _ = window_of(node, x, kernel)
    group = int(node.attr("group", 1))
    if rank == 5:
        y = conv3d_as_2d(node, x, w, window, group)
    else:
        x2, window = to_2d(node, x, window, "convolutions")
        w2 = node.reshape(w, (*shape_of(w)[:2], 1, kernel[0])) if rank == 3 else w
        y = from_2d(node, node.emit(graph.Conv2dOp(x2, w2, window.strides, window.pads, window.dilations, group)), rank)
    if bias is not None:
        if shape_of(bias) != (shape_of(w)[0],):
            raise node.error(f"bias must have shape {shape_of(w)[0]}, got {fmt_shape(shape_of(bias))}")
        y = node.emit(graph.AddOp(y, along(node, bias, 1, shape_of(y))))
    return y


class GraphBuilding(Protocol):
    """What conv3d_as_2d asks of the node it builds for: an ONNX Node, or the StableHLO
    frontend's adapter of its Emitter (stablehlo.NodeLike)."""

    def emit(self, op: Operation) -> SSAValue: ...

    def reshape(self, v: SSAValue, shape: Sequence[int]) -> SSAValue: ...

    def error(self, message: str) -> Diagnostic: ...


def conv3d_as_2d(node: GraphBuilding, x: SSAValue, w: SSAValue, window: Window, group: int) -> SSAValue:
    """A 3-D convolution as one 2-D convolution: the depth taps move into the channels and
    the output depths into the batch. With x padded along depth, G groups of Cg channels
    and the depth window's k-th tap of output depth t at t sd + k dd,

        y[n, o, t, i, j] = sum_{k, c, a, b} w[o, c, k, a, b] x[n, g(o) Cg + c, t sd + k dd, ...]

    is conv2d over (N T, G KD Cg, H, W) by w as (O, KD Cg, KH, KW): channel (g, k, c) of
    batch (n, t) holds x[n, g Cg + c, t sd + k dd], and group g reads exactly its KD Cg
    of them, in the weight's (k, c) order."""
    n, c, depth, h, wd = shape_of(x)
    out_c, cg, kd, kh, kw = shape_of(w)
    if c != cg * group:
        raise node.error(f"weight {fmt_shape(shape_of(w))} does not match input channels {c} in {group} groups")
    (sd, *strides2), (dd, *dilations2), pads = window.strides, window.dilations, window.pads
    if pads[0] or pads[3]:
        x = node.emit(graph.PadOp(x, [0, 0, pads[0], 0, 0], [0, 0, pads[3], 0, 0], 0.0))
    padded = depth + pads[0] + pads[3]
    t = (padded - dd * (kd - 1) - 1) // sd + 1
    if t < 1:
        raise node.error(f"the depth window ({kd} taps, dilation {dd}) is larger than the padded depth {padded}")
    taps = []
    for k in range(kd):
        start, stop = [0, 0, k * dd, 0, 0], [n, c, k * dd + (t - 1) * sd + 1, h, wd]
        tap = node.emit(graph.SliceOp(x, start, stop, [1, 1, sd, 1, 1])) if (t, sd, kd) != (padded, 1, 1) else x
        taps.append(node.reshape(tap, (n, group, 1, cg, t, h, wd)))
    stacked = taps[0] if kd == 1 else node.emit(graph.ConcatOp(taps, 2))  # n, g, k, c, t, h, w
    moved = node.emit(graph.TransposeOp(stacked, [0, 4, 1, 2, 3, 5, 6]))  # n, t, g, k, c, h, w
    x2 = node.reshape(moved, (n * t, group * kd * cg, h, wd))
    w2 = node.reshape(node.emit(graph.TransposeOp(w, [0, 2, 1, 3, 4])), (out_c, kd * cg, kh, kw))
    pads2 = [pads[1], pads[2], pads[4], pads[5]]
    y2 = node.emit(graph.Conv2dOp(x2, w2, strides2, pads2, dilations2, group))
    _, _, oh, ow = shape_of(y2)
    return node.emit(graph.TransposeOp(node.reshape(y2, (n, t, out_c, oh, ow)), [0, 2, 1, 3, 4]))


def pool_kernel(node: Node, x: SSAValue) -> list[int]:
    kernel = node.attr("kernel_shape")
    if kernel is None:
        raise node.error("attribute 'kernel_shape' is required")
    if len(kernel) != len(shape_of(x)) - 2:
        raise node.error(f"kernel_shape {list(kernel)} does not match the input shape {fmt_shape(shape_of(x))}")
    return [int(k) for k in kernel]


@onnx_op(
    "MaxPool",
    attributes=("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"),
)
def convert_max_pool(node: Node) -> list[Value]:
    x = node.input(0)
    window, extra = window_of(node, x, pool_kernel(node, x), bool(node.attr("ceil_mode", 0)))
    n = len(extra)
    window.pads = window.pads[:n] + [p + e for p, e in zip(window.pads[n:], extra)]
    y = separable_pools(node, x, window,
                        lambda x2, w: node.emit(graph.MaxPool2dOp(x2, w.kernel, w.strides, w.pads, w.dilations)))
    if not node.wants_output(1):
        return [y]
    storage_order = int(node.attr("storage_order", 0))
    if storage_order not in (0, 1):
        raise node.error(f"storage_order must be 0 or 1, got {storage_order}")
    return [y, max_pool_indices(node, x, window, shape_of(y)[2:], storage_order)]


def window_taps(window: Window, spatial: Sequence[int], out: Sequence[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per window offset, in the window's row-major order: the input position (a linear
    index, clamped into the input) that every output position reads, and whether it
    lies inside the input (not in a pad)."""
    taps = []
    for offset in np.ndindex(*window.kernel):
        coords = [np.arange(o) * s - p + k * d
                  for o, s, p, k, d in zip(out, window.strides, window.pads, offset, window.dilations)]
        grids = np.meshgrid(*coords, indexing="ij")
        inside = np.logical_and.reduce([(g >= 0) & (g < size) for g, size in zip(grids, spatial)]).reshape(-1)
        clamped = [np.clip(g, 0, size - 1).reshape(-1) for g, size in zip(grids, spatial)]
        taps.append((np.stack(clamped), inside))
    return taps


def max_pool_indices(node: Node, x: SSAValue, window: Window, out: Sequence[int], storage_order: int) -> SSAValue:
    """MaxPool's Indices: where in x (flattened, the spatial axes row-major, or column-major
    with storage_order 1) each output's maximum is, the first one in window order as onnx's
    reference takes it (a later element must be greater; NaN never is). One gather of x
    per window offset, compared with the running maximum; the window's positions in a
    pad are never taken."""
    shape = shape_of(x)
    batch, channels, spatial = shape[0], shape[1], list(shape[2:])
    size = math.prod(spatial)
    flat = node.reshape(x, [batch, channels, size])
    picked_shape = [batch, channels, math.prod(out)]
    best = index = None
    seen = np.zeros(math.prod(out), bool)  # output positions that have read an element of x

    def constant(array: np.ndarray, el: Attribute) -> SSAValue:
        return along(node, node.emit(graph.ConstantOp(dense_from_numpy(array, el))), 2, picked_shape)

    for positions, inside in window_taps(window, spatial, out):
        if not inside.any():
            continue
        linear = np.asarray(np.ravel_multi_index(tuple(positions), spatial), np.int64)
        stored = linear if storage_order == 0 else np.asarray(np.ravel_multi_index(tuple(positions), spatial, order="F"), np.int64)
        picked = node.emit(graph.GatherOp(flat, node.emit(graph.ConstantOp(dense_from_numpy(linear, i64))), 2))
        where = constant(stored, i64)
        if best is None or index is None:
            best, index = picked, where
        else:
            take = node.emit(graph.CompareOp("gt", picked, best))
            compared = seen & inside  # elsewhere known at compile time: an output's first element inside x is
            if not compared.all():    # taken whatever it holds, a position in a pad never
                take = node.emit(graph.SelectOp(constant(compared, i1), take, constant(inside & ~seen, i1)))
            best = node.emit(graph.SelectOp(take, picked, best))
            index = node.emit(graph.SelectOp(take, where, index))
        seen |= inside
    assert index is not None  # every output's window holds an element of x (window_of checks the pads)
    planes = np.arange(batch * channels, dtype=np.int64).reshape(batch, channels, 1) * size
    index = node.emit(graph.AddOp(index, broadcast_to(node, node.emit(graph.ConstantOp(dense_from_numpy(planes, i64))),
                                                      picked_shape)))
    return node.reshape(index, [batch, channels, *out])


@onnx_op(
    "AveragePool",
    attributes=("auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"),
)
def convert_avg_pool(node: Node) -> list[Value]:
    x = node.input(0)
    window, extra = window_of(node, x, pool_kernel(node, x), bool(node.attr("ceil_mode", 0)))
    count_pad = bool(node.attr("count_include_pad", 0))
    n = len(extra)
    if count_pad and any(extra):
        # Declared pads count towards the divisor, the extra ceil_mode padding does not:
        # pad explicitly with zeros, then pool excluding only the extra padding.
        low, high = [0, 0, *window.pads[:n]], [0, 0, *window.pads[n:]]
        x = node.emit(graph.PadOp(x, low, high, 0.0))
        window.pads = [0] * n + extra
        count_pad = False
    else:
        window.pads = window.pads[:n] + [p + e for p, e in zip(window.pads[n:], extra)]
    return [separable_pools(node, x, window, lambda x2, w: node.emit(
        graph.AvgPool2dOp(x2, w.kernel, w.strides, w.pads, w.dilations, count_pad)))]


# The composite operators register themselves in OPS (imported last: they use this module).
from mlfuse.frontend import onnx_composite, onnx_generators  # noqa: E402, F401
