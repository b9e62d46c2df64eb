"""convert-to-llvm's patterns for ops that call a runtime: loop.parallel_call on
mlfuse's thread pool (mlfuse/backend/pool.py), and loop.gemm (generated kernels or scipy's BLAS).

See mlfuse.conversion.to_llvm for how the pattern sets compose, and mlfuse.abi for
the contract with the runtime (the `__omp` wrapper, slot arrays).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xdsl.builder import Builder
from xdsl.dialects import llvm, memref
from xdsl.dialects.builtin import Float32Type, MemRefType, ModuleOp, StringAttr, i8, i32, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from mlfuse import abi
from mlfuse.backend import home_blocks, pool
from mlfuse.conversion.to_llvm import PTR, Declarations, Emitter, replace_op
from mlfuse.dialects import loop

if TYPE_CHECKING:
    from mlfuse.backend.gemm_kernels import GemmShape


# The most threads one team call splits its range among: each has a 64-byte line of the
# call's schedule state on the caller's stack (home_blocks.state_words: 4 KiB).
MAX_TEAM = 64
# a team call's per-thread wrapper, `void K__omp(ctx, thread)` (mlfuse.abi)
WRAPPER_TYPE = llvm.LLVMFunctionType([PTR, i32], None)


def emit_team_call(e: Emitter, decl: Declarations, at: Operation, callee: str, trip: int, grain: int, args: list[SSAValue]) -> None:
    """Run `@callee(lo, hi, args...)` over [0, trip) on the thread pool, in
    place of `at` (whose block is split: the code after `at` runs in a join block).

    The arguments travel in an array of 8-byte slots, and after them the team call's
    schedule state (mlfuse/backend/home_blocks.py, on this stack frame). The wrapper
    `@callee__omp(ctx, t)` runs on every thread t of the call (mlfuse_parallel): each thread runs its home block of the
    range, [t * trip / n, (t + 1) * trip / n), from the front in shrinking chunks of
    at least `grain`, then takes chunks from the back of the other blocks. Kernels over
    one image thus split it alike, and a thread reads what it wrote in the kernel
    before, while a thread the OS descheduled holds up no more than the chunk it
    runs. Iterations are independent, so which thread runs a chunk never changes a
    result. The team is no larger than trip / grain (nor MAX_TEAM), and a
    single-thread call skips the pool entirely (as does a range of 2^31 or more). The
    team's size comes from libgomp's per-thread setting (omp_get_max_threads), which
    mlfuse.backend.team sets for each call.
    """
    # One pointer-sized slot per argument; indices travel as inttoptr'd pointers
    # (llvmlite types its GEPs, so every slot has the one type `ptr`).
    slots_ptr = e.result(llvm.AllocaOp(e.const(len(args) + 1, i64), PTR, alignment=8))
    state = e.result(llvm.AllocaOp(e.const(home_blocks.state_words(MAX_TEAM), i64), i64, alignment=64))
    for k, a in enumerate([*args, state]):
        slot = e(llvm.GEPOp.from_mixed_indices(slots_ptr, [k], PTR, inbounds=True))
        value = a if isinstance(a.type, llvm.LLVMPointerType) else e(llvm.IntToPtrOp(a, PTR))
        e(llvm.StoreOp(value, slot, alignment=8))

    wrapper = abi.omp_wrapper_symbol(callee)
    if wrapper not in decl.declared:  # one wrapper per callee (a GEMM shape may be called twice)
        decl.declared[wrapper] = WRAPPER_TYPE
        make_omp_wrapper(e.rewriter, decl, at, wrapper, callee, [a.type for a in args])

    # nthreads = clamp(min(max_threads, ceil(trip / grain)), 1, ...)
    decl.declare(e.rewriter, at, "omp_get_max_threads", i32, [])
    decl.declare(e.rewriter, at, pool.PARALLEL, None, [PTR, PTR, i32])
    max_threads = e.result(llvm.CallOp("omp_get_max_threads", return_type=i32))
    # a range too long for the schedule's packed bounds runs on one thread
    useful = e.const(min(max(1, -(-trip // grain)), MAX_TEAM) if trip <= home_blocks.MAX_TRIP else 1, i32)
    fewer = e.icmp(llvm.ICmpPredicateFlag.SLT, useful, max_threads)
    nthreads = e.result(llvm.SelectOp(fewer, useful, max_threads))
    single = e.icmp(llvm.ICmpPredicateFlag.SLE, nthreads, e.const(1, i32))
    block = at.parent_block()
    assert block is not None and block.parent is not None
    join = block.split_before(at)
    serial, team = Block(), Block()
    block.parent.insert_block_before(serial, join)
    block.parent.insert_block_before(team, join)
    e.at_end(block)
    e(llvm.CondBrOp(single, serial, [], team, []))
    e.at_end(serial)
    e(llvm.CallOp(callee, e.const(0, i64), e.const(trip, i64), *args))
    e(llvm.BrOp(join))
    e.at_end(team)
    threads = e.result(llvm.SExtOp(nthreads, i64))
    decl.call(e, at, home_blocks.INIT, [state, threads, e.const(trip, i64), e.const(max(1, grain), i64)], None)
    fn_ptr = e.result(llvm.AddressOfOp(wrapper, PTR))
    e(llvm.CallOp(pool.PARALLEL, fn_ptr, slots_ptr, nthreads))
    e(llvm.BrOp(join))
    e.point = InsertPoint.before(at)


def make_omp_wrapper(
    rewriter: PatternRewriter, decl: Declarations, at: Operation, name: str, callee: str, arg_types: list[Attribute]
) -> None:
    """`@name(ctx, t)`: unpack the argument slots, then run `@callee(lo, hi, args...)`
    on each chunk the team call's schedule hands thread t (home_blocks.CLAIM)."""
    decl.declare(rewriter, at, home_blocks.CLAIM, i8, [PTR, PTR, PTR, i32])
    entry, work, done = Block(arg_types=[PTR, i32]), Block(), Block()
    e = Emitter(Builder(InsertPoint.at_end(entry)))  # type: ignore[arg-type]  # a new function: nothing to rewrite
    ctx, thread = entry.args
    args = []
    for k, t in enumerate(arg_types):
        slot = e(llvm.GEPOp.from_mixed_indices(ctx, [k], PTR, inbounds=True))
        value = e(llvm.LoadOp(slot, PTR, alignment=8))
        args.append(value if isinstance(t, llvm.LLVMPointerType) else e(llvm.PtrToIntOp(value, t)))
    state_slot = e.result(llvm.GEPOp.from_mixed_indices(ctx, [len(arg_types)], PTR, inbounds=True))
    state = e.result(llvm.LoadOp(state_slot, PTR, alignment=8))
    start = e.result(llvm.AllocaOp(e.const(1, i64), i64, alignment=8))
    end = e.result(llvm.AllocaOp(e.const(1, i64), i64, alignment=8))
    zero8 = e.const(0, i8)
    got = e(llvm.CallOp(home_blocks.CLAIM, state, start, end, thread, return_type=i8))
    e(llvm.CondBrOp(e.icmp(llvm.ICmpPredicateFlag.NE, got, zero8), work, [], done, []))
    e.at_end(work)
    lo = e(llvm.LoadOp(start, i64, alignment=8))
    hi = e(llvm.LoadOp(end, i64, alignment=8))
    e(llvm.CallOp(callee, lo, hi, *args))
    more = e(llvm.CallOp(home_blocks.CLAIM, state, start, end, thread, return_type=i8))
    e(llvm.CondBrOp(e.icmp(llvm.ICmpPredicateFlag.NE, more, zero8), work, [], done, []))
    e.at_end(done)
    e(llvm.ReturnOp())
    body = Region([entry, work, done])
    fn = llvm.FuncOp(name, WRAPPER_TYPE, body=body, linkage=llvm.LinkageAttr("internal"))
    decl.add(rewriter, at, fn)


@dataclass
class ParallelCallLowering(RewritePattern):
    """loop.parallel_call -> a team call (see emit_team_call)."""

    declarations: Declarations

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loop.ParallelCallOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        grain = op.grain.value.data if op.grain is not None else 1
        args = [e.v(a) for a in op.args]
        emit_team_call(e, self.declarations, op, op.callee.string_value(), op.trip_count.value.data, grain, args)
        replace_op(rewriter, op)


@dataclass(frozen=True)
class PackedOperands:
    """The products whose A or B the translation stores as the kernel's panels."""

    a: frozenset[loop.GemmOp] = frozenset()
    b: frozenset[loop.GemmOp] = frozenset()


@dataclass
class GemmLowering(RewritePattern):
    """loop.gemm -> a team call of a generated kernel (mlfuse/backend/gemm_kernels.py:
    declared here, its body written at translation for the target's vectors), or
    with gemm=blas, BLAS calls (see emit_blas_gemm); a product over a window's
    patches or with an epilogue always runs the generated kernel, whose packing reads
    the patches and whose register tile takes the epilogue (its operands follow C)."""

    declarations: Declarations
    gemm: str = "generated"
    packed: PackedOperands = field(default_factory=PackedOperands)  # constants the translation lays out (prepack_a/_b)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loop.GemmOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        c = op.c.type
        assert isinstance(c, MemRefType)
        if c.element_count() == 0:  # no element to write (a task count would divide by zero)
            replace_op(rewriter, op)
            return
        if self.gemm == "blas" and op.window is None and op.epilogue is None and op.frame is None:  # BLAS has no implicit im2col
            emit_blas_gemm(e, self.declarations, op)
        else:
            shape = gemm_shape(op, op in self.packed.b, op in self.packed.a)
            buffers = [op.a, op.b, op.c, *op.epilogue_ins]
            self.declarations.declare(rewriter, op, shape.symbol, None, [i64, i64, *[PTR] * len(buffers)])
            emit_team_call(e, self.declarations, op, shape.symbol, shape.tasks, 1, [e.v(v) for v in buffers])
        replace_op(rewriter, op)


def gemm_shape(op: loop.GemmOp, packed_b: bool = False, packed_a: bool = False) -> GemmShape:
    """The generated kernel that runs `op` (its symbol names the shape and the epilogue)."""
    from mlfuse.backend.gemm_kernels import Frame, GemmShape, Window
    from mlfuse.conversion.gemm_epilogue import kernel_epilogue

    ta, tb, tc = op.a.type, op.b.type, op.c.type
    assert isinstance(ta, MemRefType) and isinstance(tb, MemRefType) and isinstance(tc, MemRefType)
    *batch, m, k = ta.get_shape()
    dtype = "f32" if isinstance(ta.get_element_type(), Float32Type) else "f64"
    window, (hp, wp) = op.window_size, tb.get_shape()[-2:]
    image = Window(*window, hp, wp, *op.window_strides, op.border, op.pads) if window is not None else None
    frame = None
    if op.frame is not None:
        top, left, _, ow = op.frame
        images_h, images_w = tc.get_shape()[-2:]
        frame = Frame(ow, images_h, images_w, top, left, op.frame_channel)
    n = op.product_type.get_shape()[-1]
    return GemmShape(math.prod(batch), m, n, k, dtype, image, packed_b, packed_a, kernel_epilogue(op), frame)


def constant_operand_products(module: ModuleOp) -> PackedOperands:
    """The products whose A (a conv's weights: w @ patches) or B (a linear layer's: x @ W)
    is a constant that nothing else reads, so that the translation can store it as the
    kernel's panels (gemm_kernels.prepack_a/_b) and the kernel reads them in place; each
    such global is marked gemm_kernels.PACKED_ATTRS[operand] with its kernel's symbol. Every use of the global
    (through views) must be that operand of products of one kernel (B not over a window)."""
    from mlfuse.backend.gemm_kernels import PACKED_ATTRS

    users: dict[str, list[Operation]] = {}
    for op in module.walk():
        if isinstance(op, memref.GetGlobalOp):
            users.setdefault(op.name_.root_reference.data, []).extend(loop.view_users(op.memref))
    globals_ = {g.sym_name.data: g for g in module.ops if isinstance(g, memref.GlobalOp)}
    found: dict[str, dict[str, list[loop.GemmOp]]] = {"a": {}, "b": {}}
    for name, uses in users.items():
        g = globals_.get(name)
        role = _role(name, uses)
        if g is not None and g.constant is not None and role is not None:
            found[role][name] = uses  # type: ignore[assignment]  # _role: products, every one
    a = {u for uses in found["a"].values() for u in uses}
    b = {u for uses in found["b"].values() for u in uses}
    for role, products in found.items():  # the symbol says whether the other operand is packed too
        for name, uses in products.items():
            globals_[name].attributes[PACKED_ATTRS[role]] = StringAttr(gemm_shape(uses[0], uses[0] in b, uses[0] in a).symbol)
    return PackedOperands(frozenset(a), frozenset(b))


def _role(name: str, uses: list[Operation]) -> str | None:
    """"a" or "b" when every use reads global `name` as that operand of products of one
    shape (and as nothing else), else None."""
    if not uses or not all(isinstance(u, loop.GemmOp) for u in uses):
        return None
    for role in ("a", "b"):
        if all(_reads_as(u, name, role) for u in uses) and len({gemm_shape(u) for u in uses}) == 1:  # type: ignore[arg-type]
            return role
    return None


def _global_read(value: SSAValue) -> str | None:
    """The global that `value` is (a memref.get_global, through views), else None."""
    owner = loop.view_root(value).owner
    return owner.name_.root_reference.data if isinstance(owner, memref.GetGlobalOp) else None


def _reads_as(op: loop.GemmOp, name: str, role: str) -> bool:
    """`op` reads global `name` as its A or B (`role`) and as nothing else; a B over a
    window is an image, not a matrix."""
    operands = {"a": op.a, "b": op.b, "c": op.c}
    if role == "b" and op.window is not None:
        return False
    others = [v for r, v in operands.items() if r != role] + list(op.epilogue_ins)
    return _global_read(operands[role]) == name and all(_global_read(v) != name for v in others)


def emit_blas_gemm(e: Emitter, decl: Declarations, op: loop.GemmOp) -> None:
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
    decl.declare(e.rewriter, op, name, None, [PTR] * 13)

    def cell(value, t: Attribute) -> SSAValue:
        slot = e(llvm.AllocaOp(e.const(1, i64), t, alignment=8))
        e(llvm.StoreOp(e.const(value, t), slot))
        return slot  # type: ignore[return-value]

    no_trans = cell(ord("N"), i8)
    dims = [cell(v, i32) for v in (n, m, k, n, k, n)]  # m', n', k', lda, ldb, ldc
    alpha, beta = cell(1.0, el), cell(0.0, el)
    a, b, c = e.v(op.a), e.v(op.b), e.v(op.c)
    for index in range(math.prod(batch)):  # batches are few (heads): straight-line calls
        at = e(llvm.GEPOp.from_mixed_indices(a, [index * m * k], el, inbounds=True)) if index else a
        bt = e(llvm.GEPOp.from_mixed_indices(b, [index * k * n], el, inbounds=True)) if index else b
        ct = e(llvm.GEPOp.from_mixed_indices(c, [index * m * n], el, inbounds=True)) if index else c
        e(llvm.CallOp(name, no_trans, no_trans, dims[0], dims[1], dims[2], alpha, bt, dims[3], at, dims[4], beta, ct, dims[5]))


def omp_runtime_patterns(declarations: Declarations) -> list[RewritePattern]:
    return [ParallelCallLowering(declarations)]


def gemm_patterns(declarations: Declarations, gemm: str = "generated", packed: PackedOperands | None = None) -> list[RewritePattern]:
    return [GemmLowering(declarations, gemm, packed or PackedOperands())]

