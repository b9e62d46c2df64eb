"""func/arith/math/scf/memref/loop -> xDSL's `llvm` dialect, as composable pattern sets.

xDSL 0.74 has no conversion of these dialects to `llvm` that LLVM can vectorize
(its ptr lowering computes addresses with ptrtoint arithmetic), so mlfuse has its
own patterns, applied the MLIR way:

1. `scf` -> `cf` with xDSL's convert-scf-to-cf patterns (`control_flow_patterns`);
2. every other op by a `RewritePattern` of one of the sets below. A pattern reads
   its operands in their converted types (`index` -> i64, a memref of static shape
   -> a bare `!llvm.ptr` in the memref's memory space) through
   `builtin.unrealized_conversion_cast`s, and casts its results back for users not
   yet converted; `func.func` converts the signatures of all its blocks the same way;
3. xDSL's reconcile-unrealized-casts removes the cast pairs; an op left over has
   no lowering and is reported at its location.

The sets: `arith_math_patterns` (arith, math; f32 transcendentals should have been
expanded by expand-math, what is left calls libm), `memref_patterns` (loads and
stores are an inbounds GEP on the row-major linearized index, the form LLVM's loop
vectorizer understands; alloc/dealloc call aligned_alloc/free), `cf_patterns`,
`func_patterns` (buffer parameters are `noalias` and carry their proven alignment),
and in mlfuse.conversion.llvm_runtime `omp_runtime_patterns` (loop.parallel_call on
libgomp's team) and `gemm_patterns` (loop.gemm). The GPU lowering
(mlfuse/backend/gpu/lowering.py) adds its kernel-dialect patterns to the same sets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import UnionType
from typing import Union, get_args, get_origin

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import arith, cf, func, llvm, memref, scf, vector
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    ArrayAttr,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    UnrealizedConversionCastOp,
    VectorType,
    i1,
    i8,
    i64,
)
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.transforms.canonicalization_patterns.utils import const_evaluate_operand
from xdsl.transforms.convert_scf_to_cf import ForLowering, IfLowering
from xdsl.transforms.reconcile_unrealized_casts import ReconcileUnrealizedCastsPattern

from mlfuse import abi
from mlfuse.conversion import llvm_ops
from mlfuse.diagnostics import Diagnostic, location_of
from mlfuse.dialects import loop

PTR = llvm.LLVMPointerType()

# kept importable from here: other modules size buffers with it
element_bytes = abi.element_bytes
# what the runtime guarantees for the outputs and the arena of an entry function
ENTRY_ALIGNMENT = abi.ALIGNMENT


# --- types and casts ------------------------------------------------------------------


def memory_space(t: MemRefType) -> int:
    space = t.memory_space
    if isinstance(space, IntegerAttr):
        return space.value.data
    return 0


def convert_type(t: Attribute) -> Attribute:
    """The LLVM type of a value of type `t`: index is i64, a memref a bare pointer."""
    if isinstance(t, IndexType):
        return i64
    if isinstance(t, MemRefType):
        space = memory_space(t)
        return llvm.LLVMPointerType(IntAttr(space)) if space else PTR
    return t


def type_suffix(t: Attribute) -> str:
    """LLVM's overload suffix: f32, i64, v8f32..."""
    if isinstance(t, VectorType):
        return f"v{t.get_shape()[0]}{type_suffix(t.get_element_type())}"
    if isinstance(t, IntegerType):
        return f"i{t.width.data}"
    return {Float16Type: "f16", Float32Type: "f32", Float64Type: "f64"}[type(t)]


def element_alignment(t: Attribute) -> int:
    return abi.element_bytes(t.get_element_type() if isinstance(t, VectorType) else t)


class Emitter:
    """Inserts LLVM ops for a pattern (before the matched op, or at the end of a new
    block) and reads operands in their converted types."""

    def __init__(self, rewriter: PatternRewriter | Builder, point: InsertPoint | None = None):
        self.rewriter = rewriter
        self.point = point

    def __call__(self, op: Operation) -> SSAValue | None:
        self.rewriter.insert(op, self.point)
        return op.results[0] if op.results else None

    def result(self, op: Operation) -> SSAValue:
        """Insert `op`, which has one result, and return that result."""
        self.rewriter.insert(op, self.point)
        return op.results[0]

    def at_end(self, block: Block) -> None:
        self.point = InsertPoint.at_end(block)

    def v(self, value: SSAValue) -> SSAValue:
        """`value` in its LLVM type: a cast, unless `value` is itself a cast back."""
        t = convert_type(value.type)
        if t == value.type:
            return value
        owner = value.owner
        if isinstance(owner, UnrealizedConversionCastOp) and len(owner.inputs) == 1 and owner.inputs[0].type == t:
            return owner.inputs[0]
        return self(llvm_ops.cast(value, t))  # type: ignore[return-value]

    def const(self, value: int | float, t: Attribute) -> SSAValue:
        attr = FloatAttr(value, t) if not isinstance(t, IntegerType) else llvm_ops.int_attr(int(value), t)
        return self(llvm_ops.constant(attr, t))  # type: ignore[return-value]

    def intrinsic(self, name: str, args: Sequence[SSAValue], result: Attribute, fastmath: llvm.FastMathAttr | None = None) -> SSAValue:
        call = llvm.CallIntrinsicOp(f"{name}.{type_suffix(result)}", args, [result])
        if fastmath is not None and fastmath.data:  # see llvm_translate.keeping_intrinsic_fast_math
            call.properties["fastmathFlags"] = fastmath
        return self(call)  # type: ignore[return-value]

    def icmp(self, pred: llvm.ICmpPredicateFlag, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        return self(llvm_ops.icmp(pred, lhs, rhs))  # type: ignore[return-value]


def replace_op(rewriter: PatternRewriter, op: Operation, value: SSAValue | None = None) -> None:
    """Replace `op` (its ops already inserted) by `value`, cast back to the old
    result type for users that are not converted yet."""
    results: list[SSAValue] = []
    if op.results:
        assert value is not None
        old = op.results[0].type
        if value.type != old:
            cast = llvm_ops.cast(value, old)
            rewriter.insert(cast)
            value = cast.results[0]
        results = [value]
    rewriter.replace(op, [], results)


def convert_block_signatures(rewriter: PatternRewriter, region: Region) -> None:
    """Give every block argument of `region` its LLVM type; the old-typed uses read
    it through a cast at the start of the block (removed when its users convert)."""
    for block in region.blocks:
        for arg in block.args:
            t = convert_type(arg.type)
            if t == arg.type:
                continue
            old = arg.type
            new = rewriter.replace_value_with_new_type(arg, t)
            cast = llvm_ops.cast(new, old)
            rewriter.insert(cast, InsertPoint.at_start(block))
            new.replace_uses_with_if(cast.results[0], lambda use, cast=cast: use.operation is not cast)


@dataclass
class Declarations:
    """External functions declared on demand, before the top-level op that calls them."""

    declared: dict[str, llvm.LLVMFunctionType] = field(default_factory=dict)

    def top_level(self, op: Operation) -> Operation:
        while not isinstance(op.parent_op(), ModuleOp):
            op = op.parent_op()  # type: ignore[assignment]
        return op

    def add(self, rewriter: PatternRewriter, at: Operation, new: Operation) -> None:
        """Insert the module-level `new` before the top-level op around `at`."""
        rewriter.insert(new, InsertPoint.before(self.top_level(at)))

    def declare(self, rewriter: PatternRewriter, at: Operation, name: str, result: Attribute | None, args: list[Attribute]) -> None:
        if name in self.declared:
            return
        ftype = llvm.LLVMFunctionType(args, result)
        self.declared[name] = ftype
        self.add(rewriter, at, llvm.FuncOp(name, ftype, linkage=llvm.LinkageAttr("external")))

    def call(self, e: Emitter, at: Operation, name: str, args: list[SSAValue], result: Attribute | None) -> SSAValue | None:
        self.declare(e.rewriter, at, name, result, [a.type for a in args])
        return e(llvm.CallOp(name, *args, return_type=result))


# --- arith and math ---------------------------------------------------------------------

# What `fast-math=true` allows on every float op. Not `reassoc`: the f32 expansions
# of expand-math round with (x + 1.5 * 2^23) - 1.5 * 2^23, which reassociation folds.
FAST_MATH_FLAGS = ("nnan", "ninf", "nsz", "arcp", "contract")


def fastmath_of(op: Operation, fast_math: bool = False) -> llvm.FastMathAttr:
    flags = op.properties.get("fastmath")
    names = {str(f) for f in flags.data} if isinstance(flags, arith.FastMathFlagsAttr) else set()
    if fast_math:
        names |= set(FAST_MATH_FLAGS)
    # enum members, not plain strings: xDSL's translator reads `.value`
    return llvm.FastMathAttr([FastMathFlag(f) for f in sorted(names)]) if names else llvm.FastMathAttr(None)


FLOAT_BINARY = {
    arith.AddfOp: llvm.FAddOp,
    arith.SubfOp: llvm.FSubOp,
    arith.MulfOp: llvm.FMulOp,
    arith.DivfOp: llvm.FDivOp,
}
INT_BINARY = {
    arith.AddiOp: llvm.AddOp,
    arith.SubiOp: llvm.SubOp,
    arith.MuliOp: llvm.MulOp,
    arith.DivSIOp: llvm.SDivOp,
    arith.DivUIOp: llvm.UDivOp,
    arith.RemSIOp: llvm.SRemOp,
    arith.RemUIOp: llvm.URemOp,
    arith.AndIOp: llvm.AndOp,
    arith.OrIOp: llvm.OrOp,
    arith.XOrIOp: llvm.XOrOp,
    arith.ShLIOp: llvm.ShlOp,
    arith.ShRUIOp: llvm.LShrOp,
    arith.ShRSIOp: llvm.AShrOp,
}
OVERFLOW_FLAGS = {"nsw": llvm.OverflowFlag.NO_SIGNED_WRAP, "nuw": llvm.OverflowFlag.NO_UNSIGNED_WRAP}
BINARY_INTRINSICS = {
    arith.MaximumfOp: "llvm.maximum",
    arith.MinimumfOp: "llvm.minimum",
    arith.MaxnumfOp: "llvm.maxnum",
    arith.MinnumfOp: "llvm.minnum",
    arith.MaxSIOp: "llvm.smax",
    arith.MinSIOp: "llvm.smin",
    arith.MaxUIOp: "llvm.umax",
    arith.MinUIOp: "llvm.umin",
    mathd.CopySignOp: "llvm.copysign",
    mathd.FmaOp: "llvm.fma",
}
MAX_MIN_FLOAT = (arith.MaximumfOp, arith.MinimumfOp)
UNARY_INTRINSICS = {
    mathd.SqrtOp: "llvm.sqrt",
    mathd.AbsFOp: "llvm.fabs",
    mathd.FloorOp: "llvm.floor",
    mathd.CeilOp: "llvm.ceil",
    mathd.RoundEvenOp: "llvm.roundeven",
    mathd.TruncOp: "llvm.trunc",
}
LIBM = {
    mathd.ExpOp: "exp",
    mathd.LogOp: "log",
    mathd.TanhOp: "tanh",
    mathd.ErfOp: "erf",
    mathd.PowFOp: "pow",
    mathd.SinOp: "sin",
    mathd.CosOp: "cos",
}
LIBM_SUFFIX = {Float32Type: "f", Float64Type: ""}
CASTS = {
    arith.ExtFOp: llvm.FPExtOp,
    arith.TruncFOp: llvm.FPTruncOp,
    arith.SIToFPOp: llvm.SIToFPOp,
    arith.ExtSIOp: llvm.SExtOp,
    arith.ExtUIOp: llvm.ZExtOp,
    arith.TruncIOp: llvm.TruncOp,
    arith.BitcastOp: llvm.BitcastOp,
}


@dataclass
class FloatBinaryLowering(RewritePattern):
    """arith.addf/subf/mulf/divf -> llvm.fadd/... with their (and fast-math's) flags."""

    fast_math: bool = False
    op_types = tuple(FLOAT_BINARY)  # what TypeDispatchApplier asks it about

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        new = FLOAT_BINARY.get(type(op))
        if new is not None:
            e = Emitter(rewriter)
            replace_op(rewriter, op, e(new(e.v(op.operands[0]), e.v(op.operands[1]), fastmath_of(op, self.fast_math))))


@dataclass
class FRemFastMath(RewritePattern):
    """llvm.frem (graph.rem's scalar form: xDSL's arith has no remf) gets fast-math's flags."""

    fast_math: bool = False

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: llvm.FRemOp, rewriter: PatternRewriter) -> None:
        flags = fastmath_of(op, self.fast_math)
        if self.fast_math and op.properties.get("fastmathFlags") != flags:
            op.properties["fastmathFlags"] = flags
            rewriter.notify_op_modified(op)


class IntBinaryLowering(RewritePattern):
    """arith integer binary ops -> llvm, on i64 for index; nsw/nuw carry over."""

    op_types = tuple(INT_BINARY)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        new = INT_BINARY.get(type(op))
        if new is None:
            return
        e = Emitter(rewriter)
        flags = op.properties.get("overflowFlags")
        names = [str(f) for f in flags.data] if isinstance(flags, arith.IntegerOverflowAttr) and flags.data else []
        overflow = llvm.OverflowAttr([OVERFLOW_FLAGS[n] for n in names]) if names else None
        lhs, rhs = e.v(op.operands[0]), e.v(op.operands[1])
        if new in llvm_ops.INT_BINARY_WITH_FLAGS:  # most of the index arithmetic: built fast
            replace_op(rewriter, op, e(llvm_ops.int_binary(new, lhs, rhs, overflow)))
        else:
            replace_op(rewriter, op, e(new(lhs, rhs, **({"overflow": overflow} if overflow else {}))))


class IntrinsicLowering(RewritePattern):
    """Ops with an LLVM intrinsic of the same meaning: llvm.maximum, llvm.sqrt, llvm.fma..."""

    op_types = (*BINARY_INTRINSICS, *UNARY_INTRINSICS)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        t = type(op)
        name = BINARY_INTRINSICS.get(t) or UNARY_INTRINSICS.get(t)
        if name is not None:
            e = Emitter(rewriter)
            # a max or min keeps its flags (a reduction step's nsz: scalar.reduction_max_min)
            flags = fastmath_of(op) if isinstance(op, MAX_MIN_FLOAT) else None
            replace_op(rewriter, op, e.intrinsic(name, [e.v(x) for x in op.operands], convert_type(op.results[0].type), flags))


def allows_contraction(op: Operation) -> bool:
    flags = op.properties.get("fastmath")
    return isinstance(flags, arith.FastMathFlagsAttr) and FastMathFlag.ALLOW_CONTRACT in flags.data


def contractible_product(value: SSAValue) -> bool:
    """`value` is a product that allows contraction and has no other use."""
    mul = value.owner
    return isinstance(mul, arith.MulfOp) and allows_contraction(mul) and mul.result.has_one_use()


class MultiplyAddContraction(RewritePattern):
    """`a * b + c`, `c - a * b` and `a * b - c` whose add or subtract and multiply both
    allow contraction, the product used there only -> `llvm.fmuladd(a, b, c)` (with a or c
    negated): one FMA wherever the target has one, else a multiply and an add, as the
    backend lowers each such call (clang's -ffp-contract=on emits it).

    Left to LLVM's instruction selection, which fuses a `contract` pair it sees within
    one block, whether the pair became an FMA depended on how the vectorizers had cut
    the code: the same expanded exp came out with all nine of its multiply-adds fused
    in one nest and only some in another (a transposed read), a last bit apart."""

    op_types = (arith.AddfOp, arith.SubfOp)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        assert isinstance(op, arith.AddfOp | arith.SubfOp)
        if not allows_contraction(op) or isinstance(op.parent_op(), loop.GemmOp):  # an epilogue: read as arith
            return
        k = next((k for k, v in enumerate(op.operands) if contractible_product(v)), None)
        if k is None:
            return
        mul = op.operands[k].owner
        assert isinstance(mul, arith.MulfOp)
        a, b = mul.lhs, mul.rhs
        c = op.operands[1 - k]
        if isinstance(op, arith.SubfOp) and k == 1:  # c - a * b = (-a) * b + c
            a = rewriter.insert(arith.NegfOp(a)).result
        elif isinstance(op, arith.SubfOp):  # a * b - c
            c = rewriter.insert(arith.NegfOp(c)).result
        t = op.result.type
        call = llvm.CallIntrinsicOp(f"llvm.fmuladd.{type_suffix(t)}", [a, b, c], [t])
        rewriter.replace_op(op, call)
        rewriter.erase_op(mul)


class CastLowering(RewritePattern):
    """arith.extf/truncf/sitofp/extsi/extui/trunci/bitcast -> their llvm twins."""

    op_types = tuple(CASTS)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        new = CASTS.get(type(op))
        if new is not None:
            e = Emitter(rewriter)
            replace_op(rewriter, op, e(new(e.v(op.operands[0]), convert_type(op.results[0].type))))


@dataclass
class LibmLowering(RewritePattern):
    """f32/f64 transcendentals left after expand-math call libm (expf, exp...)."""

    declarations: Declarations
    op_types = tuple(LIBM)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        name = LIBM.get(type(op))
        t = op.results[0].type if op.results else None
        if name is None or type(t) not in LIBM_SUFFIX:
            return  # f16 has no libm function: left over, hence reported
        e = Emitter(rewriter)
        result = self.declarations.call(e, op, name + LIBM_SUFFIX[type(t)], [e.v(x) for x in op.operands], t)
        replace_op(rewriter, op, result)


class ConstantLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.ConstantOp, rewriter: PatternRewriter) -> None:
        t = convert_type(op.result.type)
        value = op.value
        if isinstance(value, IntegerAttr) and isinstance(op.result.type, IndexType):
            value = llvm_ops.int_attr(value.value.data, i64)
        replace_op(rewriter, op, Emitter(rewriter)(llvm_ops.constant(value, t)))


class NegfLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.NegfOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        replace_op(rewriter, op, e(llvm.FNegOp(e.v(op.operand))))


class CmpfLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.CmpfOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        pred = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
        lhs, rhs = e.v(op.lhs), e.v(op.rhs)
        if pred in ("false", "true"):  # xDSL's llvm.fcmp lacks these two: ord & uno is never, ord | uno always
            ordered, unordered = (e.result(llvm.FCmpOp(lhs, rhs, p)) for p in ("ord", "uno"))
            replace_op(rewriter, op, e((llvm.AndOp if pred == "false" else llvm.OrOp)(ordered, unordered)))
            return
        replace_op(rewriter, op, e(llvm.FCmpOp(lhs, rhs, pred)))


class CmpiLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.CmpiOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        pred = llvm.ICmpPredicateFlag(arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data])
        replace_op(rewriter, op, e.icmp(pred, e.v(op.lhs), e.v(op.rhs)))


class SelectLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.SelectOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        replace_op(rewriter, op, e(llvm.SelectOp(e.v(op.cond), e.v(op.lhs), e.v(op.rhs))))


class FPToSILowering(RewritePattern):
    """Saturating, as numpy's casts are on x86 for in-range values and never poison."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.FPToSIOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        x = e.v(op.input)
        result = op.result.type
        name = f"llvm.fptosi.sat.{type_suffix(result)}.{type_suffix(x.type)}"
        replace_op(rewriter, op, e(llvm.CallIntrinsicOp(name, [x], [result])))


class IndexCastLowering(RewritePattern):
    """index <-> iN: sign extension or truncation to and from i64, nothing for i64."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.IndexCastOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        x = e.v(op.input)
        target = convert_type(op.result.type)
        w_in, w_out = x.type.width.data, target.width.data  # type: ignore[union-attr]
        if w_in != w_out:
            x = e(llvm.SExtOp(x, target) if w_out > w_in else llvm.TruncOp(x, target))  # type: ignore[assignment]
        replace_op(rewriter, op, x)


class FloorDivSILowering(RewritePattern):
    """floor(a / b) = a sdiv b, minus one where the remainder is nonzero and its sign differs from b's."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.FloorDivSIOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        a, b = e.v(op.lhs), e.v(op.rhs)
        q = e(llvm.SDivOp(a, b))
        r = e(llvm.SRemOp(a, b))
        zero = e.const(0, a.type)
        nonzero = e.icmp(llvm.ICmpPredicateFlag.NE, r, zero)
        signs_differ = e.icmp(llvm.ICmpPredicateFlag.SLT, e(llvm.XOrOp(r, b)), zero)
        fix = e(llvm.AndOp(nonzero, signs_differ))
        replace_op(rewriter, op, e(llvm.SubOp(q, e(llvm.ZExtOp(fix, a.type)))))


class CeilDivSILowering(RewritePattern):
    """ceil(a / b) = floor((a + b - 1) / b) for b > 0 (affine divisors are positive)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.CeilDivSIOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        a, b = e.v(op.lhs), e.v(op.rhs)
        one = e.const(1, a.type)
        num = e(llvm.SubOp(e(llvm.AddOp(a, b)), one))
        replace_op(rewriter, op, e(llvm.SDivOp(num, b)))


class RsqrtLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mathd.RsqrtOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        t = op.result.type
        s = e.intrinsic("llvm.sqrt", [e.v(op.operand)], t)
        one = e.const(1.0, t) if not isinstance(t, VectorType) else e(llvm.ConstantOp(DenseIntOrFPElementsAttr.from_list(t, [1.0]), t))
        replace_op(rewriter, op, e(llvm.FDivOp(one, s)))


class AbsILowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mathd.AbsIOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        t = op.result.type
        value = e(llvm.CallIntrinsicOp(f"llvm.abs.{type_suffix(t)}", [e.v(op.operand), e.const(0, i1)], [t]))
        replace_op(rewriter, op, value)


def arith_math_patterns(fast_math: bool = False) -> list[RewritePattern]:
    """arith and math ops whose lowering needs no external symbol."""
    return [
        FloatBinaryLowering(fast_math),
        FRemFastMath(fast_math),
        IntBinaryLowering(),
        IntrinsicLowering(),
        CastLowering(),
        ConstantLowering(),
        NegfLowering(),
        CmpfLowering(),
        CmpiLowering(),
        SelectLowering(),
        FPToSILowering(),
        IndexCastLowering(),
        FloorDivSILowering(),
        CeilDivSILowering(),
        RsqrtLowering(),
        AbsILowering(),
    ]


def libm_patterns(declarations: Declarations) -> list[RewritePattern]:
    """Transcendentals as libm calls (the CPU only: a GPU has no libm)."""
    return [LibmLowering(declarations)]


# --- memref ---------------------------------------------------------------------------------

NSW = llvm.OverflowAttr([llvm.OverflowFlag.NO_SIGNED_WRAP])


def address(e: Emitter, buf: SSAValue, indices: Sequence[SSAValue]) -> SSAValue:
    """An inbounds GEP on the row-major linearized index (nsw: it is in bounds)."""
    t = buf.type
    assert isinstance(t, MemRefType)
    shape = t.get_shape()
    linear: SSAValue | None = None
    for d, idx in enumerate(indices):
        stride = math.prod(shape[d + 1 :])
        term = e.v(idx)
        if stride != 1:
            term = e.result(llvm_ops.int_binary(llvm.MulOp, term, e.const(stride, i64), NSW))
        linear = term if linear is None else e.result(llvm_ops.int_binary(llvm.AddOp, linear, term, NSW))
    ptr = e.v(buf)
    if linear is None:
        return ptr
    return e(llvm_ops.gep(ptr, linear, t.get_element_type()))  # type: ignore[return-value]


class LoadLowering(RewritePattern):
    """memref.load, and vector.load of a memref: a load at the element's address."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.LoadOp | vector.LoadOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        buffer, t = (op.memref, op.res.type) if isinstance(op, memref.LoadOp) else (op.base, op.result.type)
        load = llvm_ops.load(address(e, buffer, op.indices), t, element_alignment(t))
        if "mlfuse.prefetch" in op.attributes:  # the translation tags it (backend/streaming.py)
            load.attributes["mlfuse.prefetch"] = UnitAttr()
        replace_op(rewriter, op, e(load))


class StoreLowering(RewritePattern):
    """memref.store, and vector.store to a memref: a store at the element's address
    (non-temporal ones are tagged, see backend/streaming.py)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.StoreOp | vector.StoreOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        value, buffer = (op.value, op.memref) if isinstance(op, memref.StoreOp) else (op.vector, op.base)
        nontemporal = op.nontemporal is not None and op.nontemporal.value.data != 0
        e(llvm_ops.store(e.v(value), address(e, buffer, op.indices), element_alignment(value.type), nontemporal))
        replace_op(rewriter, op)


@dataclass
class AllocLowering(RewritePattern):
    """memref.alloc -> aligned_alloc (whose size must be a multiple of the alignment)."""

    declarations: Declarations

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.AllocOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        t = op.memref.type
        nbytes = t.element_count() * abi.element_bytes(t.get_element_type())
        nbytes = max(abi.ALIGNMENT, -(-nbytes // abi.ALIGNMENT) * abi.ALIGNMENT)
        args = [e.const(abi.ALIGNMENT, i64), e.const(nbytes, i64)]
        replace_op(rewriter, op, self.declarations.call(e, op, "aligned_alloc", args, PTR))


@dataclass
class DeallocLowering(RewritePattern):
    declarations: Declarations

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.DeallocOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        self.declarations.call(e, op, "free", [e.v(op.memref)], None)
        replace_op(rewriter, op)


class AllocaLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.AllocaOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        t = op.memref.type
        alloca = llvm.AllocaOp(e.const(t.element_count(), i64), t.get_element_type(), alignment=abi.ALIGNMENT)
        replace_op(rewriter, op, e(alloca))


class GetGlobalLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.GetGlobalOp, rewriter: PatternRewriter) -> None:
        replace_op(rewriter, op, Emitter(rewriter)(llvm.AddressOfOp(op.name_.root_reference, PTR)))


class ViewLowering(RewritePattern):
    """loop.view reinterprets a buffer (same address); memref.view is a byte offset into an i8 buffer."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loop.ViewOp | memref.ViewOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        value = e.v(op.source)
        if isinstance(op, memref.ViewOp):
            value = e(llvm.GEPOp.from_mixed_indices(value, [e.v(op.byte_shift)], i8, inbounds=True))  # type: ignore[assignment]
        replace_op(rewriter, op, value)


class AlignedWindowLowering(RewritePattern):
    """loop.aligned_window: the element's address rounded up to the alignment with
    llvm.ptrmask, which LLVM's known-bits analysis reads (an llvm.assume on the
    rounded address would not reach the vectorized loop's stores); skip is the
    distance in elements. Where LLVM knows the element aligned already, it folds
    skip to 0 and the peeled loop away."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loop.AlignedWindowOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        alignment = op.alignment.value.data
        t = op.source.type
        assert isinstance(t, MemRefType)
        first = address(e, op.source, op.indices)
        # not inbounds: near the end of the buffer the rounded address may lie past it
        ahead = e.result(llvm_ops.gep(first, e.const(alignment - 1, i64), i8, inbounds=False))
        window = e.result(llvm.CallIntrinsicOp("llvm.ptrmask.p0.i64", [ahead, e.const(-alignment, i64)], [PTR]))
        # skip as (-first) mod alignment: its range is then known, and LLVM keeps the peeled loop short
        negated = e.result(llvm_ops.int_binary(llvm.SubOp, e.const(0, i64), e.result(llvm.PtrToIntOp(first))))
        gap = e.result(llvm.AndOp(negated, e.const(alignment - 1, i64)))
        shift = e.const(abi.element_bytes(t.get_element_type()).bit_length() - 1, i64)
        skip = e.result(llvm.LShrOp(gap, shift, is_exact=UnitAttr()))
        casts = [llvm_ops.cast(skip, op.skip.type), llvm_ops.cast(window, op.window.type)]
        rewriter.replace(op, casts, [c.results[0] for c in casts])


class GlobalLowering(RewritePattern):
    """memref.global -> an internal constant byte array (`mlfuse.bytes`: the
    translation writes it in one piece, far cheaper than one attribute per element)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.GlobalOp, rewriter: PatternRewriter) -> None:
        t = op.type
        value = op.initial_value
        if not isinstance(t, MemRefType) or not isinstance(value, DenseIntOrFPElementsAttr):
            return  # reported as left over
        nbytes = t.element_count() * abi.element_bytes(t.get_element_type())
        data = value.data.data
        if t.get_element_type() == i1:
            data = i1_bytes(data)
        if len(data) != nbytes:  # a splat stored once
            data = data * (nbytes // max(1, len(data)))
        from mlfuse.backend.gemm_kernels import PACKED_ATTRS, GemmShape, prepacked_bytes

        size = len(data)
        packed = {k: v for k, v in op.attributes.items() if k in PACKED_ATTRS.values()}
        for operand, key in PACKED_ATTRS.items():  # a GEMM kernel's operand: laid out at translation
            symbol = packed.get(key)
            shape = GemmShape.from_symbol(symbol.data) if isinstance(symbol, StringAttr) else None
            size = prepacked_bytes(shape, operand) if shape is not None else size
        array = llvm.LLVMArrayType(size, i8)
        g = llvm.GlobalOp(array, op.sym_name, llvm.LinkageAttr("internal"), constant=True, alignment=abi.ALIGNMENT)
        # the bytes as they are, not as text: hex took seconds for VGG-11's 530 MB
        g.attributes["mlfuse.bytes"] = DenseIntOrFPElementsAttr(TensorType(i8, [len(data)]), BytesAttr(data))
        g.attributes.update(packed)
        rewriter.replace(op, g)


def i1_bytes(data: bytes) -> bytes:
    """xDSL packs an i1 true as the byte -1 (0xff); LLVM loads an i1 from a byte that holds
    0 or 1, and the loop vectorizer zero-extends the whole byte: a sum of a constant mask's
    i1s cast to i32 came out 255 for each true."""
    return (np.frombuffer(data, np.uint8) != 0).astype(np.uint8).tobytes()


def memref_patterns(declarations: Declarations) -> list[RewritePattern]:
    return [
        LoadLowering(),
        StoreLowering(),
        AllocLowering(declarations),
        DeallocLowering(declarations),
        AllocaLowering(),
        GetGlobalLowering(),
        ViewLowering(),
        AlignedWindowLowering(),
        GlobalLowering(),
    ]


# --- control flow ---------------------------------------------------------------------------


# Innermost loops of this many iterations stay loops in LLVM (see row_loop). Fewer:
# LLVM may unroll them fully, and the SLP vectorizer writes the few vectors well (a
# 14-wide row: 8 + 4 + 2 lanes). More than LLVM's full-unroll threshold (300 at O3,
# trip count times body size) could not be unrolled anyway.
ROW_LOOP_TRIPS = range(17, 301)
# the latch branch of such a loop: to_llvmlite gives it !llvm.loop unroll.disable
KEEP_LOOP = "mlfuse.keep_loop"
# an scf.for that convert-loop-to-scf marks as a row loop although loops run inside it
# (a window reduction's taps, which LLVM unrolls: emit_reduction_and_consumer)
ROW_LOOP = "mlfuse.row_loop"
# an scf.for that convert-loop-to-scf marks as strided (loop_to_scf.strided_around_short):
# around loops that LLVM unrolls fully, stepping no access's last subscript. Its latch
# branch carries NO_VECTORIZE, which the translation makes `llvm.loop.vectorize.width 1`.
STRIDED_LOOP = "mlfuse.strided_loop"
NO_VECTORIZE = "mlfuse.no_vectorize"
# the latch branch of an innermost loop that accumulates a maxnum/minnum (the element's
# bits): the translation gives it `llvm.loop.vectorize.width` of a full vector. LLVM 22's
# loop vectorizer (llvmlite's build has assertions on) aborts the process choosing a
# width for such a reduction of some trip counts ("VPlan cost model and legacy cost
# model disagreed": reduce_max over 105 or 127 columns, reduce_min over 105 or 95);
# with the width given there is nothing to choose.
MINMAX_REDUCTION = "mlfuse.minmax_reduction"
# How many vectors of such a row the loop vectorizer computes side by side. Each output
# vector sums its taps in one chain of dependent FMAs (4 cycles each on Zen 4 and
# Skylake), and LLVM's cost model interleaves no loop body that large: one vector at a
# time, a 5 x 5 depthwise conv ran at an eighth of the FMA throughput.
WINDOW_ROW_INTERLEAVE = 4


def row_loop(for_op: scf.ForOp) -> bool:
    """Whether `for_op` is an innermost loop (or one marked ROW_LOOP) of constant trip
    count in ROW_LOOP_TRIPS.

    LLVM fully unrolls short constant loops before it vectorizes. A depthwise conv's
    28- or 56-wide output rows became straight-line code, 9 taps by 28 rows of it, for
    the SLP vectorizer: MobileNetV2's kernels took 4.1 s of LLVM instead of 1.7 s
    (runtime the same). Kept as a loop, the loop vectorizer takes the row."""
    lb, ub, step = (const_evaluate_operand(v) for v in (for_op.lb, for_op.ub, for_op.step))
    if lb is None or ub is None or step is None:
        return False
    trips = -(-(ub - lb) // step) if step > 0 else 0
    nested = ROW_LOOP not in for_op.attributes and any(isinstance(op, scf.ForOp) for op in for_op.body.walk())
    return trips in ROW_LOOP_TRIPS and len(for_op.body.blocks) == 1 and not nested


def minmax_reduction_bits(for_op: scf.ForOp) -> int | None:
    """The element bits of a maxnum/minnum that this innermost loop accumulates, through
    memory (store(max(load(m), x), m)) or an iteration argument; else None."""
    body = list(for_op.body.walk())
    if any(isinstance(op, scf.ForOp) for op in body):
        return None
    carried = set(for_op.body.block.args[1:])
    for op in body:
        if not isinstance(op, arith.MaxnumfOp | arith.MinnumfOp):
            continue
        loaded = {o.owner.memref for o in op.operands if isinstance(o.owner, memref.LoadOp)}
        stored = {u.operation.memref for u in op.result.uses if isinstance(u.operation, memref.StoreOp)}
        yielded = any(isinstance(u.operation, scf.YieldOp) for u in op.result.uses)
        if loaded & stored or (yielded and carried & set(op.operands)):
            element = op.result.type
            return element.bitwidth if isinstance(element, Float16Type | Float32Type | Float64Type) else None
    return None


class ForToCfLowering(ForLowering):
    """xDSL's scf.for -> cf lowering, with `nsw` on the induction variable's step:
    the loop runs while iv < ub, so the step never wraps, which SCEV relies on.
    The latch of a row loop (row_loop) is marked KEEP_LOOP, that of a STRIDED_LOOP
    NO_VECTORIZE."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, for_op: scf.ForOp, rewriter: PatternRewriter) -> None:
        header = for_op.body.block
        iv = header.args[0]
        keep, strided = row_loop(for_op), STRIDED_LOOP in for_op.attributes
        minmax = minmax_reduction_bits(for_op)
        super().match_and_rewrite(for_op, rewriter)
        for use in list(iv.uses):
            step = use.operation
            latch = [u.operation for u in step.results[0].uses] if isinstance(step, arith.AddiOp) else []
            back_edges = [b for b in latch if isinstance(b, cf.BranchOp) and b.successor is header]
            if back_edges:
                step.properties["overflowFlags"] = arith.IntegerOverflowAttr([arith.IntegerOverflowFlag.NSW])
            if keep:
                mark = IntegerAttr(WINDOW_ROW_INTERLEAVE, 64) if ROW_LOOP in for_op.attributes and WINDOW_ROW_INTERLEAVE > 1 else UnitAttr()
                for branch in back_edges:
                    branch.attributes[KEEP_LOOP] = mark
            if strided:
                for branch in back_edges:
                    branch.attributes[NO_VECTORIZE] = UnitAttr()
            if minmax and not strided:
                for branch in back_edges:
                    branch.attributes[MINMAX_REDUCTION] = IntegerAttr(minmax, 64)


def control_flow_patterns() -> list[RewritePattern]:
    """scf.for and scf.if -> cf, applied before the conversion (scf.while has no lowering)."""
    return [IfLowering(), ForToCfLowering()]


class BranchLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: cf.BranchOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        branch = llvm_ops.br(op.successor, [e.v(a) for a in op.arguments])
        for mark in (KEEP_LOOP, NO_VECTORIZE, MINMAX_REDUCTION):
            if mark in op.attributes:
                branch.attributes[mark] = op.attributes[mark]
        rewriter.replace(op, branch)


class CondBranchLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: cf.ConditionalBranchOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        then_args = [e.v(a) for a in op.then_arguments]
        else_args = [e.v(a) for a in op.else_arguments]
        rewriter.replace(op, llvm_ops.cond_br(e.v(op.cond), op.then_block, then_args, op.else_block, else_args))


def cf_patterns() -> list[RewritePattern]:
    return [BranchLowering(), CondBranchLowering()]


# --- functions ---------------------------------------------------------------------------------


def buffer_alignment(value: SSAValue, outputs: int = abi.ALIGNMENT) -> int:
    """Bytes to which a memref's address is known to be aligned (1 when unknown); an
    entry's outputs are taken to be `outputs`-byte aligned, its arena ALIGNMENT."""
    if isinstance(value, BlockArgument):
        return _argument_alignment(value, outputs)
    op = value.owner
    if isinstance(op, memref.AllocOp | memref.AllocaOp):
        return abi.ALIGNMENT
    if isinstance(op, loop.ViewOp):
        return buffer_alignment(op.source, outputs)
    if isinstance(op, memref.ViewOp):
        shift = op.byte_shift.owner
        if isinstance(shift, arith.ConstantOp) and isinstance(shift.value, IntegerAttr):
            offset = shift.value.value.data
            base = buffer_alignment(op.source, outputs)
            return base if offset % base == 0 else offset & -offset
    return 1


def _argument_alignment(value: BlockArgument, outputs: int) -> int:
    fn = value.block.parent_op()
    if not (isinstance(fn, func.FuncOp) and fn.body.blocks and value.block is fn.body.blocks[0]):
        return 1
    n_inputs = fn.attributes.get(abi.NUM_INPUTS_ATTR)
    if not isinstance(n_inputs, IntegerAttr) or value.index < n_inputs.value.data:
        return 1  # an input: whatever numpy gave
    if abi.ARENA_ATTR in fn.attributes and value.index == len(value.block.args) - 1:
        return abi.ALIGNMENT  # the arena, allocated by the runtime
    return outputs  # an output (see mlfuse.abi)


def parameter_alignment(module: ModuleOp, outputs: int = abi.ALIGNMENT) -> dict[str, list[list[int]]]:
    """The proven byte alignment of every function's parameters (analysis on the
    memref level, before conversion): first what the function itself knows (an entry's
    outputs and arena), then, for the callees of loop.parallel_call, the minimum over
    the call sites of (lo, hi, buffers...), and for private functions (which nothing
    outside the module calls), the minimum over their func.call sites as well."""
    proven: dict[str, list[list[int]]] = {}
    calls: dict[str, list[int]] = {}
    private = {
        fn.sym_name.data
        for fn in module.ops
        if isinstance(fn, func.FuncOp) and fn.sym_visibility is not None and fn.sym_visibility.data == "private"
    }
    for fn in module.ops:
        if not isinstance(fn, func.FuncOp) or not fn.body.blocks:
            continue
        proven[fn.sym_name.data] = [[buffer_alignment(a, outputs) for a in fn.body.block.args]]
        for op in fn.walk():
            if isinstance(op, loop.ParallelCallOp):
                known = [1, 1] + [buffer_alignment(a, outputs) for a in op.args]
            elif isinstance(op, func.CallOp) and op.callee.string_value() in private:
                known = [buffer_alignment(a, outputs) for a in op.arguments]
            else:
                continue
            seen = calls.setdefault(op.callee.string_value(), known)
            calls[op.callee.string_value()] = [min(a, b) for a, b in zip(seen, known)]
    for name, alignment in calls.items():
        if name in proven:
            proven[name].append(alignment)
    return proven


def with_alignment(fn: llvm.FuncOp, alignment: list[int]) -> None:
    """Give the pointer parameters of `fn` their proven alignment (llvm.align)."""
    attrs = [dict(d.data) for d in fn.arg_attrs.data] if fn.arg_attrs else [{} for _ in alignment]
    for k, (t, a) in enumerate(zip(fn.function_type.inputs.data, alignment)):
        if isinstance(t, llvm.LLVMPointerType) and a > 1:
            attrs[k]["llvm.align"] = IntegerAttr(a, i64)
    fn.arg_attrs = ArrayAttr([DictionaryAttr(d) for d in attrs])


@dataclass
class FuncLowering(RewritePattern):
    """func.func -> llvm.func: buffer parameters are noalias (the runtime never
    passes overlapping buffers) and carry their proven alignment; an entry's arena
    size becomes a global the runtime reads (mlfuse.abi)."""

    alignment: dict[str, list[list[int]]] = field(default_factory=dict)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, fn: func.FuncOp, rewriter: PatternRewriter) -> None:
        name = fn.sym_name.data
        arg_types = [convert_type(t) for t in fn.function_type.inputs.data]
        outputs = [convert_type(t) for t in fn.function_type.outputs.data]
        ftype = llvm.LLVMFunctionType(arg_types, outputs[0] if outputs else None)
        private = fn.sym_visibility is not None and fn.sym_visibility.data == "private"
        linkage = llvm.LinkageAttr("internal" if private else "external")
        if not fn.body.blocks:
            rewriter.replace(fn, llvm.FuncOp(name, ftype, linkage=linkage))
            return
        convert_block_signatures(rewriter, fn.body)
        new_fn = llvm.FuncOp(name, ftype, linkage=linkage, body=rewriter.move_region_contents_to_new_regions(fn.body))
        new_fn.arg_attrs = ArrayAttr(
            [DictionaryAttr({"llvm.noalias": UnitAttr()} if isinstance(t, llvm.LLVMPointerType) else {}) for t in arg_types]
        )
        for alignment in self.alignment.get(name, []):
            with_alignment(new_fn, alignment)
        arena = fn.attributes.get(abi.ARENA_ATTR)
        if isinstance(arena, IntegerAttr):
            value = IntegerAttr(arena.value.data, i64)
            rewriter.insert(llvm.GlobalOp(i64, abi.arena_symbol(name), "weak_odr", constant=True, value=value), InsertPoint.before(fn))
        rewriter.replace(fn, new_fn)


class ReturnLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.ReturnOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        rewriter.replace(op, llvm.ReturnOp(e.v(op.arguments[0]) if op.arguments else None))


class CallLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.CallOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        result = convert_type(op.res[0].type) if op.res else None
        call = e(llvm.CallOp(op.callee.string_value(), *[e.v(a) for a in op.arguments], return_type=result))
        replace_op(rewriter, op, call)


def func_patterns(alignment: dict[str, list[list[int]]] | None = None) -> list[RewritePattern]:
    """func.func/return/call; `alignment` as computed by `parameter_alignment`."""
    return [FuncLowering(alignment or {}), ReturnLowering(), CallLowering()]


# --- driver ---------------------------------------------------------------------------------------


def apply_patterns(root: ModuleOp | Region, patterns: list[RewritePattern]) -> None:
    """Apply `patterns` greedily to everything under `root` (dead ops are kept: the
    conversion changes no semantics, and DCE is LLVM's job)."""
    walker = PatternRewriteWalker(TypeDispatchApplier(patterns))
    if isinstance(root, ModuleOp):
        walker.rewrite_module(root)
    else:
        walker.rewrite_region(root)


class TypeDispatchApplier(RewritePattern):
    """xDSL's GreedyRewritePatternApplier(patterns, dce_enabled=False), asking each op only
    the patterns that can match its type: the first that rewrites it wins, in list order.

    A pattern written with `@op_type_rewrite_pattern` matches only its annotated op types
    (its wrapper checks `isinstance` first), so it is skipped for other types; any other
    pattern is asked about every op. Asking all of them was a third of convert-to-llvm
    (MobileNetV2: 1.3M pattern calls for 106k ops)."""

    def __init__(self, patterns: Sequence[RewritePattern]):
        self.patterns = list(patterns)
        self.matches = [matched_op_types(p) for p in self.patterns]
        self.by_type: dict[type[Operation], list[RewritePattern]] = {}

    def for_type(self, t: type[Operation]) -> list[RewritePattern]:
        found = self.by_type.get(t)
        if found is None:
            found = [p for p, types in zip(self.patterns, self.matches) if types is None or issubclass(t, types)]
            self.by_type[t] = found
        return found

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        for pattern in self.for_type(type(op)):
            pattern.match_and_rewrite(op, rewriter)
            if rewriter.has_done_action:
                return


def matched_op_types(pattern: RewritePattern) -> tuple[type[Operation], ...] | None:
    """The op types `pattern` can rewrite: those it declares in `op_types` (patterns that
    look their op up in a table), or those of xDSL's `op_type_rewrite_pattern` wrapper
    (its closure holds them); None: any op."""
    declared = getattr(pattern, "op_types", None)
    if declared is not None:
        return tuple(declared)
    method = getattr(type(pattern).match_and_rewrite, "__func__", type(pattern).match_and_rewrite)
    code, cells = getattr(method, "__code__", None), getattr(method, "__closure__", None)
    if code is None or not cells or "expected_type" not in code.co_freevars or not method.__qualname__.startswith(
        "op_type_rewrite_pattern."
    ):
        return None
    expected = cells[code.co_freevars.index("expected_type")].cell_contents
    types = get_args(expected) if get_origin(expected) in (Union, UnionType) else (expected,)
    return types if all(isinstance(t, type) and issubclass(t, Operation) for t in types) else None


def rewrite_each(ops: Sequence[Operation], patterns: Sequence[RewritePattern]) -> bool:
    """The first of `patterns` that matches on each of `ops` still in the IR; whether any
    did. Passes that know their ops from a walk use it instead of a rewrite walker, whose
    worklist of every op cost a tenth of MobileNetV3-small's convert-to-llvm."""
    changed = False
    for op in ops:
        if op.parent is None:  # removed with an earlier op's rewrite
            continue
        rewriter = PatternRewriter(op)
        for pattern in patterns:
            pattern.match_and_rewrite(op, rewriter)
            if rewriter.has_done_action:
                changed = True
                break
    return changed


def lower_products(module: ModuleOp, patterns: Sequence[RewritePattern]) -> None:
    """`patterns` on each loop.gemm of `module`."""
    rewrite_each([op for op in module.walk() if isinstance(op, loop.GemmOp)], patterns)


def reconcile_casts(root: ModuleOp | Region) -> None:
    """Remove the cast pairs the patterns left at type boundaries: xDSL's reconcile
    pattern on each cast, then again on the casts still there until a round removes none."""
    pattern = ReconcileUnrealizedCastsPattern()
    casts = [op for op in root.walk() if isinstance(op, UnrealizedConversionCastOp)]
    while rewrite_each(casts, [pattern]):
        casts = [cast for cast in casts if cast.parent is not None]


def check_converted(root: Operation) -> None:
    """Report the first op that no pattern lowered, at its location (casts are left
    only around such ops)."""
    for op in root.walk():
        if op is root or isinstance(op, ModuleOp | UnrealizedConversionCastOp) or op.dialect_name() == "llvm":
            continue
        raise Diagnostic(f"cannot lower '{op.name}' to LLVM", location_of(op))


def check_input(module: ModuleOp) -> None:
    """Located diagnostics for what convert-to-llvm cannot take, before it changes anything."""
    from mlfuse.conversion.gemm_epilogue import kernel_epilogue
    for op in module.ops:
        if isinstance(op, func.FuncOp):
            name, ftype = op.sym_name.data, op.function_type
            if any(isinstance(t, TensorType) for t in (*ftype.inputs.data, *ftype.outputs.data)):
                raise Diagnostic(f"@{name} works on tensors: bufferize it first (convert-graph-to-loop)", location_of(op))
            if len(ftype.outputs.data) > 1:
                raise Diagnostic(f"@{name}: functions with several results are not lowered to LLVM", location_of(op))
        elif not isinstance(op, memref.GlobalOp | llvm.FuncOp | llvm.GlobalOp):
            raise Diagnostic(f"cannot lower top-level '{op.name}' to LLVM", location_of(op))
    for op in module.walk():
        if type(op) in LIBM and type(op.results[0].type) not in LIBM_SUFFIX:
            raise Diagnostic(f"'{op.name}' on {op.results[0].type} has no CPU lowering", location_of(op))
        if isinstance(op, memref.GlobalOp) and not isinstance(op.initial_value, DenseIntOrFPElementsAttr):
            raise Diagnostic(f"memref.global @{op.sym_name.data} needs a dense initial value", location_of(op))
        if isinstance(op, loop.GemmOp) and op.epilogue is not None and kernel_epilogue(op) is None:
            raise Diagnostic(
                "loop.gemm's epilogue is not one the generated kernel applies (arith's float ops, f32 exp, tanh"
                " and erf, and constants; operands that step 0 or 1 along C's columns)",
                location_of(op),
            )


def cpu_patterns(
    module: ModuleOp, fast_math: bool = False, gemm: str = "generated", output_alignment: int = abi.ALIGNMENT
) -> list[RewritePattern]:
    """Every pattern convert-to-llvm applies to a module for the CPU."""
    from mlfuse.conversion.llvm_runtime import constant_operand_products, gemm_patterns, omp_runtime_patterns

    declarations = Declarations()
    packed = constant_operand_products(module) if gemm == "generated" else None  # BLAS reads them as they are
    return [
        *func_patterns(parameter_alignment(module, output_alignment)),
        *cf_patterns(),
        *arith_math_patterns(fast_math),
        *libm_patterns(declarations),
        *memref_patterns(declarations),
        *omp_runtime_patterns(declarations),
        *gemm_patterns(declarations, gemm, packed),
    ]


def convert_to_llvm(
    module: ModuleOp, fast_math: bool = False, gemm: str = "generated", output_alignment: int = abi.ALIGNMENT
) -> None:
    """Lower a module of func/arith/math/scf/memref/loop ops to the llvm dialect; entry
    outputs are assumed `output_alignment`-byte aligned."""
    from mlfuse.conversion.llvm_runtime import GemmLowering

    check_input(module)
    patterns = cpu_patterns(module, fast_math, gemm, output_alignment)  # the alignment analysis reads memrefs
    apply_patterns(module, [*control_flow_patterns(), MultiplyAddContraction()])
    # products first: a loop.gemm's epilogue region is read as arith (its symbol), before arith is lowered
    lower_products(module, [p for p in patterns if isinstance(p, GemmLowering)])
    apply_patterns(module, patterns)
    reconcile_casts(module)
    check_converted(module)
