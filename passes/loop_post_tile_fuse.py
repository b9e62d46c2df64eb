"""loop-post-tile-fuse{max-recompute=2.0 parallel-dims=1 scratch-limit=2097152 remarks=false scope=function}:
fuse producers into the tiles of their consumers (post-tiling fusion, Zhao & Di, MICRO 2020).

For every intermediate read inside a tile band (loop-tile), the nests writing it
are cloned into the band, each restricted to its *extension* for the tile: the
instances writing the tile's upwards-exposed footprint (isl: tile domain .
read relation, then the writer's write relation reversed), widened to a box with
bounds affine in the tile index. Neighbouring tiles' extensions overlap by the
stencil's halo, which each tile recomputes (overlapped tiling). The fused buffer
becomes per-tile scratch (`memref.alloca` in the band, still full-shaped:
loop-storage-reduce shrinks it), and the original nests disappear. It repeats, so
producers of fused producers follow.

scope=group fuses only producers of the band's own planner window group (nests tagged
`fusion_group`) whose results no other group reads.

Not fused (a remark with remarks=true says why): intermediates also read outside
tile bands; producers whose extension would split a reduction across tiles or
that would partition fewer than `parallel-dims` of their parallel dimensions
(the parallelism guard); producers recomputed more than `max-recompute` times;
producers shared by several bands whose per-band extensions intersect (the
multi-live-out rule: no redundant work is added silently); fusions after which
two tiles would touch the same element of a shared buffer, one writing (a
dependence the parallel band would violate); producers that cannot move past
the ops between them and the band; and tile-local buffers over `scratch-limit` bytes.

Before (-p 'loop-tile{sizes=64,256},loop-post-tile-fuse'), a 2-stage blur:
    %bx = memref.alloc() : memref<1002x1000xf32>
    loop.nest "blur_x" ... ins(%x, %x, %x) outs(%bx) maps [(d0, d1) -> (d0, d1), (d0, d1 + 1), (d0, d1 + 2), ...]
    loop.band "blur_y.tiles" upper [16, 4] {
    ^bb0(%t0: index, %t1: index):
      loop.nest "blur_y" syms(%t0, %t1) ... ins(%bx, %bx, %bx) outs(%y) maps [(d0, d1), (d0 + 1, d1), (d0 + 2, d1), ...]
    }
After:
    loop.band "blur_y.tiles" upper [16, 4] {
    ^bb0(%t0: index, %t1: index):
      %s = memref.alloca() : memref<1002x1000xf32>
      loop.nest "blur_x" syms(%t0, %t1)
          lower [()[s0, s1] -> (s0 * 64), ...] upper [()[s0, s1] -> (s0 * 64 + 66, 1002), ...] ... outs(%s)
      loop.nest "blur_y" syms(%t0, %t1) ... ins(%s, %s, %s) outs(%y)
    }
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.diagnostics import Diagnostic
from mlfuse.poly.fusion import FuseOptions, post_tile_fuse
from mlfuse.poly.program import check_scope, functions, print_remark


@dataclass(frozen=True)
class LoopPostTileFusePass(ModulePass):
    name = "loop-post-tile-fuse"

    max_recompute: float | int = 2.0
    parallel_dims: int = 1
    scratch_limit: int = 2 << 20
    remarks: bool = False
    scope: str = "function"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.max_recompute < 1:
            raise Diagnostic(f"{self.name}: max-recompute must be >= 1, got {self.max_recompute}", "<pass-pipeline>:1:1")
        if self.parallel_dims < 0 or self.scratch_limit <= 0:
            raise Diagnostic(f"{self.name}: parallel-dims must be >= 0 and scratch-limit > 0", "<pass-pipeline>:1:1")
        check_scope(self.name, self.scope)
        options = FuseOptions(float(self.max_recompute), self.parallel_dims, self.scratch_limit)
        for fn in functions(op):
            post_tile_fuse(fn, options, print_remark if self.remarks else None, self.scope)
