"""Every error is a Diagnostic: limits checked before allocation, internal errors with
reproducers, escaped names, unique constants (issue 15). API-level; the CLIs are in
filecheck/tools/limits.mlir, robustness.mlir and tests/test_cli.py."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import mlfuse
from mlfuse import diagnostics
from mlfuse.diagnostics import Diagnostic

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one_function(body: str, arg: str = "tensor<4xf32>", result: str = "tensor<4xf32>") -> str:
    return f"func.func @main(%x: {arg}) -> {result} {{\n{body}\n}}\n"


@pytest.mark.parametrize(
    "text, message",
    [
        ("func.func @main() -> tensor<10000x10000xf32> {\n  %c = graph.constant dense<0.125> : tensor<10000x10000xf32>\n"
         "  func.return %c : tensor<10000x10000xf32>\n}", "dense literal of 100000000 elements is too large"),
        (one_function("  func.return %x : tensor<99999999999999999999999xf32>", "tensor<99999999999999999999999xf32>",
                      "tensor<99999999999999999999999xf32>"), "dimension 99999999999999999999999 is too large"),
        (one_function("  func.return %x : tensor<4xf32>", "tensor<1048576x1048576x2xf32>"), "has more than 2^40 elements"),
        ("func.func @main() -> tensor<2xi32> {\n  %c = graph.constant dense<99999999999999999999999> : tensor<2xi32>\n"
         "  func.return %c : tensor<2xi32>\n}", "out of range for type i32"),
        ("func.func @main(%x: " + "tensor<" * 5000 + "f32" + ">" * 5000 + ") {\n  func.return\n}", "nesting deeper than 32"),
        ("builtin.module {\n" * 3000 + "}\n" * 3000, "nesting deeper than 32"),
        ('func.func @main() {\n  "test.op"() {a = ' + "[" * 3000 + "]" * 3000 + "} : () -> ()\n  func.return\n}",
         "nesting deeper than 32"),
        (one_function('  %c = "test.op"() {v = dense<' + "[" * 3000 + "1.0" + "]" * 3000 + "> : tensor<1xf32>} : () -> tensor<4xf32>\n"
                      "  func.return %c : tensor<4xf32>"), "nesting deeper than 32"),
    ],
    ids=["splat", "dim", "elements", "dense-int", "nested-types", "nested-regions", "nested-arrays", "nested-literal"],
)
def test_limits_are_located_diagnostics(text: str, message: str):
    with pytest.raises(Diagnostic) as info:
        mlfuse.parse(text)
    assert message in info.value.message
    assert info.value.location and info.value.location.startswith("<input>:")


def test_limit_is_checked_before_allocating():
    """The issue's 153-byte file took 7.7 GB: refused now in well under a second."""
    import resource
    import time

    text = ("func.func @main() -> tensor<10000x10000xf32> {\n  %c = graph.constant dense<0.125> : tensor<10000x10000xf32>\n"
            "  func.return %c : tensor<10000x10000xf32>\n}")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    with pytest.raises(Diagnostic):
        mlfuse.parse(text)
    assert time.perf_counter() - start < 2
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB


def test_two_functions_with_constants_compile():
    """Constants are numbered per module: two functions no longer both define __constant_0."""
    text = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %y = graph.add %x, %c : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
func.func @other(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = graph.constant dense<[5.0, 6.0, 7.0, 8.0]> : tensor<4xf32>
  %y = graph.mul %x, %c : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""
    x = np.arange(4, dtype=np.float32)
    (a,) = mlfuse.compile(text)(x)
    (b,) = mlfuse.compile(text, entry="other")(x)
    np.testing.assert_array_equal(a, x + [1, 2, 3, 4])
    np.testing.assert_array_equal(b, x * [5, 6, 7, 8])


def test_calls_between_graph_functions_are_inlined():
    """An entry that calls helpers (as jax exports them, or a fuzzed lit file) compiles:
    the `inline` pass runs first (it was an internal error); recursion is located."""
    text = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = func.call @helper(%0) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.tanh %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
"""
    x = np.random.default_rng(4).standard_normal(4).astype(np.float32)
    out = np.full(4, np.nan, np.float32)
    mlfuse.compile(text)(x, out=[out])
    np.testing.assert_allclose(out, np.tanh(np.tanh(x)), rtol=2e-6, atol=1e-7)
    (helper,) = mlfuse.compile(text, entry="helper")(x)  # a private entry is kept, not inlined away
    np.testing.assert_allclose(helper, np.tanh(x), rtol=2e-6, atol=1e-7)
    recursive = one_function("  %0 = func.call @main(%x) : (tensor<4xf32>) -> tensor<4xf32>\n  func.return %0 : tensor<4xf32>")
    with pytest.raises(Diagnostic, match=r"<input>:2:3: error: @main calls itself"):
        mlfuse.compile(recursive)


def test_canonicalize_lit_file_lowers_to_llvm():
    """filecheck/passes/canonicalize.mlir: many functions with constants, one module."""
    from mlfuse import pipelines

    module = mlfuse.parse(os.path.join(REPO, "filecheck/passes/canonicalize.mlir"))
    mlfuse.run_pipeline(module, pipelines.cpu_pipeline(True, True, "ilp"))


def test_bf16_inside_a_graph_is_located():
    text = one_function("  %a = graph.cast %x : tensor<4xf32> -> tensor<4xbf16>\n  %b = graph.exp %a : tensor<4xbf16>\n"
                        "  %y = graph.cast %b : tensor<4xbf16> -> tensor<4xf32>\n  func.return %y : tensor<4xf32>")
    with pytest.raises(Diagnostic) as info:
        mlfuse.compile(text)
    assert str(info.value).startswith("<input>:2:3: error: bf16 is not supported by the CPU backend")


@pytest.mark.parametrize("option,value", [("fuse", "no"), ("parallel", 2), ("fast_math", None)])
def test_compile_switches_must_be_booleans(option, value):
    """fuse="no" is a true value: a switch given anything but a bool is refused, not read."""
    with pytest.raises(Diagnostic, match=f"compile option {option} must be True or False, got {value!r}"):
        mlfuse.compile(one_function("  %y = graph.exp %x : tensor<4xf32>\n  func.return %y : tensor<4xf32>"), **{option: value})


@pytest.mark.parametrize("option", ["input_shapes", "input_values"])
def test_input_options_must_be_mappings(option):
    with pytest.raises(Diagnostic, match=f"compile option {option} must map input names to values, got list"):
        mlfuse.compile(one_function("  func.return %x : tensor<4xf32>"), **{option: [4]})


def test_passes_may_be_one_pipeline_string():
    text = one_function("  %y = graph.exp %x : tensor<4xf32>\n  func.return %y : tensor<4xf32>")
    pipeline = "inline,canonicalize,convert-graph-to-loop,assign-buffers,convert-loop-to-scf,convert-to-llvm"
    x = np.linspace(-2, 2, 4, dtype=np.float32)
    (got,) = mlfuse.compile(text, passes=pipeline)(x)
    np.testing.assert_allclose(got, np.exp(x), rtol=2e-6)


def test_negative_block_size_is_a_verifier_error():
    text = """
kernel.func @h(%x: memref<4xf32, 1>) attributes {block = array<i64: -32>} {
  kernel.return
}
func.func @main(%x: memref<4xf32, 1>) {
  kernel.launch @h(%x) {grid = array<i64: 1, 1, 1>, block = array<i64: 32, 1, 1>, dynamic_shared = 0 : i64} : memref<4xf32, 1>
  func.return
}
"""
    with pytest.raises(Diagnostic, match="three positive sizes"):
        mlfuse.parse(text)


def test_bad_fusion_report_path_is_a_plain_diagnostic(tmp_path):
    module = mlfuse.parse(os.path.join(REPO, "examples/layernorm.mlir"))
    with pytest.raises(Diagnostic) as info:
        mlfuse.run_pipeline(module, [f"fusion-plan{{report=\"{tmp_path}/missing/plan.json\"}}"])
    assert "no such directory" in info.value.message and "internal error" not in str(info.value)


def test_crashing_pass_is_an_internal_error_with_a_reproducer(monkeypatch, tmp_path):
    """A pass that raises something other than a Diagnostic: "internal error", and the
    input IR with the pipeline saved where the message says."""
    from xdsl.passes import ModulePass

    import mlfuse.api as api

    class Crash(ModulePass):
        name = "crash-for-test"

        def apply(self, ctx, op):
            raise KeyError("boom")

    monkeypatch.setattr(api, "all_passes", lambda: {"crash-for-test": lambda: Crash})
    monkeypatch.setattr(diagnostics.tempfile, "tempdir", str(tmp_path))
    module = mlfuse.parse(os.path.join(REPO, "examples/layernorm.mlir"))
    with pytest.raises(Diagnostic) as info:
        mlfuse.run_pipeline(module, ["crash-for-test"])
    d = info.value
    assert d.message.startswith("internal error: pass pipeline failed: KeyError: 'boom'")
    path = d.context.removeprefix("reproducer written to ")
    assert os.path.dirname(path) == os.path.join(str(tmp_path), f"mlfuse-reproducers-{os.getuid()}")
    with open(path) as f:
        text = f.read()
    assert "RUN: mlfuse-opt %s -p 'crash-for-test'" in text and "graph.reduce_mean" in text


def test_crashing_translation_leaves_the_lowered_module(monkeypatch, tmp_path):
    """An exception in the LLVM translation (which reads the lowered module and changes
    nothing, so no copy is kept): an internal error, and the llvm-dialect module as the
    reproducer."""
    from mlfuse.backend import llvm_translate

    text = reproducer_of_crashing_compile(monkeypatch, tmp_path, llvm_translate, "to_llvmlite", "LLVM translation")
    assert "llvm.func" in text and "graph." not in text


def reproducer_of_crashing_compile(monkeypatch, tmp_path, module, name: str, stage: str) -> str:
    """compile() of examples/layernorm.mlir with `module.name` raising: the internal
    error names `stage`; the reproducer's text."""

    def crash(*_, **__):
        raise RuntimeError("boom")

    monkeypatch.setattr(module, name, crash)
    monkeypatch.setattr(diagnostics.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(tmp_path / "cache"))
    import mlfuse.api as api

    monkeypatch.setattr(api, "_MEMORY_CACHE", type(api._MEMORY_CACHE)())  # an earlier compile must not answer
    with pytest.raises(Diagnostic) as info:
        mlfuse.compile(os.path.join(REPO, "examples/layernorm.mlir"))
    assert info.value.message.startswith(f"internal error: {stage} failed: RuntimeError: boom")
    with open(info.value.context.removeprefix("reproducer written to ")) as f:
        return f.read()


def test_crash_in_a_pass_after_the_gemm_units_are_fixed_leaves_the_graph_and_the_pipeline(monkeypatch, tmp_path):
    """The compile runs the passes from pipelines.GEMM_UNITS_FIXED_AT on as a second
    pipeline (the GEMM units compile meanwhile), without a copy of its own for the
    reproducer: the reproducer is the graph module with every pass up to the failing
    pipeline's last (all but convert-to-llvm) on its RUN line."""
    import importlib

    from mlfuse.pipelines import cpu_pipeline, gemm_units_fixed

    steps = cpu_pipeline()
    assert 0 < gemm_units_fixed(steps) < steps.index("convert-loop-to-scf{parallel=true outline-serial=true}")
    conversion = importlib.import_module("mlfuse.passes.convert_loop_to_scf")
    text = reproducer_of_crashing_compile(monkeypatch, tmp_path, conversion, "convert_loop_to_scf", "pass pipeline")
    assert "graph.reduce_mean" in text and "loop.nest" not in text and "llvm.func" not in text
    run = next(line for line in text.splitlines() if "RUN:" in line)
    assert run.count(",") == len(steps) - 2 and run.rstrip("'").endswith("expand-math")


def test_crash_in_the_llvm_conversion_of_a_compile_leaves_the_graph_and_the_whole_pipeline(monkeypatch, tmp_path):
    """convert-to-llvm runs on the compile's lowered copy without a copy of its own for
    the reproducer: the reproducer is the graph module as compile() got it, with every
    pass of the pipeline on its RUN line."""
    import importlib

    from mlfuse.pipelines import cpu_pipeline

    conversion = importlib.import_module("mlfuse.passes.convert_to_llvm")
    text = reproducer_of_crashing_compile(monkeypatch, tmp_path, conversion, "convert_to_llvm", "pass pipeline")
    assert "graph.reduce_mean" in text and "loop.nest" not in text and "llvm.func" not in text
    run = next(line for line in text.splitlines() if "RUN:" in line)
    assert run.count(",") == len(cpu_pipeline()) - 1 and run.rstrip("'").endswith("convert-to-llvm")


def test_reproducers_keep_the_newest(monkeypatch, tmp_path):
    monkeypatch.setattr(diagnostics.tempfile, "tempdir", str(tmp_path))
    paths = [diagnostics.write_reproducer(f"// {i}\n", ["test"]) for i in range(diagnostics.REPRODUCERS_KEPT + 5)]
    folder = os.path.dirname(paths[0])
    assert len(os.listdir(folder)) == diagnostics.REPRODUCERS_KEPT
    assert os.path.exists(paths[-1])
    assert os.stat(folder).st_mode & 0o777 == 0o700


def test_names_are_escaped():
    d = Diagnostic("op 'a\nb' failed\x1b[2J", "node\n\x1b[31mred")
    text = str(d)
    assert "\n" not in text and "\x1b" not in text
    assert text == "node\\n\\x1b[31mred: error: op 'a\\nb' failed\\x1b[2J"


def test_onnx_node_names_are_escaped():
    from onnx import TensorProto, helper

    node = helper.make_node("Frobnicate", ["x"], ["y"], name="evil\nname\x1b[31m")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    from mlfuse.frontend.onnx import import_onnx

    with pytest.raises(Diagnostic) as info:
        import_onnx(model.SerializeToString())
    text = str(info.value)
    assert "\x1b" not in text and "\n" not in text and "evil\\nname\\x1b[31m" in text


def test_mlfuse_opt_reads_onnx_external_data_next_to_the_model(tmp_path):
    """Run from another folder that holds a file of the same name: the model's own data wins."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model_dir, other = tmp_path / "model", tmp_path / "elsewhere"
    model_dir.mkdir()
    other.mkdir()
    w = numpy_helper.from_array(np.full(4, 3.0, np.float32), "w")
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save_model(model, str(model_dir / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    (other / "weights.bin").write_bytes(np.full(4, 7.0, np.float32).tobytes())
    r = subprocess.run([sys.executable, "-m", "mlfuse.tools.mlfuse_opt", str(model_dir / "m.onnx")],
                       cwd=other, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "3.0" in r.stdout and "7.0" not in r.stdout


def test_huge_onnx_input_shape_is_refused():
    from mlfuse.frontend.onnx import parse_shape_options

    with pytest.raises(Diagnostic, match="too large"):
        parse_shape_options(["x=99999999999999999999999x4"])


def test_value_never_defined_inside_a_region_is_located():
    """Found by `make fuzz` (seed 1, case 165): a use inside a region whose definition the parser
    never saw stayed a forward reference, and verification crashed on it."""
    source = """
    stablehlo.return %v : tensor<f32>
  %cst = stablehlo.constant dense<0.0> : tensor<f32>
  %1 = stablehlo.reduce(%x init: %cst) across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %v = stablehlo.add %a, %b : tensor<f32>
func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  }
  return %1 : tensor<4xf32>
}"""
    with pytest.raises(mlfuse.Diagnostic, match=r"<input>:\d+:\d+: error: .*never defined"):
        mlfuse.parse(source)


def test_an_empty_function_body_is_located():
    """Found by the fuzzer (seed 777123, case 357): a function whose body block holds no
    op, not even a return, passed mlfuse-opt's op-by-op verifier and failed an assertion
    in fusion-plan (an internal error)."""
    source = "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n}\n"
    with pytest.raises(mlfuse.Diagnostic, match=r"<input>:1:1: error: .*empty block in single-block region"):
        mlfuse.parse(source)
    proc = subprocess.run([sys.executable, "-m", "mlfuse.tools.mlfuse_opt", "-p", "canonicalize,fusion-plan{target=cpu}"],
                          input=source, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "stdin:1:1: error:" in proc.stderr and "internal error" not in proc.stderr, proc.stderr


def test_an_arena_too_large_for_memory_is_a_diagnostic(monkeypatch):
    """Found by `make fuzz` (seed 1, case 1745): a 16 GiB arena raised numpy's MemoryError."""
    from mlfuse.api import aligned_empty

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(np, "empty", no_memory)
    with pytest.raises(mlfuse.Diagnostic, match="out of memory"):
        aligned_empty((1 << 34,), np.uint8)


def test_compiling_a_declaration_is_located(tmp_path):
    """Found by the fuzzer (seed 20261204, case 475): `func.func @f() {}` parses as a
    declaration (a region without blocks); compiling it as the entry failed looking the
    function up in the compiled module (a KeyError: an internal error, exit status 70)."""
    path = tmp_path / "decl.mlir"
    path.write_text("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  func.return %x : tensor<4xf32>\n}\nfunc.func @f() {\n}\n")
    with pytest.raises(mlfuse.Diagnostic, match=r"decl.mlir:4:1: error: function '@f' is a declaration"):
        mlfuse.compile(str(path), entry="f")
    proc = subprocess.run([sys.executable, "-m", "mlfuse.tools.mlfuse_run", str(path), "--entry", "f"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "decl.mlir:4:1: error:" in proc.stderr and "internal error" not in proc.stderr, proc.stderr
