"""Folding a reduction's initialization into the reduction (loop-fold-init).

graph-to-loop lowers a window reduction as two nests: one writes its start value over
the output (`conv_init`: zeros; `pool_init_max`: -inf), the next sums into it. The
first is a memset of the output before the sum reads it back; folded, the reduction
nest carries the constant as its `init`, which each output element's first reduction
step reads in place of the buffer (convert-loop-to-scf: a select on "every reduction
dimension at its lower bound", which LLVM folds away once it unrolls the taps).

Folded only where that is exact and cheap:
- the init nest writes the same buffer, by the same map over the same bounds, as the
  reduction writes it (its dimensions being the reduction's parallel ones, in order),
  with a constant, and nothing between the two touches the buffer (or a view of it);
- the reduction does not also read the buffer, and sums at least one and at most
  MAX_REDUCTION_POINTS points per output element over constant bounds (a window's
  taps: unrolled by LLVM; over a longer reduction the select would stay in the loop;
  over an empty one nothing would write the start value).
"""

from __future__ import annotations

import math

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import ArrayAttr, UnitAttr
from xdsl.ir import Attribute, Block

from mlfuse.dialects import loop
from mlfuse.poly.program import adjacent_user, nest_blocks

MAX_REDUCTION_POINTS = 64


def fold_inits(fn: func.FuncOp) -> int:
    """Fold the init nests of `fn`'s small reductions into them; how many were folded."""
    folded = 0
    for block in nest_blocks(fn):
        for op in list(block.ops):
            if isinstance(op, loop.NestOp) and sums_few_points(op):
                folded += fold_into(op)
    return folded


def sums_few_points(nest: loop.NestOp) -> bool:
    """A reduction over constant bounds of at most MAX_REDUCTION_POINTS points per output,
    its taps inside the output's dimensions (NestOp.sums_inside_outputs: each output
    element's steps run together, and the first is known once the taps are unrolled)."""
    trips = [nest.constant_trip(d) for d, kind in enumerate(nest.iterator_kinds) if kind == loop.REDUCTION]
    if not trips or None in trips or 0 in trips:  # an empty reduction never takes its first step: the init nest stays
        return False
    return math.prod(trips) <= MAX_REDUCTION_POINTS and nest.sums_inside_outputs()  # type: ignore[arg-type]


def fold_into(nest: loop.NestOp) -> int:
    """Fold the init nest of each output of `nest` (`init_writer`); how many."""
    values: list[Attribute] = [v if v is not None else UnitAttr() for v in nest.init_values]
    folded = 0
    for k in range(len(nest.outs)):
        if not isinstance(values[k], UnitAttr):
            continue
        writer = init_writer(nest, k)
        if writer is None:
            continue
        init, constant = writer
        values[k] = constant
        init.detach()
        init.erase()
        folded += 1
    if folded:
        nest.properties["init"] = ArrayAttr(values)
    return folded


def init_writer(nest: loop.NestOp, k: int) -> tuple[loop.NestOp, Attribute] | None:
    """The nest that writes a constant over exactly what output k of `nest` covers,
    right before it as far as that buffer goes, and the constant; else None."""
    buffer = nest.outs[k]
    root = loop.view_root(buffer)
    if any(loop.view_root(v) is root for v in nest.ins):
        return None
    prev = adjacent_user(nest, root, forward=False)
    if not isinstance(prev, loop.NestOp) or list(prev.outs) != [buffer] or prev.ins or list(prev.syms) != list(nest.syms):
        return None
    constant = yielded_constant(prev.block)
    if constant is None or any(kind != loop.PARALLEL for kind in prev.iterator_kinds):
        return None
    return (prev, constant) if nest.walks_output(k, prev, prev.out_maps[0]) else None


def yielded_constant(block: Block) -> Attribute | None:
    """The value a nest body yields when it yields one arith.constant of its own."""
    term = block.last_op
    if not isinstance(term, loop.YieldOp) or len(term.values) != 1:
        return None
    owner = term.values[0].owner
    if isinstance(owner, arith.ConstantOp) and owner.parent_block() is block:
        return owner.value
    return None
