"""Footprints, extension domains and tile-local buffer boxes (isl set arithmetic).

For a tile T of a consumer (a parametric domain `[T] -> { C[i] }`):

- the upwards-exposed footprint on a buffer is the image of the tile's instances
  under the read relations: `F(T) = union_r  C_T . read_r`;
- the extension of a producer (the instances that write the footprint) is
  `E(T) = { p in P : write(p) in F(T) }`, computed for every writer; overlapping
  footprints of neighbouring tiles give overlapping (recomputed) extensions;
- a tile-local buffer for a buffer accessed in a tile holds the box
  `[O(T), O(T) + size)`, where the origin O(T) is an affine function of the tile
  index (so accesses can be rebased with symbols) and the size is the largest
  extent over all tiles.
"""

from __future__ import annotations

from collections.abc import Sequence

import islpy as isl
from xdsl.ir.affine import AffineExpr

from mlfuse.poly.islconv import Unsupported, affine_lower_bounds, expr_text, to_band_map

# A footprint or extension of more pieces (basic sets) than MAX_PIECES, or a piece with
# more existential variables than MAX_DIVS, is replaced by its polyhedral hull: one piece
# without them that holds it all. Each channel shuffle (a reshape, transpose, reshape:
# floor divisions and remainders) that a footprint is carried back through doubled its
# pieces and added existentials, and isl's coalescing of them took seconds: a chain of 5
# of ShuffleNetV2's units took loop-tile over a minute, the model did not compile.
MAX_PIECES = 8
MAX_DIVS = 8


def bounded(s: isl.Set, within: isl.Set | None = None) -> isl.Set:
    """`s` coalesced, or its polyhedral hull (within `within`, if given) where it has more
    than MAX_PIECES pieces or a piece more than MAX_DIVS existentials (a superset: a tile
    recomputes more than it needs, never less)."""
    pieces = s.get_basic_sets()
    if len(pieces) <= MAX_PIECES and all(p.dim(isl.dim_type.div) <= MAX_DIVS for p in pieces):
        s = s.coalesce()
        if s.n_basic_set() <= MAX_PIECES:
            return s
    hull = isl.Set.from_basic_set(s.polyhedral_hull())
    return hull.intersect(within) if within is not None else hull


def footprint(readers: Sequence[tuple[isl.Set, isl.Map]]) -> isl.Set | None:
    """The union of `domain . relation` over (domain, read relation) pairs (`bounded`);
    None if no reader."""
    result = None
    for dom, rel in readers:
        img = dom.apply(rel.intersect_domain(dom))
        result = img if result is None else result.union(img)
    return bounded(result) if result is not None else None


def extension(domain: isl.Set, writes: Sequence[isl.Map], footprints: Sequence[isl.Set]) -> isl.Set:
    """The instances of `domain` that write any element of the matching footprint:
    `union_k { p in domain : writes[k](p) in footprints[k] }` (`bounded`, within `domain`)."""
    result = None
    for rel, fp in zip(writes, footprints):
        ext = rel.intersect_domain(domain).intersect_range(fp).domain()
        result = ext if result is None else result.union(ext)
    if result is None:
        raise ValueError("extension needs at least one write relation")
    return bounded(result, within=domain)


def scratch_box(
    accessed: isl.Set, band_params: Sequence[str], band_sizes: Sequence[int]
) -> tuple[list[AffineExpr], list[int]]:
    """(origin, shape) of the smallest box `[O(T), O(T) + shape)` with affine O(T)
    that holds `accessed(T)` for every tile T. Origins are expressions in symbols s_k =
    band_params[k]."""
    param_pos = {p: k for k, p in enumerate(band_params)}
    from mlfuse.poly.islconv import band_context

    ctx = band_context(band_params, band_sizes)
    # [T, x] as one flat set, to maximize x_d - O_d(T) over tiles and points together
    flat = to_band_map(accessed, band_params, band_sizes).wrap().flatten()
    nt, nx = len(band_params), accessed.dim(isl.dim_type.set)
    tnames = [f"t{k}" for k in range(nt)]
    xnames = [f"x{k}" for k in range(nx)]
    origin, shape = [], []
    for d in range(nx):
        best: tuple[int, AffineExpr] | None = None
        for cand in affine_lower_bounds(accessed, d, param_pos, ctx):
            diff = isl.Map(f"{{ [{', '.join(tnames + xnames)}] -> [{xnames[d]} - ({expr_text(cand, (), tnames)})] }}")
            extent = flat.apply(diff).dim_max_val(0)
            if not extent.is_int():
                continue
            size = int(extent.to_python()) + 1
            if best is None or size < best[0]:
                best = (size, cand)
        if best is None:
            raise Unsupported(f"no affine origin for dimension {d} of {accessed}")
        shape.append(best[0])
        origin.append(best[1])
    return origin, shape
