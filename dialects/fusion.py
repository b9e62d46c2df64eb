"""The `fusion` dialect: the kernels a fusion planner chose.

A `fusion.group` is isolated from above: its operands enter the region as block
arguments and `fusion.yield` returns the values that leave the kernel. Its name
is built from the ops it holds, and `kind` (a `GroupKind` enum attribute, printed
as a quoted string) says how the code generator stitches it (see `GROUP_KINDS`). Planners add attributes with their reasoning (modeled
bytes and time, the stitching scheme of every internal value).

    %r = fusion.group "fused_sub_exp" kind = "loop" (%x, %m) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>):
      %d = graph.sub %a, %b : tensor<4x8xf32>
      %e = graph.exp %d : tensor<4x8xf32>
      fusion.yield %e : tensor<4x8xf32>
    }
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import StringAttr
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Block, Dialect, Region, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from mlfuse.dialects.enums import enum_value, parse_enum_value


class GroupKind(StrEnum):
    """How a group is stitched into one kernel (the members compare equal to their names)."""

    LOOP = "loop"
    STITCH = "stitch"
    REDUCE = "reduce"
    GEMM = "gemm"
    HORIZONTAL = "horizontal"
    GLOBAL = "global"
    WINDOW = "window"
    SINGLE = "single"


GROUP_KINDS: dict[GroupKind, str] = {
    GroupKind.LOOP: "elementwise/injective chain, intermediates in registers",
    GroupKind.STITCH: "reductions whose results are broadcast back: row-local scratch (shared memory)",
    GroupKind.REDUCE: "reduction tail fed by elementwise producers (XLA's input fusion)",
    GroupKind.GEMM: "small or batched GEMM with elementwise prologue and epilogue",
    GroupKind.HORIZONTAL: "independent ops packed into one kernel",
    GroupKind.GLOBAL: "needs a whole reduction before continuing: phases with a grid barrier",
    GroupKind.WINDOW: "conv/pooling with epilogue and prologue (chained windows): post-tiling fusion",
    GroupKind.SINGLE: "a single op, not fused",
}


@irdl_attr_definition
class GroupKindAttr(EnumAttribute[GroupKind], SpacedOpaqueSyntaxAttribute):
    """`#fusion<group_kind "loop">`: quoted, so that `fusion.group ... kind = "loop"` keeps
    the textual form it had as a string attribute."""

    name = "fusion.group_kind"

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string_literal(self.data.value)

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> GroupKind:
        return parse_enum_value(parser, GroupKind, "'fusion.group' kind")


@irdl_op_definition
class GroupOp(IRDLOperation):
    name = "fusion.group"
    inputs = var_operand_def(AnyAttr())
    outputs = var_result_def(AnyAttr())
    group_name = prop_def(StringAttr)
    kind = prop_def(GroupKindAttr)
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove(), RecursiveMemoryEffect())
    assembly_format = (
        "$group_name `kind` `=` $kind ` ` `(` $inputs `)` attr-dict "
        "`:` functional-type($inputs, $outputs) $body"
    )

    def __init__(
        self,
        group_name: str,
        kind: str | GroupKind,
        inputs: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        body: Region,
        attributes: dict[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[list(inputs)],
            result_types=[list(result_types)],
            properties={
                "group_name": StringAttr(group_name),
                "kind": GroupKindAttr(enum_value(GroupKind, kind, "'fusion.group' kind")),
            },
            regions=[body],
            attributes=attributes or {},
        )

    @property
    def block(self) -> Block:
        return self.body.block

    @property
    def yield_op(self) -> YieldOp:
        term = self.block.last_op
        assert isinstance(term, YieldOp)
        return term

    def verify_(self) -> None:
        if not self.group_name.data:
            raise VerifyException("'fusion.group' needs a non-empty name")
        block = self.body.block
        arg_types = [a.type for a in block.args]
        in_types = [v.type for v in self.inputs]
        if arg_types != in_types:
            raise VerifyException(
                f"'fusion.group' region arguments ({', '.join(map(str, arg_types))}) do not "
                f"match its operands ({', '.join(map(str, in_types))})"
            )
        term = block.last_op
        if not isinstance(term, YieldOp):
            raise VerifyException("'fusion.group' region must end with 'fusion.yield'")
        yield_types = [v.type for v in term.values]
        out_types = [r.type for r in self.outputs]
        if yield_types != out_types:
            raise VerifyException(
                f"'fusion.yield' types ({', '.join(map(str, yield_types))}) do not match the "
                f"results of 'fusion.group' ({', '.join(map(str, out_types))})"
            )


@irdl_op_definition
class YieldOp(IRDLOperation):
    name = "fusion.yield"
    values = var_operand_def(AnyAttr())
    traits = traits_def(IsTerminator(), HasParent(GroupOp))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue):
        super().__init__(operands=[list(values)])


Fusion = Dialect("fusion", [GroupOp, YieldOp], [GroupKindAttr])
