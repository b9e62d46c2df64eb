"""xDSL `llvm` dialect -> llvmlite module.

xDSL's translator (xdsl.backend.llvm.convert) does the work; this wrapper adds
what mlfuse needs on top: constant globals given as raw bytes (attribute
`mlfuse.bytes`, written by convert-to-llvm: far cheaper than one attribute per
element for large weights), 64-byte alignment of those globals, and the bodies of
the GEMM kernels convert-to-llvm declares (mlfuse/backend/gemm_kernels.py), for
the vector width of `features` (an LLVM feature string; the host's by default).
"""

from __future__ import annotations

import llvmlite.ir as ir
from xdsl.backend.llvm.convert import convert_module
from xdsl.dialects import llvm
from xdsl.dialects.builtin import ModuleOp, StringAttr

from mlfuse.backend.gemm_kernels import GemmShape, define_gemm_kernels


def to_llvmlite(module: ModuleOp, triple: str | None = None, features: str | None = None) -> ir.Module:
    raw: dict[str, bytes] = {}
    for op in module.ops:
        if isinstance(op, llvm.GlobalOp) and "mlfuse.bytes" in op.attributes:
            attr = op.attributes["mlfuse.bytes"]
            assert isinstance(attr, StringAttr)
            raw[op.sym_name.data] = bytes.fromhex(attr.data)
    mod = convert_module(module, fallback_target_triple=triple)
    for name, data in raw.items():
        g = mod.get_global(name)
        g.initializer = ir.Constant(ir.ArrayType(ir.IntType(8), len(data)), bytearray(data))
        g.global_constant = True
        g.align = 64
    if any(GemmShape.from_symbol(f.name) for f in mod.functions):
        if features is None:
            import llvmlite.binding

            llvmlite.binding.initialize_native_target()
            features = llvmlite.binding.get_host_cpu_features().flatten()
        define_gemm_kernels(mod, features)
    return mod
