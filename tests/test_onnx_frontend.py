"""The ONNX frontend's API and tools: input shapes, names, locations, initializers,
errors (symbolic shapes, inconsistent shapes, malformed files, unsupported operators),
mlfuse-opt and mlfuse-run on .onnx files, and mlfuse.ir.parse_module on a path.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlfuse.diagnostics import Diagnostic, location_of
from mlfuse.frontend.onnx import (
    bind_inputs,
    import_onnx,
    input_names,
    output_names,
    parse_shape_options,
)
from mlfuse.reference import reference

from test_onnx_helpers import (
    check_against_onnxruntime,
    make_model,
    run_onnxruntime,
    run_reference,
    single_node,
)

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

FLOAT = TensorProto.FLOAT
RNG = np.random.default_rng(7)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def two_layer(symbolic: bool = True) -> onnx.ModelProto:
    """x[batch, 8] @ W + b -> Relu (named nodes), and a mask input sharing the batch dimension."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="dense/MatMul"),
        helper.make_node("Add", ["h", "b"], ["h2"], name="dense/Add"),
        helper.make_node("Relu", ["h2"], ["y"], name="dense/Relu"),
        helper.make_node("Mul", ["y", "mask"], ["masked"], name="apply_mask"),
    ]
    batch = "batch" if symbolic else 3
    return make_model(
        nodes,
        {"x": (FLOAT, [batch, 8]), "mask": (FLOAT, [batch, 1])},
        ["masked", "y"],
        {"W": f32(8, 4), "b": f32(4)},
        name="two_layer",
    )


# --- input shapes -------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 8), [3, 8], "3x8"])
def test_symbolic_dimension_bound_by_one_input_completes_the_others(shape):
    module = import_onnx(two_layer(), input_shapes={"x": shape})
    fn = next(iter(module.ops))
    assert [str(t) for t in fn.function_type.inputs.data] == ["tensor<3x8xf32>", "tensor<3x1xf32>"]
    assert [str(t) for t in fn.function_type.outputs.data] == ["tensor<3x4xf32>", "tensor<3x4xf32>"]


def test_static_model_needs_no_shapes_and_matches_onnxruntime():
    model = two_layer(symbolic=False)
    check_against_onnxruntime(model, {"x": f32(3, 8), "mask": f32(3, 1)})


@pytest.mark.parametrize(
    "shapes, message",
    [
        ({}, r"input shapes are not static \('x' has shape \[batch, 8\]; 'mask' has shape \[batch, 1\]\): "
             r"give them with --shape x=Nx8 --shape mask=Nx1"),
        ({"x": (3, 9)}, r"input 'x' has size 8 in dimension 1 \(\[batch, 8\]\), but the shape given for it is 3x9"),
        ({"x": (3, 8, 1)}, r"input 'x' has rank 2 \(\[batch, 8\]\), but the shape 3x8x1 given for it has rank 3"),
        ({"x": (3, 8), "mask": (4, 1)}, r"inconsistent input shapes: dimension 'batch' is 3 in input 'x' but 4 in input 'mask'"),
        ({"X": (3, 8)}, r"a shape is given for 'X', which is not an input of the model \(inputs: x, mask\)"),
        ({"x": (0, 8)}, r"has a dimension < 1"),
    ],
    ids=["missing", "static-mismatch", "rank-mismatch", "symbol-conflict", "unknown-name", "zero-dim"],
)
def test_bad_input_shapes_are_diagnosed(shapes, message):
    with pytest.raises(Diagnostic, match=message) as info:
        import_onnx(two_layer(), input_shapes=shapes, name="two_layer.onnx")
    assert info.value.location == "two_layer.onnx"


def test_compile_of_a_model_with_named_dimensions_specializes_on_each_calls_shapes(tmp_path):
    """mlfuse.compile of a file with a symbolic batch and no input_shapes: each call's shapes
    pick a function compiled for them (kept for the next call with those shapes), against
    onnxruntime, outputs poisoned; keyword inputs and out= as for any compiled function."""
    import mlfuse
    from mlfuse.shape_specialized import ShapeSpecializedFunction

    model = two_layer()
    path = tmp_path / "two_layer.onnx"
    path.write_bytes(model.SerializeToString())
    f = mlfuse.compile(str(path))
    assert isinstance(f, ShapeSpecializedFunction)
    assert [(s.name, s.shape) for s in f.inputs] == [("x", ("batch", 8)), ("mask", ("batch", 1))]
    with pytest.raises(Diagnostic, match="output shapes depend on the input shapes"):
        _ = f.outputs
    for batch in (3, 5, 3):
        feeds = {"x": f32(batch, 8), "mask": f32(batch, 1)}
        outs = [np.full((batch, 4), np.nan, np.float32) for _ in range(2)]
        f(feeds["x"], mask=feeds["mask"], out=outs)
        for got, want in zip(outs, run_onnxruntime(model, feeds)):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        assert [s.shape for s in f.outputs] == [(batch, 4), (batch, 4)]
    assert f.specialize(x=(3, 8), mask=(3, 1)) is f.specialize(mask=(3, 1), x=(3, 8))  # compiled once


def test_specialized_shapes_are_checked_like_given_ones(tmp_path, monkeypatch):
    """A call whose shapes contradict the model is the Diagnostic input_shapes= would give;
    at most MAX_SPECIALIZATIONS shapes are kept."""
    import mlfuse
    from mlfuse.shape_specialized import ShapeSpecializedFunction

    path = tmp_path / "two_layer.onnx"
    path.write_bytes(two_layer().SerializeToString())
    f = mlfuse.compile(str(path))
    with pytest.raises(Diagnostic, match=r"dimension 'batch' is 3 in input 'x' but 4 in input 'mask'"):
        f(f32(3, 8), f32(4, 1))
    with pytest.raises(Diagnostic, match=r"input 'x' has size 8 in dimension 1"):
        f(f32(3, 9), f32(3, 1))
    with pytest.raises(ValueError, match="missing inputs mask"):
        f(f32(3, 8))
    monkeypatch.setattr(ShapeSpecializedFunction, "MAX_SPECIALIZATIONS", 2)
    for batch in (1, 2, 3):
        f(f32(batch, 8), f32(batch, 1))
    assert len(f._compiled) == 2


def test_specializations_from_several_threads(tmp_path):
    """Threads calling with different and equal batches at once: each gets its own shape's
    results (one compile per shape; the others wait for it)."""
    from concurrent.futures import ThreadPoolExecutor

    import mlfuse

    model = two_layer()
    path = tmp_path / "two_layer.onnx"
    path.write_bytes(model.SerializeToString())
    f = mlfuse.compile(str(path))
    feeds = [{"x": f32(b, 8), "mask": f32(b, 1)} for b in (1, 2, 1, 3, 2, 1)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda fd: f(**fd), feeds))
    for fd, got in zip(feeds, results):
        for g, w in zip(got, run_onnxruntime(model, fd)):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    assert len(f._compiled) == 3


def test_shapes_that_contradict_the_graph_fail_in_shape_inference():
    node = helper.make_node("Add", ["a", "b"], ["c"], name="add")
    model = make_model([node], {"a": (FLOAT, ["n"]), "b": (FLOAT, ["m"])}, ["c"])
    with pytest.raises(Diagnostic, match=r"ONNX shape inference failed for these input shapes"):
        import_onnx(model, input_shapes={"a": (3,), "b": (4,)})


def test_parse_shape_options():
    assert parse_shape_options(["x=2x128x768", "mask=2x128", "s="]) == {"x": (2, 128, 768), "mask": (2, 128), "s": ()}
    assert parse_shape_options(["a=b=3"]) == {"a=b": (3,)}
    for bad in ("x", "=2x3", "x=2x", "x=2,3", "x=-1"):
        with pytest.raises(Diagnostic, match="malformed --shape"):
            parse_shape_options([bad])
    with pytest.raises(Diagnostic, match="two shapes"):
        parse_shape_options(["x=2", "x=3"])


# --- names, locations, initializers ---------------------------------------------------------------


def test_names_and_locations_come_from_the_onnx_graph():
    module = import_onnx(two_layer(), input_shapes={"x": (3, 8)})
    assert input_names(module) == ["x", "mask"]
    assert output_names(module) == ["masked", "y"]
    located = {location_of(op) for op in module.walk() if op.name.startswith("graph.")}
    assert {"dense/MatMul", "dense/Add", "dense/Relu", "apply_mask", "W", "b"} <= located


def test_unnamed_nodes_are_named_after_their_type_and_position():
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Neg", ["e"], ["y"])]
    module = import_onnx(make_model(nodes, {"x": (FLOAT, [4])}, ["y"]))
    assert [location_of(op) for op in module.walk() if op.name.startswith("graph.")] == ["Exp_0", "Neg_1"]


def test_outputs_may_be_inputs_or_constants_and_keep_their_order():
    nodes = [
        helper.make_node("Constant", [], ["k"], name="k", value=numpy_helper.from_array(f32(2))),
        helper.make_node("Identity", ["x"], ["same"], name="id"),
    ]
    model = make_model(nodes, {"x": (FLOAT, [2])}, ["k", "x", "same"])
    model.graph.output[1].CopyFrom(helper.make_tensor_value_info("x", FLOAT, [2]))
    x = f32(2)
    ours = check_against_onnxruntime(model, {"x": x})
    np.testing.assert_array_equal(ours[1], x)


def test_initializers_as_arguments():
    model = two_layer(symbolic=False)
    reshape = helper.make_node("Reshape", ["masked", "target"], ["flat"], name="flatten")
    model.graph.node.append(reshape)
    model.graph.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), "target"))
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("flat", FLOAT, [12]))
    module = import_onnx(model, initializers_as_args=True)
    # the weights become trailing arguments; the reshape target must stay a constant
    assert input_names(module) == ["x", "mask", "W", "b"]
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    feeds = {"x": f32(3, 8), "mask": f32(3, 1)}
    (ours,) = reference(module)(*bind_inputs(input_names(module), [], {**feeds, "W": weights["W"], "b": weights["b"]}))
    np.testing.assert_allclose(ours, run_onnxruntime(model, feeds)[0], rtol=1e-5, atol=1e-6)
    # other weights give other results: they really are arguments
    (other,) = reference(module)(feeds["x"], feeds["mask"], weights["W"] * 2, weights["b"])
    assert not np.allclose(other, ours)


def test_malformed_tensors_are_diagnosed():
    """An initializer whose data does not fill its dims (fuzz seed 47 case 293: dims
    [2^40], 4 floats; ONNX's checker lets it through) is one located diagnostic, not an
    internal error."""
    bias = numpy_helper.from_array(np.ones(4, np.float32), "b")
    bias.dims[:] = [1 << 40]
    gemm = helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="gemm")
    inputs, outputs = [helper.make_tensor_value_info("x", FLOAT, [2, 8])], [helper.make_tensor_value_info("y", FLOAT, [2, 4])]
    weights = [numpy_helper.from_array(np.ones((8, 4), np.float32), "w"), bias]
    model = helper.make_model(helper.make_graph([gemm], "g", inputs, outputs, weights))
    with pytest.raises(Diagnostic, match=r"initializer 'b' is malformed: its data does not fit its dims \[1099511627776\]") as info:
        import_onnx(model, name="bad.onnx")
    assert info.value.location == "bad.onnx"


def test_initializers_listed_as_graph_inputs_are_not_arguments():
    model = two_layer(symbolic=False)
    model.graph.input.append(helper.make_tensor_value_info("W", FLOAT, [8, 4]))  # IR < 4 style
    module = import_onnx(model)
    assert input_names(module) == ["x", "mask"]


def test_bind_inputs():
    names = ["x", "mask"]
    assert bind_inputs(names, [1, 2], {}) == [1, 2]
    assert bind_inputs(names, [], {"mask": 2, "x": 1}) == [1, 2]
    assert bind_inputs(names, [1], {"mask": 2}) == [1, 2]
    with pytest.raises(TypeError, match="missing model input: mask"):
        bind_inputs(names, [1], {})
    with pytest.raises(TypeError, match="no input named 'y'"):
        bind_inputs(names, [1, 2], {"y": 3})
    with pytest.raises(TypeError, match="given both by position and by name"):
        bind_inputs(names, [1], {"x": 3})
    with pytest.raises(TypeError, match="takes 2 inputs"):
        bind_inputs(names, [1, 2, 3], {})


def test_constant_subgraphs_are_folded_even_through_unsupported_operators():
    """Shape arithmetic with ops mlfuse has no graph op for (Gather, ConstantOfShape) folds away."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "last"], ["n"], name="gather", axis=0),
        helper.make_node("ConstantOfShape", ["s"], ["ones"], name="ones", value=numpy_helper.from_array(np.array([1.0], np.float32))),
        helper.make_node("Unsqueeze", ["n", "zero"], ["n1"], name="unsqueeze"),
        helper.make_node("Concat", ["minus_one", "n1"], ["target"], name="concat", axis=0),
        helper.make_node("Add", ["x", "ones"], ["x1"], name="add"),
        helper.make_node("Reshape", ["x1", "target"], ["y"], name="reshape"),
    ]
    inits = {"last": np.array(-1, np.int64), "zero": np.array([0], np.int64), "minus_one": np.array([-1], np.int64)}
    model = make_model(nodes, {"x": (FLOAT, [2, 3, 4])}, ["y"], inits)
    check_against_onnxruntime(model, {"x": f32(2, 3, 4)})
    module = import_onnx(model)
    assert sorted(op.name for op in module.walk() if op.name.startswith("graph.")) == [
        "graph.add", "graph.constant", "graph.reshape"]


def test_model_local_functions_are_inlined():
    body = [helper.make_node("Mul", ["a", "a"], ["sq"]), helper.make_node("Neg", ["sq"], ["out"])]
    fn = helper.make_function("local", "NegSquare", ["a"], ["out"], body, [helper.make_opsetid("", 17)])
    node = helper.make_node("NegSquare", ["x"], ["y"], name="call", domain="local")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", FLOAT, [3])],
                          [helper.make_tensor_value_info("y", FLOAT, [3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                              functions=[fn], ir_version=10)
    check_against_onnxruntime(model, {"x": f32(3)})


def test_parse_module_accepts_an_onnx_path(tmp_path):
    from mlfuse.ir import parse_module

    path = tmp_path / "m.onnx"
    onnx.save(two_layer(symbolic=False), str(path))
    module = parse_module(str(path))
    assert output_names(module) == ["masked", "y"]
    with pytest.raises(Diagnostic, match="cannot read ONNX model"):
        parse_module(str(tmp_path / "missing.onnx"))


# --- malformed models and unsupported operators --------------------------------------------------------


def test_malformed_and_truncated_files_are_diagnosed(tmp_path):
    data = two_layer().SerializeToString()
    cuts = [0, 1, 7, len(data) // 3, len(data) // 2, len(data) - 9, len(data) - 1]
    for cut in cuts:
        with pytest.raises(Diagnostic, match="not a valid ONNX model|invalid ONNX model|ONNX shape inference failed"):
            import_onnx(data[:cut], input_shapes={"x": (3, 8)}, name="cut.onnx")
    with pytest.raises(Diagnostic, match="not a valid ONNX model"):
        import_onnx(b"\xff\xfe this is not protobuf", name="junk.onnx")
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\x08\x07\x12\x04abc")
    with pytest.raises(Diagnostic) as info:
        import_onnx(str(path))
    assert info.value.location == str(path)


def test_unsupported_operators_are_listed_in_one_diagnostic():
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Unique", ["r"], ["values"], name="unique"),
        helper.make_node("FusedMatMul", ["values", "values"], ["mm"], name="fused", domain="com.microsoft"),
        helper.make_node("NonZero", ["mm"], ["y"]),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", FLOAT, [4, 4])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.INT64, [2, None])],
                          [numpy_helper.from_array(np.array([2], np.int64), "k")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                              ir_version=10)
    with pytest.raises(Diagnostic) as info:
        import_onnx(model, name="model.onnx")
    assert str(info.value) == (
        "model.onnx: error: unsupported ONNX operators in 3 nodes: 'unique' (Unique), "
        "'fused' (com.microsoft.FusedMatMul), 'NonZero_3' (NonZero)"
    )


@pytest.mark.parametrize("opset", [7, 11, 12, 22, onnx.defs.onnx_opset_version()])
def test_old_opsets_are_upgraded_and_new_ones_imported(opset):
    """Opsets below 13 go through onnx's version converter; 13 up to the installed onnx's newest import as they are."""
    model, feeds = single_node("Relu", [f32(3)], opset=opset)
    check_against_onnxruntime(model, feeds)


def test_opset_squeeze_attribute_upgraded_from_opset_11():
    """Squeeze took its axes as an attribute before opset 13: the converter moves them to an input."""
    model, feeds = single_node("Squeeze", [f32(1, 3, 1)], opset=11, axes=[0])
    check_against_onnxruntime(model, feeds)


def test_opsets_newer_than_onnx_knows_are_rejected():
    newest = onnx.defs.onnx_opset_version()
    model, _ = single_node("Relu", [f32(3)], opset=newest, infer=False)
    model.opset_import[0].version = newest + 1
    with pytest.raises(Diagnostic, match=f"ONNX opset {newest + 1} is not supported .*13 to {newest}"):
        import_onnx(model)


def test_shape_inference_errors_point_at_the_node():
    model, _ = single_node("Reshape", [f32(2, 3)], consts={1: np.array([4, -1], np.int64)}, infer=False)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y0", FLOAT, [None, None]))
    with pytest.raises(Diagnostic) as info:
        import_onnx(model)
    assert str(info.value) == (
        "the_reshape: error: Reshape: ONNX shape inference failed for these input shapes: "
        "Dimension could not be inferred: incompatible shapes"
    )


# --- tools -----------------------------------------------------------------------------------------------


def run_opt(args, capsys):
    from mlfuse.tools.mlfuse_opt import main

    with pytest.raises(SystemExit) as status:
        main(args)
    out = capsys.readouterr()
    return status.value.code, out.out, out.err


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "two_layer.onnx"
    onnx.save(two_layer(), str(path))
    return path


def test_mlfuse_opt_imports_onnx_with_shapes(model_file, capsys):
    code, out, err = run_opt([str(model_file), "--shape", "x=3x8", "--print-debuginfo"], capsys)
    assert code == 0, err
    assert "func.func @main(%x: tensor<3x8xf32>" in out
    assert 'mlfuse.input_names = ["x", "mask"]' in out and 'mlfuse.output_names = ["masked", "y"]' in out
    assert 'graph.matmul %x, %W : (tensor<3x8xf32>, tensor<8x4xf32>) -> tensor<3x4xf32> loc("dense/MatMul")' in out


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "input shapes are not static ('x' has shape [batch, 8]; 'mask' has shape [batch, 1]): "
             "give them with --shape x=Nx8 --shape mask=Nx1"),
        (["--shape", "x=3x8", "--shape", "mask=4x1"], "dimension 'batch' is 3 in input 'x' but 4 in input 'mask'"),
        (["--shape", "x=3by8"], "malformed --shape 'x=3by8'"),
    ],
    ids=["missing-shape", "inconsistent-shape", "malformed-shape"],
)
def test_mlfuse_opt_shape_errors_exit_1(model_file, capsys, args, message):
    code, out, err = run_opt([str(model_file), *args], capsys)
    assert code == 1
    assert message in err and "Traceback" not in err


def test_mlfuse_opt_rejects_a_truncated_file(model_file, tmp_path, capsys):
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(model_file.read_bytes()[:100])
    code, _, err = run_opt([str(cut), "--shape", "x=3x8"], capsys)
    assert code == 1
    assert err.startswith(f"{cut}: error: ") and "Traceback" not in err


def test_mlfuse_opt_fusion_report_names_onnx_nodes(model_file, tmp_path, capsys):
    from mlfuse.universe import MLFUSE_PASSES

    if "fusion-plan" not in MLFUSE_PASSES:
        pytest.skip("the fusion-plan pass does not exist yet")
    report = tmp_path / "r.json"
    code, _, err = run_opt([str(model_file), "--shape", "x=3x8", "-p", "fusion-plan", f"--fusion-report={report}"], capsys)
    assert code == 0, err
    text = report.read_text()
    json.loads(text)
    for name in ("dense/MatMul", "dense/Add", "dense/Relu", "apply_mask"):
        assert name in text


def test_mlfuse_run_checks_an_onnx_model_with_npz_files(model_file, tmp_path, capsys):
    pytest.importorskip("mlfuse.tools.mlfuse_run")
    from mlfuse.tools.mlfuse_run import main

    feeds = {"x": f32(3, 8), "mask": f32(3, 1)}
    np.savez(tmp_path / "in.npz", **feeds)
    with pytest.raises(SystemExit) as status:
        main([str(model_file), "--shape", "x=3x8", "--inputs", str(tmp_path / "in.npz"),
              "--outputs", str(tmp_path / "out.npz"), "--check"])
    captured = capsys.readouterr()
    assert status.value.code == 0, captured.err
    out = np.load(tmp_path / "out.npz")
    assert sorted(out.files) == ["masked", "y"]
    for got, want in zip([out["masked"], out["y"]], run_onnxruntime(onnx.load(str(model_file)), feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_reference_run_helper_round_trip():
    model, feeds = single_node("Add", [f32(2, 3), f32(3)])
    (ours,) = run_reference(model, feeds)
    np.testing.assert_allclose(ours, feeds["x0"] + feeds["x1"], rtol=1e-6)


def test_mlfuse_opt_reproducer_of_an_onnx_input_holds_the_imported_ir(model_file, tmp_path, capsys, monkeypatch):
    from dataclasses import dataclass

    from xdsl.passes import ModulePass

    from mlfuse.tools.mlfuse_opt import MlfuseOptMain

    @dataclass(frozen=True)
    class Crash(ModulePass):
        name = "test-crash"

        def apply(self, ctx, op):
            raise RuntimeError("boom")

    register = MlfuseOptMain.register_all_passes

    def register_with_crash(self):
        register(self)
        self.register_pass("test-crash", lambda: Crash)

    monkeypatch.setattr(MlfuseOptMain, "register_all_passes", register_with_crash)
    code, _, err = run_opt([str(model_file), "--shape", "x=3x8", "-p", "test-crash", "--reproducer-dir", str(tmp_path / "r")], capsys)
    assert code == 1 and "pass 'test-crash' failed: RuntimeError: boom" in err
    (reproducer,) = (tmp_path / "r").iterdir()
    text = reproducer.read_text()
    assert 'mlfuse.input_names = ["x", "mask"]' in text and "graph.matmul" in text


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "bool"])
def test_constants_are_packed_like_the_graph_dialect_packs_them(dtype):
    from mlfuse.dialects import graph
    from mlfuse.frontend.onnx_ops import NUMPY_ELEMENT_TYPES, dense_from_numpy

    array = (RNG.standard_normal((3, 4)) * 5).astype(dtype)
    el = NUMPY_ELEMENT_TYPES[np.dtype(dtype)]
    attr = dense_from_numpy(array, el)
    assert attr == graph.dense_attr(array, el)
    np.testing.assert_array_equal(graph.dense_to_numpy(attr), array)
    uniform = np.full((2, 5), array.flat[0])
    assert dense_from_numpy(uniform, el) == graph.dense_attr(uniform, el)


def _loop_model(outer_is_constant: bool):
    """A Loop of 3 steps adding `outer` (read from the enclosing graph) to a carried value."""
    from onnx import TensorProto, helper

    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["carried", "outer"], ["carried_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("carried", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("carried_out", TensorProto.FLOAT, [2])],
    )
    consts = [helper.make_tensor("trips", TensorProto.INT64, [], [3]), helper.make_tensor("go", TensorProto.BOOL, [], [True]),
              helper.make_tensor("start", TensorProto.FLOAT, [2], [1.0, 2.0])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])]
    if outer_is_constant:
        consts.append(helper.make_tensor("outer", TensorProto.FLOAT, [2], [0.5, -1.0]))
    else:
        inputs.append(helper.make_tensor_value_info("outer", TensorProto.FLOAT, [2]))
    nodes = [helper.make_node("Loop", ["trips", "go", "start"], ["looped"], name="the_loop", body=body),
             helper.make_node("Add", ["looped", "x"], ["y"])]
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], consts)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_a_loop_reading_a_runtime_value_of_the_enclosing_graph_is_unrolled():
    """Its explicit inputs are constants but its body reads `outer`: unrolled, each step
    reading the run-time value, not a failed evaluation; with `outer` constant too, every
    step folds."""
    import mlfuse

    x, outer = np.array([3.0, 4.0], np.float32), np.array([0.25, -2.0], np.float32)
    f = mlfuse.compile(import_onnx(_loop_model(outer_is_constant=False)))
    np.testing.assert_array_equal(f(x, outer)[0], np.array([1.0, 2.0], np.float32) + 3 * outer + x)
    f = mlfuse.compile(import_onnx(_loop_model(outer_is_constant=True)))
    np.testing.assert_array_equal(f(x)[0], np.array([1.0 + 1.5, 2.0 - 3.0], np.float32) + x)


def _if_model(cond_is_constant: bool, else_op: str = "Neg", cond: bool = True):
    """y = If(cond, then: x * 2 + bias, else: else_op(x)) + 1, cond 1 or a graph input."""
    from onnx import TensorProto, helper

    out = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [3])  # noqa: E731
    then_branch = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["twice"]), helper.make_node("Add", ["twice", "bias"], ["then_out"])],
        "then", [], [out("then_out")], [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    else_branch = helper.make_graph([helper.make_node(else_op, ["x"], ["else_out"])], "else", [], [out("else_out")])
    consts = [helper.make_tensor("bias", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0]),
              helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])]
    if cond_is_constant:
        consts.append(helper.make_tensor("cond", TensorProto.BOOL, [], [cond]))
    else:
        inputs.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    nodes = [helper.make_node("If", ["cond"], ["picked"], name="the_if", then_branch=then_branch, else_branch=else_branch),
             helper.make_node("Add", ["picked", "one"], ["y"])]
    g = helper.make_graph(nodes, "g", inputs, [out("y")], consts)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_an_if_with_a_constant_condition_is_the_branch_it_takes():
    import mlfuse

    f = mlfuse.compile(import_onnx(_if_model(cond_is_constant=True)))
    x = np.array([0.5, -1.0, 4.0], np.float32)
    out = np.full(3, np.nan, np.float32)
    f(x, out=[out])
    np.testing.assert_array_equal(out, x * 2 + np.array([1.0, 2.0, 3.0], np.float32) + 1)
    with pytest.raises(Diagnostic, match=r"the_if: error: If: input 0 \(cond, 'cond'\) must be a constant"):
        import_onnx(_if_model(cond_is_constant=False))
    # the branch not taken may hold anything; a branch taken that mlfuse cannot convert is reported at the If
    import_onnx(_if_model(cond_is_constant=True, else_op="Unique"))
    with pytest.raises(Diagnostic, match=r"the_if: error: If: the branch taken has a node 'Unique' \(Unique\)"):
        import_onnx(_if_model(cond_is_constant=True, else_op="Unique", cond=False))


def test_a_damaged_operator_name_is_an_unsupported_operator():
    """An op_type that is not valid UTF-8 (bytes flipped in the file) is reported at its node,
    not an internal error of the function-op expansion's schema lookup."""
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="the_node")], {"x": (FLOAT, [2])}, ["y"], infer=False)
    model.graph.output.append(helper.make_tensor_value_info("y", FLOAT, [2]))
    data = model.SerializeToString().replace(b"Relu", b"R\xefl\xef")
    with pytest.raises(Diagnostic, match=r"the_node"):
        import_onnx(data)
