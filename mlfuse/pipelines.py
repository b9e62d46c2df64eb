"""Named pipelines, readable top to bottom: what `mlfuse.compile` runs.

Each entry is a pass spec as `mlfuse-opt -p` takes it, so any pipeline can be
replayed (and bisected) on the command line.
"""

from __future__ import annotations

GRAPH_CLEANUP = ["canonicalize", "cse"]


def cpu_pipeline(fuse: bool = True, parallel: bool = True, planner: str = "ilp") -> list[str]:
    """graph -> fused groups -> loop nests -> scf -> llvm, for the host CPU."""
    passes = list(GRAPH_CLEANUP)
    if fuse and _has_pass("fusion-plan"):
        passes.append(f"fusion-plan{{planner={planner} target=cpu summary=false}}")
    passes += [
        "convert-graph-to-loop",
        "assign-buffers",
        f"convert-loop-to-scf{{parallel={'true' if parallel else 'false'}}}",
        "expand-math",
        "convert-to-llvm",
    ]
    return passes


def _has_pass(flag: str) -> bool:
    from mlfuse.universe import MLFUSE_PASSES

    return flag in MLFUSE_PASSES
