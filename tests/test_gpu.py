"""GPU backend: every graph mapped to kernels, lowered to PTX and assembled by ptxas.

The graphs are tests/gpu_graphs/*.mlir (one per mapping: elementwise, row
warp/block/thread/split, column tiled/split, global, injective and matmul) plus
every .mlir of the benchmark suite when there is one (bench/suite/). PTX must
assemble for sm_90 and sm_80 with no spills and within register, shared-memory
and one-wave limits. Running the kernels needs a GPU and pycuda or cuda-python:
bench/gpu/check.sh does it on a lent device.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
GRAPHS = sorted((ROOT / "tests" / "gpu_graphs").glob("*.mlir")) + sorted((ROOT / "bench" / "suite").glob("*.mlir"))
needs_ptxas = pytest.mark.skipif(
    find_ptxas() is None, reason="ptxas not found: install the gpu extra (nvidia-cuda-nvcc) or set MLFUSE_PTXAS"
)


def mapped(path: Path, arch: str):
    module = parse_module(path.read_text())
    map_module(module, target(arch))
    module.verify()
    return module


@needs_ptxas
@pytest.mark.gpu
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
@pytest.mark.parametrize("path", GRAPHS, ids=[p.stem for p in GRAPHS])
def test_graph_assembles_without_spills(path: Path, arch: str) -> None:
    module = mapped(path, arch)
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
