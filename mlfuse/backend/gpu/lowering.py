"""Kernel dialect -> llvm dialect with NVVM intrinsics.

Kernel bodies are lowered with convert-to-llvm's pattern sets
(mlfuse.conversion.to_llvm: a memref is a bare pointer into its memory space, scf
becomes a CFG) plus the kernel-dialect patterns below, which may match anywhere in
a body (a shuffle inside an scf.for, a barrier inside an scf.if). f32
transcendentals are first expanded to arith by expand-math: a GPU has no libm, so
the libm patterns are not in the set.

- `kernel.func` -> `llvm.func` marked `nvvm.kernel` (the ptx_kernel calling
  convention), `nvvm.maxntid` from its block shape, `nvvm.minctasm` from
  `min_blocks_per_sm`; every buffer argument is a `noalias`, 16-byte aligned
  `!llvm.ptr<1>`;
- ids -> `llvm.nvvm.read.ptx.sreg.{tid,ctaid,ntid,nctaid,laneid}` + index_cast;
- `kernel.shared_alloc` -> an internal `llvm.mlir.global` in address space 3
  (static) or an offset into the external dynamic-shared array;
- `kernel.barrier` -> `llvm.nvvm.barrier0`;
- `kernel.shuffle` -> `llvm.nvvm.shfl.sync.{bfly,down}.{f32,i32}` over the full warp;
- `kernel.atomic_add` -> PTX `red.{global,shared}.add` (inline asm: xDSL's llvm
  dialect has no atomicrmw);
- `kernel.grid_sync` -> inline PTX: block barrier, then thread 0 of every block
  arrives on the counter (block 0 adds 2^31 - (blocks - 1), the others 1, so
  the top bit flips exactly when all have arrived) and spins until it flips;
  the algorithm of CUDA's cooperative-groups grid.sync().
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    Float32Type,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    UnitAttr,
    i8,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

from mlfuse import abi
from mlfuse.conversion.expand_math import expand_math
from mlfuse.conversion.to_llvm import (
    Declarations,
    Emitter,
    address,
    apply_patterns,
    arith_math_patterns,
    cf_patterns,
    check_converted,
    control_flow_patterns,
    convert_block_signatures,
    convert_type,
    libm_patterns,
    memref_patterns,
    reconcile_casts,
    replace_op,
)
from mlfuse.diagnostics import Diagnostic, location_of
from mlfuse.dialects import kernel

DYNAMIC_SHARED_SYMBOL = "__mlfuse_dynamic_shared"

SREG = {
    kernel.ThreadIdOp: "tid",
    kernel.BlockIdOp: "ctaid",
    kernel.BlockDimOp: "ntid",
    kernel.GridDimOp: "nctaid",
}

GRID_SYNC_PTX = """{
.reg .pred %mlf_p<2>;
.reg .b32 %mlf_r<6>;
bar.sync 0;
mov.u32 %mlf_r0, %tid.x;
mov.u32 %mlf_r1, %tid.y;
or.b32 %mlf_r0, %mlf_r0, %mlf_r1;
mov.u32 %mlf_r1, %tid.z;
or.b32 %mlf_r0, %mlf_r0, %mlf_r1;
setp.ne.u32 %mlf_p0, %mlf_r0, 0;
@%mlf_p0 bra MLFUSE_GRID_DONE${:uid};
mov.u32 %mlf_r0, %nctaid.x;
mov.u32 %mlf_r1, %nctaid.y;
mul.lo.u32 %mlf_r0, %mlf_r0, %mlf_r1;
mov.u32 %mlf_r1, %nctaid.z;
mul.lo.u32 %mlf_r0, %mlf_r0, %mlf_r1;
sub.u32 %mlf_r0, 0x80000001, %mlf_r0;
mov.u32 %mlf_r1, %ctaid.x;
mov.u32 %mlf_r2, %ctaid.y;
or.b32 %mlf_r1, %mlf_r1, %mlf_r2;
mov.u32 %mlf_r2, %ctaid.z;
or.b32 %mlf_r1, %mlf_r1, %mlf_r2;
setp.eq.u32 %mlf_p1, %mlf_r1, 0;
selp.u32 %mlf_r0, %mlf_r0, 1, %mlf_p1;
fence.acq_rel.gpu;
atom.add.release.gpu.global.u32 %mlf_r3, [$0], %mlf_r0;
MLFUSE_GRID_SPIN${:uid}:
ld.acquire.gpu.global.u32 %mlf_r4, [$0];
xor.b32 %mlf_r5, %mlf_r3, %mlf_r4;
and.b32 %mlf_r5, %mlf_r5, 0x80000000;
setp.eq.u32 %mlf_p1, %mlf_r5, 0;
@%mlf_p1 bra MLFUSE_GRID_SPIN${:uid};
fence.acq_rel.gpu;
MLFUSE_GRID_DONE${:uid}:
bar.sync 0;
}"""



def read_sreg(e: Emitter, intrinsic: str) -> SSAValue:
    value = e(llvm.CallIntrinsicOp(intrinsic, [], [i32]))
    return e(llvm.ZExtOp(value, i64))  # type: ignore[return-value]


class IdLowering(RewritePattern):
    """kernel.thread_id/block_id/block_dim/grid_dim -> the PTX special registers, as i64."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kernel.IdOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        replace_op(rewriter, op, read_sreg(e, f"llvm.nvvm.read.ptx.sreg.{SREG[type(op)]}.{op.dim.data}"))


class LaneIdLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kernel.LaneIdOp, rewriter: PatternRewriter) -> None:
        replace_op(rewriter, op, read_sreg(Emitter(rewriter), "llvm.nvvm.read.ptx.sreg.laneid"))


class ReturnLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kernel.ReturnOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, llvm.ReturnOp())


class BarrierLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kernel.BarrierOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, llvm.CallIntrinsicOp("llvm.nvvm.barrier0", [], []))


class ShuffleLowering(RewritePattern):
    """kernel.shuffle -> llvm.nvvm.shfl.sync.{bfly,down} over the full warp."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kernel.ShuffleOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        kind = "bfly" if op.mode.data == "xor" else "down"
        suffix = "f32" if isinstance(op.value.type, Float32Type) else "i32"
        args = [e.const(-1, i32), e.v(op.value), e.const(op.offset.value.data, i32), e.const(kernel.WARP_SIZE - 1, i32)]
        replace_op(rewriter, op, e(llvm.CallIntrinsicOp(f"llvm.nvvm.shfl.sync.{kind}.{suffix}", args, [op.value.type])))


@dataclass
class SharedMemory:
    """The address-space-3 globals the kernels' shared buffers become."""

    globals: list[llvm.GlobalOp] = field(default_factory=list)
    dynamic: bool = False

    def new_global(self, kernel_name: str, t: MemRefType) -> str:
        name = f"__shared_{kernel_name}_{len(self.globals)}"
        array = llvm.LLVMArrayType(math.prod(t.get_shape()), t.get_element_type())
        self.globals.append(llvm.GlobalOp(array, name, "internal", addr_space=kernel.SHARED_SPACE, alignment=16))
        return name

    def module_ops(self) -> list[Operation]:
        ops: list[Operation] = list(self.globals)
        if self.dynamic:
            array = llvm.LLVMArrayType(0, i8)
            ops.append(llvm.GlobalOp(array, DYNAMIC_SHARED_SYMBOL, "external", addr_space=kernel.SHARED_SPACE, alignment=16))
        return ops


@dataclass
class SharedAllocLowering(RewritePattern):
    """kernel.shared_alloc -> an internal address-space-3 global per buffer, or an
    offset into the external dynamic-shared array."""

    shared: SharedMemory

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kernel.SharedAllocOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        t = op.buffer_type
        ptr_type = convert_type(t)
        if op.dynamic is not None:
            self.shared.dynamic = True
            base = e(llvm.AddressOfOp(DYNAMIC_SHARED_SYMBOL, ptr_type))
            replace_op(rewriter, op, e(llvm.GEPOp(base, [op.offset.value.data], i8, result_type=ptr_type, inbounds=True)))
            return
        kernel_fn = Declarations().top_level(op)
        name = self.shared.new_global(kernel_fn.sym_name.data, t)  # type: ignore[attr-defined]
        replace_op(rewriter, op, e(llvm.AddressOfOp(name, ptr_type)))


class AtomicAddLowering(RewritePattern):
    """kernel.atomic_add -> PTX `red.{global,shared}.add` (inline asm: xDSL's llvm
    dialect has no atomicrmw)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kernel.AtomicAddOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        t = op.buffer.type
        assert isinstance(t, MemRefType)
        addr = address(e, op.buffer, op.indices)
        space = "global" if kernel.memory_space(t) == kernel.GLOBAL_SPACE else "shared"
        kind, constraint = ("f32", "f") if isinstance(t.get_element_type(), Float32Type) else ("u32", "r")
        asm = f"red.{space}.add.{kind} [$0], $1;"
        e(llvm.InlineAsmOp(asm, f"l,{constraint},~{{memory}}", [addr, e.v(op.value)], has_side_effects=True))
        replace_op(rewriter, op)


class GridSyncLowering(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kernel.GridSyncOp, rewriter: PatternRewriter) -> None:
        e = Emitter(rewriter)
        e(llvm.InlineAsmOp(GRID_SYNC_PTX, "l,~{memory}", [e.v(op.counter)], has_side_effects=True))
        replace_op(rewriter, op)


def kernel_body_patterns(shared: SharedMemory) -> list[RewritePattern]:
    """The kernel-dialect ops of a kernel body."""
    return [
        IdLowering(),
        LaneIdLowering(),
        ReturnLowering(),
        BarrierLowering(),
        ShuffleLowering(),
        SharedAllocLowering(shared),
        AtomicAddLowering(),
        GridSyncLowering(),
    ]


@dataclass
class KernelFuncLowering(RewritePattern):
    """kernel.func -> llvm.func marked nvvm.kernel; its buffers are noalias pointers
    in global memory, aligned as the GPU runtime guarantees (mlfuse.abi)."""

    lowered: list[tuple[llvm.FuncOp, str | None]] = field(default_factory=list)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, func: kernel.KernelFuncOp, rewriter: PatternRewriter) -> None:
        ptr_types = [convert_type(t) for t in func.function_type.inputs.data]
        convert_block_signatures(rewriter, func.body)
        attrs: dict[str, Attribute] = {
            "nvvm.kernel": UnitAttr(),
            "nvvm.maxntid": DenseArrayBase.from_list(i32, list(func.block_size)),
        }
        if func.min_blocks_per_sm is not None:
            attrs["nvvm.minctasm"] = IntegerAttr(func.min_blocks_per_sm.value.data, i32)
        if func.dynamic_shared_bytes:
            attrs["mlfuse.dynamic_shared"] = IntegerAttr(func.dynamic_shared_bytes, i64)
        if func.cooperative is not None:
            attrs["mlfuse.cooperative"] = UnitAttr()
        new = llvm.FuncOp(
            func.sym_name.data,
            llvm.LLVMFunctionType(ptr_types),
            linkage=llvm.LinkageAttr("external"),
            body=rewriter.move_region_contents_to_new_regions(func.body),
            extra_attrs=attrs,
        )
        param = {"llvm.noalias": UnitAttr(), "llvm.align": IntegerAttr(abi.GPU_ALIGNMENT, i64)}
        new.arg_attrs = ArrayAttr([DictionaryAttr(param) for _ in ptr_types])
        new.location = func.location
        self.lowered.append((new, location_of(func)))
        rewriter.replace(func, new)


def check_kernel(func: kernel.KernelFuncOp) -> None:
    for op in func.walk():
        if op is not func and isinstance(op, kernel.LaunchOp | kernel.MemsetOp | kernel.KernelFuncOp):
            raise Diagnostic(f"'{op.name}' is host code and cannot be inside a kernel", location_of(op))


def lower_kernels(module: ModuleOp) -> None:
    """Lower every kernel.func of `module` to an nvvm.kernel llvm.func (host code is left alone)."""
    kernels = [op for op in module.ops if isinstance(op, kernel.KernelFuncOp)]
    for func in kernels:
        check_kernel(func)
        expand_math(func)
        apply_patterns(func.body, control_flow_patterns())
    signatures = KernelFuncLowering()
    PatternRewriteWalker(signatures, apply_recursively=False).rewrite_module(module)
    shared = SharedMemory()
    for fn, location in signatures.lowered:
        declarations = Declarations()
        patterns = [
            *kernel_body_patterns(shared),
            *cf_patterns(),
            *arith_math_patterns(),
            *libm_patterns(declarations),
            *memref_patterns(declarations),
        ]
        apply_patterns(fn.body, patterns)
        if declarations.declared:
            name = next(iter(declarations.declared))
            raise Diagnostic(
                f"kernel @{fn.sym_name.data} calls '{name}', which does not exist on the GPU "
                "(only f32 transcendentals are expanded to arith)",
                location,
            )
        reconcile_casts(fn.body)
        check_converted(fn)
    block = module.body.block
    globals_ = shared.module_ops()
    if globals_:
        if block.first_op is None:
            block.add_ops(globals_)
        else:
            block.insert_ops_before(globals_, block.first_op)
