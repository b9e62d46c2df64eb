"""Output targets of mlfuse-opt (`-t NAME`).

- `llvm{features=...}`: the LLVM IR that xDSL's `llvm` dialect translates to
  (input to LLVM), with the generated GEMM kernels blocked for `features`;
- `llvm-opt{cpu=... features=...}`: that IR after LLVM's O3 pipeline for a CPU
  (the host by default), as the JIT compiles it: where to look for vector code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target


@dataclass(frozen=True)
class LLVMTarget(Target):
    name = "llvm"

    features: str = ""  # for generated GEMM kernels; the host's by default

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from mlfuse.backend.llvm_translate import to_llvmlite

        print(to_llvmlite(module, features=self.features or None), file=output)


@dataclass(frozen=True)
class LLVMOptTarget(Target):
    name = "llvm-opt"

    cpu: str = ""
    features: str = ""

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from mlfuse.backend import cpu
        from mlfuse.backend.llvm_translate import to_llvmlite

        ir_module = to_llvmlite(module, features=self.features or None)
        print(cpu.optimized_ir(ir_module, self.cpu or None, self.features or None), file=output)
