"""Copy bandwidth with non-temporal stores: the memory-bandwidth floor of a benchmark run.

    meter = CopyMeter(megabytes=256, threads=2)
    seconds = meter.copy()              # one timed copy of the buffer
    meter.bandwidth(seconds)            # bytes/s: (read + written) / seconds

A memory-bound kernel must read each input and write each output once, so its floor
is `(input bytes + output bytes) / bandwidth`. The bandwidth is that of a copy whose
stores bypass the cache (`store ... !nontemporal`, vmovntps on x86): an ordinary
store first reads the line it overwrites (read-for-ownership), so a plain copy
(numpy's copyto) moves 3 bytes per 2 counted and measures a lower bound only.

The kernel is 40 lines of LLVM IR compiled with mlfuse's own llvmlite backend; each
thread copies one contiguous slice (ctypes releases the GIL during the call).
"""

from __future__ import annotations

import ctypes
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mlfuse.api import aligned_empty
from mlfuse.backend import cpu

BLOCK = 64  # bytes per vector store: one cache line, <16 x float>

# copy `blocks` 64-byte blocks from src to dst (both 64-byte aligned, blocks > 0), 4 per iteration
NT_COPY_IR = r"""
define void @nt_copy(ptr noalias %dst, ptr noalias readonly %src, i64 %blocks) nounwind {
entry:
  %quads = lshr i64 %blocks, 2
  %has_quads = icmp ne i64 %quads, 0
  br i1 %has_quads, label %quad, label %tail_check
quad:
  %q = phi i64 [0, %entry], [%q_next, %quad]
  %i0 = shl i64 %q, 2
  %i1 = add i64 %i0, 1
  %i2 = add i64 %i0, 2
  %i3 = add i64 %i0, 3
  %s0 = getelementptr <16 x float>, ptr %src, i64 %i0
  %s1 = getelementptr <16 x float>, ptr %src, i64 %i1
  %s2 = getelementptr <16 x float>, ptr %src, i64 %i2
  %s3 = getelementptr <16 x float>, ptr %src, i64 %i3
  %v0 = load <16 x float>, ptr %s0, align 64
  %v1 = load <16 x float>, ptr %s1, align 64
  %v2 = load <16 x float>, ptr %s2, align 64
  %v3 = load <16 x float>, ptr %s3, align 64
  %d0 = getelementptr <16 x float>, ptr %dst, i64 %i0
  %d1 = getelementptr <16 x float>, ptr %dst, i64 %i1
  %d2 = getelementptr <16 x float>, ptr %dst, i64 %i2
  %d3 = getelementptr <16 x float>, ptr %dst, i64 %i3
  store <16 x float> %v0, ptr %d0, align 64, !nontemporal !0
  store <16 x float> %v1, ptr %d1, align 64, !nontemporal !0
  store <16 x float> %v2, ptr %d2, align 64, !nontemporal !0
  store <16 x float> %v3, ptr %d3, align 64, !nontemporal !0
  %q_next = add i64 %q, 1
  %more = icmp ult i64 %q_next, %quads
  br i1 %more, label %quad, label %tail_check
tail_check:
  %done = shl i64 %quads, 2
  %has_tail = icmp ult i64 %done, %blocks
  br i1 %has_tail, label %tail, label %exit
tail:
  %t = phi i64 [%done, %tail_check], [%t_next, %tail]
  %ts = getelementptr <16 x float>, ptr %src, i64 %t
  %tv = load <16 x float>, ptr %ts, align 64
  %td = getelementptr <16 x float>, ptr %dst, i64 %t
  store <16 x float> %tv, ptr %td, align 64, !nontemporal !0
  %t_next = add i64 %t, 1
  %tail_more = icmp ult i64 %t_next, %blocks
  br i1 %tail_more, label %tail, label %exit
exit:
  fence seq_cst
  ret void
}

!0 = !{i32 1}
"""

_KERNEL: list = []  # the JitModule must outlive the function pointer


def nt_copy_function():
    """`nt_copy(dst, src, blocks)` as a ctypes function (compiled once per process)."""
    if not _KERNEL:
        jit = cpu.JitModule(cpu.compile_object(NT_COPY_IR))
        fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(jit.address("nt_copy"))
        _KERNEL.extend([jit, fn])
    return _KERNEL[1]


class CopyMeter:
    """A source and a destination buffer of `megabytes` each, copied by `threads` threads."""

    def __init__(self, megabytes: float, threads: int):
        blocks = max(threads, int(megabytes * 2**20) // BLOCK)
        self.src = aligned_empty((blocks * BLOCK // 4,), np.float32)
        self.dst = aligned_empty((blocks * BLOCK // 4,), np.float32)
        self.src[:] = np.arange(self.src.size, dtype=np.float32)
        self.dst[:] = 0.0  # touch every page before timing
        self.threads = threads
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None
        self.kernel = nt_copy_function()
        # one contiguous slice of whole blocks per thread
        bounds = np.linspace(0, blocks, threads + 1).astype(np.int64)
        self.slices = [(int(a), int(b - a)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
        self.copy()
        if not np.array_equal(self.src, self.dst):
            raise RuntimeError("the non-temporal copy kernel copied wrong data")

    @property
    def nbytes(self) -> int:
        return self.src.nbytes

    def _copy_slice(self, start: int, blocks: int) -> None:
        offset = start * BLOCK
        self.kernel(self.dst.ctypes.data + offset, self.src.ctypes.data + offset, blocks)

    def copy(self) -> float:
        """Seconds for one copy of the whole buffer."""
        start = time.perf_counter()
        if self.pool is None:
            self._copy_slice(*self.slices[0])
        else:
            for f in [self.pool.submit(self._copy_slice, *s) for s in self.slices]:
                f.result()
        return time.perf_counter() - start

    def numpy_copy(self) -> float:
        """Seconds for np.copyto of the same buffer (ordinary stores: a lower bound)."""
        start = time.perf_counter()
        np.copyto(self.dst, self.src)
        return time.perf_counter() - start

    def bandwidth(self, seconds: float) -> float:
        """Bytes per second moved by a copy that took `seconds` (read + written)."""
        return 2 * self.nbytes / seconds

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
