"""The contract between generated code and the runtime that calls it.

One place for what both sides assume, so that the code generators
(convert-graph-to-loop, assign-buffers, convert-to-llvm, the GPU lowering) and the
runtimes (mlfuse.api, mlfuse.backend) cannot drift apart:

- Entry function (CPU): `@name(inputs..., outputs..., arena)`, all buffers as bare
  pointers. The first `mlfuse.num_inputs` parameters are the inputs, which may have
  any alignment (they are the caller's arrays); the outputs (destination passing)
  and the arena follow and are ALIGNMENT-byte aligned: the runtime allocates them so,
  and copies through an aligned array an `out=` that is not. convert-to-llvm states
  this as `llvm.align` on those parameters; the vectorizer's aligned and
  non-temporal stores rest on it.
- Arena: assign-buffers records its size on the function (ARENA_ATTR);
  convert-to-llvm exports it as the global `<entry>__arena_bytes` (arena_symbol),
  which the runtime reads from the object code.
- Parallel regions: `@K(lo, hi, buffers...)` runs on the thread pool
  (`mlfuse_parallel`, mlfuse/backend/pool.py) through the wrapper `@K__omp(ctx, t)`
  (omp_wrapper_symbol), whose context is an array of 8-byte slots, one per
  argument, then the schedule's state; t is the thread's number in the call.
- GPU kernels: every parameter is a buffer in global memory, at least
  GPU_ALIGNMENT-byte aligned (the driver's allocations are 256-byte aligned).
"""

from __future__ import annotations

from xdsl.dialects.builtin import IndexType
from xdsl.ir import Attribute

ALIGNMENT = 64
"""Bytes to which outputs, arenas, allocations and constant globals are aligned (a cache line)."""

GPU_ALIGNMENT = 16
"""Bytes to which the buffer parameters of a GPU kernel are known to be aligned."""

NUM_INPUTS_ATTR = "mlfuse.num_inputs"
"""Attribute of an entry func.func: how many leading parameters are inputs."""

ARENA_ATTR = "mlfuse.arena_bytes"
"""Attribute of an entry func.func: the bytes its arena parameter must hold."""

OMP_WRAPPER_SUFFIX = "__omp"


def element_bytes(t: Attribute) -> int:
    """Bytes of one element of scalar type `t` in memory (i1 takes a byte, index 8)."""
    if isinstance(t, IndexType):
        return 8
    width = getattr(t, "bitwidth", None)
    if not isinstance(width, int):
        raise ValueError(f"{t} has no size in memory")
    return max(1, (width + 7) // 8)


def arena_symbol(entry: str) -> str:
    """The global holding the arena size of entry function `entry`."""
    return f"{entry}__arena_bytes"


def omp_wrapper_symbol(callee: str) -> str:
    """The per-thread wrapper through which the thread pool runs `callee`."""
    return f"{callee}{OMP_WRAPPER_SUFFIX}"
