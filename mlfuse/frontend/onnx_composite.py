"""ONNX operators that real exports use and that mlfuse composes from graph ops.

Each handler writes the operator's definition (the ONNX spec's function body, or
the formula onnxruntime evaluates) with graph ops, so the planner sees ordinary
elementwise, reduction and contraction ops and fuses them like any other:

- activations: HardSigmoid, HardSwish, Softplus, Mish, Elu, Selu, Softsign, PRelu
- tests and logic on booleans: IsNaN, IsInf, Not, And, Or, Xor
- reductions: ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp
- normalizations: InstanceNormalization, GroupNormalization
- data movement: Split, Tile, Trilu; inference-only Dropout
- ArgMax/ArgMin: the first (or last) index where the max/min (or a NaN) is
- contractions: CumSum (a product with a triangular 0/1 matrix), Einsum (two operands
  or one, as batched matrix products with transposes, reshapes and sums)

A node whose inputs are all compile-time constants never reaches these handlers:
the importer folds it with onnx's reference evaluator.
"""

from __future__ import annotations

import itertools
import math
import string
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from onnx import TensorProto
from xdsl.dialects.builtin import i1, i64
from xdsl.ir import SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, fmt_shape, is_float, shape_of
from mlfuse.frontend.onnx_ops import (
    Node,
    Value,
    Window,
    along,
    broadcast_all,
    broadcast_to,
    conv3d_as_2d,
    dense_from_numpy,
    matmul,
    normalize_axes,
    normalize_axis,
    onnx_op,
    reduce,
    same_element_type,
    slice_axis,
)

OPS_DEFINED_HERE: set[str] = set()


def composite(*names: str, **options):
    """onnx_op, recording the names (tests compile every operator of this module)."""
    OPS_DEFINED_HERE.update(names)
    return onnx_op(*names, **options)


def float_input(node: Node, index: int = 0) -> SSAValue:
    x = node.input(index)
    if not is_float(element_type_of(x)):
        raise node.error(f"input {index} must be a floating-point tensor, got {element_type_of(x)}")
    return x


def constant_array(node: Node, array: np.ndarray, like: SSAValue) -> SSAValue:
    """A graph constant holding `array` in the element type of `like`."""
    el = element_type_of(like)
    return node.emit(graph.ConstantOp(dense_from_numpy(array.astype(graph.numpy_dtype(el)), el)))


def opset_of(node: Node) -> int:
    return max(o.version for o in node.importer.model.opset_import if o.domain in ("", "ai.onnx"))


# --- activations ----------------------------------------------------------------------------


def clamp01(node: Node, x: SSAValue) -> SSAValue:
    """max(0, min(1, x))"""
    x = node.emit(graph.MinOp(x, node.scalar_like(1.0, x)))
    return node.emit(graph.MaxOp(x, node.scalar_like(0.0, x)))


def affine(node: Node, x: SSAValue, scale: float, shift: float) -> SSAValue:
    """scale * x + shift"""
    y = node.emit(graph.MulOp(x, node.scalar_like(scale, x)))
    return node.emit(graph.AddOp(y, node.scalar_like(shift, x)))


@composite("HardSigmoid", attributes=("alpha", "beta"))
def convert_hard_sigmoid(node: Node) -> list[Value]:
    x = float_input(node)
    return [clamp01(node, affine(node, x, float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5))))]


@composite("HardSwish")
def convert_hard_swish(node: Node) -> list[Value]:
    x = float_input(node)
    return [node.emit(graph.MulOp(x, clamp01(node, affine(node, x, 1 / 6, 0.5))))]


def softplus(node: Node, x: SSAValue) -> SSAValue:
    """log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)): exp never overflows."""
    tail = node.emit(graph.ExpOp(node.emit(graph.NegOp(node.emit(graph.AbsOp(x))))))
    tail = node.emit(graph.LogOp(node.emit(graph.AddOp(tail, node.scalar_like(1.0, x)))))
    return node.emit(graph.AddOp(node.emit(graph.ReluOp(x)), tail))


@composite("Softplus")
def convert_softplus(node: Node) -> list[Value]:
    return [softplus(node, float_input(node))]


@composite("Mish")
def convert_mish(node: Node) -> list[Value]:
    x = float_input(node)
    return [node.emit(graph.MulOp(x, node.emit(graph.TanhOp(softplus(node, x)))))]


def negative_part(node: Node, x: SSAValue, negative: SSAValue) -> SSAValue:
    """x where x >= 0 (NaN stays NaN), `negative` where x < 0."""
    is_negative = node.emit(graph.CompareOp("lt", x, node.scalar_like(0.0, x)))
    return node.emit(graph.SelectOp(is_negative, negative, x))


def elu(node: Node, x: SSAValue, alpha: float) -> SSAValue:
    """x where x >= 0, alpha (exp(x) - 1) where x < 0."""
    expm1 = node.emit(graph.SubOp(node.emit(graph.ExpOp(x)), node.scalar_like(1.0, x)))
    return negative_part(node, x, node.emit(graph.MulOp(expm1, node.scalar_like(alpha, x))))


@composite("Elu", attributes=("alpha",))
def convert_elu(node: Node) -> list[Value]:
    return [elu(node, float_input(node), float(node.attr("alpha", 1.0)))]


@composite("Selu", attributes=("alpha", "gamma"))
def convert_selu(node: Node) -> list[Value]:
    x = float_input(node)
    alpha = float(node.attr("alpha", 1.67326319217681884765625))
    gamma = float(node.attr("gamma", 1.05070102214813232421875))
    return [node.emit(graph.MulOp(elu(node, x, alpha), node.scalar_like(gamma, x)))]


@composite("Softsign")
def convert_softsign(node: Node) -> list[Value]:
    x = float_input(node)
    denominator = node.emit(graph.AddOp(node.emit(graph.AbsOp(x)), node.scalar_like(1.0, x)))
    return [node.emit(graph.DivOp(x, denominator))]


@composite("PRelu")
def convert_prelu(node: Node) -> list[Value]:
    x, slope = node.input(0), node.input(1)
    same_element_type(node, x, slope)
    x, slope = broadcast_all(node, x, slope)
    return [negative_part(node, x, node.emit(graph.MulOp(x, slope)))]


# --- tests and logic ---------------------------------------------------------------------------


@composite("IsNaN")
def convert_isnan(node: Node) -> list[Value]:
    x = float_input(node)
    return [node.emit(graph.CompareOp("ne", x, x))]


@composite("IsInf", attributes=("detect_negative", "detect_positive"))
def convert_isinf(node: Node) -> list[Value]:
    x = float_input(node)
    positive, negative = int(node.attr("detect_positive", 1)), int(node.attr("detect_negative", 1))
    if positive and negative:
        return [node.emit(graph.CompareOp("eq", node.emit(graph.AbsOp(x)), node.scalar_like(np.inf, x)))]
    if positive or negative:
        return [node.emit(graph.CompareOp("eq", x, node.scalar_like(np.inf if positive else -np.inf, x)))]
    return [node.splat(False, i1, shape_of(x))]


def bool_inputs(node: Node) -> list[SSAValue]:
    values = node.inputs()
    for v in values:
        if element_type_of(v) != i1:
            raise node.error(f"operands must be bool tensors, got {element_type_of(v)}")
    return broadcast_all(node, *values)


@composite("Not")
def convert_not(node: Node) -> list[Value]:
    (x,) = bool_inputs(node)
    return [node.emit(graph.CompareOp("eq", x, node.scalar_like(False, x)))]


@composite("And", "Or", "Xor")
def convert_logic(node: Node) -> list[Value]:
    a, b = bool_inputs(node)
    if node.op_type == "And":  # a ? b : false
        return [node.emit(graph.SelectOp(a, b, node.scalar_like(False, a)))]
    if node.op_type == "Or":  # a ? true : b
        return [node.emit(graph.SelectOp(a, node.scalar_like(True, a), b))]
    return [node.emit(graph.CompareOp("ne", a, b))]


# --- reductions ------------------------------------------------------------------------------


def reduction_axes(node: Node, x: SSAValue) -> list[int]:
    """The axes of a Reduce* node (attribute before opset 18, input 1 after); [] for a no-op."""
    rank = len(shape_of(x))
    axes = node.attr("axes")
    if axes is None:
        given = node.const_input(1, "axes")
        axes = None if given is None else given.reshape(-1).tolist()
    if not axes:
        return [] if node.attr("noop_with_empty_axes", 0) else list(range(rank))
    return normalize_axes(node, axes, rank)


def squared(node: Node, x: SSAValue) -> SSAValue:
    return node.emit(graph.MulOp(x, x))


REDUCE_ATTRIBUTES = ("axes", "keepdims", "noop_with_empty_axes")


@composite("ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
         attributes=REDUCE_ATTRIBUTES, static_inputs=(1,))
def convert_composite_reduce(node: Node) -> list[Value]:
    """sum/prod of a pre-map, then a post-map: L1 = sum|x|, L2 = sqrt(sum x^2), LogSum = log(sum x)."""
    op = node.op_type
    x = float_input(node) if op in ("ReduceL2", "ReduceLogSum") else node.input(0)
    if op == "ReduceL1":
        x = node.emit(graph.AbsOp(x))
    elif op in ("ReduceL2", "ReduceSumSquare"):
        x = squared(node, x)
    axes = reduction_axes(node, x)
    if not axes:
        return [x if op != "ReduceLogSum" else node.emit(graph.LogOp(x))]
    kind = graph.ReduceProdOp if op == "ReduceProd" else graph.ReduceSumOp
    y = reduce(node, kind, x, axes, bool(node.attr("keepdims", 1)))
    post = {"ReduceL2": graph.SqrtOp, "ReduceLogSum": graph.LogOp}.get(op)
    return [node.emit(post(y)) if post else y]


@composite("ReduceLogSumExp", attributes=REDUCE_ATTRIBUTES, static_inputs=(1,))
def convert_reduce_log_sum_exp(node: Node) -> list[Value]:
    """m + log(sum(exp(x - m))) with m = max(x): no overflow. A row of -inf gives -inf, as
    onnxruntime's does, because m is replaced by 0 where it is infinite."""
    x = float_input(node)
    axes = reduction_axes(node, x)
    if not axes:
        return [x]
    shape = shape_of(x)
    peak = reduce(node, graph.ReduceMaxOp, x, axes)
    finite = node.emit(graph.CompareOp("lt", node.emit(graph.AbsOp(peak)), node.scalar_like(np.inf, peak)))
    peak = node.emit(graph.SelectOp(finite, peak, node.scalar_like(0.0, peak)))
    e = node.emit(graph.ExpOp(node.emit(graph.SubOp(x, broadcast_to(node, peak, shape)))))
    y = node.emit(graph.AddOp(node.emit(graph.LogOp(reduce(node, graph.ReduceSumOp, e, axes))), peak))
    if not node.attr("keepdims", 1):
        y = node.reshape(y, [d for i, d in enumerate(shape) if i not in axes])
    return [y]


# --- normalizations -----------------------------------------------------------------------------


def normalize(node: Node, x: SSAValue, axes: Sequence[int], epsilon: float) -> SSAValue:
    """(x - mean) / sqrt(var + eps) over `axes` (two-pass variance)."""
    shape = shape_of(x)
    mean = reduce(node, graph.ReduceMeanOp, x, axes)
    centered = node.emit(graph.SubOp(x, broadcast_to(node, mean, shape)))
    variance = reduce(node, graph.ReduceMeanOp, squared(node, centered), axes)
    inv_std = node.emit(graph.RsqrtOp(node.emit(graph.AddOp(variance, node.scalar_like(epsilon, variance)))))
    return node.emit(graph.MulOp(centered, broadcast_to(node, inv_std, shape)))


def channel_affine(node: Node, y: SSAValue, scale: SSAValue, bias: SSAValue) -> SSAValue:
    shape = shape_of(y)
    for v in (scale, bias):
        if shape_of(v) != (shape[1],):
            raise node.error(f"scale and bias must have shape [{shape[1]}] (channels), got {fmt_shape(shape_of(v))}")
    y = node.emit(graph.MulOp(y, along(node, scale, 1, shape)))
    return node.emit(graph.AddOp(y, along(node, bias, 1, shape)))


@composite("InstanceNormalization", attributes=("epsilon",))
def convert_instance_norm(node: Node) -> list[Value]:
    x = float_input(node)
    rank = len(shape_of(x))
    if rank < 3:
        raise node.error(f"the input must have rank >= 3 (N x C x spatial...), got {fmt_shape(shape_of(x))}")
    y = normalize(node, x, range(2, rank), float(node.attr("epsilon", 1e-5)))
    return [channel_affine(node, y, node.input(1), node.input(2))]


@composite("GroupNormalization", attributes=("epsilon", "num_groups", "stash_type"))
def convert_group_norm(node: Node) -> list[Value]:
    """Statistics per (sample, group) over the group's channels and all spatial positions,
    then a per-channel scale and bias (opset 21; opset 18's per-group form was withdrawn)."""
    x = float_input(node)
    shape, el = shape_of(x), element_type_of(x)
    groups = int(node.attr("num_groups"))
    if len(shape) < 2 or groups < 1 or shape[1] % groups:
        raise node.error(f"num_groups {groups} must divide the channels of {fmt_shape(shape)}")
    stash = node.element_type(int(node.attr("stash_type", TensorProto.FLOAT)), "stash_type")
    grouped = (shape[0], groups, math.prod(shape[1:]) // groups)
    y = normalize(node, node.cast(node.reshape(x, grouped), stash), [2], float(node.attr("epsilon", 1e-5)))
    y = node.cast(y, el)
    scale, bias = node.input(1), node.input(2)
    if opset_of(node) < 21 and groups != shape[1] and shape_of(scale) == (groups,):
        raise node.error("per-group scale and bias (GroupNormalization-18) are not supported; opset 21 scales per channel")
    return [channel_affine(node, node.reshape(y, shape), scale, bias)]


# --- data movement --------------------------------------------------------------------------------


@composite("Dropout", attributes=("seed",), static_inputs=(2,))
def convert_dropout(node: Node) -> list[Value]:
    """Inference (or training with ratio 0): the identity, and a mask of all true."""
    training = node.const_input(2, "training_mode")
    if training is not None and bool(np.asarray(training).reshape(-1)[0]):
        ratio = node.const_input(1, "ratio")
        if ratio is None or float(np.asarray(ratio).reshape(-1)[0]) != 0.0:
            raise node.error("training_mode = true is not supported (inference only) unless the ratio is 0")
    x = node.input(0)
    return [x, node.splat(True, i1, shape_of(x))] if node.wants_output(1) else [x]


def split_sizes(node: Node, length: int, count: int) -> list[int]:
    given = node.attr("split")  # an attribute before opset 13, an input since
    if given is None and node.has_input(1):
        given = node.const_input(1, "split").reshape(-1).tolist()
    if given is not None:
        sizes = [int(s) for s in given]
    elif node.attr("num_outputs") is not None:
        n = int(node.attr("num_outputs"))  # opset 18: the last chunk may be smaller
        chunk = -(-length // n)
        sizes = [min(chunk, length - i * chunk) for i in range(n)]
    else:
        if length % count:
            raise node.error(f"cannot split length {length} into {count} equal parts")
        sizes = [length // count] * count
    if sum(sizes) != length or any(s < 0 for s in sizes):
        raise node.error(f"split sizes {sizes} do not add up to the axis length {length}")
    return sizes


@composite("Split", attributes=("axis", "num_outputs", "split"), static_inputs=(1,))
def convert_split(node: Node) -> list[Value]:
    x = node.input(0)
    shape = shape_of(x)
    axis = normalize_axis(node, int(node.attr("axis", 0)), len(shape))
    outputs = []
    start = 0
    for size in split_sizes(node, shape[axis], len(node.proto.output)):
        outputs.append(slice_axis(node, x, axis, start, start + size) if size != shape[axis] else x)
        start += size
    return outputs


@composite("Tile", static_inputs=(1,))
def convert_tile(node: Node) -> list[Value]:
    """x of shape (s0, s1, ...) tiled (r0, r1, ...): broadcast to (r0, s0, r1, s1, ...) and
    reshape to (r0*s0, r1*s1, ...); only axes with r > 1 get a new dimension."""
    x = node.input(0)
    shape = shape_of(x)
    repeats = [int(r) for r in node.const_input(1, "repeats").reshape(-1)]
    if len(repeats) != len(shape) or any(r < 0 for r in repeats):
        raise node.error(f"repeats {repeats} must have one non-negative entry per axis of {fmt_shape(shape)}")
    expanded, dims = [], []
    for s, r in zip(shape, repeats):
        if r != 1:
            expanded.append(r)
        dims.append(len(expanded))
        expanded.append(s)
    y = node.emit(graph.BroadcastOp(x, dims, expanded)) if expanded != list(shape) else x
    return [node.reshape(y, [s * r for s, r in zip(shape, repeats)])]


@composite("Trilu", attributes=("upper",), static_inputs=(1,))
def convert_trilu(node: Node) -> list[Value]:
    x = node.input(0)
    shape = shape_of(x)
    if len(shape) < 2:
        raise node.error(f"the input must have rank >= 2, got {fmt_shape(shape)}")
    k_given = node.const_input(1, "k")
    k = 0 if k_given is None else int(np.asarray(k_given).reshape(-1)[0])
    rows, cols = shape[-2:]
    keep = np.triu(np.ones((rows, cols), bool), k) if node.attr("upper", 1) else np.tril(np.ones((rows, cols), bool), k)
    mask = node.emit(graph.ConstantOp(dense_from_numpy(keep, i1)))
    mask = broadcast_to(node, mask, shape)
    return [node.emit(graph.SelectOp(mask, x, node.scalar_like(0, x)))]


# --- contractions ---------------------------------------------------------------------------------

CUMSUM_MAX_LENGTH = 4096  # the triangular matrix has length^2 entries


@composite("CumSum", attributes=("exclusive", "reverse"), static_inputs=(1,))
def convert_cumsum(node: Node) -> list[Value]:
    """y = x . T along the axis, T[i, j] = 1 where i contributes to j (i <= j; i < j when
    exclusive; reversed: i >= j). Cumulative sums in exports are short (position ids)."""
    x = node.input(0)
    shape = shape_of(x)
    axis = normalize_axis(node, int(np.asarray(node.const_input(1, "axis")).reshape(-1)[0]), len(shape))
    n = shape[axis]
    if n > CUMSUM_MAX_LENGTH:
        raise node.error(f"CumSum over {n} elements is not supported (at most {CUMSUM_MAX_LENGTH})")
    i, j = np.indices((n, n))
    exclusive, reverse = bool(node.attr("exclusive", 0)), bool(node.attr("reverse", 0))
    contributes = (i >= j) if reverse else (i <= j)
    if exclusive:
        contributes &= i != j
    if element_type_of(x) == i1:
        raise node.error("CumSum of bool tensors is not supported")
    return [apply_along(node, x, axis, contributes.T)]


@composite("CumProd", attributes=("exclusive", "reverse"), static_inputs=(1,))
def convert_cumprod(node: Node) -> list[Value]:
    """Running products by doubling (Hillis and Steele): after the step that shifts by s,
    y[j] holds the product of the up to 2s elements ending at j, so ceil(log2 n) steps,
    each y times y shifted s places with ones filling the gap. Exclusive: x shifted one
    place first; reverse: the shifts run towards the start."""
    x = node.input(0)
    shape = shape_of(x)
    axis = normalize_axis(node, int(np.asarray(node.const_input(1, "axis")).reshape(-1)[0]), len(shape))
    if element_type_of(x) == i1:
        raise node.error("CumProd of bool tensors is not supported")
    n, reverse = shape[axis], bool(node.attr("reverse", 0))

    def shifted(v: SSAValue, s: int) -> SSAValue:
        if s >= n:
            return node.scalar_like(1, v)
        kept = slice_axis(node, v, axis, s, n) if reverse else slice_axis(node, v, axis, 0, n - s)
        low, high = [0] * len(shape), [0] * len(shape)
        (high if reverse else low)[axis] = s
        return node.emit(graph.PadOp(kept, low, high, 1))

    y = shifted(x, 1) if node.attr("exclusive", 0) else x
    step = 1
    while step < n:
        y = node.emit(graph.MulOp(y, shifted(y, step)))
        step *= 2
    return [y]


@composite("Compress", attributes=("axis",), static_inputs=(1,))
def convert_compress(node: Node) -> list[Value]:
    """The slices along `axis` (of the flattened input without one) where the condition,
    known at compile time, is true: a gather at those constant positions. A condition
    shorter than the axis selects from its first entries."""
    x = node.input(0)
    condition = np.asarray(node.const_input(1, "condition")).reshape(-1).astype(bool)
    if node.attr("axis") is None:
        x = node.reshape(x, (math.prod(shape_of(x)),))
        axis = 0
    else:
        axis = normalize_axis(node, int(node.attr("axis")), len(shape_of(x)))
    n = shape_of(x)[axis]
    if condition.size > n:
        raise node.error(f"the condition has {condition.size} entries, more than the {n} of axis {axis}")
    picked = np.flatnonzero(condition)
    if picked.size == 0:
        raise node.error("the condition selects nothing (empty tensors are not supported)")
    if picked.size == n:
        return [x]
    return [node.emit(graph.GatherOp(x, node.emit(graph.ConstantOp(dense_from_numpy(picked.astype(np.int64), i64))), axis))]


@composite("ReverseSequence", attributes=("batch_axis", "time_axis"))
def convert_reverse_sequence(node: Node) -> list[Value]:
    """Each batch entry's first sequence_lens[b] steps reversed, the rest kept: one
    GatherElements along the time axis at index L - 1 - t where t < L, else t."""
    x, lengths = node.input(0), node.input(1)
    shape = shape_of(x)
    if len(shape) < 2:
        raise node.error(f"the input must have rank >= 2, got shape {fmt_shape(shape)}")
    batch_axis = normalize_axis(node, int(node.attr("batch_axis", 1)), len(shape), "batch_axis")
    time_axis = normalize_axis(node, int(node.attr("time_axis", 0)), len(shape), "time_axis")
    if batch_axis == time_axis or batch_axis > 1 or time_axis > 1:
        raise node.error(f"batch_axis and time_axis must be 0 and 1 in some order, got {batch_axis} and {time_axis}")
    if shape_of(lengths) != (shape[batch_axis],) or element_type_of(lengths) != i64:
        raise node.error(f"sequence_lens must be {shape[batch_axis]} int64 values, got {fmt_shape(shape_of(lengths))} "
                         f"{element_type_of(lengths)}")
    steps = shape[time_axis]
    t = node.emit(graph.BroadcastOp(constant_array(node, np.arange(steps), lengths), [time_axis], shape))
    length = node.emit(graph.BroadcastOp(lengths, [batch_axis], shape))
    reversed_index = node.emit(graph.SubOp(node.emit(graph.SubOp(length, node.scalar_like(1, length))), t))
    index = node.emit(graph.SelectOp(node.emit(graph.CompareOp("lt", t, length)), reversed_index, t))
    return [node.emit(graph.GatherElementsOp(x, index, time_axis))]


def einsum_terms(node: Node, equation: str, ranks: Sequence[int]) -> tuple[list[str], str]:
    """The operand and output subscripts, with '...' spelled out as capital letters."""
    equation = equation.replace(" ", "")
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise node.error(f"equation '{equation}' names {len(terms)} operands, the node has {len(ranks)}")
    spare = iter(string.ascii_uppercase)
    ellipsis = ""
    spelled = []
    for term, rank in zip(terms, ranks):
        if "..." in term:
            width = rank - len(term.replace("...", ""))
            if not ellipsis or len(ellipsis) < width:
                ellipsis = "".join(next(spare) for _ in range(width - len(ellipsis))) + ellipsis
            term = term.replace("...", ellipsis[len(ellipsis) - width:] if width else "")
        if len(term) != rank or not (term.isalpha() or term == ""):
            raise node.error(f"einsum term '{term}' does not match an operand of rank {rank}")
        spelled.append(term)
    if not arrow:  # implicit output: the letters used once, in alphabetical order
        letters = "".join(spelled)
        out = ellipsis + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c.islower()))
    out = out.replace("...", ellipsis)
    return spelled, out


def permute(node: Node, x: SSAValue, have: str, want: str) -> SSAValue:
    if have == want:
        return x
    return node.emit(graph.TransposeOp(x, [have.index(c) for c in want]))


def take_diagonals(node: Node, x: SSAValue, term: str) -> tuple[SSAValue, str]:
    """A letter repeated in one operand's term ('ii', 'bii') is its diagonal: the two axes
    moved last, flattened (n * n) and gathered at 0, n + 1, 2 (n + 1)..., one axis with
    the letter once; again while a letter repeats."""
    while len(set(term)) != len(term):
        letter = next(c for c in term if term.count(c) > 1)
        first, second = term.index(letter), term.index(letter, term.index(letter) + 1)
        n = shape_of(x)[first]
        if shape_of(x)[second] != n:
            raise node.error(f"einsum term '{term}' repeats '{letter}' over axes of sizes {n} and {shape_of(x)[second]}")
        rest = "".join(c for i, c in enumerate(term) if i not in (first, second))
        order = [i for i in range(len(term)) if i not in (first, second)] + [first, second]
        moved = node.emit(graph.TransposeOp(x, order)) if order != list(range(len(term))) else x
        flat = node.reshape(moved, [*shape_of(moved)[:-2], n * n])
        diagonal = node.emit(graph.ConstantOp(dense_from_numpy(np.arange(n, dtype=np.int64) * (n + 1), i64)))
        x, term = node.emit(graph.GatherOp(flat, diagonal, len(rest))), rest + letter
    return x, term


def sum_out(node: Node, x: SSAValue, term: str, keep: str) -> tuple[SSAValue, str]:
    """Sum the axes of `term` whose letters are not in `keep`."""
    axes = [i for i, c in enumerate(term) if c not in keep]
    if not axes:
        return x, term
    return reduce(node, graph.ReduceSumOp, x, axes, keepdims=False), "".join(c for c in term if c in keep)


@composite("Einsum", attributes=("equation",))
def convert_einsum(node: Node) -> list[Value]:
    """One or two operands, each first reduced to its diagonals where a letter repeats
    (take_diagonals). Two: letters split into batch (both operands and the output),
    contracted (both, not the output), and free (one operand and the output); letters in
    one operand only and not in the output are summed first. Then one batched product of
    (batch, free_a, contracted) and (batch, contracted, free_b)."""
    operands = node.inputs()
    if len(operands) not in (1, 2):
        raise node.error(f"einsum with {len(operands)} operands is not supported (one or two)")
    same_element_type(node, *operands)
    terms, out = einsum_terms(node, str(node.attr("equation")), [len(shape_of(v)) for v in operands])
    diagonals = [take_diagonals(node, v, t) for v, t in zip(operands, terms)]
    operands, terms = [v for v, _ in diagonals], [t for _, t in diagonals]
    if len(operands) == 1:
        x, term = sum_out(node, operands[0], terms[0], out)
        return [permute(node, x, term, out)]
    (a, ta), (b, tb) = (sum_out(node, v, t, out + (terms[1 - i])) for i, (v, t) in enumerate(zip(operands, terms)))
    sizes = dict(zip(ta, shape_of(a))) | dict(zip(tb, shape_of(b)))
    batch = "".join(c for c in out if c in ta and c in tb)
    contracted = "".join(c for c in ta if c in tb and c not in out)
    free_a = "".join(c for c in ta if c not in tb)
    free_b = "".join(c for c in tb if c not in ta)
    if any(shape_of(a)[ta.index(c)] != shape_of(b)[tb.index(c)] for c in batch + contracted):
        raise node.error(f"operand shapes {fmt_shape(shape_of(a))} and {fmt_shape(shape_of(b))} disagree on shared subscripts")
    size = lambda letters: math.prod(sizes[c] for c in letters)  # noqa: E731
    a3 = node.reshape(permute(node, a, ta, batch + free_a + contracted), (size(batch), size(free_a), size(contracted)))
    b3 = node.reshape(permute(node, b, tb, batch + contracted + free_b), (size(batch), size(contracted), size(free_b)))
    if size(batch) == 1:
        y = node.emit(graph.MatmulOp(node.reshape(a3, shape_of(a3)[1:]), node.reshape(b3, shape_of(b3)[1:])))
    else:
        y = node.emit(graph.BatchMatmulOp(a3, b3))
    y = node.reshape(y, [sizes[c] for c in batch + free_a + free_b])
    return [permute(node, y, batch + free_a + free_b, out)]


# --- upsampling: ConvTranspose and Resize ---------------------------------------------------------


def dilate(node: Node, x: SSAValue, strides: Sequence[int]) -> SSAValue:
    """Insert stride-1 zeros between the spatial elements of (N, C, *spatial): each spatial
    axis gets a unit axis after it, padded to the stride, then folded back and cut."""
    shape = shape_of(x)
    spatial = shape[2:]
    if all(s == 1 for s in strides):
        return x
    unit = [*shape[:2]] + [d for n in spatial for d in (n, 1)]
    low = [0] * len(unit)
    high = [0, 0] + [h for s in strides for h in (0, s - 1)]
    padded = node.emit(graph.PadOp(node.reshape(x, unit), low, high, 0.0))
    folded = node.reshape(padded, [*shape[:2], *(n * s for n, s in zip(spatial, strides))])
    stop = [*shape[:2], *((n - 1) * s + 1 for n, s in zip(spatial, strides))]
    return node.emit(graph.SliceOp(folded, [0] * len(shape), stop))


def pad_or_crop(node: Node, x: SSAValue, low: Sequence[int], high: Sequence[int]) -> SSAValue:
    """Pad the spatial axes with zeros where low/high are positive, cut where negative."""
    shape = shape_of(x)
    if any(p > 0 for p in (*low, *high)):
        x = node.emit(graph.PadOp(x, [0, 0, *(max(p, 0) for p in low)], [0, 0, *(max(p, 0) for p in high)], 0.0))
    if any(p < 0 for p in (*low, *high)):
        shape = shape_of(x)
        start = [0, 0, *(max(-p, 0) for p in low)]
        stop = [*shape[:2], *(n - max(-p, 0) for n, p in zip(shape[2:], high))]
        x = node.emit(graph.SliceOp(x, start, stop))
    return x


def transposed_pads(node: Node, spatial, kernel, strides, dilations, output_padding) -> list[int]:
    """ConvTranspose's pads (begins..., ends...), from `pads`, `output_shape` or `auto_pad` (the spec's
    total_padding = stride (in - 1) + output_padding + (k - 1) dilation + 1 - out)."""
    n = len(spatial)
    auto_pad = node.attr("auto_pad", "NOTSET")
    output_shape = node.attr("output_shape")
    if auto_pad == "NOTSET" and output_shape is None:
        return node.int_list("pads", [0] * 2 * n, 2 * n)
    if auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise node.error(f"auto_pad \"{auto_pad}\" is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    if auto_pad == "VALID":
        return [0] * 2 * n
    out = [int(o) for o in output_shape][-n:] if output_shape is not None else [i * s for i, s in zip(spatial, strides)]
    total = [s * (i - 1) + op + (k - 1) * d + 1 - o
             for i, s, op, k, d, o in zip(spatial, strides, output_padding, kernel, dilations, out)]
    # a negative total (output_shape beyond the natural size) pads the far end with zeros
    upper = auto_pad == "SAME_UPPER"  # the spec: NOTSET with output_shape splits like SAME_LOWER
    begins = [t // 2 if upper else t - t // 2 for t in total]
    return begins + [t - b for t, b in zip(total, begins)]


def kernel_source_shape(weight: np.ndarray | SSAValue) -> tuple[int, ...]:
    return tuple(weight.shape) if isinstance(weight, np.ndarray) else shape_of(weight)


def transposed_kernel(node: Node, weight: np.ndarray | SSAValue, group: int, like: SSAValue) -> SSAValue:
    """(C_in, C_out/g, kh, kw) -> (C_out, C_in/g, kh, kw), spatially flipped: folded at compile
    time for a constant weight, gathers with reversed indices and a transpose otherwise."""
    cin, cout_g, *kernel = kernel_source_shape(weight)
    grouped = (group, cin // group, cout_g, *kernel)
    final = (group * cout_g, cin // group, *kernel)
    spatial = range(2, 2 + len(kernel))
    swap = [0, 2, 1, *(a + 1 for a in spatial)]
    if isinstance(weight, np.ndarray):
        flipped = np.flip(weight, tuple(spatial)).reshape(grouped)
        return constant_array(node, np.ascontiguousarray(flipped.transpose(swap).reshape(final)), like)
    for axis in spatial:
        size = shape_of(weight)[axis]
        if size > 1:
            reverse = node.emit(graph.ConstantOp(dense_from_numpy(np.arange(size - 1, -1, -1, dtype=np.int64), i64)))
            weight = node.emit(graph.GatherOp(weight, reverse, axis))
    swapped = node.emit(graph.TransposeOp(node.reshape(weight, grouped), swap))
    return node.reshape(swapped, final)


def blockwise_transposed_conv(node: Node, x: SSAValue, weight: np.ndarray) -> SSAValue:
    """A 2-D transposed convolution whose kernel equals its strides, unpadded, one group: each
    input pixel writes a kh x kw block of its own, so it is a product and a depth-to-space
    (the dilated convolution multiplied (kh kw - 1) / (kh kw) of its taps by inserted zeros:
    U-Net's 2x2 stride-2 upsampling did 4x the multiply-adds):

        y[n, o, i kh + a, j kw + b] = sum_c W[c, o, a, b] x[n, c, i, j]"""
    n, cin, h, w = shape_of(x)
    _, cout, kh, kw = weight.shape
    wt = constant_array(node, np.ascontiguousarray(weight.reshape(cin, cout * kh * kw).T), x)
    pixels = node.reshape(x, (cin, h * w) if n == 1 else (n, cin, h * w))
    y = matmul(node, wt, pixels)  # (n,) cout kh kw, h w
    y = node.reshape(y, (n, cout, kh, kw, h, w))
    y = node.emit(graph.TransposeOp(y, [0, 1, 4, 2, 5, 3]))  # n, cout, h, kh, w, kw
    return node.reshape(y, (n, cout, h * kh, w * kw))


@composite("ConvTranspose", attributes=("auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                                        "output_shape", "pads", "strides"))
def convert_conv_transpose(node: Node) -> list[Value]:
    """The gradient of a convolution, as a convolution: dilate the input by the strides, pad it
    by dilation (k - 1) - pad (cut where negative) plus output_padding at the end, and
    convolve at stride 1 with the kernel flipped and its in/out channels swapped per group.
    A constant kernel as large as the strides (no overlap, no padding) is a product and a
    depth-to-space instead (blockwise_transposed_conv)."""
    x = float_input(node)
    weight = node.constant(1)
    if weight is None:  # a run-time weight: flipped by gathers with reversed indices
        weight = node.input(1)
    rank = len(shape_of(x))
    if rank not in (3, 4, 5) or len(kernel_source_shape(weight)) != rank:
        raise node.error(f"only 1-D, 2-D and 3-D transposed convolutions are supported, got input "
                         f"{fmt_shape(shape_of(x))}")
    kernel = list(kernel_source_shape(weight)[2:])
    n = rank - 2
    strides = node.int_list("strides", [1] * n, n)
    dilations = node.int_list("dilations", [1] * n, n)
    output_padding = node.int_list("output_padding", [0] * n, n)
    pads = transposed_pads(node, shape_of(x)[2:], kernel, strides, dilations, output_padding)
    if rank == 3:  # lift to 2-D: (N, C, 1, L)
        w_shape = (*kernel_source_shape(weight)[:2], 1, kernel[0])
        x = node.reshape(x, (*shape_of(x)[:2], 1, shape_of(x)[2]))
        weight = weight.reshape(w_shape) if isinstance(weight, np.ndarray) else node.reshape(weight, w_shape)
        kernel, strides, dilations = [1, *kernel], [1, *strides], [1, *dilations]
        output_padding, pads = [0, *output_padding], [0, pads[0], 0, pads[1]]
    group = int(node.attr("group", 1))
    cin, cout_g = kernel_source_shape(weight)[:2]
    if cin != shape_of(x)[1] or cin % group:
        raise node.error(f"weight {fmt_shape(kernel_source_shape(weight))} does not match input channels "
                         f"{shape_of(x)[1]} in {group} groups")
    if (isinstance(weight, np.ndarray) and group == 1 and kernel == strides and not any(pads) and len(kernel) == 2
            and not any(output_padding) and all(d == 1 for d in dilations)):
        y = blockwise_transposed_conv(node, x, weight)
    else:
        w = transposed_kernel(node, weight, group, x)
        reach = [d * (k - 1) for d, k in zip(dilations, kernel)]
        n = len(kernel)
        z = pad_or_crop(node, dilate(node, x, strides), [r - p for r, p in zip(reach, pads[:n])],
                        [r - p + op for r, p, op in zip(reach, pads[n:], output_padding)])
        if n == 3:
            y = conv3d_as_2d(node, z, w, Window(kernel, [1] * 3, [0] * 6, dilations), group)
        else:
            y = node.emit(graph.Conv2dOp(z, w, [1, 1], [0, 0, 0, 0], dilations, group))
    if node.has_input(2):
        y = node.emit(graph.AddOp(y, along(node, node.input(2), 1, shape_of(y))))
    return [node.reshape(y, (*shape_of(y)[:2], shape_of(y)[3])) if rank == 3 else y]


RESIZE_ATTRIBUTES = ("antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                     "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode")


class AxisResize(NamedTuple):
    """How Resize changes one axis."""

    axis: int
    n_out: int
    scale: float | None  # None where sizes were given
    roi: tuple[float, float] | None = None  # tf_crop_and_resize's (start, end), fractions of the axis
    # keep_aspect_ratio_policy: (this axis's size as given, and the length and size of the
    # axis whose size / length is the scale of every axis)
    aspect: tuple[int, int, int] | None = None


def resize_matrix(node: Node, n_in: int, plan: AxisResize) -> np.ndarray:
    """The (n_out, n_in) matrix of one axis of the node's Resize: onnx's reference evaluator
    resizes an identity, so every mode, coordinate transformation and rounding rule is
    exactly onnx's (linear, cubic and nearest are separable per axis). Rows that
    tf_crop_and_resize extrapolates are zero here (see extrapolated_rows)."""
    return evaluate_resize(node, np.eye(n_in, dtype=np.float64), plan, extrapolation=0.0).T


def extrapolated_rows(node: Node, n_in: int, plan: AxisResize) -> np.ndarray:
    """Which outputs of an axis tf_crop_and_resize samples outside the input (they take
    extrapolation_value, whatever the input): those a resize of zeros sets to 1 when the
    extrapolation value is 1."""
    return evaluate_resize(node, np.zeros((1, n_in), np.float64), plan, extrapolation=1.0).reshape(-1) != 0


def evaluate_resize(node: Node, x: np.ndarray, plan: AxisResize, extrapolation: float) -> np.ndarray:
    """The node's Resize of the 2-D `x` along its last axis, by onnx's reference evaluator.
    Under keep_aspect_ratio_policy one scale, an axis's own, holds for all: a third axis of
    that axis's length and size, constant in x, makes the policy pick it here too."""
    from onnx import helper

    from mlfuse.frontend.onnx import evaluate_node

    skipped = ("axes", "keep_aspect_ratio_policy", "extrapolation_value")
    attrs = [a for a in node.proto.attribute if a.name not in skipped]
    roi = "roi" if plan.roi else ""
    inputs = ["x", roi, "scales"] if plan.scale is not None else ["x", roi, "", "sizes"]
    proto = helper.make_node("Resize", inputs, ["y"], extrapolation_value=extrapolation)
    proto.attribute.extend(attrs)
    feeds = {"x": x}
    if plan.roi:
        feeds["roi"] = np.array([0.0, plan.roi[0], 1.0, plan.roi[1]], np.float64)
    if plan.scale is not None:
        feeds["scales"] = np.array([1.0, plan.scale], np.float32)
    elif plan.aspect:
        given, length, size = plan.aspect
        feeds["x"] = np.repeat(x[:, :, None], length, axis=2)
        feeds["sizes"] = np.array([given, size], np.int64)
        proto.attribute.extend([helper.make_attribute("axes", [1, 2]),
                                helper.make_attribute("keep_aspect_ratio_policy", node.attr("keep_aspect_ratio_policy"))])
    else:
        feeds["sizes"] = np.array([x.shape[0], plan.n_out], np.int64)
    (y,) = evaluate_node(proto, feeds, node.importer.model.opset_import)
    y = np.asarray(y)
    return y[:, :, 0] if plan.aspect else y


def resize_rois(node: Node, axes: list[int]) -> list[tuple[float, float] | None]:
    """tf_crop_and_resize's (start, end) of each axis in `axes`; None for the other modes."""
    if node.attr("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize":
        return [None] * len(axes)
    roi = node.const_input(1, "roi")
    if roi is None or roi.size != 2 * len(axes):
        raise node.error(f"tf_crop_and_resize needs a roi of {2 * len(axes)} values (starts, then ends, of axes {axes})")
    flat = [float(v) for v in roi.reshape(-1)]
    return [(flat[i], flat[len(axes) + i]) for i in range(len(axes))]


def keep_aspect(node: Node, shape: Sequence[int], axes: list[int], sizes: list[int]) -> tuple[list[int], list[tuple[int, int, int] | None]]:
    """keep_aspect_ratio_policy: the output sizes (every axis scaled by the smallest,
    not_larger, or the largest, not_smaller, of sizes / length, rounded half up as onnx's
    reference does) and AxisResize.aspect of each axis; stretch: sizes as given."""
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    if policy == "stretch":
        return sizes, [None] * len(axes)
    if policy not in ("not_larger", "not_smaller"):
        raise node.error(f"keep_aspect_ratio_policy {policy!r} is not stretch, not_larger or not_smaller")
    ratios = [size / shape[a] for a, size in zip(axes, sizes)]
    pick = ratios.index(min(ratios) if policy == "not_larger" else max(ratios))
    scale = ratios[pick]
    return [int(scale * shape[a] + 0.5) for a in axes], [(given, shape[axes[pick]], sizes[pick]) for given in sizes]


def resize_plan(node: Node, shape: Sequence[int]) -> list[AxisResize]:
    """How every axis that Resize changes changes."""
    rank = len(shape)
    axes = normalize_axes(node, node.attr("axes", list(range(rank))), rank)
    scales, sizes = node.const_input(2, "scales"), node.const_input(3, "sizes")
    rois = resize_rois(node, axes)
    if scales is not None and scales.size:
        scales = [float(v) for v in scales.reshape(-1)]
        if len(scales) != len(axes) or any(v <= 0 for v in scales):
            raise node.error(f"scales {scales} must be positive, one per axis in {axes}")
        plan = [AxisResize(a, int(math.floor(shape[a] * v)), v, r) for a, v, r in zip(axes, scales, rois)]
    elif sizes is not None:
        sizes = [int(v) for v in sizes.reshape(-1)]
        if len(sizes) != len(axes) or any(v <= 0 for v in sizes):
            raise node.error(f"sizes {sizes} must be positive, one per axis in {axes}")
        outputs, aspects = keep_aspect(node, shape, axes, sizes)
        plan = [AxisResize(a, v, None, r, k) for a, v, r, k in zip(axes, outputs, rois, aspects)]
    else:
        raise node.error("one of scales and sizes is required")
    return [p for p in plan if p.n_out != shape[p.axis] or p.scale not in (None, 1.0) or p.roi not in (None, (0.0, 1.0))
            or p.aspect is not None]


# A pass along the innermost axis gathers within rows (scalar loads, or a vector gather),
# one along an outer axis moves whole rows: about this many times the cost per element.
INNERMOST_PASS_COST = 4


def resize_order(plan: list[AxisResize], shape: Sequence[int]) -> list[AxisResize]:
    """The resized axes in the order that costs least, each pass's output elements weighed
    by INNERMOST_PASS_COST along the innermost axis: U-Net's 2x bilinear upsampling gathers
    along its rows before the rows double, not after (the passes are separable, so any
    order interpolates the same up to rounding); the plan's order among equals."""

    def cost(order: Sequence[AxisResize]) -> int:
        size, total = list(shape), 0
        for axis, n_out, *_ in order:
            size[axis] = n_out
            total += math.prod(size) * (INNERMOST_PASS_COST if axis == len(shape) - 1 else 1)
        return total

    return list(min(itertools.permutations(plan), key=cost, default=()))  # the first of the cheapest


def apply_along(node: Node, x: SSAValue, axis: int, matrix: np.ndarray) -> SSAValue:
    """y[..., i, ...] = sum_j matrix[i, j] x[..., j, ...] along `axis`."""
    shape = shape_of(x)
    perm = [d for d in range(len(shape)) if d != axis] + [axis]
    moved = node.emit(graph.TransposeOp(x, perm)) if axis != len(shape) - 1 else x
    rows = math.prod(shape_of(moved)[:-1])
    y = node.emit(graph.MatmulOp(node.reshape(moved, (rows, shape[axis])), constant_array(node, matrix.T, x)))
    y = node.reshape(y, (*shape_of(moved)[:-1], matrix.shape[0]))
    return node.emit(graph.TransposeOp(y, list(np.argsort(perm)))) if axis != len(shape) - 1 else y


def repeat_along(node: Node, x: SSAValue, axis: int, times: int) -> SSAValue:
    """Each element repeated `times` along `axis` (nearest upsampling by an integer): exact for
    every value, NaN and infinities included, unlike a product with a 0/1 matrix."""
    shape = list(shape_of(x))
    unit = shape[: axis + 1] + [1] + shape[axis + 1:]
    wide = shape[: axis + 1] + [times] + shape[axis + 1:]
    y = node.emit(graph.BroadcastOp(node.reshape(x, unit), range(len(unit)), wide))
    shape[axis] *= times
    return node.reshape(y, shape)


def resize_taps(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The rows of an interpolation matrix as taps: (indices, weights), each (n_out, k), the
    nonzero columns of every row in column order, a shorter row padded with its last column
    at weight 0; None when k is over half the input (a product is as cheap then)."""
    n_out, n_in = matrix.shape
    k = int(np.count_nonzero(matrix, axis=1).max(initial=0))
    if k == 0 or 2 * k > n_in:
        return None
    indices, weights = np.zeros((n_out, k), np.int64), np.zeros((n_out, k))
    for i, row in enumerate(matrix):
        cols = np.flatnonzero(row)
        indices[i, : len(cols)], weights[i, : len(cols)] = cols, row[cols]
        indices[i, len(cols) :] = cols[-1] if len(cols) else 0
    return indices, weights


def gather_taps(node: Node, x: SSAValue, axis: int, taps: tuple[np.ndarray, np.ndarray]) -> SSAValue:
    """y[..., i, ...] = sum_t weights[i, t] x[..., indices[i, t], ...] along `axis`, in tap
    order: k gathers, products and sums, elementwise (linear: 2 taps a row where the product
    with the whole matrix did n_in multiply-adds, and a NaN or inf of x spoiled every row)."""
    indices, weights = taps
    y = None
    for t in range(indices.shape[1]):
        index = node.emit(graph.ConstantOp(dense_from_numpy(np.ascontiguousarray(indices[:, t]), i64)))
        picked = node.emit(graph.GatherOp(x, index, axis))
        weight = along(node, constant_array(node, np.ascontiguousarray(weights[:, t]), x), axis, shape_of(picked))
        term = node.emit(graph.MulOp(picked, weight))
        y = term if y is None else node.emit(graph.AddOp(y, term))
    assert y is not None
    return y


@composite("Resize", attributes=RESIZE_ATTRIBUTES, static_inputs=(1, 2, 3))
def convert_resize(node: Node) -> list[Value]:
    """Per resized axis, the interpolation matrix (resize_matrix) applied as taps (gathers
    weighted and summed: resize_taps) where its rows are sparse, as a product otherwise;
    nearest upsampling by an integer factor is a repeat instead."""
    x = float_input(node)
    for plan in resize_order(resize_plan(node, shape_of(x)), shape_of(x)):
        axis, n_out, n_in = plan.axis, plan.n_out, shape_of(x)[plan.axis]
        matrix = resize_matrix(node, n_in, plan)
        times = n_out // n_in
        nearest_repeat = np.repeat(np.eye(n_in), times, axis=0) if n_out == times * n_in else None
        taps = resize_taps(matrix)
        if nearest_repeat is not None and np.array_equal(matrix, nearest_repeat):
            x = repeat_along(node, x, axis, times)
        elif taps is not None:
            x = gather_taps(node, x, axis, taps)
        else:
            x = apply_along(node, x, axis, matrix)
        if plan.roi is not None:
            x = extrapolate(node, x, axis, extrapolated_rows(node, n_in, plan))
    return [x]


def extrapolate(node: Node, x: SSAValue, axis: int, rows: np.ndarray) -> SSAValue:
    """extrapolation_value where tf_crop_and_resize samples outside the input along `axis`
    (a select, as onnx's where: whatever x holds there, NaN included)."""
    if not rows.any():
        return x
    shape = shape_of(x)
    mask = node.emit(graph.ConstantOp(dense_from_numpy(rows, i1)))
    value = node.scalar_like(float(node.attr("extrapolation_value", 0.0)), x)
    return node.emit(graph.SelectOp(along(node, mask, axis, shape), value, x))


@composite("GatherND", attributes=("batch_dims",))
def convert_gather_nd(node: Node) -> list[Value]:
    """GatherND: the last axis of `indices` addresses K axes of `data` after the first
    batch_dims (which data and indices share, entry for entry); the batch axes and those K
    are flattened into one and each index tuple, with its batch entry's offset, into a
    linear index (negative entries wrap once, as in Gather), then one graph.gather along
    axis 0."""
    data, indices = node.input(0), node.input(1)
    sd, si = shape_of(data), shape_of(indices)
    b = int(node.attr("batch_dims", 0))
    if not 0 <= b < min(len(sd), len(si)) or tuple(sd[:b]) != tuple(si[:b]):
        raise node.error(f"batch_dims {b} must count leading axes that data {fmt_shape(sd)} and indices "
                         f"{fmt_shape(si)} share")
    if not 1 <= si[-1] <= len(sd) - b or is_float(element_type_of(indices)):
        raise node.error(f"indices {fmt_shape(si)} must be integers whose last axis addresses data {fmt_shape(sd)}")
    k = si[-1]
    rows = si[:-1]
    linear = None
    for axis in range(k):
        size = sd[b + axis]
        part = node.reshape(slice_axis(node, indices, len(si) - 1, axis, axis + 1), rows)
        wrapped = node.emit(graph.AddOp(part, node.scalar_like(size, part)))
        part = node.emit(graph.SelectOp(node.emit(graph.CompareOp("lt", part, node.scalar_like(0, part))), wrapped, part))
        part = node.emit(graph.MinOp(node.emit(graph.MaxOp(part, node.scalar_like(0, part))),
                                     node.scalar_like(size - 1, part)))  # each index in range on its own
        stride = math.prod(sd[b + axis + 1 : b + k])
        scaled = node.emit(graph.MulOp(part, node.scalar_like(stride, part))) if stride != 1 else part
        linear = scaled if linear is None else node.emit(graph.AddOp(linear, scaled))
    assert linear is not None
    if b:  # each batch entry's block of the flattened axes
        block = np.arange(math.prod(sd[:b])).reshape(*sd[:b], *[1] * (len(rows) - b)) * math.prod(sd[b : b + k])
        offsets = np.broadcast_to(block, rows).astype(graph.numpy_dtype(element_type_of(indices)))
        linear = node.emit(graph.AddOp(linear, constant_array(node, np.ascontiguousarray(offsets), linear)))
    flat = node.reshape(data, (math.prod(sd[: b + k]), *sd[b + k :]))
    return [node.emit(graph.GatherOp(flat, linear, 0))]


@composite("ArgMax", "ArgMin", attributes=("axis", "keepdims", "select_last_index"))
def convert_arg_extreme(node: Node) -> list[Value]:
    """The index of the max (min) along an axis, as numpy's argmax: m = reduce_max(x); the
    positions where x == m, or x is NaN (NaN wins, as in numpy); of those the first index
    (reduce_min of the index where matched, n elsewhere) or the last (select_last_index)."""
    x = node.input(0)
    shape = shape_of(x)
    axis = normalize_axis(node, int(node.attr("axis", 0)), len(shape))
    n = shape[axis]
    if n == 0:
        raise node.error(f"{node.op_type} over an empty axis {axis}")
    extreme = reduce(node, graph.ReduceMaxOp if node.op_type == "ArgMax" else graph.ReduceMinOp, x, [axis])
    match = node.emit(graph.CompareOp("eq", x, broadcast_to(node, extreme, shape)))
    if is_float(element_type_of(x)):
        nan = node.emit(graph.CompareOp("ne", x, x))
        match = node.emit(graph.SelectOp(nan, nan, match))
    index = node.emit(graph.ConstantOp(dense_from_numpy(np.arange(n, dtype=np.int64), i64)))
    index = node.emit(graph.BroadcastOp(index, [axis], shape))
    last = bool(node.attr("select_last_index", 0))
    none = node.emit(graph.ConstantOp(dense_from_numpy(np.array(-1 if last else n, np.int64), i64)))
    missing = node.emit(graph.BroadcastOp(none, [], shape))
    candidates = node.emit(graph.SelectOp(match, index, missing))
    y = reduce(node, graph.ReduceMaxOp if last else graph.ReduceMinOp, candidates, [axis], bool(node.attr("keepdims", 1)))
    return [y]


TOPK_MAX_K = 64  # one selection per rank, about ten graph ops each


@composite("TopK", attributes=("axis", "largest", "sorted"), static_inputs=(1,))
def convert_top_k(node: Node) -> list[Value]:
    """The k largest (smallest) elements along an axis and their indices, in order, as
    onnx's reference ranks them: ties to the lower index, NaN above every number. One
    selection per rank: the extreme of the elements not yet taken, and the first index
    that holds it. (`sorted` = 0 allows any order; this one is sorted.)"""
    x = node.input(0)
    shape = shape_of(x)
    axis = normalize_axis(node, int(node.attr("axis", -1)), len(shape))
    k_value = node.const_input(1, "k")
    assert k_value is not None
    if k_value.size != 1:
        raise node.error(f"k must hold one value, got shape {fmt_shape(k_value.shape)}")
    k, n = int(k_value.reshape(-1)[0]), shape[axis]
    if not 1 <= k <= n:
        raise node.error(f"k = {k} is not between 1 and the axis' size {n}")
    if k > TOPK_MAX_K:
        raise node.error(f"k = {k} is more than mlfuse's TopK takes ({TOPK_MAX_K})")
    largest = bool(node.attr("largest", 1))
    el = element_type_of(x)
    if el == i1:
        raise node.error("TopK of bool tensors is not supported")
    floating = is_float(el)
    if floating:
        beyond = -math.inf if largest else math.inf
    else:
        info = np.iinfo(graph.numpy_dtype(el))
        beyond = int(info.min) if largest else int(info.max)
    key = x
    if floating and not largest:  # NaN ranks above every number: last among the smallest
        key = node.emit(graph.SelectOp(node.emit(graph.CompareOp("ne", x, x)), node.scalar_like(math.inf, x), x))
    index = node.emit(graph.BroadcastOp(node.emit(graph.ConstantOp(dense_from_numpy(np.arange(n, dtype=np.int64), i64))), [axis], shape))
    no_index = node.splat(n, i64, shape)
    taken = node.splat(False, i1, shape)
    ranks = []
    for _ in range(k):
        rest = node.emit(graph.SelectOp(taken, node.scalar_like(beyond, key), key))
        extreme = reduce(node, graph.ReduceMaxOp if largest else graph.ReduceMinOp, rest, [axis])
        hit = node.emit(graph.CompareOp("eq", rest, broadcast_to(node, extreme, shape)))
        if floating and largest:  # a NaN left over is the maximum, and equals nothing
            hit = node.emit(graph.SelectOp(node.emit(graph.CompareOp("ne", rest, rest)), node.splat(True, i1, shape), hit))
        hit = node.emit(graph.SelectOp(taken, node.splat(False, i1, shape), hit))
        first = reduce(node, graph.ReduceMinOp, node.emit(graph.SelectOp(hit, index, no_index)), [axis])
        ranks.append(first)
        now_taken = node.emit(graph.CompareOp("eq", index, broadcast_to(node, first, shape)))
        taken = node.emit(graph.SelectOp(now_taken, node.splat(True, i1, shape), taken))
    indices = ranks[0] if k == 1 else node.emit(graph.ConcatOp(ranks, axis))
    return [node.emit(graph.GatherElementsOp(x, indices, axis)), indices]


# More composites, in a module of their own (imported last: they use this one).
from mlfuse.frontend import (  # noqa: E402, F401
    onnx_composite_nn,
    onnx_deform_conv,
    onnx_grid_sample,
    onnx_linear_attention,
    onnx_math,
    onnx_ml,
    onnx_quantize,
    onnx_recurrent,
    onnx_scan,
    onnx_scatter,
    onnx_training,
    onnx_unscatter,
)
