"""GPU window kernels (mlfuse.backend.gpu.window): conv2d and pooling groups, simulated.

Every kernel runs in the CPU simulator (mlfuse.backend.gpu.sim) on seeded random data
and is compared with the numpy reference (mlfuse.reference). The simulator starts
outputs and allocations poisoned (NaN, or 0x5a bytes for integers) and fails when an
output element is never written or poison is read, so a missed element cannot pass.

Tolerances: f32 window sums of at most 72 products of magnitude < 4, added in another
order than numpy's einsum: rtol 1e-5, atol 1e-4 (a sum's rounding error is bounded by
K * 2^-24 * sum|x w| = 72 * 6e-8 * 288 ~ 1.2e-3 in the worst case, ~1e-6 in practice).
Max pooling is exact; average pooling sums at most 9 values below 2 in another order
(|error| <= 9 * 2 * 2^-24 ~ 1.1e-6 before the division: atol 2e-6). f16 convolutions accumulate in f32 where numpy sums in f16: atol 2e-2.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from xdsl.dialects.builtin import DictionaryAttr

import mlfuse
from mlfuse.api import parse, run_pipeline
from mlfuse.backend.gpu.host import SCHEDULE_ATTR, annotate, map_module
from mlfuse.backend.gpu.mapping import Schedule
from mlfuse.backend.gpu.ptx import module_to_ptx
from mlfuse.backend.gpu.ptxas import assemble, find_ptxas
from mlfuse.backend.gpu.simulator import compile_gpu_sim
from mlfuse.backend.gpu.targets import target
from mlfuse.dialects import fusion, graph
from mlfuse.reference import find_function, reference
from mlfuse.target import get_target

from conftest import random_array

RTOL, ATOL = 1e-5, 1e-4
AVG_ATOL = 2e-6


def tensor(shape, el: str = "f32") -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{el}>"


def window_attrs(strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), **extra) -> str:
    parts = [f"strides = array<i64: {', '.join(map(str, strides))}>",
             f"pads = array<i64: {', '.join(map(str, pads))}>",
             f"dilations = array<i64: {', '.join(map(str, dilations))}>"]
    parts += [v for v in extra.values() if v]
    return "{" + ", ".join(parts) + "}"


def conv_shape(x, w, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1)) -> list[int]:
    return [x[0], w[0], *graph.window_output_shape(x[2:], w[2:], strides, pads, dilations)]


def conv_src(x, w, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1, el="f32") -> str:
    y = conv_shape(x, w, strides, pads, dilations)
    attrs = window_attrs(strides, pads, dilations, groups=f"groups = {groups} : i64" if groups > 1 else "")
    return f"""func.func @main(%x: {tensor(x, el)}, %w: {tensor(w, el)}) -> {tensor(y, el)} {{
  %y = graph.conv2d %x, %w {attrs} : ({tensor(x, el)}, {tensor(w, el)}) -> {tensor(y, el)}
  func.return %y : {tensor(y, el)}
}}
"""


def pool_src(kind: str, x, kernel, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), el="f32", count_pad=False) -> str:
    y = [x[0], x[1], *graph.window_output_shape(x[2:], kernel, strides, pads, dilations)]
    attrs = window_attrs(strides, pads, dilations, kernel=f"kernel = array<i64: {kernel[0]}, {kernel[1]}>",
                         count="count_include_pad" if count_pad else "")
    return f"""func.func @main(%x: {tensor(x, el)}) -> {tensor(y, el)} {{
  %y = graph.{kind}_pool2d %x {attrs} : {tensor(x, el)} -> {tensor(y, el)}
  func.return %y : {tensor(y, el)}
}}
"""


def fused_conv_src(x=(1, 4, 8, 8), cout=8, strides=(1, 1), pad_op=False, pads=(1, 1, 1, 1)) -> str:
    """conv (optionally reading a graph.pad) + bias + inference batch norm + clip(0, 6) + residual,
    as one fusion.group; the conv result and the final value both leave the group."""
    w = (cout, x[1], 3, 3)
    xp = (x[0], x[1], x[2] + pads[0] + pads[2], x[3] + pads[1] + pads[3]) if pad_op else x
    y = conv_shape(xp, w, strides, (0, 0, 0, 0) if pad_op else pads)
    c = f"tensor<{cout}xf32>"
    ty = tensor(y)
    prologue = (
        f"%p = graph.pad %a {{low = array<i64: 0, 0, {pads[0]}, {pads[1]}>, high = array<i64: 0, 0, {pads[2]}, "
        f"{pads[3]}>, value = 0.0 : f32}} : {tensor(x)} -> {tensor(xp)}\n    "
        f"%y = graph.conv2d %p, %k {window_attrs(strides)} : ({tensor(xp)}, {tensor(w)}) -> {ty}"
        if pad_op
        else f"%y = graph.conv2d %a, %k {window_attrs(strides, pads)} : ({tensor(x)}, {tensor(w)}) -> {ty}"
    )
    return f"""func.func @main(%x: {tensor(x)}, %w: {tensor(w)}, %bias: {c}, %scale: {c}, %shift: {c}, %res: {ty}) -> ({ty}, {ty}) {{
  %r:2 = fusion.group "conv_bn_relu" kind = "stitch" (%x, %w, %bias, %scale, %shift, %res) : ({tensor(x)}, {tensor(w)}, {c}, {c}, {c}, {ty}) -> ({ty}, {ty}) {{
  ^bb0(%a: {tensor(x)}, %k: {tensor(w)}, %b: {c}, %s: {c}, %t: {c}, %q: {ty}):
    {prologue}
    %bb = graph.broadcast %b {{dims = array<i64: 1>}} : {c} -> {ty}
    %z = graph.add %y, %bb : {ty}
    %sb = graph.broadcast %s {{dims = array<i64: 1>}} : {c} -> {ty}
    %tb = graph.broadcast %t {{dims = array<i64: 1>}} : {c} -> {ty}
    %n = graph.mul %z, %sb : {ty}
    %m = graph.add %n, %tb : {ty}
    %zero = graph.constant dense<0.0> : {ty}
    %six = graph.constant dense<6.0> : {ty}
    %lo = graph.max %m, %zero : {ty}
    %hi = graph.min %lo, %six : {ty}
    %out = graph.add %hi, %q : {ty}
    fusion.yield %y, %out : {ty}, {ty}
  }}
  func.return %r#0, %r#1 : {ty}, {ty}
}}
"""


def random_inputs(src: str, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    args = find_function(parse(src), "main").body.block.args
    return [random_array(rng, graph.shape_of(a), graph.numpy_dtype(graph.element_type_of(a))) for a in args]


def check(src: str, seed: int, arrays: list[np.ndarray] | None = None, rtol=RTOL, atol=ATOL):
    """Simulate `src` mapped for sm_90 and compare every result with the reference."""
    arrays = arrays if arrays is not None else random_inputs(src, seed)
    exe = compile_gpu_sim(parse(src))
    got = exe(*arrays)
    want = reference(src)(*arrays)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return exe


def schedules(src: str) -> list[Schedule]:
    module = parse(src)
    annotate(module, target("sm_90"))
    attrs = [g.attributes[SCHEDULE_ATTR] for g in module.walk() if isinstance(g, fusion.GroupOp)]
    return [Schedule.from_attr(a) for a in attrs if isinstance(a, DictionaryAttr)]


# --- convolutions --------------------------------------------------------------------------


CONVS = {
    "stride1": dict(x=(1, 4, 6, 6), w=(8, 4, 3, 3)),
    "stride2_pad1": dict(x=(1, 4, 9, 9), w=(8, 4, 3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),
    "asymmetric": dict(x=(2, 3, 7, 6), w=(5, 3, 3, 2), strides=(2, 1), pads=(0, 1, 2, 0)),
    "dilation2": dict(x=(1, 4, 10, 10), w=(6, 4, 3, 3), pads=(2, 2, 2, 2), dilations=(2, 2)),
    "groups2": dict(x=(1, 8, 6, 6), w=(4, 4, 3, 3), pads=(1, 1, 1, 1), groups=2),
    "depthwise": dict(x=(1, 8, 8, 8), w=(8, 1, 3, 3), strides=(2, 2), pads=(1, 1, 1, 1), groups=8),
    "pointwise": dict(x=(1, 8, 6, 6), w=(4, 8, 1, 1)),
}


@pytest.mark.parametrize("name", list(CONVS))
def test_conv(name: str) -> None:
    src = conv_src(**CONVS[name])
    exe = check(src, seed=sorted(CONVS).index(name))
    assert len(exe.programs) == 1
    [s] = schedules(src)
    assert (s.mapping, s.variant) == ("window", "direct")


def test_conv_f16_accumulates_in_f32() -> None:
    src = conv_src((1, 4, 6, 6), (4, 4, 3, 3), pads=(1, 1, 1, 1), el="f16")
    check(src, seed=7, rtol=1e-2, atol=2e-2)


def test_grid_stride_covers_more_outputs_than_threads(monkeypatch) -> None:
    """A grid smaller than the outputs (one block here): the grid-stride loop goes round."""
    from mlfuse.backend.gpu import window

    monkeypatch.setattr(window, "ELEMENTWISE_BLOCKS_PER_SM", 0)  # max(1, ...): one block of 256
    src = conv_src((1, 2, 12, 12), (4, 2, 3, 3), pads=(1, 1, 1, 1))  # 576 outputs
    exe = check(src, seed=8)
    assert exe.stats[0].grid == (1, 1, 1)


# --- a conv with its epilogue (and prologue) as one kernel ---------------------------------


@pytest.mark.parametrize(("strides", "pad_op"), [((1, 1), False), ((2, 2), False), ((1, 1), True)])
def test_conv_bias_bn_clip_residual_group(strides, pad_op) -> None:
    src = fused_conv_src(strides=strides, pad_op=pad_op)
    exe = check(src, seed=10 + strides[0] + 2 * pad_op)
    assert len(exe.programs) == 1 and len(exe.stats) == 1  # one kernel, one launch
    [s] = schedules(src)
    assert s.mapping == "window"
    ops = [op for op in parse(src).walk() if op.dialect_name() == "graph"]
    assert get_target("gpu-sim").structural_problem(ops) is None


def test_conv_with_elementwise_prologue() -> None:
    """A pre-activation (relu of the input, then a depthwise conv): the prologue is recomputed per read."""
    src = """func.func @main(%x: tensor<1x4x6x6xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %r = fusion.group "relu_conv" kind = "stitch" (%x, %w) : (tensor<1x4x6x6xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x6x6xf32> {
  ^bb0(%a: tensor<1x4x6x6xf32>, %k: tensor<4x1x3x3xf32>):
    %p = graph.relu %a : tensor<1x4x6x6xf32>
    %y = graph.conv2d %p, %k {pads = array<i64: 1, 1, 1, 1>, groups = 4 : i64} : (tensor<1x4x6x6xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x6x6xf32>
    fusion.yield %y : tensor<1x4x6x6xf32>
  }
  func.return %r : tensor<1x4x6x6xf32>
}
"""
    exe = check(src, seed=12)
    assert len(exe.programs) == 1


# --- pooling -------------------------------------------------------------------------------


POOLS = {
    "max3x3_s2": ("max", dict(x=(1, 4, 9, 9), kernel=(3, 3), strides=(2, 2))),
    "max3x3_s2_pad1": ("max", dict(x=(1, 4, 8, 8), kernel=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))),
    "max_dilated": ("max", dict(x=(1, 3, 9, 9), kernel=(2, 2), pads=(1, 0, 1, 0), dilations=(2, 2))),
    "avg2x2": ("avg", dict(x=(1, 4, 8, 8), kernel=(2, 2), strides=(2, 2))),
    "avg3x3_pad1": ("avg", dict(x=(1, 4, 7, 7), kernel=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))),
    "avg3x3_pad1_counted": ("avg", dict(x=(1, 4, 7, 7), kernel=(3, 3), pads=(1, 1, 1, 1), count_pad=True)),
    "avg_ceil_edge": ("avg", dict(x=(1, 2, 6, 6), kernel=(3, 3), strides=(2, 2), pads=(0, 0, 1, 1))),
}


@pytest.mark.parametrize("name", list(POOLS))
def test_pool(name: str) -> None:
    kind, params = POOLS[name]
    src = pool_src(kind, **params)
    check(src, seed=20 + sorted(POOLS).index(name), rtol=1e-6, atol=0 if kind == "max" else AVG_ATOL)
    [s] = schedules(src)
    assert s.mapping == "window"


def test_max_pool_of_integers() -> None:
    check(pool_src("max", (1, 3, 6, 6), (3, 3), pads=(1, 1, 1, 1), el="i32"), seed=30, rtol=0, atol=0)


def test_max_pool_propagates_nan() -> None:
    """numpy's max: a NaN in a window gives NaN (maximumf), and only in that window."""
    src = pool_src("max", (1, 2, 6, 6), (2, 2), strides=(2, 2))
    (x,) = random_inputs(src, seed=31)
    x[0, 1, 2, 3] = np.nan
    check(src, seed=31, arrays=[x], rtol=0, atol=0)
    (y,) = compile_gpu_sim(parse(src))(x)
    assert np.isnan(y).sum() == 1 and np.isnan(y[0, 1, 1, 1])


def test_max_pool_into_relu_group() -> None:
    src = """func.func @main(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32> {
  %r = fusion.group "pool_relu" kind = "stitch" (%x) : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32> {
  ^bb0(%a: tensor<1x4x8x8xf32>):
    %p = graph.max_pool2d %a {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
    %y = graph.relu %p : tensor<1x4x4x4xf32>
    fusion.yield %y : tensor<1x4x4x4xf32>
  }
  func.return %r : tensor<1x4x4x4xf32>
}
"""
    exe = check(src, seed=32, rtol=0, atol=0)
    assert len(exe.programs) == 1


# --- the target and the planner --------------------------------------------------------------


CONV_BN_RELU = """func.func @main(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>, %s: tensor<8xf32>, %t: tensor<8xf32>) -> tensor<1x8x8x8xf32> {
  %y = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x8x8xf32>
  %sb = graph.broadcast %s {dims = array<i64: 1>} : tensor<8xf32> -> tensor<1x8x8x8xf32>
  %tb = graph.broadcast %t {dims = array<i64: 1>} : tensor<8xf32> -> tensor<1x8x8x8xf32>
  %n = graph.mul %y, %sb : tensor<1x8x8x8xf32>
  %m = graph.add %n, %tb : tensor<1x8x8x8xf32>
  %r = graph.relu %m : tensor<1x8x8x8xf32>
  func.return %r : tensor<1x8x8x8xf32>
}
"""


def test_compile_conv_bn_relu_on_gpu_sim() -> None:
    """The GPU planner puts the conv and its epilogue in one window group: one kernel."""
    exe = mlfuse.compile(CONV_BN_RELU, target="gpu-sim")
    assert len(exe.programs) == 1  # pyright: ignore[reportAttributeAccessIssue] (a SimulatedExecutable)
    arrays = random_inputs(CONV_BN_RELU, seed=40)
    (y,) = exe(*arrays)
    (want,) = reference(CONV_BN_RELU)(*arrays)
    np.testing.assert_allclose(y, want, rtol=RTOL, atol=ATOL)


def graph_ops(src: str) -> list:
    return [op for op in parse(src).walk() if op.dialect_name() == "graph"]


def gpu_problem(src: str) -> str:
    """The GPU target's structural problem with all of src's graph ops as one kernel (there must be one)."""
    problem = get_target("gpu").structural_problem(graph_ops(src))
    assert problem is not None
    return problem


def test_structural_problem_of_window_groups() -> None:
    gpu = get_target("gpu")
    assert gpu.structural_problem(graph_ops(CONV_BN_RELU)) is None
    assert gpu.structural_problem(graph_ops(fused_conv_src(pad_op=True))) is None
    assert gpu.structural_problem(graph_ops(pool_src("avg", (1, 2, 6, 6), (2, 2)))) is None
    two = CONV_BN_RELU.replace("%r = graph.relu %m", "%r0 = graph.relu %m").replace(
        "func.return %r", "%r = graph.max_pool2d %r0 {kernel = array<i64: 1, 1>} : tensor<1x8x8x8xf32> -> tensor<1x8x8x8xf32>\n  func.return %r")
    assert "2 window ops" in gpu_problem(two)
    reduced = CONV_BN_RELU.replace("func.return %r : tensor<1x8x8x8xf32>",
                                   "%q = graph.reduce_sum %r {axes = array<i64: 3>} : tensor<1x8x8x8xf32> -> tensor<1x8x8xf32>\n"
                                   "  func.return %r : tensor<1x8x8x8xf32>")
    assert "graph.reduce_sum" in gpu_problem(reduced)
    spread = """func.func @main(%x: tensor<1x2x4x4xf32>) -> tensor<3x1x2x2x2xf32> {
  %p = graph.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<1x2x4x4xf32> -> tensor<1x2x2x2xf32>
  %b = graph.broadcast %p {dims = array<i64: 1, 2, 3, 4>} : tensor<1x2x2x2xf32> -> tensor<3x1x2x2x2xf32>
  func.return %b : tensor<3x1x2x2x2xf32>
}
"""
    assert "recompute" in gpu_problem(spread)
    gather = """func.func @main(%x: tensor<1x2x4x4xf32>, %i: tensor<3xi64>) -> tensor<3x2x2x2xf32> {
  %p = graph.max_pool2d %x {kernel = array<i64: 3, 3>} : tensor<1x2x4x4xf32> -> tensor<1x2x2x2xf32>
  %g = graph.gather %p, %i {axis = 0} : (tensor<1x2x2x2xf32>, tensor<3xi64>) -> tensor<3x2x2x2xf32>
  func.return %g : tensor<3x2x2x2xf32>
}
"""
    assert "graph.gather" in gpu_problem(gather)


def test_planned_gpu_module_maps_every_window_group() -> None:
    """Whatever fusion-plan{target=gpu} groups around the conv, every group maps to a kernel."""
    module = run_pipeline(parse(CONV_BN_RELU), ["canonicalize", "cse", "fusion-plan{target=gpu summary=false}"])
    map_module(module, target("sm_90"))
    module.verify()


# --- PTX --------------------------------------------------------------------------------------


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_conv_group_assembles_without_spills(arch: str) -> None:
    module = parse(fused_conv_src(x=(1, 16, 14, 14), cout=32, pad_op=True))
    map_module(module, target(arch))
    ptx = module_to_ptx(module, arch)
    assert len(re.findall(r"^\.visible \.entry ", ptx, re.MULTILINE)) == 1
    resources = assemble(ptx, arch)
    assert [r.spills for r in resources.values()] == [False]
