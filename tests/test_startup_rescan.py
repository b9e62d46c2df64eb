"""Start-up fusion's cheap rescans (mlfuse.poly.startup.Rescan) change its speed, not its
output: remembered facts about nests, and deallocs placed only for the buffers a fusion
touched (from one walk of the block), give the IR that asking everything again after
every fusion gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import memref

from mlfuse.api import module_text, parse, run_pipeline
from mlfuse.dialects import loop
from mlfuse.frontend.builder import GraphBuilder
from mlfuse.poly import startup
from mlfuse.poly.program import top_ancestor

LIT = Path(__file__).resolve().parent.parent / "filecheck" / "passes" / "loop-startup-fuse.mlir"


def place_every_dealloc(block) -> None:
    """Every dealloc after the last top-level op using its buffer (or its views), the block
    walked again after each move: program.place_deallocs by its definition."""
    for dealloc in [o for o in block.ops if isinstance(o, memref.DeallocOp)]:
        position = {op: i for i, op in enumerate(block.ops)}
        users = [u.operation for u in dealloc.memref.uses]
        users += [u.operation for v in users if isinstance(v, loop.ViewOp) for u in v.result.uses]
        tops = [t for t in (top_ancestor(u, block) for u in users) if t is not None and t is not dealloc]
        if tops and position[max(tops, key=position.__getitem__)] > position[dealloc]:
            dealloc.detach()
            block.insert_op_after(dealloc, max(tops, key=position.__getitem__))


class Forgetful(startup.Rescan):
    """Remembers nothing and places every dealloc after each fusion, by the definition."""

    def forwardable_copy(self, fn, nest, scope):
        return startup.forwardable_copy(fn, nest, scope)

    def pointwise_outputs(self, fn, nest):
        return startup.pointwise_outputs(fn, nest)

    def place_deallocs(self, block, changed):
        place_every_dealloc(block)


def small_cnn():
    """Depthwise and pointwise convs with bias and ReLU, a residual add, a pooling and a
    stencil written with slices: copies to forward, pointwise chains to merge."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (1, 4, 12, 12))

    def block(h):
        d = b.conv2d(h, b.constant(rng.standard_normal((4, 1, 3, 3)).astype(np.float32)), pads=(1, 1, 1, 1), groups=4)
        d = b.maximum(d + b.constant(rng.standard_normal((1, 4, 1, 1)).astype(np.float32)), 0.0)
        p = b.conv2d(d, b.constant(rng.standard_normal((4, 4, 1, 1)).astype(np.float32)))
        return h + b.exp(p) * 0.5

    y = block(block(x))
    y = b.max_pool2d(y, (2, 2), strides=(2, 2))
    blur = y[:, :, 0:4, 0:4] + y[:, :, 1:5, 1:5] + y[:, :, 2:6, 2:6]
    b.output(b.reshape(blur, (1, 64)) * 2.0)
    return b.module()


def fused(module_or_text, passes, rescan) -> str:
    module = parse(module_or_text) if isinstance(module_or_text, str) else module_or_text.clone()
    original = startup.Rescan
    startup.Rescan = rescan
    try:
        run_pipeline(module, passes)
    finally:
        startup.Rescan = original
    return module_text(module)


CNN_PIPELINES = [
    ["canonicalize", "cse", "convert-graph-to-loop{stitch=false}", "loop-startup-fuse"],
    ["canonicalize", "cse", "fusion-plan{planner=ilp target=cpu summary=false}", "convert-graph-to-loop",
     "loop-startup-fuse{scope=group}"],
]


@pytest.mark.parametrize("passes", CNN_PIPELINES, ids=["function", "group"])
def test_rescans_leave_the_output_of_a_network_alone(passes):
    module = small_cnn()
    before = fused(module, passes[:-1], startup.Rescan)
    after = fused(module, passes, startup.Rescan)
    assert after != before  # something was forwarded or merged
    assert after == fused(module, passes, Forgetful)


def test_rescans_leave_the_lit_cases_alone():
    cases = [c for c in LIT.read_text().split("// -----") if "func.func" in c]
    for case in cases:
        for passes in (["loop-startup-fuse"], ["loop-startup-fuse{merge=false}"]):
            assert fused(case, passes, startup.Rescan) == fused(case, passes, Forgetful)
