"""A compiler of its own that embeds mlfuse: what docs/embedding.md walks through.

    python examples/embedding/embed.py          # prints the plan, the kernels, and "ok"

It touches mlfuse only through its stable surface:
1. the dialects and passes come from xDSL's plugin mechanism (`Universe.get_multiverse()`
   finds mlfuse's `xdsl.universe` entry point), not from imports of mlfuse's modules;
2. it builds graph IR with its own code: the ops are looked up in its own `Context`;
3. it runs `fusion-plan` and the CPU lowering inside its own `PassPipeline`, with the
   pass list of `mlfuse.pipelines.default_pipeline("cpu")`;
4. it takes the resulting LLVM IR (`mlfuse.backend.llvm_translate.to_llvmlite`), compiles
   it with its own llvmlite execution engine, and calls the entry function itself by
   the documented calling convention.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import llvmlite.binding as llvm
import numpy as np
from xdsl.builder import Builder, InsertPoint
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.ir import Block, Region
from xdsl.passes import PassPipeline
from xdsl.universe import Universe

ROWS, COLS = 64, 256


def make_context(universe: Universe) -> Context:
    ctx = Context()
    for name, factory in universe.all_dialects.items():
        ctx.register_dialect(name, factory)
    return ctx


def softmax_module(ctx: Context) -> ModuleOp:
    """softmax(x) over rows, built op by op with the op classes this context resolves by name
    (their constructors are part of mlfuse's stable surface: dialects/graph.py)."""
    op = ctx.get_op  # "graph.exp" -> the class mlfuse's universe registered
    t = TensorType(f32, [ROWS, COLS])
    block = Block(arg_types=[t])
    b = Builder(InsertPoint.at_end(block))
    x = block.args[0]

    def row_stat(kind: str, v):  # reduce over the row, keep it as a column, stretch it back
        column = b.insert(op(f"graph.reduce_{kind}")(v, [1], keepdims=True)).results[0]
        return b.insert(op("graph.broadcast")(column, [0, 1], [ROWS, COLS])).results[0]

    shifted = b.insert(op("graph.sub")(x, row_stat("max", x))).results[0]
    e = b.insert(op("graph.exp")(shifted)).results[0]
    y = b.insert(op("graph.div")(e, row_stat("sum", e))).results[0]
    b.insert(func.ReturnOp(y))
    module = ModuleOp([func.FuncOp("main", ([t], [t]), Region(block))])
    module.verify()
    return module


def compile_module(module: ModuleOp, universe: Universe, ctx: Context) -> ModuleOp:
    """mlfuse's default CPU pipeline, run by this program's own PassPipeline."""
    from mlfuse.pipelines import default_pipeline

    spec = ",".join(default_pipeline("cpu"))
    PassPipeline.parse_spec(universe.all_passes, spec).apply(ctx, module)
    return module


def run(module: ModuleOp, x: np.ndarray) -> np.ndarray:
    """JIT the LLVM IR with this program's own engine and call @main.

    The calling convention (docs/embedding.md): void main(inputs..., outputs..., arena?),
    every argument a pointer to a C-contiguous, 64-byte aligned buffer; the arena is there
    when the module defines `main__arena_bytes` (its size in bytes). Parallel kernels call
    mlfuse's thread pool (`mlfuse_parallel`, which `mlfuse.backend.pool.register` binds
    for every engine of the process) and ask libgomp for the team's size."""
    from mlfuse.backend import pool
    from mlfuse.backend.llvm_translate import to_llvmlite

    llvm_ir = str(to_llvmlite(module))
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.load_library_permanently(ctypes.util.find_library("gomp") or "libgomp.so.1")
    pool.register()
    target = llvm.Target.from_default_triple()
    machine = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                           features=llvm.get_host_cpu_features().flatten(), opt=3)
    parsed = llvm.parse_assembly(llvm_ir)
    engine = llvm.create_mcjit_compiler(parsed, machine)
    engine.finalize_object()
    arena_size_at = engine.get_global_value_address("main__arena_bytes")
    arena_bytes = ctypes.c_int64.from_address(arena_size_at).value if arena_size_at else 0

    def aligned(nbytes: int) -> np.ndarray:
        raw = np.empty(nbytes + 64, np.uint8)
        start = -raw.ctypes.data % 64
        return raw[start:start + nbytes]

    x_buf = aligned(x.nbytes).view(np.float32).reshape(x.shape)
    x_buf[...] = x
    y = aligned(x.nbytes).view(np.float32).reshape(x.shape)
    args = [x_buf.ctypes.data, y.ctypes.data] + ([aligned(arena_bytes).ctypes.data] if arena_bytes else [])
    entry = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(args))(engine.get_function_address("main"))
    entry(*args)
    return y.copy()


def main() -> None:
    universe = Universe.get_multiverse()
    assert "graph" in universe.all_dialects and "fusion-plan" in universe.all_passes, "mlfuse is not installed"
    ctx = make_context(universe)
    module = softmax_module(ctx)
    compile_module(module, universe, ctx)
    kernels = [op for op in module.walk() if op.name == "llvm.func" and op.body.blocks]
    print(f"{len(kernels)} LLVM functions with bodies")
    x = np.random.default_rng(0).standard_normal((ROWS, COLS)).astype(np.float32)
    y = run(module, x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    print("ok")


if __name__ == "__main__":
    main()
