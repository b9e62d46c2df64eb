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
  value that is not the op's identity is combined afterwards;
- `convolution` with two spatial dimensions, any layout, becomes graph.conv2d on
  NCHW/OIHW with transposes around it (none for jax's default NCHW layout);
- `iota` is a 1-D constant broadcast; a splat constant of more than one element is a
  graph.broadcast of a rank-0 graph.constant (docs/architecture.md, "Constants");
- `chlo.erfc(x)` is `1 - erf(x)`: within about 1e-7 absolutely in f32 (the spacing of
  floats just below 1), which is what GELU's erf form needs, but without erfc's
  relative accuracy in the tail (erfc(4) = 1.5e-8 comes out 0);
- `and`/`or`/`xor`/`not` on i1 are selects and comparisons.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, i1
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.rewriter import InsertPoint

from mlfuse.diagnostics import MAX_DENSE_ELEMENTS, Diagnostic, location_of, verify_located
from mlfuse.dialects import graph
from mlfuse.dialects import stablehlo as shlo
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
# building graph ops
# ---------------------------------------------------------------------------


class Emitter:
    """Inserts graph ops before the stablehlo op being converted, with its location."""

    def __init__(self, rewriter: PatternRewriter, op: Operation):
        self.rewriter = rewriter
        self.op = op

    def __call__(self, new: Operation) -> SSAValue:
        new.location = self.op.location
        self.rewriter.insert(new, InsertPoint.before(self.op))
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
              shlo.FloorOp, shlo.CeilOp)


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


class LogicalPattern(StablehloPattern):
    """and/or/xor/not on i1 (graph has no logical ops; integer bit operations are unsupported)."""

    OPS = (shlo.AndOp, shlo.OrOp, shlo.XorOp, shlo.NotOp)

    def convert(self, op, emit: Emitter) -> list[SSAValue]:
        if graph.element_type_of(op.results[0]) != i1:
            raise emit.fail(f"on {op.results[0].type} is not supported: only i1 (logical) operands are")
        if isinstance(op, shlo.NotOp):
            return [emit(graph.CompareOp("eq", op.operand, emit.splat(False, op.operand)))]
        a, b = op.lhs, op.rhs
        if isinstance(op, shlo.AndOp):  # a ? b : false, and a is false there
            return [emit(graph.SelectOp(a, b, a))]
        if isinstance(op, shlo.OrOp):  # a ? true : b
            return [emit(graph.SelectOp(a, a, b))]
        return [emit(graph.CompareOp("ne", a, b))]


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


class ConvertPattern(StablehloPattern):
    """graph.cast; to i1 it is `x != 0` (graph.cast leaves that case to the backend)."""

    OPS = (shlo.ConvertOp,)

    def convert(self, op: shlo.ConvertOp, emit: Emitter) -> list[SSAValue]:
        x, el = op.operand, graph.element_type_of(op.result)
        if graph.element_type_of(x) == el:
            return [x]
        if el == i1:
            return [emit(graph.CompareOp("ne", x, emit.splat(0, x)))]
        return [emit(graph.CastOp(x, el))]


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
    OPS = (shlo.CompareOp,)

    def convert(self, op: shlo.CompareOp, emit: Emitter) -> list[SSAValue]:
        el = graph.element_type_of(op.lhs)
        kind = op.kind
        if kind == "TOTALORDER":
            raise emit.fail("with compare type TOTALORDER is not supported (NaN and -0.0 would order differently)")
        if kind in ("SIGNED", "UNSIGNED") and el != i1 and (kind == "UNSIGNED") != graph.is_unsigned(el):
            raise emit.fail(f"with compare type {kind} on {el} is not supported: the element type's signedness decides")
        return [emit(graph.CompareOp(DIRECTIONS[op.direction], op.lhs, op.rhs))]


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
        ramp = emit(graph.ConstantOp.from_numpy(np.arange(shape[d]).astype(graph.numpy_dtype(el)), el))
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
    """graph.pad with the (constant) padding value; negative edges crop by a slice first."""

    OPS = (shlo.PadOp,)

    def convert(self, op: shlo.PadOp, emit: Emitter) -> list[SSAValue]:
        low, high, interior = op.amounts
        if any(interior):
            raise emit.fail(f"with interior padding {list(interior)} is not supported")
        value = constant_scalar(op.padding_value)
        if value is None:
            raise emit.fail("with a padding value that is not a constant is not supported")
        x, shape = op.operand, graph.shape_of(op.operand)
        if any(p < 0 for p in low + high):
            start = [max(0, -p) for p in low]
            stop = [n - max(0, -p) for n, p in zip(shape, high)]
            x = emit(graph.SliceOp(x, start, stop))
        low, high = [max(0, p) for p in low], [max(0, p) for p in high]
        if not any(low + high):
            return [x]
        return [emit(graph.PadOp(x, low, high, value))]


class ConcatenatePattern(StablehloPattern):
    OPS = (shlo.ConcatenateOp,)

    def convert(self, op: shlo.ConcatenateOp, emit: Emitter) -> list[SSAValue]:
        if len(op.inputs) == 1:
            return [op.inputs[0]]
        return [emit(graph.ConcatOp(list(op.inputs), op.axis))]


# ---------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------

# body op -> (graph reduction, graph combining op, identity for float, identity for int)
REDUCTIONS: dict[type[Operation], tuple[type[graph.ReduceOp], type[Operation], Callable[[np.dtype], float | int]]] = {
    shlo.AddOp: (graph.ReduceSumOp, graph.AddOp, lambda dt: 0),
    shlo.MultiplyOp: (graph.ReduceProdOp, graph.MulOp, lambda dt: 1),
    shlo.MaximumOp: (graph.ReduceMaxOp, graph.MaxOp, lambda dt: -np.inf if dt.kind == "f" else np.iinfo(dt).min),
    shlo.MinimumOp: (graph.ReduceMinOp, graph.MinOp, lambda dt: np.inf if dt.kind == "f" else np.iinfo(dt).max),
}


def reduction_kind(op: shlo.ReduceOp) -> type[Operation] | None:
    """The body's op when the body is `return op(a, b)` or `op(b, a)` for a known op."""
    block = op.body.block
    ops = list(block.ops)
    if len(ops) != 2 or not isinstance(ops[1], shlo.ReturnOp) or type(ops[0]) not in REDUCTIONS:
        return None
    body, ret = ops
    if set(body.operands) != set(block.args) or len(set(body.operands)) != 2 or tuple(ret.operands) != (body.results[0],):
        return None
    return type(body)


class ReducePattern(StablehloPattern):
    """graph.reduce_{sum,prod,max,min}; an init other than the identity is combined after."""

    OPS = (shlo.ReduceOp,)

    def convert(self, op: shlo.ReduceOp, emit: Emitter) -> list[SSAValue]:
        if len(op.inputs) != 1:
            raise emit.fail(f"of {len(op.inputs)} inputs at once (argmax, argmin) is not supported")
        kind = reduction_kind(op)
        if kind is None:
            raise emit.fail("is supported only with a body that is one stablehlo.add, multiply, maximum or minimum of its arguments")
        x, init, out = op.inputs[0], op.init_values[0], op.outputs[0]
        el = graph.element_type_of(x)
        if el == i1:
            raise emit.fail("on i1 (any, all) is not supported")
        reduce_cls, combine, identity = REDUCTIONS[kind]
        result = emit(reduce_cls(x, list(op.dims))) if op.dims else x
        if constant_scalar(init) != identity(graph.numpy_dtype(el)):
            result = emit(combine(result, emit.fill(init, graph.shape_of(out))))
        return [result]


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
    """2-D convolutions in any layout: transposes to NCHW / OIHW, graph.conv2d, and a
    transpose to the result's layout."""

    OPS = (shlo.ConvolutionOp,)

    def convert(self, op: shlo.ConvolutionOp, emit: Emitter) -> list[SSAValue]:
        window = op.window()
        feature_groups, batch_groups = op.groups
        if op.spatial_count() != 2:
            raise emit.fail(f"with {op.spatial_count()} spatial dimensions is not supported (only 2-D convolutions are)")
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
        x = emit.transpose(op.lhs, [in_layout.index(d) for d in ("b", "f", 0, 1)])
        w = emit.transpose(op.rhs, [kernel_layout.index(d) for d in ("o", "i", 0, 1)])
        (top, bottom), (left, right) = window["pads"]
        y = emit(graph.Conv2dOp(x, w, window["strides"], [top, left, bottom, right], window["rhs_dilation"], feature_groups))
        canonical = {"b": 0, "f": 1, 0: 2, 1: 3}
        return [emit.transpose(y, [canonical[d] for d in out_layout])]


PATTERNS: list[type[StablehloPattern]] = [
    ElementwisePattern,
    LogicalPattern,
    SignPattern,
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
    ReducePattern,
    DotGeneralPattern,
    ConvolutionPattern,
]
