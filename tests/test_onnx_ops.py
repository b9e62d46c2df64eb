"""Every ONNX operator the frontend accepts, as a single-node model against onnxruntime.

Each case imports the model, evaluates it with mlfuse.reference on random inputs and
compares with onnxruntime (fp32: rtol 1e-5, atol 1e-6; integers and bools exactly).
The cases cover broadcasting variants and each attribute the opsets 13 to 21 define;
the attributes and values mlfuse does not accept are checked to give a Diagnostic.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from numpy.typing import DTypeLike

import mlfuse
from mlfuse.diagnostics import Diagnostic
from mlfuse.frontend.onnx import import_onnx
from mlfuse.frontend.onnx_composite import OPS_DEFINED_HERE
from mlfuse.frontend.onnx_ops import OPS

from test_onnx_helpers import check_against_onnxruntime, single_node

onnx = pytest.importorskip("onnx")
from onnx import TensorProto  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

RNG = np.random.default_rng(2024)
I64 = np.int64


def f32(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def positive(*shape):
    return f32(*shape, low=0.2, high=3.0)


def ints(*shape, low=-9, high=10, dtype: DTypeLike = np.int32):
    return RNG.integers(low, high, shape).astype(dtype)


def nonzero_ints(*shape, dtype: DTypeLike = np.int32):
    x = ints(*shape, low=1, high=12, dtype=dtype)
    return np.where(RNG.random(shape) < 0.5, -x, x).astype(dtype)


def bools(*shape):
    return RNG.random(shape) < 0.5


def a(*values, dtype=I64):
    return np.array(values, dtype=dtype)


# (id, op_type, inputs, consts, opset, outputs, attributes)
CASES: list[tuple] = []


def case(id, op, inputs, consts=None, opset=17, outputs=1, **attrs):
    CASES.append(pytest.param(op, inputs, consts, opset, outputs, attrs, id=id))


# --- elementwise arithmetic, with numpy broadcasting ---------------------------------------
for op in ("Add", "Sub", "Mul"):
    case(f"{op}-same", op, [f32(2, 3), f32(2, 3)])
    case(f"{op}-trailing", op, [f32(2, 3, 4), f32(4)])
    case(f"{op}-both-ways", op, [f32(2, 1, 4), f32(3, 1)])
    case(f"{op}-scalar", op, [f32(), f32(3, 2)])
    case(f"{op}-int32", op, [ints(3, 4), ints(4)], opset=14)
case("Div-same", "Div", [f32(2, 3), positive(2, 3)])
case("Div-broadcast", "Div", [f32(4, 1, 5), positive(3, 1)])
case("Div-int32-truncates", "Div", [ints(4, 5, low=-50, high=50), nonzero_ints(5)])
case("Div-int64", "Div", [ints(6, low=-50, high=50, dtype=I64), nonzero_ints(6, dtype=I64)], opset=14)
case("Pow-tensor", "Pow", [positive(3, 4), f32(3, 4)])
case("Pow-broadcast", "Pow", [positive(2, 3, 4), f32(4)], opset=15)
case("Pow-int-exponent", "Pow", [f32(3, 4), ints(3, 4, low=0, high=4)])
case("Pow-square-negative-base", "Pow", [f32(3, 4)], consts={1: np.array(2.0, np.float32)})
case("Pow-sqrt", "Pow", [positive(3, 4)], consts={1: np.array([0.5], np.float32)})
case("Pow-cube-const", "Pow", [f32(3, 4)], consts={1: np.array(3.0, np.float32)})
# integer bases (onnx_ops.integer_pow): by squaring, negative exponents truncated as onnxruntime does
case("Pow-int32-int32", "Pow", [ints(3, 8, low=-5, high=6), ints(3, 8, low=0, high=7)])
case("Pow-int32-negative-exponents", "Pow", [np.array([2, -1, -1, 1, 3, -2, 5, 0], np.int32),
                                             np.array([-1, -3, -2, -5, 0, 3, 2, 3], np.int32)])
case("Pow-int64-const-exponent", "Pow", [ints(4, 5, low=-30, high=30, dtype=I64)], consts={1: np.array(5, I64)}, opset=15)
case("Pow-int32-float-exponent", "Pow", [ints(4, 6, low=0, high=40)], consts={1: np.array([0.5, 1.5, 2.0, 0.0, 3.0, 1.25], np.float32)},
     opset=15)

for op, make in {
    "Neg": f32, "Abs": f32, "Exp": f32, "Log": positive, "Sqrt": positive, "Tanh": f32,
    "Erf": f32, "Sigmoid": f32, "Relu": f32, "Sin": f32, "Cos": f32,
}.items():
    case(f"{op}", op, [make(2, 3, 4)])
case("Reciprocal", "Reciprocal", [positive(2, 5)])
case("Neg-int32", "Neg", [ints(3, 4)])
case("Abs-int64", "Abs", [ints(3, 4, dtype=I64)])
case("Relu-int32", "Relu", [ints(3, 4)], opset=14)
case("Relu-f64", "Relu", [f32(3, 4).astype(np.float64)])
case("Exp-f16", "Exp", [f32(3, 4).astype(np.float16)])
case("Sin-f64-wide", "Sin", [(f32(3, 4) * 1e3).astype(np.float64)])
case("Cos-f16", "Cos", [f32(3, 4).astype(np.float16)])
case("LeakyRelu-default", "LeakyRelu", [f32(3, 4)])
case("LeakyRelu-alpha", "LeakyRelu", [f32(3, 4)], opset=16, alpha=0.2)
case("Gelu-erf", "Gelu", [f32(3, 4)], opset=20)
case("Gelu-tanh", "Gelu", [f32(3, 4)], opset=20, approximate="tanh")
case("Gelu-none-explicit", "Gelu", [f32(5)], opset=21, approximate="none")
for op in ("Max", "Min", "Sum"):
    case(f"{op}-one", op, [f32(3, 4)])
    case(f"{op}-two-broadcast", op, [f32(3, 4), f32(4)])
    case(f"{op}-three", op, [f32(2, 1, 4), f32(3, 1), f32(1)])
case("Max-int64", "Max", [ints(3, dtype=I64), ints(3, dtype=I64)])
case("Clip-both", "Clip", [f32(3, 4)], consts={1: np.array(-0.5, np.float32), 2: np.array(0.7, np.float32)})
case("Clip-max-only", "Clip", [f32(3, 4), None], consts={2: np.array(0.3, np.float32)})
case("Clip-none", "Clip", [f32(3, 4)])
case("Clip-runtime-bounds", "Clip", [f32(3, 4), f32(), positive()])
case("Clip-int32", "Clip", [ints(5)], consts={1: np.array(-2, np.int32), 2: np.array(3, np.int32)})

# --- comparisons and selection -------------------------------------------------------------
for op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"):
    case(f"{op}-int-broadcast", op, [ints(3, 4, low=0, high=3), ints(4, low=0, high=3)])
    case(f"{op}-float", op, [f32(2, 3), f32(2, 1)], opset=16)
case("Equal-bool", "Equal", [bools(3, 4), bools(3, 4)], opset=19)
case("Where-broadcast", "Where", [bools(2, 1), f32(2, 3), f32()])
case("Where-int64", "Where", [bools(3), ints(2, 3, dtype=I64), ints(3, dtype=I64)], opset=16)

# --- casts, identity, constants, shape -----------------------------------------------------
for to, name in ((TensorProto.INT32, "i32"), (TensorProto.INT64, "i64"), (TensorProto.FLOAT16, "f16"),
                 (TensorProto.DOUBLE, "f64"), (TensorProto.BOOL, "bool")):
    case(f"Cast-f32-to-{name}", "Cast", [f32(3, 4, low=-5, high=5)], to=to)
case("Cast-i64-to-f32", "Cast", [ints(3, 4, dtype=I64)], to=TensorProto.FLOAT)
case("Cast-bool-to-f32", "Cast", [bools(3, 4)], to=TensorProto.FLOAT)
case("Cast-same-type", "Cast", [f32(3)], to=TensorProto.FLOAT)
case("Cast-saturate", "Cast", [f32(3, 4)], opset=19, to=TensorProto.FLOAT16, saturate=1)
case("Cast-opset21", "Cast", [ints(3, 4)], opset=21, to=TensorProto.FLOAT)
case("Identity", "Identity", [f32(3, 4)])
case("Identity-int", "Identity", [ints(3, 4)], opset=21)
case("Constant-tensor", "Constant", [], value=onnx.numpy_helper.from_array(f32(2, 3)))
case("Constant-float", "Constant", [], value_float=1.5)
case("Constant-floats", "Constant", [], value_floats=[1.0, -2.0, 3.5])
case("Constant-int", "Constant", [], opset=19, value_int=7)
case("Constant-ints", "Constant", [], opset=21, value_ints=[1, 2, 3])
case("Shape", "Shape", [f32(2, 3, 4)])
case("Shape-start-end", "Shape", [f32(2, 3, 4, 5)], opset=15, start=1, end=-1)

# --- reductions and normalizations -------------------------------------------------------
case("ReduceSum-axes", "ReduceSum", [f32(2, 3, 4)], consts={1: a(1)})
case("ReduceSum-negative-axes-nokeep", "ReduceSum", [f32(2, 3, 4)], consts={1: a(-1, 0)}, keepdims=0)
case("ReduceSum-all", "ReduceSum", [f32(2, 3, 4)])
case("ReduceSum-all-nokeep", "ReduceSum", [f32(2, 3, 4)], keepdims=0)
case("ReduceSum-noop", "ReduceSum", [f32(2, 3)], noop_with_empty_axes=1)
case("ReduceSum-int64", "ReduceSum", [ints(3, 4, dtype=I64)], consts={1: a(0)})
for op, opset in (("ReduceMean", 13), ("ReduceMax", 13), ("ReduceMin", 13)):
    case(f"{op}-attr-axes", op, [f32(2, 3, 4)], opset=opset, axes=[1, 2])
    case(f"{op}-attr-nokeep", op, [f32(2, 3, 4)], opset=opset, axes=[-1], keepdims=0)
    case(f"{op}-all", op, [f32(2, 3, 4)], opset=opset)
    case(f"{op}-input-axes", op, [f32(2, 3, 4)], consts={1: a(0, 2)}, opset=18)
    case(f"{op}-input-nokeep", op, [f32(2, 3, 4)], consts={1: a(-2)}, opset=18, keepdims=0)
    case(f"{op}-noop", op, [f32(2, 3, 4)], opset=18, noop_with_empty_axes=1)
case("ReduceMax-int32", "ReduceMax", [ints(3, 4)], opset=13, axes=[1])
case("ReduceMin-opset20", "ReduceMin", [f32(3, 4)], consts={1: a(1)}, opset=20)
case("Softmax-last", "Softmax", [f32(2, 3, 5, low=-8, high=8)])
case("Softmax-axis1", "Softmax", [f32(2, 3, 5)], axis=1)
case("Softmax-opset13-default", "Softmax", [f32(4, 6)], opset=13)
case("LogSoftmax-last", "LogSoftmax", [f32(2, 3, 5, low=-8, high=8)])
case("LogSoftmax-axis0", "LogSoftmax", [f32(4, 3)], axis=0)
case("LayerNormalization-bias", "LayerNormalization", [f32(2, 3, 8), positive(8), f32(8)])
case("LayerNormalization-no-bias-axis1", "LayerNormalization", [f32(2, 3, 4), positive(3, 4)], axis=1, epsilon=1e-3)
case("LayerNormalization-stats", "LayerNormalization", [f32(4, 6), positive(6), f32(6)], outputs=3, stash_type=1)
case("LayerNormalization-negative-axis", "LayerNormalization", [f32(2, 3, 4), positive(3, 4), f32(1, 4)], axis=-2)
case("BatchNormalization-initializers", "BatchNormalization", [f32(2, 3, 4, 5)],
     consts={1: positive(3), 2: f32(3), 3: f32(3), 4: positive(3)}, epsilon=1e-3)
case("BatchNormalization-inputs", "BatchNormalization", [f32(2, 3, 4), positive(3), f32(3), f32(3), positive(3)],
     opset=15, momentum=0.8)
case("BatchNormalization-2d-training-off", "BatchNormalization", [f32(4, 3)],
     consts={1: positive(3), 2: f32(3), 3: f32(3), 4: positive(3)}, opset=14, training_mode=0)
case("GlobalAveragePool", "GlobalAveragePool", [f32(2, 3, 5, 4)])
case("GlobalAveragePool-1d", "GlobalAveragePool", [f32(2, 3, 7)])
case("GlobalMaxPool", "GlobalMaxPool", [f32(2, 3, 5, 4)])

# --- contractions ----------------------------------------------------------------------------
for name, (sa, sb) in {
    "2d": ((3, 4), (4, 5)),
    "3d-2d": ((2, 3, 4), (4, 5)),
    "3d-3d": ((2, 3, 4), (2, 4, 5)),
    "batch-broadcast": ((2, 1, 3, 4), (5, 4, 6)),
    "2d-3d": ((3, 4), (2, 4, 5)),
    "1d-2d": ((4,), (4, 5)),
    "2d-1d": ((3, 4), (4,)),
    "1d-1d": ((4,), (4,)),
    "1d-3d": ((4,), (2, 4, 5)),
    "4d-1d": ((2, 2, 3, 4), (4,)),
}.items():
    case(f"MatMul-{name}", "MatMul", [f32(*sa), f32(*sb)])
case("MatMul-int32", "MatMul", [ints(3, 4), ints(4, 2)])
case("Gemm-plain", "Gemm", [f32(3, 4), f32(4, 5)])
case("Gemm-bias-row", "Gemm", [f32(3, 4), f32(4, 5), f32(5)])
case("Gemm-all-attributes", "Gemm", [f32(4, 3), f32(5, 4), f32(3, 1)], alpha=0.5, beta=2.0, transA=1, transB=1)
case("Gemm-scalar-c", "Gemm", [f32(3, 4), f32(4, 5), f32()], beta=0.25)
case("Gemm-weights", "Gemm", [f32(2, 4)], consts={1: f32(3, 4), 2: f32(3)}, transB=1)

# --- data movement ---------------------------------------------------------------------------
case("Transpose-default", "Transpose", [f32(2, 3, 4)])
case("Transpose-perm", "Transpose", [f32(2, 3, 4, 5)], perm=[0, 2, 1, 3])
case("Transpose-identity", "Transpose", [ints(2, 3)], opset=21, perm=[0, 1])
case("Reshape-zero-and-minus-one", "Reshape", [f32(2, 3, 4)], consts={1: a(0, -1, 2)})
case("Reshape-allowzero", "Reshape", [f32(2, 3, 4)], consts={1: a(4, 6)}, opset=14, allowzero=1)
case("Reshape-allowzero-off", "Reshape", [f32(2, 3, 4)], consts={1: a(2, 0, 0)}, opset=19, allowzero=0)
case("Flatten-default", "Flatten", [f32(2, 3, 4)])
case("Flatten-axis0", "Flatten", [f32(2, 3, 4)], axis=0)
case("Flatten-negative", "Flatten", [f32(2, 3, 4, 5)], axis=-1)
case("Flatten-rank", "Flatten", [f32(2, 3)], opset=21, axis=2)
case("Squeeze-axes", "Squeeze", [f32(1, 3, 1, 4)], consts={1: a(-2)})
case("Squeeze-all", "Squeeze", [f32(1, 3, 1, 4)])
case("Unsqueeze", "Unsqueeze", [f32(3, 4)], consts={1: a(0, -1)})
case("Unsqueeze-middle", "Unsqueeze", [f32(3, 4)], consts={1: a(1, 3)}, opset=21)
case("Expand-up", "Expand", [f32(3, 1)], consts={1: a(2, 3, 4)})
case("Expand-bidirectional", "Expand", [f32(2, 3, 1)], consts={1: a(3, 5)})
case("Concat-last", "Concat", [f32(2, 3), f32(2, 1), f32(2, 4)], axis=-1)
case("Concat-first-int", "Concat", [ints(1, 3), ints(2, 3)], axis=0)
case("Concat-single", "Concat", [f32(2, 3)], axis=1)
case("Slice-basic", "Slice", [f32(5, 6)], consts={1: a(1, 2), 2: a(4, 5)})
case("Slice-negative-bounds", "Slice", [f32(5, 6)], consts={1: a(-3), 2: a(-1), 3: a(1)})
case("Slice-flip", "Slice", [f32(4, 5)], consts={1: a(-1), 2: a(-(2**63)), 3: a(1), 4: a(-1)})
case("Slice-negative-step-2", "Slice", [f32(3, 7, 2)], consts={1: a(0, 5), 2: a(3, 0), 3: a(0, 1), 4: a(1, -2)})
case("Slice-steps-and-clamping", "Slice", [f32(4, 7, 3)],
     consts={1: a(0, 1), 2: a(np.iinfo(I64).max, 100), 3: a(-2, 0), 4: a(2, 3)})
case("Slice-empty-range-clamps", "Slice", [f32(4, 6)], consts={1: a(-100), 2: a(2), 3: a(1)})
case("Pad-constant", "Pad", [f32(2, 3)], consts={1: a(1, 0, 2, 3), 2: np.array(1.5, np.float32)})
case("Pad-default-value", "Pad", [f32(2, 3, 4)], consts={1: a(0, 1, 1, 0, 2, 0)})
case("Pad-axes", "Pad", [f32(2, 3, 4)], consts={1: a(1, 2), 3: a(-1)}, opset=18)
case("Pad-negative-crops", "Pad", [f32(4, 5)], consts={1: a(-1, 2, 0, -2)})
case("Pad-edge", "Pad", [f32(3, 4)], consts={1: a(2, 1, 1, 3)}, mode="edge")
case("Pad-reflect", "Pad", [f32(4, 5)], consts={1: a(2, 1, 3, 4)}, mode="reflect")
case("Pad-wrap", "Pad", [f32(3, 4)], consts={1: a(1, 4, 2, 3)}, opset=19, mode="wrap")
case("Pad-int-constant", "Pad", [ints(2, 3)], consts={1: a(1, 1, 1, 1), 2: np.array(7, np.int32)}, opset=21)

# --- stencils --------------------------------------------------------------------------------
case("Conv-plain", "Conv", [f32(1, 3, 7, 7), f32(4, 3, 3, 3)])
case("Conv-bias-strides-pads", "Conv", [f32(2, 3, 8, 9), f32(5, 3, 3, 3), f32(5)], strides=[2, 2], pads=[1, 1, 1, 1])
case("Conv-dilations-asymmetric", "Conv", [f32(1, 2, 9, 8), f32(3, 2, 3, 2)], dilations=[2, 1], pads=[0, 1, 2, 0], strides=[1, 2])
case("Conv-group", "Conv", [f32(1, 4, 6, 6), f32(6, 2, 3, 3), f32(6)], group=2, kernel_shape=[3, 3])
case("Conv-depthwise", "Conv", [f32(2, 6, 5, 5), f32(6, 1, 3, 3)], group=6, pads=[1, 1, 1, 1])
# rows wider than graph_to_loop.ROW_IN_REGISTERS: (ow, kh, kw) innermost
case("Conv-depthwise-wide-rows", "Conv", [f32(1, 4, 5, 40), f32(4, 1, 3, 3), f32(4)], group=4, pads=[1, 1, 1, 1])
case("Conv-depthwise-wide-strided", "Conv", [f32(2, 3, 6, 41), f32(3, 1, 5, 5)], group=3, strides=[2, 2], pads=[2, 2, 2, 2])
case("Conv-depthwise-wide-dilated", "Conv", [f32(1, 4, 7, 37), f32(8, 1, 3, 2)], group=4, dilations=[2, 3], pads=[0, 1, 2, 0])
case("Conv-one-channel-wide", "Conv", [f32(1, 1, 6, 33), f32(3, 1, 3, 3)], pads=[1, 1, 1, 1])
# strided, over output rows of at least graph_to_loop.STRIDED_WINDOW_MIN_ROW and big enough
# for the GEMM kernel (GEMM_KERNEL_MIN_MACS): it reads the patches in place at the strides (a stem-like 5x5, one channel: the
# tolerance is for short sums; unequal strides whose padded image has rows and columns
# no window reaches)
case("Conv-strided-wide-rows", "Conv", [f32(1, 1, 48, 64), f32(16, 1, 5, 5), f32(16)], strides=[2, 2], pads=[2, 2, 2, 2])
case("Conv-strided-unequal-wide", "Conv", [f32(1, 2, 110, 90), f32(12, 2, 2, 5)], strides=[2, 3], pads=[0, 1, 1, 2])
case("Conv-same-upper", "Conv", [f32(1, 2, 7, 6), f32(3, 2, 4, 3)], auto_pad="SAME_UPPER", strides=[2, 2])
case("Conv-same-lower", "Conv", [f32(1, 2, 7, 6), f32(3, 2, 4, 4)], auto_pad="SAME_LOWER")
case("Conv-valid", "Conv", [f32(1, 2, 7, 6), f32(3, 2, 3, 3)], auto_pad="VALID", strides=[2, 1])
case("Conv-notset", "Conv", [f32(1, 2, 5, 5), f32(3, 2, 1, 1)], auto_pad="NOTSET")
case("Conv-1d", "Conv", [f32(2, 3, 10), f32(4, 3, 3), f32(4)], strides=[2], pads=[1, 2], dilations=[2])
case("Conv-weights-initializer", "Conv", [f32(1, 3, 6, 6)], consts={1: f32(8, 3, 3, 3), 2: f32(8)}, pads=[1, 1, 1, 1])
case("MaxPool-plain", "MaxPool", [f32(1, 3, 6, 6)], kernel_shape=[2, 2], strides=[2, 2])
case("MaxPool-pads", "MaxPool", [f32(2, 2, 7, 7, low=-3, high=-1)], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
case("MaxPool-dilations", "MaxPool", [f32(1, 2, 9, 9)], kernel_shape=[2, 3], dilations=[2, 2], pads=[1, 0, 0, 1])
case("MaxPool-ceil", "MaxPool", [f32(1, 2, 8, 7)], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
case("MaxPool-ceil-pads", "MaxPool", [f32(1, 2, 6, 6)], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
case("MaxPool-ceil-last-window-dropped", "MaxPool", [f32(1, 2, 5, 5)], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
case("AveragePool-ceil-last-window-dropped", "AveragePool", [f32(1, 2, 5, 5)], kernel_shape=[2, 2], strides=[2, 2],
     pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)
case("MaxPool-same-upper", "MaxPool", [f32(1, 2, 7, 7)], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
case("MaxPool-storage-order", "MaxPool", [f32(1, 2, 4, 4)], kernel_shape=[2, 2], storage_order=0)
case("MaxPool-1d", "MaxPool", [f32(2, 3, 9)], kernel_shape=[3], strides=[2], pads=[1, 1])
# rows wider than graph_to_loop.ROW_IN_REGISTERS: (ow, kh, kw) innermost
case("MaxPool-wide-rows", "MaxPool", [f32(1, 2, 9, 70)], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
case("MaxPool-wide-non-overlapping", "MaxPool", [f32(1, 3, 6, 40)], kernel_shape=[2, 2], strides=[2, 2])
case("AveragePool-wide-pads", "AveragePool", [f32(1, 2, 5, 33)], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
case("AveragePool-plain", "AveragePool", [f32(1, 3, 6, 6)], kernel_shape=[2, 2], strides=[2, 2])
case("AveragePool-exclude-pad", "AveragePool", [f32(1, 2, 5, 5)], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
case("AveragePool-include-pad", "AveragePool", [f32(1, 2, 5, 5)], kernel_shape=[3, 3], pads=[1, 2, 1, 0], count_include_pad=1)
case("AveragePool-ceil", "AveragePool", [f32(1, 2, 8, 7)], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
case("AveragePool-ceil-include-pad", "AveragePool", [f32(1, 2, 6, 7)], kernel_shape=[3, 3], strides=[2, 2],
     pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)
case("AveragePool-same-lower", "AveragePool", [f32(1, 2, 6, 6)], kernel_shape=[3, 3], auto_pad="SAME_LOWER")
case("AveragePool-dilations", "AveragePool", [f32(1, 2, 9, 9)], opset=19, kernel_shape=[2, 2], dilations=[2, 3], strides=[1, 2])
case("AveragePool-1d", "AveragePool", [f32(2, 3, 9)], kernel_shape=[4], strides=[2], pads=[1, 2], count_include_pad=1)


# --- the narrow and unsigned integer types (the ops onnxruntime implements for each) ----------
def full_range(*shape, dtype):
    """Integers over the whole range of dtype: sums and products wrap around."""
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


INT_TYPE_CASES = {
    np.int8: [("Add", 14), ("Div", 14), ("Max", 13), ("Neg", 13), ("Abs", 13), ("Relu", 14), ("Less", 13),
              ("Where", 16), ("ReduceMax", 13)],
    np.uint8: [("Add", 14), ("Sub", 14), ("Div", 14), ("Min", 13), ("Abs", 13), ("Equal", 13), ("Greater", 13),
               ("Where", 16), ("ReduceMin", 13)],
    np.int16: [("Add", 14), ("Mul", 14), ("Div", 14), ("Abs", 13), ("Neg", 13), ("Less", 13)],
    np.uint16: [("Sub", 14), ("Div", 14), ("Greater", 13), ("LessOrEqual", 16)],
    np.uint32: [("Mul", 14), ("Div", 14), ("Max", 13), ("Where", 16), ("MatMul", 13)],
    np.uint64: [("Add", 14), ("Div", 14), ("Min", 13), ("Greater", 13), ("MatMul", 13)],
}
for dtype, ops in INT_TYPE_CASES.items():
    name = np.dtype(dtype).name
    for op, opset in ops:
        x, y = full_range(3, 4, dtype=dtype), full_range(4, dtype=dtype)
        if op == "Div":
            y[y == 0] = 1  # onnxruntime traps on integer division by zero
        if op == "MatMul":
            x, y = full_range(3, 4, dtype=dtype), full_range(4, 2, dtype=dtype)
        inputs = {"Where": [bools(3, 4), x, y], "Neg": [x], "Abs": [x], "Relu": [x]}.get(op, [x, y])
        attrs = {"axes": [1]} if op.startswith("Reduce") else {}
        case(f"{op}-{name}", op, inputs[:1] if op.startswith("Reduce") else inputs, opset=opset, **attrs)
    case(f"Cast-{name}-to-f32", "Cast", [full_range(3, 4, dtype=dtype)], to=TensorProto.FLOAT)
    case(f"Cast-{name}-to-i64", "Cast", [full_range(3, 4, dtype=dtype)], to=TensorProto.INT64)
    case(f"Cast-i64-to-{name}", "Cast", [full_range(3, 4, dtype=I64)], to=onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    info = np.iinfo(dtype)
    in_range = RNG.uniform(max(info.min, -1e4), min(info.max, 1e4), (3, 4)).astype(np.float32)
    case(f"Cast-f32-to-{name}", "Cast", [in_range], to=onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


# --- gathers and remainders ------------------------------------------------------------------
case("Gather-embedding", "Gather", [f32(50, 8), ints(1, 6, low=0, high=50, dtype=I64)])
case("Gather-negative-indices", "Gather", [f32(7, 3), ints(2, 4, low=-7, high=7, dtype=I64)])
case("Gather-scalar-index", "Gather", [f32(3, 5, 2)], consts={1: np.array(0, I64)}, axis=1)
case("Gather-last-axis-int32", "Gather", [f32(3, 4, 5), ints(2, 2, low=-5, high=5)], axis=-1)
case("Gather-runtime-data-int8", "Gather", [full_range(6, 3, dtype=np.int8), ints(4, low=-6, high=6, dtype=I64)])
case("GatherElements-axis1", "GatherElements", [f32(3, 4), ints(3, 2, low=-4, high=4, dtype=I64)], axis=1)
case("GatherElements-axis0", "GatherElements", [f32(3, 4), ints(2, 4, low=-3, high=3)], axis=0)
case("Mod-int32", "Mod", [ints(4, 5, low=-50, high=50), nonzero_ints(5)])
case("Mod-int64-fmod", "Mod", [ints(4, 5, low=-50, high=50, dtype=I64), nonzero_ints(4, 5, dtype=I64)], fmod=1)
case("Mod-uint8", "Mod", [full_range(3, 4, dtype=np.uint8), ints(4, low=1, high=40, dtype=np.uint8)])
case("Mod-int8-broadcast", "Mod", [full_range(2, 3, dtype=np.int8), nonzero_ints(3, dtype=np.int8)])
case("Mod-float-fmod", "Mod", [f32(3, 4, low=-10, high=10), positive(3, 4)], fmod=1)
case("Mod-double-fmod", "Mod", [f32(6, low=-10, high=10).astype(np.float64), -positive(6).astype(np.float64)], fmod=1)


# --- composite operators (mlfuse/frontend/onnx_composite.py) -------------------------------------
def special(*shape):
    """Floats with NaN, +-inf and +-0 mixed in."""
    x = f32(*shape, low=-4, high=4).reshape(-1)
    x[: 6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 3.0]
    return x.reshape(shape)


case("HardSigmoid", "HardSigmoid", [f32(3, 4, low=-6, high=6)])
case("HardSigmoid-attrs", "HardSigmoid", [f32(3, 4)], alpha=0.3, beta=0.4)
case("HardSwish", "HardSwish", [f32(3, 5, low=-5, high=5)], opset=14)
case("Softplus", "Softplus", [f32(4, 5, low=-30, high=30)])
case("Mish", "Mish", [f32(4, 5, low=-8, high=8)], opset=18)
case("Elu", "Elu", [f32(3, 4)], alpha=0.7)
case("Selu", "Selu", [f32(3, 4)])
case("Softsign", "Softsign", [f32(3, 4)])
case("PRelu-channel", "PRelu", [f32(2, 3, 4), f32(3, 1)], opset=16)
case("IsNaN", "IsNaN", [special(3, 4)])
case("IsInf", "IsInf", [special(3, 4)])
case("IsInf-positive", "IsInf", [special(3, 4)], detect_negative=0)
case("IsInf-negative", "IsInf", [special(3, 4)], detect_positive=0)
case("IsInf-neither", "IsInf", [special(2, 4)], detect_positive=0, detect_negative=0)
case("Not", "Not", [bools(3, 4)])
for op in ("And", "Or", "Xor"):
    case(f"{op}-broadcast", op, [bools(3, 4), bools(4)])
case("ReduceProd", "ReduceProd", [f32(2, 3, 4, low=0.5, high=1.5)], consts={1: a(1)}, opset=18)
case("ReduceProd-attr", "ReduceProd", [f32(2, 3, 4, low=0.5, high=1.5)], opset=13, axes=[0, 2], keepdims=0)
case("ReduceL1", "ReduceL1", [f32(2, 3, 4)], opset=13, axes=[-1])
case("ReduceL2", "ReduceL2", [f32(2, 3, 4)], consts={1: a(1, 2)}, opset=18, keepdims=0)
case("ReduceL2-all", "ReduceL2", [f32(3, 4)], opset=13)
case("ReduceSumSquare", "ReduceSumSquare", [f32(2, 3, 4)], opset=13, axes=[1])
case("ReduceSumSquare-int", "ReduceSumSquare", [ints(3, 4)], opset=13, axes=[1])
case("ReduceLogSum", "ReduceLogSum", [positive(2, 3, 4)], consts={1: a(2)}, opset=18)
case("ReduceLogSumExp", "ReduceLogSumExp", [f32(2, 3, 4, low=-50, high=50)], opset=13, axes=[2])
case("ReduceLogSumExp-nokeep", "ReduceLogSumExp", [f32(2, 3, 4)], consts={1: a(0, 1)}, opset=18, keepdims=0)
case("ReduceLogSumExp-noop", "ReduceLogSumExp", [f32(2, 3)], opset=18, noop_with_empty_axes=1)
case("InstanceNormalization", "InstanceNormalization", [f32(2, 3, 4, 5), positive(3), f32(3)], epsilon=1e-3)
case("Dropout", "Dropout", [f32(3, 4)], consts={1: np.array(0.3, np.float32)}, outputs=2)
case("Dropout-training-off", "Dropout", [f32(3, 4)], consts={2: np.array(False)}, opset=13, seed=3)
case("Split-equal", "Split", [f32(6, 4)], outputs=3)
case("Split-sizes", "Split", [f32(2, 7)], consts={1: a(2, 5)}, outputs=2, axis=-1)
case("Split-num-outputs", "Split", [f32(7, 3)], opset=18, outputs=3, num_outputs=3)
case("Tile", "Tile", [f32(2, 3)], consts={1: a(2, 3)})
case("Tile-ones", "Tile", [ints(2, 1, 3)], consts={1: a(1, 4, 1)})
case("Trilu-upper", "Trilu", [f32(2, 4, 5)], opset=14)
case("Trilu-lower-k", "Trilu", [f32(5, 4)], consts={1: np.array(-1, I64)}, opset=14, upper=0)
case("Trilu-int-k2", "Trilu", [ints(3, 3)], consts={1: np.array(2, I64)}, opset=14)
case("CumSum", "CumSum", [f32(3, 5)], consts={1: np.array(1, I64)}, opset=14)
case("CumSum-exclusive-reverse", "CumSum", [f32(4, 3, 2)], consts={1: np.array(-2, np.int32)}, opset=14,
     exclusive=1, reverse=1)
case("CumSum-int64-axis0", "CumSum", [ints(6, 2, dtype=I64)], consts={1: np.array(0, I64)}, opset=14)
case("Einsum-attention", "Einsum", [f32(2, 3, 4, 5), f32(2, 3, 6, 5)], opset=13, equation="bhid,bhjd->bhij")
case("Einsum-matmul-implicit", "Einsum", [f32(3, 4), f32(4, 5)], opset=13, equation="ij,jk")
case("Einsum-ellipsis", "Einsum", [f32(2, 3, 4), f32(4, 5)], opset=13, equation="...ij,jk->...ik")
case("Einsum-transpose", "Einsum", [f32(3, 4)], opset=13, equation="ij->ji")
case("Einsum-sum-out", "Einsum", [f32(2, 3, 4), f32(4, 5)], opset=13, equation="bij,jk->bk")
case("Einsum-outer", "Einsum", [f32(3), f32(4)], opset=13, equation="i,j->ij")
case("GatherND-pairs", "GatherND", [f32(3, 4, 5), np.array([[0, 1], [2, -1], [-3, 3]], I64)])
case("GatherND-full-index", "GatherND", [ints(2, 3), np.array([[[1, 2]], [[0, -1]]], I64)])
case("GatherND-constant-indices", "GatherND", [f32(4, 2)], consts={1: np.array([[3], [0], [3]], I64)})
case("ArgMax", "ArgMax", [f32(3, 5)], axis=1)
case("ArgMax-ties-last-nokeep", "ArgMax", [ints(4, 6, low=0, high=3)], axis=0, keepdims=0, select_last_index=1)
case("ArgMin-negative-axis", "ArgMin", [f32(2, 3, 4)], axis=-1)
case("ArgMin-ties-first", "ArgMin", [ints(5, 3, low=0, high=2, dtype=I64)], axis=0)
case("ArgMax-nan", "ArgMax", [special(3, 4)], axis=1)
case("ConvTranspose-stride2", "ConvTranspose", [f32(1, 4, 5, 5)], consts={1: f32(4, 3, 2, 2)}, strides=[2, 2])
case("ConvTranspose-pads-bias", "ConvTranspose", [f32(2, 3, 4, 6)], consts={1: f32(3, 2, 3, 3), 2: f32(2)},
     strides=[2, 1], pads=[1, 0, 1, 2])
case("ConvTranspose-output-padding-dilation", "ConvTranspose", [f32(1, 2, 4, 4)], consts={1: f32(2, 3, 3, 2)},
     strides=[3, 2], output_padding=[1, 1], dilations=[2, 1])
case("ConvTranspose-groups", "ConvTranspose", [f32(1, 4, 3, 3)], consts={1: f32(4, 2, 3, 3)}, group=2, strides=[2, 2])
case("ConvTranspose-same-upper", "ConvTranspose", [f32(1, 2, 3, 4)], consts={1: f32(2, 2, 3, 3)}, strides=[2, 2],
     auto_pad="SAME_UPPER")
case("ConvTranspose-output-shape", "ConvTranspose", [f32(1, 2, 3, 3)], consts={1: f32(2, 1, 3, 3)}, strides=[2, 2],
     output_shape=[6, 7])
case("ConvTranspose-runtime-weight", "ConvTranspose", [f32(1, 4, 3, 3), f32(4, 2, 3, 2)], group=2, strides=[2, 1],
     pads=[1, 0, 0, 1])
case("ConvTranspose-1d-runtime-weight", "ConvTranspose", [f32(2, 3, 5), f32(3, 2, 4)], strides=[2])
case("ConvTranspose-1d", "ConvTranspose", [f32(2, 3, 5)], consts={1: f32(3, 2, 4)}, strides=[2], pads=[1, 1])
# kernel = strides, unpadded: a product and a depth-to-space (blockwise_transposed_conv)
case("ConvTranspose-blockwise-bias", "ConvTranspose", [f32(1, 4, 5, 6)], consts={1: f32(4, 3, 2, 2), 2: f32(3)},
     strides=[2, 2])
case("ConvTranspose-blockwise-batch", "ConvTranspose", [f32(2, 3, 4, 3)], consts={1: f32(3, 2, 3, 2)}, strides=[3, 2])
case("ConvTranspose-blockwise-1d", "ConvTranspose", [f32(2, 3, 5)], consts={1: f32(3, 4, 2)}, strides=[2])
case("Resize-nearest-x2", "Resize", [f32(1, 2, 3, 4)], consts={2: np.array([1, 1, 2, 2], np.float32)}, mode="nearest",
     opset=13)
case("Resize-bilinear-half-pixel", "Resize", [f32(1, 2, 4, 5)], consts={2: np.array([1, 1, 2, 2], np.float32)},
     mode="linear", opset=13)
case("Resize-linear-align-corners-sizes", "Resize", [f32(1, 2, 4, 5)], consts={3: a(1, 2, 7, 3)}, mode="linear",
     coordinate_transformation_mode="align_corners", opset=13)
case("Resize-nearest-fractional", "Resize", [f32(1, 1, 5, 4)], consts={2: np.array([1, 1, 1.5, 0.75], np.float32)},
     mode="nearest", nearest_mode="floor", coordinate_transformation_mode="asymmetric", opset=13)
case("Resize-cubic", "Resize", [f32(1, 1, 4, 5)], consts={2: np.array([1, 1, 1.5, 2], np.float32)}, mode="cubic",
     opset=13)
case("Resize-linear-axes", "Resize", [f32(1, 2, 4, 6)], consts={2: np.array([2, 0.5], np.float32)}, mode="linear",
     axes=[2, 3], opset=18)
case("Resize-linear-antialias-down", "Resize", [f32(1, 1, 8, 8)], consts={2: np.array([1, 1, 0.5, 0.5], np.float32)},
     mode="linear", antialias=1, opset=18)
# sizes where the interpolation matrices are sparse: taps (gathers weighted and summed), not a product
case("Resize-bilinear-x2-taps", "Resize", [f32(1, 3, 16, 24)], consts={2: np.array([1, 1, 2, 2], np.float32)},
     mode="linear", opset=13)
case("Resize-cubic-taps", "Resize", [f32(1, 2, 12, 10)], consts={2: np.array([1, 1, 2, 1.5], np.float32)},
     mode="cubic", opset=13)
case("Resize-linear-antialias-down-taps", "Resize", [f32(1, 1, 40, 32)], consts={2: np.array([1, 1, 0.25, 0.5], np.float32)},
     mode="linear", antialias=1, opset=18)
case("Resize-nearest-fractional-taps", "Resize", [f32(1, 2, 10, 9)], consts={3: a(1, 2, 15, 4)}, mode="nearest",
     coordinate_transformation_mode="half_pixel", opset=13)

# tensors made from shapes and types (mlfuse/frontend/onnx_generators.py)
case("CastLike-to-int32", "CastLike", [f32(3, 4, low=-50, high=50), ints(1)], opset=15)
case("CastLike-int-to-float", "CastLike", [ints(2, 5, dtype=I64), f32(2)], opset=19)
case("Size", "Size", [f32(3, 4, 5)])
case("EyeLike-k1", "EyeLike", [f32(4, 5)], k=1)
case("EyeLike-dtype-negative-k", "EyeLike", [f32(3, 3)], k=-1, dtype=TensorProto.INT32)
case("OneHot", "OneHot", [ints(2, 3, low=-5, high=5, dtype=I64)], consts={1: np.array(5, I64), 2: np.array([0.5, 2.0], np.float32)})
case("OneHot-axis0-out-of-range", "OneHot", [ints(4, low=-8, high=8, dtype=I64), None, np.array([-1.0, 3.0], np.float32)],
     consts={1: np.array([6], I64)}, axis=0)

# activations, normalizations and layout changes (mlfuse/frontend/onnx_composite_nn.py)
case("Swish", "Swish", [special(3, 5)], opset=24, alpha=0.7)
case("Celu", "Celu", [f32(3, 4, low=-5, high=5)], opset=13, alpha=0.8)
case("ThresholdedRelu", "ThresholdedRelu", [special(3, 4)], opset=13, alpha=0.5)
case("Shrink", "Shrink", [f32(3, 5)], opset=13, bias=0.25, lambd=0.75)
case("Shrink-int", "Shrink", [ints(3, 5, dtype=np.int8)], opset=13, bias=2.0, lambd=3.0)
case("Sign", "Sign", [special(3, 4)], opset=13)
case("Sign-int", "Sign", [ints(3, 4)], opset=13)
case("Mean-broadcast", "Mean", [f32(2, 3, 4), f32(3, 1), f32(4)], opset=13)
case("RMSNormalization", "RMSNormalization", [f32(2, 3, 8), positive(8)], opset=23, epsilon=1e-4)
case("RMSNormalization-axis1", "RMSNormalization", [f32(2, 3, 4), positive(3, 4)], opset=23, axis=1)
case("LpNormalization-l1", "LpNormalization", [f32(3, 4)], opset=13, axis=0, p=1)
case("LpNormalization-l2-zero-row", "LpNormalization", [np.vstack([f32(2, 5), np.zeros((1, 5), np.float32)])], opset=13)
case("MeanVarianceNormalization", "MeanVarianceNormalization", [f32(2, 3, 4, 5)], opset=13, axes=[0, 2, 3])
case("LRN", "LRN", [f32(2, 6, 3, 4)], opset=13, size=3, alpha=1e-3, beta=0.6, bias=2.0)
case("Hardmax", "Hardmax", [f32(3, 5)], opset=13)
case("Hardmax-ties-axis0", "Hardmax", [ints(4, 3, low=0, high=2).astype(np.float32)], opset=13, axis=0)
case("DepthToSpace-DCR", "DepthToSpace", [f32(1, 8, 2, 3)], opset=13, blocksize=2)
case("DepthToSpace-CRD", "DepthToSpace", [f32(2, 8, 2, 2)], opset=13, blocksize=2, mode="CRD")
case("SpaceToDepth", "SpaceToDepth", [f32(1, 2, 4, 6)], opset=13, blocksize=2)
# Col2Im: overlapping blocks (strides, pads, dilations: 4 x 3 blocks of 2 x 3 over 5 x 6), blocks
# that tile the image (a transpose), and 1-D
case("Col2Im-overlapping", "Col2Im", [f32(2, 18, 12)], consts={1: a(5, 6), 2: a(2, 3)}, opset=18,
     strides=[1, 2], pads=[1, 0, 0, 1], dilations=[2, 1])
case("Col2Im-tiles", "Col2Im", [f32(1, 12, 4)], consts={1: a(4, 6), 2: a(2, 3)}, opset=18, strides=[2, 3])
case("Col2Im-1d", "Col2Im", [f32(1, 6, 3)], consts={1: a(7), 2: a(3)}, opset=18, strides=[2])

# losses: targets in range, some equal to ignore_index
case("NegativeLogLikelihoodLoss-mean", "NegativeLogLikelihoodLoss", [f32(4, 5), ints(4, low=0, high=5, dtype=I64)], opset=13)
case("NegativeLogLikelihoodLoss-weight-ignore", "NegativeLogLikelihoodLoss",
     [f32(2, 4, 3), np.array([[0, 3, 1], [2, 2, 0]], I64), positive(4)], opset=13, ignore_index=2)
case("NegativeLogLikelihoodLoss-none-ignore", "NegativeLogLikelihoodLoss",
     [f32(3, 4, 2, 2), ints(3, 2, 2, low=0, high=4, dtype=I64)], opset=13, reduction="none", ignore_index=1)
case("SoftmaxCrossEntropyLoss-sum-log-prob", "SoftmaxCrossEntropyLoss", [f32(3, 5, low=-5, high=5), ints(3, low=0, high=5, dtype=I64)],
     opset=13, outputs=2, reduction="sum")
case("SoftmaxCrossEntropyLoss-weight-ignore", "SoftmaxCrossEntropyLoss",
     [f32(2, 3, 4), np.array([[0, 1, 2, 1], [2, 0, 0, 1]], I64), positive(3)], opset=13, ignore_index=0)

case("Floor", "Floor", [special(3, 5)], opset=13)
case("Ceil", "Ceil", [special(3, 5)], opset=13)
case("Round-halves", "Round", [np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], [0.49999997, -0.0, np.nan, np.inf, -np.inf, 1e20]],
                                        np.float32)], opset=13)

# recurrent layers, unrolled (mlfuse/frontend/onnx_recurrent.py): seq 3, batch 2, input 4, hidden 5
case("LSTM-bidirectional-bias-states-peepholes", "LSTM",
     [f32(3, 2, 4), f32(2, 20, 4), f32(2, 20, 5), f32(2, 40), None, f32(2, 2, 5), f32(2, 2, 5), f32(2, 15)],
     opset=14, outputs=3, hidden_size=5, direction="bidirectional")
case("LSTM-clip", "LSTM", [f32(3, 2, 4), f32(1, 20, 4), f32(1, 20, 5)], opset=14, outputs=3, hidden_size=5, clip=0.5)
case("GRU-linear-before-reset-bias", "GRU", [f32(3, 2, 4), f32(1, 15, 4), f32(1, 15, 5), f32(1, 30)], opset=14,
     outputs=2, hidden_size=5, linear_before_reset=1)
case("GRU-reverse-states", "GRU", [f32(3, 2, 4), f32(1, 15, 4), f32(1, 15, 5), f32(1, 30), None, f32(1, 2, 5)], opset=14,
     outputs=2, hidden_size=5, direction="reverse")
case("RNN-relu", "RNN", [f32(3, 2, 4), f32(1, 5, 4), f32(1, 5, 5), f32(1, 10)], opset=14, outputs=2,
     hidden_size=5, activations=["Relu"])  # batch-first (layout 1): the node suite's cases (onnxruntime lacks it)

# N-D pools whose window spans two axes or fewer: the others move into the batch
case("AveragePool-3d-channel-window", "AveragePool", [f32(1, 1, 6, 4, 5)], opset=17, kernel_shape=[3, 1, 1],
     pads=[1, 0, 0, 1, 0, 0])
case("MaxPool-3d-spatial-window", "MaxPool", [f32(2, 3, 2, 4, 6)], opset=17, kernel_shape=[1, 2, 2], strides=[1, 2, 2])
# and over three axes: pools over two, then over the third (onnx_ops.separable_pools)
case("MaxPool-3d", "MaxPool", [f32(1, 2, 5, 6, 7)], opset=17, kernel_shape=[2, 3, 2], strides=[2, 1, 2],
     pads=[1, 1, 0, 0, 1, 1], dilations=[1, 2, 1])
case("AveragePool-3d-exclude-pad-ceil", "AveragePool", [f32(2, 2, 5, 6, 7)], opset=19, kernel_shape=[3, 2, 3],
     strides=[2, 2, 2], pads=[1, 0, 1, 1, 1, 0], ceil_mode=1)
case("AveragePool-3d-count-pad", "AveragePool", [f32(1, 3, 4, 5, 6)], opset=19, kernel_shape=[2, 3, 3],
     pads=[1, 1, 1, 0, 1, 1], count_include_pad=1)

# scatters with constant indices (mlfuse/frontend/onnx_scatter.py)
case("ScatterND-column", "ScatterND", [f32(3, 4), None, f32(3)], consts={1: np.array([[0, 0], [1, 0], [2, 0]], I64)}, opset=18)
case("ScatterND-rows-negative", "ScatterND", [f32(4, 2, 3), None, f32(2, 2, 3)], consts={1: np.array([[-1], [1]], I64)}, opset=18)
case("ScatterND-add-duplicates", "ScatterND", [f32(5), None, f32(4)], consts={1: np.array([[1], [3], [1], [1]], I64)}, opset=18,
     reduction="add")
case("ScatterElements-axis1", "ScatterElements", [f32(3, 5), None, f32(3, 2)], consts={1: np.array([[4, 0], [1, 2], [-1, 3]], I64)},
     opset=18, axis=1)
case("ScatterElements-max-duplicates", "ScatterElements", [f32(4, 3), None, f32(2, 3)],
     consts={1: np.array([[1, 0, 3], [1, 2, 3]], I64)}, opset=18, reduction="max")


# cases added on 2026-12-06, last so that the random inputs of the cases above stay as they were
# a letter repeated in one operand is its diagonal
case("Einsum-batch-diagonal", "Einsum", [f32(2, 4, 4)], opset=13, equation="bii->bi")
case("Einsum-trace-implicit", "Einsum", [f32(4, 4)], opset=13, equation="ii")
case("Einsum-diagonal-times-matrix", "Einsum", [f32(3, 5, 3), f32(3, 2)], opset=13, equation="iji,ik->jk")
case("GatherND-batch-dims", "GatherND", [f32(2, 3, 4, 5), np.array([[[0, 1], [2, -1], [1, 3]], [[-3, 0], [1, 2], [2, 3]]], I64)],
     batch_dims=1)
case("GatherND-batch-dims-2", "GatherND", [f32(2, 3, 4), np.array([[[1], [3]], [[0], [2]], [[-1], [0]]], I64).reshape(2, 3, 1)],
     batch_dims=2)
# tf_crop_and_resize: a crop given by roi, samples outside the input take extrapolation_value
case("Resize-tf-crop-and-resize-extrapolation", "Resize", [f32(1, 2, 4, 5)],
     consts={1: np.array([0, 0, -0.2, 0.3, 1, 1, 1.3, 0.8], np.float32), 3: a(1, 2, 6, 4)}, mode="linear",
     coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.0, opset=18)
# keep_aspect_ratio_policy: one scale for both axes, the smallest (not_larger) or largest (not_smaller) of
# sizes / length; 3x5 to at most 10x20 is 3.33x, 10x17 (rounded half up), not 10x16
case("Resize-keep-aspect-not-larger", "Resize", [f32(1, 1, 3, 5)], consts={3: a(10, 20)}, axes=[2, 3], mode="linear",
     keep_aspect_ratio_policy="not_larger", opset=18)
case("Resize-keep-aspect-not-smaller", "Resize", [f32(1, 2, 3, 5)], consts={3: a(4, 9)}, axes=[2, 3], mode="linear",
     keep_aspect_ratio_policy="not_smaller", opset=18)
# LinearAttention, unrolled over its tokens (mlfuse/frontend/onnx_linear_attention.py): batch 2, 3 tokens
case("LinearAttention-linear", "LinearAttention", [f32(2, 3, 8), f32(2, 3, 8), f32(2, 3, 8)], opset=27, outputs=2,
     q_num_heads=2, kv_num_heads=2, update_rule="linear")
case("LinearAttention-gated-past-per-key-decay", "LinearAttention",
     [f32(2, 3, 8), f32(2, 3, 8), f32(2, 3, 8), f32(2, 2, 4, 4), f32(2, 3, 8, low=-1.0, high=0.0)], opset=27, outputs=2,
     q_num_heads=2, kv_num_heads=2, update_rule="gated")
case("LinearAttention-delta", "LinearAttention", [f32(2, 3, 8), f32(2, 3, 8), f32(2, 3, 8), None, None, positive(2, 3, 2)],
     opset=27, outputs=2, q_num_heads=2, kv_num_heads=2, update_rule="delta")
case("LinearAttention-gated-delta-gqa-per-head-decay-shared-beta", "LinearAttention",
     [f32(2, 3, 16), f32(2, 3, 8), f32(2, 3, 6), None, f32(2, 3, 2, low=-1.0, high=0.0), positive(2, 3, 1)], opset=27,
     outputs=2, q_num_heads=4, kv_num_heads=2, scale=0.5)

# BatchNormalization in training mode: the batch's statistics, and the running ones updated
case("BatchNormalization-training", "BatchNormalization", [f32(2, 3, 4, 5), positive(3), f32(3), f32(3), positive(3)],
     opset=15, outputs=3, training_mode=1, momentum=0.8)
# AffineGrid: theta times the base grid of the output positions
case("AffineGrid-2d", "AffineGrid", [f32(2, 2, 3)], consts={1: a(2, 3, 4, 5)}, opset=20)
case("AffineGrid-3d-align-corners", "AffineGrid", [f32(2, 3, 4)], consts={1: a(2, 1, 3, 4, 5)}, opset=20, align_corners=1)

# MaxPool's Indices: the first maximum in window order, flattened row-major (or column-major with
# storage_order 1); pads and ceil_mode's extra row never taken; ties (rounded inputs) take the first
case("MaxPool-indices-pads-ceil", "MaxPool", [f32(2, 3, 5, 6)], opset=12, outputs=2, kernel_shape=[3, 3],
     strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
case("MaxPool-indices-ties-storage-order-dilated", "MaxPool", [np.round(f32(1, 2, 6, 5))], opset=12, outputs=2,
     kernel_shape=[2, 2], dilations=[2, 1], storage_order=1)
case("MaxPool-indices-1d", "MaxPool", [f32(2, 2, 9)], opset=12, outputs=2, kernel_shape=[3], strides=[2], pads=[1, 0])
# quantization (mlfuse/frontend/onnx_quantize.py): per tensor, per axis and per block; saturation, and
# NaN and infinities as onnxruntime saturates them; halves rounded to even
case("QuantizeLinear-uint8", "QuantizeLinear", [f32(3, 4)], consts={1: np.array(0.02, np.float32), 2: np.array(128, np.uint8)},
     opset=13)
case("QuantizeLinear-int8-per-axis-saturating", "QuantizeLinear", [f32(2, 3, 4)],
     consts={1: np.array([0.01, 0.02, 0.004], np.float32), 2: np.array([-3, 0, 5], np.int8)}, opset=13, axis=1)
case("QuantizeLinear-no-zero-point", "QuantizeLinear", [f32(5, 3)], consts={1: np.array([0.01], np.float32)}, opset=13)
case("QuantizeLinear-runtime-scale-negative-axis", "QuantizeLinear", [f32(2, 3, 4), positive(4) / 50, ints(4, low=-9, high=9,
     dtype=np.int8)], opset=13, axis=-1)
case("QuantizeLinear-blocked", "QuantizeLinear", [f32(3, 5)],
     consts={1: positive(3, 3) / 50, 2: ints(3, 3, low=100, high=150, dtype=np.uint8)}, opset=21, axis=1, block_size=2)
case("QuantizeLinear-int16-output-dtype", "QuantizeLinear", [f32(3, 4) * 1000], consts={1: np.array(0.05, np.float32)},
     opset=21, output_dtype=TensorProto.INT16)
case("QuantizeLinear-uint16", "QuantizeLinear", [f32(3, 4)], consts={1: np.array(1e-4, np.float32),
     2: np.array(30000, np.uint16)}, opset=21)
case("QuantizeLinear-special-values", "QuantizeLinear",
     [np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 2.5, 3.5, -2.5, 0.5, -0.0, 300, -300], np.float32)],
     consts={1: np.array(1.0, np.float32), 2: np.array(-3, np.int8)}, opset=13)
case("QuantizeLinear-f16", "QuantizeLinear", [f32(4, 3).astype(np.float16)],
     consts={1: np.array(0.015, np.float16), 2: np.array(7, np.int8)}, opset=19)
case("DequantizeLinear-uint8", "DequantizeLinear", [ints(3, 4, low=0, high=256, dtype=np.uint8)],
     consts={1: np.array(0.02, np.float32), 2: np.array(128, np.uint8)}, opset=13)
case("DequantizeLinear-int8-per-axis", "DequantizeLinear", [ints(2, 3, 4, low=-128, high=128, dtype=np.int8),
     positive(3), ints(3, low=-5, high=5, dtype=np.int8)], opset=13, axis=-2)
case("DequantizeLinear-int32-no-zero-point", "DequantizeLinear", [ints(6, low=-100000, high=100000)],
     consts={1: np.array(0.001, np.float32)}, opset=13)
case("DequantizeLinear-blocked-f16", "DequantizeLinear", [ints(4, 6, low=-128, high=128, dtype=np.int8)],
     consts={1: (positive(2, 6) / 10).astype(np.float16), 2: ints(2, 6, low=-4, high=4, dtype=np.int8)}, opset=21,
     axis=0, block_size=3)
case("DequantizeLinear-int16", "DequantizeLinear", [ints(5, low=-30000, high=30000, dtype=np.int16)],
     consts={1: np.array(1e-3, np.float32), 2: np.array(-12, np.int16)}, opset=21)
# the integer products, exact in float32 where the operands' bound allows (else float64)
case("MatMulInteger-uint8", "MatMulInteger", [ints(3, 5, low=0, high=256, dtype=np.uint8), ints(5, 4, low=0, high=256,
     dtype=np.uint8), np.array(12, np.uint8), np.array(200, np.uint8)], opset=13)
case("MatMulInteger-per-column-zero-points", "MatMulInteger", [ints(2, 3, 6, low=-128, high=128, dtype=np.int8)],
     consts={1: ints(6, 4, low=-128, high=128, dtype=np.int8), 2: np.array([-5], np.int8),
             3: ints(4, low=-5, high=5, dtype=np.int8)}, opset=13)
case("MatMulInteger-deep-float64", "MatMulInteger", [ints(2, 600, low=0, high=256, dtype=np.uint8),
     ints(600, 3, low=0, high=256, dtype=np.uint8)], opset=13)
case("ConvInteger-padded", "ConvInteger", [ints(1, 3, 5, 6, low=0, high=256, dtype=np.uint8)],
     consts={1: ints(4, 3, 3, 3, low=0, high=256, dtype=np.uint8), 2: np.array(100, np.uint8), 3: np.array(131, np.uint8)},
     opset=13, pads=[1, 1, 1, 1])
case("ConvInteger-runtime-weights-float64", "ConvInteger", [ints(1, 32, 4, 4, low=0, high=256, dtype=np.uint8),
     ints(2, 32, 3, 3, low=0, high=256, dtype=np.uint8), np.array(3, np.uint8)], opset=13, strides=[2, 2])
case("QLinearMatMul-uint8", "QLinearMatMul", [ints(3, 5, low=0, high=256, dtype=np.uint8)],
     consts={1: np.array(0.02, np.float32), 2: np.array(120, np.uint8), 3: ints(5, 4, low=0, high=256, dtype=np.uint8),
             4: np.array(0.01, np.float32), 5: np.array(130, np.uint8), 6: np.array(0.5, np.float32),
             7: np.array(125, np.uint8)}, opset=13)
case("QLinearMatMul-int8-per-column", "QLinearMatMul", [ints(2, 3, 5, low=-128, high=128, dtype=np.int8),
     np.array(0.03, np.float32), np.array(-2, np.int8), ints(5, 4, low=-128, high=128, dtype=np.int8),
     positive(4) / 100, ints(4, low=-3, high=3, dtype=np.int8), np.array(0.4, np.float32), np.array(4, np.int8)], opset=13)
case("QLinearConv-bias-per-channel", "QLinearConv", [ints(1, 3, 5, 5, low=0, high=256, dtype=np.uint8)],
     consts={1: np.array(0.02, np.float32), 2: np.array(128, np.uint8), 3: ints(4, 3, 3, 3, low=-128, high=128, dtype=np.int8),
             4: positive(4) / 100, 5: np.zeros(4, np.int8), 6: np.array(0.3, np.float32), 7: np.array(110, np.uint8),
             8: ints(4, low=-2000, high=2000)}, opset=13, pads=[1, 1, 1, 1], strides=[1, 2])
case("QLinearConv-int8-grouped-1d", "QLinearConv", [ints(2, 4, 9, low=-128, high=128, dtype=np.int8),
     np.array(0.05, np.float32), np.array(1, np.int8), ints(6, 2, 3, low=-128, high=128, dtype=np.int8),
     np.array(0.01, np.float32), np.array(0, np.int8), np.array(0.9, np.float32), np.array(-5, np.int8)], opset=13, group=2)
# bitwise ops and shifts (graph.bitand ... graph.shr); shifts by the width or more give 0, as numpy's
case("BitShift-left-uint8-past-width", "BitShift", [ints(3, 4, low=0, high=256, dtype=np.uint8),
     ints(3, 4, low=0, high=12, dtype=np.uint8)], opset=11, direction="LEFT")
case("BitShift-right-uint32-broadcast", "BitShift", [ints(2, 5, low=0, high=2**31, dtype=np.int64).astype(np.uint32),
     ints(5, low=0, high=40, dtype=np.uint32)], opset=11, direction="RIGHT")
case("BitShift-right-uint64", "BitShift", [ints(6, low=0, high=2**62, dtype=I64).astype(np.uint64) * np.uint64(3)],
     consts={1: np.array([0, 1, 17, 63, 64, 100], np.uint64)}, opset=11, direction="RIGHT")
case("BitwiseAnd-int16-broadcast", "BitwiseAnd", [ints(2, 3, 4, low=-30000, high=30000, dtype=np.int16),
     ints(4, low=-30000, high=30000, dtype=np.int16)], opset=18)
case("BitwiseOr-uint8", "BitwiseOr", [ints(3, 5, low=0, high=256, dtype=np.uint8), ints(3, 5, low=0, high=256, dtype=np.uint8)],
     opset=18)
case("BitwiseXor-int64", "BitwiseXor", [ints(4, 3, low=-2**40, high=2**40, dtype=I64), ints(1, 3, low=-2**40, high=2**40, dtype=I64)],
     opset=18)
case("BitwiseNot-int32", "BitwiseNot", [ints(3, 4, low=-2**31, high=2**31 - 1)], opset=18)
case("BitwiseNot-uint16", "BitwiseNot", [ints(7, low=0, high=2**16, dtype=np.uint16)], opset=18)
# TopK: one selection per rank; ties to the lower index (rounded inputs tie)
case("TopK-largest-ties", "TopK", [np.round(f32(3, 7))], consts={1: a(3)}, opset=11, outputs=2, axis=1)
case("TopK-smallest-axis0-int32", "TopK", [ints(6, 4, low=-3, high=3)], consts={1: a(4)}, opset=11, outputs=2, axis=0,
     largest=0)
case("TopK-whole-axis-1d", "TopK", [f32(5)], consts={1: a(5)}, opset=11, outputs=2)
# the other trigonometric and hyperbolic functions (mlfuse/frontend/onnx_math.py)
for op, make in {"Tan": lambda: f32(3, 4, low=-1.5, high=1.5), "Sinh": lambda: f32(3, 4, low=-6, high=6),
                 "Cosh": lambda: f32(3, 4, low=-6, high=6), "Atan": lambda: f32(3, 4, low=-20, high=20),
                 "Asin": lambda: f32(3, 4, low=-1, high=1), "Acos": lambda: f32(3, 4, low=-1, high=1),
                 "Asinh": lambda: f32(3, 4, low=-30, high=30), "Acosh": lambda: f32(3, 4, low=1, high=30),
                 "Atanh": lambda: f32(3, 4, low=-0.99, high=0.99)}.items():
    case(op, op, [make()], opset=13)
# LpPool: the p-th root of a sum pool of |x|^p over zero-padded windows
case("LpPool-p2-pads-strides", "LpPool", [f32(1, 2, 7, 6)], opset=18, kernel_shape=[3, 2], pads=[1, 0, 1, 1], strides=[2, 2])
case("LpPool-p3-dilated-ceil", "LpPool", [f32(2, 1, 8, 7)], opset=18, kernel_shape=[2, 2], dilations=[2, 1], ceil_mode=1, p=3)
case("LpPool-p1-1d", "LpPool", [f32(1, 3, 9)], opset=18, kernel_shape=[3], p=1)
# GridSample (mlfuse/frontend/onnx_grid_sample.py; every mode and padding in test_grid_sample_matches_onnxruntime)
case("GridSample-bilinear-opset16", "GridSample", [f32(1, 2, 4, 5), f32(1, 3, 2, 2, low=-1.2, high=1.2)], opset=16)
# ReverseSequence: each entry's first sequence_lens[b] steps reversed (lengths 0 and all steps too)
case("ReverseSequence-time-major", "ReverseSequence", [f32(5, 4, 3), np.array([0, 5, 2, 1], I64)], opset=13)
case("ReverseSequence-batch-major", "ReverseSequence", [ints(3, 6), np.array([4, 6, 3], I64)], opset=13, batch_axis=0,
     time_axis=1)
# Scan, unrolled: a running sum (state) and each step's state times the step's input (scan output),
# the input walked backwards along axis 1, the outputs stacked along axis 1
SCAN_BODY = onnx.helper.make_graph(
    [onnx.helper.make_node("Add", ["s", "x"], ["s_next"]), onnx.helper.make_node("Mul", ["s_next", "x"], ["y"])], "body",
    [onnx.helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in ("s", "x")],
    [onnx.helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in ("s_next", "y")])
case("Scan-reverse-axis1", "Scan", [f32(3), f32(3, 5)], opset=16, outputs=2, body=SCAN_BODY, num_scan_inputs=1,
     scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1])
# Compress with a condition known at compile time: a gather at its true positions
case("Compress-axis1-short-condition", "Compress", [f32(3, 5, 2)], consts={1: np.array([1, 0, 1, 1], bool)}, opset=11, axis=1)
case("Compress-flattened", "Compress", [ints(2, 3)], consts={1: np.array([0, 1, 0, 0, 1, 1], bool)}, opset=11)
# Pad whose constant_value is only known at run time: zeros, then the value selected into the border
case("Pad-run-time-constant-value", "Pad", [f32(2, 3, 4), None, f32()], consts={1: a(1, 0, 2, 0, 2, 1)}, opset=18)
# Loop, unrolled: 4 steps, the carried value grows by the step number times an outer-scope value,
# each step's value stacked
LOOP_BODY = onnx.helper.make_graph(
    [onnx.helper.make_node("Identity", ["cond"], ["cond_out"]), onnx.helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
     onnx.helper.make_node("Mul", ["fi", "x2"], ["step"]), onnx.helper.make_node("Add", ["s", "step"], ["s_next"]),
     onnx.helper.make_node("Identity", ["s_next"], ["y"])], "body",
    [onnx.helper.make_tensor_value_info("i", TensorProto.INT64, []), onnx.helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
     onnx.helper.make_tensor_value_info("s", TensorProto.FLOAT, [3])],
    [onnx.helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
     *[onnx.helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in ("s_next", "y")]])

# TensorScatter (a KV cache update): rows written at each batch entry's index, linear and wrapping around
case("TensorScatter-linear", "TensorScatter", [f32(2, 3, 6, 4), f32(2, 3, 2, 4), np.array([1, 4], I64)], opset=24)
case("TensorScatter-circular", "TensorScatter", [f32(2, 5, 3), f32(2, 3, 3), np.array([3, 0], I64)], opset=24, axis=1,
     mode="circular")
case("TensorScatter-prefill", "TensorScatter", [f32(1, 2, 4, 3), f32(1, 2, 4, 3)], opset=24)


def max_pooled(x: np.ndarray, kernel: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """MaxPool's values and flat indices over the last two axes (numpy, no padding)."""
    n, c, h, w = x.shape
    oh, ow = (h - kernel) // stride + 1, (w - kernel) // stride + 1
    values, indices = np.empty((n, c, oh, ow), x.dtype), np.empty((n, c, oh, ow), np.int64)
    for b, ch, i, j in np.ndindex(n, c, oh, ow):
        window = x[b, ch, i * stride:i * stride + kernel, j * stride:j * stride + kernel]
        r, q = np.unravel_index(np.argmax(window), window.shape)
        values[b, ch, i, j] = window[r, q]
        indices[b, ch, i, j] = ((b * c + ch) * h + i * stride + r) * w + j * stride + q
    return values, indices


# MaxUnpool of a MaxPool's values and indices: without overlap, with overlapping windows (a larger output_shape:
# test_max_unpool_into_a_larger_output_shape)
for kernel, stride, side in ((2, 2, 6), (3, 2, 7)):  # sides the unpooled shape recovers
    pooled, where = max_pooled(f32(2, 3, side, side + 2 * (kernel == 2)), kernel, stride)
    case(f"MaxUnpool-k{kernel}-s{stride}", "MaxUnpool", [pooled, where], opset=11, kernel_shape=[kernel, kernel],
         strides=[stride, stride])
# Det of 1x1 to 4x4 matrices, batched
case("Det-4x4-batched", "Det", [f32(3, 2, 4, 4)], opset=11)
case("Det-3x3", "Det", [f32(3, 3)], opset=11)
case("Det-1x1", "Det", [f32(5, 1, 1)], opset=11)
# RoiAlign with constant rois (some partly outside the image, one malformed): fixed and adaptive
# sampling grids, avg and max, both coordinate modes
ROIS = np.array([[0.5, 1.0, 7.5, 8.0], [2.0, 0.0, 11.5, 4.5], [-3.0, 6.0, 3.0, 13.0], [5.0, 5.0, 4.0, 4.0]], np.float32)
ROI_BATCH = a(1, 0, 1, 0)
case("RoiAlign-avg-adaptive", "RoiAlign", [f32(2, 3, 10, 12)], consts={1: ROIS, 2: ROI_BATCH}, opset=16, output_height=3,
     output_width=4)
case("RoiAlign-max-scaled", "RoiAlign", [f32(2, 3, 10, 12)], consts={1: ROIS * 2, 2: ROI_BATCH}, opset=16, mode="max",
     output_height=2, output_width=2, sampling_ratio=2, spatial_scale=0.5)
case("RoiAlign-output-half-pixel", "RoiAlign", [f32(2, 3, 10, 12)], consts={1: ROIS, 2: ROI_BATCH}, opset=16,
     coordinate_transformation_mode="output_half_pixel", output_height=2, output_width=3, sampling_ratio=3)
# TfIdfVectorizer on int32 rows: unigrams and bigrams with skips (TF), bigrams only, weighted (TFIDF, IDF)
TFIDF_POOL = dict(ngram_counts=[0, 4], ngram_indexes=[0, 1, 2, 3, 4, 5, 6], pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7])
case("TfIdfVectorizer-tf-uni-and-bigrams", "TfIdfVectorizer", [ints(3, 12, low=2, high=9)], opset=9, mode="TF",
     min_gram_length=1, max_gram_length=2, max_skip_count=3, **TFIDF_POOL)
case("TfIdfVectorizer-tfidf-bigrams", "TfIdfVectorizer", [ints(12, low=2, high=9, dtype=I64)], opset=9, mode="TFIDF",
     min_gram_length=2, max_gram_length=2, max_skip_count=1, weights=[0.5, 1, 1.5, 2, 2.5, 3, 3.5], **TFIDF_POOL)
case("TfIdfVectorizer-idf", "TfIdfVectorizer", [ints(2, 9, low=2, high=9)], opset=9, mode="IDF",
     min_gram_length=1, max_gram_length=2, max_skip_count=0, weights=[0.5, 1, 1.5, 2, 2.5, 3, 3.5], **TFIDF_POOL)
# DeformConv: fractional offsets reaching outside the image, with mask and bias, groups and offset groups,
# strides, dilations and pads
case("DeformConv-groups-mask-bias", "DeformConv", [f32(2, 4, 7, 8), f32(6, 2, 3, 3), f32(2, 2 * 9 * 2, 4, 3, low=-2.5, high=2.5),
                                                   f32(6), f32(2, 2 * 9, 4, 3, low=0, high=1)],
     opset=19, group=2, offset_group=2, strides=[2, 2], dilations=[1, 2], pads=[1, 1, 1, 0])
case("DeformConv-plain", "DeformConv", [f32(1, 3, 6, 6), f32(4, 3, 2, 2), f32(1, 2 * 4, 5, 5, low=-1.5, high=1.5)], opset=19)
# Optional ops on tensors: a tensor holds a value, a missing input does not
case("OptionalGetElement-tensor", "OptionalGetElement", [f32(3, 4)], opset=18)
case("OptionalHasElement-tensor", "OptionalHasElement", [f32(2)], opset=18)
case("OptionalHasElement-missing", "OptionalHasElement", [None], opset=18)
# 3-D convolutions (video models' patch embeddings, 3-D U-Nets): depth taps into channels, depths into the batch.
# Values in [-1, 1]: up to 54 products a sum, whose rounding onnxruntime orders differently
def unit(*shape):
    return f32(*shape, low=-1.0, high=1.0)


case("Conv-3d-plain", "Conv", [unit(1, 3, 5, 6, 7), unit(4, 3, 3, 3, 3)])
case("Conv-3d-groups-strides-pads-bias", "Conv", [unit(2, 4, 6, 7, 8), unit(6, 2, 3, 2, 3), unit(6)], group=2,
     strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0])
case("Conv-3d-tubelet", "Conv", [unit(1, 3, 4, 16, 16), unit(8, 3, 2, 4, 4), unit(8)], strides=[2, 4, 4])
case("Conv-3d-depthwise-dilated", "Conv", [unit(1, 4, 7, 6, 6), unit(4, 1, 3, 3, 3)], group=4, dilations=[2, 1, 2],
     pads=[2, 1, 1, 2, 1, 1])
case("Conv-3d-same-upper", "Conv", [unit(1, 2, 5, 5, 5), unit(3, 2, 3, 3, 3)], auto_pad="SAME_UPPER", strides=[2, 2, 2])
case("ConvTranspose-3d-strided", "ConvTranspose", [unit(1, 4, 3, 4, 5), unit(4, 3, 2, 2, 2)], strides=[2, 2, 2])
case("ConvTranspose-3d-groups-pads-output-padding", "ConvTranspose", [unit(1, 4, 3, 4, 5), unit(4, 2, 3, 3, 3), unit(4)],
     group=2, strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1], output_padding=[1, 0, 0])
case("ConvTranspose-3d-constant-weight", "ConvTranspose", [unit(1, 2, 3, 4, 3)], consts={1: unit(2, 3, 2, 3, 2)},
     strides=[1, 2, 2])
case("ConvTranspose-3d-runtime-weight-dilated", "ConvTranspose", [unit(1, 2, 3, 3, 3), unit(2, 3, 3, 2, 3)],
     dilations=[2, 1, 1])

# one-to-one operators whose handler composes graph ops too (a negative-step Slice is a gather)
COMPILED_TOO = {"Slice-flip", "Slice-negative-step-2", "Floor", "Ceil", "Round-halves", "AveragePool-3d-channel-window",
               "MaxPool-3d-spatial-window", "MaxPool-3d", "AveragePool-3d-exclude-pad-ceil", "AveragePool-3d-count-pad",
               "Pow-int32-int32", "Pow-int32-negative-exponents", "Pow-int64-const-exponent", "Pow-int32-float-exponent",
               "BatchNormalization-training", "MaxPool-indices-pads-ceil", "MaxPool-indices-ties-storage-order-dilated",
               "MaxPool-indices-1d"}
# the bitwise ops' and shifts' scalar lowering (conversion/scalar.py), a pad's run-time value
COMPILED_TOO |= {p.id for p in CASES if p.values[0].startswith("Bit")} | {"Pad-run-time-constant-value"}
# and convs whose lowering has a case of its own (graph_to_loop.ROW_IN_REGISTERS)
COMPILED_TOO |= {"Conv-depthwise", "Conv-depthwise-wide-rows", "Conv-depthwise-wide-strided", "Conv-depthwise-wide-dilated",
                 "Conv-one-channel-wide", "Conv-strided-wide-rows", "Conv-strided-unequal-wide"}
# 3-D convolutions: slices, a transpose and a 2-D convolution
COMPILED_TOO |= {p.id for p in CASES if "-3d-" in p.id and p.values[0] in ("Conv", "ConvTranspose")}
COMPOSITE_CASES = [p for p in CASES if p.values[0] in OPS_DEFINED_HERE or p.id in COMPILED_TOO]


@pytest.mark.parametrize("op_type, inputs, consts, opset, outputs, attrs", COMPOSITE_CASES)
def test_composite_operators_compile_and_match_onnxruntime(op_type, inputs, consts, opset, outputs, attrs, tmp_path):
    """End to end through the CPU pipeline, outputs poisoned first (f32: rtol 2e-5, atol 1e-6, a few
    ulps for the expanded exp/log/tanh; integers and bools exactly)."""
    import mlfuse

    from test_onnx_helpers import assert_matches, run_onnxruntime

    model, feeds = single_node(op_type, inputs, consts, opset=opset, outputs=outputs, **attrs)
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    f = mlfuse.compile(str(path))
    outs = [np.full(s.shape, np.nan if s.dtype.kind == "f" else 7, s.dtype) for s in f.outputs]
    f(**feeds, out=outs)
    assert_matches(outs, run_onnxruntime(model, feeds), rtol=2e-5, atol=1e-6)


def test_float_mod_without_fmod_is_numpys_mod():
    """ONNX asks fmod = 1 for floats, but its node suite (test_mod_*_fmod_0) and onnx's reference
    evaluate fmod = 0 as numpy's mod (the divisor's sign): so does mlfuse."""
    from test_onnx_helpers import run_reference

    a_ = np.array([-4.5, 4.5, -3.0, 7.25, -0.0, 5.0], np.float32)
    b_ = np.array([2.0, -2.0, 2.0, -1.5, 3.0, np.inf], np.float32)
    model, feeds = single_node("Mod", [a_, b_], opset=17)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(run_reference(model, feeds)[0], np.mod(a_, b_))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])  # the integer bases ONNX Pow takes
def test_integer_pow_wraps_as_numpy(dtype, tmp_path):
    """Compiled: powers past the type's range wrap as numpy's (onnxruntime goes through
    double, so no onnxruntime comparison here); exponents up to the type's width."""
    info = np.iinfo(dtype)
    base = np.array([3, 7, 2, 1, 5, 11, 0, 2], dtype)
    exponent = np.array([25, 13, info.bits - 1, min(1000, info.max), 0, 9, 7, 1], dtype)
    model, feeds = single_node("Pow", [base, exponent], opset=15)
    path = tmp_path / "pow.onnx"
    onnx.save(model, str(path))
    (got,) = mlfuse.compile(str(path))(base, exponent)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, np.power(base, exponent))


def test_integer_products_take_zero_points_per_row_and_per_output_channel(tmp_path):
    """ONNX allows them; onnxruntime's CPU kernels take only scalars, so numpy is the judge."""
    rng = np.random.default_rng(77)
    a_ = rng.integers(-128, 128, (2, 3, 6)).astype(np.int8)
    b_ = rng.integers(-128, 128, (6, 4)).astype(np.int8)
    a_zero, b_zero = np.array([-5, 0, 7], np.int8), np.array([1, -2, 3, 0], np.int8)
    model, feeds = single_node("MatMulInteger", [a_, b_, a_zero, b_zero], opset=13)
    expected = (a_.astype(np.int32) - a_zero[:, None]) @ (b_.astype(np.int32) - b_zero)
    onnx.save(model, str(tmp_path / "matmul.onnx"))
    np.testing.assert_array_equal(mlfuse.compile(str(tmp_path / "matmul.onnx"))(**feeds)[0], expected)

    x = rng.integers(0, 256, (1, 2, 5, 5)).astype(np.uint8)
    w = rng.integers(0, 256, (3, 2, 3, 3)).astype(np.uint8)
    w_zero = np.array([120, 128, 140], np.uint8)
    model, feeds = single_node("ConvInteger", [x, w, np.array(9, np.uint8), w_zero], opset=13, pads=[1, 1, 1, 1])
    shifted = np.pad(x.astype(np.int64) - 9, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(shifted, (3, 3), axis=(2, 3))  # n, c, h, w, kh, kw
    expected = np.einsum("nchwij,mcij->nmhw", windows, w.astype(np.int64) - w_zero[:, None, None, None]).astype(np.int32)
    onnx.save(model, str(tmp_path / "conv.onnx"))
    np.testing.assert_array_equal(mlfuse.compile(str(tmp_path / "conv.onnx"))(**feeds)[0], expected)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_signed_shifts_are_numpys(dtype, tmp_path):
    """BitShift on signed types (opset 28, which onnxruntime lacks): amounts of the width or
    more, and negative ones, give 0 to the left and the sign bits to the right, as numpy."""
    bits = np.iinfo(dtype).bits
    x = np.array([1, -1, 5, -8, np.iinfo(dtype).min, np.iinfo(dtype).max, 3, -3], dtype)
    n = np.array([0, 1, bits - 1, bits, bits + 3, -1, 2, -bits], dtype)
    for direction, expected in (("LEFT", np.left_shift(x, n)), ("RIGHT", np.right_shift(x, n))):
        model, feeds = single_node("BitShift", [x, n], opset=28, direction=direction)
        path = tmp_path / f"shift_{direction}.onnx"
        onnx.save(model, str(path))
        np.testing.assert_array_equal(mlfuse.compile(str(path))(**feeds)[0], expected, err_msg=direction)


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_cumprod_is_numpys(exclusive, reverse, dtype, tmp_path):
    """CumProd (opset 26, which onnxruntime lacks) against numpy: 11 elements, so the
    doubling takes four steps, the last shorter than the axis; floats within 8 ulps
    (products in another association order), integers exactly, wrapping included."""
    rng = np.random.default_rng(26)
    x = (rng.uniform(0.5, 1.5, (3, 11)) * rng.choice([-1, 1], (3, 11))).astype(dtype) if dtype == np.float32 \
        else rng.integers(-60, 60, (3, 11)).astype(dtype)
    model, feeds = single_node("CumProd", [x], consts={1: np.array(1, np.int64)}, opset=26, exclusive=exclusive,
                               reverse=reverse)
    onnx.save(model, str(tmp_path / "cumprod.onnx"))
    got = mlfuse.compile(str(tmp_path / "cumprod.onnx"))(**feeds)[0]
    v = x[:, ::-1] if reverse else x
    if exclusive:
        v = np.concatenate([np.ones_like(v[:, :1]), v[:, :-1]], axis=1)
    want = np.cumprod(v, axis=1, dtype=dtype)
    want = want[:, ::-1] if reverse else want
    if dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=8 * 2**-24, atol=0)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("align_corners", [0, 1])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_grid_sample_matches_onnxruntime(mode, padding_mode, align_corners, tmp_path):
    """Every mode, padding and alignment, points up to 2.5x outside the image (reflections
    fold more than once); compiled, outputs poisoned first; rtol 1e-5, atol 1e-6."""
    from test_onnx_helpers import assert_matches, run_onnxruntime

    rng = np.random.default_rng(20261207)
    x = rng.uniform(-2, 2, (2, 3, 5, 7)).astype(np.float32)
    grid = rng.uniform(-2.5, 2.5, (2, 4, 6, 2)).astype(np.float32)
    model, feeds = single_node("GridSample", [x, grid], opset=20, mode=mode, padding_mode=padding_mode,
                               align_corners=align_corners)
    onnx.save(model, str(tmp_path / "gs.onnx"))
    f = mlfuse.compile(str(tmp_path / "gs.onnx"))
    out = np.full((2, 3, 4, 6), np.nan, np.float32)
    f(**feeds, out=[out])
    assert_matches([out], run_onnxruntime(model, feeds), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("inverse, onesided, components, length", [
    (0, 0, 1, None), (0, 1, 1, None), (0, 0, 2, 12), (1, 0, 2, None), (1, 1, 2, None), (1, 1, 2, 9), (0, 1, 1, 7)])
def test_dft_is_numpys_in_float64(inverse, onesided, components, length, tmp_path):
    """fft, rfft (onesided), ifft and irfft (inverse onesided), dft_length padding or
    cutting the signal, against numpy's float64 FFT of the same float32 data: within a
    float32 ulp, and 1e-12 of the largest output where the result is near 0 (mlfuse's
    product runs in float64, then rounds to float32)."""
    rng = np.random.default_rng(17)
    x = rng.uniform(-1, 1, (2, 10, 3, components)).astype(np.float32)
    consts = {1: np.array(length, np.int64)} if length else None
    model, feeds = single_node("DFT", [x], consts, opset=17, axis=1, inverse=inverse, onesided=onesided)
    onnx.save(model, str(tmp_path / "dft.onnx"))
    got = mlfuse.compile(str(tmp_path / "dft.onnx"))(**feeds)[0]
    wide = x.astype(np.float64)  # numpy 2 transforms float32 data in float32
    signal = wide[..., 0] + 1j * wide[..., 1] if components == 2 else wide[..., 0]
    n = length or (2 * (signal.shape[1] - 1) if inverse and onesided else signal.shape[1])
    if inverse and onesided:
        want = np.fft.irfft(signal, n=n, axis=1)[..., None]
    else:
        spectrum = np.fft.ifft(signal, n=n, axis=1) if inverse else np.fft.fft(signal, n=n, axis=1)
        spectrum = spectrum[:, : n // 2 + 1] if onesided and not inverse else spectrum
        want = np.stack([spectrum.real, spectrum.imag], axis=-1)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2**-23, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("components, onesided, window", [(1, 1, True), (1, 0, False), (2, 0, True)])
def test_stft_is_numpys_in_float64(components, onesided, window, tmp_path):
    """STFT's frames times the window, transformed, against numpy's float64 FFT of the
    same float32 data (onnxruntime's float32 FFT is 1e-4 off on small bins): within a
    float32 ulp, and 1e-12 of the largest output near 0."""
    rng = np.random.default_rng(23)
    signal = rng.uniform(-1, 1, (2, 50, components)).astype(np.float32)
    length, step = 12, 5
    w = rng.uniform(0.2, 1, length).astype(np.float32)
    inputs = [signal, None, w if window else None]
    model, feeds = single_node("STFT", inputs, {1: np.array(step, np.int64), 3: np.array(length, np.int64)}, opset=17,
                               onesided=onesided)
    onnx.save(model, str(tmp_path / "stft.onnx"))
    got = mlfuse.compile(str(tmp_path / "stft.onnx"))(**feeds)[0]
    wide = signal.astype(np.float64)
    x = wide[..., 0] + 1j * wide[..., 1] if components == 2 else wide[..., 0]
    starts = np.arange(1 + (50 - length) // step) * step
    frames = np.stack([x[:, s:s + length] for s in starts], axis=1) * (w.astype(np.float64) if window else 1.0)
    spectrum = np.fft.fft(frames, axis=-1)[..., : length // 2 + 1 if onesided else length]
    want = np.stack([spectrum.real, spectrum.imag], axis=-1)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2**-23, atol=1e-12 * np.abs(want).max())


def test_mel_weight_matrix_of_constant_inputs_is_folded():
    """MelWeightMatrix with its inputs known at compile time: a constant, as onnxruntime's."""
    values = [np.array(8, np.int64), np.array(64, np.int64), np.array(8000, np.int64), np.array(0.0, np.float32),
              np.array(4000.0, np.float32)]
    names = ["bins", "dft", "rate", "low", "high"]
    node = onnx.helper.make_node("MelWeightMatrix", names, ["m"])
    scale = onnx.helper.make_node("Mul", ["m", "x"], ["y"])
    graph = onnx.helper.make_graph([node, scale], "mel", [onnx.helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                   [onnx.helper.make_tensor_value_info("y", TensorProto.FLOAT, [33, 8])],
                                   initializer=[onnx.numpy_helper.from_array(v, n) for v, n in zip(values, names)])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    check_against_onnxruntime(model, {"x": np.array([1.5], np.float32)})


def test_max_unpool_into_a_larger_output_shape():
    """output_shape beyond the unpooled shape: the unpooled result, zeros after it, as onnx's
    reference writes it (and its node test expects). onnxruntime scatters the indices into
    output_shape's flat positions instead, so the reference judges; compiled, poisoned."""
    rng = np.random.default_rng(31)
    pooled, where = max_pooled(rng.standard_normal((1, 2, 6, 6)).astype(np.float32), 2, 2)
    node = onnx.helper.make_node("MaxUnpool", ["x", "i", "shape"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    graph = onnx.helper.make_graph([node], "unpool", [onnx.helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 3]),
                                                       onnx.helper.make_tensor_value_info("i", TensorProto.INT64, [1, 2, 3, 3])],
                                   [onnx.helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 7, 8])],
                                   initializer=[onnx.numpy_helper.from_array(a(1, 2, 7, 8), "shape")])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 11)])
    f = mlfuse.compile(import_onnx(model))
    got = np.full((1, 2, 7, 8), np.nan, np.float32)
    f(pooled, where, out=got)
    want = ReferenceEvaluator(model).run(None, {"x": pooled, "i": where})[0]
    np.testing.assert_array_equal(got, want)


def test_loop_with_a_static_trip_count_is_unrolled(tmp_path):
    """LOOP_BODY's 4 steps against onnxruntime, compiled, outputs poisoned first; a
    condition known only at run time is a diagnostic at the node."""
    from test_onnx_helpers import assert_matches, run_onnxruntime

    x = np.random.default_rng(16).uniform(-2, 2, 3).astype(np.float32)
    model, feeds = single_node("Loop", [None, None, x], consts={0: np.array(4, I64), 1: np.array(True)}, opset=16,
                               outputs=2, infer=False, body=LOOP_BODY)
    for out, shape in zip(model.graph.output, ([3], [4, 3])):
        out.type.tensor_type.ClearField("shape")
        for d in shape:
            out.type.tensor_type.shape.dim.add().dim_value = d
    onnx.save(model, str(tmp_path / "loop.onnx"))
    f = mlfuse.compile(str(tmp_path / "loop.onnx"))
    outs = [np.full(s.shape, np.nan, np.float32) for s in f.outputs]
    f(**feeds, out=outs)
    assert_matches(outs, run_onnxruntime(model, feeds), rtol=1e-6, atol=1e-6)

    # a body whose condition reads the (run-time) input x2
    body = onnx.helper.make_graph(
        [onnx.helper.make_node("ReduceMax", ["x2"], ["m"], keepdims=0), onnx.helper.make_node("Less", ["m", "limit"], ["cond_out"]),
         onnx.helper.make_node("Identity", ["s"], ["s_next"])], "body", LOOP_BODY.input,
        [LOOP_BODY.output[0], LOOP_BODY.output[1]], initializer=[onnx.numpy_helper.from_array(np.array(1.0, np.float32), "limit")])
    model, _ = single_node("Loop", [None, None, x], consts={0: np.array(4, I64), 1: np.array(True)}, opset=16, infer=False,
                           body=body)
    with pytest.raises(Diagnostic, match=r"the body's condition at step 0 is only known at run time") as info:
        import_onnx(model)
    assert info.value.location == "the_loop"


@pytest.mark.parametrize("source, target", [(np.float32, np.int32), (np.int32, np.float32), (np.float64, np.uint64),
                                            (np.float16, np.int16), (np.uint8, np.int8), (np.bool_, np.uint8)])
def test_bitcast_is_numpys_view(source, target, tmp_path):
    """BitCast (opset 26, which onnxruntime lacks) against numpy's view, compiled: NaN
    payloads, infinities, -0.0 and the sign bit kept; a bool is 0 or 1."""
    rng = np.random.default_rng(26)
    if np.dtype(source).kind == "f":
        x = np.concatenate([rng.uniform(-3, 3, 9), [np.nan, np.inf, -np.inf, -0.0, 1e-30]]).astype(source)
    elif source == np.bool_:
        x = rng.random(14) < 0.5
    else:
        x = rng.integers(np.iinfo(source).min, np.iinfo(source).max, 14, dtype=np.int64, endpoint=True).astype(source)
    model, feeds = single_node("BitCast", [x], opset=26, to=onnx.helper.np_dtype_to_tensor_dtype(np.dtype(target)))
    onnx.save(model, str(tmp_path / "bitcast.onnx"))
    got = mlfuse.compile(str(tmp_path / "bitcast.onnx"))(**feeds)[0]
    np.testing.assert_array_equal(got.view(np.uint8), x.view(target).view(np.uint8))


MATH_TRUTH = {"Tan": np.tan, "Sinh": np.sinh, "Cosh": np.cosh, "Atan": np.arctan, "Asin": np.arcsin, "Acos": np.arccos,
              "Asinh": np.arcsinh, "Acosh": np.arccosh, "Atanh": np.arctanh}


@pytest.mark.parametrize("op_type", sorted(MATH_TRUTH))
def test_trigonometric_and_hyperbolic_functions_within_4_ulps(op_type, tmp_path):
    """Against numpy in float64, rounded: within 4 float32 ulps over each function's domain,
    near 0, near its ends (acosh and acos near 1, sinh and cosh where e^x alone overflows);
    special values (NaN, +-inf, +-0, outside the domain) exactly as numpy's."""
    rng = np.random.default_rng(20261206)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1 - 2**-24, -1 + 2**-24, 1 + 2**-23, 1.5, -1.5,
                        1e-20, -1e-20, 0.0999, 0.1001, 0.4999, 0.5001, 9999.0, 10001.0, 1e30, -1e30, 89.0, -89.0,
                        89.4, 90.0], np.float32)
    x = np.concatenate([special, rng.uniform(-3, 3, 3000), rng.uniform(-0.2, 0.2, 1000), rng.uniform(0.9, 1.1, 1000),
                        rng.uniform(-100, 100, 1000)]).astype(np.float32)
    model, feeds = single_node(op_type, [x], opset=13)
    onnx.save(model, str(tmp_path / "f.onnx"))
    got = mlfuse.compile(str(tmp_path / "f.onnx"))(**feeds)[0]
    with np.errstate(all="ignore"):
        truth = MATH_TRUTH[op_type](x.astype(np.float64))
        want = truth.astype(np.float32)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite], want[~finite])
    ulps = np.abs(got[finite].astype(np.float64) - truth[finite]) / np.spacing(np.abs(want[finite])).astype(np.float64)
    worst = int(np.argmax(ulps))
    assert ulps[worst] <= 4.0, f"{op_type}({x[finite][worst]!r}) = {got[finite][worst]!r}, numpy: {want[finite][worst]!r}"
    zeros = (x == 0) & finite
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))


@pytest.mark.parametrize("shape, groups", [((2, 6, 5), 2), ((1, 4, 3, 3), 4)])
def test_group_normalization_matches_onnxruntime(shape, groups):
    """ONNX shape inference leaves GroupNormalization's output untyped: state it in the graph."""
    from test_onnx_helpers import make_model, run_onnxruntime, run_reference

    x, scale, bias = f32(*shape), positive(shape[1]), f32(shape[1])
    node = onnx.helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="the_gn", num_groups=groups,
                                 epsilon=1e-4)
    model = make_model([node], {"x": (TensorProto.FLOAT, shape), "s": (TensorProto.FLOAT, [shape[1]]),
                                "b": (TensorProto.FLOAT, [shape[1]])}, [], opset=21, infer=False)
    model.graph.output.append(onnx.helper.make_tensor_value_info("y", TensorProto.FLOAT, shape))
    feeds = {"x": x, "s": scale, "b": bias}
    np.testing.assert_allclose(run_reference(model, feeds)[0], run_onnxruntime(model, feeds)[0], rtol=1e-5, atol=1e-5)


# test_shape_generators_*, test_onnx_frontend, test_cumprod_is_numpys, test_loop_with_a_static_trip_count_is_unrolled,
# test_bitcast_is_numpys_view, test_dft_is_numpys_in_float64 (onnxruntime's float32 FFT is 1e-6 off)
OPS_TESTED_ELSEWHERE = {"GroupNormalization", "ConstantOfShape", "Range", "If", "CumProd", "Loop", "BitCast", "DFT", "STFT",
                        "MelWeightMatrix", *(f"ai.onnx.preview.training.{op}" for op in ("Adagrad", "Adam", "Momentum")),
                        "ai.onnx.ml.Binarizer", "ai.onnx.ml.ArrayFeatureExtractor", "ai.onnx.ml.TreeEnsemble"}


@pytest.mark.parametrize("op_type, inputs, consts, opset, outputs, attrs", CASES)
def test_single_node_matches_onnxruntime(op_type, inputs, consts, opset, outputs, attrs):
    model, feeds = single_node(op_type, inputs, consts, opset=opset, outputs=outputs, **attrs)
    check_against_onnxruntime(model, feeds)


def test_every_supported_operator_has_a_case():
    covered = {p.values[0] for p in CASES} | OPS_TESTED_ELSEWHERE
    assert set(OPS) <= covered, f"no single-node case for {sorted(set(OPS) - covered)}"


REQUIRED_OPERATORS = """Add Sub Mul Div Pow Neg Abs Exp Log Sqrt Reciprocal Tanh Erf Sigmoid Relu LeakyRelu
Gelu Max Min Where Equal Less Greater Cast Identity Constant ReduceSum ReduceMean ReduceMax ReduceMin Softmax
LogSoftmax LayerNormalization MatMul Gemm Transpose Reshape Flatten Squeeze Unsqueeze Expand Concat Slice Pad
Conv MaxPool AveragePool GlobalAveragePool BatchNormalization""".split()


def test_required_operators_are_supported():
    assert set(REQUIRED_OPERATORS) <= set(OPS)


# Attributes the opsets define but mlfuse does not take (tested below to give diagnostics).
REJECTED_ATTRIBUTES = {"Constant": {"sparse_value", "value_string", "value_strings"}}


def test_each_handler_names_every_attribute_of_its_schemas():
    from onnx import defs

    for op_type, spec in OPS.items():
        for version in range(13, onnx.defs.onnx_opset_version() + 1):
            try:
                schema = defs.get_schema(op_type, version)
            except Exception:  # not defined at this opset (Gelu before 20)
                continue
            missing = set(schema.attributes) - spec.attributes - REJECTED_ATTRIBUTES.get(op_type, set())
            assert not missing, f"{op_type} (opset {version}) attributes without a decision: {missing}"


# --- what mlfuse does not accept: a Diagnostic at the node, never a traceback ------------------

REJECTED = [
    pytest.param("Constant", [], None, 17, dict(value_string="text"), r"attribute 'value_string' is not supported", id="Constant-string"),
    pytest.param("Constant", [], None, 17, dict(value_strings=["a"]), r"attribute 'value_strings' is not supported", id="Constant-strings"),
    pytest.param("Einsum", [f32(3, 4)], None, 13, dict(equation="ii->i"), r"does not match|repeats 'i' over axes of sizes 3 and 4",
                 id="Einsum-diagonal-not-square"),
    pytest.param("Dropout", [f32(3)], {2: np.array(True)}, 13, {}, r"training_mode = true is not supported", id="Dropout-training"),
    pytest.param("Cast", [f32(3)], None, 17, dict(to=TensorProto.STRING), r"element type STRING, which mlfuse does not support", id="Cast-string"),
    pytest.param("ScatterND", [f32(4, 3), ints(2, 1, low=0, high=4, dtype=I64), f32(2, 3)], None, 18, {},
                 r"input 1 \(indices, 'x1'\) must be a constant", id="ScatterND-runtime-indices"),
    pytest.param("ScatterElements", [f32(4, 3)], {1: np.array([[0, 4, 1]], I64), 2: f32(1, 3)}, 18, {},
                 r"an index is out of range", id="ScatterElements-out-of-range"),
    pytest.param("Slice", [f32(5)], {1: a(0), 2: a(4), 4: a(-1)}, 17, {}, r"the slice of axis 0 with a negative step is empty",
                 id="Slice-negative-step-empty"),
    pytest.param("Conv", [f32(1, 2, 3, 3, 3, 3), f32(3, 2, 2, 2, 2, 2)], None, 17, {}, r"only 1-D, 2-D and 3-D convolutions",
                 id="Conv-4d"),
    pytest.param("Conv", [f32(1, 4, 3, 5, 5), f32(3, 3, 2, 2, 2)], None, 17, dict(group=2), r"does not match input channels 4 in 2 groups",
                 id="Conv-3d-group-mismatch"),
    pytest.param("Conv", [f32(1, 2, 5, 5), f32(3, 2, 3, 3)], None, 17, dict(kernel_shape=[2, 2]), r"kernel_shape \[2, 2\] differs", id="Conv-kernel-shape-mismatch"),
    pytest.param("Conv", [f32(1, 2, 5, 5), f32(3, 2, 3, 3)], None, 17, dict(auto_pad="SAME_UPPER", pads=[1, 1, 1, 1]), r"pads cannot be given together with auto_pad", id="Conv-auto-pad-and-pads"),
    pytest.param("MaxPool", [f32(1, 2, 4, 4)], None, 17, dict(kernel_shape=[2, 2], storage_order=2), r"storage_order must be 0 or 1",
                 id="MaxPool-indices-bad-storage-order"),
    pytest.param("AveragePool", [f32(1, 2, 4, 4)], None, 17, dict(kernel_shape=[2, 2], auto_pad="BOGUS"), r"auto_pad \"BOGUS\"", id="AveragePool-bad-auto-pad"),
    pytest.param("LayerNormalization", [f32(2, 4), positive(4)], None, 17, dict(stash_type=TensorProto.INT32), r"stash_type must be a floating-point type", id="LayerNormalization-int-stash"),
    pytest.param("Pad", [f32(2, 3)], {1: a(1, 1, 1, 1)}, 17, dict(mode="symmetric"), r"mode \"symmetric\" is not supported", id="Pad-unknown-mode"),
    pytest.param("Pad", [f32(2, 3)], {1: a(3, 0, 0, 0)}, 17, dict(mode="reflect"), r"reflect padding of 3 exceeds", id="Pad-reflect-too-far"),
    pytest.param("Reshape", [f32(2, 3)], None, 17, {}, r"input 1 \(shape, 'x1'\) must be a constant", id="Reshape-runtime-shape"),
    pytest.param("LinearAttention", [f32(2, 3, 8), f32(2, 3, 8), f32(2, 3, 8)], None, 27,
                 dict(q_num_heads=2, kv_num_heads=2, update_rule="gated"), r"shape inference failed .*update_rule 'gated' requires decay input",
                 id="LinearAttention-gated-without-decay"),
    pytest.param("LinearAttention", [f32(2, 3, 9), f32(2, 3, 6), f32(2, 3, 6)], None, 27,
                 dict(q_num_heads=3, kv_num_heads=2, update_rule="linear"), r"shape inference failed .*must be a multiple of kv_num_heads",
                 id="LinearAttention-heads-not-grouped"),
    pytest.param("Col2Im", [f32(1, 12, 5)], {1: a(4, 6), 2: a(2, 3)}, 18, dict(strides=[2, 3]),
                 r"the input 1x12x5 is not \(N, C \* 6, 4\)", id="Col2Im-wrong-block-count"),
    pytest.param("Col2Im", [f32(1, 12, 4)], {1: a(4, 6), 2: a(2, 3)}, 18, dict(strides=[0, 3]),
                 r"must be positive", id="Col2Im-zero-stride"),
    pytest.param("QuantizeLinear", [f32(2, 3, 4)], {1: np.array([0.1, 0.2], np.float32)}, 13, dict(axis=1),
                 r"the scale of shape 2 is neither a scalar nor 3 values along axis 1", id="QuantizeLinear-scale-length"),
    pytest.param("QuantizeLinear", [f32(3, 5)], {1: positive(3, 2)}, 21, dict(axis=1, block_size=2),
                 r"does not give one value per block of 2 along axis 1 of 3x5 \(expected 3x3\)", id="QuantizeLinear-blocks"),
    pytest.param("QuantizeLinear", [f32(3)], {1: np.array(0.1, np.float32), 2: np.array(1.0, ml_dtypes.float8_e4m3fn)}, 21, {},
                 r"the zero point of a float8 type must be 0", id="QuantizeLinear-float8-zero-point"),
    pytest.param("QuantizeLinear", [f32(3)], {1: np.array(0.1, np.float32), 2: np.array(1, np.int32)}, 13, {},
                 r"y_zero_point typestr: T2, has unsupported type: tensor\(int32\)", id="QuantizeLinear-int32-zero-point"),
    pytest.param("BitShift", [ints(3, dtype=np.uint8), ints(3, dtype=np.uint8)], None, 11, dict(direction="UP"),
                 r"direction must be \"LEFT\" or \"RIGHT\", got 'UP'", id="BitShift-bad-direction"),
    pytest.param("TopK", [f32(3, 5)], {1: a(6)}, 11, {}, r"Axis has less than the requested k elements", id="TopK-k-too-large"),
    pytest.param("TopK", [f32(2, 100)], {1: a(65)}, 11, {}, r"k = 65 is more than mlfuse's TopK takes \(64\)", id="TopK-k-past-limit"),
    pytest.param("TopK", [f32(3, 5), a(2)], None, 11, {}, r"input 1 \(k, 'x1'\) must be a constant", id="TopK-runtime-k"),
    pytest.param("GridSample", [f32(1, 2, 4, 5), f32(1, 3, 2, 3)], None, 20, {},
                 r"The last dimension of the grid tensor must be the rank of the grid tensor - 2", id="GridSample-grid-rank"),
    pytest.param("Compress", [f32(3, 2)], {1: np.array([0, 0, 0], bool)}, 11, dict(axis=0),
                 r"the condition selects nothing", id="Compress-nothing"),
    pytest.param("DequantizeLinear", [f32(3)], {1: np.array(0.1, np.float32)}, 13, {},
                 r"x typestr: T, has unsupported type: tensor\(float\)", id="DequantizeLinear-float-input"),
]


@pytest.mark.parametrize("op_type, inputs, consts, opset, attrs, message", REJECTED)
def test_rejected_nodes_give_a_located_diagnostic(op_type, inputs, consts, opset, attrs, message, request):
    if op_type == "Reshape":
        inputs = [*inputs, a(6)]  # the shape as a run-time graph input
    outputs = {"MaxPool-indices-bad-storage-order": 2}.get(request.node.callspec.id, 1)
    outputs = 2 if op_type in ("LinearAttention", "TopK") else outputs
    model, _ = single_node(op_type, inputs, consts, opset=opset, outputs=outputs, infer=False, **attrs)
    with pytest.raises(Diagnostic, match=message) as info:
        import_onnx(model)
    assert info.value.location == f"the_{op_type.lower()}"
    assert str(info.value).startswith(f"the_{op_type.lower()}: error: {op_type}: ")


def test_the_importer_shares_the_builders_broadcasting_and_dtype_table():
    """One broadcasting implementation and one numpy dtype table for both frontends."""
    from mlfuse.frontend import builder, onnx_ops

    assert onnx_ops.broadcast_shapes is builder.broadcast_shapes
    assert onnx_ops.broadcast_op is builder.broadcast_op
    assert onnx_ops.NUMPY_ELEMENT_TYPES is builder.NUMPY_ELEMENT_TYPES


def test_operands_that_do_not_broadcast_are_a_diagnostic_at_the_node():
    """(ONNX shape inference usually says so first; the importer's own check stays located.)"""
    from xdsl.dialects.builtin import TensorType, f32
    from xdsl.ir import Block

    from mlfuse.frontend import onnx_ops

    class FakeNode:
        def error(self, message: str) -> Diagnostic:
            return Diagnostic(f"Add: {message}", "the_add")

    node = FakeNode()
    assert onnx_ops.broadcast_shape(node, (4, 1), (3,)) == (4, 3)
    with pytest.raises(Diagnostic, match=r"Add: operand shapes 4x8, 3 do not broadcast"):
        onnx_ops.broadcast_shape(node, (4, 8), (3,))
    x = Block(arg_types=[TensorType(f32, [3])]).args[0]
    with pytest.raises(Diagnostic, match=r"Add: cannot broadcast 3 to 4x8"):
        onnx_ops.broadcast_to(node, x, (4, 8))


def test_resize_keeps_an_infinity_local(tmp_path):
    """Bilinear 2x of an image with one inf: only the output pixels whose taps reach it are
    not finite (a product with the whole interpolation matrix made every row NaN, 0 * inf),
    and the others match onnxruntime's (rtol 2e-5)."""
    import mlfuse

    from test_onnx_helpers import run_onnxruntime

    x = np.random.default_rng(7).uniform(-2, 2, (1, 2, 16, 16)).astype(np.float32)
    x[0, 1, 5, 7] = np.inf
    model, feeds = single_node("Resize", [x], {2: np.array([1, 1, 2, 2], np.float32)}, opset=13, mode="linear")
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    y = np.full((1, 2, 32, 32), 1.25e30, np.float32)  # poisoned
    mlfuse.compile(str(path))(x, out=[y])
    near = np.zeros(y.shape, bool)
    near[0, 1, 9:13, 13:17] = True  # half_pixel: output row 2i + r reads input rows i - 1 + r .. i + r
    assert not np.isfinite(y[near]).any()
    assert np.isfinite(y[~near]).all()
    want = run_onnxruntime(model, feeds)[0]
    np.testing.assert_allclose(y[~near], want[~near], rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("scales, axes", [([1, 1, 2, 2], [3, 2]), ([1, 1, 0.5, 2], [2, 3]), ([1, 1, 2, 0.5], [3, 2])])
def test_resize_gathers_along_rows_where_they_are_fewest(tmp_path, scales, axes):
    """Bilinear Resize runs one pass of taps per axis; the pass along the rows (a gather
    within each row) comes where there are fewest rows: before an upsampling of the
    other axis, after a downsampling (resize_order). Either order matches onnxruntime."""
    import mlfuse
    from mlfuse.dialects import graph

    from test_onnx_helpers import run_onnxruntime

    x = np.random.default_rng(11).uniform(-2, 2, (1, 2, 8, 12)).astype(np.float32)
    model, feeds = single_node("Resize", [x], {2: np.array(scales, np.float32)}, opset=13, mode="linear")
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    gathers = [op.gather_axis for op in import_onnx(str(path)).walk() if isinstance(op, graph.GatherOp)]
    assert list(dict.fromkeys(gathers)) == axes
    want = run_onnxruntime(model, feeds)[0]
    y = np.full(want.shape, 1.25e30, np.float32)  # poisoned
    mlfuse.compile(str(path))(x, out=[y])
    np.testing.assert_allclose(y, want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("kernel, strides, blockwise", [([2, 2], [2, 2], True), ([3, 2], [3, 2], True),
                                                        ([3, 3], [2, 2], False)])
def test_conv_transpose_without_overlap_is_a_product(kernel, strides, blockwise):
    """A transposed conv whose kernel equals its strides imports as a product and a
    depth-to-space, no convolution (the dilated input's zeros are not multiplied); one whose
    windows overlap stays a convolution."""
    model, _ = single_node("ConvTranspose", [f32(1, 4, 5, 6)], {1: f32(4, 3, *kernel)}, strides=strides)
    ops = {op.name for op in import_onnx(model).walk()}
    assert ("graph.conv2d" not in ops and "graph.matmul" in ops) == blockwise, sorted(ops)


@pytest.mark.parametrize("op_type, static, attrs", [
    ("ConstantOfShape", [a(2, 3, 4)], {"value": onnx.helper.make_tensor("v", TensorProto.INT32, [1], [7])}),
    ("ConstantOfShape", [a(3)], {}),
    ("Range", [np.array(1, I64), np.array(11, I64), np.array(3, I64)], {}),
    ("Range", [np.array(2.5, np.float32), np.array(-1.0, np.float32), np.array(-0.75, np.float32)], {}),
])
def test_shape_generators_with_inputs_frozen_at_compile_time(op_type, static, attrs):
    """ConstantOfShape and Range whose inputs are graph inputs frozen with `input_values`
    (as the ONNX node suite passes them): constants, equal to onnxruntime's."""
    import mlfuse

    from test_onnx_helpers import assert_matches, run_onnxruntime

    model, feeds = single_node(op_type, static, opset=21, **attrs)
    f = mlfuse.compile(import_onnx(model, input_values=feeds))
    assert_matches(list(f()), run_onnxruntime(model, feeds), rtol=0, atol=0)


def test_shape_generators_need_their_inputs_at_compile_time():
    model, _ = single_node("Range", [np.array(0, I64), np.array(5, I64), np.array(1, I64)], opset=21)
    with pytest.raises(Diagnostic, match=r"the_range: error: Range: input 0 \(start, 'x0'\) must be a constant"):
        import_onnx(model)
    model, feeds = single_node("Range", [np.array(0, I64), np.array(5, I64), np.array(0, I64)], opset=21)
    with pytest.raises(Diagnostic, match="the_range: error: Range: delta is 0"):
        import_onnx(model, input_values=feeds)


@pytest.mark.parametrize("inputs, attrs", [
    ([f32(2, 3, 4, 8), f32(2, 3, 6, 8), f32(2, 3, 6, 5)], {}),
    ([f32(1, 4, 16), f32(1, 6, 8), f32(1, 6, 6)], {"q_num_heads": 4, "kv_num_heads": 2, "is_causal": 1}),
    ([f32(2, 2, 3, 4), f32(2, 2, 5, 4), f32(2, 2, 5, 4), np.where(bools(3, 5), 0.0, -np.inf).astype(np.float32)],
     {"scale": 0.3, "softcap": 2.0}),
])
def test_function_ops_expand_into_their_schema_bodies(inputs, attrs):
    """Attention (opset 23) is not in mlfuse's table: the importer expands it into its
    schema's function body (mlfuse/frontend/onnx_functions.py); compiled with poisoned
    outputs, against onnxruntime (rtol 2e-5, atol 1e-6)."""
    import mlfuse

    from test_onnx_helpers import assert_matches, run_onnxruntime

    model, feeds = single_node("Attention", inputs, opset=23, **attrs)
    f = mlfuse.compile(import_onnx(model))
    outs = [np.full(s.shape, np.nan, s.dtype) for s in f.outputs]
    f(**feeds, out=outs)
    assert_matches(outs, run_onnxruntime(model, feeds), rtol=2e-5, atol=1e-6)


def test_function_op_expansion_names_the_node_and_keeps_unexpandable_ops_unsupported():
    from mlfuse.frontend.onnx_functions import expand_function_ops

    model, _ = single_node("Attention", [f32(1, 2, 3, 4), f32(1, 2, 3, 4), f32(1, 2, 3, 4)], opset=23)
    expanded = expand_function_ops(model, 23)
    assert "Attention" not in {n.op_type for n in expanded.graph.node}
    assert all(n.name.startswith("the_attention/") for n in expanded.graph.node)
    assert expand_function_ops(expanded, 23) is expanded  # nothing left to expand
    # an operator without a function body stays, and is reported at its node
    model, _ = single_node("Unique", [f32(3, 4)], opset=23)
    assert expand_function_ops(model, 23) is model
    with pytest.raises(Diagnostic, match=r"unsupported ONNX operator in 1 node: 'the_unique' \(Unique\)"):
        import_onnx(model)


def test_preview_flex_attention_expands_with_its_score_mod():
    """ai.onnx.preview's FlexAttention, whose function inlines its score_mod graph (a soft
    cap here): expanded, compiled, outputs poisoned, against onnx's reference evaluator."""
    rng = np.random.default_rng(41)
    q, k, v = (rng.standard_normal((1, 2, 5, 8)).astype(np.float32) for _ in range(3))
    capped = onnx.helper.make_graph(  # scores (B, H, L, S) in, scores out
        [onnx.helper.make_node("Div", ["scores", "cap"], ["d"]), onnx.helper.make_node("Tanh", ["d"], ["t"]),
         onnx.helper.make_node("Mul", ["t", "cap"], ["out"])], "soft_cap",
        [onnx.helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["B", "H", "L", "S"])],
        [onnx.helper.make_tensor_value_info("out", TensorProto.FLOAT, ["B", "H", "L", "S"])],
        initializer=[onnx.numpy_helper.from_array(np.array(2.0, np.float32), "cap")])
    node = onnx.helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview", score_mod=capped)
    graph = onnx.helper.make_graph([node], "flex", [onnx.helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 5, 8])
                                                    for n in ("q", "k", "v")],
                                   [onnx.helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 5, 8])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 26),
                                                         onnx.helper.make_opsetid("ai.onnx.preview", 1)])
    f = mlfuse.compile(import_onnx(model))
    got = np.full((1, 2, 5, 8), np.nan, np.float32)
    f(q, k, v, out=got)
    want = ReferenceEvaluator(model).run(None, {"q": q, "k": k, "v": v})[0]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("op, state, attrs", [
    ("Adagrad", 1, dict(decay_factor=0.1, epsilon=1e-6, norm_coefficient=0.01)),
    ("Adam", 2, dict(alpha=0.85, beta=0.95, epsilon=1e-6, norm_coefficient=0.02, norm_coefficient_post=0.01)),
    ("Momentum", 1, dict(alpha=0.9, beta=0.5, mode="standard", norm_coefficient=0.01)),
    ("Momentum", 1, dict(alpha=0.9, beta=0.5, mode="nesterov", norm_coefficient=0.0)),
])
@pytest.mark.parametrize("step", [0, 3])
def test_training_optimizers_step_as_onnx_reference(op, state, attrs, step):
    """ai.onnx.preview.training's Adagrad, Adam and Momentum on two tensors, R and T given at
    run time (T = 0 takes each formula's first-step case), against onnx's reference;
    compiled, outputs poisoned."""
    rng = np.random.default_rng(53)
    shapes = [(3, 4), (5,)]
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    gs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    states = [rng.uniform(0.1, 1, s).astype(np.float32) for _ in range(state) for s in shapes]
    tensors = {f"t{i}": v for i, v in enumerate([*xs, *gs, *states])}
    feeds = {"R": np.array(0.1, np.float32), "T": np.array(step, np.int64), **tensors}
    outs = [f"o{i}" for i in range(len(shapes) * (1 + state))]
    node = onnx.helper.make_node(op, list(feeds), outs, domain="ai.onnx.preview.training", **attrs)
    info = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph([node], "step", [info(n, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                                                    for n, v in feeds.items()],
                                   [info(o, TensorProto.FLOAT, shapes[i % len(shapes)]) for i, o in enumerate(outs)])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("ai.onnx.preview.training", 1)])
    f = mlfuse.compile(import_onnx(model))
    got = [np.full(s.shape, np.nan, s.dtype) for s in f.outputs]
    f(**feeds, out=got)
    for g, w in zip(got, ReferenceEvaluator(model).run(None, feeds), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


def test_ml_binarizer_and_array_feature_extractor_match_onnxruntime():
    """ai.onnx.ml's Binarizer (the threshold itself gives 0; onnxruntime refuses NaN, which
    mlfuse takes to 0 as onnx's reference does) and ArrayFeatureExtractor (run-time indices
    on the last axis, repeated; a 1-D input gives one row)."""
    rng = np.random.default_rng(59)
    x = rng.standard_normal((3, 6)).astype(np.float32)
    x[0, :2] = [-0.0, 0.25]
    v = rng.standard_normal(7).astype(np.float32)
    info = onnx.helper.make_tensor_value_info
    nodes = [onnx.helper.make_node("Binarizer", ["x"], ["b"], domain="ai.onnx.ml", threshold=0.25),
             onnx.helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["a"], domain="ai.onnx.ml"),
             onnx.helper.make_node("ArrayFeatureExtractor", ["v", "i"], ["row"], domain="ai.onnx.ml")]
    graph = onnx.helper.make_graph(nodes, "ml", [info("x", TensorProto.FLOAT, [3, 6]), info("v", TensorProto.FLOAT, [7]),
                                                 info("i", TensorProto.INT64, [1, 4])],
                                   [info("b", TensorProto.FLOAT, [3, 6]), info("a", TensorProto.FLOAT, [3, 4]),
                                    info("row", TensorProto.FLOAT, [1, 4])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17), onnx.helper.make_opsetid("ai.onnx.ml", 3)])
    check_against_onnxruntime(model, {"x": x, "v": v, "i": np.array([[5, 0, 5, 2]], np.int64)})


def random_tree_ensemble(rng: np.random.Generator, trees: int, depth: int, features: int, targets: int) -> dict:
    """TreeEnsemble attributes of full binary trees of `depth` levels of random tests (every
    mode, MEMBER with two members, NaN tracking true on some), leaves with random weights."""
    nodes: dict[str, list] = {k: [] for k in ("featureids", "modes", "splits", "truenodeids", "falsenodeids",
                                              "trueleafs", "falseleafs", "missing")}
    leaf_weights, leaf_targets, members, roots = [], [], [], []
    for _ in range(trees):
        roots.append(len(nodes["modes"]))
        count = 2 ** depth - 1  # internal nodes of this tree, numbered breadth first
        base = len(nodes["modes"])
        for i in range(count):
            mode = int(rng.integers(0, 7))
            nodes["featureids"].append(int(rng.integers(0, features)))
            nodes["modes"].append(mode)
            nodes["splits"].append(float(np.round(rng.standard_normal(), 1)) if mode != 6 else np.nan)
            if mode == 6:
                members += [float(np.round(rng.standard_normal(), 1)), float(np.round(rng.standard_normal(), 1)), np.nan]
            nodes["missing"].append(int(rng.integers(0, 2)))
            for side in ("true", "false"):
                child = 2 * i + (1 if side == "true" else 2)
                if child < count:
                    nodes[f"{side}nodeids"].append(base + child)
                    nodes[f"{side}leafs"].append(0)
                else:
                    nodes[f"{side}nodeids"].append(len(leaf_weights))
                    nodes[f"{side}leafs"].append(1)
                    leaf_weights.append(float(rng.standard_normal()))
                    leaf_targets.append(int(rng.integers(0, targets)))
    t = onnx.numpy_helper.from_array
    return dict(nodes_featureids=nodes["featureids"], nodes_modes=t(np.array(nodes["modes"], np.uint8)),
                nodes_splits=t(np.array(nodes["splits"], np.float32)), nodes_truenodeids=nodes["truenodeids"],
                nodes_falsenodeids=nodes["falsenodeids"], nodes_trueleafs=nodes["trueleafs"],
                nodes_falseleafs=nodes["falseleafs"], nodes_missing_value_tracks_true=nodes["missing"],
                leaf_weights=t(np.array(leaf_weights, np.float32)), leaf_targetids=leaf_targets, tree_roots=roots,
                membership_values=t(np.array(members, np.float32)), n_targets=targets)


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
def test_tree_ensemble_matches_onnx_reference(aggregate):
    """ai.onnx.ml's TreeEnsemble: 4 random depth-3 trees over 5 features and 3 targets, every
    comparison mode, set membership, NaN features tracked true or false, each aggregate
    function; X holds the split values themselves (ties) and NaNs. Compiled, poisoned,
    against onnx's reference evaluator."""
    rng = np.random.default_rng(61)
    attrs = random_tree_ensemble(rng, trees=4, depth=3, features=5, targets=3)
    x = np.round(rng.standard_normal((40, 5)), 1).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    node = onnx.helper.make_node("TreeEnsemble", ["X"], ["Y"], domain="ai.onnx.ml", aggregate_function=aggregate, **attrs)
    info = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph([node], "trees", [info("X", TensorProto.FLOAT, [40, 5])], [info("Y", TensorProto.FLOAT, [40, 3])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21), onnx.helper.make_opsetid("ai.onnx.ml", 5)])
    f = mlfuse.compile(import_onnx(model))
    got = np.full((40, 3), np.nan, np.float32)
    f(x, out=got)
    want = ReferenceEvaluator(model).run(None, {"X": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
