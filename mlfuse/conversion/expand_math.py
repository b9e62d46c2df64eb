"""Branch-free polynomial expansions of f32 transcendentals into arith ops.

A call to scalar libm stops LLVM's vectorizer (a scalar tanh made a fused GELU
28x slower), so exp, log, tanh, erf and pow on f32 become straight-line arith:
range reduction with integer bit tricks, then a polynomial or rational
approximation. Maximum errors, measured against float64 over the whole f32
range in tests/test_expand_math.py:

    exp   <= 2 ulp relative for normal results, denormals rounded like numpy's
          to within 1 denormal ulp; +inf above 88.72, 0 below -103.97
    log   <= 2 ulp relative for positive normal and denormal x; -inf at 0, NaN below
    tanh  <= 3 ulp relative (exp-based for |x| > 0.625, odd polynomial inside)
    erf   <= 5e-7 relative (rational approximation on [-4, 4], +-1 outside)
    pow   exp(y * log|x|), sign restored for integral y; relative error grows
          with |y log x| (<= 1e-6 for |y log x| < 10); C99/numpy special values
          (signed zeros, infinities, pow(1, nan) = pow(-1, inf) = 1) by selects
    tanh(-0) = -0 and erf(-0) = -0: every odd function keeps the sign of zero

Coefficients: exp and log from Cephes (expf.c, logf.c), tanh from Cephes
tanhf.c, erf from Eigen's generic_fast_erf_float (used by XLA).
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import (
    Float32Type,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    VectorType,
    f32,
    i32,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

EXPANDED = (mathd.ExpOp, mathd.LogOp, mathd.TanhOp, mathd.ErfOp, mathd.PowFOp)

LOG2E = 1.44269504088896341
EXP_OVERFLOW = 88.72283905206835  # above: +inf
EXP_UNDERFLOW = -103.97207708  # below: 0 (the smallest denormal is e^-103.28)
MAGIC_ROUND = 12582912.0  # 1.5 * 2^23: adding it rounds to an integer in the low mantissa bits


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
        """a * b + c (not fused: keeps results identical across targets)."""
        return self.add(self.mul(a, b), c)

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

    def clamp(self, x: SSAValue, lo: float, hi: float) -> SSAValue:
        """min(max(x, lo), hi) as bare vmaxps/vminps (nnan); callers restore NaNs themselves."""
        nnan = arith.FastMathFlagsAttr(["nnan"])
        return self.op(arith.MinimumfOp, self.op(arith.MaximumfOp, x, self.c(lo), nnan), self.c(hi), nnan)

    def keep_nan(self, x: SSAValue, r: SSAValue) -> SSAValue:
        return self.select(self.cmp(x, x, "uno"), x, r)

    def exp(self, x: SSAValue) -> SSAValue:
        xc = self.clamp(x, EXP_UNDERFLOW, EXP_OVERFLOW)
        k = self.add(self.mul(xc, self.c(LOG2E)), self.c(MAGIC_ROUND))
        n = self.sub(k, self.c(MAGIC_ROUND))  # round(x * log2(e)) as a float
        n_int = self.op(arith.SubiOp, self.bits(k), self.bits(self.c(MAGIC_ROUND)))
        r = self.sub(self.sub(xc, self.mul(n, self.c(0.693359375))), self.mul(n, self.c(-2.12194440e-4)))
        z = self.mul(r, r)
        p = self.poly(r, [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1])
        y = self.add(self.add(self.mul(p, z), r), self.c(1.0))
        # 2^n as two normal factors 2^(n>>1) * 2^(n - (n>>1)): n spans [-150, 128],
        # beyond one float's exponent, and the product rounds denormals correctly.
        half = self.op(arith.ShRSIOp, n_int, self.ci(1))
        scale1 = self.pow2(half)
        scale2 = self.pow2(self.op(arith.SubiOp, n_int, half))
        result = self.mul(self.mul(y, scale1), scale2)
        result = self.select(self.cmp(x, self.c(EXP_OVERFLOW), "ogt"), self.c(float("inf")), result)
        result = self.select(self.cmp(x, self.c(EXP_UNDERFLOW), "olt"), self.c(0.0), result)
        return self.keep_nan(x, result)

    def pow2(self, n: SSAValue) -> SSAValue:
        """2^n for an integer n in the normal exponent range, built from its bits."""
        return self.from_bits(self.op(arith.ShLIOp, self.op(arith.AddiOp, n, self.ci(127)), self.ci(23)))

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
        ax = self.op(mathd.AbsFOp, x)
        # |x| > 0.625: 1 - 2 / (exp(2|x|) + 1), sign restored
        e = self.exp(self.op(arith.MinimumfOp, self.add(ax, ax), self.c(88.0)))  # tanh(44) == 1 in f32
        big = self.sub(self.c(1.0), self.div(self.c(2.0), self.add(e, self.c(1.0))))
        z = self.mul(x, x)
        p = self.poly(z, [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1])
        small = self.add(self.mul(self.mul(p, z), x), x)
        # x + (...) rounds -0.0 + +0.0 to +0.0: copysign restores tanh(-0) = -0 (one and/or)
        r = self.select(self.cmp(ax, self.c(0.625), "ogt"), big, small)
        return self.op(mathd.CopySignOp, r, x)

    def erf(self, x: SSAValue) -> SSAValue:
        xc = self.clamp(x, -4.0, 4.0)
        x2 = self.mul(xc, xc)
        p = self.poly(x2, [-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02])
        q = self.poly(x2, [-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03, -1.42647390514189e-02])
        # x * (p / q), not (x * p) / q: |p| < 1 would flush erf of the smallest denormals to 0
        return self.keep_nan(x, self.mul(xc, self.div(p, q)))

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


def expand_math(module: ModuleOp) -> None:
    for op in list(module.walk()):
        value = expand(op)
        if value is not None:
            Rewriter.replace_op(op, [], [value])
