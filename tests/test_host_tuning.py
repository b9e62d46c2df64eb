"""How mlfuse tunes LLVM for the host (cpu.host_cpu), checked on the code LLVM writes.

The host is faked as an AMD Zen 4 (znver4, AVX-512), whatever machine runs the test:
LLVM's own tuning differs between Intel and AMD CPUs, and these are the cases where
mlfuse overrides it.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import mlfuse
from mlfuse import pipelines
from mlfuse.api import run_pipeline
from mlfuse.backend import cpu
from mlfuse.backend.llvm_translate import to_llvmlite
from mlfuse.frontend.builder import GraphBuilder

ZEN4_FEATURES = (
    "+64bit,+adx,+aes,+avx,+avx2,+avx512bf16,+avx512bitalg,+avx512bw,+avx512cd,+avx512dq,+avx512f,"
    "+avx512ifma,+avx512vbmi,+avx512vbmi2,+avx512vl,+avx512vnni,+avx512vpopcntdq,+bmi,+bmi2,+clflushopt,"
    "+clwb,+clzero,+cmov,+crc32,+cx16,+cx8,+f16c,+fma,+fsgsbase,+fxsr,+gfni,+invpcid,+lzcnt,+mmx,+movbe,"
    "+pclmul,+popcnt,+prfchw,+rdpid,+rdrnd,+rdseed,+sahf,+sha,+shstk,+sse,+sse2,+sse3,+sse4.1,+sse4.2,"
    "+sse4a,+ssse3,+vaes,+vpclmulqdq,+xsave,+xsavec,+xsaveopt,+xsaves"
)


class _Features:
    def __init__(self, text: str):
        self.text = text

    def flatten(self) -> str:
        return self.text


@pytest.fixture
def zen4_host(monkeypatch):
    monkeypatch.setattr(cpu.llvm, "get_host_cpu_name", lambda: "znver4")
    monkeypatch.setattr(cpu.llvm, "get_host_cpu_features", lambda: _Features(ZEN4_FEATURES))
    cpu.host_cpu.cache_clear()
    yield cpu.host_cpu()
    cpu.host_cpu.cache_clear()


def depthwise_relu6(channels: int = 16, size: int = 14, k: int = 3):
    """MobileNetV2's depthwise 3x3 conv with bias and ReLU6: rows of 14 outputs."""
    b = GraphBuilder()
    x = b.input("x", (1, channels, size, size))
    w = b.input("w", (channels, 1, k, k))
    bias = b.input("bias", (1, channels, 1, 1))
    y = b.conv2d(x, w, pads=(k // 2,) * 4, groups=channels) + bias
    b.output(b.minimum(b.maximum(y, 0.0), 6.0))
    return b.module()


def test_zen4_is_tuned_off_gathers_and_scatters(zen4_host):
    name, features = zen4_host
    assert name == "znver4"
    assert {"+prefer-no-gather", "+prefer-no-scatter", "-prefer-256-bit"} <= set(features.split(","))


def test_depthwise_conv_rows_vectorize_without_gathers(zen4_host):
    """LLVM fully unrolls the 14-wide output row; with gathers allowed it then
    vectorized the loop over rows with a gather and a scatter per vector, 2.3x slower
    than the SLP vectorizer's contiguous loads along the row."""
    module = depthwise_relu6()
    run_pipeline(module, pipelines.cpu_pipeline(depthwise=False))  # the window nest's rows
    text = cpu.optimized_ir(to_llvmlite(module), *zen4_host)
    assert re.search(r"fmuladd.v(8|16)f32\(", text)  # the row is vectorized (flat: 16 lanes), its taps fused
    assert "masked.gather" not in text and "masked.scatter" not in text


def test_wide_depthwise_rows_stay_loops(zen4_host):
    """28-wide rows: LLVM unrolled the row loop fully and the rows around it, then the
    SLP vectorizer worked through 3563 lines (MobileNetV2: 4.1 s of LLVM instead of
    1.7). Marked to stay loops (to_llvm.row_loop), the loop vectorizer takes them."""
    module = depthwise_relu6(8, 28)
    run_pipeline(module, pipelines.cpu_pipeline(depthwise=False))  # the window nest's rows
    text = cpu.optimized_ir(to_llvmlite(module), *zen4_host)
    assert "vector.body" in text and "llvm.loop.unroll.disable" in text
    assert len(text.splitlines()) < 1500


def test_flat_window_rows_interleave_their_tap_chains(zen4_host):
    """A 5x5 depthwise conv at 14x14 runs its rows flat (248 positions in an 18-wide
    pitch), 25 taps a position: one chain of dependent FMAs per vector, which LLVM's cost
    model did not interleave. The row loop asks for four vectors side by side."""
    module = depthwise_relu6(8, 14, 5)
    run_pipeline(module, pipelines.cpu_pipeline(depthwise=False))  # the window nest's rows
    ir = to_llvmlite(module)
    assert '!"llvm.loop.interleave.count", i32 4' in str(ir)
    assert "vector.body" in cpu.optimized_ir(ir, *zen4_host)


def expand_then_strided_depthwise(channels: int = 16, size: int = 28):
    """MobileNetV2's expand (1x1 conv, bias, ReLU6) into a stride-2 depthwise 3x3 conv."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, size, size))
    w1, b1 = b.input("w1", (channels, 8, 1, 1)), b.input("b1", (1, channels, 1, 1))
    w2, b2 = b.input("w2", (channels, 1, 3, 3)), b.input("b2", (1, channels, 1, 1))
    e = b.minimum(b.maximum(b.conv2d(x, w1) + b1, 0.0), 6.0)
    y = b.conv2d(e, w2, pads=(1, 1, 1, 1), strides=(2, 2), groups=channels) + b2
    b.output(b.minimum(b.maximum(y, 0.0), 6.0))
    return b.module()


def test_rows_split_into_even_and_odd_columns_are_not_gathered(zen4_host):
    """The expand's rows go into the depthwise tile as their even and odd columns
    (loop-deinterleave-windows: 28 rows of 14 x 2). LLVM unrolled each row, then
    vectorized the loop over rows: 16 lanes from 16 rows, 498 inserts in one block that
    took it 0.6 s. That loop is marked to stay scalar (loop_to_scf.strided_around_short);
    the SLP vectorizer takes each row."""
    module = expand_then_strided_depthwise()
    run_pipeline(module, pipelines.cpu_pipeline(depthwise=False))  # the window nest's tile
    ir = to_llvmlite(module)
    assert '!"llvm.loop.vectorize.width", i32 1' in str(ir)
    text = cpu.optimized_ir(ir, *zen4_host)
    assert text.count("insertelement") < 100 and len(text.splitlines()) < 2000


@pytest.mark.parametrize("size", [14, 28])  # rows unrolled by LLVM, rows kept as loops
def test_depthwise_conv_matches_numpy(size):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 16, size, size)).astype(np.float32) * 4
    w = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    bias = rng.standard_normal((1, 16, 1, 1)).astype(np.float32)
    fn = mlfuse.compile(depthwise_relu6(16, size))
    out = np.full((1, 16, size, size), np.nan, np.float32)
    fn(x, w, bias, out=out)
    # the taps summed in f64 against the f32 kernel, which may fuse each multiply-add (an
    # fma, as the GEMM kernels do): within the sum's rounding bound, 2 * 10 * u * sum |term|
    # (nine products and the bias; the clip moves no value further apart)
    xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)]).astype(np.float64)
    terms = [xp[:, :, i : i + size, j : j + size] * w[None, :, 0, i, j, None, None] for i in range(3) for j in range(3)]
    terms.append(np.broadcast_to(bias.astype(np.float64), out.shape))
    bound = 2 * len(terms) * 2.0**-24 * sum(np.abs(t) for t in terms)
    assert np.all(np.abs(out - np.clip(sum(terms), 0, 6)) <= bound)


def test_the_cpu_pipeline_takes_channel_tiles_where_the_host_has_them(monkeypatch, zen4_host):
    """cpu_pipeline asks the host: on AVX-512 (the faked Zen 4) convert-graph-to-loop runs
    with channel-tiles (convs over few pixels read their patches in place), on an AVX2 host
    without; an explicit value wins. Depthwise kernels on every host unless turned off.
    pipelines.step_index finds the pass either way."""
    steps = pipelines.cpu_pipeline()
    assert "convert-graph-to-loop{channel-tiles=true depthwise=true}" in steps
    assert steps[pipelines.step_index(steps, "convert-graph-to-loop")] == "convert-graph-to-loop{channel-tiles=true depthwise=true}"
    assert "convert-graph-to-loop" in pipelines.cpu_pipeline(channel_tiles=False, depthwise=False)
    avx2 = ",".join(f for f in ZEN4_FEATURES.split(",") if not f.startswith("+avx512"))
    monkeypatch.setattr(cpu.llvm, "get_host_cpu_name", lambda: "znver3")
    monkeypatch.setattr(cpu.llvm, "get_host_cpu_features", lambda: _Features(avx2))
    cpu.host_cpu.cache_clear()
    steps = pipelines.cpu_pipeline()
    assert "convert-graph-to-loop{depthwise=true}" in steps and not any("channel-tiles" in s for s in steps)
    assert "convert-graph-to-loop{channel-tiles=true depthwise=true}" in pipelines.cpu_pipeline(channel_tiles=True)
