"""One object per kernel (mlfuse/backend/kernels.py) and serial kernels outlined
(convert-loop-to-scf{outline-serial=true}): the same results, identical kernels
compiled once, objects shared between graphs through the cache."""

from __future__ import annotations

import numpy as np
import pytest

import mlfuse
from mlfuse import api, pipelines
from mlfuse.backend import cpu, kernels

# two layers of the same shape: their kernels are identical up to their buffers
TWO_LAYERS = """
func.func @main(%x: tensor<16x64xf32>, %a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<16x64xf32> {
  %ab = graph.broadcast %a {dims = array<i64: 1>} : tensor<64xf32> -> tensor<16x64xf32>
  %y = graph.mul %x, %ab : tensor<16x64xf32>
  %m = graph.reduce_max %y {axes = array<i64: 1>, keepdims} : tensor<16x64xf32> -> tensor<16x1xf32>
  %mb = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<16x1xf32> -> tensor<16x64xf32>
  %z = graph.sub %y, %mb : tensor<16x64xf32>
  %bb = graph.broadcast %b {dims = array<i64: 1>} : tensor<64xf32> -> tensor<16x64xf32>
  %y2 = graph.mul %z, %bb : tensor<16x64xf32>
  %m2 = graph.reduce_max %y2 {axes = array<i64: 1>, keepdims} : tensor<16x64xf32> -> tensor<16x1xf32>
  %mb2 = graph.broadcast %m2 {dims = array<i64: 0, 1>} : tensor<16x1xf32> -> tensor<16x64xf32>
  %z2 = graph.sub %y2, %mb2 : tensor<16x64xf32>
  func.return %z2 : tensor<16x64xf32>
}
"""


def inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [rng.standard_normal(s).astype(np.float32) for s in ((16, 64), (64,), (64,))]


def expected(last=np.subtract) -> np.ndarray:
    """TWO_LAYERS in numpy (`last`: the final op)."""
    x, a, b = inputs()
    y = x * a
    y2 = (y - y.max(axis=1, keepdims=True)) * b
    return last(y2, y2.max(axis=1, keepdims=True))


@pytest.mark.parametrize("outline", [False, True])
def test_results_match_the_reference(cache_root, outline):
    f = mlfuse.compile(TWO_LAYERS, passes=pipelines.cpu_pipeline(outline_serial=outline))
    (got,) = f(*inputs())
    np.testing.assert_allclose(got, expected(), rtol=1e-6, atol=1e-6)


def llvm_text(source: str, fuse: bool = True, merge: bool = True) -> str:
    from mlfuse.backend.llvm_translate import to_llvmlite

    module = api.parse(source)
    api.run_pipeline(module, [p for p in pipelines.cpu_pipeline(fuse=fuse) if merge or p != "merge-kernels"])
    return str(to_llvmlite(module, external={}))


def test_repeated_kernels_are_lowered_once():
    """merge-kernels: the second layer calls the first layer's kernels, and the units
    (what LLVM compiles) are the same as when the splitter found the twins."""
    merged, apart = llvm_text(TWO_LAYERS, fuse=False), llvm_text(TWO_LAYERS, fuse=False, merge=False)
    defined = lambda text: [line for line in text.split("\n") if line.startswith('define void @"main__')]  # noqa: E731
    assert 0 < len(defined(merged)) < len(defined(apart))
    units = lambda text: sorted(u.text for u in kernels.split_units(text, keep={"main"}) or [] if u.name != "main")  # noqa: E731
    assert units(merged) == units(apart)


def test_repeated_kernels_are_one_unit():
    # an op per kernel: the layers' are alike (merge-kernels off, so the splitter sees the twins)
    text = llvm_text(TWO_LAYERS, fuse=False, merge=False)
    units = kernels.split_units(text, keep={"main"})
    assert units is not None
    names = [u.name for u in units]
    assert names[-1] == "main" and len(set(names)) == len(names)
    kernels_in_ir = [line for line in text.split("\n") if line.startswith('define void @"main__')]
    assert len(units) - 1 < len(kernels_in_ir), "the second layer's kernels are the first's"
    entry = units[-1].text
    assert all(f'@"{u.name}"' in entry for u in units[:-1] if u.name.startswith(kernels.PREFIX))
    # named after their ops (profiles stay readable), without the entry's op counter
    ops = {line.split("_", 3)[-1].split('"')[0] for line in kernels_in_ir}
    renamed = [u.name for u in units if u.name.startswith(kernels.PREFIX)]
    assert renamed and all(any(n.endswith("_" + op) for op in ops) for n in renamed), (renamed, ops)


def test_units_are_modules_of_their_own():
    for unit in kernels.split_units(llvm_text(TWO_LAYERS), keep={"main"}) or []:
        cpu.prepare(unit.text)  # parses and verifies alone


def test_a_module_the_splitter_does_not_know_is_compiled_whole():
    text = llvm_text(TWO_LAYERS) + "\n$unused = comdat any\n"
    assert kernels.split_units(text, keep={"main"}) is None
    objects, keys = cpu.compile_units(text, keep={"main"})
    assert len(objects) == len(keys) == 1


def test_kernels_are_cached_on_their_own(cache_root, monkeypatch):
    """A second graph holding the first one's kernels compiles only what is new: the
    kernel that changed, and the entry that calls it."""
    unfused = pipelines.cpu_pipeline(fuse=False)  # an op per kernel
    mlfuse.compile(TWO_LAYERS, passes=unfused)
    compiled: list[str] = []
    original = cpu.emit_object

    def record(text: str) -> bytes:  # LLVM's work on a unit the cache did not hold
        compiled.append(text)
        return original(text)

    monkeypatch.setattr(cpu, "emit_object", record)
    monkeypatch.setattr(cpu, "PARALLEL_MIN_UNITS", 1 << 30)  # in this process, where `compiled` is
    api._MEMORY_CACHE.clear()
    other = TWO_LAYERS.replace("%z2 = graph.sub %y2, %mb2", "%z2 = graph.add %y2, %mb2")
    f = mlfuse.compile(other, passes=unfused)
    (got,) = f(*inputs())
    np.testing.assert_allclose(got, expected(np.add), rtol=1e-6, atol=1e-6)
    units = kernels.split_units(llvm_text(other, fuse=False), keep={"main"}) or []
    assert len(compiled) == 2 < len(units)


def product_graph(n: int, epilogue: str) -> str:
    return f"""
func.func @main(%x: tensor<{n}x256xf32>, %w: tensor<256x128xf32>) -> tensor<{n}x128xf32> {{
  %y = graph.matmul %x, %w : (tensor<{n}x256xf32>, tensor<256x128xf32>) -> tensor<{n}x128xf32>
  %z = graph.{epilogue} %y, %y : tensor<{n}x128xf32>
  func.return %z : tensor<{n}x128xf32>
}}
"""


def test_gemm_kernels_are_units_by_symbol(cache_root, monkeypatch):
    """The loader leaves generated GEMM kernels declared; each is a unit of its own
    (cpu.GemmSource), built where it is compiled and cached under its symbol: a second
    graph with the same product builds and compiles only what is new."""
    built: list[str] = []
    original = cpu.GemmSource.text
    monkeypatch.setattr(cpu.GemmSource, "text", lambda self: built.append(self.symbol) or original(self))
    monkeypatch.setattr(cpu, "PARALLEL_MIN_UNITS", 1 << 30)  # in this process, where `built` is
    rng = np.random.default_rng(5)
    for n, epilogue, again in ((96, "add", False), (96, "add", True), (128, "mul", False)):
        api._MEMORY_CACHE.clear()
        before = len(built)
        graph = product_graph(n, epilogue) + ("// another graph\n" if again else "")
        x, w = rng.standard_normal((n, 256)).astype(np.float32), rng.standard_normal((256, 128)).astype(np.float32)
        (got,) = mlfuse.compile(graph)(x, w)
        y = x.astype(np.float64) @ w
        np.testing.assert_allclose(got, y + y if epilogue == "add" else y * y, rtol=1e-5, atol=1e-4)
        assert len(built) == before + (0 if again else 1), built
    assert len(set(built)) == 2 and all(s.startswith("mlfuse_gemm_f32_") for s in built)


# --- LLVM in a pool of forked processes (cpu.compile_texts) -----------------------------


def test_pool_objects_are_the_serial_ones():
    texts = [u.text for u in kernels.split_units(llvm_text(TWO_LAYERS, fuse=False), keep={"main"}) or []]
    assert len(texts) >= 3
    assert cpu.compile_texts(texts, jobs=2) == [cpu.emit_object(t) for t in texts]


@pytest.mark.parametrize("beside_a_thread", [False, True])
def test_compiles_use_the_pool_and_match(cache_root, monkeypatch, beside_a_thread):
    """The LLVM work goes to the pool, with the serial results, also while another Python
    thread runs (Jupyter's kernel and torch.compile leave some). The workers write the
    units' cache entries: the next compile finds all of them."""
    import threading

    idle = threading.Event()
    if beside_a_thread:
        threading.Thread(target=idle.wait, daemon=True).start()
    monkeypatch.setattr(cpu, "PARALLEL_MIN_UNITS", 2)
    monkeypatch.setenv("MLFUSE_COMPILE_JOBS", "2")
    pooled: list[int] = []
    original = cpu._compile_in_pool
    monkeypatch.setattr(cpu, "_compile_in_pool", lambda texts, jobs, *rest: pooled.append(jobs) or original(texts, jobs, *rest))
    try:
        f = mlfuse.compile(TWO_LAYERS, passes=pipelines.cpu_pipeline(fuse=False))
        (got,) = f(*inputs())
    finally:
        idle.set()
    np.testing.assert_allclose(got, expected(), rtol=1e-6, atol=1e-6)
    assert pooled == [2]
    monkeypatch.setattr(api, "_MEMORY_CACHE", type(api._MEMORY_CACHE)())
    monkeypatch.setattr(cpu, "emit_object", lambda source: pytest.fail("compiled a unit the workers had stored"))
    (again,) = mlfuse.compile(TWO_LAYERS, passes=pipelines.cpu_pipeline(fuse=False))(*inputs())
    np.testing.assert_array_equal(again, got)


def test_no_pool_for_few_units_in_a_forked_child_or_for_one_job(monkeypatch):
    import threading

    monkeypatch.delenv("MLFUSE_COMPILE_JOBS", raising=False)
    assert cpu.compile_jobs(cpu.PARALLEL_MIN_UNITS - 1) == 1
    monkeypatch.setenv("MLFUSE_COMPILE_JOBS", "1")
    assert cpu.compile_jobs(100) == 1
    monkeypatch.setenv("MLFUSE_COMPILE_JOBS", "3")
    assert cpu.compile_jobs(100) == 3
    monkeypatch.setattr(threading, "active_count", lambda: 5)  # other Python threads: the pool all the same
    assert cpu.compile_jobs(100) == 3
    monkeypatch.setattr(cpu, "_forked", True)
    assert cpu.compile_jobs(100) == 1


STUCK: dict = {}


def stuck_in_workers(source):
    """emit_object, but a pool worker (a process other than the test's) never answers."""
    import os
    import time

    if os.getpid() != STUCK["parent"]:
        time.sleep(60)
    return STUCK["emit"](source)


def test_a_stuck_pool_is_left_and_the_units_compile_here(monkeypatch):
    """A worker that never answers (one forked while another thread held a lock it
    waits for) costs POOL_STALL_S, not a hang: its workers are killed and this process
    compiles the units, to the same objects."""
    import os
    import time

    texts = [u.text for u in kernels.split_units(llvm_text(TWO_LAYERS), keep={"main"}) or []]
    want = [cpu.emit_object(t) for t in texts]
    monkeypatch.setitem(STUCK, "parent", os.getpid())
    monkeypatch.setitem(STUCK, "emit", cpu.emit_object)
    monkeypatch.setattr(cpu, "emit_object", stuck_in_workers)  # pickled by name: the workers find it
    monkeypatch.setattr(cpu, "POOL_STALL_S", 1.0)
    start = time.perf_counter()
    assert cpu.compile_texts(texts, jobs=2) == want
    assert time.perf_counter() - start < 30


def test_a_failed_pool_compiles_here(cache_root, monkeypatch):
    """... and stores the objects here when asked to (the workers would have)."""
    from mlfuse import cache

    texts = [u.text for u in kernels.split_units(llvm_text(TWO_LAYERS), keep={"main"}) or []]
    monkeypatch.setattr(cpu, "_compile_in_pool", lambda texts, jobs, *rest: None)
    assert cpu.compile_texts(texts, jobs=2) == [cpu.emit_object(t) for t in texts]
    assert not any(cache.has_object(cpu.unit_key(t)) for t in texts)
    cpu.compile_texts(texts, jobs=2, store=True)
    assert all(cache.has_object(cpu.unit_key(t)) for t in texts)


def aborting_in_llvm(source):
    """emit_object, but a text marked `; ABORT` ends its process as a failed LLVM
    assertion does, while the loop vectorizer is on (`; ABORT ALWAYS`: either way)."""
    import os

    if isinstance(source, str) and "; ABORT" in source and (cpu._vectorize_loops or "ALWAYS" in source):
        os.abort()
    return STUCK["emit"](source)


def test_a_unit_that_aborts_llvm_compiles_in_a_child_without_the_loop_vectorizer(monkeypatch):
    """A pool worker killed by an LLVM abort breaks the pool; the units it did not
    deliver compile each in a child of their own (not here: the abort would end this
    process), the aborting one again without the loop vectorizer."""
    texts = [u.text for u in kernels.split_units(llvm_text(TWO_LAYERS), keep={"main"}) or []]
    want = [cpu.emit_object(t) for t in texts]
    texts[0] = "; ABORT\n" + texts[0]
    monkeypatch.setitem(STUCK, "emit", cpu.emit_object)
    monkeypatch.setattr(cpu, "emit_object", aborting_in_llvm)
    got = cpu.compile_texts(texts, jobs=2)
    assert got[1:] == want[1:] and got[0]  # the first one's code is the scalar loops'


def test_a_unit_that_always_aborts_llvm_is_an_internal_error_with_a_reproducer(monkeypatch):
    from mlfuse.diagnostics import Diagnostic

    texts = [u.text for u in kernels.split_units(llvm_text(TWO_LAYERS), keep={"main"}) or []]
    texts[-1] = "; ABORT ALWAYS\n" + texts[-1]
    monkeypatch.setitem(STUCK, "emit", cpu.emit_object)
    monkeypatch.setattr(cpu, "emit_object", aborting_in_llvm)
    with pytest.raises(Diagnostic, match="internal error: LLVM failed: RuntimeError: LLVM aborted") as info:
        cpu.compile_texts(texts, jobs=2)
    assert "reproducer written to" in (info.value.context or "")


# A maxnum reduction of 105 iterations without its vector width (to_llvm.MINMAX_REDUCTION):
# LLVM 22's loop vectorizer aborts on it for Zen 4 (an assertion; other CPUs may pass it)
MAXNUM_105 = """declare float @llvm.maxnum.f32(float, float)
define void @max105(ptr noalias align 64 %x, ptr noalias align 64 %acc) {
entry:
  br label %h
h:
  %i = phi i64 [0, %entry], [%n, %b]
  %c = icmp slt i64 %i, 105
  br i1 %c, label %b, label %e
b:
  %p = getelementptr inbounds float, ptr %x, i64 %i
  %v = load float, ptr %p, align 4
  %a = load float, ptr %acc, align 4
  %m = call float @llvm.maxnum.f32(float %a, float %v)
  store float %m, ptr %acc, align 4
  %n = add nsw i64 %i, 1
  br label %h, !llvm.loop !0
e:
  ret void
}
!0 = !{!0, !1}
!1 = !{!"llvm.loop.unroll.disable"}
"""


def test_llvms_own_abort_in_a_pool_worker_leaves_this_process_running():
    texts = [u.text for u in kernels.split_units(llvm_text(TWO_LAYERS), keep={"main"}) or []]
    got = cpu.compile_texts([*texts, MAXNUM_105], jobs=2)
    assert len(got) == len(texts) + 1 and all(got)


def test_pool_error_shows_as_the_serial_error():
    with pytest.raises(RuntimeError):
        cpu.compile_texts(["define void @f() {\n  ret i32 0\n}\n"] * 2, jobs=2)


# --- GEMM kernels compiling while convert-to-llvm runs (cpu.early_gemms) ----------------

# x @ w1 + b, then relu(.) @ W2 with W2 a constant: its panels are laid out at compile time
W2 = ((np.arange(128 * 64).reshape(128, 64) * 7 % 13) - 6).astype(np.float32) / 16
TWO_PRODUCTS = f"""
func.func @main(%x: tensor<96x256xf32>, %w1: tensor<256x128xf32>) -> tensor<96x64xf32> {{
  %w2 = graph.constant dense<{W2.tolist()}> : tensor<128x64xf32>
  %b = graph.constant dense<0.5> : tensor<128xf32>
  %zero = graph.constant dense<0.0> : tensor<96x128xf32>
  %y = graph.matmul %x, %w1 : (tensor<96x256xf32>, tensor<256x128xf32>) -> tensor<96x128xf32>
  %bb = graph.broadcast %b {{dims = array<i64: 1>}} : tensor<128xf32> -> tensor<96x128xf32>
  %z = graph.add %y, %bb : tensor<96x128xf32>
  %r = graph.max %z, %zero : tensor<96x128xf32>
  %o = graph.matmul %r, %w2 : (tensor<96x128xf32>, tensor<128x64xf32>) -> tensor<96x64xf32>
  func.return %o : tensor<96x64xf32>
}}
"""


def two_products(x: np.ndarray, w1: np.ndarray) -> np.ndarray:
    return np.maximum(x.astype(np.float64) @ w1 + 0.5, 0) @ W2


@pytest.mark.parametrize("graph, marks", [("products", ["_pb"]), ("conv", ["_pa", "_e."]), ("conv-w", ["_w3x3", "_e."])])
def test_expected_gemms_are_the_declared_ones(graph, marks):
    """The loader's guess where the GEMM units are fixed (pipelines.gemm_units_fixed;
    api.expected_gemms: symbols, packing, epilogue operands) is what convert-to-llvm
    declares; a wrong guess would only compile a kernel for nothing. Products with
    constant weights (packed panels) and convs with epilogues (bias, residual, ReLU)."""
    from test_gemm_epilogue import conv_block

    from mlfuse.backend.llvm_translate import to_llvmlite

    module = {"products": lambda: api.parse(TWO_PRODUCTS), "conv": lambda: conv_block(True, True)[0],
              "conv-w": lambda: conv_block(False, False)[0]}[graph]()
    steps = pipelines.cpu_pipeline()
    fixed = pipelines.gemm_units_fixed(steps[:-1])
    assert steps[fixed] == pipelines.GEMM_UNITS_FIXED_AT
    api.run_pipeline(module, steps[:fixed])
    guessed = api.expected_gemms(module, steps[-1:])
    api.run_pipeline(module, steps[fixed:], verify_result=False)
    declared = cpu.gemm_sources(to_llvmlite(module, external={}, define_gemms=False))
    assert declared and sorted(guessed, key=str) == sorted(declared, key=str)
    assert all(any(mark in s.symbol for s in declared) for mark in marks), [s.symbol for s in declared]
    assert api.expected_gemms(module, []) == [] and api.expected_gemms(module, ["convert-to-llvm{gemm=blas}"]) == []


@pytest.mark.parametrize("fails", [False, True])
def test_gemms_compile_early_in_the_pool(cache_root, monkeypatch, fails):
    """Both GEMM kernels start in the pool before convert-to-llvm, compile_units takes
    them from it with the other units; a pool that fails leaves the compile to this
    process. Same results either way."""
    monkeypatch.setenv("MLFUSE_COMPILE_JOBS", "2")
    started: list[list[str]] = []
    original = cpu.early_gemms

    def early(sources):
        started.append([s.symbol for s in sources])
        return original(sources)

    monkeypatch.setattr(cpu, "early_gemms", early)
    if fails:
        monkeypatch.setattr(cpu.UnitPool, "submit", lambda self, source: (_ for _ in ()).throw(OSError("no fork")))
    rng = np.random.default_rng(11)
    x, w1 = rng.standard_normal((96, 256)).astype(np.float32), rng.standard_normal((256, 128)).astype(np.float32)
    (got,) = mlfuse.compile(TWO_PRODUCTS)(x, w1)
    np.testing.assert_allclose(got, two_products(x, w1), rtol=1e-5, atol=1e-3)
    assert len(started) == 1 and len(started[0]) == 2


def test_units_carry_their_own_metadata_numbered_alike():
    """Twin kernels whose modules numbered their loop IDs apart get the same unit text,
    holding only the nodes they use (a loop ID refers to itself)."""
    code = lambda n: ['define void @"k"()', "{", f"  br label %.1, !llvm.loop !{n}", "}"]  # noqa: E731
    one = kernels.with_own_metadata(code(2), ['!0 = !{ !"x" }', '!1 = !{ !"llvm.loop.unroll.disable" }', "!2 = !{ !2, !1 }"])
    other = kernels.with_own_metadata(code(7), ['!3 = !{ !"llvm.loop.unroll.disable" }', "!7 = !{ !7, !3 }", "!8 = !{ !8, !3 }"])
    assert one == other == [*code(0), "!0 = !{ !0, !1 }", '!1 = !{ !"llvm.loop.unroll.disable" }']


def test_gemm_units_are_optimized_at_their_own_level(monkeypatch):
    """A generated GEMM kernel's unit is optimized at cpu.GEMM_SPEED_LEVEL (O1: its vector
    code is explicit), any other unit at O3; both still make an object that runs."""
    from mlfuse.backend.gemm_kernels import GemmShape

    levels = []
    real = cpu.optimize
    monkeypatch.setattr(cpu, "optimize", lambda mod, tm=None, speed_level=3: (levels.append(speed_level), real(mod, tm, speed_level))[1])
    source = cpu.GemmSource(GemmShape(1, 16, 64, 32).symbol, 3, cpu.host_cpu()[1])
    assert cpu.emit_object(source) and levels == [cpu.GEMM_SPEED_LEVEL] and cpu.GEMM_SPEED_LEVEL == 1
    assert cpu.emit_object("define void @f() {\n  ret void\n}\n") and levels == [1, 3]


def test_a_units_object_key_holds_the_compiler(monkeypatch):
    """The same LLVM text under another compiler (another optimize pipeline or streaming
    hints, which are mlfuse's code) must not find the objects made before."""
    from mlfuse import cache

    text = "define void @f() {\n  ret void\n}\n"
    before = cpu.object_key(text)
    monkeypatch.setattr(cache, "compiler_fingerprint", lambda: "another compiler")
    assert cpu.object_key(text) != before
