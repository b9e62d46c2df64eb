"""loop-tile-after-fuse{sizes=32,256 shape=rect remarks=false}: fuse where legal, then tile
(the PPCG/Pluto order), kept to compare with post-tiling fusion.

Fusion first, without knowing the tiles: a producer merges into its consumer only
where the dependence distance is zero (same domain, read at the iteration that
wrote it), which keeps every loop of the fused nest parallel; a stencil
dependence would need shifting, which makes the fused band's tiles depend on
each other and loses the outer parallel loop, so (like PPCG keeping outer
parallelism) it is not fused. Then every nest that writes a buffer is tiled on
its own into a parallel band (same tile sizes as loop-tile). Intermediates keep
their full size: each stencil stage streams through memory once.

Before: blur_x (writes %bx) ; blur_y (reads %bx at rows d0, d0+1, d0+2, writes %y)
After:
    loop.band "blur_x.tiles" upper [16, 4] { loop.nest "blur_x" syms(...) ... outs(%bx) }
    loop.band "blur_y.tiles" upper [16, 4] { loop.nest "blur_y" syms(...) ... ins(%bx, ...) }
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.passes.loop_tile import check_tile_options
from mlfuse.poly.program import functions, print_remark
from mlfuse.poly.startup import startup_fuse
from mlfuse.poly.tiling import tile_function


@dataclass(frozen=True)
class LoopTileAfterFusePass(ModulePass):
    name = "loop-tile-after-fuse"

    sizes: tuple[int, ...] = ()
    shape: str = "rect"
    remarks: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_tile_options(self.name, self.sizes, self.shape)
        for fn in functions(op):
            startup_fuse(fn, forward=False, merge=True)
            tile_function(
                fn,
                self.sizes or None,
                which="all",
                shape=self.shape,
                fuse_aware=False,
                remark=print_remark if self.remarks else lambda *_: None,
            )
