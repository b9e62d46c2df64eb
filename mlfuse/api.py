"""The Python API: parse, run pipelines, compile graphs and call them on numpy arrays."""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
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
    if isinstance(source, str | os.PathLike) and str(source).endswith(".onnx"):
        try:
            from mlfuse.frontend.onnx import import_onnx
        except ImportError as e:
            raise Diagnostic(f"reading {source} needs the onnx extra (pip install 'mlfuse[onnx]'): {e}") from None
        return import_onnx(str(source), input_shapes=input_shapes, input_values=input_values)
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


def all_passes() -> dict:
    from xdsl.transforms import get_all_passes

    from mlfuse.universe import MLFUSE_PASSES

    return {**get_all_passes(), **MLFUSE_PASSES}


def run_pipeline(
    module: ModuleOp, passes: Sequence[str], ctx: Context | None = None, verify_each: bool | None = None
) -> ModuleOp:
    """Apply passes given as `mlfuse-opt -p` specs and verify the result.

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
    if any(p.name == "convert-to-llvm" for p in pipeline.passes):
        reject_bf16(module, "CPU")
    # a pass that crashes on verified input is mlfuse's bug: an internal error with a reproducer
    spec = ",".join(str(p.pipeline_pass_spec()) for p in pipeline.passes)
    with internal_errors("pass pipeline", module, [f"RUN: mlfuse-opt %s -p '{spec}'"]):
        if verify_each is None:
            verify_each = os.environ.get("MLFUSE_VERIFY_EACH", "0") not in ("", "0")
        for i, p in enumerate(pipeline.passes):
            p.apply(ctx, module)
            if verify_each or i == len(pipeline.passes) - 1:
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
        result = []
        for i, t in enumerate(types):
            if not isinstance(t, TensorType):
                raise Diagnostic(f"@{fn.sym_name.data}: argument and result types must be tensors, got {t}",
                                 location_of(fn))
            el = t.get_element_type()
            if isinstance(el, graph.BFloat16Type):
                raise Diagnostic(f"@{fn.sym_name.data}: bf16 tensors are not supported by the CPU backend (numpy has no bf16)",
                                 location_of(fn))
            result.append(TensorSpec(tuple(t.get_shape()), graph.numpy_dtype(el), names[i] if i < len(names) else f"{prefix}{i}"))
        return result

    return specs(fn.function_type.inputs.data, "mlfuse.input_names", "arg"), specs(
        fn.function_type.outputs.data, "mlfuse.output_names", "result"
    )


def aligned_empty(shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """An uninitialized C-contiguous array whose data is 64-byte aligned."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize  # 0 for a zero-size tensor
    try:
        raw = np.empty(max(1, nbytes) + ALIGNMENT, dtype=np.uint8)
    except MemoryError:
        raise Diagnostic(f"cannot allocate {nbytes} bytes for a {dtype} array of shape {list(shape)}: out of memory") from None
    offset = (-raw.ctypes.data) % ALIGNMENT
    return raw[offset : offset + nbytes].view(dtype).reshape(shape)


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
    # for functions whose outputs take at least RECYCLE_MIN_BYTES.
    RECYCLED_OUTPUT_SETS = 2
    RECYCLE_MIN_BYTES = 1 << 20

    def __init__(self, jit, entry: str, inputs: list[TensorSpec], outputs: list[TensorSpec]):
        from mlfuse.backend.team import TeamSizer

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
        self._recycle = sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in outputs) >= self.RECYCLE_MIN_BYTES
        self._team = TeamSizer()  # the full team or one thread, by the calls' times
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
        about as long as the kernel itself). A set is free when its arrays and their
        memory are referenced by the set alone (no array, view or torch tensor of them
        left). list.pop and append are atomic, so concurrent calls never take one set twice."""
        for _ in range(len(self._issued)):
            try:
                candidate = self._issued.pop(0)
            except IndexError:
                return None
            if _held_by_tuple_only(candidate):
                return candidate
            self._issued.append(candidate)
        return None

    def _issue(self, outputs: tuple[np.ndarray, ...]) -> None:
        if len(self._issued) < self.RECYCLED_OUTPUT_SETS:
            self._issued.append(outputs)

    def _outputs(self, out: Sequence[np.ndarray] | np.ndarray | None, inputs: list[np.ndarray]) -> list[np.ndarray]:
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
            if any(np.shares_memory(o, a) for a in inputs):
                raise ValueError(f"out= array for '{spec.name}' overlaps an input")
        return list(out)

    def _check_disjoint(self, out: Sequence[np.ndarray], addresses: Sequence[int]) -> None:
        """Raise if two out= arrays share memory: one output would overwrite the other.
        They are C-contiguous, so each covers exactly [address, address + nbytes)."""
        spans = sorted((a, a + o.nbytes, s.name) for s, o, a in zip(self.outputs, out, addresses) if o.nbytes)
        reach = None  # the span seen so far that ends last
        for start, end, name in spans:
            if reach is not None and start < reach[1]:
                raise ValueError(f"out= arrays for '{reach[2]}' and '{name}' overlap: each output needs memory of its own")
            if reach is None or end > reach[1]:
                reach = (start, end, name)

    def __call__(self, *arrays: Any, out=None, **named: Any) -> tuple[np.ndarray, ...]:
        inputs = self._bind(arrays, named)
        outputs = self._outputs(out, inputs)
        addresses = [o.ctypes.data for o in outputs]  # once per array: ndarray.ctypes is slow
        if out is not None and len(outputs) > 1:
            self._check_disjoint(outputs, addresses)
        # compiled code may assume outputs are ALIGNMENT-byte aligned (aligned vector and
        # non-temporal stores): out= arrays aligned to 16 bytes go to a variant compiled
        # for that (no copy); others are written through a copy, one per call, so
        # concurrent calls never share it
        if any(a % ALIGNMENT for a in addresses) and all(a % 16 == 0 for a in addresses):
            loose = self._loose_variant()
            if loose is not None:
                return loose._run(inputs, outputs, addresses)
        return self._run(inputs, outputs, addresses, issue=out is None)

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

    def _run(self, inputs: list[np.ndarray], outputs: list[np.ndarray], addresses: list[int],
             issue: bool = False) -> tuple[np.ndarray, ...]:
        """Call the compiled code on checked arrays."""
        staged = {}
        for i, address in enumerate(addresses):
            if address % self.output_alignment:
                staged[i] = aligned_empty(outputs[i].shape, outputs[i].dtype)
                addresses[i] = staged[i].ctypes.data
        arena = self._take_arena()
        try:
            self._team.call(self._fn, [*[a.ctypes.data for a in inputs], *addresses, *([arena[1]] if arena else [])])
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
    passes: Sequence[str] | None = None,
    fast_math: bool = False,
    input_values: Mapping[str, np.ndarray] | None = None,
) -> CompiledFunction:
    """Compile a graph (module, text, `.mlir` or `.onnx` path) for `target`.

    `target` names a compile target (mlfuse.target: "cpu", "gpu", "gpu-sim"); `passes`
    replaces its default pipeline (see mlfuse.pipelines). IEEE semantics unless
    `fast_math=True` (no NaN/inf/signed-zero guarantees; FMAs and reciprocals allowed).
    CPU code is cached in memory and on disk, keyed by the IR and the options.
    `input_values` freezes ONNX inputs that mlfuse needs at compile time (axes, shapes,
    pads given as inputs): the compiled function takes the others.
    """
    from mlfuse.target import get_target

    compile_target = get_target(target)  # an unknown name fails before the input is read
    module = parse(source, input_shapes, input_values)
    return compile_target.compile(
        module, entry, passes=passes, fuse=fuse, parallel=parallel, planner=planner, fast_math=fast_math
    )


def load_cpu(module: ModuleOp, entry: str, steps: Sequence[str]) -> CompiledFunction:
    """Run `steps` (ending in LLVM) on a copy of `module` and JIT the result, or take it
    from the memory or disk cache; the CPU target's loader."""
    from mlfuse.backend import cpu
    from mlfuse.reference import find_function

    inputs, outputs = signature(find_function(module, entry))
    # the host CPU is part of the key: a shared cache folder may serve other machines
    key = hashlib.sha256(
        f"{cache.compiler_fingerprint()}|{cpu.host_key()}|{list(steps)}|{entry}\n{module_digest(module)}".encode()
    ).hexdigest()
    jit = _memory_get(key)
    if jit is None:
        jit = cpu.JitModule(*_object_and_constants(module, steps, key))
        _memory_put(key, jit)
    fn = CompiledFunction(jit, entry, inputs, outputs)
    variant = with_output_alignment(steps, 16)
    if variant is not None:  # compiled on the first out= array numpy aligned to 16 bytes only
        fn.loose_outputs = lambda: _with_alignment(load_cpu(module, entry, variant), 16)
    return fn


def _with_alignment(fn: CompiledFunction, alignment: int) -> CompiledFunction:
    fn.output_alignment = alignment
    return fn


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


def _object_and_constants(module: ModuleOp, steps: Sequence[str], key: str) -> tuple[list[bytes], dict[str, bytes]]:
    """The object code of a module (one object per kernel, see cpu.compile_units) and the
    large constants it leaves out, from the disk cache (every entry checked against its
    header) or compiled anew and stored. A module without such constants has a graph
    entry `graph-KEY`; one with them `graphc-KEY` and `constants-KEY`. A graph entry lists
    the cache keys of its objects; if any of them is gone or bad, the graph is compiled
    again (its intact kernels come from the cache)."""
    from mlfuse.backend import cpu

    objects = _cached_objects(cache.load_object("graph-" + key))
    if objects is not None:
        return objects, {}
    objects, packed = _cached_objects(cache.load_object("graphc-" + key)), cache.load_object("constants-" + key)
    if objects is not None and packed is not None:
        return objects, unpack_constants(packed)
    lowered = module.clone()
    run_pipeline(lowered, steps)
    from mlfuse.backend.llvm_translate import to_llvmlite

    constants: dict[str, bytes] = {}
    with internal_errors("LLVM translation", lowered):
        objects, keys = cpu.compile_units(to_llvmlite(lowered, external=constants), keep=_public_functions(module))
    if constants:
        cache.store_object("constants-" + key, pack_constants(constants))
    cache.store_object(("graphc-" if constants else "graph-") + key, json.dumps({"objects": keys}).encode())
    return objects, constants


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


def pack_constants(constants: Mapping[str, bytes]) -> bytes:
    """name/size index as JSON (its length first, 8 bytes little-endian), then the bytes in order."""
    index = json.dumps([[name, len(data)] for name, data in constants.items()]).encode()
    return b"".join([len(index).to_bytes(8, "little"), index, *constants.values()])


def unpack_constants(packed: bytes) -> dict[str, bytes]:
    size = int.from_bytes(packed[:8], "little")
    at = 8 + size
    constants = {}
    for name, length in json.loads(packed[8:at]):
        constants[name] = packed[at : at + length]
        at += length
    return constants


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
