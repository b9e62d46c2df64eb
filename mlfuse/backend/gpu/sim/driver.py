"""The driver: what runs the simulated kernels for a caller.

`SimulatedExecutable` (`compile_gpu_sim`, target "gpu-sim") runs the host
function of a mapped module itself: buffers, `memref.alloc`, `memref.get_global`,
`kernel.memset`, `kernel.launch`, `memref.copy`. `SimulatedDriver` is the driver
interface of mlfuse.backend.gpu.runtime, so that GpuExecutable's own host code
runs with the simulator as its device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue

from mlfuse.backend.gpu.host import RESULTS_ATTR, map_module
from mlfuse.backend.gpu.sim.errors import SimulationError
from mlfuse.backend.gpu.sim.memory import Buffer, poison
from mlfuse.backend.gpu.sim.schedule import Launch, LaunchStats
from mlfuse.backend.gpu.sim.translate import KernelProgram
from mlfuse.backend.gpu.targets import DEFAULT_ARCH, GpuTarget, target
from mlfuse.diagnostics import Diagnostic, location_of
from mlfuse.dialects import graph, kernel


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
