"""Fills that write only what the next writer of their buffer leaves (loop-trim-fills).

A pad is lowered as a fill of the whole padded buffer, then a copy of the interior
(graph-to-loop's pad_spatial for a window nest, lower_pad): post-tiling fusion moves
both into the tiles of the nest that reads them, where they stay a pair over a
tile-local buffer. The fill's interior is overwritten before anything reads it, so
every element of it is written twice: MobileNetV3-small's depthwise tiles called
memset 1300 times a call, 3.8 MB in all, for borders of about a tenth of that.

Here a fill, a nest of parallel dimensions that yields one constant into one buffer,
writes only what the next op touching that buffer, a nest of parallel dimensions that
writes it without reading it, leaves: the isl set difference of the two writes'
images, split into disjoint boxes, one fill nest each (the same body, the same
symbols: a tile's fill stays in its tile). When the writer covers the whole fill, the
fill goes. Left as it is where the difference is not a few exact boxes (more than
MAX_PIECES, or bounds that need the writer's symbols), or where either access is not
affine (a view, a data-dependent read): the whole fill is always correct.
"""

from __future__ import annotations

import islpy as isl
from xdsl.dialects import func
from xdsl.ir import Operation
from xdsl.ir.affine import AffineMap

from mlfuse.dialects import loop
from mlfuse.poly.init_folding import yielded_constant
from mlfuse.poly.islconv import (
    Names,
    Unsupported,
    access_relation,
    band_tiles,
    bounds_exact,
    box_bounds,
    domain,
)
from mlfuse.poly.program import adjacent_user, nest_blocks, rebuild_nest, with_symbols

# More boxes than this (a fill around a writer of a skewed or strided shape) cost more
# loop overhead than the elements they save: the fill stays whole.
MAX_PIECES = 8


def trim_fills(fn: func.FuncOp) -> int:
    """Trim every fill of `fn` to what its next writer leaves; how many changed."""
    changed = 0
    for block in nest_blocks(fn):
        for op in list(block.ops):
            if isinstance(op, loop.NestOp) and is_constant_fill(op):
                changed += trim(op)
    return changed


def is_constant_fill(nest: loop.NestOp) -> bool:
    """No inputs, one output, every dimension parallel, one constant yielded."""
    return (
        not nest.ins
        and len(nest.outs) == 1
        and all(kind == loop.PARALLEL for kind in nest.iterator_kinds)
        and yielded_constant(nest.block) is not None
    )


def next_writer(fill: loop.NestOp) -> tuple[loop.NestOp, int] | None:
    """The next op of the fill's block that touches its buffer (or a view of it), and the
    output that writes the buffer, where that op is a nest of parallel dimensions writing
    the buffer itself (no view) without reading it; else None."""
    buffer = fill.outs[0]
    root = loop.view_root(buffer)
    op = adjacent_user(fill, root)
    if not isinstance(op, loop.NestOp) or any(kind != loop.PARALLEL for kind in op.iterator_kinds):
        return None
    if any(loop.view_root(v) is root for v in op.ins) or buffer not in op.outs:
        return None
    if any(loop.view_root(v) is root and v is not buffer for v in op.outs):
        return None
    return op, list(op.outs).index(buffer)


def trim(fill: loop.NestOp) -> int:
    """Replace `fill` by fills of what its next writer leaves (none if nothing); 1 if it changed."""
    found = next_writer(fill)
    if found is None:
        return 0
    writer, k = found
    names = Names()
    try:
        rest = left_by(fill, writer, k, names)
        if rest is None:
            return 0
        pieces = boxes(rest, fill, names)
    except Unsupported:
        return 0
    if pieces is None:
        return 0
    block = fill.parent_block()
    assert block is not None
    rank = len(fill.outs[0].type.get_shape())  # type: ignore[attr-defined]
    nsyms = len(fill.syms)
    new = []
    for bounds in pieces:
        lower, upper = zip(*(b.maps(nsyms) for b in bounds))
        new.append(rebuild_nest(fill, list(fill.syms), lower, upper, [with_symbols(AffineMap.identity(rank), nsyms)], iterators=[loop.PARALLEL] * rank))
    block.insert_ops_before(new, fill)
    fill.detach()
    fill.erase()
    return 1


def left_by(fill: loop.NestOp, writer: loop.NestOp, k: int, names: Names) -> isl.Set | None:
    """The elements the fill writes and the writer does not, under the bands' context;
    None where the writer leaves all of them (nothing to trim)."""
    buffer = names.buffer(fill.outs[0])
    filled = domain(fill, names).apply(access_relation(fill, fill.out_maps[0], buffer, names))
    written = domain(writer, names).apply(access_relation(writer, writer.out_maps[k], buffer, names))
    context = bands_context(fill, names)
    if context is not None:
        filled, written = filled.intersect_params(context), written.intersect_params(context)
    rest = filled.subtract(written).coalesce()
    if rest.is_equal(filled):
        return None
    return rest if context is None else rest.gist_params(context)  # bounds without the tile ranges


def bands_context(op: Operation, names: Names) -> isl.Set | None:
    """The tile indices the bands around `op` run: `[T...] -> { : 0 <= T < sizes }`."""
    context = None
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, loop.BandOp):
            here = band_tiles(parent, names)
            context = here if context is None else context.intersect(here)
        parent = parent.parent_op()
    return context


def boxes(rest: isl.Set, fill: loop.NestOp, names: Names) -> list[list] | None:
    """`rest` as disjoint boxes over the fill's symbols (one `Bounds` per buffer dimension
    each); [] for an empty set; None where it is not a few exact boxes."""
    if rest.is_empty():
        return []
    param_pos = {names.param(s): i for i, s in enumerate(fill.syms)}
    params = sorted(param_pos, key=param_pos.__getitem__)
    pieces = rest.make_disjoint().get_basic_sets()
    if len(pieces) > MAX_PIECES:
        return None
    result = []
    for piece in sorted(pieces, key=first_point):
        s = isl.Set.from_basic_set(piece)
        bounds = box_bounds(s, param_pos)
        if not bounds_exact(s, bounds, params):
            return None
        result.append(bounds)
    return result


def first_point(piece: isl.BasicSet) -> tuple[int, ...]:
    """The lexicographically first point of a box (the first tile's): memory order."""
    point = piece.lexmin().sample_point()
    return tuple(int(point.get_coordinate_val(isl.dim_type.set, k).to_python()) for k in range(piece.dim(isl.dim_type.set)))
