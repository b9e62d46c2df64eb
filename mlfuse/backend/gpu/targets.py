"""What the GPU backend needs to know about the GPUs it compiles for.

The numbers are NVIDIA's published per-architecture limits (CUDA C Programming
Guide, "Technical Specifications per Compute Capability"); SM counts are those
of the data-centre parts (A100: 108, H100/H200 SXM: 132).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuTarget:
    arch: str  # PTX target, e.g. "sm_90"
    ptx_version: str  # llvmlite feature, e.g. "+ptx80"
    sm_count: int
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    register_granularity: int = 256  # registers are allocated per warp in units of 256
    shared_per_sm: int = 228 * 1024
    shared_per_block_optin: int = 227 * 1024  # with cuFuncSetAttribute
    static_shared_per_block: int = 48 * 1024
    reserved_shared_per_block: int = 1024  # the driver keeps 1 KiB per block

    def blocks_per_sm(self, threads_per_block: int, registers_per_thread: int, shared_per_block: int) -> int:
        """Resident blocks per SM (the CUDA occupancy calculator, simplified to whole warps)."""
        warps = math.ceil(threads_per_block / 32)
        by_threads = self.max_threads_per_sm // (warps * 32)
        regs_per_warp = math.ceil(max(registers_per_thread, 1) * 32 / self.register_granularity) * self.register_granularity
        by_registers = self.registers_per_sm // (regs_per_warp * warps)
        smem = shared_per_block + self.reserved_shared_per_block
        by_shared = self.shared_per_sm // smem
        return max(0, min(self.max_blocks_per_sm, by_threads, by_registers, by_shared))

    def one_wave(self, threads_per_block: int, registers_per_thread: int, shared_per_block: int) -> int:
        """How many blocks can be resident on the whole GPU at once (the grid-barrier limit)."""
        return self.sm_count * self.blocks_per_sm(threads_per_block, registers_per_thread, shared_per_block)


TARGETS: dict[str, GpuTarget] = {
    "sm_90": GpuTarget("sm_90", "+ptx80", sm_count=132),
    "sm_80": GpuTarget(
        "sm_80",
        "+ptx80",
        sm_count=108,
        shared_per_sm=164 * 1024,
        shared_per_block_optin=163 * 1024,
    ),
}
DEFAULT_ARCH = "sm_90"


def target(arch: str = DEFAULT_ARCH) -> GpuTarget:
    if arch not in TARGETS:
        raise ValueError(f"unknown GPU architecture '{arch}' (known: {', '.join(TARGETS)})")
    return TARGETS[arch]
