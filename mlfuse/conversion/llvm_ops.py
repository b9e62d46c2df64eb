"""LLVM-dialect ops built with `Operation.create`, for convert-to-llvm's hot paths.

xDSL's IRDL constructors (`irdl_op_init`) match every argument against the op's
definition before they build it: about 85 us an op on this machine, against 12 us
for `create` with the same operands, result types, properties and successors.
convert-to-llvm builds about 12k ops for ResNet-18, most of them of the kinds here
(constants, index arithmetic, GEPs, loads, stores, compares, branches, and
the casts between old and new types), so the IRDL
constructors were a third of the pass.

Each builder gives the op the properties its IRDL constructor gives it, no more and
no fewer; tests/test_llvm_ops.py compares every one with its constructor (properties,
attributes, types, successors and printed form), so a change in xDSL's op
definitions fails there rather than in generated code.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    DenseArrayBase,
    IntegerAttr,
    UnitAttr,
    UnrealizedConversionCastOp,
    VectorType,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, SSAValue

NO_FLAGS = IntegerAttr(0, i32)  # overflowFlags / noWrapFlags: none
ORDERING_NOT_ATOMIC = IntegerAttr(0, i64)
DYNAMIC_INDEX = DenseArrayBase.from_list(i32, [llvm.GEP_USE_SSA_VAL])  # the one index is an operand


@functools.lru_cache(maxsize=4096)
def int_attr(value: int, t: Attribute) -> IntegerAttr:
    """IntegerAttr(value, t), shared: attributes are immutable, and building one checks its range (12 us)."""
    return IntegerAttr(value, t)  # type: ignore[arg-type]


def cast(value: SSAValue, t: Attribute) -> UnrealizedConversionCastOp:
    """UnrealizedConversionCastOp.get([value], [t]): the conversion's casts at type boundaries."""
    return UnrealizedConversionCastOp.create(operands=[value], result_types=[t])


def constant(value: Attribute, t: Attribute) -> llvm.ConstantOp:
    """llvm.ConstantOp(value, t)."""
    return llvm.ConstantOp.create(result_types=[t], properties={"value": value})


INT_BINARY_WITH_FLAGS = (llvm.AddOp, llvm.SubOp, llvm.MulOp)


def int_binary(
    op_type: type[llvm.AddOp | llvm.MulOp | llvm.SubOp], lhs: SSAValue, rhs: SSAValue, overflow: Attribute | None = None
) -> llvm.AddOp | llvm.MulOp | llvm.SubOp:
    """op_type(lhs, rhs, overflow=overflow) for llvm.add, sub and mul (the ops with overflow flags)."""
    flags = int_attr(overflow.to_int(), i32) if isinstance(overflow, llvm.OverflowAttr) else overflow or NO_FLAGS
    return op_type.create(operands=[lhs, rhs], result_types=[lhs.type], properties={"overflowFlags": flags})


def gep(ptr: SSAValue, index: SSAValue, element: Attribute, inbounds: bool = True) -> llvm.GEPOp:
    """llvm.GEPOp.from_mixed_indices(ptr, [index], element, result_type=ptr.type, inbounds=inbounds)."""
    properties: dict[str, Attribute] = {
        "rawConstantIndices": DYNAMIC_INDEX,
        "elem_type": element,
        "noWrapFlags": NO_FLAGS,
    }
    if inbounds:
        properties["inbounds"] = UnitAttr()
    return llvm.GEPOp.create(operands=[ptr, index], result_types=[ptr.type], properties=properties)


def icmp(predicate: llvm.ICmpPredicateFlag, lhs: SSAValue, rhs: SSAValue) -> llvm.ICmpOp:
    """llvm.ICmpOp(lhs, rhs, IntegerAttr(predicate.to_int(), i64)): i1, or a vector of i1 for vectors."""
    t = lhs.type
    result = VectorType(i1, t.get_shape()) if isinstance(t, VectorType) else i1
    return llvm.ICmpOp.create(
        operands=[lhs, rhs], result_types=[result], properties={"predicate": int_attr(predicate.to_int(), i64)}
    )


def load(ptr: SSAValue, t: Attribute, alignment: int) -> llvm.LoadOp:
    """llvm.LoadOp(ptr, t, alignment=alignment)."""
    return llvm.LoadOp.create(
        operands=[ptr],
        result_types=[t],
        properties={"ordering": ORDERING_NOT_ATOMIC, "alignment": int_attr(alignment, i64)},
    )


def store(value: SSAValue, ptr: SSAValue, alignment: int, nontemporal: bool = False) -> llvm.StoreOp:
    """llvm.StoreOp(value, ptr, alignment=alignment, nontemporal=nontemporal)."""
    properties: dict[str, Attribute] = {"ordering": ORDERING_NOT_ATOMIC, "alignment": int_attr(alignment, i64)}
    if nontemporal:
        properties["nontemporal"] = UnitAttr()
    return llvm.StoreOp.create(operands=[value, ptr], properties=properties)


def br(successor: Block, args: Sequence[SSAValue] = ()) -> llvm.BrOp:
    """llvm.BrOp(successor, *args)."""
    return llvm.BrOp.create(operands=list(args), successors=[successor])


def cond_br(
    cond: SSAValue, then_block: Block, then_args: Sequence[SSAValue], else_block: Block, else_args: Sequence[SSAValue]
) -> llvm.CondBrOp:
    """llvm.CondBrOp(cond, then_block, then_args, else_block, else_args)."""
    segments = DenseArrayBase.from_list(i32, [1, len(then_args), len(else_args)])
    return llvm.CondBrOp.create(
        operands=[cond, *then_args, *else_args],
        successors=[then_block, else_block],
        properties={"operandSegmentSizes": segments},
    )
