"""PTX from llvm-dialect modules, through llvmlite's NVPTX backend (LLVM -O3)."""

from __future__ import annotations

import functools

import llvmlite.binding as llvm_binding
import llvmlite.ir as ir
from xdsl.dialects.builtin import ModuleOp

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
