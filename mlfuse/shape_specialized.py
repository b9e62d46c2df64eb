"""ONNX models whose input shapes are not all static, compiled for the shapes of each call.

Exporters name dimensions instead of fixing them (torch.onnx's `dynamic_axes` and
`dynamic_shapes`, optimum's batch and sequence axes). mlfuse's kernels are compiled for
static shapes, so `mlfuse.compile("model.onnx")` of such a model returns a
`ShapeSpecializedFunction`: each call's input shapes pick a `CompiledFunction` compiled
for them (as `input_shapes=` would), compiled on the first call with those shapes and
kept for the next (the last `MAX_SPECIALIZATIONS` shapes), as jax.jit and torch.compile
specialize on shapes. The compiles go through the disk cache by the file's bytes and the
shapes, so a later process loads them without importing the model again.

    f = mlfuse.compile("bert.onnx")          # input_ids: [batch, sequence]
    f(ids_1x16, mask_1x16)                  # compiles for 1x16, runs
    f(ids_1x16, mask_1x16)                  # runs
    f.specialize(input_ids=(2, 32), attention_mask=(2, 32)).outputs   # the 2x32 function
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from mlfuse.diagnostics import Diagnostic


class ShapeSpecializedFunction:
    """A model compiled per input shapes: call it like a CompiledFunction (positional
    inputs in order, or by name; `out=`); `specialize(**shapes)` gives the
    CompiledFunction for given shapes. Safe from several threads: one compile per
    shapes at a time, the others wait for it."""

    MAX_SPECIALIZATIONS = 8

    def __init__(self, compile_for: Callable[[dict[str, tuple[int, ...]]], Any],
                 inputs: Sequence[tuple[str, list | None, int]], source: str):
        from onnx import helper

        self._compile_for = compile_for  # input shapes -> CompiledFunction
        self.source = source
        self.input_names = [name for name, _, _ in inputs]
        # per input: its declared dimensions (sizes, symbols, None where unknown) and dtype
        self.declared = {name: dims for name, dims, _ in inputs}
        self.dtypes = {name: np.dtype(helper.tensor_dtype_to_np_dtype(el)) for name, _, el in inputs}
        self._compiled: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._latest: Any = None

    @property
    def inputs(self) -> list:
        """The last call's input specs; before any call, the declared ones (symbols and None for unknown sizes)."""
        if self._latest is not None:
            return self._latest.inputs
        from mlfuse.api import TensorSpec

        return [TensorSpec(tuple(self.declared[n] or ()), self.dtypes[n], n) for n in self.input_names]

    @property
    def outputs(self) -> list:
        """The last call's output specs: the output shapes depend on the input shapes."""
        if self._latest is None:
            raise Diagnostic("the output shapes depend on the input shapes, which are not static: call the "
                             "function, or take them from f.specialize(name=shape, ...)", self.source)
        return self._latest.outputs

    def __call__(self, *arrays: Any, out=None, **named: Any) -> tuple[np.ndarray, ...]:
        return self.specialize(**self._shapes_of(arrays, named))(*arrays, out=out, **named)

    def specialize(self, **shapes: Sequence[int]) -> Any:
        """The CompiledFunction for these input shapes (name=shape for every input
        whose declared shape is not static), compiled now unless kept."""
        exact = {name: tuple(int(d) for d in shape) for name, shape in shapes.items()}
        key = tuple(sorted(exact.items()))
        with self._lock:
            fn = self._compiled.get(key)
            if fn is None:  # the inputs in argument order: a diagnostic names them as the model does
                order = {name: i for i, name in enumerate(self.input_names)}
                fn = self._compile_for(dict(sorted(exact.items(), key=lambda kv: order.get(kv[0], len(order)))))
                self._compiled[key] = fn
                while len(self._compiled) > self.MAX_SPECIALIZATIONS:
                    self._compiled.popitem(last=False)
            self._compiled.move_to_end(key)
            self._latest = fn
        return fn

    def _shapes_of(self, arrays: Sequence[Any], named: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        """The shape of each given input whose declared shape is not static."""
        if len(arrays) > len(self.input_names):
            raise ValueError(f"{self.source} takes {len(self.input_names)} inputs, got {len(arrays)}")
        given = dict(zip(self.input_names, arrays))
        for name, value in named.items():
            if name not in self.declared:
                raise ValueError(f"{self.source} has no input named '{name}' (inputs: {', '.join(self.input_names)})")
            if name in given:
                raise ValueError(f"{self.source}: input '{name}' given both by position and by keyword")
            given[name] = value
        missing = [n for n in self.input_names if n not in given]
        if missing:
            raise ValueError(f"{self.source}: missing inputs {', '.join(missing)}")
        return {name: np.shape(value) for name, value in given.items() if not static(self.declared[name])}


def static(dims: list | None) -> bool:
    return dims is not None and all(isinstance(d, int) for d in dims)
