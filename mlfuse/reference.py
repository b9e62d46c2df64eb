"""A numpy interpreter of the graph and fusion dialects: the oracle of every numerical test.

Each op is evaluated with plain numpy in the tensor's own dtype (bf16 is held as
f32), so the reference says what the IR means, not how fast it can be computed.

It is built on xDSL's interpreter framework: `GraphFunctions` holds one
implementation per graph op, `FusionFunctions` runs a `fusion.group` by
interpreting its body inline, and xDSL's own `FuncFunctions` runs `func.func`
and `func.return`. Constant folding (graph_canonicalize) evaluates single ops
through `evaluate`, so folding means exactly what the reference says an op means.
"""

from __future__ import annotations

import functools
import math
import sys
import types
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import special
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    OpImplResult,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.ir import Operation

from mlfuse.diagnostics import Diagnostic
from mlfuse.dialects import fusion, graph
from mlfuse.ir import find_function  # noqa: F401 (re-exported: where callers of the reference look for it)


class ReferenceError(Diagnostic):
    """The module cannot be interpreted (unknown op, wrong inputs)."""


def _result_dtype(op: Operation, index: int = 0) -> np.dtype:
    t = op.results[index].type
    assert isinstance(t, TensorType)
    return graph.numpy_dtype(t.get_element_type())


# --- numpy helpers (also used by the code generators' tests and the stencil lowering) -----

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


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


def remainder(a: np.ndarray, b: np.ndarray, fmod: bool) -> np.ndarray:
    """numpy's mod or fmod; integer remainders by 0 (and INT_MIN % -1) are 0."""
    mod = np.fmod if fmod else np.mod
    with np.errstate(all="ignore"):
        if a.dtype.kind == "f":
            return mod(a, b).astype(a.dtype, copy=False)
        safe = np.where(b == 0, b.dtype.type(1), b)
        if a.dtype.kind == "i":  # INT_MIN % -1 overflows inside numpy; % 1 gives the same 0
            safe = np.where(safe == -1, b.dtype.type(1), safe)
        return np.where(b == 0, a.dtype.type(0), mod(a, safe)).astype(a.dtype, copy=False)


def identity(kind: str, dtype: np.dtype) -> float | int:
    """The value max/min reductions start from: -inf/inf, or the integer type's bounds."""
    if dtype.kind == "f":
        return -np.inf if kind == "max" else np.inf
    info = np.iinfo(dtype)
    return info.min if kind == "max" else info.max


def lowest_value(dtype: np.dtype) -> float | int:
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def gather_positions(indices: np.ndarray, n: int) -> np.ndarray:
    """Indices into an axis of n elements: a negative one wraps once, then every one is
    clamped to [0, n - 1] (mlfuse's answer where numpy raises)."""
    i = indices.astype(np.int64)
    return np.clip(np.where(i < 0, i + n, i), 0, max(n - 1, 0))


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


# --- shapes of one op's evaluation, shared by several ops ------------------------------------


def _elementwise(fn: Any, args: PythonValues) -> PythonValues:
    """fn(*args) in the first operand's dtype, numpy's warnings (overflow, 0/0) silenced."""
    with np.errstate(all="ignore"):
        return (np.asarray(fn(*args)).astype(args[0].dtype, copy=False),)


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.divide(a, b) if a.dtype.kind == "f" else int_divide(a, b)


REDUCERS = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean, "prod": np.prod}


def _reduce(op: graph.ReduceOp, x: np.ndarray) -> PythonValues:
    # over no elements, max and min give their identity (ONNX's -inf / lowest value)
    extra = {"initial": identity(op.KIND, x.dtype)} if op.KIND in ("max", "min") and x.size == 0 else {}
    r = REDUCERS[op.KIND](x, axis=op.reduce_axes, keepdims=op.keeps_dims, **extra)
    return (np.asarray(r).astype(x.dtype, copy=False).reshape(graph.shape_of(op.result)),)


def _matmul(a: np.ndarray, b: np.ndarray) -> PythonValues:
    return (np.matmul(a, b).astype(a.dtype, copy=False),)


def _cast(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype == np.bool_:
        return x != 0
    with np.errstate(all="ignore"):
        if dtype.kind in "iu" and x.dtype.kind == "f":
            x = np.trunc(x)
        return x.astype(dtype)


def _conv2d(op: graph.Conv2dOp, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    g = op.group_count
    patches = windows(x, op.kernel_size, op.stride_values, op.pad_values, op.dilation_values, 0)
    n, c, oh, ow, kh, kw = patches.shape
    o = w.shape[0]
    grouped = patches.reshape(n, g, c // g, oh, ow, kh, kw)
    weights = w.reshape(g, o // g, c // g, kh, kw)
    y = np.einsum("ngchwij,gocij->ngohw", grouped, weights, optimize=True)
    return np.ascontiguousarray(y.reshape(n, o, oh, ow)).astype(x.dtype, copy=False)


def _avg_pool2d(op: graph.AvgPool2dOp, x: np.ndarray) -> np.ndarray:
    params = (op.kernel_size, op.stride_values, op.pad_values, op.dilation_values)
    total = windows(x, *params, 0).sum(axis=(4, 5), dtype=x.dtype)
    if op.counts_padding:
        count = math.prod(op.kernel_size)
        return (total / x.dtype.type(count)).astype(x.dtype, copy=False)
    ones = np.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
    count = windows(ones, *params, 0).sum(axis=(4, 5), dtype=x.dtype)
    return (total / count).astype(x.dtype, copy=False)


def _gather_elements(op: graph.GatherElementsOp, data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    axis = op.gather_axis
    if indices.size == 0:
        return np.zeros(indices.shape, data.dtype)
    window = data[tuple(slice(0, m) if d != axis else slice(None) for d, m in enumerate(indices.shape))]
    return np.take_along_axis(window, gather_positions(indices, data.shape[axis]), axis=axis)


COMPARE = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


# --- one implementation per op ----------------------------------------------------------------

Values = PythonValues  # a tuple with one Python value (here a numpy array) per operand or result


@register_impls
class GraphFunctions(InterpreterFunctions):
    """numpy semantics of every graph op: `args` are the operands' arrays, the result is a tuple
    of the results' arrays."""

    # elementwise
    @impl(graph.NegOp)
    def run_neg(self, interpreter: Interpreter, op: graph.NegOp, args: Values) -> Values:
        return _elementwise(np.negative, args)

    @impl(graph.AbsOp)
    def run_abs(self, interpreter: Interpreter, op: graph.AbsOp, args: Values) -> Values:
        return _elementwise(np.abs, args)

    @impl(graph.ExpOp)
    def run_exp(self, interpreter: Interpreter, op: graph.ExpOp, args: Values) -> Values:
        return _elementwise(np.exp, args)

    @impl(graph.LogOp)
    def run_log(self, interpreter: Interpreter, op: graph.LogOp, args: Values) -> Values:
        return _elementwise(np.log, args)

    @impl(graph.SqrtOp)
    def run_sqrt(self, interpreter: Interpreter, op: graph.SqrtOp, args: Values) -> Values:
        return _elementwise(np.sqrt, args)

    @impl(graph.RsqrtOp)
    def run_rsqrt(self, interpreter: Interpreter, op: graph.RsqrtOp, args: Values) -> Values:
        return _elementwise(lambda x: 1 / np.sqrt(x), args)

    @impl(graph.ReciprocalOp)
    def run_reciprocal(self, interpreter: Interpreter, op: graph.ReciprocalOp, args: Values) -> Values:
        return _elementwise(lambda x: 1 / x, args)

    @impl(graph.TanhOp)
    def run_tanh(self, interpreter: Interpreter, op: graph.TanhOp, args: Values) -> Values:
        return _elementwise(np.tanh, args)

    @impl(graph.ErfOp)
    def run_erf(self, interpreter: Interpreter, op: graph.ErfOp, args: Values) -> Values:
        return _elementwise(special.erf, args)

    @impl(graph.SinOp)
    def run_sin(self, interpreter: Interpreter, op: graph.SinOp, args: Values) -> Values:
        return _elementwise(np.sin, args)

    @impl(graph.CosOp)
    def run_cos(self, interpreter: Interpreter, op: graph.CosOp, args: Values) -> Values:
        return _elementwise(np.cos, args)

    @impl(graph.SigmoidOp)
    def run_sigmoid(self, interpreter: Interpreter, op: graph.SigmoidOp, args: Values) -> Values:
        return _elementwise(special.expit, args)

    @impl(graph.ReluOp)
    def run_relu(self, interpreter: Interpreter, op: graph.ReluOp, args: Values) -> Values:
        return _elementwise(lambda x: np.maximum(x, np.zeros((), x.dtype)), args)

    @impl(graph.FloorOp)
    def run_floor(self, interpreter: Interpreter, op: graph.FloorOp, args: Values) -> Values:
        return _elementwise(np.floor, args)

    @impl(graph.CeilOp)
    def run_ceil(self, interpreter: Interpreter, op: graph.CeilOp, args: Values) -> Values:
        return _elementwise(np.ceil, args)

    @impl(graph.RoundOp)
    def run_round(self, interpreter: Interpreter, op: graph.RoundOp, args: Values) -> Values:
        return _elementwise(np.round, args)

    @impl(graph.GeluOp)
    def run_gelu(self, interpreter: Interpreter, op: graph.GeluOp, args: Values) -> Values:
        return _elementwise(lambda x: gelu(x, op.form), args)

    @impl(graph.AddOp)
    def run_add(self, interpreter: Interpreter, op: graph.AddOp, args: Values) -> Values:
        return _elementwise(np.add, args)

    @impl(graph.SubOp)
    def run_sub(self, interpreter: Interpreter, op: graph.SubOp, args: Values) -> Values:
        return _elementwise(np.subtract, args)

    @impl(graph.MulOp)
    def run_mul(self, interpreter: Interpreter, op: graph.MulOp, args: Values) -> Values:
        return _elementwise(np.multiply, args)

    @impl(graph.DivOp)
    def run_div(self, interpreter: Interpreter, op: graph.DivOp, args: Values) -> Values:
        return _elementwise(_divide, args)

    @impl(graph.MaxOp)
    def run_max(self, interpreter: Interpreter, op: graph.MaxOp, args: Values) -> Values:
        return _elementwise(np.maximum, args)

    @impl(graph.MinOp)
    def run_min(self, interpreter: Interpreter, op: graph.MinOp, args: Values) -> Values:
        return _elementwise(np.minimum, args)

    @impl(graph.PowOp)
    def run_pow(self, interpreter: Interpreter, op: graph.PowOp, args: Values) -> Values:
        return _elementwise(np.power, args)

    @impl(graph.BitAndOp)
    def run_bitand(self, interpreter: Interpreter, op: graph.BitAndOp, args: Values) -> Values:
        return _elementwise(np.bitwise_and, args)

    @impl(graph.BitOrOp)
    def run_bitor(self, interpreter: Interpreter, op: graph.BitOrOp, args: Values) -> Values:
        return _elementwise(np.bitwise_or, args)

    @impl(graph.BitXorOp)
    def run_bitxor(self, interpreter: Interpreter, op: graph.BitXorOp, args: Values) -> Values:
        return _elementwise(np.bitwise_xor, args)

    @impl(graph.ShiftLeftOp)
    def run_shl(self, interpreter: Interpreter, op: graph.ShiftLeftOp, args: Values) -> Values:
        return _elementwise(np.left_shift, args)

    @impl(graph.ShiftRightOp)
    def run_shr(self, interpreter: Interpreter, op: graph.ShiftRightOp, args: Values) -> Values:
        return _elementwise(np.right_shift, args)

    @impl(graph.BitNotOp)
    def run_bitnot(self, interpreter: Interpreter, op: graph.BitNotOp, args: Values) -> Values:
        return _elementwise(np.invert, args)

    @impl(graph.RemOp)
    def run_rem(self, interpreter: Interpreter, op: graph.RemOp, args: Values) -> Values:
        return (remainder(*args, fmod=op.is_fmod),)

    @impl(graph.CompareOp)
    def run_compare(self, interpreter: Interpreter, op: graph.CompareOp, args: Values) -> Values:
        return (COMPARE[op.predicate.data](*args),)

    @impl(graph.SelectOp)
    def run_select(self, interpreter: Interpreter, op: graph.SelectOp, args: Values) -> Values:
        return (np.where(*args),)

    @impl(graph.BitcastOp)
    def run_bitcast(self, interpreter: Interpreter, op: graph.BitcastOp, args: Values) -> Values:
        # in the op's own source type first: a widened (float64) reference evaluation
        # must not reinterpret the wider bits
        source = np.ascontiguousarray(args[0], dtype=graph.numpy_dtype(graph.element_type_of(op.input)))
        return (source.view(graph.numpy_dtype(graph.element_type_of(op.result))),)

    @impl(graph.CastOp)
    def run_cast(self, interpreter: Interpreter, op: graph.CastOp, args: Values) -> Values:
        return (_cast(args[0], _result_dtype(op)),)

    # broadcast, reductions
    @impl(graph.BroadcastOp)
    def run_broadcast(self, interpreter: Interpreter, op: graph.BroadcastOp, args: Values) -> Values:
        out_shape = graph.shape_of(op.result)
        expanded = [1] * len(out_shape)
        for src, dst in enumerate(op.dim_map):
            expanded[dst] = args[0].shape[src]
        return (np.broadcast_to(args[0].reshape(expanded), out_shape).copy(),)

    @impl(graph.ReduceSumOp)
    def run_reduce_sum(self, interpreter: Interpreter, op: graph.ReduceSumOp, args: Values) -> Values:
        return _reduce(op, args[0])

    @impl(graph.ReduceMaxOp)
    def run_reduce_max(self, interpreter: Interpreter, op: graph.ReduceMaxOp, args: Values) -> Values:
        return _reduce(op, args[0])

    @impl(graph.ReduceMinOp)
    def run_reduce_min(self, interpreter: Interpreter, op: graph.ReduceMinOp, args: Values) -> Values:
        return _reduce(op, args[0])

    @impl(graph.ReduceMeanOp)
    def run_reduce_mean(self, interpreter: Interpreter, op: graph.ReduceMeanOp, args: Values) -> Values:
        return _reduce(op, args[0])

    @impl(graph.ReduceProdOp)
    def run_reduce_prod(self, interpreter: Interpreter, op: graph.ReduceProdOp, args: Values) -> Values:
        return _reduce(op, args[0])

    # injective
    @impl(graph.TransposeOp)
    def run_transpose(self, interpreter: Interpreter, op: graph.TransposeOp, args: Values) -> Values:
        return (np.ascontiguousarray(np.transpose(args[0], op.permutation)),)

    @impl(graph.ReshapeOp)
    def run_reshape(self, interpreter: Interpreter, op: graph.ReshapeOp, args: Values) -> Values:
        return (args[0].reshape(graph.shape_of(op.result)),)

    @impl(graph.SliceOp)
    def run_slice(self, interpreter: Interpreter, op: graph.SliceOp, args: Values) -> Values:
        index = tuple(slice(a, b, s) for a, b, s in zip(*op.bounds))
        return (args[0][index].copy(),)

    @impl(graph.PadOp)
    def run_pad(self, interpreter: Interpreter, op: graph.PadOp, args: Values) -> Values:
        low, high = op.padding
        return (np.pad(args[0], list(zip(low, high)), constant_values=op.pad_value),)

    @impl(graph.ConcatOp)
    def run_concat(self, interpreter: Interpreter, op: graph.ConcatOp, args: Values) -> Values:
        return (np.concatenate(args, axis=op.concat_axis),)

    @impl(graph.GatherOp)
    def run_gather(self, interpreter: Interpreter, op: graph.GatherOp, args: Values) -> Values:
        data, indices = args
        axis = op.gather_axis
        if data.shape[axis] == 0:  # nothing to read: the result is empty too (the verifier says so)
            return (np.zeros(graph.shape_of(op.result), data.dtype),)
        return (np.take(data, gather_positions(indices, data.shape[axis]), axis=axis),)

    @impl(graph.GatherElementsOp)
    def run_gather_elements(self, interpreter: Interpreter, op: graph.GatherElementsOp, args: Values) -> Values:
        return (_gather_elements(op, *args),)

    @impl(graph.MatmulOp)
    def run_matmul(self, interpreter: Interpreter, op: graph.MatmulOp, args: Values) -> Values:
        return _matmul(*args)

    @impl(graph.BatchMatmulOp)
    def run_batch_matmul(self, interpreter: Interpreter, op: graph.BatchMatmulOp, args: Values) -> Values:
        return _matmul(*args)

    # stencils
    @impl(graph.Conv2dOp)
    def run_conv2d(self, interpreter: Interpreter, op: graph.Conv2dOp, args: Values) -> Values:
        return (_conv2d(op, *args),)

    @impl(graph.MaxPool2dOp)
    def run_max_pool2d(self, interpreter: Interpreter, op: graph.MaxPool2dOp, args: Values) -> Values:
        x = args[0]
        params = (op.kernel_size, op.stride_values, op.pad_values, op.dilation_values)
        return (windows(x, *params, lowest_value(x.dtype)).max(axis=(4, 5)),)

    @impl(graph.AvgPool2dOp)
    def run_avg_pool2d(self, interpreter: Interpreter, op: graph.AvgPool2dOp, args: Values) -> Values:
        return (_avg_pool2d(op, args[0]),)

    @impl(graph.ConstantOp)
    def run_constant(self, interpreter: Interpreter, op: graph.ConstantOp, args: Values) -> Values:
        return (op.to_numpy(),)


@register_impls
class FusionFunctions(InterpreterFunctions):
    """A fusion.group means its body: the body is interpreted inline on the group's operands."""

    @impl(fusion.GroupOp)
    def run_group(self, interpreter: Interpreter, op: fusion.GroupOp, args: Values) -> Values:
        return interpreter.run_ssacfg_region(op.body, args, "fusion.group")

    @impl_terminator(fusion.YieldOp)
    def run_yield(self, interpreter: Interpreter, op: fusion.YieldOp, args: Values) -> tuple[TerminatorValue, Values]:
        return ReturnedValues(args), ()


class ReferenceInterpreter(Interpreter):
    """xDSL's Interpreter, with an op run as its implementation says and nothing more.

    xDSL's default adds the whole module, printed, to the notes of any error an
    implementation raises: megabytes for a model with weights, and after a
    MemoryError a second allocation that mlfuse-run's "out of memory" report
    would not survive. An op without an implementation is a ReferenceError.
    """

    def implements(self, op_type: type[Operation]) -> bool:
        return op_type in self._impls._impl_dict

    def _run_op(self, op: Operation, inputs: PythonValues) -> OpImplResult:
        found = self._impls._impl_dict.get(type(op))
        if found is None:
            raise ReferenceError(f"the reference interpreter has no semantics for '{op.name}'")
        functions, run = found
        return run(functions, self, op, inputs)


def interpreter(module: ModuleOp) -> ReferenceInterpreter:
    """An interpreter of func, graph and fusion ops, with `module` as its symbol table."""
    # here, not at the top: xdsl.interpreters' package imports every interpreter xDSL
    # has (0.3 s), which folding a constant (`evaluate`, one op) does not need
    from xdsl.interpreters.func import FuncFunctions

    interp = ReferenceInterpreter(module)
    interp.register_implementations(FuncFunctions())
    interp.register_implementations(GraphFunctions())
    interp.register_implementations(FusionFunctions())
    return interp


@functools.cache
def _graph_ops() -> ReferenceInterpreter:
    """An interpreter of graph ops alone, for single ops: it holds no state between them
    (no op it runs has a region), so one instance serves every caller and thread."""
    interp = ReferenceInterpreter(ModuleOp([]))
    interp.register_implementations(GraphFunctions())
    return interp


def has_semantics(op: Operation) -> bool:
    """Whether `evaluate` can compute `op`: every graph op (not fusion.group, not func)."""
    return _graph_ops().implements(type(op))


def evaluate(op: Operation, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The results of the graph op `op` on the operand values `args` (constant folding)."""
    return list(_graph_ops().run_op(op, tuple(args)))


# --- functions ------------------------------------------------------------------------------


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
        if a.dtype.type.__module__ == "ml_dtypes" and dtype.kind == "u" and a.dtype.itemsize == dtype.itemsize:
            a = np.ascontiguousarray(a).view(dtype)  # a narrow ONNX type's array: its storage (onnx_narrow)
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
        return self.run(check_inputs(self.fn, arrays))

    def widened(self, *arrays: Any) -> tuple[np.ndarray, ...]:
        """The graph evaluated with its float inputs (and so its float values) in float64.

        The oracle for checking a float32 program: the f32 reference rounds its own
        sums differently from the compiled code, and neither is the exact answer.
        Ops keep their operands' dtype (constants promote to f64), so everything
        downstream of a float input is f64, except past explicit casts."""
        checked = check_inputs(self.fn, arrays)
        return self.run([a.astype(np.float64) if a.dtype.kind == "f" else a for a in checked])

    def run(self, inputs: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        """The function on `inputs`, unchecked (a fresh interpreter per call: calls from
        several threads share nothing)."""
        module = self.fn.parent_op()
        interp = interpreter(module if isinstance(module, ModuleOp) else ModuleOp([]))
        return tuple(interp.call_op(self.fn, tuple(inputs)))

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
    try:
        fn = find_function(module, entry)
    except Diagnostic as d:  # the reference's own error type, as for its other bad calls
        raise ReferenceError(d.message) from None
    return ReferenceFunction(fn)


class _CallableModule(types.ModuleType):
    """`mlfuse.reference(...)` is this module once imported: make calling it work."""

    def __call__(self, module: ModuleOp | str, entry: str = "main") -> ReferenceFunction:
        return reference(module, entry)


sys.modules[__name__].__class__ = _CallableModule
