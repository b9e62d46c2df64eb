"""Simulated device memory and the race model.

A `Buffer` is a memref's memory: a flat numpy array, bounds-checked, with a record
of which elements were written (reads of memory nobody wrote are faults; new
memory holds `poison`) and, while a launch writes it, of which thread touched
which address when, so that two accesses no barrier orders are a data race.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects.builtin import MemRefType

from mlfuse.backend.gpu.sim.errors import Fault
from mlfuse.backend.gpu.sim.semantics import wrap
from mlfuse.dialects import graph

if TYPE_CHECKING:
    from mlfuse.backend.gpu.sim.schedule import Thread


class Buffer:
    """A memref's memory: a flat numpy array, bounds-checked, with initialisation and race tracking.

    Race tracking keeps, per address, the writes and the reads of the current
    launch as stamps (thread, block, grid epoch, barrier epoch); two accesses
    conflict when different threads made them in the same grid epoch and either
    in different blocks or in the same barrier epoch of one block.
    """

    def __init__(
        self,
        name: str,
        memref_type: MemRefType,
        data: np.ndarray | None = None,
        readonly: bool = False,
    ):
        self.name = name
        self.type = memref_type
        self.shape = tuple(memref_type.get_shape())
        self.dtype = graph.numpy_dtype(memref_type.get_element_type())
        self.strides = tuple(math.prod(self.shape[d + 1 :]) for d in range(len(self.shape)))
        size = math.prod(self.shape)
        if data is not None:
            self.data = np.array(data, dtype=self.dtype).reshape(-1)
            self.initialized = np.ones(size, dtype=bool)
        else:
            self.data = poison(size, self.dtype)
            self.initialized = np.zeros(size, dtype=bool)
        self.readonly = readonly
        self.tracked = False
        self.writes: dict[int, dict[int, tuple]] = {}
        self.reads: dict[int, dict[int, tuple]] = {}
        kind = self.dtype.kind
        self.to_python = bool if kind == "b" else int if kind in "iu" else (lambda v: v)

    @classmethod
    def over(cls, name: str, memref_type: MemRefType, data: np.ndarray, initialized: np.ndarray) -> Buffer:
        """A buffer on memory it does not own (writes go to `data`; `initialized` is read, not written back)."""
        buf = cls(name, memref_type)
        buf.data = data
        buf.initialized = initialized.copy()
        return buf

    def describe(self) -> str:
        return f"{self.name} ({self.type})"

    def offset(self, idx: tuple, k: int) -> int:
        if len(idx) != len(self.shape):
            raise Fault(k, f"{len(idx)} indices into {self.describe()}")
        off = 0
        for i, n, s in zip(idx, self.shape, self.strides):
            if not 0 <= i < n:
                raise Fault(k, f"index {list(idx)} is out of bounds of {self.describe()}")
            off += i * s
        return off

    def track(self) -> None:
        self.tracked = True
        self.writes.clear()
        self.reads.clear()

    def untrack(self) -> None:
        self.tracked = False
        self.writes.clear()
        self.reads.clear()

    def load(self, me: Thread, idx: tuple, k: int):
        off = self.offset(idx, k)
        if not self.initialized[off]:
            raise Fault(k, f"reads element {list(idx)} of {self.describe()}, which nothing wrote")
        if self.tracked:
            stamp = me.stamp()
            for w, atomic in self.writes.get(off, {}).values():
                if conflict(w, stamp):
                    raise Fault(k, self.race_message("reads", idx, w, "atomically added to" if atomic else "wrote"))
            self.reads.setdefault(off, {})[stamp[0]] = stamp
        return self.to_python(self.data[off])

    def store(self, me: Thread, idx: tuple, value, k: int) -> None:
        if self.readonly:
            raise Fault(k, f"writes {self.describe()}, which is read-only (an input or a constant)")
        off = self.offset(idx, k)
        if self.tracked:
            stamp = me.stamp()
            self.check_write(off, idx, stamp, k, atomic=False)
            self.writes[off] = {stamp[0]: (stamp, False)}
            self.reads.pop(off, None)
        self.data[off] = value
        self.initialized[off] = True

    def atomic_add(self, me: Thread, idx: tuple, value, k: int) -> None:
        if self.readonly:
            raise Fault(k, f"atomically adds to {self.describe()}, which is read-only")
        off = self.offset(idx, k)
        if not self.initialized[off]:
            raise Fault(k, f"atomically adds to element {list(idx)} of {self.describe()}, which nothing cleared")
        if self.tracked:
            stamp = me.stamp()
            self.check_write(off, idx, stamp, k, atomic=True)
            self.writes.setdefault(off, {})[stamp[0]] = (stamp, True)
            self.reads.pop(off, None)
        old = self.data[off]
        self.data[off] = old + value if self.dtype.kind == "f" else wrap(int(old) + int(value), 32)

    def check_write(self, off: int, idx: tuple, stamp: tuple, k: int, atomic: bool) -> None:
        verb = "atomically adds to" if atomic else "writes"
        for w, was_atomic in self.writes.get(off, {}).values():
            if not (atomic and was_atomic) and conflict(w, stamp):
                raise Fault(k, self.race_message(verb, idx, w, "atomically added to" if was_atomic else "wrote"))
        for r in self.reads.get(off, {}).values():
            if conflict(r, stamp):
                raise Fault(k, self.race_message(verb, idx, r, "read"))

    def race_message(self, verb: str, idx: tuple, other: tuple, other_verb: str) -> str:
        return (
            f"data race: {verb} element {list(idx)} of {self.describe()}, which thread {other[0]} "
            f"(block {other[1]}) {other_verb} with no barrier in between"
        )

    def zero(self) -> None:
        self.data[:] = 0
        self.initialized[:] = True

    def copy_from(self, other: Buffer) -> None:
        self.data[:] = other.data
        self.initialized[:] = other.initialized

    def array(self) -> np.ndarray:
        return self.data.reshape(self.shape).copy()


def poison(size: int, dtype: np.dtype) -> np.ndarray:
    """What uninitialised device memory holds here: NaN, or a byte pattern for integers."""
    if dtype.kind == "f":
        return np.full(size, np.nan, dtype=dtype)
    if dtype.kind == "b":
        return np.ones(size, dtype=dtype)
    return np.frombuffer(b"\x5a" * (size * dtype.itemsize), dtype=dtype).copy()


def conflict(earlier: tuple, now: tuple) -> bool:
    """Two accesses (thread, block, grid epoch, barrier epoch) that no barrier orders."""
    return earlier[0] != now[0] and earlier[2] == now[2] and (earlier[1] != now[1] or earlier[3] == now[3])
