"""Shared helpers of the ONNX frontend tests: building models, running onnxruntime and mlfuse.

Imported by the other test_onnx*.py modules (pytest puts tests/ on sys.path); the
tests here check the helpers themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend tests need the onnx extra (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="the ONNX frontend tests need onnxruntime (the onnx extra)")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from mlfuse.frontend.onnx import bind_inputs, import_onnx, input_names  # noqa: E402
from mlfuse.reference import reference  # noqa: E402

IR_VERSION = 10  # accepted by onnxruntime for opsets 13 to 21


def tensor_type(array: np.ndarray) -> int:
    return helper.np_dtype_to_tensor_dtype(array.dtype)


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, tuple[int, Sequence[int | str] | None]],
    outputs: Sequence[str],
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
    name: str = "test",
    infer: bool = True,
) -> onnx.ModelProto:
    """A model with the given graph inputs ({name: (TensorProto type, shape)}); output types are inferred
    (with infer=False leniently, for models mlfuse must reject itself: unknown ones become FLOAT)."""
    g = helper.make_graph(
        list(nodes),
        name,
        [helper.make_tensor_value_info(n, t, shape) for n, (t, shape) in inputs.items()],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        initializer=[numpy_helper.from_array(a, n) for n, a in (initializers or {}).items()],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)
    if infer:
        return onnx.shape_inference.infer_shapes(model, strict_mode=True)
    model = onnx.shape_inference.infer_shapes(model)
    for out in model.graph.output:
        if not out.type.tensor_type.elem_type:
            out.type.tensor_type.elem_type = TensorProto.FLOAT
        if not out.type.tensor_type.HasField("shape"):  # the checker wants one; the import's inference fails first
            out.type.tensor_type.shape.dim.add().dim_param = "unknown"
    return model


def single_node(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    consts: Mapping[int, np.ndarray] | None = None,
    opset: int = 17,
    outputs: int = 1,
    infer: bool = True,
    **attrs,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A one-node model: inputs[i] is a graph input x{i}, or an initializer c{i} when in consts, or absent when None."""
    consts = dict(consts or {})
    names, graph_inputs, feeds, initializers = [], {}, {}, {}
    for i in range(max([len(inputs), *[k + 1 for k in consts]])):
        array = consts.get(i, inputs[i] if i < len(inputs) else None)
        if array is None:
            names.append("")
        elif i in consts:
            names.append(f"c{i}")
            initializers[f"c{i}"] = np.asarray(array)
        else:
            names.append(f"x{i}")
            graph_inputs[f"x{i}"] = (tensor_type(array), list(array.shape))
            feeds[f"x{i}"] = array
    out_names = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op_type, names, out_names, name=f"the_{op_type.lower()}", **attrs)
    return make_model([node], graph_inputs, out_names, initializers, opset, infer=infer), feeds


def run_onnxruntime(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, dict(feeds))


def run_reference(model, feeds: Mapping[str, np.ndarray], **import_options) -> list[np.ndarray]:
    module = import_onnx(model, **import_options)
    return list(reference(module)(*bind_inputs(input_names(module), [], feeds)))


def assert_matches(ours: Sequence[np.ndarray], theirs: Sequence[np.ndarray], rtol: float, atol: float) -> None:
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        b = np.asarray(b)
        assert a.shape == b.shape, f"output {i}: shape {a.shape} != onnxruntime's {b.shape}"
        assert a.dtype == b.dtype, f"output {i}: dtype {a.dtype} != onnxruntime's {b.dtype}"
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"output {i}")


def check_against_onnxruntime(model, feeds, rtol: float = 1e-5, atol: float = 1e-6, **import_options) -> list[np.ndarray]:
    ours = run_reference(model, feeds, **import_options)
    assert_matches(ours, run_onnxruntime(model, feeds), rtol, atol)
    return ours


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm((a - b).ravel()) / max(np.linalg.norm(b.ravel()), 1e-30))


def test_single_node_builds_inputs_constants_and_gaps():
    model, feeds = single_node("Clip", [np.ones((2, 2), np.float32), None], consts={2: np.array(0.5, np.float32)})
    node = model.graph.node[0]
    assert list(node.input) == ["x0", "", "c2"]
    assert list(feeds) == ["x0"] and [t.name for t in model.graph.initializer] == ["c2"]
    assert model.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT


def test_assert_matches_catches_differences():
    with pytest.raises(AssertionError):
        assert_matches([np.ones(3, np.float32)], [np.ones(3, np.float32) * 1.001], 1e-5, 0)
    with pytest.raises(AssertionError, match="dtype"):
        assert_matches([np.ones(3, np.float64)], [np.ones(3, np.float32)], 1e-5, 0)
