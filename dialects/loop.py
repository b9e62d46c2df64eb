"""The `loop` dialect: affine loop nests on buffers (the polyhedral level).

`loop.nest` is one computation space: an iteration domain (a box whose bounds are
affine in the nest's symbol operands; the bounds of dimension k may also use the
outer dimensions d0..d(k-1), for parallelogram tiles), an iterator kind per dimension, and an
affine access map per buffer operand. Its body computes on scalars: one block
argument per input element and per current output element; `loop.yield` gives
the new output elements, stored at the outputs' access maps. A reduction is a
nest whose output map drops the reduced dimensions (like linalg.generic, but with
an explicit domain, so tiling and footprints need no shape inference). A reduction
nest may carry `init`, one entry per output: a constant that each output element's
first reduction step reads in place of the buffer (loop-fold-init, for the zero or
-inf a separate nest used to write first), or `unit` (read the buffer).

    loop.nest "exp" lower [0, 0] upper [64, 128] iterators ["parallel", "parallel"]
        ins(%x : memref<64x128xf32>) outs(%y : memref<64x128xf32>)
        maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {
    ^bb0(%a: f32, %o: f32):
      %e = math.exp %a : f32
      loop.yield %e : f32
    }

`loop.band` is a band of parallel loops around a sequence of nests that use its
induction variables as symbols: the tile or row loop of a fused kernel. Scratch
buffers allocated in its body (`memref.alloca`) are private to each iteration
(each thread), like shared memory per GPU block.

    loop.band "fused_softmax" upper [4096] {
    ^bb0(%row: index):
      %m = memref.alloca() : memref<1xf32>
      loop.nest "max" syms(%row) lower [0] upper [1024] iterators ["reduction"] ...
      loop.nest "exp_sum" syms(%row) ...
    }

Iterator kinds (`IteratorKind`) and `loop.index` kinds (`IndexKind`) are enum
attributes; `loop.nest` prints its iterators as the quoted strings above, and
`iterator_kinds` gives the str-enum members, which compare equal to "parallel".

`loop.parallel_call` runs an outlined nest `@fn(lo, hi, args...)` over a range
split across the CPU's threads (lowered to libgomp's GOMP_parallel).
`loop.aligned_window` finds a row's first element at an aligned address (the peel of
a streaming row, see convert-loop-to-scf).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Block, BlockArgument, Dialect, Operation, Region, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_prop_def,
    opt_region_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator, NoTerminator, Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from mlfuse.abi import element_bytes
from mlfuse.dialects.enums import enum_value, parse_enum_value


class IteratorKind(StrEnum):
    """What a nest dimension does: parallel points write distinct output elements,
    reduction points accumulate into one (the output map drops the dimension)."""

    PARALLEL = "parallel"
    REDUCTION = "reduction"


PARALLEL = IteratorKind.PARALLEL
REDUCTION = IteratorKind.REDUCTION

# Discardable attribute of a loop.nest: the planner's window group it was lowered from
# (convert-graph-to-loop sets it; the loop-* passes in scope "group" read it).
GROUP_ATTR = "fusion_group"


@irdl_attr_definition
class IteratorKindAttr(EnumAttribute[IteratorKind], SpacedOpaqueSyntaxAttribute):
    """`#loop<iterator_kind parallel>`; `loop.nest` prints its list as ["parallel", ...]."""

    name = "loop.iterator_kind"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> IteratorKind:
        return parse_enum_value(parser, IteratorKind, "'loop.nest' iterator")


class IndexKind(StrEnum):
    """Which value `loop.index` reads: a nest dimension or a nest symbol."""

    DIM = "dim"
    SYM = "sym"


@irdl_attr_definition
class IndexKindAttr(EnumAttribute[IndexKind], SpacedOpaqueSyntaxAttribute):
    """`#loop<index_kind dim>`; `loop.index` prints it bare (`loop.index dim 0`)."""

    name = "loop.index_kind"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> IndexKind:
        return parse_enum_value(parser, IndexKind, "'loop.index' kind")


def iterator_attrs(iterators: Sequence[str | IteratorKind | IteratorKindAttr]) -> ArrayAttr[IteratorKindAttr]:
    """The `iterators` property of a nest from kinds given as strings, enum members or attributes."""
    return ArrayAttr(
        [
            i if isinstance(i, IteratorKindAttr) else IteratorKindAttr(enum_value(IteratorKind, i, "'loop.nest' iterator"))
            for i in iterators
        ]
    )


def constant_bound(value: int) -> AffineMapAttr:
    return AffineMapAttr(AffineMap(0, 0, (AffineExpr.constant(value),)))


@irdl_op_definition
class NestOp(IRDLOperation):
    name = "loop.nest"

    syms = var_operand_def(IndexType)
    ins = var_operand_def(MemRefType)
    outs = var_operand_def(MemRefType)
    nest_name = prop_def(StringAttr)
    lower = prop_def(ArrayAttr[AffineMapAttr])
    upper = prop_def(ArrayAttr[AffineMapAttr])
    iterators = prop_def(ArrayAttr[IteratorKindAttr])
    maps = prop_def(ArrayAttr[AffineMapAttr])
    init = opt_prop_def(ArrayAttr)
    body = region_def("single_block")
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(IsolatedFromAbove())

    def __init__(
        self,
        nest_name: str,
        bounds: Sequence[int] | tuple[Sequence[AffineMapAttr], Sequence[AffineMapAttr]],
        iterators: Sequence[str | IteratorKind | IteratorKindAttr],
        ins: Sequence[SSAValue],
        outs: Sequence[SSAValue],
        maps: Sequence[AffineMap],
        body: Region,
        syms: Sequence[SSAValue] = (),
    ):
        if isinstance(bounds, tuple) and len(bounds) == 2 and not isinstance(bounds[0], int):
            lower, upper = bounds
        else:
            lower = [constant_bound(0) for _ in bounds]
            upper = [constant_bound(int(b)) for b in bounds]
        super().__init__(
            operands=[list(syms), list(ins), list(outs)],
            properties={
                "nest_name": StringAttr(nest_name),
                "lower": ArrayAttr(list(lower)),
                "upper": ArrayAttr(list(upper)),
                "iterators": iterator_attrs(iterators),
                "maps": ArrayAttr([AffineMapAttr(m) for m in maps]),
            },
            regions=[body],
        )

    # --- queries used by every pass on this level --------------------------------

    @property
    def rank(self) -> int:
        return len(self.iterators.data)

    @property
    def iterator_kinds(self) -> list[IteratorKind]:
        """The kind of each dimension, as str-enum members (equal to "parallel"/"reduction")."""
        return [i.data for i in self.iterators.data]

    @property
    def access_maps(self) -> list[AffineMap]:
        return [m.data for m in self.maps.data]

    @property
    def in_maps(self) -> list[AffineMap]:
        return self.access_maps[: len(self.ins)]

    @property
    def out_maps(self) -> list[AffineMap]:
        return self.access_maps[len(self.ins) :]

    @property
    def block(self) -> Block:
        return self.body.block

    @property
    def init_values(self) -> list[FloatAttr | IntegerAttr | None]:
        """Per output: the constant its first reduction step reads (`init`), or None."""
        if self.init is None:
            return [None] * len(self.outs)
        return [v if isinstance(v, FloatAttr | IntegerAttr) else None for v in self.init.data]

    def walks_output(self, k: int, other: NestOp, other_map: AffineMap) -> bool:
        """Does `other` iterate this nest's parallel dimensions (in order, with the same
        bounds, of symbols only) and name by `other_map` the element that output k of this
        nest writes at each point (an init nest's write, a consumer's read)?"""
        parallel = [d for d, kind in enumerate(self.iterator_kinds) if kind == PARALLEL]
        if other.rank != len(parallel):
            return False
        for i, d in enumerate(parallel):
            for a, b in ((other.lower.data[i].data, self.lower.data[d].data), (other.upper.data[i].data, self.upper.data[d].data)):
                if a.num_dims or b.num_dims or a != b:
                    return False
        dims = [AffineExpr.dimension(d) for d in parallel]
        syms = [AffineExpr.symbol(s) for s in range(other_map.num_symbols)]
        return tuple(e.replace_dims_and_symbols(dims, syms) for e in other_map.results) == tuple(self.out_maps[k].results)

    def static_bounds(self) -> list[tuple[int, int]] | None:
        """[(lo, hi)] per dimension when every bound is a constant, else None."""
        bounds = []
        for lo, hi in zip(self.lower.data, self.upper.data):
            lo_r, hi_r = lo.data.results, hi.data.results
            if len(lo_r) != 1 or len(hi_r) != 1:
                return None
            lo_c, hi_c = _constant(lo_r[0]), _constant(hi_r[0])
            if lo_c is None or hi_c is None:
                return None
            bounds.append((lo_c, hi_c))
        return bounds

    def constant_trip(self, d: int) -> int | None:
        """The point count of dimension d when both its bounds are constants, else None."""
        lo, hi = constant_of(self.lower.data[d].data), constant_of(self.upper.data[d].data)
        return max(0, hi - lo) if lo is not None and hi is not None else None

    def at_most_one_point(self, d: int) -> bool:
        """Dimension d has constant bounds at most one apart."""
        trip = self.constant_trip(d)
        return trip is not None and trip <= 1

    def sums_inside_outputs(self) -> bool:
        """No reduction dimension of more than one point runs outside a parallel one of
        more than one point: each output element's reduction steps run together, one
        element after another (a window's taps inside the output row)."""
        wide_parallel = False
        for d in reversed(range(self.rank)):
            wide = not self.at_most_one_point(d)
            if self.iterator_kinds[d] == PARALLEL:
                wide_parallel = wide_parallel or wide
            elif wide and wide_parallel:
                return False
        return True

    def verify_(self) -> None:
        rank, nsyms = self.rank, len(self.syms)
        if len(self.lower.data) != rank or len(self.upper.data) != rank:
            raise VerifyException(
                f"'loop.nest' has {rank} iterators but {len(self.lower.data)} lower and "
                f"{len(self.upper.data)} upper bounds"
            )
        for d, (lo, hi) in enumerate(zip(self.lower.data, self.upper.data)):
            for m in (lo.data, hi.data):
                if m.num_dims > d or m.num_symbols > nsyms or not m.results:
                    raise VerifyException(
                        f"'loop.nest' bound {m} of dimension {d} must map (some of) the nest's {nsyms} "
                        f"symbols and at most the {d} outer dimensions to one or more values"
                    )
        buffers = [*self.ins, *self.outs]
        if len(self.access_maps) != len(buffers):
            raise VerifyException(
                f"'loop.nest' has {len(buffers)} buffers but {len(self.access_maps)} access maps"
            )
        for i, (buf, m) in enumerate(zip(buffers, self.access_maps)):
            t = buf.type
            assert isinstance(t, MemRefType)
            if m.num_dims != rank or m.num_symbols > nsyms or len(m.results) != t.get_num_dims():
                raise VerifyException(
                    f"'loop.nest' access map {i} {m} must map {rank} dims and {nsyms} symbols "
                    f"to the {t.get_num_dims()} indices of {t}"
                )
        for i, m in enumerate(self.out_maps):
            used = {d for e in m.results for d in dims_of(e)}
            reduced = {d for d, it in enumerate(self.iterator_kinds) if it == REDUCTION}
            # a dimension of at most one point writes no element twice (a GEMM with N = 1)
            missing = {d for d in set(range(rank)) - reduced - used if not self.at_most_one_point(d)}
            if missing:
                raise VerifyException(
                    f"'loop.nest' output {i} map {m} does not use parallel dimension(s) "
                    f"{sorted(missing)}: every parallel point must write its own element"
                )
        args = self.block.args
        expected = [b.type.get_element_type() for b in buffers]  # type: ignore[union-attr]
        if [a.type for a in args] != expected:
            raise VerifyException(
                f"'loop.nest' block arguments ({', '.join(str(a.type) for a in args)}) must be the "
                f"element types of its buffers ({', '.join(map(str, expected))})"
            )
        if self.init is not None:
            self._verify_init(expected[len(self.ins) :])
        term = self.block.last_op
        if not isinstance(term, YieldOp):
            raise VerifyException("'loop.nest' body must end with 'loop.yield'")
        out_types = expected[len(self.ins) :]
        if [v.type for v in term.values] != out_types:
            raise VerifyException(
                f"'loop.yield' must yield one {', '.join(map(str, out_types))} per output"
            )

    def _verify_init(self, out_types: Sequence[Attribute]) -> None:
        assert self.init is not None
        if len(self.init.data) != len(self.outs):
            raise VerifyException(f"'loop.nest' init has {len(self.init.data)} entries for {len(self.outs)} outputs")
        for k, (v, t) in enumerate(zip(self.init.data, out_types)):
            if isinstance(v, UnitAttr):
                continue
            if not isinstance(v, FloatAttr | IntegerAttr) or v.type != t:
                raise VerifyException(f"'loop.nest' init {k} must be a constant of the output's type {t} or unit, got {v}")

    # --- syntax --------------------------------------------------------------------------

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.nest_name)
        if self.syms:
            printer.print_string(" syms(")
            printer.print_list(self.syms, printer.print_operand)
            printer.print_string(")")
        printer.print_string(" lower ")
        _print_bounds(printer, self.lower)
        printer.print_string(" upper ")
        _print_bounds(printer, self.upper)
        printer.print_string(" iterators [")
        printer.print_list(self.iterator_kinds, lambda k: printer.print_string_literal(k.value))
        printer.print_string("]")
        for kw, vals in (("ins", self.ins), ("outs", self.outs)):
            printer.print_string(f" {kw}(")
            printer.print_list(vals, printer.print_operand)
            if vals:
                printer.print_string(" : ")
                printer.print_list([v.type for v in vals], printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" maps ")
        printer.print_attribute(self.maps)
        if self.init is not None:
            printer.print_string(" init ")
            printer.print_attribute(self.init)
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body)

    @classmethod
    def parse(cls, parser: Parser) -> NestOp:
        nest_name = parser.parse_str_literal("nest name")
        syms = []
        if parser.parse_optional_keyword("syms"):
            unresolved = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, parser.parse_unresolved_operand
            )
            syms = [parser.resolve_operand(u, IndexType()) for u in unresolved]
        parser.parse_keyword("lower")
        lower = _parse_bounds(parser)
        parser.parse_keyword("upper")
        upper = _parse_bounds(parser)
        parser.parse_keyword("iterators")
        iterators = ArrayAttr(
            parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: IteratorKindAttr(IteratorKindAttr.parse_parameter(parser))
            )
        )
        ins = _parse_buffer_list(parser, "ins")
        outs = _parse_buffer_list(parser, "outs")
        parser.parse_keyword("maps")
        maps = parser.parse_attribute()
        init = parser.parse_attribute() if parser.parse_optional_keyword("init") else None
        attrs = parser.parse_optional_attr_dict_with_keyword()
        attrs = attrs.data if attrs is not None else {}
        body = parser.parse_region()
        op = cls.create(
            operands=[*syms, *ins, *outs],
            properties={
                "nest_name": StringAttr(nest_name),
                "lower": lower,
                "upper": upper,
                "iterators": iterators,
                "maps": maps,
                "operandSegmentSizes": _segments(len(syms), len(ins), len(outs)),
                **({"init": init} if init is not None else {}),
            },
            attributes=attrs,
            regions=[body],
        )
        return op


def _print_bounds(printer: Printer, bounds: ArrayAttr[AffineMapAttr]) -> None:
    """Constant bounds print as integers, others as affine maps of the symbols."""

    def one(b: AffineMapAttr) -> None:
        results = b.data.results
        c = _constant(results[0]) if len(results) == 1 and b.data.num_symbols == 0 else None
        printer.print_string(str(c)) if c is not None else printer.print_attribute(b)

    printer.print_string("[")
    printer.print_list(bounds.data, one)
    printer.print_string("]")


def _parse_bounds(parser: Parser) -> ArrayAttr[AffineMapAttr]:
    def one() -> AffineMapAttr:
        value = parser.parse_optional_integer()
        if value is not None:
            return constant_bound(value)
        attr = parser.parse_attribute()
        if not isinstance(attr, AffineMapAttr):
            parser.raise_error(f"expected an integer or an affine map as a loop bound, got {attr}")
        return attr

    return ArrayAttr(parser.parse_comma_separated_list(parser.Delimiter.SQUARE, one))


def _segments(*sizes: int) -> Attribute:
    from xdsl.dialects.builtin import i32

    return DenseArrayBase.from_list(i32, list(sizes))


def _parse_buffer_list(parser: Parser, keyword: str) -> list[SSAValue]:
    parser.parse_keyword(keyword)
    parser.parse_punctuation("(")
    if parser.parse_optional_punctuation(")"):
        return []
    names = parser.parse_comma_separated_list(
        parser.Delimiter.NONE, parser.parse_unresolved_operand
    )
    parser.parse_punctuation(":")
    types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
    parser.parse_punctuation(")")
    return parser.resolve_operands(names, types, parser.pos)


def _constant(expr: AffineExpr) -> int | None:
    return expr.value if isinstance(expr, AffineConstantExpr) else None


def constant_of(m: AffineMap) -> int | None:
    """The value of a bound map that is one constant, else None."""
    if len(m.results) == 1 and isinstance(m.results[0], AffineConstantExpr):
        return m.results[0].value
    return None


def dims_of(expr: AffineExpr) -> set[int]:
    """The loop dimensions an affine expression uses."""
    if isinstance(expr, AffineDimExpr):
        return {expr.position}
    if isinstance(expr, AffineBinaryOpExpr):
        return dims_of(expr.lhs) | dims_of(expr.rhs)
    return set()


@irdl_op_definition
class YieldOp(IRDLOperation):
    name = "loop.yield"
    values = var_operand_def(AnyAttr())
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(NestOp, GemmOp)))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue):
        super().__init__(operands=[list(values)])


@irdl_op_definition
class ReadOp(IRDLOperation):
    """A data-dependent read in a nest body: the element at `indices` of the input
    buffer whose current element is the block argument `source`.

    Gathers read at indices that come from data, which no affine access map can
    express. The buffer keeps an (in-bounds) access map of its own, whose element
    the body may ignore; the indices must be in bounds (the gather lowering clamps
    them). Naming the buffer by its block argument keeps the read right when passes
    reorder or merge a nest's inputs; analyses built on access maps (mlfuse/poly)
    leave nests with reads alone (`has_indirect_reads`).

        %v = loop.read %table[%i, %j] : f32
    """

    name = "loop.read"
    T: ClassVar = VarConstraint("T", AnyAttr())
    source = operand_def(T)
    indices = var_operand_def(IndexType)
    result = result_def(T)
    traits = traits_def(Pure(), HasParent(NestOp))
    assembly_format = "$source `[` $indices `]` attr-dict `:` type($source)"

    def __init__(self, source: SSAValue, indices: Sequence[SSAValue]):
        super().__init__(operands=[source, list(indices)], result_types=[source.type])

    def buffer_position(self) -> int | None:
        """Which input of the parent nest `source` stands for (None if it is not an input's argument)."""
        nest = self.parent_op()
        if not isinstance(nest, NestOp) or not isinstance(self.source, BlockArgument) or self.source.block is not nest.block:
            return None
        k = self.source.index
        return k if k < len(nest.ins) else None

    def verify_(self) -> None:
        nest = self.parent_op()
        if isinstance(nest, NestOp) and len(nest.body.blocks) != 1:
            return  # the nest's own verifier says that its body must be one block
        k = self.buffer_position()
        if k is None:
            raise VerifyException("'loop.read' source must be the block argument of one of the nest's inputs")
        t = self.parent_op().ins[k].type  # type: ignore[union-attr]
        assert isinstance(t, MemRefType)
        if len(self.indices) != t.get_num_dims():
            raise VerifyException(f"'loop.read' of {t} needs {t.get_num_dims()} indices, got {len(self.indices)}")


def has_indirect_reads(nest: NestOp) -> bool:
    """Whether the nest reads data-dependently (loop.read): its access maps do not say all it reads."""
    return any(isinstance(op, ReadOp) for op in nest.block.ops)


@irdl_op_definition
class IndexOp(IRDLOperation):
    """The current value of a nest dimension (`dim`) or symbol (`sym`), inside a nest body.

    For guards that an affine access map cannot express (padding borders).
    """

    name = "loop.index"
    kind = prop_def(IndexKindAttr)
    position = prop_def(IntegerAttr)
    result = result_def(IndexType)
    traits = traits_def(Pure(), HasParent(NestOp))

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.kind.data} {self.position.value.data}")
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> IndexOp:
        kind = IndexKindAttr.parse_parameter(parser)
        position = parser.parse_integer(allow_boolean=False, allow_negative=False)
        op = cls(kind, position)
        op.attributes.update(parser.parse_optional_attr_dict())
        return op

    def __init__(self, kind: str | IndexKind, position: int):
        super().__init__(
            properties={
                "kind": IndexKindAttr(enum_value(IndexKind, kind, "'loop.index' kind")),
                "position": IntegerAttr(position, i64),
            },
            result_types=[IndexType()],
        )

    def verify_(self) -> None:
        nest = self.parent_op()
        if isinstance(nest, NestOp):
            limit = nest.rank if self.kind.data == IndexKind.DIM else len(nest.syms)
            if not 0 <= self.position.value.data < limit:
                raise VerifyException(f"'loop.index' {self.kind.data} {self.position.value.data} is out of range ({limit})")


@irdl_op_definition
class ParallelCallOp(IRDLOperation):
    """Call `@callee(lo, hi, args...)` on sub-ranges of [0, trip_count) on all threads.

    `grain` is the smallest chunk worth a thread; below it the call runs serially.
    """

    name = "loop.parallel_call"
    callee = prop_def(SymbolRefAttr)
    trip_count = prop_def(IntegerAttr)
    grain = opt_prop_def(IntegerAttr)
    args = var_operand_def(AnyAttr())
    assembly_format = "$callee `(` $args `)` `range` $trip_count attr-dict `:` type($args)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, callee: str, trip_count: int, args: Sequence[SSAValue], grain: int = 1):
        super().__init__(
            operands=[list(args)],
            properties={
                "callee": SymbolRefAttr(callee),
                "trip_count": IntegerAttr(trip_count, i64),
                "grain": IntegerAttr(grain, i64),
            },
        )

    def verify_(self) -> None:
        if self.trip_count.value.data < 0:
            raise VerifyException("'loop.parallel_call' trip count must be non-negative")


@irdl_op_definition
class BandOp(IRDLOperation):
    """Parallel loops over [0, upper) per dimension around nests that use the ivs as symbols."""

    name = "loop.band"
    band_name = prop_def(StringAttr)
    upper = prop_def(DenseArrayBase)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())

    def __init__(self, band_name: str, upper: Sequence[int], body: Region):
        super().__init__(
            properties={"band_name": StringAttr(band_name), "upper": DenseArrayBase.from_list(i64, list(upper))},
            regions=[body],
        )

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(self.upper.get_values())

    @property
    def block(self) -> Block:
        return self.body.block

    def verify_(self) -> None:
        args = self.block.args
        if len(args) != len(self.sizes) or any(not isinstance(a.type, IndexType) for a in args):
            raise VerifyException(
                f"'loop.band' has {len(self.sizes)} dimensions, so its body takes {len(self.sizes)} index arguments"
            )
        if any(n < 0 for n in self.sizes):
            raise VerifyException("'loop.band' sizes must be non-negative")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.band_name)
        printer.print_string(f" upper [{', '.join(map(str, self.sizes))}]")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body)

    @classmethod
    def parse(cls, parser: Parser) -> BandOp:
        name = parser.parse_str_literal("band name")
        parser.parse_keyword("upper")
        sizes = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region()
        op = cls(name, sizes, body)
        if attrs is not None:
            op.attributes.update(attrs.data)
        return op


@irdl_op_definition
class GemmOp(IRDLOperation):
    """C = A @ B over identical leading batch dimensions, as one compute-bound kernel.

    Large GEMMs are compute-bound: they need register blocking and packing, not
    the loop nests the fusion code generators stitch (small GEMMs stay nests).
    convert-to-llvm runs f32 GEMMs as generated, packed, register-blocked kernels
    on the thread team (mlfuse/backend/gemm_kernels.py) and f64 ones (or f32 with
    gemm=blas) as BLAS calls.

    With `window = array<i64: kh, kw>`, B is a padded image x[batch, c, hp, wp] read
    as its patches under a kh x kw window at stride 1 (an implicit im2col: the
    packing of the generated kernel reads them, so they are never materialized);
    `window = array<i64: kh, kw, sh, sw>` gives the strides:

        B[(c, i, j), (y, x)] = x[c, y*sh + i, x*sw + j],  A: [batch, m, c*kh*kw],  C: [batch, m, oh*ow]
        oh = (hp - kh) / sh + 1,  ow = (wp - kw) / sw + 1  (rounded down)

        loop.gemm %w, %xpad into %y {window = array<i64: 3, 3>}
            : memref<1x64x576xf32>, memref<1x64x58x58xf32>, memref<1x64x3136xf32>

    With an `epilogue` region, C holds an elementwise function of the product rather
    than the product: C[d] = epilogue((A @ B)[d], in_0[map_0(d)], ...), the region's
    block arguments being the product's element and one element per `epilogue` operand
    at its map (`epilogue_maps`, from C's indices, like a `loop.nest`'s), and its
    `loop.yield` the value stored (loop-gemm-epilogue-fuse folds a conv's bias,
    residual and ReLU in; the generated kernel applies it in registers):

        loop.gemm %w, %xpad into %y epilogue ins(%bias : memref<64xf32>) {
        ^bb0(%acc: f32, %b: f32):
          %s = arith.addf %acc, %b : f32
          loop.yield %s : f32
        } {epilogue_maps = [affine_map<(d0, d1, d2) -> (d1)>], window = array<i64: 3, 3>}
            : memref<1x64x576xf32>, memref<1x64x58x58xf32>, memref<1x64x3136xf32>

    With `window_border = array<i64: top, left, bottom, right>` as well, the image is
    the interior of B (a downsample reading the next conv's padded input):
    x[c, top + y*sh + i, left + x*sw + j], oh and ow from the interior's size.

    With `window_pads = array<i64: top, left, bottom, right>`, the image is B padded by
    zeros on those sides, which are not in memory: x[c, y*sh + i - top, x*sw + j - left]
    where that is inside B, else 0 (a depthwise conv reading its input as it is:
    convert-graph-to-loop{depthwise}, which only the depthwise kernels take):

        loop.gemm %w, %x into %y {window = array<i64: 3, 3>, window_pads = array<i64: 1, 1, 1, 1>}
            : memref<96x1x9xf32>, memref<96x1x14x14xf32>, memref<96x1x196xf32>

    With `c_frame = array<i64: top, left, oh, ow>`, C is images [batch..., m, hp, wp]
    whose interiors hold the product's rows, and their borders are not written (a conv
    writing the next conv's padded input: loop-forward-copies). The product's shape
    stays [batch..., m, oh * ow] (`product_type`), and so do the epilogue maps' indices:

        C[b, i, y * ow + x] is c[b, i, top + y, left + x]

    A fifth value, `channel`, places the rows at images channel + i of C [1, channels,
    hp, wp] (channels >= channel + m, a single batch): a conv writing its part of a
    concat of padded images (U-Net's skip connections).

        loop.gemm %w, %xpad into %ypad {c_frame = array<i64: 1, 1, 56, 56>, window = array<i64: 3, 3>}
            : memref<1x64x576xf32>, memref<1x64x58x58xf32>, memref<1x64x58x58xf32>
    """

    name = "loop.gemm"
    a = operand_def(MemRefType)
    b = operand_def(MemRefType)
    c = operand_def(MemRefType)
    epilogue_ins = var_operand_def(MemRefType)
    window = opt_prop_def(DenseArrayBase[IntegerType])
    epilogue_maps = opt_prop_def(ArrayAttr[AffineMapAttr])
    c_frame = opt_prop_def(DenseArrayBase[IntegerType])
    window_border = opt_prop_def(DenseArrayBase[IntegerType])
    window_pads = opt_prop_def(DenseArrayBase[IntegerType])
    epilogue = opt_region_def("single_block")
    assembly_format = (
        "$a `,` $b `into` $c (`epilogue` (`ins` `(` $epilogue_ins^ `:` type($epilogue_ins) `)`)? $epilogue^)?"
        " attr-dict `:` type($a) `,` type($b) `,` type($c)"
    )
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(
        self,
        a: SSAValue,
        b: SSAValue,
        c: SSAValue,
        window: Sequence[int] | None = None,
        epilogue: tuple[Sequence[SSAValue], Sequence[AffineMap], Region] | None = None,
        c_frame: Sequence[int] | None = None,
        window_pads: Sequence[int] | None = None,
    ):
        """`epilogue`: its operands, their maps from C's indices, and its region;
        `c_frame`: (top, left, oh, ow); `window_pads`: (top, left, bottom, right)."""
        properties: dict[str, Attribute] = {}
        if window is not None:
            properties["window"] = DenseArrayBase.from_list(i64, window)
        if window_pads is not None and any(window_pads):
            properties["window_pads"] = DenseArrayBase.from_list(i64, window_pads)
        if c_frame is not None:
            properties["c_frame"] = DenseArrayBase.from_list(i64, c_frame)
        ins: Sequence[SSAValue] = ()
        regions: list[Region | None] = [None]
        if epilogue is not None:
            ins, maps, region = epilogue
            properties["epilogue_maps"] = ArrayAttr([AffineMapAttr(m) for m in maps])
            regions = [region]
        super().__init__(operands=[a, b, c, list(ins)], properties=properties, regions=regions)

    @property
    def buffers_read(self) -> tuple[SSAValue, ...]:
        """What the op reads: A, B and the epilogue's operands (C is written, never read)."""
        return (self.a, self.b, *self.epilogue_ins)

    @property
    def buffers_written(self) -> tuple[SSAValue, ...]:
        return (self.c,)

    @property
    def window_size(self) -> tuple[int, int] | None:
        if self.window is None:
            return None
        kh, kw = self.window.get_values()[:2]
        return int(kh), int(kw)

    @staticmethod
    def _sides(attr: DenseArrayBase[IntegerType] | None) -> tuple[int, int, int, int]:
        """(top, left, bottom, right) of a four-value property: zeros unless given."""
        if attr is None:
            return (0, 0, 0, 0)
        top, left, bottom, right = (int(v) for v in attr.get_values())
        return top, left, bottom, right

    @property
    def border(self) -> tuple[int, int, int, int]:
        """(top, left, bottom, right) of `window_border`: zeros unless given."""
        return self._sides(self.window_border)

    @property
    def pads(self) -> tuple[int, int, int, int]:
        """(top, left, bottom, right) of `window_pads`: zeros unless given."""
        return self._sides(self.window_pads)

    @property
    def frame(self) -> tuple[int, int, int, int] | None:
        """(top, left, oh, ow) of `c_frame`, or None."""
        if self.c_frame is None:
            return None
        top, left, oh, ow = (int(v) for v in self.c_frame.get_values()[:4])
        return top, left, oh, ow

    @property
    def frame_channel(self) -> int:
        """The image of C that the product's first row goes to: `c_frame`'s fifth value, else 0."""
        values = self.c_frame.get_values() if self.c_frame is not None else ()
        return int(values[4]) if len(values) == 5 else 0

    @property
    def product_type(self) -> MemRefType:
        """C's type as the product's [batch..., m, n]: C's own, or under a frame its
        images' interiors as rows of oh * ow (m of them from `frame_channel` on)."""
        tc = self.c.type
        assert isinstance(tc, MemRefType)
        if self.frame is None:
            return tc
        _, _, oh, ow = self.frame
        lead = list(tc.get_shape()[:-2])
        if self.frame_channel and lead:
            lead[-1] = self.a.type.get_shape()[-2]  # type: ignore[attr-defined]
        return MemRefType(tc.get_element_type(), [*lead, oh * ow])

    @property
    def window_strides(self) -> tuple[int, int]:
        """(sh, sw) of the window: (1, 1) unless given."""
        values = self.window.get_values() if self.window is not None else ()
        return (int(values[2]), int(values[3])) if len(values) == 4 else (1, 1)

    def verify_(self) -> None:
        ta, tb, tc = (v.type for v in (self.a, self.b, self.c))
        assert isinstance(ta, MemRefType) and isinstance(tb, MemRefType) and isinstance(tc, MemRefType)
        sa, sb, sc = ta.get_shape(), tb.get_shape(), tc.get_shape()
        if self.window_border is not None:
            border = [int(v) for v in self.window_border.get_values()]
            if self.window is None or len(border) != 4 or min(border) < 0:
                raise VerifyException(f"'loop.gemm' window_border must be (top, left, bottom, right) >= 0 with a window, got {border}")
        if self.window_pads is not None:
            pads = [int(v) for v in self.window_pads.get_values()]
            if self.window is None or len(pads) != 4 or min(pads) < 0:
                raise VerifyException(f"'loop.gemm' window_pads must be (top, left, bottom, right) >= 0 with a window, got {pads}")
        if self.window is not None:
            sb = self.patches_shape(sb)
        if self.c_frame is not None:
            self.verify_frame(sc)
            tc = self.product_type
            sc = tc.get_shape()
        if not (len(sa) == len(sb) == len(sc) >= 2):
            raise VerifyException(f"'loop.gemm' needs operands of one rank >= 2, got {ta}, {tb}, {tc}")
        if sa[:-2] != sb[:-2] or sa[:-2] != sc[:-2] or sa[-1] != sb[-2] or tuple(sc[-2:]) != (sa[-2], sb[-1]):
            raise VerifyException(f"'loop.gemm' shapes do not multiply: {ta} x {tb} -> {tc}")
        el = {str(t.get_element_type()) for t in (ta, tb, tc)}
        if el not in ({"f32"}, {"f64"}):
            raise VerifyException(f"'loop.gemm' supports f32 and f64, got {', '.join(sorted(el))}")
        self.verify_epilogue(tc)

    def verify_frame(self, images: Sequence[int]) -> None:
        """c_frame is (top, left, oh, ow[, channel]), the interiors within C's images
        [..., m, hp, wp] (or [1, channels >= channel + m, hp, wp])."""
        frame = [int(v) for v in self.c_frame.get_values()] if self.c_frame is not None else []
        if len(frame) not in (4, 5) or min(frame) < 0 or min(frame[2:4]) < 1:
            raise VerifyException(
                f"'loop.gemm' c_frame must be (top, left, oh, ow[, channel]), offsets >= 0 and sizes >= 1, got {frame}")
        top, left, oh, ow = frame[:4]
        if len(images) < 3 or top + oh > images[-2] or left + ow > images[-1]:
            raise VerifyException(f"'loop.gemm' c_frame {frame} needs images [..., m, h >= {top + oh}, w >= {left + ow}] as C, got {list(images)}")
        if self.frame_channel:
            m = self.a.type.get_shape()[-2]  # type: ignore[attr-defined]
            if len(images) != 4 or images[0] != 1 or self.frame_channel + m > images[1]:
                raise VerifyException(
                    f"'loop.gemm' c_frame channel {self.frame_channel} needs images [1, channels >= "
                    f"{self.frame_channel + m}, h, w] as C, got {list(images)}")

    def verify_epilogue(self, tc: MemRefType) -> None:
        """One map per epilogue operand, from C's indices to its own; block arguments of
        the element type (the product's, then one per operand); one value yielded."""
        maps = self.epilogue_maps.data if self.epilogue_maps is not None else ()
        if self.epilogue is None:
            if maps or self.epilogue_ins:
                raise VerifyException("'loop.gemm' has epilogue operands or maps but no epilogue region")
            return
        if any(view_root(v) == view_root(self.c) for v in self.epilogue_ins):
            # the kernel keeps partial sums in C until the last depth block
            raise VerifyException("'loop.gemm' epilogue operands must not be C's buffer")
        if len(maps) != len(self.epilogue_ins):
            raise VerifyException(f"'loop.gemm' needs one epilogue map per epilogue operand, got {len(maps)} for {len(self.epilogue_ins)}")
        for value, m in zip(self.epilogue_ins, maps):
            t = value.type
            assert isinstance(t, MemRefType)
            if m.data.num_dims != tc.get_num_dims() or len(m.data.results) != t.get_num_dims():
                raise VerifyException(f"'loop.gemm' epilogue map {m.data} does not take C's indices to those of {t}")
        el = tc.get_element_type()
        types = [a.type for a in self.epilogue.block.args]
        if types != [el] * (1 + len(self.epilogue_ins)) or any(
            t.get_element_type() != el for t in (v.type for v in self.epilogue_ins) if isinstance(t, MemRefType)
        ):
            raise VerifyException(f"'loop.gemm' epilogue takes one {el} for the product and one per operand, got ({', '.join(map(str, types))})")
        last = self.epilogue.block.last_op
        if not isinstance(last, YieldOp) or [v.type for v in last.values] != [el]:
            raise VerifyException(f"'loop.gemm' epilogue must yield one {el}")

    def patches_shape(self, image: Sequence[int]) -> tuple[int, ...]:
        """The shape of B that a window over `image` [batch..., c, hp, wp] stands for."""
        window = [int(v) for v in self.window.get_values()] if self.window is not None else []
        if len(window) not in (2, 4) or min(window) < 1:
            raise VerifyException(
                f"'loop.gemm' window must be positive sizes (kh, kw) or sizes and strides (kh, kw, sh, sw), got {list(window)}")
        kh, kw = window[:2]
        sh, sw = self.window_strides
        top, left, bottom, right = self.border
        above, before, below, after = self.pads
        if len(image) >= 3:  # the interior the window runs over, padded
            image = [*image[:-2], image[-2] - top - bottom + above + below, image[-1] - left - right + before + after]
        if len(image) < 3 or image[-2] < kh or image[-1] < kw:
            within = f" (the interior within window_border {[top, left, bottom, right]})" if any((top, left, bottom, right)) else ""
            raise VerifyException(f"'loop.gemm' window {kh}x{kw} needs an image [..., c, h >= {kh}, w >= {kw}], got {list(image)}{within}")
        *batch, c, hp, wp = image
        return (*batch, c * kh * kw, ((hp - kh) // sh + 1) * ((wp - kw) // sw + 1))


@irdl_op_definition
class ViewOp(IRDLOperation):
    """The same contiguous buffer seen with another static shape (a bufferized reshape)."""

    name = "loop.view"
    source = operand_def(MemRefType)
    result = result_def(MemRefType)
    traits = traits_def(Pure())
    assembly_format = "$source attr-dict `:` type($source) `to` type($result)"

    def __init__(self, source: SSAValue, result_type: MemRefType):
        super().__init__(operands=[source], result_types=[result_type])

    def verify_(self) -> None:
        a, b = self.source.type, self.result.type
        assert isinstance(a, MemRefType) and isinstance(b, MemRefType)
        if a.get_element_type() != b.get_element_type():
            raise VerifyException(f"'loop.view' cannot change the element type ({a} to {b})")
        if a.element_count() != b.element_count():
            raise VerifyException(f"'loop.view' must keep the element count ({a} to {b})")


@irdl_op_definition
class AlignedWindowOp(IRDLOperation):
    """The first element at or after `source[indices]` whose address is a multiple of
    `alignment` bytes: how many elements lie before it (`skip`, less than
    alignment / element size) and the buffer from it on, seen as 1-D (`window`, as
    many elements as `source` holds: an upper bound, never all in range).

    convert-loop-to-scf peels a streaming row with it: the elements before the
    aligned one go through a loop of their own, the rest through `window`, so LLVM
    proves the rest's vector stores aligned whatever the buffer's address (outputs
    from np.empty are only 16-byte aligned) and they can be non-temporal.

        %skip, %w = loop.aligned_window %y[%i, %c0] {alignment = 64 : i64} : memref<64x100xf32> -> memref<6400xf32>
    """

    name = "loop.aligned_window"
    source = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    alignment = prop_def(IntegerAttr[IntegerType])
    skip = result_def(IndexType)
    window = result_def(MemRefType)
    traits = traits_def(Pure())
    assembly_format = "$source `[` $indices `]` attr-dict `:` type($source) `->` type($window)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, source: SSAValue, indices: Sequence[SSAValue], alignment: int):
        t = source.type
        assert isinstance(t, MemRefType)
        window = MemRefType(t.get_element_type(), [t.element_count()])
        super().__init__(
            operands=[source, indices], properties={"alignment": IntegerAttr(alignment, i64)}, result_types=[IndexType(), window]
        )

    def verify_(self) -> None:
        source, window = self.source.type, self.window.type
        assert isinstance(source, MemRefType) and isinstance(window, MemRefType)
        if len(self.indices) != source.get_num_dims():
            raise VerifyException(f"'loop.aligned_window' needs {source.get_num_dims()} indices into {source}, got {len(self.indices)}")
        if window.get_element_type() != source.get_element_type() or window.get_shape() != (source.element_count(),):
            raise VerifyException(f"'loop.aligned_window' of {source} must be memref<{source.element_count()}x{source.get_element_type()}>, got {window}")
        a, size = self.alignment.value.data, element_bytes(source.get_element_type())
        if a < size or a & (a - 1):
            raise VerifyException(f"'loop.aligned_window' alignment must be a power of two of at least the element size ({size} bytes), got {a}")


def view_root(v: SSAValue) -> SSAValue:
    """The buffer `v` aliases: itself, or the source of the `loop.view`s it is made by."""
    while isinstance(v.owner, ViewOp):
        v = v.owner.source
    return v


def view_users(v: SSAValue, views: bool = False) -> list[Operation]:
    """The ops that use the buffer `v`, looking through the `loop.view`s made of it
    (the same bytes, reshaped); with `views`, those views as well, each before its users."""
    found = []
    for use in v.uses:
        if isinstance(use.operation, ViewOp):
            found += [use.operation] * views + view_users(use.operation.result, views)
        else:
            found.append(use.operation)
    return found


Loop = Dialect(
    "loop", [NestOp, YieldOp, IndexOp, ReadOp, BandOp, ParallelCallOp, GemmOp, ViewOp, AlignedWindowOp], [IteratorKindAttr, IndexKindAttr]
)
