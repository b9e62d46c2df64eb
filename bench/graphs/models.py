"""The suite's subgraphs, written with the graph builder (numpy-like calls).

Weights are function arguments whose names start with `w` (so random inputs can be
scaled); biases and norm parameters are arguments too, and scalars are splat
constants, as an importer would produce them.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import ModuleOp

from mlfuse.frontend.builder import GraphBuilder, Tensor

SEQ, HIDDEN, HEADS, FFN = 128, 768, 12, 3072


def _layernorm(b: GraphBuilder, x: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    mean = b.mean(x, axis=-1, keepdims=True)
    centered = x - mean
    var = b.mean(centered * centered, axis=-1, keepdims=True)
    return centered * b.rsqrt(var + eps) * gamma + beta


def _softmax(b: GraphBuilder, x: Tensor) -> Tensor:
    e = b.exp(x - b.max(x, axis=-1, keepdims=True))
    return e / b.sum(e, axis=-1, keepdims=True)


def layernorm(rows: int = SEQ, cols: int = HIDDEN) -> ModuleOp:
    b = GraphBuilder()
    x = b.input("x", (rows, cols))
    gamma, beta = b.input("gamma", (cols,)), b.input("beta", (cols,))
    b.output(_layernorm(b, x, gamma, beta))
    return b.module()


def softmax(rows: int = 512, cols: int = 1024) -> ModuleOp:
    b = GraphBuilder()
    x = b.input("x", (rows, cols))
    b.output(_softmax(b, x))
    return b.module()


def bias_residual_layernorm(rows: int = SEQ, cols: int = HIDDEN) -> ModuleOp:
    b = GraphBuilder()
    h = b.input("h", (rows, cols))
    bias = b.input("bias", (cols,))
    residual = b.input("residual", (rows, cols))
    gamma, beta = b.input("gamma", (cols,)), b.input("beta", (cols,))
    b.output(_layernorm(b, h + bias + residual, gamma, beta))
    return b.module()


def rmsnorm(rows: int = SEQ, cols: int = 4096) -> ModuleOp:
    b = GraphBuilder()
    x = b.input("x", (rows, cols))
    weight = b.input("gamma", (cols,))
    ms = b.mean(x * x, axis=-1, keepdims=True)
    b.output(x * b.rsqrt(ms + 1e-6) * weight)
    return b.module()


def gelu_mlp_tail(rows: int = SEQ, hidden: int = HIDDEN, ffn: int = FFN) -> ModuleOp:
    """The end of a transformer MLP: h = x W1 (given), then bias, GELU, W2, bias, residual."""
    b = GraphBuilder()
    h = b.input("h", (rows, ffn))
    b1 = b.input("b1", (ffn,))
    w2 = b.input("w2", (ffn, hidden))
    b2 = b.input("b2", (hidden,))
    residual = b.input("residual", (rows, hidden))
    g = b.gelu(h + b1)
    b.output(b.matmul(g, w2) + b2 + residual)
    return b.module()


def swiglu(rows: int = SEQ, hidden: int = 1024, ffn: int = 2816) -> ModuleOp:
    b = GraphBuilder()
    x = b.input("x", (rows, hidden))
    w_gate, w_up = b.input("w_gate", (hidden, ffn)), b.input("w_up", (hidden, ffn))
    w_down = b.input("w_down", (ffn, hidden))
    gate = b.matmul(x, w_gate)
    up = b.matmul(x, w_up)
    b.output(b.matmul(gate * b.sigmoid(gate) * up, w_down))
    return b.module()


def _attention_core(b: GraphBuilder, q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """q, k, v: [heads, seq, head_dim]; mask: [seq] additive over keys."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = b.matmul(q, b.transpose(k, (0, 2, 1))) * scale + mask
    return b.matmul(_softmax(b, scores), v)


def attention(heads: int = HEADS, seq: int = SEQ, head_dim: int = HIDDEN // HEADS) -> ModuleOp:
    b = GraphBuilder()
    q = b.input("q", (heads, seq, head_dim))
    k = b.input("k", (heads, seq, head_dim))
    v = b.input("v", (heads, seq, head_dim))
    mask = b.input("mask", (seq,))
    b.output(_attention_core(b, q, k, v, mask))
    return b.module()


def _bert_layer(b: GraphBuilder, x: Tensor, mask: Tensor, tag: str, seq: int = SEQ,
                hidden: int = HIDDEN, heads: int = HEADS, ffn: int = FFN) -> Tensor:
    def param(name: str, shape: tuple[int, ...]) -> Tensor:
        return b.input(f"{name}{tag}", shape)

    head_dim = hidden // heads

    def split_heads(t: Tensor) -> Tensor:
        return b.transpose(b.reshape(t, (seq, heads, head_dim)), (1, 0, 2))

    q = split_heads(b.matmul(x, param("wq", (hidden, hidden))) + param("bq", (hidden,)))
    k = split_heads(b.matmul(x, param("wk", (hidden, hidden))) + param("bk", (hidden,)))
    v = split_heads(b.matmul(x, param("wv", (hidden, hidden))) + param("bv", (hidden,)))
    ctx = b.reshape(b.transpose(_attention_core(b, q, k, v, mask), (1, 0, 2)), (seq, hidden))
    attn = b.matmul(ctx, param("wo", (hidden, hidden))) + param("bo", (hidden,))
    h1 = _layernorm(b, attn + x, param("ln1_gamma", (hidden,)), param("ln1_beta", (hidden,)))
    inner = b.gelu(b.matmul(h1, param("w1", (hidden, ffn))) + param("b1", (ffn,)))
    out = b.matmul(inner, param("w2", (ffn, hidden))) + param("b2", (hidden,))
    return _layernorm(b, out + h1, param("ln2_gamma", (hidden,)), param("ln2_beta", (hidden,)))


def bert_layer() -> ModuleOp:
    b = GraphBuilder()
    x = b.input("x", (SEQ, HIDDEN))
    mask = b.input("mask", (SEQ,))
    b.output(_bert_layer(b, x, mask, ""))
    return b.module()


def stacked_bert(layers: int = 8) -> ModuleOp:
    b = GraphBuilder()
    x = b.input("x", (SEQ, HIDDEN))
    mask = b.input("mask", (SEQ,))
    for i in range(layers):
        x = _bert_layer(b, x, mask, f"_{i}")
    b.output(x)
    return b.module()


# the parameters of a small transformer layer stack (hidden 256, ffn 1024)
ADAM_SHAPES = [
    (256, 256), (256,), (256, 256), (256,), (256, 256), (256,), (256, 256), (256,),
    (256, 1024), (1024,), (1024, 256), (256,), (256,), (256,), (256,), (256,),
    (512, 256), (128, 256), (2, 256), (256,), (256,), (256, 256), (256,), (64, 256),
]


def adam(shapes: list[tuple[int, ...]] | None = None, lr: float = 1e-3, beta1: float = 0.9,
         beta2: float = 0.999, eps: float = 1e-8, step: int = 10) -> ModuleOp:
    """One Adam step over many parameters: independent elementwise chains."""
    b = GraphBuilder()
    outputs = []
    correction1, correction2 = 1 - beta1**step, 1 - beta2**step
    for i, shape in enumerate(shapes or ADAM_SHAPES):
        p = b.input(f"p{i}", shape)
        g = b.input(f"g{i}", shape)
        m = b.input(f"m{i}", shape)
        v = b.input(f"v{i}", shape)
        m_new = beta1 * m + (1 - beta1) * g
        v_new = beta2 * v + (1 - beta2) * (g * g)
        update = (m_new / correction1) / (b.sqrt(v_new / correction2) + eps)
        outputs += [p - lr * update, m_new, v_new]
    b.output(*outputs)
    return b.module()


def layernorm_backward(rows: int = SEQ, cols: int = HIDDEN) -> ModuleOp:
    """dx, dgamma, dbeta of y = (x - mean) * rstd * gamma + beta."""
    b = GraphBuilder()
    x = b.input("x", (rows, cols))
    dy = b.input("dy", (rows, cols))
    gamma = b.input("gamma", (cols,))
    mean = b.mean(x, axis=-1, keepdims=True)
    centered = x - mean
    rstd = b.rsqrt(b.mean(centered * centered, axis=-1, keepdims=True) + 1e-5)
    xhat = centered * rstd
    dgamma = b.sum(dy * xhat, axis=0)
    dbeta = b.sum(dy, axis=0)
    dxhat = dy * gamma
    dx = rstd * (dxhat - b.mean(dxhat, axis=-1, keepdims=True)
                 - xhat * b.mean(dxhat * xhat, axis=-1, keepdims=True))
    b.output(dx, dgamma, dbeta)
    return b.module()


# --- window graphs: convolutions and pooling with their epilogues ---------------------------------


def _conv_bn_relu(b: GraphBuilder, x, channels: int, name: str, relu: bool = True):
    """3x3 conv (pad 1) + inference batch norm as a per-channel scale and shift (+ ReLU)."""
    w = b.input(f"{name}_w", (channels, channels, 3, 3))
    scale, shift = b.input(f"{name}_scale", (channels,)), b.input(f"{name}_shift", (channels,))
    y = b.conv2d(x, w, pads=[1, 1, 1, 1])
    y = y * b.reshape(scale, (1, channels, 1, 1)) + b.reshape(shift, (1, channels, 1, 1))
    return b.relu(y) if relu else y


def resnet_block(channels: int = 64, size: int = 56) -> ModuleOp:
    """ResNet-18's basic block: conv-BN-ReLU-conv-BN, residual add, ReLU."""
    b = GraphBuilder()
    x = b.input("x", (1, channels, size, size))
    y = _conv_bn_relu(b, x, channels, "c1")
    y = _conv_bn_relu(b, y, channels, "c2", relu=False)
    b.output(b.relu(y + x))
    return b.module()


def conv_layernorm(channels: int = 96, size: int = 56) -> ModuleOp:
    """A ConvNeXt-style stem: 3x3 conv, then LayerNorm over channels (NHWC)."""
    b = GraphBuilder()
    x = b.input("x", (1, channels, size, size))
    y = _conv_bn_relu(b, x, channels, "c1")
    t = b.transpose(y, [0, 2, 3, 1])
    gamma, beta = b.input("gamma", (channels,)), b.input("beta", (channels,))
    b.output(_layernorm(b, t, gamma, beta))
    return b.module()


def conv_pool(channels: int = 64, size: int = 112) -> ModuleOp:
    """ResNet's stem tail: conv-BN-ReLU then a 3x3 stride-2 max pool."""
    b = GraphBuilder()
    x = b.input("x", (1, channels, size, size))
    y = _conv_bn_relu(b, x, channels, "c1")
    b.output(b.max_pool2d(y, (3, 3), strides=(2, 2), pads=(1, 1, 1, 1)))
    return b.module()
