"""ONNX's narrow element types: bfloat16, the float8s, float4 and the 2- and 4-bit integers.

mlfuse's graph dialect has no such element types (nor has numpy: ml_dtypes adds them).
A tensor of one is carried as its *storage*: each element's bits in an unsigned integer
of the element's width, which is ml_dtypes' layout (two bytes for bfloat16, one byte
for the others; a 4- or 2-bit element in the byte's low bits). So a compiled function
takes and returns ml_dtypes arrays as they are, and the importer converts nodes on
narrow values as follows (`convert_narrow`):

- Cast and CastLike encode and decode (`encode`, `decode`), QuantizeLinear and
  DequantizeLinear quantize to and from narrow types;
- operators that only move elements (Reshape, Transpose, Gather, Concat, Where...) run
  on the storage, bit for bit, and so do If, Loop and Scan: their bodies' nodes are
  converted like any others (shape inference gives the bodies' types);
- every other operator runs on the values decoded to float32 (the integers to int8 or
  uint8), and its narrow results are encoded back: one rounding per operator, as
  ml_dtypes' arithmetic (onnx's reference) and onnxruntime do.

The rules are ml_dtypes' (what onnx's reference evaluator uses). Float encoding rounds
to nearest, ties to even:

    a = |x|, e = max(floor(log2 a), emin), q = 2^(e - M)    (M mantissa bits)
    n = round_half_even(a / q)                              (exact: q is a power of 2)
    code = ((e + bias - 1) << M) + n                        (n = 2^(M+1) carries into e)

computed in float64, so float32 and float64 sources round once. Codes above the
largest finite one overflow to the type's infinity or NaN, NaN goes to the type's NaN,
with the sign bit where the type has one (ml_dtypes' codes for +-inf and +-NaN are
read off ml_dtypes itself). Cast saturates the four float8 types (`saturate`, ONNX's
default: |x| clamped to the largest finite value first, infinities included); float4
always saturates, as ml_dtypes does. Float to a 2- or 4-bit integer truncates toward
zero and gives 0 out of range (ml_dtypes); integers wrap. float8e8m0 (a power of two)
follows onnx's `to_float8e8m0` with its round_mode. Decoding is a lookup in the 256
values ml_dtypes gives each byte, or for bfloat16 a shift into a float32's high half.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from onnx import TensorProto, helper
from xdsl.dialects.builtin import f16, f32, f64, i1, i8, i32, i64
from xdsl.ir import Attribute, SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, is_float, shape_of
from mlfuse.frontend.onnx_ops import ELEMENT_TYPES, OPS, Node, Value, dense_from_numpy, op_key

ui8, ui16 = graph.ELEMENT_TYPES["ui8"][0], graph.ELEMENT_TYPES["ui16"][0]
FLOAT8 = {TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E5M2FNUZ}

# Operators that only move, pick or drop elements: they run on the storage as it is.
STORAGE_OPS = {
    "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice",
    "Gather", "GatherElements", "GatherND", "Expand", "Tile", "Compress", "ReverseSequence", "Where",
    "SpaceToDepth", "DepthToSpace", "Shape", "Size", "Optional",
    "If", "Loop", "Scan",  # their bodies' nodes are converted as nodes are (importer.subgraph_types)
}


@dataclass(frozen=True)
class Narrow:
    """One narrow ONNX element type and its storage."""

    onnx_type: int
    dtype: np.dtype  # ml_dtypes'
    storage: Attribute  # ui8 or ui16

    @property
    def name(self) -> str:
        return TensorProto.DataType.Name(self.onnx_type)

    @property
    def is_float(self) -> bool:
        return not self.dtype.name.startswith(("int", "uint"))

    @property
    def storage_dtype(self) -> np.dtype:
        return graph.numpy_dtype(self.storage)

    @property
    def computes_in(self) -> Attribute:
        """The element type its values are decoded to."""
        if self.is_float:
            return f32
        return i8 if ml_dtypes.iinfo(self.dtype).min < 0 else ui8

    @property
    def always_saturates(self) -> bool:
        """Whether ml_dtypes' cast saturates (types with neither infinity nor NaN: float4, float6)."""
        return self.is_float and self.code(math.inf) == self.code(float(ml_dtypes.finfo(self.dtype).max))

    def code(self, value: float) -> int:
        """ml_dtypes' storage code of a float32 value."""
        with np.errstate(all="ignore"):
            return int(np.array([value], np.float32).astype(self.dtype).view(self.storage_dtype)[0])

    def table(self) -> np.ndarray:
        """The decoded value of every byte (one-byte types)."""
        codes = np.arange(256, dtype=np.uint8).view(self.dtype)
        with np.errstate(all="ignore"):
            return codes.astype(graph.numpy_dtype(self.computes_in))


def _narrow_types() -> dict[int, Narrow]:
    table = {}
    for onnx_type in TensorProto.DataType.values():
        if onnx_type in ELEMENT_TYPES or onnx_type == TensorProto.STRING:
            continue
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type))
        except Exception:  # UNDEFINED, COMPLEX..., types onnx cannot map
            continue
        if dtype.type.__module__ == "ml_dtypes":
            table[onnx_type] = Narrow(onnx_type, dtype, ui16 if dtype.itemsize == 2 else ui8)
    return table


NARROW: dict[int, Narrow] = _narrow_types()
BY_DTYPE: dict[np.dtype, Narrow] = {t.dtype: t for t in NARROW.values()}


def of_dtype(dtype: np.dtype) -> Narrow | None:
    return BY_DTYPE.get(np.dtype(dtype))


def storage_array(array: np.ndarray) -> np.ndarray:
    """An ml_dtypes array's storage (the same bytes as unsigned integers)."""
    t = BY_DTYPE[array.dtype]
    return np.ascontiguousarray(array).view(t.storage_dtype)


# --- decoding ---------------------------------------------------------------------------------


def decode(node: Node, bits: SSAValue, t: Narrow) -> SSAValue:
    """The values of narrow storage `bits`: float32, or int8/uint8 for the integers."""
    if t.storage == ui16:  # bfloat16: the high half of a float32
        wide = node.cast(bits, i32)
        wide = node.emit(graph.ShiftLeftOp(wide, node.scalar_like(16, wide)))
        return node.emit(graph.BitcastOp(wide, f32))
    table = node.emit(graph.ConstantOp(dense_from_numpy(t.table(), t.computes_in)))
    return node.emit(graph.GatherOp(table, node.cast(bits, i64), 0))


# --- encoding ---------------------------------------------------------------------------------


class Bits:
    """Integer and float64 arithmetic on one node's values, for the encoders."""

    def __init__(self, node: Node, like: SSAValue):
        self.node, self.like = node, like

    def c(self, value: float | int, el: Attribute) -> SSAValue:
        return self.node.emit(graph.ConstantOp(graph.dense_attr(
            np.full(shape_of(self.like), value, graph.numpy_dtype(el)), el)))

    def op(self, cls: type, *args: SSAValue) -> SSAValue:
        return self.node.emit(cls(*args))

    def bitcast(self, a: SSAValue, el: Attribute) -> SSAValue:
        return self.node.emit(graph.BitcastOp(a, el))

    def cmp(self, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.node.emit(graph.CompareOp(predicate, a, b))

    def where(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.node.emit(graph.SelectOp(cond, a, b))

    def either(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.where(a, self.c(True, i1), b)

    def both(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.where(a, b, self.c(False, i1))


def encode(node: Node, x: SSAValue, t: Narrow, saturate: bool = True, round_mode: str = "up") -> SSAValue:
    """x (any float or integer tensor) converted to narrow type t, as its storage."""
    if t.onnx_type == TensorProto.FLOAT8E8M0:
        return encode_e8m0(node, x, saturate, round_mode)
    if not t.is_float:
        return encode_integer(node, x, t)
    if t.onnx_type == TensorProto.BFLOAT16 and element_type_of(x) in (f32, f16):
        return encode_bfloat16(node, node.cast(x, f32))
    return encode_float(node, x, t, saturate=(saturate and t.onnx_type in FLOAT8) or t.always_saturates)


def encode_bfloat16(node: Node, x: SSAValue) -> SSAValue:
    """float32 to bfloat16, the high half of its bits rounded to nearest even (what the
    general encoder gives, in a third of its ops: every operator on bfloat16 ends in one):

        bits + 0x7FFF + (bit 16 of bits), shifted right by 16; NaN: 0x7FC0 and its sign
    """
    b = Bits(node, x)
    bits = b.bitcast(x, i32)
    lowest_kept = b.op(graph.BitAndOp, b.op(graph.ShiftRightOp, bits, b.c(16, i32)), b.c(1, i32))
    rounded = b.op(graph.AddOp, bits, b.op(graph.AddOp, lowest_kept, b.c(0x7FFF, i32)))
    high = b.op(graph.BitAndOp, b.op(graph.ShiftRightOp, rounded, b.c(16, i32)), b.c(0xFFFF, i32))
    quiet = b.op(graph.BitOrOp, b.op(graph.BitAndOp, b.op(graph.ShiftRightOp, bits, b.c(16, i32)), b.c(0x8000, i32)),
                 b.c(0x7FC0, i32))
    return node.cast(b.where(b.cmp("ne", x, x), quiet, high), ui16)


def encode_float(node: Node, x: SSAValue, t: Narrow, saturate: bool) -> SSAValue:
    """Round to nearest even into t's float format (see the module docstring)."""
    finfo = ml_dtypes.finfo(t.dtype)
    mantissa, bias = int(finfo.nmant), 1 - int(finfo.minexp)
    b = Bits(node, x)
    x = node.cast(x, f64)
    bits = b.bitcast(x, i64)
    negative = b.cmp("lt", bits, b.c(0, i64))  # the sign bit: -0 and -NaN too
    a = b.op(graph.AbsOp, x)
    is_nan = b.cmp("ne", x, x)
    largest = float(finfo.max)
    if saturate:  # infinities included; NaN stays NaN (the compare is false)
        a = b.where(b.cmp("gt", a, b.c(largest, f64)), b.c(largest, f64), a)
    finite = b.cmp("lt", a, b.c(math.inf, f64))
    a = b.where(finite, a, b.c(0.0, f64))
    exponent = b.op(graph.SubOp, b.op(graph.ShiftRightOp, b.bitcast(a, i64), b.c(52, i64)), b.c(1023, i64))
    exponent = b.op(graph.MaxOp, exponent, b.c(1 - bias, i64))
    k = b.op(graph.SubOp, exponent, b.c(mantissa, i64))
    quantum = b.bitcast(b.op(graph.ShiftLeftOp, b.op(graph.AddOp, k, b.c(1023, i64)), b.c(52, i64)), f64)
    n = node.cast(b.op(graph.RoundOp, b.op(graph.DivOp, a, quantum)), i64)
    code = b.op(graph.AddOp, b.op(graph.ShiftLeftOp, b.op(graph.AddOp, exponent, b.c(bias - 1, i64)), b.c(mantissa, i64)), n)
    overflow = b.either(b.cmp("gt", code, b.c(t.code(largest), i64)), b.cmp("eq", finite, b.c(False, i1)))
    sign_bit = 1 << (int(finfo.bits) - 1)
    signed = b.op(graph.BitOrOp, code, b.c(sign_bit, i64))
    if t.code(-0.0) == 0:  # no negative zero (FNUZ): -0 is 0
        signed = b.where(b.cmp("eq", code, b.c(0, i64)), code, signed)
    code = b.where(negative, signed, code)

    def special(value: float) -> SSAValue:
        return b.where(negative, b.c(t.code(-value), i64), b.c(t.code(value), i64))

    code = b.where(overflow, special(math.inf), code)
    code = b.where(is_nan, special(math.nan), code)
    return node.cast(code, t.storage)


def encode_integer(node: Node, x: SSAValue, t: Narrow) -> SSAValue:
    """The low bits of x's integer value; a float is truncated toward zero and gives 0
    outside the type's range (NaN too), as ml_dtypes does."""
    b = Bits(node, x)
    info = ml_dtypes.iinfo(t.dtype)
    if is_float(element_type_of(x)):
        x = node.cast(x, f64)
        inside = b.both(b.cmp("gt", x, b.c(info.min - 1, f64)), b.cmp("lt", x, b.c(info.max + 1, f64)))
        x = b.where(inside, x, b.c(0.0, f64))
    wide = node.cast(x, i64)
    mask = (1 << info.bits) - 1
    return node.cast(b.op(graph.BitAndOp, wide, b.c(mask, i64)), t.storage)


def encode_e8m0(node: Node, x: SSAValue, saturate: bool, round_mode: str) -> SSAValue:
    """onnx.numpy_helper.to_float8e8m0: the float32 exponent field, rounded up when any
    fraction bit is set ("up"), by guard/round/sticky bits ("nearest") or not ("down");
    NaN and infinities are 0xFF, and with `saturate` 0xFE does not round up."""
    b = Bits(node, x)
    bits = b.bitcast(node.cast(x, f32), i32)
    exponent = b.op(graph.BitAndOp, b.op(graph.ShiftRightOp, bits, b.c(23, i32)), b.c(0xFF, i32))

    def has(mask: int) -> SSAValue:
        return b.cmp("ne", b.op(graph.BitAndOp, bits, b.c(mask, i32)), b.c(0, i32))

    if round_mode == "up":
        up = has(0x7FFFFF)
    elif round_mode == "nearest":
        odd = b.cmp("gt", exponent, b.c(0, i32))  # onnx's "lsb"
        up = b.where(has(0x400000), b.either(has(0x200000), b.either(has(0x1FFFFF), odd)), b.c(False, i1))
    elif round_mode == "down":
        up = b.c(False, i1)
    else:
        raise node.error(f"round_mode must be 'up', 'down' or 'nearest', got '{round_mode}'")
    if saturate:
        up = b.where(b.cmp("eq", exponent, b.c(0xFE, i32)), b.c(False, i1), up)
    rounded = b.op(graph.AddOp, exponent, b.where(up, b.c(1, i32), b.c(0, i32)))
    special = b.cmp("eq", exponent, b.c(0xFF, i32))
    return node.cast(b.where(special, b.c(0xFF, i32), rounded), ui8)


# --- the importer's hook ----------------------------------------------------------------------


def narrow_inputs(node: Node) -> dict[int, Narrow]:
    return {i: t for i, name in enumerate(node.proto.input) if name and (t := node.importer.narrow_type(name))}


def narrow_outputs(node: Node) -> dict[int, Narrow]:
    return {i: t for i, name in enumerate(node.proto.output) if name and (t := node.importer.narrow_type(name))}


def convert_narrow(node: Node) -> list[Value] | None:
    """A node with a narrow input or output (see the module docstring); None for a node
    without one, which the importer converts as usual."""
    ins, outs = narrow_inputs(node), narrow_outputs(node)
    if not ins and not outs:
        return None
    if node.op_type in SPECIAL:
        return SPECIAL[node.op_type](node, ins)
    handler = OPS[op_key(node.proto)].handler
    if node.op_type in STORAGE_OPS:
        return list(handler(node))
    decode_inputs(node, ins)
    outputs = list(handler(node))
    for i, t in outs.items():
        if i < len(outputs):
            value = outputs[i]
            outputs[i] = encode(node, value, t) if isinstance(value, SSAValue) else np.asarray(value).astype(t.dtype)
    return outputs


def convert_cast(node: Node, ins: dict[int, Narrow]) -> list[Value]:
    if node.op_type == "Cast":
        to = int(node.attr("to"))
    else:
        to = node.importer.onnx_type(node.proto.input[1])
    decode_inputs(node, ins)
    x = node.input(0)
    target = NARROW.get(to)
    if target is not None:
        return [encode(node, x, target, bool(node.attr("saturate", 1)), node.attr("round_mode", "up"))]
    return [node.cast(x, node.element_type(to, "the target type"))]


def convert_quantize(node: Node, ins: dict[int, Narrow]) -> list[Value]:
    """QuantizeLinear onto a narrow type: an integer one's range clamps round(x / scale)
    plus the zero point; a float one encodes x / scale (saturating by `saturate`; float4
    adds its zero point first, as onnx's reference does)."""
    from mlfuse.frontend import onnx_quantize  # not at the top: it imports the whole op table

    t = ins.get(2) or NARROW.get(int(node.attr("output_dtype", 0)))
    if t is None:
        raise node.error("the quantized type must be given by the zero point or output_dtype")
    check_float8_zero_point(node, t)
    decode_inputs(node, ins)
    axis, block_size = int(node.attr("axis", 1)), int(node.attr("block_size", 0))
    ratio = onnx_quantize.scaled(node, axis, block_size)
    if not t.is_float:
        q = node.cast(node.emit(graph.RoundOp(ratio)), f64)
        q = onnx_quantize.zero_point_added(node, q, 2, axis, block_size)
        info = ml_dtypes.iinfo(t.dtype)
        return [encode_integer(node, onnx_quantize.clamped(node, q, int(info.min), int(info.max)), t)]
    if t.onnx_type == TensorProto.FLOAT4E2M1:
        ratio = onnx_quantize.zero_point_added(node, ratio, 2, axis, block_size)
    return [encode(node, ratio, t, bool(node.attr("saturate", 1)))]


def convert_dequantize(node: Node, ins: dict[int, Narrow]) -> list[Value]:
    """DequantizeLinear of a narrow x: its decoded values; a float8 zero point must be
    zero and is not applied (onnx's reference)."""
    from mlfuse.frontend import onnx_quantize  # not at the top: it imports the whole op table

    t = ins.get(0)
    check_float8_zero_point(node, t)
    decode_inputs(node, ins)
    x = node.cast(node.input(0), f32)
    applies = node.has_input(2) and (t is None or t.onnx_type not in FLOAT8)
    return [onnx_quantize.dequantized(node, x, node.input(2) if applies else None)]


def check_float8_zero_point(node: Node, t: Narrow | None) -> None:
    """A float8 zero point must be 0 (onnx's reference raises otherwise); one known only at
    run time is not checked, and not applied."""
    zero = node.constant(2)
    if t is not None and t.onnx_type in FLOAT8 and zero is not None and np.any(zero.astype(np.float32) != 0):
        raise node.error("the zero point of a float8 type must be 0")


def decode_inputs(node: Node, ins: dict[int, Narrow]) -> None:
    """Have node.input give the decoded values of the node's narrow inputs `ins` (decoded
    once per value: the importer keeps them for the value's other consumers)."""
    known = node.importer.decoded
    for i, t in ins.items():
        name = node.proto.input[i]
        if name not in known:
            known[name] = decode(node, node.input(i), t)
        node.decoded[i] = known[name]


# the operators that convert narrow values themselves
SPECIAL = {"Cast": convert_cast, "CastLike": convert_cast, "QuantizeLinear": convert_quantize,
           "DequantizeLinear": convert_dequantize}
