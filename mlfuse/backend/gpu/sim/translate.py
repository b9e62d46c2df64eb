"""The translator: each `kernel.func` becomes a Python generator function run once per thread.

One SSA value is one local variable; scf.for and scf.if are Python loops and
branches; loads, stores and atomics call the `Buffer`s (sim/memory.py); arith
and math ops are the expressions of their scalar semantics (sim/semantics.py).
A thread yields where it must wait for others, as (kind, op number, payload):
at `kernel.barrier`, `kernel.shuffle` (the value to exchange) and
`kernel.grid_sync` (the counter buffer); the scheduler (sim/schedule.py)
resumes it. Op numbers index `KernelProgram.ops`, for messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Block, Operation, SSAValue

from mlfuse.backend.gpu.sim.errors import Fault, SimulationError
from mlfuse.backend.gpu.sim.memory import Buffer
from mlfuse.backend.gpu.sim.semantics import RUNTIME, SCALAR_SEMANTICS, scalar_kind, wrap
from mlfuse.diagnostics import location_of
from mlfuse.dialects import graph, kernel

# events a thread yields: (kind, op number, payload)
BARRIER, SHUFFLE, GRID, DONE = "barrier", "shuffle", "grid barrier", "done"
FINISHED = (DONE, -1, None)


def checked_range(lb: int, ub: int, step: int, k: int) -> range:
    """scf.for's iterations; a step that is not positive is a fault (scf.for requires a positive step)."""
    if step <= 0:
        raise Fault(k, f"scf.for with step {step}: the step must be positive")
    return range(lb, ub, step)


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
        """Python for one pure arith/math op (None when the simulator has no semantics for it)."""
        semantics = SCALAR_SEMANTICS.get(type(op))
        if semantics is None:
            return None
        k = self.number(op) if semantics.faults else -1  # only faulting ops need a number for messages
        return semantics.expression(op, a, k)

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


# the names generated code refers to: the scalar semantics' helpers, and scf.for's range
GENERATED_GLOBALS: dict[str, Any] = {**RUNTIME, "checked_range": checked_range}
