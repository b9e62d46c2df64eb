"""Shared pytest helpers: seeded random data, one-function modules, the mlfuse-opt CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.ir import Attribute, Block, Operation, Region

REPO = Path(__file__).resolve().parent.parent


def random_array(rng: np.random.Generator, shape: Sequence[int], dtype: str | np.dtype = "float32") -> np.ndarray:
    """Random test data that is never zero: floats in +-[0.1, 2), ints in +-[1, 9], random bools."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    sign = np.where(rng.random(shape) < 0.5, -1, 1)
    if dtype.kind == "i":
        return (sign * rng.integers(1, 10, shape)).astype(dtype)
    return (sign * rng.uniform(0.1, 2.0, shape)).astype(dtype)


def tensor_type(shape: Sequence[int], element_type: Attribute = f32) -> TensorType:
    return TensorType(element_type, list(shape))


def make_module(
    arg_types: Sequence[Attribute], build: Callable[..., Operation | list[Operation]]
) -> ModuleOp:
    """@main(args) whose body is `build(*args)` (one op or a list); returns the last op's results."""
    block = Block(arg_types=arg_types)
    built = build(*block.args)
    ops = built if isinstance(built, list) else [built]
    block.add_ops(ops)
    results = list(ops[-1].results)
    block.add_op(func.ReturnOp(*results))
    fn = func.FuncOp("main", (list(arg_types), [r.type for r in results]), Region(block))
    module = ModuleOp([fn])
    module.verify()
    return module


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240611)


def mlfuse_opt_command() -> list[str]:
    """The installed `mlfuse-opt` next to this interpreter, else the module."""
    script = Path(sys.executable).parent / "mlfuse-opt"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "mlfuse.tools.mlfuse_opt"]


def run_mlfuse_opt(
    args: Sequence[str], stdin: str | None = None, cwd: Path | str | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.pop("MLFUSE_TRACEBACK", None)
    return subprocess.run(
        [*mlfuse_opt_command(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def assert_matches_float64_reference(module, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], entry: str = "main") -> None:
    """Compiled `outputs` against the graph evaluated in float64 (mlfuse.reference's
    `widened`), within mlfuse_run.tolerances: they grow with the longest reduction,
    so a correct f32 program with long sums passes and a wrong one does not."""
    import mlfuse
    from mlfuse.tools.mlfuse_run import compare

    oracle = mlfuse.reference(module, entry)
    longest = oracle.longest_reduction()
    for k, (got, want) in enumerate(zip(outputs, oracle.widened(*inputs), strict=True)):
        ok, abs_err, rel_err = compare(np.asarray(got), want, longest)
        assert ok, f"output {k}: max abs error {abs_err:.3g}, max rel error {rel_err:.3g} (reductions of {longest})"


@pytest.fixture
def cache_root(tmp_path, monkeypatch) -> Path:
    """A fresh disk cache folder (MLFUSE_CACHE_DIR), an empty in-memory cache, and no
    cache warning reported yet."""
    from collections import OrderedDict

    from mlfuse import api, cache

    root = tmp_path / "cache"
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(root))
    monkeypatch.setattr(api, "_MEMORY_CACHE", OrderedDict())
    monkeypatch.setattr(cache, "_reported", set())
    return root


def cpu_lowered_before(module: ModuleOp, flag: str) -> ModuleOp:
    """A copy of `module` through the CPU pipeline up to (not including) the pass `flag`."""
    from mlfuse import pipelines
    from mlfuse.api import run_pipeline

    steps = pipelines.cpu_pipeline()
    return run_pipeline(module.clone(), steps[: steps.index(flag)])


def compile_without(module: ModuleOp, flag: str):
    """`module` compiled by the CPU pipeline without the pass `flag` (to compare bits with)."""
    import mlfuse
    from mlfuse import pipelines

    return mlfuse.compile(module, passes=[s for s in pipelines.cpu_pipeline() if s != flag])
