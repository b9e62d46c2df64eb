"""Formulas of graph ops shared by the frontends: atan (Cephes' atanf), log1p, sinh and
cosh's exponentials, polynomials. A frontend subclasses Formulas with how it inserts
ops and makes constants: onnx_math.Ops for an ONNX node, stablehlo.EmitterOps for a
stablehlo op's Emitter. (Here, not in onnx_math: importing onnx_math first imports
onnx_composite, whose registrations import onnx_math back half made.)"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue

from mlfuse.dialects import graph

# Cephes atanf's polynomial, highest power first
ATAN_COEFFICIENTS = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)
TAN_PI_8, TAN_3PI_8 = math.tan(math.pi / 8), math.tan(3 * math.pi / 8)


class Formulas:
    """Arithmetic on graph values, so that formulas read as formulas: `emit` inserts an
    op and gives its result, `c` a constant of the shape and type of the values."""

    def c(self, value: float) -> SSAValue:
        raise NotImplementedError

    def emit(self, op: Operation) -> SSAValue:
        raise NotImplementedError

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(graph.AddOp(a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(graph.SubOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(graph.MulOp(a, b))

    def div(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(graph.DivOp(a, b))

    def unary(self, cls: type, a: SSAValue) -> SSAValue:
        return self.emit(cls(a))

    def where(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(graph.SelectOp(cond, a, b))

    def less(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.emit(graph.CompareOp("lt", a, b))

    def polynomial(self, z: SSAValue, coefficients: Sequence[float]) -> SSAValue:
        """Horner's rule, highest power first."""
        result = self.c(coefficients[0])
        for coefficient in coefficients[1:]:
            result = self.add(self.mul(result, z), self.c(coefficient))
        return result

    def odd_series(self, x: SSAValue, coefficients: Sequence[float]) -> SSAValue:
        """x + x^3 (c0 + c1 x^2 + ...), coefficients lowest power first."""
        x2 = self.mul(x, x)
        return self.add(x, self.mul(self.mul(x2, x), self.polynomial(x2, coefficients[::-1])))

    def with_sign_of(self, magnitude: SSAValue, x: SSAValue) -> SSAValue:
        """The odd function's value at x from its value at |x|; at +-0 it is x itself."""
        zero = self.emit(graph.CompareOp("eq", x, self.c(0.0)))
        signed = self.where(self.less(x, self.c(0.0)), self.unary(graph.NegOp, magnitude), magnitude)
        return self.where(zero, x, signed)

    def atan(self, x: SSAValue) -> SSAValue:
        a = self.unary(graph.AbsOp, x)
        high, middle = self.less(self.c(TAN_3PI_8), a), self.less(self.c(TAN_PI_8), a)
        reduced = self.where(high, self.div(self.c(-1.0), a),
                             self.where(middle, self.div(self.sub(a, self.c(1.0)), self.add(a, self.c(1.0))), a))
        offset = self.where(high, self.c(math.pi / 2), self.where(middle, self.c(math.pi / 4), self.c(0.0)))
        z = self.mul(reduced, reduced)
        y = self.add(self.mul(self.mul(self.polynomial(z, ATAN_COEFFICIENTS), z), reduced), reduced)
        return self.with_sign_of(self.add(offset, y), x)

    def half_exp_pair(self, x: SSAValue) -> tuple[SSAValue, SSAValue]:
        """e^|x| / 2 and e^-|x| / 2, as h (h / 2) and (1 / 2) / (h h) with h = e^(|x| / 2):
        e^|x| itself overflows a little before sinh and cosh do."""
        h = self.unary(graph.ExpOp, self.mul(self.unary(graph.AbsOp, x), self.c(0.5)))
        return self.mul(h, self.mul(h, self.c(0.5))), self.div(self.c(0.5), self.mul(h, h))

    def small(self, x: SSAValue, bound: float) -> SSAValue:
        return self.less(self.unary(graph.AbsOp, x), self.c(bound))

    def log1p(self, t: SSAValue) -> SSAValue:
        """log(1 + t), accurate for small t. (u - 1 must not be simplified to t: the
        graph dialect's canonicalization does no such algebra on floats.)"""
        u = self.add(self.c(1.0), t)
        d = self.sub(u, self.c(1.0))
        exact = self.emit(graph.CompareOp("eq", d, self.c(0.0)))
        ratio = self.where(self.small(t, 1e4), self.div(t, d), self.c(1.0))  # t / d is inf / inf at infinity
        return self.where(exact, t, self.mul(self.unary(graph.LogOp, u), ratio))
