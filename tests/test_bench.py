"""mlfuse-bench keeps working: a tiny --quick run end to end, and the pieces it trusts
(numpy implementations against the reference, the copy kernel, the HLO kernel count)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mlfuse
from bench.bandwidth import CopyMeter
from bench.peers import xla_kernels
from bench.workloads import WORKLOADS


def test_quick_run_prints_table_and_writes_results(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "mlfuse.tools.mlfuse_bench", "--quick", "--size", "96x80", "--threads", "1",
         "--peers", "numpy", "--graphs", "layernorm", "col_sum", "--repeat", "2", "--copy-mb", "2",
         "--json", str(out), "--no-plot"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 thread, memory-bound workloads at 96x80 f32" in proc.stdout
    assert "copy bandwidth" in proc.stdout
    result = json.loads(out.read_text())
    (run,) = result["runs"]
    assert run["bandwidth_GBps"] > 0
    assert [w["name"] for w in run["workloads"]] == ["layernorm", "col_sum"]
    for w in run["workloads"]:
        assert set(w["contestants"]) == {"mlfuse", "numpy"}
        mine = w["contestants"]["mlfuse"]
        assert mine["median_s"] > 0 and len(mine["times_s"]) == 2
        assert mine["max_error"] < 1e-5  # mlfuse agrees with numpy op by op
        assert "MISMATCH" not in mine["note"]
    md = out.with_suffix(".md").read_text()
    assert "| layernorm |" in md and "machine:" in md


@pytest.mark.parametrize("mode", [[], ["--models"], ["--frontends"]])
def test_zero_rounds_are_a_usage_error(mode):
    """--repeat 0 would time nothing (the models bench had exported and compiled every
    model first): refused before any work."""
    proc = subprocess.run([sys.executable, "-m", "mlfuse.tools.mlfuse_bench", *mode, "--repeat", "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "must be a positive integer" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_size_is_a_usage_error():
    proc = subprocess.run([sys.executable, "-m", "mlfuse.tools.mlfuse_bench", "--size", "1024"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "ROWSxCOLS" in proc.stderr


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_numpy_implementation_matches_reference(name):
    w = WORKLOADS[name]
    module = w.build(40, 72)
    inputs = w.inputs(module, seed=3)
    want = mlfuse.reference(module)(*inputs)
    got = w.numpy(*inputs)
    assert len(got) == len(want)
    for g, r in zip(got, want):
        assert g.shape == r.shape and g.dtype == r.dtype == np.float32
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6 * float(np.max(np.abs(r))))


def test_non_temporal_copy_copies_every_byte():
    for threads in (1, 2):
        meter = CopyMeter(megabytes=1.03, threads=threads)  # not a multiple of 4 blocks per thread
        meter.dst[:] = -1.0
        seconds = meter.copy()
        np.testing.assert_array_equal(meter.dst, meter.src)
        assert meter.bandwidth(seconds) > 0
        meter.close()


HLO = """HloModule jit_f

%fused_dot (p0: f32[4,8], p1: f32[8,8]) -> f32[4,8] {
  %p0 = f32[4,8]{1,0} parameter(0)
  %p1 = f32[8,8]{1,0} parameter(1)
  ROOT %d = f32[4,8]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%fused_exp (p0: f32[4,8]) -> f32[4,8] {
  %p0 = f32[4,8]{1,0} parameter(0)
  ROOT %e = f32[4,8]{1,0} exponential(%p0)
}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main.3 (x: f32[4,8], w: f32[8,8]) -> (f32[4,8], f32[4]) {
  %x = f32[4,8]{1,0} parameter(0)
  %w = f32[8,8]{1,0} parameter(1)
  %zero = f32[] constant(0)
  %gemm = f32[4,8]{1,0} fusion(%x, %w), kind=kCustom, calls=%fused_dot
  %exp = f32[4,8]{1,0} fusion(%gemm), kind=kLoop, calls=%fused_exp
  %r = f32[4]{0} reduce(%exp, %zero), dimensions={1}, to_apply=%add
  %b = f32[4,8]{1,0} bitcast(%exp)
  ROOT %t = (f32[4,8]{1,0}, f32[4]{0}) tuple(%b, %r)
}
"""


def test_xla_kernel_count_skips_free_ops_and_classifies_gemms():
    assert xla_kernels(HLO) == (2, 3)  # exp fusion and reduce; the dot fusion is a GEMM
    with pytest.raises(ValueError, match="ENTRY"):
        xla_kernels("HloModule empty\n")


def test_frontends_quick_run_writes_tables(tmp_path):
    """mlfuse-bench --frontends end to end at a tiny size: every mlfuse path agrees with torch eager."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    out = tmp_path / "fe.json"
    proc = subprocess.run(
        [sys.executable, "-m", "mlfuse.tools.mlfuse_bench", "--frontends", "--quick", "--size", "64x128",
         "--graphs", "layernorm", "--models", "textcnn", "--threads", "1", "--repeat", "2", "--gap-ms", "1",
         "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = json.loads(out.read_text())["runs"]
    assert [r["name"] for r in run["graphs"]] == ["layernorm"]
    assert [r["name"] for r in run["models"]] == ["textcnn"]
    for record in run["graphs"] + run["models"]:
        paths = record["paths"]
        assert {"torch eager", "mlfuse backend", "mlfuse onnx"} <= set(paths), record.get("skipped")
        for name, p in paths.items():
            assert p["median_s"] > 0 and len(p["times_s"]) == 2
            if name.startswith("mlfuse"):
                assert p["max_rel_err"] < 1e-4, (name, p["max_rel_err"])
    md = out.with_suffix(".md").read_text()
    assert "| layernorm |" in md and "| textcnn |" in md and "backend / inductor" in md


def test_models_quick_run_writes_tables(tmp_path):
    """mlfuse-bench --models end to end on one small zoo model at 1 thread: mlfuse agrees with
    onnxruntime, both calls and both compile times are reported (inductor left out: its compile
    alone takes longer than the rest)."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    out = tmp_path / "models.json"
    proc = subprocess.run(
        [sys.executable, "-m", "mlfuse.tools.mlfuse_bench", "--models", "textcnn", "--quick", "--threads", "1",
         "--repeat", "2", "--gap-ms", "1", "--peers", "onnxruntime,torch eager", "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["loadavg_before"] and result["loadavg_after"] and "commit" in result["machine"]
    (run,) = result["runs"]
    (record,) = run["models"]
    assert record["name"] == "textcnn" and record["exporter"] == "legacy"
    assert set(record["paths"]) == {"mlfuse", "mlfuse out=", "onnxruntime", "torch eager"}, record.get("skipped")
    for name, p in record["paths"].items():
        assert p["median_s"] > 0 and len(p["times_s"]) == 2
        assert p["max_rel_err_vs_ort"] < 1e-4, (name, p["max_rel_err_vs_ort"])
    assert record["compile"]["mlfuse cold"] > 0 and record["compile"]["ORT session"] > 0
    assert isinstance(record["compile"]["mlfuse warm"], float), record["compile"]["mlfuse warm"]
    assert record["gemm_flops"] > 0 and run["sgemm_flops_per_s"] > 0
    md = out.with_suffix(".md").read_text()
    assert "| textcnn |" in md and "speed vs ORT" in md and "mlfuse warm" in md
    assert "GEMM roofline" in md and "% of sgemm" in md


def _children() -> list[int]:
    """Processes whose parent is this one (Linux /proc)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            kids.append(int(stat.parent.name))
    return kids


def test_models_busy_core_times_beside_a_spinning_neighbour(monkeypatch):
    """--busy-core: mlfuse and onnxruntime (not the other paths) run loops quiet, then while a
    child process spins, which is gone afterwards; the table gives busy / quiet per runtime."""
    import argparse

    from bench import models_bench

    monkeypatch.setattr(models_bench, "BUSY_SPAN_S", 0.01)
    seen = []

    def call():
        seen.append(len(_children()))
        return [0]

    paths = [("mlfuse", call), ("onnxruntime", call), ("torch eager", lambda: pytest.fail("not looped"))]
    times = models_bench.busy_round_robin(paths, argparse.Namespace(repeat=2))
    assert set(times) == {"mlfuse", "onnxruntime"}
    assert all(len(t["quiet"]) == len(t["busy"]) == 2 for t in times.values())
    assert seen[0] == 0 and seen[-1] >= 1 and not _children()  # quiet first, then beside the neighbour

    def means(quiet, busy):
        return {"quiet": {"median_s": quiet}, "busy": {"median_s": busy}}

    run = {"repeat": 2, "models": [{"name": "m", "paths": {"mlfuse": {"loop_mean_s": means(0.002, 0.003)},
                                                           "onnxruntime": {"loop_mean_s": means(0.002, 0.006)}}}]}
    assert "| m | 2.00 | 3.00 | 1.50x | 2.00 | 6.00 | 3.00x | 2.00x |" in models_bench.busy_rows(run)


def test_call_paths_quick_run_writes_table(tmp_path):
    """mlfuse-bench --call-paths end to end on a small LayerNorm, softmax and an ONNX file
    (an int64 input among floats): the three paths (checked to give the same bits before
    timing) and their ratios to the aligned call."""
    from onnx import TensorProto, helper, save

    graph = helper.make_graph(
        [helper.make_node("Cast", ["k"], ["kf"], to=TensorProto.FLOAT), helper.make_node("Mul", ["x", "kf"], ["y"])],
        "scale", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 48]),
                  helper.make_tensor_value_info("k", TensorProto.INT64, [48])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 48])])
    model = tmp_path / "scale.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    out = tmp_path / "paths.md"
    proc = subprocess.run(
        [sys.executable, "-m", "mlfuse.tools.mlfuse_bench", "--call-paths", "--size", "96x80", "--threads", "1",
         "--repeat", "2", "--warm-ms", "0", "--graphs", "layernorm", "softmax", "--onnx", str(model), "--md", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in out.read_text().splitlines()
            if line.startswith(("| layernorm |", "| softmax |", "| scale.onnx |"))]
    assert len(rows) == 3
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert all(float(c) > 0 for c in cells[1:4]) and all(c.endswith("x") for c in cells[4:]), row
    assert json.loads(out.with_suffix(".json").read_text())["table"]


def test_warm_up_makes_enough_calls_and_stops_in_time(monkeypatch):
    """Each contestant warms up with at least WARM_CALLS calls (the team sizer settles in
    them), longer if --warm-ms asks, never beyond MAX_WARM_S."""
    import time

    from mlfuse.tools import mlfuse_bench

    calls = []
    mlfuse_bench.warm_up(lambda: calls.append(1), 0.0)
    assert len(calls) == mlfuse_bench.WARM_CALLS
    calls.clear()
    mlfuse_bench.warm_up(lambda: calls.append(1), 0.05)
    assert len(calls) > mlfuse_bench.WARM_CALLS  # 50 ms of calls that take nothing
    monkeypatch.setattr(mlfuse_bench, "MAX_WARM_S", 0.02)
    calls.clear()
    mlfuse_bench.warm_up(lambda: (calls.append(1), time.sleep(0.01)), 10.0)
    assert 2 <= len(calls) <= 4


def test_call_paths_cycle_through_their_output_sets():
    """Each out= path writes its sets in turn (aligned ones at a 64-byte boundary, np.empty
    ones 16 bytes past one), every set checked to hold the allocating call's bits before timing."""
    import mlfuse
    from bench.call_paths import paths_of
    from bench.workloads import WORKLOADS

    workload = WORKLOADS["layernorm"]
    module = workload.build(64, 80)
    fn = mlfuse.compile(module)
    inputs = workload.inputs(module)
    written = []

    class Recording:  # the compiled function, noting each out= it is given
        outputs = fn.outputs

        def __call__(self, *arrays, out=None):
            if out is not None:
                written.append(out)
            return fn(*arrays, out=out)

    paths = dict(paths_of(Recording(), inputs, buffers=3))
    written.clear()
    for _ in range(4):
        paths["out= aligned"]()
        paths["out= np.empty"]()
    aligned, loose = written[0::2], written[1::2]
    assert [id(a) for a in aligned] == [id(aligned[i % 3]) for i in range(4)] and len({id(a) for a in aligned}) == 3
    assert len({id(s) for s in loose}) == 3 and not {id(s) for s in loose} & {id(a) for a in aligned}
    assert all(out[0].ctypes.data % 64 == 0 for out in aligned)
    assert all(out[0].ctypes.data % 64 == 16 for out in loose)


def test_contraction_flops_counts_matmuls_and_grouped_convs(tmp_path):
    """2 x output elements x reduction length: a 2x3 @ 3x4 product (48) and a conv of 4
    channels in 2 groups, 3x3 window, 4 x 5x5 outputs (2 x 100 x 18 = 3600)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from bench.models_bench import contraction_flops

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), "w")
    k = numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "k")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["m"]), helper.make_node("Conv", ["x", "k"], ["c"], group=2)],
        "flops",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 7, 7])],
        [helper.make_tensor_value_info("m", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 4, 5, 5])],
        initializer=[w, k],
    )
    path = tmp_path / "flops.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    assert contraction_flops(str(path)) == 48 + 3600


@pytest.mark.parametrize("option, message", [("--size=12", "ROWSxCOLS"), ("--threads=0", "positive integer"),
                                             ("--repeat=x", "positive integer"), ("--buffers=0", "positive integer")])
def test_call_paths_bad_options_are_usage_errors(option, message):
    proc = subprocess.run([sys.executable, "-m", "mlfuse.tools.mlfuse_bench", "--call-paths", option],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
