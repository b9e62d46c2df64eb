"""Footprints, extensions and tile-local boxes (mlfuse.poly.footprint) against brute force.

Random small 2-D consumers are tiled (random tile sizes, boundary tiles included)
and read an intermediate through random stencils (offsets, strides, transposes);
a random producer writes it through a shifted or transposed map. For every tile,
the isl footprint and extension must equal the enumerated ones, their bounds read
back must cover exactly their bounding box (or scan them exactly when convex),
and the tile-local box must hold the footprint with the smallest size.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.dialects import func
from xdsl.dialects.builtin import AffineMapAttr, IndexType, MemRefType, f32
from xdsl.ir import Block, Region
from xdsl.ir.affine import AffineExpr, AffineMap

from mlfuse.dialects import loop
from mlfuse.poly.footprint import extension, footprint, scratch_box
from mlfuse.poly.islconv import (
    Names,
    access_relation,
    band_context,
    bounds_exact,
    box_bounds,
    domain,
    eval_bounds,
    fix_params,
    isl,
    scan_bounds,
    set_points,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
s0, s1 = AffineExpr.symbol(0), AffineExpr.symbol(1)


def nest_with(lower, upper, maps, nsyms, buf_shape):
    mem = MemRefType(f32, list(buf_shape))
    fblock = Block(arg_types=[IndexType()] * nsyms + [mem])
    syms, buf = list(fblock.args[:nsyms]), fblock.args[nsyms]
    body = Block(arg_types=[f32] * (len(maps) + 1))
    body.add_op(loop.YieldOp(body.args[0]))
    lo = [AffineMapAttr(AffineMap(0, nsyms, tuple(r))) for r in lower]
    hi = [AffineMapAttr(AffineMap(0, nsyms, tuple(r))) for r in upper]
    out = AffineMap(2, nsyms, (d0, d1))
    nest = loop.NestOp("n", (lo, hi), [loop.PARALLEL] * 2, [buf] * len(maps), [buf], [*maps, out], Region(body), syms)
    fblock.add_ops([nest, func.ReturnOp()])
    func.FuncOp("f", (list(fblock.arg_types), []), Region(fblock))
    return nest


@st.composite
def stencil_case(draw):
    h, w = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    th, tw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    reads = []
    for _ in range(draw(st.integers(1, 3))):
        sh, sw = draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from([1, 1, 2]))
        a, b = draw(st.integers(0, 3)), draw(st.integers(0, 3))
        transpose = draw(st.booleans())
        r0, r1 = d0 * sh + a, d1 * sw + b
        reads.append(AffineMap(2, 2, (r1, r0) if transpose else (r0, r1)))
    write_shift = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    write_transposed = draw(st.booleans())
    return h, w, th, tw, reads, write_shift, write_transposed


def tiles(h, w, th, tw):
    return list(itertools.product(range(-(-h // th)), range(-(-w // tw))))


@SETTINGS
@given(stencil_case())
def test_footprint_extension_and_box(case):
    h, w, th, tw, reads, (c0, c1), transposed = case
    big = 2 * max(h, w) + 8
    names = Names()
    # the consumer's tile (T0, T1), with a min at the boundary
    consumer = nest_with([[s0 * th], [s1 * tw]], [[s0 * th + th, AffineExpr.constant(h)], [s1 * tw + tw, AffineExpr.constant(w)]],
                         reads, 2, (big, big))
    params = [names.param(s) for s in consumer.syms]
    ctx = band_context(params, [-(-h // th), -(-w // tw)])
    tile_dom = domain(consumer, names).intersect_params(ctx)
    rels = [access_relation(consumer, m, "t", names) for m in reads]
    fp = footprint([(tile_dom, r) for r in rels])
    # the producer writes t[(p0, p1) + shift] (or transposed) over a box covering the reads
    producer = nest_with([[AffineExpr.constant(0)]] * 2, [[AffineExpr.constant(big - 2)]] * 2, [], 0, (big, big))
    wmap = AffineMap(2, 0, (d1 + c1, d0 + c0) if transposed else (d0 + c0, d1 + c1))
    ext = extension(domain(producer, names), [access_relation(producer, wmap, "t", names)], [fp]).intersect_params(ctx)
    param_pos = {p: k for k, p in enumerate(params)}
    box = box_bounds(ext, param_pos, ctx) if not ext.is_empty() else None
    scan = scan_bounds(ext, param_pos, ctx) if not ext.is_empty() else None
    exact = scan is not None and bounds_exact(ext, scan, params, ctx)
    # where the extension's projection is one interval per tile (no union, no stride), the
    # box is its bounding box exactly; otherwise it may be larger
    def interval(proj):
        parts = proj.coalesce().get_basic_sets()
        return len(parts) <= 1 and all(b.dim(isl.dim_type.div) == 0 for b in parts)

    convex_along = [interval(ext.project_out(isl.dim_type.set, 1 - d, 1)) for d in range(2)]
    origin, shape = scratch_box(fp, params, ctx_sizes(h, w, th, tw))
    widest = [0, 0]
    for t0, t1 in tiles(h, w, th, tw):
        fixed = dict(zip(params, (t0, t1)))
        points = [(i, j) for i in range(t0 * th, min(t0 * th + th, h)) for j in range(t1 * tw, min(t1 * tw + tw, w))]
        want_fp = {m.eval([i, j], [t0, t1]) for m in reads for i, j in points}
        got_fp = set_points(fix_params(fp, fixed).project_out(isl.dim_type.param, 0, fp.dim(isl.dim_type.param)))
        assert got_fp == want_fp
        want_ext = {(p0, p1) for p0 in range(big - 2) for p1 in range(big - 2) if wmap.eval([p0, p1], []) in want_fp}
        got_ext = set_points(fix_params(ext, fixed).project_out(isl.dim_type.param, 0, ext.dim(isl.dim_type.param)))
        assert got_ext == want_ext
        if want_ext:
            for d, b in enumerate(box):  # the bounding box of this tile's extension (or larger, for a union)
                lo, hi = eval_bounds(b, [t0, t1])
                want = (min(p[d] for p in want_ext), max(p[d] for p in want_ext) + 1)
                assert (lo, hi) == want if convex_along[d] else lo <= want[0] and hi >= want[1]
        scanned = scanned_points(scan, [t0, t1]) if scan is not None else set()
        assert scanned == want_ext if exact else scanned >= want_ext
        # the tile-local box holds the footprint
        o = [e.eval([], [t0, t1]) for e in origin]
        for x in want_fp:
            assert all(0 <= x[d] - o[d] < shape[d] for d in range(2))
        for d in range(2):
            widest[d] = max([widest[d]] + [x[d] - o[d] + 1 for x in want_fp])
    assert widest == shape  # and no larger than some tile needs


def ctx_sizes(h, w, th, tw):
    return [-(-h // th), -(-w // tw)]


def scanned_points(bounds, syms):
    pts = set()

    def rec(prefix):
        if len(prefix) == len(bounds):
            pts.add(tuple(prefix))
            return
        lo, hi = eval_bounds(bounds[len(prefix)], syms, prefix)
        for v in range(lo, hi):
            rec(prefix + [v])

    rec([])
    return pts


def test_footprints_of_many_pieces_or_existentials_are_bounded(monkeypatch):
    """A footprint of more than MAX_PIECES pieces, or with a piece of more than MAX_DIVS
    existentials (what channel shuffles carried back leave), is its polyhedral hull: one
    piece, a superset; a smaller one stays exact. Extensions stay within their domain."""
    from mlfuse.poly.footprint import MAX_DIVS, MAX_PIECES, bounded

    ident = isl.Map("{ A[i] -> B[i] }")
    pieces = [(isl.Set(f"{{ A[i] : {3 * k} <= i <= {3 * k + 1} }}"), ident) for k in range(MAX_PIECES + 1)]
    exact = footprint(pieces[:3])
    assert exact is not None and exact.n_basic_set() == 3 and exact.is_equal(isl.Set("{ B[i] : 0 <= i <= 7 and i mod 3 != 2 }"))
    hull = footprint(pieces)
    assert hull is not None and hull.n_basic_set() == 1
    assert hull.is_equal(isl.Set(f"{{ B[i] : 0 <= i <= {3 * MAX_PIECES + 1} }}"))
    strided = isl.Set("{ B[i] : 0 <= i <= 100 and i mod 2 = 0 }")  # one existential
    assert MAX_DIVS >= 1 and bounded(strided).is_equal(strided)
    monkeypatch.setattr("mlfuse.poly.footprint.MAX_DIVS", 0)
    assert bounded(strided).is_equal(isl.Set("{ B[i] : 0 <= i <= 100 }"))
    domain_ = isl.Set("{ W[p] : 0 <= p <= 20 }")
    ext = extension(domain_, [isl.Map("{ W[p] -> B[p] }")], [hull])
    assert ext.is_subset(domain_) and ext.is_equal(isl.Set(f"{{ W[p] : 0 <= p <= {min(20, 3 * MAX_PIECES + 1)} }}"))
