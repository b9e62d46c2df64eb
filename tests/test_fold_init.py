"""loop-fold-init end to end: depthwise convs whose output rows are wide enough that the
taps run innermost (graph_to_loop.ROW_IN_REGISTERS) carry their zero as the
reduction's `init` instead of a memset nest; compiled against the reference on random
data with NaN and infinities in it, the outputs poisoned first. The reference sums the
taps in another order (einsum), hence the tolerance."""

from __future__ import annotations

import numpy as np
import pytest

import mlfuse
from mlfuse import pipelines
from mlfuse.api import aligned_empty, run_pipeline
from mlfuse.dialects import loop


def depthwise_src(c: int, h: int, w: int, returned_directly: bool) -> str:
    x, wt, y = f"tensor<1x{c}x{h}x{w}xf32>", f"tensor<{c}x1x3x3xf32>", f"tensor<1x{c}x{h}x{w}xf32>"
    tail = "func.return %y" if returned_directly else f"%r = graph.relu %y : {y}\n  func.return %r"
    return f"""func.func @main(%x: {x}, %w: {wt}) -> {y} {{
  %y = graph.conv2d %x, %w {{groups = {c} : i64, pads = array<i64: 1, 1, 1, 1>}} : ({x}, {wt}) -> {y}
  {tail} : {y}
}}"""


@pytest.mark.parametrize("returned_directly", [False, True])
def test_folded_depthwise_convs_match_the_reference(returned_directly):
    src = depthwise_src(8, 12, 40, returned_directly)
    lowered = mlfuse.parse(src)
    steps = pipelines.cpu_pipeline(depthwise=False)
    run_pipeline(lowered, steps[: steps.index("loop-fold-init") + 1])
    nests = [op for op in lowered.walk() if isinstance(op, loop.NestOp)]
    assert any(op.init is not None for op in nests), "the conv's zero is folded"
    assert not any(op.nest_name.data.endswith("conv_init") for op in nests)

    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 8, 12, 40)).astype(np.float32)
    x[0, 1, 3, 5], x[0, 2, 0, 0], x[0, 3, 11, 39] = np.nan, np.inf, -np.inf
    w = rng.standard_normal((8, 1, 3, 3)).astype(np.float32)
    fn = mlfuse.compile(src)
    out = aligned_empty(fn.outputs[0].shape, np.float32)
    out.fill(12345.0)
    fn(x, w, out=[out])
    np.testing.assert_allclose(out, mlfuse.reference(src)(x, w)[0], rtol=2e-6, atol=2e-6, equal_nan=True)
