"""Compile targets (mlfuse.target): the registry, each target's pipeline, what the planner
asks them, and the GPU path planned end to end (examples/layernorm.mlir is one kernel)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mlfuse
from mlfuse import pipelines
from mlfuse.api import parse, run_pipeline
from mlfuse.backend.gpu.ptxas import find_ptxas
from mlfuse.dialects import fusion, graph
from mlfuse.target import get_target, target_names

from conftest import run_mlfuse_opt

ROOT = Path(__file__).resolve().parent.parent
LAYERNORM = ROOT / "examples" / "layernorm.mlir"
LIT_TEST = ROOT / "filecheck" / "tools" / "targets.mlir"

# f32 LayerNorm rows of 1024 against the float64-free numpy reference: as tests/test_gpu.py
RTOL, ATOL = 1e-4, 1e-5

SMALL = """func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = graph.exp %x : tensor<4x8xf32>
  %s = graph.reduce_sum %e {axes = array<i64: 1>, keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %b = graph.broadcast %s {dims = array<i64: 0, 1>} : tensor<4x1xf32> -> tensor<4x8xf32>
  %y = graph.div %e, %b : tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
"""

# a gather feeding an elementwise op: fusible for the planner's op classes, but the GPU
# kernel generator has no code for gathers
GATHER = """func.func @main(%t: tensor<10x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  %g = graph.gather %t, %i {axis = 0} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  %y = graph.exp %g : tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}
"""

PAD = """func.func @main(%x: tensor<4x8xf32>) -> tensor<6x10xf32> {
  %p = graph.pad %x {low = array<i64: 1, 1>, high = array<i64: 1, 1>, value = 0.0 : f32} : tensor<4x8xf32> -> tensor<6x10xf32>
  func.return %p : tensor<6x10xf32>
}
"""


def layernorm_rows(rows: int) -> str:
    """examples/layernorm.mlir with `rows` rows of 1024 (the simulator is slow): the same
    block-per-row kernel as at 4096 rows, with a smaller grid."""
    return LAYERNORM.read_text().replace("4096", str(rows))


def kernel_count(ptx: str) -> int:
    return len(re.findall(r"^\.visible \.entry ", ptx, re.MULTILINE))


# --- the registry --------------------------------------------------------------------------


def test_registered_targets() -> None:
    assert target_names() == ["cpu", "gpu", "gpu-sim"]
    for name in target_names():
        assert get_target(name).name == name
        assert get_target(name) is get_target(name)


def test_unknown_target_is_a_diagnostic() -> None:
    for call in (
        lambda: mlfuse.compile(SMALL, target="nope"),
        lambda: pipelines.default_pipeline("nope"),
        lambda: get_target(["cpu"]),  # type: ignore[arg-type]
    ):
        with pytest.raises(mlfuse.Diagnostic) as e:
            call()
        assert "unknown target" in str(e.value)
        assert "known targets: cpu, gpu, gpu-sim" in str(e.value)


@pytest.mark.parametrize("name", ["cpu", "gpu", "gpu-sim"])
def test_default_pipeline_replays_with_mlfuse_opt(name: str, tmp_path: Path) -> None:
    steps = pipelines.default_pipeline(name)
    assert steps == get_target(name).default_pipeline()
    src = tmp_path / "small.mlir"
    src.write_text(SMALL)
    r = run_mlfuse_opt([str(src), "-p", ",".join(steps)])
    assert r.returncode == 0, r.stderr
    assert ("llvm.func" if name == "cpu" else "kernel.launch") in r.stdout


def test_gpu_sim_runs_the_gpu_pipeline() -> None:
    assert pipelines.default_pipeline("gpu-sim") == pipelines.default_pipeline("gpu") == pipelines.gpu_pipeline()


def test_lit_test_replays_the_default_gpu_pipeline() -> None:
    """filecheck/tools/targets.mlir spells the pipeline out (lit runs no Python): keep it true."""
    assert f"-p '{','.join(pipelines.default_pipeline('gpu'))}'" in LIT_TEST.read_text()


# --- pipeline selection --------------------------------------------------------------------


def test_cpu_target_has_one_pipeline_for_every_graph() -> None:
    """Stencils, pads and convs go through the planner like everything else (their
    window groups are post-tiled inside the default pipeline)."""
    cpu = get_target("cpu")
    assert cpu.pipeline_for(parse(PAD)) == pipelines.cpu_pipeline()
    assert cpu.pipeline_for(parse(PAD), parallel=False) == pipelines.cpu_pipeline(parallel=False)
    assert cpu.pipeline_for(parse(PAD), fuse=False) == pipelines.cpu_pipeline(fuse=False)
    assert cpu.pipeline_for(parse(SMALL), fast_math=True) == pipelines.cpu_pipeline(fast_math=True)
    assert "loop-post-tile-fuse{scope=group}" in pipelines.cpu_pipeline()
    assert get_target("gpu").pipeline_for(parse(PAD)) == pipelines.gpu_pipeline()


def test_api_compile_has_no_target_specific_code() -> None:
    import inspect

    from mlfuse import api

    source = inspect.getsource(api.compile)
    assert not re.search(r"\b(cpu|gpu|stencil)", source.split('"""')[-1])


# --- what the planner asks -----------------------------------------------------------------


def group_ops(module) -> list[list[str]]:
    return [[op.name for op in g.block.ops if not isinstance(op, fusion.YieldOp)]
            for g in module.walk() if isinstance(g, fusion.GroupOp)]


def test_structural_problems() -> None:
    gather_module = parse(GATHER)
    gather_ops = [op for op in gather_module.walk() if op.dialect_name() == "graph"]
    assert get_target("cpu").structural_problem(gather_ops) is None
    assert "graph.gather" in get_target("gpu").structural_problem(gather_ops)
    ln_ops = [op for op in parse(LAYERNORM).walk() if op.dialect_name() == "graph"]
    assert get_target("gpu").structural_problem(ln_ops) is None
    # the CPU's answer is the stitched code generator's
    from mlfuse.conversion.group_to_loop import structural_problem

    mixed = parse("""func.func @main(%x: tensor<4x8xf32>) -> (tensor<4x1xf32>, tensor<1x8xf32>) {
  %r = graph.reduce_sum %x {axes = array<i64: 1>, keepdims} : tensor<4x8xf32> -> tensor<4x1xf32>
  %c = graph.reduce_sum %x {axes = array<i64: 0>, keepdims} : tensor<4x8xf32> -> tensor<1x8xf32>
  func.return %r, %c : tensor<4x1xf32>, tensor<1x8xf32>
}
""")
    ops = [op for op in mixed.walk() if isinstance(op, graph.ReduceOp)]
    assert get_target("cpu").structural_problem(ops) == structural_problem(ops) is not None


def test_gpu_planner_keeps_a_gather_out_of_groups() -> None:
    """fusion-plan{target=gpu} asks the GPU target, so it plans no kernel the GPU cannot emit."""
    for target, fused in (("cpu", True), ("gpu", False)):
        module = run_pipeline(parse(GATHER), [f"fusion-plan{{target={target} summary=false}}"])
        together = any({"graph.gather", "graph.exp"} <= set(ops) for ops in group_ops(module))
        assert together == fused, target


# --- the GPU path, planned -----------------------------------------------------------------


def test_layernorm_is_one_gpu_kernel() -> None:
    """examples/layernorm.mlir through default_pipeline("gpu") and `-t ptx`: one .entry
    (PTX text needs no ptxas); unplanned (fuse=False) it is one kernel per op."""
    r = run_mlfuse_opt([str(LAYERNORM), "-p", ",".join(pipelines.default_pipeline("gpu")), "-t", "ptx"])
    assert r.returncode == 0, r.stderr
    assert kernel_count(r.stdout) == 1
    if find_ptxas() is not None:  # and it assembles, without spills
        checked = run_mlfuse_opt([str(LAYERNORM), "-p", ",".join(pipelines.default_pipeline("gpu")), "-t", "ptx{verify=true}"])
        assert checked.returncode == 0, checked.stderr
        assert len(re.findall(r"// ptxas sm_90 .*0 bytes spill stores", checked.stdout)) == 1
    unfused = run_mlfuse_opt([str(LAYERNORM), "-p", ",".join(pipelines.gpu_pipeline(fuse=False)), "-t", "ptx"])
    assert unfused.returncode == 0, unfused.stderr
    assert kernel_count(unfused.stdout) > 10


def test_layernorm_runs_as_one_kernel_on_gpu_sim() -> None:
    src = layernorm_rows(8)
    exe = mlfuse.compile(src, target="gpu-sim")
    assert len(exe.programs) == 1
    rng = np.random.default_rng(12)
    x = rng.standard_normal((8, 1024)).astype(np.float32)
    gamma, beta = rng.standard_normal((2, 1024)).astype(np.float32)
    (y,) = exe(x, gamma, beta)
    assert [s.kernel for s in exe.stats] == list(exe.programs)  # one launch
    (want,) = mlfuse.reference(src)(x, gamma, beta)
    np.testing.assert_allclose(y, want, rtol=RTOL, atol=ATOL)


def test_gpu_target_without_a_device_is_a_diagnostic(monkeypatch) -> None:
    from mlfuse.backend.gpu import runtime

    def no_driver():
        raise runtime.GpuUnavailable("no CUDA driver binding")

    monkeypatch.setattr(runtime, "_load_driver", no_driver)
    with pytest.raises(mlfuse.Diagnostic, match="target 'gpu' needs a CUDA device: no CUDA driver binding"):
        mlfuse.compile(SMALL, target="gpu")


def test_gpu_target_reports_a_missing_entry() -> None:
    with pytest.raises(Exception, match="@nope"):
        mlfuse.compile(SMALL, target="gpu-sim", entry="nope")


# --- mlfuse-run ----------------------------------------------------------------------------


def run_tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlfuse.tools.mlfuse_run", *args], capture_output=True, text=True)


def test_mlfuse_run_takes_a_target(tmp_path: Path) -> None:
    src = tmp_path / "small.mlir"
    src.write_text(SMALL)
    r = run_tool(str(src), "--target", "gpu-sim", "--check")
    assert r.returncode == 0, r.stderr
    assert "check result0: ok" in r.stdout
    bad = run_tool(str(src), "--target", "nope")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "<command line>: error: --target: unknown target 'nope' (known targets: cpu, gpu, gpu-sim)" in bad.stderr
