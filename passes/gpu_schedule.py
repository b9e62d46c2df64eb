"""gpu-schedule: choose how every fusion group runs on the GPU (adaptive thread mapping).

Graph ops outside groups are first wrapped into groups of kind "single", and
non-splat constants inside groups become group inputs. Each group then gets a
`gpu.schedule` dictionary: its mapping (elementwise | row | column | global), the
variant (warp-per-row, block-per-row, packed rows, split rows...), block and grid
shapes, how reduction results are stitched (register | warp | block | global),
where row data read twice is kept (registers | shared | dynamic_shared | reload),
and the reason. gpu-map-kernels follows it; see mlfuse/backend/gpu/mapping.py.

Before:
    %r = fusion.group "softmax" kind = "stitch" (%x) : (tensor<1024x256xf32>) -> tensor<1024x256xf32> {...}
After:
    %r = fusion.group "softmax" kind = "stitch" (%x) {gpu.schedule = {mapping = "row", variant = "warp",
        block = [256, 1, 1], grid = [128, 1, 1], rows = 1024, cols = 256, rows_per_block = 8,
        threads_per_row = 32, cache = "registers", stitch = ["warp", "warp"], reason = "..."}} ...
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.backend.gpu.host import annotate
from mlfuse.backend.gpu.targets import target
from mlfuse.diagnostics import Diagnostic


@dataclass(frozen=True)
class GpuSchedule(ModulePass):
    name = "gpu-schedule"

    arch: str = "sm_90"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            gpu = target(self.arch)
        except ValueError as e:
            raise Diagnostic(str(e), "<pass gpu-schedule>") from None
        annotate(op, gpu)
