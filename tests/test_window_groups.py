"""One compiler: conv groups planned by the ILP and lowered by post-tiling fusion.

A ResNet basic block exported by torch (legacy exporter: batch norm folded into the
convs' weights and bias) plans into two window groups, each conv with its epilogue,
and matches onnxruntime; a stencil written with slices goes through the same pipeline.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from xdsl.dialects import func

import mlfuse
from mlfuse.api import parse, run_pipeline
from mlfuse.dialects import fusion, loop
from mlfuse.pipelines import cpu_pipeline, step_index

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")


class BasicBlock(torch.nn.Module):
    def __init__(self, channels: int = 8):
        super().__init__()
        conv = lambda: torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)  # noqa: E731
        self.c1, self.b1, self.c2, self.b2 = conv(), torch.nn.BatchNorm2d(channels), conv(), torch.nn.BatchNorm2d(channels)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + x)


@pytest.fixture(scope="module")
def basic_block(tmp_path_factory) -> tuple[str, np.ndarray]:
    torch.manual_seed(0)
    model = BasicBlock().eval()
    for bn in (model.b1, model.b2):  # non-trivial statistics, so the folding matters
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.data.normal_()
        bn.bias.data.normal_()
    x = torch.randn(1, 8, 12, 12)
    buf = io.BytesIO()
    torch.onnx.export(model, (x,), buf, dynamo=False, input_names=["x"])
    path = tmp_path_factory.mktemp("block") / "block.onnx"
    path.write_bytes(buf.getvalue())
    return str(path), x.numpy()


def test_basic_block_plans_two_window_groups(basic_block):
    path, _ = basic_block
    module = parse(path)
    run_pipeline(module, ["canonicalize", "cse", "fusion-plan{target=cpu summary=false}"])
    groups = [op for op in module.walk() if isinstance(op, fusion.GroupOp)]
    assert len(groups) <= 2
    for group in groups:
        assert group.kind.data == "window"
        for op in group.body.block.ops:
            if op.name == "graph.conv2d":  # its epilogue (bias, BN, ReLU, residual) is in its group
                assert all(use.operation.parent_op() is group for use in op.results[0].uses)


def test_basic_block_matches_onnxruntime(basic_block):
    path, x = basic_block
    want = ort.InferenceSession(path).run(None, {"x": x})[0]
    fn = mlfuse.compile(path)
    out = np.full(want.shape, np.nan, np.float32)  # poisoned: every element must be written
    fn(x, out=[out])
    # fp32 sums of 72 products in another order than MLAS: relative to the output's range
    np.testing.assert_allclose(out, want, rtol=0, atol=2e-6 * np.abs(want).max())


def loop_steps(conv: str) -> list[str]:
    """The CPU pipeline up to the loop level, with dense convs lowered `conv`."""
    steps = cpu_pipeline()
    at = step_index(steps, "convert-graph-to-loop")
    steps = steps[: at + 5]  # through loop-storage-reduce
    assert steps[-1] == "loop-storage-reduce", steps
    return [*steps[:at], f"convert-graph-to-loop{{conv={conv}}}", *steps[at + 1 :]]


def test_dense_convs_are_products_with_their_epilogue_fused(basic_block):
    """By default a dense conv is patches @ weights; its epilogue (bias, BN, ReLU,
    residual) fuses into the nest that unpacks the product into NCHW, and the first
    conv's whole epilogue into the padding copy of the second conv's input."""
    path, _ = basic_block
    module = parse(path)
    run_pipeline(module, loop_steps("gemm"))
    fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    names = [op.nest_name.data.rsplit(".", 1)[-1] for op in fn.body.block.ops if isinstance(op, loop.NestOp)]
    assert names.count("conv_matmul") == 2, names
    assert set(names) == {"pad_fill", "pad_copy", "conv_patches", "conv_matmul_init", "conv_matmul", "relu"}, names


def test_window_group_nests_are_post_tiled(basic_block):
    """With conv=direct, the conv and its epilogue end in one tile band per group (the
    conv fused into the tiles of its epilogue's output), intermediates in tile-local storage."""
    path, _ = basic_block
    module = parse(path)
    run_pipeline(module, loop_steps("direct"))
    bands = [op for op in module.walk() if isinstance(op, loop.BandOp)]
    assert bands
    for band in bands:
        nests = [op.nest_name.data.rsplit(".", 1)[-1] for op in band.walk() if isinstance(op, loop.NestOp)]
        assert "conv2d" in nests and "relu" in nests, nests


@pytest.mark.parametrize(
    "image, out_channels, kernel, stride, pads, constant_weight",
    [
        ((1, 32, 16, 16), 64, 1, 1, 0, True),  # pointwise: the input is the patches
        ((1, 32, 16, 16), 128, 3, 2, 1, True),  # 8x8 outputs <= 128 channels
        ((1, 32, 1, 64), 64, 3, 1, 1, True),  # one row: only the middle row of taps is live (sliced constant)
        ((1, 32, 1, 64), 64, 3, 1, 1, False),  # the same taps cut from a weight input by a nest
        ((2, 32, 16, 16), 64, 1, 1, 0, False),  # two images: patches @ wt
        # stride 1: the GEMM kernel reads the patches from the padded input (loop.gemm {window})
        ((1, 16, 9, 7), 40, 3, 1, 1, True),  # rows of 7 pixels: every vector wraps onto the next row
        ((1, 8, 20, 30), 48, 3, 1, 0, False),  # no padding: the input itself; a weight input
        ((1, 32, 14, 14), 64, 5, 1, 2, True),  # 5x5 taps
    ],
)
def test_conv_products_with_epilogue_match_torch(image, out_channels, kernel, stride, pads, constant_weight):
    """Both orientations of the product (w @ patches for one image with few pixels or
    a pointwise conv, patches @ wt otherwise; a stride-1 conv's patches read in place)
    with a bias-and-ReLU epilogue, against torch in float64 on random data, outputs
    poisoned. fp32 sums of up to 800 products: atol 1e-5 of the output's range."""
    from mlfuse.frontend.builder import GraphBuilder

    rng = np.random.default_rng(sum(image) + out_channels + kernel)
    x = rng.standard_normal(image).astype(np.float32)
    w = rng.standard_normal((out_channels, image[1], kernel, kernel)).astype(np.float32)
    bias = rng.standard_normal(out_channels).astype(np.float32)
    b = GraphBuilder()
    xs = b.input("x", image, "f32")
    ws = b.constant(w, "f32") if constant_weight else b.input("w", w.shape, "f32")
    y = b.conv2d(xs, ws, [stride, stride], [pads] * 4, [1, 1], 1)
    b.output(b.relu(y + b.broadcast_to(b.constant(bias, "f32").reshape(1, out_channels, 1, 1), y.shape)))
    fn = mlfuse.compile(b.module())
    want = torch.relu(torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                                                 torch.from_numpy(bias).double(), stride, pads)).numpy()
    out = np.full(want.shape, np.nan, np.float32)
    fn(*([x] if constant_weight else [x, w]), out=[out])
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("pads", [(1, 1, 1, 1), (2, 1, 0, 2), (0, 3, 1, 0)])
def test_window_conv_fills_only_the_border_of_its_padded_input(pads):
    """A conv whose GEMM reads its patches in place from the padded input (loop.gemm
    {window}) fills only the border (graph_to_loop.fill_border); the copy writes the
    rest. The arena starts poisoned with NaN, so any element neither fills would show;
    two calls on other inputs check that nothing depends on what the arena held. The
    reference sums in float64: rtol 1e-5 on 72-term sums."""
    top, left, bottom, right = pads
    text = f"""
func.func @main(%x: tensor<1x8x16x16xf32>, %w: tensor<32x8x3x3xf32>) -> tensor<1x32x{14 + top + bottom}x{14 + left + right}xf32> {{
  %y = graph.conv2d %x, %w {{pads = array<i64: {top}, {left}, {bottom}, {right}>}} : (tensor<1x8x16x16xf32>, tensor<32x8x3x3xf32>) -> tensor<1x32x{14 + top + bottom}x{14 + left + right}xf32>
  func.return %y : tensor<1x32x{14 + top + bottom}x{14 + left + right}xf32>
}}"""
    module = parse(text)
    lowered = run_pipeline(module.clone(), cpu_pipeline()[: step_index(cpu_pipeline(), "convert-graph-to-loop") + 1])
    fills = [op for op in lowered.walk() if isinstance(op, loop.NestOp) and op.nest_name.data.endswith("pad_fill")]
    points = sum(int(np.prod([hi for _, hi in op.static_bounds() or []])) for op in fills)
    assert points == 8 * ((16 + top + bottom) * (16 + left + right) - 16 * 16), "the fills must cover the border, once"
    assert any(isinstance(op, loop.GemmOp) and op.window_size for op in lowered.walk())
    fn = mlfuse.compile(text)
    from mlfuse.reference import reference

    rng = np.random.default_rng(11)
    for _ in range(2):
        fn._arenas[0][0][:] = 0xFF  # every float in the arena a NaN
        x = rng.standard_normal((1, 8, 16, 16)).astype(np.float32)
        w = (rng.standard_normal((32, 8, 3, 3)) / 8).astype(np.float32)
        out = np.full(fn.outputs[0].shape, np.nan, np.float32)
        fn(x, w, out=[out])
        (expected,) = reference(text)(x, w)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
