"""Stencil graphs compiled with post-tiling fusion (and the other strategies) match the
numpy reference.

- conv2d (strides, pads, dilations, groups, depthwise) and max/avg pooling
  (with and without count_include_pad) lower to loop nests that match mlfuse.reference;
- every benchmark pipeline of bench/stencil (blur, unsharp mask, Harris, conv-ReLU-conv,
  2mm, gemver) on small random inputs whose sizes are not multiples of the tile sizes,
  compiled with post-tiling fusion, tile-after-fuse and start-up fusion only;
- edge cases: 1-pixel outputs, outputs of exactly one tile and of one tile plus one;
- the default CPU pipeline with post_tile=True (fusion groups, then post-tiling fusion).

Inputs are random (never zero), outputs are poisoned with NaN before the call.
Tolerance (fp32): 2e-6 relative to max(1, |reference|) for the pointwise and stencil
pipelines (the same operations in the same order as the reference, up to rounding of
reassociated sums); sums over windows, channels and matrix rows (conv, pooling,
2mm, gemver) within 1e-5 of that scale.
"""

from __future__ import annotations

import numpy as np
import pytest

import mlfuse
from bench.stencil.apps import APPS
from mlfuse.api import aligned_empty
from mlfuse.dialects.graph import window_output_shape
from mlfuse.pipelines import cpu_stencil_pipeline
from mlfuse.reference import reference

RNG = np.random.default_rng(7)


def random_input(shape) -> np.ndarray:
    sign = np.where(RNG.random(shape) < 0.5, -1, 1)
    return (sign * RNG.uniform(0.1, 2.0, shape)).astype(np.float32)


def check(source, inputs, passes, rtol: float) -> None:
    fn = mlfuse.compile(source, passes=passes)
    outs = []
    for spec in fn.outputs:
        o = aligned_empty(spec.shape, spec.dtype)
        o.fill(np.nan)
        outs.append(o)
    got = fn(*inputs, out=outs)
    want = reference(source)(*inputs)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        scale = np.maximum(1.0, np.abs(w))
        err = np.max(np.abs(g.astype(np.float64) - w) / scale)
        assert err <= rtol, f"max relative error {err:.3g} > {rtol}"


def tensor(shape) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


WINDOW = "strides = array<i64: {}, {}>, pads = array<i64: {}, {}, {}, {}>, dilations = array<i64: {}, {}>"

CONVS = [
    # (x shape, weight shape, strides, pads, dilations, groups)
    ((2, 3, 9, 11), (4, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 4, 10, 13), (6, 2, 3, 2), (2, 1), (1, 0, 2, 1), (1, 2), 2),
    ((1, 4, 12, 12), (4, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4),  # depthwise
    ((1, 2, 11, 9), (3, 2, 2, 3), (2, 3), (1, 1, 0, 2), (2, 1), 1),
]


@pytest.mark.parametrize("xs, ws, strides, pads, dil, groups", CONVS)
def test_conv2d(xs, ws, strides, pads, dil, groups):
    oh, ow = window_output_shape(xs[2:], ws[2:], strides, pads, dil)
    ys = (xs[0], ws[0], oh, ow)
    attrs = WINDOW.format(*strides, *pads, *dil) + (f", groups = {groups} : i64" if groups != 1 else "")
    src = f"""func.func @main(%x: {tensor(xs)}, %w: {tensor(ws)}) -> {tensor(ys)} {{
  %y = graph.conv2d %x, %w {{{attrs}}} : ({tensor(xs)}, {tensor(ws)}) -> {tensor(ys)}
  func.return %y : {tensor(ys)}
}}"""
    check(src, [random_input(xs), random_input(ws)], cpu_stencil_pipeline("post-tile", (3, 4)), 1e-5)


POOLS = [
    ("max_pool2d", (3, 2), (1, 1), (0, 0, 0, 0), ""),
    ("max_pool2d", (3, 3), (2, 2), (1, 1, 1, 1), ""),
    ("avg_pool2d", (3, 2), (2, 1), (0, 1, 1, 0), ""),
    ("avg_pool2d", (2, 2), (2, 2), (1, 1, 1, 1), ", count_include_pad"),
]


@pytest.mark.parametrize("op, kernel, strides, pads, extra", POOLS)
def test_pool2d(op, kernel, strides, pads, extra):
    xs = (2, 3, 9, 11)
    oh, ow = window_output_shape(xs[2:], kernel, strides, pads, (1, 1))
    ys = (2, 3, oh, ow)
    src = f"""func.func @main(%x: {tensor(xs)}) -> {tensor(ys)} {{
  %y = graph.{op} %x {{kernel = array<i64: {kernel[0]}, {kernel[1]}>, {WINDOW.format(*strides, *pads, 1, 1)}{extra}}} : {tensor(xs)} -> {tensor(ys)}
  func.return %y : {tensor(ys)}
}}"""
    check(src, [random_input(xs)], cpu_stencil_pipeline("post-tile", (2, 4)), 1e-5)


SUMS = {"convnet": 1e-5, "2mm": 1e-5, "gemver": 1e-5}
STRATEGIES = [("post-tile", (4, 8)), ("tile-after-fuse", (4, 8)), ("none", None)]


@pytest.mark.parametrize("app", list(APPS))
@pytest.mark.parametrize("strategy, sizes", STRATEGIES, ids=[s for s, _ in STRATEGIES])
def test_benchmark_pipelines(app, strategy, sizes):
    a = APPS[app]
    module = a.module(small=True)
    inputs = a.inputs(seed=3, small=True)
    check(module, inputs, cpu_stencil_pipeline(strategy, sizes), SUMS.get(app, 2e-6))
    # the numpy definition run op by op agrees with the graph reference
    for got, want in zip(a.numpy(*inputs), reference(module)(*inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


EDGES = [
    # (app, small-input override, tile sizes): 1-pixel output, one tile, one tile plus one
    ("blur", {"x": (3, 3)}, (4, 8)),
    ("blur", {"x": (6, 10)}, (4, 8)),
    ("blur", {"x": (7, 11)}, (4, 8)),
    ("unsharp", {"img": (3, 5, 5)}, (4, 8)),
    ("unsharp", {"img": (3, 8, 12)}, (4, 8)),
    ("harris", {"img": (5, 5)}, (4, 8)),
    ("harris", {"img": (9, 13)}, (4, 8)),
    ("convnet", {"x": (1, 2, 1, 1), "w1": (2, 2, 3, 3), "w2": (2, 2, 3, 3)}, (4, 8)),
]


@pytest.mark.parametrize("app, shapes, sizes", EDGES)
def test_edge_sizes(app, shapes, sizes):
    from dataclasses import replace

    a = replace(APPS[app], small=shapes)
    module = a.module(small=True)
    check(module, a.inputs(seed=5, small=True), cpu_stencil_pipeline("post-tile", sizes), SUMS.get(app, 2e-6))


def test_post_tile_fusion_fuses_the_benchmarks():
    """On unsharp mask and Harris the whole chain ends up in one tile band, with only
    tile-local buffers (no full-size intermediate left)."""
    from mlfuse.api import module_text, run_pipeline

    for app in ("unsharp", "harris", "blur"):
        module = APPS[app].module(small=True)
        passes = cpu_stencil_pipeline("post-tile", (4, 8))
        run_pipeline(module, passes[: passes.index("assign-buffers")])
        ir = module_text(module)
        assert ir.count("loop.band") == 1, app
        assert "memref.alloc()" not in ir, app
        assert "memref.alloca()" in ir, app


@pytest.mark.parametrize("app", ["convnet", "2mm"])
def test_cpu_pipeline_with_post_tile(app):
    """The default CPU pipeline with post_tile=True: fusion groups first, then post-tiling
    fusion where a live-out reads what other nests produce."""
    from mlfuse.pipelines import cpu_pipeline

    a = APPS[app]
    check(a.module(small=True), a.inputs(seed=4, small=True), cpu_pipeline(post_tile=True), SUMS.get(app, 2e-6))


@pytest.mark.parametrize("app", list(APPS))
def test_default_pipeline(app):
    """mlfuse.compile's one pipeline: the planner's window groups (convs, stencils
    written with slices) post-tiled inside it, everything else stitched."""
    a = APPS[app]
    check(a.module(small=True), a.inputs(seed=6, small=True), None, SUMS.get(app, 2e-6))


def test_post_tile_leaves_a_writer_tiled_by_another_band():
    """gemver at its benchmark size: two live-outs share a producer; once one band has
    taken it, the other refuses it (it used to be an internal error)."""
    from mlfuse.api import run_pipeline

    module = APPS["gemver"].module(small=False)
    passes = cpu_stencil_pipeline("post-tile")
    run_pipeline(module, passes[: passes.index("assign-buffers")])
