"""Compile targets: what `mlfuse.compile(..., target=NAME)` and `mlfuse-run --target NAME` run.

A target is the one place that knows a backend's three answers:

    default_pipeline(**options)  the pass specs it runs (replayable with `mlfuse-opt -p`)
    structural_problem(ops)      why a set of graph ops cannot be one of its kernels
                                 (asked by the fusion planner, so it plans only what the
                                 backend can emit), or None
    compile(module, entry, ...)  run the pipeline and load the result as a callable

Targets are registered by name in mlfuse.universe.MLFUSE_COMPILE_TARGETS (lazy
factories, like the dialects and passes there) and found with `get_target(name)`.
Not to be confused with xDSL's output targets (`mlfuse-opt -t llvm|ptx`,
mlfuse.backend.targets) or the GPU architectures (mlfuse.backend.gpu.targets).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from mlfuse import pipelines
from mlfuse.diagnostics import Diagnostic


class Target:
    """A compile target. Every target takes the same options and ignores those that
    do not apply to it (the GPU has no `parallel` or `fast_math` switch):

        fuse       plan fusion groups (False: every op its own kernel)
        parallel   CPU: run kernels on the thread team
        planner    the fusion planner (ilp, greedy, xla, tvm, none)
        fast_math  CPU: no NaN/inf/signed-zero guarantees
    """

    name: str = ""

    def default_pipeline(
        self, fuse: bool = True, parallel: bool = True, planner: str = "ilp", fast_math: bool = False
    ) -> list[str]:
        """The pass specs this target runs on a graph module."""
        raise NotImplementedError

    def pipeline_for(self, module: ModuleOp, **options: Any) -> list[str]:
        """The pass specs for this particular module: the default pipeline unless a
        target picks another one by what the module holds."""
        return self.default_pipeline(**options)

    def structural_problem(self, ops: Sequence[Operation]) -> str | None:
        """Why `ops` cannot be one kernel of this target, from their structure alone; None if they can."""
        return None

    def compile(self, module: ModuleOp, entry: str = "main", passes: Sequence[str] | None = None, **options: Any):
        """Run `passes` (default: pipeline_for(module, **options)) on a copy of a verified
        graph module and load its function `entry` as a callable on numpy arrays."""
        raise NotImplementedError


class CpuTarget(Target):
    """The host CPU: stitched loop nests -> LLVM -> JIT (mlfuse.backend.cpu), cached."""

    name = "cpu"

    def default_pipeline(
        self, fuse: bool = True, parallel: bool = True, planner: str = "ilp", fast_math: bool = False
    ) -> list[str]:
        return pipelines.cpu_pipeline(fuse, parallel, planner, fast_math=fast_math)

    def pipeline_for(
        self, module: ModuleOp, fuse: bool = True, parallel: bool = True, planner: str = "ilp", fast_math: bool = False
    ) -> list[str]:
        # one pipeline for every graph: the planner's window groups are post-tiled in it
        return self.default_pipeline(fuse, parallel, planner, fast_math)

    def structural_problem(self, ops: Sequence[Operation]) -> str | None:
        from mlfuse.conversion.group_to_loop import structural_problem

        return structural_problem(ops)

    def compile(self, module: ModuleOp, entry: str = "main", passes: Sequence[str] | None = None, **options: Any):
        from mlfuse.api import load_cpu

        steps = list(passes) if passes is not None else self.pipeline_for(module, **options)
        return load_cpu(module, entry, steps)


@functools.cache
def gpu_codegen_ops() -> tuple[type, ...]:
    """The graph ops the GPU kernel generator computes (mlfuse.backend.gpu.scalar, Scalars._compute)."""
    from mlfuse.backend.gpu.scalar import ELEMENTWISE_OPS
    from mlfuse.dialects import graph

    return (
        *ELEMENTWISE_OPS,
        graph.ConstantOp,
        graph.BroadcastOp,
        graph.TransposeOp,
        graph.ReshapeOp,
        graph.SliceOp,
        graph.PadOp,
        graph.ConcatOp,
        graph.ReduceOp,
        graph.MatmulOp,
        graph.BatchMatmulOp,
    )


class GpuDeviceTarget(Target):
    """A CUDA device: groups planned for the GPU, mapped to kernels (gpu-map-kernels),
    PTX loaded by the runtime (mlfuse.backend.gpu.runtime; pycuda or cuda-python)."""

    name = "gpu"

    def default_pipeline(
        self, fuse: bool = True, parallel: bool = True, planner: str = "ilp", fast_math: bool = False
    ) -> list[str]:
        return pipelines.gpu_pipeline(planner, fuse)

    def graph_pipeline(
        self, fuse: bool = True, parallel: bool = True, planner: str = "ilp", fast_math: bool = False
    ) -> list[str]:
        """The default pipeline up to the fusion groups: what compile runs before loading."""
        return pipelines.gpu_graph_pipeline(planner, fuse)

    def structural_problem(self, ops: Sequence[Operation]) -> str | None:
        from mlfuse.backend.gpu.window import window_group_problem, window_ops

        # a conv or pool takes the direct window mapping, with per-element ops around it
        if window_ops(ops):
            return window_group_problem(ops)
        # every other mapping (elementwise, row, column, global) stitches any mix of these;
        # what is left is ops the kernel generator has no code for at all
        supported = gpu_codegen_ops()
        for op in ops:
            if not isinstance(op, supported):
                return f"'{op.name}' has no GPU kernel code"
        return None

    def compile(self, module: ModuleOp, entry: str = "main", passes: Sequence[str] | None = None, **options: Any):
        """The graph part of the pipeline here; the loader maps the groups to kernels
        (unless `passes` did already) for the device it loads them on."""
        from mlfuse.backend.gpu.runtime import GpuUnavailable

        planned = self._planned(module, entry, passes, options)
        try:
            return self._load(planned, entry)
        except GpuUnavailable as e:
            raise Diagnostic(f"target '{self.name}' needs a CUDA device: {e} (target 'gpu-sim' simulates one)") from None

    def _planned(self, module: ModuleOp, entry: str, passes: Sequence[str] | None, options: dict) -> ModuleOp:
        from mlfuse.api import run_pipeline
        from mlfuse.inline import publish_entry
        from mlfuse.ir import find_function

        find_function(module, entry)  # a missing entry is the input's fault, said before any work
        if passes is None:
            passes = self.graph_pipeline(**options)
        planned = module.clone()
        publish_entry(planned, entry)
        return run_pipeline(planned, passes)

    def _load(self, module: ModuleOp, entry: str):
        from mlfuse.backend.gpu.runtime import compile_gpu

        return compile_gpu(module, entry=entry)


class GpuSimTarget(GpuDeviceTarget):
    """The GPU target's kernels run by the CPU simulator (mlfuse.backend.gpu.simulator):
    slow, for small shapes; it catches races, missing barriers and out-of-bounds accesses."""

    name = "gpu-sim"

    def _load(self, module: ModuleOp, entry: str):
        from mlfuse.backend.gpu.simulator import compile_gpu_sim

        return compile_gpu_sim(module, entry=entry)


_INSTANCES: dict[str, Target] = {}


def target_names() -> list[str]:
    from mlfuse.universe import MLFUSE_COMPILE_TARGETS

    return list(MLFUSE_COMPILE_TARGETS)


def get_target(name: str) -> Target:
    """The registered compile target `name` (one instance per name, made on first use)."""
    from mlfuse.universe import MLFUSE_COMPILE_TARGETS

    if not isinstance(name, str) or name not in MLFUSE_COMPILE_TARGETS:
        raise Diagnostic(f"unknown target '{name}' (known targets: {', '.join(target_names())})")
    if name not in _INSTANCES:
        _INSTANCES[name] = MLFUSE_COMPILE_TARGETS[name]()()
    return _INSTANCES[name]
