"""The GPU simulator's old module path: everything now lives in the package mlfuse.backend.gpu.sim.

Kept so that `from mlfuse.backend.gpu.simulator import compile_gpu_sim` (runtime.py,
older scripts) goes on working; new code imports mlfuse.backend.gpu.sim.
"""

from mlfuse.backend.gpu.sim import *  # noqa: F403 (the package's public names, as listed there)
from mlfuse.backend.gpu.sim import __all__  # noqa: F401
