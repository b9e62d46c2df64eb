"""ONNX's LinearAttention (opset 27) unrolled over its static sequence length.

The operator is a recurrence over a state S of shape [batch, kv_heads, d_k, d_v] per
token t (the schema's equations; g the decay in log space, beta the update rate):

    linear        S = S + k_t v_t^T
    gated         S = exp(g_t) S + k_t v_t^T
    delta         S = S + k_t (beta_t (v_t - S^T k_t))^T
    gated_delta   S = exp(g_t) S, then as delta
    o_t = scale * q_t^T S            (query head h reads kv head h // (q_heads / kv_heads))

Shapes are static, so, like the recurrent layers (onnx_recurrent.py), the node becomes
one copy of the step per token: broadcast products, sums over d_k and a batched
product for the read, which the planner fuses like any other graph ops. That suits
decoding (T = 1) and short prefills; a long prefill makes a graph of T steps (the
chunk-parallel forms are not built). Inputs are packed [B, T, heads * d]; decay is
per key dimension [B, T, kv_heads * d_k] or per head [B, T, kv_heads]; beta per head
[B, T, kv_heads] or shared [B, T, 1]. The state is accumulated in f32 (onnx's
reference does too) and `present_state` has past_state's element type, or query's.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import f32
from xdsl.ir import SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, fmt_shape, shape_of
from mlfuse.frontend.onnx_composite import composite, float_input
from mlfuse.frontend.onnx_ops import Node, Value, matmul, reduce, slice_axis
from mlfuse.frontend.onnx_recurrent import add, mul

UPDATE_RULES = ("linear", "gated", "delta", "gated_delta")
QUERY, KEY, VALUE, PAST_STATE, DECAY, BETA = range(6)


def heads_first(node: Node, x: SSAValue, heads: int, what: str) -> SSAValue:
    """[B, T, heads * d] -> [B, heads, T, d] in f32."""
    if len(shape_of(x)) != 3:
        raise node.error(f"{what} must be 3-D (batch, sequence, heads * size), got {fmt_shape(shape_of(x))}")
    b, t, packed = shape_of(x)
    if packed % heads:
        raise node.error(f"{what}'s last dimension {packed} is not a multiple of its {heads} heads")
    x = node.reshape(node.cast(x, f32), [b, t, heads, packed // heads])
    return node.emit(graph.TransposeOp(x, [0, 2, 1, 3]))


def at_step(node: Node, x: SSAValue, t: int) -> SSAValue:
    """x [B, H, T, d] -> its token t, [B, H, d]."""
    b, h, _, d = shape_of(x)
    return node.reshape(slice_axis(node, x, 2, t, t + 1), [b, h, d])


def column(node: Node, x: SSAValue) -> SSAValue:
    """[..., d] -> [..., d, 1] (to broadcast along the state's d_v)."""
    return node.reshape(x, [*shape_of(x), 1])


class Gates:
    """decay and beta as [B, kv_heads or 1, T, d_k or 1], checked against the schema's shapes."""

    def __init__(self, node: Node, rule: str, b: int, t: int, kv_heads: int, d_k: int):
        self.node = node
        gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
        for index, name, wanted in ((DECAY, "decay", gated), (BETA, "beta", delta)):
            if node.has_input(index) != wanted:
                raise node.error(f"update_rule {rule!r} {'needs' if wanted else 'takes no'} {name} input")
        self.decay = self.unpack(DECAY, "decay", (kv_heads, kv_heads * d_k), b, t, kv_heads) if gated else None
        self.beta = self.unpack(BETA, "beta", (kv_heads, 1), b, t, kv_heads) if delta else None

    def unpack(self, index: int, name: str, lasts: tuple[int, int], b: int, t: int, kv_heads: int) -> SSAValue:
        node = self.node
        x = float_input(node, index)
        shape = shape_of(x)
        if len(shape) != 3 or tuple(shape[:2]) != (b, t) or shape[2] not in lasts:
            raise node.error(f"{name} must be {b}x{t}x{lasts[0]} or {b}x{t}x{lasts[1]}, got {fmt_shape(shape)}")
        heads = kv_heads if name == "decay" else shape[2]  # beta's last dimension may be 1, shared by all heads
        return heads_first(node, x, heads, name)  # per head: [B, heads, T, 1]


def step(node: Node, gates: Gates, state: SSAValue, k: SSAValue, v: SSAValue, t: int) -> SSAValue:
    """The state after token t: k [B, Hkv, d_k], v [B, Hkv, d_v] its key and value."""
    if gates.decay is not None:
        state = mul(node, state, column(node, node.emit(graph.ExpOp(at_step(node, gates.decay, t)))))
    if gates.beta is not None:
        retrieved = reduce(node, graph.ReduceSumOp, mul(node, state, column(node, k)), [2], keepdims=False)
        v = mul(node, at_step(node, gates.beta, t), node.emit(graph.SubOp(v, retrieved)))
    b, h, d_v = shape_of(v)
    return add(node, state, mul(node, column(node, k), node.reshape(v, [b, h, 1, d_v])))


def read(node: Node, state: SSAValue, q: SSAValue, scale: float) -> SSAValue:
    """scale * q^T S per query head: q [B, Hq, d_k], S [B, Hkv, d_k, d_v] -> [B, Hq, 1, d_v]."""
    b, q_heads, d_k = shape_of(q)
    kv_heads, d_v = shape_of(state)[1], shape_of(state)[3]
    grouped = node.reshape(q, [b, kv_heads, q_heads // kv_heads, d_k])  # query head h reads kv head h // group
    o = matmul(node, grouped, state)  # [B, Hkv, group, d_v]
    o = mul(node, o, node.splat(scale, f32, []))
    return node.reshape(o, [b, q_heads, 1, d_v])


@composite("LinearAttention", attributes=("chunk_size", "kv_num_heads", "q_num_heads", "scale", "update_rule"))
def convert_linear_attention(node: Node) -> list[Value]:
    rule = node.attr("update_rule", "gated_delta")
    if rule not in UPDATE_RULES:
        raise node.error(f"update_rule {rule!r} is not one of {', '.join(UPDATE_RULES)}")
    q_heads, kv_heads = node.attr("q_num_heads"), node.attr("kv_num_heads")
    if q_heads is None or kv_heads is None:
        raise node.error("q_num_heads and kv_num_heads are required")
    if kv_heads <= 0 or q_heads <= 0 or q_heads % kv_heads:
        raise node.error(f"q_num_heads {q_heads} must be a positive multiple of kv_num_heads {kv_heads}")
    query = float_input(node, QUERY)
    q, k, v = (heads_first(node, float_input(node, i), n, what)
               for i, n, what in ((QUERY, q_heads, "query"), (KEY, kv_heads, "key"), (VALUE, kv_heads, "value")))
    b, _, t, d_k = shape_of(q)
    if shape_of(k) != (b, kv_heads, t, d_k) or shape_of(v)[:3] != (b, kv_heads, t):
        raise node.error(f"key {fmt_shape(shape_of(node.input(KEY)))} and value {fmt_shape(shape_of(node.input(VALUE)))} "
                         f"do not match query {fmt_shape(shape_of(query))} with {q_heads} and {kv_heads} heads")
    d_v = shape_of(v)[3]
    state_type = element_type_of(query)
    if node.has_input(PAST_STATE):
        past = float_input(node, PAST_STATE)
        if shape_of(past) != (b, kv_heads, d_k, d_v):
            raise node.error(f"past_state must be {fmt_shape((b, kv_heads, d_k, d_v))}, got {fmt_shape(shape_of(past))}")
        state, state_type = node.cast(past, f32), element_type_of(past)
    else:
        state = node.splat(0.0, f32, [b, kv_heads, d_k, d_v])
    gates = Gates(node, rule, b, t, kv_heads, d_k)
    scale = float(node.attr("scale", 0.0)) or 1.0 / math.sqrt(d_k)
    outputs = []
    for i in range(t):
        state = step(node, gates, state, at_step(node, k, i), at_step(node, v, i), i)
        outputs.append(read(node, state, at_step(node, q, i), scale))
    o = outputs[0] if t == 1 else node.emit(graph.ConcatOp(outputs, 2))  # [B, Hq, T, d_v]
    o = node.reshape(node.emit(graph.TransposeOp(o, [0, 2, 1, 3])), [b, t, q_heads * d_v])
    return [node.cast(o, element_type_of(query)), node.cast(state, state_type)]
