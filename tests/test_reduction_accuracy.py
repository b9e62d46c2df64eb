"""Reductions are at least about as accurate as numpy's pairwise sums (issue 15).

f32 sums, means and full reductions at lengths 1024 and 65536, compiled end to end,
against the exact (float64) result: the mean absolute error over many rows and seeds
must be within 2x of numpy's. Long rows and full reductions add blocks of
group_to_loop.ROW_BLOCK elements into partials (before: a 65536-element row sum
was 6x numpy's error); columns add rows in order per block of rows, which already
beats numpy's axis-0 sum. The blocked results do not depend on the thread count.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import mlfuse
from mlfuse.backend import cpu
from mlfuse.frontend.builder import GraphBuilder

CASES = [  # (kind, shape, axis): reduction length 1024 or 65536
    ("sum", (256, 1024), 1),
    ("sum", (32, 65536), 1),
    ("mean", (256, 1024), 1),
    ("mean", (32, 65536), 1),
    ("sum", (1024, 256), 0),
    ("sum", (65536, 32), 0),
    ("mean", (1024, 256), 0),
    ("mean", (65536, 32), 0),
    ("sum", (1024,), None),
    ("sum", (65536,), None),
    ("mean", (256, 256), None),
    ("sum", (4, 128, 128), (1, 2)),
]
SEEDS = 6
SAMPLES = 128  # at least this many errors per case (a mean of a few |errors| is noisy)
MAX_RATIO = 2.0  # mean |error| against float64, relative to numpy's


def reduce_module(kind: str, shape, axis):
    b = GraphBuilder()
    x = b.input("x", shape)
    b.output(getattr(b, kind)(x, axis=axis))
    return b.module()


def errors(fn, kind, shape, axis, seed):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    spec = fn.outputs[0]
    out = np.full(spec.shape, np.nan, spec.dtype)  # poisoned
    (got,) = fn(x, out=[out])
    exact = getattr(np, kind)(x.astype(np.float64), axis=axis)
    ours = np.abs(got.astype(np.float64) - exact).ravel()
    theirs = np.abs(getattr(np, kind)(x, axis=axis).astype(np.float64) - exact).ravel()
    return ours, theirs


@pytest.mark.parametrize("kind,shape,axis", CASES, ids=[f"{k}-{'x'.join(map(str, s))}-{a}" for k, s, a in CASES])
def test_reduction_error_within_2x_of_numpy(kind, shape, axis):
    fn = mlfuse.compile(reduce_module(kind, shape, axis))
    seeds = max(SEEDS, -(-SAMPLES // math.prod(fn.outputs[0].shape)))  # full reductions: more seeds
    pairs = [errors(fn, kind, shape, axis, seed) for seed in range(seeds)]
    ours = np.concatenate([p[0] for p in pairs])
    theirs = np.concatenate([p[1] for p in pairs])
    assert np.all(np.isfinite(ours))
    ratio = ours.mean() / theirs.mean()
    assert ratio <= MAX_RATIO, f"mean error {ours.mean():.3g}, numpy {theirs.mean():.3g} (x{ratio:.2f})"


@pytest.mark.parametrize("kind,shape,axis", [("sum", (16, 65536), 1), ("sum", (65536,), None), ("mean", (65536, 16), 0)])
def test_blocked_reductions_do_not_depend_on_the_thread_count(kind, shape, axis):
    fn = mlfuse.compile(reduce_module(kind, shape, axis))
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    results = []
    try:
        for threads in (1, 2):
            cpu.set_num_threads(threads)
            results.append(fn(x)[0].copy())
    finally:
        cpu.set_num_threads(os.cpu_count() or 1)  # the default team
    np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.parametrize("kind,shape,axis", [("sum", (3, 1100), 1), ("mean", (2, 4097), -1), ("prod", (5, 1030), 1),
                                             ("sum", (1031,), None), ("mean", (3, 7, 333), (1, 2)), ("max", (2, 5000), 1)])
def test_blocked_reductions_with_a_partial_last_block(kind, shape, axis):
    """Lengths that are not multiples of the block, and the other kinds (prod is
    blocked, max is not): against float64, tolerance 8 eps * log2(n) * sum|x| (2 eps * n for prod)."""
    rng = np.random.default_rng(7)
    x = (rng.uniform(0.999, 1.001, shape) if kind == "prod" else rng.standard_normal(shape)).astype(np.float32)
    fn = mlfuse.compile(reduce_module(kind, shape, axis))
    out = np.full(fn.outputs[0].shape, np.nan, np.float32)
    (got,) = fn(x, out=[out])
    exact = getattr(np, kind)(x.astype(np.float64), axis=axis)
    n = x.size // exact.size
    eps = np.finfo(np.float32).eps
    if kind == "prod":
        tol = 2 * eps * n * np.abs(exact)
    else:
        tol = 8 * eps * np.log2(n) * getattr(np, "sum" if kind != "mean" else "mean")(np.abs(x.astype(np.float64)), axis=axis)
    assert np.all(np.abs(got - exact) <= tol), np.abs(got - exact).max()
