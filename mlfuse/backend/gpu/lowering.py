"""Kernel dialect -> llvm dialect with NVVM intrinsics.

Kernel bodies are lowered with convert-to-llvm's function lowering
(mlfuse.conversion.to_llvm.FunctionLowering: a memref is a bare pointer into its
memory space, scf becomes a CFG), extended with the kernel-dialect ops, which may
sit anywhere in a body (a shuffle inside an scf.for, a barrier inside an scf.if).
f32 transcendentals are first expanded to arith by expand-math: a GPU has no libm.

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
from collections.abc import Callable

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    Float32Type,
    IntAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    UnitAttr,
    i8,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.rewriter import Rewriter

from mlfuse.conversion.expand_math import expand_math
from mlfuse.conversion.to_llvm import FunctionLowering, ModuleLowering
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



def pointer_type(memref: Attribute) -> llvm.LLVMPointerType:
    return llvm.LLVMPointerType(IntAttr(kernel.memory_space(memref) or 0))


class KernelBodyLowering(FunctionLowering):
    """convert-to-llvm's function lowering plus the kernel-dialect ops."""

    def __init__(self, ml: ModuleLowering, region: Region, lowering: KernelLowering, kernel_name: str):
        super().__init__(ml, region)
        self.lowering = lowering
        self.kernel_name = kernel_name

    def handler(self, op: Operation) -> Callable | None:
        if isinstance(op, kernel.IdOp):
            return lambda o: self.read_sreg(f"llvm.nvvm.read.ptx.sreg.{SREG[type(o)]}.{o.dim.data}")
        own = {
            kernel.ReturnOp: self.lower_return,
            kernel.LaneIdOp: lambda o: self.read_sreg("llvm.nvvm.read.ptx.sreg.laneid"),
            kernel.BarrierOp: self.lower_barrier,
            kernel.ShuffleOp: self.lower_shuffle,
            kernel.SharedAllocOp: self.lower_shared_alloc,
            kernel.AtomicAddOp: self.lower_atomic_add,
            kernel.GridSyncOp: self.lower_grid_sync,
        }.get(type(op))
        if own is not None:
            return own
        if isinstance(op, kernel.LaunchOp | kernel.MemsetOp | kernel.KernelFuncOp):
            raise Diagnostic(f"'{op.name}' is host code and cannot be inside a kernel", location_of(op))
        return super().handler(op)

    def lower_return(self, op: kernel.ReturnOp) -> None:
        self.emit(llvm.ReturnOp())

    def read_sreg(self, intrinsic: str) -> SSAValue:
        value = self.emit(llvm.CallIntrinsicOp(intrinsic, [], [i32]))
        return self.emit(llvm.ZExtOp(value, i64))

    def lower_barrier(self, op: kernel.BarrierOp) -> None:
        self.emit(llvm.CallIntrinsicOp("llvm.nvvm.barrier0", [], []))

    def lower_shuffle(self, op: kernel.ShuffleOp) -> SSAValue:
        kind = "bfly" if op.mode.data == "xor" else "down"
        suffix = "f32" if isinstance(op.value.type, Float32Type) else "i32"
        args = [
            self.const(-1, i32),
            self.v(op.value),
            self.const(op.offset.value.data, i32),
            self.const(kernel.WARP_SIZE - 1, i32),
        ]
        return self.emit(llvm.CallIntrinsicOp(f"llvm.nvvm.shfl.sync.{kind}.{suffix}", args, [op.value.type]))

    def lower_shared_alloc(self, op: kernel.SharedAllocOp) -> SSAValue:
        t = op.buffer_type
        ptr_type = pointer_type(t)
        if op.dynamic is not None:
            self.lowering.has_dynamic_shared = True
            base = self.emit(llvm.AddressOfOp(DYNAMIC_SHARED_SYMBOL, ptr_type))
            return self.emit(llvm.GEPOp(base, [op.offset.value.data], i8, result_type=ptr_type, inbounds=True))
        name = self.lowering.new_shared_global(self.kernel_name, t)
        return self.emit(llvm.AddressOfOp(name, ptr_type))

    def lower_atomic_add(self, op: kernel.AtomicAddOp) -> None:
        t = op.buffer.type
        assert isinstance(t, MemRefType)
        addr = self.address(op.buffer, op.indices)
        space = "global" if kernel.memory_space(t) == kernel.GLOBAL_SPACE else "shared"
        kind, constraint = ("f32", "f") if isinstance(t.get_element_type(), Float32Type) else ("u32", "r")
        self.emit(
            llvm.InlineAsmOp(
                f"red.{space}.add.{kind} [$0], $1;",
                f"l,{constraint},~{{memory}}",
                [addr, self.v(op.value)],
                has_side_effects=True,
            )
        )

    def lower_grid_sync(self, op: kernel.GridSyncOp) -> None:
        self.emit(llvm.InlineAsmOp(GRID_SYNC_PTX, "l,~{memory}", [self.v(op.counter)], has_side_effects=True))


class KernelLowering:
    """Lowers every kernel.func of a module to an `nvvm.kernel` llvm.func (host code is left alone)."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.ml = ModuleLowering(module)
        self.shared_globals: list[llvm.GlobalOp] = []
        self.has_dynamic_shared = False

    def new_shared_global(self, kernel_name: str, t: MemRefType) -> str:
        name = f"__shared_{kernel_name}_{len(self.shared_globals)}"
        array = llvm.LLVMArrayType(math.prod(t.get_shape()), t.get_element_type())
        self.shared_globals.append(
            llvm.GlobalOp(array, name, "internal", addr_space=kernel.SHARED_SPACE, alignment=16)
        )
        return name

    def run(self) -> None:
        kernels = [op for op in self.module.ops if isinstance(op, kernel.KernelFuncOp)]
        for func in kernels:
            expand_math(func)
            declared = len(self.ml.new_ops)
            lowered = self.lower_kernel(func)
            if len(self.ml.new_ops) > declared:
                name = self.ml.new_ops[declared].sym_name.data  # type: ignore[attr-defined]
                raise Diagnostic(
                    f"kernel @{func.sym_name.data} calls '{name}', which does not exist on the GPU "
                    "(only f32 transcendentals are expanded to arith)",
                    location_of(func),
                )
            Rewriter.replace_op(func, lowered, [])
        block = self.module.body.block
        globals_: list[Operation] = list(self.shared_globals)
        if self.has_dynamic_shared:
            globals_.append(
                llvm.GlobalOp(
                    llvm.LLVMArrayType(0, i8),
                    DYNAMIC_SHARED_SYMBOL,
                    "external",
                    addr_space=kernel.SHARED_SPACE,
                    alignment=16,
                )
            )
        if globals_:
            if block.first_op is None:
                block.add_ops(globals_)
            else:
                block.insert_ops_before(globals_, block.first_op)

    def lower_kernel(self, func: kernel.KernelFuncOp) -> llvm.FuncOp:
        arg_types = func.function_type.inputs.data
        ptr_types = [pointer_type(t) for t in arg_types]
        region = Region(Block(arg_types=ptr_types))
        body = KernelBodyLowering(self.ml, region, self, func.sym_name.data)
        for old, new in zip(func.entry.args, region.blocks[0].args):
            body.values[old] = new
            new.name_hint = old.name_hint
        body.lower_block_ops(func.entry.ops)
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
            body=region,
            extra_attrs=attrs,
        )
        new.arg_attrs = ArrayAttr(
            [DictionaryAttr({"llvm.noalias": UnitAttr(), "llvm.align": IntegerAttr(16, i64)}) for _ in ptr_types]
        )
        new.location = func.location
        return new


def lower_kernels(module: ModuleOp) -> None:
    """Lower every kernel.func of `module` to an nvvm.kernel llvm.func."""
    KernelLowering(module).run()
