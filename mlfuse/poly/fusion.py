"""Post-tiling fusion (Zhao & Di, MICRO 2020): fuse producers into the tiles of their consumers.

For a tile band and an intermediate buffer read inside it, the *unit* to fuse is
every nest writing the buffer (an init and its reduction, a pad's fill and copy)
and, transitively, the other buffers those nests write. Per tile T:

1. the upwards-exposed footprint of the band on each unit buffer is the image of
   the in-band readers' tile domains under their read relations;
2. the extension of each writer is `{ p : write(p) in footprint(T) }`; bounds
   that scan it (affine in T, max/min at the image border; exact when it is
   convex: a box, or a parallelogram when the consumer reads through a skewed
   map; else its convex hull) become the writer's tile. Tiles of neighbours
   overlap where the footprint has a halo: the overlap is recomputed (overlapped
   tiling);
3. the writers are cloned into the band before the first in-band reader, their
   buffers become per-iteration scratch (`memref.alloca` of the full shape,
   private to the tile; loop-storage-reduce then shrinks it to the footprint),
   and the original nests go away. Fusion repeats until nothing changes, so
   producers of producers follow (recursion).

Guards (a refused fusion leaves the IR as it was):
- every reader of the unit's buffers must be inside tile bands (else the buffer is
  needed whole anyway); a writer may read a unit buffer only at the element it
  writes (init/accumulate, in-place scale);
- a reduction dimension of a writer must stay whole in every tile (splitting it
  across tiles would serialize the band);
- parallelism guard: at least `parallel_dims` parallel dimensions of each writer
  must be partitioned by the tile index (a producer whose whole domain every tile
  needs would serialize or replicate the band);
- the total recomputation (sum of tile extents / domain) is at most `max_recompute`;
- multiple live-outs: a producer read by several bands is fused into each only if
  its per-band extension domains do not intersect (no redundant work is added);
- no dependence may cross tiles on a buffer that stays shared (isl check on the
  fused band), and moving the writers down past the ops in between must not
  reorder conflicting accesses;
- the unit's tile-local buffers (after storage reduction) must fit `scratch_limit` bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import islpy as isl
import numpy as np
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineExpr, AffineSymExpr

from mlfuse.dialects import loop
from mlfuse.poly.footprint import extension, footprint
from mlfuse.poly.islconv import (
    Bounds,
    Names,
    Unsupported,
    accesses,
    band_context,
    bounds_set,
    box_bounds,
    domain,
    eval_bounds,
    scan_bounds,
)
from mlfuse.poly.program import (
    block_positions,
    cross_tile_conflicts,
    effects,
    group_of,
    is_intermediate,
    is_tile_band,
    may_join,
    nests_in,
    operand_buffers,
    ops_between,
    place_deallocs,
    rebuild_nest,
    root,
    top_ancestor,
    with_symbols,
    writers,
)

Remark = Callable[[object, str], None]


@dataclass(frozen=True)
class FuseOptions:
    max_recompute: float = 2.0
    parallel_dims: int = 1
    scratch_limit: int = 2 << 20


class Refused(Exception):
    """A fusion was not made; the message says why."""


# --- evaluating bounds over all tiles -----------------------------------------------------------


def eval_np(e: AffineExpr, syms: Sequence[np.ndarray]) -> np.ndarray:
    """An affine expression of symbols on arrays of symbol values."""
    match e:
        case AffineConstantExpr():
            return np.int64(e.value)
        case AffineSymExpr():
            return syms[e.position]
        case AffineBinaryOpExpr():
            a, b = eval_np(e.lhs, syms), eval_np(e.rhs, syms)
            match e.kind:
                case AffineBinaryOpKind.Add:
                    return a + b
                case AffineBinaryOpKind.Mul:
                    return a * b
                case AffineBinaryOpKind.FloorDiv:
                    return np.floor_divide(a, b)
                case AffineBinaryOpKind.CeilDiv:
                    return -np.floor_divide(-a, b)
                case AffineBinaryOpKind.Mod:
                    return np.mod(a, b)
    raise Unsupported(f"cannot evaluate {e}")


# check_tile_guards evaluates a hull's volume in every tile of the band at once (arrays of
# this many elements): a band of 2^31 - 1 channels had asked for 16 GiB and failed.
MAX_CHECKED_TILES = 1 << 20


def tile_volumes(bounds: Sequence[Bounds], sizes: Sequence[int]) -> np.ndarray:
    """Points of a box in each tile of a band of `sizes` (box bounds use symbols only)."""
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in sizes], indexing="ij")
    syms = [g.reshape(-1) for g in grids]
    count = syms[0].size if syms else 1
    volume = np.ones(count, dtype=np.int64)
    for b in bounds:
        lo = np.max([np.broadcast_to(eval_np(e, syms), (count,)) for e in b.lower], axis=0)
        hi = np.min([np.broadcast_to(eval_np(e, syms), (count,)) for e in b.upper], axis=0)
        volume *= np.maximum(hi - lo, 0)
    return volume


def depends_on_symbols(b: Bounds) -> bool:
    return any(isinstance(x, AffineSymExpr) for e in (*b.lower, *b.upper) for x in e.dfs())


# --- the unit to fuse ---------------------------------------------------------------------------------


@dataclass
class Unit:
    buffers: list[SSAValue]
    writers: list[loop.NestOp]
    readers: dict[loop.BandOp, list[loop.NestOp]]


def unit_closure(
    fn: func.FuncOp, buf: SSAValue, position: Mapping[Operation, int]
) -> tuple[list[SSAValue], list[loop.NestOp]]:
    """The unit's buffers (`buf` first) and writers (in program order, from the block's
    `position`s): every top-level nest writing one of the buffers, and every buffer such a
    nest writes; Refused where a buffer is not a private intermediate, is written
    otherwise, or a writer gathers."""
    block = fn.body.block
    buffers: list[SSAValue] = [buf]
    ws: list[loop.NestOp] = []
    k = 0
    while k < len(buffers):
        b = buffers[k]
        k += 1
        if not is_intermediate(b, fn):
            raise Refused("a writer of it also writes a buffer that is not a private intermediate")
        found = writers(b, block, position)
        if found is None:
            raise Refused("something other than top-level loop nests writes it")
        for w in found:
            if loop.has_indirect_reads(w):
                raise Refused(f"'{w.nest_name.data}' reads data-dependently (a gather): its footprint is not affine")
            if w not in ws:
                ws.append(w)
                for v in w.outs:
                    if root(v) not in buffers:
                        buffers.append(root(v))
    ws.sort(key=position.__getitem__)
    return buffers, ws


def band_readers(
    block: Block, buffers: Sequence[SSAValue], ws: Sequence[loop.NestOp]
) -> dict[loop.BandOp, list[loop.NestOp]]:
    """The nests other than the unit's writers that use the unit's buffers, per tile band
    (deallocations aside); Refused where one is not a nest inside a tile band."""
    readers: dict[loop.BandOp, list[loop.NestOp]] = {}
    for b in buffers:
        for use in b.uses:
            op = use.operation
            if isinstance(op, memref.DeallocOp) or op in ws:
                continue
            band = top_ancestor(op, block)
            if not (isinstance(op, loop.NestOp) and band is not None and is_tile_band(band)):
                user = f"'{op.nest_name.data}'" if isinstance(op, loop.NestOp) else f"'{op.name}'"
                raise Refused(f"it is used outside tile bands (by {user})")
            lst = readers.setdefault(band, [])
            if op not in lst:
                lst.append(op)
    return readers


def check_pointwise_reads(ws: Sequence[loop.NestOp], buffers: Sequence[SSAValue]) -> None:
    """A writer may read a unit buffer only at the element it writes (init/accumulate, in-place
    scale); Refused otherwise."""
    unit_set = set(buffers)
    for w in ws:
        write_maps = {root(v): m for v, m in zip(w.outs, w.out_maps)}
        for v, m in zip(w.ins, w.in_maps):
            if root(v) in unit_set and write_maps.get(root(v)) != m:
                raise Refused(f"'{w.nest_name.data}' reads a fused buffer at elements it does not write")


def find_unit(fn: func.FuncOp, buf: SSAValue, position: Mapping[Operation, int]) -> Unit:
    """The unit to fuse for intermediate `buf` (see the module docstring), or raise Refused;
    `position`: the block's (block_positions), for ordering the writers."""
    buffers, ws = unit_closure(fn, buf, position)
    readers = band_readers(fn.body.block, buffers, ws)
    check_pointwise_reads(ws, buffers)
    if not readers:
        raise Refused("no tile band reads it")
    return Unit(buffers, ws, readers)


# --- fusing into one band ------------------------------------------------------------------------------


@dataclass
class Plan:
    band: loop.BandOp
    tiles: dict[loop.NestOp, list[Bounds]]  # writer -> bounds scanning its tile in this band


@dataclass(frozen=True)
class TileIndices:
    """A band's tile indices as isl parameters: their names, their positions, the context that
    bounds them, and the tiles per band dimension."""

    params: list[str]
    pos: dict[str, int]
    ctx: isl.Set
    sizes: tuple[int, ...]

    @staticmethod
    def of(band: loop.BandOp, names: Names) -> TileIndices:
        """The tile indices of `band` (names its block arguments in order)."""
        params = [names.param(a) for a in band.block.args]
        sizes = tuple(band.sizes)
        return TileIndices(params, {p: k for k, p in enumerate(params)}, band_context(params, sizes), sizes)


def band_footprints(
    unit_bufs: set[SSAValue], band: loop.BandOp, names: Names, ctx: isl.Set
) -> dict[SSAValue, isl.Set | None]:
    """Per unit buffer read in `band`: the upwards-exposed footprint of a tile (step 1); Refused
    where a nest in the band has other symbols than tile indices or writes a unit buffer."""
    reads: dict[SSAValue, list] = {}
    for nest in nests_in(band):
        if any(s not in band.block.args for s in nest.syms):
            raise Refused(f"'{nest.nest_name.data}' in the band has symbols that are not tile indices")
        dom = domain(nest, names).intersect_params(ctx)
        for acc in accesses(nest, names, root):
            b = root(acc.buffer)
            if b in unit_bufs and (not acc.is_write):
                reads.setdefault(b, []).append((dom, acc.relation))
            if b in unit_bufs and acc.is_write:
                raise Refused(f"'{nest.nest_name.data}' in the band writes a buffer the producer writes")
    return {b: footprint(r) for b, r in reads.items()}


def writer_extension(
    w: loop.NestOp, fps: dict[SSAValue, isl.Set | None], names: Names, ctx: isl.Set
) -> isl.Set | None:
    """`{ p : write(p) in footprint(T) }` over the footprints of what `w` writes (step 2); None
    where the band reads nothing `w` computes."""
    rels, targets = [], []
    for acc in accesses(w, names, root):
        b = root(acc.buffer)
        target = fps.get(b)
        if acc.is_write and target is not None:
            rels.append(acc.relation)
            targets.append(target)
    if not rels:
        return None
    ext = extension(domain(w, names), rels, targets).intersect_params(ctx)
    return None if ext.is_empty() else ext


def extension_bounds(
    w: loop.NestOp, ext: isl.Set, names: Names, idx: TileIndices
) -> tuple[list[Bounds], list[Bounds], list[tuple[int, int]]]:
    """For writer `w` and its extension: the rectangular hull (for the guards), the bounds that
    run (an overlapped box or a parallelogram, clamped to the domain), and `w`'s static bounds."""
    try:
        bounds = box_bounds(ext, idx.pos, idx.ctx)  # the rectangular hull, for the guards
        shape = scan_bounds(ext, idx.pos, idx.ctx)  # what runs: overlapped box, or a parallelogram
    except Unsupported as e:
        raise Refused(f"the extension of '{w.nest_name.data}' has no affine bounds ({e})") from None
    static = w.static_bounds()
    if static is None:  # a writer already tiled elsewhere (gemver: two live-outs share it)
        raise Refused(f"'{w.nest_name.data}' is already tiled (bounds depend on another band)")
    if not bounds_set(shape, names.stmt(w), idx.params).intersect_params(idx.ctx).is_subset(domain(w, names)):
        # the hull of a non-convex extension may stick out of the domain: clamp it
        shape = [Bounds((*b.lower, AffineExpr.constant(lo)), (*b.upper, AffineExpr.constant(hi)))
                 for b, (lo, hi) in zip(shape, static)]
    return bounds, shape, static


def check_tile_guards(
    w: loop.NestOp, bounds: Sequence[Bounds], static: Sequence[tuple[int, int]], idx: TileIndices, options: FuseOptions
) -> None:
    """The guards on a writer's tile hull: reduction dimensions stay whole, enough parallel
    dimensions follow the tiles, the recomputation stays within the limit; Refused otherwise."""
    partitioned = 0
    for d, (kind, b) in enumerate(zip(w.iterator_kinds, bounds)):
        moves = depends_on_symbols(b)
        if kind == loop.REDUCTION and (moves or eval_bounds(b, [0] * len(idx.params)) != static[d]):
            raise Refused(f"tiles would split reduction dimension {d} of '{w.nest_name.data}'")
        if kind == loop.PARALLEL and moves:
            partitioned += 1
    needed = min(options.parallel_dims, len(idx.sizes))
    if partitioned < needed:
        raise Refused(
            f"parallelism guard: only {partitioned} parallel dimension(s) of '{w.nest_name.data}' follow "
            f"the tiles, the band needs {needed}"
        )
    tiles = math.prod(idx.sizes)
    if tiles > MAX_CHECKED_TILES:
        raise Refused(f"{tiles} tiles: too many to bound the recomputation of '{w.nest_name.data}'")
    work = math.prod(hi - lo for lo, hi in static)
    total = int(tile_volumes(bounds, idx.sizes).sum())
    if work and total > options.max_recompute * work:
        raise Refused(
            f"'{w.nest_name.data}' would be recomputed {total / work:.2f}x (limit {options.max_recompute}x)"
        )


def plan_band(unit: Unit, band: loop.BandOp, names: Names, options: FuseOptions) -> Plan:
    """The writers' tiles in `band`, after checking the guards that need only the bounds."""
    idx = TileIndices.of(band, names)
    fps = band_footprints(set(unit.buffers), band, names, idx.ctx)
    tiles: dict[loop.NestOp, list[Bounds]] = {}
    for w in unit.writers:
        ext = writer_extension(w, fps, names, idx.ctx)
        if ext is None:
            continue  # nothing this writer computes is read in this band
        bounds, shape, static = extension_bounds(w, ext, names, idx)
        check_tile_guards(w, bounds, static, idx, options)
        tiles[w] = shape
    if not tiles:
        raise Refused("no writer computes what the band reads")
    return Plan(band, tiles)


def extensions_disjoint(plans: Sequence[Plan], names: Names) -> bool:
    """Multi-live-out rule: the instances each band would compute must not intersect."""
    for w in {w for p in plans for w in p.tiles}:
        seen: isl.Set | None = None
        for p in plans:
            if w not in p.tiles:
                continue
            params = [names.param(a) for a in p.band.block.args]
            box = bounds_set(p.tiles[w], names.stmt(w), params).intersect_params(band_context(params, p.band.sizes))
            every = box.project_out(isl.dim_type.param, 0, box.dim(isl.dim_type.param))
            if seen is not None and not seen.intersect(every).is_empty():
                return False
            seen = every if seen is None else seen.union(every)
    return True


def check_motion(fn: func.FuncOp, unit: Unit, plan: Plan, insert_before: Operation | None) -> None:
    """The writers move from their places to inside the band: nothing in between may conflict."""
    block = fn.body.block
    unit_bufs = set(unit.buffers)
    in_band_before = []
    for op in plan.band.block.ops:
        if op is insert_before:
            break
        in_band_before.append(op)
    for w in unit.writers:
        others = [o for o in ops_between(block, w, plan.band) if o not in unit.writers]
        others += in_band_before
        mine = effects(w)
        mine.reads -= unit_bufs
        mine.writes -= unit_bufs
        for o in others:
            theirs = effects(o)
            theirs.reads -= unit_bufs
            theirs.writes -= unit_bufs
            if mine.conflicts_with(theirs):
                name = o.nest_name.data if isinstance(o, loop.NestOp) else o.name
                raise Refused(f"'{w.nest_name.data}' cannot move past '{name}', which touches what it uses")


def first_reader(band: loop.BandOp, unit_bufs: set[SSAValue]) -> Operation | None:
    for op in band.block.ops:
        if any(root(v) in unit_bufs for n in nests_in(op) for v in n.ins):
            return op
    return None


def apply_plan(unit: Unit, plan: Plan, names: Names, options: FuseOptions) -> tuple[list[Operation], dict[SSAValue, SSAValue]]:
    """Clone the writers into the band with private scratch; returns what was added and the
    buffer -> scratch map (to undo)."""
    from mlfuse.poly.storage import scratch_bytes

    band = plan.band
    args = list(band.block.args)
    nb = len(args)
    unit_bufs = set(unit.buffers)
    anchor = first_reader(band, unit_bufs)
    added: list[Operation] = []
    scratch: dict[SSAValue, SSAValue] = {}
    first = band.block.first_op
    for b in unit.buffers:
        t = b.type
        assert isinstance(t, MemRefType)
        alloca = memref.AllocaOp.get(t.get_element_type(), shape=t.get_shape())
        band.block.insert_op_before(alloca, first) if first is not None else band.block.add_op(alloca)
        scratch[b] = alloca.memref
        added.append(alloca)
    for w in unit.writers:
        if w not in plan.tiles:
            continue
        bounds = plan.tiles[w]
        clone = rebuild_nest(
            w,
            args,
            [b.maps(nb, k)[0] for k, b in enumerate(bounds)],
            [b.maps(nb, k)[1] for k, b in enumerate(bounds)],
            [with_symbols(m, nb) for m in w.access_maps],
            buffers=scratch,
        )
        if anchor is not None:
            band.block.insert_op_before(clone, anchor)
        else:
            band.block.add_op(clone)
        added.append(clone)
    # the band's readers now read the scratch
    for nest in nests_in(band):
        for i, v in enumerate(nest.operands):
            if v in scratch:
                nest.operands[i] = scratch[v]
    try:
        problems = cross_tile_conflicts(band, names)
    except Unsupported as e:
        problems = [str(e)]
    if problems:
        undo(band, added, scratch)
        raise Refused(f"a dependence would cross tiles: {problems[0]}")
    total = sum(scratch_bytes(band, s, names) for s in scratch.values())
    if total > options.scratch_limit:
        undo(band, added, scratch)
        raise Refused(f"its tile-local buffers would need {total} bytes (limit {options.scratch_limit})")
    return added, scratch


def undo(band: loop.BandOp, added: list[Operation], scratch: dict[SSAValue, SSAValue]) -> None:
    back = {s: b for b, s in scratch.items()}
    for nest in nests_in(band):
        for i, v in enumerate(nest.operands):
            if v in back:
                nest.operands[i] = back[v]
    for op in reversed(added):
        if isinstance(op, loop.NestOp):
            op.detach()
            op.erase()
    for op in added:
        if isinstance(op, memref.AllocaOp):
            op.detach()
            op.erase()


def fuse_buffer(
    fn: func.FuncOp, buf: SSAValue, names: Names, options: FuseOptions, position: Mapping[Operation, int]
) -> Unit:
    """Fuse the unit writing `buf` into every tile band that reads it, or raise Refused.
    `position`: the block's (block_positions); a refusal leaves its top-level ops as they
    were, so one walk serves every candidate up to the next fusion."""
    unit = find_unit(fn, buf, position)
    plans = [plan_band(unit, band, names, options) for band in unit.readers]
    if len(plans) > 1 and not extensions_disjoint(plans, names):
        raise Refused(
            "shared producer: its extensions for the different live-out bands intersect "
            "(fusing would add redundant work)"
        )
    for p in plans:
        check_motion(fn, unit, p, first_reader(p.band, set(unit.buffers)))
    done: list[tuple[Plan, list[Operation], dict[SSAValue, SSAValue]]] = []
    try:
        for p in plans:
            done.append((p, *apply_plan(unit, p, names, options)))
    except Refused:
        for p, added, scratch in done:
            undo(p.band, added, scratch)
        raise
    block = fn.body.block
    used = [b for b in operand_buffers(unit.writers) if b not in unit.buffers]  # read in the bands now
    for w in unit.writers:
        w.detach()
        w.erase()
    for b in unit.buffers:
        for u in list(b.uses):
            assert isinstance(u.operation, memref.DeallocOp)
            u.operation.detach()
            u.operation.erase()
        b.owner.detach()
        b.owner.erase()
    place_deallocs(block, used)
    return unit


def candidates(fn: func.FuncOp, scope: str = "function") -> list[SSAValue]:
    """Intermediates read inside tile bands, consumers first (last band first); in scope
    "group", only those that the band's own window group writes and alone reads."""
    block = fn.body.block
    found: list[SSAValue] = []
    for op in reversed(list(block.ops)):
        if not is_tile_band(op):
            continue
        for nest in reversed(nests_in(op)):
            for v in nest.ins:
                b = root(v)
                if is_intermediate(b, fn) and b not in found and _in_scope(b, op, fn, scope):
                    found.append(b)
    return found


def _in_scope(buf: SSAValue, band: Operation, fn: func.FuncOp, scope: str) -> bool:
    if scope == "function":
        return True
    users = [u.operation for u in buf.uses if not isinstance(u.operation, memref.DeallocOp)]
    tops = {top_ancestor(u, fn.body.block) for u in users}
    return group_of(band) is not None and may_join([band, *(t for t in tops if t is not None)], scope)


def post_tile_fuse(
    fn: func.FuncOp, options: FuseOptions = FuseOptions(), remark: Remark | None = None, scope: str = "function"
) -> int:
    """Fuse producers into the tile bands of `fn` until nothing more fuses; returns the count."""
    names = Names()
    fused = 0
    refused: dict[SSAValue, str] = {}
    while True:
        progress = False
        # one walk per fusion, not per candidate: each candidate's walk made this quadratic in
        # the block (DenseNet-121: 960 candidates over 42 fusions, half the pass's time)
        position = block_positions(fn.body.block)
        for buf in candidates(fn, scope):
            if buf in refused:
                continue
            try:
                fuse_buffer(fn, buf, names, options, position)
            except Refused as e:
                refused[buf] = str(e)
                continue
            fused += 1
            progress = True
            refused.clear()  # a fusion can make earlier refusals possible
            break
        if not progress:
            break
    if remark is not None:
        for buf, why in refused.items():
            ws = writers(buf, fn.body.block) or []
            remark(ws[0] if ws else fn, f"not fused into the tiles: {why}")
    return fused
