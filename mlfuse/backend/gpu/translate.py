"""llvm dialect -> llvmlite module for the NVPTX backend.

xDSL 0.74's translator (xdsl.backend.llvm) is reused op by op, with what NVPTX
needs on top:
- a `llvm.func` marked `nvvm.kernel` becomes a `ptx_kernel` function (xDSL has no
  #llvm.cconv<ptx_kernel>); `nvvm.maxntid` and `nvvm.minctasm` become the
  `!nvvm.annotations` that NVPTX turns into .maxntid / .minnctapersm;
- `llvm.getelementptr` keeps the address space of its base pointer (xDSL casts
  every base to an address-space-0 pointer, which is invalid IR for shared and
  global pointers);
- globals in shared memory get an `undef` initializer (internal) or none
  (external: the dynamic shared memory array), and their alignment.
"""

from __future__ import annotations

import llvmlite.ir as ir
from xdsl.backend.llvm.convert import _declare_func
from xdsl.backend.llvm.convert_op import convert_op
from xdsl.backend.llvm.convert_type import convert_type
from xdsl.dialects import llvm
from xdsl.dialects.builtin import DenseArrayBase, IntAttr, IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from mlfuse.backend.llvm_translate import keeping_intrinsic_fast_math

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"


class TranslationError(Exception):
    """The llvm-dialect module uses something the NVPTX translation cannot express."""


def address_space(t) -> int:
    if isinstance(t, llvm.LLVMPointerType) and isinstance(t.addr_space, IntAttr):
        return t.addr_space.data
    return 0


def _convert_gep(op: llvm.GEPOp, builder: ir.IRBuilder, val_map: dict[SSAValue, ir.Value]) -> None:
    element = convert_type(op.elem_type)
    base = builder.bitcast(val_map[op.ptr], element.as_pointer(address_space(op.ptr.type)))
    ssa_indices = iter(op.ssa_indices)
    indices = [
        val_map[next(ssa_indices)] if idx == llvm.GEP_USE_SSA_VAL else ir.Constant(ir.IntType(32), idx)
        for idx in op.rawConstantIndices.iter_values()
    ]
    val_map[op.results[0]] = builder.gep(base, indices, inbounds=op.inbounds is not None, source_etype=element)


def _convert_nvptx_op(op: Operation, builder: ir.IRBuilder, val_map, block_map) -> None:
    if isinstance(op, llvm.GEPOp):
        _convert_gep(op, builder, val_map)
        return
    try:
        convert_op(op, builder, val_map, block_map)
    except NotImplementedError as e:
        raise TranslationError(f"cannot translate '{op.name}' to LLVM IR: {e}") from None


def _convert_global(op: llvm.GlobalOp, module: ir.Module) -> None:
    value_type = convert_type(op.global_type)
    gvar = ir.GlobalVariable(module, value_type, name=op.sym_name.data, addrspace=op.addr_space.value.data)
    linkage = op.linkage.linkage.data
    gvar.linkage = linkage
    if op.alignment is not None:
        gvar.align = op.alignment.value.data
    if op.constant is not None:
        gvar.global_constant = True
    if op.value is not None:
        from xdsl.backend.llvm.convert_op import create_constant

        gvar.initializer = create_constant(op.global_type, op.value)
    elif linkage != "external":
        gvar.initializer = ir.Constant(value_type, ir.Undefined)


def _convert_body(op: llvm.FuncOp, module: ir.Module) -> None:
    fn = module.get_global(op.sym_name.data)
    block_map: dict[Block, ir.Block] = {}
    val_map: dict[SSAValue, ir.Value] = {}
    for i, block in enumerate(op.body.blocks):
        block_map[block] = fn.append_basic_block(name=block.name_hint or "")
        if i == 0:
            val_map.update(zip(block.args, fn.args))
    for i, block in enumerate(op.body.blocks):
        if i > 0 and block.args:
            builder = ir.IRBuilder(block_map[block])
            for arg in block.args:
                val_map[arg] = builder.phi(convert_type(arg.type))
    for block in op.body.blocks:
        builder = ir.IRBuilder(block_map[block])
        if block_map[block].instructions:
            builder.position_after(block_map[block].instructions[-1])
        for inner in block.ops:
            _convert_nvptx_op(inner, builder, val_map, block_map)


def _annotate_kernel(op: llvm.FuncOp, fn: ir.Function, module: ir.Module) -> None:
    fn.calling_convention = "ptx_kernel"
    i32 = ir.IntType(32)
    maxntid = op.attributes.get("nvvm.maxntid")
    if isinstance(maxntid, DenseArrayBase):
        for axis, size in zip("xyz", maxntid.get_values()):
            module.add_named_metadata(
                "nvvm.annotations", [fn, ir.MetaDataString(module, f"maxntid{axis}"), ir.Constant(i32, size)]
            )
    minctasm = op.attributes.get("nvvm.minctasm")
    if isinstance(minctasm, IntegerAttr):
        module.add_named_metadata(
            "nvvm.annotations",
            [fn, ir.MetaDataString(module, "minctasm"), ir.Constant(i32, minctasm.value.data)],
        )


def is_kernel(op: Operation) -> bool:
    return isinstance(op, llvm.FuncOp) and "nvvm.kernel" in op.attributes


def translate_to_llvmlite(module: ModuleOp) -> ir.Module:
    """An llvm-dialect module (kernels marked `nvvm.kernel`) as an llvmlite module for NVPTX."""
    out = ir.Module()
    out.triple = NVPTX_TRIPLE
    funcs: list[llvm.FuncOp] = []
    for op in module.ops:
        if isinstance(op, llvm.GlobalOp):
            _convert_global(op, out)
        elif isinstance(op, llvm.FuncOp):
            funcs.append(op)
        else:
            raise TranslationError(
                f"'{op.name}' is left at the top level of the module: only llvm.func and "
                "llvm.mlir.global translate to LLVM IR (run convert-kernel-to-nvvm and convert-to-llvm first)"
            )
    for op in funcs:
        _declare_func(op, out)
        if is_kernel(op):
            _annotate_kernel(op, out.get_global(op.sym_name.data), out)

    def bodies() -> ir.Module:
        for op in funcs:
            if op.body.blocks:
                _convert_body(op, out)
        return out

    return keeping_intrinsic_fast_math(module, bodies)  # a max reduction's nsz
