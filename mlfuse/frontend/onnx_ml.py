"""ai.onnx.ml operators on numeric tensors (the string-keyed ones are not supported):

    Binarizer              x > threshold ? 1 : 0, in x's type (NaN: 0, as numpy's compare)
    ArrayFeatureExtractor  x gathered along its last axis at the indices y (a 1-D x: one row)
    TreeEnsemble           each tree's leaf found by its path's conditions, aggregated per target

and the default domain's TfIdfVectorizer on integer n-grams (convert_tfidf_vectorizer).
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import f32, i1, i64
from xdsl.ir import SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import element_type_of, fmt_shape, is_float, shape_of
from mlfuse.frontend.onnx_composite import composite, float_input
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


TREE_COMPARES = {0: "le", 1: "lt", 2: "ge", 3: "gt", 4: "eq", 5: "ne"}  # 6: MEMBER
TREE_MAX_LEAVES = 4096  # each leaf is a conjunction of its path's conditions


@composite(DOMAIN + "TreeEnsemble", attributes=(
    "aggregate_function", "leaf_targetids", "leaf_weights", "membership_values", "n_targets", "nodes_falseleafs",
    "nodes_falsenodeids", "nodes_featureids", "nodes_hitrates", "nodes_missing_value_tracks_true", "nodes_modes",
    "nodes_splits", "nodes_trueleafs", "nodes_truenodeids", "post_transform", "tree_roots"))
def convert_tree_ensemble(node: Node) -> list[Value]:
    """Every tree reaches one leaf; a leaf is reached where each condition on its path
    holds (or fails, on the false branch): the leaf's weight is selected there, and the
    trees' weights per target summed (SUM, AVERAGE: over the tree count) or their MIN or
    MAX taken (from the type's largest or lowest value, as onnx's reference does).
    post_transform must be NONE."""
    x = float_input(node)
    if len(shape_of(x)) != 2:
        raise node.error(f"X must be [N, features], got {fmt_shape(shape_of(x))}")
    if int(node.attr("post_transform", 0)) != 0:
        raise node.error("only post_transform NONE (0) is supported")
    aggregate = int(node.attr("aggregate_function", 1))
    if aggregate not in (0, 1, 2, 3):
        raise node.error(f"aggregate_function {aggregate} is not AVERAGE, SUM, MIN or MAX (0 to 3)")
    trees = TreeAttributes(node)
    targets = int(node.attr("n_targets"))
    leaves = [leaf for root in trees.roots for leaf in trees.leaves(root)]
    if len(leaves) > TREE_MAX_LEAVES:
        raise node.error(f"{len(leaves)} leaves are more than mlfuse unrolls ({TREE_MAX_LEAVES})")
    n = shape_of(x)[0]
    conditions: dict[int, SSAValue] = {}
    info = np.finfo(graph.numpy_dtype(element_type_of(x)))
    start = {0: 0.0, 1: 0.0, 2: float(info.max), 3: float(info.min)}[aggregate]
    columns = []
    for target in range(targets):
        total = node.splat(start, element_type_of(x), (n,))
        for path, leaf in leaves:
            if trees.target(leaf) != target:
                continue
            reached = None
            for index, branch in path:
                if index not in conditions:
                    conditions[index] = trees.condition(x, index)
                holds = conditions[index] if branch else node.emit(graph.SelectOp(
                    conditions[index], node.splat(False, i1, (n,)), node.splat(True, i1, (n,))))
                reached = holds if reached is None else node.emit(graph.SelectOp(reached, holds, reached))
            weight = trees.weight(leaf) / (len(trees.roots) if aggregate == 0 else 1)
            value = node.splat(weight, element_type_of(x), (n,))
            if aggregate in (0, 1):
                value = value if reached is None else node.emit(graph.SelectOp(reached, value, node.scalar_like(0.0, value)))
                total = node.emit(graph.AddOp(total, value))
            else:
                pick = graph.MinOp if aggregate == 2 else graph.MaxOp
                value = value if reached is None else node.emit(graph.SelectOp(reached, value, node.scalar_like(start, value)))
                total = node.emit(pick(total, value))
        columns.append(node.reshape(total, (n, 1)))
    return [columns[0] if len(columns) == 1 else node.emit(graph.ConcatOp(columns, 1))]


class TreeAttributes:
    """A TreeEnsemble's node and leaf arrays, walked as trees."""

    def __init__(self, node: Node):
        self.node = node

        def ints(name: str) -> list[int]:
            return [int(v) for v in np.asarray(node.attr(name, [])).reshape(-1)]

        self.features, self.modes = ints("nodes_featureids"), ints("nodes_modes")
        self.true_ids, self.false_ids = ints("nodes_truenodeids"), ints("nodes_falsenodeids")
        self.true_leaf, self.false_leaf = ints("nodes_trueleafs"), ints("nodes_falseleafs")
        self.roots, self.targets = ints("tree_roots"), ints("leaf_targetids")
        self.splits = np.asarray(node.attr("nodes_splits", [])).astype(np.float64).reshape(-1)
        self.weights = np.asarray(node.attr("leaf_weights", [])).astype(np.float64).reshape(-1)
        self.missing = ints("nodes_missing_value_tracks_true") or [0] * len(self.modes)
        members = np.asarray(node.attr("membership_values", [])).astype(np.float64).reshape(-1)
        self.members: dict[int, list[float]] = {}
        groups = iter(np.split(members, np.flatnonzero(np.isnan(members)) + 1))
        for i, mode in enumerate(self.modes):  # one NaN-terminated group per MEMBER node, in order
            if mode == 6:
                self.members[i] = [float(v) for v in next(groups, np.array([])) if not np.isnan(v)]

    def leaves(self, root: int) -> list[tuple[list[tuple[int, bool]], int]]:
        """(path as (node, branch taken) pairs, leaf index) of every leaf under `root`."""
        if self.true_leaf[root] and self.false_leaf[root] and self.true_ids[root] == self.false_ids[root]:
            return [([], self.true_ids[root])]  # a tree that is one leaf
        found, stack = [], [(root, [])]
        while stack:
            index, path = stack.pop()
            for branch, child, is_leaf in ((True, self.true_ids[index], self.true_leaf[index]),
                                           (False, self.false_ids[index], self.false_leaf[index])):
                step = [*path, (index, branch)]
                if is_leaf:
                    found.append((step, child))
                else:
                    stack.append((child, step))
        return found

    def target(self, leaf: int) -> int:
        return self.targets[leaf]

    def weight(self, leaf: int) -> float:
        return float(self.weights[leaf])

    def condition(self, x: SSAValue, index: int) -> SSAValue:
        """Whether node `index`'s test holds, per row (NaN counts as true where it tracks true)."""
        node, n = self.node, shape_of(x)[0]
        column = node.reshape(slice_axis(node, x, 1, self.features[index], self.features[index] + 1), (n,))
        mode = self.modes[index]
        if mode == 6:
            holds = node.splat(False, i1, (n,))
            for member in self.members.get(index, []):
                equal = node.emit(graph.CompareOp("eq", column, node.scalar_like(member, column)))
                holds = node.emit(graph.SelectOp(equal, equal, holds))
        elif mode in TREE_COMPARES:
            holds = node.emit(graph.CompareOp(TREE_COMPARES[mode], column, node.scalar_like(float(self.splits[index]), column)))
        else:
            raise node.error(f"node {index} has mode {mode}, which is not one of 0 to 6")
        if self.missing[index]:
            holds = node.emit(graph.SelectOp(node.emit(graph.CompareOp("ne", column, column)), node.splat(True, i1, (n,)), holds))
        return holds
