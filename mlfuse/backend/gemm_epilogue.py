"""The elementwise epilogue of a generated GEMM kernel (`loop.gemm` with an `epilogue`).

The kernel applies the epilogue to its register tile before the last depth block's
store, so a conv's bias, residual and ReLU cost no pass over the output. Like the rest
of the kernel, the epilogue is written into the kernel's symbol, so that the
translation generates the whole kernel from its name (mlfuse/backend/gemm_kernels.py)
and identical kernels share one object:

    mlfuse_gemm_f32_1x64x3136x576_w3x3x58x58_pa_e.o0x0x1x0.c.i0.add.k00000000.cmpugt.c.i0.add.k00000000.sel

is C = relu(A @ B + bias[row]): `o<offset>x<batch>x<row>x<col>` per operand, how far
apart its elements are (in elements) along C's batch, rows and columns (0 or 1: a
splat of one value per row, or a vector along the row), with `f<ow>x<wp>` after it
where the operand's rows are the interiors of images (a residual read from the next
conv's padded input: column j at (j // ow) * wp + j % ow), then the region's yielded
value as a postfix program:

    c          the product's element
    i<k>       operand k's element
    k<hex>     a constant (its little-endian bytes: 6.0f is k0000c040)
    p<k>       keep the value on top of the stack in slot k as well (it stays on top)
    g<k>       the value in slot k (a value the region uses twice is computed once)
    add sub mul div max min maxnum minnum neg       arith's addf ... negf, maximumf ...
    cmp<pred>  arith.cmpf (oeq ... uno)             sel   arith.select
    exp tanh erf                                    math's f32 exp, tanh, erf

Each op is evaluated as convert-to-llvm lowers it (llvm.maximum for maximumf, an fcmp
with the same predicate), without fast-math flags, so the result is the same as the
epilogue nest's; exp, tanh and erf are expand-math's expansions, emitted by the same
F32Emitter code through llvmlite (`LlvmliteF32Emitter`), so a transformer's FC1 + GELU
is one kernel. A value used twice is computed once (p<k>, g<k>): written out twice,
ReLU6's c + bias made each such kernel's text 4x as long (LLVM's CSE merged them, after
parsing and optimizing them all).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.ir as ir
from xdsl.dialects import arith
from xdsl.dialects import math as mathd

from mlfuse.conversion.expand_math import F32Emitter

INTRINSICS = {"max": "llvm.maximum", "min": "llvm.minimum", "maxnum": "llvm.maxnum", "minnum": "llvm.minnum"}


@dataclass(frozen=True)
class Operand:
    """Where an epilogue operand's element for C[batch, row, col] is: offset + batch *
    batch_stride + row * row_stride + col * col_stride (col_stride 0 or 1), or with a
    frame (ow > 0, col_stride 1) + (col // ow) * wp + col % ow in place of col."""

    offset: int
    batch_stride: int
    row_stride: int
    col_stride: int
    ow: int = 0
    wp: int = 0

    @property
    def token(self) -> str:
        frame = f"f{self.ow}x{self.wp}" if self.ow else ""
        return f"o{self.offset}x{self.batch_stride}x{self.row_stride}x{self.col_stride}{frame}"

    @staticmethod
    def parse(token: str) -> Operand:
        """The operand of `token` (o<offset>x<batch>x<row>x<col>[f<ow>x<wp>])."""
        strides, _, frame = token[1:].partition("f")
        return Operand(*map(int, strides.split("x")), *(map(int, frame.split("x")) if frame else ()))


@dataclass(frozen=True)
class Epilogue:
    operands: tuple[Operand, ...]
    program: tuple[str, ...]

    @property
    def token(self) -> str:
        return ".".join([o.token for o in self.operands] + list(self.program))

    @staticmethod
    def parse(token: str) -> Epilogue:
        parts = token.split(".")
        operands = tuple(Operand.parse(p) for p in parts if p.startswith("o"))
        return Epilogue(operands, tuple(p for p in parts if not p.startswith("o")))

    # --- into a kernel ------------------------------------------------------------------

    def emit(self, b: ir.IRBuilder, acc, operand: Callable[[int], ir.Value], intrinsic: Callable[[str], ir.Function]):
        """The program on the vector `acc`: operand(k) gives operand k's vector,
        intrinsic(name) an element-wise intrinsic of acc's type."""
        stack: list = []
        slots: dict[str, object] = {}
        for t in self.program:
            if t == "c":
                stack.append(acc)
            elif t[0] == "p" and t[1:].isdigit():
                slots[t[1:]] = stack[-1]
            elif t[0] == "g" and t[1:].isdigit():
                stack.append(slots[t[1:]])
            elif t[0] == "i":
                stack.append(operand(int(t[1:])))
            elif t[0] == "k":
                stack.append(splat_constant(acc.type, t[1:]))
            elif t == "neg":
                stack.append(b.fneg(stack.pop()))
            elif t in UNARY:
                stack.append(getattr(LlvmliteF32Emitter(b, acc.type), t)(stack.pop()))
            elif t == "sel":
                f, tv, cond = stack.pop(), stack.pop(), stack.pop()
                stack.append(b.select(cond, tv, f))
            else:
                y, x = stack.pop(), stack.pop()
                stack.append(binary(b, t, x, y, intrinsic))
        (result,) = stack
        return result


def binary(b: ir.IRBuilder, t: str, x, y, intrinsic: Callable[[str], ir.Function]):
    if t.startswith("cmp"):
        pred = t[3:]
        if pred in ("false", "true"):
            return ir.Constant(ir.VectorType(ir.IntType(1), x.type.count), [pred == "true"] * x.type.count)
        ordered = {"oeq": "==", "ogt": ">", "oge": ">=", "olt": "<", "ole": "<=", "one": "!=", "ord": "ord"}
        unordered = {"ueq": "==", "ugt": ">", "uge": ">=", "ult": "<", "ule": "<=", "une": "!=", "uno": "uno"}
        if pred in ordered:
            return b.fcmp_ordered(ordered[pred], x, y)
        return b.fcmp_unordered(unordered[pred], x, y)
    if t in INTRINSICS:
        return b.call(intrinsic(INTRINSICS[t]), [x, y])
    return {"add": b.fadd, "sub": b.fsub, "mul": b.fmul, "div": b.fdiv}[t](x, y)


def splat_constant(vector: ir.VectorType, bits: str) -> ir.Constant:
    """The constant `bits` (its little-endian bytes in hex) in every lane of `vector`."""
    fmt = "<f" if isinstance(vector.element, ir.FloatType) else "<d"
    value = struct.unpack(fmt, bytes.fromhex(bits))[0]
    return ir.Constant(vector, [value] * vector.count)


UNARY = ("exp", "tanh", "erf")  # f32 only: F32Emitter's expansions


class LlvmliteF32Emitter(F32Emitter):
    """expand-math's F32Emitter writing llvmlite instructions instead of arith ops, so
    that a kernel generated straight into LLVM IR (an epilogue's exp, tanh, erf)
    computes the same expansion as a loop nest does: the functions are inherited, only
    the primitive ops are redefined here."""

    BINARY = {arith.AddfOp: "fadd", arith.SubfOp: "fsub", arith.MulfOp: "fmul", arith.DivfOp: "fdiv",
              arith.AndIOp: "and_", arith.OrIOp: "or_", arith.XOrIOp: "xor", arith.SubiOp: "sub",
              arith.ShLIOp: "shl", arith.ShRUIOp: "lshr"}  # IRBuilder's method for each

    def __init__(self, b: ir.IRBuilder, t: ir.VectorType):
        self.b, self.t, self.it = b, t, ir.VectorType(ir.IntType(32), t.count)

    def c(self, v: float):
        return ir.Constant(self.t, [float(v)] * self.t.count)

    def ci(self, v: int):
        return ir.Constant(self.it, [int(v)] * self.it.count)

    def op(self, cls, *args, **kw):
        b = self.b
        if cls in self.BINARY:
            flags = ("contract",) if args[2:] else ()  # F32Emitter passes CONTRACT third
            return getattr(b, self.BINARY[cls])(args[0], args[1], flags=flags)
        if cls is arith.MinSIOp:
            return b.select(b.icmp_signed("<", args[0], args[1]), args[0], args[1])
        if cls is arith.BitcastOp:
            return b.bitcast(args[0], self.it if args[1] is self.it else self.t)
        if cls is arith.SelectOp:
            return b.select(*args)
        if cls is mathd.AbsFOp:
            name = f"llvm.fabs.v{self.t.count}f32"
            fabs = b.module.globals.get(name) or ir.Function(b.module, ir.FunctionType(self.t, [self.t]), name)
            return b.call(fabs, [args[0]])
        raise NotImplementedError(f"{cls.__name__} in an epilogue's expansion")

    def cmp(self, a, b, pred: str):
        assert pred[0] == "o", pred
        return self.b.fcmp_ordered({"olt": "<", "ogt": ">", "oeq": "==", "one": "!="}[pred], a, b)
