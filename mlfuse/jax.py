"""`mlfuse.jax.jit`: run a jax function through mlfuse instead of XLA.

    import mlfuse.jax
    layer_norm = mlfuse.jax.jit(lambda x, g, b: ...)   # like jax.jit
    y = layer_norm(x, g, b)

On the first call with a given signature (the pytree structure of the arguments and
each leaf's shape and dtype) the function is lowered by jax to StableHLO
(`jax.jit(f, keep_unused=True).lower(...)`), converted to the graph dialect
(mlfuse/frontend/stablehlo.py) and compiled by `mlfuse.compile`; later calls with
that signature reuse the compiled code, as jax.jit does. Arguments and results may
be pytrees; leaves are arrays or Python scalars (scalars are traced, as jax does,
with jax's dtype for them: float32 for a float unless x64 is enabled).

Results are numpy arrays, unless some argument is a jax array: then they are jax
arrays (copied onto jax's default device). Compilation options (`fuse`, `parallel`,
`planner`, `fast_math`, `target`...) are passed on to `mlfuse.compile`. An op mlfuse
cannot compile is a `mlfuse.Diagnostic` naming the StableHLO op (`<input>:line:col`
points into `lowered_text(...)`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

try:
    import jax
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(f"mlfuse.jax needs jax (pip install 'mlfuse[jax]'): {e}") from None


def jit(fun: Callable | None = None, **options: Any) -> Any:
    """`fun` compiled by mlfuse per argument signature; `jit(**options)` is a decorator."""
    if fun is None:
        return lambda f: JittedFunction(f, options)
    return JittedFunction(fun, options)


class JittedFunction:
    """A jax function compiled by mlfuse, one compiled function per argument signature."""

    def __init__(self, fun: Callable, options: dict[str, Any]):
        self.fun = fun
        self.options = options
        # keep_unused: jax would drop arguments the function ignores, and the compiled
        # function's signature must match the leaves we pass
        self._jax = jax.jit(fun, keep_unused=True)
        self._compiled: dict[tuple, tuple[Any, Any]] = {}
        self._lock = threading.Lock()
        self.__name__ = getattr(fun, "__name__", "function")
        self.__doc__ = getattr(fun, "__doc__", None)

    def __call__(self, *args: Any) -> Any:
        leaves, tree = jax.tree_util.tree_flatten(args)
        arrays = [as_array(leaf) for leaf in leaves]
        key = (tree, tuple((a.shape, a.dtype.str) for a in arrays))
        entry = self._compiled.get(key)
        if entry is None:
            entry = self._compile(args, key)
        compiled, out_tree = entry
        outputs = compiled(*arrays)
        if any(isinstance(leaf, jax.Array) for leaf in leaves):
            outputs = [jax.numpy.asarray(o) for o in outputs]
        return jax.tree_util.tree_unflatten(out_tree, list(outputs))

    def lower(self, *args: Any):
        """jax's Lowered for these arguments (shapes and dtypes only are used)."""
        specs = jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(np.shape(leaf), as_array(leaf).dtype), args)
        return self._jax.lower(*specs)

    def lowered_text(self, *args: Any) -> str:
        """The StableHLO text mlfuse compiles for these arguments."""
        return self.lower(*args).as_text()

    def _compile(self, args: tuple, key: tuple) -> tuple[Any, Any]:
        from mlfuse.api import compile as mlfuse_compile

        lowered = self.lower(*args)
        compiled = mlfuse_compile(lowered.as_text(), **self.options)
        entry = (compiled, lowered.out_tree)
        with self._lock:
            return self._compiled.setdefault(key, entry)


def as_array(leaf: Any) -> np.ndarray:
    """A leaf as the numpy array jax would trace: Python scalars and float64 arrays take
    jax's canonical dtype (float32 and int32 unless x64 is enabled)."""
    array = np.asarray(leaf)
    dtype = jax.dtypes.canonicalize_dtype(array.dtype)
    return array if array.dtype == dtype else array.astype(dtype)
