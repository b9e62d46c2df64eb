"""Storage reduction: intermediates used only inside a tile become tile-local scratch.

- A top-level intermediate whose every access is inside one tile band, where each
  tile reads only elements the same tile wrote before, becomes a per-iteration
  scratch buffer (`memref.alloca` in the band body).
- A scratch buffer of a band shrinks to the box its tile touches: with the origin
  O(T) an affine function of the tile index (see footprint.scratch_box), the
  buffer becomes `memref<size...>` and every access `x` becomes `x - O(T)`.
- Intermediates nobody reads or writes any more (only deallocs left) disappear.
"""

from __future__ import annotations

import math

import islpy as isl
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from mlfuse.abi import element_bytes
from mlfuse.dialects import loop
from mlfuse.poly.footprint import scratch_box
from mlfuse.poly.islconv import Names, Unsupported, access_relation, band_tiles, domain
from mlfuse.poly.program import (
    erase_buffer,
    is_intermediate,
    is_tile_band,
    nests_in,
    only_deallocs,
    rebuild_nest,
    top_ancestor,
)


def accessed_set(band: loop.BandOp, buf: SSAValue, names: Names, writes: bool | None = None) -> isl.Set | None:
    """`[T] -> { B[x] }`: the elements of `buf` a tile of `band` touches (only writes or reads
    if `writes` says so); None if it touches none."""
    ctx = band_tiles(band, names)
    result = None
    for nest in nests_in(band):
        n_in = len(nest.ins)
        dom = domain(nest, names).intersect_params(ctx)
        for k, (v, m) in enumerate(zip([*nest.ins, *nest.outs], nest.access_maps)):
            if v is not buf or (writes is not None and (k >= n_in) != writes):
                continue
            img = dom.apply(access_relation(nest, m, names.buffer(buf), names))
            result = img if result is None else result.union(img)
    return result.coalesce() if result is not None else None


def shrunk_shape(band: loop.BandOp, buf: SSAValue, names: Names) -> tuple[list[AffineExpr], list[int]] | None:
    """(origin, shape) of the tile-local box of `buf` in `band`, or None if it cannot shrink."""
    acc = accessed_set(band, buf, names)
    if acc is None:
        return None
    try:
        return scratch_box(acc, [names.param(a) for a in band.block.args], band.sizes)
    except Unsupported:
        return None


def scratch_bytes(band: loop.BandOp, buf: SSAValue, names: Names) -> int:
    """Bytes of `buf`'s tile-local buffer once shrunk (its full size if it cannot shrink)."""
    t = buf.type
    assert isinstance(t, MemRefType)
    found = shrunk_shape(band, buf, names)
    shape = found[1] if found is not None else list(t.get_shape())
    shape = [min(s, full) for s, full in zip(shape, t.get_shape())]
    return math.prod(shape) * element_bytes(t.get_element_type())


def rebase_accesses(band: loop.BandOp, old: SSAValue, new: SSAValue, origin: list[AffineExpr]) -> None:
    """Every access `x` of `old` in the band becomes an access `x - origin(T)` of `new`.
    Origins use symbol k for band iv k; nests get the ivs they lack as extra symbols."""
    args = list(band.block.args)
    for nest in nests_in(band):
        if old not in (*nest.ins, *nest.outs):
            continue
        syms = list(nest.syms) + [a for a in args if a not in nest.syms]
        sym_of = [AffineExpr.symbol(syms.index(a)) for a in args]
        shifts = [o.replace_dims_and_symbols([], sym_of) for o in origin]
        maps = []
        for v, m in zip([*nest.ins, *nest.outs], nest.access_maps):
            if v is old:
                maps.append(AffineMap(m.num_dims, len(syms), tuple(r - s for r, s in zip(m.results, shifts))))
            else:
                maps.append(AffineMap(m.num_dims, len(syms), m.results))
        # bounds keep their maps (extra symbols at the end do not change them)
        lower = [b.data for b in nest.lower.data]
        upper = [b.data for b in nest.upper.data]
        clone = rebuild_nest(nest, syms, lower, upper, maps, buffers={old: new})
        nest.parent_block().insert_op_before(clone, nest)
        nest.detach()
        nest.erase()


def shrink_scratch(band: loop.BandOp, names: Names) -> int:
    """Shrink every scratch buffer of `band` to its tile-local box; returns how many shrank."""
    count = 0
    for alloca in [o for o in band.block.ops if isinstance(o, memref.AllocaOp)]:
        buf = alloca.memref
        t = buf.type
        assert isinstance(t, MemRefType)
        found = shrunk_shape(band, buf, names)
        if found is None:
            continue
        origin, shape = found
        if list(shape) == list(t.get_shape()) and all(o == AffineExpr.constant(0) for o in origin):
            continue
        if math.prod(shape) > math.prod(t.get_shape()):
            continue
        new = memref.AllocaOp.get(t.get_element_type(), shape=shape)
        band.block.insert_op_before(new, alloca)
        rebase_accesses(band, buf, new.memref, origin)
        alloca.detach()
        alloca.erase()
        count += 1
    return count


def reads_covered(band: loop.BandOp, buf: SSAValue, names: Names) -> bool:
    """Does each tile read only elements of `buf` it wrote earlier in the same tile? (An output
    whose current value the body uses counts as a read.)"""
    ctx = band_tiles(band, names)
    written = None
    for nest in nests_in(band):
        dom = domain(nest, names).intersect_params(ctx)
        n_in = len(nest.ins)
        for k, (v, m) in enumerate(zip([*nest.ins, *nest.outs], nest.access_maps)):
            if v is not buf:
                continue
            is_read = k < n_in or bool(nest.block.args[k].uses)
            if is_read:
                img = dom.apply(access_relation(nest, m, names.buffer(buf), names))
                if written is None or not img.is_subset(written):
                    return False
        for v, m in zip(nest.outs, nest.out_maps):
            if v is buf:
                img = dom.apply(access_relation(nest, m, names.buffer(buf), names))
                written = img if written is None else written.union(img)
    return True


def privatize_band_locals(fn: func.FuncOp, names: Names) -> int:
    """Top-level intermediates used only inside one tile band, each tile reading only what it
    wrote, become scratch of that band."""
    block = fn.body.block
    count = 0
    for alloc in [o for o in block.ops if isinstance(o, memref.AllocOp)]:
        buf = alloc.memref
        if not is_intermediate(buf, fn):
            continue
        bands = set()
        ok = True
        for u in buf.uses:
            if isinstance(u.operation, memref.DeallocOp):
                continue
            top = top_ancestor(u.operation, block)
            if not is_tile_band(top) or not isinstance(u.operation, loop.NestOp):
                ok = False
                break
            bands.add(top)
        if not ok or len(bands) != 1:
            continue
        band = bands.pop()
        if not reads_covered(band, buf, names):
            continue
        t = buf.type
        alloca = memref.AllocaOp.get(t.get_element_type(), shape=t.get_shape())
        first = band.block.first_op
        band.block.insert_op_before(alloca, first) if first is not None else band.block.add_op(alloca)
        for nest in nests_in(band):
            for i, v in enumerate(nest.operands):
                if v is buf:
                    nest.operands[i] = alloca.memref
        erase_buffer(buf)
        count += 1
    return count


def remove_dead_buffers(fn: func.FuncOp) -> int:
    count = 0
    for alloc in [o for o in fn.body.block.ops if isinstance(o, memref.AllocOp)]:
        if only_deallocs(alloc.memref):
            erase_buffer(alloc.memref)
            count += 1
    return count


def storage_reduce(fn: func.FuncOp) -> dict[str, int]:
    names = Names()
    stats = {"privatized": privatize_band_locals(fn, names), "shrunk": 0}
    for band in [o for o in fn.body.block.ops if is_tile_band(o)]:
        stats["shrunk"] += shrink_scratch(band, names)
    stats["removed"] = remove_dead_buffers(fn)
    return stats
