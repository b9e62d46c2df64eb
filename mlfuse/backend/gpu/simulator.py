"""A CPU simulator for mapped GPU modules: runs `kernel.launch`es on numpy memory.

It executes the host function of a module after gpu-map-kernels (buffers,
`memref.alloc`, `memref.get_global`, `kernel.memset`, `kernel.launch`,
`memref.copy`) and, for every launch, every thread of every block of the
kernel, with the semantics the CUDA lowering gives the kernel dialect:

- each `kernel.func` is translated once into a Python generator function (one
  SSA value = one local variable, scf.for/scf.if = Python loops and branches);
  a thread is one generator, which yields where it must wait for others:
  `kernel.barrier` (every thread of its block), `kernel.shuffle` (the 32 lanes
  of its warp: the value is exchanged once all of them reach the same shuffle,
  xor or down as shfl.sync.bfly/down with a full mask) and `kernel.grid_sync`
  (every block: cooperative kernels keep all blocks alive and release them
  together, after replaying the counter protocol of the PTX grid barrier on
  the counter buffer, so an un-zeroed counter is caught);
- memory is numpy: kernel arguments, per-block shared buffers (dynamic ones
  too, after checking that their byte ranges do not overlap), f32 arithmetic
  in float32 scalars; f32 transcendentals are expanded by expand-math first, as
  on the device; index and integer arithmetic wraps like two's complement;
- it checks what a GPU would not report: out-of-bounds indices, reads of memory
  nobody wrote (allocations, outputs and shared buffers start uninitialised,
  filled with NaN), atomic adds into memory nobody cleared, output elements no
  kernel wrote, writes to inputs or constants, divergent shuffles and barriers,
  blocks that exit while others wait at a grid barrier, and data races: two
  threads touching one address, one of them writing, with no barrier (same
  block) or grid barrier (any block) between them, atomics aside.

Faults are `SimulationError`s (a Diagnostic located at the kernel) naming the
op, the thread and the block. It is slow (a few microseconds per op and
thread): meant for tests on small shapes.

    exe = compile_gpu_sim(text)        # gpu-map-kernels unless already mapped
    (y,) = exe(x)                      # numpy in, numpy out
    exe.stats                          # launches, blocks, threads of the last call
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from mlfuse.backend.gpu.host import RESULTS_ATTR, map_module
from mlfuse.backend.gpu.targets import DEFAULT_ARCH, GpuTarget, target
from mlfuse.diagnostics import Diagnostic, location_of
from mlfuse.dialects import graph, kernel

WARP = kernel.WARP_SIZE
TOP_BIT = 0x80000000
U32 = 0xFFFFFFFF

# events a thread yields: (kind, op number, payload)
BARRIER, SHUFFLE, GRID, DONE = "barrier", "shuffle", "grid barrier", "done"
FINISHED = (DONE, -1, None)


class SimulationError(Diagnostic):
    """The simulated kernels did something a GPU would do wrongly, or not at all."""


class Fault(Exception):
    """Raised inside a thread; the scheduler turns it into a SimulationError with the thread's position."""

    def __init__(self, op_number: int, message: str):
        super().__init__(message)
        self.op_number = op_number
        self.message = message


# --- scalar semantics used by the generated code ---------------------------------------------


def wrap(value: int, bits: int) -> int:
    """Two's-complement wrap of a Python int to a signed `bits`-bit value."""
    half = 1 << (bits - 1)
    return ((value + half) & ((1 << bits) - 1)) - half


def unsigned(value: int, bits: int) -> int:
    return value & ((1 << bits) - 1)


def div_signed(a: int, b: int, k: int) -> int:
    if b == 0:
        raise Fault(k, "integer division by zero")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def rem_signed(a: int, b: int, k: int) -> int:
    return a - div_signed(a, b, k) * b


def div_unsigned(a: int, b: int, bits: int, k: int) -> int:
    if b == 0:
        raise Fault(k, "integer division by zero")
    return wrap(unsigned(a, bits) // unsigned(b, bits), bits)


def rem_unsigned(a: int, b: int, bits: int, k: int) -> int:
    if b == 0:
        raise Fault(k, "integer division by zero")
    return wrap(unsigned(a, bits) % unsigned(b, bits), bits)


def maximumf(a, b):
    """llvm.maximum: NaN if either is NaN, +0 above -0."""
    if a != a or b != b:
        return type(a)(math.nan)
    if a == b:
        return b if math.copysign(1.0, a) < 0 else a
    return a if a > b else b


def minimumf(a, b):
    if a != a or b != b:
        return type(a)(math.nan)
    if a == b:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


def fp_to_int(x, bits: int, signed: bool) -> int:
    """PTX cvt.rzi: round toward zero, saturate, NaN -> 0."""
    if x != x:
        return 0
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if math.isinf(x):
        v = hi if x > 0 else lo
    else:
        v = max(lo, min(hi, int(x)))
    return wrap(v, bits) if bits > 1 else bool(v)


def bitcast(value, to: np.dtype):
    """Reinterpret the bits of a scalar (f32 <-> i32 and friends)."""
    if isinstance(value, (bool, int)):
        width = to.itemsize * 8
        raw = np.array([unsigned(int(value), width)], dtype=f"u{to.itemsize}")
    else:
        raw = np.array([value])
    out = raw.view(to)[0]
    return wrap(int(out), to.itemsize * 8) if to.kind in "iu" else out


def checked_range(lb: int, ub: int, step: int, k: int) -> range:
    if step <= 0:
        raise Fault(k, f"scf.for with step {step}: the step must be positive")
    return range(lb, ub, step)


CMPF = {
    "false": "False",
    "oeq": "({a} == {b})",
    "ogt": "({a} > {b})",
    "oge": "({a} >= {b})",
    "olt": "({a} < {b})",
    "ole": "({a} <= {b})",
    "one": "({a} < {b} or {a} > {b})",
    "ord": "({a} == {a} and {b} == {b})",
    "ueq": "(not ({a} < {b} or {a} > {b}))",
    "ugt": "(not ({a} <= {b}))",
    "uge": "(not ({a} < {b}))",
    "ult": "(not ({a} >= {b}))",
    "ule": "(not ({a} > {b}))",
    "une": "(not ({a} == {b}))",
    "uno": "({a} != {a} or {b} != {b})",
    "true": "True",
}
CMPI_SIGNED = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">="}
CMPI_UNSIGNED = {"ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}


# --- memory ---------------------------------------------------------------------------------


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


# --- kernels as Python generators ----------------------------------------------------------


def scalar_kind(t: Attribute) -> tuple[str, int]:
    """('index' | 'int' | 'bool' | 'float', bits)."""
    if isinstance(t, IndexType):
        return "index", 64
    if isinstance(t, IntegerType):
        width = t.width.data
        return ("bool", 1) if width == 1 else ("int", width)
    return "float", 0


class KernelProgram:
    """One kernel.func, translated into a Python generator function run once per thread."""

    def __init__(self, kfunc: kernel.KernelFuncOp, expand: bool = True):
        self.name = kfunc.sym_name.data
        self.source_op = kfunc
        body = kfunc.clone()
        if expand:
            from mlfuse.conversion.expand_math import expand_math

            expand_math(body)  # as lowering.py does: the device has no libm
        self.kfunc = body
        self.block = body.block_size
        self.cooperative = body.cooperative is not None
        self.ops: list[Operation] = []  # numbered ops, for messages and events
        self.constants: list[Any] = []
        self.shared: list[kernel.SharedAllocOp] = []
        self.written_args: set[int] = set()
        self.names: dict[SSAValue, str] = {}
        self.lines: list[str] = []
        self.source = self.translate()
        namespace = dict(GENERATED_GLOBALS)
        namespace["K"] = self.constants
        exec(compile(self.source, f"<kernel {self.name}>", "exec"), namespace)
        self.function = namespace["kernel_body"]
        self.check_shared()

    # naming ---------------------------------------------------------------------------------

    def name_of(self, v: SSAValue) -> str:
        if v not in self.names:
            self.names[v] = f"v{len(self.names)}"
        return self.names[v]

    def number(self, op: Operation) -> int:
        self.ops.append(op)
        return len(self.ops) - 1

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    # translation ----------------------------------------------------------------------------

    def translate(self) -> str:
        entry = self.kfunc.entry
        for i, a in enumerate(entry.args):
            self.names[a] = f"arg{i}"
        self.emit(0, "def kernel_body(ids, args, shared, me):")
        self.emit(1, "tx, ty, tz, bx, by, bz, ntx, nty, ntz, ngx, ngy, ngz, lane = ids")
        if entry.args:
            self.emit(1, ", ".join(self.names[a] for a in entry.args) + ", = args")
        self.emit(1, "if False:")
        self.emit(2, "yield  # every kernel is a generator, even without barriers")
        for op in self.kfunc.walk():
            if isinstance(op, arith.ConstantOp):
                self.emit(1, f"{self.name_of(op.result)} = K[{len(self.constants)}]")
                self.constants.append(self.constant(op))
        self.block_body(entry, 1, [])
        return "\n".join(self.lines) + "\n"

    def block_body(self, block: Block, depth: int, targets: Sequence[str]) -> None:
        start = len(self.lines)
        for op in block.ops:
            if isinstance(op, scf.YieldOp):
                if targets:
                    values = ", ".join(self.name_of(v) for v in op.operands)
                    self.emit(depth, f"{', '.join(targets)}, = {values},")
            else:
                self.op(op, depth)
        if len(self.lines) == start:
            self.emit(depth, "pass")

    def constant(self, op: arith.ConstantOp) -> Any:
        value = op.value
        t = op.result.type
        kind, bits = scalar_kind(t)
        if isinstance(value, FloatAttr):
            return graph.numpy_dtype(t).type(value.value.data)
        if isinstance(value, IntegerAttr):
            v = value.value.data
            return bool(v) if kind == "bool" else wrap(v, bits)
        raise self.unsupported(op, "only scalar constants are simulated")

    def unsupported(self, op: Operation, why: str = "") -> SimulationError:
        return SimulationError(
            f"the GPU simulator cannot run '{op.name}' in kernel @{self.name}" + (f": {why}" if why else ""),
            location_of(self.source_op),
        )

    def op(self, op: Operation, depth: int) -> None:
        if isinstance(op, arith.ConstantOp):
            return  # hoisted
        a = [self.name_of(v) for v in op.operands]
        res = self.name_of(op.results[0]) if op.results else ""
        if isinstance(op, scf.ForOp):
            return self.for_loop(op, depth)
        if isinstance(op, scf.IfOp):
            return self.branch(op, depth)
        if isinstance(op, kernel.IdOp):
            prefix = {kernel.ThreadIdOp: "t", kernel.BlockIdOp: "b", kernel.BlockDimOp: "nt", kernel.GridDimOp: "ng"}
            return self.emit(depth, f"{res} = {prefix[type(op)]}{op.dim.data}")
        if isinstance(op, kernel.LaneIdOp):
            return self.emit(depth, f"{res} = lane")
        if isinstance(op, kernel.SharedAllocOp):
            self.shared.append(op)
            return self.emit(depth, f"{res} = shared[{len(self.shared) - 1}]")
        if isinstance(op, kernel.BarrierOp):
            return self.emit(depth, f"yield ({BARRIER!r}, {self.number(op)}, None)")
        if isinstance(op, kernel.ShuffleOp):
            return self.emit(depth, f"{res} = yield ({SHUFFLE!r}, {self.number(op)}, {a[0]})")
        if isinstance(op, kernel.GridSyncOp):
            return self.emit(depth, f"yield ({GRID!r}, {self.number(op)}, {a[0]})")
        if isinstance(op, kernel.ReturnOp):
            return self.emit(depth, "return")
        if isinstance(op, kernel.AtomicAddOp):
            self.note_write(op.buffer)
            return self.emit(depth, f"{a[1]}.atomic_add(me, {tuple_of(a[2:])}, {a[0]}, {self.number(op)})")
        if isinstance(op, memref.LoadOp):
            return self.emit(depth, f"{res} = {a[0]}.load(me, {tuple_of(a[1:])}, {self.number(op)})")
        if isinstance(op, memref.StoreOp):
            self.note_write(op.memref)
            return self.emit(depth, f"{a[1]}.store(me, {tuple_of(a[2:])}, {a[0]}, {self.number(op)})")
        expr = self.expression(op, a)
        if expr is None:
            raise self.unsupported(op)
        self.emit(depth, f"{res} = {expr}")

    def note_write(self, buffer: SSAValue) -> None:
        if buffer in self.kfunc.entry.args:
            self.written_args.add(self.kfunc.entry.args.index(buffer))

    def for_loop(self, op: scf.ForOp, depth: int) -> None:
        body = op.body.block
        iv = self.name_of(body.args[0])
        carried = [self.name_of(b) for b in body.args[1:]]
        lb, ub, step = (self.name_of(v) for v in (op.lb, op.ub, op.step))
        if carried:
            self.emit(depth, f"{', '.join(carried)}, = {', '.join(self.name_of(v) for v in op.iter_args)},")
        self.emit(depth, f"for {iv} in checked_range({lb}, {ub}, {step}, {self.number(op)}):")
        self.block_body(body, depth + 1, carried)
        if op.results:
            self.emit(depth, f"{', '.join(self.name_of(r) for r in op.results)}, = {', '.join(carried)},")

    def branch(self, op: scf.IfOp, depth: int) -> None:
        results = [self.name_of(r) for r in op.results]
        self.emit(depth, f"if {self.name_of(op.cond)}:")
        self.block_body(op.true_region.block, depth + 1, results)
        if op.false_region.blocks:
            self.emit(depth, "else:")
            self.block_body(op.false_region.block, depth + 1, results)

    def expression(self, op: Operation, a: list[str]) -> str | None:
        """Python for one pure arith/math op (None when it is not one)."""
        t = op.results[0].type if op.results else None
        kind, bits = scalar_kind(t) if t is not None else ("", 0)
        name = op.name
        k = len(self.ops)  # the number this op would get: only for messages
        if name.startswith("arith.") and name.endswith("f") and name[6:-1] in ("add", "sub", "mul", "div"):
            symbol = {"add": "+", "sub": "-", "mul": "*", "div": "/"}[name[6:-1]]
            return f"{a[0]} {symbol} {a[1]}"
        if name in ("arith.addi", "arith.subi", "arith.muli"):
            symbol = {"arith.addi": "+", "arith.subi": "-", "arith.muli": "*"}[name]
            return f"wrap({a[0]} {symbol} {a[1]}, {bits})" if kind != "bool" else None
        if name in ("arith.andi", "arith.ori", "arith.xori"):
            symbol = {"arith.andi": "&", "arith.ori": "|", "arith.xori": "^"}[name]
            return f"({a[0]} {symbol} {a[1]})"
        if name == "arith.shli":
            return f"wrap({a[0]} << unsigned({a[1]}, {bits}), {bits})"
        if name == "arith.shrsi":
            return f"({a[0]} >> unsigned({a[1]}, {bits}))"
        if name == "arith.shrui":
            return f"wrap(unsigned({a[0]}, {bits}) >> unsigned({a[1]}, {bits}), {bits})"
        if name == "arith.divsi":
            self.number(op)
            return f"wrap(div_signed({a[0]}, {a[1]}, {k}), {bits})"
        if name == "arith.remsi":
            self.number(op)
            return f"rem_signed({a[0]}, {a[1]}, {k})"
        if name == "arith.divui":
            self.number(op)
            return f"div_unsigned({a[0]}, {a[1]}, {bits}, {k})"
        if name == "arith.remui":
            self.number(op)
            return f"rem_unsigned({a[0]}, {a[1]}, {bits}, {k})"
        if name in ("arith.maxsi", "arith.minsi"):
            return f"{name[6:9]}({a[0]}, {a[1]})"
        if name in ("arith.maxui", "arith.minui"):
            pick = "max" if name == "arith.maxui" else "min"
            return f"{pick}({a[0]}, {a[1]}, key=lambda x: unsigned(x, {bits}))"
        if name == "arith.negf":
            return f"-{a[0]}"
        if name == "arith.remf":
            return f"np.fmod({a[0]}, {a[1]})"
        if name in ("arith.maximumf", "arith.minimumf"):
            return f"{name[6:]}({a[0]}, {a[1]})"
        if name in ("arith.maxnumf", "arith.minnumf"):
            return f"np.f{name[6:9]}({a[0]}, {a[1]})"
        if name == "arith.select":
            return f"({a[1]} if {a[0]} else {a[2]})"
        if name == "arith.cmpf":
            predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]  # type: ignore[attr-defined]
            return CMPF[predicate].format(a=a[0], b=a[1])
        if name == "arith.cmpi":
            predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]  # type: ignore[attr-defined]
            _, width = scalar_kind(op.operands[0].type)
            if predicate in CMPI_SIGNED:
                return f"({a[0]} {CMPI_SIGNED[predicate]} {a[1]})"
            return f"(unsigned({a[0]}, {width}) {CMPI_UNSIGNED[predicate]} unsigned({a[1]}, {width}))"
        source_kind, source_bits = scalar_kind(op.operands[0].type) if op.operands else ("", 0)
        if name in ("arith.extf", "arith.truncf", "arith.sitofp"):
            return f"{self.float_type(t)}({a[0]})"
        if name == "arith.uitofp":
            return f"{self.float_type(t)}(unsigned({a[0]}, {source_bits}))"
        if name in ("arith.fptosi", "arith.fptoui"):
            return f"fp_to_int({a[0]}, {bits}, {name == 'arith.fptosi'})"
        if name in ("arith.index_cast", "arith.trunci", "arith.extsi"):
            return f"bool({a[0]} & 1)" if kind == "bool" else f"wrap(int({a[0]}), {bits})"
        if name in ("arith.index_castui", "arith.extui"):
            return f"wrap(unsigned(int({a[0]}), {source_bits}), {bits})"
        if name == "arith.bitcast":
            return f"bitcast({a[0]}, np.dtype({str(graph.numpy_dtype(t))!r}))"
        if name.startswith("math."):
            return self.math_expression(op, a, t)
        return None

    def float_type(self, t: Attribute) -> str:
        return f"np.{graph.numpy_dtype(t).name}"

    def math_expression(self, op: Operation, a: list[str], t: Attribute) -> str | None:
        f = self.float_type(t)
        unary = {
            "math.absf": f"abs({a[0]})",
            "math.sqrt": f"np.sqrt({a[0]})",
            "math.rsqrt": f"{f}(1) / np.sqrt({a[0]})",
            "math.exp": f"np.exp({a[0]})",
            "math.log": f"np.log({a[0]})",
            "math.tanh": f"np.tanh({a[0]})",
            "math.floor": f"np.floor({a[0]})",
            "math.ceil": f"np.ceil({a[0]})",
            "math.erf": f"{f}(math.erf({a[0]}))",
        }
        if op.name in unary:
            return unary[op.name]
        if op.name == "math.absi":
            return f"wrap(abs({a[0]}), {scalar_kind(t)[1]})"
        if op.name == "math.copysign":
            return f"np.copysign({a[0]}, {a[1]})"
        if op.name == "math.powf":
            return f"np.power({a[0]}, {a[1]})"
        if op.name == "math.fma":
            return f"{f}(float({a[0]}) * float({a[1]}) + float({a[2]}))"
        return None

    # shared memory ---------------------------------------------------------------------------

    def check_shared(self) -> None:
        """Dynamic buffers must not overlap; static ones must fit the static limit."""
        static = sum(kernel.memref_bytes(op.buffer_type) for op in self.shared if op.dynamic is None)
        if static > kernel.STATIC_SHARED_LIMIT:
            raise SimulationError(
                f"kernel @{self.name} declares {static} bytes of static shared memory "
                f"(limit {kernel.STATIC_SHARED_LIMIT})",
                location_of(self.source_op),
            )
        ranges = sorted(
            (op.offset.value.data, op.offset.value.data + kernel.memref_bytes(op.buffer_type))  # type: ignore[union-attr]
            for op in self.shared
            if op.dynamic is not None
        )
        for (_, end), (start, _) in zip(ranges, ranges[1:]):
            if start < end:
                raise SimulationError(
                    f"kernel @{self.name}: dynamic shared buffers overlap (bytes {start}..{end})",
                    location_of(self.source_op),
                )

    def new_shared(self, block_index: int) -> list[Buffer]:
        buffers = []
        for n, op in enumerate(self.shared):
            buf = Buffer(f"shared buffer {n} of block {block_index}", op.buffer_type)
            buf.track()
            buffers.append(buf)
        return buffers


def tuple_of(names: Sequence[str]) -> str:
    return f"({', '.join(names)},)" if names else "()"


GENERATED_GLOBALS: dict[str, Any] = {
    "np": np,
    "math": math,
    "wrap": wrap,
    "unsigned": unsigned,
    "div_signed": div_signed,
    "rem_signed": rem_signed,
    "div_unsigned": div_unsigned,
    "rem_unsigned": rem_unsigned,
    "maximumf": maximumf,
    "minimumf": minimumf,
    "fp_to_int": fp_to_int,
    "bitcast": bitcast,
    "checked_range": checked_range,
}


# --- threads, blocks and grids --------------------------------------------------------------


class Thread:
    __slots__ = ("gid", "tid", "coords", "block", "gen", "event")

    def __init__(self, gid: int, tid: int, coords: tuple[int, int, int], block: BlockState):
        self.gid = gid  # unique in the launch
        self.tid = tid  # linear in the block
        self.coords = coords
        self.block = block
        self.gen: Any = None
        self.event: tuple = FINISHED

    def stamp(self) -> tuple[int, int, int, int]:
        b = self.block
        return (self.gid, b.index, b.grid_epoch, b.barrier_epoch)


@dataclass
class BlockState:
    index: int
    coords: tuple[int, int, int]
    threads: list[Thread] = field(default_factory=list)
    warps: list[list[Thread]] = field(default_factory=list)
    grid_epoch: int = 0
    barrier_epoch: int = 0
    resume: list[tuple[Thread, Any]] = field(default_factory=list)


@dataclass
class LaunchStats:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    threads: int
    barriers: int = 0
    shuffles: int = 0
    grid_barriers: int = 0


class Launch:
    """One kernel.launch, simulated."""

    def __init__(self, program: KernelProgram, grid: tuple[int, int, int], block: tuple[int, int, int], args: list[Buffer]):
        self.program = program
        self.grid = grid
        self.block = block
        self.args = args
        self.stats = LaunchStats(program.name, grid, block, math.prod(grid) * math.prod(block))

    def fail(self, message: str, op_number: int | None = None, thread: Thread | None = None) -> SimulationError:
        where = f"kernel @{self.program.name}"
        if op_number is not None and op_number >= 0:
            where += f", '{self.program.ops[op_number].name}'"
        if thread is not None:
            where += f", thread {thread.coords} of block {thread.block.coords}"
        return SimulationError(f"{where}: {message}", location_of(self.program.source_op))

    def run(self) -> LaunchStats:
        written = {id(self.args[i]) for i in self.program.written_args}
        for buf in self.args:
            if id(buf) in written:
                buf.track()
        try:
            gx, gy, gz = self.grid
            coords = [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]
            if self.program.cooperative:
                self.run_cooperative(coords)
            else:
                for i, c in enumerate(coords):
                    blk = self.start_block(i, c)
                    if self.settle(blk) != DONE:
                        raise self.fail("grid barrier in a kernel that is not cooperative")
        finally:
            for buf in self.args:
                buf.untrack()
        return self.stats

    def start_block(self, index: int, coords: tuple[int, int, int]) -> BlockState:
        bx, by, bz = coords
        ntx, nty, ntz = self.block
        ngx, ngy, ngz = self.grid
        blk = BlockState(index, coords)
        shared = self.program.new_shared(index)
        threads_per_block = ntx * nty * ntz
        for tz in range(ntz):
            for ty in range(nty):
                for tx in range(ntx):
                    tid = tx + ntx * (ty + nty * tz)
                    th = Thread(index * threads_per_block + tid, tid, (tx, ty, tz), blk)
                    ids = (tx, ty, tz, bx, by, bz, ntx, nty, ntz, ngx, ngy, ngz, tid % WARP)
                    th.gen = self.program.function(ids, self.args, shared, th)
                    blk.threads.append(th)
                    blk.resume.append((th, None))
        blk.warps = [blk.threads[w : w + WARP] for w in range(0, threads_per_block, WARP)]
        return blk

    def advance(self, th: Thread, value: Any) -> None:
        try:
            th.event = th.gen.send(value)
        except StopIteration:
            th.event = FINISHED
        except Fault as f:
            raise self.fail(f.message, f.op_number, th) from None

    def settle(self, blk: BlockState) -> str:
        """Run a block until all its threads finished, or all wait at the same grid barrier."""
        while True:
            pending, blk.resume = blk.resume, []
            while pending:
                for th, value in pending:
                    self.advance(th, value)
                pending = []
                for warp in blk.warps:
                    if all(th.event[0] == SHUFFLE for th in warp):
                        pending += self.shuffle(warp)
            kinds = {th.event[0] for th in blk.threads}
            ops = {th.event[1] for th in blk.threads}
            if kinds == {DONE}:
                return DONE
            if SHUFFLE in kinds:
                th = next(t for t in blk.threads if t.event[0] == SHUFFLE)
                others = sorted({t.event[0] for t in blk.warps[th.tid // WARP]} - {SHUFFLE})
                raise self.fail(f"divergent warp: lanes of this warp are at: {', '.join(others)}", th.event[1], th)
            if len(kinds) == 1 and len(ops) == 1 and BARRIER in kinds:
                blk.barrier_epoch += 1
                self.stats.barriers += 1
                blk.resume = [(th, None) for th in blk.threads]
                continue
            if len(kinds) == 1 and len(ops) == 1 and GRID in kinds:
                return GRID
            waiting = next(t for t in blk.threads if t.event[0] != DONE)
            states = ", ".join(sorted(f"{k}" for k in kinds))
            raise self.fail(
                f"deadlock: the threads of block {blk.coords} are split between {states} "
                "(a barrier must be reached by every thread of the block)",
                waiting.event[1],
                waiting,
            )

    def shuffle(self, warp: list[Thread]) -> list[tuple[Thread, Any]]:
        ops = {th.event[1] for th in warp}
        if len(ops) != 1:
            raise self.fail("divergent warp: its lanes are at different shuffles", warp[0].event[1], warp[0])
        k = ops.pop()
        if len(warp) != WARP:
            raise self.fail(f"full-warp shuffle in a warp of {len(warp)} threads (the block is not whole warps)", k, warp[0])
        op = self.program.ops[k]
        assert isinstance(op, kernel.ShuffleOp)
        offset = op.offset.value.data
        values = [th.event[2] for th in warp]
        if op.mode.data == "xor":
            got = [values[lane ^ offset] for lane in range(WARP)]
        else:
            got = [values[lane + offset] if lane + offset < WARP else values[lane] for lane in range(WARP)]
        self.stats.shuffles += 1
        return list(zip(warp, got))

    def run_cooperative(self, coords: list[tuple[int, int, int]]) -> None:
        blocks = [self.start_block(i, c) for i, c in enumerate(coords)]
        while True:
            states = [self.settle(b) for b in blocks]
            if all(s == DONE for s in states):
                return
            waiting = [b for b, s in zip(blocks, states) if s == GRID]
            if len(waiting) != len(blocks):
                th = waiting[0].threads[0]
                raise self.fail(
                    f"deadlock: {len(blocks) - len(waiting)} of {len(blocks)} blocks exited while the others "
                    "wait at the grid barrier",
                    th.event[1],
                    th,
                )
            ops = {b.threads[0].event[1] for b in blocks}
            if len(ops) != 1:
                raise self.fail("blocks wait at different grid barriers", blocks[0].threads[0].event[1])
            counters = {id(th.event[2]): th.event[2] for b in blocks for th in b.threads}
            if len(counters) != 1:
                raise self.fail("threads pass different counters to one grid barrier", ops.pop())
            self.grid_barrier(next(iter(counters.values())), ops.pop())
            for b in blocks:
                b.grid_epoch += 1
                b.barrier_epoch += 1
                b.resume = [(th, None) for th in b.threads]

    def grid_barrier(self, counter: Buffer, k: int) -> None:
        """Replay the arrivals of lowering.GRID_SYNC_PTX on the counter, in two orders."""
        if not counter.initialized[0]:
            raise self.fail(f"grid barrier on {counter.describe()}, which nothing cleared", k)
        n = math.prod(self.grid)
        start = int(counter.data[0]) & U32
        adds = [(TOP_BIT + 1 - n) & U32] + [1] * (n - 1)  # block 0 first, then the others
        for order in (adds, adds[::-1]):
            value, olds = start, []
            for i, add in enumerate(order):
                olds.append(value)
                value = (value + add) & U32
                released = [old for old in olds if (old ^ value) & TOP_BIT]
                if i < n - 1 and released:
                    raise self.fail(
                        f"the grid barrier releases blocks before all arrived (counter started at {start:#x}: "
                        "it must be zeroed before the launch and used by this kernel only)",
                        k,
                    )
            if any(not ((old ^ value) & TOP_BIT) for old in olds):
                raise self.fail(f"the grid barrier never releases (counter started at {start:#x})", k)
        counter.data[0] = wrap(value, 32)
        self.stats.grid_barriers += 1


# --- the host function --------------------------------------------------------------------


class SimulatedExecutable:
    """A mapped module run by the simulator; call it like the tensor function it came from.

    `cooperative_blocks` caps the grid of cooperative kernels, as the runtime
    caps it to one wave of the device (their grid-stride loops must cope).
    """

    def __init__(self, module: ModuleOp, entry: str = "main", cooperative_blocks: int | None = None):
        self.module = module
        self.cooperative_blocks = cooperative_blocks
        self.programs = {
            op.sym_name.data: KernelProgram(op) for op in module.ops if isinstance(op, kernel.KernelFuncOp)
        }
        hosts = [op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == entry]
        if not hosts or RESULTS_ATTR not in hosts[0].attributes:
            raise Diagnostic(f"no host function @{entry}: run gpu-map-kernels first")
        self.host = hosts[0]
        self.globals = {op.sym_name.data: op for op in module.ops if isinstance(op, memref.GlobalOp)}
        self.n_results = self.host.attributes[RESULTS_ATTR].value.data  # type: ignore[union-attr]
        types = self.host.function_type.inputs.data
        self.input_types: list[MemRefType] = list(types[: len(types) - self.n_results])  # type: ignore[arg-type]
        self.result_types: list[MemRefType] = list(types[len(types) - self.n_results :])  # type: ignore[arg-type]
        self.stats: list[LaunchStats] = []

    def __call__(self, *arrays: Any) -> tuple[np.ndarray, ...]:
        if len(arrays) != len(self.input_types):
            raise ValueError(f"expected {len(self.input_types)} arguments, got {len(arrays)}")
        env: dict[SSAValue, Buffer] = {}
        args = self.host.body.block.args
        for i, (a, t) in enumerate(zip(arrays, self.input_types)):
            a = np.asarray(a)
            if tuple(a.shape) != tuple(t.get_shape()):
                raise ValueError(f"argument {i} has shape {tuple(a.shape)} where {tuple(t.get_shape())} is expected")
            env[args[i]] = Buffer(f"input {i}", t, a.astype(graph.numpy_dtype(t.get_element_type())), readonly=True)
        outputs = [Buffer(f"output {k}", t) for k, t in enumerate(self.result_types)]
        env.update(zip(args[len(self.input_types) :], outputs))
        self.stats = []
        with np.errstate(all="ignore"):
            for op in self.host.body.block.ops:
                self.host_op(op, env)
        for k, out in enumerate(outputs):
            missing = int((~out.initialized).sum())
            if missing:
                raise SimulationError(
                    f"@{self.host.sym_name.data}: {missing} of {out.initialized.size} elements of result {k} "
                    "were never written",
                    location_of(self.host),
                )
        return tuple(out.array() for out in outputs)

    def host_op(self, op: Operation, env: dict[SSAValue, Buffer]) -> None:
        match op:
            case memref.AllocOp():
                env[op.memref] = Buffer(f"buffer {len(env)}", op.memref.type)  # type: ignore[arg-type]
            case memref.GetGlobalOp():
                g = self.globals[op.name_.root_reference.data]
                t = g.type
                value = graph.dense_to_numpy(g.initial_value)  # type: ignore[arg-type]
                data = np.broadcast_to(value, t.get_shape())  # type: ignore[union-attr]
                env[op.memref] = Buffer(f"constant @{g.sym_name.data}", t, data, readonly=True)  # type: ignore[arg-type]
            case kernel.MemsetOp():
                env[op.buffer].zero()
            case memref.CopyOp():
                env[op.destination].copy_from(env[op.source])
            case kernel.LaunchOp():
                self.launch(op, env)
            case func.ReturnOp():
                pass
            case _:
                raise SimulationError(f"the GPU simulator cannot run host op '{op.name}'", location_of(op))

    def launch(self, op: kernel.LaunchOp, env: dict[SSAValue, Buffer]) -> None:
        program = self.programs[op.kernel.string_value()]
        grid = op.grid_size
        if program.cooperative and self.cooperative_blocks is not None:
            grid = (min(grid[0], self.cooperative_blocks), 1, 1)
        if op.block_size != program.block:
            raise SimulationError(
                f"launch of @{program.name} with block {op.block_size}, written for {program.block}", location_of(op)
            )
        self.stats.append(Launch(program, grid, op.block_size, [env[a] for a in op.args]).run())


def compile_gpu_sim(
    source: str | ModuleOp,
    entry: str = "main",
    gpu: GpuTarget | str = DEFAULT_ARCH,
    cooperative_blocks: int | None = None,
) -> SimulatedExecutable:
    """mlfuse.compile(src, target="gpu-sim"): map to kernels (unless mapped) and simulate them."""
    from mlfuse.ir import parse_module

    module = parse_module(source) if isinstance(source, str) else source.clone()
    if not any(isinstance(op, kernel.KernelFuncOp) for op in module.ops):
        map_module(module, target(gpu) if isinstance(gpu, str) else gpu)
    return SimulatedExecutable(module, entry, cooperative_blocks)


# --- a driver for the GPU runtime -----------------------------------------------------------


class SimulatedDriver:
    """The driver interface of mlfuse.backend.gpu.runtime, with the simulator as the device.

    Runs GpuExecutable (its host code: uploads, scratch buffers, memsets,
    cooperative grids, downloads) on a machine without a GPU:

        exe = GpuExecutable(module, driver=SimulatedDriver(module))

    Memory is byte arrays at made-up addresses, with a byte-wise record of what
    was written; kernels run as KernelPrograms of the module's kernel.funcs.
    """

    name = "simulator"
    ALIGN = 256

    def __init__(self, module: ModuleOp, gpu: GpuTarget | str = DEFAULT_ARCH, registers: int = 32):
        self.gpu = target(gpu) if isinstance(gpu, str) else gpu
        self.arch = self.gpu.arch
        self.sm_count = self.gpu.sm_count
        self.assumed_registers = registers
        self.programs = {
            op.sym_name.data: KernelProgram(op) for op in module.ops if isinstance(op, kernel.KernelFuncOp)
        }
        self.memory: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # base -> (bytes, written)
        self.next_address = 1 << 20
        self.stats: list[LaunchStats] = []

    def load(self, ptx: str) -> dict[str, KernelProgram]:
        return self.programs

    def function(self, module: dict[str, KernelProgram], name: str, dynamic_shared: int) -> KernelProgram:
        return module[name]

    def registers(self, fn: KernelProgram) -> int:
        return self.assumed_registers

    def static_shared(self, fn: KernelProgram) -> int:
        return sum(kernel.memref_bytes(op.buffer_type) for op in fn.shared if op.dynamic is None)

    def blocks_per_sm(self, fn: KernelProgram, threads: int, dynamic_shared: int) -> int | None:
        return None

    def alloc(self, nbytes: int) -> int:
        base = self.next_address
        self.next_address += -(-max(1, nbytes) // self.ALIGN) * self.ALIGN
        self.memory[base] = (poison(max(1, nbytes), np.dtype(np.uint8)), np.zeros(max(1, nbytes), dtype=bool))
        return base

    def pointer(self, allocation: int) -> int:
        return allocation

    def region(self, address: int, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
        """Byte views (data, written) of [address, address + nbytes)."""
        for base, (data, written) in self.memory.items():
            if base <= address and address + nbytes <= base + data.size:
                return data[address - base : address - base + nbytes], written[address - base : address - base + nbytes]
        raise SimulationError(f"{nbytes} bytes at {address:#x} are not inside one allocation")

    def upload(self, dst: int, array: np.ndarray) -> None:
        raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        data, written = self.region(dst, raw.size)
        data[:] = raw
        written[:] = True

    def download(self, array: np.ndarray, src: int) -> None:
        data, written = self.region(src, array.nbytes)
        if not written.all():
            raise SimulationError(f"downloads {int((~written).sum())} bytes at {src:#x} that nothing wrote")
        array.reshape(-1).view(np.uint8)[:] = data

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        data, written = self.region(src, nbytes)
        to, to_written = self.region(dst, nbytes)
        to[:] = data
        to_written[:] = written

    def zero(self, dst: int, nbytes: int) -> None:
        data, written = self.region(dst, nbytes)
        data[:] = 0
        written[:] = True

    def launch(self, fn: KernelProgram, grid, block, dynamic_shared: int, pointers: list[int]) -> None:
        types = fn.kfunc.function_type.inputs.data
        if len(pointers) != len(types):
            raise SimulationError(f"launch of @{fn.name} with {len(pointers)} arguments, it takes {len(types)}")
        buffers, views = [], []
        for i, (address, t) in enumerate(zip(pointers, types)):
            assert isinstance(t, MemRefType)
            nbytes = kernel.memref_bytes(t)
            data, written = self.region(address, nbytes)
            dtype = graph.numpy_dtype(t.get_element_type())
            itemsize = dtype.itemsize
            elements = written.reshape(-1, itemsize).all(axis=1)
            buffers.append(Buffer.over(f"argument {i} at {address:#x}", t, data.view(dtype), elements))
            views.append((written, itemsize))
        with np.errstate(all="ignore"):
            self.stats.append(Launch(fn, tuple(grid), tuple(block), buffers).run())
        for buf, (written, itemsize) in zip(buffers, views):
            written |= np.repeat(buf.initialized, itemsize)

    def event(self) -> list[float]:
        return [0.0]

    def record(self, event: list[float]) -> None:
        import time

        event[0] = time.perf_counter()

    def elapsed(self, start: list[float], end: list[float]) -> float:
        return end[0] - start[0]

    def synchronize(self) -> None:
        pass
