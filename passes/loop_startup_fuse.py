"""loop-startup-fuse{forward=true merge=true scope=function}: minfuse-like start-up fusion before tiling.

scope=group joins only nests of one planner window group (tagged `fusion_group`), so
the fusion plan's kernel boundaries stay where the ILP put them.

- forward: a nest that only copies elements into an intermediate (slice,
  broadcast, transpose; an invertible shifted-permutation write map) disappears;
  its readers read the source through the composed access map. A stencil written
  with slices becomes one nest with shifted reads.
- merge: a producer whose consumer reads its output at the iteration that wrote
  it (same domain and map: dependence distance zero) merges into the consumer,
  one body computing both; the intermediate goes away unless read elsewhere.

Stencil (shifted) dependences and reductions are not fused here; they are what
loop-tile + loop-post-tile-fuse (or loop-tile-after-fuse) decide about.

Before:
    %s = memref.alloc() : memref<8x6xf32>
    loop.nest "slice" lower [0, 0] upper [8, 6] ... ins(%x : memref<8x8xf32>) outs(%s : memref<8x6xf32>)
        maps [affine_map<(d0, d1) -> (d0, d1 + 2)>, affine_map<(d0, d1) -> (d0, d1)>] { yield %in }
    loop.nest "exp" lower [0, 0] upper [8, 6] ... ins(%s : memref<8x6xf32>) outs(%y : memref<8x6xf32>) ...
After:
    loop.nest "exp" lower [0, 0] upper [8, 6] ... ins(%x : memref<8x8xf32>) outs(%y : memref<8x6xf32>)
        maps [affine_map<(d0, d1) -> (d0, d1 + 2)>, affine_map<(d0, d1) -> (d0, d1)>] ...
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.poly.program import check_scope, functions
from mlfuse.poly.startup import startup_fuse


@dataclass(frozen=True)
class LoopStartupFusePass(ModulePass):
    name = "loop-startup-fuse"

    forward: bool = True
    merge: bool = True
    scope: str = "function"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_scope(self.name, self.scope)
        for fn in functions(op):
            startup_fuse(fn, self.forward, self.merge, self.scope)
