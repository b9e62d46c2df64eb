"""The contestants of mlfuse-bench: mlfuse and each peer, ready to be called on one workload.

Each `make_*` returns a `Contestant` (a no-argument `call`, its compile time and
kernel count where known) or raises `Unavailable` with a note for the table. Peers
are imported here, lazily, so a missing one costs nothing but its row.

Thread counts are set by the worker before anything is imported (affinity, XLA_FLAGS,
OMP_NUM_THREADS); here each runtime is also told explicitly (`threads`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from bench.workloads import NUMEXPR_MISSING, Workload, jax_lib, numexpr_impl, torch_lib, torch_native

PEERS = ("numpy", "numexpr", "torch", "torch.compile", "jax")


class Unavailable(Exception):
    """This contestant cannot run this workload (the message goes into the table)."""


@dataclass
class Contestant:
    name: str
    call: Callable[[], Any]
    to_numpy: Callable[[Any], list[np.ndarray]] = lambda outs: [np.asarray(o) for o in outs]
    compile_s: float | None = None
    compile_includes_first_run: bool = False  # torch.compile compiles on its first call
    kernels: tuple[int, int] | None = None  # (memory-intensive, all)
    note: str = ""
    config: dict = field(default_factory=dict)


# --- kernel counts ------------------------------------------------------------------------

GEMM_NESTS = {"matmul", "matmul_init", "batch_matmul", "gemm", "gemm_init"}


def mlfuse_kernels(module: ModuleOp, planner: str) -> tuple[int, int]:
    """(memory-intensive, all) top-level kernels mlfuse generates: loop.band and loop.nest ops
    after convert-graph-to-loop. A kernel holding a GEMM nest (matmul, batch_matmul or a
    stitched GEMM) is not memory-intensive, as in FusionStitching's Table 2."""
    from mlfuse import pipelines
    from mlfuse.api import run_pipeline
    from mlfuse.dialects import loop

    steps = pipelines.cpu_pipeline(True, True, planner)
    steps = steps[: pipelines.step_index(steps, "convert-graph-to-loop") + 1]
    lowered = run_pipeline(module.clone(), steps)
    fn = next(op for op in lowered.ops if op.name == "func.func")
    kernels = [op for op in fn.body.block.ops if isinstance(op, loop.BandOp | loop.NestOp)]

    def is_gemm(kernel) -> bool:
        names = [n.nest_name.data for n in kernel.walk() if isinstance(n, loop.NestOp)]
        return any(name.rsplit(".", 1)[-1] in GEMM_NESTS for name in names)

    return sum(not is_gemm(k) for k in kernels), len(kernels)


HLO_FREE = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}
HLO_GEMM = {"dot", "convolution", "custom-call"}
_HLO_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_HLO_OPCODE = re.compile(r"=\s.*?\s([a-z][a-z0-9\-]*)\(")
_HLO_CALLS = re.compile(r"(?:calls|to_apply)=%?([\w.\-]+)")


def xla_kernels(hlo_text: str) -> tuple[int, int]:
    """(memory-intensive, all) kernels of an XLA executable from its optimized HLO text:
    the instructions of the entry computation other than parameters, constants, tuples
    and bitcasts. Dots, convolutions, library calls and fusions that contain one are
    not memory-intensive."""
    computations: dict[str, list[str]] = {}
    entry, current = None, None
    for line in hlo_text.splitlines():
        header = _HLO_HEADER.match(line)
        if header and "=" not in line.split("(")[0]:
            current = header.group(2)
            computations[current] = []
            if header.group(1):
                entry = current
        elif line.strip() == "}":
            current = None
        elif current is not None and "=" in line:
            computations[current].append(line)
    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text")

    def opcode(line: str) -> str:
        m = _HLO_OPCODE.search(line)
        return m.group(1) if m else ""

    def has_gemm(name: str, seen: set[str]) -> bool:
        if name in seen or name not in computations:
            return False
        seen.add(name)
        return any(opcode(line) in HLO_GEMM or any(has_gemm(c, seen) for c in _HLO_CALLS.findall(line))
                   for line in computations[name])

    kernels = [line for line in computations[entry] if opcode(line) not in HLO_FREE]
    gemm = [line for line in kernels
            if opcode(line) in HLO_GEMM or any(has_gemm(c, set()) for c in _HLO_CALLS.findall(line))]
    return len(kernels) - len(gemm), len(kernels)


# --- contestants ----------------------------------------------------------------------------


def make_mlfuse(w: Workload, module: ModuleOp, inputs: list[np.ndarray], threads: int, planner: str) -> Contestant:
    import mlfuse
    from mlfuse.backend import cpu

    cpu.set_num_threads(threads)
    start = time.perf_counter()
    fn = mlfuse.compile(module.clone(), planner=planner)
    compile_s = time.perf_counter() - start
    from mlfuse.api import aligned_empty

    outs = [aligned_empty(s.shape, s.dtype) for s in fn.outputs]
    return Contestant("mlfuse", lambda: fn(*inputs, out=outs), compile_s=compile_s,
                      kernels=mlfuse_kernels(module, planner), note="preallocated outputs",
                      config={"planner": planner})


def make_numpy(w: Workload, module, inputs, threads) -> Contestant:
    return Contestant("numpy", lambda: w.numpy(*inputs), note="op by op")


def make_numexpr(w: Workload, module, inputs, threads) -> Contestant:
    try:
        import numexpr as ne  # pyright: ignore[reportMissingImports]  (optional)
    except ImportError:
        raise Unavailable("numexpr not installed") from None
    impl = numexpr_impl(w.name)
    if impl is None:
        raise Unavailable(NUMEXPR_MISSING.get(w.name, "not expressible"))
    ne.set_num_threads(threads)
    return Contestant("numexpr", lambda: impl(*inputs), note="elementwise in numexpr, reductions in numpy")


def _torch():
    try:
        import torch
    except ImportError:
        raise Unavailable("torch not installed") from None
    return torch


def _torch_fn(w: Workload):
    native = torch_native(w.name)
    if native is not None:
        return native, "native ops"
    lib = torch_lib()
    return (lambda *a: w.compute(lib, *a)), "torch ops"


def _torch_outputs(outs) -> list[np.ndarray]:
    return [o.numpy() for o in outs]


def make_torch_eager(w: Workload, module, inputs, threads) -> Contestant:
    torch = _torch()
    torch.set_num_threads(threads)
    tensors = [torch.from_numpy(a) for a in inputs]
    fn, how = _torch_fn(w)

    def call():
        with torch.inference_mode():
            return fn(*tensors)

    return Contestant("torch eager", call, to_numpy=_torch_outputs, note=how)


def make_torch_compile(w: Workload, module, inputs, threads, mode: str = "default") -> Contestant:
    torch = _torch()
    torch.set_num_threads(threads)
    tensors = [torch.from_numpy(a) for a in inputs]
    fn, how = _torch_fn(w)
    compiled = torch.compile(fn, mode=None if mode == "default" else mode, fullgraph=True, dynamic=False)

    def call():
        with torch.no_grad():
            return compiled(*tensors)

    name = "torch.compile" if mode == "default" else f"torch.compile {mode.replace('-no-cudagraphs', '')}"
    return Contestant(name, call, to_numpy=_torch_outputs, compile_includes_first_run=True,
                      note=f"inductor, {how}", config={"mode": mode})


def make_jax(w: Workload, module, inputs, threads) -> Contestant:
    try:
        import jax
    except ImportError:
        raise Unavailable("jax not installed") from None
    lib = jax_lib()
    args = [jax.device_put(a) for a in inputs]
    jitted = jax.jit(lambda *a: w.compute(lib, *a))
    start = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    compile_s = time.perf_counter() - start
    kernels = xla_kernels(compiled.as_text())
    return Contestant("jax.jit", lambda: jax.block_until_ready(compiled(*args)), compile_s=compile_s,
                      kernels=kernels, note="XLA")
