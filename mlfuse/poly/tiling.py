"""Tiling the live-out spaces of a function into parallel `loop.band`s.

A live-out buffer (a function argument written by top-level nests) is cut into
rectangular tiles of its own index space; the band runs over tile indices and
holds every writer of the buffer restricted to the instances that write the tile,
`{ i in D : write(i) in tile(T) }` (a reduction keeps its reduced dimensions
whole). Bounds are affine in the tile indices, with a min at the last tile:

    loop.band "blur_y.tiles" upper [16, 4] attributes {tile_sizes = array<i64: 64, 256>} {
    ^bb0(%t0: index, %t1: index):
      loop.nest "blur_y" syms(%t0, %t1)
          lower [affine_map<()[s0, s1] -> (s0 * 64)>, affine_map<()[s0, s1] -> (s1 * 256)>]
          upper [affine_map<()[s0, s1] -> (s0 * 64 + 64, 1000)>, ...] ...
    }

With shape="parallelogram", writers that depend on each other across elements (an
in-place recurrence) are tiled along hyperplanes that no dependence distance
crosses: the integer null space of the distance vectors (isl deltas), so that the
tiles stay independent; the bounds of inner dimensions then use outer ones.

Tiling is refused (the nests stay as they are) when two tiles would touch one
element with at least one write (a dependence the parallel band would violate),
when the writers cannot be brought together, or when a tile of a writer is not
convex.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import islpy as isl
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import DenseArrayBase, MemRefType, i64
from xdsl.ir import Block, SSAValue

from mlfuse.dialects import loop
from mlfuse.poly.islconv import (
    Names,
    Unsupported,
    accesses,
    band_context,
    band_tiles,
    bounds_exact,
    box_bounds,
    domain,
    scan_bounds,
)
from mlfuse.poly.program import (
    TILE_ATTR,
    can_move_down,
    cross_tile_conflicts,
    effects,
    group_of,
    is_intermediate,
    may_join,
    nests_in,
    new_band,
    operand_buffers,
    ops_between,
    ops_of,
    place_deallocs,
    rebuild_nest,
    root,
    users_in,
    with_symbols,
    writers,
)

Remark = Callable[[object, str], None]


def _no_remark(op, message: str) -> None:
    pass


# --- tile sizes -----------------------------------------------------------------------------------


def cache_bytes(level: int = 2, default: int = 1 << 20) -> int:
    """Size of the per-core cache at `level` from sysfs (the default where unknown)."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            path = os.path.join(base, entry)
            with open(os.path.join(path, "level")) as f:
                if int(f.read()) != level:
                    continue
            with open(os.path.join(path, "type")) as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(os.path.join(path, "size")) as f:
                text = f.read().strip()
            mult = {"K": 1 << 10, "M": 1 << 20}.get(text[-1], 1)
            return int(text.rstrip("KM")) * mult
    except OSError:
        pass
    return default


def default_tile_sizes(
    shape: Sequence[int], itemsize: int = 4, cache: int | None = None, live_buffers: int = 6,
    whole: Sequence[int] = (),
) -> list[int]:
    """An analytical default: a tile spans whole rows of up to 512 elements, longer rows in
    equal pieces (`balanced_row`; unit-stride inner loops stay long), and as many rows as let `live_buffers` tile-sized buffers fill half of
    the L2 cache (at least 8, a power of two); other leading dimensions are tiled by 1,
    those in `whole` not at all (their extent multiplies the size of a row). 0: not tiled.
    Dimensions of extent 1 are left out first: rows are those of the others (a 1x1 conv's
    patches [1, 7, 7, 960, 1, 1] in tiles of 1x7x512, not of one element each)."""
    if not shape:
        return []
    kept = [d for d, n in enumerate(shape) if n != 1]
    if len(kept) < len(shape):
        inner_sizes = default_tile_sizes([shape[d] for d in kept], itemsize, cache, live_buffers,
                                         whole=[kept.index(d) for d in whole if d in kept])
        sizes = [0] * len(shape)
        for k, d in enumerate(kept):
            sizes[d] = inner_sizes[k]
        return sizes
    cache = cache or cache_bytes(2)
    inner = balanced_row(shape[-1])
    sizes = [0 if d in whole else 1 for d in range(len(shape) - 1)] + [0 if inner == shape[-1] else inner]
    if len(shape) >= 2:
        row = inner * math.prod(shape[d] for d in whole if d < len(shape) - 2)
        # an empty domain (an extent of 0: a slice or split to nothing) has rows of 0 bytes
        rows = max(1, (cache // 2) // max(1, itemsize * row * live_buffers))
        rows = 1 << (rows.bit_length() - 1)  # a power of two
        rows = max(8, min(rows, 256))
        sizes[-2] = 0 if rows >= shape[-2] else rows
    return sizes


# Rows longer than this are cut into tiles of equal length (a multiple of ROW_MULTIPLE):
# 576 into two of 288, not 512 and 64, which made one of a band's two tiles 8x the other,
# and the team of 2 waited on it (MobileNetV3-small's last patches at 2 threads: 0.55 of
# the team's time busy).
ROW_MAX = 512
ROW_MULTIPLE = 16


def balanced_row(extent: int) -> int:
    """The tile length along a row of `extent` elements: the whole row up to ROW_MAX, else
    the fewest equal pieces of at most ROW_MAX, rounded up to a multiple of ROW_MULTIPLE."""
    if extent <= ROW_MAX:
        return extent
    piece = -(-extent // -(-extent // ROW_MAX))
    return min(ROW_MAX, -(-piece // ROW_MULTIPLE) * ROW_MULTIPLE)


def resolve_sizes(shape: Sequence[int], sizes: Sequence[int] | None) -> tuple[list[int], list[bool]]:
    """Tile size per dimension (0: whole) from sizes given for the trailing dimensions; leading
    dimensions not covered get 1. Also says which dimensions were given explicitly."""
    if sizes is None:
        return default_tile_sizes(shape), [False] * len(shape)
    given = list(sizes)[-len(shape):] if shape else []
    lead = len(shape) - len(given)
    return [1] * lead + given, [False] * lead + [True] * len(given)


# --- tiling one buffer ------------------------------------------------------------------------------


def tile_set(buf_name: str, shape: Sequence[int], tiled: Sequence[tuple[int, int]], params: Sequence[str]) -> isl.Set:
    """`[T] -> { B[x] : x in tile T }` for tiled (dimension, size) pairs."""
    xs = [f"x{d}" for d in range(len(shape))]
    cons = [f"0 <= {xs[d]} < {n}" for d, n in enumerate(shape)]
    for (d, size), p in zip(tiled, params):
        cons.append(f"{size} * {p} <= {xs[d]} < {size} * {p} + {size}")
    return isl.Set(f"[{', '.join(params)}] -> {{ {buf_name}[{', '.join(xs)}] : {' and '.join(cons)} }}")


def plane_tiles(shape: Sequence[int], plane: Sequence[int], size: int) -> tuple[int, int]:
    """(first, count): tile numbers along hyperplane `plane` (tile t: size*t <= plane . x < size*(t+1))
    that meet the box [0, shape)."""
    lo = sum(c * (n - 1) for c, n in zip(plane, shape) if c < 0)
    hi = sum(c * (n - 1) for c, n in zip(plane, shape) if c > 0)
    return lo // size, hi // size - lo // size + 1


def skewed_tile_set(
    buf_name: str, shape: Sequence[int], planes: Sequence[Sequence[int]], sizes: Sequence[int], params: Sequence[str]
) -> isl.Set:
    """`[T] -> { B[x] : s_k (T_k + o_k) <= h_k . x < s_k (T_k + o_k + 1) }`: tiles between
    parallel hyperplanes h_k (parallelograms), numbered from 0."""
    xs = [f"x{d}" for d in range(len(shape))]
    cons = [f"0 <= {xs[d]} < {n}" for d, n in enumerate(shape)]
    for h, size, p in zip(planes, sizes, params):
        dot = " + ".join(f"{c} * {x}" for c, x in zip(h, xs) if c)
        first, _ = plane_tiles(shape, h, size)
        cons.append(f"{size} * ({p} + {first}) <= {dot} < {size} * ({p} + {first}) + {size}")
    return isl.Set(f"[{', '.join(params)}] -> {{ {buf_name}[{', '.join(xs)}] : {' and '.join(cons)} }}")


def dependence_distances(ws: Sequence[loop.NestOp], buf: SSAValue, names: Names) -> list[tuple[int, ...]] | None:
    """Distances, in `buf`'s index space, between writer instances that touch one element of
    any buffer (one writing); None unless they are finitely many constant vectors."""
    writes = {}
    accs = []
    for w in ws:
        for acc in accesses(w, names, root):
            accs.append((w, acc))
            if acc.is_write and root(acc.buffer) is buf:
                writes[w] = acc.relation if w not in writes else writes[w].union(acc.relation)
    deltas: set[tuple[int, ...]] = set()
    for i, (w1, a1) in enumerate(accs):
        for w2, a2 in accs[i:]:
            if root(a1.buffer) is not root(a2.buffer) or not (a1.is_write or a2.is_write):
                continue
            pairs = a1.relation.apply_range(a2.relation.reverse())  # instance -> instance
            elements = writes[w1].reverse().apply_range(pairs).apply_range(writes[w2])
            d = elements.deltas()
            if d.is_empty():
                continue
            if not d.is_bounded():
                return None
            from mlfuse.poly.islconv import set_points

            deltas |= {p for p in set_points(d) if any(p)}
    return sorted(deltas)


def orthogonal_planes(vectors: Sequence[Sequence[int]], rank: int) -> list[list[int]]:
    """An integer basis of the hyperplanes h with h . v = 0 for every v (the directions tiles
    can be cut along without a dependence crossing them)."""
    from fractions import Fraction

    rows = [[Fraction(x) for x in v] for v in vectors]
    pivots: list[int] = []
    r = 0
    for c in range(rank):  # reduced row echelon form
        pivot = next((i for i in range(r, len(rows)) if rows[i][c] != 0), None)
        if pivot is None:
            continue
        rows[r], rows[pivot] = rows[pivot], rows[r]
        rows[r] = [x / rows[r][c] for x in rows[r]]
        for i in range(len(rows)):
            if i != r and rows[i][c] != 0:
                rows[i] = [a - rows[i][c] * b for a, b in zip(rows[i], rows[r])]
        pivots.append(c)
        r += 1
    basis = []
    for free in (c for c in range(rank) if c not in pivots):
        v = [Fraction(0)] * rank
        v[free] = Fraction(1)
        for i, c in enumerate(pivots):
            v[c] = -rows[i][free]
        denom = math.lcm(*[x.denominator for x in v])
        ints = [int(x * denom) for x in v]
        g = math.gcd(*ints)
        ints = [x // g for x in ints]
        if next(x for x in ints if x) < 0:
            ints = [-x for x in ints]
        basis.append(ints)
    return basis


def restrict_to_tile(nest: loop.NestOp, buf: SSAValue, tile: isl.Set, names: Names) -> isl.Set:
    """`{ i in D : write(i) in tile }` over every output of `nest` that is `buf`."""
    dom = domain(nest, names)
    result = None
    for acc in accesses(nest, names, root):
        if acc.is_write and root(acc.buffer) is buf:
            part = acc.relation.intersect_domain(dom).intersect_range(tile).domain()
            result = part if result is None else result.union(part)
    assert result is not None
    return result.coalesce()


def tileable_writers(buf: SSAValue, block: Block) -> list[loop.NestOp] | str:
    """The top-level nests writing `buf`, or why they cannot be tiled (a writer touching it
    through a view, other writers, symbolic bounds, data-dependent reads). Views that only
    readers use (a product reading a conv's output as a matrix) do not matter: the band
    writes the whole buffer, in its shape."""
    ws = writers(buf, block)
    if not ws:
        return "it is not written by loop nests only"
    if any(v is not buf and root(v) is buf for w in ws for v in (*w.ins, *w.outs)):
        return "a writer accesses the buffer through a view with another shape"
    if any(w.syms for w in ws) or any(w.static_bounds() is None for w in ws):
        return "a writer has symbolic bounds"
    if any(loop.has_indirect_reads(w) for w in ws):
        return "a writer reads data-dependently (a gather): its accesses are not affine"
    return ws


def gather_refusal(block: Block, ws: Sequence[loop.NestOp]) -> str | None:
    """Why the writers cannot all move down to the last one (the band's place); None if they can."""
    last = ws[-1]
    for w in ws[:-1]:
        between = [o for o in ops_between(block, w, last) if o not in ws]
        if not can_move_down(w, between):
            return f"'{w.nest_name.data}' cannot move past the ops between it and '{last.nest_name.data}'"
    return None


def cut_planes(ws: Sequence[loop.NestOp], buf: SSAValue, names: Names, rank: int) -> list[list[int]] | str:
    """For shape="parallelogram": where writers depend on each other across elements, the
    hyperplanes that no dependence crosses (skewed, if need be); [] without dependences
    (rectangles); or why no tile shape works."""
    deltas = dependence_distances(ws, buf, names)
    if deltas is None:
        return "its dependences are not uniform, no tile shape keeps them inside tiles"
    if not deltas:
        return []
    planes = orthogonal_planes(deltas, rank)
    if not planes:
        return "every direction carries a dependence: tiles would depend on each other"
    return planes


@dataclass(frozen=True)
class Cut:
    """How a buffer of `extents` is cut into tiles: along `planes` with `plane_sizes`
    (parallelograms), or, without planes, by the `tiled` (dimension, size) pairs (rectangles)."""

    extents: list[int]
    sizes: list[int]
    tiled: list[tuple[int, int]]
    planes: list[list[int]]

    @property
    def plane_sizes(self) -> list[int]:
        """Tile size per hyperplane: the trailing sizes given, 64 for the others."""
        given = [s for s in self.sizes if s > 0][-len(self.planes):]
        return [64] * (len(self.planes) - len(given)) + given

    def counts(self) -> list[int]:
        """Tiles per band dimension."""
        if self.planes:
            return [plane_tiles(self.extents, h, size)[1] for h, size in zip(self.planes, self.plane_sizes)]
        return [-(-self.extents[d] // s) for d, s in self.tiled]

    def band(self, name: str) -> loop.BandOp:
        """An empty band over the tile indices, its tile sizes (and hyperplanes) as attributes."""
        if self.planes:
            attrs = {TILE_ATTR: DenseArrayBase.from_list(i64, self.plane_sizes),
                     "tile_planes": DenseArrayBase.from_list(i64, [c for p in self.planes for c in p])}
        else:
            sizes = [s if 0 < s < e else 0 for s, e in zip(self.sizes, self.extents)]
            attrs = {TILE_ATTR: DenseArrayBase.from_list(i64, sizes)}
        return new_band(name, self.counts(), attrs)

    def tile(self, buf_name: str, params: Sequence[str]) -> isl.Set:
        """`[T] -> { B[x] : x in tile T }`."""
        if self.planes:
            return skewed_tile_set(buf_name, self.extents, self.planes, self.plane_sizes, params)
        return tile_set(buf_name, self.extents, self.tiled, params)


def fill_band(band: loop.BandOp, ws: Sequence[loop.NestOp], buf: SSAValue, tile: isl.Set, names: Names) -> str | None:
    """Add to `band` each writer restricted to the instances that write `tile`; None, or why
    a writer's tile has no exact affine bounds."""
    args = list(band.block.args)
    params = [names.param(a) for a in args]
    param_pos = {p: k for k, p in enumerate(params)}
    ctx = band_context(params, band.sizes)
    nb = len(args)
    for w in ws:
        part = restrict_to_tile(w, buf, tile, names)
        try:
            bounds = scan_bounds(part, param_pos, ctx)
        except Unsupported as e:
            return f"the tile of '{w.nest_name.data}' has no affine bounds ({e})"
        if not bounds_exact(part, bounds, params, ctx):
            return f"the tile of '{w.nest_name.data}' is not convex"
        lower = [b.maps(nb, k)[0] for k, b in enumerate(bounds)]
        upper = [b.maps(nb, k)[1] for k, b in enumerate(bounds)]
        maps = [with_symbols(m, nb) for m in w.access_maps]
        band.block.add_op(rebuild_nest(w, args, lower, upper, maps))
    return None


def tile_buffer(
    fn: func.FuncOp,
    buf: SSAValue,
    sizes: Sequence[int],
    names: Names,
    shape: str = "rect",
) -> loop.BandOp | str:
    """Tile the writers of `buf` into one band; the band, or why not."""
    block = fn.body.block
    ws = tileable_writers(buf, block)
    if isinstance(ws, str):
        return ws
    t = buf.type
    assert isinstance(t, MemRefType)
    extents = list(t.get_shape())
    tiled = [(d, s) for d, s in enumerate(sizes) if 0 < s < extents[d]]
    if not tiled:
        return "the tile covers the whole buffer"
    why = gather_refusal(block, ws)
    if why is not None:
        return why
    planes = cut_planes(ws, buf, names, len(extents)) if shape == "parallelogram" else []
    if isinstance(planes, str):
        return planes
    last = ws[-1]
    cut = Cut(extents, list(sizes), tiled, planes)
    band = cut.band(f"{last.nest_name.data}.tiles")
    params = [names.param(a) for a in band.block.args]
    why = fill_band(band, ws, buf, cut.tile(names.buffer(buf), params), names)
    if why is not None:
        band.erase(safe_erase=False)  # its rebuilt nests would keep using the buffers
        return why
    try:
        problems = cross_tile_conflicts(band, names)
    except Unsupported as e:
        problems = [str(e)]
    if problems:
        band.erase(safe_erase=False)
        return f"a dependence crosses tiles: {problems[0]}"
    block.insert_op_before(band, last)
    used = operand_buffers(ws)  # the band uses them where the last writer was
    for w in ws:
        w.detach()
        w.erase()
    place_deallocs(block, used)
    return band


# --- which dimensions pay --------------------------------------------------------------------------


def cone_footprints(band: loop.BandOp, fn: func.FuncOp, names: Names) -> dict[SSAValue, isl.Set]:
    """Per intermediate upstream of `band`: the footprint a tile would need if every producer
    were fused (extensions followed through the producers, consumers first)."""
    from mlfuse.poly.footprint import extension, footprint

    ctx = band_tiles(band, names)
    readers: dict[SSAValue, list] = {}

    def add_reads(nest: loop.NestOp, dom: isl.Set) -> None:
        for acc in accesses(nest, names, root):
            b = root(acc.buffer)
            if not acc.is_write and is_intermediate(b, fn):
                readers.setdefault(b, []).append((dom, acc.relation))

    for nest in nests_in(band):
        add_reads(nest, domain(nest, names).intersect_params(ctx))
    footprints: dict[SSAValue, isl.Set] = {}
    ops = ops_of(fn.body.block)
    for op in reversed(ops[: ops.index(band)]):
        if not isinstance(op, loop.NestOp) or op.syms or loop.has_indirect_reads(op):
            continue  # a gather's reads are not affine: it has no footprint to extend
        if not any(root(v) in readers for v in op.outs):
            continue  # writes nothing the cone reads: no need for its isl accesses (most nests of a model)
        rels, fps = [], []
        for acc in accesses(op, names, root):
            b = root(acc.buffer)
            if acc.is_write and b in readers:
                footprints[b] = footprints.get(b) or footprint(readers[b])
                rels.append(acc.relation)
                fps.append(footprints[b])
        if rels:
            add_reads(op, extension(domain(op, names), rels, fps).intersect_params(ctx))
    return footprints


def dims_to_untile(band: loop.BandOp, fn: func.FuncOp, names: Names) -> list[int]:
    """Band dimensions along which the footprint of some upstream intermediate does not move,
    while it moves along others: tiling them would have every tile recompute that producer
    (a convolution's input channels for tiles of output channels, the columns of the first
    product of 2mm). Producers that no tile dimension moves are left out: they will not fuse."""
    params = [names.param(a) for a in band.block.args]
    ctx = band_context(params, band.sizes)
    drop: set[int] = set()
    for fp in cone_footprints(band, fn, names).values():
        fp = fp.gist_params(ctx)  # constraints on valid tile indices alone say nothing
        moves = set()
        for k, p in enumerate(params):
            pos = fp.find_dim_by_name(isl.dim_type.param, p)
            if pos >= 0 and fp.involves_dims(isl.dim_type.param, pos, 1):
                moves.add(k)
        if moves:
            drop |= set(range(len(params))) - moves
    return sorted(drop) if len(drop) < len(params) else []


def live_out_buffers(fn: func.FuncOp) -> list[SSAValue]:
    """Function arguments written by top-level nests, in the order of their last writer."""
    block = fn.body.block
    last: dict[SSAValue, int] = {}
    for i, op in enumerate(block.ops):
        for b in effects(op).writes:
            if b in block.args:
                last[b] = i
    return sorted(last, key=last.get)


def group_live_out_buffers(fn: func.FuncOp) -> list[SSAValue]:
    """Buffers that top-level nests of a window group write and that something outside the
    group reads (or that are function arguments), in the order of their last writer."""
    block = fn.body.block
    last: dict[SSAValue, int] = {}
    for i, op in enumerate(block.ops):
        group = group_of(op) if isinstance(op, loop.NestOp) else None
        if group is None or not isinstance(op, loop.NestOp):
            continue
        for b in {root(v) for v in op.outs}:
            # through views: a product reading the patches as a matrix is a reader, the view is not
            readers = {r for r in users_in(block, b) if not isinstance(r, memref.DeallocOp | loop.ViewOp)}
            outside = any(group_of(r) != group for r in readers if r is not op)
            if b in block.args or outside:
                last[b] = i
    return sorted(last, key=lambda b: last[b])


def tile_function(
    fn: func.FuncOp,
    sizes: Sequence[int] | None = None,
    which: str = "live-out",
    shape: str = "rect",
    fuse_aware: bool = True,
    remark: Remark = _no_remark,
    fusible_only: bool = False,
    scope: str = "function",
) -> list[loop.BandOp]:
    """Tile the live-out buffers of `fn` (which="all": every buffer written by top-level nests).

    fuse_aware: leave whole the dimensions along which no producer's footprint moves.
    fusible_only: tile a live-out only if its writers read an intermediate that
    top-level nests produce (something post-tiling fusion could bring into the tiles).
    scope="group": the live-outs of the planner's window groups instead (nests tagged
    with mlfuse.poly.program.GROUP_ATTR), and only their own producers count as fusible."""
    names = Names()
    block = fn.body.block
    if scope == "group":
        targets = group_live_out_buffers(fn)
    elif which == "all":
        targets = []
        for op in list(block.ops):
            if isinstance(op, loop.NestOp):
                for v in op.outs:
                    b = root(v)
                    if (b in block.args or is_intermediate(b, fn)) and b not in targets:
                        targets.append(b)
    else:
        targets = live_out_buffers(fn)
    bands = []
    for buf in targets:
        t = buf.type
        assert isinstance(t, MemRefType)
        extents = list(t.get_shape())
        resolved, _ = resolve_sizes(extents, sizes)
        if fusible_only and not has_fusible_input(fn, buf, scope):
            remark((writers(buf, block) or [fn])[-1], "not tiled: no producer to fuse into its tiles")
            continue
        result = tile_buffer(fn, buf, resolved, names, shape)
        if isinstance(result, str):
            ws = writers(buf, block) or []
            remark(ws[-1] if ws else fn, f"not tiled: {result}")
            continue
        if fuse_aware:
            tiled_dims = [d for d, s in enumerate(resolved) if 0 < s < extents[d]]
            drop = [tiled_dims[k] for k in dims_to_untile(result, fn, names)]
            if drop and len(drop) < len(tiled_dims):
                if sizes is None:  # whole dimensions make rows bigger: fewer rows per tile
                    resolved = default_tile_sizes(extents, whole=drop)
                resolved = [0 if d in drop else s for d, s in enumerate(resolved)]
                result = retile(fn, result, buf, resolved, names, shape)
                if isinstance(result, str):  # cannot happen for fewer tiled dims, but stay safe
                    remark(fn, f"not tiled: {result}")
                    continue
        bands.append(result)
    return bands


def has_fusible_input(fn: func.FuncOp, buf: SSAValue, scope: str = "function") -> bool:
    """Do the writers of `buf` read an intermediate written by top-level nests only (in
    scope "group": by nests of the writers' own group)?"""
    block = fn.body.block
    for w in writers(buf, block) or []:
        for v in w.ins:
            b = root(v)
            producers = writers(b, block) if b is not buf and is_intermediate(b, fn) else None
            if producers and may_join([w, *producers], scope):
                return True
    return False


def retile(fn: func.FuncOp, band: loop.BandOp, buf: SSAValue, sizes: Sequence[int], names: Names, shape: str) -> loop.BandOp | str:
    """Undo a band (its nests back at its place, untiled) and tile again with other sizes."""
    untile(band)
    return tile_buffer(fn, buf, sizes, names, shape)


def untile(band: loop.BandOp) -> None:
    """Put the original nests of a tile band back (their bounds are recovered from the full
    domains: the tiles partition them)."""
    from mlfuse.poly.program import nests_in

    block = band.parent_block()
    assert block is not None
    for nest in nests_in(band):
        full = full_domain(nest, band)
        lower = [b.maps(0)[0] for b in full]
        upper = [b.maps(0)[1] for b in full]
        maps = [with_symbols(m, 0) for m in nest.access_maps]
        block.insert_op_before(rebuild_nest(nest, [], lower, upper, maps), band)
    band.detach()
    band.erase()


def full_domain(nest: loop.NestOp, band: loop.BandOp):
    """The union over all tiles of a nest's tile domain, as box bounds."""
    names = Names()
    params = [names.param(a) for a in band.block.args]
    dom = domain(nest, names).intersect_params(band_context(params, band.sizes))
    union = dom.project_out(isl.dim_type.param, 0, dom.dim(isl.dim_type.param))
    return box_bounds(union, {})
