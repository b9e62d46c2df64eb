"""xDSL `llvm` dialect -> llvmlite module.

xDSL's translator (xdsl.backend.llvm.convert) does the work; this wrapper adds
what mlfuse needs on top: constant globals given as raw bytes (attribute
`mlfuse.bytes`, written by convert-to-llvm: far cheaper than one attribute per
element for large weights), 64-byte alignment of those globals, and the bodies of
the GEMM kernels convert-to-llvm declares (mlfuse/backend/gemm_kernels.py), for
the vector width of `features` (an LLVM feature string; the host's by default).
Stores marked nontemporal get the streaming TBAA tag (mlfuse/backend/streaming.py).
The thread team's schedule functions get their bodies (mlfuse/backend/home_blocks.py).
Loops convert-to-llvm marked to stay loops (to_llvm.KEEP_LOOP) get `!llvm.loop`
unroll.disable on their latch branch, loops marked to stay scalar (to_llvm.NO_VECTORIZE)
vectorize.width 1.
"""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir
import numpy as np
from xdsl.backend.llvm.convert import convert_module
from xdsl.dialects import llvm
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerAttr, ModuleOp, StringAttr, i8

from mlfuse.backend.gemm_kernels import (
    PACKED_ATTRS,
    GemmShape,
    blocking_for,
    define_gemm_kernels,
    prepack_a,
    prepack_b,
    prepacked_bytes,
)
from mlfuse.backend.home_blocks import define_home_blocks
from mlfuse.backend.streaming import tag_streaming_accesses
from mlfuse.conversion.to_llvm import KEEP_LOOP, MINMAX_REDUCTION, NO_VECTORIZE
from mlfuse.diagnostics import Diagnostic, location_of

# constants this large may be left out of the object code (see to_llvmlite's `external`)
EXTERNAL_CONSTANT_BYTES = 4096


def to_llvmlite(
    module: ModuleOp, triple: str | None = None, features: str | None = None, external: dict[str, bytes] | None = None,
    define_gemms: bool = True,
) -> ir.Module:
    """The llvmlite module of an xDSL `llvm` module. With `external` (a dict to fill), raw-byte
    constants of EXTERNAL_CONSTANT_BYTES or more become declarations and their bytes go into
    the dict: the loader binds them (backend/cpu.JitModule). Weights then cost LLVM nothing
    (ResNet-18's 47 MB were printed, parsed, optimized and emitted as text) and the object
    depends only on the code. Without `define_gemms` the generated GEMM kernels stay
    declarations: the CPU loader builds each where it compiles it (cpu.GemmSource)."""
    raw: dict[str, bytes] = {}
    for op in module.ops:
        if isinstance(op, llvm.GlobalOp) and "mlfuse.bytes" in op.attributes:
            raw[op.sym_name.data] = global_bytes(op)
            for operand, key in PACKED_ATTRS.items():  # the panels of a GEMM kernel's A or B
                packed_for = op.attributes.get(key)
                if isinstance(packed_for, StringAttr):
                    features = features or host_features()
                    raw[op.sym_name.data] = packed_panels(raw[op.sym_name.data], packed_for.data, operand, features)
    mod = keeping_intrinsic_fast_math(module, lambda: convert_module(module, fallback_target_triple=triple))
    tag_streaming_accesses(module, mod)
    align_wrapper_loads(mod)
    keep_marked_loops(module, mod, 32 * blocking_for(features or host_features()).vw)  # the f32 lanes' bits
    for name, data in raw.items():
        g = mod.get_global(name)
        g.global_constant = True
        g.align = 64
        if external is not None and len(data) >= EXTERNAL_CONSTANT_BYTES:
            g.initializer, g.linkage = None, ""  # a declaration: `external constant [n x i8], align 64`
            external[name] = data
        else:
            g.initializer = byte_array_constant(data)
    define_home_blocks(mod)
    if define_gemms and any(GemmShape.from_symbol(f.name) for f in mod.functions):
        define_gemm_kernels(mod, features or host_features())
    return mod


def global_bytes(op: llvm.GlobalOp) -> bytes:
    """The bytes of a global's `mlfuse.bytes`: an i8 tensor (convert-to-llvm), or hex text
    (IR printed before: the attribute was a string). Anything else is a located error."""
    attr = op.attributes["mlfuse.bytes"]
    if isinstance(attr, DenseIntOrFPElementsAttr) and attr.get_element_type() == i8:
        return attr.data.data
    try:
        if isinstance(attr, StringAttr):
            return bytes.fromhex(attr.data)
    except ValueError:
        pass
    raise Diagnostic(f"global @{op.sym_name.data}: mlfuse.bytes must be a tensor of i8 or hex text", location_of(op))


def host_features() -> str:
    """The LLVM features the CPU backend compiles for (cpu.host_cpu)."""
    from mlfuse.backend import cpu

    return cpu.host_cpu()[1]


def packed_panels(data: bytes, symbol: str, operand: str, features: str) -> bytes:
    """A's bytes (batch x m x k, row-major) or B's (batch x k x n) as the panels the GEMM
    kernel `symbol` reads (gemm_kernels.prepack_a/_b for `features`), zero-filled to
    prepacked_bytes."""
    shape = GemmShape.from_symbol(symbol)
    assert shape is not None
    values = np.frombuffer(data, np.float32 if shape.dtype == "f32" else np.float64)
    if operand == "a":
        panels = prepack_a(values.reshape(shape.batch, shape.m, shape.k), shape, features).tobytes()
    else:
        panels = prepack_b(values.reshape(shape.batch, shape.k, shape.n), shape, features).tobytes()
    return panels + bytes(prepacked_bytes(shape, operand) - len(panels))


def align_wrapper_loads(mod: ir.Module) -> None:
    """A thread wrapper `K__omp` loads K's buffer arguments from its slot array;
    when K's parameters carry `align` (see convert-to-llvm), say so on the loads
    (`!align`), so the facts survive K being inlined into the wrapper."""
    functions = {f.name: f for f in mod.functions}
    for name, wrapper in functions.items():
        kernel = functions.get(name.removesuffix("__omp")) if name.endswith("__omp") else None
        if kernel is None or not wrapper.blocks:
            continue
        loads = [i for i in wrapper.blocks[0].instructions if isinstance(i, ir.LoadInstr) and isinstance(i.type, ir.PointerType)]
        for load, param in zip(loads, kernel.args[2:]):  # the kernel takes (lo, hi, buffers...)
            align = param.attributes.align
            if isinstance(param.type, ir.PointerType) and align:
                load.set_metadata("align", mod.add_metadata([ir.Constant(ir.IntType(64), align)]))


def keeping_intrinsic_fast_math(module: ModuleOp, translate: Callable[[], ir.Module]) -> ir.Module:
    """`translate()` of `module` with the fast-math flags of its `llvm.call_intrinsic`s
    cleared, then put on the translated calls: xDSL 0.74's translator rejects flags there
    (NotImplementedError), and llvm.maximum with nsz is one vmaxps and a blend on x86
    (scalar.reduction_max_min). The xDSL ops get their flags back."""
    flagged: dict[str, list[tuple[llvm.CallIntrinsicOp, llvm.FastMathAttr]]] = {}
    for op in module.ops:
        if not isinstance(op, llvm.FuncOp):
            continue
        calls = [c for c in op.walk() if isinstance(c, llvm.CallIntrinsicOp)]
        if any(c.fastmathFlags.data for c in calls):
            flagged[op.sym_name.data] = [(c, c.fastmathFlags) for c in calls]
            for c in calls:
                c.properties["fastmathFlags"] = llvm.FastMathAttr(None)
    try:
        mod = translate()
    finally:
        for calls in flagged.values():
            for c, flags in calls:
                c.properties["fastmathFlags"] = flags
    for name, calls in flagged.items():
        give_fast_math(mod.get_global(name), calls)
    return mod


def give_fast_math(function: ir.Function, calls: list[tuple[llvm.CallIntrinsicOp, llvm.FastMathAttr]]) -> None:
    """The flags on the same intrinsic calls of the translated `function` (the translation
    keeps the ops in order; a mismatch keeps none: the flags only allow more)."""
    converted = [i for block in function.blocks for i in block.instructions
                 if isinstance(i, ir.CallInstr) and i.callee.name.startswith("llvm.")]
    if [c.callee.name for c in converted] != [op.intrin.data for op, _ in calls]:  # pragma: no cover - a hint only
        return
    for call, (_, flags) in zip(converted, calls):
        if flags.data:
            call.fastmath = ir.FastMathFlags([f.value for f in flags.data])


def keep_marked_loops(module: ModuleOp, mod: ir.Module, vector_bits: int = 128) -> None:
    """`!llvm.loop` hints on the latch branches convert-to-llvm marked. KEEP_LOOP:
    `llvm.loop.unroll.disable`, so LLVM leaves the loop to its loop vectorizer instead of
    unrolling it fully first (to_llvm.row_loop), with `llvm.loop.interleave.count` where
    the mark gives one. NO_VECTORIZE: `llvm.loop.vectorize.width 1` (to_llvm.STRIDED_LOOP).
    MINMAX_REDUCTION: the width of a `vector_bits` vector of its elements (to_llvm's
    comment says which LLVM abort that avoids).
    xDSL's translation keeps the blocks in order.

    Not also `llvm.loop.vectorize.predicate.enable` (the last partial vector masked,
    a 28-wide row in 16 + 12 of 16 lanes instead of 7 x 4): with AVX-512 it made
    MobileNetV2 1.24x and MobileNetV3-small 1.15x slower."""

    def hint(name: str, value: int | None = None) -> ir.MDValue:  # llvmlite gives equal operands one node
        return mod.add_metadata([ir.MetaDataString(mod, name)] + ([] if value is None else [ir.Constant(ir.IntType(32), value)]))

    for op in module.ops:
        if not isinstance(op, llvm.FuncOp) or not op.body.blocks:
            continue
        blocks = mod.get_global(op.sym_name.data).blocks
        if len(blocks) != len(op.body.blocks):  # pragma: no cover - a hint only: never misplace it
            continue
        for block, converted in zip(op.body.blocks, blocks):
            branch = block.last_op
            if branch is None or not isinstance(converted.terminator, ir.Branch):
                continue
            hints = []
            if KEEP_LOOP in branch.attributes:
                hints.append(hint("llvm.loop.unroll.disable"))
                interleave = branch.attributes[KEEP_LOOP]
                if isinstance(interleave, IntegerAttr):  # a window's row (to_llvm.WINDOW_ROW_INTERLEAVE)
                    hints.append(hint("llvm.loop.interleave.count", interleave.value.data))
            if NO_VECTORIZE in branch.attributes:
                hints.append(hint("llvm.loop.vectorize.width", 1))
            elif isinstance(bits := branch.attributes.get(MINMAX_REDUCTION), IntegerAttr):
                hints.append(hint("llvm.loop.vectorize.width", max(1, vector_bits // bits.value.data)))
            if not hints:
                continue
            loop_id = ir.values.MDValue(mod, hints, name=str(len(mod.metadata)))  # distinct: not uniqued
            loop_id.operands = (loop_id, *hints)  # a loop ID starts with itself
            converted.terminator.set_metadata("llvm.loop", loop_id)


# `\XX` for every byte value: LLVM's c"..." string syntax, one entry per byte
_HEX_ESCAPES = np.frombuffer(b"".join(b"\\%02X" % i for i in range(256)), np.uint8).reshape(256, 3)


def byte_array_constant(data: bytes) -> ir.Constant:
    """An [n x i8] constant of raw bytes. llvmlite escapes a bytearray byte by byte in Python
    (3 s for ResNet-18's weights at 32x32); a table lookup in numpy writes the same text."""
    text = _HEX_ESCAPES[np.frombuffer(data, np.uint8)].tobytes().decode("ascii")
    return ir.FormattedConstant(ir.ArrayType(ir.IntType(8), len(data)), f'c"{text}"')
