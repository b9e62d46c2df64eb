"""Loop IR <-> islpy: iteration domains, access relations and loop bounds.

This is the one module that turns `loop.nest`s into isl objects and isl objects
back into loop IR (affine bounds). Conventions:

- a nest is a statement `S<k>[i0, ...]`; a buffer is a tuple `B<k>[...]` (callers
  pass the root buffer of a view: views are treated conservatively);
- the symbol operands of a nest are isl parameters named after their SSA values,
  so nests of one band that share band ivs share parameters;
- a nest's domain is `[params] -> { S[i] : max(lower) <= i < min(upper) }`, where
  the bounds of dimension k may use dimensions 0..k-1;
- `to_band_map` turns those parameters into input dimensions: `{ [T...] -> S[i] }`,
  the relation from tile index to statement instances (what dependence checks
  between tiles need).

Back-conversion reads bounds off constraints: `a*x + f >= 0` with a > 0 is
`x >= ceildiv(-f, a)`, with a < 0 it is `x < floordiv(f, -a) + 1`; several lower
bounds make a max and several upper bounds a min, as in `loop.nest`.
`box_bounds` gives the rectangular hull (each dimension projected on its own);
`scan_bounds` gives bounds that scan the set dimension by dimension
(Fourier-Motzkin, as a polyhedral code generator does: a parallelogram comes back
as a parallelogram), exact for a convex set; a condition on the parameters alone
(the set is empty for some tiles) becomes an extra bound of dimension 0.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import islpy as isl
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from mlfuse.dialects import loop


class Unsupported(Exception):
    """The IR (or an isl result) has no exact conversion; callers stay conservative."""


class Names:
    """Stable isl names for the statements, buffers and symbols of one function."""

    def __init__(self) -> None:
        self._names: dict[object, str] = {}
        self._count: dict[str, int] = {}

    def _get(self, key: object, prefix: str) -> str:
        if key not in self._names:
            k = self._count.get(prefix, 0)
            self._count[prefix] = k + 1
            self._names[key] = f"{prefix}{k}"
        return self._names[key]

    def stmt(self, nest: Operation) -> str:
        return self._get(nest, "S")

    def buffer(self, value: SSAValue) -> str:
        return self._get(value, "B")

    def param(self, value: SSAValue) -> str:
        return self._get(value, "p")


# --- affine expressions -> isl text ------------------------------------------------------------


def expr_text(e: AffineExpr, dims: Sequence[str], syms: Sequence[str]) -> str:
    """An AffineExpr as isl syntax (floordiv -> floor, ceildiv -> ceil, mod -> mod)."""
    match e:
        case AffineConstantExpr():
            return str(e.value)
        case AffineDimExpr():
            return dims[e.position]
        case AffineSymExpr():
            return syms[e.position]
        case AffineBinaryOpExpr():
            lhs, rhs = expr_text(e.lhs, dims, syms), expr_text(e.rhs, dims, syms)
            match e.kind:
                case AffineBinaryOpKind.Add:
                    return f"({lhs} + {rhs})"
                case AffineBinaryOpKind.Mul:
                    return f"({lhs} * {rhs})"
                case AffineBinaryOpKind.FloorDiv:
                    return f"floor(({lhs}) / {rhs})"
                case AffineBinaryOpKind.CeilDiv:
                    return f"ceil(({lhs}) / {rhs})"
                case AffineBinaryOpKind.Mod:
                    return f"(({lhs}) mod {rhs})"
    raise Unsupported(f"affine expression {e}")


# isl's parser is most of what building a domain or an access costs, and the passes ask
# for the same nest's domain and accesses many times (post-tiling fusion of MobileNetV2:
# 1067 domains for a few hundred nests). islpy values are immutable (every operation
# returns a new object; arguments isl consumes are copied first), so one parse can be shared.
@functools.lru_cache(maxsize=4096)
def parse_set(text: str) -> isl.Set:
    return isl.Set(text)


@functools.lru_cache(maxsize=4096)
def parse_map(text: str) -> isl.Map:
    return isl.Map(text)


def dim_names(rank: int) -> list[str]:
    return [f"i{k}" for k in range(rank)]


def bound_constraints(nest: loop.NestOp, dims: Sequence[str], syms: Sequence[str]) -> list[str]:
    """`lower <= i` for every lower result and `i < upper` for every upper result."""
    out = []
    for d, (lo, hi) in enumerate(zip(nest.lower.data, nest.upper.data)):
        for e in lo.data.results:
            out.append(f"{expr_text(e, dims[:d], syms)} <= {dims[d]}")
        for e in hi.data.results:
            out.append(f"{dims[d]} < {expr_text(e, dims[:d], syms)}")
    return out


def _params(names: Sequence[str]) -> str:
    return f"[{', '.join(names)}] -> " if names else ""


def _conj(constraints: Sequence[str]) -> str:
    return f" : {' and '.join(constraints)}" if constraints else ""


def sym_names(nest: loop.NestOp, names: Names) -> list[str]:
    return [names.param(s) for s in nest.syms]


def domain(nest: loop.NestOp, names: Names) -> isl.Set:
    """`[syms] -> { S[i] : bounds }`."""
    if loop.has_indirect_reads(nest):  # its access maps do not say all it reads
        raise Unsupported(f"nest '{nest.nest_name.data}' reads data-dependently (loop.read)")
    dims, syms = dim_names(nest.rank), sym_names(nest, names)
    stmt = names.stmt(nest)
    return parse_set(f"{_params(syms)}{{ {stmt}[{', '.join(dims)}]{_conj(bound_constraints(nest, dims, syms))} }}")


@dataclass(frozen=True)
class Access:
    """One access of a nest: operand position, buffer, `{ S[i] -> B[x] }`, write or read."""

    position: int
    buffer: SSAValue
    relation: isl.Map
    is_write: bool


def access_relation(nest: loop.NestOp, m: AffineMap, buffer_name: str, names: Names) -> isl.Map:
    dims, syms = dim_names(nest.rank), sym_names(nest, names)
    results = ", ".join(expr_text(e, dims, syms) for e in m.results)
    return parse_map(f"{_params(syms)}{{ {names.stmt(nest)}[{', '.join(dims)}] -> {buffer_name}[{results}] }}")


def accesses(nest: loop.NestOp, names: Names, root=lambda v: v) -> list[Access]:
    """Every read (ins) and write (outs) of `nest`; `root` maps views to the buffer they alias."""
    n_in = len(nest.ins)
    result = []
    for k, (buf, m) in enumerate(zip([*nest.ins, *nest.outs], nest.access_maps)):
        b = root(buf)
        result.append(Access(k, buf, access_relation(nest, m, names.buffer(b), names), k >= n_in))
    return result


def to_band_map(s: isl.Set, band_params: Sequence[str], sizes: Sequence[int]) -> isl.Map:
    """`[T] -> { X }` to `{ [T] -> X : 0 <= T < sizes }`: tile index as input dimensions."""
    m = isl.Map.from_range(s.intersect_params(band_context(band_params, sizes)))
    for k, p in enumerate(band_params):
        pos = m.find_dim_by_name(isl.dim_type.param, p)
        if pos < 0:  # the set does not depend on this tile index
            m = m.insert_dims(isl.dim_type.in_, k, 1)
        else:
            m = m.move_dims(isl.dim_type.in_, k, isl.dim_type.param, pos, 1)
    return m


def band_context(band_params: Sequence[str], sizes: Sequence[int]) -> isl.Set:
    """`[T] -> { : 0 <= T < sizes }`: the valid tile indices."""
    cons = [f"0 <= {p} < {n}" for p, n in zip(band_params, sizes)]
    return parse_set(f"{_params(band_params)}{{ {_conj(cons)} }}")


def band_tiles(band: loop.BandOp, names: Names) -> isl.Set:
    """band_context of `band`'s own tile indices, named by `names`."""
    return band_context([names.param(a) for a in band.block.args], band.sizes)


# --- isl -> affine bounds -----------------------------------------------------------------------


def _val(v: isl.Val) -> int:
    return int(v.to_python())


@dataclass(frozen=True)
class Bounds:
    """One dimension k of a domain: max(lower) <= x < min(upper), in terms of symbols s0..
    (the params) and, for a scanned (non-box) domain, the outer dimensions d0..d(k-1)."""

    lower: tuple[AffineExpr, ...]
    upper: tuple[AffineExpr, ...]

    def uses_dims(self) -> bool:
        return any(isinstance(x, AffineDimExpr) for e in (*self.lower, *self.upper) for x in e.dfs())

    def maps(self, nsyms: int, ndims: int = 0) -> tuple[AffineMap, AffineMap]:
        """(lower, upper) maps with `nsyms` symbols and `ndims` dims, both dropped where unused
        (constant bounds print as integers)."""

        def one(results: tuple[AffineExpr, ...]) -> AffineMap:
            constant = all(isinstance(e, AffineConstantExpr) for e in results)
            dims_used = any(isinstance(x, AffineDimExpr) for e in results for x in e.dfs())
            return AffineMap(ndims if dims_used else 0, 0 if constant else nsyms, results)

        return one(self.lower), one(self.upper)


def linear_expr(coeffs: Sequence[tuple[AffineExpr, int]], constant: int) -> AffineExpr:
    """sum(c * v) + constant, written the way a person would (s0 * 64 + 64)."""
    e: AffineExpr | None = None
    for v, c in coeffs:
        if c == 0:
            continue
        term = v if c == 1 else v * c
        e = term if e is None else e + term
    if e is None:
        return AffineExpr.constant(constant)
    return e + constant if constant != 0 else e


def param_expr(coeffs: Sequence[tuple[int, int]], constant: int) -> AffineExpr:
    """sum(c * s_p) + constant."""
    return linear_expr([(AffineExpr.symbol(p), c) for p, c in coeffs], constant)


def _constraint_bounds(
    c: isl.Constraint, target: int, param_pos: dict[str, int], space_params: list[str]
) -> list[tuple[str, AffineExpr]]:
    """[('lower' | 'upper', expr)] that a constraint puts on set dimension `target`, in terms
    of the params and the set dimensions before it (an equality gives both)."""
    a = _val(c.get_coefficient_val(isl.dim_type.set, target))
    if a == 0:
        return []
    if c.involves_dims(isl.dim_type.div, 0, c.get_local_space().dim(isl.dim_type.div)):
        raise Unsupported("a bound with an existential (stride) has no affine form")
    coeffs: list[tuple[AffineExpr, int]] = []
    for j in range(target):
        b = _val(c.get_coefficient_val(isl.dim_type.set, j))
        if b != 0:
            coeffs.append((AffineExpr.dimension(j), b))
    for k, name in enumerate(space_params):
        b = _val(c.get_coefficient_val(isl.dim_type.param, k))
        if b != 0:
            if name not in param_pos:
                raise Unsupported(f"a bound depends on parameter {name}, which is not a symbol here")
            coeffs.append((AffineExpr.symbol(param_pos[name]), b))
    const = _val(c.get_constant_val())
    found = []
    # a*x + f >= 0 with a > 0:  x >= ceil(-f / a)
    # a*x + f >= 0 with a < 0:  x <= floor(f / -a), i.e. x < floor(f / -a) + 1
    for sign in ((1, -1) if c.is_equality() else (1,)):
        a_s, coeffs_s, const_s = a * sign, [(v, b * sign) for v, b in coeffs], const * sign
        if a_s > 0:
            neg = linear_expr([(v, -b) for v, b in coeffs_s], -const_s)
            found.append(("lower", neg if a_s == 1 else neg.ceil_div(a_s)))
        else:
            f = linear_expr(coeffs_s, const_s)
            found.append(("upper", (f if a_s == -1 else f // (-a_s)) + 1))
    return found


def _hull(s: isl.Set, context: isl.Set | None) -> isl.BasicSet:
    if context is not None:
        s = s.intersect_params(context)
    s = s.coalesce()
    if s.is_empty():
        raise Unsupported("an empty set has no bounds")
    hull = s.simple_hull() if s.n_basic_set() > 1 else s.get_basic_sets()[0]
    if hull.dim(isl.dim_type.div) != 0:
        hull = hull.remove_divs()
    hull = hull.remove_redundancies()
    if context is not None:
        hull = hull.gist(isl.BasicSet.universe(hull.get_space()).intersect_params(context.simple_hull()))
    return hull


def _bounds_of(hull: isl.BasicSet, target: int, param_pos: dict[str, int], what: str) -> Bounds:
    params = hull.get_space().get_var_names(isl.dim_type.param)
    lower: list[AffineExpr] = []
    upper: list[AffineExpr] = []
    for c in hull.get_constraints():
        if any(_val(c.get_coefficient_val(isl.dim_type.set, j)) for j in range(target + 1, hull.dim(isl.dim_type.set))):
            continue
        for kind, e in _constraint_bounds(c, target, param_pos, params):
            (lower if kind == "lower" else upper).append(e)
    if not lower or not upper:
        raise Unsupported(f"{what} is unbounded")

    # tile-dependent bounds first, the clamps at the border of the domain last
    def order(es: list[AffineExpr]) -> tuple[AffineExpr, ...]:
        unique = list(dict.fromkeys(es))
        return tuple(sorted(unique, key=lambda e: isinstance(e, AffineConstantExpr)))

    return Bounds(order(lower), order(upper))


def dimension_bounds(s: isl.Set, dim: int, param_pos: dict[str, int], context: isl.Set | None = None) -> Bounds:
    """Bounds of `s` along `dim`: the rectangular hull of its projection, as max/min of affine
    functions of the parameters. The hull may be larger than the projection (a union)."""
    n = s.dim(isl.dim_type.set)
    proj = s.project_out(isl.dim_type.set, dim + 1, n - dim - 1).project_out(isl.dim_type.set, 0, dim)
    return _bounds_of(_hull(proj, context), 0, param_pos, f"dimension {dim} of {s}")


def scan_bounds(s: isl.Set, param_pos: dict[str, int], context: isl.Set | None = None) -> list[Bounds]:
    """Loop bounds that scan `s` (or its convex hull, if it is a union) in order: the bounds of
    dimension k use the params and dimensions 0..k-1 (Fourier-Motzkin, as a polyhedral code
    generator does). For a box they are the box; for a parallelogram, skewed."""
    n = s.dim(isl.dim_type.set)
    hull = _hull(s, context)
    result = []
    for k in range(n):
        proj = hull.project_out(isl.dim_type.set, k + 1, n - k - 1)
        if proj.dim(isl.dim_type.div):  # a stride: scan its rational shadow, inner bounds
            proj = proj.remove_divs()  # (equalities) keep only the right points
        proj = proj.remove_redundancies()
        if context is not None:
            proj = proj.gist(isl.BasicSet.universe(proj.get_space()).intersect_params(context.simple_hull()))
        result.append(_bounds_of(proj, k, param_pos, f"dimension {k} of {s}"))
    if n:
        result[0] = _guard_first_dimension(hull, result[0], param_pos, context)
    return result


def _guard_first_dimension(hull: isl.BasicSet, first: Bounds, param_pos: dict[str, int], context: isl.Set | None) -> Bounds:
    """Conditions on the parameters alone (the set is empty for some tiles) become extra
    upper bounds of dimension 0 that empty it exactly when the condition fails:
    g(T) >= 0 gives `l + M * (g(T) + 1)`, with l a lower bound and M larger than any
    extent, which is <= l when g(T) < 0 and >= the other upper bounds otherwise."""
    params = hull.get_space().get_var_names(isl.dim_type.param)
    n = hull.dim(isl.dim_type.set)
    conditions: list[AffineExpr] = []
    for c in hull.get_constraints():
        if any(_val(c.get_coefficient_val(isl.dim_type.set, j)) for j in range(n)):
            continue
        coeffs = []
        for k, name in enumerate(params):
            b = _val(c.get_coefficient_val(isl.dim_type.param, k))
            if b:
                if name not in param_pos:
                    raise Unsupported(f"a condition on parameter {name}, which is not a symbol here")
                coeffs.append((param_pos[name], b))
        const = _val(c.get_constant_val())
        conditions.append(param_expr(coeffs, const))
        if c.is_equality():
            conditions.append(param_expr([(p, -b) for p, b in coeffs], -const))
    if not conditions:
        return first
    # M: the largest distance from the lower bound l to a point of dimension 0, plus one
    names = sorted(param_pos, key=param_pos.get)
    bounded = isl.Set.from_basic_set(hull)
    if context is not None:
        bounded = bounded.intersect_params(context)
    m = isl.Map.from_range(bounded)
    for k, p in enumerate(names):
        pos = m.find_dim_by_name(isl.dim_type.param, p)
        m = m.move_dims(isl.dim_type.in_, k, isl.dim_type.param, pos, 1) if pos >= 0 else m.insert_dims(isl.dim_type.in_, k, 1)
    flat = m.wrap().flatten()
    ts = [f"t{k}" for k in range(len(names))]
    xs = [f"x{k}" for k in range(n)]
    low = first.lower[0]
    dist = isl.Map(f"{{ [{', '.join(ts + xs)}] -> [x0 - ({expr_text(low, (), ts)})] }}")
    top = flat.apply(dist).dim_max_val(0)
    if not top.is_int():
        raise Unsupported("unbounded dimension")
    big = max(1, int(top.to_python()) + 1)
    return Bounds(first.lower, (*first.upper, *(low + (g + 1) * big for g in conditions)))


def box_bounds(s: isl.Set, param_pos: dict[str, int], context: isl.Set | None = None) -> list[Bounds]:
    """The rectangular hull of `s`, one `Bounds` per dimension (see `dimension_bounds`)."""
    return [dimension_bounds(s, d, param_pos, context) for d in range(s.dim(isl.dim_type.set))]


def bounds_set(bounds: Sequence[Bounds], tuple_name: str, param_names: Sequence[str]) -> isl.Set:
    """The isl set `[params] -> { name[x] : bounds }` that bounds scan (to check exactness)."""
    dims = dim_names(len(bounds))
    cons = []
    for d, b in enumerate(bounds):
        cons += [f"{expr_text(e, dims[:d], param_names)} <= {dims[d]}" for e in b.lower]
        cons += [f"{dims[d]} < {expr_text(e, dims[:d], param_names)}" for e in b.upper]
    return isl.Set(f"{_params(param_names)}{{ {tuple_name}[{', '.join(dims)}]{_conj(cons)} }}")


def bounds_exact(s: isl.Set, bounds: Sequence[Bounds], param_names: Sequence[str], context: isl.Set | None = None) -> bool:
    """Do `bounds` scan exactly the points of `s` (for the parameter values in `context`)?"""
    scanned = bounds_set(bounds, s.get_tuple_name() or "", param_names)
    if context is not None:
        scanned, s = scanned.intersect_params(context), s.intersect_params(context)
    return scanned.is_equal(s)


def affine_lower_bounds(s: isl.Set, dim: int, param_pos: dict[str, int], context: isl.Set | None = None) -> list[AffineExpr]:
    """Single affine functions of the parameters that are lower bounds of `s` along `dim`
    everywhere: candidates for the origin of a tile-local buffer (which must be affine)."""
    b = dimension_bounds(s, dim, param_pos, context)
    names = sorted(param_pos, key=param_pos.get)
    target = s if context is None else s.intersect_params(context)
    ok = []
    for e in b.lower:
        below = isl.Set(
            f"{_params(names)}{{ {s.get_tuple_name() or ''}[{', '.join(dim_names(s.dim(isl.dim_type.set)))}] : "
            f"i{dim} >= {expr_text(e, (), names)} }}"
        )
        if target.is_subset(below):
            ok.append(e)
    return ok


# --- evaluation (concrete symbol values) -------------------------------------------------------------


def eval_bounds(b: Bounds, syms: Sequence[int], dims: Sequence[int] = ()) -> tuple[int, int]:
    lo = max(e.eval(dims, syms) for e in b.lower)
    hi = min(e.eval(dims, syms) for e in b.upper)
    return lo, hi



def set_points(s: isl.Set) -> set[tuple[int, ...]]:
    """The points of a bounded parameter-free set (for tests and small domains)."""
    pts: set[tuple[int, ...]] = set()
    n = s.dim(isl.dim_type.set)

    def add(p: isl.Point) -> None:
        pts.add(tuple(_val(p.get_coordinate_val(isl.dim_type.set, k)) for k in range(n)))

    s.foreach_point(add)
    return pts


def fix_params(s: isl.Set | isl.Map, values: dict[str, int]):
    """`s` with the named parameters fixed to values."""
    for name, v in values.items():
        pos = s.find_dim_by_name(isl.dim_type.param, name)
        if pos >= 0:
            s = s.fix_val(isl.dim_type.param, pos, isl.Val.int_from_si(s.get_ctx(), v))
    return s
