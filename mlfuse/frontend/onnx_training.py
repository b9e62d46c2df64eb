"""ai.onnx.preview.training's optimizers: one update step of Adagrad, Adam and Momentum.

Each node takes the learning rate R and the step count T (scalars), then n tensors X,
their gradients G and the optimizer's state (V, H), and gives the updated tensors and
state, elementwise, by the formulas of onnx's reference (in float64, then the inputs'
type; g = norm_coefficient * x + G):

    Adagrad   h' = h + g^2;  x' = x - R / (1 + T decay_factor) * g / (sqrt(h') + epsilon)
    Adam      v' = alpha v + (1 - alpha) g;  h' = beta h + (1 - beta) g^2
              r = R sqrt(1 - beta^T) / (1 - alpha^T) when T > 0, else R
              x' = (1 - norm_coefficient_post) (x - r v' / (sqrt(h') + epsilon))
    Momentum  v' = alpha v + (beta if T > 0 else 1) g
              x' = x - R v' (standard), x - R (g + alpha v') (nesterov)

T is known at run time only: its two cases are both computed and selected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import f64
from xdsl.ir import SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, is_float, shape_of
from mlfuse.frontend.onnx_composite import composite
from mlfuse.frontend.onnx_ops import Node, Value, broadcast_to

DOMAIN = "ai.onnx.preview.training."


class Step:
    """float64 arithmetic on one node's tensors, the scalars R and T broadcast to them."""

    def __init__(self, node: Node):
        self.node = node
        self.rate, self.step = node.cast(node.input(0), f64), node.cast(node.input(1), f64)
        if shape_of(self.rate) not in ((), (1,)) or shape_of(self.step) not in ((), (1,)):
            raise node.error("R and T must be scalars")

    def scalar(self, v: SSAValue, shape: Sequence[int]) -> SSAValue:
        return broadcast_to(self.node, self.node.reshape(v, ()), shape)

    def c(self, value: float, shape: Sequence[int]) -> SSAValue:
        return self.node.splat(value, f64, shape)

    def op(self, cls: type, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.node.emit(cls(a, b))

    def after_first(self, shape: Sequence[int]) -> SSAValue:
        """T > 0, broadcast."""
        return self.node.emit(graph.CompareOp("gt", self.scalar(self.step, shape), self.c(0.0, shape)))

    def regularized(self, x: SSAValue, g: SSAValue, norm: float) -> SSAValue:
        return self.op(graph.AddOp, self.op(graph.MulOp, self.c(norm, shape_of(x)), x), g)


def tensors(node: Node, groups: int) -> list[list[SSAValue]]:
    """The n tensors of each of `groups` groups (X, G, V, H) after R and T, as float64."""
    count = len(node.proto.input) - 2
    if count <= 0 or count % groups:
        raise node.error(f"takes R, T and {groups} groups of equally many tensors, got {len(node.proto.input)} inputs")
    n = count // groups
    values = [node.input(2 + i) for i in range(count)]
    for i, v in enumerate(values):
        if not is_float(element_type_of(v)) or shape_of(v) != shape_of(values[i % n]):
            raise node.error("every X, G, V and H must be a float tensor of its X's shape")
    return [[node.cast(v, f64) for v in values[k * n:(k + 1) * n]] for k in range(groups)]


def optimizer(name: str, groups: int, attributes: Sequence[str]):
    """Register `update(step, node, x, g, *state) -> (x', *state')` as the optimizer `name`."""
    def register(update: Callable[..., Sequence[SSAValue]]):
        @composite(DOMAIN + name, attributes=attributes)
        def convert(node: Node) -> list[Value]:
            step, columns = Step(node), tensors(node, groups)
            results = [update(step, node, *row) for row in zip(*columns)]
            el = [element_type_of(node.input(2 + i)) for i in range(len(columns[0]))]
            return [node.cast(r[k], el[i]) for k in range(groups - 1) for i, r in enumerate(results)]
        return update
    return register


@optimizer("Adagrad", 3, ("decay_factor", "epsilon", "norm_coefficient"))
def adagrad(s: Step, node: Node, x: SSAValue, g: SSAValue, h: SSAValue) -> Sequence[SSAValue]:
    shape = shape_of(x)
    g = s.regularized(x, g, float(node.attr("norm_coefficient", 0.0)))
    h_new = s.op(graph.AddOp, h, s.op(graph.MulOp, g, g))
    decayed = s.op(graph.AddOp, s.c(1.0, shape), s.op(graph.MulOp, s.scalar(s.step, shape), s.c(float(node.attr("decay_factor", 0.0)), shape)))
    rate = s.op(graph.DivOp, s.scalar(s.rate, shape), decayed)
    root = s.op(graph.AddOp, node.emit(graph.SqrtOp(h_new)), s.c(float(node.attr("epsilon", 0.0)), shape))
    return [s.op(graph.SubOp, x, s.op(graph.DivOp, s.op(graph.MulOp, rate, g), root)), h_new]


@optimizer("Adam", 4, ("alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post"))
def adam(s: Step, node: Node, x: SSAValue, g: SSAValue, v: SSAValue, h: SSAValue) -> Sequence[SSAValue]:
    shape = shape_of(x)
    alpha, beta = float(node.attr("alpha", 0.9)), float(node.attr("beta", 0.999))
    g = s.regularized(x, g, float(node.attr("norm_coefficient", 0.0)))
    v_new = s.op(graph.AddOp, s.op(graph.MulOp, s.c(alpha, shape), v), s.op(graph.MulOp, s.c(1 - alpha, shape), g))
    h_new = s.op(graph.AddOp, s.op(graph.MulOp, s.c(beta, shape), h), s.op(graph.MulOp, s.c(1 - beta, shape), s.op(graph.MulOp, g, g)))
    root = s.op(graph.AddOp, node.emit(graph.SqrtOp(h_new)), s.c(float(node.attr("epsilon", 0.0)), shape))
    t = s.scalar(s.step, shape)

    def one_minus_power(base: float) -> SSAValue:
        return s.op(graph.SubOp, s.c(1.0, shape), s.op(graph.PowOp, s.c(base, shape), t))

    rate = s.scalar(s.rate, shape)
    corrected = s.op(graph.DivOp, s.op(graph.MulOp, rate, node.emit(graph.SqrtOp(one_minus_power(beta)))), one_minus_power(alpha))
    rate = node.emit(graph.SelectOp(s.after_first(shape), corrected, rate))
    x_new = s.op(graph.SubOp, x, s.op(graph.MulOp, rate, s.op(graph.DivOp, v_new, root)))
    return [s.op(graph.MulOp, s.c(1 - float(node.attr("norm_coefficient_post", 0.0)), shape), x_new), v_new, h_new]


@optimizer("Momentum", 3, ("alpha", "beta", "mode", "norm_coefficient"))
def momentum(s: Step, node: Node, x: SSAValue, g: SSAValue, v: SSAValue) -> Sequence[SSAValue]:
    shape = shape_of(x)
    mode = node.attr("mode", "standard")
    if mode not in ("standard", "nesterov"):
        raise node.error(f"mode must be 'standard' or 'nesterov', got '{mode}'")
    alpha, beta = float(node.attr("alpha", 0.0)), float(node.attr("beta", 0.0))
    g = s.regularized(x, g, float(node.attr("norm_coefficient", 0.0)))
    coefficient = node.emit(graph.SelectOp(s.after_first(shape), s.c(beta, shape), s.c(1.0, shape)))
    v_new = s.op(graph.AddOp, s.op(graph.MulOp, s.c(alpha, shape), v), s.op(graph.MulOp, coefficient, g))
    direction = v_new if mode == "standard" else s.op(graph.AddOp, g, s.op(graph.MulOp, s.c(alpha, shape), v_new))
    return [s.op(graph.SubOp, x, s.op(graph.MulOp, s.scalar(s.rate, shape), direction)), v_new]
