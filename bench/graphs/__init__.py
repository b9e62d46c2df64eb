"""Realistic subgraphs for the fusion planners, as graph-dialect modules.

    from bench.graphs import SUITE, random_inputs
    module = SUITE["layernorm"].build()
    arrays = random_inputs(module, seed=0)

Every entry builds a fresh module with `mlfuse.frontend.builder.GraphBuilder`
(shapes of BERT-base at sequence length 128 unless said otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from bench.graphs import models
from mlfuse.dialects import graph


@dataclass(frozen=True)
class SuiteGraph:
    name: str
    build: Callable[[], ModuleOp]
    description: str
    positive_inputs: tuple[str, ...] = ()  # inputs drawn from [0.5, 1.5] (e.g. variances)


SUITE: dict[str, SuiteGraph] = {
    g.name: g
    for g in (
        SuiteGraph("layernorm", models.layernorm, "LayerNorm over 128x768"),
        SuiteGraph("softmax", models.softmax, "row softmax over 512x1024"),
        SuiteGraph("bias_residual_layernorm", models.bias_residual_layernorm,
                   "bias add, residual add, LayerNorm (128x768)"),
        SuiteGraph("rmsnorm", models.rmsnorm, "RMSNorm over 128x4096"),
        SuiteGraph("gelu_mlp_tail", models.gelu_mlp_tail,
                   "bias + GELU + down projection + bias + residual (128x768, ffn 3072)"),
        SuiteGraph("swiglu", models.swiglu, "SwiGLU feed-forward (128x1024, ffn 2816)"),
        SuiteGraph("attention", models.attention,
                   "12 heads: QK^T, scale, mask, softmax, PV (batched GEMMs)"),
        SuiteGraph("bert_layer", models.bert_layer, "a full BERT-base encoder layer"),
        SuiteGraph("adam", models.adam, "Adam step over 24 parameter tensors",
                   positive_inputs=("v",)),
        SuiteGraph("layernorm_backward", models.layernorm_backward,
                   "backward of LayerNorm (dx, dgamma, dbeta) over 128x768"),
        SuiteGraph("stacked_bert", models.stacked_bert,
                   "8 stacked BERT-base layers (544 ops)"),
    )
}


# Window graphs (convolutions, pooling): planned by the ILP into window groups that
# post-tiling fusion lowers. Kept apart from SUITE, whose graphs every GPU and
# simulator test also runs.
WINDOW_SUITE: dict[str, SuiteGraph] = {
    g.name: g
    for g in (
        SuiteGraph("resnet_block", models.resnet_block, "ResNet basic block, 64x56x56 (conv-BN-ReLU x2, residual)"),
        SuiteGraph("conv_layernorm", models.conv_layernorm, "3x3 conv-BN-ReLU, then LayerNorm over 96 channels"),
        SuiteGraph("conv_pool", models.conv_pool, "conv-BN-ReLU then 3x3/2 max pool, 64x112x112"),
    )
}


def entry_function(module: ModuleOp) -> func.FuncOp:
    return next(op for op in module.ops if isinstance(op, func.FuncOp))


def random_inputs(module: ModuleOp, seed: int = 0, positive: tuple[str, ...] = ()) -> list[np.ndarray]:
    """Random arguments for the module's entry function (never zeros).

    Arguments whose name starts with one of `positive` are drawn from [0.5, 1.5],
    the others from [-1, 1] scaled by 1/sqrt(rows) for matrices feeding GEMMs."""
    rng = np.random.default_rng(seed)
    arrays = []
    for arg in entry_function(module).body.block.args:
        shape = graph.shape_of(arg)
        dtype = graph.numpy_dtype(graph.element_type_of(arg))
        name = arg.name_hint or ""
        if any(name.startswith(p) for p in positive):
            a = rng.uniform(0.5, 1.5, shape)
        else:
            a = rng.uniform(-1.0, 1.0, shape)
            if name.startswith("w"):
                a /= np.sqrt(shape[0])
        arrays.append(a.astype(dtype))
    return arrays
