"""Branch-free polynomial expansions of f32 transcendentals into arith ops.

A call to scalar libm stops LLVM's vectorizer (a scalar tanh made a fused GELU
28x slower), so exp, log, tanh, erf and pow on f32 become straight-line arith:
range reduction with integer bit tricks, then a polynomial or rational
approximation. They are compute-bound on 16M-element arrays, so every operation
counts (issue #14: exp, tanh and erf within 1.5x of a copy):

- multiply-adds are marked `contract` (convert-to-llvm makes each pair an llvm.fmuladd:
  one FMA where the target has it, x86 FMA3 and NVPTX; a multiply and an add
  elsewhere: the bounds below hold for both);
- clamps are `x < lo ? lo : x` by compare and select: one x86 max/min instruction
  that keeps NaN, where llvm.minimum/maximum cost NaN and signed-zero fixups; and as
  few as possible: exp caps n at 128 with an integer min on k's bits (not a float
  clamp of x), erf bounds x^2 and its result from above only and puts x's sign back
  with integer ops (LLVM's model of the AMD Zen 3 hosts here issues float min/max
  on the two multiply-add ports, integer and bitwise vector ops elsewhere);
- special values come out of the arithmetic itself (NaN flows through the clamps,
  exp's scaling overflows to +inf and rounds to 0) instead of selects at the end.

Maximum errors against float64 numpy, in ulps of the f32 result (a denormal's ulp
is 2^-149), measured over every 257th f32 bit pattern with FMA, and over 400k
samples evaluated unfused (the GPU simulator); tests/test_expand_math.py checks them:

    exp   0.90 ulp (unfused 1.13), denormal results included; +inf above 88.72,
          0 below -103.97 (by the scaling), NaN kept
    log   0.75 ulp for positive normal and denormal x; -inf at 0, NaN below
    tanh  2.53 ulp (unfused 2.15): m / (m + 2), m = e^2|x| - 1 in expm1 form;
          exactly +-1 from |x| = 9.02 on (tanh rounds to +-1 from 9.011)
    erf   6.41 ulp (unfused 6.37), about 4e-7 relative: |x| P(x^2) / Q(x^2) with
          x^2 <= 16, at most 1 (+-1 from |x| = 4 on), then x's sign
    pow   exp(y * log|x|), sign restored for integral y; relative error grows
          with |y log x| (<= 1e-6 for |y log x| < 10); C99/numpy special values
          (signed zeros, infinities, pow(1, nan) = pow(-1, inf) = 1) by selects
    tanh(-0) = -0 and erf(-0) = -0: every odd function keeps the sign of zero

Coefficients: exp's (and tanh's) degree-4 P in e^r = 1 + r + r^2 P(r) fitted for
mlfuse (a weighted least-squares minimax of e^r - 1's relative error on
|r| <= ln2/2: 1.7e-8, and 6e-9 for e^r), Cody-Waite constants and log from
Cephes (expf.c, logf.c), erf from Eigen's generic_fast_erf_float (used by XLA).
"""

from __future__ import annotations

import struct

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    Float32Type,
    FloatAttr,
    IntegerAttr,
    VectorType,
    f32,
    i32,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from mlfuse.conversion.patterns import apply_once
from mlfuse.conversion.scalar import CONTRACT
from mlfuse.dialects import loop

EXPANDED = (mathd.ExpOp, mathd.LogOp, mathd.TanhOp, mathd.ErfOp, mathd.PowFOp)

LOG2E = 1.44269504088896341
# exp's clamp: round(88.8 log2 e) = 128 makes the result overflow to +inf, and
# round(-104 log2 e) = -150 makes it round to 0 (e^-104 < 2^-150).
EXP_HIGH = 88.8
EXP_LOW = -104.0
# e^r = 1 + r + r^2 P(r) on |r| <= ln2 / 2, P highest degree first
EXPM1_P = [0.0013882480561733246, 0.008366533555090427, 0.04166720062494278, 0.1666654348373413, 0.4999999701976776]
EXP_BIAS = 254  # twice the exponent bias: exp's two scale factors take half each
MAGIC_ROUND = 12582912.0  # 1.5 * 2^23: adding it rounds to an integer in the low mantissa bits
# erf(x) = x P(x^2) / Q(x^2) on [-4, 4], highest degree first (Eigen's generic_fast_erf_float)
ERF_P = [-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02]
ERF_Q = [-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03, -1.42647390514189e-02]
TANH_SATURATE = 9.02  # tanh(x) rounds to 1 in f32 from 9.011 on


def f32_bits(v: float) -> int:
    return struct.unpack("<i", struct.pack("<f", v))[0]


class F32Emitter:
    """Emits f32 (or vector<..xf32>) arith ops; integer ops on the matching i32 shape."""

    def __init__(self, b: Builder, t: Attribute):
        self.b = b
        self.t = t
        self.it = VectorType(i32, t.get_shape()) if isinstance(t, VectorType) else i32

    def c(self, v: float) -> SSAValue:
        if isinstance(self.t, VectorType):
            from xdsl.dialects.builtin import DenseIntOrFPElementsAttr

            attr = DenseIntOrFPElementsAttr.from_list(self.t, [float(v)])
            return self.b.insert(arith.ConstantOp(attr, self.t)).result
        return self.b.insert(arith.ConstantOp(FloatAttr(float(v), f32))).result

    def ci(self, v: int) -> SSAValue:
        if isinstance(self.it, VectorType):
            from xdsl.dialects.builtin import DenseIntOrFPElementsAttr

            attr = DenseIntOrFPElementsAttr.from_list(self.it, [int(v)])
            return self.b.insert(arith.ConstantOp(attr, self.it)).result
        return self.b.insert(arith.ConstantOp(IntegerAttr(int(v), i32))).result

    def op(self, cls, *args, **kw) -> SSAValue:
        return self.b.insert(cls(*args, **kw)).results[0]

    def add(self, a, b):
        return self.op(arith.AddfOp, a, b)

    def sub(self, a, b):
        return self.op(arith.SubfOp, a, b)

    def mul(self, a, b):
        return self.op(arith.MulfOp, a, b)

    def div(self, a, b):
        return self.op(arith.DivfOp, a, b)

    def fma(self, a, b, c):
        """a * b + c, both ops marked `contract`: one FMA where the target has it
        (x86 with FMA3, NVPTX), a multiply and an add elsewhere. Every bound stated
        above holds for both evaluations (tests/test_expand_math.py runs the host's)."""
        return self.op(arith.AddfOp, self.op(arith.MulfOp, a, b, CONTRACT), c, CONTRACT)

    def fms(self, a, b, c):
        """c - a * b, contractible like fma."""
        return self.op(arith.SubfOp, c, self.op(arith.MulfOp, a, b, CONTRACT), CONTRACT)

    def poly(self, x, coeffs: list[float]) -> SSAValue:
        """Horner: coeffs[0] * x^(n-1) + ... + coeffs[-1]."""
        acc = self.c(coeffs[0])
        for k in coeffs[1:]:
            acc = self.fma(acc, x, self.c(k))
        return acc

    def cmp(self, a, b, pred: str):
        return self.op(arith.CmpfOp, a, b, pred)

    def select(self, cond, a, b):
        return self.op(arith.SelectOp, cond, a, b)

    def bits(self, x):
        return self.op(arith.BitcastOp, x, self.it)

    def from_bits(self, x):
        return self.op(arith.BitcastOp, x, self.t)

    # --- the functions -------------------------------------------------------------

    def at_least(self, x: SSAValue, lo: float) -> SSAValue:
        """`x < lo ? lo : x` by compare and select: exactly one x86 max instruction that
        keeps NaN (maxps returns its second operand, x, when either is NaN), where
        llvm.maximum costs extra NaN and signed-zero fixups and maxnum would turn a NaN
        into the bound."""
        return self.select(self.cmp(x, self.c(lo), "olt"), self.c(lo), x)

    def at_most(self, x: SSAValue, hi: float) -> SSAValue:
        """`x > hi ? hi : x`: one x86 min instruction that keeps NaN, like at_least."""
        return self.select(self.cmp(x, self.c(hi), "ogt"), self.c(hi), x)

    def exp(self, x: SSAValue) -> SSAValue:
        """e^x = e^r 2^n, no select at all: the low clamp keeps NaN (which then flows
        through), and the bounds make the scaling itself overflow to +inf above 88.72
        (n = 128) and round to 0 below -103.97 (n = -150).

        The high bound is not a float clamp of x: n is capped at 128 on k's bits (an
        integer min, off the FMA ports that the rest of exp keeps busy), and an x above
        88.8 then leaves r = x - 128 ln2 > 0.08, so that e^r > 1 and e^r 2^128 overflows
        (for a huge x the polynomial itself overflows to +inf; NaN stays NaN).

        2^n is two normal factors 2^floor(n/2) * 2^ceil(n/2) (n spans [-150, 128], beyond
        one float's exponent; the second product rounds denormals once, correctly), both
        cut from the bits of k = x log2(e) + 1.5 * 2^23 + 254: bits(k) = even + n + 254,
        and an i32 shift left by 23 drops everything above the exponent field."""
        x = self.at_least(x, EXP_LOW)
        r, p, kb = self.exp_reduced(x, EXP_BIAS, n_max=128)
        y = self.fma(self.fma(p, r, self.c(1.0)), r, self.c(1.0))  # 1 + r (1 + r P)
        half = self.op(arith.ShRUIOp, kb, self.ci(1))  # even/2 + 127 + floor(n/2)
        scale1 = self.from_bits(self.op(arith.ShLIOp, half, self.ci(23)))
        scale2 = self.from_bits(self.op(arith.ShLIOp, self.op(arith.SubiOp, kb, half), self.ci(23)))
        return self.mul(self.mul(y, scale1), scale2)

    def exp_reduced(self, x: SSAValue, bias: int, n_max: int | None = None) -> tuple[SSAValue, SSAValue, SSAValue]:
        """(r, P(r), bits(k)) with x = n ln2 + r, |r| <= ln2 / 2, e^r = 1 + r + r^2 P(r),
        and k = 1.5 * 2^23 + bias + n, whose low mantissa bits hold the integer n + bias
        (the rounding trick: adding 1.5 * 2^23 rounds x log2(e) to an integer). With
        n_max, n is capped there by an integer min on k's bits (a positive float's bits
        order like the float; +inf and positive NaN bits are above the cap), and r is
        then x - n_max ln2, however large. Cody-Waite reduction (n * 0.693359375 is
        exact), then EXPM1_P: a degree-4 minimax fitted for mlfuse, relative error
        1.7e-8 for e^r - 1 and 6e-9 for e^r with f32 coefficients."""
        magic = MAGIC_ROUND + bias
        k = self.fma(x, self.c(LOG2E), self.c(magic))
        kb = self.bits(k)
        if n_max is not None:
            kb = self.op(arith.MinSIOp, kb, self.ci(f32_bits(magic + n_max)))
            k = self.from_bits(kb)
        n = self.sub(k, self.c(magic))  # round(x * log2(e)) as a float
        r = self.fms(n, self.c(0.693359375), x)
        r = self.fms(n, self.c(-2.12194440e-4), r)
        return r, self.poly(r, EXPM1_P), kb

    def log(self, x: SSAValue) -> SSAValue:
        # Scale denormals into the normal range first.
        tiny = self.cmp(x, self.c(1.17549435e-38), "olt")
        xs = self.select(tiny, self.mul(x, self.c(8388608.0)), x)  # * 2^23
        bits = self.bits(xs)
        e = self.op(arith.SubiOp, self.op(arith.ShRUIOp, bits, self.ci(23)), self.ci(126))
        e = self.op(arith.SubiOp, e, self.op(arith.SelectOp, tiny, self.ci(23), self.ci(0)))
        m = self.from_bits(self.op(arith.OrIOp, self.op(arith.AndIOp, bits, self.ci(0x007FFFFF)), self.ci(0x3F000000)))
        small = self.cmp(m, self.c(0.707106781186547524), "olt")
        e = self.op(arith.SubiOp, e, self.op(arith.SelectOp, small, self.ci(1), self.ci(0)))
        m = self.sub(self.select(small, self.add(m, m), m), self.c(1.0))
        fe = self.op(arith.SIToFPOp, e, self.t)
        z = self.mul(m, m)
        p = self.poly(m, [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1])
        y = self.mul(self.mul(p, m), z)
        y = self.add(y, self.mul(fe, self.c(-2.12194440e-4)))
        y = self.sub(y, self.mul(z, self.c(0.5)))
        r = self.add(self.add(m, y), self.mul(fe, self.c(0.693359375)))
        r = self.select(self.cmp(x, self.c(float("inf")), "oeq"), x, r)
        r = self.select(self.cmp(x, self.c(0.0), "oeq"), self.c(float("-inf")), r)
        return self.select(self.cmp(x, self.c(0.0), "ult"), self.c(float("nan")), r)

    def tanh(self, x: SSAValue) -> SSAValue:
        """tanh|x| = m / (m + 2) with m = e^2|x| - 1 = 2^n q + (2^n - 1), q = e^r - 1 (the
        expm1 form: accurate near 0 without a second polynomial), then x's sign: tanh(-0)
        = -0, and NaN flows through the clamp. |x| is clamped to 9.02: from 9.011 on, m
        exceeds 2^26, m + 2 rounds to m and the quotient is exactly 1, as tanh is in f32.
        2^n (n <= 27) is a single factor, cut from k's bits like exp's."""
        ax = self.op(mathd.AbsFOp, x)
        a2 = self.add(ax, ax)
        a2 = self.at_most(a2, 2 * TANH_SATURATE)
        r, p, kb = self.exp_reduced(a2, 127)
        q = self.fma(self.mul(r, r), p, r)  # e^r - 1
        scale = self.from_bits(self.op(arith.ShLIOp, kb, self.ci(23)))
        m = self.fma(scale, q, self.sub(scale, self.c(1.0)))
        return self.with_sign_of(self.div(m, self.add(m, self.c(2.0))), x)

    def erf(self, x: SSAValue) -> SSAValue:
        """|x| P(x^2) / Q(x^2) with x^2 clamped to 16 (one compare and select; NaN kept),
        clamped to 1, then x's sign (integer ops, as in tanh; erf(-0) = -0): beyond 4,
        |x| R(16) >= 4 R(16) >= 1, and an infinite x gives inf * R(16), clamped to 1.
        One clamp on each side instead of two: clamps are compare-selects on the FMA
        ports, the sign's and/or are not. The rational overshoots 1 by an ulp on
        [3.7, 4], hence the result's clamp."""
        x2 = self.mul(x, x)
        x2 = self.at_most(x2, 16.0)
        p = self.poly(x2, ERF_P)
        q = self.poly(x2, ERF_Q)
        # |x| * (p / q), not (|x| * p) / q: |p| < 1 would flush erf of the smallest denormals to 0.
        y = self.mul(self.op(mathd.AbsFOp, x), self.div(p, q))
        y = self.at_most(y, 1.0)
        return self.with_sign_of(y, x)

    def with_sign_of(self, magnitude: SSAValue, x: SSAValue) -> SSAValue:
        """magnitude (sign bit clear) with x's sign bit, by integer ops, not llvm.copysign:
        with copysign in a loop that also takes a row max (softmax of tanh), LLVM 22's
        loop vectorizer aborts on an assertion ("VPlan cost model and legacy cost model
        disagreed")."""
        sign = self.op(arith.AndIOp, self.bits(x), self.ci(-0x80000000))
        return self.from_bits(self.op(arith.OrIOp, self.bits(magnitude), sign))

    def pow(self, x: SSAValue, y: SSAValue) -> SSAValue:
        """exp(y * log|x|), then C99's (and numpy's) special cases by selects:

        sign: -|r| for a negatively signed x (-0.0 and -inf included) and odd integral y;
        NaN: a finite negative x with a non-integral y (pow(-inf, 0.5) is +inf);
        1: y = +-0 (even for NaN x), x = 1 (even for NaN y), x = -1 with y = +-inf
        (exp(inf * 0) would be NaN). +-0 and +-inf x need nothing more: log gives
        -inf/+inf and exp of +-inf gives +inf/0.
        """
        r = self.exp(self.mul(y, self.log(self.op(mathd.AbsFOp, x))))
        # A negative base has a real power only for integral y: the sign is y's parity.
        y_int = self.cmp(self.op(mathd.FloorOp, y), y, "oeq")
        half = self.mul(y, self.c(0.5))
        odd = self.op(arith.AndIOp, y_int, self.cmp(self.op(mathd.FloorOp, half), half, "one"))
        signed = self.op(arith.CmpiOp, self.bits(x), self.ci(0), "slt")  # sign bit: -0.0 too
        r = self.select(self.op(arith.AndIOp, signed, odd), self.op(arith.NegfOp, r), r)
        finite_neg = self.op(arith.AndIOp, self.cmp(x, self.c(0.0), "olt"), self.cmp(x, self.c(float("-inf")), "one"))
        r = self.select(self.op(arith.AndIOp, finite_neg, self.op(arith.XOrIOp, y_int, self._true(y_int))), self.c(float("nan")), r)
        ax, ay = self.op(mathd.AbsFOp, x), self.op(mathd.AbsFOp, y)
        unit = self.op(arith.AndIOp, self.cmp(ax, self.c(1.0), "oeq"), self.cmp(ay, self.c(float("inf")), "oeq"))
        one = self.op(arith.OrIOp, self.op(arith.OrIOp, self.cmp(y, self.c(0.0), "oeq"), self.cmp(x, self.c(1.0), "oeq")), unit)
        return self.select(one, self.c(1.0), r)

    def _true(self, like: SSAValue) -> SSAValue:
        from xdsl.dialects.builtin import IntegerAttr, i1

        if isinstance(like.type, VectorType):
            from xdsl.dialects.builtin import DenseIntOrFPElementsAttr

            attr = DenseIntOrFPElementsAttr.from_list(like.type, [1])
            return self.b.insert(arith.ConstantOp(attr, like.type)).result
        return self.b.insert(arith.ConstantOp(IntegerAttr(-1, i1))).result


def is_f32(t: Attribute) -> bool:
    return isinstance(t, Float32Type) or (
        isinstance(t, VectorType) and isinstance(t.get_element_type(), Float32Type)
    )


def expand(op: Operation) -> SSAValue | None:
    """Replace one f32 math op by its expansion; returns the new value or None if kept."""
    if not isinstance(op, EXPANDED) or not is_f32(op.results[0].type):
        return None
    b = Builder(InsertPoint.before(op))
    e = F32Emitter(b, op.results[0].type)
    match op:
        case mathd.ExpOp():
            return e.exp(op.operand)
        case mathd.LogOp():
            return e.log(op.operand)
        case mathd.TanhOp():
            return e.tanh(op.operand)
        case mathd.ErfOp():
            return e.erf(op.operand)
        case mathd.PowFOp():
            return e.pow(op.lhs, op.rhs)
    return None


class ExpandF32Math(RewritePattern):
    """An f32 exp, log, tanh, erf or pow (scalar or vector) -> its arith expansion;
    not in a `loop.gemm`'s epilogue, whose program names them (the generated kernel
    expands them itself, mlfuse/backend/gemm_epilogue.py)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if isinstance(op.parent_op(), loop.GemmOp):
            return
        value = expand(op)
        if value is not None:
            rewriter.replace(op, [], [value])


def expand_math(module: Operation) -> None:
    """Expand every f32 transcendental under `module` (a module or a kernel function)."""
    apply_once(module.regions[0], [ExpandF32Math()])
