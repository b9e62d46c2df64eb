"""ai.onnx.ml operators on numeric tensors (the string-keyed ones are not supported):

    Binarizer              x > threshold ? 1 : 0, in x's type (NaN: 0, as numpy's compare)
    ArrayFeatureExtractor  x gathered along its last axis at the indices y (a 1-D x: one row)

and the default domain's TfIdfVectorizer on integer n-grams (convert_tfidf_vectorizer).
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import f32, i1, i64
from xdsl.ir import SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, is_float, shape_of
from mlfuse.frontend.onnx_composite import composite
from mlfuse.frontend.onnx_ops import Node, Value, dense_from_numpy, slice_axis

DOMAIN = "ai.onnx.ml."


@composite(DOMAIN + "Binarizer", attributes=("threshold",))
def convert_binarizer(node: Node) -> list[Value]:
    x = node.input(0)
    above = node.emit(graph.CompareOp("gt", x, node.scalar_like(float(node.attr("threshold", 0.0)), x)))
    return [node.emit(graph.SelectOp(above, node.scalar_like(1, x), node.scalar_like(0, x)))]


@composite(DOMAIN + "ArrayFeatureExtractor")
def convert_array_feature_extractor(node: Node) -> list[Value]:
    """x[..., indices.ravel()]; a 1-D x gives one row (1, k), as onnxruntime does."""
    x, indices = node.input(0), node.input(1)
    shape = shape_of(x)
    if not shape:
        raise node.error("x must have at least one axis")
    if element_type_of(indices) != i64:
        raise node.error(f"the indices must be int64, got {element_type_of(indices)}")
    flat = node.reshape(indices, (math.prod(shape_of(indices)),))
    picked = node.emit(graph.GatherOp(x, flat, len(shape) - 1))
    return [node.reshape(picked, (1, *shape_of(picked))) if len(shape) == 1 else picked]


@composite("TfIdfVectorizer", attributes=("max_gram_length", "max_skip_count", "min_gram_length", "mode", "ngram_counts",
                                        "ngram_indexes", "pool_int64s", "pool_strings", "weights"))
def convert_tfidf_vectorizer(node: Node) -> list[Value]:
    """Counts of the pool's n-grams in each row of integer x, weighted by `mode`.

    As onnx's reference counts them: gram j of the pool (sizes from ngram_counts; only
    sizes in [min_gram_length, max_gram_length] count) occurs at start i with skip
    distance d (1 to max_skip_count + 1; unigrams at d = 1 only) when x[i + k d] = g[k]
    for every k; its count goes to output column ngram_indexes[j]. Each (gram, d) is a
    conjunction of shifted compares, summed along the row. TF: the counts; IDF: the weight
    (or 1) where a count is positive; TFIDF: weight times count."""
    x = node.input(0)
    if node.attr("pool_strings") is not None or is_float(element_type_of(x)) or element_type_of(x) == i1:
        raise node.error("only integer inputs with pool_int64s are supported (strings are not)")
    shape = shape_of(x)
    if len(shape) not in (1, 2):
        raise node.error(f"x must be [C] or [B, C], got {list(shape)}")
    rows = node.reshape(x, (1, shape[0]) if len(shape) == 1 else shape)
    batch, length = shape_of(rows)
    pool, starts = [int(v) for v in node.attr("pool_int64s", [])], [int(v) for v in node.attr("ngram_counts", [])]
    indexes = [int(v) for v in node.attr("ngram_indexes", [])]
    low, high, skips = int(node.attr("min_gram_length")), int(node.attr("max_gram_length")), int(node.attr("max_skip_count"))
    grams = [tuple(pool[s + k * n:s + (k + 1) * n]) for n, (s, e) in enumerate(zip(starts, [*starts[1:], len(pool)]), 1)
             for k in range((e - s) // n)]
    if len(indexes) != len(grams) or not indexes:
        raise node.error(f"ngram_indexes has {len(indexes)} entries for {len(grams)} pool n-grams")
    columns: dict[int, SSAValue] = {}
    for gram, column in zip(grams, indexes):
        if not low <= len(gram) <= high:
            continue
        for distance in range(1, (skips + 1 if len(gram) > 1 else 1) + 1):
            count = occurrences(node, rows, gram, distance)
            if count is not None:
                columns[column] = count if column not in columns else node.emit(graph.AddOp(columns[column], count))
    width = max(indexes) + 1
    zero = node.splat(0.0, f32, (batch, 1))
    counts = node.emit(graph.ConcatOp([node.reshape(columns[o], (batch, 1)) if o in columns else zero for o in range(width)], 1))
    weighted = weigh(node, counts, str(node.attr("mode")), [float(w) for w in node.attr("weights", [])])
    return [node.reshape(weighted, (width,)) if len(shape) == 1 else weighted]


def occurrences(node: Node, rows: SSAValue, gram: tuple[int, ...], distance: int) -> SSAValue | None:
    """How often `gram` occurs in each row with its items `distance` apart (float32), or
    None where it does not fit."""
    batch, length = shape_of(rows)
    span = length - (len(gram) - 1) * distance
    if span <= 0:
        return None
    hit = None
    for k, item in enumerate(gram):
        window = slice_axis(node, rows, 1, k * distance, k * distance + span)
        same = node.emit(graph.CompareOp("eq", window, node.scalar_like(item, window)))
        hit = same if hit is None else node.emit(graph.SelectOp(hit, same, hit))
    assert hit is not None
    return node.emit(graph.ReduceSumOp(node.cast(hit, f32), [1]))


def weigh(node: Node, counts: SSAValue, mode: str, weights: list[float]) -> SSAValue:
    width = shape_of(counts)[1]
    if mode == "TF":
        return counts
    if mode not in ("IDF", "TFIDF"):
        raise node.error(f"mode must be TF, IDF or TFIDF, got '{mode}'")
    if weights and len(weights) != width:
        raise node.error(f"weights has {len(weights)} entries for {width} outputs")
    if mode == "IDF":
        counts = node.emit(graph.SelectOp(node.emit(graph.CompareOp("gt", counts, node.scalar_like(0.0, counts))),
                                          node.scalar_like(1.0, counts), node.scalar_like(0.0, counts)))
    if not weights:
        return counts
    scale = node.emit(graph.ConstantOp(dense_from_numpy(np.array(weights, np.float32), f32)))
    return node.emit(graph.MulOp(counts, node.emit(graph.BroadcastOp(scale, [1], shape_of(counts)))))
