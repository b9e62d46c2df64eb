"""PTX from llvm-dialect modules, through llvmlite's NVPTX backend (LLVM -O3)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import IO

import llvmlite.binding as llvm_binding
import llvmlite.ir as ir
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from mlfuse.backend.gpu.targets import DEFAULT_ARCH, target
from mlfuse.backend.gpu.translate import NVPTX_TRIPLE, translate_to_llvmlite


@functools.cache
def _initialize() -> None:
    llvm_binding.initialize_all_targets()
    llvm_binding.initialize_all_asmprinters()


@functools.cache
def target_machine(arch: str):
    _initialize()
    gpu = target(arch)
    return llvm_binding.Target.from_triple(NVPTX_TRIPLE).create_target_machine(
        cpu=gpu.arch, features=gpu.ptx_version, opt=3
    )


def optimized_llvm(module: ir.Module | str, arch: str = DEFAULT_ARCH) -> llvm_binding.ModuleRef:
    """Parse, verify and optimise (-O3) LLVM IR for the NVPTX target."""
    tm = target_machine(arch)
    parsed = llvm_binding.parse_assembly(str(module))
    parsed.triple = NVPTX_TRIPLE
    parsed.data_layout = str(tm.target_data)
    parsed.verify()
    tuning = llvm_binding.create_pipeline_tuning_options(speed_level=3)
    builder = llvm_binding.create_pass_builder(tm, tuning)
    builder.getModulePassManager().run(parsed, builder)
    return parsed


def llvm_ir_to_ptx(module: ir.Module | str, arch: str = DEFAULT_ARCH) -> str:
    return target_machine(arch).emit_assembly(optimized_llvm(module, arch))


def llvm_dialect_to_ptx(module: ModuleOp, arch: str = DEFAULT_ARCH) -> str:
    """PTX for an llvm-dialect module whose kernels are `llvm.func`s marked `nvvm.kernel`."""
    return llvm_ir_to_ptx(translate_to_llvmlite(module), arch)


def device_module(module: ModuleOp) -> ModuleOp:
    """The device half of a module, lowered to llvm dialect: its kernels and their globals.

    kernel.funcs are lowered by convert-kernel-to-nvvm; llvm.funcs and llvm
    globals are taken as they are; host code (func.func, memref.global) is left out.
    """
    from xdsl.dialects import llvm

    from mlfuse.backend.gpu.lowering import lower_kernels
    from mlfuse.dialects import kernel

    device = ModuleOp([])
    for op in module.ops:
        if isinstance(op, kernel.KernelFuncOp | llvm.FuncOp | llvm.GlobalOp):
            device.body.block.add_op(op.clone())
    if not any(True for _ in device.ops):
        from mlfuse.diagnostics import Diagnostic

        raise Diagnostic("no GPU kernels in the module: run gpu-map-kernels first (or give llvm.funcs marked nvvm.kernel)")
    lower_kernels(device)
    return device


def module_to_ptx(module: ModuleOp, arch: str = DEFAULT_ARCH) -> str:
    """PTX for every kernel of a module (kernel.funcs, or llvm.funcs marked nvvm.kernel)."""
    from mlfuse.backend.gpu.translate import TranslationError
    from mlfuse.diagnostics import Diagnostic

    try:
        return llvm_dialect_to_ptx(device_module(module), arch)
    except TranslationError as e:
        raise Diagnostic(str(e)) from None
    except RuntimeError as e:  # llvmlite: invalid LLVM IR or a backend failure
        raise Diagnostic(f"LLVM rejected the kernels: {str(e).strip()}") from None


@dataclass(frozen=True)
class PtxTarget(Target):
    """`mlfuse-opt -t ptx` (or `-t 'ptx{arch=sm_80}'`): the module's kernels as PTX.

    With `verify=true` the PTX is also assembled by ptxas and its resource report
    appended as comments (an error if a kernel spills or breaks a limit).
    """

    name = "ptx"
    arch: str = DEFAULT_ARCH
    verify: bool = False

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from mlfuse.diagnostics import Diagnostic

        try:
            target(self.arch)
        except ValueError as e:
            raise Diagnostic(str(e), "<target ptx>") from None
        ptx = module_to_ptx(module, self.arch)
        output.write(ptx)
        if self.verify:
            from mlfuse.backend.gpu.ptxas import PtxasError, assemble

            try:
                resources = assemble(ptx, self.arch)
            except PtxasError as e:
                raise Diagnostic(str(e), "<target ptx>") from None
            for r in resources.values():
                output.write(
                    f"// ptxas {self.arch} {r.name}: {r.registers} registers, {r.shared_bytes} bytes smem, "
                    f"{r.spill_stores} bytes spill stores, {r.spill_loads} bytes spill loads\n"
                )
