"""graph-duplicate-broadcasts end to end: two attention-like softmaxes that read one
shared mask broadcast, with a large matmul between them (so they are two kernels).
With a copy of the broadcast per reader, no kernel writes the broadcast out for the
other: only the 128x128 mask crosses between kernels, not its 4x128x128 broadcast."""

from __future__ import annotations

import numpy as np

import mlfuse
from mlfuse import pipelines
from mlfuse.api import aligned_empty, run_pipeline
from mlfuse.dialects import fusion, graph

HEADS, SEQ = 4, 128
SCORES = f"tensor<1x{HEADS}x{SEQ}x{SEQ}xf32>"
MASK = f"tensor<1x1x{SEQ}x{SEQ}xf32>"
FLAT = f"tensor<{HEADS * SEQ}x{SEQ}xf32>"

# softmax(scores * 0.125 + mask) twice, the second on the first's product with w
# (2 * 512 * 128 * 1024 flops: a large GEMM, never fused)
SOURCE = f"""func.func @main(%s: {SCORES}, %m: {MASK}, %w: tensor<{SEQ}x1024xf32>, %v: tensor<1024x{SEQ}xf32>) -> {SCORES} {{
  %scale = graph.constant dense<1.250000e-01> : tensor<f32>
  %sb = graph.broadcast %scale {{dims = array<i64>}} : tensor<f32> -> {SCORES}
  %mb = graph.broadcast %m {{dims = array<i64: 0, 1, 2, 3>}} : {MASK} -> {SCORES}
  %a0 = graph.mul %s, %sb : {SCORES}
  %a1 = graph.add %a0, %mb : {SCORES}
  %e1 = graph.exp %a1 : {SCORES}
  %f1 = graph.reshape %e1 : {SCORES} -> {FLAT}
  %h = graph.matmul %f1, %w : ({FLAT}, tensor<{SEQ}x1024xf32>) -> tensor<{HEADS * SEQ}x1024xf32>
  %g = graph.matmul %h, %v : (tensor<{HEADS * SEQ}x1024xf32>, tensor<1024x{SEQ}xf32>) -> {FLAT}
  %s2 = graph.reshape %g : {FLAT} -> {SCORES}
  %b0 = graph.mul %s2, %sb : {SCORES}
  %b1 = graph.add %b0, %mb : {SCORES}
  %x = graph.reduce_max %b1 {{axes = array<i64: 3>, keepdims}} : {SCORES} -> tensor<1x{HEADS}x{SEQ}x1xf32>
  %xb = graph.broadcast %x {{dims = array<i64: 0, 1, 2, 3>}} : tensor<1x{HEADS}x{SEQ}x1xf32> -> {SCORES}
  %d = graph.sub %b1, %xb : {SCORES}
  %e2 = graph.exp %d : {SCORES}
  func.return %e2 : {SCORES}
}}"""


def broadcasts_between_kernels(skip_duplication: bool) -> list[str]:
    """Types of the broadcast results that some group yields (writes out)."""
    module = mlfuse.parse(SOURCE)
    steps = [*pipelines.GRAPH_CLEANUP, *pipelines.planning("ilp", "cpu")]
    if skip_duplication:
        steps.remove("graph-duplicate-broadcasts")
    run_pipeline(module, steps)
    yielded = []
    for group in module.walk():
        if isinstance(group, fusion.GroupOp):
            terminator = group.body.block.last_op
            assert terminator is not None
            yielded += [str(v.type) for v in terminator.operands if isinstance(v.owner, graph.BroadcastOp)]
    return yielded


def test_no_kernel_writes_a_broadcast_for_another():
    assert broadcasts_between_kernels(skip_duplication=True), "without copies the shared broadcast is written out"
    assert broadcasts_between_kernels(skip_duplication=False) == []


def test_readers_with_copies_match_the_reference():
    """Tolerance: float32 exp and 1024-term sums in another order, relative 1e-5."""
    rng = np.random.default_rng(20261204)
    s = rng.standard_normal((1, HEADS, SEQ, SEQ)).astype(np.float32)
    m = np.where(rng.random((1, 1, SEQ, SEQ)) < 0.2, -30.0, 0.0).astype(np.float32)
    w = (rng.standard_normal((SEQ, 1024)) / 64).astype(np.float32)
    v = (rng.standard_normal((1024, SEQ)) / 64).astype(np.float32)
    fn = mlfuse.compile(SOURCE)
    out = aligned_empty((1, HEADS, SEQ, SEQ), np.float32)
    out.fill(np.nan)
    (got,) = fn(s, m, w, v, out=out)
    (want,) = mlfuse.reference(SOURCE)(s, m, w, v)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
