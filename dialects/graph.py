"""The `graph` dialect: tensor-level operations with value semantics.

Every op works on statically shaped `tensor<...>` values. Elementwise ops take
operands of identical type (builders and importers insert explicit
`graph.broadcast`s), so that the shape of every value is known without
broadcasting rules and later levels can map each op to an affine loop nest.

    %b = graph.broadcast %bias {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
    %s = graph.add %x, %b : tensor<4x8xf32>
    %m = graph.reduce_max %s {axes = array<i64: 1>, keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, Protocol, TypeVar, cast

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    Signedness,
    StringAttr,
    TensorType,
    UnitAttr,
    i1,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.ir.affine import AffineExpr
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasCanonicalizationPatternsTrait, OpTrait, Pure
from xdsl.utils.exceptions import VerifyException

FLOAT_TYPES = (Float16Type, BFloat16Type, Float32Type, Float64Type)
SUPPORTED_INT_WIDTHS = (1, 8, 16, 32, 64)

# The element types mlfuse computes on, by their IR spelling, with the numpy dtype
# that holds them: the one table the dialect, the reference, the runtime and the
# frontends derive theirs from. Signless iN means signed (numpy's intN); unsigned
# integers are spelled uiN. Below the graph level every integer is signless (arith's
# convention, see `storage_type`): the scalar lowering takes the signedness from the
# graph op and picks the unsigned forms (udiv, icmp ult, zext, uitofp...).
# bf16 is a graph type (the GPU path computes it in f32) without a numpy dtype.
_U = Signedness.UNSIGNED
ELEMENT_TYPES: dict[str, tuple[Attribute, np.dtype]] = {
    "f16": (Float16Type(), np.dtype(np.float16)),
    "f32": (Float32Type(), np.dtype(np.float32)),
    "f64": (Float64Type(), np.dtype(np.float64)),
    "i1": (i1, np.dtype(np.bool_)),
    "i8": (IntegerType(8), np.dtype(np.int8)),
    "i16": (IntegerType(16), np.dtype(np.int16)),
    "i32": (IntegerType(32), np.dtype(np.int32)),
    "i64": (i64, np.dtype(np.int64)),
    "ui8": (IntegerType(8, _U), np.dtype(np.uint8)),
    "ui16": (IntegerType(16, _U), np.dtype(np.uint16)),
    "ui32": (IntegerType(32, _U), np.dtype(np.uint32)),
    "ui64": (IntegerType(64, _U), np.dtype(np.uint64)),
}
SUPPORTED_TYPE_NAMES = ", ".join(ELEMENT_TYPES)


# ---------------------------------------------------------------------------
# helpers shared by the verifiers
# ---------------------------------------------------------------------------


def tensor_of(value: SSAValue | Attribute) -> TensorType:
    t = value.type if isinstance(value, SSAValue) else value
    assert isinstance(t, TensorType)
    return t


def shape_of(value: SSAValue | Attribute) -> tuple[int, ...]:
    return tuple(tensor_of(value).get_shape())


def element_type_of(value: SSAValue | Attribute) -> Attribute:
    return tensor_of(value).get_element_type()


def is_float(t: Attribute) -> bool:
    return isinstance(t, FLOAT_TYPES)


def is_int(t: Attribute) -> bool:
    return isinstance(t, IntegerType)


def is_unsigned(t: Attribute) -> bool:
    """uiN: integer ops on it take their unsigned forms."""
    return isinstance(t, IntegerType) and t.signedness.data == Signedness.UNSIGNED


def orders_unsigned(t: Attribute) -> bool:
    """Integers that compare, max and min as unsigned: uiN, and i1, numpy's bool, where
    False < True (signed, the bit set is -1: True > False had been false)."""
    return is_unsigned(t) or t == IntegerType(1)


def storage_type(t: Attribute) -> Attribute:
    """The type that holds `t` below the graph level: uiN becomes the signless iN
    (memrefs and arith ops are signless; signedness lives in the ops chosen)."""
    if isinstance(t, IntegerType) and t.signedness.data != Signedness.SIGNLESS:
        return IntegerType(t.width.data)
    return t


_SUPPORTED_TYPES = frozenset(t for t, _ in ELEMENT_TYPES.values())


def is_supported_element_type(t: Attribute) -> bool:
    # a set of the types, not their printed names: this runs for every operand of every verify
    return t in _SUPPORTED_TYPES or isinstance(t, BFloat16Type)


def fmt_shape(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


def check_tensor(op: Operation, what: str, t: Attribute) -> None:
    if not isinstance(t, TensorType):
        raise VerifyException(f"'{op.name}' {what} must be a tensor, got {t}")
    if any(d < 0 for d in t.get_shape()):
        raise VerifyException(
            f"'{op.name}' {what} must have a static shape, got {t}"
        )
    el = t.get_element_type()
    if not is_supported_element_type(el):
        raise VerifyException(
            f"'{op.name}' {what} has unsupported element type {el} "
            f"(expected {SUPPORTED_TYPE_NAMES} or bf16)"
        )


def i64_array(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def check_axes(op: Operation, name: str, axes: Sequence[int], rank: int) -> None:
    for a in axes:
        if not 0 <= a < rank:
            raise VerifyException(
                f"'{op.name}' {name} entry {a} is out of range for rank {rank}"
            )
    if len(set(axes)) != len(axes):
        raise VerifyException(f"'{op.name}' {name} has repeated entries {list(axes)}")


# ---------------------------------------------------------------------------
# op facts: traits the planner and the code generators query
# ---------------------------------------------------------------------------
#
# What an op is for fusion lives on the op, not in lists kept by each pass:
#
#   Elementwise(cost)  result[i] = f(operands[i]); `cost` in light-op units
#   Injective          each result element reads at most one element of each
#                      operand, at the index `op.source_index` computes
#   Broadcast          an injective op that reads one element for many results
#   Reduction(kind)    combines the operand over `reduce_axes`
#   Contraction        a matrix product
#   Window             a 2-D window op (convolution, pooling): kernel, strides...
#
# `mlfuse.analysis.op_classes.classify` turns these into the planner's op classes;
# the CPU and GPU code generators recompute values through `source_index`.


@dataclass(frozen=True)
class Elementwise(OpTrait):
    """result[i] depends only on the operands' elements at i (operands and result
    share one shape); the scalar function is in mlfuse.conversion.scalar.

    `cost` is the work of one element in light-op units (an add is 1): divisions
    and roots take several instructions, transcendental functions a polynomial or
    an SFU round trip. Ops above 1 are *expensive*: recomputing them is costly, so
    the planner and the stitcher keep their results rather than recompute them."""

    cost: float = 1.0

    @property
    def expensive(self) -> bool:
        return self.cost > 1.0


T = TypeVar("T")


class IndexBuilder(Protocol, Generic[T]):
    """Index arithmetic on some representation of indices: affine expressions for the
    loop level (`AFFINE`), `index` SSA values for the GPU kernels. The index maps
    (`source_index`) are written once against this protocol."""

    def constant(self, n: int) -> T: ...

    def plus(self, a: T, b: T) -> T: ...

    def shift(self, a: T, n: int) -> T:
        """a + n (n may be negative)."""
        ...

    def times(self, a: T, n: int) -> T: ...

    def floordiv(self, a: T, n: int) -> T: ...

    def mod(self, a: T, n: int) -> T: ...


class AffineIndexBuilder:
    """Indices as affine expressions (xDSL folds `+ 0`, `* 1` and `0 * n`)."""

    def constant(self, n: int) -> AffineExpr:
        return AffineExpr.constant(n)

    def plus(self, a: AffineExpr, b: AffineExpr) -> AffineExpr:
        return a + b

    def shift(self, a: AffineExpr, n: int) -> AffineExpr:
        return a + n

    def times(self, a: AffineExpr, n: int) -> AffineExpr:
        return a * n

    def floordiv(self, a: AffineExpr, n: int) -> AffineExpr:
        return a // n

    def mod(self, a: AffineExpr, n: int) -> AffineExpr:
        return a % n


AFFINE = AffineIndexBuilder()


@dataclass(frozen=True)
class Injective(OpTrait):
    """Each result element reads at most one element of each operand.

    The op defines `source_index(operand, index, ib) -> list`: the index of operand
    `operand` read for the result element at `index` (a sequence of `ib`'s values).
    This is the one definition of index propagation; the loop lowering, the
    stitched CPU kernels and the GPU kernels all go through it.

    `guarded`: the read is valid only where the source index is in bounds (pad
    fills the rest, concat selects among its operands; see the op's docstring).
    `indirect`: the index of one operand is read from another (the gathers:
    `source_index` covers the indices, `data_index` the data)."""

    guarded: bool = False
    indirect: bool = False

    def verify(self, op: Operation) -> None:
        if not callable(getattr(op, "source_index", None)):  # pragma: no cover - a definition error
            raise VerifyException(f"'{op.name}' is injective but defines no source_index")


@dataclass(frozen=True)
class Broadcast(Injective):
    """An injective op whose operand elements are read by many result elements."""


@dataclass(frozen=True)
class Reduction(OpTrait):
    """Combines the operand over the op's `reduce_axes` with `kind` (sum, max, min,
    mean, prod)."""

    kind: str


@dataclass(frozen=True)
class Contraction(OpTrait):
    """A (batched) matrix product: (.., M x K) . (.., K x N) -> (.., M x N)."""


@dataclass(frozen=True)
class Accumulates(OpTrait):
    """Adds up (or multiplies) many elements or products into each result element.
    On a low-precision float type (f16, bf16) its partial results are kept in f32
    (graph-widen-accumulators), as numpy and onnxruntime do: accumulated in f16, a
    sum of 2048 products was off by 2.7 where the correctly rounded result is off by
    0.05."""


@dataclass(frozen=True)
class Window(OpTrait):
    """A 2-D window op over NCHW tensors; `geometry(op)` gives its window."""

    @staticmethod
    def geometry(op: Operation) -> WindowGeometry:
        assert isinstance(op, WindowOp)
        return WindowGeometry(tuple(op.kernel_size), op.stride_values, op.pad_values, op.dilation_values)


@dataclass(frozen=True)
class WindowGeometry:
    """kernel (KH, KW), strides, pads [top, left, bottom, right], dilations."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    pads: tuple[int, ...]
    dilations: tuple[int, ...]


TraitT = TypeVar("TraitT", bound=OpTrait)


def trait_of(op: Operation, trait: type[TraitT]) -> TraitT | None:
    """`op.get_trait(trait)`, remembered per op class: traits belong to the class, and
    xDSL scans the class's trait set on every call (the fusion planner asks ~80k times
    for MobileNetV2). The cast's type is a string: built at run time, the union cost as
    much as the lookup."""
    return cast("TraitT | None", _class_trait(type(op), trait))


@functools.cache
def _class_trait(op_type: type[Operation], trait: type[OpTrait]) -> OpTrait | None:
    return op_type.get_trait(trait)


def elementwise_cost(op: Operation) -> float | None:
    """The per-element cost of an elementwise op; None for any other op."""
    trait = trait_of(op, Elementwise)
    return trait.cost if trait is not None else None


def is_elementwise(op: Operation) -> bool:
    return trait_of(op, Elementwise) is not None


def is_expensive(op: Operation) -> bool:
    """An elementwise op whose recomputation costs more than a light op."""
    trait = trait_of(op, Elementwise)
    return trait is not None and trait.expensive


def injective_trait(op: Operation) -> Injective | None:
    return trait_of(op, Injective)


def is_plain_injective(op: Operation) -> bool:
    """Injective with an unconditional, direct index map (broadcast, transpose, slice,
    reshape): result[i] = operand[source_index(0, i)]."""
    trait = trait_of(op, Injective)
    return trait is not None and not trait.guarded and not trait.indirect


def is_reduction(op: Operation) -> bool:
    return trait_of(op, Reduction) is not None


def is_contraction(op: Operation) -> bool:
    return trait_of(op, Contraction) is not None


def is_window_op(op: Operation) -> bool:
    """Convolution and pooling: stencils, whose locality tiling improves."""
    return trait_of(op, Window) is not None


def reshape_index(src_shape: Sequence[int], dst_shape: Sequence[int], index: Sequence[T], ib: IndexBuilder[T]) -> list[T]:
    """The row-major index into `dst_shape` of the element at `index` in `src_shape`.

    Dimensions are matched in groups of equal products, so that merging or
    splitting neighbours stays a plain multiply-add (or one floordiv/mod) instead
    of a full linearization: (i, j, k) of 128x12x64 is (i, j * 64 + k) of 128x768.
    """
    if 0 in src_shape or 0 in dst_shape:  # empty tensors: any index will do
        return [ib.constant(0) for _ in dst_shape]
    out: list[T] = []
    i = j = 0
    while i < len(src_shape) or j < len(dst_shape):
        gi, gj = [i], [j]
        pi = src_shape[i] if i < len(src_shape) else 1
        pj = dst_shape[j] if j < len(dst_shape) else 1
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj:
                pi *= src_shape[i]
                gi.append(i)
                i += 1
            else:
                pj *= dst_shape[j]
                gj.append(j)
                j += 1
        out += _regroup(src_shape, dst_shape, gi, gj, index, ib)
    return out


def _regroup(src_shape, dst_shape, gi: list[int], gj: list[int], index: Sequence[T], ib: IndexBuilder[T]) -> list[T]:
    """One group of reshape_index: linearize the source dims `gi`, split into `gj`."""
    src_dims = [d for d in gi if d < len(src_shape)]
    dst_dims = [d for d in gj if d < len(dst_shape)]
    linear: T | None = None
    for d in src_dims:
        linear = index[d] if linear is None else ib.plus(ib.times(linear, src_shape[d]), index[d])
    if linear is None:
        linear = ib.constant(0)
    out: list[T] = []
    for k, d in enumerate(dst_dims):
        inner = math.prod(dst_shape[e] for e in dst_dims[k + 1 :])
        e = linear if inner == 1 else ib.floordiv(linear, inner)
        out.append(e if k == 0 else ib.mod(e, dst_shape[d]))
    return out


def _canonicalization(patterns_fn: str):
    """Trait hooking a module-level function of `graph_canonicalize` into canonicalize."""

    class _Trait(HasCanonicalizationPatternsTrait):
        @classmethod
        def get_canonicalization_patterns(cls):
            from mlfuse.dialects import graph_canonicalize

            return getattr(graph_canonicalize, patterns_fn)()

    _Trait.__name__ = f"Canonicalize_{patterns_fn}"
    return _Trait()


# ---------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------


class UnaryElementwiseOp(IRDLOperation):
    """Base: one operand, result of the same type."""

    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure(), _canonicalization("elementwise_patterns"))
    assembly_format = "$input attr-dict `:` type($input)"
    irdl_options = (ParsePropInAttrDict(),)
    FLOAT_ONLY: ClassVar[bool] = True

    def __init__(self, input: SSAValue, attributes: dict[str, Attribute] | None = None):
        super().__init__(
            operands=[input], result_types=[input.type], attributes=attributes or {}
        )

    def verify_(self) -> None:
        check_tensor(self, "operand", self.input.type)
        el = element_type_of(self.input)
        if self.FLOAT_ONLY and not is_float(el):
            raise VerifyException(
                f"'{self.name}' expects a floating-point tensor, got element type {el}"
            )
        if not self.FLOAT_ONLY and el == i1:
            raise VerifyException(f"'{self.name}' does not accept i1 tensors")


@irdl_op_definition
class NegOp(UnaryElementwiseOp):
    name = "graph.neg"
    traits = traits_def(Elementwise())
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class AbsOp(UnaryElementwiseOp):
    name = "graph.abs"
    traits = traits_def(Elementwise())
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class ExpOp(UnaryElementwiseOp):
    name = "graph.exp"
    traits = traits_def(Elementwise(cost=8.0))


@irdl_op_definition
class LogOp(UnaryElementwiseOp):
    name = "graph.log"
    traits = traits_def(Elementwise(cost=8.0))


@irdl_op_definition
class SqrtOp(UnaryElementwiseOp):
    name = "graph.sqrt"
    traits = traits_def(Elementwise(cost=4.0))


@irdl_op_definition
class RsqrtOp(UnaryElementwiseOp):
    name = "graph.rsqrt"
    traits = traits_def(Elementwise(cost=4.0))


@irdl_op_definition
class ReciprocalOp(UnaryElementwiseOp):
    name = "graph.reciprocal"
    traits = traits_def(Elementwise(cost=4.0))


@irdl_op_definition
class TanhOp(UnaryElementwiseOp):
    name = "graph.tanh"
    traits = traits_def(Elementwise(cost=10.0))


@irdl_op_definition
class ErfOp(UnaryElementwiseOp):
    name = "graph.erf"
    traits = traits_def(Elementwise(cost=10.0))


@irdl_op_definition
class SinOp(UnaryElementwiseOp):
    """sin x, radians (libm's sinf/sin on the CPU: not vectorized)."""

    name = "graph.sin"
    traits = traits_def(Elementwise(cost=20.0))


@irdl_op_definition
class CosOp(UnaryElementwiseOp):
    """cos x, radians (libm's cosf/cos on the CPU: not vectorized)."""

    name = "graph.cos"
    traits = traits_def(Elementwise(cost=20.0))


@irdl_op_definition
class SigmoidOp(UnaryElementwiseOp):
    name = "graph.sigmoid"
    traits = traits_def(Elementwise(cost=10.0))


@irdl_op_definition
class ReluOp(UnaryElementwiseOp):
    name = "graph.relu"
    traits = traits_def(Elementwise())
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class BitNotOp(UnaryElementwiseOp):
    """~x on integers (numpy's invert)."""

    name = "graph.bitnot"
    traits = traits_def(Elementwise())
    FLOAT_ONLY: ClassVar[bool] = False

    def verify_(self) -> None:
        super().verify_()
        if not is_int(element_type_of(self.input)):
            raise VerifyException(f"'{self.name}' expects an integer tensor, got element type {element_type_of(self.input)}")


@irdl_op_definition
class FloorOp(UnaryElementwiseOp):
    """The largest integer not above x (NaN, infinities and signed zeros kept)."""

    name = "graph.floor"
    traits = traits_def(Elementwise())


@irdl_op_definition
class CeilOp(UnaryElementwiseOp):
    """The smallest integer not below x."""

    name = "graph.ceil"
    traits = traits_def(Elementwise())


@irdl_op_definition
class RoundOp(UnaryElementwiseOp):
    """The nearest integer, halves to even (numpy's round, ONNX Round)."""

    name = "graph.round"
    traits = traits_def(Elementwise())


@irdl_op_definition
class GeluOp(UnaryElementwiseOp):
    """GELU; `approximate = "tanh"` selects the tanh form, otherwise the erf form."""

    name = "graph.gelu"
    traits = traits_def(Elementwise(cost=20.0))
    approximate = opt_prop_def(StringAttr)
    assembly_format = "$input attr-dict `:` type($input)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, input: SSAValue, approximate: str = "none"):
        IRDLOperation.__init__(
            self,
            operands=[input],
            result_types=[input.type],
            properties={"approximate": StringAttr(approximate)},
        )

    @property
    def form(self) -> str:
        return self.approximate.data if self.approximate is not None else "none"

    def verify_(self) -> None:
        super().verify_()
        if self.form not in ("none", "tanh"):
            raise VerifyException(
                f"'graph.gelu' approximate must be \"none\" or \"tanh\", got \"{self.form}\""
            )


@irdl_op_definition
class CastOp(IRDLOperation):
    """Elementwise conversion of the element type (float<->int truncates towards zero)."""

    name = "graph.cast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), Elementwise(), _canonicalization("cast_patterns"))
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, input: SSAValue, element_type: Attribute):
        t = tensor_of(input)
        super().__init__(
            operands=[input], result_types=[TensorType(element_type, t.get_shape())]
        )

    def verify_(self) -> None:
        check_tensor(self, "operand", self.input.type)
        check_tensor(self, "result", self.result.type)
        if shape_of(self.input) != shape_of(self.result):
            raise VerifyException(
                f"'graph.cast' changes the shape from {fmt_shape(shape_of(self.input))} "
                f"to {fmt_shape(shape_of(self.result))}; only the element type may change"
            )


def bit_width(t: Attribute) -> int:
    return t.width.data if isinstance(t, IntegerType) else numpy_dtype(t).itemsize * 8


@irdl_op_definition
class BitcastOp(IRDLOperation):
    """Each element's bits read as another type of the same width (numpy's view; not bool).

        %i = graph.bitcast %x : tensor<3xf32> -> tensor<3xi32>
    """

    name = "graph.bitcast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), Elementwise())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, element_type: Attribute):
        super().__init__(operands=[input], result_types=[TensorType(element_type, shape_of(input))])

    def verify_(self) -> None:
        check_tensor(self, "operand", self.input.type)
        check_tensor(self, "result", self.result.type)
        if shape_of(self.input) != shape_of(self.result):
            raise VerifyException(f"'graph.bitcast' changes the shape from {fmt_shape(shape_of(self.input))} "
                                  f"to {fmt_shape(shape_of(self.result))}")
        source, target = element_type_of(self.input), element_type_of(self.result)
        if i1 in (source, target):
            raise VerifyException("'graph.bitcast' does not take i1 tensors (bools are not bits)")
        if bit_width(source) != bit_width(target):
            raise VerifyException(f"'graph.bitcast' from {source} to {target} changes the width "
                                  f"({bit_width(source)} to {bit_width(target)} bits)")


class BinaryElementwiseOp(IRDLOperation):
    """Base: two operands and the result all of one type."""

    T: ClassVar = VarConstraint("T", base(TensorType))
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure(), _canonicalization("elementwise_patterns"))
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"
    FLOAT_ONLY: ClassVar[bool] = False
    INT_ONLY: ClassVar[bool] = False

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        super().__init__(operands=[lhs, rhs], result_types=[lhs.type])

    def verify_(self) -> None:
        check_tensor(self, "operand", self.lhs.type)
        el = element_type_of(self.lhs)
        if self.FLOAT_ONLY and not is_float(el):
            raise VerifyException(
                f"'{self.name}' expects a floating-point tensor, got element type {el}"
            )
        if self.INT_ONLY and (not is_int(el) or el == i1):
            raise VerifyException(f"'{self.name}' expects an integer tensor, got element type {el}")


@irdl_op_definition
class AddOp(BinaryElementwiseOp):
    name = "graph.add"
    traits = traits_def(Elementwise())


@irdl_op_definition
class SubOp(BinaryElementwiseOp):
    name = "graph.sub"
    traits = traits_def(Elementwise())


@irdl_op_definition
class MulOp(BinaryElementwiseOp):
    name = "graph.mul"
    traits = traits_def(Elementwise())


@irdl_op_definition
class DivOp(BinaryElementwiseOp):
    """Division; on integers it truncates towards zero (C semantics)."""

    name = "graph.div"
    traits = traits_def(Elementwise(cost=4.0))


@irdl_op_definition
class MaxOp(BinaryElementwiseOp):
    name = "graph.max"
    traits = traits_def(Elementwise())


@irdl_op_definition
class MinOp(BinaryElementwiseOp):
    name = "graph.min"
    traits = traits_def(Elementwise())


@irdl_op_definition
class RemOp(BinaryElementwiseOp):
    """Remainder of lhs / rhs. By default numpy's mod (Python's %, ONNX Mod): the
    result takes the divisor's sign; with `fmod`, C's fmod (ONNX Mod fmod=1): the
    dividend's sign. Integer remainders by 0 are 0 (numpy's answer, no trap), and
    INT_MIN % -1 is 0; float remainders by 0 are NaN.

        %r = graph.rem %a, %b {fmod} : tensor<8xf32>
    """

    name = "graph.rem"
    traits = traits_def(Elementwise(cost=6.0))  # a division and a fix-up (floats: a libm fmod call on the CPU)
    fmod = opt_prop_def(UnitAttr)
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, lhs: SSAValue, rhs: SSAValue, fmod: bool = False):
        IRDLOperation.__init__(
            self, operands=[lhs, rhs], result_types=[lhs.type], properties={"fmod": UnitAttr()} if fmod else {}
        )

    @property
    def is_fmod(self) -> bool:
        return self.fmod is not None

    def verify_(self) -> None:
        super().verify_()
        if element_type_of(self.lhs) == i1:
            raise VerifyException("'graph.rem' does not accept i1 tensors")


@irdl_op_definition
class PowOp(BinaryElementwiseOp):
    name = "graph.pow"
    traits = traits_def(Elementwise(cost=16.0), _canonicalization("pow_patterns"))
    FLOAT_ONLY: ClassVar[bool] = True


class BitwiseBinaryOp(BinaryElementwiseOp):
    """Base of the bitwise ops on integers (numpy's bitwise_and, left_shift...)."""

    INT_ONLY: ClassVar[bool] = True


@irdl_op_definition
class BitAndOp(BitwiseBinaryOp):
    name = "graph.bitand"
    traits = traits_def(Elementwise())


@irdl_op_definition
class BitOrOp(BitwiseBinaryOp):
    name = "graph.bitor"
    traits = traits_def(Elementwise())


@irdl_op_definition
class BitXorOp(BitwiseBinaryOp):
    name = "graph.bitxor"
    traits = traits_def(Elementwise())


@irdl_op_definition
class ShiftLeftOp(BitwiseBinaryOp):
    """lhs << rhs, wrapping; a shift by the width or more (or, signed, by a negative
    amount) gives 0, as numpy's left_shift does.

        %y = graph.shl %x, %n : tensor<8xui8>
    """

    name = "graph.shl"
    traits = traits_def(Elementwise())


@irdl_op_definition
class ShiftRightOp(BitwiseBinaryOp):
    """lhs >> rhs, logical on unsigned types and arithmetic on signed ones; a shift by
    the width or more gives 0 (-1 for a negative signed lhs), as numpy's right_shift does.

        %y = graph.shr %x, %n : tensor<8xi32>
    """

    name = "graph.shr"
    traits = traits_def(Elementwise())


COMPARE_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")


@irdl_op_definition
class CompareOp(IRDLOperation):
    """Elementwise comparison producing an i1 tensor: `graph.compare lt, %a, %b`."""

    name = "graph.compare"
    T: ClassVar = VarConstraint("T", base(TensorType))
    predicate = prop_def(StringAttr)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(TensorType)
    traits = traits_def(Pure(), Elementwise(), _canonicalization("elementwise_patterns"))

    def __init__(self, predicate: str, lhs: SSAValue, rhs: SSAValue):
        super().__init__(
            operands=[lhs, rhs],
            result_types=[TensorType(i1, shape_of(lhs))],
            properties={"predicate": StringAttr(predicate)},
        )

    def verify_(self) -> None:
        check_tensor(self, "operand", self.lhs.type)
        if self.predicate.data not in COMPARE_PREDICATES:
            raise VerifyException(
                f"'graph.compare' predicate must be one of {', '.join(COMPARE_PREDICATES)}, "
                f"got '{self.predicate.data}'"
            )
        rt = tensor_of(self.result)
        if rt.get_element_type() != i1 or shape_of(self.result) != shape_of(self.lhs):
            raise VerifyException(
                f"'graph.compare' result must be tensor<{fmt_shape(shape_of(self.lhs))}xi1>, got {rt}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> CompareOp:
        pos = parser.pos
        pred = parser.parse_identifier(" (comparison predicate)")
        if pred not in COMPARE_PREDICATES:
            parser.raise_error(
                f"unknown comparison predicate '{pred}' (expected one of "
                f"{', '.join(COMPARE_PREDICATES)})",
                pos,
                parser.pos,
            )
        parser.parse_punctuation(",")
        lhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        rhs = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        operands = parser.resolve_operands([lhs, rhs], [t, t], parser.pos)
        op = cls(pred, operands[0], operands[1]) if isinstance(t, TensorType) else None
        if op is None:
            parser.raise_error(f"'graph.compare' operands must be tensors, got {t}")
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.predicate.data}, ")
        printer.print_operand(self.lhs)
        printer.print_string(", ")
        printer.print_operand(self.rhs)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.lhs.type)


@irdl_op_definition
class SelectOp(IRDLOperation):
    """`select(cond, a, b)`: elementwise `cond ? a : b`."""

    name = "graph.select"
    T: ClassVar = VarConstraint("T", base(TensorType))
    cond = operand_def(TensorType)
    true_value = operand_def(T)
    false_value = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure(), Elementwise(), _canonicalization("elementwise_patterns"))
    assembly_format = (
        "$cond `,` $true_value `,` $false_value attr-dict `:` type($cond) `,` type($result)"
    )

    def __init__(self, cond: SSAValue, a: SSAValue, b: SSAValue):
        super().__init__(operands=[cond, a, b], result_types=[a.type])

    def verify_(self) -> None:
        check_tensor(self, "condition", self.cond.type)
        check_tensor(self, "operand", self.true_value.type)
        if element_type_of(self.cond) != i1:
            raise VerifyException(
                f"'graph.select' condition must have element type i1, got {element_type_of(self.cond)}"
            )
        if shape_of(self.cond) != shape_of(self.result):
            raise VerifyException(
                f"'graph.select' condition shape {fmt_shape(shape_of(self.cond))} differs "
                f"from value shape {fmt_shape(shape_of(self.result))}"
            )


# ---------------------------------------------------------------------------
# broadcast
# ---------------------------------------------------------------------------


@irdl_op_definition
class BroadcastOp(IRDLOperation):
    """Broadcast in the style of stablehlo.broadcast_in_dim.

    Operand dimension `i` maps to result dimension `dims[i]` (strictly increasing);
    it must have size 1 (stretched) or the result's size. Result dimensions not
    named in `dims` are new.
    """

    name = "graph.broadcast"
    input = operand_def(TensorType)
    dims = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), Broadcast(), _canonicalization("broadcast_patterns"))
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, input: SSAValue, dims: Sequence[int], shape: Sequence[int]):
        super().__init__(
            operands=[input],
            result_types=[TensorType(element_type_of(input), list(shape))],
            properties={"dims": i64_array(dims)},
        )

    @property
    def dim_map(self) -> tuple[int, ...]:
        return tuple(self.dims.get_values())

    def source_index(self, operand: int, index: Sequence[T], ib: IndexBuilder[T]) -> list[T]:
        """Operand dim i is result dim dims[i]; a stretched (size-1) dim reads 0."""
        in_shape, out_shape = shape_of(self.input), shape_of(self.result)
        return [
            ib.constant(0) if in_shape[i] == 1 and out_shape[r] != 1 else index[r] for i, r in enumerate(self.dim_map)
        ]

    def verify_(self) -> None:
        check_tensor(self, "operand", self.input.type)
        check_tensor(self, "result", self.result.type)
        if element_type_of(self.input) != element_type_of(self.result):
            raise VerifyException(
                f"'graph.broadcast' changes the element type from "
                f"{element_type_of(self.input)} to {element_type_of(self.result)}"
            )
        ins, outs, dims = shape_of(self.input), shape_of(self.result), self.dim_map
        if len(dims) != len(ins):
            raise VerifyException(
                f"'graph.broadcast' dims has {len(dims)} entries but the operand has rank {len(ins)}"
            )
        if any(b <= a for a, b in zip(dims, dims[1:])):
            raise VerifyException(
                f"'graph.broadcast' dims must be strictly increasing, got {list(dims)}"
            )
        check_axes(self, "dims", dims, len(outs))
        for i, (d, size) in enumerate(zip(dims, ins)):
            if size not in (1, outs[d]):
                raise VerifyException(
                    f"'graph.broadcast' operand dimension {i} of size {size} cannot "
                    f"broadcast to result dimension {d} of size {outs[d]}"
                )


# ---------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------


class ReduceOp(IRDLOperation):
    """Base: reduce over `axes`; `keepdims` keeps them with size 1."""

    input = operand_def(TensorType)
    axes = prop_def(DenseArrayBase)
    keepdims = opt_prop_def(UnitAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, input: SSAValue, axes: Sequence[int], keepdims: bool = False):
        shape = shape_of(input)
        axes = sorted(a % len(shape) if shape else a for a in axes)
        out = reduced_shape(shape, axes, keepdims)
        props: dict[str, Attribute] = {"axes": i64_array(axes)}
        if keepdims:
            props["keepdims"] = UnitAttr()
        super().__init__(
            operands=[input],
            result_types=[TensorType(element_type_of(input), out)],
            properties=props,
        )

    @property
    def KIND(self) -> str:  # noqa: N802 - the reduction's kind, from its Reduction trait
        trait = self.get_trait(Reduction)
        assert trait is not None
        return trait.kind

    @property
    def reduce_axes(self) -> tuple[int, ...]:
        return tuple(self.axes.get_values())

    @property
    def keeps_dims(self) -> bool:
        return self.keepdims is not None

    def verify_(self) -> None:
        check_tensor(self, "operand", self.input.type)
        check_tensor(self, "result", self.result.type)
        shape = shape_of(self.input)
        check_axes(self, "axes", self.reduce_axes, len(shape))
        if element_type_of(self.input) != element_type_of(self.result):
            raise VerifyException(
                f"'{self.name}' changes the element type from "
                f"{element_type_of(self.input)} to {element_type_of(self.result)}"
            )
        if element_type_of(self.input) == i1:
            raise VerifyException(f"'{self.name}' does not accept i1 tensors")
        expected = reduced_shape(shape, self.reduce_axes, self.keeps_dims)
        if shape_of(self.result) != tuple(expected):
            raise VerifyException(
                f"'{self.name}' over axes {list(self.reduce_axes)} of "
                f"{fmt_shape(shape)} must produce {fmt_shape(expected)}, "
                f"got {fmt_shape(shape_of(self.result))}"
            )


def reduced_shape(
    shape: Sequence[int], axes: Sequence[int], keepdims: bool
) -> list[int]:
    if keepdims:
        return [1 if i in axes else d for i, d in enumerate(shape)]
    return [d for i, d in enumerate(shape) if i not in axes]


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    name = "graph.reduce_sum"
    traits = traits_def(Reduction("sum"), Accumulates())


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    name = "graph.reduce_max"
    traits = traits_def(Reduction("max"))


@irdl_op_definition
class ReduceMinOp(ReduceOp):
    name = "graph.reduce_min"
    traits = traits_def(Reduction("min"))


@irdl_op_definition
class ReduceMeanOp(ReduceOp):
    name = "graph.reduce_mean"
    traits = traits_def(Reduction("mean"), Accumulates())

    def verify_(self) -> None:
        super().verify_()
        if not is_float(element_type_of(self.input)):
            raise VerifyException("'graph.reduce_mean' expects a floating-point tensor")


@irdl_op_definition
class ReduceProdOp(ReduceOp):
    name = "graph.reduce_prod"
    traits = traits_def(Reduction("prod"), Accumulates())


# ---------------------------------------------------------------------------
# injective (data movement)
# ---------------------------------------------------------------------------


class SameElementTypeOp(IRDLOperation):
    def _check_element_type(self, input: SSAValue, result: SSAValue) -> None:
        if element_type_of(input) != element_type_of(result):
            raise VerifyException(
                f"'{self.name}' changes the element type from "
                f"{element_type_of(input)} to {element_type_of(result)}"
            )


@irdl_op_definition
class TransposeOp(SameElementTypeOp):
    """result[i_perm[0], ...] layout: result dim k is operand dim perm[k]."""

    name = "graph.transpose"
    input = operand_def(TensorType)
    perm = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), Injective(), _canonicalization("transpose_patterns"))
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, input: SSAValue, perm: Sequence[int]):
        shape = shape_of(input)
        super().__init__(
            operands=[input],
            result_types=[TensorType(element_type_of(input), [shape[p] for p in perm])],
            properties={"perm": i64_array(perm)},
        )

    @property
    def permutation(self) -> tuple[int, ...]:
        return tuple(self.perm.get_values())

    def source_index(self, operand: int, index: Sequence[T], ib: IndexBuilder[T]) -> list[T]:
        """Operand dim perm[k] is result dim k."""
        perm = self.permutation
        return [index[perm.index(j)] for j in range(len(perm))]

    def verify_(self) -> None:
        check_tensor(self, "operand", self.input.type)
        check_tensor(self, "result", self.result.type)
        self._check_element_type(self.input, self.result)
        shape, perm = shape_of(self.input), self.permutation
        if sorted(perm) != list(range(len(shape))):
            raise VerifyException(
                f"'graph.transpose' perm {list(perm)} is not a permutation of 0..{len(shape) - 1}"
            )
        expected = [shape[p] for p in perm]
        if list(shape_of(self.result)) != expected:
            raise VerifyException(
                f"'graph.transpose' with perm {list(perm)} of {fmt_shape(shape)} must produce "
                f"{fmt_shape(expected)}, got {fmt_shape(shape_of(self.result))}"
            )


@irdl_op_definition
class ReshapeOp(SameElementTypeOp):
    """Row-major reshape to a result type with the same number of elements."""

    name = "graph.reshape"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), Injective(), _canonicalization("reshape_patterns"))
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, input: SSAValue, shape: Sequence[int]):
        super().__init__(
            operands=[input], result_types=[TensorType(element_type_of(input), list(shape))]
        )

    def source_index(self, operand: int, index: Sequence[T], ib: IndexBuilder[T]) -> list[T]:
        """The same row-major position in the operand's shape (see reshape_index)."""
        return reshape_index(shape_of(self.result), shape_of(self.input), index, ib)

    def verify_(self) -> None:
        check_tensor(self, "operand", self.input.type)
        check_tensor(self, "result", self.result.type)
        self._check_element_type(self.input, self.result)
        a, b = math.prod(shape_of(self.input)), math.prod(shape_of(self.result))
        if a != b:
            raise VerifyException(
                f"'graph.reshape' cannot reshape {fmt_shape(shape_of(self.input))} ({a} elements) "
                f"to {fmt_shape(shape_of(self.result))} ({b} elements)"
            )


@irdl_op_definition
class SliceOp(SameElementTypeOp):
    """Static strided slice: result[i] = input[start + i * step] per dimension."""

    name = "graph.slice"
    input = operand_def(TensorType)
    start = prop_def(DenseArrayBase)
    stop = prop_def(DenseArrayBase)
    step = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), Injective())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(
        self,
        input: SSAValue,
        start: Sequence[int],
        stop: Sequence[int],
        step: Sequence[int] | None = None,
    ):
        step = list(step) if step is not None else [1] * len(start)
        shape = slice_shape(start, stop, step)
        super().__init__(
            operands=[input],
            result_types=[TensorType(element_type_of(input), shape)],
            properties={
                "start": i64_array(start),
                "stop": i64_array(stop),
                "step": i64_array(step),
            },
        )

    @property
    def bounds(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        return (
            tuple(self.start.get_values()),
            tuple(self.stop.get_values()),
            tuple(self.step.get_values()),
        )

    def source_index(self, operand: int, index: Sequence[T], ib: IndexBuilder[T]) -> list[T]:
        """start + i * step per dimension."""
        start, _, step = self.bounds
        return [ib.shift(ib.times(i, s), a) for i, a, s in zip(index, start, step)]

    def verify_(self) -> None:
        check_tensor(self, "operand", self.input.type)
        check_tensor(self, "result", self.result.type)
        self._check_element_type(self.input, self.result)
        shape = shape_of(self.input)
        start, stop, step = self.bounds
        if not len(start) == len(stop) == len(step) == len(shape):
            raise VerifyException(
                f"'graph.slice' start, stop and step must each have {len(shape)} entries "
                f"(the operand rank), got {len(start)}, {len(stop)}, {len(step)}"
            )
        for d, (a, b, s, n) in enumerate(zip(start, stop, step, shape)):
            if s < 1:
                raise VerifyException(f"'graph.slice' step in dimension {d} must be >= 1, got {s}")
            if not (0 <= a <= b <= n):
                raise VerifyException(
                    f"'graph.slice' bounds [{a}, {b}) in dimension {d} are outside 0..{n}"
                )
        expected = slice_shape(start, stop, step)
        if list(shape_of(self.result)) != expected:
            raise VerifyException(
                f"'graph.slice' must produce {fmt_shape(expected)}, got {fmt_shape(shape_of(self.result))}"
            )


def slice_shape(start: Sequence[int], stop: Sequence[int], step: Sequence[int]) -> list[int]:
    return [max(0, -(-(b - a) // s)) for a, b, s in zip(start, stop, step)]


@irdl_op_definition
class PadOp(SameElementTypeOp):
    """Constant padding: `low[d]` elements before and `high[d]` after dimension d.

    result[i] = input[i - low] where that is inside the input (on every
    `guarded_dims` dimension: the others are not padded), else `value`."""

    name = "graph.pad"
    input = operand_def(TensorType)
    low = prop_def(DenseArrayBase)
    high = prop_def(DenseArrayBase)
    value = prop_def(AnyAttr())
    result = result_def(TensorType)
    traits = traits_def(Pure(), Injective(guarded=True))
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(
        self, input: SSAValue, low: Sequence[int], high: Sequence[int], value: float = 0.0
    ):
        el = element_type_of(input)
        shape = [n + a + b for n, a, b in zip(shape_of(input), low, high)]
        value_attr = FloatAttr(float(value), el) if is_float(el) else IntegerAttr(int(value), el)
        super().__init__(
            operands=[input],
            result_types=[TensorType(el, shape)],
            properties={"low": i64_array(low), "high": i64_array(high), "value": value_attr},
        )

    @property
    def padding(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return tuple(self.low.get_values()), tuple(self.high.get_values())

    @property
    def pad_value(self) -> float | int:
        assert isinstance(self.value, FloatAttr | IntegerAttr)
        return self.value.value.data

    def source_index(self, operand: int, index: Sequence[T], ib: IndexBuilder[T]) -> list[T]:
        """i - low per dimension: valid where 0 <= it < the input's size."""
        low, _ = self.padding
        return [ib.shift(i, -a) for i, a in zip(index, low)]

    def guarded_dims(self) -> list[tuple[int, int]]:
        """(dim, input size) of the padded dimensions, where `source_index` may fall
        outside the input."""
        low, high = self.padding
        return [(d, n) for d, n in enumerate(shape_of(self.input)) if low[d] or high[d]]

    def verify_(self) -> None:
        check_tensor(self, "operand", self.input.type)
        check_tensor(self, "result", self.result.type)
        self._check_element_type(self.input, self.result)
        shape = shape_of(self.input)
        low, high = self.padding
        if not len(low) == len(high) == len(shape):
            raise VerifyException(
                f"'graph.pad' low and high must each have {len(shape)} entries, got {len(low)} and {len(high)}"
            )
        if any(p < 0 for p in low + high):
            raise VerifyException("'graph.pad' padding amounts must be non-negative")
        el = element_type_of(self.input)
        if not isinstance(self.value, FloatAttr | IntegerAttr) or self.value.type != el:
            raise VerifyException(
                f"'graph.pad' value must be a scalar attribute of type {el}, got {self.value}"
            )
        expected = [n + a + b for n, a, b in zip(shape, low, high)]
        if list(shape_of(self.result)) != expected:
            raise VerifyException(
                f"'graph.pad' must produce {fmt_shape(expected)}, got {fmt_shape(shape_of(self.result))}"
            )


@irdl_op_definition
class ConcatOp(SameElementTypeOp):
    """Concatenation along `axis`."""

    name = "graph.concat"
    inputs = var_operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), Injective(guarded=True))
    assembly_format = "$inputs attr-dict `:` `(` type($inputs) `)` `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, inputs: Sequence[SSAValue], axis: int):
        shape = list(shape_of(inputs[0]))
        shape[axis] = sum(shape_of(v)[axis] for v in inputs)
        super().__init__(
            operands=[list(inputs)],
            result_types=[TensorType(element_type_of(inputs[0]), shape)],
            properties={"axis": IntegerAttr(axis, i64)},
        )

    @property
    def concat_axis(self) -> int:
        return self.axis.value.data

    @property
    def offsets(self) -> list[int]:
        """Where each operand starts along the axis, and the result's size last:
        operand k holds result positions [offsets[k], offsets[k + 1])."""
        offsets = [0]
        for v in self.inputs:
            offsets.append(offsets[-1] + shape_of(v)[self.concat_axis])
        return offsets

    def source_index(self, operand: int, index: Sequence[T], ib: IndexBuilder[T]) -> list[T]:
        """The index shifted back along the axis: valid for the operand whose range
        holds it (see `offsets`)."""
        axis, offset = self.concat_axis, self.offsets[operand]
        return [ib.shift(i, -offset) if d == axis else i for d, i in enumerate(index)]

    def verify_(self) -> None:
        if not self.inputs:
            raise VerifyException("'graph.concat' needs at least one operand")
        for v in self.inputs:
            check_tensor(self, "operand", v.type)
            self._check_element_type(v, self.result)
        check_tensor(self, "result", self.result.type)
        first = shape_of(self.inputs[0])
        axis = self.concat_axis
        if not 0 <= axis < len(first):
            raise VerifyException(f"'graph.concat' axis {axis} is out of range for rank {len(first)}")
        for i, v in enumerate(self.inputs):
            s = shape_of(v)
            if len(s) != len(first) or any(
                a != b for d, (a, b) in enumerate(zip(s, first)) if d != axis
            ):
                raise VerifyException(
                    f"'graph.concat' operand {i} of shape {fmt_shape(s)} does not match "
                    f"{fmt_shape(first)} outside axis {axis}"
                )
        expected = list(first)
        expected[axis] = sum(shape_of(v)[axis] for v in self.inputs)
        if list(shape_of(self.result)) != expected:
            raise VerifyException(
                f"'graph.concat' must produce {fmt_shape(expected)}, got {fmt_shape(shape_of(self.result))}"
            )


# ---------------------------------------------------------------------------
# gathers (data-dependent reads)
# ---------------------------------------------------------------------------

INDEX_TYPES = ("i32", "i64")


class GatherBase(IRDLOperation):
    """Base of the gathers: `data` read at positions along `axis` that `indices` holds.

    A negative index counts from the end (it wraps once, as in ONNX); an index
    still outside [0, n) is clamped to the nearest end, so a bad index never reads
    outside the tensor (numpy and onnxruntime raise instead).
    """

    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), Injective(indirect=True), _canonicalization("gather_patterns"))
    assembly_format = "$data `,` $indices attr-dict `:` `(` type($data) `,` type($indices) `)` `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, data: SSAValue, indices: SSAValue, axis: int):
        shape = self.result_shape(shape_of(data), shape_of(indices), axis)
        super().__init__(
            operands=[data, indices],
            result_types=[TensorType(element_type_of(data), shape)],
            properties={"axis": IntegerAttr(axis, i64)},
        )

    @staticmethod
    def result_shape(data: Sequence[int], indices: Sequence[int], axis: int) -> list[int]:
        raise NotImplementedError

    @property
    def gather_axis(self) -> int:
        return self.axis.value.data

    def source_index(self, operand: int, index: Sequence[T], ib: IndexBuilder[T]) -> list[T]:
        """The index of the `indices` operand (1) read for the result at `index`; the
        data's index depends on the value read there (`data_index`)."""
        if operand != 1:
            raise ValueError(f"'{self.name}' reads its data at a data-dependent index (data_index)")
        return self.indices_index(list(index))

    def indices_index(self, index: list[T]) -> list[T]:
        raise NotImplementedError

    def data_index(self, index: Sequence[T], position: T) -> list[T]:
        """The data's index for the result at `index` when the (clamped) index read
        from `indices` is `position`."""
        raise NotImplementedError

    def verify_(self) -> None:
        for what, v in (("data", self.data), ("indices", self.indices), ("result", self.result)):
            check_tensor(self, what, v.type)
        data, indices, axis = shape_of(self.data), shape_of(self.indices), self.gather_axis
        if str(element_type_of(self.indices)) not in INDEX_TYPES:
            raise VerifyException(
                f"'{self.name}' indices must have element type i32 or i64, got {element_type_of(self.indices)}"
            )
        if not 0 <= axis < len(data):
            raise VerifyException(f"'{self.name}' axis {axis} is out of range for data of rank {len(data)}")
        self._verify_shapes(data, indices, axis)
        expected = self.result_shape(data, indices, axis)
        if element_type_of(self.result) != element_type_of(self.data):
            raise VerifyException(
                f"'{self.name}' changes the element type from {element_type_of(self.data)} to {element_type_of(self.result)}"
            )
        if list(shape_of(self.result)) != expected:
            raise VerifyException(
                f"'{self.name}' must produce {fmt_shape(expected)}, got {fmt_shape(shape_of(self.result))}"
            )
        if data[axis] == 0 and math.prod(expected) > 0:
            raise VerifyException(f"'{self.name}' gathers from axis {axis} of size 0")

    def _verify_shapes(self, data: Sequence[int], indices: Sequence[int], axis: int) -> None:
        pass


@irdl_op_definition
class GatherOp(GatherBase):
    """ONNX Gather (numpy.take): result[a.., i.., b..] = data[a.., indices[i..], b..],
    of shape data.shape[:axis] + indices.shape + data.shape[axis + 1:].

        %y = graph.gather %table, %ids {axis = 0} : (tensor<1000x64xf32>, tensor<1x8xi64>) -> tensor<1x8x64xf32>
    """

    name = "graph.gather"

    @staticmethod
    def result_shape(data: Sequence[int], indices: Sequence[int], axis: int) -> list[int]:
        return [*data[:axis], *indices, *data[axis + 1 :]]

    def indices_index(self, index: list[T]) -> list[T]:
        axis, k = self.gather_axis, len(shape_of(self.indices))
        return index[axis : axis + k]

    def data_index(self, index: Sequence[T], position: T) -> list[T]:
        axis, k = self.gather_axis, len(shape_of(self.indices))
        return [*index[:axis], position, *index[axis + k :]]


@irdl_op_definition
class GatherElementsOp(GatherBase):
    """ONNX GatherElements (numpy.take_along_axis): result[i] = data[i with i[axis] replaced
    by indices[i]], of the indices' shape (no larger than data's off the axis).

        %y = graph.gather_elements %x, %idx {axis = 1} : (tensor<4x5xf32>, tensor<4x2xi64>) -> tensor<4x2xf32>
    """

    name = "graph.gather_elements"

    @staticmethod
    def result_shape(data: Sequence[int], indices: Sequence[int], axis: int) -> list[int]:
        return list(indices)

    def indices_index(self, index: list[T]) -> list[T]:
        return index

    def data_index(self, index: Sequence[T], position: T) -> list[T]:
        return [position if d == self.gather_axis else i for d, i in enumerate(index)]

    def _verify_shapes(self, data: Sequence[int], indices: Sequence[int], axis: int) -> None:
        if len(indices) != len(data):
            raise VerifyException(
                f"'{self.name}' indices of rank {len(indices)} must have the rank of data ({len(data)})"
            )
        for d, (n, m) in enumerate(zip(data, indices)):
            if d != axis and m > n:
                raise VerifyException(
                    f"'{self.name}' indices dimension {d} of size {m} exceeds data's size {n}"
                )


# ---------------------------------------------------------------------------
# contractions
# ---------------------------------------------------------------------------


class ContractionOp(IRDLOperation):
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), Contraction(), Accumulates())
    assembly_format = (
        "$lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)"
    )

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        a, b = shape_of(lhs), shape_of(rhs)
        super().__init__(
            operands=[lhs, rhs],
            result_types=[TensorType(element_type_of(lhs), [*a[:-1], b[-1]])],
        )

    def _verify_contraction(self, min_rank: int, max_rank: int | None) -> None:
        for what, v in (("lhs", self.lhs), ("rhs", self.rhs)):
            check_tensor(self, what, v.type)
        check_tensor(self, "result", self.result.type)
        a, b = shape_of(self.lhs), shape_of(self.rhs)
        ea, eb = element_type_of(self.lhs), element_type_of(self.rhs)
        if ea != eb or ea != element_type_of(self.result):
            raise VerifyException(
                f"'{self.name}' element types differ: {ea}, {eb} -> {element_type_of(self.result)}"
            )
        if ea == i1:
            raise VerifyException(f"'{self.name}' does not accept i1 tensors")
        if len(a) != len(b) or len(a) < min_rank or (max_rank and len(a) > max_rank):
            want = f"rank {min_rank}" if max_rank == min_rank else f"equal ranks >= {min_rank}"
            raise VerifyException(
                f"'{self.name}' expects operands of {want}, got {fmt_shape(a)} and {fmt_shape(b)}"
            )
        if a[:-2] != b[:-2]:
            raise VerifyException(
                f"'{self.name}' batch dimensions differ: {fmt_shape(a[:-2])} vs {fmt_shape(b[:-2])}"
            )
        if a[-1] != b[-2]:
            raise VerifyException(
                f"'{self.name}' contraction sizes differ: lhs {fmt_shape(a)} has K={a[-1]}, "
                f"rhs {fmt_shape(b)} has K={b[-2]}"
            )
        expected = [*a[:-1], b[-1]]
        if list(shape_of(self.result)) != expected:
            raise VerifyException(
                f"'{self.name}' must produce {fmt_shape(expected)}, got {fmt_shape(shape_of(self.result))}"
            )


@irdl_op_definition
class MatmulOp(ContractionOp):
    """2-D matrix product: (M x K) . (K x N) -> (M x N)."""

    name = "graph.matmul"

    def verify_(self) -> None:
        self._verify_contraction(2, 2)


@irdl_op_definition
class BatchMatmulOp(ContractionOp):
    """Batched matrix product over identical leading batch dimensions."""

    name = "graph.batch_matmul"

    def verify_(self) -> None:
        self._verify_contraction(3, None)


# ---------------------------------------------------------------------------
# constants
# ---------------------------------------------------------------------------


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A dense or splat tensor constant: `graph.constant dense<1.0> : tensor<4xf32>`."""

    name = "graph.constant"
    value = prop_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, value: DenseIntOrFPElementsAttr):
        super().__init__(result_types=[value.type], properties={"value": value})

    @staticmethod
    def from_numpy(array: np.ndarray, element_type: Attribute) -> ConstantOp:
        return ConstantOp(dense_attr(array, element_type))

    def to_numpy(self) -> np.ndarray:
        return dense_to_numpy(self.value)

    def verify_(self) -> None:
        check_tensor(self, "result", self.result.type)
        if self.value.type != self.result.type:
            raise VerifyException(
                f"'graph.constant' value type {self.value.type} differs from result type {self.result.type}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        pos = parser.pos
        attrs = parser.parse_optional_attr_dict()
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error(
                "'graph.constant' expects a dense elements attribute such as "
                "dense<1.0> : tensor<4xf32>",
                pos,
                parser.pos,
            )
        op = cls(value)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_op_attributes(self.attributes)
        printer.print_string(" ")
        printer.print_attribute(self.value)


NUMPY_DTYPES: dict[str, np.dtype] = {name: dtype for name, (_, dtype) in ELEMENT_TYPES.items()}


def numpy_dtype(element_type: Attribute) -> np.dtype:
    """The numpy dtype that holds values of an element type (bf16 is held as f32)."""
    if isinstance(element_type, BFloat16Type):
        return np.dtype(np.float32)
    key = str(element_type)
    if key not in NUMPY_DTYPES:
        raise ValueError(f"no numpy dtype for element type {element_type}")
    return NUMPY_DTYPES[key]


def element_type_for(dtype: np.dtype) -> Attribute | None:
    """The element type whose values a numpy dtype holds (None if mlfuse has none)."""
    for t, d in ELEMENT_TYPES.values():
        if d == dtype:
            return t
    return None


# How xDSL packs dense elements (little-endian, by element type), for np.frombuffer
# (i1 is packed as 0 / -1 and goes through the values).
PACKED_DTYPES = {name: dtype.newbyteorder("<") for name, (_, dtype) in ELEMENT_TYPES.items() if name != "i1"}


def dense_to_numpy(attr: DenseIntOrFPElementsAttr) -> np.ndarray:
    """The elements as an array, read straight from the packed bytes when possible.

    xDSL 0.74 stores even a splat expanded to every element, so this must not go
    through Python lists: a 64M-element splat would take minutes.
    """
    shape = attr.get_shape()
    el = attr.get_element_type()
    packed = PACKED_DTYPES.get(str(el))
    if packed is not None:
        values = np.frombuffer(attr.data.data, dtype=packed).astype(numpy_dtype(el), copy=False)  # read-only where no copy
    else:
        values = np.array(attr.get_values(), dtype=numpy_dtype(el))
    if values.size == 1:
        return np.full(shape, values.reshape(()), dtype=values.dtype)
    return values.reshape(shape)


def splat_value(attr: DenseIntOrFPElementsAttr) -> float | int | bool | None:
    """The repeated element of a splat constant, else None (compares bytes, not values)."""
    el = attr.get_element_type()
    data = attr.data.data
    width = el.compile_time_size  # type: ignore[union-attr]
    # most constants differ in their first two elements: no splat-sized copy for them
    if not data or data[width : 2 * width] not in (b"", data[:width]) or data != data[:width] * (len(data) // width):
        return None
    return el.unpack(data[:width], 1)[0]  # type: ignore[union-attr]


def dense_attr(array: np.ndarray, element_type: Attribute) -> DenseIntOrFPElementsAttr:
    """A dense attribute holding `array`, packed straight from its bytes the way xDSL packs
    elements (little-endian, its struct format; i1 true as -1, see PACKED_DTYPES): through
    Python numbers, as from_list takes them, ResNet-18's transposed conv weights took 1.4 s
    of convert-graph-to-loop. A type without a struct format (bf16) goes through from_list."""
    t = TensorType(element_type, list(array.shape))
    flat = np.asarray(array).reshape(-1)
    if element_type == i1:
        return DenseIntOrFPElementsAttr(t, BytesAttr(np.where(flat, -1, 0).astype("<i1").tobytes()))  # type: ignore[arg-type]
    packed = getattr(element_type, "format", None)
    if isinstance(packed, str):
        # one copy (tobytes): astype would copy first, whether or not the type changes
        return DenseIntOrFPElementsAttr(t, BytesAttr(np.ascontiguousarray(flat, dtype=packed).tobytes()))  # type: ignore[arg-type]
    if flat.size > 0 and np.all(flat == flat[0]):
        flat = flat[:1]  # splat
    if is_float(element_type):
        return DenseIntOrFPElementsAttr.from_list(t, [float(v) for v in flat])
    return DenseIntOrFPElementsAttr.from_list(t, [int(v) for v in flat])


# ---------------------------------------------------------------------------
# stencils: 2-D convolution and pooling over NCHW tensors
# ---------------------------------------------------------------------------


def window_output_size(size: int, kernel: int, stride: int, pad_low: int, pad_high: int, dilation: int) -> int:
    """Number of window positions along one spatial dimension (floor rounding)."""
    extent = dilation * (kernel - 1) + 1
    return (size + pad_low + pad_high - extent) // stride + 1


def window_output_shape(
    spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
) -> list[int]:
    """Output (OH, OW) of a 2-D window op; `pads` is [top, left, bottom, right]."""
    return [
        window_output_size(spatial[d], kernel[d], strides[d], pads[d], pads[d + 2], dilations[d])
        for d in range(2)
    ]


ONES_2 = i64_array([1, 1])
ZEROS_4 = i64_array([0, 0, 0, 0])


def _window_props(
    strides: Sequence[int], pads: Sequence[int], dilations: Sequence[int]
) -> dict[str, Attribute]:
    """Window properties, leaving out those at their default (the printed form omits them too)."""
    props: dict[str, Attribute] = {}
    for name, values, default in (
        ("strides", strides, [1, 1]),
        ("pads", pads, [0, 0, 0, 0]),
        ("dilations", dilations, [1, 1]),
    ):
        if list(values) != default:
            props[name] = i64_array(values)
    return props


class WindowOp(IRDLOperation):
    """Base of the 2-D window ops: NCHW operand, strides/pads/dilations properties.

    `pads` is [top, left, bottom, right] (ONNX's begin..., end... order); output
    sizes round down: OH = (H + top + bottom - dilation_h * (KH - 1) - 1) // stride_h + 1.
    """

    strides = opt_prop_def(DenseArrayBase, ONES_2)
    pads = opt_prop_def(DenseArrayBase, ZEROS_4)
    dilations = opt_prop_def(DenseArrayBase, ONES_2)
    traits = traits_def(Window())

    @property
    def stride_values(self) -> tuple[int, ...]:
        return tuple(self.strides.get_values())

    @property
    def pad_values(self) -> tuple[int, ...]:
        return tuple(self.pads.get_values())

    @property
    def dilation_values(self) -> tuple[int, ...]:
        return tuple(self.dilations.get_values())

    def _verify_window(self, input_shape: Sequence[int], kernel: Sequence[int]) -> list[int]:
        """Check the window properties; returns the output spatial shape."""
        strides, pads, dilations = self.stride_values, self.pad_values, self.dilation_values
        for what, values, count in (("strides", strides, 2), ("pads", pads, 4), ("dilations", dilations, 2)):
            if len(values) != count:
                raise VerifyException(f"'{self.name}' {what} must have {count} entries, got {list(values)}")
        if any(k < 1 for k in kernel):
            raise VerifyException(f"'{self.name}' kernel sizes must be >= 1, got {list(kernel)}")
        if any(s < 1 for s in strides):
            raise VerifyException(f"'{self.name}' strides must be >= 1, got {list(strides)}")
        if any(d < 1 for d in dilations):
            raise VerifyException(f"'{self.name}' dilations must be >= 1, got {list(dilations)}")
        if any(p < 0 for p in pads):
            raise VerifyException(f"'{self.name}' pads must be non-negative, got {list(pads)}")
        out = window_output_shape(input_shape[2:], kernel, strides, pads, dilations)
        if any(n < 1 for n in out):
            raise VerifyException(
                f"'{self.name}' window of {fmt_shape(kernel)} (dilations {list(dilations)}) does not "
                f"fit the padded {fmt_shape(input_shape[2:])} input with pads {list(pads)}"
            )
        return out

    def _check_result(self, expected: Sequence[int]) -> None:
        if list(shape_of(self.result)) != list(expected):
            raise VerifyException(
                f"'{self.name}' must produce {fmt_shape(expected)}, got {fmt_shape(shape_of(self.result))}"
            )


def _check_nchw(op: Operation, what: str, value: SSAValue) -> None:
    check_tensor(op, what, value.type)
    if len(shape_of(value)) != 4:
        raise VerifyException(
            f"'{op.name}' {what} must have rank 4 (NCHW), got {fmt_shape(shape_of(value))}"
        )


@irdl_op_definition
class Conv2dOp(WindowOp):
    """2-D cross-correlation (ONNX Conv, no bias): NCHW input, OIHW weight -> NOHW.

    `groups` splits the C input channels and O output channels into groups that
    only see each other (weight is O x C/groups x KH x KW); groups == C is a
    depthwise convolution. A bias is a separate broadcast + add.

        %y = graph.conv2d %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>}
             : (tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<1x16x4x4xf32>
    """

    name = "graph.conv2d"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    groups = opt_prop_def(IntegerAttr, IntegerAttr(1, i64))
    result = result_def(TensorType)
    traits = traits_def(Pure(), Accumulates())
    assembly_format = (
        "$input `,` $weight attr-dict `:` `(` type($input) `,` type($weight) `)` `->` type($result)"
    )
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(
        self,
        input: SSAValue,
        weight: SSAValue,
        strides: Sequence[int] = (1, 1),
        pads: Sequence[int] = (0, 0, 0, 0),
        dilations: Sequence[int] = (1, 1),
        groups: int = 1,
    ):
        n, _, h, w = shape_of(input)
        o, _, kh, kw = shape_of(weight)
        out = window_output_shape((h, w), (kh, kw), strides, pads, dilations)
        props = _window_props(strides, pads, dilations)
        if groups != 1:
            props["groups"] = IntegerAttr(groups, i64)
        super().__init__(
            operands=[input, weight],
            result_types=[TensorType(element_type_of(input), [n, o, *out])],
            properties=props,
        )

    @property
    def group_count(self) -> int:
        return self.groups.value.data

    @property
    def kernel_size(self) -> tuple[int, int]:
        _, _, kh, kw = shape_of(self.weight)
        return kh, kw

    def verify_(self) -> None:
        _check_nchw(self, "input", self.input)
        _check_nchw(self, "weight", self.weight)
        check_tensor(self, "result", self.result.type)
        el = element_type_of(self.input)
        if not is_float(el):
            raise VerifyException(f"'graph.conv2d' expects a floating-point input, got element type {el}")
        if element_type_of(self.weight) != el or element_type_of(self.result) != el:
            raise VerifyException(
                f"'graph.conv2d' element types differ: input {el}, weight "
                f"{element_type_of(self.weight)}, result {element_type_of(self.result)}"
            )
        n, c, _, _ = shape_of(self.input)
        o, cg, _, _ = shape_of(self.weight)
        g = self.group_count
        if g < 1:
            raise VerifyException(f"'graph.conv2d' groups must be >= 1, got {g}")
        if c % g or o % g:
            raise VerifyException(
                f"'graph.conv2d' groups = {g} must divide both the {c} input channels "
                f"and the {o} output channels"
            )
        if cg * g != c:
            raise VerifyException(
                f"'graph.conv2d' weight {fmt_shape(shape_of(self.weight))} has {cg} input channels "
                f"per group, but the input has {c} channels in {g} group(s) (expected {c // g})"
            )
        out = self._verify_window(shape_of(self.input), self.kernel_size)
        self._check_result([n, o, *out])


class Pool2dOp(WindowOp):
    """Base of the pooling ops: a `kernel` window slid over H and W of an NCHW tensor."""

    input = operand_def(TensorType)
    kernel = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(
        self,
        input: SSAValue,
        kernel: Sequence[int],
        strides: Sequence[int] = (1, 1),
        pads: Sequence[int] = (0, 0, 0, 0),
        dilations: Sequence[int] = (1, 1),
        extra: dict[str, Attribute] | None = None,
    ):
        n, c, h, w = shape_of(input)
        out = window_output_shape((h, w), kernel, strides, pads, dilations)
        super().__init__(
            operands=[input],
            result_types=[TensorType(element_type_of(input), [n, c, *out])],
            properties={"kernel": i64_array(kernel), **_window_props(strides, pads, dilations), **(extra or {})},
        )

    @property
    def kernel_size(self) -> tuple[int, ...]:
        return tuple(self.kernel.get_values())

    def verify_(self) -> None:
        _check_nchw(self, "operand", self.input)
        check_tensor(self, "result", self.result.type)
        if element_type_of(self.result) != element_type_of(self.input):
            raise VerifyException(
                f"'{self.name}' changes the element type from "
                f"{element_type_of(self.input)} to {element_type_of(self.result)}"
            )
        kernel = self.kernel_size
        if len(kernel) != 2:
            raise VerifyException(f"'{self.name}' kernel must have 2 entries, got {list(kernel)}")
        out = self._verify_window(shape_of(self.input), kernel)
        extents = [d * (k - 1) + 1 for d, k in zip(self.dilation_values, kernel)]
        pads = self.pad_values
        if any(pads[i] >= extents[i % 2] for i in range(4)):
            # a window lying wholly in the padding has no elements to pool
            raise VerifyException(
                f"'{self.name}' pads {list(pads)} must be smaller than the window extent {extents}"
            )
        n, c, _, _ = shape_of(self.input)
        self._check_result([n, c, *out])


@irdl_op_definition
class MaxPool2dOp(Pool2dOp):
    """Maximum over each window; padding never wins (it acts as -infinity).

        %y = graph.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>}
             : tensor<1x8x9x9xf32> -> tensor<1x8x4x4xf32>
    """

    name = "graph.max_pool2d"

    def verify_(self) -> None:
        super().verify_()
        if element_type_of(self.input) == i1:
            raise VerifyException("'graph.max_pool2d' does not accept i1 tensors")


@irdl_op_definition
class AvgPool2dOp(Pool2dOp):
    """Mean over each window. Padded positions count towards the divisor only with
    `count_include_pad`; otherwise each window divides by its number of input elements.

        %y = graph.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>}
             : tensor<1x8x8x8xf32> -> tensor<1x8x4x4xf32>
    """

    name = "graph.avg_pool2d"
    traits = traits_def(Accumulates())
    count_include_pad = opt_prop_def(UnitAttr)

    def __init__(
        self,
        input: SSAValue,
        kernel: Sequence[int],
        strides: Sequence[int] = (1, 1),
        pads: Sequence[int] = (0, 0, 0, 0),
        dilations: Sequence[int] = (1, 1),
        count_include_pad: bool = False,
    ):
        extra = {"count_include_pad": UnitAttr()} if count_include_pad else {}
        super().__init__(input, kernel, strides, pads, dilations, extra)

    @property
    def counts_padding(self) -> bool:
        return self.count_include_pad is not None

    def verify_(self) -> None:
        super().verify_()
        el = element_type_of(self.input)
        if not is_float(el):
            raise VerifyException(f"'graph.avg_pool2d' expects a floating-point tensor, got element type {el}")


Graph = Dialect(
    "graph",
    [
        NegOp,
        AbsOp,
        ExpOp,
        LogOp,
        SqrtOp,
        RsqrtOp,
        ReciprocalOp,
        TanhOp,
        ErfOp,
        SinOp,
        CosOp,
        SigmoidOp,
        ReluOp,
        FloorOp,
        CeilOp,
        RoundOp,
        GeluOp,
        CastOp,
        BitcastOp,
        AddOp,
        SubOp,
        MulOp,
        DivOp,
        MaxOp,
        MinOp,
        RemOp,
        PowOp,
        BitAndOp,
        BitOrOp,
        BitXorOp,
        ShiftLeftOp,
        ShiftRightOp,
        BitNotOp,
        CompareOp,
        SelectOp,
        BroadcastOp,
        ReduceSumOp,
        ReduceMaxOp,
        ReduceMinOp,
        ReduceMeanOp,
        ReduceProdOp,
        TransposeOp,
        ReshapeOp,
        SliceOp,
        PadOp,
        ConcatOp,
        GatherOp,
        GatherElementsOp,
        MatmulOp,
        BatchMatmulOp,
        ConstantOp,
        Conv2dOp,
        MaxPool2dOp,
        AvgPool2dOp,
    ],
    [],
)


def ops_with_trait(trait: type[OpTrait]) -> tuple[type[Operation], ...]:
    """The graph ops that carry `trait`, for code that dispatches with isinstance."""
    return tuple(op for op in Graph.operations if op.has_trait(trait))


ELEMENTWISE_OPS = ops_with_trait(Elementwise)
