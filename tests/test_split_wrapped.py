"""loop-split-wrapped end to end: register-stitched pads (with the ops fused around them)
run their inside without the wrap-around read, and give numpy's results bit for bit
(NaN and infinities included), the same bits as the pipeline without the pass;
outputs poisoned."""

from __future__ import annotations

import numpy as np
import pytest

import mlfuse
from mlfuse.frontend.builder import GraphBuilder
from mlfuse.poly.split_wrapped import split_wrapped

from conftest import compile_without, cpu_lowered_before

PASS = "loop-split-wrapped"


def split(module) -> int:
    """How many nests the pipeline's loop-split-wrapped splits in `module`."""
    return split_wrapped(cpu_lowered_before(module, PASS))


def without_pass(module, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    return compile_without(module, PASS)(*inputs)


@pytest.mark.parametrize("shape, widths, value, splits", [
    ((1, 4, 30, 34), [(0, 0), (0, 0), (1, 1), (1, 1)], 0.0, 1),  # a conv's padding, as its own op
    ((3, 37), [(0, 0), (2, 5)], -1.5, 1),  # asymmetric, a fill value
    ((5, 18, 3), [(0, 0), (0, 0), (1, 0)], 0.0, 1),  # a short innermost row
    ((6, 40), [(3, 2), (0, 0)], 0.0, 0),  # only the rows padded: the inner loop never wraps
])
def test_pad_after_relu(shape, widths, value, splits):
    """relu(x) padded: the innermost padded dimension split in three (its border columns
    keep the wrapped read, the inside reads x directly); exact, like numpy."""
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    x.flat[::7] = np.nan
    x.flat[3::11] = -np.inf
    b = GraphBuilder()
    b.output(b.pad(b.relu(b.input("x", shape, "f32")), widths, value))
    module = b.module()
    assert split(module) == splits
    want = np.pad(np.where(np.isnan(x), x, np.maximum(x, 0)), widths, constant_values=value)
    out = np.full(want.shape, 7.0, np.float32)
    mlfuse.compile(module)(x, out=[out])
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(out, without_pass(module, x)[0])


def test_pad_then_elementwise_with_a_second_input():
    """exp(pad(x)) * y over the padded shape: the pad fused with what follows, split, within
    an ulp of float64 numpy's exp (expand-math's polynomial) and the same bits as without."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((8, 62)).astype(np.float32)
    y = rng.standard_normal((8, 66)).astype(np.float32)
    b = GraphBuilder()
    b.output(b.exp(b.pad(b.input("x", x.shape, "f32"), [(0, 0), (2, 2)], 0.5)) * b.input("y", y.shape, "f32"))
    module = b.module()
    assert split(module) == 1
    want = np.exp(np.pad(x.astype(np.float64), [(0, 0), (2, 2)], constant_values=0.5)) * y
    out = np.full(want.shape, np.nan, np.float32)
    mlfuse.compile(module)(x, y, out=[out])
    np.testing.assert_allclose(out, want, rtol=4e-7, atol=0)
    np.testing.assert_array_equal(out, without_pass(module, x, y)[0])
