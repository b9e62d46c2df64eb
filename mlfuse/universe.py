"""Registration of mlfuse's dialects and passes for xDSL's plugin mechanism.

Everything is imported lazily so that `xdsl-opt` pays nothing for mlfuse until it
uses one of its dialects or passes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.universe import Universe


def _dialect(module: str, name: str) -> Callable:
    return lambda: getattr(importlib.import_module(f"mlfuse.dialects.{module}"), name)


def _pass(module: str, name: str) -> Callable:
    return lambda: getattr(importlib.import_module(f"mlfuse.passes.{module}"), name)


def _compile_target(name: str) -> Callable:
    return lambda: getattr(importlib.import_module("mlfuse.target"), name)


MLFUSE_DIALECTS: dict[str, Callable] = {
    "graph": _dialect("graph", "Graph"),
    "fusion": _dialect("fusion", "Fusion"),
    "kernel": _dialect("kernel", "Kernel"),
    "loop": _dialect("loop", "Loop"),
    "stablehlo": _dialect("stablehlo", "StableHLO"),
    "chlo": _dialect("stablehlo", "CHLO"),
}

# flag -> (module in passes/, class name)
PASS_MODULES: dict[str, tuple[str, str]] = {
    "inline": ("inline", "InlinePass"),
    "graph-widen-accumulators": ("graph_widen_accumulators", "GraphWidenAccumulatorsPass"),
    "graph-duplicate-broadcasts": ("graph_duplicate_broadcasts", "GraphDuplicateBroadcastsPass"),
    "convert-graph-to-loop": ("convert_graph_to_loop", "ConvertGraphToLoopPass"),
    "assign-buffers": ("assign_buffers", "AssignBuffersPass"),
    "convert-loop-to-scf": ("convert_loop_to_scf", "ConvertLoopToScfPass"),
    "merge-kernels": ("merge_kernels", "MergeKernelsPass"),
    "expand-math": ("expand_math", "ExpandMathPass"),
    "convert-to-llvm": ("convert_to_llvm", "ConvertToLlvmPass"),
    "convert-kernel-to-nvvm": ("convert_kernel_to_nvvm", "ConvertKernelToNvvm"),
    "gpu-schedule": ("gpu_schedule", "GpuSchedule"),
    "gpu-map-kernels": ("gpu_map_kernels", "GpuMapKernels"),
    "fusion-plan": ("fusion_plan", "FusionPlanPass"),
    "loop-startup-fuse": ("loop_startup_fuse", "LoopStartupFusePass"),
    "loop-tile": ("loop_tile", "LoopTilePass"),
    "loop-post-tile-fuse": ("loop_post_tile_fuse", "LoopPostTileFusePass"),
    "loop-storage-reduce": ("loop_storage_reduce", "LoopStorageReducePass"),
    "loop-coalesce": ("loop_coalesce", "LoopCoalescePass"),
    "loop-forward-copies": ("loop_forward_copies", "LoopForwardCopiesPass"),
    "loop-delinearize": ("loop_delinearize", "LoopDelinearizePass"),
    "loop-gemm-epilogue-fuse": ("loop_gemm_epilogue_fuse", "LoopGemmEpilogueFusePass"),
    "loop-fold-init": ("loop_fold_init", "LoopFoldInitPass"),
    "loop-flatten-windows": ("loop_flatten_windows", "LoopFlattenWindowsPass"),
    "loop-deinterleave-windows": ("loop_deinterleave_windows", "LoopDeinterleaveWindowsPass"),
    "loop-split-wrapped": ("loop_split_wrapped", "LoopSplitWrappedPass"),
    "loop-trim-fills": ("loop_trim_fills", "LoopTrimFillsPass"),
    "loop-tile-after-fuse": ("loop_tile_after_fuse", "LoopTileAfterFusePass"),
    "convert-stablehlo-to-graph": ("convert_stablehlo_to_graph", "ConvertStablehloToGraphPass"),
}

MLFUSE_PASSES: dict[str, Callable] = {
    flag: _pass(module, cls) for flag, (module, cls) in PASS_MODULES.items()
}

# output target name -> factory of an xdsl Target class (`mlfuse-opt -t NAME`)
MLFUSE_TARGETS: dict[str, Callable] = {
    "llvm": lambda: importlib.import_module("mlfuse.backend.targets").LLVMTarget,
    "llvm-opt": lambda: importlib.import_module("mlfuse.backend.targets").LLVMOptTarget,
    "ptx": lambda: importlib.import_module("mlfuse.backend.gpu.ptx").PtxTarget,
}


# compile target name -> factory of an mlfuse.target.Target class (`mlfuse.compile(..., target=NAME)`)
MLFUSE_COMPILE_TARGETS: dict[str, Callable] = {
    "cpu": _compile_target("CpuTarget"),
    "gpu": _compile_target("GpuDeviceTarget"),
    "gpu-sim": _compile_target("GpuSimTarget"),
}

MLFUSE_UNIVERSE = Universe(all_dialects=MLFUSE_DIALECTS, all_passes=MLFUSE_PASSES)
