"""Canonicalization patterns of the graph dialect.

`graph.py` hooks these into xDSL's `canonicalize` pass through traits; each
`*_patterns()` function returns the patterns of one group of ops:

- identities disappear: a broadcast to the same shape, a reshape to the same
  type, a transpose by the identity permutation, a cast to the same type;
- chains collapse: broadcast of broadcast, transpose of transpose (removed when
  the composed permutation is the identity), reshape of reshape;
- powers by 1, 2 and 3 become multiplies (`PowBySmallIntegers`);
- a gather of a splat is the splat (`GatherFromSplat`), and a gather at constant
  indices in arithmetic progression is a strided slice (`GatherByConstantIndices`);
- small constants fold: an elementwise, broadcast, reshape or transpose op whose
  operands are all `graph.constant`s becomes one `graph.constant`, computed by
  the numpy reference (`mlfuse.reference.evaluate`), so folding means exactly
  what the reference says the op means.

    %c = graph.constant dense<[1.0, 4.0]> : tensor<2xf32>
    %s = graph.sqrt %c : tensor<2xf32>
  becomes
    %s = graph.constant dense<[1.0, 2.0]> : tensor<2xf32>
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from mlfuse.dialects import graph

MAX_FOLDED_ELEMENTS = 64
"""Non-splat constants larger than this are not folded: they would bloat the IR."""


def replace_with(rewriter: PatternRewriter, op: Operation, new_op: Operation) -> None:
    """Replace `op` by `new_op`, keeping its source location for later diagnostics."""
    new_op.location = op.location
    rewriter.replace(op, new_op)


def defining(value: SSAValue, op_type: type[Operation]) -> Operation | None:
    owner = value.owner
    return owner if isinstance(owner, op_type) else None


# ---------------------------------------------------------------------------
# identities and chains
# ---------------------------------------------------------------------------


class RemoveIdentityCast(RewritePattern):
    """`graph.cast` to the operand's own type."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.CastOp, rewriter: PatternRewriter) -> None:
        if op.input.type == op.result.type:
            rewriter.replace(op, [], [op.input])


class RemoveIdentityBroadcast(RewritePattern):
    """`graph.broadcast` to the operand's own shape (dims are then the identity)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.BroadcastOp, rewriter: PatternRewriter) -> None:
        if op.input.type == op.result.type and op.dim_map == tuple(
            range(len(graph.shape_of(op.input)))
        ):
            rewriter.replace(op, [], [op.input])


class ComposeBroadcasts(RewritePattern):
    """broadcast(broadcast(x, d1), d2) -> broadcast(x, d2 . d1).

    Operand dim i lands in intermediate dim d1[i] and then in result dim
    d2[d1[i]]; the composition is strictly increasing, and a size that was legal
    at each step (1 or equal) is legal end to end.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.BroadcastOp, rewriter: PatternRewriter) -> None:
        inner = defining(op.input, graph.BroadcastOp)
        if inner is None:
            return
        outer_dims = op.dim_map
        dims = [outer_dims[d] for d in inner.dim_map]
        replace_with(
            rewriter, op, graph.BroadcastOp(inner.input, dims, graph.shape_of(op.result))
        )


class RemoveIdentityTranspose(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.TransposeOp, rewriter: PatternRewriter) -> None:
        if op.permutation == tuple(range(len(op.permutation))):
            rewriter.replace(op, [], [op.input])


class ComposeTransposes(RewritePattern):
    """transpose(transpose(x, p1), p2) -> transpose(x, [p1[k] for k in p2]), or x."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.TransposeOp, rewriter: PatternRewriter) -> None:
        inner = defining(op.input, graph.TransposeOp)
        if inner is None:
            return
        # result dim k is intermediate dim p2[k], which is operand dim p1[p2[k]]
        perm = [inner.permutation[k] for k in op.permutation]
        if perm == list(range(len(perm))):
            rewriter.replace(op, [], [inner.input])
        else:
            replace_with(rewriter, op, graph.TransposeOp(inner.input, perm))


class RemoveIdentityReshape(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.ReshapeOp, rewriter: PatternRewriter) -> None:
        if op.input.type == op.result.type:
            rewriter.replace(op, [], [op.input])


class ComposeReshapes(RewritePattern):
    """reshape(reshape(x)) -> reshape(x): row-major reshapes only depend on the element order."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.ReshapeOp, rewriter: PatternRewriter) -> None:
        inner = defining(op.input, graph.ReshapeOp)
        if inner is None:
            return
        replace_with(rewriter, op, graph.ReshapeOp(inner.input, graph.shape_of(op.result)))


# ---------------------------------------------------------------------------
# constant folding
# ---------------------------------------------------------------------------


def splat_element(constant: graph.ConstantOp) -> np.ndarray | None:
    """The repeated element of a splat constant as a one-element array, else None."""
    element = graph.splat_value(constant.value)
    if element is None:
        return None
    return np.array([element], dtype=graph.numpy_dtype(constant.value.get_element_type()))


def cast_is_exact_in_range(x: np.ndarray, result_type: TensorType) -> bool:
    """False for a float -> integer cast of a value (or NaN) outside the integer range."""
    target = graph.numpy_dtype(result_type.get_element_type())
    if x.dtype.kind != "f" or target.kind != "i":
        return True
    info = np.iinfo(target)
    with np.errstate(invalid="ignore"):
        return bool(np.all((x > info.min - 1.0) & (x < info.max + 1.0)))


def evaluate(op: Operation, args: list[np.ndarray]) -> np.ndarray:
    from mlfuse.reference import evaluate as reference_evaluate

    return reference_evaluate(op, args)[0]


DATA_MOVEMENT = (graph.BroadcastOp, graph.ReshapeOp, graph.TransposeOp)


def folded_value(op: Operation) -> DenseIntOrFPElementsAttr | None:
    """The value of `op` if its operands are all small (or splat) constants and folding is safe."""
    if isinstance(op, graph.ConstantOp) or len(op.results) != 1 or not op.operands:
        return None
    if not all(defining(v, graph.ConstantOp) or scalar_under_broadcast(v) for v in op.operands):
        return None  # checked first: the reference interpreter is imported only to fold
    from mlfuse.reference import has_semantics

    if not has_semantics(op):
        return None
    result_type = op.results[0].type
    assert isinstance(result_type, TensorType)
    moved = moved_constant(op)
    if moved is not None:
        return graph.dense_attr(evaluate(op, [moved.to_numpy()]), result_type.get_element_type())
    splat = math.prod(result_type.get_shape()) > MAX_FOLDED_ELEMENTS
    # a broadcast rank-0 constant stands for its (large) splat
    constants = [defining(v, graph.ConstantOp) or (scalar_under_broadcast(v) if splat else None) for v in op.operands]
    if not constants or None in constants:
        return None
    if splat:
        # Large results fold only from splats, which stay splats through every op
        # folded here: evaluate one element (elementwise evaluators only read
        # the op's attributes, not its shape).
        args = [splat_element(c) for c in constants]
        if None in args:
            return None
    else:
        args = [c.to_numpy() for c in constants]
    if isinstance(op, graph.DivOp) and args[1].dtype.kind == "i" and np.any(args[1] == 0):
        return None  # integer division by zero has no value to fold to
    if isinstance(op, graph.CastOp) and not cast_is_exact_in_range(args[0], result_type):
        return None  # float -> int outside the target range is undefined at run time
    if splat and isinstance(op, DATA_MOVEMENT):
        result = args[0]
    else:
        result = evaluate(op, args)
    if result.dtype.kind == "f" and not np.all(np.isfinite(result)):
        # Left to run time. (xDSL prints inf/nan as hex bits, which it read back as finite
        # numbers before diagnostics.HexBits.)
        return None
    if splat:
        # a large splat is a scalar broadcast: xDSL would store every element
        element = result.reshape(-1)[0]
        number = float(element) if graph.is_float(result_type.get_element_type()) else int(element)
        return DenseIntOrFPElementsAttr.from_list(TensorType(result_type.get_element_type(), []), [number])
    return graph.dense_attr(result, result_type.get_element_type())


def moved_constant(op: Operation) -> graph.ConstantOp | None:
    """The dense constant that `op` only transposes or reshapes, if nothing else uses it:
    such a fold of any size moves the bytes once at compile time, and the constant it
    replaces goes away (a frozen linear layer's transposed weight)."""
    if not isinstance(op, graph.TransposeOp | graph.ReshapeOp):
        return None
    c = defining(op.operands[0], graph.ConstantOp)
    if not isinstance(c, graph.ConstantOp) or not c.result.has_one_use() or not graph.shape_of(c.result):
        return None
    return c


class FoldConstantOperands(RewritePattern):
    """An op whose operands are all constants becomes a `graph.constant`.

    Applies to ops with at most `MAX_FOLDED_ELEMENTS` result elements, to transposes
    and reshapes of any size of a dense constant used by them alone, and to ops of
    any size whose operands are all splats (their result is a splat too); a large
    splat result is written as the broadcast of a rank-0 constant, because xDSL
    stores a dense attribute's every element.
    Results that are not finite are left to run time.
    """

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if is_scalar_broadcast(op):
            return  # already the canonical form of a large splat
        value = folded_value(op)
        if value is None:
            return
        result_type = op.results[0].type
        if value.type == result_type:
            replace_with(rewriter, op, graph.ConstantOp(value))
            return
        replace_with_splat(rewriter, op, value)


def replace_with_splat(rewriter: PatternRewriter, op: Operation, scalar_value: DenseIntOrFPElementsAttr) -> None:
    """Replace `op` by the broadcast of the rank-0 constant `scalar_value` to its result's
    shape: how a large splat is written (xDSL stores a dense attribute's every element)."""
    scalar = graph.ConstantOp(scalar_value)
    scalar.location = op.location
    rewriter.insert(scalar, InsertPoint.before(op))
    replace_with(rewriter, op, graph.BroadcastOp(scalar.result, [], graph.shape_of(op.results[0])))


def scalar_under_broadcast(v: SSAValue) -> graph.ConstantOp | None:
    owner = v.owner
    return defining(owner.input, graph.ConstantOp) if isinstance(owner, Operation) and is_scalar_broadcast(owner) else None


def is_scalar_broadcast(op: Operation) -> bool:
    """`graph.broadcast` of a rank-0 constant: how a large splat is written."""
    return isinstance(op, graph.BroadcastOp) and not graph.shape_of(op.input) and defining(op.input, graph.ConstantOp) is not None


def splat_exponent(v: SSAValue) -> float | None:
    """The value of a splat float constant (dense, or a broadcast rank-0 one), else None."""
    constant = defining(v, graph.ConstantOp) or scalar_under_broadcast(v)
    element = splat_element(constant) if isinstance(constant, graph.ConstantOp) else None
    return float(element[0]) if element is not None and element.dtype.kind == "f" else None


class PowBySmallIntegers(RewritePattern):
    """pow(x, 1) -> x, pow(x, 2) -> x * x, pow(x, 3) -> (x * x) * x.

    The exponent is a splat constant. x * x is pow(x, 2) exactly (each is the correctly
    rounded square); (x * x) * x rounds twice, within an ulp of pow(x, 3), as onnxruntime
    computes it. Special values keep their powers: NaN stays NaN, (-inf)^3 = -inf,
    (-0)^3 = -0, (-0)^2 = +0, and overflow and underflow happen alike. The multiplies
    vectorize as they are, where pow expands to exp(y log|x|) with sign fixes
    (GPT-2's tanh GELU: x^3 for every activation).
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.PowOp, rewriter: PatternRewriter) -> None:
        exponent = splat_exponent(op.rhs)
        if exponent not in (1.0, 2.0, 3.0):
            return
        x = op.lhs
        if exponent == 1.0:
            rewriter.replace(op, [], [x])
            return
        square = graph.MulOp(x, x)
        if exponent == 2.0:
            replace_with(rewriter, op, square)
            return
        square.location = op.location
        rewriter.insert(square, InsertPoint.before(op))
        replace_with(rewriter, op, graph.MulOp(square.result, x))


class GatherFromSplat(RewritePattern):
    """gather(splat c, i) -> splat c, for both gathers, whatever the indices.

    Every result element is an element of the data (an index out of range is wrapped,
    then clamped into it) and every element of the data is c. BERT's token type ids
    are gather_elements of a zero splat: as a gather, the CPU kernel that stitched it
    would need the splat in memory, and the whole LayerNorm after it fell back to
    one loop nest per op.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.GatherBase, rewriter: PatternRewriter) -> None:
        constant = defining(op.data, graph.ConstantOp) or scalar_under_broadcast(op.data)
        element = splat_element(constant) if isinstance(constant, graph.ConstantOp) else None
        if element is None:
            return
        if element.dtype.kind == "f" and not np.all(np.isfinite(element)):
            return  # left to run time, as folded_value leaves them (see there)
        replace_with_splat(rewriter, op, graph.dense_attr(element.reshape(()), graph.element_type_of(op.result)))


class GatherByConstantIndices(RewritePattern):
    """gather(x, c) along axis a, for constant indices c whose values (wrapped and
    clamped as the gather does) are k, k + s, ..., k + (n - 1) s with s >= 1 (one index
    of any rank included), is a slice x[.., k : k + n s : s, ..] reshaped to the result.

    The positions are in range, so the slice reads the same elements in the same order;
    the reshape splits the axis of n into the indices' dimensions (or drops it for a
    rank-0 index). The torch exporter splits attention's packed QKV by gathers of
    scalar constants: as slices they are affine reads that vectorize, where a gather
    reads each element at an address loaded from the indices.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.GatherOp, rewriter: PatternRewriter) -> None:
        constant = op.indices.owner
        data_shape, axis = graph.shape_of(op.data), op.gather_axis
        if not isinstance(constant, graph.ConstantOp) or 0 in data_shape or 0 in graph.shape_of(op.result):
            return
        size = data_shape[axis]
        positions = constant.to_numpy().reshape(-1).astype(np.int64)
        positions = np.clip(np.where(positions < 0, positions + size, positions), 0, size - 1)
        start, step = int(positions[0]), int(positions[1] - positions[0]) if len(positions) > 1 else 1
        if step < 1 or np.any(positions != start + step * np.arange(len(positions))):
            return
        begin, end, strides = [0] * len(data_shape), list(data_shape), [1] * len(data_shape)
        begin[axis], end[axis], strides[axis] = start, start + step * (len(positions) - 1) + 1, step
        sliced = graph.SliceOp(op.data, begin, end, strides)
        sliced.location = op.location
        rewriter.insert(sliced, InsertPoint.before(op))
        replace_with(rewriter, op, graph.ReshapeOp(sliced.result, graph.shape_of(op.result)))


FOLD_CONSTANTS = FoldConstantOperands()


def elementwise_patterns() -> tuple[RewritePattern, ...]:
    return (FOLD_CONSTANTS,)


def pow_patterns() -> tuple[RewritePattern, ...]:
    return (PowBySmallIntegers(), FOLD_CONSTANTS)


def cast_patterns() -> tuple[RewritePattern, ...]:
    return (RemoveIdentityCast(), FOLD_CONSTANTS)


def broadcast_patterns() -> tuple[RewritePattern, ...]:
    return (RemoveIdentityBroadcast(), ComposeBroadcasts(), FOLD_CONSTANTS)


def transpose_patterns() -> tuple[RewritePattern, ...]:
    return (RemoveIdentityTranspose(), ComposeTransposes(), FOLD_CONSTANTS)


def reshape_patterns() -> tuple[RewritePattern, ...]:
    return (RemoveIdentityReshape(), ComposeReshapes(), FOLD_CONSTANTS)


def gather_patterns() -> tuple[RewritePattern, ...]:
    return (GatherFromSplat(), GatherByConstantIndices(), FOLD_CONSTANTS)
