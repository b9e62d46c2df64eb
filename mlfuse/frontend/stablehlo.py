"""StableHLO (and chlo) to the graph dialect: how jax's programs reach mlfuse.

`convert_stablehlo(module)` rewrites, in place, a module as `jax.jit(f).lower(...)`
prints it:

1. calls are inlined: jax outlines helpers such as `@_where`, `@relu` or `@_pad` as
   private functions; the graph pipeline compiles one function, so every call is
   replaced by the callee's body and private functions left uncalled are erased;
2. one `RewritePattern` per op family turns each stablehlo/chlo op into graph ops,
   which carry the original op's location (so later diagnostics still point at the
   stablehlo line);
3. any stablehlo/chlo op left, and every case a pattern cannot express, is a
   located `Diagnostic` ("'stablehlo.sine' is not supported ..."), never a traceback.

What does not map one to one:
- `broadcast_in_dim` with non-increasing dims transposes first (graph.broadcast
  keeps dimension order);
- `dot_general` becomes transposes and reshapes around `graph.matmul` (no batch
  dimensions) or `graph.batch_matmul`: [batch..., M, K] x [batch..., K, N];
- `reduce` with an add/multiply/maximum/minimum body becomes graph.reduce_*; an init
  value that is not the op's identity is combined afterwards; and/or of i1 (all, any)
  are the min/max of the values as i8;
- `reduce` of several inputs (jnp.argmax, argmin, lax.reduce of tuples) or with any
  other body is a tree reduction: along each reduced axis (innermost first) the body's
  ops, converted by their own patterns, combine the elements at even positions (lhs)
  with the next ones (rhs), ceil(log2 n) levels, an odd last element carried over; then
  the init values as lhs, once. The lhs always stands for the earlier run of elements,
  so the result is the left fold init, x_0, x_1, ... for any associative body (argmax's
  body is not commutative where both are NaN: the first NaN wins, as in jax); more than
  512 body ops evaluated in all (levels + 1 times the body) is a located diagnostic;
- `reduce_window` (pooling, cumsum) pads with its constant init value, then reduces
  one axis at a time: the strided slice at each window offset combined by the body's
  graph op (k + l slices for a k x l window); an add over more than 64 offsets along
  an axis (jax's cumsum: the whole axis, padded by (n - 1, 0)) is a product with a
  constant 0/1 (triangular) matrix instead; more than 4096 slices, base dilations,
  several inputs, and padding with an add/multiply init other than the identity
  (StableHLO pads with the init, XLA leaves padding out) are located diagnostics;
- `reverse` is a graph.gather per reversed dimension at constant positions n-1..0;
- `gather` only in the form of numpy.take(x, indices, axis=d) (jax's x[idx],
  x[:, idx], jnp.take): graph.gather along d of the indices clamped to [0, n-1], as
  StableHLO clamps start indices (graph.gather would wrap a negative one); other
  gathers (patches, several index components, batching dims) are located diagnostics;
- `dynamic_slice` (lax.dynamic_slice, x[i] of a traced i) is a graph.gather per
  dimension with a runtime start, at start + 0..k-1 with the start clamped to
  [0, n - k] as StableHLO clamps it (constant starts: one graph.slice);
- `dynamic_update_slice` gathers the update at p - start (start clamped the same
  way) along each dimension it does not cover, and selects it where
  0 <= p - start < k in every dimension, the operand elsewhere;
- `sort` ranks every element on pair tensors (the sorted axis twice): the comparator
  region's ops converted onto broadcast operands give less(j, i) and less(i, j), the
  rank of i counts the j before it in the stable order, the permutation is the first
  i of each rank (a reduce_min), and each operand is a graph.gather_elements by it:
  exact for any comparator and element type, stable, a fixed number of graph ops; an
  axis of more than 256 elements, or more than 2^26 pairs, is a located diagnostic;
- `compare` with TOTALORDER on floats compares integer keys: the bits, all but the
  sign bit flipped where it is set (jax's sort comparators use it);
- `convolution` with one to three spatial dimensions, any layout, becomes graph.conv2d
  on NCHW/OIHW with transposes around it (none for jax's default NCHW layout): a 1-D
  one (jnp.convolve) of height 1, a 3-D one with its depth taps in the channels and
  its output depths in the batch (as ONNX's 3-D Conv);
- `iota` is a 1-D constant broadcast; a splat constant of more than one element is a
  graph.broadcast of a rank-0 graph.constant (docs/architecture.md, "Constants");
- `chlo.erfc(x)` is `1 - erf(x)`: within about 1e-7 absolutely in f32 (the spacing of
  floats just below 1), which is what GELU's erf form needs, but without erfc's
  relative accuracy in the tail (erfc(4) = 1.5e-8 comes out 0);
- `chlo.square(x)` is `x * x`;
- `is_finite`, `round_nearest_afz`, `log_plus_one` and `exponential_minus_one` are
  built from graph ops (FloatMathPattern: log1p and expm1 with Goldberg's and Kahan's
  corrections near 0); `round_nearest_even` is graph.round;
- `and`/`or`/`xor`/`not` on i1 are selects and comparisons.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerType, ModuleOp, Signedness, TensorType, f32, i1, i8, i32, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.rewriter import InsertPoint, Rewriter

from mlfuse.diagnostics import MAX_DENSE_ELEMENTS, Diagnostic, location_of, verify_located
from mlfuse.dialects import graph
from mlfuse.dialects import stablehlo as shlo
from mlfuse.frontend import onnx_ops
from mlfuse.frontend.formulas import Formulas
from mlfuse.inline import inline_calls

DIALECTS = ("stablehlo", "chlo")


def is_stablehlo(op: Operation) -> bool:
    return op.dialect_name() in DIALECTS


def contains_stablehlo(module: Operation) -> bool:
    return any(is_stablehlo(op) for op in module.walk())


def convert_if_stablehlo(module: ModuleOp) -> ModuleOp:
    """Convert a module that holds stablehlo or chlo ops (see convert_stablehlo); others
    are returned untouched."""
    if contains_stablehlo(module):
        convert_stablehlo(module)
        verify_located(module)
    return module


def convert_stablehlo(module: ModuleOp) -> None:
    """Inline calls, convert every stablehlo/chlo op to graph ops, and check none is left."""
    inline_calls(module)
    unroll_loops(module)
    inline_cases(module)
    PatternRewriteWalker(
        GreedyRewritePatternApplier([p() for p in PATTERNS]), apply_recursively=False
    ).rewrite_module(module)
    for op in module.walk():
        if is_stablehlo(op):
            raise Diagnostic(f"'{op.name}' is not supported by the conversion to the graph dialect", location_of(op))
    for fn in module.ops:
        if isinstance(fn, func.FuncOp):
            # jax.result_info and argument attributes mean nothing to the graph pipeline
            fn.arg_attrs = None
            fn.res_attrs = None


# ---------------------------------------------------------------------------
# loops
# ---------------------------------------------------------------------------

WHILE_MAX_OPS = 20000  # body ops that unrolling may copy in all, over every loop of a module


def unroll_loops(module: ModuleOp) -> None:
    """Unroll each stablehlo.while whose trip count is known (see trip_count: jax's
    lax.fori_loop and the scans of jnp.searchsorted, interp and histogram), innermost
    first: its body's ops copied once per trip before it, the loop values threaded
    through. Any other loop, or one past WHILE_MAX_OPS copies, is a located diagnostic."""
    budget = WHILE_MAX_OPS
    while loops := [op for op in module.walk() if isinstance(op, shlo.WhileOp)]:
        loop = loops[-1]  # walk order puts an enclosing loop before the loops in it
        trips = trip_count(loop)
        if trips is None:
            raise Diagnostic("'stablehlo.while' is not supported unless its trip count is known: a counter from a "
                             "constant, compared less-than with a constant and stepped by 1 (lax.fori_loop)", location_of(loop))
        copies = trips * (len(loop.body.block.ops) - 1)
        if copies > budget:
            raise Diagnostic(f"'stablehlo.while' of {trips} trips is not supported: unrolled it would copy {copies} "
                             f"ops (at most {WHILE_MAX_OPS} in all)", location_of(loop))
        budget -= copies
        unroll(loop, trips)


def trip_count(loop: shlo.WhileOp) -> int | None:
    """The trips of a loop whose cond is `counter < limit` and whose body returns
    `counter + 1` in the counter's place, with constant start and limit; else None."""
    cond_ops = list(loop.cond.block.ops)
    ret = cond_ops[-1]
    compare = ret.operands[0].owner
    if not isinstance(compare, shlo.CompareOp) or any(not isinstance(o, shlo.ConstantOp | shlo.CompareOp | shlo.ReturnOp) for o in cond_ops):
        return None
    lhs, rhs = compare.lhs, compare.rhs
    direction = compare.direction
    counter, limit = (lhs, rhs) if direction == "LT" else (rhs, lhs) if direction == "GT" else (None, None)
    if counter not in loop.cond.block.args or limit is None:
        return None
    k = loop.cond.block.args.index(counter)
    start, stop = constant_scalar(loop.operand[k]), constant_scalar(limit)
    body_return = list(loop.body.block.ops)[-1]  # the verifier's stablehlo.return
    step = body_return.operands[k].owner
    if not isinstance(step, shlo.AddOp) or not isinstance(start, int) or not isinstance(stop, int):
        return None
    counter_in_body = loop.body.block.args[k]
    others = [v for v in step.operands if v is not counter_in_body]
    if len(others) != 1 or constant_scalar(others[0]) != 1:
        return None
    return max(0, stop - start)


def unroll(loop: shlo.WhileOp, trips: int) -> None:
    values: list[SSAValue] = list(loop.operand)
    for _ in range(trips):
        values = copy_block(loop.body.block, loop, values)
    for result, value in zip(loop.results, values):
        result.replace_all_uses_with(value)
    loop.detach()
    loop.erase()


def inline_cases(module: ModuleOp) -> None:
    """Replace each stablehlo.case (lax.cond, lax.switch) by all of its branches, copied
    before it, and selects of their results by the index, innermost first: result =
    branch k's where index == k, the last branch's otherwise (StableHLO runs the last for
    an index out of range). Branches are pure, so running all of them changes no result;
    their cost is the price of control flow the graph dialect does not have."""
    while cases := [op for op in module.walk() if isinstance(op, shlo.CaseOp)]:
        case = cases[-1]  # walk order puts an enclosing case before the cases in it
        emit = Emitter(PatternRewriter(case), case)  # graph ops for the selects, at the case's location
        *taken_by_index, last = case.branches
        chosen = copy_block(last.block, case)
        for k in reversed(range(len(taken_by_index))):
            values = copy_block(taken_by_index[k].block, case)
            taken = emit(graph.CompareOp("eq", case.index, emit.scalar(k, i32)))
            chosen = [emit(graph.SelectOp(emit.fill(taken, graph.shape_of(v)), v, c)) for v, c in zip(values, chosen)]
        for result, value in zip(case.results, chosen):
            result.replace_all_uses_with(value)
        case.detach()
        case.erase()


def copy_block(block: Block, before: Operation, args: Sequence[SSAValue] = ()) -> list[SSAValue]:
    """The ops of a block ending in stablehlo.return (a loop body, a case's branch) copied
    before `before`, its arguments bound to `args`; the values it returns."""
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, args))
    for op in block.ops:
        if isinstance(op, shlo.ReturnOp):
            return [mapping.get(v, v) for v in op.operands]
        copy = op.clone(value_mapper=mapping)
        Rewriter.insert_op(copy, InsertPoint.before(before))
        mapping.update(zip(op.results, copy.results))
    raise AssertionError("a verified loop body or branch ends in stablehlo.return")


# ---------------------------------------------------------------------------
# building graph ops
# ---------------------------------------------------------------------------


class Emitter:
    """Inserts graph ops before the stablehlo op being converted, with its location."""

    def __init__(self, rewriter: PatternRewriter, op: Operation, at: Operation | None = None):
        self.rewriter = rewriter
        self.op = op
        self.at = at or op  # a comparator's op is converted before the sort that holds it

    def __call__(self, new: Operation) -> SSAValue:
        new.location = self.op.location
        self.rewriter.insert(new, InsertPoint.before(self.at))
        return new.results[0]

    def fail(self, message: str) -> Diagnostic:
        return Diagnostic(f"'{self.op.name}' {message}", location_of(self.op))

    def scalar(self, value: float | int | bool, element_type: Attribute) -> SSAValue:
        """A rank-0 graph.constant."""
        return self(graph.ConstantOp.from_numpy(np.array(value, dtype=graph.numpy_dtype(element_type)), element_type))

    def splat(self, value: float | int | bool, like: SSAValue) -> SSAValue:
        """`value` in the shape and element type of `like` (a broadcast rank-0 constant)."""
        el, shape = graph.element_type_of(like), graph.shape_of(like)
        c = self.scalar(value, el)
        return self(graph.BroadcastOp(c, [], shape)) if shape else c

    def fill(self, scalar: SSAValue, shape: Sequence[int]) -> SSAValue:
        """A rank-0 value broadcast to `shape` (itself when already that shape)."""
        if tuple(graph.shape_of(scalar)) == tuple(shape):
            return scalar
        return self(graph.BroadcastOp(scalar, [], shape))

    def transpose(self, value: SSAValue, perm: Sequence[int]) -> SSAValue:
        return value if list(perm) == list(range(len(perm))) else self(graph.TransposeOp(value, perm))

    def reshape(self, value: SSAValue, shape: Sequence[int]) -> SSAValue:
        return value if tuple(graph.shape_of(value)) == tuple(shape) else self(graph.ReshapeOp(value, shape))

    def cast(self, value: SSAValue, element_type: Attribute) -> SSAValue:
        return value if graph.element_type_of(value) == element_type else self(graph.CastOp(value, element_type))

    def ramp(self, n: int, element_type: Attribute = i64) -> SSAValue:
        """The 1-D constant 0, 1, ..., n-1."""
        return self(graph.ConstantOp.from_numpy(np.arange(n).astype(graph.numpy_dtype(element_type)), element_type))


def constant_scalar(value: SSAValue) -> float | int | bool | None:
    """The one value of `value` if it is a splat constant (through converts and
    broadcasts, in either dialect), else None: how pad values and reduce inits are read."""
    op = value.owner
    if isinstance(op, shlo.ConstantOp | graph.ConstantOp):
        array = graph.dense_to_numpy(op.value)
        flat = array.reshape(-1)
        return flat[0].item() if flat.size and np.all(flat == flat[0]) else None
    if isinstance(op, shlo.ConvertOp | graph.CastOp):
        inner = constant_scalar(op.operands[0])
        if inner is None:
            return None
        return np.array(inner).astype(graph.numpy_dtype(graph.element_type_of(value))).item()
    if isinstance(op, shlo.BroadcastInDimOp | graph.BroadcastOp):
        return constant_scalar(op.operands[0])
    return None


def check_types(op: Operation) -> None:
    """Static shapes and element types mlfuse computes on, for every operand and result."""
    for v in (*op.operands, *op.results):
        t = v.type
        if not isinstance(t, TensorType):
            raise Diagnostic(f"'{op.name}' on {t}: only tensors are supported", location_of(op))
        if any(d < 0 for d in t.get_shape()):
            raise Diagnostic(f"'{op.name}' on {t}: dynamic shapes are not supported (lower with concrete shapes)", location_of(op))
        if not graph.is_supported_element_type(t.get_element_type()):
            raise Diagnostic(
                f"'{op.name}' on {t}: element type {t.get_element_type()} is not supported "
                f"(expected {graph.SUPPORTED_TYPE_NAMES} or bf16)",
                location_of(op),
            )


class StablehloPattern(RewritePattern):
    """Base: converts the ops in OPS by `convert`, which emits graph ops and returns the
    values that replace the op's results."""

    OPS: ClassVar[tuple[type[Operation], ...]] = ()

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, self.OPS):
            return
        check_types(op)
        emit = Emitter(rewriter, op)
        results = self.convert(op, emit)
        for old, new in zip(op.results, results):
            if old.type != new.type:  # a result type the op's semantics do not give
                raise emit.fail(f"result type {old.type} does not match the converted {new.type}")
        rewriter.replace(op, [], results)

    def convert(self, op, emit: Emitter) -> list[SSAValue]:
        raise NotImplementedError


# ---------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------

UNARY: dict[type[Operation], type[graph.UnaryElementwiseOp]] = {
    shlo.AbsOp: graph.AbsOp,
    shlo.NegateOp: graph.NegOp,
    shlo.ExponentialOp: graph.ExpOp,
    shlo.LogOp: graph.LogOp,
    shlo.SqrtOp: graph.SqrtOp,
    shlo.RsqrtOp: graph.RsqrtOp,
    shlo.TanhOp: graph.TanhOp,
    shlo.LogisticOp: graph.SigmoidOp,
    shlo.ErfOp: graph.ErfOp,
    shlo.SineOp: graph.SinOp,
    shlo.CosineOp: graph.CosOp,
    shlo.FloorOp: graph.FloorOp,
    shlo.CeilOp: graph.CeilOp,
    shlo.RoundNearestEvenOp: graph.RoundOp,
}

BINARY: dict[type[Operation], Callable[[SSAValue, SSAValue], Operation]] = {
    shlo.AddOp: graph.AddOp,
    shlo.SubtractOp: graph.SubOp,
    shlo.MultiplyOp: graph.MulOp,
    shlo.DivideOp: graph.DivOp,
    shlo.MaximumOp: graph.MaxOp,
    shlo.MinimumOp: graph.MinOp,
    shlo.PowerOp: graph.PowOp,
    # stablehlo's remainder takes the dividend's sign, as C's fmod does
    shlo.RemainderOp: lambda a, b: graph.RemOp(a, b, fmod=True),
}

FLOAT_ONLY = (shlo.PowerOp, shlo.ExponentialOp, shlo.LogOp, shlo.SqrtOp, shlo.RsqrtOp, shlo.TanhOp, shlo.LogisticOp, shlo.ErfOp, shlo.ErfcOp,
              shlo.SineOp, shlo.CosineOp,
              shlo.FloorOp, shlo.CeilOp, shlo.RoundNearestEvenOp)


class ElementwisePattern(StablehloPattern):
    """One graph op per stablehlo op (erfc: 1 - erf)."""

    OPS = (*UNARY, *BINARY, shlo.ErfcOp)

    def convert(self, op, emit: Emitter) -> list[SSAValue]:
        if isinstance(op, FLOAT_ONLY) and not graph.is_float(graph.element_type_of(op.results[0])):
            raise emit.fail(f"on {op.results[0].type} is not supported: mlfuse computes it on floating-point tensors only")
        if isinstance(op, shlo.ErfcOp):
            erf = emit(graph.ErfOp(op.operand))
            return [emit(graph.SubOp(emit.splat(1.0, erf), erf))]
        if type(op) in UNARY:
            return [emit(UNARY[type(op)](op.operand))]
        return [emit(BINARY[type(op)](op.lhs, op.rhs))]


BITWISE: dict[type[Operation], Callable[..., Operation]] = {
    shlo.AndOp: graph.BitAndOp,
    shlo.OrOp: graph.BitOrOp,
    shlo.XorOp: graph.BitXorOp,
    shlo.NotOp: graph.BitNotOp,
}


class LogicalPattern(StablehloPattern):
    """and/or/xor/not: on i1 by compares and selects (graph's bit ops take integers
    only), on integers graph's bit ops."""

    OPS = (shlo.AndOp, shlo.OrOp, shlo.XorOp, shlo.NotOp)

    def convert(self, op, emit: Emitter) -> list[SSAValue]:
        element = graph.element_type_of(op.results[0])
        if element != i1:
            if not graph.is_int(element):
                raise emit.fail(f"on {op.results[0].type} is not supported: it takes i1 or integer operands")
            return [emit(BITWISE[type(op)](*op.operands))]
        if isinstance(op, shlo.NotOp):
            return [emit(graph.CompareOp("eq", op.operand, emit.splat(False, op.operand)))]
        a, b = op.lhs, op.rhs
        if isinstance(op, shlo.AndOp):
            return [logical_and(emit, a, b)]
        if isinstance(op, shlo.OrOp):  # a ? true : b
            return [emit(graph.SelectOp(a, a, b))]
        return [emit(graph.CompareOp("ne", a, b))]


class ShiftPattern(StablehloPattern):
    """Shifts: graph's shl and shr, whose amounts of the width or more (negative ones read
    as unsigned) give what StableHLO's do. graph's shr is arithmetic on signed types and
    logical on unsigned ones, so a shift of the other kind runs on the bits read as the
    other signedness (graph.bitcast)."""

    OPS = (shlo.ShiftLeftOp, shlo.ShiftRightArithmeticOp, shlo.ShiftRightLogicalOp)

    def convert(self, op, emit: Emitter) -> list[SSAValue]:
        element = graph.element_type_of(op.result)
        if not graph.is_int(element) or element == i1:
            raise emit.fail(f"on {op.result.type} is not supported: it takes integer operands")
        a, b = op.lhs, op.rhs
        if isinstance(op, shlo.ShiftLeftOp):
            return [emit(graph.ShiftLeftOp(a, b))]
        unsigned = graph.is_unsigned(element)
        if unsigned == isinstance(op, shlo.ShiftRightLogicalOp):
            return [emit(graph.ShiftRightOp(a, b))]
        width = graph.bit_width(element)  # graph's signed integers are signless
        other = IntegerType(width) if unsigned else IntegerType(width, Signedness.UNSIGNED)
        shifted = emit(graph.ShiftRightOp(emit(graph.BitcastOp(a, other)), emit(graph.BitcastOp(b, other))))
        return [emit(graph.BitcastOp(shifted, element))]


class BitcastConvertPattern(StablehloPattern):
    """graph.bitcast between element types of one width (a change of width adds or drops a
    dimension, which is not supported; nor are i1's bits)."""

    OPS = (shlo.BitcastConvertOp,)

    def convert(self, op: shlo.BitcastConvertOp, emit: Emitter) -> list[SSAValue]:
        source, target = graph.element_type_of(op.operand), graph.element_type_of(op.result)
        if source == target:
            return [op.operand]
        if i1 in (source, target) or graph.bit_width(source) != graph.bit_width(target):
            raise emit.fail(f"from {op.operand.type} to {op.result.type} is not supported: "
                            "only between element types of one width, not i1")
        return [emit(graph.BitcastOp(op.operand, target))]


def logical_and(emit: Emitter, a: SSAValue, b: SSAValue) -> SSAValue:
    """a and b of i1 tensors: a ? b : false, and a is false there."""
    return emit(graph.SelectOp(a, b, a))


class SignPattern(StablehloPattern):
    """x > 0 ? 1 : (x < 0 ? -1 : x): NaN, 0 and -0.0 are their own sign (jax's integer
    floor division uses it)."""

    OPS = (shlo.SignOp,)

    def convert(self, op: shlo.SignOp, emit: Emitter) -> list[SSAValue]:
        x = op.operand
        result = x
        if not graph.is_unsigned(graph.element_type_of(x)):
            negative = emit(graph.CompareOp("lt", x, emit.splat(0, x)))
            result = emit(graph.SelectOp(negative, emit.splat(-1, x), x))
        positive = emit(graph.CompareOp("gt", x, emit.splat(0, x)))
        return [emit(graph.SelectOp(positive, emit.splat(1, x), result))]


class FloatMathPattern(StablehloPattern):
    """The float functions without a graph op of their own, from those that have one:

    - is_finite(x) = |x| < inf (false for NaN);
    - round_nearest_afz(x) = t + sign(x) where |x - t| >= 0.5, else t, for t = trunc(x)
      (x - t is exact; floor(|x| + 0.5) would round 0.49999997 up, and t keeps -0.0);
    - log_plus_one(x) = log(u) * x / (u - 1) for u = 1 + x (Goldberg's correction: the
      rounding error of u cancels), x where u == 1; log(1 + x) for |x| >= 0.5, where no
      cancellation happens (and inf, -1 and NaN come out right);
    - exponential_minus_one(x) = (u - 1) * x / log(u) for u = e^x (Kahan's correction),
      x where u == 1; e^x - 1 for |x| >= 0.5.
    Both corrections are within a few ulps of the exact value, as jax's are."""

    OPS = (shlo.IsFiniteOp, shlo.RoundNearestAfzOp, shlo.LogPlusOneOp, shlo.ExponentialMinusOneOp)

    def convert(self, op, emit: Emitter) -> list[SSAValue]:
        x = op.operand
        if not graph.is_float(graph.element_type_of(x)):
            raise emit.fail(f"on {x.type} is not supported: mlfuse computes it on floating-point tensors only")
        if isinstance(op, shlo.IsFiniteOp):
            return [emit(graph.CompareOp("lt", emit(graph.AbsOp(x)), emit.splat(math.inf, x)))]
        if isinstance(op, shlo.RoundNearestAfzOp):
            return [round_half_away(emit, x)]
        small = emit(graph.CompareOp("lt", emit(graph.AbsOp(x)), emit.splat(0.5, x)))
        one = emit.splat(1.0, x)
        if isinstance(op, shlo.LogPlusOneOp):
            u = emit(graph.AddOp(one, x))
            plain = emit(graph.LogOp(u))
            corrected = emit(graph.DivOp(emit(graph.MulOp(plain, x)), emit(graph.SubOp(u, one))))
        else:
            u = emit(graph.ExpOp(x))
            plain = emit(graph.SubOp(u, one))
            corrected = emit(graph.DivOp(emit(graph.MulOp(plain, x)), emit(graph.LogOp(u))))
        tiny = emit(graph.CompareOp("eq", u, one))
        near_zero = emit(graph.SelectOp(tiny, x, corrected))
        return [emit(graph.SelectOp(small, near_zero, plain))]


class EmitterOps(Formulas):
    """The shared formulas (atan, log1p, polynomials) emitted by a stablehlo Emitter."""

    def __init__(self, emit: Emitter, like: SSAValue):
        self.emitter, self.like = emit, like

    def c(self, value: float) -> SSAValue:
        return self.emitter.splat(value, self.like)

    def emit(self, op) -> SSAValue:
        return self.emitter(op)


# Giles (2010), "Approximating the erfinv function": single precision, in w = -log(1 - x^2)
# below 5 (w - 2.5) and above (sqrt(w) - 3); the coefficients XLA's ErfInv32 uses
ERF_INV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                   -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
ERF_INV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


class MoreMathPattern(StablehloPattern):
    """Float functions composed of graph ops (onnx_math's formulas where they have one):

    - tan(x) = sin(x) / cos(x);
    - cbrt(x) = y + (x / y^2 - y) / 3 for y = sign(x) |x|^(1/3) (one Newton step: 1/3 is
      not a float, and |x|^0.33333334 is some ulps off at large |x|); x itself at +-0,
      infinities and NaN;
    - atan2(y, x): t = atan(min / max) of |y|, |x| (1 where both are infinite, 0 where both
      are 0), pi/2 - t where |y| > |x|, pi - t where x < 0 or x is -0, negated where y < 0
      or y is -0 (atan2(-0, -0) = -pi, as numpy and XLA give);
    - erf_inv(x) = x p(w), Giles' polynomials in w = -log1p(-x^2); +-inf at +-1."""

    OPS = (shlo.TanOp, shlo.CbrtOp, shlo.Atan2Op, shlo.ErfInvOp)

    def convert(self, op, emit: Emitter) -> list[SSAValue]:
        x = op.operands[0]
        if not graph.is_float(graph.element_type_of(x)):
            raise emit.fail(f"on {x.type} is not supported: mlfuse computes it on floating-point tensors only")
        o = EmitterOps(emit, x)
        if isinstance(op, shlo.TanOp):
            return [o.div(o.unary(graph.SinOp, x), o.unary(graph.CosOp, x))]
        if isinstance(op, shlo.CbrtOp):
            return [cube_root(o, x)]
        if isinstance(op, shlo.Atan2Op):
            return [atan2(o, op.lhs, op.rhs)]
        return [erf_inv(o, x)]


def negative_or_minus_zero(o: Formulas, x: SSAValue) -> SSAValue:
    """x < 0, or x is -0.0 (1 / x is -inf)."""
    minus_zero = o.emit(graph.CompareOp("lt", o.div(o.c(1.0), x), o.c(0.0)))
    return o.where(o.emit(graph.CompareOp("eq", x, o.c(0.0))), minus_zero, o.less(x, o.c(0.0)))


def cube_root(o: Formulas, x: SSAValue) -> SSAValue:
    y = o.with_sign_of(o.emit(graph.PowOp(o.unary(graph.AbsOp, x), o.c(1.0 / 3.0))), x)
    refined = o.add(y, o.div(o.sub(o.div(x, o.mul(y, y)), y), o.c(3.0)))
    finite = o.emit(graph.CompareOp("lt", o.unary(graph.AbsOp, x), o.c(math.inf)))
    nonzero = o.emit(graph.CompareOp("ne", x, o.c(0.0)))
    return o.where(o.where(nonzero, finite, nonzero), refined, x)


def atan2(o: Formulas, y: SSAValue, x: SSAValue) -> SSAValue:
    ay, ax = o.unary(graph.AbsOp, y), o.unary(graph.AbsOp, x)
    low, high = o.emit(graph.MinOp(ay, ax)), o.emit(graph.MaxOp(ay, ax))
    inf = o.c(math.inf)
    y_infinite = o.emit(graph.CompareOp("eq", ay, inf))
    both_infinite = o.where(y_infinite, o.emit(graph.CompareOp("eq", ax, inf)), y_infinite)
    ratio = o.where(o.emit(graph.CompareOp("eq", high, o.c(0.0))), o.c(0.0), o.div(low, high))
    t = o.atan(o.where(both_infinite, o.c(1.0), ratio))
    t = o.where(o.less(ax, ay), o.sub(o.c(math.pi / 2), t), t)
    t = o.where(negative_or_minus_zero(o, x), o.sub(o.c(math.pi), t), t)
    return o.where(negative_or_minus_zero(o, y), o.unary(graph.NegOp, t), t)


def erf_inv(o: Formulas, x: SSAValue) -> SSAValue:
    w = o.unary(graph.NegOp, o.log1p(o.unary(graph.NegOp, o.mul(x, x))))
    central = o.polynomial(o.sub(w, o.c(2.5)), ERF_INV_CENTRAL)
    tail = o.polynomial(o.sub(o.unary(graph.SqrtOp, w), o.c(3.0)), ERF_INV_TAIL)
    p = o.mul(o.where(o.less(w, o.c(5.0)), central, tail), x)
    return o.where(o.emit(graph.CompareOp("eq", o.unary(graph.AbsOp, x), o.c(1.0))), o.mul(x, o.c(math.inf)), p)


class BitCountPattern(StablehloPattern):
    """popcnt and count_leading_zeros of integers, on their bits as unsigned:

    - popcnt: the bits summed in fields of 2, 4 and 8 (v - (v >> 1) & 0x55..., then
      (v & 0x33...) + ((v >> 2) & 0x33...), then (v + (v >> 4)) & 0x0f...), and the
      bytes summed by a product with 0x0101... into the top byte;
    - count_leading_zeros: a binary search, width / 2 bits first: where the top s bits
      are 0, s more zeros and the value shifted up by s; the width for 0."""

    OPS = (shlo.PopcntOp, shlo.CountLeadingZerosOp)

    def convert(self, op, emit: Emitter) -> list[SSAValue]:
        x = op.operand
        el = graph.element_type_of(x)
        if not graph.is_int(el) or el == i1:
            raise emit.fail(f"on {x.type} is not supported (integers only)")
        width = graph.bit_width(el)
        unsigned = IntegerType(width, Signedness.UNSIGNED)
        v = x if el == unsigned else emit(graph.BitcastOp(x, unsigned))
        count = popcount(emit, v, width) if isinstance(op, shlo.PopcntOp) else leading_zeros(emit, v, width)
        return [count if el == unsigned else emit(graph.BitcastOp(count, el))]


def repeated_byte(byte: int, width: int) -> int:
    return int.from_bytes(bytes([byte]) * (width // 8), "little")


def popcount(emit: Emitter, v: SSAValue, width: int) -> SSAValue:
    def shr(a: SSAValue, n: int) -> SSAValue:
        return emit(graph.ShiftRightOp(a, emit.splat(n, a)))

    def mask(a: SSAValue, byte: int) -> SSAValue:
        return emit(graph.BitAndOp(a, emit.splat(repeated_byte(byte, width), a)))

    v = emit(graph.SubOp(v, mask(shr(v, 1), 0x55)))
    v = emit(graph.AddOp(mask(v, 0x33), mask(shr(v, 2), 0x33)))
    v = mask(emit(graph.AddOp(v, shr(v, 4))), 0x0F)
    if width == 8:
        return v
    return shr(emit(graph.MulOp(v, emit.splat(repeated_byte(0x01, width), v))), width - 8)


def leading_zeros(emit: Emitter, v: SSAValue, width: int) -> SSAValue:
    zero = count = emit.splat(0, v)
    is_zero = emit(graph.CompareOp("eq", v, zero))
    step = width // 2
    while step:
        top_clear = emit(graph.CompareOp("eq", emit(graph.ShiftRightOp(v, emit.splat(width - step, v))), zero))
        count = emit(graph.SelectOp(top_clear, emit(graph.AddOp(count, emit.splat(step, v))), count))
        v = emit(graph.SelectOp(top_clear, emit(graph.ShiftLeftOp(v, emit.splat(step, v))), v))
        step //= 2
    return emit(graph.SelectOp(is_zero, emit.splat(width, v), count))


def round_half_away(emit: Emitter, x: SSAValue) -> SSAValue:
    """The nearest integer to x, halves away from zero (see FloatMathPattern)."""
    zero = emit.splat(0.0, x)
    negative = emit(graph.CompareOp("lt", x, zero))
    t = emit(graph.SelectOp(negative, emit(graph.CeilOp(x)), emit(graph.FloorOp(x))))
    half_or_more = emit(graph.CompareOp("ge", emit(graph.AbsOp(emit(graph.SubOp(x, t)))), emit.splat(0.5, x)))
    step = emit(graph.SelectOp(negative, emit.splat(-1.0, x), emit.splat(1.0, x)))
    return emit(graph.SelectOp(half_or_more, emit(graph.AddOp(t, step)), t))


class SquarePattern(StablehloPattern):
    """chlo.square (jnp.var, jnp.std, x ** 2): x * x."""

    OPS = (shlo.SquareOp,)

    def convert(self, op: shlo.SquareOp, emit: Emitter) -> list[SSAValue]:
        if graph.element_type_of(op.operand) == i1:
            raise emit.fail(f"on {op.operand.type} is not supported")
        return [emit(graph.MulOp(op.operand, op.operand))]


class ConvertPattern(StablehloPattern):
    """graph.cast; to i1 it is `x != 0` (graph.cast leaves that case to the backend). A
    float to an integer type is clamped to the type's range first (`saturated`): XLA
    saturates (-2.5 to uint8 is 0, 3e9 is 255, -1 to uint32 is 0), where graph.cast, as
    numpy, wraps what it converted through 32 bits (254, 0 and 4294967295)."""

    OPS = (shlo.ConvertOp,)

    def convert(self, op: shlo.ConvertOp, emit: Emitter) -> list[SSAValue]:
        x, el = op.operand, graph.element_type_of(op.result)
        source = graph.element_type_of(x)
        if source == el:
            return [x]
        if el == i1:
            return [emit(graph.CompareOp("ne", x, emit.splat(0, x)))]
        if graph.is_float(source) and graph.is_int(el):
            x = saturated(emit, x, el)
        return [emit(graph.CastOp(x, el))]


def saturated(emit: Emitter, x: SSAValue, el: Attribute) -> SSAValue:
    """Floats x clamped to integer type el's range where graph.cast does not saturate:
    below 32 bits, and below 0 for unsigned types (NaN stays NaN, which casts to 0)."""
    if graph.bit_width(el) >= 32:
        return emit(graph.MaxOp(x, emit.splat(0.0, x))) if graph.is_unsigned(el) else x
    if graph.bit_width(graph.element_type_of(x)) < 32:
        x = emit(graph.CastOp(x, f32))  # f16 rounds 32767 up to 32768 and has no 65535
    info = np.iinfo(graph.numpy_dtype(el))
    return emit(graph.MinOp(emit(graph.MaxOp(x, emit.splat(float(info.min), x))), emit.splat(float(info.max), x)))


class ClampPattern(StablehloPattern):
    """min(max(x, lo), hi), with rank-0 bounds broadcast."""

    OPS = (shlo.ClampOp,)

    def convert(self, op: shlo.ClampOp, emit: Emitter) -> list[SSAValue]:
        shape = graph.shape_of(op.operand)
        low, high = emit.fill(op.min, shape), emit.fill(op.max, shape)
        return [emit(graph.MinOp(emit(graph.MaxOp(op.operand, low)), high))]


class SelectPattern(StablehloPattern):
    OPS = (shlo.SelectOp,)

    def convert(self, op: shlo.SelectOp, emit: Emitter) -> list[SSAValue]:
        pred = emit.fill(op.pred, graph.shape_of(op.result))
        return [emit(graph.SelectOp(pred, op.on_true, op.on_false))]


DIRECTIONS = {"EQ": "eq", "NE": "ne", "LT": "lt", "LE": "le", "GT": "gt", "GE": "ge"}


class ComparePattern(StablehloPattern):
    """graph.compare; TOTALORDER on floats compares total_order_key's integers."""

    OPS = (shlo.CompareOp,)

    def convert(self, op: shlo.CompareOp, emit: Emitter) -> list[SSAValue]:
        el = graph.element_type_of(op.lhs)
        kind = op.kind
        if kind in ("SIGNED", "UNSIGNED") and el != i1 and (kind == "UNSIGNED") != graph.is_unsigned(el):
            raise emit.fail(f"with compare type {kind} on {el} is not supported: the element type's signedness decides")
        lhs, rhs = op.lhs, op.rhs
        if kind == "TOTALORDER" and graph.is_float(el):
            lhs, rhs = total_order_key(emit, lhs), total_order_key(emit, rhs)
        return [emit(graph.CompareOp(DIRECTIONS[op.direction], lhs, rhs))]


def total_order_key(emit: Emitter, x: SSAValue) -> SSAValue:
    """Signed integers that order as IEEE 754's totalOrder orders the floats x
    (-NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN; NaNs by payload): the bits
    as a signed integer, with all but the sign bit flipped where the sign is set
    (jax sorts floats by it, after making -0.0 +0.0 and every NaN one positive NaN)."""
    width = graph.bit_width(graph.element_type_of(x))
    bits = emit(graph.BitcastOp(x, IntegerType(width)))
    negative = emit(graph.CompareOp("lt", bits, emit.splat(0, bits)))
    flipped = emit(graph.BitXorOp(bits, emit.splat(2 ** (width - 1) - 1, bits)))
    return emit(graph.SelectOp(negative, flipped, bits))


# ---------------------------------------------------------------------------
# constants, iota
# ---------------------------------------------------------------------------


class ConstantPattern(StablehloPattern):
    """graph.constant; a splat of several elements becomes a broadcast rank-0 constant."""

    OPS = (shlo.ConstantOp,)

    def convert(self, op: shlo.ConstantOp, emit: Emitter) -> list[SSAValue]:
        shape = graph.shape_of(op.output)
        if math.prod(shape) > 1:
            value = constant_scalar(op.output)
            if value is not None:
                return [emit.splat(value, op.output)]
        return [emit(graph.ConstantOp(op.value))]


class IotaPattern(StablehloPattern):
    """A 1-D constant 0..n-1 broadcast along the iota dimension."""

    OPS = (shlo.IotaOp,)

    def convert(self, op: shlo.IotaOp, emit: Emitter) -> list[SSAValue]:
        shape, d = graph.shape_of(op.output), op.dimension
        el = graph.element_type_of(op.output)
        if shape[d] > MAX_DENSE_ELEMENTS:  # the ramp is a dense constant: the parser's limit holds
            raise emit.fail(f"along a dimension of {shape[d]} elements is too large (the limit is 2^22)")
        ramp = emit.ramp(shape[d], el)
        return [ramp if len(shape) == 1 else emit(graph.BroadcastOp(ramp, [d], shape))]


# ---------------------------------------------------------------------------
# shapes and data movement
# ---------------------------------------------------------------------------


class BroadcastPattern(StablehloPattern):
    """graph.broadcast, after a transpose when the dims are not increasing."""

    OPS = (shlo.BroadcastInDimOp,)

    def convert(self, op: shlo.BroadcastInDimOp, emit: Emitter) -> list[SSAValue]:
        dims = list(op.dims)
        order = sorted(range(len(dims)), key=lambda i: dims[i])
        x = emit.transpose(op.operand, order)
        return [emit(graph.BroadcastOp(x, sorted(dims), graph.shape_of(op.result)))]


class TransposePattern(StablehloPattern):
    OPS = (shlo.TransposeOp,)

    def convert(self, op: shlo.TransposeOp, emit: Emitter) -> list[SSAValue]:
        return [emit(graph.TransposeOp(op.operand, op.perm))]


class ReshapePattern(StablehloPattern):
    OPS = (shlo.ReshapeOp,)

    def convert(self, op: shlo.ReshapeOp, emit: Emitter) -> list[SSAValue]:
        return [emit(graph.ReshapeOp(op.operand, graph.shape_of(op.result)))]


class SlicePattern(StablehloPattern):
    OPS = (shlo.SliceOp,)

    def convert(self, op: shlo.SliceOp, emit: Emitter) -> list[SSAValue]:
        start, limit, strides = op.bounds
        return [emit(graph.SliceOp(op.operand, start, limit, strides))]


class PadPattern(StablehloPattern):
    """graph.pad with the (constant) padding value; negative edges crop by a slice first.
    Interior padding (k values between neighbours, lax.pad's upsampling by zeros) comes
    first, one axis at a time: [n] as [n, 1] padded to [n, 1 + k], flattened, and its
    last k dropped."""

    OPS = (shlo.PadOp,)

    def convert(self, op: shlo.PadOp, emit: Emitter) -> list[SSAValue]:
        low, high, interior = op.amounts
        value = constant_scalar(op.padding_value)
        if value is None:
            raise emit.fail("with a padding value that is not a constant is not supported")
        x = op.operand
        for axis, k in enumerate(interior):
            x = interleave_padding(emit, x, axis, k, value)
        return [pad_with(emit, x, list(zip(low, high)), value)]


def interleave_padding(emit: Emitter, x: SSAValue, axis: int, k: int, value: float | int | bool) -> SSAValue:
    """x with k values `value` between each two neighbours along `axis`."""
    shape = list(graph.shape_of(x))
    n = shape[axis]
    if k <= 0 or n <= 1:
        return x
    column = emit(graph.ReshapeOp(x, [*shape[: axis + 1], 1, *shape[axis + 1 :]]))
    low, high = [0] * (len(shape) + 1), [0] * (len(shape) + 1)
    high[axis + 1] = k
    spread = emit(graph.PadOp(column, low, high, value))
    flat = emit(graph.ReshapeOp(spread, [*shape[:axis], n * (1 + k), *shape[axis + 1 :]]))
    stop = [*shape[:axis], n + (n - 1) * k, *shape[axis + 1 :]]
    return emit(graph.SliceOp(flat, [0] * len(shape), stop))


class ConcatenatePattern(StablehloPattern):
    OPS = (shlo.ConcatenateOp,)

    def convert(self, op: shlo.ConcatenateOp, emit: Emitter) -> list[SSAValue]:
        if len(op.inputs) == 1:
            return [op.inputs[0]]
        return [emit(graph.ConcatOp(list(op.inputs), op.axis))]


class ReversePattern(StablehloPattern):
    """One graph.gather per reversed dimension, at the constant positions n-1, ..., 0 (as
    ONNX's Slice with a negative step); a dimension of size 1 is its own reverse."""

    OPS = (shlo.ReverseOp,)

    def convert(self, op: shlo.ReverseOp, emit: Emitter) -> list[SSAValue]:
        y, shape = op.operand, graph.shape_of(op.operand)
        for d in sorted(set(op.dims)):
            if shape[d] > 1:
                positions = emit(graph.ConstantOp.from_numpy(np.arange(shape[d] - 1, -1, -1, dtype=np.int64), i64))
                y = emit(graph.GatherOp(y, positions, d))
        return [y]


def take_order(offsets: Sequence[int], d: int, batch_rank: int, rank: int) -> list[int]:
    """The permutation from numpy.take's layout, x.shape[:d] + batch + x.shape[d+1:], to a
    gather's result whose operand dimensions (all but d, in order) sit at `offsets` and
    its batch dimensions, in order, at the other positions (jnp.quantile's gather puts
    the indices first)."""
    kept = [j for j in range(rank) if j != d]
    order, b = [], 0
    for p in range(rank - 1 + batch_rank):
        if p in offsets:
            j = kept[list(offsets).index(p)]
            order.append(j if j < d else j - 1 + batch_rank)
        else:
            order.append(d + b)
            b += 1
    return order


class GatherPattern(StablehloPattern):
    """The gather that is numpy.take(x, indices, axis=d): jax's x[idx], x[:, idx] and
    jnp.take. That is one start_index_map entry d, collapsed_slice_dims = [d], slices
    of the whole operand but 1 along d, index vectors of size 1 (index_vector_dim a
    dimension of size 1, or the rank of the indices), no batching dimensions, and the
    result x.shape[:d] + batch shape + x.shape[d+1:] or a transpose of it (take_order:
    jnp.quantile's); or, with no collapsed dimension, that with a dimension of size 1
    for d before or after the batch dimensions (jnp.searchsorted's). The indices lose the index vector
    dimension and are clamped to [0, n-1], as StableHLO clamps start indices (graph.gather
    would count a negative index from the end; jax wraps or masks them itself before),
    then graph.gather along d."""

    OPS = (shlo.GatherOp,)

    FORM = (
        "is supported only in the form of numpy.take(x, indices, axis=d) (jax's x[idx], x[:, idx], jnp.take): "
        "start_index_map = [d], collapsed_slice_dims = [d], slice_sizes the operand's shape with 1 at d, "
        "index vectors of size 1, no batching dimensions, offset_dims around the indices' dimensions; "
        "or as a gather of single elements (x[i, j], take_along_axis, map_coordinates): slice_sizes all 1, "
        "every operand dimension collapsed or a batching dimension, no offset_dims"
    )

    def convert(self, op: shlo.GatherOp, emit: Emitter) -> list[SSAValue]:
        lists, vd = op.dimension_numbers.lists(), op.dimension_numbers.vector_dim
        operand, indices = graph.shape_of(op.operand), graph.shape_of(op.start_indices)
        batch = op.batch_shape()
        if len(lists["start_index_map"]) != 1 or lists["operand_batching_dims"]:
            return [self.elements(op, emit)]
        d = lists["start_index_map"][0]
        rank = len(operand)
        offsets = list(lists["offset_dims"])
        if lists["collapsed_slice_dims"] == (d,):  # the batch dimensions anywhere among the offsets (a transpose after)
            placed = len(offsets) == rank - 1 and offsets == sorted(offsets)
        else:  # d kept as a dimension of size 1 (jnp.searchsorted): anywhere around the batch dimensions
            placed = (not lists["collapsed_slice_dims"] and len(offsets) == rank and offsets[:d] == list(range(d))
                      and offsets[d + 1:] == list(range(d + len(batch) + 1, rank + len(batch))))
        take = (
            not lists["operand_batching_dims"]
            and not lists["start_indices_batching_dims"]
            and placed
            and list(op.sizes) == [1 if i == d else n for i, n in enumerate(operand)]
            and (vd == len(indices) or indices[vd] == 1)
        )
        if not take:
            return [self.elements(op, emit)]
        idx = emit.reshape(op.start_indices, batch or [1])
        el = graph.element_type_of(idx)
        dtype = graph.numpy_dtype(el)
        if not graph.is_unsigned(el):
            idx = emit(graph.MaxOp(idx, emit.splat(0, idx)))
        if operand[d] - 1 < np.iinfo(dtype).max:
            idx = emit(graph.MinOp(idx, emit.splat(operand[d] - 1, idx)))
        if str(el) not in ("i32", "i64"):
            idx = emit.cast(idx, i64)
        y = emit(graph.GatherOp(op.operand, idx, d))
        if lists["collapsed_slice_dims"] == (d,) and batch:
            y = emit.transpose(y, take_order(offsets, d, len(batch), rank))
        return [emit.reshape(y, graph.shape_of(op.result))]


    def elements(self, op: shlo.GatherOp, emit: Emitter) -> SSAValue:
        """A gather of single elements: each result element is x at a full coordinate,
        each operand dimension's either an index vector's entry (start_index_map),
        clamped to the dimension as StableHLO clamps start indices, or the result
        element's position along the paired batching dimension of the indices
        (take_along_axis). graph.gather of the flattened operand at the flat positions."""
        lists, vd = op.dimension_numbers.lists(), op.dimension_numbers.vector_dim
        shape, batch = graph.shape_of(op.operand), op.batch_shape()
        indexed, batching = lists["start_index_map"], lists["operand_batching_dims"]
        if (any(n != 1 for n in op.sizes) or lists["offset_dims"] or sorted([*indexed, *batching]) != list(range(len(shape)))
                or sorted(lists["collapsed_slice_dims"]) != sorted(indexed)):
            raise emit.fail(self.FORM)
        count, strides = math.prod(batch), row_major_strides(shape)
        position = emit.fill(emit.scalar(0, i64), [count])
        for entry, d in zip(index_entries(op.start_indices, vd, emit), indexed):
            entry = clamped_start(emit, entry, shape[d] - 1)
            position = emit(graph.AddOp(position, emit(graph.MulOp(entry, emit.splat(strides[d], entry)))))
        for d, j in zip(batching, lists["start_indices_batching_dims"]):
            along = j if j < vd else j - 1  # the batch dimension of the indices' dimension j
            coordinate = emit(graph.BroadcastOp(emit.ramp(batch[along]), [along], batch)) if batch else emit.ramp(1)
            coordinate = emit.reshape(coordinate, [count])
            position = emit(graph.AddOp(position, emit(graph.MulOp(coordinate, emit.splat(strides[d], coordinate)))))
        flat = emit.reshape(op.operand, [math.prod(shape)])
        return emit.reshape(emit(graph.GatherOp(flat, position, 0)), graph.shape_of(op.result))


def index_entries(indices: SSAValue, vector_dim: int, emit: Emitter) -> list[SSAValue]:
    """Entry k of every index vector of `indices` (along `vector_dim`, or an implicit
    trailing one of a single entry when it is the rank), for each k: 1-D i64 tensors over
    the vectors in row-major order of the other dimensions (a gather's batch or a
    scatter's update order)."""
    shape = list(graph.shape_of(indices))
    if vector_dim == len(shape):
        shape.append(1)
        indices = emit.reshape(indices, shape)
    rest = [d for d in range(len(shape)) if d != vector_dim]
    count, entries = math.prod(shape[d] for d in rest), shape[vector_dim]
    table = emit.reshape(emit.transpose(emit.cast(indices, i64), [*rest, vector_dim]), [count, entries])
    return [emit.reshape(emit(graph.SliceOp(table, [0, k], [count, k + 1])), [count]) for k in range(entries)]


def row_major_strides(shape: Sequence[int]) -> list[int]:
    return [math.prod(shape[d + 1:]) for d in range(len(shape))]


def clamped_start(emit: Emitter, start: SSAValue, high: int) -> SSAValue:
    """A start index (rank 0, or one per element) clamped to [0, high], as StableHLO
    clamps dynamic slices' and gathers' starts, then as i64 (safe to cast once clamped,
    whatever its integer type)."""
    el = graph.element_type_of(start)
    if not graph.is_unsigned(el):
        start = emit(graph.MaxOp(start, emit.splat(0, start)))
    if high < np.iinfo(graph.numpy_dtype(el)).max:
        start = emit(graph.MinOp(start, emit.splat(high, start)))
    return emit.cast(start, i64)


class DynamicSlicePattern(StablehloPattern):
    """A slice at runtime starts (lax.dynamic_slice, x[i] of a traced i): along each
    dimension it does not keep whole, a graph.gather of the positions start + 0..k-1,
    start clamped to [0, n - k] as StableHLO clamps it; a constant start is a static
    graph.slice."""

    OPS = (shlo.DynamicSliceOp,)

    def convert(self, op: shlo.DynamicSliceOp, emit: Emitter) -> list[SSAValue]:
        y, shape, sizes = op.operand, graph.shape_of(op.operand), op.sizes
        if 0 in sizes:
            return [emit(graph.SliceOp(y, [0] * len(shape), list(sizes)))]
        begin, stop, runtime = [0] * len(shape), list(shape), []
        for d, (n, k, start) in enumerate(zip(shape, sizes, op.start_indices)):
            if k == n:  # the start clamps to 0: the whole dimension
                continue
            value = constant_scalar(start)
            if value is None:
                runtime.append(d)
            else:
                begin[d] = min(max(int(value), 0), n - k)
                stop[d] = begin[d] + k
        if (begin, stop) != ([0] * len(shape), list(shape)):
            y = emit(graph.SliceOp(y, begin, stop))
        for d in runtime:
            n, k = shape[d], sizes[d]
            positions = emit(graph.AddOp(emit.fill(clamped_start(emit, op.start_indices[d], n - k), [k]), emit.ramp(k)))
            y = emit(graph.GatherOp(y, positions, d))
        return [y]


class DynamicUpdateSlicePattern(StablehloPattern):
    """The operand with the update written at runtime starts (lax.dynamic_update_slice;
    jax lowers x.at[i].set(v) to a scatter instead), starts clamped to [0, n - k]. Along each dimension
    the update does not cover, the update is gathered at the positions p - start for
    p in 0..n-1 (to the operand's shape; outside the update's range graph.gather's
    own wrap and clamp give some element, masked out), and 0 <= p - start < k marks
    where it goes; a select between update and operand under the mask of every
    dimension."""

    OPS = (shlo.DynamicUpdateSliceOp,)

    def convert(self, op: shlo.DynamicUpdateSliceOp, emit: Emitter) -> list[SSAValue]:
        x, y = op.operand, op.update
        shape, sizes = graph.shape_of(x), graph.shape_of(y)
        if 0 in sizes:
            return [x]
        mask: SSAValue | None = None
        for d, (n, k, start) in enumerate(zip(shape, sizes, op.start_indices)):
            if k == n:
                continue
            offset = emit(graph.SubOp(emit.ramp(n), emit.fill(clamped_start(emit, start, n - k), [n])))
            y = emit(graph.GatherOp(y, offset, d))
            after = emit(graph.CompareOp("ge", offset, emit.splat(0, offset)))
            before = emit(graph.CompareOp("lt", offset, emit.splat(k, offset)))
            inside = emit(graph.BroadcastOp(logical_and(emit, after, before), [d], shape))
            mask = inside if mask is None else logical_and(emit, mask, inside)
        return [y if mask is None else emit(graph.SelectOp(mask, y, x))]


# ---------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------

# body op -> (graph reduction, graph combining op, identity for float, identity for int)
REDUCTIONS: dict[type[Operation], tuple[type[graph.ReduceOp], type[graph.BinaryElementwiseOp], Callable[[np.dtype], float | int]]] = {
    shlo.AddOp: (graph.ReduceSumOp, graph.AddOp, lambda dt: 0),
    shlo.MultiplyOp: (graph.ReduceProdOp, graph.MulOp, lambda dt: 1),
    shlo.MaximumOp: (graph.ReduceMaxOp, graph.MaxOp, lambda dt: -np.inf if dt.kind == "f" else np.iinfo(dt).min),
    shlo.MinimumOp: (graph.ReduceMinOp, graph.MinOp, lambda dt: np.inf if dt.kind == "f" else np.iinfo(dt).max),
}

# and/or of i1 (jnp.all, jnp.any, jnp.take's mask of valid indices): the min/max of
# the values as i8, compared with 0; the bool is the body's identity
LOGICAL_REDUCTIONS: dict[type[Operation], tuple[type[graph.ReduceOp], bool]] = {
    shlo.AndOp: (graph.ReduceMinOp, True),
    shlo.OrOp: (graph.ReduceMaxOp, False),
}

# max and min of i1 (False < True) are or and and
BOOL_ORDER_REDUCTIONS: dict[type[Operation], type[Operation]] = {shlo.MaximumOp: shlo.OrOp, shlo.MinimumOp: shlo.AndOp}
# ... and windows of i1 reduce the bools as i8 by max (or) and min (and)
BOOL_WINDOWS: dict[type[Operation] | None, type[Operation]] = {
    shlo.OrOp: shlo.MaximumOp, shlo.MaximumOp: shlo.MaximumOp, shlo.AndOp: shlo.MinimumOp, shlo.MinimumOp: shlo.MinimumOp,
}


def reduction_kind(op: shlo.ReduceOp | shlo.ReduceWindowOp) -> type[Operation] | None:
    """The body's op when the body is `return op(a, b)` or `op(b, a)` for a known op
    (REDUCTIONS, LOGICAL_REDUCTIONS)."""
    return combiner_kind(op.body.block)


def combiner_kind(block: Block) -> type[Operation] | None:
    """The op of a block that is `return op(a, b)` or `op(b, a)` of its two arguments, for
    a known op (REDUCTIONS, LOGICAL_REDUCTIONS); None for any other block."""
    ops = list(block.ops)
    if len(ops) != 2 or not isinstance(ops[1], shlo.ReturnOp) or type(ops[0]) not in (*REDUCTIONS, *LOGICAL_REDUCTIONS):
        return None
    body, ret = ops
    if set(body.operands) != set(block.args) or len(set(body.operands)) != 2 or tuple(ret.operands) != (body.results[0],):
        return None
    return type(body)


REDUCE_TREE_MAX_BODY_OPS = 512  # body ops evaluated in all by a tree reduction (levels + 1 times the body)


SCATTER_MAX_PAIRS = 1 << 26  # updates x operand elements a scatter compares


class ScatterPattern(StablehloPattern):
    """A scatter of single elements (each update element lands where its full index vector
    says: `x.at[i].add(v)`, `x.at[i, j].set(v)`, jnp.bincount, histograms) with indices
    known only at run time, as a comparison of every update's flat position with every
    operand position (at most SCATTER_MAX_PAIRS pairs):

        position[n] = sum_k index[n, k] * stride[dim_k], or -1 where an index is out of
                      bounds (StableHLO skips those updates)
        hit[n, p]   = position[n] == p
        add:        out = x + reduce_sum(select(hit, update, 0), n)    (mul, max, min alike)
        set:        out = select(any(hit, n), reduce_max(select(hit, update, lowest), n), x)

    Updates that land on one position combine in any order, as StableHLO allows; a set
    keeps the largest of them."""

    OPS = (shlo.ScatterOp,)

    def convert(self, op: shlo.ScatterOp, emit: Emitter) -> list[SSAValue]:
        x, update, kind = self.check(op, emit)
        numbers = op.scatter_dimension_numbers
        positions = self.flat_positions(op.scatter_indices, list(numbers.lists()["scatter_dims_to_operand_dims"]),
                                        numbers.vector_dim, graph.shape_of(x), emit)
        total, count = math.prod(graph.shape_of(x)), graph.shape_of(positions)[0]
        hit = emit(graph.CompareOp("eq", emit(graph.BroadcastOp(positions, [0], [count, total])),
                                   emit(graph.BroadcastOp(emit.ramp(total), [1], [count, total]))))
        values = emit(graph.BroadcastOp(emit.reshape(update, [count]), [0], [count, total]))
        dtype = graph.numpy_dtype(graph.element_type_of(x))
        if kind is None:  # set: the new value
            lowest = REDUCTIONS[shlo.MaximumOp][2](dtype)
            written = emit(graph.ReduceMaxOp(emit(graph.CastOp(hit, i8)), [0]))
            value = emit(graph.ReduceMaxOp(emit(graph.SelectOp(hit, values, emit.splat(lowest, values))), [0]))
            landed = emit(graph.CompareOp("ne", written, emit.splat(0, written)))
            shape = graph.shape_of(x)
            return [emit(graph.SelectOp(emit.reshape(landed, shape), emit.reshape(value, shape), x))]
        reduce_cls, combine, identity = REDUCTIONS[kind]
        combined = emit(reduce_cls(emit(graph.SelectOp(hit, values, emit.splat(identity(dtype), values))), [0]))
        return [emit(combine(x, emit.reshape(combined, graph.shape_of(x))))]

    @staticmethod
    def check(op: shlo.ScatterOp, emit: Emitter) -> tuple[SSAValue, SSAValue, type[Operation] | None]:
        """The one input and update of a scatter of single elements and its combining op
        (None: a set), or a diagnostic."""
        if len(op.inputs) != 1:
            raise emit.fail(f"of {len(op.inputs)} inputs at once is not supported")
        x, update = op.inputs[0], op.updates[0]
        lists = op.scatter_dimension_numbers.lists()
        rank = len(graph.shape_of(x))
        if lists["update_window_dims"] or lists["input_batching_dims"] or sorted(lists["inserted_window_dims"]) != list(range(rank)):
            raise emit.fail("with update windows or batching dimensions is not supported (only scatters of single "
                            "elements: x.at[i].add(v), bincount)")
        block = op.update_computation.block
        kind, ops = combiner_kind(block), list(block.ops)
        sets = len(ops) == 1 and isinstance(ops[0], shlo.ReturnOp) and tuple(ops[0].operands) == (block.args[1],)
        if not sets and (kind is None or kind not in REDUCTIONS):
            raise emit.fail("with an update_computation other than add, multiply, max, min or the new value is not supported")
        if graph.element_type_of(x) == i1:
            raise emit.fail("on i1 is not supported")
        pairs = math.prod(graph.shape_of(update)) * math.prod(graph.shape_of(x))
        if pairs > SCATTER_MAX_PAIRS:
            raise emit.fail(f"of {math.prod(graph.shape_of(update))} updates into {math.prod(graph.shape_of(x))} elements is "
                            f"not supported (at most {SCATTER_MAX_PAIRS} pairs: it compares every update with every position)")
        return x, update, None if sets else kind

    @staticmethod
    def flat_positions(indices: SSAValue, dims: list[int], vector_dim: int, shape: Sequence[int], emit: Emitter) -> SSAValue:
        """Each update's flat position in the operand (1-D, i64), -1 where an index is out of bounds."""
        strides = row_major_strides(shape)
        position, inside = None, None
        for entry, d in zip(index_entries(indices, vector_dim, emit), dims):
            ok = logical_and(emit, emit(graph.CompareOp("ge", entry, emit.splat(0, entry))),
                             emit(graph.CompareOp("lt", entry, emit.splat(shape[d], entry))))
            term = emit(graph.MulOp(entry, emit.splat(strides[d], entry)))
            position = term if position is None else emit(graph.AddOp(position, term))
            inside = ok if inside is None else logical_and(emit, inside, ok)
        assert position is not None and inside is not None
        return emit(graph.SelectOp(inside, position, emit.splat(-1, position)))


class ReducePattern(StablehloPattern):
    """graph.reduce_{sum,prod,max,min}; an init other than the identity is combined after.
    and/or of i1 (all, any), and max/min of i1 as or/and, reduce the values cast to i8 by
    min/max. Several inputs
    (argmax, argmin) or another body: a tree reduction that evaluates the body (see
    `tree`)."""

    OPS = (shlo.ReduceOp,)

    def convert(self, op: shlo.ReduceOp, emit: Emitter) -> list[SSAValue]:
        kind = reduction_kind(op) if len(op.inputs) == 1 else None
        if kind is None:
            return self.tree(op, emit)
        x, init, out = op.inputs[0], op.init_values[0], op.outputs[0]
        el = graph.element_type_of(x)
        if el == i1 and kind in BOOL_ORDER_REDUCTIONS:  # jnp.max of bools, argmax's partial results
            kind = BOOL_ORDER_REDUCTIONS[kind]
        if kind in LOGICAL_REDUCTIONS:
            if el != i1:
                raise emit.fail(f"with a bitwise {kind.name.split('.')[1]} body on {el} is not supported (only i1: all, any)")
            return [self.logical(op, kind, emit)]
        if el == i1:
            raise emit.fail("on i1 with an add/multiply body is not supported")
        reduce_cls, combine, identity = REDUCTIONS[kind]
        result = emit(reduce_cls(x, list(op.dims))) if op.dims else x
        if constant_scalar(init) != identity(graph.numpy_dtype(el)):
            result = emit(combine(result, emit.fill(init, graph.shape_of(out))))
        return [result]

    @staticmethod
    def logical(op: shlo.ReduceOp, kind: type[Operation], emit: Emitter) -> SSAValue:
        """all (and) / any (or) of i1: min / max of the values as i8, != 0; an init that
        is not the identity (false for and, true for or) decides after."""
        reduce_cls, identity = LOGICAL_REDUCTIONS[kind]
        x, init, out = op.inputs[0], op.init_values[0], op.outputs[0]
        values = emit(graph.CastOp(x, i8))
        reduced = emit(reduce_cls(values, list(op.dims))) if op.dims else values
        result = emit(graph.CompareOp("ne", reduced, emit.splat(0, reduced)))
        value = constant_scalar(init)
        if value is None or bool(value) != identity:
            flag = emit.fill(init, graph.shape_of(out))
            result = emit(graph.SelectOp(flag, result, flag) if kind is shlo.AndOp else graph.SelectOp(flag, flag, result))
        return result

    @staticmethod
    def tree(op: shlo.ReduceOp, emit: Emitter) -> list[SSAValue]:
        """The body evaluated on tensors (RegionEvaluator), one level per halving: along
        each reduced axis, innermost first, while it has m > 1 elements, lhs = the
        elements at even positions 0, 2, .., rhs = the next ones 1, 3, .., and the body
        gives m // 2 elements, each the combination of two neighbours (the last of an
        odd m is carried over). Every element so stands for a run of consecutive input
        elements, in row-major order, and the lhs run always comes first: the result is
        init op x_0 op x_1 op ... in order for any associative body (StableHLO requires
        associative and commutative bodies; argmax's NaN case is not commutative: the
        lhs NaN wins, and it is the first one here, as in jax). The init values are
        combined once at the end as the lhs. ceil(log2 n) levels for an axis of n."""
        inputs, inits = list(op.inputs), list(op.init_values)
        shape = list(graph.shape_of(inputs[0]))
        out_shape = list(graph.shape_of(op.outputs[0]))
        dims = sorted(set(op.dims), reverse=True)
        if any(shape[d] == 0 for d in dims):
            return [emit.fill(init, out_shape) for init in inits]
        levels = sum((shape[d] - 1).bit_length() for d in dims)
        body_ops = len(op.body.block.ops) - 1
        if (levels + 1) * body_ops > REDUCE_TREE_MAX_BODY_OPS:
            raise emit.fail(
                f"of {graph.fmt_shape(shape)} over dimensions {list(op.dims)} is not supported: its body of {body_ops} ops "
                f"would be evaluated {levels + 1} times (at most {REDUCE_TREE_MAX_BODY_OPS} ops in all)"
            )
        region = RegionEvaluator(op, op.body, emit, "a 'stablehlo.reduce' body")
        args = op.body.block.args

        def along(v: SSAValue, d: int, start: int, stop: int, step: int) -> SSAValue:
            begin, end, steps = [0] * len(shape), list(graph.shape_of(v)), [1] * len(shape)
            begin[d], end[d], steps[d] = start, stop, step
            return emit(graph.SliceOp(v, begin, end, steps))

        values = inputs
        for d in dims:
            while shape[d] > 1:
                m = shape[d]
                halves = [along(v, d, 0, m - 1, 2) for v in values] + [along(v, d, 1, m, 2) for v in values]
                shape[d] = m // 2
                combined = region.evaluate(dict(zip(args, halves)), list(shape))
                if m % 2:
                    combined = [emit(graph.ConcatOp([c, along(v, d, m - 1, m, 1)], d)) for c, v in zip(combined, values)]
                    shape[d] += 1
                values = combined
        values = [emit.reshape(v, out_shape) for v in values]
        return region.evaluate(dict(zip(args, [*(emit.fill(init, out_shape) for init in inits), *values])), out_shape)


WINDOW_TAPS_PER_AXIS = 64  # more offsets along one axis: an add is a product with a 0/1 matrix
WINDOW_TAPS_MAX = 4096  # slices in all (over the axes) before reduce_window is refused


class ReduceWindowPattern(StablehloPattern):
    """Pooling and jax's cumsum: the input padded with the init value, then reduced one
    axis at a time (the body's op is associative and commutative, so a box window is
    the windows of its axes in turn: k + l slices for a k x l window, not k * l).
    Along an axis, the strided slices at each window offset are combined by the body's
    graph op (add, mul, max, min); an add over more than WINDOW_TAPS_PER_AXIS offsets
    (cumsum: a window of the whole axis padded by (n - 1, 0)) is instead a product with
    a constant 0/1 matrix, M[j, i] = 1 where padded position j lies in window i (exact
    for integers; for floats a different order of the same sum, and an infinity or NaN
    in the input spreads NaN through the product's zeros, as ONNX's CumSum). An init
    that is not the op's identity is combined once at the end, as ReducePattern does.
    Windows of i1 with an or/max (and/min) body, binary dilation (erosion), are max (min)
    windows of the bools as i8. Base dilations and more than WINDOW_TAPS_MAX slices are located diagnostics."""

    OPS = (shlo.ReduceWindowOp,)

    def convert(self, op: shlo.ReduceWindowOp, emit: Emitter) -> list[SSAValue]:
        if len(op.inputs) != 1:
            raise emit.fail(f"of {len(op.inputs)} inputs at once is not supported")
        kind = reduction_kind(op)
        x, init, out = op.inputs[0], op.init_values[0], op.outputs[0]
        el = graph.element_type_of(x)
        logical = el == i1 and kind in BOOL_WINDOWS
        if logical:  # binary dilation (or, max) and erosion (and, min): max / min of the bools as i8
            kind, x, el = BOOL_WINDOWS[kind], emit(graph.CastOp(x, i8)), i8
        if kind is None or kind not in REDUCTIONS:
            raise emit.fail("is supported only with a body that is one stablehlo.add, multiply, maximum or minimum of its "
                            "arguments (or, and of i1)")
        if el == i1:
            raise emit.fail("on i1 with an add/multiply body is not supported")
        w = op.window()
        if any(b != 1 for b in w["base_dilations"]):
            raise emit.fail(f"with base_dilations {w['base_dilations']} is not supported")
        value = constant_scalar(init)
        if value is None:
            raise emit.fail("with an init value that is not a constant is not supported")
        value = int(value) if logical else value
        _, combine, identity = REDUCTIONS[kind]
        is_identity = value == identity(graph.numpy_dtype(el))
        if not is_identity and kind in (shlo.AddOp, shlo.MultiplyOp) and any(p > 0 for pair in w["pads"] for p in pair):
            # StableHLO pads with the init value; XLA (jax.jit) leaves padding out of the windows
            raise emit.fail(f"with padding and an init value ({value}) that is not the identity of its add/multiply body is not supported")
        out_shape = graph.shape_of(out)
        if 0 in out_shape:
            raise emit.fail(f"with an empty result {out.type} is not supported")
        y = self.windows(emit, x, w, kind, value, out_shape)
        if logical:
            if value != (0 if kind is shlo.MaximumOp else 1):  # an init that is not the identity (false for or)
                y = emit(combine(y, emit.splat(value, y)))
            return [emit(graph.CompareOp("ne", y, emit.splat(0, y)))]
        if not is_identity:
            y = emit(combine(y, emit.fill(init, out_shape)))
        return [y]

    @staticmethod
    def windows(emit: Emitter, x: SSAValue, w: dict, kind: type[Operation], value: float | int | bool,
                out_shape: Sequence[int]) -> SSAValue:
        """x padded with `value` and reduced by `kind` over the windows `w`, one axis at a time."""
        combine = REDUCTIONS[kind][1]
        shape = graph.shape_of(x)
        pads = list(w["pads"])
        stages = []  # (axis, window, stride, dilation, low padding when by a matrix, else None)
        for d, (k, s, wd) in enumerate(zip(w["dimensions"], w["strides"], w["window_dilations"])):
            if (k, s) == (1, 1):
                continue
            lo, hi = pads[d]
            kept = shape[d] - max(0, -lo) - max(0, -hi)
            if kind is shlo.AddOp and k > WINDOW_TAPS_PER_AXIS and kept * out_shape[d] <= MAX_DENSE_ELEMENTS:
                # the padding (zeros: the init is the identity when there is any) is left
                # out of the matrix's rows instead of padding the input
                stages.append((d, k, s, wd, max(0, lo)))
                pads[d] = (min(0, lo), min(0, hi))
            else:
                stages.append((d, k, s, wd, None))
        taps = sum(k for _, k, _, _, low in stages if low is None)
        if taps > WINDOW_TAPS_MAX:
            raise emit.fail(f"with windows of {taps} slices in all is not supported (at most {WINDOW_TAPS_MAX})")
        y = pad_with(emit, x, pads, value)
        for d, k, s, wd, low in stages:
            m = out_shape[d]
            if low is None:
                y = window_by_taps(emit, y, d, k, s, wd, m, combine)
            else:
                y = window_by_matrix(emit, y, d, k, s, wd, m, low)
        return y


def pad_with(emit: Emitter, x: SSAValue, pads: Sequence[tuple[int, int]], value: float | int | bool) -> SSAValue:
    """x padded by (low, high) per dimension with `value`; negative amounts crop."""
    shape = graph.shape_of(x)
    if any(p < 0 for pair in pads for p in pair):
        start = [max(0, -lo) for lo, _ in pads]
        stop = [n - max(0, -hi) for n, (_, hi) in zip(shape, pads)]
        x = emit(graph.SliceOp(x, start, stop))
    low, high = [max(0, lo) for lo, _ in pads], [max(0, hi) for _, hi in pads]
    return emit(graph.PadOp(x, low, high, value)) if any(low + high) else x


def window_by_taps(emit: Emitter, x: SSAValue, axis: int, k: int, stride: int, dilation: int, m: int, combine: Callable) -> SSAValue:
    """Windows of k elements `dilation` apart, `stride` apart along `axis`: the m-element
    strided slice at each of the k offsets, combined in order."""
    shape = graph.shape_of(x)
    result: SSAValue | None = None
    for t in range(k):
        start, stop, step = [0] * len(shape), list(shape), [1] * len(shape)
        start[axis], stop[axis], step[axis] = t * dilation, t * dilation + (m - 1) * stride + 1, stride
        tap = x if (start, stop, step) == ([0] * len(shape), list(shape), [1] * len(shape)) else emit(graph.SliceOp(x, start, stop, step))
        result = tap if result is None else emit(combine(result, tap))
    assert result is not None
    return result


def window_by_matrix(emit: Emitter, x: SSAValue, axis: int, k: int, stride: int, dilation: int, m: int, low: int) -> SSAValue:
    """The sums of the same windows as window_by_taps over x padded with `low` zeros
    before `axis` (and enough after): `axis` moved last, then a product with the 0/1
    matrix whose column i marks the positions of window i that are inside x. For
    cumsum, an upper triangular matrix of ones."""
    shape = graph.shape_of(x)
    n, el = shape[axis], graph.element_type_of(x)
    matrix = np.zeros((n, m), graph.numpy_dtype(el))
    windows = np.arange(m)
    for t in range(k):
        rows = windows * stride + t * dilation - low
        inside = (rows >= 0) & (rows < n)
        matrix[rows[inside], windows[inside]] = 1
    perm = [d for d in range(len(shape)) if d != axis] + [axis]
    rest = [shape[d] for d in perm[:-1]]
    moved = emit.reshape(emit.transpose(x, perm), [math.prod(rest), n])
    y = emit(graph.MatmulOp(moved, emit(graph.ConstantOp.from_numpy(matrix, el))))
    return emit.transpose(emit.reshape(y, [*rest, m]), list(np.argsort(perm)))


# ---------------------------------------------------------------------------
# sorting
# ---------------------------------------------------------------------------

SORT_MAX_AXIS = 256  # elements along the sorted axis: the comparator runs on every pair
SORT_MAX_PAIRS = 2**26  # pairs in all (elements times the axis length)


class SortPattern(StablehloPattern):
    """A stable sort by ranks, in a fixed number of graph ops whatever the axis length n.
    On pair tensors (the inputs' shape with the sorted axis d twice: j at d, i at d + 1)
    the comparator, its ops converted onto the broadcast operands, gives
    less(j, i) = cmp(x_j, x_i) and less(i, j); element i's place is
    rank_i = #{j : less(j, i)} + #{j < i : not less(i, j)}, the elements before it
    in the stable order (for a strict weak order, j < i with neither less is a tie
    kept in place). The permutation is perm_k = min over i of (rank_i == k ? i : n),
    and each input's result graph.gather_elements(x, perm, d). Exact for any element
    type and comparator (jax's total order of floats: TOTALORDER compares), stable
    whether is_stable is set or not."""

    OPS = (shlo.SortOp,)

    def convert(self, op: shlo.SortOp, emit: Emitter) -> list[SSAValue]:
        inputs = list(op.inputs)
        shape, d = graph.shape_of(inputs[0]), op.axis
        n = shape[d]
        if n <= 1 or 0 in shape:
            return inputs
        if n > SORT_MAX_AXIS:
            raise emit.fail(f"along an axis of {n} elements is not supported (at most {SORT_MAX_AXIS}: it compares every pair)")
        if math.prod(shape) * n > SORT_MAX_PAIRS:
            raise emit.fail(
                f"of {graph.fmt_shape(shape)} along axis {d} is not supported: it compares "
                f"{math.prod(shape) * n} pairs (at most {SORT_MAX_PAIRS})"
            )
        pairs = [*shape[:d], n, n, *shape[d + 1 :]]
        comparator = Comparator(op, emit, pairs)
        less_ji, less_ij = comparator.less(swap=False), comparator.less(swap=True)
        ramp = emit.ramp(n, i32)
        outer, inner = emit(graph.BroadcastOp(ramp, [d], pairs)), emit(graph.BroadcastOp(ramp, [d + 1], pairs))
        j_first = emit(graph.CompareOp("lt", outer, inner))
        not_less_ij = emit(graph.CompareOp("eq", less_ij, emit.splat(False, less_ij)))
        before = emit(graph.SelectOp(j_first, not_less_ij, less_ji))
        rank = emit(graph.ReduceSumOp(emit(graph.CastOp(before, i32)), [d]))
        at_i = [a for a in range(len(pairs)) if a != d]
        hit = emit(graph.CompareOp("eq", emit(graph.BroadcastOp(rank, at_i, pairs)), outer))  # rank_i == k, k at d
        perm = emit(graph.ReduceMinOp(emit(graph.SelectOp(hit, inner, emit.fill(emit.scalar(n, i32), pairs))), [d + 1]))
        return [emit(graph.GatherElementsOp(x, perm, d)) for x in inputs]


class Comparator:
    """A sort's comparator evaluated on pair tensors (RegionEvaluator), its arguments
    the inputs broadcast to the pairs."""

    def __init__(self, op: shlo.SortOp, emit: Emitter, pairs: list[int]):
        self.op, self.emit, self.pairs = op, emit, pairs
        self.region = RegionEvaluator(op, op.comparator, emit, "a 'stablehlo.sort' comparator")
        self.broadcasts: dict[tuple[int, int], SSAValue] = {}

    def operand(self, k: int, axis: int) -> SSAValue:
        """Input k broadcast to the pairs, its sorted axis at pair axis `axis` (d: x_j, d + 1: x_i)."""
        if (k, axis) not in self.broadcasts:
            d = self.op.axis
            dims = [a for a in range(len(self.pairs)) if a != (d + 1 if axis == d else d)]
            self.broadcasts[k, axis] = self.emit(graph.BroadcastOp(self.op.inputs[k], dims, self.pairs))
        return self.broadcasts[k, axis]

    def less(self, swap: bool) -> SSAValue:
        """cmp(lhs = x_j, rhs = x_i) on the pairs, or cmp(x_i, x_j) when swapped."""
        d = self.op.axis
        args = self.op.comparator.block.args
        values: dict[SSAValue, SSAValue] = {arg: self.operand(a // 2, d + (a % 2 != swap)) for a, arg in enumerate(args) if arg.uses}
        return self.region.evaluate(values, self.pairs)[0]


class RegionEvaluator:
    """The ops of a region of `op` (a sort's comparator, a reduce's body), which compute
    on rank-0 tensors, evaluated on tensors of a given shape: each body op is rebuilt on
    the converted values (rank-0 ones broadcast to the shape where they meet tensors of
    it) and converted by its own pattern, located at the body op; the graph ops go
    before `op`."""

    def __init__(self, op: Operation, region: Region, emit: Emitter, what: str):
        self.op, self.block, self.emit, self.what = op, region.block, emit, what

    def evaluate(self, values: dict[SSAValue, SSAValue], shape: list[int]) -> list[SSAValue]:
        """The region's returned values, in `shape`, with its block arguments bound by
        `values` (those the region uses)."""
        values = dict(values)
        for body_op in self.block.ops:
            if isinstance(body_op, shlo.ReturnOp):
                self.check_operands(body_op, values)
                return [self.emit.fill(values[v], shape) for v in body_op.operands]
            values.update(zip(body_op.results, self.convert(body_op, values, shape)))
        raise AssertionError("the verifier requires a stablehlo.return")

    def check_operands(self, body_op: Operation, values: dict[SSAValue, SSAValue]) -> None:
        if any(v not in values for v in body_op.operands):
            raise Diagnostic(f"'{body_op.name}' in {self.what} uses a value from outside it", location_of(body_op))

    def convert(self, body_op: Operation, values: dict[SSAValue, SSAValue], shape: list[int]) -> list[SSAValue]:
        pattern = next((p for p in PATTERNS if isinstance(body_op, p.OPS)), None)
        if pattern is None or body_op.regions:
            raise Diagnostic(f"'{body_op.name}' in {self.what} is not supported", location_of(body_op))
        self.check_operands(body_op, values)
        operands = [values[v] for v in body_op.operands]
        shaped = any(graph.shape_of(v) for v in operands)
        if shaped:
            operands = [self.emit.fill(v, shape) for v in operands]
        new = type(body_op).create(
            operands=operands,
            result_types=[TensorType(graph.element_type_of(r), shape if shaped else []) for r in body_op.results],
            properties=dict(body_op.properties),
            attributes=dict(body_op.attributes),
        )
        new.location = body_op.location
        try:
            check_types(new)
            return pattern().convert(new, Emitter(self.emit.rewriter, new, at=self.op))
        finally:
            new.erase()


# ---------------------------------------------------------------------------
# contractions
# ---------------------------------------------------------------------------


class DotGeneralPattern(StablehloPattern):
    """lhs -> [batch..., M, K], rhs -> [batch..., K, N] (transpose, reshape), then
    graph.matmul or graph.batch_matmul, reshaped to [batch..., lhs free..., rhs free...]."""

    OPS = (shlo.DotGeneralOp,)

    def convert(self, op: shlo.DotGeneralOp, emit: Emitter) -> list[SSAValue]:
        lb, rb, lc, rc = op.dot_dimension_numbers.lists()
        lf, rf = op.free_dims()
        a, b = graph.shape_of(op.lhs), graph.shape_of(op.rhs)
        el = graph.element_type_of(op.result)
        if el == i1:
            raise emit.fail("on i1 is not supported")
        batch = [a[d] for d in lb]
        m, k, n = math.prod(a[d] for d in lf), math.prod(a[d] for d in lc), math.prod(b[d] for d in rf)
        lhs = emit.reshape(emit.transpose(emit.cast(op.lhs, el), [*lb, *lf, *lc]), [*batch, m, k])
        rhs = emit.reshape(emit.transpose(emit.cast(op.rhs, el), [*rb, *rc, *rf]), [*batch, k, n])
        product = emit(graph.BatchMatmulOp(lhs, rhs) if batch else graph.MatmulOp(lhs, rhs))
        return [emit.reshape(product, graph.shape_of(op.result))]


class ConvolutionPattern(StablehloPattern):
    """1-, 2- and 3-D convolutions in any layout: transposes to (batch, feature,
    spatial...) / (out, in, spatial...), graph.conv2d, and a transpose to the result's
    layout. A 1-D convolution (jnp.convolve) is a 2-D one of height 1; a 3-D one is one
    2-D convolution with the depth taps in the channels and the output depths in the
    batch (onnx_ops.conv3d_as_2d, which ONNX's Conv uses too)."""

    OPS = (shlo.ConvolutionOp,)

    def convert(self, op: shlo.ConvolutionOp, emit: Emitter) -> list[SSAValue]:
        window = op.window()
        feature_groups, batch_groups = op.groups
        spatial = op.spatial_count()
        if spatial not in (1, 2, 3):
            raise emit.fail(f"with {spatial} spatial dimensions is not supported (1-, 2- and 3-D convolutions are)")
        if any(d != 1 for d in window["lhs_dilation"]):
            raise emit.fail(f"with lhs_dilate {window['lhs_dilation']} (a transposed convolution) is not supported")
        if any(window["reversal"]):
            raise emit.fail("with window reversal is not supported")
        if batch_groups != 1:
            raise emit.fail(f"with batch_group_count = {batch_groups} is not supported")
        if any(p < 0 for pair in window["pads"] for p in pair):
            raise emit.fail(f"with negative padding {window['pads']} is not supported")
        if not graph.is_float(graph.element_type_of(op.result)):
            raise emit.fail("on integers is not supported")
        in_layout, kernel_layout, out_layout = op.dimension_numbers.layouts()
        axes = list(range(spatial))
        x = emit.transpose(op.lhs, [in_layout.index(d) for d in ("b", "f", *axes)])
        w = emit.transpose(op.rhs, [kernel_layout.index(d) for d in ("o", "i", *axes)])
        strides, dilations = list(window["strides"]), list(window["rhs_dilation"])
        begins, ends = [p[0] for p in window["pads"]], [p[1] for p in window["pads"]]
        if spatial == 3:
            geometry = onnx_ops.Window(list(graph.shape_of(w)[2:]), strides, begins + ends, dilations)
            y = onnx_ops.conv3d_as_2d(NodeLike(emit), x, w, geometry, feature_groups)
        elif spatial == 2:
            y = emit(graph.Conv2dOp(x, w, strides, [*begins, *ends], dilations, feature_groups))
        else:  # a row: height 1
            n, c, width = graph.shape_of(x)
            o, i, k = graph.shape_of(w)
            x2, w2 = emit.reshape(x, [n, c, 1, width]), emit.reshape(w, [o, i, 1, k])
            y2 = emit(graph.Conv2dOp(x2, w2, [1, *strides], [0, begins[0], 0, ends[0]], [1, *dilations], feature_groups))
            y = emit.reshape(y2, [graph.shape_of(y2)[a] for a in (0, 1, 3)])
        canonical = {"b": 0, "f": 1, **{a: 2 + a for a in axes}}
        return [emit.transpose(y, [canonical[d] for d in out_layout])]


class NodeLike:
    """What onnx_ops.conv3d_as_2d asks of the ONNX node it builds for (GraphBuilding),
    from an Emitter."""

    def __init__(self, emitter: Emitter):
        self.emitter = emitter

    def emit(self, op: Operation) -> SSAValue:
        return self.emitter(op)

    def reshape(self, v: SSAValue, shape: Sequence[int]) -> SSAValue:
        return self.emitter.reshape(v, list(shape))

    def error(self, message: str) -> Diagnostic:
        return self.emitter.fail(message)


PATTERNS: list[type[StablehloPattern]] = [
    ElementwisePattern,
    FloatMathPattern,
    MoreMathPattern,
    BitCountPattern,
    LogicalPattern,
    ShiftPattern,
    BitcastConvertPattern,
    SignPattern,
    SquarePattern,
    ConvertPattern,
    ClampPattern,
    SelectPattern,
    ComparePattern,
    ConstantPattern,
    IotaPattern,
    BroadcastPattern,
    TransposePattern,
    ReshapePattern,
    SlicePattern,
    PadPattern,
    ConcatenatePattern,
    ReversePattern,
    GatherPattern,
    DynamicSlicePattern,
    DynamicUpdateSlicePattern,
    ScatterPattern,
    ReducePattern,
    ReduceWindowPattern,
    SortPattern,
    DotGeneralPattern,
    ConvolutionPattern,
]
