"""ONNX's other trigonometric and hyperbolic functions, composed of graph ops.

    Tan    sin(x) / cos(x)
    Sinh   (e^x - e^-x) / 2; below 0.5 in magnitude its Taylor series, where the
           difference would cancel (relative error < 1e-8)
    Cosh   (e^x + e^-x) / 2, both through e^(|x| / 2), which overflows only where they do
    Atan   Cephes' atanf: |x| reduced to [0, tan(pi/8)] by atan(x) = pi/2 - atan(1/x)
           (above tan(3 pi/8)) or pi/4 + atan((x - 1) / (x + 1)) (above tan(pi/8)), then
           x + x^3 P(x^2) with P of degree 3 (relative error about 1e-7)
    Asin   atan(x / sqrt((1 - x)(1 + x)))
    Acos   2 atan(sqrt((1 - x) / (1 + x)))            (no cancellation near 1)
    Asinh  sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); above 1e4 log(2|x|)
    Acosh  log1p(x - 1 + sqrt(x - 1) sqrt(x + 1)); above 1e4 log(2x)
    Atanh  sign(x) log1p(2|x| / (1 - |x|)) / 2

log1p(t) is log(u) t / (u - 1) with u = 1 + t (Goldberg's: the rounding of u cancels),
so that the results near 0 (acosh near 1) keep their relative precision.

Det is here too: Leibniz's formula over the permutations, in float64, for matrices of
order up to 4.

Out of the domain they give NaN (the square root or logarithm of a negative number), at
its ends the infinities numpy gives. Everything is computed in the input's floating-point
type, f16 through f32 like every f16 op.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import f64, i64
from xdsl.ir import SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, fmt_shape, shape_of
from mlfuse.frontend.formulas import Formulas
from mlfuse.frontend.onnx_composite import composite, float_input
from mlfuse.frontend.onnx_ops import Node, Value, dense_from_numpy


class Ops(Formulas):
    """Formulas on one node's values (constants shaped like `like`)."""

    def __init__(self, node: Node, like: SSAValue):
        self.node, self.like = node, like

    def c(self, value: float) -> SSAValue:
        return self.node.scalar_like(value, self.like)

    def emit(self, op) -> SSAValue:
        return self.node.emit(op)


Formula = Callable[[Ops, SSAValue], SSAValue]


def unary_composite(name: str) -> Callable[[Formula], Formula]:
    """Register `formula(ops, x)` as the handler of the float unary operator `name`."""

    def register(formula: Formula) -> Formula:
        def convert(node: Node) -> list[Value]:
            x = float_input(node)
            return [formula(Ops(node, x), x)]

        composite(name)(convert)
        return formula

    return register


@unary_composite("Tan")
def tan(o: Ops, x: SSAValue) -> SSAValue:
    return o.div(o.unary(graph.SinOp, x), o.unary(graph.CosOp, x))


@unary_composite("Sinh")
def sinh(o: Ops, x: SSAValue) -> SSAValue:
    up, down = o.half_exp_pair(x)
    series = o.odd_series(x, (1 / 6, 1 / 120, 1 / 5040))
    return o.where(o.small(x, 0.5), series, o.with_sign_of(o.sub(up, down), x))


@unary_composite("Cosh")
def cosh(o: Ops, x: SSAValue) -> SSAValue:
    up, down = o.half_exp_pair(x)
    return o.add(up, down)


@unary_composite("Atan")
def atan(o: Ops, x: SSAValue) -> SSAValue:
    return o.atan(x)


@unary_composite("Asin")
def asin(o: Ops, x: SSAValue) -> SSAValue:
    cosine = o.unary(graph.SqrtOp, o.mul(o.sub(o.c(1.0), x), o.add(o.c(1.0), x)))
    return o.atan(o.div(x, cosine))


@unary_composite("Acos")
def acos(o: Ops, x: SSAValue) -> SSAValue:
    half_tangent = o.unary(graph.SqrtOp, o.div(o.sub(o.c(1.0), x), o.add(o.c(1.0), x)))
    return o.mul(o.c(2.0), o.atan(half_tangent))


@unary_composite("Asinh")
def asinh(o: Ops, x: SSAValue) -> SSAValue:
    a = o.unary(graph.AbsOp, x)
    a2 = o.mul(a, a)
    near = o.log1p(o.add(a, o.div(a2, o.add(o.c(1.0), o.unary(graph.SqrtOp, o.add(o.c(1.0), a2))))))
    far = o.add(o.unary(graph.LogOp, a), o.c(math.log(2.0)))
    return o.with_sign_of(o.where(o.less(a, o.c(1e4)), near, far), x)


@unary_composite("Acosh")
def acosh(o: Ops, x: SSAValue) -> SSAValue:
    # two roots, not one of the product: below 1 the first is NaN, where x + root of a
    # large negative x could round to 0
    root = o.mul(o.unary(graph.SqrtOp, o.sub(x, o.c(1.0))), o.unary(graph.SqrtOp, o.add(x, o.c(1.0))))
    near = o.log1p(o.add(o.sub(x, o.c(1.0)), root))
    far = o.add(o.unary(graph.LogOp, x), o.c(math.log(2.0)))
    return o.where(o.less(x, o.c(1e4)), near, far)


@unary_composite("Atanh")
def atanh(o: Ops, x: SSAValue) -> SSAValue:
    a = o.unary(graph.AbsOp, x)
    magnitude = o.log1p(o.div(o.mul(o.c(2.0), a), o.sub(o.c(1.0), a)))
    return o.with_sign_of(o.mul(magnitude, o.c(0.5)), x)


DET_MAX_ORDER = 4  # Leibniz's formula has n! terms


@composite("Det")
def convert_det(node: Node) -> list[Value]:
    """The determinant over the last two axes by Leibniz's formula, in float64:

        det A = sum over permutations p of sign(p) * prod_i A[i, p(i)]

    (24 terms of 4 factors at order 4; numpy factors A into LU instead, and both are well
    within float32 of the exact value for the orders taken)."""
    x = float_input(node)
    shape = shape_of(x)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise node.error(f"the input must end in a square matrix, got shape {fmt_shape(shape)}")
    n, batch = shape[-1], shape[:-2]
    if not 1 <= n <= DET_MAX_ORDER:
        raise node.error(f"determinants of order {n} are not supported (1 to {DET_MAX_ORDER})")
    flat = node.cast(node.reshape(x, (*batch, n * n)), f64)

    def entry(k: int) -> SSAValue:
        return node.emit(graph.GatherOp(flat, node.emit(graph.ConstantOp(dense_from_numpy(np.array(k, np.int64), i64))),
                                        len(batch)))

    total = None
    for p in itertools.permutations(range(n)):
        term = entry(p[0])
        for i in range(1, n):
            term = node.emit(graph.MulOp(term, entry(i * n + p[i])))
        inversions = sum(p[i] > p[j] for i in range(n) for j in range(i + 1, n))
        if total is None:
            total = term
        else:
            total = node.emit((graph.SubOp if inversions % 2 else graph.AddOp)(total, term))
    assert total is not None
    return [node.cast(total, element_type_of(x))]
