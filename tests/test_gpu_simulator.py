"""GPU kernels run by the CPU simulator (mlfuse.backend.gpu.sim) against the numpy reference.

No GPU is needed: every mapping variant runs thread by thread, with barriers,
warp shuffles, atomics and grid barriers, on small shapes. To reach every
variant at those shapes, the mapping thresholds are scaled down with a small
GPU (`tiny_gpu`); tests/gpu_graphs are shrunk and must keep the schedule they
get at full size on sm_90. The first tests check that the simulator itself
catches what a GPU would silently get wrong.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region, SSAValue

from mlfuse.api import run_pipeline
from mlfuse.backend.gpu import mapping
from mlfuse.backend.gpu.host import SCHEDULE_ATTR, annotate, map_module
from mlfuse.backend.gpu.runtime import DeviceArray, GpuExecutable
from mlfuse.backend.gpu.sim import SimulatedDriver, SimulationError, compile_gpu_sim, semantics
from mlfuse.backend.gpu.targets import GpuTarget, target
from mlfuse.dialects import fusion, graph
from mlfuse.frontend.builder import GraphBuilder
from mlfuse.ir import parse_module
from mlfuse.reference import find_function, reference

from conftest import random_array

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.graphs import models  # noqa: E402

RTOL, ATOL = 2e-5, 2e-6  # fp32; reductions are summed in another order than numpy's

# A GPU scaled down so that every mapping variant appears at a few thousand elements.
TINY_GPU = GpuTarget("sm_90", "+ptx80", sm_count=4, static_shared_per_block=1024, shared_per_block_optin=6144)
TINY_LIMITS = {
    "ROW_WARP_MAX": 64,
    "ROW_BLOCK_256_MAX": 512,
    "ROW_BLOCK_512_MAX": 1024,
    "SPLIT_MIN_ROW": 512,
    "SPLIT_MIN_CHUNK": 128,
    "COLUMN_SPLIT_MIN_ROWS": 64,
    "COLUMN_SPLIT_ROWS_PER_BLOCK": 16,
    "ELEMENTWISE_BLOCKS_PER_SM": 1,  # a grid of 4 blocks: grid-stride loops go round
}


@pytest.fixture
def tiny_gpu(monkeypatch) -> GpuTarget:
    for name, value in TINY_LIMITS.items():
        monkeypatch.setattr(mapping, name, value)
    return TINY_GPU


# --- helpers --------------------------------------------------------------------------------


def inputs_for(module: ModuleOp, rng: np.random.Generator) -> list[np.ndarray]:
    fn = find_function(module, "main")
    return [
        random_array(rng, t.get_shape(), graph.numpy_dtype(t.get_element_type()))
        for t in fn.function_type.inputs.data
    ]


def check_against_reference(
    module: ModuleOp, gpu: GpuTarget, rng, cooperative_blocks: int | None = None, tolerance: float | None = None
):
    """Simulate `module` mapped for `gpu`; compare every result with mlfuse.reference."""
    arrays = inputs_for(module, rng)
    exe = compile_gpu_sim(module, gpu=gpu, cooperative_blocks=cooperative_blocks)
    got = exe(*arrays)
    want = reference(module)(*arrays)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=tolerance or RTOL, atol=tolerance or ATOL)
    return exe


def schedules(module: ModuleOp, gpu: GpuTarget) -> list[tuple[str, str, str]]:
    """(mapping, variant, cache) of every group of a module, as gpu-schedule chooses them."""
    annotated = module.clone()
    annotate(annotated, gpu)
    found = []
    for op in annotated.walk():
        if isinstance(op, fusion.GroupOp):
            s = mapping.Schedule.from_attr(op.attributes[SCHEDULE_ATTR])  # type: ignore[arg-type]
            found.append((s.mapping, s.variant, s.cache))
    return found


def fuse_all(module: ModuleOp) -> ModuleOp:
    """Put every op of @main into one fusion.group (what a planner would do, without one)."""
    fn = find_function(module, "main")
    ret = fn.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    ops = [op for op in fn.body.block.ops if op is not ret]
    args = list(fn.body.block.args)
    block = Block(arg_types=[a.type for a in args])
    mapper: dict[SSAValue, SSAValue] = dict(zip(args, block.args))
    for op in ops:
        block.add_op(op.clone(value_mapper=mapper))
    block.add_op(fusion.YieldOp(*[mapper[v] for v in ret.arguments]))
    group = fusion.GroupOp("fused", "stitch", args, [v.type for v in ret.arguments], Region(block))
    fn.body.block.insert_op_before(group, ops[0] if ops else ret)
    ret.operands = list(group.results)
    for op in reversed(ops):
        fn.body.block.erase_op(op)
    module.verify()
    return module


def shrink(text: str, dims: dict[int, int]) -> str:
    """The graph with every tensor dimension d replaced by dims.get(d, d)."""

    def smaller(m: re.Match) -> str:
        parts = m.group(1).split("x")
        return "tensor<" + "x".join(str(dims.get(int(p), p)) if p.isdigit() else p for p in parts) + ">"

    return re.sub(r"tensor<([^>]*)>", smaller, text)


def built(build) -> ModuleOp:
    b = GraphBuilder()
    build(b)
    return b.module()


# --- the simulator catches what a GPU would get wrong --------------------------------------------

HOST = """
func.func @main({params}) attributes {{kernel.results = {results} : i64}} {{
  {host}
  func.return
}}
"""


def kernel_module(kernel_text: str, params: str, host: str, results: int = 1) -> ModuleOp:
    return parse_module(kernel_text + HOST.format(params=params, host=host, results=results))


BLOCK_SUM = """
kernel.func @block_sum(%x: memref<64xf32, 1>, %y: memref<1xf32, 1>) attributes {{block = array<i64: 64, 1, 1>}} {{
  %t = kernel.thread_id x
  %s = kernel.shared_alloc : memref<64xf32, 3>
  %v = memref.load %x[%t] : memref<64xf32, 1>
  memref.store %v, %s[%t] : memref<64xf32, 3>
  {sync}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %first = arith.cmpi eq, %t, %c0 : index
  scf.if %first {{
    %z = arith.constant 0.0 : f32
    %sum = scf.for %i = %c0 to %c64 step %c1 iter_args(%acc = %z) -> (f32) {{
      %e = memref.load %s[%i] : memref<64xf32, 3>
      %n = arith.addf %acc, %e : f32
      scf.yield %n : f32
    }}
    memref.store %sum, %y[%c0] : memref<1xf32, 1>
  }}
  kernel.return
}}
"""
LAUNCH_BLOCK_SUM = (
    "kernel.launch @block_sum(%x, %y) {grid = array<i64: 1, 1, 1>, block = array<i64: 64, 1, 1>, "
    "dynamic_shared = 0 : i64} : memref<64xf32, 1>, memref<1xf32, 1>"
)
X64 = np.linspace(-1.0, 2.0, 64, dtype=np.float32)


def test_barrier_makes_shared_memory_visible() -> None:
    module = kernel_module(BLOCK_SUM.format(sync="kernel.barrier"), "%x: memref<64xf32, 1>, %y: memref<1xf32, 1>", LAUNCH_BLOCK_SUM)
    (y,) = compile_gpu_sim(module)(X64)
    np.testing.assert_allclose(y, [X64.sum()], rtol=1e-6)


def test_missing_barrier_is_caught() -> None:
    module = kernel_module(BLOCK_SUM.format(sync=""), "%x: memref<64xf32, 1>, %y: memref<1xf32, 1>", LAUNCH_BLOCK_SUM)
    with pytest.raises(SimulationError, match="nothing wrote|data race"):
        compile_gpu_sim(module)(X64)


def test_barrier_in_divergent_code_deadlocks() -> None:
    divergent = """%c32 = arith.constant 32 : index
  %low = arith.cmpi ult, %t, %c32 : index
  scf.if %low {
    kernel.barrier
  }"""
    module = kernel_module(BLOCK_SUM.format(sync=divergent), "%x: memref<64xf32, 1>, %y: memref<1xf32, 1>", LAUNCH_BLOCK_SUM)
    with pytest.raises(SimulationError, match="deadlock"):
        compile_gpu_sim(module)(X64)


SHUFFLES = """
kernel.func @shuffles(%x: memref<64xi32, 1>, %a: memref<64xi32, 1>, %b: memref<64xi32, 1>) attributes {block = array<i64: 64, 1, 1>} {
  %t = kernel.thread_id x
  %v = memref.load %x[%t] : memref<64xi32, 1>
  %p = kernel.shuffle xor %v, 5 : i32
  %q = kernel.shuffle down %v, 3 : i32
  memref.store %p, %a[%t] : memref<64xi32, 1>
  memref.store %q, %b[%t] : memref<64xi32, 1>
  kernel.return
}
"""
SHUFFLE_PARAMS = "%x: memref<64xi32, 1>, %a: memref<64xi32, 1>, %b: memref<64xi32, 1>"
SHUFFLE_LAUNCH = (
    "kernel.launch @shuffles(%x, %a, %b) {grid = array<i64: 1, 1, 1>, block = array<i64: 64, 1, 1>, "
    "dynamic_shared = 0 : i64} : memref<64xi32, 1>, memref<64xi32, 1>, memref<64xi32, 1>"
)


def test_shuffles_exchange_within_warps() -> None:
    x = np.arange(100, 164, dtype=np.int32)
    a, b = compile_gpu_sim(kernel_module(SHUFFLES, SHUFFLE_PARAMS, SHUFFLE_LAUNCH, results=2))(x)
    lane = np.arange(64) % 32
    warp_base = np.arange(64) - lane
    np.testing.assert_array_equal(a, x[warp_base + (lane ^ 5)])
    # down: lanes whose source is past the warp keep their own value
    np.testing.assert_array_equal(b, x[np.where(lane + 3 < 32, np.arange(64) + 3, np.arange(64))])


def test_shuffle_in_divergent_code_is_caught() -> None:
    divergent = SHUFFLES.replace(
        "%p = kernel.shuffle xor %v, 5 : i32",
        """%c16 = arith.constant 16 : index
  %low = arith.cmpi ult, %t, %c16 : index
  %p = scf.if %low -> (i32) {
    %s = kernel.shuffle xor %v, 5 : i32
    scf.yield %s : i32
  } else {
    scf.yield %v : i32
  }""",
    )
    with pytest.raises(SimulationError, match="divergent warp"):
        compile_gpu_sim(kernel_module(divergent, SHUFFLE_PARAMS, SHUFFLE_LAUNCH, results=2))(np.arange(64, dtype=np.int32))


RACY = """
kernel.func @racy(%x: memref<64xf32, 1>, %y: memref<2xf32, 1>) attributes {block = array<i64: 32, 1, 1>} {
  %t = kernel.thread_id x
  %b = kernel.block_id x
  %c32 = arith.constant 32 : index
  %base = arith.muli %b, %c32 : index
  %i = arith.addi %base, %t : index
  %v = memref.load %x[%i] : memref<64xf32, 1>
  memref.store %v, %y[%b] : memref<2xf32, 1>
  kernel.return
}
"""
RACY_LAUNCH = (
    "kernel.launch @racy(%x, %y) {grid = array<i64: 2, 1, 1>, block = array<i64: 32, 1, 1>, "
    "dynamic_shared = 0 : i64} : memref<64xf32, 1>, memref<2xf32, 1>"
)


def test_threads_writing_one_element_race() -> None:
    module = kernel_module(RACY, "%x: memref<64xf32, 1>, %y: memref<2xf32, 1>", RACY_LAUNCH)
    with pytest.raises(SimulationError, match="data race: writes element \\[0\\]"):
        compile_gpu_sim(module)(X64)


def test_out_of_bounds_index_is_caught() -> None:
    text = RACY.replace("memref.store %v, %y[%b]", "memref.store %v, %y[%i]")
    module = kernel_module(text, "%x: memref<64xf32, 1>, %y: memref<2xf32, 1>", RACY_LAUNCH)
    with pytest.raises(SimulationError, match="out of bounds"):
        compile_gpu_sim(module)(X64)


ATOMIC = """
kernel.func @atomic_sum(%x: memref<64xf32, 1>, %y: memref<1xf32, 1>) attributes {block = array<i64: 32, 1, 1>} {
  %t = kernel.thread_id x
  %b = kernel.block_id x
  %c32 = arith.constant 32 : index
  %c0 = arith.constant 0 : index
  %base = arith.muli %b, %c32 : index
  %i = arith.addi %base, %t : index
  %v = memref.load %x[%i] : memref<64xf32, 1>
  kernel.atomic_add %v, %y[%c0] : f32, memref<1xf32, 1>
  kernel.return
}
"""
ATOMIC_LAUNCH = (
    "kernel.launch @atomic_sum(%x, %y) {grid = array<i64: 2, 1, 1>, block = array<i64: 32, 1, 1>, "
    "dynamic_shared = 0 : i64} : memref<64xf32, 1>, memref<1xf32, 1>"
)


def test_atomics_need_a_cleared_accumulator() -> None:
    params = "%x: memref<64xf32, 1>, %y: memref<1xf32, 1>"
    cleared = kernel_module(ATOMIC, params, "kernel.memset %y : memref<1xf32, 1>\n  " + ATOMIC_LAUNCH)
    (y,) = compile_gpu_sim(cleared)(X64)
    np.testing.assert_allclose(y, [X64.sum()], rtol=1e-5)
    with pytest.raises(SimulationError, match="nothing cleared"):
        compile_gpu_sim(kernel_module(ATOMIC, params, ATOMIC_LAUNCH))(X64)


# two phases: every block writes its partial sum, then block 0 adds them up
GRID = """
kernel.func @two_phase(%x: memref<128xf32, 1>, %y: memref<1xf32, 1>, %partial: memref<4xf32, 1>, %counter: memref<1xi32, 1>) attributes {block = array<i64: 32, 1, 1>, cooperative} {
  %t = kernel.thread_id x
  %b = kernel.block_id x
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %first = arith.cmpi eq, %t, %c0 : index
  scf.if %first {
    %base = arith.muli %b, %c32 : index
    %end = arith.addi %base, %c32 : index
    %z = arith.constant 0.0 : f32
    %s = scf.for %i = %base to %end step %c1 iter_args(%acc = %z) -> (f32) {
      %e = memref.load %x[%i] : memref<128xf32, 1>
      %n = arith.addf %acc, %e : f32
      scf.yield %n : f32
    }
    memref.store %s, %partial[%b] : memref<4xf32, 1>
  }
  {sync}
  %block0 = arith.cmpi eq, %b, %c0 : index
  %writer = arith.andi %first, %block0 : i1
  scf.if %writer {
    %z = arith.constant 0.0 : f32
    %s = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %z) -> (f32) {
      %e = memref.load %partial[%i] : memref<4xf32, 1>
      %n = arith.addf %acc, %e : f32
      scf.yield %n : f32
    }
    memref.store %s, %y[%c0] : memref<1xf32, 1>
  }
  kernel.return
}
"""
GRID_PARAMS = "%x: memref<128xf32, 1>, %y: memref<1xf32, 1>"
GRID_HOST = """%partial = memref.alloc() : memref<4xf32, 1>
  %counter = memref.alloc() : memref<1xi32, 1>
  {memset}
  kernel.launch @two_phase(%x, %y, %partial, %counter) {{grid = array<i64: 4, 1, 1>, block = array<i64: 32, 1, 1>, dynamic_shared = 0 : i64}} : memref<128xf32, 1>, memref<1xf32, 1>, memref<4xf32, 1>, memref<1xi32, 1>"""


def test_grid_barrier_orders_blocks() -> None:
    x = np.linspace(-1.0, 1.5, 128, dtype=np.float32)
    good = kernel_module(
        GRID.replace("{sync}", "kernel.grid_sync %counter : memref<1xi32, 1>"),
        GRID_PARAMS,
        GRID_HOST.format(memset="kernel.memset %counter : memref<1xi32, 1>"),
    )
    (y,) = compile_gpu_sim(good)(x)
    np.testing.assert_allclose(y, [x.sum()], rtol=1e-5)
    # without the barrier, block 0 reads partial sums other blocks write in the same phase
    missing = kernel_module(GRID.replace("{sync}", ""), GRID_PARAMS, GRID_HOST.format(memset=""))
    with pytest.raises(SimulationError, match="nothing wrote|data race"):
        compile_gpu_sim(missing)(x)


def test_grid_barrier_counter_must_be_zeroed() -> None:
    module = kernel_module(
        GRID.replace("{sync}", "kernel.grid_sync %counter : memref<1xi32, 1>"), GRID_PARAMS, GRID_HOST.format(memset="")
    )
    with pytest.raises(SimulationError, match="nothing cleared"):
        compile_gpu_sim(module)(np.ones(128, np.float32))


def test_unwritten_results_and_input_writes_are_caught() -> None:
    params = "%x: memref<64xf32, 1>, %y: memref<2xf32, 1>"
    # only thread 0 of block 1 stores: y[0] is never written
    only_block1 = RACY.replace(
        "memref.store %v, %y[%b] : memref<2xf32, 1>",
        """%c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t0 = arith.cmpi eq, %t, %c0 : index
  %b1 = arith.cmpi eq, %b, %c1 : index
  %store = arith.andi %t0, %b1 : i1
  scf.if %store {
    memref.store %v, %y[%b] : memref<2xf32, 1>
  }""",
    )
    with pytest.raises(SimulationError, match="1 of 2 elements of result 0 were never written"):
        compile_gpu_sim(kernel_module(only_block1, params, RACY_LAUNCH))(X64)
    writes_input = RACY.replace("memref.store %v, %y[%b] : memref<2xf32, 1>", "memref.store %v, %x[%i] : memref<64xf32, 1>")
    with pytest.raises(SimulationError, match="read-only"):
        compile_gpu_sim(kernel_module(writes_input, params, RACY_LAUNCH))(X64)


# --- tests/gpu_graphs, shrunk: same schedule as at full size, same values as numpy --------------

SHRUNK = {
    "bias_gelu": {512: 50, 768: 60},
    "big_rows_softmax": {64: 4, 32768: 300},
    "center_global": {1024: 60, 64: 33},
    "colsum": {4096: 100, 64: 20},
    "injective": {64: 6, 128: 10, 32: 5, 66: 8, 130: 12},
    "layernorm": {256: 3, 1024: 512},
    "long_rows": {100000: 1000, 4: 3},
    "short_rows": {100000: 300},
}
GPU_GRAPHS = sorted((ROOT / "tests" / "gpu_graphs").glob("*.mlir"))


def test_every_gpu_graph_is_simulated() -> None:
    assert {p.stem for p in GPU_GRAPHS} == set(SHRUNK)


@pytest.mark.parametrize("name", sorted(SHRUNK))
def test_gpu_graph(name: str, monkeypatch, rng) -> None:
    text = (ROOT / "tests" / "gpu_graphs" / f"{name}.mlir").read_text()
    full = schedules(parse_module(text), target("sm_90"))
    for limit, value in TINY_LIMITS.items():
        monkeypatch.setattr(mapping, limit, value)
    small = parse_module(shrink(text, SHRUNK[name]))
    assert schedules(small, TINY_GPU) == full
    assert all(np.prod(graph.shape_of(a)) <= 4096 for a in find_function(small, "main").body.block.args)
    check_against_reference(small, TINY_GPU, rng)


# --- every mapping variant, boundary sizes included ------------------------------------------


def softmax(rows: int, cols: int):
    def build(b: GraphBuilder) -> None:
        x = b.input("x", (rows, cols))
        e = b.exp(x - b.max(x, axis=-1, keepdims=True))
        b.output(e / b.sum(e, axis=-1, keepdims=True))

    return build


def layernorm_with_stats(rows: int, cols: int, residual: bool = False):
    """Normalised rows plus the row means (reduced and full-size outputs of one kernel)."""

    def build(b: GraphBuilder) -> None:
        x = b.input("x", (rows, cols))
        if residual:
            x = x + b.input("r", (rows, cols))
        mean = b.mean(x, axis=-1, keepdims=True)
        centered = x - mean
        var = b.mean(centered * centered, axis=-1)
        y = centered * b.rsqrt(b.reshape(var, (rows, 1)) + 1e-5)
        b.output(y, mean, var)

    return build


def row_sums(rows: int, cols: int, dtype: str = "f32"):
    def build(b: GraphBuilder) -> None:
        x = b.input("x", (rows, cols), dtype)
        b.output(b.sum(x, axis=-1), b.mean(x.astype("f32"), axis=-1, keepdims=True))

    return build


def column_stats(rows: int, cols: int, keepdims: bool = False):
    def build(b: GraphBuilder) -> None:
        x = b.input("x", (rows, cols))
        b.output(b.sqrt(b.mean(x * x, axis=0, keepdims=keepdims)), b.max(x, axis=0, keepdims=keepdims))

    return build


def column_sums(shape: tuple[int, ...], axes: tuple[int, ...]):
    def build(b: GraphBuilder) -> None:
        x = b.input("x", shape)
        b.output(b.sum(b.exp(x), axis=axes), b.mean(x, axis=axes))

    return build


def whole_tensor_softmax(rows: int, cols: int):
    """Two reduction levels over everything: two grid barriers."""

    def build(b: GraphBuilder) -> None:
        x = b.input("x", (rows, cols))
        e = b.exp(x - b.max(x))
        b.output(e / b.sum(e), b.min(x, axis=0))

    return build


def center_columns(rows: int, cols: int):
    def build(b: GraphBuilder) -> None:
        x = b.input("x", (rows, cols))
        b.output(x - b.mean(x, axis=0, keepdims=True))

    return build


def injective(rows: int, cols: int):
    def build(b: GraphBuilder) -> None:
        x = b.input("x", (rows, cols))
        y = b.input("y", (cols,))
        t = b.transpose(x, (1, 0))
        cat = b.concat([x, x * 2.0], axis=1)
        chosen = b.where(x > y, x, b.neg(y) + x)
        b.output(t, cat, chosen, b.pad(x, [(1, 2), (0, 3)], 0.5), b.sigmoid(x[1:, ::2]))

    return build


def multi_axis_rows(shape: tuple[int, ...]):
    """Rows made of two trailing dimensions; min and prod reductions (warp butterflies of other kinds)."""

    def build(b: GraphBuilder) -> None:
        x = b.input("x", shape)
        low = b.min(x, axis=(1, 2), keepdims=True)
        scaled = b.prod(x * 0.05 + 1.0, axis=(1, 2))
        b.output(x - low, scaled)

    return build


def int64_rows(rows: int, cols: int):
    """i64 cannot be shuffled: one thread per row, however long."""

    def build(b: GraphBuilder) -> None:
        x = b.input("x", (rows, cols), "i64")
        b.output(x - b.max(x, axis=-1, keepdims=True))

    return build


def rows_and_columns(rows: int, cols: int):
    def build(b: GraphBuilder) -> None:
        x = b.input("x", (rows, cols))
        b.output(x - b.mean(x, axis=0, keepdims=True) - b.max(x, axis=1, keepdims=True), b.sum(x))

    return build


def column_epilogue(rows: int, cols: int):
    def build(b: GraphBuilder) -> None:
        x = b.input("x", (rows, cols))
        gamma = b.input("gamma", (cols,))
        b.output(b.mean(x, axis=0) * gamma + 1.0)

    return build


def scalars(rows: int, cols: int):
    def build(b: GraphBuilder) -> None:
        x = b.input("x", (rows, cols))
        s = b.input("s", ())
        b.output(x * s, s * 2.0)

    return build


def scaled_softmax(rows: int, cols: int):
    """A per-row input next to the row: read at the row's index, not cached."""

    def build(b: GraphBuilder) -> None:
        x = b.input("x", (rows, cols))
        t = b.input("t", (rows, 1))
        z = x * t
        e = b.exp(z - b.max(z, axis=-1, keepdims=True))
        b.output(e / b.sum(e, axis=-1, keepdims=True))

    return build


def int_columns_and_total(rows: int, cols: int):
    """i32 through the global mapping: integer atomics into the scratch buffers."""

    def build(b: GraphBuilder) -> None:
        x = b.input("x", (rows, cols), "i32")
        b.output(x - b.sum(x, axis=0, keepdims=True), b.sum(x))

    return build


VARIANTS = {
    # name: (graph, expected schedules, cooperative block caps to try)
    "elementwise_vector4": (injective(24, 40), None, [None]),
    "elementwise_odd": (injective(33, 7), None, [None]),
    "row_thread_registers": (softmax(300, 8), [("row", "thread", "registers")], [None]),
    "row_thread_int": (row_sums(270, 12, "i32"), [("row", "thread", "none"), ("row", "thread", "none")], [None]),
    "row_warp_registers": (softmax(13, 64), [("row", "warp", "registers")], [None]),
    "row_warp_shared": (layernorm_with_stats(11, 24), [("row", "warp", "shared")], [None]),
    "row_warp_dynamic_shared": (layernorm_with_stats(9, 40), [("row", "warp", "dynamic_shared")], [None]),
    "row_warp_reload": (layernorm_with_stats(9, 40, residual=True), [("row", "warp", "reload")], [None]),
    "row_warp_int": (row_sums(10, 45, "i32"), [("row", "warp", "none"), ("row", "warp", "none")], [None]),
    "row_block_registers": (softmax(3, 512), [("row", "block", "registers")], [None]),
    "row_block_shared": (layernorm_with_stats(5, 100), [("row", "block", "shared")], [None]),
    "row_block_dynamic_shared": (softmax(4, 300), [("row", "block", "dynamic_shared")], [None]),
    "row_block_512_reload": (layernorm_with_stats(3, 600, residual=True), [("row", "block", "reload")], [None]),
    "row_block_1024_reload": (softmax(2, 1100), [("row", "block", "reload")], [None]),
    "row_split": (row_sums(3, 1000), [("row", "split", "none")], [None]),
    "column_tiled": (column_stats(50, 37), [("column", "tiled", "none")], [None]),
    "column_tiled_keepdims": (column_stats(40, 70, keepdims=True), [("column", "tiled", "none")], [None]),
    "column_split": (column_sums((100, 20), (0,)), [("column", "split", "none")], [None]),
    "column_split_3d": (column_sums((10, 9, 30), (0, 1)), [("column", "split", "none")], [None]),
    "global_columns": (center_columns(60, 33), [("global", "", "none")], [None, 3, 1]),
    "global_two_levels": (whole_tensor_softmax(30, 50), [("global", "", "none")], [None, 2]),
    "global_rows_and_columns": (rows_and_columns(40, 50), [("global", "", "none")], [None, 1]),
    "row_warp_two_axes": (multi_axis_rows((7, 4, 9)), [("row", "warp", "dynamic_shared")], [None]),
    "row_block_two_axes": (multi_axis_rows((3, 20, 30)), [("row", "block", "reload")], [None]),
    "row_thread_int64": (int64_rows(20, 40), [("row", "thread", "reload")], [None]),
    "column_epilogue": (column_epilogue(30, 45), [("column", "tiled", "none")], [None]),
    "elementwise_rank0": (scalars(20, 30), None, [None]),
    "row_warp_row_input": (scaled_softmax(11, 48), [("row", "warp", "dynamic_shared")], [None]),
    "row_block_row_input": (scaled_softmax(3, 512), [("row", "block", "registers")], [None]),
    "column_fewer_rows_than_lanes": (column_stats(3, 40), [("column", "tiled", "none")], [None]),
    "global_int32": (int_columns_and_total(30, 40), [("global", "", "none")], [None, 2]),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_mapping_variant(name: str, tiny_gpu, rng) -> None:
    build, expected, caps = VARIANTS[name]
    module = fuse_all(built(build))
    got = schedules(module, tiny_gpu)
    if expected is None:
        assert {s[0] for s in got} == {"elementwise"}
    else:
        # row_sums and the like return two reductions of one row: a group each is fine too
        assert got == expected[: len(got)] and len(got) >= 1, got
    for cap in caps:
        exe = check_against_reference(module, tiny_gpu, rng, cooperative_blocks=cap)
        if cap is not None:
            assert all(s.grid[0] <= cap for s in exe.stats)


def test_vector_widths_cover_boundaries(tiny_gpu, rng) -> None:
    """Vectors of 4, 2 and 1 elements, more vectors than threads (the grid-stride loop goes round)."""
    for rows, cols, vector in ((115, 36, 4), (70, 30, 2), (150, 7, 1)):
        module = fuse_all(built(lambda b, shape=(rows, cols): b.output(b.tanh(b.input("x", shape)) * 3.0)))
        (group,) = annotated_groups(module, tiny_gpu)
        assert mapping.Schedule.from_attr(group.attributes[SCHEDULE_ATTR]).vector == vector  # type: ignore[arg-type]
        exe = check_against_reference(module, tiny_gpu, rng)
        assert rows * cols // vector > exe.stats[0].threads


def annotated_groups(module: ModuleOp, gpu: GpuTarget) -> list[fusion.GroupOp]:
    annotated = module.clone()
    annotate(annotated, gpu)
    return [op for op in annotated.walk() if isinstance(op, fusion.GroupOp)]


# --- the benchmark suite's graphs, small, as fusion-plan{target=gpu} groups them -----------------


def small_bert(b: GraphBuilder, layers: int = 1) -> None:
    x = b.input("x", (8, 32))
    mask = b.input("mask", (8,))
    for i in range(layers):
        x = models._bert_layer(b, x, mask, f"_{i}", seq=8, hidden=32, heads=2, ffn=64)
    b.output(x)


SMALL_SUITE = {
    "layernorm": lambda: models.layernorm(6, 96),
    "softmax": lambda: models.softmax(5, 130),
    "bias_residual_layernorm": lambda: models.bias_residual_layernorm(4, 200),
    "rmsnorm": lambda: models.rmsnorm(3, 700),
    "gelu_mlp_tail": lambda: models.gelu_mlp_tail(4, 16, 48),
    "swiglu": lambda: models.swiglu(4, 16, 24),
    "attention": lambda: models.attention(2, 8, 8),
    "bert_layer": lambda: built(small_bert),
    "adam": lambda: models.adam([(16, 8), (8,), (3, 5), (40,)]),
    "layernorm_backward": lambda: models.layernorm_backward(24, 40),
    "stacked_bert": lambda: built(lambda b: small_bert(b, layers=2)),
}


def test_small_suite_covers_the_suite() -> None:
    from bench.graphs import SUITE

    assert set(SMALL_SUITE) == set(SUITE)


# Encoder layers chain GEMMs into LayerNorms that amplify rounding: there the f32 reference
# itself is 3e-5 away from a float64 one (the simulated kernels agree with the CPU backend to 1e-6).
DEEP_TOLERANCE = {"bert_layer": 2e-4, "stacked_bert": 2e-4}


@pytest.mark.parametrize("name", sorted(SMALL_SUITE))
def test_suite_graph(name: str, tiny_gpu, rng) -> None:
    module = SMALL_SUITE[name]()
    run_pipeline(module, ["canonicalize", "cse", "fusion-plan{target=gpu}"])
    check_against_reference(module, tiny_gpu, rng, tolerance=DEEP_TOLERANCE.get(name))


# --- mlfuse.compile ---------------------------------------------------------------------------


def test_compile_gpu_sim_target(rng) -> None:
    import mlfuse

    text = (ROOT / "tests" / "gpu_graphs" / "layernorm.mlir").read_text()
    text = shrink(text, {256: 5, 1024: 96})
    exe = mlfuse.compile(text, target="gpu-sim")
    x = random_array(rng, (5, 96))
    (y,) = exe(x)
    (want,) = reference(text)(x)
    np.testing.assert_allclose(y, want, rtol=RTOL, atol=ATOL)


# --- the GPU runtime's host side, with the simulator as its device ------------------------------


@pytest.mark.parametrize("name", ["center_global", "colsum", "injective", "short_rows"])
def test_runtime_on_the_simulated_device(name: str, tiny_gpu, rng) -> None:
    """GpuExecutable's uploads, reused scratch buffers, memsets, one-wave grids and downloads."""
    text = shrink((ROOT / "tests" / "gpu_graphs" / f"{name}.mlir").read_text(), SHRUNK[name])
    arrays = inputs_for(parse_module(text), rng)
    module = parse_module(text)
    map_module(module, tiny_gpu)
    driver = SimulatedDriver(module, tiny_gpu)
    exe = GpuExecutable(module, driver=driver)
    want = reference(text)(*arrays)
    first = exe(*arrays)
    again = exe(*arrays)  # scratch buffers are reused: accumulators must be cleared again
    for a, b, w in zip(first, again, want):
        np.testing.assert_allclose(a, w, rtol=RTOL, atol=ATOL)
        np.testing.assert_array_equal(a, b)
    if exe.wave:  # cooperative grids are cut to one wave: 4 SMs x 8 blocks of 256 threads
        assert all(s.grid[0] <= 4 * 8 for s in driver.stats if s.kernel in exe.wave)
    assert exe.time(*arrays, repeat=1) > 0


def test_compile_for_gpu_with_the_simulated_driver(monkeypatch, rng) -> None:
    """target="gpu" end to end (copies of returned inputs and repeated results included)."""
    import mlfuse

    monkeypatch.setenv("MLFUSE_GPU_DRIVER", "simulator")

    def build(b: GraphBuilder) -> None:
        x = b.input("x", (9, 20))
        e = b.exp(x)
        b.output(e, x, e)

    module = built(build)
    x = random_array(rng, (9, 20))
    exe = mlfuse.compile(module, target="gpu")
    assert exe.driver.name == "simulator"
    got = exe(x)
    for g, w in zip(got, reference(module)(x)):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


def test_runtime_keeps_device_arrays_on_the_device(rng) -> None:
    """Inputs given as device arrays (__cuda_array_interface__): results come back as DeviceArrays."""
    text = shrink((ROOT / "tests" / "gpu_graphs" / "layernorm.mlir").read_text(), {256: 5, 1024: 96})
    module = parse_module(text)
    map_module(module, target("sm_90"))
    driver = SimulatedDriver(module)
    exe = GpuExecutable(module, driver=driver)
    x = random_array(rng, (5, 96))
    address = driver.alloc(x.nbytes)
    driver.upload(address, x)
    (y,) = exe(DeviceArray(x.shape, x.dtype, address, address))
    assert isinstance(y, DeviceArray) and y.__cuda_array_interface__["shape"] == (5, 96)
    host = np.empty(y.shape, y.dtype)
    driver.download(host, y.pointer)
    np.testing.assert_allclose(host, reference(text)(x)[0], rtol=RTOL, atol=ATOL)
    with pytest.raises(ValueError, match="16-byte aligned"):
        exe(DeviceArray(x.shape, x.dtype, address + 4, address))
    with pytest.raises(ValueError, match="float64"):
        exe(DeviceArray(x.shape, np.dtype(np.float64), address, address))


# --- scalar semantics (sim/semantics.py), one op at a time -------------------------------------


def scalar_op(op_type, *operand_types, **kwargs):
    from xdsl.utils.test_value import create_ssa_value

    return op_type(*(create_ssa_value(t) for t in operand_types), **kwargs)


def test_integer_semantics_wrap_truncate_and_fault() -> None:
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import i8, i32

    assert semantics.evaluate(scalar_op(arith.AddiOp, i32, i32), [2**31 - 1, 1]) == -(2**31)
    assert semantics.evaluate(scalar_op(arith.DivSIOp, i32, i32), [-7, 2]) == -3  # toward zero
    assert semantics.evaluate(scalar_op(arith.RemSIOp, i32, i32), [-7, 2]) == -1
    assert not semantics.evaluate(scalar_op(arith.CmpiOp, i32, i32, arg="ult"), [-1, 1])  # 0xffffffff < 1
    assert semantics.evaluate(scalar_op(arith.ExtUIOp, i8, target_type=i32), [-1]) == 255
    with pytest.raises(semantics.Fault, match="integer division by zero"):
        semantics.evaluate(scalar_op(arith.DivUIOp, i32, i32), [1, 0])


def test_float_semantics_follow_llvm() -> None:
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import f32, i32

    nan, zero = np.float32("nan"), np.float32(0.0)
    assert semantics.evaluate(scalar_op(arith.MaximumfOp, f32, f32), [nan, zero]) != 0  # NaN wins
    got = semantics.evaluate(scalar_op(arith.MaximumfOp, f32, f32), [-zero, zero])
    assert got == 0 and not np.signbit(got)  # +0 above -0
    assert semantics.evaluate(scalar_op(arith.MaxnumfOp, f32, f32), [nan, np.float32(2)]) == 2  # a number wins
    assert semantics.evaluate(scalar_op(arith.CmpfOp, f32, f32, arg="uno"), [nan, zero])
    assert semantics.evaluate(scalar_op(arith.FPToSIOp, f32, target_type=i32), [np.float32(1e10)]) == 2**31 - 1
    assert semantics.evaluate(scalar_op(arith.FPToSIOp, f32, target_type=i32), [nan]) == 0


def test_scalar_semantics_are_one_registry_of_arith_and_math_ops() -> None:
    from xdsl.dialects.builtin import TensorType, f32

    import mlfuse.backend.gpu.simulator as old_path
    from mlfuse.backend.gpu import sim

    assert {t.name.split(".")[0] for t in semantics.SCALAR_SEMANTICS} == {"arith", "math"}
    with pytest.raises(ValueError, match="no scalar semantics for 'graph.neg'"):
        semantics.evaluate(scalar_op(graph.NegOp, TensorType(f32, [2])), [np.ones(2, np.float32)])
    # the module the simulator used to be re-exports the package
    assert old_path.compile_gpu_sim is sim.compile_gpu_sim and old_path.SimulationError is SimulationError

