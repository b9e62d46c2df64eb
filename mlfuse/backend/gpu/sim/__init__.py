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

The package: sim/semantics.py (scalar semantics of arith and math ops, one
registry), sim/memory.py (buffers, poison, the race model), sim/translate.py
(kernel.func -> Python), sim/schedule.py (threads, blocks, barriers, launches),
sim/driver.py (the host function; the runtime's driver interface).
"""

from mlfuse.backend.gpu.sim.driver import SimulatedDriver, SimulatedExecutable, compile_gpu_sim
from mlfuse.backend.gpu.sim.errors import Fault, SimulationError
from mlfuse.backend.gpu.sim.memory import Buffer, conflict, poison
from mlfuse.backend.gpu.sim.schedule import BlockState, Launch, LaunchStats, Thread
from mlfuse.backend.gpu.sim.semantics import SCALAR_SEMANTICS, ScalarSemantics, scalar_semantics
from mlfuse.backend.gpu.sim.translate import GENERATED_GLOBALS, KernelProgram

__all__ = [
    "GENERATED_GLOBALS",
    "SCALAR_SEMANTICS",
    "BlockState",
    "Buffer",
    "Fault",
    "KernelProgram",
    "Launch",
    "LaunchStats",
    "ScalarSemantics",
    "SimulatedDriver",
    "SimulatedExecutable",
    "SimulationError",
    "Thread",
    "compile_gpu_sim",
    "conflict",
    "poison",
    "scalar_semantics",
]
