"""Op classes of the fusion planner (mlfuse.analysis.op_classes)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, i32

from mlfuse.analysis.op_classes import (
    ContractionSize,
    OpClass,
    ReductionLayout,
    classify,
    contraction_flops,
    reduction_layout,
)
from mlfuse.frontend.builder import GraphBuilder


def last_op(build):
    b = GraphBuilder()
    build(b)
    return list(b._block.ops)[-1]


@pytest.mark.parametrize(
    "build, expected",
    [
        (lambda b: b.input("x", (4, 8)) + b.input("y", (4, 8)), OpClass.LIGHT_ELEMENTWISE),
        (lambda b: b.input("x", (4, 8)) * b.input("y", (4, 8)), OpClass.LIGHT_ELEMENTWISE),
        (lambda b: b.maximum(b.input("x", (4,)), b.input("y", (4,))), OpClass.LIGHT_ELEMENTWISE),
        (lambda b: b.relu(b.input("x", (4,))), OpClass.LIGHT_ELEMENTWISE),
        (lambda b: b.less(b.input("x", (4,)), b.input("y", (4,))), OpClass.LIGHT_ELEMENTWISE),
        (lambda b: b.cast(b.input("x", (4,)), "i32"), OpClass.LIGHT_ELEMENTWISE),
        (lambda b: b.exp(b.input("x", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.log(b.input("x", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.tanh(b.input("x", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.erf(b.input("x", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.sqrt(b.input("x", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.rsqrt(b.input("x", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.gelu(b.input("x", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.input("x", (4,)) / b.input("y", (4,)), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.pow(b.input("x", (4,)), b.input("y", (4,))), OpClass.EXPENSIVE_ELEMENTWISE),
        (lambda b: b.broadcast_to(b.input("x", (8,)), (4, 8)), OpClass.BROADCAST),
        (lambda b: b.transpose(b.input("x", (4, 8))), OpClass.INJECTIVE),
        (lambda b: b.reshape(b.input("x", (4, 8)), (32,)), OpClass.INJECTIVE),
        (lambda b: b.slice(b.input("x", (4, 8)), (0, 0), (2, 8)), OpClass.INJECTIVE),
        (lambda b: b.pad(b.input("x", (4, 8)), 1), OpClass.INJECTIVE),
        (lambda b: b.concat([b.input("x", (4, 8)), b.input("y", (4, 8))]), OpClass.INJECTIVE),
        (lambda b: b.sum(b.input("x", (4, 8)), axis=1), OpClass.REDUCTION),
        (lambda b: b.matmul(b.input("x", (4, 8)), b.input("y", (8, 2))), OpClass.CONTRACTION),
        (lambda b: b.constant(np.arange(4.0, dtype=np.float32)), OpClass.CONSTANT),
    ],
)
def test_classes(build, expected):
    info = classify(last_op(build))
    assert info.op_class is expected
    assert info.fusible == (expected is not OpClass.CONSTANT)


def test_expensive_ops_cost_more_than_light_ones():
    light = classify(last_op(lambda b: b.input("x", (4,)) + b.input("y", (4,))))
    exp = classify(last_op(lambda b: b.exp(b.input("x", (4,)))))
    div = classify(last_op(lambda b: b.input("x", (4,)) / b.input("y", (4,))))
    assert light.element_cost == 1.0
    assert exp.element_cost > div.element_cost > light.element_cost


def test_foreign_ops_are_opaque():
    op = arith.ConstantOp(IntegerAttr(1, i32))
    info = classify(op)
    assert info.op_class is OpClass.OPAQUE and not info.fusible


@pytest.mark.parametrize(
    "shape, axes, layout",
    [
        ((4, 8), (1,), ReductionLayout.ROW),
        ((2, 4, 8), (1, 2), ReductionLayout.ROW),
        ((4, 8, 1), (1,), ReductionLayout.ROW),  # trailing unit dims do not count
        ((4, 8), (0,), ReductionLayout.COLUMN),
        ((2, 4, 8), (1,), ReductionLayout.COLUMN),  # a middle axis is strided
        ((2, 4, 8), (0, 1), ReductionLayout.COLUMN),
        ((4, 8), (0, 1), ReductionLayout.FULL),
        ((1, 8), (1,), ReductionLayout.FULL),  # every non-unit axis
        ((4, 1), (1,), ReductionLayout.ROW),  # only a unit axis: one element per output
    ],
)
def test_reduction_layout(shape, axes, layout):
    assert reduction_layout(shape, axes) is layout


def test_reduction_info_from_ops():
    row = classify(last_op(lambda b: b.mean(b.input("x", (16, 32)), axis=-1, keepdims=True)))
    col = classify(last_op(lambda b: b.sum(b.input("x", (16, 32)), axis=0)))
    full = classify(last_op(lambda b: b.max(b.input("x", (16, 32)))))
    assert (row.reduction, row.row_length) == (ReductionLayout.ROW, 32)
    assert (col.reduction, col.row_length) == (ReductionLayout.COLUMN, 16)
    assert (full.reduction, full.row_length) == (ReductionLayout.FULL, 512)


def test_contractions_split_by_size():
    small = last_op(lambda b: b.matmul(b.input("q", (12, 128, 64)), b.input("k", (12, 64, 128))))
    large = last_op(lambda b: b.matmul(b.input("x", (128, 768)), b.input("w", (768, 768))))
    assert contraction_flops(small) == 2 * 12 * 128 * 64 * 128
    assert classify(small).contraction is ContractionSize.FINE and classify(small).fusible
    assert classify(large).contraction is ContractionSize.LARGE and not classify(large).fusible
    # the threshold is a parameter
    assert classify(small, fine_gemm_flops=1000).contraction is ContractionSize.LARGE
    assert classify(large, fine_gemm_flops=2**40).contraction is ContractionSize.FINE
