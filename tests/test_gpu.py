"""GPU backend: every graph mapped to kernels, lowered to PTX and assembled by ptxas.

The graphs are tests/gpu_graphs/*.mlir (one per mapping: elementwise, row
warp/block/thread/split, column tiled/split, global, injective and matmul) and
every graph of the benchmark suite (bench/graphs), grouped as
fusion-plan{target=gpu} groups them. PTX must assemble for sm_90 and sm_80 with
no spills and within register, shared-memory and one-wave limits. What the
kernels compute is checked without a GPU by the simulator
(tests/test_gpu_simulator.py); running them needs a GPU and pycuda or
cuda-python: bench/gpu/check.sh does it on a lent device.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp

from mlfuse.api import module_text, run_pipeline
from mlfuse.backend.gpu.host import map_module
from mlfuse.backend.gpu.ptx import module_to_ptx
from mlfuse.backend.gpu.ptxas import (
    KernelResources,
    LaunchShape,
    assemble,
    check_resources,
    find_ptxas,
    parse_resource_report,
)
from mlfuse.backend.gpu.targets import target
from mlfuse.dialects import kernel
from mlfuse.ir import parse_module

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.graphs import SUITE, models  # noqa: E402

GPU_GRAPHS = sorted((ROOT / "tests" / "gpu_graphs").glob("*.mlir"))
GRAPH_IDS = [f"gpu_graphs/{p.stem}" for p in GPU_GRAPHS] + [f"suite/{name}" for name in sorted(SUITE)]
GPU_PLAN = ["canonicalize", "cse", "fusion-plan{target=gpu}"]
needs_ptxas = pytest.mark.skipif(
    find_ptxas() is None, reason="ptxas not found: install the gpu extra (nvidia-cuda-nvcc) or set MLFUSE_PTXAS"
)


@functools.cache
def graph_text(graph_id: str) -> str:
    """The graph as text: a tests/gpu_graphs file, or a suite graph planned for the GPU (once)."""
    kind, name = graph_id.split("/")
    if kind == "gpu_graphs":
        return (ROOT / "tests" / "gpu_graphs" / f"{name}.mlir").read_text()
    # stacked_bert repeats one layer's 12 kernels per layer: two layers keep the layer-to-layer
    # boundary at a quarter of the PTX to emit and assemble
    module = models.stacked_bert(layers=2) if name == "stacked_bert" else SUITE[name].build()
    run_pipeline(module, GPU_PLAN)
    return module_text(module)


def mapped(graph_id: str, arch: str) -> ModuleOp:
    module = parse_module(graph_text(graph_id))
    map_module(module, target(arch))
    module.verify()
    return module


# stacked_bert (two layers here, see graph_text) is assembled for sm_90 only
ASSEMBLED = [
    (g, arch) for g in GRAPH_IDS for arch in ("sm_90", "sm_80") if (g, arch) != ("suite/stacked_bert", "sm_80")
]


def test_every_suite_graph_is_assembled() -> None:
    assert len(SUITE) >= 10 and all((f"suite/{name}", "sm_90") in ASSEMBLED for name in SUITE)


@needs_ptxas
@pytest.mark.gpu
@pytest.mark.parametrize(("graph_id", "arch"), ASSEMBLED, ids=[f"{g}-{a}" for g, a in ASSEMBLED])
def test_graph_assembles_without_spills(graph_id: str, arch: str) -> None:
    module = mapped(graph_id, arch)
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, kernel.KernelFuncOp)}
    launches = {op.kernel.string_value(): op for op in module.walk() if isinstance(op, kernel.LaunchOp)}
    assert kernels and set(kernels) == set(launches)
    resources = assemble(module_to_ptx(module, arch), arch)
    assert set(resources) == set(kernels)
    for name, r in resources.items():
        launch = launches[name]
        shape = LaunchShape(
            threads_per_block=kernels[name].threads_per_block,
            dynamic_shared=launch.dynamic_shared.value.data,
            blocks=launch.grid_size[0] * launch.grid_size[1] * launch.grid_size[2],
            cooperative=kernels[name].cooperative is not None,
        )
        assert check_resources(r, shape, arch) == []


REPORT = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'softmax' for 'sm_90'
ptxas info    : Function properties for softmax
    0 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 1056 bytes smem, 368 bytes cmem[0]
ptxas info    : Compiling entry function 'exp' for 'sm_90'
ptxas info    : Function properties for exp
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 16 registers
"""


def test_resource_report_is_parsed() -> None:
    r = parse_resource_report(REPORT)
    assert r["softmax"] == KernelResources("softmax", 40, 0, 8, 12, 1056, 368, 1)
    assert r["exp"] == KernelResources("exp", registers=16)
    assert r["softmax"].spills and not r["exp"].spills


def test_resource_limits() -> None:
    ok = KernelResources("k", registers=32)
    assert check_resources(ok, LaunchShape(256)) == []
    spilling = KernelResources("k", registers=255, spill_stores=4)
    assert any("spills" in p for p in check_resources(spilling, LaunchShape(256)))
    # 128 registers x 1024 threads = 131072 > 65536 registers of an SM
    assert any("exceed" in p for p in check_resources(KernelResources("k", registers=128), LaunchShape(1024)))
    # a grid barrier over more blocks than fit at once would deadlock
    wave = target("sm_90").one_wave(256, 32, 0)
    assert check_resources(ok, LaunchShape(256, blocks=wave, cooperative=True)) == []
    assert any("grid barrier" in p for p in check_resources(ok, LaunchShape(256, blocks=wave + 1, cooperative=True)))
    too_much_smem = KernelResources("k", registers=32, shared_bytes=40000)
    assert any("shared memory" in p for p in check_resources(too_much_smem, LaunchShape(256, dynamic_shared=200000)))


def test_occupancy() -> None:
    h200 = target("sm_90")
    assert h200.blocks_per_sm(256, 32, 0) == 8  # thread-limited: 2048 / 256
    assert h200.blocks_per_sm(256, 128, 0) == 2  # register-limited: 65536 / (128 * 256)
    assert h200.blocks_per_sm(256, 32, 100 * 1024) == 2  # shared-memory-limited
    assert h200.one_wave(256, 128, 0) == 264


def test_runtime_needs_a_driver() -> None:
    """Without a GPU the runtime says why; with one, it runs a graph against numpy."""
    import numpy as np

    from mlfuse.backend.gpu.runtime import GpuUnavailable, compile_gpu
    from mlfuse.reference import reference

    path = ROOT / "tests" / "gpu_graphs" / "layernorm.mlir"
    try:
        exe = compile_gpu(path.read_text())
    except GpuUnavailable as e:
        assert "pycuda" in str(e)
        pytest.skip(f"no GPU runtime here: {e}")
    except Exception as e:  # a binding is installed but there is no device
        pytest.skip(f"no usable GPU here: {e}")
    x = np.random.default_rng(0).standard_normal((256, 1024)).astype(np.float32)
    (y,) = exe(x)
    (expected,) = reference(path.read_text())(x)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
