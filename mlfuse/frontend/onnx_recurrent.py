"""ONNX's recurrent layers (LSTM, GRU, RNN) unrolled over their static sequence length.

Shapes are static, so a layer over `seq` steps becomes `seq` copies of its cell, each
a small product with the recurrent weights and a few elementwise ops the planner
fuses. The input projection of all steps is one product up front:

    XW = X[seq * batch, input] @ W^T + (Wb + Rb)        one GEMM for the whole sequence
    for t in steps (reversed for direction=reverse):
        gates = XW[t] + H @ R^T                           the recurrent product
        H (and C) = the cell's equations on the gates     elementwise
    Y = the H of every step, stacked; Y_h (Y_c) = the last ones

Gate orders are ONNX's: LSTM i, o, f, c (peepholes i, o, f); GRU z, r, h; RNN one.
The activations are the spec's defaults or any of Sigmoid, Tanh, Relu, Softsign,
Softplus given in `activations` (the ones with alpha/beta are rejected). Not
supported, with a diagnostic at the node: sequence_lens other than the full length
for every batch entry, LSTM's input_forget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.ir import SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import fmt_shape, shape_of
from mlfuse.frontend.onnx_composite import composite, float_input, softplus
from mlfuse.frontend.onnx_ops import Node, Value, broadcast_all, matmul, slice_axis

RECURRENT_ATTRIBUTES = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
                        "layout")
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}


def activation(node: Node, name: str) -> Callable[[SSAValue], SSAValue]:
    simple: dict[str, type[graph.UnaryElementwiseOp]] = {"sigmoid": graph.SigmoidOp, "tanh": graph.TanhOp,
                                                         "relu": graph.ReluOp}
    key = name.lower()
    if key in simple:
        return lambda x: node.emit(simple[key](x))
    if key == "softsign":
        return lambda x: node.emit(graph.DivOp(x, node.emit(graph.AddOp(node.emit(graph.AbsOp(x)),
                                                                        node.scalar_like(1.0, x)))))
    if key == "softplus":
        return lambda x: softplus(node, x)
    raise node.error(f"activation {name!r} is not supported (Sigmoid, Tanh, Relu, Softsign, Softplus are)")


class Cell:
    """One direction of a layer: its weights (already sliced to the direction) and activations."""

    def __init__(self, node: Node, direction: int, activations: Sequence[str]):
        self.node = node
        w, r = node.input(1), node.input(2)
        self.w = node.reshape(slice_axis(node, w, 0, direction, direction + 1), shape_of(w)[1:])
        self.r = node.reshape(slice_axis(node, r, 0, direction, direction + 1), shape_of(r)[1:])
        self.hidden = shape_of(r)[2]
        self.r_t = node.emit(graph.TransposeOp(self.r, [1, 0]))  # [hidden, gates * hidden], once for every step
        self.f = [activation(node, a) for a in activations]
        self.clip = node.attr("clip")
        gates = GATES[node.op_type] * self.hidden
        self.bias_w = self.bias_r = None
        if node.has_input(3):
            b = node.reshape(slice_axis(node, node.input(3), 0, direction, direction + 1), [2 * gates])
            self.bias_w, self.bias_r = slice_axis(node, b, 0, 0, gates), slice_axis(node, b, 0, gates, 2 * gates)

    def project_inputs(self, x: SSAValue) -> SSAValue:
        """x [seq, batch, input] -> x @ W^T + Wb (+ Rb where it adds straight to it) [seq, batch, gates]."""
        node = self.node
        seq, batch, size = shape_of(x)
        xw = matmul(node, node.reshape(x, [seq * batch, size]), node.emit(graph.TransposeOp(self.w, [1, 0])))
        bias = self.bias_w
        if bias is not None:
            assert self.bias_r is not None
            bias_r = self.bias_r
            if node.op_type == "GRU" and node.attr("linear_before_reset", 0):  # the h gate's Rb goes inside r * (..)
                zeros = node.splat(0.0, graph.element_type_of(bias_r), [self.hidden])
                bias_r = node.emit(graph.ConcatOp([slice_axis(node, bias_r, 0, 0, 2 * self.hidden), zeros], 0))
            bias = node.emit(graph.AddOp(bias, bias_r))
            xw, bias = broadcast_all(node, xw, bias)
            xw = node.emit(graph.AddOp(xw, bias))
        return node.reshape(xw, [seq, batch, shape_of(xw)[1]])

    def gate(self, gates: SSAValue, k: int) -> SSAValue:
        return slice_axis(self.node, gates, 1, k * self.hidden, (k + 1) * self.hidden)

    def clipped(self, x: SSAValue) -> SSAValue:
        if self.clip is None:
            return x
        c = float(self.clip)
        x = self.node.emit(graph.MinOp(x, self.node.scalar_like(c, x)))
        return self.node.emit(graph.MaxOp(x, self.node.scalar_like(-c, x)))

    def recur(self, h: SSAValue) -> SSAValue:
        """h [batch, hidden] @ R^T -> [batch, gates * hidden]."""
        return matmul(self.node, h, self.r_t)


def add(node: Node, a: SSAValue, b: SSAValue) -> SSAValue:
    return node.emit(graph.AddOp(*broadcast_all(node, a, b)))


def mul(node: Node, a: SSAValue, b: SSAValue) -> SSAValue:
    return node.emit(graph.MulOp(*broadcast_all(node, a, b)))


def lstm_step(cell: Cell, xw: SSAValue, h: SSAValue, c: SSAValue, peep: list[SSAValue] | None) -> tuple[SSAValue, SSAValue]:
    node, (f, g, hact) = cell.node, cell.f
    gates = add(node, xw, cell.recur(h))
    i_pre, o_pre, f_pre, c_pre = (cell.gate(gates, k) for k in range(4))
    if peep is not None:
        i_pre, f_pre = add(node, i_pre, mul(node, peep[0], c)), add(node, f_pre, mul(node, peep[2], c))
    i, forget = f(cell.clipped(i_pre)), f(cell.clipped(f_pre))
    c_new = add(node, mul(node, forget, c), mul(node, i, g(cell.clipped(c_pre))))
    if peep is not None:
        o_pre = add(node, o_pre, mul(node, peep[1], c_new))
    return mul(node, f(cell.clipped(o_pre)), hact(c_new)), c_new


def gru_step(cell: Cell, xw: SSAValue, h: SSAValue) -> SSAValue:
    node, (f, g) = cell.node, cell.f
    hidden = cell.hidden
    rz, rh = slice_axis(node, cell.r_t, 1, 0, 2 * hidden), slice_axis(node, cell.r_t, 1, 2 * hidden, 3 * hidden)
    zr = add(node, slice_axis(node, xw, 1, 0, 2 * hidden), matmul(node, h, rz))
    z = f(cell.clipped(slice_axis(node, zr, 1, 0, hidden)))
    r = f(cell.clipped(slice_axis(node, zr, 1, hidden, 2 * hidden)))
    xh = slice_axis(node, xw, 1, 2 * hidden, 3 * hidden)
    if node.attr("linear_before_reset", 0):
        hr = matmul(node, h, rh)
        if cell.bias_r is not None:
            hr = add(node, hr, slice_axis(node, cell.bias_r, 0, 2 * hidden, 3 * hidden))
        candidate = add(node, xh, mul(node, r, hr))
    else:
        candidate = add(node, xh, matmul(node, mul(node, r, h), rh))
    candidate = g(cell.clipped(candidate))
    one_minus_z = node.emit(graph.SubOp(node.scalar_like(1.0, z), z))
    return add(node, mul(node, one_minus_z, candidate), mul(node, z, h))


def initial_state(node: Node, index: int, direction: int, batch: int, hidden: int, like: SSAValue) -> SSAValue:
    if not node.has_input(index):
        return node.splat(0.0, graph.element_type_of(like), [batch, hidden])
    v = node.input(index)
    if node.attr("layout", 0):
        v = node.emit(graph.TransposeOp(v, [1, 0, 2]))
    return node.reshape(slice_axis(node, v, 0, direction, direction + 1), [batch, hidden])


def check_sequence_lens(node: Node, seq: int, batch: int) -> None:
    lens = node.const_input(4, "sequence_lens")  # None when absent; the full length is all mlfuse unrolls
    if lens is not None and (lens.shape != (batch,) or not np.all(lens == seq)):
        raise node.error(f"sequence_lens other than the full length {seq} of every sequence is not supported")


def run_direction(node: Node, x: SSAValue, direction: int, reverse: bool, activations: Sequence[str]) -> tuple[list[SSAValue], list[SSAValue]]:
    """The H of every step (in sequence order) and the final state(s) of one direction."""
    cell = Cell(node, direction, activations)
    seq, batch, _ = shape_of(x)
    xw = cell.project_inputs(x)
    h = initial_state(node, 5, direction, batch, cell.hidden, x)
    c = initial_state(node, 6, direction, batch, cell.hidden, x) if node.op_type == "LSTM" else None
    peep = None
    if node.op_type == "LSTM" and node.has_input(7):
        p = node.reshape(slice_axis(node, node.input(7), 0, direction, direction + 1), [3 * cell.hidden])
        peep = [slice_axis(node, p, 0, k * cell.hidden, (k + 1) * cell.hidden) for k in range(3)]
    outputs: dict[int, SSAValue] = {}
    for t in (reversed(range(seq)) if reverse else range(seq)):
        step = node.reshape(slice_axis(node, xw, 0, t, t + 1), shape_of(xw)[1:])
        if node.op_type == "LSTM":
            assert c is not None
            h, c = lstm_step(cell, step, h, c, peep)
        elif node.op_type == "GRU":
            h = gru_step(cell, step, h)
        else:
            h = cell.f[0](cell.clipped(add(node, step, cell.recur(h))))
        outputs[t] = h
    return [outputs[t] for t in range(seq)], [h] + ([c] if c is not None else [])


@composite("LSTM", "GRU", "RNN", attributes=(*RECURRENT_ATTRIBUTES, "input_forget", "linear_before_reset"))
def convert_recurrent(node: Node) -> list[Value]:
    x = float_input(node)
    if len(shape_of(x)) != 3:
        raise node.error(f"X must be 3-D, got {fmt_shape(shape_of(x))}")
    layout = int(node.attr("layout", 0))
    if layout:
        x = node.emit(graph.TransposeOp(x, [1, 0, 2]))
    seq, batch, _ = shape_of(x)
    check_sequence_lens(node, seq, batch)
    if node.attr("input_forget", 0):
        raise node.error("input_forget = 1 is not supported")
    if node.attr("activation_alpha") is not None or node.attr("activation_beta") is not None:
        raise node.error("activation_alpha and activation_beta are not supported")
    direction = node.attr("direction", "forward")
    reverses = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}.get(direction)
    if reverses is None:
        raise node.error(f"direction {direction!r} is not forward, reverse or bidirectional")
    per_direction = len(DEFAULT_ACTIVATIONS[node.op_type])
    names = node.attr("activations") or DEFAULT_ACTIVATIONS[node.op_type] * len(reverses)
    if len(names) != per_direction * len(reverses):
        raise node.error(f"activations must name {per_direction * len(reverses)} functions, got {names}")
    hidden = shape_of(node.input(2))[2]
    if node.attr("hidden_size") is not None and int(node.attr("hidden_size")) != hidden:
        raise node.error(f"hidden_size {node.attr('hidden_size')} does not match R's shape {fmt_shape(shape_of(node.input(2)))}")
    ys, finals = [], []
    for d, reverse in enumerate(reverses):
        steps, last = run_direction(node, x, d, reverse, names[d * per_direction:(d + 1) * per_direction])
        ys.append(node.emit(graph.ConcatOp([node.reshape(h, [1, 1, batch, hidden]) for h in steps], 0)))
        finals.append(last)
    y = ys[0] if len(ys) == 1 else node.emit(graph.ConcatOp(ys, 1))  # [seq, dirs, batch, hidden]
    states = []
    for k in range(len(finals[0])):
        per_dir = [node.reshape(f[k], [1, batch, hidden]) for f in finals]
        states.append(per_dir[0] if len(per_dir) == 1 else node.emit(graph.ConcatOp(per_dir, 0)))
    if layout:
        y = node.emit(graph.TransposeOp(y, [2, 0, 1, 3]))
        states = [node.emit(graph.TransposeOp(s, [1, 0, 2])) for s in states]
    return [y, *states]
