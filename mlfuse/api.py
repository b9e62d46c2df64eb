"""The Python API: parse, run pipelines, compile graphs and call them on numpy arrays."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import hashlib
import json
import math
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, TensorType
from xdsl.passes import PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import ArgSpecParseError

from mlfuse import cache
from mlfuse.abi import ALIGNMENT
from mlfuse.diagnostics import (
    Diagnostic,
    DynamicShapes,
    check_report_paths,
    internal_errors,
    location_of,
    parse_located,
    reject_bf16,
    verify_located,
)
from mlfuse.dialects import graph

VERSION = "0.1.0"


def parse(
    source: str | ModuleOp,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    input_values: Mapping[str, np.ndarray] | None = None,
) -> ModuleOp:
    """A verified module from a ModuleOp, IR text, a `.mlir` path or an `.onnx` path
    (`input_shapes` and `input_values`: see mlfuse.frontend.onnx.import_onnx)."""
    from mlfuse.frontend.stablehlo import convert_if_stablehlo  # StableHLO (jax) -> graph, in place

    if isinstance(source, ModuleOp):
        return convert_if_stablehlo(source)
    if _is_onnx_path(source):
        return _import_onnx(str(source), str(source), input_shapes, input_values)
    from mlfuse.ir import make_context

    name = "<input>"
    text = str(source)
    source_text: str | bytes = text
    if "\n" not in text and text.endswith(".mlir"):
        if not os.path.exists(text):
            raise Diagnostic(f"no such file: {text}")
        name = text
        try:
            with open(text, "rb") as f:  # parse_located decodes, replacing bytes that are not UTF-8
                source_text = f.read()
        except OSError as e:
            raise Diagnostic(f"could not open input file: {e.strerror or e}", text) from None
    module = parse_located(make_context(), source_text, name)
    verify_located(module)
    return convert_if_stablehlo(module)


def _is_onnx_path(source: Any) -> bool:
    return isinstance(source, str | os.PathLike) and str(source).endswith(".onnx")


def _import_onnx(model: str | bytes, name: str, input_shapes: Mapping[str, Sequence[int]] | None,
                 input_values: Mapping[str, np.ndarray] | None) -> ModuleOp:
    """An ONNX model (its path, or its file's bytes) imported; `name` is the path diagnostics cite."""
    try:
        from mlfuse.frontend.onnx import import_onnx
    except ImportError as e:
        raise Diagnostic(f"reading {name} needs the onnx extra (pip install 'mlfuse[onnx]'): {e}") from None
    return import_onnx(model, input_shapes=input_shapes, input_values=input_values, name=name)


def all_passes() -> dict:
    from xdsl.transforms import get_all_passes

    from mlfuse.universe import MLFUSE_PASSES

    return {**get_all_passes(), **MLFUSE_PASSES}


def run_pipeline(
    module: ModuleOp, passes: Sequence[str], ctx: Context | None = None, verify_each: bool | None = None,
    verify_result: bool = True, bf16_checked: bool = False, source: tuple[ModuleOp, Sequence[str]] | None = None,
) -> ModuleOp:
    """Apply passes given as `mlfuse-opt -p` specs and verify the result (unless not
    `verify_result`: the caller has it checked otherwise). A pipeline that converts to
    LLVM first rejects bf16 (diagnostics.reject_bf16) unless the caller has (`bf16_checked`).

    A pass that fails is an internal error whose reproducer is the module as the
    pipeline got it, a copy taken up front; or, with `source` = (an untouched module,
    the passes that made `module` from it), that module and all the passes, and no copy
    (MobileNetV2 at convert-to-llvm: 0.04-0.17 s of its cold compile).

    `verify_each` verifies after every pass as well (default: $MLFUSE_VERIFY_EACH, off):
    verification costs about as much as the passes on whole models (ResNet-18: 6 s of a
    15 s compile), and input is verified when it is parsed. `mlfuse-opt` always verifies
    after each pass, as xDSL does."""
    from mlfuse.ir import make_context

    ctx = ctx or make_context()
    try:
        pipeline = PassPipeline.parse_spec(all_passes(), ",".join(passes))
    except (Exception, ArgSpecParseError) as e:  # xDSL's ArgSpecParseError is a BaseException
        lines = [line.strip() for line in str(e).split("\n") if line.strip()] or [type(e).__name__]
        raise Diagnostic(f"invalid pass pipeline '{','.join(passes)}': {lines[-1]}") from None
    check_report_paths(pipeline.passes)
    if not bf16_checked and any(p.name == "convert-to-llvm" for p in pipeline.passes):
        reject_bf16(module, "CPU")
    # a pass that crashes on verified input is mlfuse's bug: an internal error with a reproducer
    spec = ",".join(str(p.pipeline_pass_spec()) for p in pipeline.passes)
    reproducer = module if source is None else source[0]
    if source is not None:
        spec = ",".join([*source[1], spec])
    with internal_errors("pass pipeline", reproducer, [f"RUN: mlfuse-opt %s -p '{spec}'"], changes_module=source is None):
        if verify_each is None:
            verify_each = os.environ.get("MLFUSE_VERIFY_EACH", "0") not in ("", "0")
        for i, p in enumerate(pipeline.passes):
            p.apply(ctx, module)
            if verify_each or (verify_result and i == len(pipeline.passes) - 1):
                verify_located(module)
    return module


def module_text(module: ModuleOp, printer: type[Printer] = Printer) -> str:
    from io import StringIO

    out = StringIO()
    printer(stream=out).print_op(module)
    return out.getvalue()


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: np.dtype
    name: str


def signature(fn: func.FuncOp) -> tuple[list[TensorSpec], list[TensorSpec]]:
    def specs(types, names_attr: str, prefix: str) -> list[TensorSpec]:
        names = fn.attributes.get(names_attr)
        if isinstance(names, ArrayAttr):
            names = [n.data for n in names.data]  # type: ignore[union-attr]
        elif prefix == "arg" and fn.body.blocks:  # the SSA names of the text IR: %x -> "x"
            hints = [a.name_hint for a in fn.body.block.args]
            names = hints if all(hints) and len(set(hints)) == len(hints) else []
        else:
            names = []
        dtypes = fn.attributes.get(names_attr.replace("_names", "_dtypes"))
        narrow = [d.data for d in dtypes.data] if isinstance(dtypes, ArrayAttr) else []  # type: ignore[union-attr]
        result = []
        for i, t in enumerate(types):
            if not isinstance(t, TensorType):
                raise Diagnostic(f"@{fn.sym_name.data}: argument and result types must be tensors, got {t}",
                                 location_of(fn))
            el = t.get_element_type()
            if isinstance(el, graph.BFloat16Type):
                raise Diagnostic(f"@{fn.sym_name.data}: bf16 tensors are not supported by the CPU backend (numpy has no bf16)",
                                 location_of(fn))
            dtype = graph.numpy_dtype(el)
            if i < len(narrow) and narrow[i]:  # a narrow ONNX type carried as its storage: ml_dtypes' arrays
                dtype = narrow_dtype(narrow[i], dtype, fn)
            name = names[i] if i < len(names) and names[i] else f"{prefix}{i}"
            result.append(TensorSpec(tuple(t.get_shape()), dtype, str(name)))
        return result

    return specs(fn.function_type.inputs.data, "mlfuse.input_names", "arg"), specs(
        fn.function_type.outputs.data, "mlfuse.output_names", "result"
    )


def ml_dtype(name: str) -> np.dtype | None:
    """ml_dtypes' dtype of that name (bfloat16, float8_e4m3fn, int4...), or None."""
    import ml_dtypes

    dtype = getattr(ml_dtypes, name, None) if name.isidentifier() else None
    return np.dtype(dtype) if isinstance(dtype, type) and issubclass(dtype, np.generic) else None


def narrow_dtype(name: str, storage: np.dtype, fn: func.FuncOp) -> np.dtype:
    """The ml_dtypes dtype `name` (mlfuse.input_dtypes), which must have the storage's width."""
    dtype = ml_dtype(name)
    if dtype is None or dtype.itemsize != storage.itemsize:
        raise Diagnostic(f"@{fn.sym_name.data}: '{name}' is not an ml_dtypes type of {storage.itemsize} byte(s)",
                         location_of(fn))
    return dtype


def dtype_token(dtype: np.dtype) -> str:
    """How a cache entry names a dtype: ml_dtypes' by name (their str is only '<V1')."""
    return dtype.name if dtype.type.__module__ == "ml_dtypes" else dtype.str


def dtype_of_token(token: str) -> np.dtype:
    return ml_dtype(token) or np.dtype(token)


def aligned_empty(shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """An uninitialized C-contiguous array whose data is 64-byte aligned."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(int(n) for n in shape) * dtype.itemsize  # 0 for a zero-size tensor (math: np.prod took 10 us)
    try:
        raw = np.empty(max(1, nbytes) + ALIGNMENT, dtype=np.uint8)
    except MemoryError:
        raise Diagnostic(f"cannot allocate {nbytes} bytes for a {dtype} array of shape {list(shape)}: out of memory") from None
    offset = (-address_of(raw)) % ALIGNMENT
    return raw[offset : offset + nbytes].view(dtype).reshape(shape)


def address_of(a: np.ndarray) -> int:
    """The address of a C-contiguous array's data. ndarray.ctypes builds numpy's Python-level
    _ctypes object: after a model's kernels have pushed Python's own data out of the caches,
    two of them took 26 us, ctypes.addressof of a c_char over the buffer 9 us. Read-only and
    empty arrays have no writable byte to view, and take the slow way."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))  # pyright: ignore[reportArgumentType]  (numpy stubs lack __buffer__)
    except (TypeError, ValueError):
        return a.ctypes.data


class CompiledFunction:
    """A compiled graph function: call it with numpy arrays, get a tuple of arrays.

    Inputs are positional in signature order or keyword by name (ONNX names for
    imported models); `out=` passes preallocated outputs (a sequence, one per result).
    Calls are safe from any number of threads: each call runs on an arena of its
    own, taken from a small pool (see _take_arena).
    """

    # Free arenas kept between calls; more concurrent calls than this allocate
    # arenas of their own and drop them afterwards.
    MAX_POOLED_ARENAS = 8
    # Results of allocating calls that are watched for reuse (see _recycled_outputs),
    # for functions whose outputs take at least RECYCLE_MIN_BYTES (16 pages): as many
    # sets as fit in RECYCLED_BYTES, at least 2 (a loop `y = f(x)`) and at most
    # MAX_RECYCLED_SETS; a call looks at RECYCLE_SCAN of them at most.
    RECYCLE_MIN_BYTES = 1 << 16
    RECYCLED_BYTES = 32 << 20
    MAX_RECYCLED_SETS = 64
    RECYCLE_SCAN = 4

    def __init__(self, jit, entry: str, inputs: list[TensorSpec], outputs: list[TensorSpec]):
        from mlfuse.backend.team import FAULT_WATCH_BYTES, TeamSizer

        self.jit = jit
        self.entry = entry
        self.inputs = inputs
        self.outputs = outputs
        address = jit.address(entry)
        # Intermediates live in an arena; the compiled code writes it, so two calls
        # at once need two arenas. list.pop and list.append are atomic, so the pool
        # needs no lock (and a fork can never leave one held in the child).
        self.arena_bytes = jit.global_int(f"{entry}__arena_bytes")
        self._arenas = [self._new_arena()] if self.arena_bytes else []
        self._issued: list[tuple[np.ndarray, ...]] = []  # recent allocating calls' results
        # A loader of this function compiled for outputs aligned to 16 bytes only (what
        # np.empty gives), set by load_cpu; the compiled variant once loaded.
        self.loose_outputs: Any = None
        self._loose: CompiledFunction | None = None
        self.output_alignment = ALIGNMENT  # what the compiled code assumes of outputs
        output_bytes = sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in outputs)
        self._recycle = output_bytes >= self.RECYCLE_MIN_BYTES
        self._recycled_sets = max(2, min(self.MAX_RECYCLED_SETS, self.RECYCLED_BYTES // max(1, output_bytes)))
        # the full team or one thread, by the calls' times
        self._team = TeamSizer(watch_faults=output_bytes >= FAULT_WATCH_BYTES)
        n_args = len(inputs) + len(outputs) + (self.arena_bytes > 0)
        self._fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * n_args)(address)

    def _new_arena(self) -> tuple[np.ndarray, int]:
        """An arena and its address (ndarray.ctypes costs microseconds: taken once)."""
        arena = aligned_empty((self.arena_bytes,), np.uint8)
        return arena, arena.ctypes.data

    def _take_arena(self) -> tuple[np.ndarray, int] | None:
        """An arena for one call: a pooled one, else a new one (other calls hold each)."""
        if not self.arena_bytes:
            return None
        try:
            return self._arenas.pop()
        except IndexError:
            return self._new_arena()

    def _give_arena(self, arena: tuple[np.ndarray, int] | None) -> None:
        """Return a call's arena to the pool, unless the pool is full."""
        if arena is not None and len(self._arenas) < self.MAX_POOLED_ARENAS:
            self._arenas.append(arena)

    def _bind(self, arrays: Sequence[Any], named: Mapping[str, Any]) -> list[np.ndarray]:
        if len(arrays) > len(self.inputs):
            raise ValueError(f"@{self.entry} takes {len(self.inputs)} inputs, got {len(arrays)}")
        if named:
            by_name = {s.name: i for i, s in enumerate(self.inputs)}
            bound = list(arrays) + [None] * (len(self.inputs) - len(arrays))
            for name, value in named.items():
                if name not in by_name:
                    raise ValueError(f"@{self.entry} has no input named '{name}' (inputs: {', '.join(by_name)})")
                if by_name[name] < len(arrays):
                    raise ValueError(f"@{self.entry}: input '{name}' given both by position and by keyword")
                bound[by_name[name]] = value
            missing = [self.inputs[i].name for i, a in enumerate(bound) if a is None]
            if missing:
                raise ValueError(f"@{self.entry}: missing inputs {', '.join(missing)}")
            arrays = bound
        if len(arrays) != len(self.inputs):
            raise ValueError(f"@{self.entry} takes {len(self.inputs)} inputs, got {len(arrays)}")
        checked = []
        for spec, a in zip(self.inputs, arrays):
            a = np.asarray(a)
            if a.shape != spec.shape:
                raise ValueError(f"input '{spec.name}' of @{self.entry} must have shape {spec.shape}, got {a.shape}")
            if a.dtype != spec.dtype:
                raise ValueError(f"input '{spec.name}' of @{self.entry} must have dtype {spec.dtype}, got {a.dtype}")
            checked.append(np.ascontiguousarray(a))
        return checked

    def _recycled_outputs(self) -> tuple[np.ndarray, ...] | None:
        """The results of an earlier allocating call that nobody holds any more, or None.

        A loop `y = f(x)` drops the previous y right after the call that makes the next
        one, so with two sets in rotation every call writes warm memory: fresh pages
        would cost a page fault and the kernel's zeroing each (LayerNorm at 65536x1024:
        about as long as the kernel itself). Results kept a while and then dropped
        together (`ys = [f(x) for x in batch]`) come back as well: malloc gives the
        freed memory back to the system, and a softmax over 1x4x128x128 took 62 page
        faults and 181 us a call that way, 58 us when each result is dropped at once
        (onnxruntime, whose allocator keeps its memory: 45 us). A set is free when its
        arrays and their memory are referenced by the set alone (no array, view or
        torch tensor of them left); a call looks at RECYCLE_SCAN sets at most, so
        that many results still held cost it little. list.pop and append are atomic,
        so concurrent calls never take one set twice."""
        for _ in range(min(len(self._issued), self.RECYCLE_SCAN)):
            try:
                candidate = self._issued.pop(0)
            except IndexError:
                return None
            if _held_by_tuple_only(candidate):
                return candidate
            self._issued.append(candidate)
        return None

    def _issue(self, outputs: tuple[np.ndarray, ...]) -> None:
        if len(self._issued) < self._recycled_sets:
            self._issued.append(outputs)

    def _outputs(self, out: Sequence[np.ndarray] | np.ndarray | None) -> list[np.ndarray]:
        if out is None:
            recycled = self._recycled_outputs() if self._recycle else None
            if recycled is not None:
                return list(recycled)
            return [aligned_empty(s.shape, s.dtype) for s in self.outputs]
        if isinstance(out, np.ndarray):
            out = [out]
        if len(out) != len(self.outputs):
            raise ValueError(f"@{self.entry} has {len(self.outputs)} outputs, got {len(out)} in out=")
        for spec, o in zip(self.outputs, out):
            if not isinstance(o, np.ndarray) or o.shape != spec.shape or o.dtype != spec.dtype:
                raise ValueError(f"out= array for '{spec.name}' must be a {spec.dtype} array of shape {spec.shape}")
            if not o.flags.c_contiguous or not o.flags.writeable:
                raise ValueError(f"out= array for '{spec.name}' must be C-contiguous and writeable")
        return list(out)

    def _check_disjoint(self, out: Sequence[np.ndarray], addresses: Sequence[int], inputs: Sequence[np.ndarray],
                        input_addresses: Sequence[int]) -> None:
        """Raise if an out= array shares memory with an input or another out= array: the
        kernels would overwrite what they read, or one output the other. All are
        C-contiguous, so each covers exactly [address, address + nbytes), and integer tests
        tell (np.shares_memory was slow on a call's cold path)."""
        for spec, o, start in zip(self.outputs, out, addresses):
            if o.nbytes and any(a.nbytes and s < start + o.nbytes and start < s + a.nbytes
                                for a, s in zip(inputs, input_addresses)):
                raise ValueError(f"out= array for '{spec.name}' overlaps an input")
        if len(out) < 2:
            return
        spans = sorted((a, a + o.nbytes, s.name) for s, o, a in zip(self.outputs, out, addresses) if o.nbytes)
        reach = None  # the span seen so far that ends last
        for start, end, name in spans:
            if reach is not None and start < reach[1]:
                raise ValueError(f"out= arrays for '{reach[2]}' and '{name}' overlap: each output needs memory of its own")
            if reach is None or end > reach[1]:
                reach = (start, end, name)

    def __call__(self, *arrays: Any, out=None, **named: Any) -> tuple[np.ndarray, ...]:
        inputs = self._bind(arrays, named)
        input_addresses = [address_of(a) for a in inputs]  # once per array: see address_of
        outputs = self._outputs(out)
        addresses = [address_of(o) for o in outputs]
        if out is not None:
            self._check_disjoint(outputs, addresses, inputs, input_addresses)
        # compiled code may assume outputs are ALIGNMENT-byte aligned (aligned vector and
        # non-temporal stores): out= arrays aligned to 16 bytes go to a variant compiled
        # for that (no copy); others are written through a copy, one per call, so
        # concurrent calls never share it
        if any(a % ALIGNMENT for a in addresses) and all(a % 16 == 0 for a in addresses):
            loose = self._loose_variant()
            if loose is not None:
                return loose._run(input_addresses, outputs, addresses)
        return self._run(input_addresses, outputs, addresses, issue=out is None)

    def run_addresses(self, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        """The compiled code on raw addresses, nothing checked: the caller guarantees
        C-contiguous memory of the signature's shapes and dtypes, outputs aligned to
        `output_alignment` and disjoint from everything else (the torch backend checks
        that once at compile time instead of on every call)."""
        arena = self._take_arena()
        try:
            self._team.call(self._fn, [*inputs, *outputs, *([arena[1]] if arena else [])])
        finally:
            self._give_arena(arena)

    def _loose_variant(self) -> CompiledFunction | None:
        if self._loose is None and self.loose_outputs is not None:
            self._loose = self.loose_outputs()  # two threads may both compile: the cache makes it cheap
        return self._loose

    def _run(self, input_addresses: list[int], outputs: list[np.ndarray], addresses: list[int],
             issue: bool = False) -> tuple[np.ndarray, ...]:
        """Call the compiled code on checked arrays (the inputs by their addresses)."""
        staged = {}
        for i, address in enumerate(addresses):
            if address % self.output_alignment:
                staged[i] = aligned_empty(outputs[i].shape, outputs[i].dtype)
                addresses[i] = address_of(staged[i])
        arena = self._take_arena()
        try:
            self._team.call(self._fn, [*input_addresses, *addresses, *([arena[1]] if arena else [])])
        finally:
            self._give_arena(arena)
        for i, copy in staged.items():
            np.copyto(outputs[i], copy)
        results = tuple(outputs)
        if issue and self._recycle:
            self._issue(tuple(outputs))  # a tuple of its own: the caller may keep `results`
        return results


def _held_by_tuple_only(arrays: tuple[np.ndarray, ...]) -> bool:
    """Whether each array is referenced by `arrays` alone, and its memory (its .base) by
    the array alone: 2 = that one reference + getrefcount's argument. Indexing keeps
    no name bound to an array (a loop variable would be a third reference)."""
    return all(
        sys.getrefcount(arrays[i]) == 2 and sys.getrefcount(arrays[i].base) == 2 for i in range(len(arrays))
    )


# Compiled modules by key, least recently used first; bounded, since each holds
# machine code and an execution engine. The lock guards reorder-and-evict; a
# fork while another thread holds it would leave it held, so the child gets a new one.
MEMORY_CACHE_SIZE = 64
_MEMORY_CACHE: OrderedDict[str, Any] = OrderedDict()
_MEMORY_LOCK = threading.Lock()


def _reset_memory_lock() -> None:
    global _MEMORY_LOCK
    _MEMORY_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_reset_memory_lock)


def _memory_get(key: str) -> Any:
    """The compiled module for `key` (now the most recently used), or None."""
    with _MEMORY_LOCK:
        jit = _MEMORY_CACHE.get(key)
        if jit is not None:
            _MEMORY_CACHE.move_to_end(key)
        return jit


def _memory_put(key: str, jit: Any) -> None:
    """Remember a compiled module, dropping the least recently used beyond the bound.
    Dropping only releases the cache's reference: functions compiled from it keep it alive."""
    with _MEMORY_LOCK:
        _MEMORY_CACHE[key] = jit
        _MEMORY_CACHE.move_to_end(key)
        while len(_MEMORY_CACHE) > MEMORY_CACHE_SIZE:
            _MEMORY_CACHE.popitem(last=False)


def compile(
    source: str | ModuleOp,
    target: str = "cpu",
    entry: str = "main",
    fuse: bool = True,
    parallel: bool = True,
    planner: str = "ilp",
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    passes: Sequence[str] | str | None = None,
    fast_math: bool = False,
    input_values: Mapping[str, np.ndarray] | None = None,
) -> CompiledFunction:
    """Compile a graph (module, text, `.mlir` or `.onnx` path) for `target`.

    `target` names a compile target (mlfuse.target: "cpu", "gpu", "gpu-sim"); `passes`
    (pass specs, or one comma-separated pipeline as `mlfuse-opt -p` takes it) replaces
    its default pipeline (see mlfuse.pipelines). IEEE semantics unless
    `fast_math=True` (no NaN/inf/signed-zero guarantees; FMAs and reciprocals allowed).
    CPU code is cached in memory and on disk, keyed by the IR and the options; an ONNX
    file compiled before is found by its bytes and the options, without importing it.
    `input_values` freezes ONNX inputs that mlfuse needs at compile time (axes, shapes,
    pads given as inputs): the compiled function takes the others. An ONNX model whose
    input shapes are not all static (named dimensions) and not all given by
    `input_shapes` compiles for each call's shapes instead (a ShapeSpecializedFunction).
    """
    from mlfuse.target import get_target

    compile_target = get_target(target)  # an unknown name fails before the input is read
    options = {"fuse": fuse, "parallel": parallel, "planner": planner, "fast_math": fast_math}
    check_option_types(options, input_shapes, input_values)
    if isinstance(passes, str):  # one pipeline spec, as mlfuse-opt -p takes it
        passes = [passes]
    with fewer_collections():
        if _is_onnx_path(source):
            try:
                return _compile_onnx(str(source), compile_target, entry, passes, options, input_shapes, input_values)
            except DynamicShapes as e:
                from mlfuse.shape_specialized import ShapeSpecializedFunction

                def compile_for(shapes: dict[str, tuple[int, ...]]) -> CompiledFunction:
                    return compile(source, target, entry, fuse=fuse, parallel=parallel, planner=planner,
                                   input_shapes={**(input_shapes or {}), **shapes}, passes=passes,
                                   fast_math=fast_math, input_values=input_values)

                return ShapeSpecializedFunction(compile_for, e.inputs, str(source))  # type: ignore[return-value]
        module = parse(source, input_shapes, input_values)
        return compile_target.compile(module, entry, passes=passes, **options)


def check_option_types(options: Mapping[str, Any], input_shapes: Any, input_values: Any) -> None:
    """A Diagnostic for compile options of the wrong kind, before they are read: a switch
    that is not a bool ("no" is a true value), input maps that are not mappings."""
    for name in ("fuse", "parallel", "fast_math"):
        if not isinstance(options[name], bool | np.bool_):
            raise Diagnostic(f"compile option {name} must be True or False, got {options[name]!r}")
    for name, given in (("input_shapes", input_shapes), ("input_values", input_values)):
        if given is not None and not isinstance(given, Mapping):
            raise Diagnostic(f"compile option {name} must map input names to values, got {type(given).__name__}")


# Python's cyclic garbage collector, while anything compiles: a full collection walks
# every live object, and a compile makes hundreds of thousands (IR ops, uses,
# attributes) that stay live until it ends, so the default thresholds ran 7 full
# collections in ResNet-18's cold compile for 8% of its time. mypy does the same
# (build.py: gc.set_threshold(200 * 1000, 30, 30)). Thresholds are per process: the
# first compile to start raises them and the last to finish restores them.
COMPILE_GC_THRESHOLD = (200_000, 30, 30)
_GC_LOCK = threading.Lock()
_gc_state: dict[str, Any] = {"compiling": 0, "saved": None}


@contextlib.contextmanager
def fewer_collections():
    with _GC_LOCK:
        if _gc_state["compiling"] == 0:
            _gc_state["saved"] = gc.get_threshold()
            gc.set_threshold(*COMPILE_GC_THRESHOLD)
        _gc_state["compiling"] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_state["compiling"] -= 1
            if _gc_state["compiling"] == 0:
                gc.set_threshold(*_gc_state["saved"])


# --- ONNX files by their bytes -------------------------------------------------------------
#
# A source entry (`source-KEY`, KEY from the file's bytes, the options and the compiler:
# source_key) names the graph entry a compile of that file produced and the function's
# signature, so a file compiled before loads without being imported or digested. Written
# by the load_cpu that a compile of the file runs (_SOURCE_KEY says which key to record).

_SOURCE_KEY: ContextVar[str | None] = ContextVar("mlfuse_source_key", default=None)


def _compile_onnx(path: str, compile_target: Any, entry: str, passes: Sequence[str] | None, options: dict,
                  input_shapes: Any, input_values: Any) -> CompiledFunction:
    """compile() of an ONNX file: from its source entry, else imported and compiled,
    recording the entry. The file is hashed as it is read (a hit reads it once, in
    pieces); a miss imports the bytes it hashes again, so the key names what was compiled.
    A model that may keep data in other files (external data names its file under the
    key "location") has no entry: the bytes do not cover it."""
    key_of = functools.partial(source_key, target=compile_target.name, entry=entry, passes=passes, options=options,
                               input_shapes=input_shapes, input_values=input_values)
    key = key_of(file_sha256(path))
    if key is not None:
        fn = _load_source(key, functools.partial(_reimport, path, key_of, key))
        if fn is not None:
            return fn
    data = _read_file(path)
    key = key_of(data_sha256(data)) if data is not None and b"location" not in data else None
    if key is None:
        module = parse(path, input_shapes, input_values)  # the importer reads the file and its data
        return compile_target.compile(module, entry, passes=passes, **options)
    module = _import_onnx(data, path, input_shapes, input_values)  # type: ignore[arg-type]
    token = _SOURCE_KEY.set(key)
    try:
        return compile_target.compile(module, entry, passes=passes, **options)
    finally:
        _SOURCE_KEY.reset(token)


def data_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# A file's sha256 is remembered in the disk cache under its stat (path, device, inode,
# size, modification and change times), as git's index and make trust timestamps:
# ResNet-18's 47 MB took 26-41 ms to digest, a third of its load from the cache. Any
# write sets the change time (which utime cannot set back) from the clock, so a memo is
# kept only of a file that had settled (unchanged for SETTLED_SECONDS) before it was
# read: a write after that has a later change time, even at a coarse clock's tick.

SETTLED_SECONDS = 2.0


def file_sha256(path: str) -> str | None:
    """The sha256 of a file's bytes, read in pieces (or remembered from its stat, see
    above); None if it cannot be read."""
    try:
        with open(path, "rb") as f:
            started = time.time()
            before = os.fstat(f.fileno())
            memo = _digest_memo_key(path, before)
            known = (cache.load_object(memo) or b"").decode("ascii", "replace")
            if len(known) == 64 and all(c in "0123456789abcdef" for c in known):
                return known
            digest = hashlib.file_digest(f, "sha256").hexdigest()
            after = os.fstat(f.fileno())
    except OSError:
        return None
    settled = before.st_ctime_ns <= (started - SETTLED_SECONDS) * 1e9
    if settled and _digest_memo_key(path, after) == memo:
        cache.store_object(memo, digest.encode())
    return digest


def _digest_memo_key(path: str, st: os.stat_result) -> str:
    """The cache key of a file's digest while its stat is `st`."""
    identity = ["file-sha256-v1", os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
                st.st_ctime_ns]
    return "digest-" + hashlib.sha256(json.dumps(identity).encode()).hexdigest()


def _read_file(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def source_key(sha256: str | None, target: str, entry: str, passes: Sequence[str] | None, options: Mapping[str, Any],
               input_shapes: Any = None, input_values: Any = None) -> str | None:
    """The key of an ONNX file's compiled form: the sha256 of its bytes, every compile
    option, the compiler (mlfuse's sources, xDSL, llvmlite, onnx and numpy) and the host
    CPU; None without a file hash or for options that have no canonical form."""
    from importlib.metadata import PackageNotFoundError, version

    from mlfuse.backend import cpu

    if sha256 is None:
        return None
    try:
        shapes = {str(k): v if isinstance(v, str) else [int(d) for d in v] for k, v in (input_shapes or {}).items()}
        values = {str(k): np.asarray(v) for k, v in (input_values or {}).items()}
        # the importer's onnx once imported (metadata costs ~10 ms); while another thread
        # imports it, sys.modules holds it half made, without __version__ yet
        onnx_version = getattr(sys.modules.get("onnx"), "__version__", None) or version("onnx")
    except (TypeError, ValueError, PackageNotFoundError):
        return None
    if any(v.dtype.hasobject for v in values.values()):
        return None  # their bytes are pointers
    described = {
        "what": "onnx-source-v1", "compiler": cache.compiler_fingerprint(), "host": cpu.host_key(),
        "onnx": onnx_version, "numpy": np.__version__, "file": sha256, "target": target,
        "entry": entry, "passes": None if passes is None else [str(p) for p in passes], "options": dict(options),
        "input_shapes": shapes,
        "input_values": {k: [dtype_token(v.dtype), list(v.shape), data_sha256(np.ascontiguousarray(v).tobytes())]
                         for k, v in values.items()},
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def _record_source(graph: str, digest: str, entry: str, steps: Sequence[str], inputs: list[TensorSpec],
                   outputs: list[TensorSpec]) -> None:
    """Write the source entry that compile() asked for (once: the first load_cpu under it)."""
    key = _SOURCE_KEY.get()
    if key is None:
        return
    _SOURCE_KEY.set(None)
    record = {
        "graph": graph, "digest": digest, "entry": entry, "steps": list(steps),
        "inputs": [[t.name, list(t.shape), dtype_token(t.dtype)] for t in inputs],
        "outputs": [[t.name, list(t.shape), dtype_token(t.dtype)] for t in outputs],
    }
    _memory_put("source-" + key, record)
    cache.store_object("source-" + key, json.dumps(record).encode())


def _load_source(key: str, reimport: Any) -> CompiledFunction | None:
    """The function a source entry names, from the memory or disk cache; None when the
    entry or any entry it names is missing or bad (the caller compiles). `reimport`: the
    module again, or None, for the variant of 16-byte aligned outputs (see load_cpu)."""
    record = _memory_get("source-" + key)
    if record is None:
        blob = cache.load_object("source-" + key)
        try:
            record = json.loads(blob) if blob is not None else None
        except ValueError:
            return None
    if not isinstance(record, dict):
        return None  # none, or a valid entry of another format: compiled again, then replaced
    try:
        inputs, outputs = ([TensorSpec(tuple(shape), dtype_of_token(dtype), name) for name, shape, dtype in record[k]]
                           for k in ("inputs", "outputs"))
        graph, entry, steps, digest = record["graph"], record["entry"], record["steps"], record["digest"]
    except (ValueError, KeyError, TypeError):
        return None  # none, or a valid entry of another format: compiled again, then replaced
    jit = _load_graph(graph)
    if jit is None:
        return None
    _memory_put("source-" + key, record)
    return _function(jit, entry, inputs, outputs, steps, digest, reimport)


def _reimport(path: str, key_of: functools.partial, key: str) -> ModuleOp | None:
    """The ONNX file imported again (key_of: source_key with compile()'s options), if its
    bytes still give `key`; else None."""
    data = _read_file(path)
    if data is None or key_of(data_sha256(data)) != key:
        return None
    return _import_onnx(data, path, key_of.keywords["input_shapes"], key_of.keywords["input_values"])


# --- the CPU loader ------------------------------------------------------------------------


def graph_key(steps: Sequence[str], entry: str, digest: str) -> str:
    """The key of a graph's object code: the compiler, the host CPU (a shared cache folder
    may serve other machines), the pipeline, the entry and the sha256 of the module's
    digest (module_digest)."""
    from mlfuse.backend import cpu

    return hashlib.sha256(f"{cache.compiler_fingerprint()}|{cpu.host_key()}|{list(steps)}|{entry}|{digest}".encode()).hexdigest()


def load_cpu(module: ModuleOp, entry: str, steps: Sequence[str]) -> CompiledFunction:
    """Run `steps` (ending in LLVM) on a copy of `module` and JIT the result, or take it
    from the memory or disk cache; the CPU target's loader."""
    from mlfuse.ir import find_function

    inputs, outputs = signature(find_function(module, entry))
    digest = data_sha256(module_digest(module).encode())
    key = graph_key(steps, entry, digest)
    jit = _load_graph(key)
    if jit is None:
        with fewer_collections():  # again for callers that come here directly (the torch backend)
            jit = _jit(_object_and_constants(module, entry, steps, key))
        _memory_put(key, jit)
    _record_source(key, digest, entry, steps, inputs, outputs)
    return _function(jit, entry, inputs, outputs, steps, digest, lambda: module)


def _function(jit: Any, entry: str, inputs: list[TensorSpec], outputs: list[TensorSpec], steps: Sequence[str],
              digest: str, module: Any) -> CompiledFunction:
    """The callable on a loaded module; `module()` gives the graph module (None: not
    available) should the variant for 16-byte aligned outputs need compiling."""
    fn = CompiledFunction(jit, entry, inputs, outputs)
    variant = with_output_alignment(steps, 16)
    if variant is not None:  # compiled on the first out= array numpy aligned to 16 bytes only
        fn.loose_outputs = lambda: _loose_variant(entry, inputs, outputs, variant, digest, module)
    return fn


def _loose_variant(entry: str, inputs: list[TensorSpec], outputs: list[TensorSpec], steps: list[str], digest: str,
                   module: Any) -> CompiledFunction | None:
    """The variant compiled for 16-byte aligned outputs: from the caches, else compiled;
    None when the module is gone (its outputs are then written through a copy)."""
    jit = _load_graph(graph_key(steps, entry, digest))
    if jit is not None:
        fn = CompiledFunction(jit, entry, inputs, outputs)
    else:
        graph = module()
        if graph is None:
            return None
        fn = load_cpu(graph, entry, steps)
    fn.output_alignment = 16
    return fn


def _load_graph(key: str) -> Any:
    """The loaded module of a graph key from the memory or disk cache, or None."""
    jit = _memory_get(key)
    if jit is None:
        found = _cached_graph(key)
        if found is not None:
            jit = _jit(found)
            _memory_put(key, jit)
    return jit


def _jit(objects_and_constants: tuple[list[bytes], Mapping[str, Any]]) -> Any:
    from mlfuse.backend import cpu

    return cpu.JitModule(*objects_and_constants)


def with_output_alignment(steps: Sequence[str], alignment: int) -> list[str] | None:
    """`steps` with convert-to-llvm told that outputs are `alignment`-byte aligned; None if
    the pipeline has no plain convert-to-llvm step to tell."""
    out = list(steps)
    for i, step in enumerate(out):
        if step == "convert-to-llvm" or (step.startswith("convert-to-llvm{") and "output-alignment" not in step):
            options = step[len("convert-to-llvm{") : -1] if "{" in step else ""
            out[i] = f"convert-to-llvm{{{' '.join(filter(None, [options, f'output-alignment={alignment}']))}}}"
            return out
    return None


def _cached_graph(key: str) -> tuple[list[bytes], Mapping[str, Any]] | None:
    """The objects and large constants of a graph from the disk cache (every entry
    checked against its header), or None. A module without such constants has a graph
    entry `graph-KEY`; one with them `graphc-KEY` and `constants-KEY`. A graph entry lists
    the cache keys of its objects; if any of them is gone or bad, this is None."""
    objects = _cached_objects(cache.load_object("graph-" + key))
    if objects is not None:
        return objects, {}
    objects = _cached_objects(cache.load_object("graphc-" + key))
    packed = cache.load_object("constants-" + key, into=_aligned_buffer) if objects is not None else None
    if objects is not None and packed is not None:
        return objects, unpack_constants(packed)
    return None


def _object_and_constants(module: ModuleOp, entry: str, steps: Sequence[str], key: str) -> tuple[list[bytes], dict[str, bytes]]:
    """The object code of a module (one object per kernel, see cpu.compile_units) and the
    large constants it leaves out, compiled anew (its intact kernels come from the cache)
    and stored under `key` (see _cached_graph)."""
    from mlfuse.backend import cpu
    from mlfuse.backend.llvm_translate import to_llvmlite
    from mlfuse.inline import publish_entry
    from mlfuse.pipelines import gemm_units_fixed

    lowered = module.clone()
    publish_entry(lowered, entry)
    # What convert-to-llvm makes is checked by LLVM's verifier once translated (cpu.prepare),
    # so xDSL does not verify it first: that took 0.95 s of ResNet-18's 13 s cold compile.
    # A module of other ops would fail translation, so other pipelines keep the check.
    last = list(steps[-1:]) if _ends_in_llvm_conversion(steps) else []
    if last:  # located while the graph ops still carry their source locations
        reject_bf16(lowered, "CPU")
    before = list(steps[: len(steps) - len(last)])
    # the GEMM kernels compile in forked workers while this process runs the passes from
    # `fixed` on (which change no loop.gemm's kernel) and lowers the rest
    fixed = gemm_units_fixed(before) if last else len(before)
    if before[:fixed]:
        run_pipeline(lowered, before[:fixed], verify_result=not last and fixed == len(before))
    constants: dict[str, bytes] = {}
    with cpu.early_gemms(expected_gemms(lowered, last)) as pool:
        if before[fixed:]:
            run_pipeline(lowered, before[fixed:], verify_result=False, source=(module, before[:fixed]))
        if last:
            run_pipeline(lowered, last, verify_result=False, bf16_checked=True, source=(module, before))
        with internal_errors("LLVM translation", lowered, changes_module=False):  # it reads the module
            ir_module = to_llvmlite(lowered, external=constants, define_gemms=False)  # see cpu.GemmSource
            objects, keys = cpu.compile_units(ir_module, keep=_public_functions(module) | {entry}, pool=pool)
    if constants:
        cache.store_object("constants-" + key, pack_constants(constants))
    cache.store_object(("graphc-" if constants else "graph-") + key, json.dumps({"objects": keys}).encode())
    return objects, constants


def expected_gemms(module: ModuleOp, last: Sequence[str]) -> list[Any]:
    """The generated GEMM kernels (cpu.GemmSource) that convert-to-llvm, the `last` step
    (none: no LLVM), will declare for the loop.gemm ops of `module`: their symbols as its
    GemmLowering gives them, so that they compile while it runs (cpu.early_gemms)."""
    from mlfuse.backend import cpu
    from mlfuse.conversion.llvm_runtime import constant_operand_products, gemm_shape
    from mlfuse.dialects import loop

    if not last or "gemm=blas" in last[0]:
        return []
    gemms = [op for op in module.walk() if isinstance(op, loop.GemmOp)]
    if not gemms:
        return []
    packed, features = constant_operand_products(module), cpu.host_cpu()[1]
    return [
        cpu.GemmSource(gemm_shape(op, op in packed.b, op in packed.a).symbol, 3 + len(op.epilogue_ins), features)
        for op in gemms
    ]


def _ends_in_llvm_conversion(steps: Sequence[str]) -> bool:
    return bool(steps) and (steps[-1] == "convert-to-llvm" or steps[-1].startswith("convert-to-llvm{"))


def _cached_objects(listing: bytes | None) -> list[bytes] | None:
    """The objects a graph entry lists, each from its own cache entry; None if the entry
    is missing, or any object is (a bad one is discarded and reported by the cache)."""
    if listing is None:
        return None
    try:
        keys = json.loads(listing)["objects"]
    except (ValueError, KeyError, TypeError):
        return None  # a valid entry of another format: compiled again, then replaced
    objects = []
    for k in keys:
        obj = cache.load_object(k) if isinstance(k, str) else None
        if obj is None:
            return None
        objects.append(obj)
    return objects


def _public_functions(module: ModuleOp) -> set[str]:
    """The functions of a graph module callers may look up by name (not private)."""
    return {
        op.sym_name.data
        for op in module.ops
        if isinstance(op, func.FuncOp) and (op.sym_visibility is None or op.sym_visibility.data != "private")
    }


def pack_constants(constants: Mapping[str, bytes]) -> list[bytes]:
    """The index (JSON: name, offset, length of each) after its length (8 bytes, little
    endian), then the bytes, each at an offset that is a multiple of ALIGNMENT: read into
    an aligned buffer, the constants are bound where they lie (unpack_constants). As
    parts to write one after another (cache.store_object), not joined into one copy."""
    index, at = [], 0
    for name, data in constants.items():
        index.append([name, at, len(data)])
        at += -(-len(data) // ALIGNMENT) * ALIGNMENT
    text = json.dumps(index).encode()
    head = len(text).to_bytes(8, "little") + text
    parts = [head, bytes(-len(head) % ALIGNMENT)]
    for data in constants.values():
        parts += [data, bytes(-len(data) % ALIGNMENT)]
    return parts


def unpack_constants(packed: Any) -> dict[str, Any]:
    """The constants of pack_constants as views of `packed` (bytes, or an aligned uint8
    array, whose views the JIT binds without a copy)."""
    view = memoryview(packed).cast("B")
    size = int.from_bytes(view[:8], "little")
    base = 8 + size + (-(8 + size) % ALIGNMENT)
    return {name: packed[base + at : base + at + length] for name, at, length in json.loads(bytes(view[8 : 8 + size]))}


def _aligned_buffer(size: int) -> np.ndarray:
    return aligned_empty((size,), np.dtype(np.uint8))


class DigestPrinter(Printer):
    """xDSL's printer, with large dense constants printed as their sha256.

    For cache keys: printing ResNet-18's weights as hex took 4.8 s of a compile; the
    digest names the same bytes."""

    def print_attribute(self, attribute) -> None:
        from xdsl.dialects.builtin import DenseIntOrFPElementsAttr

        if isinstance(attribute, DenseIntOrFPElementsAttr) and len(attribute.data.data) >= 4096:
            self.print_string(f"dense_sha256<{hashlib.sha256(attribute.data.data).hexdigest()}> : ")
            super().print_attribute(attribute.type)
            return
        super().print_attribute(attribute)


def module_digest(module: ModuleOp) -> str:
    return module_text(module, DigestPrinter)
