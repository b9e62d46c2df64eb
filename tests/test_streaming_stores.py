"""Streaming accesses (mlfuse/backend/streaming.py), end to end: non-temporal
stores for large outputs, software prefetches for rows that stream into a band.

Outputs of 32 MiB and more stream; results must be the same bits as the plain
stores (convert-loop-to-scf{streaming=false}), whether the caller's out= array
is 64-byte aligned, 16-byte aligned (the variant for np.empty) or neither (the
runtime writes it through a copy), and whether rows start whole cache lines into
the buffer or are peeled (rows of 1001 and 1004 floats, 1-D chunks split across
threads). Outputs are poisoned with NaN first.
"""

from __future__ import annotations

import numpy as np
import pytest

import mlfuse
from mlfuse import pipelines
from mlfuse.backend import streaming
from mlfuse.frontend.builder import GraphBuilder

ROWS, COLS = 8192, 1024  # 32 MiB of f32: exactly the streaming threshold


def layernorm_and_scale(rows: int = ROWS, cols: int = COLS):
    b = GraphBuilder()
    x = b.input("x", (rows, cols))
    gamma = b.input("gamma", (cols,))
    mean = b.mean(x, axis=-1, keepdims=True)
    centered = x - mean
    var = b.mean(centered * centered, axis=-1, keepdims=True)
    b.output(centered * b.rsqrt(var + 1e-5) * gamma, x * 2.0 + 1.0)
    return b.module()


SCF_STEP = "convert-loop-to-scf{parallel=true outline-serial=true}"


def plain_pipeline():
    return [s if s != SCF_STEP else SCF_STEP.replace("}", " streaming=false}") for s in pipelines.cpu_pipeline()]


def misaligned(shape, offset_bytes: int) -> np.ndarray:
    raw = np.empty(int(np.prod(shape)) * 4 + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset_bytes
    return raw[start : start + int(np.prod(shape)) * 4].view(np.float32).reshape(shape)


def test_compiled_streaming_code_has_nontemporal_stores():
    steps = pipelines.cpu_pipeline()
    assert SCF_STEP in steps  # plain_pipeline relies on the spelling
    from mlfuse.api import run_pipeline
    from mlfuse.backend import cpu
    from mlfuse.backend.llvm_translate import to_llvmlite

    module = layernorm_and_scale()
    run_pipeline(module, steps)
    text = cpu.optimized_ir(to_llvmlite(module))
    assert "!nontemporal" in text and "llvm.x86.sse.sfence" in text
    assert "call void @llvm.prefetch.p0" in text  # the LayerNorm rows stream in


@pytest.mark.parametrize(
    "cols, offset", [(COLS, 0), (COLS, 4), (COLS, 16), (1001, 0), (1001, 16), (1004, 48), (COLS, 32), (7, 16), (23, 0)]
)
def test_streaming_matches_plain_stores(cols, offset):
    rows = -(-(1 << 25) // (cols * 4))  # just past the streaming threshold
    module = layernorm_and_scale(rows, cols)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    gamma = rng.standard_normal(cols).astype(np.float32)
    want = mlfuse.compile(module, passes=plain_pipeline())(x, gamma)
    outs = [misaligned((rows, cols), offset) for _ in range(2)]
    for o in outs:
        o.fill(np.nan)
    got = mlfuse.compile(module)(x, gamma, out=outs)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    ref = mlfuse.reference(module)(x, gamma)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=2e-5, atol=2e-5)


def test_rows_with_gaps_between_them_do_not_combine():
    """Concatenated along the last axis, the second part's rows are 1000 floats 1003
    apart: a row's tail and the next row's head share a line with 3 floats of the
    first part (written before) between them, so they go out plainly (a combined line
    would overwrite those)."""
    rows = 8400  # 32 MiB of output
    b = GraphBuilder()
    x, y = b.input("x", (rows, 1000)), b.input("y", (rows, 3))
    b.output(b.concat([y * 3.0, b.exp(x)], axis=1))
    module = b.module()
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((rows, n)).astype(np.float32) for n in (1000, 3)]
    want = mlfuse.compile(module, passes=plain_pipeline())(*xs)[0]
    for offset in (0, 16):
        out = misaligned((rows, 1003), offset)
        out.fill(np.nan)
        mlfuse.compile(module)(*xs, out=[out])
        np.testing.assert_array_equal(out, want)


def test_f64_rows_peel_by_eight():
    rows, cols = 4200, 1001  # 8 doubles a line
    b = GraphBuilder()
    x = b.input("x", (rows, cols), "f64")
    b.output(b.exp(x) - b.mean(x, axis=-1, keepdims=True))
    module = b.module()
    xs = np.random.default_rng(5).standard_normal((rows, cols))
    want = mlfuse.compile(module, passes=plain_pipeline())(xs)[0]
    raw = np.empty(rows * cols * 8 + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + 16
    out = raw[start : start + rows * cols * 8].view(np.float64).reshape(rows, cols)
    out.fill(np.nan)
    mlfuse.compile(module)(xs, out=[out])
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("offset", [0, 16])
def test_peeled_chunks_match_plain_stores(offset):
    # a 1-D nest split across threads: each thread's chunk is peeled where it starts
    n = (1 << 23) + 13
    b = GraphBuilder()
    x = b.input("x", (n,))
    b.output(b.exp(x) * 2.0)
    module = b.module()
    xs = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    want = mlfuse.compile(module, passes=plain_pipeline())(xs)[0]
    out = misaligned((n,), offset)
    out.fill(np.nan)
    mlfuse.compile(module)(xs, out=[out])
    np.testing.assert_array_equal(out, want)


def test_peeled_rows_stream_whole_lines_in_the_16_byte_variant():
    """The variant for out= from np.empty (outputs 16-byte aligned) streams rows of
    1001 floats with 64-byte aligned vector stores: the peel gives the alignment."""
    from mlfuse.api import run_pipeline
    from mlfuse.backend import cpu
    from mlfuse.backend.llvm_translate import to_llvmlite

    module = layernorm_and_scale(8400, 1001)
    steps = [s if s != "convert-to-llvm" else "convert-to-llvm{output-alignment=16}" for s in pipelines.cpu_pipeline()]
    assert steps[-1] == "convert-to-llvm{output-alignment=16}"
    run_pipeline(module, steps)
    text = cpu.optimized_ir(to_llvmlite(module), "skylake-avx512", "+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx2,+avx,+fma")
    assert "llvm.ptrmask" in text
    assert any("!nontemporal" in line and "align 32" in line for line in text.splitlines() if "store <8 x float>" in line)


ALIGNED = """define void @k(ptr %p, <16 x float> %v) {
  store <16 x float> %v, ptr %p, align 64, !tbaa !3
  store <16 x float> %v, ptr %p, align 4, !tbaa !3
  store float 1.0, ptr %p, align 64, !tbaa !3
  ret void
}
!0 = !{!"mlfuse.stream.root"}
!1 = !{!"mlfuse.stream", !0, i64 0}
!3 = !{!1, !1, i64 0}"""


def test_only_aligned_vector_stores_become_nontemporal():
    out = streaming.apply_streaming(ALIGNED, "x86_64-unknown-linux-gnu").split("\n")
    assert "!nontemporal" in out[1]
    assert "!nontemporal" not in out[2] and "!nontemporal" not in out[3]
    assert out[4] == "  call void @llvm.x86.sse.sfence()" and out[5] == "  ret void"
    assert streaming.apply_streaming(ALIGNED, "aarch64-unknown-linux-gnu") == ALIGNED
    plain = ALIGNED.replace("align 64, !tbaa !3\n  store <16", "align 4, !tbaa !3\n  store <16", 1)
    assert streaming.apply_streaming(plain, "x86_64-unknown-linux-gnu") == plain


PREFETCH = """define void @k(ptr %p, ptr %q) {
  %a = load <16 x float>, ptr %p, align 4, !tbaa !3
  %b = load <16 x float>, ptr %q, align 4
  %c = load float, ptr %p, align 4, !tbaa !3
  ret void
}
!0 = !{!"mlfuse.prefetch.root"}
!1 = !{!"mlfuse.prefetch", !0, i64 0}
!3 = !{!1, !1, i64 0}"""


def test_tagged_vector_loads_prefetch_ahead():
    out = streaming.apply_streaming(PREFETCH, "x86_64-unknown-linux-gnu").split("\n")
    assert out[2] == f"  %mlfuse.prefetch.1 = getelementptr i8, ptr %p, i64 {streaming.PREFETCH_BYTES}"
    assert out[3] == "  call void @llvm.prefetch.p0(ptr %mlfuse.prefetch.1, i32 0, i32 3, i32 1)"
    assert out[4].startswith("  %b = load") and out[5].startswith("  %c = load") and out[6] == "  ret void"
    assert "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)" in out
    assert "sfence" not in "\n".join(out)


def low_threshold_pipeline():
    """The CPU pipeline with buffers of 4 KiB and up streaming: small shapes exercise the
    peeled rows and their line carry."""
    return [s if s != SCF_STEP else SCF_STEP.replace("}", " streaming-min-bytes=4096}") for s in pipelines.cpu_pipeline()]


def random_row_graph(rng: np.random.Generator, rows: int, cols: int):
    """A row kernel (a reduction, then a write of the row), an elementwise output, or a
    concat whose parts' rows have gaps between them, chosen by `rng`."""
    b = GraphBuilder()
    x = b.input("x", (rows, cols))
    kind = int(rng.integers(4))
    if kind == 0:
        b.output(x - b.mean(x, axis=-1, keepdims=True) * 0.5)
    elif kind == 1:
        b.output(b.exp(x) * 2.0)
    elif kind == 2:
        b.output(b.concat([x * 3.0, b.exp(x)], axis=1))
    else:  # two streamed outputs of one nest: windows for both when they start alike
        b.output(b.exp(x), x * 2.0 + 1.0)
    return b.module()


def test_peeled_rows_on_random_small_shapes():
    """Seeded: random row widths, row counts and out= offsets (16-byte ones go to the
    variant for np.empty, others through a copy; two outputs aligned alike or not), 1 or
    2 threads: the same bits as plain stores. Failures print the seed and the case."""
    from mlfuse.backend import cpu

    seed = 20261202
    rng = np.random.default_rng(seed)
    before = cpu.team_size()
    try:
        for case in range(48):
            rows, cols = int(rng.integers(2, 400)), int(rng.integers(1, 90))
            offset = int(rng.choice([0, 16, 32, 48, 4]))
            cpu.set_num_threads(int(rng.integers(1, 3)))
            module = random_row_graph(rng, rows, cols)
            x = rng.standard_normal((rows, cols)).astype(np.float32)
            wants = mlfuse.compile(module, passes=plain_pipeline())(x)
            offsets = [offset, *(int(rng.choice([offset, 0, 16, 48])) for _ in wants[1:])]
            outs = [misaligned(w.shape, o) for w, o in zip(wants, offsets)]
            for out in outs:
                out.fill(np.nan)
            mlfuse.compile(module, passes=low_threshold_pipeline())(x, out=outs)
            for out, want in zip(outs, wants):
                assert np.array_equal(out, want), f"seed {seed} case {case}: {rows}x{cols}, offsets {offsets}"
    finally:
        cpu.set_num_threads(before)
