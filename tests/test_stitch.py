"""Stitched code generation: kernel counts (tinygrad-style) and numerics of fused groups.

Every suite graph, planned by every planner and compiled for the CPU, matches the
numpy reference on random inputs (fp32: rtol 1e-4, atol 1e-5 of the output's
magnitude: sums over rows of 768-3072 elements reassociate), also at sizes that
are not multiples of the vector width or of the thread chunk.
"""

from __future__ import annotations

import numpy as np
import pytest

import mlfuse
from bench.graphs import SUITE, models, random_inputs
from mlfuse.api import run_pipeline
from mlfuse.dialects import loop

PLANNERS = ["ilp", "xla", "tvm", "greedy", "none"]


def kernels(module, planner: str = "ilp"):
    """Top-level kernels after planning and convert-graph-to-loop, and the unstitched groups."""
    run_pipeline(
        module,
        ["canonicalize", "cse", f"fusion-plan{{planner={planner} target=cpu summary=false}}", "convert-graph-to-loop"],
    )
    fn = next(op for op in module.ops if op.name == "func.func")
    ks = [op for op in fn.body.block.ops if isinstance(op, loop.BandOp | loop.NestOp)]
    unstitched = fn.attributes.get("mlfuse.unstitched")
    return ks, [u.data for u in unstitched.data] if unstitched else []


@pytest.mark.parametrize("name", ["layernorm", "softmax", "bias_residual_layernorm", "rmsnorm"])
def test_row_normalizations_are_one_band(name):
    ks, unstitched = kernels(SUITE[name].build())
    assert unstitched == []
    assert len(ks) == 1 and isinstance(ks[0], loop.BandOp)


def test_softmax_phases():
    """max (and its NaN scan), then exp-and-sum (exp kept in a row scratch; a row of 1024
    is shorter than ROW_BLOCK_MIN: summed unblocked), then the division."""
    (band,), _ = kernels(SUITE["softmax"].build())
    nests = [op for op in band.block.ops if isinstance(op, loop.NestOp)]
    row_nests = [n.nest_name.data.rsplit(".", 1)[-1] for n in nests if n.rank >= 1]
    assert row_nests == ["0_reduce_max", "nan_scan", "1_reduce_sum", "2_rows"]
    allocas = [op for op in band.block.ops if op.name == "memref.alloca"]
    shapes = sorted((tuple(a.memref.type.get_shape()), str(a.memref.type.get_element_type())) for a in allocas)
    # two row scalars, the max's NaN flag, one row of exp values
    assert shapes == [((1,), "f32"), ((1,), "f32"), ((1,), "i32"), ((1024,), "f32")]


def test_elementwise_chain_is_one_nest():
    b = models.GraphBuilder()
    x = b.input("x", (64, 130))
    w = b.input("w", (130,))
    y = b.gelu(x * w + 1.0, approximate="tanh")
    b.output(b.tanh(y) * 0.5)
    ks, unstitched = kernels(b.module())
    assert unstitched == [] and len(ks) == 1 and isinstance(ks[0], loop.NestOp)
    assert ks[0].rank == 2


def test_attention_scores_mask_softmax_fuse_with_their_gemms():
    ks, unstitched = kernels(SUITE["attention"].build())
    assert unstitched == []
    assert len(ks) <= 4


# Adam's 24 parameter chains under the rule planners and none: 8 of them (square, wide and tall
# matrices, vectors, a 2-row matrix; repeated shapes for the chains greedy merges) take the same
# paths at under half the compile time; the ILP, which packs chains horizontally, gets all 24.
SMALL_ADAM = [(256, 256), (256,), (256, 256), (256,), (256, 1024), (1024,), (1024, 256), (2, 256)]


@pytest.mark.parametrize("name", [n for n in SUITE if n != "stacked_bert"])
@pytest.mark.parametrize("planner", PLANNERS)
def test_suite_graph_matches_reference(name, planner):
    module = models.adam(SMALL_ADAM) if name == "adam" and planner != "ilp" else SUITE[name].build()
    inputs = random_inputs(module, seed=7)
    want = mlfuse.reference(module)(*inputs)
    fn = mlfuse.compile(module.clone(), planner=planner)
    outs = [np.full(w.shape, np.nan, w.dtype) for w in want]
    got = fn(*inputs, out=outs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * magnitude(w))


def magnitude(w: np.ndarray) -> float:
    finite = np.abs(w[np.isfinite(w)])
    return float(finite.max(initial=1.0))


@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 7), (5, 1023), (67, 33), (2, 4099)])
@pytest.mark.parametrize("graph_fn", [models.layernorm, models.softmax, models.rmsnorm, models.bias_residual_layernorm])
def test_row_kernels_at_odd_sizes(graph_fn, rows, cols):
    module = graph_fn(rows, cols)
    inputs = random_inputs(module, seed=rows * 1000 + cols)
    want = mlfuse.reference(module)(*inputs)
    got = mlfuse.compile(module.clone())(*inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * float(np.max(np.abs(w), initial=1.0)))


def test_cpu_plans_only_stitchable_kernels():
    """LayerNorm backward mixes row and column reductions: for the CPU the planner
    splits them into kernels the code generator can stitch (none falls back)."""
    module = SUITE["layernorm_backward"].build()
    ks, unstitched = kernels(module.clone())
    assert unstitched == [] and len(ks) <= 4
    inputs = random_inputs(module, seed=3)
    want = mlfuse.reference(module)(*inputs)
    got = mlfuse.compile(module)(*inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * magnitude(w))


def test_structural_problems_are_named():
    from mlfuse.conversion.group_to_loop import structural_problem

    module = SUITE["layernorm_backward"].build()
    fn = next(op for op in module.ops if op.name == "func.func")
    ops = [op for op in fn.body.block.ops if op.name != "func.return"]
    assert "different shapes or axes" in structural_problem(ops)
    softmax = next(op for op in SUITE["softmax"].build().ops if op.name == "func.func")
    assert structural_problem([op for op in softmax.body.block.ops if op.name != "func.return"]) is None


@pytest.mark.parametrize("rows", [512, 1000, 4099])
def test_blocked_column_reductions(rows):
    """Tall column reductions run by row blocks with ordered partial sums (boundary block included)."""
    from mlfuse.backend import cpu

    b = models.GraphBuilder()
    x = b.input("x", (rows, 33))
    y = b.input("y", (rows, 33))
    p = b.tanh(x) * y
    b.output(b.sum(p, axis=0), b.max(x, axis=0, keepdims=True), b.mean(x * y, axis=0), p)
    module = b.module()
    ks, unstitched = kernels(module.clone())
    assert unstitched == [] and any(isinstance(k, loop.BandOp) for k in ks)
    inputs = random_inputs(module, seed=rows)
    want = mlfuse.reference(module)(*inputs)
    results = []
    for threads in (1, 2):
        cpu.set_num_threads(threads)
        got = mlfuse.compile(module.clone())(*inputs)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * magnitude(w) * np.sqrt(rows))
        results.append(got)
    for a, c in zip(*results):  # the partials combine in block order: same bits for any thread count
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("kind", ["max", "min"])
def test_row_max_min_propagate_nan_like_numpy(kind):
    """Row max/min accumulate with maxnum/minnum (they vectorize) and a NaN scan restores numpy's NaN."""
    b = models.GraphBuilder()
    x = b.input("x", (6, 37))
    r = getattr(b, kind)(b.tanh(x), axis=-1, keepdims=True)
    b.output(x - r, r)
    module = b.module()
    xs = np.random.default_rng(5).standard_normal((6, 37)).astype(np.float32)
    xs[2, 11] = np.nan
    xs[4, 0] = np.inf
    want = mlfuse.reference(module)(xs)
    got = mlfuse.compile(module.clone())(xs)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, equal_nan=True)


def dangling_uses(module) -> list[str]:
    """Uses of the module's values by ops that are not in the module (left detached)."""
    inside = {id(op) for op in module.walk()}
    found = []
    for op in module.walk():
        values = [*op.results, *(a for r in op.regions for b in r.blocks for a in b.args)]
        found += [f"{op.name} used by {u.operation.name}" for v in values for u in v.uses if id(u.operation) not in inside]
    return found


@pytest.mark.parametrize("n", [8, 17])
def test_fallback_half_way_leaves_nothing_behind(n):
    """A row group that falls back after emitting part of its band (the transposed
    broadcast needs another row's sum) erases the band's nests too: none is left
    holding a use of the caller's buffers (it once became a stray cast in LLVM)."""
    src = f"""
    func.func @main(%x: tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32> {{
      %s = graph.reduce_sum %x {{axes = array<i64: 1>, keepdims}} : tensor<{n}x{n}xf32> -> tensor<{n}x1xf32>
      %b = graph.broadcast %s {{dims = array<i64: 0, 1>}} : tensor<{n}x1xf32> -> tensor<{n}x{n}xf32>
      %t = graph.transpose %b {{perm = array<i64: 1, 0>}} : tensor<{n}x{n}xf32> -> tensor<{n}x{n}xf32>
      func.return %t : tensor<{n}x{n}xf32>
    }}"""
    module = mlfuse.parse(src)
    _, unstitched = kernels(module)
    assert any("needed by another row" in u for u in unstitched)
    assert dangling_uses(module) == []
    x = np.random.default_rng(n).standard_normal((n, n)).astype(np.float32)
    (got,) = mlfuse.compile(src)(x)
    np.testing.assert_allclose(got, np.broadcast_to(x.sum(1, keepdims=True), (n, n)).T, rtol=1e-5, atol=1e-5 * n)


def masked_softmax_pack(heads: int, seq: int, dim: int) -> str:
    """BERT's first attention group as planned: a mask gathered from ids and selected
    (yielded for the next layer, 1x1xSxS), the scores' masked softmax (rows of S), and
    an independent part, V's bias add and head transpose (1xHxSxD): neither extra
    output is a row of the softmax."""
    s, m, ids = f"tensor<1x{heads}x{seq}x{seq}xf32>", f"tensor<1x1x{seq}x{seq}xf32>", f"tensor<1x1x1x{seq}xi64>"
    v, vt = f"tensor<1x{seq}x{heads}x{dim}xf32>", f"tensor<1x{heads}x{seq}x{dim}xf32>"
    return f"""func.func @main(%t: tensor<{seq}x1xi1>, %i: {ids}, %x: {s}, %vin: {v}, %bias: {v}) -> ({m}, {vt}, {s}) {{
  %mask, %vout, %p = fusion.group "masked_softmax_pack" kind = "horizontal" (%t, %i, %x, %vin, %bias) : (tensor<{seq}x1xi1>, {ids}, {s}, {v}, {v}) -> ({m}, {vt}, {s}) {{
  ^bb0(%ta: tensor<{seq}x1xi1>, %ia: {ids}, %xa: {s}, %va: {v}, %ba: {v}):
    %zero = graph.constant dense<0.000000e+00> : tensor<f32>
    %low = graph.constant dense<-3.000000e+04> : tensor<f32>
    %g = graph.gather %ta, %ia {{axis = 0 : i64}} : (tensor<{seq}x1xi1>, {ids}) -> tensor<1x1x1x{seq}x1xi1>
    %gr = graph.reshape %g : tensor<1x1x1x{seq}x1xi1> -> tensor<1x1x1x{seq}xi1>
    %gb = graph.broadcast %gr {{dims = array<i64: 0, 1, 2, 3>}} : tensor<1x1x1x{seq}xi1> -> tensor<1x1x{seq}x{seq}xi1>
    %zb = graph.broadcast %zero {{dims = array<i64>}} : tensor<f32> -> {m}
    %lb = graph.broadcast %low {{dims = array<i64>}} : tensor<f32> -> {m}
    %mk = graph.select %gb, %zb, %lb : tensor<1x1x{seq}x{seq}xi1>, {m}
    %mb = graph.broadcast %mk {{dims = array<i64: 0, 1, 2, 3>}} : {m} -> {s}
    %a = graph.add %xa, %mb : {s}
    %mx = graph.reduce_max %a {{axes = array<i64: 3>, keepdims}} : {s} -> tensor<1x{heads}x{seq}x1xf32>
    %mxb = graph.broadcast %mx {{dims = array<i64: 0, 1, 2, 3>}} : tensor<1x{heads}x{seq}x1xf32> -> {s}
    %d = graph.sub %a, %mxb : {s}
    %e = graph.exp %d : {s}
    %sm = graph.reduce_sum %e {{axes = array<i64: 3>, keepdims}} : {s} -> tensor<1x{heads}x{seq}x1xf32>
    %smb = graph.broadcast %sm {{dims = array<i64: 0, 1, 2, 3>}} : tensor<1x{heads}x{seq}x1xf32> -> {s}
    %pr = graph.div %e, %smb : {s}
    %vb = graph.add %va, %ba : {v}
    %vtr = graph.transpose %vb {{perm = array<i64: 0, 2, 1, 3>}} : {v} -> {vt}
    fusion.yield %mk, %vtr, %pr : {m}, {vt}, {s}
  }}
  func.return %mask, %vout, %p : {m}, {vt}, {s}
}}"""


@pytest.mark.parametrize("heads,seq,dim", [(2, 16, 8), (3, 33, 5)])
def test_outputs_apart_from_the_rows_get_nests_of_their_own(heads, seq, dim):
    """Outputs that no reduction precedes and that are not rows (the mask, the other
    part's transpose) are written by nests of their own before the band, and the band
    reads the mask there instead of gathering it again for every element: one kernel
    per output shape, no fallback to a nest per op. Compared with the reference on
    random data, outputs poisoned (float32: rtol 1e-5, the exp polynomial and sums of
    `seq` terms in another order)."""
    src = masked_softmax_pack(heads, seq, dim)
    module = mlfuse.parse(src)
    run_pipeline(module, ["convert-graph-to-loop"])
    fn = next(op for op in module.ops if op.name == "func.func")
    assert "mlfuse.unstitched" not in fn.attributes
    ks = [op for op in fn.body.block.ops if isinstance(op, loop.BandOp | loop.NestOp)]
    assert [type(k) for k in ks] == [loop.NestOp, loop.NestOp, loop.BandOp]
    table = fn.body.block.args[0]
    assert not any(band.is_ancestor(use.operation) for band in ks[2:] for use in table.uses), "the band re-gathers the mask"

    rng = np.random.default_rng(seq)
    inputs = [
        rng.random((seq, 1)) < 0.7,
        rng.integers(-seq, seq, (1, 1, 1, seq)),
        rng.standard_normal((1, heads, seq, seq)).astype(np.float32),
        rng.standard_normal((1, seq, heads, dim)).astype(np.float32),
        rng.standard_normal((1, seq, heads, dim)).astype(np.float32),
    ]
    compiled = mlfuse.compile(src)
    outs = [np.full(spec.shape, np.nan, spec.dtype) for spec in compiled.outputs]
    got = compiled(*inputs, out=outs)
    want = mlfuse.reference(src)(*inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("seq", [128, 40])
def test_stitched_transposes_of_the_innermost_dimension_run_by_tiles(seq):
    """Attention's K^T split out of a packed QKV product (slice, reshape, transpose that
    moves the innermost dimension) is a band of 8x8 tiles, next to Q's plain nest
    (a transpose that keeps the innermost dimension); the same bits as the reference."""
    src = f"""func.func @main(%x: tensor<{seq}x768xf32>) -> (tensor<1x4x64x{seq}xf32>, tensor<1x4x{seq}x64xf32>) {{
  %kt, %qt = fusion.group "qk_split" kind = "loop" (%x) : (tensor<{seq}x768xf32>) -> (tensor<1x4x64x{seq}xf32>, tensor<1x4x{seq}x64xf32>) {{
  ^bb0(%a: tensor<{seq}x768xf32>):
    %k = graph.slice %a {{start = array<i64: 0, 256>, stop = array<i64: {seq}, 512>, step = array<i64: 1, 1>}} : tensor<{seq}x768xf32> -> tensor<{seq}x256xf32>
    %kr = graph.reshape %k : tensor<{seq}x256xf32> -> tensor<1x{seq}x4x64xf32>
    %t = graph.transpose %kr {{perm = array<i64: 0, 2, 3, 1>}} : tensor<1x{seq}x4x64xf32> -> tensor<1x4x64x{seq}xf32>
    %q = graph.slice %a {{start = array<i64: 0, 0>, stop = array<i64: {seq}, 256>, step = array<i64: 1, 1>}} : tensor<{seq}x768xf32> -> tensor<{seq}x256xf32>
    %qr = graph.reshape %q : tensor<{seq}x256xf32> -> tensor<1x{seq}x4x64xf32>
    %u = graph.transpose %qr {{perm = array<i64: 0, 2, 1, 3>}} : tensor<1x{seq}x4x64xf32> -> tensor<1x4x{seq}x64xf32>
    fusion.yield %t, %u : tensor<1x4x64x{seq}xf32>, tensor<1x4x{seq}x64xf32>
  }}
  func.return %kt, %qt : tensor<1x4x64x{seq}xf32>, tensor<1x4x{seq}x64xf32>
}}"""
    module = mlfuse.parse(src)
    run_pipeline(module, ["convert-graph-to-loop"])
    fn = next(op for op in module.ops if op.name == "func.func")
    assert "mlfuse.unstitched" not in fn.attributes
    ks = [op for op in fn.body.block.ops if isinstance(op, loop.BandOp | loop.NestOp)]
    assert [type(k) for k in ks] == [loop.BandOp, loop.NestOp]
    (tile,) = [op for op in ks[0].block.ops if isinstance(op, loop.NestOp)]
    assert tile.rank == 2
    x = np.random.default_rng(seq).standard_normal((seq, 768)).astype(np.float32)
    compiled = mlfuse.compile(src)
    outs = [np.full(spec.shape, np.nan, spec.dtype) for spec in compiled.outputs]
    got = compiled(x, out=outs)
    want = mlfuse.reference(src)(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
