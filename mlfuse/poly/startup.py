"""Start-up fusion (minfuse-like): what needs no tiling decision, before tiling.

- **Copy forwarding.** A nest that only moves elements (a slice, a broadcast, a
  transpose: body `loop.yield %in`, invertible write map) into an intermediate is
  removed, and its readers read the source directly through the composed map
  `read . write^-1 . reader_map`. Stencils written as slices then become one nest
  with shifted accesses, as in a polyhedral frontend.
- **Pointwise merging.** A producer nest whose consumer reads its output at the
  very iteration that wrote it (same domain, same map: dependence distance zero)
  merges into the consumer: one nest, one body computing both. The intermediate
  disappears unless someone else reads it (then the merged nest writes it too).

Shifted (stencil) dependences and reductions are never merged here: such producers
keep their own computation spaces, for loop-post-tile-fuse (or tile-after-fuse).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import AffineMapAttr, ArrayAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)
from xdsl.rewriter import InsertPoint

from mlfuse.dialects import loop
from mlfuse.poly.program import (
    block_positions,
    can_move_down,
    effects,
    erase_buffer,
    is_intermediate,
    is_sole_writer,
    may_join,
    only_deallocs,
    ops_between,
    ops_of,
    place_deallocs,
    root,
)


@dataclass
class Rescan:
    """What start-up fusion keeps across its scans of a function (each fusion starts the
    scan again from the top, ~100 times on MobileNetV2): facts about a nest that hold as
    long as it lives, and whether every dealloc is in place yet.

    Forwarding a copy changes only what its readers read, merging replaces two nests by a
    new one: neither changes whether another nest is a copy, nor what it writes, nor
    whether it is the only writer (forwardable_copy, pointwise_outputs)."""

    copies: dict[Operation, list[tuple[int, int]] | None] = field(default_factory=dict)
    outputs: dict[Operation, list[SSAValue] | None] = field(default_factory=dict)
    deallocs_placed: bool = False

    def forwardable_copy(self, fn: func.FuncOp, nest: loop.NestOp, scope: str) -> list[tuple[int, int]] | None:
        if nest not in self.copies:
            self.copies[nest] = forwardable_copy(fn, nest, scope)
        return self.copies[nest]

    def pointwise_outputs(self, fn: func.FuncOp, nest: loop.NestOp) -> list[SSAValue] | None:
        if nest not in self.outputs:
            self.outputs[nest] = pointwise_outputs(fn, nest)
        return self.outputs[nest]

    def place_deallocs(self, block: Block, changed: Iterable[SSAValue]) -> None:
        """Every dealloc the first time (they need not be in place before the first
        fusion), then only those of the buffers whose uses a fusion `changed`."""
        place_deallocs(block, list(changed) if self.deallocs_placed else None)
        self.deallocs_placed = True


# --- copy forwarding ----------------------------------------------------------------------------------


def is_copy(nest: loop.NestOp) -> bool:
    """One input, one output, the body yields the input element, all parallel, static."""
    if len(nest.ins) != 1 or len(nest.outs) != 1 or nest.syms:
        return False
    if any(k != loop.PARALLEL for k in nest.iterator_kinds):
        return False
    ops = list(nest.block.ops)
    return len(ops) == 1 and isinstance(ops[0], loop.YieldOp) and list(ops[0].values) == [nest.block.args[0]]


def split_shift(e: AffineExpr) -> tuple[int, int] | None:
    """(dim, c) if `e` is `d_dim + c`, else None."""
    if isinstance(e, AffineDimExpr):
        return e.position, 0
    if isinstance(e, AffineBinaryOpExpr) and e.kind == AffineBinaryOpKind.Add:
        if isinstance(e.lhs, AffineDimExpr) and isinstance(e.rhs, AffineConstantExpr):
            return e.lhs.position, e.rhs.value
        if isinstance(e.rhs, AffineDimExpr) and isinstance(e.lhs, AffineConstantExpr):
            return e.rhs.position, e.lhs.value
    return None


def inverse_of_shifted_permutation(m: AffineMap) -> list[tuple[int, int]] | None:
    """For a write map `y_k = d_perm[k] + c_k` using every dimension once: [(k, c_k)] per
    dimension d (so d = y_k - c_k); None for any other map."""
    if len(m.results) != m.num_dims or m.num_symbols:
        return None
    inverse: list[tuple[int, int] | None] = [None] * m.num_dims
    for k, e in enumerate(m.results):
        found = split_shift(e)
        if found is None or inverse[found[0]] is not None:
            return None
        inverse[found[0]] = (k, found[1])
    return inverse  # type: ignore[return-value]


def forwardable_copy(fn: func.FuncOp, nest: loop.NestOp, scope: str) -> list[tuple[int, int]] | None:
    """The inverse of the write map of a copy that forward_copy may remove as far as the nest
    itself tells (a copy, allowed to join in `scope`, the only writer of a private
    intermediate, an invertible write); None if it may not."""
    if not is_copy(nest) or not may_join([nest], scope):  # an untagged nest joins nothing in scope "group"
        return None
    dst = nest.outs[0]
    if not is_intermediate(dst, fn) or not is_sole_writer(nest, dst, fn.body.block):
        return None
    return inverse_of_shifted_permutation(nest.out_maps[0])


def forward_copy(fn: func.FuncOp, nest: loop.NestOp, scope: str = "function", rescan: Rescan | None = None) -> bool:
    block = fn.body.block
    rescan = rescan or Rescan()
    inverse = rescan.forwardable_copy(fn, nest, scope)
    if inverse is None:
        return False
    dst, src = nest.outs[0], nest.ins[0]
    readers = [u.operation for u in dst.uses if u.operation is not nest and not isinstance(u.operation, memref.DeallocOp)]
    src_root = root(src)
    if not may_join([nest, *readers], scope):
        return False
    for r in dict.fromkeys(readers):
        if not isinstance(r, loop.NestOp) or r.parent_block() is not block or dst in r.outs or loop.has_indirect_reads(r):
            return False
        if src_root in effects(r).writes:
            return False
        if any(src_root in effects(o).writes for o in ops_between(block, nest, r)):
            return False
    read = nest.in_maps[0]
    for r in dict.fromkeys(readers):
        maps = list(r.access_maps)
        operands = [*r.ins, *r.outs]
        for i, v in enumerate(operands):
            if v is not dst:
                continue
            m = maps[i]
            dims = [m.results[k] - c if c else m.results[k] for k, c in inverse]
            maps[i] = AffineMap(m.num_dims, m.num_symbols, tuple(e.replace_dims_and_symbols(dims, []) for e in read.results))
            r.operands[len(r.syms) + i] = src
        r.maps = ArrayAttr([AffineMapAttr(m) for m in maps])
    nest.detach()
    nest.erase()
    if only_deallocs(dst):
        erase_buffer(dst)
    rescan.place_deallocs(block, [src])  # its readers now read src
    return True


# --- pointwise merging -----------------------------------------------------------------------------------


def pointwise_outputs(fn: func.FuncOp, a: loop.NestOp) -> list[SSAValue] | None:
    """The buffers `a` writes, if it may merge into a consumer at all: static, all parallel, and
    the only writer of distinct private intermediates; else None."""
    block = fn.body.block
    if a.syms or a.static_bounds() is None or any(k != loop.PARALLEL for k in a.iterator_kinds):
        return None
    outs = [root(v) for v in a.outs]
    if len(set(outs)) != len(outs) or not all(is_intermediate(o, fn) and is_sole_writer(a, o, block) for o in outs):
        return None
    return outs


def first_consumer(block: Block, a: loop.NestOp, outs: Sequence[SSAValue],
                   position: dict[Operation, int] | None = None) -> loop.NestOp | None:
    """The first op that reads one of `outs` (deallocations aside), if it is a top-level nest.
    `position`: the index of every top-level op of `block`, if the caller has it."""
    readers = {u.operation for o in outs for u in o.uses if u.operation is not a and not isinstance(u.operation, memref.DeallocOp)}
    if not readers or any(r.parent_block() is not block for r in readers):
        return None  # no reader, or the first one is not a top-level op
    position = position if position is not None else block_positions(block)
    first = min(readers, key=position.__getitem__)
    return first if isinstance(first, loop.NestOp) else None


def reads_pointwise(block: Block, a: loop.NestOp, b: loop.NestOp, outs: Sequence[SSAValue]) -> bool:
    """Whether consumer `b` runs over a's domain, reads a's outputs at the iteration that wrote
    them (dependence distance zero) and writes none of what `a` touches, and `a` can move down to it."""
    if b.syms or b.static_bounds() != a.static_bounds() or loop.has_indirect_reads(a) or loop.has_indirect_reads(b):
        return False
    write_map = dict(zip(a.outs, a.out_maps))
    if any(v in write_map for v in b.outs):
        return False
    for v, m in zip(b.ins, b.in_maps):
        if v in write_map and m != write_map[v]:
            return False  # a shifted read: a stencil, not pointwise
    if effects(b).writes & (effects(a).reads | set(outs)):
        return False
    return can_move_down(a, ops_between(block, a, b))


def kept_outputs(a: loop.NestOp, b: loop.NestOp) -> list[SSAValue] | None:
    """The outputs of `a` that something after the merge still reads (the merged nest writes
    them too); None if `a` reads the old value of an output that would vanish."""
    keep = [o for o in a.outs if any(u.operation not in (a, b) and not isinstance(u.operation, memref.DeallocOp) for u in o.uses)]
    for k, o in enumerate(a.outs):
        if o not in keep and a.block.args[len(a.ins) + k].uses:
            return None  # the producer reads the old value of an output that would vanish
    return keep


def merge_pointwise(fn: func.FuncOp, producer: loop.NestOp, scope: str = "function",
                    position: dict[Operation, int] | None = None, rescan: Rescan | None = None) -> bool:
    """Merge `producer` into the first nest that reads one of its outputs pointwise
    (`position`: the index of every top-level op, if the caller has it)."""
    block = fn.body.block
    a = producer
    rescan = rescan or Rescan()
    if not may_join([a], scope):  # an untagged nest joins nothing in scope "group"
        return False
    outs = rescan.pointwise_outputs(fn, a)
    if outs is None:
        return False
    b = first_consumer(block, a, outs, position)
    if b is None or not may_join([a, b], scope) or not reads_pointwise(block, a, b, outs):
        return False
    keep = kept_outputs(a, b)
    if keep is None:
        return False
    merged = build_merged(a, b, keep)
    moved = [*a.ins, *a.outs]  # a's buffers, now used where b was
    block.insert_op_before(merged, b)
    for op in (b, a):
        op.detach()
        op.erase()
    for o in outs:
        if only_deallocs(o):
            erase_buffer(o)
    rescan.place_deallocs(block, moved)
    return True


def build_merged(a: loop.NestOp, b: loop.NestOp, keep: Sequence[SSAValue]) -> loop.NestOp:
    """One nest over b's domain computing a's body, then b's with a's outputs forwarded."""
    a_out_pos = {v: k for k, v in enumerate(a.outs)}
    b_ins = [(v, m) for v, m in zip(b.ins, b.in_maps) if v not in a_out_pos]
    ins = [*zip(a.ins, a.in_maps), *b_ins]
    outs = [(o, a.out_maps[a_out_pos[o]]) for o in keep] + list(zip(b.outs, b.out_maps))
    block = Block(arg_types=[v.type.get_element_type() for v, _ in (*ins, *outs)])  # type: ignore[union-attr]
    args = list(block.args)
    n_ins = len(ins)
    mapping: dict[SSAValue, SSAValue] = {}
    for k, arg in enumerate(a.block.args[: len(a.ins)]):
        mapping[arg] = args[k]
    for k, o in enumerate(keep):
        mapping[a.block.args[len(a.ins) + a_out_pos[o]]] = args[n_ins + k]
    builder = Builder(InsertPoint.at_end(block))
    a_values: list[SSAValue] = []
    for op in a.block.ops:
        if isinstance(op, loop.YieldOp):
            a_values = [mapping.get(v, v) for v in op.values]
            break
        builder.insert(op.clone(value_mapper=mapping))
    b_mapping: dict[SSAValue, SSAValue] = {}
    next_in = len(a.ins)
    for arg, v in zip(b.block.args[: len(b.ins)], b.ins):
        if v in a_out_pos:
            b_mapping[arg] = a_values[a_out_pos[v]]
        else:
            b_mapping[arg] = args[next_in]
            next_in += 1
    for k, arg in enumerate(b.block.args[len(b.ins) :]):
        b_mapping[arg] = args[n_ins + len(keep) + k]
    b_values: list[SSAValue] = []
    for op in b.block.ops:
        if isinstance(op, loop.YieldOp):
            b_values = [b_mapping.get(v, v) for v in op.values]
            break
        builder.insert(op.clone(value_mapper=b_mapping))
    builder.insert(loop.YieldOp(*[a_values[a_out_pos[o]] for o in keep], *b_values))
    merged = loop.NestOp(
        b.nest_name.data,
        (list(b.lower.data), list(b.upper.data)),
        b.iterator_kinds,
        [v for v, _ in ins],
        [v for v, _ in outs],
        [m for _, m in (*ins, *outs)],
        Region(block),
    )
    merged.attributes.update(b.attributes)
    return merged


def startup_fuse(fn: func.FuncOp, forward: bool = True, merge: bool = True, scope: str = "function") -> dict[str, int]:
    """Forward copies, then merge pointwise producers, each until nothing changes; in scope
    "group" only within one window group (mlfuse.poly.program.may_join)."""
    block = fn.body.block
    stats = {"forwarded": 0, "merged": 0}
    rescan = Rescan()
    changed = forward
    while changed:
        changed = False
        for op in ops_of(block):
            if isinstance(op, loop.NestOp) and forward_copy(fn, op, scope, rescan):
                stats["forwarded"] += 1
                changed = True
                break
    changed = merge
    while changed:
        changed = False
        ops = ops_of(block)
        position = {op: i for i, op in enumerate(ops)}  # valid until the first merge, which ends the scan
        for op in ops:
            if isinstance(op, loop.NestOp) and merge_pointwise(fn, op, scope, position, rescan):
                stats["merged"] += 1
                changed = True
                break
    return stats
