"""Identical private functions merged into one (the logic of the merge-kernels pass).

The CPU pipeline outlines every kernel into a private function of its own
(convert-loop-to-scf{outline-serial=true}), and the repeated layers of a model give
kernels that differ in their names only: MobileNetV2's 117 kernels have 68 distinct
bodies, ResNet-18's 63 have 34. Everything after the outlining (expand-math,
convert-to-llvm, the translation to llvmlite) costs Python time per kernel; LLVM
already compiled twins once (mlfuse.backend.kernels), this saves the lowering too.

Two functions are twins when both are private definitions with the same type, the
same argument and result attributes and structurally equivalent bodies (xDSL's
`is_structurally_equivalent`: the same ops, attributes, properties and uses). The
first in module order is kept; every symbol reference to a later twin (func.call,
loop.parallel_call) names the first, and the twin is erased. What a function does
is its body, so no call changes meaning.

Twins must also get the same alignment facts from their call sites
(convert-to-llvm's `parameter_alignment`, for 64- and 16-byte aligned outputs alike):
a kernel called with aligned buffers by one layer and with an offset view by another
would otherwise lose, for both, the aligned and non-temporal stores that the first
layer's copy could prove.
"""

from __future__ import annotations

from collections import defaultdict

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, SymbolRefAttr
from xdsl.ir import Attribute


def _candidates(module: ModuleOp) -> list[func.FuncOp]:
    return [
        op for op in module.ops
        if isinstance(op, func.FuncOp) and op.sym_visibility is not None and op.sym_visibility.data == "private"
        and op.body.blocks
    ]


def _shape(fn: func.FuncOp) -> tuple:
    """A cheap key that twins share: the type and the names of the ops in order."""
    return (fn.function_type, fn.arg_attrs, fn.res_attrs, tuple(op.name for op in fn.body.walk()))


def _alignment_facts(module: ModuleOp) -> dict[str, tuple]:
    """What convert-to-llvm will prove about each function's parameters, for outputs
    aligned to 64 and to 16 bytes (its output-alignment option)."""
    from mlfuse import abi
    from mlfuse.conversion.to_llvm import parameter_alignment

    def frozen(facts: list[list[int]] | None) -> tuple:
        return tuple(map(tuple, facts or ()))

    wide, narrow = parameter_alignment(module, abi.ALIGNMENT), parameter_alignment(module, 16)
    return {name: (frozen(facts), frozen(narrow.get(name))) for name, facts in wide.items()}


def twins(module: ModuleOp) -> dict[str, str]:
    """For each private function that has an earlier twin, the name of that twin."""
    by_shape: dict[tuple, list[func.FuncOp]] = defaultdict(list)
    merged: dict[str, str] = {}
    facts = _alignment_facts(module)
    for fn in _candidates(module):
        kept = by_shape[(_shape(fn), facts.get(fn.sym_name.data))]
        twin = next((k for k in kept if k.body.is_structurally_equivalent(fn.body)), None)
        if twin is None:
            kept.append(fn)
        else:
            merged[fn.sym_name.data] = twin.sym_name.data
    return merged


def _renamed(attr: Attribute, names: dict[str, str]) -> Attribute:
    if isinstance(attr, SymbolRefAttr) and not attr.nested_references.data and attr.root_reference.data in names:
        return SymbolRefAttr(names[attr.root_reference.data])
    if isinstance(attr, ArrayAttr):
        items = [_renamed(a, names) for a in attr.data]
        return attr if all(new is old for new, old in zip(items, attr.data)) else ArrayAttr(items)
    return attr


def redirect_symbol_uses(module: ModuleOp, names: dict[str, str]) -> None:
    """Every reference to a symbol of `names` (in properties or attributes) names its image.
    (xDSL 0.74 declares SymbolTable.replace_all_symbol_uses but does not implement it.)"""
    for op in module.walk():
        for table in (op.properties, op.attributes):
            for key, attr in table.items():
                new = _renamed(attr, names)
                if new is not attr:
                    table[key] = new


def merge_kernels(module: ModuleOp) -> int:
    """Merge twin private functions (see the module docstring); how many were erased."""
    merged = twins(module)
    if not merged:
        return 0
    redirect_symbol_uses(module, merged)
    for op in list(module.ops):
        if isinstance(op, func.FuncOp) and op.sym_name.data in merged:
            module.body.block.erase_op(op)
    return len(merged)
