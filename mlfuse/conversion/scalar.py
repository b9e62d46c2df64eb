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
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    f32,
    i1,
    i32,
    i64,
)
from xdsl.dialects.utils.fast_math import FastMathFlag
from xdsl.ir import Attribute, Operation, SSAValue

from mlfuse.diagnostics import Diagnostic, location_of
from mlfuse.dialects import graph

HALF_TYPES = (Float16Type, BFloat16Type)


def const(b: Builder, value: float | int | bool, t: Attribute) -> SSAValue:
    """A constant of element type `t` (a graph type: uiN values become signless iN bits)."""
    t = graph.storage_type(t)
    if isinstance(t, IntegerType):
        w = t.width.data
        if w == 1:
            value = -1 if value else 0  # i1 'true' is all ones
        else:  # the same bits in the signed range (an unsigned 255 is the i8 -1)
            value = (int(value) + (1 << (w - 1))) % (1 << w) - (1 << (w - 1))
        return b.insert(arith.ConstantOp(IntegerAttr(int(value), t))).result
    return b.insert(arith.ConstantOp(FloatAttr(float(value), t))).result


def identity_of(kind: str, t: Attribute) -> float | int:
    """The initial value of a reduction over elements of graph type `t`."""
    if kind in ("sum", "mean"):
        return 0
    if kind == "prod":
        return 1
    if isinstance(t, IntegerType):
        w = t.width.data
        if graph.orders_unsigned(t):
            return 0 if kind == "max" else (1 << w) - 1
        return -(2 ** (w - 1)) if kind == "max" else 2 ** (w - 1) - 1
    return -math.inf if kind == "max" else math.inf


def combine(
    b: Builder, kind: str, acc: SSAValue, x: SSAValue, ignore_nan: bool = False, unsigned: bool = False
) -> SSAValue:
    """acc (+|*|max|min) x; float sums may be reassociated (like numpy's pairwise sums).

    Float max/min propagate NaNs as numpy does (`reduction_max_min`) unless
    `ignore_nan`: then they are maxnum/minnum, which vectorize far better on x86, and
    the caller tracks NaNs itself (`flag_nan`). Integer max/min compare as unsigned when
    `unsigned` (the scalars are signless; the graph type knows)."""
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
    if is_int:
        return b.insert(INT_MINMAX[kind, unsigned](acc, x)).result
    return reduction_max_min(b, kind, acc, x)


def reduction_max_min(b: Builder, kind: str, acc: SSAValue, x: SSAValue) -> SSAValue:
    """A max (min) reduction step: maximumf(x, acc) with nsz, llvm.maximum(x, acc): a NaN
    on either side wins, as in numpy; a tie of +0 and -0 may give either (numpy's own
    reductions give either too, by their order). On x86 it is vmaxps(x, acc), which keeps
    acc's NaN, and a blend on x's NaN test: only the max waits for acc, 3 cycles a tap.
    The compare-and-select form (`numpy_max_min(x, acc)`), meant as that max and blend,
    became a compare of acc, an or of masks and a blend once LLVM merged the selects
    (5 cycles): a 3x3 stride-2 max pool over 64x112x112 0.72x the time with nsz (one
    thread, 401-414 -> 276-312 us). llvm.maximum without nsz orders the zeros with
    fixups, twice the instructions."""
    op = arith.MaximumfOp if kind == "max" else arith.MinimumfOp
    return b.insert(op(x, acc, flags=arith.FastMathFlagsAttr([FastMathFlag.NO_SIGNED_ZEROS]))).result


# A window nest's multiply-add per tap (a conv's) may be one fma: convert-to-llvm makes a
# `contract` pair an llvm.fmuladd (to_llvm.MultiplyAddContraction), an fma as in the GEMM
# kernels' chains. A rounding less, and half the instructions on
# a depthwise conv's serial chain of taps. One thread, side by side (time with over
# without): 1x1 conv + depthwise blocks 0.96-0.99x, MobileNetV2 0.97x, MobileNetV3-small
# 0.99x. Matrix product nests (small products) keep two roundings: an encoder layer
# and ViT came out even (1.01x, 1.00x), and their results match numpy's order of ops.
CONTRACT = arith.FastMathFlagsAttr([FastMathFlag.ALLOW_CONTRACT])


def multiply_add(b: Builder, acc: SSAValue, x: SSAValue, y: SSAValue, contract: bool = False) -> SSAValue:
    """acc + x * y (in acc's type: widened f16 or an integer); with `contract` a float
    multiply-add that LLVM may fuse into an fma (CONTRACT)."""
    if isinstance(x.type, IntegerType):
        return b.insert(arith.AddiOp(acc, b.insert(arith.MuliOp(x, y)).result)).result
    flags = CONTRACT if contract else None
    product = b.insert(arith.MulfOp(x, y, flags=flags)).result
    return b.insert(arith.AddfOp(acc, product, flags=flags)).result


INT_MINMAX = {
    ("max", False): arith.MaxSIOp,
    ("min", False): arith.MinSIOp,
    ("max", True): arith.MaxUIOp,
    ("min", True): arith.MinUIOp,
}


def reduction_unsigned(op: Operation) -> bool:
    """Whether the reduction (or pool) `op` combines unsigned integers."""
    return graph.orders_unsigned(graph.element_type_of(op.operands[0]))


def flag_nan(b: Builder, flag: SSAValue, x: SSAValue) -> SSAValue:
    """flag | (x is NaN), as an i32: the NaN record beside a NaN-ignoring max/min."""
    is_nan = b.insert(arith.CmpfOp(x, x, "uno")).result
    return b.insert(arith.OrIOp(flag, b.insert(arith.ExtUIOp(is_nan, flag.type)).result)).result


# graph ops that are one math op on floats
FLOAT_UNARY_MATH: dict[type, Callable] = {
    graph.AbsOp: mathd.AbsFOp,
    graph.ExpOp: mathd.ExpOp,
    graph.LogOp: mathd.LogOp,
    graph.SqrtOp: mathd.SqrtOp,
    graph.RsqrtOp: mathd.RsqrtOp,
    graph.TanhOp: mathd.TanhOp,
    graph.ErfOp: mathd.ErfOp,
    graph.SinOp: mathd.SinOp,
    graph.CosOp: mathd.CosOp,
    graph.FloorOp: mathd.FloorOp,
    graph.CeilOp: mathd.CeilOp,
    graph.RoundOp: mathd.RoundEvenOp,  # halves to even, as numpy and ONNX
}


def _float_unary(b: Builder, op: Operation, x: SSAValue) -> SSAValue:
    t = x.type
    one = lambda: const(b, 1.0, t)  # noqa: E731
    direct = FLOAT_UNARY_MATH.get(type(op))
    if direct is not None:
        return b.insert(direct(x)).result
    match op:
        case graph.NegOp():
            return b.insert(arith.NegfOp(x)).result
        case graph.ReciprocalOp():
            return b.insert(arith.DivfOp(one(), x)).result
        case graph.SigmoidOp():
            e = b.insert(mathd.ExpOp(b.insert(arith.NegfOp(x)).result)).result
            return b.insert(arith.DivfOp(one(), b.insert(arith.AddfOp(one(), e)).result)).result
        case graph.ReluOp():
            return numpy_max_min(b, "max", x, const(b, 0.0, t))
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


def _int_unary(b: Builder, op: Operation, x: SSAValue, unsigned: bool) -> SSAValue:
    t = x.type
    match op:
        case graph.NegOp():  # wraps, like numpy (also for unsigned: -1 is the maximum)
            return b.insert(arith.SubiOp(const(b, 0, t), x)).result
        case graph.BitNotOp():
            return b.insert(arith.XOrIOp(x, const(b, -1, t))).result
        case graph.AbsOp() | graph.ReluOp() if unsigned:
            return x
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
INT_BINARY |= {graph.BitAndOp: arith.AndIOp, graph.BitOrOp: arith.OrIOp, graph.BitXorOp: arith.XOrIOp}
UINT_BINARY: dict[type, Callable] = {**INT_BINARY, graph.MaxOp: arith.MaxUIOp, graph.MinOp: arith.MinUIOp}
UINT_PREDICATES = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}


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
    if isinstance(op, graph.BitcastOp):
        target = graph.storage_type(out_t)
        return args[0] if args[0].type == target else b.insert(arith.BitcastOp(args[0], target)).result
    if isinstance(op, graph.CastOp):
        return emit_cast(b, args[0], out_t, graph.element_type_of(op.input))
    if isinstance(op, graph.SelectOp):
        return b.insert(arith.SelectOp(args[0], args[1], args[2])).result
    wide = [widen(b, a) for a in args]
    is_int = isinstance(wide[0].type, IntegerType)
    unsigned = graph.orders_unsigned(graph.element_type_of(op.operands[0]))
    if isinstance(op, graph.CompareOp):
        pred = op.predicate.data
        if is_int:
            return b.insert(arith.CmpiOp(wide[0], wide[1], (UINT_PREDICATES if unsigned else INT_PREDICATES)[pred])).result
        return b.insert(arith.CmpfOp(wide[0], wide[1], FLOAT_PREDICATES[pred])).result
    if len(args) == 1:
        r = _int_unary(b, op, wide[0], unsigned) if is_int else _float_unary(b, op, wide[0])
    elif is_int and isinstance(op, graph.DivOp):
        r = (safe_divui if unsigned else safe_divsi)(b, wide[0], wide[1])
    elif isinstance(op, graph.ShiftLeftOp | graph.ShiftRightOp):
        r = numpy_shift(b, op, wide[0], wide[1], unsigned)
    elif isinstance(op, graph.RemOp):
        r = (int_remainder(b, *wide, op.is_fmod, unsigned) if is_int else float_remainder(b, *wide, op.is_fmod))
    elif not is_int and isinstance(op, graph.MaxOp | graph.MinOp):
        r = numpy_max_min(b, "max" if isinstance(op, graph.MaxOp) else "min", wide[0], wide[1])
    else:
        table = (UINT_BINARY if unsigned else INT_BINARY) if is_int else FLOAT_BINARY
        if type(op) not in table:
            raise Diagnostic(f"'{op.name}' is not defined on {wide[0].type}", location_of(op))
        r = b.insert(table[type(op)](wide[0], wide[1])).result
    return narrow(b, r, out_t)


def numpy_shift(b: Builder, op: Operation, x: SSAValue, n: SSAValue, unsigned: bool) -> SSAValue:
    """numpy's shifts. LLVM's are poison for amounts of the width or more; numpy's give
    0 then (taking a negative signed amount as such a large unsigned one), and a right
    shift of a negative signed value gives -1, its sign bits."""
    t = x.type
    assert isinstance(t, IntegerType)
    width = const(b, t.width.data, t)
    in_range = b.insert(arith.CmpiOp(n, width, "ult")).result
    amount = b.insert(arith.SelectOp(in_range, n, const(b, 0, t))).result
    if isinstance(op, graph.ShiftLeftOp):
        shifted, beyond = b.insert(arith.ShLIOp(x, amount)).result, const(b, 0, t)
    elif unsigned:
        shifted, beyond = b.insert(arith.ShRUIOp(x, amount)).result, const(b, 0, t)
    else:
        sign = b.insert(arith.ShRSIOp(x, const(b, t.width.data - 1, t))).result
        shifted, beyond = b.insert(arith.ShRSIOp(x, amount)).result, sign
    return b.insert(arith.SelectOp(in_range, shifted, beyond)).result


def numpy_max_min(b: Builder, kind: str, x: SSAValue, y: SSAValue) -> SSAValue:
    """numpy's elementwise maximum (minimum): x where x > y (x < y) or x is NaN, else y.
    NaN from either side wins, and of two equal values the second (np.maximum(0.0, -0.0)
    is -0.0; ReLU of -0.0 is 0.0). By compare and select, one x86 compare and blend
    when y is a number constant (ReLU, clip bounds: an unordered compare covers x's
    NaN), where llvm.maximum/minimum expand to NaN and signed-zero fixups and cost LLVM
    seconds in a long fused kernel (1.4 s for one bias-and-clip kernel of MobileNetV2)."""
    ordered, unordered = ("ogt", "ugt") if kind == "max" else ("olt", "ult")
    bound = y.owner.value if isinstance(y.owner, arith.ConstantOp) else None
    if isinstance(bound, FloatAttr) and not math.isnan(bound.value.data):
        take_x = b.insert(arith.CmpfOp(x, y, unordered)).result
    else:
        is_nan = b.insert(arith.CmpfOp(x, x, "uno")).result
        take_x = b.insert(arith.OrIOp(b.insert(arith.CmpfOp(x, y, ordered)).result, is_nan)).result
    return b.insert(arith.SelectOp(take_x, x, y)).result


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


def safe_divui(b: Builder, a: SSAValue, d: SSAValue) -> SSAValue:
    """Unsigned a / d, with numpy's x / 0 == 0 where udiv would trap (divide by 1, then zero)."""
    t = a.type
    d_zero = b.insert(arith.CmpiOp(d, const(b, 0, t), "eq")).result
    q = b.insert(arith.DivUIOp(a, b.insert(arith.SelectOp(d_zero, const(b, 1, t), d)).result)).result
    return b.insert(arith.SelectOp(d_zero, const(b, 0, t), q)).result


def int_remainder(b: Builder, a: SSAValue, d: SSAValue, fmod: bool, unsigned: bool) -> SSAValue:
    """a % d without traps: d == 0 and INT_MIN % -1 divide by 1 instead (both answers
    are 0, numpy's). numpy's mod then moves a nonzero remainder whose sign differs
    from d's by d (floor instead of truncation); unsigned, both forms agree."""
    t = a.type
    d_zero = b.insert(arith.CmpiOp(d, const(b, 0, t), "eq")).result
    if unsigned:
        safe = b.insert(arith.SelectOp(d_zero, const(b, 1, t), d)).result
        return b.insert(arith.RemUIOp(a, safe)).result
    a_min = b.insert(arith.CmpiOp(a, const(b, -(1 << (t.width.data - 1)), t), "eq")).result
    d_neg1 = b.insert(arith.CmpiOp(d, const(b, -1, t), "eq")).result
    trap = b.insert(arith.OrIOp(d_zero, b.insert(arith.AndIOp(a_min, d_neg1)).result)).result
    r = b.insert(arith.RemSIOp(a, b.insert(arith.SelectOp(trap, const(b, 1, t), d)).result)).result
    if fmod:
        return r
    nonzero = b.insert(arith.CmpiOp(r, const(b, 0, t), "ne")).result
    signs_differ = b.insert(arith.CmpiOp(b.insert(arith.XOrIOp(r, d)).result, const(b, 0, t), "slt")).result
    fix = b.insert(arith.AndIOp(nonzero, signs_differ)).result
    return b.insert(arith.SelectOp(fix, b.insert(arith.AddiOp(r, d)).result, r)).result


def float_remainder(b: Builder, a: SSAValue, d: SSAValue, fmod: bool) -> SSAValue:
    """C's fmod (LLVM's frem: exact, libm's fmod on the CPU); numpy's mod adds d to a
    nonzero remainder of the other sign, and gives a zero the divisor's sign."""
    from xdsl.dialects import llvm

    r = b.insert(llvm.FRemOp(a, d)).res
    if fmod:
        return r
    zero = const(b, 0.0, a.type)
    nonzero = b.insert(arith.CmpfOp(r, zero, "une")).result
    signs_differ = b.insert(arith.XOrIOp(b.insert(arith.CmpfOp(r, zero, "olt")).result,
                                         b.insert(arith.CmpfOp(d, zero, "olt")).result)).result
    fix = b.insert(arith.AndIOp(nonzero, signs_differ)).result
    r = b.insert(arith.SelectOp(fix, b.insert(arith.AddfOp(r, d)).result, r)).result
    signed_zero = b.insert(mathd.CopySignOp(zero, d)).result
    return b.insert(arith.SelectOp(nonzero, r, signed_zero)).result


def emit_cast(b: Builder, x: SSAValue, t: Attribute, source: Attribute | None = None) -> SSAValue:
    """x, an element of graph type `source` (x's own type if not given), as graph type `t`.

    numpy's casts: integers wrap (truncate, or extend by the source's signedness),
    floats to integers truncate towards zero (exact for in-range values), bool is
    x != 0. Signed and unsigned of one width share their bits."""
    unsigned_source = graph.is_unsigned(source) if source is not None else False
    s, t_graph, t = x.type, t, graph.storage_type(t)
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
        if t.width.data < s.width.data:
            return b.insert(arith.TruncIOp(x, t)).result
        return b.insert((arith.ExtUIOp if unsigned_source else arith.ExtSIOp)(x, t)).result
    if s_int:
        return int_to_float(b, x, t, unsigned_source)
    if t_int:
        return float_to_int(b, widen(b, x), t, graph.is_unsigned(t_graph))
    if _float_width(t) > _float_width(s):
        return b.insert(arith.ExtFOp(x, t)).result
    if isinstance(s, Float64Type) and isinstance(t, Float16Type):
        return b.insert(arith.TruncFOp(round_to_odd_f32(b, x), t)).result
    return b.insert(arith.TruncFOp(x, t)).result


def round_to_odd_f32(b: Builder, x: SSAValue) -> SSAValue:
    """f64 -> f32 rounded to odd: the f32 next to x (towards zero) with its last bit
    set whenever x is inexact.

    LLVM's fptrunc f64 -> f16 calls `__truncdfhf2`, which the JIT cannot resolve
    (the call segfaulted), and rounding twice (f64 -> f32 -> f16, both to nearest)
    turns some values just off an f16 tie into a tie and rounds them wrongly. Rounded
    to odd, the f32 keeps the sticky bit, and with 13 more bits than f16 the second
    rounding to nearest is then the correctly rounded result (Boldo & Melquiond).
    From the nearest f32 y: if inexact and y's last bit is even, step one ulp back
    towards x (y beyond x in magnitude: down, else up); inf steps back to FLT_MAX
    and 0 up to the smallest subnormal, both of which still round right in f16.
    """
    y = b.insert(arith.TruncFOp(x, f32)).result
    back = b.insert(arith.ExtFOp(y, x.type)).result
    inexact = b.insert(arith.CmpfOp(back, x, "one")).result  # false for NaN
    bits = b.insert(arith.BitcastOp(y, i32)).result
    even = b.insert(arith.CmpiOp(b.insert(arith.AndIOp(bits, const(b, 1, i32))).result, const(b, 0, i32), "eq")).result
    beyond = b.insert(arith.CmpfOp(b.insert(mathd.AbsFOp(back)).result, b.insert(mathd.AbsFOp(x)).result, "ogt")).result
    step = b.insert(arith.SelectOp(beyond, const(b, -1, i32), const(b, 1, i32))).result
    fix = b.insert(arith.AndIOp(inexact, even)).result
    odd = b.insert(arith.SelectOp(fix, b.insert(arith.AddiOp(bits, step)).result, bits)).result
    return b.insert(arith.BitcastOp(odd, f32)).result


def int_to_float(b: Builder, x: SSAValue, t: Attribute, unsigned: bool) -> SSAValue:
    """Integer to float, correctly rounded, without the libcalls LLVM would emit.

    To f16 by way of f32: exact below 2^24, and every integer from 65520 up is inf
    in f16 anyway, so no double rounding can show. Unsigned: narrower than 64 bits
    zero-extended to a wider signed type (then exact); u64 at or above 2^63 halved with
    its low bit kept as sticky bit, converted and doubled (what compilers emit)."""
    if isinstance(t, HALF_TYPES):
        return b.insert(arith.TruncFOp(int_to_float(b, x, f32, unsigned), t)).result
    if not unsigned:
        return b.insert(arith.SIToFPOp(x, t)).result
    w = x.type.width.data
    if w < 64:
        wide = IntegerType(32) if w < 32 else i64
        return b.insert(arith.SIToFPOp(b.insert(arith.ExtUIOp(x, wide)).result, t)).result
    one = const(b, 1, x.type)
    halved = b.insert(arith.OrIOp(b.insert(arith.ShRUIOp(x, one)).result, b.insert(arith.AndIOp(x, one)).result)).result
    f = b.insert(arith.SIToFPOp(halved, t)).result
    big = b.insert(arith.CmpiOp(x, const(b, 0, x.type), "slt")).result
    return b.insert(arith.SelectOp(big, b.insert(arith.AddfOp(f, f)).result, b.insert(arith.SIToFPOp(x, t)).result)).result


def float_to_int(b: Builder, x: SSAValue, t: Attribute, unsigned: bool) -> SSAValue:
    """f32/f64 to integer, truncating towards zero (convert-to-llvm saturates, so an
    out-of-range value never traps). Unsigned narrower than 64 bits goes through
    i64, so negative values wrap as numpy's do on x86; u64 from 2^63 up converts
    x - 2^63 and sets the top bit."""
    if not unsigned:
        return b.insert(arith.FPToSIOp(x, t)).result
    if t.width.data < 64:
        return b.insert(arith.TruncIOp(b.insert(arith.FPToSIOp(x, i64)).result, t)).result
    two63 = const(b, 2.0**63, x.type)
    low = b.insert(arith.FPToSIOp(x, t)).result
    high = b.insert(arith.FPToSIOp(b.insert(arith.SubfOp(x, two63)).result, t)).result
    high = b.insert(arith.XOrIOp(high, const(b, -(1 << 63), t))).result
    big = b.insert(arith.CmpfOp(x, two63, "oge")).result
    return b.insert(arith.SelectOp(big, high, low)).result


def _float_width(t: Attribute) -> int:
    return {Float16Type: 16, BFloat16Type: 16, Float32Type: 32}.get(type(t), 64)


def gather_index(b: Builder, idx: SSAValue, n: int) -> SSAValue:
    """An index value (i32/i64) as a position on an axis of n elements: a negative one
    wraps once (ONNX), then it is clamped to [0, n - 1] so that no index, however
    bad, reads outside the buffer (numpy and onnxruntime raise; see graph.gather)."""
    t = idx.type
    negative = b.insert(arith.CmpiOp(idx, const(b, 0, t), "slt")).result
    wrapped = b.insert(arith.SelectOp(negative, b.insert(arith.AddiOp(idx, const(b, n, t))).result, idx)).result
    clamped = b.insert(arith.MaxSIOp(wrapped, const(b, 0, t))).result
    clamped = b.insert(arith.MinSIOp(clamped, const(b, max(n - 1, 0), t))).result
    return b.insert(arith.IndexCastOp(clamped, IndexType())).result
