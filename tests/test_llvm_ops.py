"""mlfuse.conversion.llvm_ops builds the same ops as xDSL's IRDL constructors.

The builders bypass the constructors for speed, so every op they build is compared
with the constructor's: name, operands, result types, properties, attributes,
successors and the printed form. A change in xDSL's op definitions fails here.
"""

from __future__ import annotations

import pytest
from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    ModuleOp,
    UnrealizedConversionCastOp,
    VectorType,
    f32,
    i1,
    i32,
    i64,
)
from xdsl.ir import Block, Operation, Region

from mlfuse.api import module_text
from mlfuse.conversion import llvm_ops
from mlfuse.conversion.to_llvm import NSW, PTR

BLOCK = Block(arg_types=[i64, i64, PTR, f32, VectorType(i32, [8]), VectorType(i32, [8]), i1])
X, Y, P, F, VX, VY, C = BLOCK.args
OTHER = Block()


def same(built: Operation, reference: Operation) -> None:
    assert type(built) is type(reference)
    assert list(built.operands) == list(reference.operands)
    assert [r.type for r in built.results] == [r.type for r in reference.results]
    assert dict(built.properties) == dict(reference.properties)
    assert dict(built.attributes) == dict(reference.attributes)
    assert list(built.successors) == list(reference.successors)


CASES = {
    "cast": lambda: (llvm_ops.cast(X, IndexType()), UnrealizedConversionCastOp.get([X], [IndexType()])),
    "constant-int": lambda: (
        llvm_ops.constant(llvm_ops.int_attr(-7, i64), i64),
        llvm.ConstantOp(IntegerAttr(-7, i64), i64),
    ),
    "constant-float": lambda: (
        llvm_ops.constant(FloatAttr(-0.0, f32), f32),
        llvm.ConstantOp(FloatAttr(-0.0, f32), f32),
    ),
    "add": lambda: (llvm_ops.int_binary(llvm.AddOp, X, Y), llvm.AddOp(X, Y)),
    "add-nsw": lambda: (llvm_ops.int_binary(llvm.AddOp, X, Y, NSW), llvm.AddOp(X, Y, overflow=NSW)),
    "sub": lambda: (llvm_ops.int_binary(llvm.SubOp, X, Y), llvm.SubOp(X, Y)),
    "mul-nsw": lambda: (llvm_ops.int_binary(llvm.MulOp, X, Y, NSW), llvm.MulOp(X, Y, overflow=NSW)),
    "mul-vector": lambda: (llvm_ops.int_binary(llvm.MulOp, VX, VY), llvm.MulOp(VX, VY)),
    "gep": lambda: (
        llvm_ops.gep(P, X, f32),
        llvm.GEPOp.from_mixed_indices(P, [X], f32, result_type=PTR, inbounds=True),
    ),
    "gep-not-inbounds": lambda: (llvm_ops.gep(P, X, f32, inbounds=False), llvm.GEPOp.from_mixed_indices(P, [X], f32)),
    "icmp": lambda: (
        llvm_ops.icmp(llvm.ICmpPredicateFlag.SLT, X, Y),
        llvm.ICmpOp(X, Y, IntegerAttr(llvm.ICmpPredicateFlag.SLT.to_int(), i64)),
    ),
    "icmp-vector": lambda: (
        llvm_ops.icmp(llvm.ICmpPredicateFlag.NE, VX, VY),
        llvm.ICmpOp(VX, VY, IntegerAttr(llvm.ICmpPredicateFlag.NE.to_int(), i64)),
    ),
    "load": lambda: (llvm_ops.load(P, f32, 4), llvm.LoadOp(P, f32, alignment=4)),
    "store": lambda: (llvm_ops.store(F, P, 4), llvm.StoreOp(F, P, alignment=4)),
    "store-nontemporal": lambda: (llvm_ops.store(F, P, 64, True), llvm.StoreOp(F, P, alignment=64, nontemporal=True)),
    "br": lambda: (llvm_ops.br(OTHER, [X, F]), llvm.BrOp(OTHER, X, F)),
    "br-no-args": lambda: (llvm_ops.br(OTHER), llvm.BrOp(OTHER)),
    "cond_br": lambda: (llvm_ops.cond_br(C, OTHER, [X], BLOCK, [Y, F]), llvm.CondBrOp(C, OTHER, [X], BLOCK, [Y, F])),
    "cond_br-no-args": lambda: (llvm_ops.cond_br(C, OTHER, [], OTHER, []), llvm.CondBrOp(C, OTHER, [], OTHER, [])),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_builder_matches_irdl_constructor(case):
    built, reference = CASES[case]()
    same(built, reference)


@pytest.mark.parametrize("case", sorted(CASES))
def test_builder_prints_as_irdl_constructor(case):
    def printed(op: Operation) -> str:
        block = Block(arg_types=[a.type for a in BLOCK.args])
        op = op.clone(value_mapper=dict(zip(BLOCK.args, block.args, strict=True)), block_mapper={})
        body = Region([block, Block()])
        for successor_index in range(len(op.successors)):
            op.successors[successor_index] = body.blocks[1]
        block.add_op(op)
        if not op.successors:
            block.add_op(llvm.BrOp(body.blocks[1]))
        body.blocks[1].add_op(llvm.ReturnOp())
        fn = llvm.FuncOp("f", llvm.LLVMFunctionType([a.type for a in BLOCK.args]), body=body)
        module = ModuleOp([fn])
        module.verify()
        return module_text(module)

    built, reference = CASES[case]()
    assert printed(built) == printed(reference)


def test_int_attr_is_shared_and_exact():
    assert llvm_ops.int_attr(3, i64) is llvm_ops.int_attr(3, i64)
    assert llvm_ops.int_attr(-1, i1) == IntegerAttr(-1, i1)
    assert llvm_ops.int_attr(1, i32) != llvm_ops.int_attr(1, i64)
