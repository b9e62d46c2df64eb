"""gpu-map-kernels: fusion groups -> GPU kernels, tensor functions -> host functions of launches.

Each fusion.group (graph ops outside groups count as singleton groups) becomes a
`kernel.func` built for its `gpu.schedule` (chosen here when gpu-schedule did not
run): elementwise groups a vectorised grid-stride loop, row reductions
warp/block/thread-per-row code with shuffle and shared-memory stitching, column
reductions shared-memory tiles, global groups a cooperative kernel with scratch
buffers and grid barriers. The function becomes a host function on
`memref<..., 1>` buffers (results as trailing output arguments) that launches the
kernels in order. See mlfuse/backend/gpu/{host,kernels,mapping}.py.

Before:
    func.func @main(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
      %y = graph.exp %x : tensor<64x32xf32>
      func.return %y : tensor<64x32xf32>
    }
After:
    kernel.func @graph_exp(%x: memref<64x32xf32, 1>, %y: memref<64x32xf32, 1>)
        attributes {block = array<i64: 256, 1, 1>} {
      ... scf.for over this thread's vectors of 4 elements: memref.load, math.exp, memref.store
    }
    func.func @main(%x: memref<64x32xf32, 1>, %y: memref<64x32xf32, 1>) attributes {kernel.results = 1 : i64} {
      kernel.launch @graph_exp(%x, %y) {grid = array<i64: 2, 1, 1>, block = array<i64: 256, 1, 1>,
                                        dynamic_shared = 0 : i64} : ...
      func.return
    }
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.backend.gpu.host import map_module
from mlfuse.backend.gpu.targets import target
from mlfuse.diagnostics import Diagnostic


@dataclass(frozen=True)
class GpuMapKernels(ModulePass):
    name = "gpu-map-kernels"

    arch: str = "sm_90"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            gpu = target(self.arch)
        except ValueError as e:
            raise Diagnostic(str(e), "<pass gpu-map-kernels>") from None
        map_module(op, gpu)
