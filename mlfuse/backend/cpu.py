"""CPU JIT: llvmlite module -> optimized machine code -> a callable on numpy arrays.

- LLVM's O3 pipeline for the host CPU (its name and features), loop and SLP
  vectorizers on. Fast-math flags come only from the IR (the `fast_math` option
  of `mlfuse.compile`).
- Multi-core: generated code calls mlfuse's thread pool (`mlfuse_parallel`,
  mlfuse/backend/pool.py) directly, so the whole compiled function runs without
  returning to Python, and the pool's workers stay warm between calls. The team's
  size is libgomp's per-thread setting (omp_get_max_threads; libgomp ships with gcc
  on every Linux machine); `set_num_threads` bounds the team of every later call,
  from any thread. A child forked after the runtime loaded runs compiled code on
  one thread (the pool's workers do not survive fork).
- Stores marked streaming become non-temporal after O3 (mlfuse/backend/streaming.py).
- Object code is cached on disk, keyed by the LLVM IR and the host CPU, so the
  same graph does not go through LLVM twice (see mlfuse/cache.py for the keys).
  A graph is compiled as one object per kernel (`compile_units`, see
  mlfuse/backend/kernels.py): identical kernels once, each cached on its own, all
  linked in one engine; the units not cached go through LLVM in a pool of forked
  processes (`compile_texts`) when there are enough of them.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import hashlib
import os
import threading
import warnings
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from multiprocessing.connection import Connection

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np

from mlfuse.backend import pool


def _blas_address(routine: str) -> int:
    """The C address of scipy's BLAS routine (scipy.linalg.cython_blas exports it)."""
    from scipy.linalg import cython_blas

    capsule = cython_blas.__pyx_capi__[routine]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(capsule, get_name(capsule))


@functools.cache
def _init() -> None:
    # libgomp: the team's size (omp_get_max_threads, the calling thread's setting);
    # the team itself is mlfuse's pool (pool.register, when an object calls it)
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    gomp = ctypes.util.find_library("gomp") or "libgomp.so.1"
    try:
        llvm.load_library_permanently(gomp)
    except RuntimeError as e:  # pragma: no cover - every gcc-based Linux has it
        raise RuntimeError(f"mlfuse's CPU runtime needs libgomp ({gomp}): {e}") from None
    os.register_at_fork(after_in_child=_after_fork_in_child)


@functools.cache
def _register_blas() -> None:
    """convert-to-llvm{gemm=blas} calls scipy's BLAS; importing it costs ~0.2 s, so
    only objects that call it pay (see JitModule)."""
    llvm.add_symbol("mlfuse_sgemm", _blas_address("sgemm"))
    llvm.add_symbol("mlfuse_dgemm", _blas_address("dgemm"))


@functools.cache
def target_machine(cpu: str | None = None, features: str | None = None) -> llvm.TargetMachine:
    """The host CPU by default; a named CPU (e.g. for reproducible lit tests) otherwise.
    Shared by every compilation: never hand it to an execution engine (see JitModule)."""
    return new_target_machine(cpu, features)


def new_target_machine(cpu: str | None = None, features: str | None = None) -> llvm.TargetMachine:
    _init()
    target = llvm.Target.from_default_triple()
    if cpu is None:
        cpu, features = host_cpu()
    return target.create_target_machine(cpu=cpu, features=features or "", opt=3, codemodel="jitdefault")


@functools.cache
def host_cpu() -> tuple[str, str]:
    """The host's CPU name and LLVM features, with 512-bit vectors where it has AVX-512.

    LLVM tunes Intel's AVX-512 CPUs to vectorize loops 256 bits wide (prefer-256-bit:
    the frequency drop of 512-bit code on early Xeons), so its loop vectorizer wrote
    exp, tanh and erf with ymm while the hardware has two 512-bit FMA pipes (the GEMM
    kernels, 16 lanes by hand, run 200 GF/s a core). 16M f32, 2 threads, time over a
    copy's (bench/single_ops.py): exp 1.79 -> 1.43, tanh 1.97 -> 1.64, erf 1.87 -> 1.71;
    at 65536x1024 (mlfuse-bench, 2 threads) softmax 19.0 -> 15.5 ms and GELU with bias
    62 -> 27 ms, LayerNorm, RMSNorm and row sums within noise; whole models within noise.

    Gathers and scatters are tuned off (prefer-no-gather/scatter), as LLVM already does
    for Intel since Skylake but not for AMD's Zen: with them on, LLVM fully unrolled a
    short inner loop (a depthwise conv's 14-wide output row) and then vectorized the
    loop around it with a gather and a scatter per vector. Without them the SLP
    vectorizer writes the row with contiguous loads: MobileNetV2's 3x3 depthwise conv
    over 576x14x14 took 277 -> 121 us on Zen 4 (1 thread); whole models, 2 threads:
    MobileNetV2 0.84x, MobileNetV3-small 0.78x the time, ResNet-18 and U-Net within noise."""
    _init()
    name, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    flags = features.split(",")
    if "+avx512f" in flags:
        features += ",-prefer-256-bit"
    if "+avx2" in flags:
        features += ",+prefer-no-gather,+prefer-no-scatter"
    return name, features


@functools.cache
def host_key() -> str:
    """The target triple, CPU name and CPU features: part of every cache key and entry."""
    tm = target_machine()
    name, features = host_cpu()
    return f"{tm.triple}|{name}|{features}"


@functools.cache
def _gomp() -> ctypes.CDLL:
    _init()
    return ctypes.CDLL(ctypes.util.find_library("gomp") or "libgomp.so.1")


# libgomp keeps the team size per thread (omp_set_num_threads sets the calling
# thread's ICV; other threads keep the default). set_num_threads is process-wide:
# it records a request, and each call applies it for its own duration (team_of).
_requested: tuple[int] | None = None
_forked = False


def set_num_threads(n: int) -> None:
    """Bound the thread team of every later call, from any thread (like OMP_NUM_THREADS).

    In a forked child compiled code runs on one thread, and this is ignored."""
    global _requested
    if _forked:
        warnings.warn("mlfuse: in a forked child compiled code runs on one thread; set_num_threads ignored", stacklevel=2)
        return
    _requested = (max(1, int(n)),)


@functools.cache
def _default_team() -> int:
    return int(_gomp().omp_get_max_threads())  # asked before any omp_set_num_threads of ours


def team_size() -> int:
    """The most threads a call may use: the latest set_num_threads, else libgomp's
    default (OMP_NUM_THREADS, or the cores)."""
    request = _requested
    return request[0] if request is not None else _default_team()


@contextlib.contextmanager
def team_of(n: int) -> Iterator[None]:
    """Run the calling thread's team calls inside on `n` threads, then give the thread
    back the OpenMP setting it had (libgomp's ICV is per thread). torch's CPU ops share
    this libgomp and read and set the same ICV: when a thread's setting was applied
    once and cached, torch.set_num_threads(1) between two calls left mlfuse's calls on
    one thread (ResNet-18 at 2 threads 35 ms, against 18.8), and mlfuse's one-thread
    calls (TeamSizer's probes) left the thread's torch ops on one thread."""
    before = enter_team(n)
    try:
        yield
    finally:
        leave_team(before, n)


def enter_team(n: int) -> int:
    """Set the calling thread's team to `n` threads; its setting before (for leave_team).
    team_of without a generator, for the call path: after a model's kernels have run,
    Python's own data is out of the caches and every step of a call costs microseconds."""
    gomp = _gomp()
    before = int(gomp.omp_get_max_threads())
    if before != n:
        gomp.omp_set_num_threads(n)
    return before


def leave_team(before: int, n: int) -> None:
    if before != n:
        _gomp().omp_set_num_threads(before)


def _after_fork_in_child() -> None:
    """The pool's workers (and libgomp's) do not survive fork. With one thread, every
    team call takes its serial path and never enters mlfuse_parallel; the forking
    thread keeps that setting, for any OpenMP code in the child as well (libgomp's
    next parallel region would wait for its lost threads forever)."""
    global _requested, _forked
    _forked = True
    _requested = (1,)
    _gomp().omp_set_num_threads(1)
    pool.after_fork()


def get_max_threads() -> int:
    return int(_gomp().omp_get_max_threads())


# GEMM units (mlfuse/backend/gemm_kernels.py: explicit vector code, micro-kernels kept
# out of line) are optimized at O1: O3's extra loop passes found nothing to do in them but
# took their time, and neither did O2's. Cold compile, alternating in one process (O2
# over O3, medians of 3): MobileNetV2 0.91; O1 over O2, one CPU: its 29 GEMM units' LLVM
# time 0.93-0.97, the cold compile 0.98. Steady calls side by side, same bits
# (MobileNetV2, ResNet-18, GPT-2, ViT): 1 thread 0.98-1.01, 2 threads 0.99 (noise).
GEMM_SPEED_LEVEL = 1


# False only in a child that compiles again a unit whose LLVM run aborted (emit_isolated)
_vectorize_loops = True


def optimize(mod: llvm.ModuleRef, tm: llvm.TargetMachine | None = None, speed_level: int = 3) -> None:
    tm = tm or target_machine()
    pto = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    pto.loop_vectorization = _vectorize_loops
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pto.loop_interleaving = True
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)


def prepare(ir_module: ir.Module | str, tm: llvm.TargetMachine | None = None) -> llvm.ModuleRef:
    tm = tm or target_machine()
    mod = llvm.parse_assembly(str(ir_module))
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    return mod


def optimized_module(ir_module: ir.Module | str, tm: llvm.TargetMachine, speed_level: int = 3) -> tuple[llvm.ModuleRef, str]:
    """O3 (or `speed_level`) for `tm`, then the streaming hints that need vector code
    (streaming.py): the module and its text."""
    from mlfuse.backend.streaming import apply_streaming  # imports xDSL's llvm dialect: not on the cached path

    mod = prepare(ir_module, tm)
    optimize(mod, tm, speed_level)
    text = str(mod)
    hinted = apply_streaming(text, tm.triple)
    if hinted != text:
        mod = llvm.parse_assembly(hinted)
        mod.verify()
    return mod, hinted


def optimized_ir(ir_module: ir.Module | str, cpu: str | None = None, features: str | None = None) -> str:
    return optimized_module(ir_module, target_machine(cpu, features))[1]


# add_symbol is process-wide: binding one module's constants and resolving its relocations
# must not interleave with another module's (same symbol names, other addresses)
_BIND_LOCK = threading.Lock()


class JitModule:
    """Machine code loaded into an execution engine; functions by name. `object_code` is
    one object, or several (the units of mlfuse.backend.kernels) linked in the engine.

    `constants` are the bytes of the constants the object declares but does not hold
    (llvm_translate.to_llvmlite's `external`): each is copied into a 64-byte aligned
    buffer that lives as long as this module (a 64-byte aligned uint8 array, as the disk
    cache reads them, is kept as it is), and the object's references are bound to it
    when the engine resolves relocations (finalize_object)."""

    def __init__(self, object_code: bytes | Sequence[bytes], constants: Mapping[str, bytes | memoryview | np.ndarray] | None = None):
        _init()
        objects = [object_code] if isinstance(object_code, bytes) else list(object_code)
        if any(b"mlfuse_sgemm" in obj or b"mlfuse_dgemm" in obj for obj in objects):
            _register_blas()
        if any(pool.PARALLEL.encode() in obj for obj in objects):
            pool.register()
        self.constants = {name: _aligned_copy(data) for name, data in (constants or {}).items()}
        # the engine takes ownership of its target machine and frees it with itself:
        # a shared one would be freed under every later compilation
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), new_target_machine())
        with _BIND_LOCK:
            for name, buffer in self.constants.items():
                llvm.add_symbol(name, buffer.ctypes.data)
            for obj in objects:  # the engine links the calls between them (one unit per kernel)
                self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self.engine.finalize_object()
        self.object_code = object_code

    def global_int(self, name: str) -> int:
        """The value of an i64 global, or 0 when the module has none of that name."""
        addr = self.engine.get_global_value_address(name)
        return ctypes.c_int64.from_address(addr).value if addr else 0

    def address(self, name: str) -> int:
        addr = self.engine.get_function_address(name)
        if not addr:
            raise KeyError(f"no function '{name}' in compiled module")
        return addr


def _aligned_copy(data: bytes | memoryview | np.ndarray) -> np.ndarray:
    """`data` in 64-byte aligned memory: an aligned uint8 array as it is, else a copy."""
    from mlfuse.abi import ALIGNMENT
    from mlfuse.api import aligned_empty  # the runtime's one aligned allocator

    if isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1 and data.ctypes.data % ALIGNMENT == 0:
        return data
    buffer = aligned_empty((len(data),), np.uint8)
    buffer[:] = np.frombuffer(data, np.uint8)
    return buffer


def object_key(text: str) -> str:
    """The cache key of the object code of LLVM IR `text` on this host. The compiler is
    part of it: what becomes of the text (optimize's pipeline, the streaming hints) is
    mlfuse's code, so a change to it must not find the objects made before."""
    from mlfuse import cache

    return hashlib.sha256(
        f"{host_key()}|{llvm.llvm_version_info}|{cache.compiler_fingerprint()}\n{text}".encode()
    ).hexdigest()


def compile_object(ir_module: ir.Module | str) -> bytes:
    """Optimize at O3 for the host and emit an object file, through the disk cache."""
    text = str(ir_module)
    return _cached_object(text, object_key(text))


@dataclass(frozen=True)
class GemmSource:
    """The unit of one generated GEMM kernel (mlfuse.backend.gemm_kernels), named by its
    symbol (shape, packing, epilogue) and built where it is compiled: in a pool worker,
    beside the others, instead of in the process that runs the passes. Its cache key is
    the symbol, the host and the compiler (the kernel generator is part of it), so the
    kernel's text is never made for a cached object. Building ResNet-18's 16 kernels
    and printing them took 0.35 s + about 0.25 s of its cold compile's serial part."""

    symbol: str
    pointers: int  # A, B, C and the epilogue's operands, after the task range (lo, hi)
    features: str

    def text(self) -> str:
        from mlfuse.backend.gemm_kernels import define_gemm_kernels

        module = ir.Module()
        i64 = ir.IntType(64)
        ir.Function(module, ir.FunctionType(ir.VoidType(), [i64, i64] + [ir.PointerType()] * self.pointers), name=self.symbol)
        define_gemm_kernels(module, self.features)
        return str(module)

    def key(self) -> str:
        return object_key(f"; generated GEMM unit {self.symbol} ({self.pointers} pointers, {self.features})")


# what the pool schedules a GEMM unit as (the largest go first): about a kernel's text
GEMM_UNIT_CHARS = 100_000


def gemm_sources(ir_module: ir.Module | str) -> list[GemmSource]:
    """The GEMM kernels `ir_module` declares without a body (to_llvmlite with
    define_gemms=False), one per symbol."""
    from mlfuse.backend.gemm_kernels import GemmShape

    if isinstance(ir_module, str):
        return []
    return [
        GemmSource(fn.name, len(fn.args) - 2, host_cpu()[1])
        for fn in ir_module.functions
        if fn.is_declaration and GemmShape.from_symbol(fn.name) is not None
    ]


def compile_units(ir_module: ir.Module | str, keep: Collection[str], pool: UnitPool | None = None) -> tuple[list[bytes], list[str]]:
    """The module as one object per kernel (mlfuse.backend.kernels: identical kernels once;
    the functions in `keep` under their names, the others renamed), each object through
    the disk cache under its unit's text; the objects and their cache keys. A module the
    splitter does not take is one object. The GEMM kernels it declares are units of
    their own (GemmSource). The units the cache does not hold go through LLVM side by
    side in a process pool when there are enough of them (compile_texts)."""
    from mlfuse import cache
    from mlfuse.backend.kernels import split_units

    text = str(ir_module)
    units = split_units(text, keep)
    sources: list[str | GemmSource] = [u.text for u in units] if units is not None else [text]
    sources += gemm_sources(ir_module)
    keys = [unit_key(s) for s in sources]
    objects = [cache.load_object(k) for k in keys]
    todo = [i for i, obj in enumerate(objects) if obj is None]
    for i, obj in zip(todo, compile_texts([sources[i] for i in todo], pool=pool, store=True)):
        objects[i] = obj
    return objects, keys  # type: ignore[return-value]


def unit_key(source: str | GemmSource) -> str:
    """The disk cache's key of a unit's object."""
    return source.key() if isinstance(source, GemmSource) else object_key(source)


def emit_and_store(source: str | GemmSource, store: bool) -> bytes:
    """emit_object, and with `store` the object's cache entry (unit_key), written where it
    is compiled: a pool worker writes its own. Each write waits on its fsync (0.7-2.2 ms
    here): MobileNetV3-small's 145 writes had kept the process that waits for the
    workers 0.1 s."""
    from mlfuse import cache

    obj = emit_object(source)
    if store:
        cache.store_object(unit_key(source), obj)
    return obj


def _cached_object(text: str, key: str) -> bytes:
    from mlfuse import cache

    cached = cache.load_object(key)
    if cached is not None:
        return cached
    obj = emit_object(text)
    cache.store_object(key, obj)
    return obj


def emit_object(source: str | GemmSource) -> bytes:
    """The object code of LLVM IR `source` (or of a GEMM unit's, built here: at
    GEMM_SPEED_LEVEL): O3 and streaming hints for the host, then codegen."""
    tm = target_machine()
    if isinstance(source, GemmSource):
        return tm.emit_object(optimized_module(source.text(), tm, GEMM_SPEED_LEVEL)[0])
    return tm.emit_object(optimized_module(source, tm)[0])


# LLVM on units in a pool of forked processes (llvmlite serializes every call on one
# lock, so threads would not help): the pool costs a fork per worker, so fewer units
# than this, or one core, stay in this process.
PARALLEL_MIN_UNITS = 8
MAX_COMPILE_JOBS = 8
# A pool that delivers no object for this long is stuck (no unit takes LLVM a minute):
# its workers are killed and the units compile in this process.
POOL_STALL_S = 120.0


def compile_jobs(n_units: int) -> int:
    """How many processes compile `n_units` units: $MLFUSE_COMPILE_JOBS, else the cores
    this process may run on (at most MAX_COMPILE_JOBS); 1 (no pool) for few units, in a
    forked child, or in a daemonic process (which may not start processes).

    Other Python threads do not keep the pool away. They are common where models are
    compiled (Jupyter's kernel runs several, torch.compile leaves tqdm's monitor), and
    had every such compile run its LLVM work on one core (MobileNetV2 cold in the models
    bench's worker: 7.5 s, pooled 5.9 s). A worker only runs LLVM under llvmlite's lock,
    which this process holds while it forks them, and Python's own locks that a fork
    copies held (imports, logging) are reset in the child; should a worker still wait
    on a lock that another thread held at the fork, the pool delivers nothing for
    POOL_STALL_S and the units compile in this process (UnitPool.results)."""
    import multiprocessing

    env = os.environ.get("MLFUSE_COMPILE_JOBS", "").strip()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    jobs = int(env) if env.isdigit() else min(cores, MAX_COMPILE_JOBS)
    if n_units < PARALLEL_MIN_UNITS or _forked or not hasattr(os, "fork") or multiprocessing.current_process().daemon:
        return 1
    return max(1, min(jobs, n_units))


def compile_texts(
    texts: Sequence[str | GemmSource], jobs: int | None = None, pool: UnitPool | None = None, store: bool = False
) -> list[bytes]:
    """emit_object of each text, in order; in `jobs` forked processes (default:
    compile_jobs) when more than one, or in `pool` (one already working: EarlyGemms).
    The objects are the same bytes either way. With `store`, each goes into the disk
    cache where it is compiled (emit_and_store; a given pool stores as it was made to)."""
    jobs = compile_jobs(len(texts)) if jobs is None else jobs
    if jobs > 1 or pool is not None:
        objects = _compile_in_pool(texts, jobs, pool, store)
        if objects is not None:
            return objects
    return [emit_and_store(t, store) for t in texts]


class UnitPool:
    """emit_object in a pool of `jobs` forked processes. The workers fork on the first
    submit, while this process holds llvmlite's lock, so none is copied while another
    thread is inside LLVM; a source submitted twice is compiled once."""

    def __init__(self, jobs: int, store: bool = False):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        target_machine()  # created before the fork: every worker inherits it
        self.executor = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"))
        self.futures: dict[str | GemmSource, Future] = {}
        self.stuck = False
        self.store = store  # each worker writes the cache entries of its objects (emit_and_store)

    def submit(self, source: str | GemmSource) -> None:
        from llvmlite.binding import ffi

        if source in self.futures:
            return
        if self.futures:
            self.futures[source] = self.executor.submit(emit_and_store, source, self.store)
            return
        with ffi.lib._lock:  # a fork context starts every worker on the first submit
            self.futures[source] = self.executor.submit(emit_and_store, source, self.store)

    def results(self, sources: Sequence[str | GemmSource]) -> list[bytes]:
        """The objects of `sources`; TimeoutError (an OSError) when the pool is stuck."""
        try:
            return [self.futures[s].result(timeout=POOL_STALL_S) for s in sources]
        except TimeoutError:
            self.stuck = True
            raise

    def close(self) -> None:
        if not self.stuck:
            self.executor.shutdown(wait=True, cancel_futures=True)
            return
        for worker in list((getattr(self.executor, "_processes", None) or {}).values()):
            worker.terminate()  # a stuck worker never finishes: shutdown(wait=True) would wait forever
        self.executor.shutdown(wait=False, cancel_futures=True)


def _compile_in_pool(texts: Sequence[str | GemmSource], jobs: int, pool: UnitPool | None = None, store: bool = False) -> list[bytes] | None:
    """emit_object of each text in `pool`, or in a pool of `jobs` forked processes of its
    own, or None when the pool fails (then the caller compiles here, and any error shows
    there). The largest units go first, so that no long one starts last. A worker that
    died (LLVM aborts the process on a failed assertion: llvmlite's build has them on)
    breaks the pool: the units it did not deliver compile each in a child of its own
    (emit_isolated), not here, where the same abort would end the user's process."""
    from concurrent.futures.process import BrokenProcessPool

    own = None
    try:
        if pool is None:
            pool = own = UnitPool(jobs, store)
        for i in sorted(range(len(texts)), key=lambda i: -_size(texts[i])):
            pool.submit(texts[i])
        return pool.results(texts)
    except BrokenProcessPool:
        assert pool is not None
        return [delivered(pool.futures[t]) or emit_isolated(t, store) for t in texts]
    except (OSError, RuntimeError, AssertionError):
        return None
    finally:
        if own is not None:
            own.close()


def delivered(future: Future) -> bytes | None:
    """A pool's object for a unit, if its worker delivered it before the pool broke."""
    if future.done() and not future.cancelled() and future.exception() is None:
        return future.result()
    return None


def emit_isolated(source: str | GemmSource, store: bool) -> bytes:
    """emit_and_store in a forked child, so that an LLVM abort ends the child only. A
    unit whose compile aborted is compiled again without the loop vectorizer (where
    the aborts seen so far were: see to_llvm.MINMAX_REDUCTION); one that still aborts
    is an internal error naming a reproducer of its LLVM IR."""
    for vectorize in (True, False):
        obj = _emit_in_child(source, store, vectorize)
        if obj is not None:
            return obj
    from mlfuse.diagnostics import internal_error

    text = source.text() if isinstance(source, GemmSource) else source
    raise internal_error(RuntimeError("LLVM aborted compiling a kernel, with and without loop vectorization"),
                         "LLVM", text)


def _emit_in_child(source: str | GemmSource, store: bool, vectorize: bool) -> bytes | None:
    """The object from a forked child, or None where the child died or delivered nothing
    in POOL_STALL_S."""
    import multiprocessing

    from llvmlite.binding import ffi

    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child_emit, args=(send, source, store, vectorize), daemon=True)
    with ffi.lib._lock:  # no other thread inside LLVM while the child is copied (see UnitPool)
        child.start()
    send.close()
    try:
        obj = receive.recv() if receive.poll(POOL_STALL_S) else None
    except EOFError:  # the child died before sending
        obj = None
    child.join(1.0)
    if child.is_alive():
        child.kill()
    return obj


def _child_emit(send: Connection, source: str | GemmSource, store: bool, vectorize: bool) -> None:
    global _vectorize_loops
    _vectorize_loops = vectorize
    send.send(emit_and_store(source, store))


# fewer GEMM kernels than this for the cache to compile start no pool before convert-to-llvm
EARLY_MIN_GEMMS = 2


@contextlib.contextmanager
def early_gemms(sources: Sequence[GemmSource]) -> Iterator[UnitPool | None]:
    """A pool already compiling the GEMM units `sources` that the cache lacks, while
    this process goes on with convert-to-llvm and the translation (api's loader knows
    them from the loop.gemm ops before convert-to-llvm); compile_units takes their
    objects from it and gives it the other units. None (nothing started) for fewer
    than EARLY_MIN_GEMMS, or where compile_jobs allows no pool. A source that the
    module does not declare in the end is compiled for nothing, never used."""
    from concurrent.futures.process import BrokenProcessPool

    from mlfuse import cache

    missing = [s for s in dict.fromkeys(sources) if not cache.has_object(s.key())]
    jobs = compile_jobs(max(len(missing), PARALLEL_MIN_UNITS)) if len(missing) >= EARLY_MIN_GEMMS else 1
    if jobs <= 1:
        yield None
        return
    pool = UnitPool(jobs, store=True)
    try:
        try:
            for source in missing:
                pool.submit(source)
        except (BrokenProcessPool, OSError, RuntimeError):
            pool.close()
            pool = None
        yield pool
    finally:
        if pool is not None:
            pool.close()


def _size(source: str | GemmSource) -> int:
    return GEMM_UNIT_CHARS if isinstance(source, GemmSource) else len(source)


def debug_dump(text: str, name: str) -> None:  # pragma: no cover - debugging aid
    path = os.environ.get("MLFUSE_DUMP_DIR")
    if path:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, name), "w") as f:
            f.write(text)
