"""The scheduler: the threads of a launch, run as generators until they finish or wait.

A block runs its threads until every one has finished or waits: at a barrier
(all of the block must be at the same one, then all go on), at a shuffle (the
32 lanes of a warp exchange once all reach the same shuffle, xor or down as
shfl.sync.bfly/down with a full mask) or at a grid barrier. Cooperative kernels
keep all blocks alive and release them together, after replaying the counter
protocol of the PTX grid barrier on the counter buffer, so an un-zeroed counter
is caught. Each barrier starts a new epoch for the race model (sim/memory.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from mlfuse.backend.gpu.sim.errors import Fault, SimulationError
from mlfuse.backend.gpu.sim.memory import Buffer
from mlfuse.backend.gpu.sim.semantics import wrap
from mlfuse.backend.gpu.sim.translate import BARRIER, DONE, FINISHED, GRID, SHUFFLE, KernelProgram
from mlfuse.diagnostics import location_of
from mlfuse.dialects import kernel

WARP = kernel.WARP_SIZE
TOP_BIT = 0x80000000
U32 = 0xFFFFFFFF


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
