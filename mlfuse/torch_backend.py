"""mlfuse as a torch.compile backend.

    model = torch.compile(model, backend="mlfuse")   # registered by the entry point
    with torch.no_grad():                            # or torch.inference_mode()
        y = model(x)

Dynamo hands the backend an FX graph; AOTAutograd decomposes it to core ATen and
calls `compile_fx_graph` on the inference graph. Parameters and buffers are frozen
into constants (`FrozenGraph`: what depends only on weights folds at compile time; an
in-place update of a weight compiles again; `options={"freeze": False}` keeps them as
inputs). The
graph is split into maximal subgraphs whose ops convert to the graph dialect
(`is_convertible` asks the converter table, `CONVERTERS`, one function per aten op
family); each subgraph becomes one `mlfuse.compile`d function, and everything else
(unknown ops, unsupported dtypes, symbolic shapes) stays in the FX graph and runs in
torch eager between the kernels. Tensors cross into compiled code as the addresses of
their memory, and outputs are `torch.empty` tensors that the kernel writes in place
(torch's CPU allocator aligns to 64 bytes, so no staging copy); the static graph fixes
shapes and dtypes, so a call checks nothing else (its cost is dynamo's guards).

Set MLFUSE_LOG=1 to see, on stderr, which ops ran where; `reports()` returns the same
as `GraphReport` objects. torch.compile(..., options={...}) passes options to
mlfuse.compile (planner, fast_math, ...). Graphs with symbolic shapes (dynamo marks a
dim dynamic after it changed once) are traced again per concrete shape at call time.
Inference only: with gradients required the graph runs in eager, and the report says so.
"""

from __future__ import annotations

import collections
import logging
import math
import operator
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.fx as fx
from torch.fx.passes.operator_support import OperatorSupportBase

from mlfuse.dialects import graph
from mlfuse.frontend.builder import GraphBuilder, Tensor

aten = torch.ops.aten
log = logging.getLogger("mlfuse.torch")

# torch dtypes mlfuse computes on, by the builder's names (no bf16 or complex on CPU)
DTYPES: dict[torch.dtype, str] = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "ui8",
    torch.bool: "i1",
}

# Ops that only rename memory: a subgraph made of these alone is not worth a kernel
# (eager runs them as free views, a kernel would copy).
VIEW_OPS = frozenset(
    {
        aten.view, aten._unsafe_view, aten.reshape, aten.permute, aten.expand, aten.t,
        aten.transpose, aten.squeeze, aten.unsqueeze, aten.slice, aten.select, aten.alias,
        aten.clone, aten.detach, aten.lift_fresh_copy, aten.split, aten.split_with_sizes,
        aten.unbind, operator.getitem,
    }
)


class Unsupported(Exception):
    """An FX node the converter cannot express; the message is the reason."""


# ---------------------------------------------------------------------------
# reporting
# ---------------------------------------------------------------------------


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (so pytest's capture sees it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


_HANDLER = _StderrHandler()
_HANDLER.setFormatter(logging.Formatter("[mlfuse] %(message)s"))


def _setup_logging() -> None:
    """MLFUSE_LOG=1 (anything but empty or 0) sends this module's reports to stderr;
    read at every compile, so it can be switched on and off in one process."""
    if os.environ.get("MLFUSE_LOG", "") not in ("", "0"):
        if _HANDLER not in log.handlers:
            log.addHandler(_HANDLER)
        log.setLevel(logging.INFO)
    elif _HANDLER in log.handlers:
        log.removeHandler(_HANDLER)


@dataclass
class KernelReport:
    """One mlfuse subgraph: the aten ops it holds and what compiling it cost."""

    name: str
    ops: collections.Counter = field(default_factory=collections.Counter)
    inputs: int = 0
    outputs: int = 0
    compile_s: float = 0.0
    error: str | None = None  # set when compiling failed and the subgraph ran eagerly


@dataclass
class GraphReport:
    """How one graph that dynamo handed over was split between mlfuse and torch eager."""

    index: int
    ops: int = 0  # aten ops in the graph
    kernels: list[KernelReport] = field(default_factory=list)
    eager: list[tuple[str, str]] = field(default_factory=list)  # (aten op, why not mlfuse)
    fallback: str | None = None  # the whole graph ran in eager, and why
    shapes: str = ""
    symbolic: bool = False  # compiled per concrete shape at call time (later reports)

    @property
    def mlfuse_ops(self) -> int:
        return sum(sum(k.ops.values()) for k in self.kernels if k.error is None)

    def summary(self) -> str:
        """Several lines: the split, each kernel's ops, and each eager op with its reason."""
        if self.fallback:
            return f"graph {self.index}: ran in torch eager ({self.fallback})"
        if self.symbolic:
            return (f"graph {self.index} {self.shapes}: symbolic shapes; specialized to the concrete "
                    "shapes of each call and compiled once per shape (the graphs reported next)")
        compiled = [k for k in self.kernels if k.error is None]
        lines = [
            f"graph {self.index} {self.shapes}: {self.ops} aten ops, {len(compiled)} mlfuse "
            f"subgraph(s) with {self.mlfuse_ops} ops, {len(self.eager)} op(s) in torch eager"
        ]
        for k in self.kernels:
            ops = ", ".join(f"{name} x{n}" if n > 1 else name for name, n in k.ops.most_common())
            status = f"FAILED, ran eagerly: {k.error}" if k.error else f"compiled in {k.compile_s:.2f} s"
            lines.append(f"  mlfuse {k.name}: {sum(k.ops.values())} ops ({ops}); {status}")
        for op, reason in self.eager:
            lines.append(f"  eager  {op}: {reason}")
        return "\n".join(lines)


_REPORTS: list[GraphReport] = []


def reports() -> list[GraphReport]:
    """Every graph compiled in this process, oldest first."""
    return list(_REPORTS)


def clear_reports() -> None:
    _REPORTS.clear()


def _op_name(node: fx.Node) -> str:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return f"aten.{target.overloadpacket.__name__}" if target.namespace == "aten" else str(target)
    return getattr(target, "__name__", str(target))


# ---------------------------------------------------------------------------
# node metadata
# ---------------------------------------------------------------------------


def _val(node: fx.Node) -> Any:
    """The FakeTensor (or tuple of them) dynamo/AOT recorded for `node`."""
    if "val" not in node.meta:
        raise Unsupported("no shape information (meta['val'])")
    return node.meta["val"]


def _static_shape(t: torch.Tensor) -> tuple[int, ...]:
    if any(not isinstance(d, int) for d in t.shape):
        raise Unsupported(f"symbolic shape {tuple(t.shape)}")
    return tuple(t.shape)


def _dtype_name(dtype: torch.dtype) -> str:
    if dtype not in DTYPES:
        raise Unsupported(f"dtype {dtype} is not supported")
    return DTYPES[dtype]


def _check_tensor_val(t: Any) -> None:
    """A tensor mlfuse can hold: CPU, strided, static shape, supported dtype."""
    if not isinstance(t, torch.Tensor):
        raise Unsupported(f"a {type(t).__name__} value, not a tensor")
    if t.device.type != "cpu":
        raise Unsupported(f"tensor on {t.device} (the torch backend compiles for the CPU)")
    if t.layout != torch.strided:
        raise Unsupported(f"{t.layout} tensor")
    _static_shape(t)
    _dtype_name(t.dtype)


def out_shape(node: fx.Node, index: int | None = None) -> tuple[int, ...]:
    val = _val(node)
    return _static_shape(val if index is None else val[index])


def out_dtype(node: fx.Node, index: int | None = None) -> str:
    val = _val(node)
    return _dtype_name((val if index is None else val[index]).dtype)


# ---------------------------------------------------------------------------
# lowering: FX nodes -> graph dialect through the GraphBuilder
# ---------------------------------------------------------------------------


class Lowering:
    """Converts FX nodes, in order, into one graph function."""

    def __init__(self) -> None:
        self.b = GraphBuilder("main")
        self.values: dict[fx.Node, Any] = {}

    def add_input(self, node: fx.Node) -> Tensor:
        val = _val(node)
        _check_tensor_val(val)
        t = self.b.input(f"in{len(self.values)}", _static_shape(val), DTYPES[val.dtype])
        self.values[node] = t
        return t

    def add_constant(self, node: fx.Node, value: torch.Tensor) -> Tensor:
        """A frozen parameter or buffer: its bytes become a graph constant."""
        _check_tensor_val(value)
        t = self.b.constant(_as_numpy(value).copy(), DTYPES[value.dtype])
        self.values[node] = t
        return t

    def resolve(self, arg: Any) -> Any:
        """Nodes to their Tensors (recursively in lists); other arguments unchanged."""
        if isinstance(arg, fx.Node):
            if arg not in self.values:
                raise Unsupported(f"input {arg.name} is not available")
            return self.values[arg]
        if isinstance(arg, list | tuple):
            return type(arg)(self.resolve(a) for a in arg)
        return arg

    def lower(self, node: fx.Node) -> Any:
        """Convert one call_function node; its result is checked against torch's metadata."""
        if node.target is operator.getitem:
            source, index = node.args
            result = self.resolve(source)[index]
            if result is None:
                raise Unsupported(f"output {index} of {_op_name(source)} is not supported")
        else:
            convert = converter_for(node)
            args = self.resolve(node.args)
            kwargs = {k: self.resolve(v) for k, v in node.kwargs.items()}
            try:
                result = convert(self, node, *args, **kwargs)
            except ValueError as e:  # the builder's verifier: a shape or dtype mismatch
                raise Unsupported(str(e)) from None
        _check_result(node, result)
        self.values[node] = result
        return result

    # helpers for converters -----------------------------------------------------------

    def cast(self, x: Any, dtype: str) -> Any:
        """`x` as `dtype`: Tensors are cast when they differ; Python scalars pass through."""
        if isinstance(x, Tensor) and x.dtype != dtype:
            return self.b.cast(x, dtype)
        return x

    def scalar(self, value: Any, dtype: str) -> Tensor:
        """A rank-0 constant of `dtype`."""
        return self.b.full((), value, dtype)


def _check_result(node: fx.Node, result: Any) -> None:
    """A converter must reproduce torch's shapes and dtypes exactly (else: a bug, run eagerly)."""
    val = _val(node)
    pairs = zip(result, val) if isinstance(result, tuple) else [(result, val)]
    for t, v in pairs:
        if t is None:
            continue
        if not isinstance(t, Tensor):
            raise Unsupported(f"converter returned a {type(t).__name__}")
        shape, dtype = _static_shape(v), _dtype_name(v.dtype)
        if t.shape != shape or t.dtype != dtype:
            raise Unsupported(f"converter produced {t.dtype}{list(t.shape)}, torch has {dtype}{list(shape)}")


CONVERTERS: dict[Any, Callable[..., Any]] = {}


def converts(*ops: Any) -> Callable:
    """Register a converter for aten op packets (every overload) or single overloads."""

    def register(fn: Callable) -> Callable:
        for op in ops:
            CONVERTERS[op] = fn
        return fn

    return register


def converter_for(node: fx.Node) -> Callable:
    target = node.target
    if target in CONVERTERS:
        return CONVERTERS[target]
    packet = getattr(target, "overloadpacket", None)
    if packet in CONVERTERS:
        return CONVERTERS[packet]
    raise Unsupported("no converter")


def _promoted(node: fx.Node, *args: Any) -> str:
    """The dtype torch computes a comparison in (the promotion of its operands)."""
    probes = []
    for a in args:
        if isinstance(a, fx.Node):
            v = _val(a)
            probes.append(torch.empty((1,) * min(v.dim(), 1), dtype=v.dtype))
        else:
            probes.append(a)
    if len(probes) == 1:
        return _dtype_name(probes[0].dtype)
    return _dtype_name(torch.result_type(*probes[:2]))


# --- elementwise ---------------------------------------------------------------------

_UNARY = {
    aten.abs: GraphBuilder.abs,
    aten.neg: GraphBuilder.neg,
    aten.exp: GraphBuilder.exp,
    aten.log: GraphBuilder.log,
    aten.sqrt: GraphBuilder.sqrt,
    aten.rsqrt: GraphBuilder.rsqrt,
    aten.reciprocal: GraphBuilder.reciprocal,
    aten.tanh: GraphBuilder.tanh,
    aten.erf: GraphBuilder.erf,
    aten.sin: GraphBuilder.sin,
    aten.cos: GraphBuilder.cos,
    aten.sigmoid: GraphBuilder.sigmoid,
    aten.relu: GraphBuilder.relu,
}


@converts(*_UNARY)
def convert_unary(cx: Lowering, node: fx.Node, x: Tensor) -> Tensor:
    """One graph op; integer inputs of float ops (exp of an int tensor) are cast first."""
    return _UNARY[node.target.overloadpacket](cx.b, cx.cast(x, out_dtype(node)))


@converts(aten.gelu)
def convert_gelu(cx: Lowering, node: fx.Node, x: Tensor, approximate: str = "none") -> Tensor:
    return cx.b.gelu(x, approximate)


@converts(aten.silu)
def convert_silu(cx: Lowering, node: fx.Node, x: Tensor) -> Tensor:
    return x * cx.b.sigmoid(x)


@converts(aten.clamp, aten.hardtanh, aten.clamp_min, aten.clamp_max)
def convert_clamp(cx: Lowering, node: fx.Node, x: Tensor, low: Any = None, high: Any = None, **kw: Any) -> Tensor:
    """clamp(x, min, max); hardtanh's defaults are -1 and 1; clamp_max's only bound is the max."""
    packet = node.target.overloadpacket
    low, high = kw.get("min", kw.get("min_val", low)), kw.get("max", kw.get("max_val", high))
    if packet is aten.hardtanh:
        low, high = -1.0 if low is None else low, 1.0 if high is None else high
    if packet is aten.clamp_max:
        low, high = None, low
    dtype = out_dtype(node)
    y = cx.cast(x, dtype)
    if low is not None:
        y = cx.b.maximum(y, cx.cast(low, dtype))
    if high is not None:
        y = cx.b.minimum(y, cx.cast(high, dtype))
    return y


@converts(aten.leaky_relu)
def convert_leaky_relu(cx: Lowering, node: fx.Node, x: Tensor, slope: float = 0.01) -> Tensor:
    return cx.b.where(x > 0, x, x * slope)


@converts(aten.hardsigmoid)
def convert_hardsigmoid(cx: Lowering, node: fx.Node, x: Tensor) -> Tensor:
    return cx.b.minimum(cx.b.maximum(x / 6.0 + 0.5, 0.0), 1.0)


@converts(aten.hardswish)
def convert_hardswish(cx: Lowering, node: fx.Node, x: Tensor) -> Tensor:
    return x * convert_hardsigmoid(cx, node, x)


_BINARY = {
    aten.add: GraphBuilder.add,
    aten.sub: GraphBuilder.sub,
    aten.rsub: lambda b, x, y: b.sub(y, x),
    aten.mul: GraphBuilder.mul,
    aten.maximum: GraphBuilder.maximum,
    aten.minimum: GraphBuilder.minimum,
}


@converts(*_BINARY)
def convert_binary(cx: Lowering, node: fx.Node, x: Any, y: Any, alpha: Any = 1) -> Tensor:
    """Tensor and scalar forms; operands are cast to the result dtype (torch's promotion)
    and `alpha` scales the second operand of add/sub."""
    dtype = out_dtype(node)
    x, y = cx.cast(x, dtype), cx.cast(y, dtype)
    if alpha != 1:
        y = y * alpha
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        raise Unsupported("no tensor operand")
    return _BINARY[node.target.overloadpacket](cx.b, x, y)


def _emit_binary(cx: Lowering, op: Callable[[Any, Any], Any], x: Any, y: Any) -> Tensor:
    """A binary graph op the builder has no method for, on broadcast operands."""
    lhs, rhs = cx.b._tensors([x, y], "binary op")
    return cx.b._emit(op(lhs.value, rhs.value))


@converts(aten.remainder, aten.fmod)
def convert_remainder(cx: Lowering, node: fx.Node, x: Any, y: Any) -> Tensor:
    """remainder takes the divisor's sign (Python's %), fmod the dividend's (C's)."""
    dtype = out_dtype(node)
    fmod = node.target.overloadpacket is aten.fmod
    return _emit_binary(cx, lambda a, b: graph.RemOp(a, b, fmod), cx.cast(x, dtype), cx.cast(y, dtype))


@converts(aten.div)
def convert_div(cx: Lowering, node: fx.Node, x: Any, y: Any, *, rounding_mode: Any = None) -> Tensor:
    """True division, or on integers the rounded forms: graph.div truncates, and
    floor division is (x - x mod y) / y, exact. Floats have no floor in the graph dialect."""
    dtype = out_dtype(node)
    x, y = cx.cast(x, dtype), cx.cast(y, dtype)
    if rounding_mode is None or (rounding_mode == "trunc" and dtype[0] in "iu"):
        return cx.b.div(x, y)
    if rounding_mode == "floor" and dtype[0] in "iu":
        return cx.b.div(x - _emit_binary(cx, graph.RemOp, x, y), y)
    raise Unsupported(f"rounding_mode={rounding_mode!r} on {dtype}")


@converts(aten.pow)
def convert_pow(cx: Lowering, node: fx.Node, x: Any, y: Any) -> Tensor:
    """Small constant exponents become multiplies and roots (exact, and fusable);
    others graph.pow."""
    dtype = out_dtype(node)
    x, y = cx.cast(x, dtype), cx.cast(y, dtype)
    if isinstance(x, Tensor) and not isinstance(y, Tensor) and dtype[0] == "f":
        special = {1: lambda: x, 2: lambda: x * x, 3: lambda: x * x * x, 0.5: lambda: cx.b.sqrt(x),
                   -0.5: lambda: cx.b.rsqrt(x), -1: lambda: cx.b.reciprocal(x)}
        if y in special:
            return special[y]()
    if not isinstance(x, Tensor):
        x = cx.b.full(y.shape, x, dtype)
    return cx.b.pow(x, y)


_COMPARE = {aten.eq: "eq", aten.ne: "ne", aten.lt: "lt", aten.le: "le", aten.gt: "gt", aten.ge: "ge"}


@converts(*_COMPARE)
def convert_compare(cx: Lowering, node: fx.Node, x: Any, y: Any) -> Tensor:
    dtype = _promoted(node, *node.args[:2])
    return cx.b.compare(_COMPARE[node.target.overloadpacket], cx.cast(x, dtype), cx.cast(y, dtype))


@converts(aten.where)
def convert_where(cx: Lowering, node: fx.Node, cond: Tensor, x: Any, y: Any) -> Tensor:
    dtype = out_dtype(node)
    return cx.b.where(cx.cast(cond, "i1"), cx.cast(x, dtype), cx.cast(y, dtype))


def _as_bool(cx: Lowering, x: Any) -> Any:
    if isinstance(x, Tensor):
        return cx.cast(x, "i1")
    return bool(x)


@converts(aten.logical_and, aten.bitwise_and, aten.logical_or, aten.bitwise_or)
def convert_logical(cx: Lowering, node: fx.Node, x: Any, y: Any) -> Tensor:
    """Boolean and/or as selects (the graph dialect has no logical ops); bitwise ops
    only on bool tensors."""
    packet = node.target.overloadpacket
    if packet in (aten.bitwise_and, aten.bitwise_or) and out_dtype(node) != "i1":
        raise Unsupported("bitwise ops on integers")
    x, y = _as_bool(cx, x), _as_bool(cx, y)
    if not isinstance(x, Tensor):
        x, y = y, x
    shape = out_shape(node)
    x = cx.b.broadcast_to(x, shape)
    if packet in (aten.logical_and, aten.bitwise_and):
        return cx.b.where(x, y, False)
    return cx.b.where(x, True, y)


@converts(aten.logical_not, aten.bitwise_not)
def convert_not(cx: Lowering, node: fx.Node, x: Tensor) -> Tensor:
    if node.target.overloadpacket is aten.bitwise_not and x.dtype != "i1":
        raise Unsupported("bitwise_not on integers")
    return cx.b.equal(_as_bool(cx, x), False)


# --- casts and constants --------------------------------------------------------------


@converts(aten._to_copy, torch.ops.prims.convert_element_type)
def convert_to_copy(cx: Lowering, node: fx.Node, x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    device = kwargs.get("device")
    if device is not None and torch.device(device).type != "cpu":
        raise Unsupported(f"copy to {device}")
    return cx.cast(x, out_dtype(node))


@converts(aten.full, aten.scalar_tensor, aten.zeros, aten.ones, aten.full_like, aten.zeros_like, aten.ones_like)
def convert_full(cx: Lowering, node: fx.Node, *args: Any, **kwargs: Any) -> Tensor:
    """Splat constants; the value is the fill argument (or 0/1), shape and dtype come from torch."""
    packet = node.target.overloadpacket
    if packet in (aten.zeros, aten.zeros_like):
        value = 0
    elif packet in (aten.ones, aten.ones_like):
        value = 1
    elif packet is aten.scalar_tensor:
        value = args[0]
    else:
        value = args[1]
    dtype = out_dtype(node)
    if dtype[0] != "f":
        value = int(value) if dtype != "i1" else bool(value)
    return cx.b.full(out_shape(node), value, dtype)


@converts(aten.arange)
def convert_arange(cx: Lowering, node: fx.Node, *args: Any, **kwargs: Any) -> Tensor:
    """A dense constant (arange feeds masks and position ids: small)."""
    numbers = [a for a in args if isinstance(a, int | float)]
    start, end, step = (0, numbers[0], 1) if len(numbers) == 1 else (*numbers[:2], numbers[2] if len(numbers) > 2 else 1)
    dtype = out_dtype(node)
    values = np.arange(start, end, step, dtype=graph.numpy_dtype(graph.ELEMENT_TYPES[dtype][0]))
    return cx.b.constant(values, dtype)


# --- reductions -----------------------------------------------------------------------


def _dims(x: Tensor, dim: Any) -> list[int] | None:
    """torch's dim argument: None, an int, or a list (empty means all dims)."""
    if dim is None or (isinstance(dim, list | tuple) and len(dim) == 0):
        return None
    return [dim] if isinstance(dim, int) else list(dim)


_REDUCE = {
    aten.sum: GraphBuilder.reduce_sum,
    aten.mean: GraphBuilder.reduce_mean,
    aten.amax: GraphBuilder.reduce_max,
    aten.amin: GraphBuilder.reduce_min,
    aten.prod: GraphBuilder.reduce_prod,
}


@converts(*_REDUCE)
def convert_reduce(cx: Lowering, node: fx.Node, x: Tensor, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """sum/mean/amax/amin/prod over dims; the input is cast to the result dtype first
    (sum of a bool tensor is an i64 count)."""
    if isinstance(dim, bool):  # sum(x, dtype) overloads put no dim first
        raise Unsupported("unexpected argument order")
    x = cx.cast(x, out_dtype(node))
    if x.ndim == 0:
        return x
    return _REDUCE[node.target.overloadpacket](cx.b, x, _dims(x, dim), keepdim)


@converts(aten.max, aten.min)
def convert_max_dim(cx: Lowering, node: fx.Node, x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """max.dim/min.dim: the values only (the indices output is unsupported); max(x) of all."""
    reduce = cx.b.reduce_max if node.target.overloadpacket is aten.max else cx.b.reduce_min
    if isinstance(dim, Tensor):  # the elementwise max.other overload
        return (cx.b.maximum if reduce == cx.b.reduce_max else cx.b.minimum)(x, dim)
    if dim is None:
        return reduce(x)
    return (reduce(x, dim, keepdim), None)


@converts(aten.var)
def convert_var(cx: Lowering, node: fx.Node, x: Tensor, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> Tensor:
    """Two-pass variance with Bessel's correction (default 1)."""
    dims = _dims(x, dim)
    n = math.prod(x.shape[d] for d in (dims or range(x.ndim)))
    correction = 1 if correction is None else correction
    centered = x - cx.b.reduce_mean(x, dims, keepdims=True)
    return cx.b.reduce_sum(centered * centered, dims, keepdim) * (1.0 / max(n - correction, 0))


@converts(aten._softmax, aten._log_softmax)
def convert_softmax(cx: Lowering, node: fx.Node, x: Tensor, dim: int, half_to_float: bool = False) -> Tensor:
    """The numerically safe form: exp(x - max) / sum."""
    x = cx.cast(x, out_dtype(node))
    shifted = x - cx.b.reduce_max(x, dim, keepdims=True)
    e = cx.b.exp(shifted)
    total = cx.b.reduce_sum(e, dim, keepdims=True)
    if node.target.overloadpacket is aten._log_softmax:
        return shifted - cx.b.log(total)
    return e / total


# --- normalizations -------------------------------------------------------------------


@converts(aten.native_layer_norm)
def convert_layer_norm(cx: Lowering, node: fx.Node, x: Tensor, normalized_shape: Sequence[int],
                       weight: Tensor | None, bias: Tensor | None, eps: float) -> tuple:
    """(y, mean, rstd) as ONNX LayerNormalization computes them (mlfuse stitches this
    pattern into one row kernel)."""
    axes = list(range(x.ndim - len(normalized_shape), x.ndim))
    mean = cx.b.reduce_mean(x, axes, keepdims=True)
    centered = x - mean
    rstd = cx.b.rsqrt(cx.b.reduce_mean(centered * centered, axes, keepdims=True) + eps)
    y = centered * rstd
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return (y, mean, rstd)


def _channel(cx: Lowering, v: Tensor, like: Tensor) -> Tensor:
    """A per-channel vector broadcast along axis 1 of `like` (NC...)."""
    return cx.b.broadcast_to(v.reshape(v.shape[0], *[1] * (like.ndim - 2)), like.shape)


@converts(aten._native_batch_norm_legit_no_training)
def convert_batch_norm(cx: Lowering, node: fx.Node, x: Tensor, weight: Tensor | None, bias: Tensor | None,
                       mean: Tensor, var: Tensor, momentum: float, eps: float) -> tuple:
    """Inference batch norm as x * a + b with per-channel a = w / sqrt(var + eps) and
    b = bias - mean * a (a handful of per-channel ops, then one fused multiply-add);
    the saved-statistics outputs are empty in inference and unsupported."""
    scale = cx.b.rsqrt(var + eps)
    if weight is not None:
        scale = scale * weight
    shift = -(mean * scale) if bias is None else bias - mean * scale
    return (x * _channel(cx, scale, x) + _channel(cx, shift, x), None, None)


# --- contractions and windows ---------------------------------------------------------


@converts(aten.mm, aten.bmm)
def convert_matmul(cx: Lowering, node: fx.Node, a: Tensor, b: Tensor) -> Tensor:
    return cx.b.matmul(a, b)


@converts(aten.addmm)
def convert_addmm(cx: Lowering, node: fx.Node, bias: Tensor, a: Tensor, b: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """beta * bias + alpha * (a @ b), the bias broadcast over rows."""
    y = cx.b.matmul(a, b)
    if alpha != 1:
        y = y * alpha
    if beta == 0:
        return y
    return y + (bias if beta == 1 else bias * beta)


@converts(aten.convolution)
def convert_convolution(cx: Lowering, node: fx.Node, x: Tensor, w: Tensor, bias: Tensor | None, stride: Sequence[int],
                        padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                        output_padding: Sequence[int], groups: int) -> Tensor:
    """2-D convolutions (1-D ones as 2-D of height 1); transposed ones are unsupported."""
    if transposed:
        raise Unsupported("transposed convolution")
    if x.ndim == 3:  # (N, C, L): a 2-D convolution over (1, L)
        x, w = x.reshape(*x.shape[:2], 1, x.shape[2]), w.reshape(*w.shape[:2], 1, w.shape[2])
        stride, padding, dilation = [1, *stride], [0, *padding], [1, *dilation]
    elif x.ndim != 4:
        raise Unsupported(f"{x.ndim - 2}-D convolution")
    if isinstance(padding, str):
        raise Unsupported(f"padding={padding!r}")
    y = cx.b.conv2d(x, w, list(stride), [*padding, *padding], list(dilation), groups)
    if bias is not None:
        y = y + _channel(cx, bias, y)
    return y.reshape(out_shape(node))


@converts(aten.max_pool2d_with_indices, aten.max_pool2d)
def convert_max_pool(cx: Lowering, node: fx.Node, x: Tensor, kernel: Sequence[int], stride: Sequence[int] = (),
                     padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False) -> Any:
    """The values; ceil_mode pads the high side just enough for torch's extra window."""
    kernel, stride = _pair(kernel), _pair(stride or kernel)
    padding, dilation = _pair(padding), _pair(dilation)
    shape = out_shape(node, 0 if node.target.overloadpacket is aten.max_pool2d_with_indices else None)
    if x.ndim != 4:
        raise Unsupported(f"rank-{x.ndim} max pool")
    extra = [0, 0]
    if ceil_mode:  # the last window may start in the padding-free input but run past it
        for d in range(2):
            span = (shape[2 + d] - 1) * stride[d] + dilation[d] * (kernel[d] - 1) + 1
            extra[d] = max(0, span - (x.shape[2 + d] + 2 * padding[d]))
    y = cx.b.max_pool2d(x, kernel, stride, [padding[0], padding[1], padding[0] + extra[0], padding[1] + extra[1]], dilation)
    return (y, None) if node.target.overloadpacket is aten.max_pool2d_with_indices else y


def _pair(v: Any) -> list[int]:
    v = [v] if isinstance(v, int) else list(v)
    return v * 2 if len(v) == 1 else v


@converts(aten.avg_pool2d)
def convert_avg_pool(cx: Lowering, node: fx.Node, x: Tensor, kernel: Sequence[int], stride: Sequence[int] = (),
                     padding: Any = 0, ceil_mode: bool = False, count_include_pad: bool = True,
                     divisor_override: Any = None) -> Tensor:
    if ceil_mode or divisor_override is not None or x.ndim != 4:
        raise Unsupported("ceil_mode, divisor_override or a non-4-D input")
    kernel, stride, padding = _pair(kernel), _pair(stride or kernel), _pair(padding)
    return cx.b.avg_pool2d(x, kernel, stride, [*padding, *padding], count_include_pad=count_include_pad)


@converts(aten._adaptive_avg_pool2d, aten.adaptive_avg_pool2d)
def convert_adaptive_avg_pool(cx: Lowering, node: fx.Node, x: Tensor, output_size: Sequence[int]) -> Tensor:
    """Output 1x1 is a mean; sizes that divide the input are a plain average pool."""
    h, w = x.shape[-2:]
    oh, ow = _pair(output_size)
    if (oh, ow) == (1, 1):
        return cx.b.reduce_mean(x, [x.ndim - 2, x.ndim - 1], keepdims=True)
    if h % oh or w % ow or x.ndim != 4:
        raise Unsupported(f"adaptive pool {h}x{w} -> {oh}x{ow} with uneven windows")
    return cx.b.avg_pool2d(x, [h // oh, w // ow], [h // oh, w // ow])


# --- data movement --------------------------------------------------------------------


@converts(aten.view, aten._unsafe_view, aten.reshape, aten.squeeze, aten.unsqueeze, aten.flatten,
          aten.alias, aten.clone, aten.detach, aten.lift_fresh_copy, aten.contiguous)
def convert_reshape(cx: Lowering, node: fx.Node, x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """Every op that keeps the elements in row-major order: a reshape to torch's shape
    (a copy such as clone is the identity on values)."""
    shape = out_shape(node)
    return x if x.shape == shape else x.reshape(shape)


@converts(aten.permute)
def convert_permute(cx: Lowering, node: fx.Node, x: Tensor, dims: Sequence[int]) -> Tensor:
    return x.transpose([d % max(x.ndim, 1) for d in dims])


@converts(aten.t, aten.transpose)
def convert_transpose(cx: Lowering, node: fx.Node, x: Tensor, d0: int = 0, d1: int = 1) -> Tensor:
    if x.ndim < 2:
        return x
    perm = list(range(x.ndim))
    d0, d1 = d0 % x.ndim, d1 % x.ndim
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return x.transpose(perm)


@converts(aten.expand)
def convert_expand(cx: Lowering, node: fx.Node, x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    return cx.b.broadcast_to(x, out_shape(node))


@converts(aten.slice)
def convert_slice(cx: Lowering, node: fx.Node, x: Tensor, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> Tensor:
    dim %= x.ndim
    begin, stop, step = slice(start, end, step).indices(x.shape[dim])
    stop = max(begin, stop)
    starts, stops, steps = [0] * x.ndim, list(x.shape), [1] * x.ndim
    starts[dim], stops[dim], steps[dim] = begin, stop, step
    if (begin, stop, step) == (0, x.shape[dim], 1):
        return x
    return cx.b.slice(x, starts, stops, steps)


@converts(aten.select)
def convert_select(cx: Lowering, node: fx.Node, x: Tensor, dim: int, index: int) -> Tensor:
    dim %= x.ndim
    index %= x.shape[dim]
    return convert_slice(cx, node, x, dim, index, index + 1).reshape(out_shape(node))


@converts(aten.split, aten.split_with_sizes, aten.unbind)
def convert_split(cx: Lowering, node: fx.Node, x: Tensor, sizes: Any = 0, dim: int = 0) -> tuple:
    """A tuple of slices (unbind: of selects), sized as torch says."""
    if node.target.overloadpacket is aten.unbind:
        dim = sizes % x.ndim
        return tuple(_take(cx, x, dim, i, i + 1).reshape(out_shape(node, i)) for i in range(x.shape[dim]))
    dim %= x.ndim
    parts, begin = [], 0
    for i in range(len(_val(node))):
        size = out_shape(node, i)[dim]
        parts.append(_take(cx, x, dim, begin, begin + size))
        begin += size
    return tuple(parts)


def _take(cx: Lowering, x: Tensor, dim: int, begin: int, stop: int) -> Tensor:
    starts, stops = [0] * x.ndim, list(x.shape)
    starts[dim], stops[dim] = begin, stop
    return x if (begin, stop) == (0, x.shape[dim]) else cx.b.slice(x, starts, stops)


@converts(aten.cat)
def convert_cat(cx: Lowering, node: fx.Node, tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """torch skips empty 1-D tensors in cat (a legacy rule); so do we."""
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    dtype = out_dtype(node)
    tensors = [cx.cast(t, dtype) for t in tensors]
    return tensors[0] if len(tensors) == 1 else cx.b.concat(tensors, dim)


@converts(aten.constant_pad_nd)
def convert_pad(cx: Lowering, node: fx.Node, x: Tensor, pad: Sequence[int], value: Any = 0) -> Tensor:
    """torch lists pads from the last dim backwards, (low, high) each; negative pads crop."""
    if any(p < 0 for p in pad):
        raise Unsupported("negative padding")
    widths = [[0, 0] for _ in range(x.ndim)]
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = [pad[2 * i], pad[2 * i + 1]]
    return cx.b.pad(x, widths, value)


# --- gathers --------------------------------------------------------------------------


def _gather(cx: Lowering, op: type, data: Tensor, indices: Tensor, axis: int) -> Tensor:
    if indices.dtype not in ("i32", "i64"):
        raise Unsupported(f"indices of dtype {indices.dtype}")
    return cx.b._emit(op(data.value, indices.value, axis))


@converts(aten.embedding)
def convert_embedding(cx: Lowering, node: fx.Node, weight: Tensor, indices: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """Rows of the table: graph.gather on axis 0 (padding_idx only matters for training)."""
    if not hasattr(graph, "GatherOp"):
        raise Unsupported("this mlfuse has no graph.gather")
    return _gather(cx, graph.GatherOp, weight, indices, 0)


@converts(aten.gather)
def convert_gather(cx: Lowering, node: fx.Node, x: Tensor, dim: int, index: Tensor, sparse_grad: bool = False) -> Tensor:
    """torch.gather is ONNX GatherElements (numpy's take_along_axis)."""
    if not hasattr(graph, "GatherElementsOp"):
        raise Unsupported("this mlfuse has no graph.gather_elements")
    return _gather(cx, graph.GatherElementsOp, x, index, dim % x.ndim)


@converts(aten.index)
def convert_index(cx: Lowering, node: fx.Node, x: Tensor, indices: Sequence[Any]) -> Tensor:
    """x[..., i1, i2, ..., :] with integer index tensors on adjacent axes: the indices
    broadcast together and combine into one row-major index into those axes merged,
    then one graph.gather (the linear-index form of ONNX GatherND). Index tensors
    separated by a full slice move their dims to the front in torch: unsupported."""
    given = [i for i, t in enumerate(indices) if t is not None]
    if not given or given != list(range(given[0], given[-1] + 1)):
        raise Unsupported("index tensors on non-adjacent axes")
    if not hasattr(graph, "GatherOp"):
        raise Unsupported("this mlfuse has no graph.gather")
    first, last = given[0], given[-1] + 1
    if len(given) == 1:
        return _gather(cx, graph.GatherOp, x, indices[first], first)
    index_tensors = [indices[i] for i in given]
    if any(t.dtype not in ("i32", "i64") for t in index_tensors):
        raise Unsupported("boolean or non-integer index tensors")
    shape = np.broadcast_shapes(*(t.shape for t in index_tensors))
    linear = None
    for axis, t in zip(given, index_tensors):
        n = x.shape[axis]
        t = cx.b.broadcast_to(cx.cast(t, "i64"), shape)
        t = cx.b.where(t < 0, t + n, t)  # wrap negatives per axis before combining
        linear = t if linear is None else linear * n + t
    merged = x.reshape(*x.shape[:first], math.prod(x.shape[first:last]), *x.shape[last:])
    return _gather(cx, graph.GatherOp, merged, linear, first)


# ---------------------------------------------------------------------------
# which nodes convert
# ---------------------------------------------------------------------------


def why_unsupported(node: fx.Node) -> str | None:
    """None when `node` converts on its own, else the reason: the node is converted in a
    scratch function whose inputs are its tensor arguments (the real conversion then
    repeats exactly this, so support and conversion never disagree)."""
    if node.op != "call_function":
        return "not an op"
    try:
        if node.target is operator.getitem:
            source, index = node.args
            reason = why_unsupported(source) if isinstance(source, fx.Node) else "getitem of a non-node"
            if reason:
                raise Unsupported(reason)
            return None
        cx = Lowering()
        for arg in node.all_input_nodes:
            cx.add_input(arg)
        result = cx.lower(node)
        if isinstance(result, tuple):  # outputs that are used must be supported
            for user in node.users:
                if user.target is not operator.getitem or result[user.args[1]] is None:
                    raise Unsupported(f"its output {user.args[1] if user.target is operator.getitem else ''} is used")
    except Unsupported as e:
        return str(e)
    except Exception as e:  # a converter bug must not fail the graph: run the op eagerly
        return f"converter error: {type(e).__name__}: {e}"
    return None


def _support(gm: fx.GraphModule) -> dict[fx.Node, str | None]:
    """For every call_function node, None (converts) or the reason it does not."""
    return {n: why_unsupported(n) for n in gm.graph.nodes if n.op == "call_function"}


class _Support(OperatorSupportBase):
    """The partitioner's question, answered from `_support`."""

    def __init__(self, reasons: dict[fx.Node, str | None]):
        self.reasons = reasons

    def is_node_supported(self, submodules: Any, node: fx.Node) -> bool:
        return self.reasons.get(node, "not an op") is None


# ---------------------------------------------------------------------------
# kernels: one compiled subgraph, called from the FX graph
# ---------------------------------------------------------------------------


def lower_subgraph(sub: fx.GraphModule, constants: dict[int, torch.Tensor] | None = None) -> Any:
    """The graph-dialect module of a fused subgraph (placeholders in, its output tuple out).
    `constants` maps placeholder positions to frozen values: those become graph constants."""
    cx = Lowering()
    constants = constants or {}
    outputs: Sequence[fx.Node] = ()
    placeholders = 0
    for node in sub.graph.nodes:
        if node.op == "placeholder":
            if placeholders in constants:
                cx.add_constant(node, constants[placeholders])
            else:
                cx.add_input(node)
            placeholders += 1
        elif node.op == "call_function":
            cx.lower(node)
        elif node.op == "output":
            outputs = node.args[0]
        else:
            raise Unsupported(f"{node.op} node in a subgraph")
    cx.b.output(*[cx.resolve(o) for o in outputs])
    return cx.b.module()


def _as_numpy(t: torch.Tensor) -> np.ndarray:
    """A view of the tensor's memory (no copy; parameters carry requires_grad)."""
    return (t.detach() if t.requires_grad else t).numpy()


class MlfuseKernel(torch.nn.Module):
    """Calls one compiled subgraph on the tensors' memory: inputs by address (a strided
    input is made contiguous first), outputs fresh torch tensors that the kernel writes in
    place (torch's CPU allocator aligns to 64 bytes, as the compiled code assumes).

    The FX graph's code calls it directly: `__call__` is `forward` (no module hooks to look
    for), and nothing is checked per call that the static graph already fixes (shapes and
    dtypes)."""

    def __init__(self, fn: Any, outputs: Sequence[tuple[tuple[int, ...], torch.dtype]]):
        super().__init__()
        self.fn = fn
        self.output_specs = list(outputs)
        # by address when the function offers it; zero-size tensors may have no memory at all
        self.direct = hasattr(fn, "run_addresses") and all(
            math.prod(shape) for shape in [*(s.shape for s in fn.inputs), *(s for s, _ in self.output_specs)])

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outs = tuple(torch.empty(shape, dtype=dtype) for shape, dtype in self.output_specs)
        if self.direct:
            addresses = [o.data_ptr() for o in outs]
            if not any(a % self.fn.output_alignment for a in addresses):
                tensors = tuple(t if t.is_contiguous() else t.contiguous() for t in tensors)  # held during the call
                self.fn.run_addresses([t.data_ptr() for t in tensors], addresses)
                return outs
        self.fn(*[_as_numpy(t) for t in tensors], out=[o.numpy() for o in outs])
        return outs

    __call__ = forward  # no hook lookups (nn.Module.__call__): nothing hooks a kernel


def _worth_a_kernel(nodes: Sequence[fx.Node]) -> bool:
    """A partition of views alone runs better in eager (views are free there)."""
    return any(
        node.target not in VIEW_OPS and getattr(node.target, "overloadpacket", None) not in VIEW_OPS
        for node in nodes
    )


def _compile_kernel(sub: fx.GraphModule, report: KernelReport, options: dict,
                    constants: dict[int, torch.Tensor]) -> MlfuseKernel | None:
    """mlfuse.compile the subgraph, or None (and the reason in the report) if it fails."""
    import mlfuse

    start = time.perf_counter()
    try:
        module = lower_subgraph(sub, constants)
        fn = mlfuse.compile(module, **options)
    except Exception as e:  # Unsupported, a Diagnostic, or a compiler bug: run it eagerly
        report.error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        return None
    finally:
        report.compile_s = time.perf_counter() - start
    output = next(n for n in sub.graph.nodes if n.op == "output")
    specs = [(out_shape(o), _val(o).dtype) for o in output.args[0]]
    report.inputs, report.outputs = len(fn.inputs), len(specs)
    return MlfuseKernel(fn, specs)


def _shapes(gm: fx.GraphModule) -> str:
    vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    shapes = [tuple(v.shape) for v in vals if isinstance(v, torch.Tensor) and v.dim() > 0]
    return "inputs " + " ".join("x".join(map(str, s)) for s in shapes[:3]) + (" ..." if len(shapes) > 3 else "")


def compile_fx_graph(gm: fx.GraphModule, example_inputs: Sequence[Any], options: dict | None = None) -> Callable:
    """Partition a core-ATen graph, compile each convertible subgraph, return the graph's
    callable (the FX graph with kernels in place of the subgraphs)."""
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

    _setup_logging()
    options = dict(options or {})
    report = GraphReport(index=len(_REPORTS), shapes=_shapes(gm))
    _REPORTS.append(report)
    if _has_symbolic_shapes(gm):
        return _ShapeSpecializer(gm, report, options)
    reasons = _support(gm)
    report.ops = sum(1 for n in reasons if n.target is not operator.getitem)
    partitioner = CapabilityBasedPartitioner(gm, _Support(reasons), allows_single_node_partition=True)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    partitions = sorted((p for p in partitioner.propose_partitions() if _worth_a_kernel(list(p.nodes))),
                        key=lambda p: min(order[n] for n in p.nodes))  # kernels numbered in run order
    fused = {n for p in partitions for n in p.nodes}
    report.eager = [(_op_name(n), reasons[n] or "a lone view (free in eager)")
                    for n in gm.graph.nodes if n in reasons and n not in fused and n.target is not operator.getitem]
    gm = fuse_by_partitions(gm, [p.nodes for p in partitions], prefix="mlfuse_", always_return_tuple=True)
    for node in gm.graph.nodes:
        if node.op == "call_module" and node.target.startswith("mlfuse_"):
            sub = getattr(gm, node.target)
            kernel_report = KernelReport(node.target, collections.Counter(
                _op_name(n) for n in sub.graph.nodes if n.op == "call_function" and n.target is not operator.getitem))
            report.kernels.append(kernel_report)
            constants = _frozen_arguments(gm, node)
            kernel = _compile_kernel(sub, kernel_report, options, constants)
            if kernel is not None:
                setattr(gm, node.target, kernel)
                node.args = tuple(a for i, a in enumerate(node.args) if i not in constants)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    log.info("%s", report.summary())
    return gm


def _frozen_arguments(gm: fx.GraphModule, call: fx.Node) -> dict[int, torch.Tensor]:
    """The arguments of a kernel call that are frozen parameters (get_attr tensors), by position."""
    constants = {}
    for i, arg in enumerate(call.args):
        if isinstance(arg, fx.Node) and arg.op == "get_attr" and isinstance(arg.target, str):
            value = operator.attrgetter(arg.target)(gm)
            if isinstance(value, torch.Tensor):
                constants[i] = value
    return constants


def _has_symbolic_shapes(gm: fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.SymInt) or (
            isinstance(val, torch.Tensor) and any(not isinstance(d, int) for d in val.shape)
        ):
            return True
    return False


class _ShapeSpecializer:
    """A graph with symbolic shapes (dynamo marks dims dynamic after a shape changes):
    at each call, the graph specialized to the concrete input shapes (traced again with
    make_fx), compiled once per distinct set of shapes."""

    def __init__(self, gm: fx.GraphModule, report: GraphReport, options: dict):
        self.gm, self.report, self.options = gm, report, options
        self.compiled: dict[tuple, Callable] = {}
        report.symbolic = True
        log.info("%s", report.summary())

    def __call__(self, *args: Any) -> Any:
        key = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a for a in args)
        fn = self.compiled.get(key)
        if fn is None:
            fn = self.compiled[key] = self._specialize(args)
        return fn(*args)

    def _specialize(self, args: Sequence[Any]) -> Callable:
        """The graph traced again on these arguments' shapes (symbolic sizes become
        constants) and compiled; the symbolic graph itself, eagerly, if that fails."""
        from torch.fx.experimental.proxy_tensor import make_fx

        try:
            # frozen parameters are real tensors among the fake ones
            static = make_fx(self.gm, tracing_mode="fake", _allow_non_fake_inputs=True)(*args)
            for node in list(static.graph.nodes):  # make_fx detaches parameters: no-ops here
                if node.target is aten.detach.default:
                    node.replace_all_uses_with(node.args[0])
                    static.graph.erase_node(node)
        except Exception as e:
            report = GraphReport(index=len(_REPORTS), fallback=f"specializing symbolic shapes failed: {e}")
            _REPORTS.append(report)
            log.warning("%s", report.summary())
            return self.gm
        return compile_fx_graph(static, args, self.options)


# ---------------------------------------------------------------------------
# the dynamo backend
# ---------------------------------------------------------------------------


def decompositions() -> dict:
    """Core ATen: what the converter table covers (native_layer_norm, convolution and
    batch norm stay whole; composite ops such as linear and softmax break up)."""
    from torch._decomp import core_aten_decompositions

    return core_aten_decompositions()


def _compile_options(defaults: dict, extra: dict | None) -> dict:
    """mlfuse.compile's keyword arguments: the backend's, updated by torch.compile(options=...)."""
    import inspect

    from mlfuse.api import compile as mlfuse_compile

    options = {**defaults, **(extra or {})}
    known = set(inspect.signature(mlfuse_compile).parameters) - {"source", "entry", "input_shapes"}
    known.add("freeze")  # the backend's own: parameters as constants (see FrozenGraph)
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown mlfuse option(s) {', '.join(unknown)} (expected: {', '.join(sorted(known))})")
    return options


def _freezable_inputs(aot_graph: fx.GraphModule, dynamo_inputs: Sequence[Any]) -> dict[int, torch.Tensor]:
    """The inputs of AOTAutograd's graph that are the model's parameters and buffers (dynamo
    marks them static) and that the graph does not mutate or alias, by position.

    AOTAutograd's graph takes the module's own parameters (none when dynamo inlines
    modules, the default), then dynamo's inputs. Anything it rearranged (duplicate or
    aliased inputs) does not match that count, and then nothing is frozen."""
    context = torch._guards.TracingContext.try_get()
    params = list(getattr(context, "params_flat", None) or [])
    flat = [*params, *dynamo_inputs]
    placeholders = [n for n in aot_graph.graph.nodes if n.op == "placeholder"]
    metadata = getattr(context, "fw_metadata", None)
    if metadata is None or len(placeholders) != len(flat) or len(metadata.input_info) != len(flat):
        return {}
    aliased = {out.base_idx for out in metadata.output_info if out.base_idx is not None}
    frozen = {}
    for i, (value, info) in enumerate(zip(flat, metadata.input_info)):
        static = isinstance(value, torch.nn.Parameter) or getattr(value, "_dynamo_static_input_type", None)
        mutated = info.mutates_data or info.mutates_metadata or i in aliased
        if static and not mutated and isinstance(value, torch.Tensor) and value.device.type == "cpu":
            frozen[i] = value
    return frozen


class FrozenGraph:
    """An inference graph compiled with the model's parameters and buffers as constants.

    Constants let mlfuse fold what depends only on weights (a linear layer's transposed
    weight, batch norm's scale and shift) at compile time, as onnxruntime and inductor's
    freezing do, instead of on every call. Each call checks that every frozen tensor is
    still the same object at the same version (torch counts in-place writes, such as
    `load_state_dict` or an optimizer step); if not, the graph is compiled again with the
    new values (unchanged kernels come from mlfuse's cache). Writes that bypass the
    version counter (through `.data` or a numpy view) are not seen: pass
    `options={"freeze": False}` to keep parameters as inputs."""

    def __init__(self, aot_graph: fx.GraphModule, frozen: dict[int, torch.Tensor], options: dict):
        self.aot_graph, self.options = aot_graph, options
        self._compile(frozen)

    def _compile(self, frozen: dict[int, torch.Tensor]) -> None:
        self.positions, self.tensors = list(frozen), list(frozen.values())
        self.versions = [t._version for t in self.tensors]
        count = sum(1 for n in self.aot_graph.graph.nodes if n.op == "placeholder")
        self.kept = [i for i in range(count) if i not in frozen]
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():  # AOTAutograd calls its compiler under fake mode
            self.fn = compile_fx_graph(_with_constants(self.aot_graph, frozen), [], self.options)
        self.call = _fast_callable(self.fn)

    def __call__(self, *args: Any) -> Any:
        # per call: the versions and identities of the frozen tensors, compared in C (map)
        if list(map(_VERSION, self.tensors)) != self.versions or any(
                map(operator.is_not, map(args.__getitem__, self.positions), self.tensors)):
            self._compile({i: args[i] for i in self.positions})
        return self.call(*[args[i] for i in self.kept])


_VERSION = operator.attrgetter("_version")


def _fast_callable(fn: Callable) -> Callable:
    """A GraphModule's generated forward itself (nn.Module.__call__ only adds hook lookups)."""
    return fn.forward if isinstance(fn, fx.GraphModule) else fn


def _with_constants(gm: fx.GraphModule, constants: dict[int, torch.Tensor]) -> fx.GraphModule:
    """A copy of `gm` whose placeholders at the given positions read attributes holding the
    tensors (detached: the same memory)."""
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    placeholders = 0
    root = torch.nn.Module()
    for node in gm.graph.nodes:
        if node.op == "placeholder" and placeholders in constants:
            name = f"_mlfuse_frozen_{placeholders}"
            setattr(root, name, constants[placeholders].detach())
            env[node] = graph.get_attr(name)
            env[node].meta = dict(node.meta)
        else:
            env[node] = graph.node_copy(node, lambda n: env[n])
            if node.op == "get_attr":
                setattr(root, node.target, operator.attrgetter(node.target)(gm))
        placeholders += node.op == "placeholder"
    return fx.GraphModule(root, graph)


def make_backend(**options: Any) -> Callable:
    """A torch.compile backend; `options` go to mlfuse.compile (planner, fuse, fast_math...),
    and so do the ones given as torch.compile(model, backend="mlfuse", options={...})."""
    defaults = _compile_options(options, None)

    def backend(gm: fx.GraphModule, example_inputs: Sequence[Any], options: dict | None = None,
                **kwargs: Any) -> Callable:
        _setup_logging()
        compile_options = _compile_options(defaults, options)
        if torch.is_grad_enabled() and any(getattr(x, "requires_grad", False) for x in example_inputs):
            # mlfuse compiles inference graphs only; training keeps torch's autograd
            report = GraphReport(index=len(_REPORTS), fallback="gradients are required: mlfuse compiles "
                                 "inference only (use torch.no_grad() or torch.inference_mode())")
            _REPORTS.append(report)
            log.info("%s", report.summary())
            return gm.forward
        from torch._dynamo.backends.common import aot_autograd

        freeze = compile_options.pop("freeze", True)

        def fw_compiler(graph_module: fx.GraphModule, inputs: Sequence[Any]) -> Callable:
            try:
                frozen = _freezable_inputs(graph_module, example_inputs) if freeze else {}
                if frozen:
                    return FrozenGraph(graph_module, frozen, compile_options)
                return _fast_callable(compile_fx_graph(graph_module, inputs, compile_options))
            except Exception as e:  # a bug here must not fail the user's model: run it eagerly
                report = GraphReport(index=len(_REPORTS), fallback=f"internal error: {type(e).__name__}: {e}")
                _REPORTS.append(report)
                log.warning("%s", report.summary())
                return graph_module

        return aot_autograd(fw_compiler=fw_compiler, decompositions=decompositions())(gm, example_inputs)

    return backend


mlfuse_backend = make_backend()
