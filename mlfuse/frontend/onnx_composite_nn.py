"""More ONNX operators composed from graph ops: activations, normalizations and layout
changes that the ONNX node suite and exported models use (onnx_composite.py has the
first ones; each handler writes the spec's formula or function body):

- activations: Swish, Celu, ThresholdedRelu, Shrink, Sign; Mean of several inputs
- normalizations: RMSNormalization, LpNormalization, MeanVarianceNormalization, LRN
- Hardmax: 1 at the first maximum along an axis (ArgMax's matching), 0 elsewhere
- DepthToSpace (DCR and CRD), SpaceToDepth: a reshape, a transpose and a reshape
- Col2Im: each block offset's column, spread by the strides and shifted into place,
  summed (a reshape and a transpose where the blocks tile the image)
- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss: the target's element of each
  row picked by GatherElements, weighted, masked by ignore_index and reduced
- AffineGrid: theta times the constant grid of homogeneous output coordinates
- LpPool: (sum over each window of |x|^p)^(1/p), the sum as an average pool of the
  zero-padded input times the window's size
- DFT: a product with the constant real matrix of the transform, built by numpy's FFT
  of each unit signal (the transform is linear in the real and imaginary parts)
- STFT: the frames (a gather by a constant index matrix) times the window, then DFT's
  product, all in float64; MelWeightMatrix: folded at import (its inputs must be constants)
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import f64, i64
from xdsl.ir import SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, fmt_shape, is_float, shape_of
from mlfuse.frontend.onnx_composite import (
    composite,
    constant_array,
    dilate,
    float_input,
    negative_part,
    opset_of,
    pad_or_crop,
    squared,
)
from mlfuse.frontend.onnx_ops import (
    Node,
    Value,
    broadcast_all,
    broadcast_to,
    dense_from_numpy,
    log_softmax,
    matmul,
    normalize_axes,
    normalize_axis,
    pool_kernel,
    reduce,
    same_element_type,
    separable_pools,
    slice_axis,
    window_of,
)

# --- activations -------------------------------------------------------------------------------


@composite("Swish", attributes=("alpha",))
def convert_swish(node: Node) -> list[Value]:
    """x * sigmoid(alpha * x)"""
    x = float_input(node)
    scaled = node.emit(graph.MulOp(x, node.scalar_like(float(node.attr("alpha", 1.0)), x)))
    return [node.emit(graph.MulOp(x, node.emit(graph.SigmoidOp(scaled))))]


@composite("Celu", attributes=("alpha",))
def convert_celu(node: Node) -> list[Value]:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)): x where x >= 0, the rest below."""
    x = float_input(node)
    alpha = float(node.attr("alpha", 1.0))
    e = node.emit(graph.ExpOp(node.emit(graph.DivOp(x, node.scalar_like(alpha, x)))))
    negative = node.emit(graph.MulOp(node.emit(graph.SubOp(e, node.scalar_like(1.0, x))), node.scalar_like(alpha, x)))
    return [negative_part(node, x, negative)]


@composite("ThresholdedRelu", attributes=("alpha",))
def convert_thresholded_relu(node: Node) -> list[Value]:
    """x where x > alpha, else 0 (NaN gives 0, as onnx's reference)."""
    x = float_input(node)
    above = node.emit(graph.CompareOp("gt", x, node.scalar_like(float(node.attr("alpha", 1.0)), x)))
    return [node.emit(graph.SelectOp(above, x, node.scalar_like(0, x)))]


@composite("Shrink", attributes=("bias", "lambd"))
def convert_shrink(node: Node) -> list[Value]:
    """x - bias where x > lambd, x + bias where x < -lambd, else 0 (any numeric type)."""
    x = node.input(0)
    bias, lambd = float(node.attr("bias", 0.0)), float(node.attr("lambd", 0.5))
    if not is_float(element_type_of(x)):
        bias, lambd = int(bias), int(lambd)
    above = node.emit(graph.CompareOp("gt", x, node.scalar_like(lambd, x)))
    below = node.emit(graph.CompareOp("lt", x, node.scalar_like(-lambd, x)))
    low = node.emit(graph.SelectOp(below, node.emit(graph.AddOp(x, node.scalar_like(bias, x))), node.scalar_like(0, x)))
    return [node.emit(graph.SelectOp(above, node.emit(graph.SubOp(x, node.scalar_like(bias, x))), low))]


@composite("Sign")
def convert_sign(node: Node) -> list[Value]:
    """-1, 0 or 1 by the sign of x (numpy's sign: NaN stays NaN, -0 gives 0)."""
    x = node.input(0)
    zero, one = node.scalar_like(0, x), node.scalar_like(1, x)
    positive = node.emit(graph.CompareOp("gt", x, zero))
    y = node.emit(graph.SelectOp(positive, one, zero))
    if not graph.is_unsigned(element_type_of(x)):
        negative = node.emit(graph.CompareOp("lt", x, zero))
        y = node.emit(graph.SelectOp(negative, node.scalar_like(-1, x), y))
    if is_float(element_type_of(x)):
        nan = node.emit(graph.CompareOp("ne", x, x))
        y = node.emit(graph.SelectOp(nan, x, y))
    return [y]


@composite("Mean")
def convert_mean(node: Node) -> list[Value]:
    """The elementwise sum of the (broadcast) inputs over their count."""
    values = node.inputs()
    same_element_type(node, *values)
    if not is_float(element_type_of(values[0])):
        raise node.error(f"the inputs must be floating-point tensors, got {element_type_of(values[0])}")
    values = broadcast_all(node, *values)
    total = values[0]
    for v in values[1:]:
        total = node.emit(graph.AddOp(total, v))
    if len(values) == 1:
        return [total]
    return [node.emit(graph.DivOp(total, node.scalar_like(float(len(values)), total)))]


# --- normalizations ----------------------------------------------------------------------------


@composite("RMSNormalization", attributes=("axis", "epsilon", "stash_type"))
def convert_rms_norm(node: Node) -> list[Value]:
    """x / sqrt(mean(x^2 over axis..rank-1) + epsilon) * scale (opset 23)."""
    x = float_input(node)
    shape = shape_of(x)
    if int(node.attr("stash_type", 1)) != 1:
        raise node.error(f"stash_type {node.attr('stash_type')} is not supported (only 1: statistics in f32)")
    axis = normalize_axis(node, int(node.attr("axis", -1)), len(shape))
    axes = list(range(axis, len(shape)))
    mean_square = reduce(node, graph.ReduceMeanOp, squared(node, x), axes)
    eps = node.scalar_like(float(node.attr("epsilon", 1e-5)), mean_square)
    inv_rms = node.emit(graph.ReciprocalOp(node.emit(graph.SqrtOp(node.emit(graph.AddOp(mean_square, eps))))))
    y = node.emit(graph.MulOp(x, broadcast_to(node, inv_rms, shape)))
    scale = node.input(1)
    same_element_type(node, x, scale)
    y, scale = broadcast_all(node, y, scale)
    return [node.emit(graph.MulOp(y, scale))]


@composite("LpNormalization", attributes=("axis", "p"))
def convert_lp_norm(node: Node) -> list[Value]:
    """x / ||x||_p along `axis`, p = 1 or 2; a zero vector stays 0 (onnx's reference)."""
    x = float_input(node)
    shape = shape_of(x)
    axis = normalize_axis(node, int(node.attr("axis", -1)), len(shape))
    p = int(node.attr("p", 2))
    if p not in (1, 2):
        raise node.error(f"p must be 1 or 2, got {p}")
    if p == 1:
        norm = reduce(node, graph.ReduceSumOp, node.emit(graph.AbsOp(x)), [axis])
    else:
        norm = node.emit(graph.SqrtOp(reduce(node, graph.ReduceSumOp, squared(node, x), [axis])))
    norm = broadcast_to(node, norm, shape)
    zero = node.emit(graph.CompareOp("eq", norm, node.scalar_like(0.0, norm)))
    return [node.emit(graph.SelectOp(zero, node.scalar_like(0.0, x), node.emit(graph.DivOp(x, norm))))]


@composite("MeanVarianceNormalization", attributes=("axes",))
def convert_mean_variance_norm(node: Node) -> list[Value]:
    """(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes` (the spec's function body)."""
    x = float_input(node)
    shape = shape_of(x)
    axes = normalize_axes(node, node.attr("axes", [0, 2, 3]), len(shape))
    mean = reduce(node, graph.ReduceMeanOp, x, axes)
    variance = node.emit(graph.SubOp(reduce(node, graph.ReduceMeanOp, squared(node, x), axes), squared(node, mean)))
    std = node.emit(graph.AddOp(node.emit(graph.SqrtOp(variance)), node.scalar_like(1e-9, variance)))
    centered = node.emit(graph.SubOp(x, broadcast_to(node, mean, shape)))
    return [node.emit(graph.DivOp(centered, broadcast_to(node, std, shape)))]


@composite("LRN", attributes=("alpha", "beta", "bias", "size"))
def convert_lrn(node: Node) -> list[Value]:
    """x / (bias + alpha / size * sum of x^2 over the channels c - (size-1)//2 ..
    c + ceil((size-1)/2))^beta, a window sum over zero-padded channels."""
    x = float_input(node)
    shape = shape_of(x)
    if len(shape) != 4:
        raise node.error(f"the input must be 4-D (NCHW), got {fmt_shape(shape)}")
    size = int(node.attr("size"))
    if size < 1:
        raise node.error(f"size must be positive, got {size}")
    alpha, beta, bias = float(node.attr("alpha", 1e-4)), float(node.attr("beta", 0.75)), float(node.attr("bias", 1.0))
    before, after = (size - 1) // 2, math.ceil((size - 1) / 2)
    padded = node.emit(graph.PadOp(squared(node, x), [0, before, 0, 0], [0, after, 0, 0], 0.0))
    channels = shape[1]
    total = slice_axis(node, padded, 1, 0, channels)
    for k in range(1, size):
        total = node.emit(graph.AddOp(total, slice_axis(node, padded, 1, k, k + channels)))
    base = node.emit(graph.AddOp(node.emit(graph.MulOp(total, node.scalar_like(alpha / size, total))),
                                 node.scalar_like(bias, total)))
    return [node.emit(graph.DivOp(x, node.emit(graph.PowOp(base, node.scalar_like(beta, base)))))]


# --- Hardmax and layout changes ----------------------------------------------------------------


@composite("Hardmax", attributes=("axis",))
def convert_hardmax(node: Node) -> list[Value]:
    """1 at the first maximum along `axis` (opset 13; before, over the flattened trailing
    axes), 0 elsewhere."""
    x = float_input(node)
    shape = shape_of(x)
    axis = normalize_axis(node, int(node.attr("axis", -1 if opset_of(node) >= 13 else 1)), len(shape))
    if opset_of(node) < 13:
        raise node.error("opset < 13 (coerced to 2-D) is not supported")
    n = shape[axis]
    peak = reduce(node, graph.ReduceMaxOp, x, [axis])
    match = node.emit(graph.CompareOp("eq", x, broadcast_to(node, peak, shape)))
    positions = np.arange(n, dtype=np.int64).reshape([n if i == axis else 1 for i in range(len(shape))])
    index = broadcast_to(node, node.emit(graph.ConstantOp(dense_from_numpy(positions, i64))), shape)
    beyond = broadcast_to(node, node.splat(n, i64, []), shape)
    first = reduce(node, graph.ReduceMinOp, node.emit(graph.SelectOp(match, index, beyond)), [axis])
    hit = node.emit(graph.CompareOp("eq", index, broadcast_to(node, first, shape)))
    return [node.emit(graph.SelectOp(hit, node.scalar_like(1.0, x), node.scalar_like(0.0, x)))]


def blocks_input(node: Node) -> tuple[SSAValue, int]:
    x = node.input(0)
    if len(shape_of(x)) != 4:
        raise node.error(f"the input must be 4-D (NCHW), got {fmt_shape(shape_of(x))}")
    block = int(node.attr("blocksize"))
    if block < 1:
        raise node.error(f"blocksize must be positive, got {block}")
    return x, block


@composite("DepthToSpace", attributes=("blocksize", "mode"))
def convert_depth_to_space(node: Node) -> list[Value]:
    """DCR: channels read as (b, b, C'); CRD: as (C', b, b). Each pixel becomes a b x b block."""
    x, b = blocks_input(node)
    n, c, h, w = shape_of(x)
    if c % (b * b):
        raise node.error(f"the channels ({c}) are not a multiple of blocksize^2 ({b * b})")
    out_c = c // (b * b)
    mode = node.attr("mode", "DCR")
    if mode == "DCR":
        y = node.emit(graph.TransposeOp(node.reshape(x, [n, b, b, out_c, h, w]), [0, 3, 4, 1, 5, 2]))
    elif mode == "CRD":
        y = node.emit(graph.TransposeOp(node.reshape(x, [n, out_c, b, b, h, w]), [0, 1, 4, 2, 5, 3]))
    else:
        raise node.error(f"mode {mode!r} is not DCR or CRD")
    return [node.reshape(y, [n, out_c, h * b, w * b])]


@composite("SpaceToDepth", attributes=("blocksize", "mode"))
def convert_space_to_depth(node: Node) -> list[Value]:
    """Each b x b block of pixels becomes b * b channels: (block row, block column,
    channel) in mode DCR, (channel, block row, block column) in CRD."""
    x, b = blocks_input(node)
    n, c, h, w = shape_of(x)
    if h % b or w % b:
        raise node.error(f"the image {h}x{w} is not a multiple of blocksize {b}")
    perm = {"DCR": [0, 3, 5, 1, 2, 4], "CRD": [0, 1, 3, 5, 2, 4]}.get(node.attr("mode", "DCR"))
    if perm is None:
        raise node.error(f"mode {node.attr('mode')!r} is not DCR or CRD")
    y = node.emit(graph.TransposeOp(node.reshape(x, [n, c, h // b, b, w // b, b]), perm))
    return [node.reshape(y, [n, c * b * b, h // b, w // b])]


@composite("Col2Im", attributes=("dilations", "pads", "strides"))
def convert_col2im(node: Node) -> list[Value]:
    """The inverse of im2col: input (N, C * prod(block), L) holds, for each block offset k
    (row-major over block_shape) and each of the L block positions b (row-major over the
    blocks' grid), the value that lands on image position k * dilation + b * stride - pad;
    values landing on one position add up. Per offset: its column as (N, C, *grid),
    zeros inserted between the blocks (the strides), shifted by k * dilation - pad."""
    x = node.input(0)
    image = [int(v) for v in np.asarray(node.const_input(1, "image_shape")).reshape(-1)]
    block = [int(v) for v in np.asarray(node.const_input(2, "block_shape")).reshape(-1)]
    n_dims = len(image)
    if len(block) != n_dims or n_dims == 0:
        raise node.error(f"image_shape {image} and block_shape {block} must have the same, nonzero length")
    dilations = node.int_list("dilations", [1] * n_dims, n_dims)
    strides = node.int_list("strides", [1] * n_dims, n_dims)
    pads = node.int_list("pads", [0] * 2 * n_dims, 2 * n_dims)
    if min(image + block + dilations + strides) < 1 or min(pads) < 0:
        raise node.error("image_shape, block_shape, dilations and strides must be positive, pads not negative")
    grid = [(i + pads[d] + pads[n_dims + d] - dilations[d] * (k - 1) - 1) // strides[d] + 1
            for d, (i, k) in enumerate(zip(image, block))]
    shape = shape_of(x)
    if len(shape) != 3 or shape[1] % math.prod(block) or min(grid) < 1 or shape[2] != math.prod(grid):
        raise node.error(f"the input {fmt_shape(shape)} is not (N, C * {math.prod(block)}, {math.prod(grid)}) "
                         f"for blocks {block} over the image {image} (pads {pads}, strides {strides}, "
                         f"dilations {dilations})")
    n, c = shape[0], shape[1] // math.prod(block)
    columns = node.reshape(x, [n, c, math.prod(block), *grid])
    if block == strides and dilations == [1] * n_dims and not any(pads) and image == [g * k for g, k in zip(grid, block)]:
        return [tiles_to_image(node, columns, block, grid)]
    reach = [(g - 1) * s + 1 for g, s in zip(grid, strides)]
    terms = []
    for k, offset in enumerate(np.ndindex(*block)):
        column = node.reshape(slice_axis(node, columns, 2, k, k + 1), [n, c, *grid])
        shift = [o * dil - pads[d] for d, (o, dil) in enumerate(zip(offset, dilations))]
        terms.append(pad_or_crop(node, dilate(node, column, strides), shift,
                                 [i - lo - r for i, lo, r in zip(image, shift, reach)]))
    total = terms[0]
    for term in terms[1:]:
        total = node.emit(graph.AddOp(total, term))
    return [total]


def tiles_to_image(node: Node, columns: SSAValue, block: list[int], grid: list[int]) -> SSAValue:
    """(N, C, prod(block), *grid) to (N, C, *image) where the blocks tile the image:
    axis order (N, C, grid0, block0, grid1, block1, ..)."""
    n, c = shape_of(columns)[:2]
    d = len(block)
    split = node.reshape(columns, [n, c, *block, *grid])
    perm = [0, 1, *(i for j in range(d) for i in (2 + d + j, 2 + j))]
    return node.reshape(node.emit(graph.TransposeOp(split, perm)), [n, c, *(g * k for g, k in zip(grid, block))])


# --- losses --------------------------------------------------------------------------------------


def negative_log_likelihood(node: Node, logp: SSAValue, target: SSAValue, weight: SSAValue | None,
                            unweighted_mean_skips_ignored: bool) -> SSAValue:
    """loss[n, d..] = -logp[n, target[n, d..], d..] * w, w = weight[target] (1 without
    weights), 0 where target == ignore_index; then reduction none, sum, or mean: the
    sum over the sum of w (onnx's reference; without weights and with
    `unweighted_mean_skips_ignored` false, over the element count)."""
    shape, target_shape = shape_of(logp), shape_of(target)
    if len(shape) < 2 or target_shape != (shape[0], *shape[2:]):
        raise node.error(f"the target's shape {fmt_shape(target_shape)} does not fit the input's {fmt_shape(shape)} (N, C, d..)")
    if not graph.is_int(element_type_of(target)):
        raise node.error(f"the target must be an integer tensor, got {element_type_of(target)}")
    reduction = node.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise node.error(f"reduction {reduction!r} is not none, sum or mean")
    column = node.reshape(target, [shape[0], 1, *shape[2:]])
    picked = node.reshape(node.emit(graph.GatherElementsOp(logp, column, 1)), target_shape)
    loss = node.emit(graph.NegOp(picked))
    ignore = node.attr("ignore_index")
    kept = None if ignore is None else node.emit(graph.CompareOp("ne", target, node.scalar_like(int(ignore), target)))
    w = None
    if weight is not None:
        same_element_type(node, logp, weight)
        w = node.emit(graph.GatherOp(weight, target, 0))
    elif kept is not None and unweighted_mean_skips_ignored:
        w = node.scalar_like(1.0, loss)
    if kept is not None:
        zero = node.scalar_like(0.0, loss)
        loss = node.emit(graph.SelectOp(kept, loss, zero))
        w = None if w is None else node.emit(graph.SelectOp(kept, w, zero))
    if w is not None:
        loss = node.emit(graph.MulOp(loss, w))
    if reduction == "none":
        return loss
    axes = list(range(len(target_shape)))
    total = reduce(node, graph.ReduceSumOp, loss, axes, keepdims=False)
    if reduction == "sum":
        return total
    if w is None:
        return node.emit(graph.DivOp(total, node.scalar_like(float(math.prod(target_shape)), total)))
    return node.emit(graph.DivOp(total, reduce(node, graph.ReduceSumOp, w, axes, keepdims=False)))


@composite("NegativeLogLikelihoodLoss", attributes=("ignore_index", "reduction"))
def convert_nll_loss(node: Node) -> list[Value]:
    x = float_input(node)
    weight = node.input(2) if node.has_input(2) else None
    # onnx's reference: an ignore_index of -1 without weights still counts every element in the mean
    skips = node.attr("ignore_index") != -1
    return [negative_log_likelihood(node, x, node.input(1), weight, skips)]


@composite("SoftmaxCrossEntropyLoss", attributes=("ignore_index", "reduction"))
def convert_softmax_cross_entropy(node: Node) -> list[Value]:
    """The NLL of log_softmax(scores) along the classes (axis 1); output 1 is that log_softmax."""
    x = float_input(node)
    if len(shape_of(x)) < 2:
        raise node.error(f"the scores must be (N, C, d..), got {fmt_shape(shape_of(x))}")
    logp = log_softmax(node, x, 1)
    weight = node.input(2) if node.has_input(2) else None
    loss = negative_log_likelihood(node, logp, node.input(1), weight, True)
    return [loss, logp] if node.wants_output(1) else [loss]


def affine_grid_base(node: Node, size: list[int], align_corners: int) -> np.ndarray:
    """The homogeneous coordinates (x, y[, z], 1) of every output position, [positions,
    rank + 1], as onnx's reference evaluator computes them: the grid is linear in theta,
    so the evaluator's grid for the thetas whose rows are all the unit vector e_j is
    column j (the spacing and rounding are exactly onnx's, as for Resize's matrices)."""
    from onnx import helper

    from mlfuse.frontend.onnx import evaluate_node

    rank = len(size) - 2
    thetas = np.zeros((rank + 1, rank, rank + 1), np.float64)
    for j in range(rank + 1):
        thetas[j, :, j] = 1.0
    proto = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align_corners)
    feeds = {"theta": thetas, "size": np.array([rank + 1, 1, *size[2:]], np.int64)}
    (grid,) = evaluate_node(proto, feeds, node.importer.model.opset_import)
    return np.asarray(grid, np.float64)[..., 0].reshape(rank + 1, -1).T


@composite("AffineGrid", attributes=("align_corners",), static_inputs=(1,))
def convert_affine_grid(node: Node) -> list[Value]:
    """grid[n, position] = theta[n] @ (x, y[, z], 1) of the position: one batched product
    of theta with the constant base grid (affine_grid_base)."""
    theta = float_input(node, 0)
    size = node.const_input(1, "size")
    assert size is not None  # a required input
    size = [int(v) for v in size.reshape(-1)]
    rank = len(size) - 2
    if rank not in (2, 3) or shape_of(theta) != (size[0], rank, rank + 1) or min(size[2:]) <= 0:
        raise node.error(f"theta {fmt_shape(shape_of(theta))} and size {size} must be (N, 2, 3) with (N, C, H, W) "
                         "or (N, 3, 4) with (N, C, D, H, W)")
    align_corners = int(node.attr("align_corners", 0))
    base = constant_array(node, affine_grid_base(node, size, align_corners), theta)  # [positions, rank + 1]
    grid = matmul(node, base, node.emit(graph.TransposeOp(theta, [0, 2, 1])))  # [N, positions, rank]
    return [node.reshape(grid, [size[0], *size[2:], rank])]


@composite("LpPool", attributes=("auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides"))
def convert_lp_pool(node: Node) -> list[Value]:
    x = float_input(node)
    p = float(node.attr("p", 2))
    if p <= 0:
        raise node.error(f"p must be positive, got {p}")
    kernel = pool_kernel(node, x)
    window, extra = window_of(node, x, kernel, bool(node.attr("ceil_mode", 0)))
    n = len(extra)
    # pad with zeros (|0|^p adds nothing), then every window is whole: sum = mean * size
    powered = squared(node, x) if p == 2 else node.emit(graph.AbsOp(x))
    if p not in (1, 2):
        powered = node.emit(graph.PowOp(powered, node.scalar_like(p, x)))
    low, high = [0, 0, *window.pads[:n]], [0, 0, *[a + e for a, e in zip(window.pads[n:], extra)]]
    padded = node.emit(graph.PadOp(powered, low, high, 0.0))
    window.pads = [0] * (2 * n)
    mean = separable_pools(node, padded, window, lambda x2, w: node.emit(
        graph.AvgPool2dOp(x2, w.kernel, w.strides, w.pads, w.dilations, False)))
    total = node.emit(graph.MulOp(mean, node.scalar_like(math.prod(kernel), mean)))
    if p == 1:
        return [total]
    if p == 2:
        return [node.emit(graph.SqrtOp(total))]
    return [node.emit(graph.PowOp(total, node.scalar_like(1 / p, total)))]


DFT_MAX_MATRIX = 1 << 22  # entries of the transform's matrix (16 MiB in float32)


def dft_matrix(m: int, components: int, length: int, inverse: bool, onesided: bool) -> np.ndarray:
    """The real matrix taking a signal of m entries of `components` (1 real, 2 real and
    imaginary) parts to its transform, flattened the same way, as onnx's reference
    computes it: fft (onesided: its first length // 2 + 1 bins), ifft, or irfft when
    inverse and onesided. Row j is the transform of the j-th unit signal."""
    units = np.eye(m * components).reshape(m * components, m, components)
    signals = units[..., 0] + 1j * units[..., 1] if components == 2 else units[..., 0]
    if inverse and onesided:
        spectra = np.fft.irfft(signals, n=length, axis=1)[..., None]
    elif inverse:
        spectra = np.fft.ifft(signals, n=length, axis=1)
    else:
        spectra = np.fft.fft(signals, n=length, axis=1)[:, : length // 2 + 1 if onesided else length]
    if spectra.dtype.kind == "c":
        spectra = np.stack([spectra.real, spectra.imag], axis=-1)
    return spectra.reshape(m * components, -1)


@composite("DFT", attributes=("axis", "inverse", "onesided"), static_inputs=(1, 2))
def convert_dft(node: Node) -> list[Value]:
    x = float_input(node)
    shape = shape_of(x)
    if len(shape) < 2 or shape[-1] not in (1, 2):
        raise node.error(f"the input must end in an axis of 1 (real) or 2 (complex) parts, got shape {fmt_shape(shape)}")
    axis_value = node.const_input(2, "axis")
    axis = int(np.asarray(axis_value).reshape(-1)[0]) if axis_value is not None else int(node.attr("axis", 1 if opset_of(node) < 20 else -2))
    axis = normalize_axis(node, axis, len(shape))
    if axis == len(shape) - 1:
        raise node.error("axis names the real and imaginary parts, not a signal axis")
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    m, components = shape[axis], shape[-1]
    given = node.const_input(1, "dft_length")
    length = int(np.asarray(given).reshape(-1)[0]) if given is not None else (2 * (m - 1) if inverse and onesided else m)
    if length < 1:
        raise node.error(f"dft_length must be positive, got {length}")
    if not inverse and onesided and components == 2:
        raise node.error("onesided applies to real signals, got complex ones")
    if m * components * length * 2 > DFT_MAX_MATRIX:
        raise node.error(f"a DFT of {length} points over {m} entries is larger than mlfuse takes as a product "
                         f"(its matrix would have more than {DFT_MAX_MATRIX} entries)")
    matrix = dft_matrix(m, components, length, inverse, onesided)
    perm = [d for d in range(len(shape) - 1) if d != axis] + [axis, len(shape) - 1]
    moved = node.emit(graph.TransposeOp(x, perm)) if perm != list(range(len(shape))) else x
    rows = [shape[d] for d in perm[:-2]]
    # in float64, as numpy's FFT computes it: a float32 product's rounding (n ulps of the
    # largest term) would show where the spectrum is exactly 0
    flat = node.cast(node.reshape(moved, (math.prod(rows), m * components)), f64)
    y = node.cast(matmul(node, flat, node.emit(graph.ConstantOp(dense_from_numpy(matrix, f64)))), element_type_of(x))
    out_components = 1 if inverse and onesided else 2
    y = node.reshape(y, (*rows, matrix.shape[1] // out_components, out_components))
    back = [perm.index(d) for d in range(len(shape))]
    return [node.emit(graph.TransposeOp(y, back)) if back != list(range(len(shape))) else y]


@composite("STFT", attributes=("onesided",), static_inputs=(1, 3))
def convert_stft(node: Node) -> list[Value]:
    """Frames of frame_length samples every frame_step (a gather by a constant index
    matrix), times the window, each transformed by the DFT's constant matrix in float64:
    (batch, frames, bins, 2)."""
    signal = float_input(node)
    shape = shape_of(signal)
    if len(shape) != 3 or shape[-1] not in (1, 2):
        raise node.error(f"the signal must be (batch, length, 1 or 2 parts), got shape {fmt_shape(shape)}")
    step = int(np.asarray(node.const_input(1, "frame_step")).reshape(-1)[0])
    window = node.input(2) if node.has_input(2) else None
    given = node.const_input(3, "frame_length")
    length = int(np.asarray(given).reshape(-1)[0]) if given is not None else (shape_of(window)[0] if window else 0)
    if length < 1 or step < 1 or length > shape[1]:
        raise node.error(f"frame_length {length} and frame_step {step} do not fit a signal of {shape[1]} samples")
    if window is not None and shape_of(window) != (length,):
        raise node.error(f"the window of shape {fmt_shape(shape_of(window))} must hold frame_length ({length}) values")
    onesided, components = bool(node.attr("onesided", 1)), shape[-1]
    if onesided and components == 2:
        raise node.error("onesided applies to real signals, got complex ones")
    frames = 1 + (shape[1] - length) // step
    starts = (np.arange(frames)[:, None] * step + np.arange(length)).astype(np.int64)
    framed = node.cast(node.emit(graph.GatherOp(signal, node.emit(graph.ConstantOp(dense_from_numpy(starts, i64))), 1)), f64)
    framed_shape = (shape[0], frames, length, components)
    if window is not None:  # in float64 too: the window's product rounded to float32 shows in small bins
        framed = node.emit(graph.MulOp(framed, node.emit(graph.BroadcastOp(node.cast(window, f64), [2], framed_shape))))
    matrix = dft_matrix(length, components, length, inverse=False, onesided=onesided)
    flat = node.reshape(framed, (shape[0] * frames, length * components))
    y = node.cast(matmul(node, flat, node.emit(graph.ConstantOp(dense_from_numpy(matrix, f64)))), element_type_of(signal))
    return [node.reshape(y, (shape[0], frames, matrix.shape[1] // 2, 2))]


@composite("MelWeightMatrix", attributes=("output_datatype",), static_inputs=(0, 1, 2, 3, 4))
def convert_mel_weight_matrix(node: Node) -> list[Value]:
    """A constant: with every input known at compile time the importer folds it by onnx's
    reference evaluator (before this handler runs); here some input is not known."""
    for index, what in enumerate(("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")):
        node.const_input(index, what)
    raise node.error("the matrix could not be computed from its constant inputs")
