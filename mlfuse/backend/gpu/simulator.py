"""The GPU simulator's old module path: everything now lives in the package mlfuse.backend.gpu.sim.

Kept so that `from mlfuse.backend.gpu.simulator import compile_gpu_sim` (api.py,
runtime.py, older scripts) goes on working; new code imports mlfuse.backend.gpu.sim.
"""

from mlfuse.backend.gpu.sim import (
    GENERATED_GLOBALS,
    SCALAR_SEMANTICS,
    BlockState,
    Buffer,
    Fault,
    KernelProgram,
    Launch,
    LaunchStats,
    ScalarSemantics,
    SimulatedDriver,
    SimulatedExecutable,
    SimulationError,
    Thread,
    compile_gpu_sim,
    conflict,
    poison,
    scalar_semantics,
)

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
