"""loop-tile{sizes=32,256 shape=rect fusible-only=false remarks=false scope=function}: tile the live-out spaces.

Each function argument written by top-level loop nests (a live-out) is cut into
tiles of its index space; the writers move into a parallel `loop.band` over the
tile indices, each restricted to the instances that write the tile (bounds
affine in the tile index, a min at the last tile; a reduction keeps its reduced
dimensions whole). Intermediates are not tiled: loop-post-tile-fuse brings them
into the tiles of their consumers.

Options:
  sizes=a,b,...   tile sizes of the trailing dimensions of each live-out (0: that
                  dimension is not tiled); leading dimensions get 1. Without sizes,
                  an analytical default from the L2 size (mlfuse.poly.tiling.default_tile_sizes).
                  A dimension along which no intermediate's footprint moves (a
                  channel that a convolution sums over) is left whole.
  shape=rect      rectangular tiles; a live-out whose writers depend on each other
                  across tiles (an in-place recurrence) is left untiled.
  shape=parallelogram
                  where the writers' dependences (uniform distance vectors, isl) would
                  cross rectangular tiles, tiles are cut along hyperplanes no
                  dependence crosses (skewed: y[i, j] = y[i-1, j-1] + ... gets
                  diagonal strips i - j in [8 T, 8 T + 8), the bounds of j depending
                  on i); without such dependences, rectangles.
  fusible-only    tile only live-outs whose writers read an intermediate that loop nests
                  produce (where loop-post-tile-fuse has something to fuse: where tiling pays)
  remarks=true    say on stderr why a live-out was not tiled.
  scope=group     tile the live-outs of the planner's window groups (nests tagged
                  `fusion_group`: a group's results read outside it) instead of the
                  function's, and count only producers of the same group as fusible
                  (the default pipeline; scope=function: every nest, as for stencil
                  pipelines without a plan).

Before (-p 'loop-tile{sizes=64,256}'):
    func.func @f(%x: memref<1000x1000xf32>, %y: memref<1000x1000xf32>) {
      loop.nest "exp" lower [0, 0] upper [1000, 1000] iterators ["parallel", "parallel"]
          ins(%x : memref<1000x1000xf32>) outs(%y : memref<1000x1000xf32>) maps [#id, #id] {...}
    }
After:
    loop.band "exp.tiles" upper [16, 4] attributes {tile_sizes = array<i64: 64, 256>} {
    ^bb0(%t0: index, %t1: index):
      loop.nest "exp" syms(%t0, %t1)
          lower [affine_map<()[s0, s1] -> ((s0 * 64))>, affine_map<()[s0, s1] -> ((s1 * 256))>]
          upper [affine_map<()[s0, s1] -> (((s0 * 64) + 64), 1000)>, affine_map<()[s0, s1] -> (((s1 * 256) + 256), 1000)>]
          iterators ["parallel", "parallel"] ins(%x : ...) outs(%y : ...)
          maps [affine_map<(d0, d1)[s0, s1] -> (d0, d1)>, ...] {...}
    }
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.diagnostics import Diagnostic
from mlfuse.poly.program import check_scope, functions, print_remark
from mlfuse.poly.tiling import tile_function

SHAPES = ("rect", "parallelogram")


def check_tile_options(pass_name: str, sizes: tuple[int, ...], shape: str) -> None:
    if any(s < 0 for s in sizes):
        raise Diagnostic(f"{pass_name}: tile sizes must be >= 0 (0: not tiled), got {list(sizes)}", "<pass-pipeline>:1:1")
    if shape not in SHAPES:
        raise Diagnostic(f"{pass_name}: shape must be one of {', '.join(SHAPES)}, got '{shape}'", "<pass-pipeline>:1:1")


@dataclass(frozen=True)
class LoopTilePass(ModulePass):
    name = "loop-tile"

    sizes: tuple[int, ...] = ()
    shape: str = "rect"
    fusible_only: bool = False
    remarks: bool = False
    scope: str = "function"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_tile_options(self.name, self.sizes, self.shape)
        check_scope(self.name, self.scope)
        for fn in functions(op):
            tile_function(
                fn,
                self.sizes or None,
                shape=self.shape,
                remark=print_remark if self.remarks else lambda *_: None,
                fusible_only=self.fusible_only,
                scope=self.scope,
            )
