"""A function at the loop level as a sequence of top-level ops: buffer effects,
dependences between ops and across tiles, and the IR surgery the passes share.

Buffers are tracked by their root (a `loop.view` aliases its source). An
intermediate is a top-level `memref.alloc` of the function that no view touches;
only intermediates are ever fused, privatized or shrunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import islpy as isl
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import ArrayAttr, IndexType, MemRefType, StringAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineMap

from mlfuse.dialects import loop
from mlfuse.poly.islconv import Names, Unsupported, accesses, domain, to_band_map


def root(v: SSAValue) -> SSAValue:
    """The buffer a value aliases (through views)."""
    return loop.view_root(v)


def has_views(buf: SSAValue) -> bool:
    return isinstance(buf.owner, loop.ViewOp) or any(isinstance(u.operation, loop.ViewOp) for u in buf.uses)


def is_intermediate(buf: SSAValue, fn: func.FuncOp) -> bool:
    """A top-level `memref.alloc` of `fn` with no views: private to the function, safe to rework."""
    op = buf.owner
    return isinstance(op, memref.AllocOp) and op.parent_op() is fn and not has_views(buf)


def nest_blocks(fn: func.FuncOp) -> list[Block]:
    """The blocks of `fn` that hold nests: its body and every band's."""
    return [fn.body.block, *(band.block for band in fn.walk() if isinstance(band, loop.BandOp))]


def nests_in(op: Operation) -> list[loop.NestOp]:
    """The nests an op runs: itself, or those of a band (in order, nested bands' too).
    Not a walk of the band: that visited every op of every nest body (MobileNetV2's
    post-tiling fusion asked 3315 times)."""
    if isinstance(op, loop.NestOp):
        return [op]
    if isinstance(op, loop.BandOp):
        return [n for inner in op.block.ops for n in nests_in(inner)]
    return []


def private_buffers(band: loop.BandOp) -> set[SSAValue]:
    return {o.memref for o in band.block.ops if isinstance(o, memref.AllocaOp)}


@dataclass
class Effects:
    reads: set[SSAValue]
    writes: set[SSAValue]

    def conflicts_with(self, other: Effects) -> bool:
        """Do the two touch a buffer in a way that orders them (at least one write)?"""
        return bool(
            self.writes & (other.reads | other.writes) or other.writes & self.reads
        )


def effects(op: Operation) -> Effects:
    """Root buffers an op reads and writes (band scratch excluded; unknown ops: everything)."""
    if isinstance(op, loop.NestOp):
        return Effects({root(v) for v in op.ins}, {root(v) for v in op.outs})
    if isinstance(op, loop.BandOp):
        private = private_buffers(op)
        reads, writes = set(), set()
        for n in nests_in(op):
            reads |= {root(v) for v in n.ins if v not in private}
            writes |= {root(v) for v in n.outs if v not in private}
        return Effects(reads, writes)
    if isinstance(op, loop.GemmOp):
        return Effects({root(v) for v in op.buffers_read}, {root(v) for v in op.buffers_written})
    if isinstance(op, memref.AllocOp | memref.AllocaOp | memref.DeallocOp | loop.ViewOp | func.ReturnOp | memref.GetGlobalOp):
        return Effects(set(), set())
    bufs = {root(v) for v in op.operands if isinstance(v.type, memref.MemRefType)}
    return Effects(bufs, set(bufs))


def writers(buf: SSAValue, block: Block, position: Mapping[Operation, int] | None = None) -> list[loop.NestOp] | None:
    """Top-level nests of `block` writing `buf`, in order; None if anything else writes it.

    Only the ops that use `buf` (or a view of it) can write it, so only they are asked for
    their effects: asking every op of the block made start-up fusion quadratic (ResNet-18:
    558k effect computations, most of a 45 s compile). Walking the block to order them is
    needed only when there are two or more (MobileNetV2: the walk was 12 s of a compile),
    and not then for a caller that passes the block's `position`s (block_positions)
    taken since its top-level ops last changed."""
    found = [op for op in users_in(block, buf) if buf in effects(op).writes]
    if not all(isinstance(op, loop.NestOp) for op in found):
        return None
    if len(found) > 1:
        found = sorted(found, key=position.__getitem__) if position is not None else in_block_order(block, found)
    return found  # type: ignore[return-value]


def is_sole_writer(op: Operation, buf: SSAValue, block: Block) -> bool:
    """Whether `writers(buf, block) == [op]`, without ordering the writers."""
    found = [w for w in users_in(block, buf) if buf in effects(w).writes]
    return found == [op]


def in_block_order(block: Block, ops: Iterable[Operation]) -> list[Operation]:
    """Top-level ops of `block` in the order they run (one walk of the block)."""
    wanted = set(ops)
    return [op for op in block.ops if op in wanted]


def users_in(block: Block, buf: SSAValue) -> set[Operation]:
    """The top-level ops of `block` that use `buf` or a view of it."""
    users: set[Operation] = set()
    values = [buf]
    while values:
        v = values.pop()
        for use in v.uses:
            if isinstance(use.operation, loop.ViewOp):
                values.append(use.operation.result)
            top = top_ancestor(use.operation, block)
            if top is not None:
                users.add(top)
    return users


def adjacent_user(op: Operation, buf: SSAValue, forward: bool = True) -> Operation | None:
    """The nearest top-level op after `op` (before it, with `forward` false) in its block
    that uses `buf` or a view of it (`users_in`); None if there is none."""
    block = op.parent_block()
    assert block is not None
    users = users_in(block, buf)
    other = op.next_op if forward else op.prev_op
    while other is not None and other not in users:
        other = other.next_op if forward else other.prev_op
    return other


def can_move_down(op: Operation, between: Iterable[Operation]) -> bool:
    """May `op` run after all of `between` (which ran after it) without changing results?"""
    mine = effects(op)
    return not any(mine.conflicts_with(effects(x)) for x in between)


def ops_between(block: Block, first: Operation, last: Operation) -> list[Operation]:
    """The top-level ops strictly between `first` and `last` ([] unless `last` comes after
    `first`): a walk from `first`, not an index of the whole block."""
    between = []
    op = first.next_op
    while op is not None and op is not last:
        between.append(op)
        op = op.next_op
    return between if op is last else []


def top_ancestor(op: Operation, block: Block) -> Operation | None:
    while op is not None and op.parent_block() is not block:
        op = op.parent_op()
    return op


def place_deallocs(block: Block, buffers: Iterable[SSAValue] | None = None) -> None:
    """Move every dealloc after the last top-level op that uses its buffer (or its views).

    Positions come from one walk of the block: xDSL's get_operation_index walks the block
    on every call, which made this cubic in the ops of a function (MobileNetV2: 70 s under
    cProfile). Moving a dealloc leaves the order of every other op as it was, so the walk
    stays good for comparing any ops but the deallocs moved since; it is taken again only
    when one of those is among a buffer's users.

    `buffers` limits the work to the deallocs of those buffers (and of the buffers they are
    views of), for a caller that changed only their uses and had every dealloc in place
    before: the others would not move.
    Start-up fusion places deallocs after each of its ~100 fusions of a MobileNetV2, and
    looking at every dealloc each time was a third of its time."""
    position = block_positions(block)
    moved: set[Operation] = set()
    for dealloc in top_level_deallocs(position, buffers):
        buf = dealloc.memref
        users = [u.operation for u in buf.uses]
        users += [u.operation for v in users if isinstance(v, loop.ViewOp) for u in v.result.uses]
        tops = [top_ancestor(u, block) for u in users if u is not dealloc]
        tops = [t for t in tops if t is not None and t is not dealloc]
        if not tops:
            continue
        if moved.intersection(tops):
            position, moved = block_positions(block), set()
        last = max(tops, key=position.__getitem__)
        if position[last] > position[dealloc]:
            dealloc.detach()
            block.insert_op_after(dealloc, last)
            moved.add(dealloc)


def top_level_deallocs(position: dict[Operation, int], buffers: Iterable[SSAValue] | None = None) -> list[memref.DeallocOp]:
    """The deallocs among the top-level ops that `position` orders (of `buffers` and the
    buffers they are views of, if given), in block order."""
    if buffers is None:
        return [o for o in position if isinstance(o, memref.DeallocOp)]
    found = {u.operation for buf in buffers for v in view_chain(buf) for u in v.uses if isinstance(u.operation, memref.DeallocOp)}
    return sorted((o for o in found if o in position), key=position.__getitem__)  # type: ignore[return-value]


def view_chain(v: SSAValue) -> list[SSAValue]:
    """`v` and every buffer it is a view of, up to its root."""
    chain = [v]
    while isinstance(v.owner, loop.ViewOp):
        v = v.owner.source
        chain.append(v)
    return chain


def operand_buffers(ops: Iterable[Operation]) -> list[SSAValue]:
    """The buffers `ops` take as operands: the ones (with those they are views of) whose
    deallocs may have to move when the ops move down their block (place_deallocs)."""
    return list(dict.fromkeys(v for op in ops for v in op.operands if isinstance(v.type, MemRefType)))


def ops_of(block: Block) -> list[Operation]:
    """The top-level ops of `block`, in order, from one walk: list(block.ops) asks for the
    length first, and xDSL's BlockOps counts by walking the block."""
    return list(iter(block.ops))


def block_positions(block: Block) -> dict[Operation, int]:
    """The index of every top-level op of `block`."""
    return {op: i for i, op in enumerate(block.ops)}


def erase_buffer(buf: SSAValue) -> None:
    """Erase an alloc (or a view) whose only remaining uses are deallocs and views used the
    same way, those too."""
    for u in list(buf.uses):
        if isinstance(u.operation, loop.ViewOp):
            erase_buffer(u.operation.result)
            continue
        assert isinstance(u.operation, memref.DeallocOp), f"{buf} is still used by {u.operation.name}"
        u.operation.detach()
        u.operation.erase()
    buf.owner.detach()
    buf.owner.erase()


def only_deallocs(buf: SSAValue) -> bool:
    return all(isinstance(u.operation, memref.DeallocOp) for u in buf.uses)


# --- building nests ------------------------------------------------------------------------------


def with_symbols(m: AffineMap, nsyms: int) -> AffineMap:
    return AffineMap(m.num_dims, nsyms, m.results)


def rebuild_nest(
    nest: loop.NestOp,
    syms: Sequence[SSAValue],
    lower: Sequence[AffineMap],
    upper: Sequence[AffineMap],
    maps: Sequence[AffineMap] | None = None,
    buffers: dict[SSAValue, SSAValue] | None = None,
    iterators: Sequence[str] | None = None,
) -> loop.NestOp:
    """A copy of `nest` (body cloned, `init` kept) with new symbols, bounds and maps; buffers
    renamed by `buffers`; its iterator kinds, or `iterators` where the dimensions changed."""
    from xdsl.dialects.builtin import AffineMapAttr

    buffers = buffers or {}
    region = nest.body.clone()
    properties = {
        "nest_name": nest.nest_name,
        "lower": ArrayAttr([AffineMapAttr(m) for m in lower]),
        "upper": ArrayAttr([AffineMapAttr(m) for m in upper]),
        "iterators": nest.iterators if iterators is None else loop.iterator_attrs(iterators),
        "maps": ArrayAttr([AffineMapAttr(m) for m in (maps if maps is not None else nest.access_maps)]),
        "operandSegmentSizes": loop._segments(len(syms), len(nest.ins), len(nest.outs)),
    }
    if nest.init is not None:  # the outputs are the same ones, renamed at most
        properties["init"] = nest.init
    return loop.NestOp.create(
        operands=[*syms, *[buffers.get(v, v) for v in nest.ins], *[buffers.get(v, v) for v in nest.outs]],
        properties=properties,
        attributes=dict(nest.attributes),
        regions=[region],
    )


def with_maps(nest: loop.NestOp, maps: Sequence[AffineMap], buffers: dict[SSAValue, SSAValue] | None = None) -> loop.NestOp:
    """`rebuild_nest` keeping the nest's symbols and bounds: new access maps (and buffers)."""
    return rebuild_nest(nest, list(nest.syms), [b.data for b in nest.lower.data], [b.data for b in nest.upper.data],
                        maps, buffers)


def new_band(name: str, sizes: Sequence[int], attributes: dict | None = None) -> loop.BandOp:
    band = loop.BandOp(name, list(sizes), Region(Block(arg_types=[IndexType()] * len(sizes))))
    band.attributes.update(attributes or {})
    return band



TILE_ATTR = "tile_sizes"

# The planner's window groups (conv, pooling, stencils) are lowered op by op, every nest
# tagged with its group's name: post-tiling fusion is their code generator, and in
# scope "group" the loop passes join only nests of one group (the ILP's decision).
GROUP_ATTR = loop.GROUP_ATTR
SCOPES = ("function", "group")


def group_of(op: Operation) -> str | None:
    """The window group a nest (or a band, by its nests) belongs to; None if untagged."""
    if isinstance(op, loop.NestOp):
        attr = op.attributes.get(GROUP_ATTR)
        return attr.data if isinstance(attr, StringAttr) else None
    groups = {group_of(n) for n in nests_in(op)}
    return groups.pop() if len(groups) == 1 else None


def check_scope(pass_name: str, scope: str) -> None:
    if scope not in SCOPES:
        from mlfuse.diagnostics import Diagnostic

        raise Diagnostic(f"{pass_name}: scope must be one of {', '.join(SCOPES)}, got '{scope}'", "<pass-pipeline>:1:1")


def may_join(ops: Iterable[Operation], scope: str) -> bool:
    """Whether a loop transformation may put `ops` into one computation: always in scope
    "function"; in scope "group", only nests tagged with one and the same group."""
    if scope == "function":
        return True
    groups = {group_of(op) for op in ops}
    return len(groups) == 1 and None not in groups


def is_tile_band(op: Operation) -> bool:
    return isinstance(op, loop.BandOp) and TILE_ATTR in op.attributes


# --- dependences across tiles -------------------------------------------------------------------


@dataclass
class BandView:
    """The isl view of a band: per nest, `{ [T] -> S[i] }` and its accesses."""

    band: loop.BandOp
    names: Names

    @property
    def params(self) -> list[str]:
        return [self.names.param(a) for a in self.band.block.args]

    def tile_domain(self, nest: loop.NestOp) -> isl.Map:
        args = set(self.band.block.args)
        if any(s not in args for s in nest.syms):
            raise Unsupported(f"nest '{nest.nest_name.data}' has symbols that are not ivs of its band")
        return to_band_map(domain(nest, self.names), self.params, self.band.sizes)

    def tile_accesses(self, nest: loop.NestOp) -> list[tuple[SSAValue, isl.Map, bool]]:
        """(root buffer, `{ [T] -> B[x] }`, is_write) for every access of `nest` in its band."""
        dom = self.tile_domain(nest)
        result = []
        for acc in accesses(nest, self.names, root):
            rel = to_band_map_relation(dom, acc.relation, self.params)
            result.append((root(acc.buffer), rel, acc.is_write))
        return result


def to_band_map_relation(tile_domain: isl.Map, relation: isl.Map, band_params: Sequence[str]) -> isl.Map:
    """Compose `{ [T] -> S[i] }` with `[T] -> { S[i] -> B[x] }` into `{ [T] -> B[x] }`.

    The relation's band parameters are equated with the tile dimensions first.
    """
    rel = relation
    m = tile_domain
    for k, p in enumerate(band_params):
        pos = rel.find_dim_by_name(isl.dim_type.param, p)
        if pos < 0:
            continue
        # add the parameter to the tile domain map, equate it with tile dim k, then compose
        if m.find_dim_by_name(isl.dim_type.param, p) < 0:
            m = m.add_dims(isl.dim_type.param, 1)
            m = m.set_dim_name(isl.dim_type.param, m.dim(isl.dim_type.param) - 1, p)
        ppos = m.find_dim_by_name(isl.dim_type.param, p)
        m = m.equate(isl.dim_type.param, ppos, isl.dim_type.in_, k)
    out = m.apply_range(rel)
    for p in band_params:
        pos = out.find_dim_by_name(isl.dim_type.param, p)
        if pos >= 0:
            out = out.project_out(isl.dim_type.param, pos, 1)
    return out


def cross_tile_conflicts(band: loop.BandOp, names: Names, ignore: set[SSAValue] = frozenset()) -> list[str]:
    """Buffers two different tiles of `band` touch at the same element, one of them writing:
    dependences a parallel band would violate. Band scratch and `ignore` are private."""
    view = BandView(band, names)
    private = private_buffers(band) | set(ignore)
    by_buffer: dict[SSAValue, list[tuple[str, isl.Map, bool]]] = {}
    for nest in nests_in(band):
        for buf, rel, is_write in view.tile_accesses(nest):
            if buf in private:
                continue
            by_buffer.setdefault(buf, []).append((nest.nest_name.data, rel, is_write))
    problems = []
    nt = len(band.sizes)
    same_tile = isl.Map(
        f"{{ [{', '.join(f't{k}' for k in range(nt))}] -> [{', '.join(f'u{k}' for k in range(nt))}] : "
        f"{' and '.join(f't{k} = u{k}' for k in range(nt)) or 'true'} }}"
    )
    for buf, accs in by_buffer.items():
        if not any(w for _, _, w in accs):
            continue
        for i, (n1, r1, w1) in enumerate(accs):
            for n2, r2, w2 in accs[i:]:
                if not (w1 or w2):
                    continue
                pairs = r1.apply_range(r2.reverse())
                if not pairs.subtract(same_tile).is_empty():
                    problems.append(f"'{n1}' and '{n2}' touch the same elements of {names.buffer(buf)} in different tiles")
    return problems


# --- remarks ------------------------------------------------------------------------------------------


def print_remark(op: Operation, message: str) -> None:
    """`file:line:col: remark: message` on stderr (why a transformation was not made)."""
    import sys

    from mlfuse.diagnostics import location_of

    where = location_of(op) if isinstance(op, Operation) else None
    what = f"'{op.nest_name.data}'" if isinstance(op, loop.NestOp) else ""
    head = f"{where}: remark: " if where else "remark: "
    print(f"{head}{what + ' ' if what else ''}{message}", file=sys.stderr)


def functions(module) -> list[func.FuncOp]:
    """Functions at the loop level: one block, no tensors left."""
    return [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks and len(op.body.blocks) == 1]
