"""The loop-level passes compute what the untransformed nests compute.

Every function of the lit tests of loop-tile, loop-post-tile-fuse,
loop-storage-reduce, loop-tile-after-fuse and loop-startup-fuse is JIT-compiled
with and without the passes and run on the same random buffers (arguments that
are written in place included); all buffers must come out bit-identical (tiling
and fusion never reorder the operations that produce one element). Sizes there
are not multiples of the tile sizes, so boundary tiles are exercised; more tile
sizes (1x1 tiles, one tile, a tile larger than the buffer) are run on a 2-stage
blur, with threads.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import IndexType, MemRefType

import mlfuse
from mlfuse.api import parse, run_pipeline
from mlfuse.backend import cpu
from mlfuse.backend.llvm_translate import to_llvmlite
from mlfuse.dialects.graph import numpy_dtype

LIT = Path(__file__).resolve().parent.parent / "filecheck" / "passes"
LOWER = ["convert-loop-to-scf", "expand-math", "convert-to-llvm"]
_ENGINES = []  # keep JIT engines alive: freeing one while another runs is not safe


def split_cases(name: str) -> list[str]:
    text = (LIT / name).read_text()
    return [c for c in text.split("// -----") if "func.func" in c]


def run(text: str, passes: list[str], seed: int = 0) -> list[np.ndarray]:
    module = parse(text)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    name = fn.sym_name.data
    rng = np.random.default_rng(seed)
    args, c_args, c_types = [], [], []
    for t in fn.function_type.inputs.data:
        if isinstance(t, MemRefType):
            a = rng.uniform(0.5, 1.5, tuple(t.get_shape())).astype(numpy_dtype(t.get_element_type()))
            args.append(a)
            c_args.append(a.ctypes.data)
            c_types.append(ctypes.c_void_p)
        else:
            assert isinstance(t, IndexType)
            c_args.append(0)
            c_types.append(ctypes.c_int64)
    run_pipeline(module, [*passes, *LOWER])
    jit = cpu.JitModule(cpu.compile_object(to_llvmlite(module)))
    _ENGINES.append(jit)
    ctypes.CFUNCTYPE(None, *c_types)(jit.address(name))(*c_args)
    return args


def assert_same(text: str, passes: list[str]) -> None:
    want = run(text, [])
    got = run(text, passes)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


FUSE = ["loop-tile{sizes=8,16}", "loop-post-tile-fuse", "loop-storage-reduce"]
CASES = [
    ("loop-tile.mlir", ["loop-tile{sizes=32,16}"]),
    ("loop-tile.mlir", ["loop-tile{sizes=8,8 shape=parallelogram}"]),
    ("loop-post-tile-fuse.mlir", FUSE),
    ("loop-post-tile-fuse-groups.mlir",
     ["loop-startup-fuse{scope=group}", "loop-tile{sizes=8,16 fusible-only=true scope=group}",
      "loop-post-tile-fuse{scope=group}", "loop-storage-reduce"]),
    ("loop-storage-reduce.mlir", ["loop-storage-reduce"]),
    ("loop-tile-after-fuse.mlir", ["loop-tile-after-fuse{sizes=8,16}"]),
    ("loop-startup-fuse.mlir", ["loop-startup-fuse"]),
    ("loop-coalesce.mlir", ["loop-coalesce"]),
    ("loop-delinearize.mlir", ["loop-delinearize"]),
    ("loop-forward-copies.mlir", ["loop-forward-copies"]),
]


@pytest.mark.parametrize("lit_file, passes", CASES, ids=[f"{f}:{p[0]}" for f, p in CASES])
def test_lit_cases_compute_the_same(lit_file, passes):
    for case in split_cases(lit_file):
        assert_same(case, passes)


def blur(h: int, w: int) -> str:
    """Two 3-tap passes: rows of %x, then columns of the intermediate."""
    x, bx, y = f"memref<{h + 2}x{w + 2}xf32>", f"memref<{h + 2}x{w}xf32>", f"memref<{h}x{w}xf32>"
    return f"""
func.func @blur(%x: {x}, %y: {y}) {{
  %bx = memref.alloc() : {bx}
  loop.nest "blur_x" lower [0, 0] upper [{h + 2}, {w}] iterators ["parallel", "parallel"] ins(%x, %x, %x : {x}, {x}, {x}) outs(%bx : {bx}) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1 + 1)>, affine_map<(d0, d1) -> (d0, d1 + 2)>, affine_map<(d0, d1) -> (d0, d1)>] {{
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %c : f32
    loop.yield %t : f32
  }}
  loop.nest "blur_y" lower [0, 0] upper [{h}, {w}] iterators ["parallel", "parallel"] ins(%bx, %bx, %bx : {bx}, {bx}, {bx}) outs(%y : {y}) maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0 + 1, d1)>, affine_map<(d0, d1) -> (d0 + 2, d1)>, affine_map<(d0, d1) -> (d0, d1)>] {{
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.mulf %a, %b : f32
    %t = arith.subf %s, %c : f32
    loop.yield %t : f32
  }}
  memref.dealloc %bx : {bx}
  func.return
}}
"""


@pytest.mark.parametrize("h, w, sizes", [(1, 1, "1,1"), (13, 37, "1,1"), (13, 37, "4,16"), (16, 32, "16,32"),
                                         (17, 33, "16,32"), (5, 7, "64,64"), (300, 301, "32,64")])
def test_blur_tiles(h, w, sizes):
    text = blur(h, w)
    # 1-row tiles recompute the 3-row halo: 3x the producer, over the default limit
    passes = [f"loop-tile{{sizes={sizes}}}", "loop-post-tile-fuse{max-recompute=4}", "loop-storage-reduce"]
    module = parse(text)
    run_pipeline(module, passes)
    from mlfuse.api import module_text

    ir = module_text(module)
    tiled = any(s < e for s, e in zip(map(int, sizes.split(",")), (h, w)))
    assert ("memref.alloc()" not in ir) == tiled  # fused and reduced whenever there are tiles
    threads = cpu.team_size()
    cpu.set_num_threads(2)  # the band really runs in parallel (the 300x301 case has the work)
    try:
        assert_same(text, passes)
    finally:
        cpu.set_num_threads(threads)


def test_a_band_of_more_tiles_than_its_recompute_check_evaluates_is_not_fused(monkeypatch):
    """The recompute guard evaluates a hull in every tile at once: past MAX_CHECKED_TILES
    tiles (a fuzzed pool over 2^31 - 1 channels asked for 16 GiB) the fusion is refused,
    and the unfused band computes the same."""
    from mlfuse.poly import fusion

    passes = ["loop-tile{sizes=1,1}", "loop-post-tile-fuse{max-recompute=4}", "loop-storage-reduce"]
    monkeypatch.setattr(fusion, "MAX_CHECKED_TILES", 13 * 37 - 1)
    module = parse(blur(13, 37))
    run_pipeline(module, passes)
    from mlfuse.api import module_text

    assert "memref.alloc()" in module_text(module)  # the intermediate stays whole
    assert_same(blur(13, 37), passes)


def test_bounds_may_use_outer_dimensions_only():
    """A bound of dimension k may use d0..d(k-1) (parallelogram tiles), not itself or inner ones."""
    from mlfuse.diagnostics import Diagnostic

    def nest(lower0: str, lower1: str) -> str:
        return f"""func.func @f(%y: memref<8x8xf32>) {{
  loop.nest "n" lower [{lower0}, {lower1}] upper [8, 8] iterators ["parallel", "parallel"] ins() outs(%y : memref<8x8xf32>) maps [affine_map<(d0, d1) -> (d0, d1)>] {{
  ^bb0(%o: f32):
    %c = arith.constant 1.0 : f32
    loop.yield %c : f32
  }}
  func.return
}}"""

    parse(nest("0", "affine_map<(d0) -> (d0)>"))  # a triangle: fine
    with pytest.raises(Diagnostic, match="at most the 0 outer dimensions"):
        parse(nest("affine_map<(d0) -> (d0)>", "0"))
    # and the triangle runs: y[i, j] = 1 for j >= i only, the rest keeps its random values
    y = run(nest("0", "affine_map<(d0) -> (d0)>"), [], seed=0)[0]
    before = np.random.default_rng(0).uniform(0.5, 1.5, (8, 8)).astype(np.float32)
    np.testing.assert_array_equal(y, np.where(np.triu(np.ones((8, 8), bool)), np.float32(1), before))


GATHER_THEN_STENCIL = """
func.func @main(%t: tensor<16x12xf32>, %ids: tensor<8xi64>) -> tensor<8x10xf32> {
  %g = graph.gather %t, %ids {axis = 0 : i64} : (tensor<16x12xf32>, tensor<8xi64>) -> tensor<8x12xf32>
  %a = graph.slice %g {start = array<i64: 0, 0>, stop = array<i64: 8, 10>, step = array<i64: 1, 1>} : tensor<8x12xf32> -> tensor<8x10xf32>
  %b = graph.slice %g {start = array<i64: 0, 2>, stop = array<i64: 8, 12>, step = array<i64: 1, 1>} : tensor<8x12xf32> -> tensor<8x10xf32>
  %s = graph.add %a, %b : tensor<8x10xf32>
  func.return %s : tensor<8x10xf32>
}
"""


def test_post_tiling_leaves_gathers_unfused_and_correct():
    """A gather's reads are not affine: tiling and post-tiling fusion must leave its nest alone
    (they raised Unsupported from islconv.domain), and the stencil after it still runs right."""
    from mlfuse.pipelines import cpu_stencil_pipeline

    f = mlfuse.compile(GATHER_THEN_STENCIL, passes=cpu_stencil_pipeline("post-tile", sizes=(4, 4)))
    rng = np.random.default_rng(5)
    t = rng.standard_normal((16, 12)).astype(np.float32)
    ids = rng.integers(-16, 16, 8).astype(np.int64)
    out = np.full((8, 10), np.nan, np.float32)
    f(t, ids, out=[out])
    (want,) = mlfuse.reference(GATHER_THEN_STENCIL)(t, ids)
    np.testing.assert_array_equal(out, want)


GATHER_LIVE_OUT = """
func.func @main(%t: tensor<16x12xf32>, %ids: tensor<8x2xi64>) -> tensor<8x12xf32> {
  %a = graph.slice %ids {start = array<i64: 0, 0>, stop = array<i64: 8, 1>, step = array<i64: 1, 1>} : tensor<8x2xi64> -> tensor<8x1xi64>
  %b = graph.slice %ids {start = array<i64: 0, 1>, stop = array<i64: 8, 2>, step = array<i64: 1, 1>} : tensor<8x2xi64> -> tensor<8x1xi64>
  %s = graph.add %a, %b : tensor<8x1xi64>
  %r = graph.reshape %s : tensor<8x1xi64> -> tensor<8xi64>
  %g = graph.gather %t, %r {axis = 0 : i64} : (tensor<16x12xf32>, tensor<8xi64>) -> tensor<8x12xf32>
  func.return %g : tensor<8x12xf32>
}
"""


def test_tiling_leaves_a_gather_live_out_untiled():
    """Shifted slices send this graph to the stencil pipeline; the gather writing the live-out
    must not be tiled (islconv.domain raised Unsupported on it: an internal error)."""
    from mlfuse.pipelines import cpu_stencil_pipeline

    f = mlfuse.compile(GATHER_LIVE_OUT, passes=cpu_stencil_pipeline("post-tile", sizes=(4, 4)))
    rng = np.random.default_rng(6)
    t = rng.standard_normal((16, 12)).astype(np.float32)
    ids = rng.integers(0, 8, (8, 2)).astype(np.int64)
    out = np.full((8, 12), np.nan, np.float32)
    f(t, ids, out=[out])
    (want,) = mlfuse.reference(GATHER_LIVE_OUT)(t, ids)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("extent", [1, 100, 512, 513, 576, 960, 1000, 1024, 1280, 3072, 50176])
def test_rows_are_cut_into_equal_tiles(extent):
    """A row longer than ROW_MAX is cut into the fewest pieces of at most ROW_MAX, each a
    multiple of ROW_MULTIPLE and all but the last of one length, the last no shorter
    than one multiple below it (576: 288 and 288, not 512 and 64)."""
    from mlfuse.poly.tiling import ROW_MAX, ROW_MULTIPLE, balanced_row

    tile = balanced_row(extent)
    if extent <= ROW_MAX:
        assert tile == extent
        return
    pieces = -(-extent // tile)
    assert tile % ROW_MULTIPLE == 0 and tile <= ROW_MAX
    assert pieces == -(-extent // ROW_MAX)  # no more pieces than ROW_MAX-long ones need
    assert extent - (pieces - 1) * tile > tile - ROW_MULTIPLE * pieces  # the last piece is nearly full
