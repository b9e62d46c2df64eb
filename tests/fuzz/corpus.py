"""Seed inputs: chunks of the lit files and examples, and small valid ONNX models."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def mlir_seeds() -> list[tuple[str, str]]:
    """(name, text) of every `// -----` chunk of filecheck/**/*.mlir and examples/*.mlir."""
    seeds = []
    paths = sorted(p for p in REPO.glob("filecheck/**/*.mlir") if "Output" not in p.parts)  # lit's scratch
    paths += sorted(REPO.glob("examples/*.mlir"))
    for path in paths:
        for i, chunk in enumerate(path.read_text().split("// -----")):
            if "func.func" in chunk or "builtin.module" in chunk or "kernel.func" in chunk:
                seeds.append((f"{path.relative_to(REPO)}#{i}", chunk))
    return seeds


@functools.cache
def onnx_seeds() -> list[tuple[str, bytes]]:
    """(name, serialized model) of a few small valid ONNX models, one per kind of graph."""
    from onnx import TensorProto, helper, numpy_helper

    f32 = TensorProto.FLOAT

    def model(name, nodes, inputs, outputs, initializers=()):
        graph = helper.make_graph(
            nodes,
            name,
            [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
            [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
            [numpy_helper.from_array(a, n) for n, a in initializers],
        )
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return name, m.SerializeToString()

    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    return [
        model("add_relu", [helper.make_node("Add", ["x", "y"], ["s"], name="add"),
                           helper.make_node("Relu", ["s"], ["out"], name="relu")],
              [("x", f32, [2, 3]), ("y", f32, [2, 3])], [("out", f32, [2, 3])]),
        model("linear", [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
                         helper.make_node("Add", ["m", "b"], ["out"], name="bias")],
              [("x", f32, [3, 8])], [("out", f32, [3, 4])], [("w", w), ("b", b)]),
        model("softmax", [helper.make_node("Softmax", ["x"], ["out"], name="softmax", axis=-1)],
              [("x", f32, [4, 16])], [("out", f32, [4, 16])]),
        model("layernorm", [
            helper.make_node("ReduceMean", ["x"], ["mean"], name="mean", axes=[-1]),
            helper.make_node("Sub", ["x", "mean"], ["d"], name="center"),
            helper.make_node("Mul", ["d", "d"], ["d2"], name="square"),
            helper.make_node("ReduceMean", ["d2"], ["var"], name="var", axes=[-1]),
            helper.make_node("Sqrt", ["var"], ["std"], name="std"),
            helper.make_node("Div", ["d", "std"], ["out"], name="normalize"),
        ], [("x", f32, [4, 32])], [("out", f32, [4, 32])]),
        model("reshape_transpose", [
            helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
            helper.make_node("Transpose", ["r"], ["out"], name="transpose", perm=[1, 0]),
        ], [("x", f32, [2, 3, 4])], [("out", f32, [4, 6])], [("shape", np.array([6, 4], np.int64))]),
        model("gemm_tanh", [
            helper.make_node("Gemm", ["x", "w", "b"], ["g"], name="gemm", transB=0),
            helper.make_node("Tanh", ["g"], ["out"], name="tanh"),
        ], [("x", f32, [2, 8])], [("out", f32, [2, 4])], [("w", w), ("b", b)]),
        model("symbolic", [helper.make_node("Exp", ["x"], ["out"], name="exp")],
              [("x", f32, ["batch", 4])], [("out", f32, ["batch", 4])]),
    ]
