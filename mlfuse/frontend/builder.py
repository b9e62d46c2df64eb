"""Build graph-dialect functions from Python with numpy-like calls.

    b = GraphBuilder()
    x = b.input("x", (64, 128), "f32")
    y = b.exp(x - b.reduce_max(x, axis=-1, keepdims=True))
    b.output(y / y.sum(axis=-1, keepdims=True))
    module = b.module()

`Tensor`s overload + - * / ** unary -, abs(), @ and < <= > >=; Python scalars
become splat constants of the other operand's dtype, and numpy's implicit
broadcasting becomes explicit `graph.broadcast`s (the graph dialect has none).
`==` is not overloaded so that tensors stay hashable: use `b.equal`/`b.not_equal`.

Every op is checked by its verifier as soon as it is built, so a mistake (a
shape or dtype mismatch, a bad axis) raises `ValueError` at the line that made it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    ModuleOp,
    TensorType,
    bf16,
    i1,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from mlfuse.dialects import graph

# The graph dialect's table of element types, plus bf16 (a graph type without a
# numpy dtype: the CPU backend rejects it, see mlfuse.diagnostics.reject_bf16).
ELEMENT_TYPES: dict[str, Attribute] = {name: t for name, (t, _) in graph.ELEMENT_TYPES.items()} | {"bf16": bf16}

# numpy dtype -> element type, from the same table; the ONNX importer uses it too.
NUMPY_ELEMENT_TYPES: dict[np.dtype, Attribute] = {dtype: t for t, dtype in graph.ELEMENT_TYPES.values()}

Scalar = bool | int | float | np.generic
Operand = Any  # a Tensor, a Python/numpy scalar or an array


def element_type(dtype: str | np.dtype | type | Attribute) -> Attribute:
    """The xDSL element type of "f32", np.float32, np.dtype('float32') or f32 itself."""
    if isinstance(dtype, Float16Type | BFloat16Type | Float32Type | Float64Type | IntegerType):
        if isinstance(dtype, IntegerType) and not graph.is_supported_element_type(dtype):
            raise ValueError(f"unsupported element type {dtype}")
        return dtype
    if isinstance(dtype, str) and dtype in ELEMENT_TYPES:
        return ELEMENT_TYPES[dtype]
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        np_dtype = None
    if np_dtype is not None and np_dtype in NUMPY_ELEMENT_TYPES:
        return NUMPY_ELEMENT_TYPES[np_dtype]
    raise ValueError(
        f"unsupported dtype {dtype!r} (expected one of {', '.join(ELEMENT_TYPES)} "
        "or the matching numpy dtype)"
    )


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """numpy's broadcast of several shapes; ValueError when they do not broadcast.

    The one implementation of implicit broadcasting, for the builder and the ONNX importer."""
    return tuple(int(d) for d in np.broadcast_shapes(*(tuple(s) for s in shapes)))


def broadcast_op(value: SSAValue, shape: Sequence[int]) -> graph.BroadcastOp | None:
    """numpy's broadcast_to of `value` as an explicit graph.broadcast (leading dimensions
    are new, size-1 dimensions stretch); None when `value` has `shape` already, ValueError
    when it cannot be broadcast to it."""
    src, shape = graph.shape_of(value), tuple(int(d) for d in shape)
    if src == shape:
        return None
    offset = len(shape) - len(src)
    if offset < 0 or any(n not in (1, shape[offset + i]) for i, n in enumerate(src)):
        raise ValueError(f"cannot broadcast shape {src} to {shape}")
    return graph.BroadcastOp(value, range(offset, len(shape)), shape)


def dtype_name(t: Attribute) -> str:
    return "bf16" if isinstance(t, BFloat16Type) else str(t)


def _normalize_axis(axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"{what}: axis {axis} is out of range for rank {rank}")
    return axis % rank


def scalar_of(value: Scalar, el: Attribute) -> float | int:
    """`value` as a Python number of element type `el`, refusing lossy conversions."""
    if isinstance(value, np.generic):
        value = value.item()
    if graph.is_float(el):
        return float(value)
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"scalar {value} cannot be combined with a {dtype_name(el)} tensor without a cast")
    if el == i1 and value not in (0, 1):
        raise ValueError(f"scalar {value} cannot be combined with an i1 tensor")
    return int(value)


def _is_scalar(value: Any) -> bool:
    return isinstance(value, bool | numbers.Number | np.generic)


class Tensor:
    """A value of the function being built: its shape, dtype and the SSA value behind it."""

    __array_ufunc__ = None  # `np.float32(2) * t` must call Tensor.__rmul__, not numpy

    def __init__(self, builder: GraphBuilder, value: SSAValue):
        self.builder = builder
        self.value = value

    # --- type ------------------------------------------------------------------

    @property
    def type(self) -> TensorType:
        return graph.tensor_of(self.value)

    @property
    def shape(self) -> tuple[int, ...]:
        return graph.shape_of(self.value)

    @property
    def element_type(self) -> Attribute:
        return graph.element_type_of(self.value)

    @property
    def dtype(self) -> str:
        return dtype_name(self.element_type)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return f"Tensor({self.type})"

    def __bool__(self) -> bool:
        raise TypeError("a symbolic Tensor has no truth value (use GraphBuilder.where to select)")

    # --- operators -------------------------------------------------------------

    def __add__(self, other: Operand) -> Tensor:
        return self.builder.add(self, other)

    def __radd__(self, other: Operand) -> Tensor:
        return self.builder.add(other, self)

    def __sub__(self, other: Operand) -> Tensor:
        return self.builder.sub(self, other)

    def __rsub__(self, other: Operand) -> Tensor:
        return self.builder.sub(other, self)

    def __mul__(self, other: Operand) -> Tensor:
        return self.builder.mul(self, other)

    def __rmul__(self, other: Operand) -> Tensor:
        return self.builder.mul(other, self)

    def __truediv__(self, other: Operand) -> Tensor:
        return self.builder.div(self, other)

    def __rtruediv__(self, other: Operand) -> Tensor:
        return self.builder.div(other, self)

    def __pow__(self, other: Operand) -> Tensor:
        return self.builder.pow(self, other)

    def __rpow__(self, other: Operand) -> Tensor:
        return self.builder.pow(other, self)

    def __matmul__(self, other: Tensor) -> Tensor:
        return self.builder.matmul(self, other)

    def __rmatmul__(self, other: Tensor) -> Tensor:
        return self.builder.matmul(other, self)

    def __neg__(self) -> Tensor:
        return self.builder.neg(self)

    def __abs__(self) -> Tensor:
        return self.builder.abs(self)

    def __lt__(self, other: Operand) -> Tensor:
        return self.builder.less(self, other)

    def __le__(self, other: Operand) -> Tensor:
        return self.builder.less_equal(self, other)

    def __gt__(self, other: Operand) -> Tensor:
        return self.builder.greater(self, other)

    def __ge__(self, other: Operand) -> Tensor:
        return self.builder.greater_equal(self, other)

    def __getitem__(self, key: Any) -> Tensor:
        return self.builder.getitem(self, key)

    # --- numpy-style methods ----------------------------------------------------

    def sum(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return self.builder.reduce_sum(self, axis, keepdims)

    def mean(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return self.builder.reduce_mean(self, axis, keepdims)

    def max(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return self.builder.reduce_max(self, axis, keepdims)

    def min(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return self.builder.reduce_min(self, axis, keepdims)

    def prod(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return self.builder.reduce_prod(self, axis, keepdims)

    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        return self.builder.reshape(self, shape)  # type: ignore[arg-type]

    def transpose(self, *perm: int | Sequence[int]) -> Tensor:
        if len(perm) == 1 and not isinstance(perm[0], int):
            perm = tuple(perm[0])
        return self.builder.transpose(self, perm or None)  # type: ignore[arg-type]

    @property
    def T(self) -> Tensor:
        return self.builder.transpose(self)

    def astype(self, dtype: str | np.dtype | type | Attribute) -> Tensor:
        return self.builder.cast(self, dtype)


class GraphBuilder:
    """Builds one `func.func` of graph ops; `module()` returns it in a module."""

    def __init__(self, name: str = "main"):
        self.name = name
        self._body = Region(Block())
        self._input_names: list[str] = []
        self._outputs: list[Tensor] = []

    @property
    def _block(self) -> Block:
        return self._body.block

    # --- function interface ------------------------------------------------------

    def input(
        self, name: str, shape: Sequence[int], dtype: str | np.dtype | type | Attribute = "f32"
    ) -> Tensor:
        if not SSAValue.is_valid_name(name) or name[0].isdigit():
            raise ValueError(f"input name {name!r} is not a valid SSA name ([A-Za-z_$.-][\\w$.-]*)")
        if name in self._input_names:
            raise ValueError(f"input {name!r} is declared twice")
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"input {name!r} has a negative dimension in shape {shape}")
        arg = self._block.insert_arg(TensorType(element_type(dtype), shape), len(self._block.args))
        arg.name_hint = name
        self._input_names.append(name)
        return Tensor(self, arg)

    def output(self, *tensors: Tensor) -> None:
        """Add results of the function (may be called several times; order is kept)."""
        if not tensors:
            raise ValueError("output() needs at least one tensor")
        self._outputs.extend(self._own(t, "output") for t in tensors)

    def function(self) -> func.FuncOp:
        """A fresh `func.func` holding everything built so far (the builder stays usable)."""
        if not self._outputs:
            raise ValueError(f"function @{self.name} has no outputs: call output(...) first")
        mapping: dict[SSAValue, SSAValue] = {}
        body = Region()
        self._body.clone_into(body, value_mapper=mapping)
        results = [mapping.get(t.value, t.value) for t in self._outputs]
        body.block.add_op(func.ReturnOp(*results))
        inputs = [a.type for a in self._block.args]
        outputs = [t.type for t in self._outputs]
        return func.FuncOp(self.name, (inputs, outputs), body)

    def module(self) -> ModuleOp:
        module = ModuleOp([self.function()])
        module.verify()
        return module

    # --- plumbing ------------------------------------------------------------------

    def _own(self, t: Any, what: str) -> Tensor:
        if not isinstance(t, Tensor):
            raise ValueError(f"{what} expects a Tensor, got {type(t).__name__}")
        if t.builder is not self:
            raise ValueError(f"{what}: the tensor belongs to another GraphBuilder")
        return t

    def _emit(self, op: Operation) -> Tensor:
        """Verify `op` now (so errors point at the Python call) and append it."""
        try:
            op.verify()
        except VerifyException as e:
            message = str(e).split("\n")[0].removeprefix("Operation does not verify: ")
            raise ValueError(message) from None
        self._block.add_op(op)
        return Tensor(self, op.results[0])

    def constant(self, value: Any, dtype: str | np.dtype | type | Attribute | None = None) -> Tensor:
        """A `graph.constant` from a numpy array (or anything `np.asarray` accepts)."""
        array = np.asarray(value)
        el = element_type(dtype if dtype is not None else array.dtype)
        if graph.is_int(el) and array.dtype.kind == "f" and not np.all(np.trunc(array) == array):
            raise ValueError(f"constant with non-integer values cannot have dtype {dtype_name(el)}")
        array = array.astype(graph.numpy_dtype(el))
        return self._emit(graph.ConstantOp.from_numpy(array, el))

    def full(
        self, shape: Sequence[int], value: Scalar, dtype: str | np.dtype | type | Attribute = "f32"
    ) -> Tensor:
        """A splat: a rank-0 constant broadcast to `shape` (xDSL would store every element)."""
        el = element_type(dtype)
        scalar = DenseIntOrFPElementsAttr.from_list(TensorType(el, []), [scalar_of(value, el)])
        constant = self._emit(graph.ConstantOp(scalar))
        if not shape:
            return constant
        return self._emit(graph.BroadcastOp(constant.value, [], list(shape)))

    def _operand(self, value: Any, like: Tensor, what: str) -> Tensor:
        """A Tensor for `value`; scalars and arrays take the dtype of `like`."""
        if isinstance(value, Tensor):
            return self._own(value, what)
        if _is_scalar(value):
            return self.full(like.shape, value, like.element_type)
        if isinstance(value, np.ndarray | list | tuple):
            return self.constant(value, like.element_type)
        raise ValueError(f"{what}: cannot use a {type(value).__name__} as an operand")

    def _tensors(self, values: Sequence[Any], what: str) -> list[Tensor]:
        """Turn a mix of Tensors and scalars into Tensors of one dtype and one (broadcast) shape."""
        tensors = [v for v in values if isinstance(v, Tensor)]
        if not tensors:
            raise ValueError(f"{what} needs at least one Tensor operand")
        like = self._own(tensors[0], what)
        return self._broadcast_all([self._operand(v, like, what) for v in values], what)

    def _broadcast_all(self, tensors: list[Tensor], what: str) -> list[Tensor]:
        try:
            shape = broadcast_shapes(*(t.shape for t in tensors))
        except ValueError:
            shapes = " and ".join(str(t.shape) for t in tensors)
            raise ValueError(f"{what}: shapes {shapes} cannot be broadcast together") from None
        return [self.broadcast_to(t, shape) for t in tensors]

    def _same_dtype(self, tensors: Sequence[Tensor], what: str) -> None:
        dtypes = {t.dtype for t in tensors}
        if len(dtypes) > 1:
            raise ValueError(
                f"{what}: operand dtypes differ ({', '.join(t.dtype for t in tensors)}); "
                "cast one of them first"
            )

    # --- elementwise -----------------------------------------------------------------

    def _unary(self, op_type: type[graph.UnaryElementwiseOp], x: Tensor) -> Tensor:
        return self._emit(op_type(self._own(x, op_type.name).value))

    def neg(self, x: Tensor) -> Tensor:
        return self._unary(graph.NegOp, x)

    def abs(self, x: Tensor) -> Tensor:
        return self._unary(graph.AbsOp, x)

    def exp(self, x: Tensor) -> Tensor:
        return self._unary(graph.ExpOp, x)

    def log(self, x: Tensor) -> Tensor:
        return self._unary(graph.LogOp, x)

    def sqrt(self, x: Tensor) -> Tensor:
        return self._unary(graph.SqrtOp, x)

    def rsqrt(self, x: Tensor) -> Tensor:
        return self._unary(graph.RsqrtOp, x)

    def reciprocal(self, x: Tensor) -> Tensor:
        return self._unary(graph.ReciprocalOp, x)

    def tanh(self, x: Tensor) -> Tensor:
        return self._unary(graph.TanhOp, x)

    def erf(self, x: Tensor) -> Tensor:
        return self._unary(graph.ErfOp, x)

    def sin(self, x: Tensor) -> Tensor:
        return self._unary(graph.SinOp, x)

    def cos(self, x: Tensor) -> Tensor:
        return self._unary(graph.CosOp, x)

    def sigmoid(self, x: Tensor) -> Tensor:
        return self._unary(graph.SigmoidOp, x)

    def relu(self, x: Tensor) -> Tensor:
        return self._unary(graph.ReluOp, x)

    def gelu(self, x: Tensor, approximate: str = "none") -> Tensor:
        if approximate not in ("none", "tanh"):
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        return self._emit(graph.GeluOp(self._own(x, "graph.gelu").value, approximate))

    def _binary(self, op_type: type[graph.BinaryElementwiseOp], a: Any, b: Any) -> Tensor:
        lhs, rhs = self._tensors([a, b], op_type.name)
        self._same_dtype([lhs, rhs], op_type.name)
        return self._emit(op_type(lhs.value, rhs.value))

    def add(self, a: Any, b: Any) -> Tensor:
        return self._binary(graph.AddOp, a, b)

    def sub(self, a: Any, b: Any) -> Tensor:
        return self._binary(graph.SubOp, a, b)

    def mul(self, a: Any, b: Any) -> Tensor:
        return self._binary(graph.MulOp, a, b)

    def div(self, a: Any, b: Any) -> Tensor:
        return self._binary(graph.DivOp, a, b)

    def maximum(self, a: Any, b: Any) -> Tensor:
        return self._binary(graph.MaxOp, a, b)

    def minimum(self, a: Any, b: Any) -> Tensor:
        return self._binary(graph.MinOp, a, b)

    def pow(self, a: Any, b: Any) -> Tensor:
        return self._binary(graph.PowOp, a, b)

    def compare(self, predicate: str, a: Any, b: Any) -> Tensor:
        if predicate not in graph.COMPARE_PREDICATES:
            raise ValueError(
                f"compare: unknown predicate {predicate!r} "
                f"(expected one of {', '.join(graph.COMPARE_PREDICATES)})"
            )
        lhs, rhs = self._tensors([a, b], "graph.compare")
        self._same_dtype([lhs, rhs], "graph.compare")
        return self._emit(graph.CompareOp(predicate, lhs.value, rhs.value))

    def equal(self, a: Any, b: Any) -> Tensor:
        return self.compare("eq", a, b)

    def not_equal(self, a: Any, b: Any) -> Tensor:
        return self.compare("ne", a, b)

    def less(self, a: Any, b: Any) -> Tensor:
        return self.compare("lt", a, b)

    def less_equal(self, a: Any, b: Any) -> Tensor:
        return self.compare("le", a, b)

    def greater(self, a: Any, b: Any) -> Tensor:
        return self.compare("gt", a, b)

    def greater_equal(self, a: Any, b: Any) -> Tensor:
        return self.compare("ge", a, b)

    def where(self, cond: Tensor, a: Any, b: Any) -> Tensor:
        """`cond ? a : b` elementwise; `a` and `b` may be scalars (one must be a Tensor)."""
        cond = self._own(cond, "graph.select")
        if cond.dtype != "i1":
            raise ValueError(f"graph.select: the condition must be an i1 tensor, got {cond.dtype}")
        values = self._tensors([a, b], "graph.select")
        self._same_dtype(values, "graph.select")
        cond, a_t, b_t = self._broadcast_all([cond, *values], "graph.select")
        return self._emit(graph.SelectOp(cond.value, a_t.value, b_t.value))

    select = where

    def cast(self, x: Tensor, dtype: str | np.dtype | type | Attribute) -> Tensor:
        return self._emit(graph.CastOp(self._own(x, "graph.cast").value, element_type(dtype)))

    # --- broadcast and reductions ------------------------------------------------------

    def broadcast_to(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        """numpy's broadcast_to: leading dimensions are new, size-1 dimensions stretch."""
        x = self._own(x, "graph.broadcast")
        try:
            op = broadcast_op(x.value, shape)
        except ValueError as e:
            raise ValueError(f"graph.broadcast: {e}") from None
        return x if op is None else self._emit(op)

    def _axes(self, x: Tensor, axis: int | Sequence[int] | None, what: str) -> list[int]:
        if axis is None:
            return list(range(x.ndim))
        axes = [axis] if isinstance(axis, int) else list(axis)
        normalized = [_normalize_axis(a, x.ndim, what) for a in axes]
        if len(set(normalized)) != len(normalized):
            raise ValueError(f"{what}: repeated axis in {axes}")
        return sorted(normalized)

    def _reduce(
        self, op_type: type[graph.ReduceOp], x: Tensor, axis: int | Sequence[int] | None, keepdims: bool
    ) -> Tensor:
        x = self._own(x, op_type.name)
        return self._emit(op_type(x.value, self._axes(x, axis, op_type.name), keepdims))

    def reduce_sum(self, x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return self._reduce(graph.ReduceSumOp, x, axis, keepdims)

    def reduce_mean(self, x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return self._reduce(graph.ReduceMeanOp, x, axis, keepdims)

    def reduce_max(self, x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return self._reduce(graph.ReduceMaxOp, x, axis, keepdims)

    def reduce_min(self, x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return self._reduce(graph.ReduceMinOp, x, axis, keepdims)

    def reduce_prod(self, x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return self._reduce(graph.ReduceProdOp, x, axis, keepdims)

    sum = reduce_sum
    mean = reduce_mean
    max = reduce_max
    min = reduce_min
    prod = reduce_prod

    # --- data movement ------------------------------------------------------------------

    def transpose(self, x: Tensor, perm: Sequence[int] | None = None) -> Tensor:
        x = self._own(x, "graph.transpose")
        perm = list(reversed(range(x.ndim))) if perm is None else [int(p) for p in perm]
        if sorted(perm) != list(range(x.ndim)):
            raise ValueError(f"graph.transpose: {perm} is not a permutation of 0..{x.ndim - 1}")
        return self._emit(graph.TransposeOp(x.value, perm))

    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        """Row-major reshape; one dimension may be -1 (inferred)."""
        x = self._own(x, "graph.reshape")
        shape = [int(d) for d in shape]
        if shape.count(-1) > 1 or any(d < -1 for d in shape):
            raise ValueError(f"graph.reshape: invalid shape {tuple(shape)}")
        if -1 in shape:
            known = math.prod(d for d in shape if d != -1)
            if known == 0 or x.size % known:
                raise ValueError(f"graph.reshape: cannot reshape {x.shape} to {tuple(shape)}")
            shape[shape.index(-1)] = x.size // known
        if math.prod(shape) != x.size:
            raise ValueError(
                f"graph.reshape: cannot reshape {x.shape} ({x.size} elements) to "
                f"{tuple(shape)} ({math.prod(shape)} elements)"
            )
        return self._emit(graph.ReshapeOp(x.value, shape))

    def slice(
        self,
        x: Tensor,
        start: Sequence[int],
        stop: Sequence[int],
        step: Sequence[int] | None = None,
    ) -> Tensor:
        x = self._own(x, "graph.slice")
        step = [1] * x.ndim if step is None else list(step)
        if not len(start) == len(stop) == len(step) == x.ndim:
            raise ValueError(
                f"graph.slice: start, stop and step need {x.ndim} entries each, "
                f"got {len(start)}, {len(stop)}, {len(step)}"
            )
        return self._emit(graph.SliceOp(x.value, start, stop, step))

    def getitem(self, x: Tensor, key: Any) -> Tensor:
        """numpy basic indexing with static ints, slices (positive steps), `...` and None."""
        x = self._own(x, "getitem")
        items = list(key) if isinstance(key, tuple) else [key]
        if sum(item is Ellipsis for item in items) > 1:
            raise ValueError("an index can only have a single ellipsis ('...')")
        consumed = sum(1 for item in items if item is not None and item is not Ellipsis)
        if consumed > x.ndim:
            raise ValueError(f"too many indices for a tensor of rank {x.ndim}: {key!r}")
        if Ellipsis in items:
            i = items.index(Ellipsis)
            items[i : i + 1] = [slice(None)] * (x.ndim - consumed)
        else:
            items += [slice(None)] * (x.ndim - consumed)
        start, stop, step, out_shape = [], [], [], []
        dim = 0
        for item in items:
            if item is None:
                out_shape.append(1)
                continue
            n = x.shape[dim]
            if isinstance(item, slice):
                a, b, s = item.indices(n)
                if s <= 0:
                    raise ValueError(f"slice {item} has a non-positive step; only positive steps are supported")
                b = max(a, b)
                start.append(a), stop.append(b), step.append(s)
                out_shape.append(len(range(a, b, s)))
            elif isinstance(item, numbers.Integral):
                i = int(item)
                if not -n <= i < n:
                    raise ValueError(f"index {i} is out of bounds for dimension {dim} of size {n}")
                i %= n
                start.append(i), stop.append(i + 1), step.append(1)
            else:
                raise ValueError(
                    f"unsupported index {item!r}: only ints, slices, '...' and None are allowed"
                )
            dim += 1
        result = x
        if (start, stop, step) != ([0] * x.ndim, list(x.shape), [1] * x.ndim):
            result = self.slice(x, start, stop, step)
        if tuple(out_shape) != result.shape:
            result = self.reshape(result, out_shape)
        return result

    def pad(
        self,
        x: Tensor,
        pad_width: int | Sequence[int] | Sequence[Sequence[int]],
        value: Scalar = 0,
    ) -> Tensor:
        """Constant padding with numpy's `pad_width` conventions."""
        x = self._own(x, "graph.pad")
        widths = np.asarray(pad_width, dtype=np.int64)
        try:
            widths = np.broadcast_to(widths, (x.ndim, 2))
        except ValueError:
            raise ValueError(f"graph.pad: pad_width {pad_width!r} does not fit rank {x.ndim}") from None
        if np.any(widths < 0):
            raise ValueError(f"graph.pad: negative padding in {pad_width!r}")
        scalar = scalar_of(value, x.element_type)
        return self._emit(
            graph.PadOp(x.value, [int(w) for w in widths[:, 0]], [int(w) for w in widths[:, 1]], scalar)
        )

    def concat(self, tensors: Iterable[Tensor], axis: int = 0) -> Tensor:
        tensors = [self._own(t, "graph.concat") for t in tensors]
        if not tensors:
            raise ValueError("graph.concat needs at least one tensor")
        self._same_dtype(tensors, "graph.concat")
        rank = tensors[0].ndim
        if any(t.ndim != rank for t in tensors):
            raise ValueError(
                f"graph.concat: ranks differ: {', '.join(str(t.shape) for t in tensors)}"
            )
        axis = _normalize_axis(axis, rank, "graph.concat")
        for t in tensors:
            if any(a != b for d, (a, b) in enumerate(zip(t.shape, tensors[0].shape)) if d != axis):
                raise ValueError(
                    f"graph.concat: shape {t.shape} does not match {tensors[0].shape} "
                    f"outside axis {axis}"
                )
        return self._emit(graph.ConcatOp([t.value for t in tensors], axis))

    concatenate = concat

    # --- contractions --------------------------------------------------------------------

    def matmul(self, a: Tensor, b: Tensor) -> Tensor:
        """numpy.matmul: 1-D operands are vectors, batch dimensions broadcast."""
        a, b = self._own(a, "matmul"), self._own(b, "matmul")
        self._same_dtype([a, b], "matmul")
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("matmul: operands must have rank >= 1")
        if a.ndim == 1:
            return self.reshape(self.matmul(self.reshape(a, (1, a.shape[0])), b), [
                *b.shape[:-2], b.shape[-1]])
        if b.ndim == 1:
            return self.reshape(self.matmul(a, self.reshape(b, (b.shape[0], 1))), a.shape[:-1])
        if a.shape[-1] != b.shape[-2]:
            raise ValueError(
                f"matmul: contraction sizes differ: {a.shape} @ {b.shape} "
                f"({a.shape[-1]} != {b.shape[-2]})"
            )
        if a.ndim == b.ndim == 2:
            return self._emit(graph.MatmulOp(a.value, b.value))
        if b.ndim == 2:
            # (..., M, K) @ (K, N): one 2-D matmul over the folded leading dimensions
            rows = self.reshape(a, (-1, a.shape[-1]))
            return self.reshape(self.matmul(rows, b), (*a.shape[:-1], b.shape[-1]))
        try:
            batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise ValueError(
                f"matmul: batch dimensions {a.shape[:-2]} and {b.shape[:-2]} cannot be broadcast"
            ) from None
        a = self.broadcast_to(a, (*batch, *a.shape[-2:]))
        b = self.broadcast_to(b, (*batch, *b.shape[-2:]))
        return self._emit(graph.BatchMatmulOp(a.value, b.value))

    batch_matmul = matmul

    # --- windows (NCHW) --------------------------------------------------------------------

    @staticmethod
    def _check_nchw(x: Tensor, what: str) -> None:
        if x.ndim != 4:
            raise ValueError(f"{what}: expects a rank-4 (NCHW) tensor, got shape {x.shape}")

    def _emit_window(self, what: str, make: Callable[[], Operation]) -> Tensor:
        """Build a window op; its constructor computes output sizes, which can fail first."""
        try:
            op = make()
        except (IndexError, ZeroDivisionError):
            raise ValueError(
                f"{what}: kernel, strides, pads and dilations need 2, 2, 4 and 2 positive entries"
            ) from None
        return self._emit(op)

    def conv2d(
        self,
        x: Tensor,
        weight: Tensor,
        strides: Sequence[int] = (1, 1),
        pads: Sequence[int] = (0, 0, 0, 0),
        dilations: Sequence[int] = (1, 1),
        groups: int = 1,
    ) -> Tensor:
        """ONNX-style Conv without bias: NCHW input, OIHW weight; pads = [top, left, bottom, right]."""
        x, weight = self._own(x, "graph.conv2d"), self._own(weight, "graph.conv2d")
        self._check_nchw(x, "graph.conv2d input")
        self._check_nchw(weight, "graph.conv2d weight")
        return self._emit_window(
            "graph.conv2d",
            lambda: graph.Conv2dOp(x.value, weight.value, strides, pads, dilations, groups),
        )

    def max_pool2d(
        self,
        x: Tensor,
        kernel: Sequence[int],
        strides: Sequence[int] = (1, 1),
        pads: Sequence[int] = (0, 0, 0, 0),
        dilations: Sequence[int] = (1, 1),
    ) -> Tensor:
        x = self._own(x, "graph.max_pool2d")
        self._check_nchw(x, "graph.max_pool2d")
        return self._emit_window(
            "graph.max_pool2d", lambda: graph.MaxPool2dOp(x.value, kernel, strides, pads, dilations)
        )

    def avg_pool2d(
        self,
        x: Tensor,
        kernel: Sequence[int],
        strides: Sequence[int] = (1, 1),
        pads: Sequence[int] = (0, 0, 0, 0),
        dilations: Sequence[int] = (1, 1),
        count_include_pad: bool = False,
    ) -> Tensor:
        x = self._own(x, "graph.avg_pool2d")
        self._check_nchw(x, "graph.avg_pool2d")
        return self._emit_window(
            "graph.avg_pool2d",
            lambda: graph.AvgPool2dOp(x.value, kernel, strides, pads, dilations, count_include_pad),
        )
