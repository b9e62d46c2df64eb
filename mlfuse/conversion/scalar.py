"""Scalar semantics of graph ops, emitted as arith/math ops inside loop bodies.

One function per op family, so that every level that computes elements (the loop
lowering, the GPU kernels, the stitched groups) shares one definition of what
`graph.gelu` or `graph.div` means on a scalar.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    f32,
    i1,
)
from xdsl.ir import Attribute, Operation, SSAValue

from mlfuse.diagnostics import Diagnostic, location_of
from mlfuse.dialects import graph

HALF_TYPES = (Float16Type, BFloat16Type)


def const(b: Builder, value: float | int | bool, t: Attribute) -> SSAValue:
    if isinstance(t, IntegerType):
        if t.width.data == 1:
            value = -1 if value else 0  # i1 'true' is all ones
        return b.insert(arith.ConstantOp(IntegerAttr(int(value), t))).result
    return b.insert(arith.ConstantOp(FloatAttr(float(value), t))).result


def identity_of(kind: str, t: Attribute) -> float | int:
    """The initial value of a reduction."""
    if kind in ("sum", "mean"):
        return 0
    if kind == "prod":
        return 1
    if isinstance(t, IntegerType):
        w = t.width.data
        return -(2 ** (w - 1)) if kind == "max" else 2 ** (w - 1) - 1
    return -math.inf if kind == "max" else math.inf


def combine(b: Builder, kind: str, acc: SSAValue, x: SSAValue, ignore_nan: bool = False) -> SSAValue:
    """acc (+|*|max|min) x; float sums may be reassociated (like numpy's pairwise sums).

    Float max/min propagate NaNs (numpy's semantics) unless `ignore_nan`: then
    they are maxnum/minnum, which vectorize far better on x86, and the caller
    tracks NaNs itself (`flag_nan`)."""
    is_int = isinstance(x.type, IntegerType)
    if ignore_nan and not is_int and kind in ("max", "min"):
        return b.insert(arith.MaxnumfOp(acc, x) if kind == "max" else arith.MinnumfOp(acc, x)).result
    if kind in ("sum", "mean"):
        if is_int:
            return b.insert(arith.AddiOp(acc, x)).result
        return b.insert(arith.AddfOp(acc, x, flags=arith.FastMathFlagsAttr(["reassoc"]))).result
    if kind == "prod":
        if is_int:
            return b.insert(arith.MuliOp(acc, x)).result
        return b.insert(arith.MulfOp(acc, x, flags=arith.FastMathFlagsAttr(["reassoc"]))).result
    if kind == "max":
        return b.insert(arith.MaxSIOp(acc, x) if is_int else arith.MaximumfOp(acc, x)).result
    return b.insert(arith.MinSIOp(acc, x) if is_int else arith.MinimumfOp(acc, x)).result


def flag_nan(b: Builder, flag: SSAValue, x: SSAValue) -> SSAValue:
    """flag | (x is NaN), as an i32: the NaN record beside a NaN-ignoring max/min."""
    is_nan = b.insert(arith.CmpfOp(x, x, "uno")).result
    return b.insert(arith.OrIOp(flag, b.insert(arith.ExtUIOp(is_nan, flag.type)).result)).result


def _float_unary(b: Builder, op: Operation, x: SSAValue) -> SSAValue:
    t = x.type
    one = lambda: const(b, 1.0, t)  # noqa: E731
    match op:
        case graph.NegOp():
            return b.insert(arith.NegfOp(x)).result
        case graph.AbsOp():
            return b.insert(mathd.AbsFOp(x)).result
        case graph.ExpOp():
            return b.insert(mathd.ExpOp(x)).result
        case graph.LogOp():
            return b.insert(mathd.LogOp(x)).result
        case graph.SqrtOp():
            return b.insert(mathd.SqrtOp(x)).result
        case graph.RsqrtOp():
            return b.insert(mathd.RsqrtOp(x)).result
        case graph.ReciprocalOp():
            return b.insert(arith.DivfOp(one(), x)).result
        case graph.TanhOp():
            return b.insert(mathd.TanhOp(x)).result
        case graph.ErfOp():
            return b.insert(mathd.ErfOp(x)).result
        case graph.SigmoidOp():
            e = b.insert(mathd.ExpOp(b.insert(arith.NegfOp(x)).result)).result
            return b.insert(arith.DivfOp(one(), b.insert(arith.AddfOp(one(), e)).result)).result
        case graph.ReluOp():
            return b.insert(arith.MaximumfOp(x, const(b, 0.0, t))).result
        case graph.GeluOp():
            half = const(b, 0.5, t)
            if op.form == "tanh":
                x3 = b.insert(arith.MulfOp(b.insert(arith.MulfOp(x, x)).result, x)).result
                inner = b.insert(arith.AddfOp(x, b.insert(arith.MulfOp(const(b, 0.044715, t), x3)).result)).result
                inner = b.insert(arith.MulfOp(const(b, math.sqrt(2 / math.pi), t), inner)).result
                g = b.insert(mathd.TanhOp(inner)).result
            else:
                g = b.insert(mathd.ErfOp(b.insert(arith.MulfOp(x, const(b, math.sqrt(0.5), t))).result)).result
            hx = b.insert(arith.MulfOp(half, x)).result
            return b.insert(arith.MulfOp(hx, b.insert(arith.AddfOp(one(), g)).result)).result
    raise Diagnostic(f"no scalar lowering for '{op.name}' on floats", location_of(op))


def _int_unary(b: Builder, op: Operation, x: SSAValue) -> SSAValue:
    t = x.type
    match op:
        case graph.NegOp():
            return b.insert(arith.SubiOp(const(b, 0, t), x)).result
        case graph.AbsOp():
            return b.insert(mathd.AbsIOp(x)).result
        case graph.ReluOp():
            return b.insert(arith.MaxSIOp(x, const(b, 0, t))).result
    raise Diagnostic(f"'{op.name}' is not defined on integer tensors", location_of(op))


FLOAT_BINARY: dict[type, Callable] = {
    graph.AddOp: arith.AddfOp,
    graph.SubOp: arith.SubfOp,
    graph.MulOp: arith.MulfOp,
    graph.DivOp: arith.DivfOp,
    graph.MaxOp: arith.MaximumfOp,
    graph.MinOp: arith.MinimumfOp,
    graph.PowOp: mathd.PowFOp,
}
INT_BINARY: dict[type, Callable] = {
    graph.AddOp: arith.AddiOp,
    graph.SubOp: arith.SubiOp,
    graph.MulOp: arith.MuliOp,
    graph.MaxOp: arith.MaxSIOp,
    graph.MinOp: arith.MinSIOp,
}
FLOAT_PREDICATES = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
INT_PREDICATES = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}


def widen(b: Builder, x: SSAValue) -> SSAValue:
    """f16/bf16 values are computed in f32."""
    if isinstance(x.type, HALF_TYPES):
        return b.insert(arith.ExtFOp(x, f32)).result
    return x


def narrow(b: Builder, x: SSAValue, t: Attribute) -> SSAValue:
    if isinstance(t, HALF_TYPES) and x.type != t:
        return b.insert(arith.TruncFOp(x, t)).result
    return x


def emit_elementwise(b: Builder, op: Operation, args: list[SSAValue]) -> SSAValue:
    """The scalar computation of one elementwise graph op on its operands' elements."""
    out_t = graph.element_type_of(op.results[0])
    if isinstance(op, graph.CastOp):
        return emit_cast(b, args[0], out_t)
    if isinstance(op, graph.SelectOp):
        return b.insert(arith.SelectOp(args[0], args[1], args[2])).result
    wide = [widen(b, a) for a in args]
    is_int = isinstance(wide[0].type, IntegerType)
    if isinstance(op, graph.CompareOp):
        pred = op.predicate.data
        if is_int:
            return b.insert(arith.CmpiOp(wide[0], wide[1], INT_PREDICATES[pred])).result
        return b.insert(arith.CmpfOp(wide[0], wide[1], FLOAT_PREDICATES[pred])).result
    if len(args) == 1:
        r = _int_unary(b, op, wide[0]) if is_int else _float_unary(b, op, wide[0])
    elif is_int and isinstance(op, graph.DivOp):
        r = safe_divsi(b, wide[0], wide[1])
    else:
        table = INT_BINARY if is_int else FLOAT_BINARY
        if type(op) not in table:
            raise Diagnostic(f"'{op.name}' is not defined on {wide[0].type}", location_of(op))
        r = b.insert(table[type(op)](wide[0], wide[1])).result
    return narrow(b, r, out_t)


def safe_divsi(b: Builder, a: SSAValue, d: SSAValue) -> SSAValue:
    """a / d truncated towards zero, with numpy's answers where the hardware traps.

    x86's idiv (LLVM's sdiv) faults on d == 0 and on INT_MIN / -1, which killed the
    process. numpy gives 0 for x / 0 and wraps INT_MIN / -1 to INT_MIN, so: divide
    by 1 in both cases (INT_MIN / 1 is already the wrapped answer), then zero the
    quotients of d == 0. Branch-free selects; the division stays one sdiv.
    A remainder would use the same safe divisor: x % 1 == 0 is numpy's answer in
    both cases.
    """
    t = a.type
    width = t.width.data
    d_zero = b.insert(arith.CmpiOp(d, const(b, 0, t), "eq")).result
    a_min = b.insert(arith.CmpiOp(a, const(b, -(1 << (width - 1)), t), "eq")).result
    d_neg1 = b.insert(arith.CmpiOp(d, const(b, -1, t), "eq")).result
    overflow = b.insert(arith.AndIOp(a_min, d_neg1)).result
    trap = b.insert(arith.OrIOp(d_zero, overflow)).result
    safe = b.insert(arith.SelectOp(trap, const(b, 1, t), d)).result
    q = b.insert(arith.DivSIOp(a, safe)).result
    return b.insert(arith.SelectOp(d_zero, const(b, 0, t), q)).result


def emit_cast(b: Builder, x: SSAValue, t: Attribute) -> SSAValue:
    s = x.type
    if s == t:
        return x
    s_int, t_int = isinstance(s, IntegerType), isinstance(t, IntegerType)
    if t == i1:
        if s_int:
            return b.insert(arith.CmpiOp(x, const(b, 0, s), "ne")).result
        return b.insert(arith.CmpfOp(x, const(b, 0.0, s), "une")).result
    if s == i1:
        return b.insert(arith.SelectOp(x, const(b, 1, t), const(b, 0, t))).result
    if s_int and t_int:
        op = arith.ExtSIOp(x, t) if t.width.data > s.width.data else arith.TruncIOp(x, t)
        return b.insert(op).result
    if s_int:
        return b.insert(arith.SIToFPOp(x, t)).result
    if t_int:
        return b.insert(arith.FPToSIOp(widen(b, x), t)).result
    if _float_width(t) > _float_width(s):
        return b.insert(arith.ExtFOp(x, t)).result
    return b.insert(arith.TruncFOp(x, t)).result


def _float_width(t: Attribute) -> int:
    return {Float16Type: 16, BFloat16Type: 16, Float32Type: 32}.get(type(t), 64)
