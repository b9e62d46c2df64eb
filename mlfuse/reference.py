"""A numpy interpreter of the graph and fusion dialects: the oracle of every numerical test.

Each op is evaluated with plain numpy in the tensor's own dtype (bf16 is held as
f32), so the reference says what the IR means, not how fast it can be computed.
"""

from __future__ import annotations

import math
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import special
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block, Operation, SSAValue

from mlfuse.diagnostics import Diagnostic
from mlfuse.dialects import fusion, graph

Evaluator = Callable[[Operation, list[np.ndarray]], list[np.ndarray]]
EVALUATORS: dict[type[Operation], Evaluator] = {}


class ReferenceError(Diagnostic):
    """The module cannot be interpreted (unknown op, wrong inputs)."""


def evaluates(*op_types: type[Operation]):
    def register(fn: Evaluator) -> Evaluator:
        for t in op_types:
            EVALUATORS[t] = fn
        return fn

    return register


def _result_dtype(op: Operation, index: int = 0) -> np.dtype:
    t = op.results[index].type
    assert isinstance(t, TensorType)
    return graph.numpy_dtype(t.get_element_type())


# --- elementwise --------------------------------------------------------------

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

UNARY: dict[type[Operation], Callable[[np.ndarray], np.ndarray]] = {
    graph.NegOp: np.negative,
    graph.AbsOp: np.abs,
    graph.ExpOp: np.exp,
    graph.LogOp: np.log,
    graph.SqrtOp: np.sqrt,
    graph.RsqrtOp: lambda x: 1 / np.sqrt(x),
    graph.ReciprocalOp: lambda x: 1 / x,
    graph.TanhOp: np.tanh,
    graph.ErfOp: special.erf,
    graph.SigmoidOp: special.expit,
    graph.ReluOp: lambda x: np.maximum(x, np.zeros((), x.dtype)),
}


def gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    half = x.dtype.type(0.5)
    if approximate == "tanh":
        inner = x.dtype.type(SQRT_2_OVER_PI) * (x + x.dtype.type(0.044715) * x * x * x)
        return half * x * (1 + np.tanh(inner))
    return half * x * (1 + special.erf(x / x.dtype.type(math.sqrt(2.0))))


def int_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C-style integer division (truncates towards zero), with numpy's answers where C traps:
    x / 0 is 0 and INT_MIN / -1 wraps to INT_MIN.

    a - fmod(a, b) is an exact multiple of b between 0 and a (no overflow), so numpy's
    floor division of it is the truncated quotient; |a| // |b| would overflow at INT_MIN.
    """
    with np.errstate(all="ignore"):
        return np.floor_divide(a - np.fmod(a, b), b).astype(a.dtype, copy=False)


BINARY: dict[type[Operation], Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    graph.AddOp: np.add,
    graph.SubOp: np.subtract,
    graph.MulOp: np.multiply,
    graph.DivOp: lambda a, b: np.divide(a, b) if a.dtype.kind == "f" else int_divide(a, b),
    graph.MaxOp: np.maximum,
    graph.MinOp: np.minimum,
    graph.PowOp: np.power,
}


@evaluates(graph.RemOp)
def _rem(op: graph.RemOp, args: list[np.ndarray]) -> list[np.ndarray]:
    """numpy's mod or fmod; integer remainders by 0 (and INT_MIN % -1) are 0."""
    a, b = args
    with np.errstate(all="ignore"):
        if a.dtype.kind == "f":
            return [(np.fmod if op.is_fmod else np.mod)(a, b).astype(a.dtype, copy=False)]
        safe = np.where(b == 0, b.dtype.type(1), b)
        if a.dtype.kind == "i":  # INT_MIN % -1 overflows inside numpy; % 1 gives the same 0
            safe = np.where(safe == -1, b.dtype.type(1), safe)
        r = (np.fmod if op.is_fmod else np.mod)(a, safe)
        return [np.where(b == 0, a.dtype.type(0), r).astype(a.dtype, copy=False)]

COMPARE = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


@evaluates(*UNARY)
def _unary(op: Operation, args: list[np.ndarray]) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return [np.asarray(UNARY[type(op)](args[0])).astype(args[0].dtype, copy=False)]


@evaluates(graph.GeluOp)
def _gelu(op: graph.GeluOp, args: list[np.ndarray]) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return [gelu(args[0], op.form).astype(args[0].dtype, copy=False)]


@evaluates(*BINARY)
def _binary(op: Operation, args: list[np.ndarray]) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return [np.asarray(BINARY[type(op)](*args)).astype(args[0].dtype, copy=False)]


@evaluates(graph.CompareOp)
def _compare(op: graph.CompareOp, args: list[np.ndarray]) -> list[np.ndarray]:
    return [COMPARE[op.predicate.data](*args)]


@evaluates(graph.SelectOp)
def _select(op: graph.SelectOp, args: list[np.ndarray]) -> list[np.ndarray]:
    return [np.where(*args)]


@evaluates(graph.CastOp)
def _cast(op: graph.CastOp, args: list[np.ndarray]) -> list[np.ndarray]:
    dtype = _result_dtype(op)
    x = args[0]
    if dtype == np.bool_:
        return [x != 0]
    with np.errstate(all="ignore"):
        if dtype.kind in "iu" and x.dtype.kind == "f":
            x = np.trunc(x)
        return [x.astype(dtype)]


# --- broadcast, reductions ------------------------------------------------------


@evaluates(graph.BroadcastOp)
def _broadcast(op: graph.BroadcastOp, args: list[np.ndarray]) -> list[np.ndarray]:
    out_shape = graph.shape_of(op.result)
    expanded = [1] * len(out_shape)
    for src, dst in enumerate(op.dim_map):
        expanded[dst] = args[0].shape[src]
    return [np.broadcast_to(args[0].reshape(expanded), out_shape).copy()]


REDUCERS = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean, "prod": np.prod}


@evaluates(graph.ReduceSumOp, graph.ReduceMaxOp, graph.ReduceMinOp, graph.ReduceMeanOp, graph.ReduceProdOp)
def _reduce(op: graph.ReduceOp, args: list[np.ndarray]) -> list[np.ndarray]:
    x = args[0]
    # over no elements, max and min give their identity (ONNX's -inf / lowest value)
    extra = {"initial": identity(op.KIND, x.dtype)} if op.KIND in ("max", "min") and x.size == 0 else {}
    r = REDUCERS[op.KIND](x, axis=op.reduce_axes, keepdims=op.keeps_dims, **extra)
    return [np.asarray(r).astype(x.dtype, copy=False).reshape(graph.shape_of(op.result))]


def identity(kind: str, dtype: np.dtype) -> float | int:
    """The value max/min reductions start from: -inf/inf, or the integer type's bounds."""
    if dtype.kind == "f":
        return -np.inf if kind == "max" else np.inf
    info = np.iinfo(dtype)
    return info.min if kind == "max" else info.max


# --- injective ------------------------------------------------------------------


@evaluates(graph.TransposeOp)
def _transpose(op: graph.TransposeOp, args: list[np.ndarray]) -> list[np.ndarray]:
    return [np.ascontiguousarray(np.transpose(args[0], op.permutation))]


@evaluates(graph.ReshapeOp)
def _reshape(op: graph.ReshapeOp, args: list[np.ndarray]) -> list[np.ndarray]:
    return [args[0].reshape(graph.shape_of(op.result))]


@evaluates(graph.SliceOp)
def _slice(op: graph.SliceOp, args: list[np.ndarray]) -> list[np.ndarray]:
    index = tuple(slice(a, b, s) for a, b, s in zip(*op.bounds))
    return [args[0][index].copy()]


@evaluates(graph.PadOp)
def _pad(op: graph.PadOp, args: list[np.ndarray]) -> list[np.ndarray]:
    low, high = op.padding
    return [np.pad(args[0], list(zip(low, high)), constant_values=op.pad_value)]


@evaluates(graph.ConcatOp)
def _concat(op: graph.ConcatOp, args: list[np.ndarray]) -> list[np.ndarray]:
    return [np.concatenate(args, axis=op.concat_axis)]


def gather_positions(indices: np.ndarray, n: int) -> np.ndarray:
    """Indices into an axis of n elements: a negative one wraps once, then every one is
    clamped to [0, n - 1] (mlfuse's answer where numpy raises)."""
    i = indices.astype(np.int64)
    return np.clip(np.where(i < 0, i + n, i), 0, max(n - 1, 0))


@evaluates(graph.GatherOp)
def _gather(op: graph.GatherOp, args: list[np.ndarray]) -> list[np.ndarray]:
    data, indices = args
    axis = op.gather_axis
    if data.shape[axis] == 0:  # nothing to read: the result is empty too (the verifier says so)
        return [np.zeros(graph.shape_of(op.result), data.dtype)]
    return [np.take(data, gather_positions(indices, data.shape[axis]), axis=axis)]


@evaluates(graph.GatherElementsOp)
def _gather_elements(op: graph.GatherElementsOp, args: list[np.ndarray]) -> list[np.ndarray]:
    data, indices = args
    axis = op.gather_axis
    if indices.size == 0:
        return [np.zeros(indices.shape, data.dtype)]
    window = data[tuple(slice(0, m) if d != axis else slice(None) for d, m in enumerate(indices.shape))]
    return [np.take_along_axis(window, gather_positions(indices, data.shape[axis]), axis=axis)]


@evaluates(graph.MatmulOp, graph.BatchMatmulOp)
def _matmul(op: Operation, args: list[np.ndarray]) -> list[np.ndarray]:
    return [np.matmul(*args).astype(args[0].dtype, copy=False)]


# --- stencils -------------------------------------------------------------------------


def windows(
    x: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    pad_value: float | int,
) -> np.ndarray:
    """(N, C, OH, OW, KH, KW) view of the windows of an NCHW array; pads = [top, left, bottom, right]."""
    top, left, bottom, right = pads
    padded = np.pad(x, [(0, 0), (0, 0), (top, bottom), (left, right)], constant_values=pad_value)
    extent = [d * (k - 1) + 1 for d, k in zip(dilations, kernel)]
    view = np.lib.stride_tricks.sliding_window_view(padded, extent, axis=(2, 3))
    (sh, sw), (dh, dw) = strides, dilations
    return view[:, :, ::sh, ::sw, ::dh, ::dw]


@evaluates(graph.Conv2dOp)
def _conv2d(op: graph.Conv2dOp, args: list[np.ndarray]) -> list[np.ndarray]:
    x, w = args
    g = op.group_count
    patches = windows(x, op.kernel_size, op.stride_values, op.pad_values, op.dilation_values, 0)
    n, c, oh, ow, kh, kw = patches.shape
    o = w.shape[0]
    grouped = patches.reshape(n, g, c // g, oh, ow, kh, kw)
    weights = w.reshape(g, o // g, c // g, kh, kw)
    y = np.einsum("ngchwij,gocij->ngohw", grouped, weights, optimize=True)
    return [np.ascontiguousarray(y.reshape(n, o, oh, ow)).astype(x.dtype, copy=False)]


def lowest_value(dtype: np.dtype) -> float | int:
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


@evaluates(graph.MaxPool2dOp)
def _max_pool2d(op: graph.MaxPool2dOp, args: list[np.ndarray]) -> list[np.ndarray]:
    x = args[0]
    view = windows(x, op.kernel_size, op.stride_values, op.pad_values, op.dilation_values, lowest_value(x.dtype))
    return [view.max(axis=(4, 5))]


@evaluates(graph.AvgPool2dOp)
def _avg_pool2d(op: graph.AvgPool2dOp, args: list[np.ndarray]) -> list[np.ndarray]:
    x = args[0]
    params = (op.kernel_size, op.stride_values, op.pad_values, op.dilation_values)
    total = windows(x, *params, 0).sum(axis=(4, 5), dtype=x.dtype)
    if op.counts_padding:
        count = math.prod(op.kernel_size)
        return [(total / x.dtype.type(count)).astype(x.dtype, copy=False)]
    ones = np.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
    count = windows(ones, *params, 0).sum(axis=(4, 5), dtype=x.dtype)
    return [(total / count).astype(x.dtype, copy=False)]


@evaluates(graph.ConstantOp)
def _constant(op: graph.ConstantOp, args: list[np.ndarray]) -> list[np.ndarray]:
    return [op.to_numpy()]


# --- regions ----------------------------------------------------------------------


def run_block(block: Block, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Evaluate a block whose arguments are bound to `inputs`; returns the terminator's operands."""
    env: dict[SSAValue, np.ndarray] = dict(zip(block.args, inputs))
    for op in block.ops:
        args = [env[v] for v in op.operands]
        if isinstance(op, func.ReturnOp | fusion.YieldOp):
            return args
        if isinstance(op, fusion.GroupOp):
            results = run_block(op.block, args)
        elif type(op) in EVALUATORS:
            results = EVALUATORS[type(op)](op, args)
        else:
            raise ReferenceError(f"the reference interpreter has no semantics for '{op.name}'")
        for value, array in zip(op.results, results, strict=True):
            env[value] = array
    raise ReferenceError("block has no terminator")


def find_function(module: ModuleOp, entry: str) -> func.FuncOp:
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == entry:
            return op
    names = [op.sym_name.data for op in module.ops if isinstance(op, func.FuncOp)]
    raise ReferenceError(f"no function '@{entry}' in module (functions: {', '.join(names) or 'none'})")


def check_inputs(fn: func.FuncOp, arrays: Sequence[Any]) -> list[np.ndarray]:
    """Check count, shapes and dtypes of call arguments against the signature."""
    types = fn.function_type.inputs.data
    if len(arrays) != len(types):
        raise ValueError(f"@{fn.sym_name.data} takes {len(types)} arguments, got {len(arrays)}")
    checked = []
    for i, (a, t) in enumerate(zip(arrays, types)):
        if not isinstance(t, TensorType):
            raise ReferenceError(
                f"argument {i} of @{fn.sym_name.data} has type {t}; the reference takes tensors only"
            )
        a = np.asarray(a)
        shape, dtype = tuple(t.get_shape()), graph.numpy_dtype(t.get_element_type())
        if a.shape != shape:
            raise ValueError(
                f"argument {i} of @{fn.sym_name.data} must have shape {shape}, got {a.shape}"
            )
        if a.dtype != dtype:
            raise ValueError(
                f"argument {i} of @{fn.sym_name.data} must have dtype {dtype}, got {a.dtype}"
            )
        checked.append(a)
    return checked


class ReferenceFunction:
    def __init__(self, fn: func.FuncOp):
        self.fn = fn

    def __call__(self, *arrays: Any) -> tuple[np.ndarray, ...]:
        return tuple(run_block(self.fn.body.block, check_inputs(self.fn, arrays)))

    def widened(self, *arrays: Any) -> tuple[np.ndarray, ...]:
        """The graph evaluated with its float inputs (and so its float values) in float64.

        The oracle for checking a float32 program: the f32 reference rounds its own
        sums differently from the compiled code, and neither is the exact answer.
        Ops keep their operands' dtype (constants promote to f64), so everything
        downstream of a float input is f64, except past explicit casts."""
        checked = check_inputs(self.fn, arrays)
        wide = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in checked]
        return tuple(run_block(self.fn.body.block, wide))

    def longest_reduction(self) -> int:
        """The most elements any one output element of the graph sums over (1 if none):
        reductions, GEMMs' shared dimension, convolution and pooling windows. The
        rounding error a correct program may have grows with it (see mlfuse_run.compare)."""
        longest = 1
        for op in self.fn.walk():
            longest = max(longest, reduction_length(op))
        return longest


def reduction_length(op: Operation) -> int:
    """How many elements `op` combines into each element of its result (1 if none)."""
    if isinstance(op, graph.ReduceOp):
        shape = graph.shape_of(op.input)
        return math.prod(shape[a] for a in op.reduce_axes)
    if isinstance(op, graph.MatmulOp | graph.BatchMatmulOp):
        return graph.shape_of(op.operands[0])[-1]
    if isinstance(op, graph.Conv2dOp):
        return graph.shape_of(op.operands[1])[1] * math.prod(op.kernel_size)
    if isinstance(op, graph.Pool2dOp):
        return math.prod(op.kernel_size)
    return 1


def reference(module: ModuleOp | str, entry: str = "main") -> ReferenceFunction:
    """`reference(module_or_text_or_path)(*arrays)` evaluates `@entry` with numpy."""
    if not isinstance(module, ModuleOp):
        from mlfuse.api import parse

        module = parse(module)
    return ReferenceFunction(find_function(module, entry))


class _CallableModule(types.ModuleType):
    """`mlfuse.reference(...)` is this module once imported: make calling it work."""

    def __call__(self, module: ModuleOp | str, entry: str = "main") -> ReferenceFunction:
        return reference(module, entry)


sys.modules[__name__].__class__ = _CallableModule
