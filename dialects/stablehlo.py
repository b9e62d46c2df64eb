"""A `stablehlo` (and `chlo`) subset: what `jax.jit(f).lower(...)` emits for
normalizations, softmax, GELU, attention and convolution blocks, and for image and
stencil pipelines (reverse, reduce_window for pooling and cumsum, gather for x[idx],
dynamic_slice and dynamic_update_slice for x[i] of a traced i, sort for jnp.sort,
argsort and median, chlo.square for variances).

Op names, property names and the pretty syntax follow StableHLO's own ODS, so the
text jax prints parses as it is, in the pretty form

    %0 = stablehlo.broadcast_in_dim %x, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.reduce(%y init: %zero) applies stablehlo.add across dimensions = [1]
         : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    %2 = stablehlo.compare LT, %a, %b, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>

and in the generic one (`as_text()` of jax's `compiler_ir("stablehlo")` with
`print_generic_op_form`). Verifiers check StableHLO's shape rules for the ops
here; what mlfuse can compute (static shapes, its element types) is checked by
the conversion to the graph dialect (mlfuse/frontend/stablehlo.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, cast

from xdsl.dialects.builtin import (
    I64,
    AnyFloat,
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FunctionType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    i1,
    i32,
    i64,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Block, Dialect, ParametrizedAttribute, Region, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    SameVariadicOperandSize,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_region_def,
    var_result_def,
)
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    TypeDirective,
    VariadicOperandVariable,
    irdl_custom_directive,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def shape_of(value: SSAValue | Attribute) -> tuple[int, ...]:
    t = value.type if isinstance(value, SSAValue) else value
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def element_type_of(value: SSAValue | Attribute) -> Attribute:
    t = value.type if isinstance(value, SSAValue) else value
    assert isinstance(t, TensorType)
    return t.get_element_type()


def i64_array(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def values_of(attr: DenseArrayBase | None) -> tuple[int, ...]:
    return tuple(attr.get_values()) if attr is not None else ()


def parse_int_list(parser: AttrParser) -> list[int]:
    """`[1, 2, 3]` (or `[]`)."""
    return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)


def print_int_list(printer: Printer, values: Sequence[int]) -> None:
    printer.print_string("[" + ", ".join(str(v) for v in values) + "]")


def check_permutation(op: IRDLOperation, what: str, values: Sequence[int], rank: int) -> None:
    if sorted(values) != list(range(rank)):
        raise VerifyException(f"'{op.name}' {what} {list(values)} is not a permutation of 0..{rank - 1}")


def check_dims(op: IRDLOperation, what: str, values: Sequence[int], rank: int) -> None:
    """Each entry in [0, rank), no repeats."""
    for v in values:
        if not 0 <= v < rank:
            raise VerifyException(f"'{op.name}' {what} entry {v} is out of range for rank {rank}")
    if len(set(values)) != len(values):
        raise VerifyException(f"'{op.name}' {what} has repeated entries {list(values)}")


def split_properties(op_type: type[IRDLOperation], attrs: dict[str, Attribute]) -> tuple[dict, dict]:
    """Attributes of a hand-parsed attr-dict that are the op's properties, and the rest
    (MLIR prints properties inside the attr-dict of the pretty form)."""
    names = op_type.get_irdl_definition().properties
    props = {k: v for k, v in attrs.items() if k in names}
    return props, {k: v for k, v in attrs.items() if k not in names}


def read_hex_float_elements_as_bits() -> None:
    """Make `dense<0xFF800000> : tensor<f32>` mean -inf, as in MLIR.

    MLIR (and jax) print a float element that has no short decimal form (inf, NaN) as
    the hex of its bits; xDSL 0.74 reads such an element as the integer 4286578688
    and converts that to float, and its own printer writes -inf the same way, so
    softmax's -inf init would become 4.29e9. The fix reinterprets a hex literal in a
    float dense literal as bits. It patches xDSL's parser (idempotently) when this
    dialect loads, which happens before the first stablehlo op's attributes are read;
    it belongs in mlfuse's parser (diagnostics.LocatingParser) for the graph dialect too.
    """
    element = AttrParser._TensorLiteralElement
    if getattr(element, "hex_floats_as_bits", False):
        return
    plain = element.to_type

    def to_type(self, parser, type):
        if isinstance(type, AnyFloat) and isinstance(self.value, int) and self.span.text[:2] in ("0x", "0X"):
            raw = int(self.value).to_bytes(type.compile_time_size, "little")
            return type.unpack(raw, 1)[0]
        return plain(self, parser, type)

    element.to_type = to_type
    element.hex_floats_as_bits = True


read_hex_float_elements_as_bits()


# ---------------------------------------------------------------------------
# attributes
# ---------------------------------------------------------------------------


class ComparisonDirection(StrEnum):
    EQ = "EQ"
    NE = "NE"
    GE = "GE"
    GT = "GT"
    LE = "LE"
    LT = "LT"


class ComparisonType(StrEnum):
    NOTYPE = "NOTYPE"
    FLOAT = "FLOAT"
    TOTALORDER = "TOTALORDER"
    SIGNED = "SIGNED"
    UNSIGNED = "UNSIGNED"


class Precision(StrEnum):
    DEFAULT = "DEFAULT"
    HIGH = "HIGH"
    HIGHEST = "HIGHEST"


@irdl_attr_definition
class ComparisonDirectionAttr(EnumAttribute[ComparisonDirection], SpacedOpaqueSyntaxAttribute):
    """`#stablehlo<comparison_direction LT>`"""

    name = "stablehlo.comparison_direction"


@irdl_attr_definition
class ComparisonTypeAttr(EnumAttribute[ComparisonType], SpacedOpaqueSyntaxAttribute):
    """`#stablehlo<comparison_type FLOAT>`"""

    name = "stablehlo.comparison_type"


@irdl_attr_definition
class PrecisionAttr(EnumAttribute[Precision], SpacedOpaqueSyntaxAttribute):
    """`#stablehlo<precision DEFAULT>`: a hint the CPU ignores (f32 is computed in f32)."""

    name = "stablehlo.precision"


def _ints(values: Sequence[int]) -> ArrayAttr[IntAttr]:
    return ArrayAttr([IntAttr(int(v)) for v in values])


@irdl_attr_definition
class DotDimensionNumbersAttr(ParametrizedAttribute):
    """`#stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0],
    lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>` (empty lists
    are left out)."""

    name = "stablehlo.dot"

    lhs_batching_dimensions: ArrayAttr[IntAttr]
    rhs_batching_dimensions: ArrayAttr[IntAttr]
    lhs_contracting_dimensions: ArrayAttr[IntAttr]
    rhs_contracting_dimensions: ArrayAttr[IntAttr]

    FIELDS: ClassVar[tuple[str, ...]] = (
        "lhs_batching_dimensions",
        "rhs_batching_dimensions",
        "lhs_contracting_dimensions",
        "rhs_contracting_dimensions",
    )

    def __init__(self, lhs_batch: Sequence[int], rhs_batch: Sequence[int], lhs_contract: Sequence[int], rhs_contract: Sequence[int]):
        super().__init__(_ints(lhs_batch), _ints(rhs_batch), _ints(lhs_contract), _ints(rhs_contract))

    def lists(self) -> tuple[tuple[int, ...], ...]:
        """(lhs batch, rhs batch, lhs contracting, rhs contracting)."""
        return tuple(tuple(a.data for a in getattr(self, f).data) for f in self.FIELDS)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        found: dict[str, list[int]] = {}

        def entry() -> None:
            pos = parser.pos
            key = parser.parse_identifier()
            if key not in cls.FIELDS or key in found:
                parser.raise_error(f"unexpected '{key}' in #stablehlo.dot (expected one of {', '.join(cls.FIELDS)})", pos)
            parser.parse_punctuation("=")
            found[key] = parse_int_list(parser)

        with parser.in_angle_brackets():
            if parser.parse_optional_punctuation(">") is None:
                parser.parse_comma_separated_list(parser.Delimiter.NONE, entry)
        return [_ints(found.get(f, [])) for f in cls.FIELDS]

    def print_parameters(self, printer: Printer) -> None:
        parts = [f"{f} = [{', '.join(map(str, v))}]" for f, v in zip(self.FIELDS, self.lists()) if v]
        printer.print_string("<" + ", ".join(parts) + ">")


class IndexDimensionNumbers:
    """What gather's and scatter's dimension numbers share: lists of dimensions by name
    (LISTS) and an index_vector_dim, printed as `<name = [...], ..., index_vector_dim = n>`
    with empty lists left out (empty when absent; an absent index_vector_dim is 0, as in
    StableHLO's parser)."""

    name: ClassVar[str]
    LISTS: ClassVar[tuple[str, ...]]
    if TYPE_CHECKING:  # a parameter of each subclass (declared there, for IRDL's order)
        index_vector_dim: IntAttr

    def lists(self) -> dict[str, tuple[int, ...]]:
        """The list fields by name."""
        return {f: tuple(a.data for a in getattr(self, f).data) for f in self.LISTS}

    @property
    def vector_dim(self) -> int:
        return self.index_vector_dim.data

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        lists: dict[str, list[int]] = {}
        vector_dim: list[int] = []
        keys = (*cls.LISTS, "index_vector_dim")

        def entry() -> None:
            pos = parser.pos
            key = parser.parse_identifier()
            seen = key in lists or (key == "index_vector_dim" and vector_dim)
            if key not in keys or seen:
                what = "repeated" if seen else "unexpected"
                parser.raise_error(f"{what} '{key}' in #{cls.name} (expected one of {', '.join(keys)})", pos)
            parser.parse_punctuation("=")
            if key == "index_vector_dim":
                vector_dim.append(parser.parse_integer())
            else:
                lists[key] = parse_int_list(parser)

        with parser.in_angle_brackets():
            if parser.parse_optional_punctuation(">") is None:
                parser.parse_comma_separated_list(parser.Delimiter.NONE, entry)
        return [*(_ints(lists.get(f, [])) for f in cls.LISTS), IntAttr(vector_dim[0] if vector_dim else 0)]

    def print_parameters(self, printer: Printer) -> None:
        parts = [f"{f} = [{', '.join(map(str, v))}]" for f, v in self.lists().items() if v]
        parts.append(f"index_vector_dim = {self.vector_dim}")
        printer.print_string("<" + ", ".join(parts) + ">")


@irdl_attr_definition
class GatherDimensionNumbersAttr(IndexDimensionNumbers, ParametrizedAttribute):
    """`#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0],
    index_vector_dim = 1>`: how a gather's indices and slices make its result.

    - offset_dims: the result dimensions that index within a slice (the slice's
      dimensions left after collapsed_slice_dims and operand_batching_dims, in order);
      the other result dimensions are the batch dimensions of start_indices;
    - collapsed_slice_dims: operand dimensions of slice size 1 that the result drops;
    - operand_batching_dims / start_indices_batching_dims: paired batch dimensions;
    - start_index_map: the operand dimension each entry of an index vector starts;
    - index_vector_dim: the dimension of start_indices holding the index vectors (its
      rank: an implicit trailing dimension of size 1).

    Empty lists are left out when printed and empty when absent; an absent
    index_vector_dim is 0 (as in StableHLO's parser).
    """

    name = "stablehlo.gather"

    offset_dims: ArrayAttr[IntAttr]
    collapsed_slice_dims: ArrayAttr[IntAttr]
    operand_batching_dims: ArrayAttr[IntAttr]
    start_indices_batching_dims: ArrayAttr[IntAttr]
    start_index_map: ArrayAttr[IntAttr]
    index_vector_dim: IntAttr

    LISTS: ClassVar[tuple[str, ...]] = (
        "offset_dims",
        "collapsed_slice_dims",
        "operand_batching_dims",
        "start_indices_batching_dims",
        "start_index_map",
    )

    def __init__(
        self,
        offset_dims: Sequence[int],
        collapsed_slice_dims: Sequence[int],
        start_index_map: Sequence[int],
        index_vector_dim: int,
        operand_batching_dims: Sequence[int] = (),
        start_indices_batching_dims: Sequence[int] = (),
    ):
        super().__init__(
            _ints(offset_dims),
            _ints(collapsed_slice_dims),
            _ints(operand_batching_dims),
            _ints(start_indices_batching_dims),
            _ints(start_index_map),
            IntAttr(int(index_vector_dim)),
        )

@irdl_attr_definition
class ScatterDimensionNumbersAttr(IndexDimensionNumbers, ParametrizedAttribute):
    """`#stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
    index_vector_dim = 1>`: where a scatter's updates land.

    - update_window_dims: the update dimensions that index within a window of the
      operand; the other update dimensions are the scatter dimensions of the indices;
    - inserted_window_dims: operand dimensions of window size 1 that updates leave out;
    - input_batching_dims / scatter_indices_batching_dims: paired batch dimensions;
    - scatter_dims_to_operand_dims: the operand dimension each entry of an index vector
      indexes;
    - index_vector_dim: the dimension of scatter_indices holding the index vectors.
    """

    name = "stablehlo.scatter"

    update_window_dims: ArrayAttr[IntAttr]
    inserted_window_dims: ArrayAttr[IntAttr]
    input_batching_dims: ArrayAttr[IntAttr]
    scatter_indices_batching_dims: ArrayAttr[IntAttr]
    scatter_dims_to_operand_dims: ArrayAttr[IntAttr]
    index_vector_dim: IntAttr

    LISTS: ClassVar[tuple[str, ...]] = (
        "update_window_dims",
        "inserted_window_dims",
        "input_batching_dims",
        "scatter_indices_batching_dims",
        "scatter_dims_to_operand_dims",
    )


@irdl_attr_definition
class ConvDimensionNumbersAttr(ParametrizedAttribute):
    """Layouts of a convolution: `#stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>`.

    Each list names, position by position, what the dimension of that tensor holds:
    `b` batch, `f` feature, `i`/`o` the kernel's input/output features, and digits the
    spatial dimensions in order. Held as three lists of those letters and numbers.
    """

    name = "stablehlo.conv"

    input_layout: ArrayAttr
    kernel_layout: ArrayAttr
    output_layout: ArrayAttr

    LETTERS: ClassVar[tuple[str, str, str]] = ("bf", "io", "bf")

    def __init__(self, input_layout: Sequence[str | int], kernel_layout: Sequence[str | int], output_layout: Sequence[str | int]):
        super().__init__(*(self._encode(v) for v in (input_layout, kernel_layout, output_layout)))

    @staticmethod
    def _encode(layout: Sequence[str | int]) -> ArrayAttr:
        return ArrayAttr([IntAttr(v) if isinstance(v, int) else StringAttr(v) for v in layout])

    def layouts(self) -> tuple[tuple[str | int, ...], ...]:
        """(input, kernel, output) layouts, e.g. ('b', 'f', 0, 1)."""
        return tuple(tuple(a.data for a in lay.data) for lay in (self.input_layout, self.kernel_layout, self.output_layout))

    @classmethod
    def parse_body(cls, parser: AttrParser) -> list[Attribute]:
        """`[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]`"""

        def item() -> str | int:
            if (n := parser.parse_optional_integer()) is not None:
                return n
            pos = parser.pos
            letter = parser.parse_identifier()
            if letter not in ("b", "f", "i", "o"):
                parser.raise_error(f"unexpected '{letter}' in convolution dimension numbers (expected b, f, i, o or a number)", pos)
            return letter

        lhs = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, item)
        parser.parse_keyword("x")
        rhs = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, item)
        parser.parse_punctuation("->")
        out = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, item)
        return [cls._encode(v) for v in (lhs, rhs, out)]

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            return cls.parse_body(parser)

    def body_text(self) -> str:
        return "x".join("[" + ", ".join(map(str, lay)) + "]" for lay in self.layouts()[:2]) + "->[" + ", ".join(
            map(str, self.layouts()[2])
        ) + "]"

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.body_text()}>")

    def verify(self) -> None:
        for lay, letters in zip(self.layouts(), self.LETTERS):
            spatial = sorted(v for v in lay if isinstance(v, int))
            named = [v for v in lay if isinstance(v, str)]
            if sorted(named) != sorted(letters) or spatial != list(range(len(spatial))):
                raise VerifyException(
                    f"convolution layout [{', '.join(map(str, lay))}] must name {letters[0]} and {letters[1]} once "
                    f"and the spatial dimensions 0..n-1 once each"
                )
        counts = {sum(isinstance(v, int) for v in lay) for lay in self.layouts()}
        if len(counts) != 1:
            raise VerifyException("convolution layouts must have the same number of spatial dimensions")


# ---------------------------------------------------------------------------
# custom directives of the pretty syntax
# ---------------------------------------------------------------------------


class _SameTypes(CustomDirective):
    """StableHLO's `custom<SameOperandsAndResultType>`: `: T` when every operand and
    the result have type T, else a function type `: (A, B) -> R`."""

    def _types(self) -> list[TypeDirective]:
        return [getattr(self, name) for name in self.parameters]

    def parse(self, parser: Parser, state: ParsingState) -> None:
        t = parser.parse_type()
        slots = self._types()
        if isinstance(t, FunctionType):
            types = [*t.inputs.data, *t.outputs.data]
            if len(types) != len(slots):
                parser.raise_error(f"expected a function type with {len(slots) - 1} inputs and 1 result, got {t}")
        else:
            types = [t] * len(slots)
        for slot, ty in zip(slots, types):
            slot.set(state, (ty,))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        types = [slot.get(op)[0] for slot in self._types()]
        state.print_whitespace(printer)
        if all(t == types[0] for t in types):
            printer.print_attribute(types[0])
        else:
            printer.print_function_type(types[:-1], types[-1:])


@irdl_custom_directive
class SameTypes1(_SameTypes):
    operand: TypeDirective
    result: TypeDirective


@irdl_custom_directive
class SameTypes2(_SameTypes):
    lhs: TypeDirective
    rhs: TypeDirective
    result: TypeDirective


@irdl_custom_directive
class SameTypes3(_SameTypes):
    first: TypeDirective
    second: TypeDirective
    third: TypeDirective
    result: TypeDirective


@irdl_custom_directive
class SelectOpType(CustomDirective):
    """`: pred_type, result_type` when both branches have the result's type, else a
    function type `(P, T, F) -> R` (StableHLO's custom<SelectOpType>)."""

    pred: TypeDirective
    on_true: TypeDirective
    on_false: TypeDirective
    result: TypeDirective

    def parse(self, parser: Parser, state: ParsingState) -> None:
        t = parser.parse_type()
        if isinstance(t, FunctionType):
            types = [*t.inputs.data, *t.outputs.data]
            if len(types) != 4:
                parser.raise_error(f"expected a function type with 3 inputs and 1 result, got {t}")
        else:
            parser.parse_punctuation(",")
            value = parser.parse_type()
            types = [t, value, value, value]
        for slot, ty in zip((self.pred, self.on_true, self.on_false, self.result), types):
            slot.set(state, (ty,))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        p, a, b, r = (slot.get(op)[0] for slot in (self.pred, self.on_true, self.on_false, self.result))
        state.print_whitespace(printer)
        if a == b == r:
            printer.print_attribute(p)
            printer.print_string(", ")
            printer.print_attribute(r)
        else:
            printer.print_function_type([p, a, b], [r])


@irdl_custom_directive
class I64List(CustomDirective):
    """`[0, 1]` for an `array<i64: 0, 1>` property (custom<DenseI64Array>)."""

    attr: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.attr.set(state, i64_array(parse_int_list(parser)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        attr = self.attr.get(op)
        print_int_list(printer, values_of(attr) if isinstance(attr, DenseArrayBase) else ())


@irdl_custom_directive
class SliceRanges(CustomDirective):
    """`[1:3, 0:8:2]`: start:limit(:stride) per dimension (stride 1 left out)."""

    start: AttributeVariable
    limit: AttributeVariable
    strides: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        def dim() -> tuple[int, int, int]:
            a = parser.parse_integer()
            parser.parse_punctuation(":")
            b = parser.parse_integer()
            s = parser.parse_integer() if parser.parse_optional_punctuation(":") else 1
            return a, b, s

        ranges = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, dim)
        for directive, values in zip((self.start, self.limit, self.strides), zip(*ranges) if ranges else ((), (), ())):
            directive.set(state, i64_array(values))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        start, limit, strides = (values_of(d.get(op)) for d in (self.start, self.limit, self.strides))  # type: ignore[arg-type]
        parts = [f"{a}:{b}" + (f":{s}" if s != 1 else "") for a, b, s in zip(start, limit, strides)]
        printer.print_string("[" + ", ".join(parts) + "]")


@irdl_custom_directive
class OperandsWithComma(CustomDirective):
    """`%a, %b,`: operands each followed by a comma (custom<VariadicOperandWithAttribute>)."""

    operands: VariadicOperandVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        operands = []
        while (operand := parser.parse_optional_unresolved_operand()) is not None:
            operands.append(operand)
            parser.parse_punctuation(",")
        self.operands.set(state, operands)

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        printer.print_list(self.operands.get(op), printer.print_ssa_value)
        printer.print_string(",")


# ---------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------


def _check_same_shapes(op: IRDLOperation, values: Sequence[SSAValue]) -> None:
    shapes = {shape_of(v) for v in values}
    if len(shapes) != 1:
        raise VerifyException(f"'{op.name}' operands and result must have the same shape, got {', '.join(str(v.type) for v in values)}")


def reducer_input_shape(op: ReduceOp | ReduceWindowOp) -> tuple[int, ...]:
    """The first input's shape, after checking that reduce or reduce_window has as many
    inputs, init values and results, at least one."""
    n = len(op.inputs)
    if n == 0 or len(op.init_values) != n or len(op.outputs) != n:
        raise VerifyException(f"'{op.name}' needs as many inputs, init values and results, at least one")
    return shape_of(op.inputs[0])


def verify_reducer(op: ReduceOp | ReduceWindowOp, shape: tuple[int, ...], expected: tuple[int, ...]) -> None:
    """What stablehlo.reduce and reduce_window share: inputs of one `shape`, rank-0 init
    values of their element types, results of shape `expected`, and a body that takes
    two scalars per input and returns one per input."""
    for v, init, out in zip(op.inputs, op.init_values, op.outputs):
        if shape_of(v) != shape:
            raise VerifyException(f"'{op.name}' inputs must have one shape")
        if init.type != TensorType(element_type_of(v), []):
            raise VerifyException(f"'{op.name}' init value {init.type} must be a rank-0 tensor of {element_type_of(v)}")
        if out.type != TensorType(element_type_of(v), list(expected)):
            raise VerifyException(f"'{op.name}' result must be {TensorType(element_type_of(v), list(expected))}, got {out.type}")
    block = op.body.block
    scalars = [init.type for init in op.init_values]
    if [a.type for a in block.args] != scalars * 2:
        raise VerifyException(f"'{op.name}' body must take ({', '.join(map(str, scalars * 2))})")
    ret = block.last_op
    if not isinstance(ret, ReturnOp) or [v.type for v in ret.operands] != scalars:
        raise VerifyException(f"'{op.name}' body must end in stablehlo.return of ({', '.join(map(str, scalars))})")


class ElementwiseOp(IRDLOperation):
    """Base: one operand and a result of its shape, printed `%y = op %x : type` when the
    types are one, `(type) -> type` when they differ."""

    operand = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$operand attr-dict `:` custom<SameTypes1>(type($operand), type($result))"
    custom_directives = (SameTypes1,)
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, operand: SSAValue, result_type: Attribute | None = None):
        super().__init__(operands=[operand], result_types=[result_type or operand.type])

    def verify_(self) -> None:
        _check_same_shapes(self, [self.operand, self.result])


class UnaryOp(ElementwiseOp):
    """Base: one operand, a result of the same type."""

    def verify_(self) -> None:
        if self.operand.type != self.result.type:
            raise VerifyException(f"'{self.name}' result type {self.result.type} differs from the operand type {self.operand.type}")


class BinaryOp(IRDLOperation):
    """Base: two operands and a result of one type."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` custom<SameTypes2>(type($lhs), type($rhs), type($result))"
    custom_directives = (SameTypes2,)
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        super().__init__(operands=[lhs, rhs], result_types=[lhs.type])

    def verify_(self) -> None:
        if not self.lhs.type == self.rhs.type == self.result.type:
            raise VerifyException(
                f"'{self.name}' operands and result must have one type, got {self.lhs.type}, {self.rhs.type} -> {self.result.type}"
            )


def _unary(op_name: str, doc: str) -> type[UnaryOp]:
    cls = type(op_name.split(".")[1].title().replace("_", "") + "Op", (UnaryOp,), {"name": op_name, "__doc__": doc})
    return irdl_op_definition(cls)


def _binary(op_name: str, doc: str) -> type[BinaryOp]:
    cls = type(op_name.split(".")[1].title().replace("_", "") + "Op", (BinaryOp,), {"name": op_name, "__doc__": doc})
    return irdl_op_definition(cls)


AbsOp = _unary("stablehlo.abs", "|x|")
NegateOp = _unary("stablehlo.negate", "-x")
ExponentialOp = _unary("stablehlo.exponential", "e^x")
LogOp = _unary("stablehlo.log", "natural logarithm")
SqrtOp = _unary("stablehlo.sqrt", "square root")
RsqrtOp = _unary("stablehlo.rsqrt", "1 / sqrt(x)")
TanhOp = _unary("stablehlo.tanh", "hyperbolic tangent")
LogisticOp = _unary("stablehlo.logistic", "1 / (1 + e^-x)")
NotOp = _unary("stablehlo.not", "logical (i1) or bitwise not")
SignOp = _unary("stablehlo.sign", "-1, 0 or 1; NaN, 0 and -0.0 for themselves")
SineOp = _unary("stablehlo.sine", "sin x")
CosineOp = _unary("stablehlo.cosine", "cos x")
FloorOp = _unary("stablehlo.floor", "round down")
CeilOp = _unary("stablehlo.ceil", "round up")
RoundNearestEvenOp = _unary("stablehlo.round_nearest_even", "the nearest integer, halves to even")
RoundNearestAfzOp = _unary("stablehlo.round_nearest_afz", "the nearest integer, halves away from zero")
LogPlusOneOp = _unary("stablehlo.log_plus_one", "log(1 + x), accurate near 0")
ExponentialMinusOneOp = _unary("stablehlo.exponential_minus_one", "e^x - 1, accurate near 0")
TanOp = _unary("stablehlo.tan", "tan x")
CbrtOp = _unary("stablehlo.cbrt", "the real cube root")
PopcntOp = _unary("stablehlo.popcnt", "the number of bits set")
CountLeadingZerosOp = _unary("stablehlo.count_leading_zeros", "the zero bits above the highest set one (the width for 0)")


@irdl_op_definition
class IsFiniteOp(ElementwiseOp):
    """Elementwise: x is neither infinite nor NaN, as i1.

    `%f = stablehlo.is_finite %x : (tensor<4xf32>) -> tensor<4xi1>`
    """

    name = "stablehlo.is_finite"

    def verify_(self) -> None:
        super().verify_()
        if not isinstance(self.operand.type.get_element_type(), AnyFloat) or self.result.type.get_element_type() != i1:  # type: ignore[union-attr]
            raise VerifyException(f"'stablehlo.is_finite' takes floats to i1, got {self.operand.type} -> {self.result.type}")

AddOp = _binary("stablehlo.add", "a + b")
SubtractOp = _binary("stablehlo.subtract", "a - b")
MultiplyOp = _binary("stablehlo.multiply", "a * b")
DivideOp = _binary("stablehlo.divide", "a / b (integers: truncated)")
MaximumOp = _binary("stablehlo.maximum", "max(a, b), NaN if either is NaN")
MinimumOp = _binary("stablehlo.minimum", "min(a, b), NaN if either is NaN")
PowerOp = _binary("stablehlo.power", "a ** b")
RemainderOp = _binary("stablehlo.remainder", "a - b * trunc(a / b): the sign of the dividend (C fmod)")
AndOp = _binary("stablehlo.and", "logical (i1) or bitwise and")
OrOp = _binary("stablehlo.or", "logical (i1) or bitwise or")
XorOp = _binary("stablehlo.xor", "logical (i1) or bitwise xor")
ShiftLeftOp = _binary("stablehlo.shift_left", "a << b; 0 for amounts of the width or more (negative ones as unsigned)")
ShiftRightArithmeticOp = _binary("stablehlo.shift_right_arithmetic", "a >> b filling with a's sign bit; all sign bits for amounts of the width or more")
ShiftRightLogicalOp = _binary("stablehlo.shift_right_logical", "a >> b filling with zeros; 0 for amounts of the width or more")
Atan2Op = _binary("stablehlo.atan2", "the angle of the point (b, a), in [-pi, pi]")


@irdl_op_definition
class BitcastConvertOp(ElementwiseOp):
    """Each element's bits read as another element type of the same width (numpy's view;
    a change of width adds or drops a dimension, which the conversion rejects).

    `%y = stablehlo.bitcast_convert %x : (tensor<4xf32>) -> tensor<4xi32>`
    """

    name = "stablehlo.bitcast_convert"

    def verify_(self) -> None:
        pass  # a change of width changes the shape


@irdl_op_definition
class ConvertOp(ElementwiseOp):
    """Elementwise element-type conversion (float -> int rounds towards zero; to i1: x != 0).

    `%y = stablehlo.convert %x : (tensor<4xi1>) -> tensor<4xf32>`
    """

    name = "stablehlo.convert"


@irdl_op_definition
class ClampOp(IRDLOperation):
    """`clamp(min, x, max)`; min and max are rank 0 or have x's shape."""

    name = "stablehlo.clamp"
    min = operand_def(TensorType)
    operand = operand_def(TensorType)
    max = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$min `,` $operand `,` $max attr-dict `:` custom<SameTypes3>(type($min), type($operand), type($max), type($result))"
    )
    custom_directives = (SameTypes3,)
    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        if self.operand.type != self.result.type:
            raise VerifyException(f"'stablehlo.clamp' result type {self.result.type} differs from the operand type {self.operand.type}")
        for what, bound in (("min", self.min), ("max", self.max)):
            if element_type_of(bound) != element_type_of(self.operand) or shape_of(bound) not in ((), shape_of(self.operand)):
                raise VerifyException(f"'stablehlo.clamp' {what} must be rank 0 or have the operand's type, got {bound.type}")


@irdl_op_definition
class SelectOp(IRDLOperation):
    """`pred ? on_true : on_false`, elementwise; a rank-0 pred selects whole tensors.

    `%r = stablehlo.select %p, %a, %b : tensor<4xi1>, tensor<4xf32>`
    """

    name = "stablehlo.select"
    pred = operand_def(TensorType)
    on_true = operand_def(TensorType)
    on_false = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$pred `,` $on_true `,` $on_false attr-dict `:` "
        "custom<SelectOpType>(type($pred), type($on_true), type($on_false), type($result))"
    )
    custom_directives = (SelectOpType,)
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, pred: SSAValue, on_true: SSAValue, on_false: SSAValue):
        super().__init__(operands=[pred, on_true, on_false], result_types=[on_true.type])

    def verify_(self) -> None:
        if not self.on_true.type == self.on_false.type == self.result.type:
            raise VerifyException(
                f"'stablehlo.select' branches and result must have one type, got "
                f"{self.on_true.type}, {self.on_false.type} -> {self.result.type}"
            )
        if element_type_of(self.pred) != i1:
            raise VerifyException(f"'stablehlo.select' predicate must have element type i1, got {element_type_of(self.pred)}")
        if shape_of(self.pred) not in ((), shape_of(self.result)):
            raise VerifyException(f"'stablehlo.select' predicate must be rank 0 or have the result's shape, got {self.pred.type}")


@irdl_op_definition
class CompareOp(IRDLOperation):
    """Elementwise comparison to i1.

    `%c = stablehlo.compare LT, %a, %b, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>`
    """

    name = "stablehlo.compare"
    comparison_direction = prop_def(ComparisonDirectionAttr)
    compare_type = opt_prop_def(ComparisonTypeAttr)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$comparison_direction `,` $lhs `,` $rhs (`,` $compare_type^)? attr-dict `:` functional-type(operands, results)"
    )
    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        if self.lhs.type != self.rhs.type:
            raise VerifyException(f"'stablehlo.compare' operands must have one type, got {self.lhs.type} and {self.rhs.type}")
        if shape_of(self.result) != shape_of(self.lhs) or element_type_of(self.result) != i1:
            raise VerifyException(
                f"'stablehlo.compare' result must be the operands' shape with element type i1, got {self.result.type}"
            )

    @property
    def direction(self) -> str:
        return self.comparison_direction.data.value

    @property
    def kind(self) -> str | None:
        return self.compare_type.data.value if self.compare_type is not None else None


# ---------------------------------------------------------------------------
# constants and index generators
# ---------------------------------------------------------------------------


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """`%c = stablehlo.constant dense<1.0> : tensor<f32>`"""

    name = "stablehlo.constant"
    value = prop_def(DenseIntOrFPElementsAttr)
    output = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, value: DenseIntOrFPElementsAttr):
        super().__init__(result_types=[value.type], properties={"value": value})

    def verify_(self) -> None:
        if self.value.type != self.output.type:
            raise VerifyException(f"'stablehlo.constant' value type {self.value.type} differs from the result type {self.output.type}")

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        attrs = parser.parse_optional_attr_dict()
        pos = parser.pos
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error("'stablehlo.constant' expects a dense elements attribute such as dense<1.0> : tensor<f32>", pos, parser.pos)
        op = cls(value)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_op_attributes(self.attributes)
        printer.print_string(" ")
        printer.print_attribute(self.value)


@irdl_op_definition
class IotaOp(IRDLOperation):
    """0, 1, 2... along one dimension: `%i = stablehlo.iota dim = 1 : tensor<4x8xi32>`."""

    name = "stablehlo.iota"
    iota_dimension = prop_def(IntegerAttr[I64])
    output = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "`dim` `=` $iota_dimension attr-dict `:` type($output)"
    irdl_options = (ParsePropInAttrDict(),)

    @property
    def dimension(self) -> int:
        return self.iota_dimension.value.data

    def verify_(self) -> None:
        rank = len(shape_of(self.output))
        if not 0 <= self.dimension < rank:
            raise VerifyException(f"'stablehlo.iota' dimension {self.dimension} is out of range for rank {rank}")


# ---------------------------------------------------------------------------
# shapes and data movement
# ---------------------------------------------------------------------------


@irdl_op_definition
class BroadcastInDimOp(IRDLOperation):
    """Operand dimension i goes to result dimension dims[i] (size 1 or equal); others are new.

    `%b = stablehlo.broadcast_in_dim %x, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>`
    """

    name = "stablehlo.broadcast_in_dim"
    operand = operand_def(TensorType)
    broadcast_dimensions = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$operand `,` `dims` `=` custom<I64List>($broadcast_dimensions) attr-dict `:` functional-type(operands, results)"
    )
    custom_directives = (I64List,)
    irdl_options = (ParsePropInAttrDict(),)

    @property
    def dims(self) -> tuple[int, ...]:
        return values_of(self.broadcast_dimensions)

    def verify_(self) -> None:
        ins, outs, dims = shape_of(self.operand), shape_of(self.result), self.dims
        if element_type_of(self.operand) != element_type_of(self.result):
            raise VerifyException("'stablehlo.broadcast_in_dim' changes the element type")
        if len(dims) != len(ins):
            raise VerifyException(
                f"'stablehlo.broadcast_in_dim' dims has {len(dims)} entries but the operand has rank {len(ins)}"
            )
        check_dims(self, "dims", dims, len(outs))
        for i, (d, n) in enumerate(zip(dims, ins)):
            if n not in (1, outs[d]):
                raise VerifyException(
                    f"'stablehlo.broadcast_in_dim' operand dimension {i} of size {n} cannot broadcast "
                    f"to result dimension {d} of size {outs[d]}"
                )


@irdl_op_definition
class TransposeOp(IRDLOperation):
    """Result dimension k is operand dimension permutation[k].

    `%t = stablehlo.transpose %x, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>`
    """

    name = "stablehlo.transpose"
    operand = operand_def(TensorType)
    permutation = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$operand `,` `dims` `=` custom<I64List>($permutation) attr-dict `:` functional-type(operands, results)"
    )
    custom_directives = (I64List,)
    irdl_options = (ParsePropInAttrDict(),)

    @property
    def perm(self) -> tuple[int, ...]:
        return values_of(self.permutation)

    def verify_(self) -> None:
        shape = shape_of(self.operand)
        check_permutation(self, "dims", self.perm, len(shape))
        expected = tuple(shape[p] for p in self.perm)
        if shape_of(self.result) != expected or element_type_of(self.result) != element_type_of(self.operand):
            raise VerifyException(f"'stablehlo.transpose' result must have shape {list(expected)} and the operand's element type, got {self.result.type}")


@irdl_op_definition
class ReshapeOp(IRDLOperation):
    """Row-major reshape: `%r = stablehlo.reshape %x : (tensor<4x8xf32>) -> tensor<32xf32>`."""

    name = "stablehlo.reshape"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "operands attr-dict `:` functional-type(operands, results)"
    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        a, b = math.prod(shape_of(self.operand)), math.prod(shape_of(self.result))
        if a != b or element_type_of(self.result) != element_type_of(self.operand):
            raise VerifyException(f"'stablehlo.reshape' cannot reshape {self.operand.type} to {self.result.type}")


@irdl_op_definition
class SliceOp(IRDLOperation):
    """Static strided slice: `%s = stablehlo.slice %x [1:3, 0:8:2] : (tensor<4x8xf32>) -> tensor<2x4xf32>`."""

    name = "stablehlo.slice"
    operand = operand_def(TensorType)
    start_indices = prop_def(DenseArrayBase)
    limit_indices = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$operand custom<SliceRanges>($start_indices, $limit_indices, $strides) attr-dict `:` functional-type(operands, results)"
    )
    custom_directives = (SliceRanges,)
    irdl_options = (ParsePropInAttrDict(),)

    @property
    def bounds(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        return values_of(self.start_indices), values_of(self.limit_indices), values_of(self.strides)

    def verify_(self) -> None:
        shape = shape_of(self.operand)
        start, limit, strides = self.bounds
        if not len(start) == len(limit) == len(strides) == len(shape):
            raise VerifyException(f"'stablehlo.slice' needs {len(shape)} ranges (the operand rank), got {len(start)}")
        for d, (a, b, s, n) in enumerate(zip(start, limit, strides, shape)):
            if s < 1 or not 0 <= a <= b <= n:
                raise VerifyException(f"'stablehlo.slice' range {a}:{b}:{s} of dimension {d} is invalid for size {n}")
        expected = tuple(-(-(b - a) // s) for a, b, s in zip(start, limit, strides))
        if shape_of(self.result) != expected:
            raise VerifyException(f"'stablehlo.slice' must produce shape {list(expected)}, got {self.result.type}")


@irdl_op_definition
class ReverseOp(IRDLOperation):
    """The elements in reverse order along each of `dims` (jax's x[::-1], jnp.flip).

    `%r = stablehlo.reverse %x, dims = [0, 1] : tensor<6x7xf32>`
    """

    name = "stablehlo.reverse"
    operand = operand_def(TensorType)
    dimensions = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$operand `,` `dims` `=` custom<I64List>($dimensions) attr-dict `:` custom<SameTypes1>(type($operand), type($result))"
    )
    custom_directives = (I64List, SameTypes1)
    irdl_options = (ParsePropInAttrDict(),)

    @property
    def dims(self) -> tuple[int, ...]:
        return values_of(self.dimensions)

    def verify_(self) -> None:
        if self.operand.type != self.result.type:
            raise VerifyException(f"'stablehlo.reverse' result type {self.result.type} differs from the operand type {self.operand.type}")
        check_dims(self, "dims", self.dims, len(shape_of(self.operand)))


@irdl_op_definition
class PadOp(IRDLOperation):
    """Edge padding (negative: cropping) and interior padding with a scalar value.

    `%p = stablehlo.pad %x, %v, low = [1, 0], high = [0, 2], interior = [0, 0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<3x6xf32>`
    """

    name = "stablehlo.pad"
    operand = operand_def(TensorType)
    padding_value = operand_def(TensorType)
    edge_padding_low = prop_def(DenseArrayBase)
    edge_padding_high = prop_def(DenseArrayBase)
    interior_padding = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$operand `,` $padding_value `,` `low` `=` custom<I64List>($edge_padding_low) `,` "
        "`high` `=` custom<I64List>($edge_padding_high) `,` `interior` `=` custom<I64List>($interior_padding) "
        "attr-dict `:` functional-type(operands, results)"
    )
    custom_directives = (I64List,)
    irdl_options = (ParsePropInAttrDict(),)

    @property
    def amounts(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        return values_of(self.edge_padding_low), values_of(self.edge_padding_high), values_of(self.interior_padding)

    def verify_(self) -> None:
        shape = shape_of(self.operand)
        low, high, interior = self.amounts
        if not len(low) == len(high) == len(interior) == len(shape):
            raise VerifyException(f"'stablehlo.pad' low, high and interior must each have {len(shape)} entries")
        if any(i < 0 for i in interior):
            raise VerifyException("'stablehlo.pad' interior padding must be non-negative")
        if shape_of(self.padding_value) != () or element_type_of(self.padding_value) != element_type_of(self.operand):
            raise VerifyException(f"'stablehlo.pad' padding value must be a rank-0 tensor of the operand's element type, got {self.padding_value.type}")
        expected = tuple(lo + hi + n + max(n - 1, 0) * i for n, lo, hi, i in zip(shape, low, high, interior))
        if shape_of(self.result) != expected:
            raise VerifyException(f"'stablehlo.pad' must produce shape {list(expected)}, got {self.result.type}")


@irdl_op_definition
class ConcatenateOp(IRDLOperation):
    """`%c = stablehlo.concatenate %a, %b, dim = 1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>`"""

    name = "stablehlo.concatenate"
    inputs = var_operand_def(TensorType)
    dimension = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "custom<OperandsWithComma>($inputs) `dim` `=` $dimension attr-dict `:` functional-type(operands, results)"
    custom_directives = (OperandsWithComma,)
    irdl_options = (ParsePropInAttrDict(),)

    @property
    def axis(self) -> int:
        return self.dimension.value.data

    def verify_(self) -> None:
        if not self.inputs:
            raise VerifyException("'stablehlo.concatenate' needs at least one operand")
        first = shape_of(self.inputs[0])
        if not 0 <= self.axis < len(first):
            raise VerifyException(f"'stablehlo.concatenate' dimension {self.axis} is out of range for rank {len(first)}")
        for v in self.inputs:
            s = shape_of(v)
            if len(s) != len(first) or any(a != b for d, (a, b) in enumerate(zip(s, first)) if d != self.axis):
                raise VerifyException(f"'stablehlo.concatenate' operand shapes {v.type} and {self.inputs[0].type} differ outside dimension {self.axis}")
        expected = list(first)
        expected[self.axis] = sum(shape_of(v)[self.axis] for v in self.inputs)
        if list(shape_of(self.result)) != expected:
            raise VerifyException(f"'stablehlo.concatenate' must produce shape {expected}, got {self.result.type}")


@irdl_op_definition
class GatherOp(IRDLOperation):
    """Slices of `operand` starting where `start_indices` says (StableHLO's general gather;
    jax's x[idx], x[:, idx], jnp.take). Start indices are clamped so that each slice
    lies inside the operand. In the generic form jax prints:

        %g = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1],
             collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>,
             indices_are_sorted = false, slice_sizes = array<i64: 1, 7>}>
             : (tensor<6x7xf32>, tensor<3x1xi32>) -> tensor<3x7xf32>
    """

    name = "stablehlo.gather"
    operand = operand_def(TensorType)
    start_indices = operand_def(TensorType)
    dimension_numbers = prop_def(GatherDimensionNumbersAttr)
    slice_sizes = prop_def(DenseArrayBase)
    indices_are_sorted = opt_prop_def(BoolAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    @property
    def sizes(self) -> tuple[int, ...]:
        return values_of(self.slice_sizes)

    def batch_shape(self) -> list[int]:
        """start_indices' shape without the index vector dimension."""
        indices, vd = shape_of(self.start_indices), self.dimension_numbers.vector_dim
        return [n for d, n in enumerate(indices) if d != vd]

    def result_shape(self) -> list[int]:
        """Batch dimensions, with the slices' kept dimensions at offset_dims."""
        lists = self.dimension_numbers.lists()
        dropped = set(lists["collapsed_slice_dims"]) | set(lists["operand_batching_dims"])
        offsets = [n for d, n in enumerate(self.sizes) if d not in dropped]
        batch = iter(self.batch_shape())
        kept = iter(offsets)
        rank = len(offsets) + len(self.batch_shape())
        return [next(kept) if d in lists["offset_dims"] else next(batch) for d in range(rank)]

    def verify_(self) -> None:
        operand, indices, sizes = shape_of(self.operand), shape_of(self.start_indices), self.sizes
        if not isinstance(element_type_of(self.start_indices), IntegerType):
            raise VerifyException(f"'stablehlo.gather' start indices must be integers, got {self.start_indices.type}")
        if len(sizes) != len(operand):
            raise VerifyException(f"'stablehlo.gather' slice_sizes must have {len(operand)} entries (the operand rank), got {len(sizes)}")
        for d, (k, n) in enumerate(zip(sizes, operand)):
            if not 0 <= k <= n:
                raise VerifyException(f"'stablehlo.gather' slice size {k} of dimension {d} is out of range for size {n}")
        self._verify_dimension_numbers(operand, indices, sizes)
        expected = self.result_shape()
        if list(shape_of(self.result)) != expected or element_type_of(self.result) != element_type_of(self.operand):
            raise VerifyException(f"'stablehlo.gather' must produce shape {expected} of the operand's element type, got {self.result.type}")

    def _verify_dimension_numbers(self, operand: Sequence[int], indices: Sequence[int], sizes: Sequence[int]) -> None:
        lists, vd = self.dimension_numbers.lists(), self.dimension_numbers.vector_dim
        if not 0 <= vd <= len(indices):
            raise VerifyException(f"'stablehlo.gather' index_vector_dim {vd} is out of range for start indices of rank {len(indices)}")
        batch_rank = len(indices) - (vd < len(indices))
        check_dims(self, "offset_dims", lists["offset_dims"], len(lists["offset_dims"]) + batch_rank)
        for what in ("collapsed_slice_dims", "operand_batching_dims", "start_index_map"):
            check_dims(self, what, lists[what], len(operand))
        check_dims(self, "start_indices_batching_dims", lists["start_indices_batching_dims"], len(indices))
        if vd in lists["start_indices_batching_dims"]:
            raise VerifyException("'stablehlo.gather' start_indices_batching_dims must not hold index_vector_dim")
        if len(lists["operand_batching_dims"]) != len(lists["start_indices_batching_dims"]):
            raise VerifyException("'stablehlo.gather' operand_batching_dims and start_indices_batching_dims must have one length")
        for what in ("offset_dims", "collapsed_slice_dims", "operand_batching_dims"):
            if list(lists[what]) != sorted(lists[what]):
                raise VerifyException(f"'stablehlo.gather' {what} must be sorted, got {list(lists[what])}")
        if set(lists["collapsed_slice_dims"]) & set(lists["operand_batching_dims"]):
            raise VerifyException("'stablehlo.gather' collapsed_slice_dims and operand_batching_dims overlap")
        for d in (*lists["collapsed_slice_dims"], *lists["operand_batching_dims"]):
            if sizes[d] > 1:
                raise VerifyException(f"'stablehlo.gather' slice size of collapsed or batching dimension {d} must be at most 1, got {sizes[d]}")
        vector = indices[vd] if vd < len(indices) else 1
        if len(lists["start_index_map"]) != vector:
            raise VerifyException(
                f"'stablehlo.gather' start_index_map has {len(lists['start_index_map'])} entries but the index vectors have {vector}"
            )
        if len(lists["offset_dims"]) != len(operand) - len(lists["collapsed_slice_dims"]) - len(lists["operand_batching_dims"]):
            raise VerifyException(
                "'stablehlo.gather' needs one offset dim per operand dimension that is not collapsed or batching"
            )


def _verify_start_indices(op: IRDLOperation, starts: Sequence[SSAValue], rank: int) -> None:
    """One rank-0 integer start index per dimension, all of one type."""
    if len(starts) != rank:
        raise VerifyException(f"'{op.name}' needs {rank} start indices (the operand rank), got {len(starts)}")
    types = {v.type for v in starts}
    for v in starts:
        if shape_of(v) != () or not isinstance(element_type_of(v), IntegerType) or element_type_of(v) == i1:
            raise VerifyException(f"'{op.name}' start indices must be rank-0 integer tensors, got {v.type}")
    if len(types) > 1:
        raise VerifyException(f"'{op.name}' start indices must have one type, got {', '.join(sorted(map(str, types)))}")


@irdl_op_definition
class DynamicSliceOp(IRDLOperation):
    """A slice of static `sizes` at runtime start indices (rank-0 integer tensors), each
    clamped to [0, dim - size] (jax's lax.dynamic_slice, x[i] of a traced i):

        %s = stablehlo.dynamic_slice %x, %i, %j, sizes = [2, 2]
             : (tensor<4x5xf32>, tensor<i32>, tensor<i32>) -> tensor<2x2xf32>
    """

    name = "stablehlo.dynamic_slice"
    operand = operand_def(TensorType)
    start_indices = var_operand_def(TensorType)
    slice_sizes = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$operand `,` custom<OperandsWithComma>($start_indices) `sizes` `=` custom<I64List>($slice_sizes) "
        "attr-dict `:` functional-type(operands, results)"
    )
    custom_directives = (OperandsWithComma, I64List)
    irdl_options = (ParsePropInAttrDict(),)

    @property
    def sizes(self) -> tuple[int, ...]:
        return values_of(self.slice_sizes)

    def verify_(self) -> None:
        shape = shape_of(self.operand)
        _verify_start_indices(self, list(self.start_indices), len(shape))
        if len(self.sizes) != len(shape):
            raise VerifyException(f"'stablehlo.dynamic_slice' needs {len(shape)} slice sizes (the operand rank), got {len(self.sizes)}")
        for d, (k, n) in enumerate(zip(self.sizes, shape)):
            if not 0 <= k <= n:
                raise VerifyException(f"'stablehlo.dynamic_slice' slice size {k} of dimension {d} is invalid for size {n}")
        if shape_of(self.result) != self.sizes or element_type_of(self.result) != element_type_of(self.operand):
            raise VerifyException(
                f"'stablehlo.dynamic_slice' must produce shape {list(self.sizes)} of the operand's element type, got {self.result.type}"
            )


@irdl_op_definition
class DynamicUpdateSliceOp(IRDLOperation):
    """`operand` with `update` written at runtime start indices, each clamped to
    [0, dim - update dim] (jax's lax.dynamic_update_slice, x.at[i].set(v) of a traced i):

        %r = stablehlo.dynamic_update_slice %x, %u, %i, %j
             : (tensor<4x5xf32>, tensor<2x2xf32>, tensor<i32>, tensor<i32>) -> tensor<4x5xf32>
    """

    name = "stablehlo.dynamic_update_slice"
    operand = operand_def(TensorType)
    update = operand_def(TensorType)
    start_indices = var_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "operands attr-dict `:` functional-type(operands, results)"
    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        shape, update = shape_of(self.operand), shape_of(self.update)
        _verify_start_indices(self, list(self.start_indices), len(shape))
        if self.result.type != self.operand.type:
            raise VerifyException(f"'stablehlo.dynamic_update_slice' result type {self.result.type} differs from the operand type {self.operand.type}")
        if element_type_of(self.update) != element_type_of(self.operand) or len(update) != len(shape) or any(u > n for u, n in zip(update, shape)):
            raise VerifyException(
                f"'stablehlo.dynamic_update_slice' update {self.update.type} must fit in the operand {self.operand.type} with its element type"
            )


# ---------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """Terminator of a reduce body: `stablehlo.return %r : tensor<f32>`."""

    name = "stablehlo.return"
    results_ = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), Pure())
    assembly_format = "attr-dict ($results_^ `:` type($results_))?"

    def __init__(self, *values: SSAValue):
        super().__init__(operands=[list(values)])


@irdl_op_definition
class ReduceOp(IRDLOperation):
    """Reduce `inputs` over `dimensions` with a body that combines two rank-0 tensors.

    Compact form, for one input and a body that is a single binary op:
        %r = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1]
             : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    General form (the body's arguments in pairs, one pair per input):
        %r:2 = stablehlo.reduce(%x init: %a), (%i init: %b) across dimensions = [1]
             : (tensor<4x8xf32>, tensor<4x8xi32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xi32>)
         reducer(%x0: tensor<f32>, %x1: tensor<f32>) (%i0: tensor<i32>, %i1: tensor<i32>) { ... }
    """

    name = "stablehlo.reduce"
    inputs = var_operand_def(TensorType)
    init_values = var_operand_def(TensorType)
    dimensions = prop_def(DenseArrayBase)
    outputs = var_result_def(TensorType)
    body = region_def("single_block")
    irdl_options = (SameVariadicOperandSize(),)

    def __init__(self, inputs: Sequence[SSAValue], inits: Sequence[SSAValue], dimensions: Sequence[int], result_types: Sequence[Attribute], body: Region):
        super().__init__(
            operands=[list(inputs), list(inits)],
            result_types=[list(result_types)],
            properties={"dimensions": i64_array(dimensions)},
            regions=[body],
        )

    @property
    def dims(self) -> tuple[int, ...]:
        return values_of(self.dimensions)

    def single_body_op(self) -> IRDLOperation | None:
        """The body's one binary op, when the body is `return op(arg0, arg1)` (the compact form)."""
        block = self.body.block
        ops = list(block.ops)
        if len(self.inputs) != 1 or len(ops) != 2 or len(block.args) != 2:
            return None
        op, ret = ops
        if (
            isinstance(op, BinaryOp)
            and tuple(op.operands) == tuple(block.args)
            and isinstance(ret, ReturnOp)
            and tuple(ret.operands) == (op.results[0],)
            and not op.attributes
            and op.result.type == block.args[0].type
        ):
            return op
        return None

    def verify_(self) -> None:
        shape = reducer_input_shape(self)
        check_dims(self, "dimensions", self.dims, len(shape))
        expected = tuple(d for i, d in enumerate(shape) if i not in self.dims)
        verify_reducer(self, shape, expected)

    @classmethod
    def parse(cls, parser: Parser) -> ReduceOp:
        start = parser.pos

        def pair():
            value = parser.parse_unresolved_operand()
            parser.parse_keyword("init")
            parser.parse_punctuation(":")
            return value, parser.parse_unresolved_operand()

        pairs = []
        while True:
            parser.parse_punctuation("(")
            pairs.append(pair())
            parser.parse_punctuation(")")
            if parser.parse_optional_punctuation(",") is None:
                break
        applied = None
        if parser.parse_optional_keyword("applies"):
            name_pos = parser.pos
            name = parser.parse_identifier()  # e.g. stablehlo.add: a bare identifier with a dot
            applied = parser.ctx.get_optional_op(name)
            if applied is None or not issubclass(applied, BinaryOp):
                parser.raise_error(f"'stablehlo.reduce' applies must name a binary stablehlo op, got '{name}'", name_pos, parser.pos)
        parser.parse_keyword("across")
        parser.parse_keyword("dimensions")
        parser.parse_punctuation("=")
        dims = parse_int_list(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        type_pos = parser.pos
        ft = parser.parse_function_type()
        n = len(pairs)
        if len(ft.inputs.data) != 2 * n or len(ft.outputs.data) != n:
            parser.raise_error(f"'stablehlo.reduce' of {n} input(s) needs a type of {2 * n} inputs and {n} results, got {ft}", type_pos, parser.pos)
        in_types, out_types = list(ft.inputs.data), list(ft.outputs.data)
        inputs = parser.resolve_operands([p[0] for p in pairs], in_types[:n], start)
        inits = parser.resolve_operands([p[1] for p in pairs], in_types[n:], start)
        if applied is not None:
            if n != 1:
                parser.raise_error("'stablehlo.reduce' applies takes exactly one input", start)
            body = Region(Block(arg_types=[in_types[1], in_types[1]]))
            a, b = body.block.args
            op = applied(a, b)
            body.block.add_ops([op, ReturnOp(op.result)])
        else:
            parser.parse_keyword("reducer")
            lhs, rhs = [], []
            for _ in range(n):
                parser.parse_punctuation("(")
                lhs.append(parser.parse_argument())
                parser.parse_punctuation(",")
                rhs.append(parser.parse_argument())
                parser.parse_punctuation(")")
            body = parser.parse_region(lhs + rhs)
        props, others = split_properties(cls, attrs)
        op = cls(inputs, inits, dims, out_types, body)
        op.properties.update(props)
        op.attributes.update(others)
        return op

    def print(self, printer: Printer) -> None:
        for i, (v, init) in enumerate(zip(self.inputs, self.init_values)):
            printer.print_string(", (" if i else "(")
            printer.print_ssa_value(v)
            printer.print_string(" init: ")
            printer.print_ssa_value(init)
            printer.print_string(")")
        applied = self.single_body_op()
        if applied is not None:
            printer.print_string(f" applies {applied.name}")
        printer.print_string(" across dimensions = ")
        print_int_list(printer, self.dims)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_function_type([*self.inputs.types, *self.init_values.types], self.outputs.types)
        if applied is None:
            n = len(self.inputs)
            args = self.body.block.args
            printer.print_string(" reducer")
            for i in range(n):
                printer.print_string("(")
                printer.print_block_argument(args[i])
                printer.print_string(", ")
                printer.print_block_argument(args[n + i])
                printer.print_string(") ")
            printer.print_region(self.body, print_entry_block_args=False)


@irdl_op_definition
class ReduceWindowOp(IRDLOperation):
    """Reduce every window of `inputs` (pooling, jax's cumsum) with a body that combines
    two rank-0 tensors. The inputs are padded with the init values first.

    jax prints it in the generic form (absent window properties: strides and dilations 1,
    padding 0):
        %r = "stablehlo.reduce_window"(%x, %init) <{padding = dense<1> : tensor<2x2xi64>,
             window_dimensions = array<i64: 3, 3>, window_strides = array<i64: 1, 2>}> ({
        ^bb0(%a: tensor<f32>, %b: tensor<f32>):
          %m = stablehlo.maximum %a, %b : tensor<f32>
          stablehlo.return %m : tensor<f32>
        }) : (tensor<6x7xf32>, tensor<f32>) -> tensor<6x4xf32>
    """

    name = "stablehlo.reduce_window"
    inputs = var_operand_def(TensorType)
    init_values = var_operand_def(TensorType)
    window_dimensions = prop_def(DenseArrayBase)
    window_strides = opt_prop_def(DenseArrayBase)
    base_dilations = opt_prop_def(DenseArrayBase)
    window_dilations = opt_prop_def(DenseArrayBase)
    padding = opt_prop_def(DenseIntOrFPElementsAttr)
    outputs = var_result_def(TensorType)
    body = region_def("single_block")
    irdl_options = (SameVariadicOperandSize(),)

    def window(self) -> dict[str, list]:
        """dimensions, strides, base and window dilations, pads ([(low, high)] per
        dimension), with the defaults for absent properties."""
        n = len(values_of(self.window_dimensions))
        pads: list[tuple[int, int]] = [(0, 0)] * n
        if self.padding is not None:
            flat = [int(cast(int, v)) for v in self.padding.get_values()]
            pads = [(flat[2 * i], flat[2 * i + 1]) for i in range(len(flat) // 2)]
        return {
            "dimensions": list(values_of(self.window_dimensions)),
            "strides": list(values_of(self.window_strides)) or [1] * n,
            "base_dilations": list(values_of(self.base_dilations)) or [1] * n,
            "window_dilations": list(values_of(self.window_dilations)) or [1] * n,
            "pads": pads,
        }

    def result_shape(self) -> list[int]:
        """Windows per dimension: floor((padded - dilated window) / stride) + 1, or 0."""
        w, shape = self.window(), shape_of(self.inputs[0])
        out = []
        for n, k, s, bd, wd, (lo, hi) in zip(shape, w["dimensions"], w["strides"], w["base_dilations"], w["window_dilations"], w["pads"]):
            padded = ((n - 1) * bd + 1 if n else 0) + lo + hi
            span = (k - 1) * wd + 1 if k else 0
            out.append((padded - span) // s + 1 if padded >= span else 0)
        return out

    def verify_(self) -> None:
        shape = reducer_input_shape(self)
        rank = len(shape)
        for key in ("window_dimensions", "window_strides", "base_dilations", "window_dilations"):
            attr = getattr(self, key)
            if attr is not None and len(values_of(attr)) != rank:
                raise VerifyException(f"'stablehlo.reduce_window' {key} must have {rank} entries (the input rank)")
        if self.padding is not None and (
            list(self.padding.get_shape()) != [rank, 2] or not isinstance(self.padding.get_element_type(), IntegerType)
        ):
            raise VerifyException(f"'stablehlo.reduce_window' padding must be integers of shape {rank}x2")
        w = self.window()
        if any(k < 1 for k in w["dimensions"]) or any(v < 1 for v in w["strides"] + w["base_dilations"] + w["window_dilations"]):
            raise VerifyException("'stablehlo.reduce_window' window dimensions, strides and dilations must be >= 1")
        verify_reducer(self, shape, tuple(self.result_shape()))


# ---------------------------------------------------------------------------
# sorting
# ---------------------------------------------------------------------------


@irdl_op_definition
class CaseOp(IRDLOperation):
    """Runs the branch that `index` (a rank-0 i32) names, the last one for an index out
    of range; each branch ends in stablehlo.return of the results. jax prints lax.cond
    (index: the predicate as i32, the false branch first) and lax.switch generically:

        %r = "stablehlo.case"(%i) ({
          %n = stablehlo.negate %x : tensor<4xf32>
          stablehlo.return %n : tensor<4xf32>
        }, {
          stablehlo.return %x : tensor<4xf32>
        }) : (tensor<i32>) -> tensor<4xf32>
    """

    name = "stablehlo.case"
    index = operand_def(TensorType)
    outputs = var_result_def(TensorType)
    branches = var_region_def("single_block")

    def verify_(self) -> None:
        if self.index.type != TensorType(i32, []):
            raise VerifyException(f"'stablehlo.case' index must be tensor<i32>, got {self.index.type}")
        if not self.branches:
            raise VerifyException("'stablehlo.case' needs a branch")
        types = list(self.outputs.types)
        for k, branch in enumerate(self.branches):
            ret = branch.block.last_op
            if branch.block.args or not isinstance(ret, ReturnOp) or [v.type for v in ret.operands] != types:
                raise VerifyException(f"'stablehlo.case' branch {k} must take no arguments and end in stablehlo.return "
                                      f"of the results ({', '.join(map(str, types))})")


@irdl_op_definition
class WhileOp(IRDLOperation):
    """Runs `body` on the loop values while `cond` holds for them; both regions take the
    loop values as arguments. jax prints it (lax.fori_loop, jnp.searchsorted) as

        %r:2 = stablehlo.while(%iterArg = %x, %iterArg_0 = %c) : tensor<4xf32>, tensor<i32>
         cond {
          %lt = stablehlo.compare LT, %iterArg_0, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
          stablehlo.return %lt : tensor<i1>
        } do {
          ...
          stablehlo.return %y, %next : tensor<4xf32>, tensor<i32>
        }

    It prints in the generic form, which parses back (the pretty form names the body's
    arguments after the cond's, which xDSL's printer does not share between regions).
    """

    name = "stablehlo.while"
    operand = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    cond = region_def("single_block")
    body = region_def("single_block")

    def verify_(self) -> None:
        types = list(self.operand.types)
        if list(self.outputs.types) != types:
            raise VerifyException("'stablehlo.while' results must have its operands' types")
        for name, region in (("cond", self.cond), ("body", self.body)):
            if [a.type for a in region.block.args] != types:
                raise VerifyException(f"'stablehlo.while' {name} must take the loop values ({', '.join(map(str, types))})")
        ret = self.cond.block.last_op
        if not isinstance(ret, ReturnOp) or [v.type for v in ret.operands] != [TensorType(i1, [])]:
            raise VerifyException("'stablehlo.while' cond must end in stablehlo.return of (tensor<i1>)")
        ret = self.body.block.last_op
        if not isinstance(ret, ReturnOp) or [v.type for v in ret.operands] != types:
            raise VerifyException("'stablehlo.while' body must end in stablehlo.return of the loop values")

    @classmethod
    def parse(cls, parser: Parser) -> WhileOp:
        start = parser.pos

        def pair():
            name = parser.parse_argument(expect_type=False)
            parser.parse_punctuation("=")
            return name, parser.parse_unresolved_operand()

        pairs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, pair)
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type) if pairs else []
        if len(types) != len(pairs):
            parser.raise_error(f"'stablehlo.while' of {len(pairs)} loop values needs as many types, got {len(types)}", start, parser.pos)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        operands = parser.resolve_operands([p[1] for p in pairs], types, start)
        regions = []
        for keyword in ("cond", "do"):
            parser.parse_keyword(keyword)
            regions.append(parser.parse_region([p[0].resolve(t) for p, t in zip(pairs, types)]))
        op = cls.create(operands=operands, result_types=types, regions=regions)
        if attrs is not None:
            op.attributes.update(attrs.data)
        return op


@irdl_op_definition
class ScatterOp(IRDLOperation):
    """Writes `updates` into copies of `inputs` where `scatter_indices` say, combining each
    update with the value there by `update_computation` (which takes (old..., new...) as
    rank-0 tensors). jax prints it in the generic form (`x.at[i].add(v)`, bincount):

        %r = "stablehlo.scatter"(%x, %i, %v) <{indices_are_sorted = false,
            scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0],
            scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
        ^bb0(%a: tensor<f32>, %b: tensor<f32>):
          %s = stablehlo.add %a, %b : tensor<f32>
          stablehlo.return %s : tensor<f32>
        }) : (tensor<8xf32>, tensor<4x1xi32>, tensor<4xf32>) -> tensor<8xf32>
    """

    name = "stablehlo.scatter"
    inputs = var_operand_def(TensorType)
    scatter_indices = operand_def(TensorType)
    updates = var_operand_def(TensorType)
    scatter_dimension_numbers = prop_def(ScatterDimensionNumbersAttr)
    indices_are_sorted = opt_prop_def(BoolAttr)
    unique_indices = opt_prop_def(BoolAttr)
    outputs = var_result_def(TensorType)
    update_computation = region_def("single_block")
    irdl_options = (SameVariadicOperandSize(),)

    def verify_(self) -> None:
        if not self.inputs or len(self.inputs) != len(self.updates):
            raise VerifyException("'stablehlo.scatter' needs as many updates as inputs, at least one")
        if list(self.outputs.types) != list(self.inputs.types):
            raise VerifyException("'stablehlo.scatter' results must have the inputs' types")
        if not isinstance(element_type_of(self.scatter_indices), IntegerType):
            raise VerifyException(f"'stablehlo.scatter' indices must be integers, got {self.scatter_indices.type}")
        block = self.update_computation.block
        scalars = [TensorType(element_type_of(v), []) for v in (*self.inputs, *self.updates)]
        if [a.type for a in block.args] != scalars:
            raise VerifyException(f"'stablehlo.scatter' update_computation must take ({', '.join(map(str, scalars))})")


@irdl_op_definition
class SortOp(IRDLOperation):
    """Sorts `inputs` (one shape) together along `dimension` by a comparator region that
    takes (lhs0, rhs0, lhs1, rhs1, ...) as rank-0 tensors and returns whether lhs goes
    before rhs (a strict weak order). jax prints it in the generic form:

        %s:2 = "stablehlo.sort"(%x, %i) <{dimension = 1 : i64, is_stable = true}> ({
        ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
          %lt = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
          stablehlo.return %lt : tensor<i1>
        }) : (tensor<4x5xf32>, tensor<4x5xi32>) -> (tensor<4x5xf32>, tensor<4x5xi32>)
    """

    name = "stablehlo.sort"
    inputs = var_operand_def(TensorType)
    dimension = opt_prop_def(IntegerAttr[I64])
    is_stable = opt_prop_def(BoolAttr)
    outputs = var_result_def(TensorType)
    comparator = region_def("single_block")

    @property
    def axis(self) -> int:
        """The sort dimension, in [0, rank) (StableHLO's default -1 is the last)."""
        d = self.dimension.value.data if self.dimension is not None else -1
        return d + len(shape_of(self.inputs[0])) if d < 0 else d

    def verify_(self) -> None:
        if not self.inputs:
            raise VerifyException("'stablehlo.sort' needs at least one input")
        shape = shape_of(self.inputs[0])
        if any(shape_of(v) != shape for v in self.inputs):
            raise VerifyException(f"'stablehlo.sort' inputs must have one shape, got {', '.join(str(v.type) for v in self.inputs)}")
        if list(self.outputs.types) != list(self.inputs.types):
            raise VerifyException("'stablehlo.sort' results must have the inputs' types")
        d = self.dimension.value.data if self.dimension is not None else -1
        if not -len(shape) <= d < len(shape):
            raise VerifyException(f"'stablehlo.sort' dimension {d} is out of range for rank {len(shape)}")
        block = self.comparator.block
        scalars = [TensorType(element_type_of(v), []) for v in self.inputs for _ in range(2)]
        if [a.type for a in block.args] != scalars:
            raise VerifyException(f"'stablehlo.sort' comparator must take ({', '.join(map(str, scalars))})")
        ret = block.last_op
        if not isinstance(ret, ReturnOp) or [v.type for v in ret.operands] != [TensorType(i1, [])]:
            raise VerifyException("'stablehlo.sort' comparator must end in stablehlo.return of (tensor<i1>)")


# ---------------------------------------------------------------------------
# contractions
# ---------------------------------------------------------------------------


def _parse_precision_list(parser: AttrParser) -> ArrayAttr:
    def one() -> PrecisionAttr:
        return PrecisionAttr(parser.parse_str_enum(Precision))

    return ArrayAttr(parser.parse_comma_separated_list(parser.Delimiter.SQUARE, one))


def _print_precision_list(printer: Printer, attr: ArrayAttr) -> None:
    printer.print_string("[" + ", ".join(p.data.value for p in attr.data) + "]")  # type: ignore[union-attr]


def _dims_pair(parser: AttrParser) -> tuple[list[int], list[int]]:
    """`[0, 1] x [0, 1]`"""
    a = parse_int_list(parser)
    parser.parse_keyword("x")
    return a, parse_int_list(parser)


@irdl_op_definition
class DotGeneralOp(IRDLOperation):
    """General contraction. The result's dimensions: batch, lhs free, rhs free (in order).

    `%r = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1],
         precision = [DEFAULT, DEFAULT] : (tensor<2x4x8xf32>, tensor<2x8x3xf32>) -> tensor<2x4x3xf32>`
    """

    name = "stablehlo.dot_general"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    dot_dimension_numbers = prop_def(DotDimensionNumbersAttr)
    precision_config = opt_prop_def(ArrayAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, lhs: SSAValue, rhs: SSAValue, numbers: DotDimensionNumbersAttr, result_type: Attribute):
        super().__init__(operands=[lhs, rhs], result_types=[result_type], properties={"dot_dimension_numbers": numbers})

    def free_dims(self) -> tuple[list[int], list[int]]:
        lb, rb, lc, rc = self.dot_dimension_numbers.lists()
        a, b = shape_of(self.lhs), shape_of(self.rhs)
        return [d for d in range(len(a)) if d not in lb + lc], [d for d in range(len(b)) if d not in rb + rc]

    def verify_(self) -> None:
        lb, rb, lc, rc = self.dot_dimension_numbers.lists()
        a, b = shape_of(self.lhs), shape_of(self.rhs)
        if len(lb) != len(rb) or len(lc) != len(rc):
            raise VerifyException("'stablehlo.dot_general' lhs and rhs need as many batching and as many contracting dimensions")
        check_dims(self, "lhs batching and contracting dimensions", lb + lc, len(a))
        check_dims(self, "rhs batching and contracting dimensions", rb + rc, len(b))
        for what, ls, rs in (("batching", lb, rb), ("contracting", lc, rc)):
            for x, y in zip(ls, rs):
                if a[x] != b[y]:
                    raise VerifyException(f"'stablehlo.dot_general' {what} dimensions {x} and {y} differ in size: {a[x]} vs {b[y]}")
        lf, rf = self.free_dims()
        expected = [a[d] for d in lb] + [a[d] for d in lf] + [b[d] for d in rf]
        if list(shape_of(self.result)) != expected:
            raise VerifyException(f"'stablehlo.dot_general' must produce shape {expected}, got {self.result.type}")
        if self.precision_config is not None and not all(isinstance(p, PrecisionAttr) for p in self.precision_config.data):
            raise VerifyException("'stablehlo.dot_general' precision_config must hold #stablehlo<precision ...> values")

    @classmethod
    def parse(cls, parser: Parser) -> DotGeneralOp:
        start = parser.pos
        lhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        rhs = parser.parse_unresolved_operand()
        batch: tuple[list[int], list[int]] = ([], [])
        contract: tuple[list[int], list[int]] = ([], [])
        precision = None
        while parser.parse_optional_punctuation(","):
            pos = parser.pos
            key = parser.parse_identifier()
            parser.parse_punctuation("=")
            if key == "batching_dims":
                batch = _dims_pair(parser)
            elif key == "contracting_dims":
                contract = _dims_pair(parser)
            elif key == "precision":
                precision = _parse_precision_list(parser)
            else:
                parser.raise_error(f"unexpected '{key}' in 'stablehlo.dot_general' (expected batching_dims, contracting_dims or precision)", pos)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ft = parser.parse_function_type()
        if len(ft.inputs.data) != 2 or len(ft.outputs.data) != 1:
            parser.raise_error(f"'stablehlo.dot_general' needs a type (lhs, rhs) -> result, got {ft}")
        a, b = parser.resolve_operands([lhs, rhs], ft.inputs.data, start)
        op = cls(a, b, DotDimensionNumbersAttr(batch[0], batch[1], contract[0], contract[1]), ft.outputs.data[0])
        props, others = split_properties(cls, attrs)
        if precision is not None:
            props["precision_config"] = precision
        op.properties.update(props)
        op.attributes.update(others)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.lhs)
        printer.print_string(", ")
        printer.print_ssa_value(self.rhs)
        lb, rb, lc, rc = self.dot_dimension_numbers.lists()
        fmt = lambda v: "[" + ", ".join(map(str, v)) + "]"  # noqa: E731
        if lb:
            printer.print_string(f", batching_dims = {fmt(lb)} x {fmt(rb)}")
        printer.print_string(f", contracting_dims = {fmt(lc)} x {fmt(rc)}")
        if self.precision_config is not None and all(isinstance(p, PrecisionAttr) for p in self.precision_config.data):
            printer.print_string(", precision = ")
            _print_precision_list(printer, self.precision_config)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_function_type(self.operand_types, self.result_types)


@irdl_op_definition
class ConvolutionOp(IRDLOperation):
    """N-d convolution (cross-correlation) with layouts given by dimension numbers.

        %y = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1],
             window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]}
             {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
             : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
    """

    name = "stablehlo.convolution"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    window_strides = opt_prop_def(DenseArrayBase)
    padding = opt_prop_def(DenseIntOrFPElementsAttr)
    lhs_dilation = opt_prop_def(DenseArrayBase)
    rhs_dilation = opt_prop_def(DenseArrayBase)
    window_reversal = opt_prop_def(DenseArrayBase)
    dimension_numbers = prop_def(ConvDimensionNumbersAttr)
    feature_group_count = prop_def(IntegerAttr[I64])
    batch_group_count = prop_def(IntegerAttr[I64])
    precision_config = opt_prop_def(ArrayAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    # window = {...} keys of the pretty form -> properties
    WINDOW_KEYS: ClassVar[dict[str, str]] = {
        "stride": "window_strides",
        "pad": "padding",
        "lhs_dilate": "lhs_dilation",
        "rhs_dilate": "rhs_dilation",
        "reverse": "window_reversal",
    }

    def spatial_count(self) -> int:
        return sum(isinstance(v, int) for v in self.dimension_numbers.layouts()[0])

    def window(self) -> dict[str, list]:
        """strides, pads ([(low, high)] per spatial dim), lhs/rhs dilation, reversal, with defaults."""
        n = self.spatial_count()
        pads: list[tuple[int, int]] = [(0, 0)] * n
        if self.padding is not None:
            flat = [int(v) for v in self.padding.get_values()]
            pads = [(flat[2 * i], flat[2 * i + 1]) for i in range(len(flat) // 2)]
        return {
            "strides": list(values_of(self.window_strides)) or [1] * n,
            "pads": pads,
            "lhs_dilation": list(values_of(self.lhs_dilation)) or [1] * n,
            "rhs_dilation": list(values_of(self.rhs_dilation)) or [1] * n,
            "reversal": [bool(v) for v in values_of(self.window_reversal)] or [False] * n,
        }

    @property
    def groups(self) -> tuple[int, int]:
        """(feature_group_count, batch_group_count)"""
        return self.feature_group_count.value.data, self.batch_group_count.value.data

    def verify_(self) -> None:
        n = self.spatial_count()
        layouts = self.dimension_numbers.layouts()
        for what, v, lay in (("lhs", self.lhs, layouts[0]), ("rhs", self.rhs, layouts[1]), ("result", self.result, layouts[2])):
            if len(shape_of(v)) != len(lay):
                raise VerifyException(f"'stablehlo.convolution' {what} of rank {len(shape_of(v))} does not match its layout of {len(lay)} dimensions")
        if self.padding is not None and list(self.padding.get_shape()) != [n, 2]:
            raise VerifyException(f"'stablehlo.convolution' padding must have shape {n}x2")
        for key in ("window_strides", "lhs_dilation", "rhs_dilation", "window_reversal"):
            attr = getattr(self, key)
            if attr is not None and len(values_of(attr)) != n:
                raise VerifyException(f"'stablehlo.convolution' {key} must have {n} entries")
        w = self.window()
        if any(s < 1 for s in w["strides"] + w["lhs_dilation"] + w["rhs_dilation"]):
            raise VerifyException("'stablehlo.convolution' strides and dilations must be >= 1")
        fg, bg = self.groups
        if fg < 1 or bg < 1:
            raise VerifyException("'stablehlo.convolution' feature_group_count and batch_group_count must be >= 1")
        a, k = shape_of(self.lhs), shape_of(self.rhs)
        features, kernel_features = a[layouts[0].index("f")], k[layouts[1].index("i")]
        if features != kernel_features * fg:
            raise VerifyException(
                f"'stablehlo.convolution' input features ({features}) must be the kernel's input features "
                f"({kernel_features}) times feature_group_count ({fg})"
            )
        expected = self.result_shape()
        if list(shape_of(self.result)) != expected:
            raise VerifyException(f"'stablehlo.convolution' must produce shape {expected}, got {self.result.type}")

    def result_shape(self) -> list[int]:
        """The result's shape from the operands, the window and the layouts."""
        (lin, lk, lout), w = self.dimension_numbers.layouts(), self.window()
        a, k = shape_of(self.lhs), shape_of(self.rhs)
        shape = [0] * len(lout)
        shape[lout.index("b")] = a[lin.index("b")] // self.groups[1]
        shape[lout.index("f")] = k[lk.index("o")]
        for i in range(self.spatial_count()):
            size, window = a[lin.index(i)], k[lk.index(i)]
            dilated = (size - 1) * w["lhs_dilation"][i] + 1 if size else 0
            padded = dilated + sum(w["pads"][i]) - ((window - 1) * w["rhs_dilation"][i] + 1)
            shape[lout.index(i)] = padded // w["strides"][i] + 1 if padded >= 0 else 0
        return shape

    @classmethod
    def parse(cls, parser: Parser) -> ConvolutionOp:
        start = parser.pos
        parser.parse_punctuation("(")
        lhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        rhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(")")
        parser.parse_keyword("dim_numbers")
        parser.parse_punctuation("=")
        numbers = ConvDimensionNumbersAttr.new(ConvDimensionNumbersAttr.parse_body(parser))
        props: dict[str, Attribute] = {"dimension_numbers": numbers}
        if parser.parse_optional_punctuation(","):
            parser.parse_keyword("window")
            parser.parse_punctuation("=")
            parser.parse_comma_separated_list(parser.Delimiter.BRACES, lambda: cls._parse_window_entry(parser, props))
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ft = parser.parse_function_type()
        if len(ft.inputs.data) != 2 or len(ft.outputs.data) != 1:
            parser.raise_error(f"'stablehlo.convolution' needs a type (lhs, rhs) -> result, got {ft}")
        a, b = parser.resolve_operands([lhs, rhs], ft.inputs.data, start)
        more, others = split_properties(cls, attrs)
        props.update(more)
        for key in ("feature_group_count", "batch_group_count"):
            props.setdefault(key, IntegerAttr(1, i64))
        op = cls(operands=[a, b], result_types=[ft.outputs.data[0]], properties=props)
        op.attributes.update(others)
        return op

    @classmethod
    def _parse_window_entry(cls, parser: Parser, props: dict[str, Attribute]) -> None:
        pos = parser.pos
        key = parser.parse_identifier()
        if key not in cls.WINDOW_KEYS:
            parser.raise_error(f"unexpected '{key}' in convolution window (expected {', '.join(cls.WINDOW_KEYS)})", pos)
        parser.parse_punctuation("=")
        if key == "pad":
            pairs = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: parse_int_list(parser))
            if any(len(p) != 2 for p in pairs):
                parser.raise_error("convolution pad entries must be [low, high] pairs", pos)
            props["padding"] = DenseIntOrFPElementsAttr.from_list(TensorType(i64, [len(pairs), 2]), [v for p in pairs for v in p])
        elif key == "reverse":
            flags = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_boolean)
            props["window_reversal"] = DenseArrayBase.from_list(i1, [int(f) for f in flags])
        else:
            props[cls.WINDOW_KEYS[key]] = i64_array(parse_int_list(parser))

    def print(self, printer: Printer) -> None:
        printer.print_string("(")
        printer.print_ssa_value(self.lhs)
        printer.print_string(", ")
        printer.print_ssa_value(self.rhs)
        printer.print_string(f") dim_numbers = {self.dimension_numbers.body_text()}")
        entries = []
        for key, prop in self.WINDOW_KEYS.items():
            attr = self.properties.get(prop)
            if attr is None:
                continue
            if key == "pad":
                entries.append("pad = [" + ", ".join(f"[{lo}, {hi}]" for lo, hi in self.window()["pads"]) + "]")
            elif key == "reverse":
                entries.append("reverse = [" + ", ".join("true" if v else "false" for v in values_of(attr)) + "]")  # type: ignore[arg-type]
            else:
                entries.append(f"{key} = [" + ", ".join(map(str, values_of(attr))) + "]")  # type: ignore[arg-type]
        if entries:
            printer.print_string(", window = {" + ", ".join(entries) + "}")
        rest = {k: self.properties[k] for k in ("batch_group_count", "feature_group_count", "precision_config") if k in self.properties}
        printer.print_op_attributes({**rest, **self.attributes})
        printer.print_string(" : ")
        printer.print_function_type(self.operand_types, self.result_types)


# ---------------------------------------------------------------------------
# chlo: the client ops jax emits next to stablehlo (GELU's erf form uses erfc)
# ---------------------------------------------------------------------------


class ChloUnaryOp(IRDLOperation):
    """Base: `%y = chlo.erf %x : tensor<4xf32> -> tensor<4xf32>`."""

    operand = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$operand attr-dict `:` type($operand) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        if self.operand.type != self.result.type:
            raise VerifyException(f"'{self.name}' result type {self.result.type} differs from the operand type {self.operand.type}")


@irdl_op_definition
class ErfOp(ChloUnaryOp):
    """The error function."""

    name = "chlo.erf"


@irdl_op_definition
class ErfcOp(ChloUnaryOp):
    """1 - erf(x)."""

    name = "chlo.erfc"


@irdl_op_definition
class SquareOp(ChloUnaryOp):
    """x * x (jnp.var, jnp.std, x ** 2)."""

    name = "chlo.square"


@irdl_op_definition
class ErfInvOp(ChloUnaryOp):
    """The inverse of the error function on (-1, 1) (jax.random.normal's)."""

    name = "chlo.erf_inv"


CHLO = Dialect("chlo", [ErfOp, ErfcOp, SquareOp, ErfInvOp], [])


StableHLO = Dialect(
    "stablehlo",
    [
        AbsOp,
        NegateOp,
        ExponentialOp,
        LogOp,
        SqrtOp,
        RsqrtOp,
        TanhOp,
        LogisticOp,
        NotOp,
        SineOp,
        CosineOp,
        FloorOp,
        CeilOp,
        SignOp,
        RoundNearestEvenOp,
        RoundNearestAfzOp,
        IsFiniteOp,
        LogPlusOneOp,
        ExponentialMinusOneOp,
        TanOp,
        CbrtOp,
        PopcntOp,
        CountLeadingZerosOp,
        AddOp,
        SubtractOp,
        MultiplyOp,
        DivideOp,
        MaximumOp,
        MinimumOp,
        PowerOp,
        RemainderOp,
        AndOp,
        OrOp,
        XorOp,
        ShiftLeftOp,
        ShiftRightArithmeticOp,
        ShiftRightLogicalOp,
        Atan2Op,
        BitcastConvertOp,
        ConvertOp,
        ClampOp,
        SelectOp,
        CompareOp,
        ConstantOp,
        IotaOp,
        BroadcastInDimOp,
        TransposeOp,
        ReshapeOp,
        SliceOp,
        ReverseOp,
        PadOp,
        ConcatenateOp,
        GatherOp,
        DynamicSliceOp,
        DynamicUpdateSliceOp,
        ReturnOp,
        ReduceOp,
        ReduceWindowOp,
        SortOp,
        ScatterOp,
        WhileOp,
        CaseOp,
        DotGeneralOp,
        ConvolutionOp,
    ],
    [
        ComparisonDirectionAttr,
        ComparisonTypeAttr,
        PrecisionAttr,
        DotDimensionNumbersAttr,
        GatherDimensionNumbersAttr,
        ScatterDimensionNumbersAttr,
        ConvDimensionNumbersAttr,
    ],
)
