"""mlfuse.poly.islconv (loop IR <-> islpy) against brute-force enumeration on small domains.

Random nests (bounds that are max/min of affine functions of symbols and of outer
dimensions, access maps with floordiv/mod) are enumerated point by point with
concrete symbol values and compared with the points of the isl sets; the bounds
read back from isl sets must scan exactly those points.
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
from mlfuse.poly import islconv
from mlfuse.poly.islconv import (
    Names,
    access_relation,
    bounds_exact,
    box_bounds,
    domain,
    fix_params,
    scan_bounds,
    set_points,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def make_nest(lower, upper, maps, nsyms: int, buf_shape=(64,)):
    """A nest over symbols s0.. with the given bound results and access maps (one input per map)."""
    rank = len(lower)
    mem = MemRefType(f32, list(buf_shape))
    fblock = Block(arg_types=[IndexType()] * nsyms + [mem])
    syms, buf = list(fblock.args[:nsyms]), fblock.args[nsyms]
    body = Block(arg_types=[f32] * (len(maps) + 1))
    body.add_op(loop.YieldOp(body.args[0]))
    lo = [AffineMapAttr(AffineMap(d, nsyms, tuple(r))) for d, r in enumerate(lower)]
    hi = [AffineMapAttr(AffineMap(d, nsyms, tuple(r))) for d, r in enumerate(upper)]
    out_map = AffineMap(rank, nsyms, tuple(AffineExpr.constant(0) for _ in buf_shape))
    nest = loop.NestOp("n", (lo, hi), [loop.REDUCTION] * rank, [buf] * len(maps), [buf],
                       [*maps, out_map], Region(body), syms)
    fblock.add_ops([nest, func.ReturnOp()])
    func.FuncOp("f", (list(fblock.arg_types), []), Region(fblock))
    return nest


def brute_domain(nest, sym_values):
    """Points of a nest's domain by evaluating its bounds loop by loop."""
    points = []

    def rec(prefix):
        d = len(prefix)
        if d == nest.rank:
            points.append(tuple(prefix))
            return
        lo = max(e.eval(prefix[: nest.lower.data[d].data.num_dims], sym_values) for e in nest.lower.data[d].data.results)
        hi = min(e.eval(prefix[: nest.upper.data[d].data.num_dims], sym_values) for e in nest.upper.data[d].data.results)
        for v in range(lo, hi):
            rec(prefix + [v])

    rec([])
    return set(points)


@st.composite
def affine_of(draw, ndims: int, nsyms: int, lo: int = -3, hi: int = 6):
    e = AffineExpr.constant(draw(st.integers(lo, hi)))
    for k in range(nsyms):
        c = draw(st.integers(-2, 3))
        if c:
            e = e + AffineExpr.symbol(k) * c
    for j in range(ndims):
        c = draw(st.integers(-1, 1))
        if c:
            e = e + AffineExpr.dimension(j) * c
    return e


@st.composite
def random_nest(draw):
    rank = draw(st.integers(1, 3))
    nsyms = draw(st.integers(0, 2))
    lower, upper = [], []
    for d in range(rank):
        outer = draw(st.integers(0, d))  # how many outer dims bounds may use
        lower.append([draw(affine_of(outer, nsyms, -3, 2)) for _ in range(draw(st.integers(1, 2)))])
        upper.append([draw(affine_of(outer, nsyms, 2, 7)) for _ in range(draw(st.integers(1, 2)))])
    return make_nest(lower, upper, [], nsyms), nsyms


def sym_assignments(nsyms: int):
    return list(itertools.product(range(0, 3), repeat=nsyms))


@SETTINGS
@given(random_nest())
def test_domain_matches_enumeration(case):
    nest, nsyms = case
    names = Names()
    dom = domain(nest, names)
    params = [names.param(s) for s in nest.syms]
    for values in sym_assignments(nsyms):
        got = set_points(fix_params(dom, dict(zip(params, values))).project_out(
            islconv.isl.dim_type.param, 0, dom.dim(islconv.isl.dim_type.param)))
        assert got == brute_domain(nest, list(values))


@st.composite
def access_case(draw):
    rank = draw(st.integers(1, 2))
    nsyms = draw(st.integers(0, 1))
    results = []
    for _ in range(draw(st.integers(1, 2))):
        e = draw(affine_of(rank, nsyms, -2, 2))
        kind = draw(st.sampled_from(["plain", "floordiv", "mod", "ceildiv", "scaled"]))
        k = draw(st.integers(2, 3))
        e = {"plain": e, "floordiv": e // k, "mod": e % k, "ceildiv": e.ceil_div(k), "scaled": e * k}[kind]
        results.append(e)
    m = AffineMap(rank, nsyms, tuple(results))
    bounds = [[AffineExpr.constant(0)] for _ in range(rank)], [[AffineExpr.constant(draw(st.integers(1, 5)))] for _ in range(rank)]
    return make_nest(*bounds, [m], nsyms, buf_shape=(64,) * len(results)), m, nsyms


@SETTINGS
@given(access_case())
def test_access_relation_matches_evaluation(case):
    nest, m, nsyms = case
    names = Names()
    rel = access_relation(nest, m, "B", names)
    dom = domain(nest, names)
    params = [names.param(s) for s in nest.syms]
    for values in sym_assignments(nsyms):
        fixed = {p: v for p, v in zip(params, values)}
        image = fix_params(dom, fixed).apply(fix_params(rel, fixed))
        image = image.project_out(islconv.isl.dim_type.param, 0, image.dim(islconv.isl.dim_type.param))
        want = {m.eval(list(p), list(values)) for p in brute_domain(nest, list(values))}
        assert set_points(image) == want


def evaluated_points(bounds, sym_values):
    """Points scanned by bounds (a bound of dimension k may use dimensions < k)."""
    points = []

    def rec(prefix):
        d = len(prefix)
        if d == len(bounds):
            points.append(tuple(prefix))
            return
        lo, hi = islconv.eval_bounds(bounds[d], sym_values, prefix)
        for v in range(lo, hi):
            rec(prefix + [v])

    rec([])
    return set(points)


@SETTINGS
@given(random_nest())
def test_scan_and_box_bounds_read_back(case):
    nest, nsyms = case
    names = Names()
    dom = domain(nest, names)
    params = [names.param(s) for s in nest.syms]
    param_pos = {p: k for k, p in enumerate(params)}
    ctx = islconv.isl.Set(f"[{', '.join(params)}] -> {{ : {' and '.join(f'0 <= {p} < 3' for p in params) or 'true'} }}")
    nonempty = any(brute_domain(nest, list(v)) for v in sym_assignments(nsyms))
    if not nonempty:
        return
    scan = scan_bounds(dom, param_pos, ctx)
    box = box_bounds(dom, param_pos, ctx)
    # a nest's domain is convex: scanned exactly, also where it is empty for some
    # symbol values only (that condition becomes an extra bound of dimension 0)
    assert bounds_exact(dom, scan, params, ctx)
    for values in sym_assignments(nsyms):
        pts = brute_domain(nest, list(values))
        assert evaluated_points(scan, list(values)) == pts
        if pts:
            for d, b in enumerate(box):  # the box is the bounding box
                lo, hi = islconv.eval_bounds(b, list(values))
                assert (lo, hi - 1) == (min(p[d] for p in pts), max(p[d] for p in pts))


def test_union_hull_is_a_superset():
    """A union of two shifted boxes reads back as its rectangular hull."""
    s = islconv.isl.Set("[T] -> { B[x, y] : (8T <= x < 8T + 8 and 0 <= y < 4) or (8T + 2 <= x < 8T + 10 and 3 <= y < 6) }")
    ctx = islconv.isl.Set("[T] -> { : 0 <= T < 3 }")
    box = box_bounds(s, {"T": 0}, ctx)
    for t in range(3):
        assert islconv.eval_bounds(box[0], [t]) == (8 * t, 8 * t + 10)
        assert islconv.eval_bounds(box[1], [t]) == (0, 6)
    assert not bounds_exact(s, box, ["T"], ctx)
