"""A `loop.gemm`'s epilogue region as the generated kernel's program
(mlfuse/backend/gemm_epilogue.py): which regions and operand maps it can apply.

The kernel evaluates arith's float ops (addf subf mulf divf negf, maximumf minimumf
maxnumf minnumf, cmpf and select), math's f32 exp, tanh and erf (expand-math's
expansions: GELU and SiLU after a linear layer) and constants on vectors along C's
rows; an operand
must step by 0 or 1 element along C's columns (a value per row, or a row of its own).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import Float32Type, Float64Type, MemRefType
from xdsl.ir import Block, BlockArgument, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineDimExpr, AffineExpr

from mlfuse.backend.gemm_epilogue import UNARY as KERNEL_UNARY
from mlfuse.backend.gemm_epilogue import Epilogue, Operand
from mlfuse.conversion.expand_math import EXPANDED
from mlfuse.conversion.group_to_loop import strides as row_major_strides
from mlfuse.dialects import loop

MAX_TOKENS = 64  # longer programs (a value used many times, written out) stay a nest
BINARY = {
    arith.AddfOp: "add",
    arith.SubfOp: "sub",
    arith.MulfOp: "mul",
    arith.DivfOp: "div",
    arith.MaximumfOp: "max",
    arith.MinimumfOp: "min",
    arith.MaxnumfOp: "maxnum",
    arith.MinnumfOp: "minnum",
}
# math's f32 ops the kernel expands, by their tokens (the backend's UNARY: exp, tanh, erf)
UNARY = {op: op.name.removeprefix("math.") for op in EXPANDED if op.name.removeprefix("math.") in KERNEL_UNARY}
PREDICATES = arith.CMPF_COMPARISON_OPERATIONS  # cmpf's predicate numbering: "false", "oeq", ...


def kernel_epilogue(op: loop.GemmOp) -> Epilogue | None:
    """The epilogue of `op` as the generated kernel's program: None without one, or
    when the kernel cannot apply it (an op it does not generate, an operand read across
    C's columns other than one by one, a program of more than MAX_TOKENS)."""
    if op.epilogue is None:
        return None
    tc = op.product_type
    operands = []
    maps = op.epilogue_maps.data if op.epilogue_maps is not None else ()
    for value, m in zip(op.epilogue_ins, maps):
        operand = operand_strides(value, m.data.results, tc.get_num_dims())
        if operand is None:
            return None
        operands.append(operand)
    block = op.epilogue.block
    last = block.last_op
    assert isinstance(last, loop.YieldOp)
    if tc.get_shape()[-1] == 0 or op.a.type.get_shape()[-1] == 0:  # type: ignore[attr-defined]
        return None  # no depth block: the kernel would never reach its last one
    program = postfix(last.values[0], block, [MAX_TOKENS])
    return Epilogue(tuple(operands), tuple(program)) if program is not None else None


def postfix(value: SSAValue, block: Block, budget: list[int], slots: dict[SSAValue, int] | None = None) -> list[str] | None:
    """`value` as a postfix program over `block`'s arguments (the product, then the
    operands), or None when it uses an op the kernel does not generate, a value from
    outside the region (the region is not isolated from above), or more tokens than
    `budget` holds. An op's result that the region uses more than once is computed once:
    `p<k>` after its program keeps it in slot k, `g<k>` reads it there (ReLU6 as
    select(x < 6, select(x > 0, x, 0), 6) had written x = c + bias out four times)."""
    slots = {} if slots is None else slots
    budget[0] -= 1
    if budget[0] < 0:
        return None
    if value in slots:
        return [f"g{slots[value]}"]
    if isinstance(value, BlockArgument):
        if value.block is not block:
            return None
        return ["c"] if value.index == 0 else [f"i{value.index - 1}"]
    op = value.owner
    if not isinstance(op, arith.ConstantOp) and op.parent_block() is not block:
        return None
    if isinstance(op, arith.ConstantOp):
        t = value.type
        if not isinstance(t, Float32Type | Float64Type):
            return None
        fmt = "<f" if isinstance(t, Float32Type) else "<d"
        return ["k" + struct.pack(fmt, op.value.value.data).hex()]  # type: ignore[union-attr]
    token = op_token(value)
    if token is None:
        return None
    operands, name = token
    program: list[str] = []
    for v in operands:
        part = postfix(v, block, budget, slots)
        if part is None:
            return None
        program += part
    program.append(name)
    if value.has_more_than_one_use():
        slots[value] = len(slots)
        program.append(f"p{slots[value]}")
    return program


def op_token(value: SSAValue) -> tuple[list[SSAValue], str] | None:
    """The operands and the kernel's token of the op that defines `value`, or None for
    an op the kernel does not generate."""
    op = value.owner
    if type(op) in BINARY:
        return list(op.operands), BINARY[type(op)]  # type: ignore[index]
    if isinstance(op, arith.NegfOp):
        return [op.operand], "neg"
    if type(op) in UNARY and isinstance(value.type, Float32Type):
        return [op.operands[0]], UNARY[type(op)]  # type: ignore[index, union-attr]
    if isinstance(op, arith.CmpfOp):
        return [op.lhs, op.rhs], "cmp" + PREDICATES[op.predicate.value.data]
    if isinstance(op, arith.SelectOp):
        return [op.cond, op.lhs, op.rhs], "sel"
    return None


def operand_strides(value: SSAValue, results: Sequence[AffineExpr], c_rank: int) -> Operand | None:
    """How an operand read at `results` (affine in C's indices d0..) steps along C's
    batch (d0 of a rank-3 C), rows and columns; None unless the map is linear, its
    step along the columns 0 or 1, and its strides not negative. A column j read as
    (j floordiv ow + top, j mod ow + left) of images wp wide (the interiors of padded
    images, `framed_index`) is a framed operand: Operand(..., ow, wp)."""
    t = value.type
    if not isinstance(t, MemRefType) or c_rank not in (2, 3):
        return None
    shape = t.get_shape()
    total: dict[int, int] = {}
    framed: dict[str, tuple[int, int, int]] = {}  # "floordiv" / "mod": (dimension, ow, stride)
    for expr, stride in zip(results, row_major_strides(shape)):
        form = linear(expr)
        if form is None:
            part = framed_index(expr)
            if part is None or part[0] in framed:
                return None
            kind, d, ow, constant = part
            framed[kind] = (d, ow, stride)
            form = {-1: constant}
        for d, coeff in form.items():
            total[d] = total.get(d, 0) + coeff * stride
    steps = [total.get(d, 0) for d in range(c_rank)]
    batch = steps[0] if c_rank == 3 else 0
    operand = Operand(total.get(-1, 0), batch, steps[-2], steps[-1])
    if framed:
        (d_row, ow, wp), (d_col, ow_col, unit) = framed.get("floordiv", (-1, 0, 0)), framed.get("mod", (-2, 0, 0))
        if not (d_row == d_col == c_rank - 1 and ow == ow_col and unit == 1 and steps[-1] == 0):
            return None
        operand = Operand(operand.offset, batch, steps[-2], 1, ow, wp)
    if operand.col_stride not in (0, 1) or min(operand.offset, operand.batch_stride, operand.row_stride) < 0:
        return None
    return operand


def framed_index(expr: AffineExpr) -> tuple[str, int, int, int] | None:
    """("floordiv" or "mod", d, ow, c) for `d floordiv ow + c` or `d mod ow + c` (c a
    constant, possibly 0), else None."""
    constant = 0
    if isinstance(expr, AffineBinaryOpExpr) and expr.kind == AffineBinaryOpKind.Add:
        for term, other in ((expr.rhs, expr.lhs), (expr.lhs, expr.rhs)):
            if isinstance(term, AffineConstantExpr):
                constant, expr = term.value, other
                break
    if not isinstance(expr, AffineBinaryOpExpr) or not isinstance(expr.lhs, AffineDimExpr) or not isinstance(expr.rhs, AffineConstantExpr):
        return None
    kinds = {AffineBinaryOpKind.FloorDiv: "floordiv", AffineBinaryOpKind.Mod: "mod"}
    if expr.kind not in kinds or expr.rhs.value <= 0:
        return None
    return kinds[expr.kind], expr.lhs.position, expr.rhs.value, constant


def linear(expr: AffineExpr) -> dict[int, int] | None:
    """expr as {dimension: coefficient, -1: constant}, or None when it is not linear."""
    if isinstance(expr, AffineDimExpr):
        return {expr.position: 1}
    if isinstance(expr, AffineConstantExpr):
        return {-1: expr.value}
    if isinstance(expr, AffineBinaryOpExpr):
        lhs, rhs = linear(expr.lhs), linear(expr.rhs)
        if lhs is None or rhs is None:
            return None
        if expr.kind == AffineBinaryOpKind.Add:
            return {d: lhs.get(d, 0) + rhs.get(d, 0) for d in lhs.keys() | rhs.keys()}
        if expr.kind == AffineBinaryOpKind.Mul and (set(lhs) == {-1} or set(rhs) == {-1}):
            scale, form = (lhs[-1], rhs) if set(lhs) == {-1} else (rhs[-1], lhs)
            return {d: c * scale for d, c in form.items()}
    return None
