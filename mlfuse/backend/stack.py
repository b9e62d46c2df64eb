"""Calls of compiled code from threads whose stack is too small for it.

Generated kernels keep their tile buffers on the stack: a Winograd conv's transformed
input (up to 384 KB at 128 channels, winograd_kernels), a GEMM task's packed panels
(up to 192 KB), a depthwise tile's padded copy. The calling thread runs its share of
every parallel region, so its stack must hold them. The main thread's is the
process's stack limit (8 MB here) and libgomp's threads get the default size, but a
Python thread started after `threading.stack_size(256 * 1024)` (or a host program's
small-stack thread) had ResNet-18 die of SIGSEGV in its first Winograd kernel.

A call from a thread whose stack is smaller than `NEEDED` therefore runs on a helper
thread with a stack of `HELPER_STACK`, while the caller waits: the same code, the
same results. The helper is started on first need and kept; calls from several
small-stack threads queue for it. The stack size of the calling thread is read once
per thread (glibc's `pthread_getattr_np`); where that fails, the call runs in place.
"""

from __future__ import annotations

import ctypes
import functools
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

# A thread with less stack than this calls through the helper: the kernels' largest
# buffers (384 KB) with room for the frames around them and for what the caller's own
# frames already use.
NEEDED = 2 << 20
HELPER_STACK = 16 << 20

_local = threading.local()
_helper: _Helper | None = None
_helper_lock = threading.Lock()


@functools.cache
def _pthread() -> ctypes.CDLL | None:
    """libc with the prototypes thread_stack_bytes calls, loaded once (a CDLL and its
    prototypes cost 0.25 ms, which each new thread's first call paid); None without
    glibc's pthread_getattr_np."""
    try:
        libc = ctypes.CDLL(None)
        libc.pthread_self.restype = ctypes.c_ulong
        libc.pthread_getattr_np.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
        libc.pthread_attr_getstack.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        libc.pthread_attr_destroy.argtypes = [ctypes.c_void_p]
    except (OSError, AttributeError):
        return None
    return libc


def thread_stack_bytes() -> int | None:
    """The calling thread's stack size in bytes, or None where it cannot be read."""
    libc = _pthread()
    if libc is None:
        return None
    attr = ctypes.create_string_buffer(256)  # pthread_attr_t: 56 bytes on x86-64 glibc
    if libc.pthread_getattr_np(libc.pthread_self(), attr) != 0:
        return None
    base, size = ctypes.c_void_p(), ctypes.c_size_t()
    failed = libc.pthread_attr_getstack(attr, ctypes.byref(base), ctypes.byref(size))
    libc.pthread_attr_destroy(attr)
    return None if failed else size.value


def enough_stack() -> bool:
    """Whether the calling thread's stack holds compiled code's (read once per thread;
    on the call path of every compiled function, so the common case is one attribute)."""
    try:
        return _local.enough
    except AttributeError:
        size = thread_stack_bytes()
        _local.enough = size is None or size >= NEEDED
        return _local.enough


def call_with_stack(run: Callable[..., Any], *args: Any) -> Any:
    """`run(*args)` on this thread if its stack is large enough, else on the helper."""
    if enough_stack():
        return run(*args)
    return on_helper(run, *args)


def on_helper(run: Callable[..., Any], *args: Any) -> Any:
    """`run(*args)` on the large-stack helper thread, this thread waiting for it."""
    return _get_helper().call(run, args)


class _Helper:
    """A daemon thread with a large stack that runs the calls handed to it, one at a time."""

    def __init__(self) -> None:
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        before = threading.stack_size(HELPER_STACK)
        try:
            self.thread = threading.Thread(target=self._serve, name="mlfuse-large-stack", daemon=True)
            self.thread.start()
        finally:
            threading.stack_size(before)

    def _serve(self) -> None:
        while True:
            run, args, done, box = self.requests.get()
            try:
                box.append((True, run(*args)))
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                box.append((False, e))
            done.set()

    def call(self, run: Callable[..., Any], args: tuple) -> Any:
        done, box = threading.Event(), []
        self.requests.put((run, args, done, box))
        done.wait()
        ok, value = box[0]
        if not ok:
            raise value
        return value


def _get_helper() -> _Helper:
    global _helper
    with _helper_lock:
        if _helper is None or not _helper.thread.is_alive():
            _helper = _Helper()
        return _helper


def _after_fork_in_child() -> None:
    """The helper thread does not survive fork; the child starts its own on first need."""
    global _helper, _helper_lock
    _helper = None
    _helper_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
