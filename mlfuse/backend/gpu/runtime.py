"""Running mapped modules on a CUDA GPU, through pycuda (or cuda-python's driver bindings).

Neither is imported until a GPU executable is made, so CPU users never need them.
pycuda ships as source only and builds against CUDA headers and libcuda: on a
machine without a GPU it is not installed, and `GpuUnavailable` says so.

    exe = compile_gpu(text)            # gpu-map-kernels + PTX for the device's arch
    (y,) = exe(x_numpy)                # numpy in -> numpy out (copies both ways)
    (y_dev,) = exe(x_cuda)             # device arrays in (torch/cupy, GPUArray, anything with
                                       # __cuda_array_interface__) -> DeviceArrays out
    seconds = exe.time(x_cuda)         # CUDA events around all launches

Intermediate buffers are allocated at the first call and reused; cooperative
kernels are launched with at most one wave of blocks (the driver's occupancy
query where the binding has one).
"""

from __future__ import annotations

import atexit
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import ModuleOp

from mlfuse.backend.gpu.host import RESULTS_ATTR, map_module
from mlfuse.backend.gpu.ptx import module_to_ptx
from mlfuse.backend.gpu.targets import DEFAULT_ARCH, TARGETS, target
from mlfuse.dialects import graph, kernel


class GpuUnavailable(RuntimeError):
    """No CUDA driver binding (pycuda or cuda-python) or no GPU."""


def _load_driver():
    """pycuda if it imports, else cuda-python; MLFUSE_GPU_DRIVER=pycuda|cuda-python picks one."""
    choice = os.environ.get("MLFUSE_GPU_DRIVER", "")
    if choice in ("", "pycuda"):
        try:
            import pycuda.driver as cuda  # pyright: ignore[reportMissingImports]  (optional)

            return PycudaDriver(cuda)
        except Exception as e:  # not installed, or built against another CUDA
            if choice == "pycuda":
                raise GpuUnavailable(f"pycuda does not load: {e}") from None
    try:
        from cuda.bindings import driver as cu  # pyright: ignore[reportMissingImports]  (cuda-python >= 12.6)
    except ImportError:
        try:
            from cuda import cuda as cu  # pyright: ignore[reportMissingImports]  (older cuda-python)
        except ImportError:
            raise GpuUnavailable(
                "no CUDA driver binding: install pycuda (needs CUDA headers and libcuda to build) "
                "or cuda-python"
            ) from None
    return CudaPythonDriver(cu)


class PycudaDriver:
    name = "pycuda"

    def __init__(self, cuda):
        self.cuda = cuda
        cuda.init()
        dev = cuda.Device(0)
        # the primary context, which the CUDA runtime (and torch) use too
        self.context = dev.retain_primary_context()
        self.context.push()
        atexit.register(self.context.pop)  # pycuda aborts at exit if a context is left on its stack
        major, minor = dev.compute_capability()
        self.arch = f"sm_{major}{minor}"
        self.sm_count = dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)

    def load(self, ptx: str):
        return self.cuda.module_from_buffer(ptx.encode())

    def function(self, module, name: str, dynamic_shared: int):
        fn = module.get_function(name)
        if dynamic_shared > 48 * 1024:
            fn.set_attribute(self.cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_shared)
        return fn

    def registers(self, fn) -> int:
        return fn.get_attribute(self.cuda.function_attribute.NUM_REGS)

    def static_shared(self, fn) -> int:
        return fn.get_attribute(self.cuda.function_attribute.SHARED_SIZE_BYTES)

    def blocks_per_sm(self, fn, threads: int, dynamic_shared: int) -> int | None:
        return None  # pycuda has no occupancy query: the estimate of targets.py is used

    def alloc(self, nbytes: int) -> int:
        return self.cuda.mem_alloc(max(1, nbytes))

    def pointer(self, allocation) -> int:
        return int(allocation)

    def upload(self, dst: int, array: np.ndarray) -> None:
        self.cuda.memcpy_htod(dst, np.ascontiguousarray(array))

    def download(self, array: np.ndarray, src: int) -> None:
        self.cuda.memcpy_dtoh(array, src)

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        self.cuda.memcpy_dtod(dst, src, nbytes)

    def zero(self, dst: int, nbytes: int) -> None:
        self.cuda.memset_d8(dst, 0, nbytes)

    def launch(self, fn, grid, block, dynamic_shared: int, pointers: list[int]) -> None:
        args = [np.uintp(p) for p in pointers]
        fn(*args, grid=tuple(grid), block=tuple(block), shared=dynamic_shared)

    def event(self):
        return self.cuda.Event()

    def record(self, event) -> None:
        event.record()

    def elapsed(self, start, end) -> float:
        end.synchronize()
        return start.time_till(end) / 1e3

    def synchronize(self) -> None:
        self.cuda.Context.synchronize()


class CudaPythonDriver:
    """The same interface over cuda-python's driver API (a second loader, no build needed)."""

    name = "cuda-python"

    def __init__(self, cu):
        self.cu = cu
        self.check(cu.cuInit(0))
        dev = self.check(cu.cuDeviceGet(0))
        self.context = self.check(cu.cuDevicePrimaryCtxRetain(dev))
        self.check(cu.cuCtxSetCurrent(self.context))
        attr = cu.CUdevice_attribute
        major = self.check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
        minor = self.check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
        self.arch = f"sm_{major}{minor}"
        self.sm_count = self.check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev))

    def check(self, result):
        err, *rest = result if isinstance(result, tuple) else (result,)
        if int(err) != 0:
            raise RuntimeError(f"CUDA driver error {err}")
        return rest[0] if len(rest) == 1 else (rest or None)

    def load(self, ptx: str):
        image = np.frombuffer(ptx.encode() + b"\0", dtype=np.uint8)  # a NUL-terminated image, by address
        return self.check(self.cu.cuModuleLoadData(image.ctypes.data))

    def function(self, module, name: str, dynamic_shared: int):
        fn = self.check(self.cu.cuModuleGetFunction(module, name.encode()))
        if dynamic_shared > 48 * 1024:
            attr = self.cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self.check(self.cu.cuFuncSetAttribute(fn, attr, dynamic_shared))
        return fn

    def registers(self, fn) -> int:
        return self.check(self.cu.cuFuncGetAttribute(self.cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, fn))

    def static_shared(self, fn) -> int:
        attr = self.cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
        return self.check(self.cu.cuFuncGetAttribute(attr, fn))

    def blocks_per_sm(self, fn, threads: int, dynamic_shared: int) -> int | None:
        return self.check(self.cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, threads, dynamic_shared))

    def alloc(self, nbytes: int):
        return self.check(self.cu.cuMemAlloc(max(1, nbytes)))

    def pointer(self, allocation) -> int:
        return int(allocation)

    def upload(self, dst: int, array: np.ndarray) -> None:
        a = np.ascontiguousarray(array)
        self.check(self.cu.cuMemcpyHtoD(dst, a.ctypes.data, a.nbytes))

    def download(self, array: np.ndarray, src: int) -> None:
        self.check(self.cu.cuMemcpyDtoH(array.ctypes.data, src, array.nbytes))

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        self.check(self.cu.cuMemcpyDtoD(dst, src, nbytes))

    def zero(self, dst: int, nbytes: int) -> None:
        self.check(self.cu.cuMemsetD8(dst, 0, nbytes))

    def launch(self, fn, grid, block, dynamic_shared: int, pointers: list[int]) -> None:
        import ctypes

        values = [ctypes.c_void_p(p) for p in pointers]
        params = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        self.check(self.cu.cuLaunchKernel(fn, *grid, *block, dynamic_shared, 0, ctypes.addressof(params), 0))

    def event(self):
        return self.check(self.cu.cuEventCreate(0))

    def record(self, event) -> None:
        self.check(self.cu.cuEventRecord(event, 0))

    def elapsed(self, start, end) -> float:
        self.check(self.cu.cuEventSynchronize(end))
        return self.check(self.cu.cuEventElapsedTime(start, end)) / 1e3

    def synchronize(self) -> None:
        self.check(self.cu.cuCtxSynchronize())


def device_pointer(array: Any) -> int | None:
    """The device address of a device array (GPUArray, or __cuda_array_interface__), else None."""
    if hasattr(array, "__cuda_array_interface__"):
        return int(array.__cuda_array_interface__["data"][0])
    if hasattr(array, "gpudata"):  # pycuda GPUArray
        return int(array.gpudata)
    return None


def check_device_array(array: Any, pointer: int, dtype: np.dtype) -> None:
    """Kernels take dense row-major buffers of their element type, 16-byte aligned (vector loads)."""
    interface = getattr(array, "__cuda_array_interface__", None)
    if interface is not None:
        if np.dtype(interface["typestr"]) != dtype:
            raise ValueError(f"device array of type {np.dtype(interface['typestr'])} where {dtype} is expected")
        strides = interface.get("strides")
        if strides is not None and tuple(strides) != row_major_strides(tuple(interface["shape"]), dtype.itemsize):
            raise ValueError("device arrays must be contiguous (row-major)")
    if pointer % 16:
        raise ValueError(f"device array at {pointer:#x} is not 16-byte aligned")


def row_major_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    return tuple(math.prod(shape[d + 1 :]) * itemsize for d in range(len(shape)))


@dataclass
class DeviceArray:
    """A result left on the device: `torch.as_tensor(a, device="cuda")`, cupy and numba take it as it is."""

    shape: tuple[int, ...]
    dtype: np.dtype
    pointer: int
    allocation: Any  # keeps the memory alive

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": np.dtype(self.dtype).str, "data": (self.pointer, False), "version": 3}


class GpuExecutable:
    """A mapped module, loaded on the GPU; call it like the tensor function it came from."""

    def __init__(self, module: ModuleOp, entry: str = "main", driver=None):
        self.driver = driver or _load_driver()
        arch = self.driver.arch if self.driver.arch in TARGETS else DEFAULT_ARCH
        self.arch = arch
        self.ptx = module_to_ptx(module, arch)
        self.cu_module = self.driver.load(self.ptx)
        self.kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, kernel.KernelFuncOp)}
        hosts = [op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == entry]
        if not hosts:
            raise ValueError(f"no host function @{entry}: run gpu-map-kernels first")
        self.host = hosts[0]
        self.globals = {op.sym_name.data: op for op in module.ops if isinstance(op, memref.GlobalOp)}
        self.n_results = self.host.attributes[RESULTS_ATTR].value.data  # type: ignore[union-attr]
        types = self.host.function_type.inputs.data
        self.input_types = types[: len(types) - self.n_results]
        self.result_types = types[len(types) - self.n_results :]
        self.functions = {
            name: self.driver.function(self.cu_module, name, k.dynamic_shared_bytes) for name, k in self.kernels.items()
        }
        self.wave = {name: self.one_wave(name) for name, k in self.kernels.items() if k.cooperative is not None}
        self.scratch: dict = {}

    def one_wave(self, name: str) -> int:
        """Blocks of a kernel resident at once on the device: the grid a grid barrier allows."""
        k = self.kernels[name]
        fn = self.functions[name]
        gpu = target(self.arch)
        per_sm = gpu.blocks_per_sm(
            k.threads_per_block, self.driver.registers(fn), self.driver.static_shared(fn) + k.dynamic_shared_bytes
        )
        measured = self.driver.blocks_per_sm(fn, k.threads_per_block, k.dynamic_shared_bytes)
        if measured is not None:
            per_sm = min(per_sm, measured)
        if per_sm < 1:
            raise RuntimeError(f"kernel {name}: not one block fits on an SM, a grid barrier would deadlock")
        return per_sm * self.driver.sm_count

    def _run(self, pointers: list[int], events=None) -> None:
        d = self.driver
        env: dict = dict(zip(self.host.body.block.args, pointers))
        if events:
            d.record(events[0])
        for op in self.host.body.block.ops:
            match op:
                case memref.AllocOp():
                    env[op.memref] = self._scratch(op)
                case memref.GetGlobalOp():
                    env[op.memref] = self._constant(op.name_.root_reference.data)
                case kernel.MemsetOp():
                    d.zero(env[op.buffer], kernel.memref_bytes(op.buffer.type))
                case kernel.LaunchOp():
                    name = op.kernel.string_value()
                    grid = op.grid_size
                    if self.kernels[name].cooperative is not None:
                        # grid-stride loops take any grid: keep it to one wave so the grid barrier cannot deadlock
                        grid = (min(grid[0], self.wave[name]), 1, 1)
                    d.launch(self.functions[name], grid, op.block_size, op.dynamic_shared.value.data,
                             [env[a] for a in op.args])
                case memref.CopyOp():
                    d.copy(env[op.destination], env[op.source], kernel.memref_bytes(op.source.type))
                case _:
                    pass
        if events:
            d.record(events[1])
        d.synchronize()

    def _scratch(self, op: memref.AllocOp) -> int:
        """An intermediate buffer: allocated at the first call, reused by later ones (calls run in order)."""
        if op not in self.scratch:
            buf = self.driver.alloc(kernel.memref_bytes(op.memref.type))
            self.scratch[op] = (buf, self.driver.pointer(buf))
        return self.scratch[op][1]

    _constants: dict

    def _constant(self, name: str) -> int:
        if not hasattr(self, "_constants"):
            self._constants = {}
        if name not in self._constants:
            g = self.globals[name]
            value = graph.dense_to_numpy(g.initial_value)  # type: ignore[arg-type]
            t = g.type
            array = np.broadcast_to(value, t.get_shape()).astype(graph.numpy_dtype(t.get_element_type()))
            buf = self.driver.alloc(array.nbytes)
            self.driver.upload(self.driver.pointer(buf), array)
            self._constants[name] = (buf, self.driver.pointer(buf))
        return self._constants[name][1]

    def _prepare(self, arrays):
        if len(arrays) != len(self.input_types):
            raise ValueError(f"expected {len(self.input_types)} arguments, got {len(arrays)}")
        on_device = all(device_pointer(a) is not None for a in arrays)
        keep = []
        pointers = []
        for a, t in zip(arrays, self.input_types):
            dtype = graph.numpy_dtype(t.get_element_type())
            if tuple(a.shape) != tuple(t.get_shape()):
                raise ValueError(f"argument of shape {tuple(a.shape)} where {tuple(t.get_shape())} is expected")
            ptr = device_pointer(a)
            if ptr is not None:
                check_device_array(a, ptr, dtype)
            else:
                host = np.ascontiguousarray(a, dtype=dtype)
                buf = self.driver.alloc(host.nbytes)
                self.driver.upload(self.driver.pointer(buf), host)
                keep.append(buf)
                ptr = self.driver.pointer(buf)
            pointers.append(ptr)
        outputs = []
        for t in self.result_types:
            nbytes = math.prod(t.get_shape()) * graph.numpy_dtype(t.get_element_type()).itemsize
            buf = self.driver.alloc(nbytes)
            keep.append(buf)
            outputs.append((buf, self.driver.pointer(buf), t))
            pointers.append(self.driver.pointer(buf))
        return on_device, pointers, outputs, keep

    def _results(self, on_device: bool, outputs):
        results = []
        for buf, ptr, t in outputs:
            dtype = graph.numpy_dtype(t.get_element_type())
            shape = tuple(t.get_shape())
            if on_device:
                results.append(DeviceArray(shape, dtype, ptr, buf))
            else:
                host = np.empty(shape, dtype)
                self.driver.download(host, ptr)
                results.append(host)
        return tuple(results)

    def __call__(self, *arrays):
        on_device, pointers, outputs, keep = self._prepare(arrays)
        self._run(pointers)
        return self._results(on_device, outputs)

    def time(self, *arrays, repeat: int = 20) -> float:
        """Median seconds of one call's launches (inputs already on the device), by CUDA events."""
        _, pointers, outputs, keep = self._prepare(arrays)
        self._run(pointers)  # warm-up
        samples = []
        for _ in range(repeat):
            events = (self.driver.event(), self.driver.event())
            self._run(pointers, events)
            samples.append(self.driver.elapsed(*events))
        return float(np.median(samples))


def compile_gpu(source: str | ModuleOp, entry: str = "main", driver=None) -> GpuExecutable:
    """mlfuse.compile(src, target="gpu"): map to kernels and load them on the GPU.

    MLFUSE_GPU_DRIVER=simulator runs them on the CPU simulator instead (slow: small shapes).
    """
    from mlfuse.ir import parse_module

    module = parse_module(source) if isinstance(source, str) else source.clone()
    if not any(isinstance(op, kernel.KernelFuncOp) for op in module.ops):
        map_module(module, target(DEFAULT_ARCH))
    if driver is None and os.environ.get("MLFUSE_GPU_DRIVER") == "simulator":
        from mlfuse.backend.gpu.simulator import SimulatedDriver

        driver = SimulatedDriver(module)
    return GpuExecutable(module, entry, driver)
