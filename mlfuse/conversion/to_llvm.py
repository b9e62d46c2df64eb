"""func/arith/math/scf/memref/loop -> xDSL's `llvm` dialect.

xDSL 0.74 has no conversion of these dialects to `llvm` that LLVM can vectorize
(its ptr lowering computes addresses with ptrtoint arithmetic), so this module
translates a function in one walk, keeping a value map:

- a memref of static shape is a bare `!llvm.ptr` (address space = the memref's
  integer memory space); loads and stores are an inbounds GEP on the row-major
  linearized index, the form LLVM's loop vectorizer understands;
- `scf.for` becomes a header/body/exit CFG with block arguments (phis);
- `memref.alloc` calls `aligned_alloc`, `memref.dealloc` calls `free`;
- `memref.global` becomes an `llvm.mlir.global` holding the constant's bytes;
- `loop.parallel_call` packs its arguments into a stack array and calls
  libgomp's `GOMP_parallel` with a generated wrapper that computes each thread's
  sub-range (see `emit_parallel_call`);
- f32 transcendentals should have been expanded by `expand-math`; what is left
  (f64, f16) calls libm.

Function arguments that are buffers are `noalias`: the runtime guarantees that
outputs do not overlap inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.dialects import arith, func, llvm, memref, scf
from xdsl.dialects import math as mathd
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.dialects.builtin import (
    ArrayAttr,
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
    VectorType,
    i1,
    i8,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from mlfuse.diagnostics import Diagnostic, location_of
from mlfuse.dialects import loop

PTR = llvm.LLVMPointerType()


def memory_space(t: MemRefType) -> int:
    space = t.memory_space
    if isinstance(space, IntegerAttr):
        return space.value.data
    return 0


def convert_type(t: Attribute) -> Attribute:
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
    llvm.FRemOp: llvm.FRemOp,  # graph.rem's scalar form (xDSL's arith has no remf)
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
}
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
}
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
class ModuleLowering:
    module: ModuleOp
    new_ops: list[Operation] = field(default_factory=list)
    declared: dict[str, llvm.LLVMFunctionType] = field(default_factory=dict)
    fast_math: bool = False
    gemm: str = "generated"  # loop.gemm: "generated" kernels (backend/gemm_kernels.py) or "blas"
    # proven byte alignment of the pointer parameters of outlined kernels (min over call sites)
    param_alignment: dict[str, list[int]] = field(default_factory=dict)

    def declare(self, name: str, result: Attribute | None, args: list[Attribute]) -> None:
        if name not in self.declared:
            ftype = llvm.LLVMFunctionType(args, result)
            self.declared[name] = ftype
            self.new_ops.append(llvm.FuncOp(name, ftype, linkage=llvm.LinkageAttr("external")))


class FunctionLowering:
    """Translates one func.func body into an llvm.func body."""

    def __init__(self, ml: ModuleLowering, region: Region):
        self.ml = ml
        self.region = region
        self.values: dict[SSAValue, SSAValue] = {}
        self.block: Block = region.blocks[0] if region.blocks else Block()
        self.b = Builder(InsertPoint.at_end(self.block))

    # --- helpers ----------------------------------------------------------------------

    def v(self, value: SSAValue) -> SSAValue:
        return self.values[value]

    def emit(self, op: Operation) -> SSAValue | None:
        self.b.insert(op)
        return op.results[0] if op.results else None

    def const(self, value: int | float, t: Attribute) -> SSAValue:
        attr = FloatAttr(value, t) if not isinstance(t, IntegerType) else IntegerAttr(value, t)
        return self.emit(llvm.ConstantOp(attr, t))

    def intrinsic(self, name: str, args: list[SSAValue], result: Attribute) -> SSAValue:
        return self.emit(llvm.CallIntrinsicOp(f"{name}.{type_suffix(result)}", args, [result]))

    def call(self, name: str, args: list[SSAValue], result: Attribute | None) -> SSAValue | None:
        self.ml.declare(name, result, [a.type for a in args])
        return self.emit(llvm.CallOp(name, *args, return_type=result))

    def new_block(self, arg_types=()) -> Block:
        block = Block(arg_types=arg_types)
        self.region.add_block(block)
        return block

    def set_block(self, block: Block) -> None:
        self.block = block
        self.b = Builder(InsertPoint.at_end(block))

    # --- ops -----------------------------------------------------------------------------

    def lower_block_ops(self, ops) -> None:
        for op in ops:
            self.lower_op(op)

    def lower_op(self, op: Operation) -> None:
        handler = self.handler(op)
        if handler is None:
            raise Diagnostic(f"cannot lower '{op.name}' to LLVM", location_of(op))
        result = handler(op)
        if result is not None and op.results:
            self.values[op.results[0]] = result

    def handler(self, op: Operation) -> Callable | None:
        t = type(op)
        if t in FLOAT_BINARY:
            return lambda o: self.emit(FLOAT_BINARY[t](self.v(o.lhs), self.v(o.rhs), fastmath_of(o, self.ml.fast_math)))
        if t in INT_BINARY:
            return lambda o: self.emit(INT_BINARY[t](self.v(o.lhs), self.v(o.rhs)))
        if t in BINARY_INTRINSICS:
            return lambda o: self.intrinsic(BINARY_INTRINSICS[t], [self.v(x) for x in o.operands], convert_type(o.results[0].type))
        if t in UNARY_INTRINSICS:
            return lambda o: self.intrinsic(UNARY_INTRINSICS[t], [self.v(o.operands[0])], o.results[0].type)
        if t in CASTS:
            return lambda o: self.emit(CASTS[t](self.v(o.operands[0]), convert_type(o.results[0].type)))
        if t in LIBM:
            return self.lower_libm
        return getattr(self, f"lower_{t.__name__}", None) if t.__module__ in _LOWERED_MODULES else None

    def lower_libm(self, op: Operation) -> SSAValue:
        t = op.results[0].type
        suffix = {Float32Type: "f", Float64Type: ""}.get(type(t))
        if suffix is None:
            raise Diagnostic(f"'{op.name}' on {t} has no CPU lowering", location_of(op))
        return self.call(LIBM[type(op)] + suffix, [self.v(x) for x in op.operands], t)

    # arith
    def lower_ConstantOp(self, op: arith.ConstantOp) -> SSAValue:
        t = convert_type(op.result.type)
        value = op.value
        if isinstance(value, IntegerAttr) and isinstance(op.result.type, IndexType):
            value = IntegerAttr(value.value.data, i64)
        return self.emit(llvm.ConstantOp(value, t))

    def lower_NegfOp(self, op: arith.NegfOp) -> SSAValue:
        return self.emit(llvm.FNegOp(self.v(op.operand)))

    def lower_CmpfOp(self, op: arith.CmpfOp) -> SSAValue:
        pred = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
        return self.emit(llvm.FCmpOp(self.v(op.lhs), self.v(op.rhs), pred))

    def lower_CmpiOp(self, op: arith.CmpiOp) -> SSAValue:
        pred = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
        flag = llvm.ICmpPredicateFlag(pred)
        return self.emit(llvm.ICmpOp(self.v(op.lhs), self.v(op.rhs), IntegerAttr(flag.to_int(), i64)))

    def lower_SelectOp(self, op: arith.SelectOp) -> SSAValue:
        return self.emit(llvm.SelectOp(self.v(op.cond), self.v(op.lhs), self.v(op.rhs)))

    def lower_FPToSIOp(self, op: arith.FPToSIOp) -> SSAValue:
        x = self.v(op.input)
        result = op.result.type
        return self.emit(
            llvm.CallIntrinsicOp(f"llvm.fptosi.sat.{type_suffix(result)}.{type_suffix(x.type)}", [x], [result])
        )

    def lower_IndexCastOp(self, op: arith.IndexCastOp) -> SSAValue:
        x = self.v(op.input)
        target = convert_type(op.result.type)
        w_in, w_out = x.type.width.data, target.width.data  # type: ignore[union-attr]
        if w_in == w_out:
            return x
        return self.emit(llvm.SExtOp(x, target) if w_out > w_in else llvm.TruncOp(x, target))

    def lower_FloorDivSIOp(self, op: arith.FloorDivSIOp) -> SSAValue:
        a, b = self.v(op.lhs), self.v(op.rhs)
        q = self.emit(llvm.SDivOp(a, b))
        r = self.emit(llvm.SRemOp(a, b))
        zero = self.const(0, a.type)
        nonzero = self.emit(llvm.ICmpOp(r, zero, IntegerAttr(llvm.ICmpPredicateFlag.NE.to_int(), i64)))
        signs_differ = self.emit(llvm.ICmpOp(self.emit(llvm.XOrOp(r, b)), zero, IntegerAttr(llvm.ICmpPredicateFlag.SLT.to_int(), i64)))
        fix = self.emit(llvm.AndOp(nonzero, signs_differ))
        return self.emit(llvm.SubOp(q, self.emit(llvm.ZExtOp(fix, a.type))))

    def lower_CeilDivSIOp(self, op: arith.CeilDivSIOp) -> SSAValue:
        a, b = self.v(op.lhs), self.v(op.rhs)
        one = self.const(1, a.type)
        # ceil(a / b) = floor((a + b - 1) / b) for b > 0 (affine divisors are positive)
        num = self.emit(llvm.SubOp(self.emit(llvm.AddOp(a, b)), one))
        q = self.emit(llvm.SDivOp(num, b))
        return q

    # math
    def lower_RsqrtOp(self, op: mathd.RsqrtOp) -> SSAValue:
        t = op.result.type
        s = self.intrinsic("llvm.sqrt", [self.v(op.operand)], t)
        return self.emit(llvm.FDivOp(self.const(1.0, t) if not isinstance(t, VectorType) else self._splat(1.0, t), s))

    def _splat(self, v: float, t: VectorType) -> SSAValue:
        return self.emit(llvm.ConstantOp(DenseIntOrFPElementsAttr.from_list(t, [v]), t))

    def lower_AbsIOp(self, op: mathd.AbsIOp) -> SSAValue:
        t = op.result.type
        return self.emit(llvm.CallIntrinsicOp(f"llvm.abs.{type_suffix(t)}", [self.v(op.operand), self.const(0, i1)], [t]))

    def lower_FmaOp(self, op: mathd.FmaOp) -> SSAValue:
        return self.intrinsic("llvm.fma", [self.v(x) for x in op.operands], op.results[0].type)

    # memref
    def address(self, buf: SSAValue, indices) -> SSAValue:
        t = buf.type
        assert isinstance(t, MemRefType)
        shape = t.get_shape()
        linear: SSAValue | None = None
        for d, idx in enumerate(indices):
            stride = math.prod(shape[d + 1 :])
            term = self.v(idx)
            if stride != 1:
                term = self.emit(llvm.MulOp(term, self.const(stride, i64), overflow=llvm.OverflowAttr([llvm.OverflowFlag.NO_SIGNED_WRAP])))
            linear = term if linear is None else self.emit(llvm.AddOp(linear, term, overflow=llvm.OverflowAttr([llvm.OverflowFlag.NO_SIGNED_WRAP])))
        if linear is None:
            return self.v(buf)
        ptr = self.v(buf)
        return self.emit(llvm.GEPOp.from_mixed_indices(ptr, [linear], t.get_element_type(), result_type=ptr.type, inbounds=True))

    def lower_LoadOp(self, op: memref.LoadOp) -> SSAValue:
        t = op.res.type
        load = llvm.LoadOp(self.address(op.memref, op.indices), t, alignment=element_alignment(t))
        if "mlfuse.prefetch" in op.attributes:  # the translation tags it (backend/streaming.py)
            load.attributes["mlfuse.prefetch"] = UnitAttr()
        return self.emit(load)

    def lower_StoreOp(self, op: memref.StoreOp) -> None:
        t = op.value.type
        nontemporal = op.nontemporal is not None and op.nontemporal.value.data != 0
        self.emit(llvm.StoreOp(
            self.v(op.value), self.address(op.memref, op.indices), alignment=element_alignment(t), nontemporal=nontemporal
        ))

    def lower_AllocOp(self, op: memref.AllocOp) -> SSAValue:
        t = op.memref.type
        nbytes = t.element_count() * element_bytes(t.get_element_type())
        nbytes = max(64, -(-nbytes // 64) * 64)  # aligned_alloc wants a multiple of the alignment
        return self.call("aligned_alloc", [self.const(64, i64), self.const(nbytes, i64)], PTR)

    def lower_AllocaOp(self, op: memref.AllocaOp) -> SSAValue:
        t = op.memref.type
        return self.emit(llvm.AllocaOp(self.const(t.element_count(), i64), t.get_element_type(), alignment=64))

    def lower_DeallocOp(self, op: memref.DeallocOp) -> None:
        self.call("free", [self.v(op.memref)], None)

    def lower_GetGlobalOp(self, op: memref.GetGlobalOp) -> SSAValue:
        return self.emit(llvm.AddressOfOp(op.name_.root_reference, PTR))

    def lower_ViewOp(self, op: loop.ViewOp | memref.ViewOp) -> SSAValue:
        if isinstance(op, memref.ViewOp):  # a byte-offset slice of an i8 buffer
            return self.emit(llvm.GEPOp.from_mixed_indices(self.v(op.source), [self.v(op.byte_shift)], i8, inbounds=True))
        return self.v(op.source)

    # scf
    def lower_ForOp(self, op: scf.ForOp) -> None:
        lb, ub, step = self.v(op.lb), self.v(op.ub), self.v(op.step)
        inits = [self.v(x) for x in op.iter_args]
        carried = [convert_type(x.type) for x in op.iter_args]
        header = self.new_block([i64, *carried])
        body = self.new_block()
        exit_ = self.new_block(carried)
        self.emit(llvm.BrOp(header, lb, *inits))
        self.set_block(header)
        iv, *acc = header.args
        cond = self.emit(llvm.ICmpOp(iv, ub, IntegerAttr(llvm.ICmpPredicateFlag.SLT.to_int(), i64)))
        self.emit(llvm.CondBrOp(cond, body, [], exit_, acc))
        self.set_block(body)
        body_block = op.body.block
        self.values[body_block.args[0]] = iv
        for arg, value in zip(body_block.args[1:], acc):
            self.values[arg] = value
        for inner in body_block.ops:
            if isinstance(inner, scf.YieldOp):
                nxt = self.emit(llvm.AddOp(iv, step, overflow=llvm.OverflowAttr([llvm.OverflowFlag.NO_SIGNED_WRAP])))
                self.emit(llvm.BrOp(header, nxt, *[self.v(x) for x in inner.arguments]))
                break
            self.lower_op(inner)
        self.set_block(exit_)
        for res, arg in zip(op.results, exit_.args):
            self.values[res] = arg

    def lower_IfOp(self, op: scf.IfOp) -> None:
        result_types = [convert_type(r.type) for r in op.results]
        then_b, else_b, join = self.new_block(), self.new_block(), self.new_block(result_types)
        self.emit(llvm.CondBrOp(self.v(op.cond), then_b, [], else_b, []))
        for region, block in ((op.true_region, then_b), (op.false_region, else_b)):
            self.set_block(block)
            yielded: list[SSAValue] = []
            if region.blocks:
                for inner in region.block.ops:
                    if isinstance(inner, scf.YieldOp):
                        yielded = [self.v(x) for x in inner.arguments]
                        break
                    self.lower_op(inner)
            self.emit(llvm.BrOp(join, *yielded))
        self.set_block(join)
        for res, arg in zip(op.results, join.args):
            self.values[res] = arg

    # func
    def lower_ReturnOp(self, op: func.ReturnOp) -> None:
        self.emit(llvm.ReturnOp(self.v(op.arguments[0]) if op.arguments else None))

    def lower_CallOp(self, op: func.CallOp) -> SSAValue | None:
        result = convert_type(op.res[0].type) if op.res else None
        return self.emit(llvm.CallOp(op.callee.string_value(), *[self.v(a) for a in op.arguments], return_type=result))

    # loop
    def lower_ParallelCallOp(self, op: loop.ParallelCallOp) -> None:
        emit_parallel_call(self, op)

    def lower_GemmOp(self, op: loop.GemmOp) -> None:
        emit_gemm_call(self, op)


_LOWERED_MODULES = {arith.__name__, mathd.__name__, memref.__name__, scf.__name__, func.__name__, loop.__name__}


def element_bytes(t: Attribute) -> int:
    if isinstance(t, IntegerType):
        return max(1, t.width.data // 8)
    return {Float16Type: 2, Float32Type: 4, Float64Type: 8}.get(type(t), 2)


def element_alignment(t: Attribute) -> int:
    return element_bytes(t.get_element_type() if isinstance(t, VectorType) else t)


def emit_parallel_call(fl: FunctionLowering, op: loop.ParallelCallOp) -> None:
    grain = op.grain.value.data if op.grain is not None else 1
    callee = op.callee.string_value()
    # the callee's (lo, hi, buffers...) may assume what every call site guarantees
    known = [1, 1] + [buffer_alignment(a) for a in op.args]
    seen = fl.ml.param_alignment.setdefault(callee, known)
    fl.ml.param_alignment[callee] = [min(a, b) for a, b in zip(seen, known)]
    emit_team_call(fl, callee, op.trip_count.value.data, grain, [fl.v(a) for a in op.args])


# The runtime (mlfuse.api) passes outputs and the arena 64-byte aligned to an entry
# function (one with `mlfuse.num_inputs`); inputs may have any alignment.
ENTRY_ALIGNMENT = 64


def buffer_alignment(value: SSAValue) -> int:
    """Bytes to which a memref's address is known to be aligned (1 when unknown)."""
    if isinstance(value, BlockArgument):
        fn = value.block.parent_op()
        if isinstance(fn, func.FuncOp) and fn.body.blocks and value.block is fn.body.blocks[0]:
            n_inputs = fn.attributes.get("mlfuse.num_inputs")
            if isinstance(n_inputs, IntegerAttr) and value.index >= n_inputs.value.data:
                return ENTRY_ALIGNMENT
        return 1
    op = value.owner
    if isinstance(op, memref.AllocOp | memref.AllocaOp):
        return 64
    if isinstance(op, loop.ViewOp):
        return buffer_alignment(op.source)
    if isinstance(op, memref.ViewOp):
        shift = op.byte_shift.owner
        if isinstance(shift, arith.ConstantOp) and isinstance(shift.value, IntegerAttr):
            offset = shift.value.value.data
            base = buffer_alignment(op.source)
            return base if offset % base == 0 else offset & -offset
    return 1


def with_alignment(fn: llvm.FuncOp, alignment: list[int]) -> None:
    """Give the pointer parameters of `fn` their proven alignment (llvm.align)."""
    attrs = [dict(d.data) for d in fn.arg_attrs.data] if fn.arg_attrs else [{} for _ in alignment]
    for k, (t, a) in enumerate(zip(fn.function_type.inputs.data, alignment)):
        if isinstance(t, llvm.LLVMPointerType) and a > 1:
            attrs[k]["llvm.align"] = IntegerAttr(a, i64)
    fn.arg_attrs = ArrayAttr([DictionaryAttr(d) for d in attrs])


def emit_team_call(fl: FunctionLowering, callee: str, trip: int, grain: int, args: list[SSAValue]) -> None:
    """Run `@callee(lo, hi, args...)` over [0, trip) on libgomp's thread team.

    The arguments travel in an array of 8-byte slots. The wrapper
    `@callee__omp(ctx)` runs on every thread and takes chunks of [0, trip) from
    libgomp's guided schedule (`schedule(guided, grain)` in OpenMP terms): large
    chunks first, shrinking to `grain`. A static split makes every kernel wait for
    its last thread, and on a shared machine a thread that slept through an idle
    gap can start late (bench: row_sum at 65536x1024, 2 threads, 50 ms idle before
    each call, 1.19x faster guided than static; equal when calls follow each
    other). Iterations are independent, so which thread runs a chunk never changes
    a result. The team is no larger than trip / grain, and a single-thread call
    skips libgomp entirely.
    """
    ml = fl.ml
    # One pointer-sized slot per argument; indices travel as inttoptr'd pointers
    # (llvmlite types its GEPs, so every slot has the one type `ptr`).
    slots = fl.emit(llvm.AllocaOp(fl.const(max(1, len(args)), i64), PTR, alignment=8))
    for k, a in enumerate(args):
        slot = fl.emit(llvm.GEPOp.from_mixed_indices(slots, [k], PTR, inbounds=True))
        value = a if isinstance(a.type, llvm.LLVMPointerType) else fl.emit(llvm.IntToPtrOp(a, PTR))
        fl.emit(llvm.StoreOp(value, slot, alignment=8))

    wrapper = f"{callee}__omp"
    if wrapper not in ml.declared:  # one wrapper per callee (a GEMM shape may be called twice)
        ml.declared[wrapper] = llvm.LLVMFunctionType([PTR], None)
        ml.new_ops.append(make_omp_wrapper(ml, wrapper, callee, [a.type for a in args], trip, grain))

    # nthreads = clamp(min(max_threads, ceil(trip / grain)), 1, ...)
    ml.declare("omp_get_max_threads", i32, [])
    ml.declare("GOMP_parallel", None, [PTR, PTR, i32, i32])
    max_threads = fl.emit(llvm.CallOp("omp_get_max_threads", return_type=i32))
    # omp_get_max_threads is an i32: past 2^31 chunks, "more chunks than threads" is all that matters
    useful = fl.const(min(max(1, -(-trip // grain)), 2**31 - 1), i32)
    fewer = fl.emit(llvm.ICmpOp(useful, max_threads, IntegerAttr(llvm.ICmpPredicateFlag.SLT.to_int(), i64)))
    nthreads = fl.emit(llvm.SelectOp(fewer, useful, max_threads))
    single = fl.emit(llvm.ICmpOp(nthreads, fl.const(1, i32), IntegerAttr(llvm.ICmpPredicateFlag.SLE.to_int(), i64)))
    serial, team, join = fl.new_block(), fl.new_block(), fl.new_block()
    fl.emit(llvm.CondBrOp(single, serial, [], team, []))
    fl.set_block(serial)
    fl.emit(llvm.CallOp(callee, fl.const(0, i64), fl.const(trip, i64), *args))
    fl.emit(llvm.BrOp(join))
    fl.set_block(team)
    fn_ptr = fl.emit(llvm.AddressOfOp(wrapper, PTR))
    fl.emit(llvm.CallOp("GOMP_parallel", fn_ptr, slots, nthreads, fl.const(0, i32)))
    fl.emit(llvm.BrOp(join))
    fl.set_block(join)


def emit_gemm_call(fl: FunctionLowering, op: loop.GemmOp) -> None:
    """A team call of a generated kernel (mlfuse/backend/gemm_kernels.py: the
    declaration here, its body written at translation for the target's vectors);
    with gemm=blas, BLAS (see emit_blas_gemm)."""
    ta, tb = op.a.type, op.b.type
    assert isinstance(ta, MemRefType) and isinstance(tb, MemRefType)
    if fl.ml.gemm == "blas":
        emit_blas_gemm(fl, op)
        return
    from mlfuse.backend.gemm_kernels import GemmShape

    *batch, m, k = ta.get_shape()
    dtype = "f32" if isinstance(ta.get_element_type(), Float32Type) else "f64"
    shape = GemmShape(math.prod(batch), m, tb.get_shape()[-1], k, dtype)
    fl.ml.declare(shape.symbol, None, [i64, i64, PTR, PTR, PTR])
    emit_team_call(fl, shape.symbol, shape.tasks, 1, [fl.v(op.a), fl.v(op.b), fl.v(op.c)])


def emit_blas_gemm(fl: FunctionLowering, op: loop.GemmOp) -> None:
    """One BLAS ?gemm per matrix of the batch (Fortran, column-major).

    Row-major C = A B is column-major C^T = B^T A^T, so the call passes B first:
    gemm('N', 'N', n, m, k, 1, B, n, A, k, 0, C, n). The symbols mlfuse_sgemm and
    mlfuse_dgemm are scipy's BLAS, registered with the JIT by the runtime.
    """
    ta, tb = op.a.type, op.b.type
    assert isinstance(ta, MemRefType) and isinstance(tb, MemRefType)
    el = ta.get_element_type()
    *batch, m, k = ta.get_shape()
    n = tb.get_shape()[-1]
    name = "mlfuse_sgemm" if isinstance(el, Float32Type) else "mlfuse_dgemm"
    fl.ml.declare(name, None, [PTR] * 13)

    def cell(value, t: Attribute) -> SSAValue:
        slot = fl.emit(llvm.AllocaOp(fl.const(1, i64), t, alignment=8))
        fl.emit(llvm.StoreOp(fl.const(value, t), slot))
        return slot

    no_trans = cell(ord("N"), i8)
    dims = [cell(v, i32) for v in (n, m, k, n, k, n)]  # m', n', k', lda, ldb, ldc
    alpha, beta = cell(1.0, el), cell(0.0, el)
    a, b, c = fl.v(op.a), fl.v(op.b), fl.v(op.c)
    for index in range(math.prod(batch)):  # batches are few (heads): straight-line calls
        at = fl.emit(llvm.GEPOp.from_mixed_indices(a, [index * m * k], el, inbounds=True)) if index else a
        bt = fl.emit(llvm.GEPOp.from_mixed_indices(b, [index * k * n], el, inbounds=True)) if index else b
        ct = fl.emit(llvm.GEPOp.from_mixed_indices(c, [index * m * n], el, inbounds=True)) if index else c
        fl.emit(llvm.CallOp(name, no_trans, no_trans, dims[0], dims[1], dims[2], alpha, bt, dims[3], at, dims[4], beta, ct, dims[5]))


def make_omp_wrapper(
    ml: ModuleLowering, name: str, callee: str, arg_types: list[Attribute], trip: int, grain: int
) -> llvm.FuncOp:
    """`@name(ctx)`: unpack the argument slots, then run `@callee(lo, hi, args...)` on
    each chunk libgomp's guided schedule hands this thread (what GCC emits for
    `#pragma omp for schedule(guided, grain) nowait`)."""
    # C's bool comes back in the low byte
    ml.declare("GOMP_loop_guided_start", i8, [i64, i64, i64, i64, PTR, PTR])
    ml.declare("GOMP_loop_guided_next", i8, [PTR, PTR])
    ml.declare("GOMP_loop_end_nowait", None, [])
    region = Region(Block(arg_types=[PTR]))
    fl = FunctionLowering(ml, region)
    ctx = region.blocks[0].args[0]
    args = []
    for k, t in enumerate(arg_types):
        slot = fl.emit(llvm.GEPOp.from_mixed_indices(ctx, [k], PTR, inbounds=True))
        value = fl.emit(llvm.LoadOp(slot, PTR, alignment=8))
        args.append(value if isinstance(t, llvm.LLVMPointerType) else fl.emit(llvm.PtrToIntOp(value, t)))
    start = fl.emit(llvm.AllocaOp(fl.const(1, i64), i64, alignment=8))
    end = fl.emit(llvm.AllocaOp(fl.const(1, i64), i64, alignment=8))
    zero8 = fl.const(0, i8)
    got = fl.emit(llvm.CallOp(
        "GOMP_loop_guided_start", fl.const(0, i64), fl.const(trip, i64), fl.const(1, i64), fl.const(max(1, grain), i64),
        start, end, return_type=i8,
    ))
    ne = IntegerAttr(llvm.ICmpPredicateFlag.NE.to_int(), i64)
    work, done = fl.new_block(), fl.new_block()
    fl.emit(llvm.CondBrOp(fl.emit(llvm.ICmpOp(got, zero8, ne)), work, [], done, []))
    fl.set_block(work)
    lo = fl.emit(llvm.LoadOp(start, i64, alignment=8))
    hi = fl.emit(llvm.LoadOp(end, i64, alignment=8))
    fl.emit(llvm.CallOp(callee, lo, hi, *args))
    more = fl.emit(llvm.CallOp("GOMP_loop_guided_next", start, end, return_type=i8))
    fl.emit(llvm.CondBrOp(fl.emit(llvm.ICmpOp(more, zero8, ne)), work, [], done, []))
    fl.set_block(done)
    fl.emit(llvm.CallOp("GOMP_loop_end_nowait"))
    fl.emit(llvm.ReturnOp())
    return llvm.FuncOp(name, llvm.LLVMFunctionType([PTR], None), body=region, linkage=llvm.LinkageAttr("internal"))


def lower_function(ml: ModuleLowering, fn: func.FuncOp) -> llvm.FuncOp:
    for t in (*fn.function_type.inputs.data, *fn.function_type.outputs.data):
        if isinstance(t, TensorType):
            raise Diagnostic(
                f"@{fn.sym_name.data} works on tensors: bufferize it first (convert-graph-to-loop)",
                location_of(fn),
            )
    arg_types = [convert_type(t) for t in fn.function_type.inputs.data]
    outputs = [convert_type(t) for t in fn.function_type.outputs.data]
    if len(outputs) > 1:
        raise Diagnostic(f"@{fn.sym_name.data}: functions with several results are not lowered to LLVM", location_of(fn))
    ftype = llvm.LLVMFunctionType(arg_types, outputs[0] if outputs else None)
    linkage = llvm.LinkageAttr("internal" if fn.sym_visibility and fn.sym_visibility.data == "private" else "external")
    if not fn.body.blocks:
        return llvm.FuncOp(fn.sym_name.data, ftype, linkage=linkage)
    region = Region(Block(arg_types=arg_types))
    fl = FunctionLowering(ml, region)
    for old, new in zip(fn.body.block.args, region.blocks[0].args):
        fl.values[old] = new
    fl.lower_block_ops(fn.body.block.ops)
    new_fn = llvm.FuncOp(fn.sym_name.data, ftype, linkage=linkage, body=region)
    arena = fn.attributes.get("mlfuse.arena_bytes")
    if isinstance(arena, IntegerAttr):  # the runtime reads the arena size from the object code
        ml.new_ops.append(
            llvm.GlobalOp(i64, f"{fn.sym_name.data}__arena_bytes", "weak_odr", constant=True, value=IntegerAttr(arena.value.data, i64))
        )
    new_fn.arg_attrs = ArrayAttr(
        [DictionaryAttr({"llvm.noalias": UnitAttr()} if isinstance(t, llvm.LLVMPointerType) else {}) for t in arg_types]
    )
    with_alignment(new_fn, [buffer_alignment(a) for a in fn.body.block.args])
    return new_fn


def lower_global(op: memref.GlobalOp) -> llvm.GlobalOp:
    t = op.type
    assert isinstance(t, MemRefType)
    value = op.initial_value
    if not isinstance(value, DenseIntOrFPElementsAttr):
        raise Diagnostic(f"memref.global @{op.sym_name.data} needs a dense initial value", location_of(op))
    nbytes = t.element_count() * element_bytes(t.get_element_type())
    data = value.data.data
    if len(data) != nbytes:  # a splat stored once
        data = data * (nbytes // max(1, len(data)))
    array = llvm.LLVMArrayType(len(data), i8)
    g = llvm.GlobalOp(array, op.sym_name, llvm.LinkageAttr("internal"), constant=True, alignment=64)
    g.attributes["mlfuse.bytes"] = StringAttr(data.hex())
    return g


def convert_to_llvm(module: ModuleOp, fast_math: bool = False, gemm: str = "generated") -> None:
    ml = ModuleLowering(module, fast_math=fast_math, gemm=gemm)
    for op in list(module.ops):
        if isinstance(op, func.FuncOp):
            ml.new_ops.append(lower_function(ml, op))
        elif isinstance(op, memref.GlobalOp):
            ml.new_ops.append(lower_global(op))
        elif isinstance(op, llvm.FuncOp | llvm.GlobalOp):
            ml.new_ops.append(op.clone())
        else:
            raise Diagnostic(f"cannot lower top-level '{op.name}' to LLVM", location_of(op))
    for op in ml.new_ops:
        if isinstance(op, llvm.FuncOp) and op.sym_name.data in ml.param_alignment and op.body.blocks:
            with_alignment(op, ml.param_alignment[op.sym_name.data])
    for op in list(module.ops):
        op.detach()
        op.erase(safe_erase=False)
    for op in ml.new_ops:
        module.body.block.add_op(op)
