"""ptxas: assemble PTX and read its resource report (`ptxas -v`).

ptxas comes from NVIDIA's `nvidia-cuda-nvcc` wheel (the `gpu` extra), which puts
it under the `nvidia` namespace package (`nvidia/cu13/bin/ptxas` for CUDA 13);
a ptxas on PATH or at $MLFUSE_PTXAS is used otherwise.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mlfuse.backend.gpu.targets import DEFAULT_ARCH, GpuTarget, target


class PtxasError(Exception):
    """ptxas rejected the PTX, or a kernel breaks a resource limit."""


def find_ptxas() -> str | None:
    """Path of a ptxas binary, or None when there is none."""
    explicit = os.environ.get("MLFUSE_PTXAS")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    try:
        import nvidia  # namespace package of NVIDIA's CUDA wheels
    except ImportError:
        nvidia = None
    if nvidia is not None:
        for root in getattr(nvidia, "__path__", []):
            for candidate in sorted(Path(root).glob("cu*/bin/ptxas"), reverse=True) + sorted(
                Path(root).glob("cuda_nvcc/bin/ptxas")
            ):
                if os.access(candidate, os.X_OK):
                    return str(candidate)
    return shutil.which("ptxas")


@dataclass(frozen=True)
class KernelResources:
    """One kernel's line of `ptxas -v`."""

    name: str
    registers: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    shared_bytes: int = 0
    constant_bytes: int = 0
    barriers: int = 0

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_BARRIERS = re.compile(r"used (\d+) barriers")


def parse_resource_report(report: str) -> dict[str, KernelResources]:
    """Per-kernel resources from the text of `ptxas -v` (stdout and stderr)."""
    kernels: dict[str, dict] = {}
    current: dict | None = None
    for line in report.splitlines():
        if m := _ENTRY.search(line):
            current = kernels.setdefault(m.group(1), {"name": m.group(1)})
            continue
        if current is None:
            continue
        if m := _FRAME.search(line):
            current["stack_frame"], current["spill_stores"], current["spill_loads"] = map(int, m.groups())
        if m := _USED.search(line):
            current["registers"] = int(m.group(1))
        if m := _SMEM.search(line):
            current["shared_bytes"] = int(m.group(1))
        if m := _CMEM.search(line):
            current["constant_bytes"] = int(m.group(1))
        if m := _BARRIERS.search(line):
            current["barriers"] = int(m.group(1))
    return {name: KernelResources(**fields) for name, fields in kernels.items()}


def assemble(ptx: str, arch: str = DEFAULT_ARCH, ptxas: str | None = None) -> dict[str, KernelResources]:
    """Assemble PTX for `arch` with ptxas -v; returns each kernel's resources."""
    ptxas = ptxas or find_ptxas()
    if ptxas is None:
        raise PtxasError("ptxas not found: install the gpu extra (nvidia-cuda-nvcc) or set MLFUSE_PTXAS")
    with tempfile.TemporaryDirectory(prefix="mlfuse-ptxas-") as tmp:
        src = Path(tmp) / "kernels.ptx"
        src.write_text(ptx)
        proc = subprocess.run(
            [ptxas, f"-arch={arch}", "-v", "--warn-on-spills", str(src), "-o", str(Path(tmp) / "kernels.cubin")],
            capture_output=True,
            text=True,
        )
    if proc.returncode != 0:
        raise PtxasError(f"ptxas -arch={arch} failed:\n{proc.stderr.strip()}")
    return parse_resource_report(proc.stdout + proc.stderr)


@dataclass(frozen=True)
class LaunchShape:
    """What the host asks of a kernel: block size, dynamic shared memory, grid, co-residency."""

    threads_per_block: int
    dynamic_shared: int = 0
    blocks: int = 1
    cooperative: bool = False


def check_resources(
    resources: KernelResources, launch: LaunchShape, gpu: GpuTarget | str = DEFAULT_ARCH
) -> list[str]:
    """Broken limits of one kernel (empty when it fits): spills, registers, shared memory, one wave."""
    gpu = target(gpu) if isinstance(gpu, str) else gpu
    problems = []
    if resources.spills:
        problems.append(
            f"{resources.name}: spills registers ({resources.spill_stores} bytes stored, "
            f"{resources.spill_loads} bytes loaded)"
        )
    if resources.registers > gpu.max_registers_per_thread:
        problems.append(f"{resources.name}: {resources.registers} registers per thread")
    if resources.registers * launch.threads_per_block > gpu.registers_per_sm:
        problems.append(
            f"{resources.name}: {resources.registers} registers x {launch.threads_per_block} threads "
            f"exceed the {gpu.registers_per_sm} registers of an SM"
        )
    if resources.shared_bytes > gpu.static_shared_per_block:
        problems.append(
            f"{resources.name}: {resources.shared_bytes} bytes of static shared memory "
            f"(limit {gpu.static_shared_per_block})"
        )
    total_shared = resources.shared_bytes + launch.dynamic_shared
    if total_shared > gpu.shared_per_block_optin:
        problems.append(
            f"{resources.name}: {total_shared} bytes of shared memory per block "
            f"(limit {gpu.shared_per_block_optin})"
        )
    resident = gpu.blocks_per_sm(launch.threads_per_block, resources.registers, total_shared)
    if resident == 0:
        problems.append(f"{resources.name}: not even one block fits on an SM")
    elif launch.cooperative and launch.blocks > resident * gpu.sm_count:
        problems.append(
            f"{resources.name}: grid barrier over {launch.blocks} blocks, but only "
            f"{resident} x {gpu.sm_count} SMs = {resident * gpu.sm_count} can be resident at once"
        )
    return problems
