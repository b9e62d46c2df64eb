"""Fold the elementwise nest that reads a `loop.gemm`'s product into the product's
`epilogue` (loop-gemm-epilogue-fuse).

A conv lowered as a product (convert-graph-to-loop) writes C, and its window group's
epilogue (bias, residual, ReLU, ..., one nest after start-up fusion and loop-coalesce)
reads C once and writes the group's output. Folded, the kernel applies the epilogue to
its register tile before the last store: no pass over C, and no C.

Folded when all of these hold (else both are left as they are):
- C is a fresh buffer (`memref.alloc`, through views) that nothing else reads: the
  product writes it, the nest reads it, a dealloc frees it;
- the nest follows the product in its block, and the ops between them are allocs,
  deallocs, views, and nests and products that neither write what the nest reads nor
  touch what it writes (the nest's work moves up to the product);
- the nest has no symbols, a domain from 0 to C's shape with every dimension parallel
  (give or take dimensions of 1, and with runs of C's dimensions merged into one:
  loop-coalesce may have merged a batch of one away, or a whole elementwise nest into
  one dimension), reads each element of C at the point that walks it (the identity
  map, or the reshape that undoes the merge: ((d0 * 196) + d1, d2) over 1 x 196 x 1024)
  and writes one output of that shape by the identity map, which is not a buffer the
  product or the nest reads;
- its body does not read the output, and the generated kernel can apply it
  (mlfuse/conversion/gemm_epilogue.py: arith's float ops, f32 exp, tanh and erf,
  operands stepping 0 or 1 along C's columns).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from mlfuse.conversion.gemm_epilogue import kernel_epilogue, linear
from mlfuse.dialects import loop

MEMORY = (memref.AllocOp, memref.DeallocOp, loop.ViewOp)  # ops between that touch no element


Remark = Callable[[Operation, str], None]


def fuse_gemm_epilogues(module: ModuleOp, remark: Remark | None = None) -> int:
    """Fold every foldable epilogue nest into its product; returns how many were folded.
    `remark(op, why)` hears why a product kept its nest."""
    folded = 0
    for gemm in [op for op in module.walk() if isinstance(op, loop.GemmOp) and op.epilogue is None]:
        nest = epilogue_nest(gemm)
        why = nest if isinstance(nest, str) else fold(gemm, nest)
        if why is None:
            folded += 1
        elif remark is not None:
            remark(gemm, f"no epilogue folded: {why}")
    return folded


def epilogue_nest(gemm: loop.GemmOp) -> loop.NestOp | str:
    """The nest that is the product's only reader, if it may become its epilogue, else
    why not."""
    root = loop.view_root(gemm.c)
    if gemm.frame is not None:
        return "C is framed: its rows are the interiors of images (c_frame)"
    if not isinstance(root.owner, memref.AllocOp):
        return "C is not a buffer of its own (memref.alloc)"
    users = [u for u in loop.view_users(root) if u is not gemm and not isinstance(u, memref.DeallocOp)]
    if len(users) != 1 or not isinstance(users[0], loop.NestOp):
        return f"C is read by {len(users)} ops, not by one loop.nest"
    nest = users[0]
    if nest.parent_block() is not gemm.parent_block():
        return f"'{nest.nest_name.data}' is not in the product's block"
    if (why := not_elementwise(nest, gemm.c)) is not None:
        return f"'{nest.nest_name.data}' {why}"
    reads = {loop.view_root(v) for v in nest.ins}
    written = loop.view_root(nest.outs[0])
    op = gemm.next_op
    while op is not None and op is not nest:
        if not independent(op, reads, written):
            what = op.nest_name.data if isinstance(op, loop.NestOp) else op.name
            return f"'{what}' between them writes what '{nest.nest_name.data}' reads or touches what it writes"
        op = op.next_op
    if op is None:
        return f"'{nest.nest_name.data}' comes before the product"
    return nest


def independent(op: Operation, reads: set[SSAValue], written: SSAValue) -> bool:
    """Whether `op` can run after a nest that reads `reads` and writes `written` (buffer
    roots) instead of before it: it writes none of them and does not read `written`."""
    if isinstance(op, MEMORY):
        return True
    if isinstance(op, loop.NestOp):
        op_reads, op_writes = op.ins, op.outs
    elif isinstance(op, loop.GemmOp):
        op_reads, op_writes = op.buffers_read, op.buffers_written
    else:
        return False
    op_writes = {loop.view_root(v) for v in op_writes}
    return not (op_writes & (reads | {written})) and written not in {loop.view_root(v) for v in op_reads}


def not_elementwise(nest: loop.NestOp, c: SSAValue) -> str | None:
    """None when `nest` walks C's elements in order in parallel (`from_c_indices`),
    reads each element of C once where it walks it and writes one output of its domain
    by the identity map, without reading the output; else what it does instead."""
    bounds = nest.static_bounds()
    if nest.syms or bounds is None or any(lo != 0 for lo, _ in bounds) or any(k != "parallel" for k in nest.iterator_kinds):
        return "is not a parallel nest over a box from 0"
    shape = tuple(hi for _, hi in bounds)
    to_nest = from_c_indices(c.type.get_shape(), shape)  # type: ignore[attr-defined]
    if to_nest is None:
        return f"walks {list(shape)}, not C's shape {list(c.type.get_shape())}"  # type: ignore[attr-defined]
    element = c.type.get_element_type()  # type: ignore[attr-defined]
    if any(a.type != element for a in nest.block.args):
        return f"computes on other types than C's {element}"
    identity = AffineMap.identity(len(shape))
    if len(nest.outs) != 1 or nest.out_maps != [identity] or nest.outs[0].type.get_shape() != shape:  # type: ignore[attr-defined]
        return "does not write one output of its domain by the identity map"
    reads_c = [k for k, v in enumerate(nest.ins) if loop.view_root(v) == loop.view_root(c)]
    if len(reads_c) != 1 or not reads_where_walked(nest, reads_c[0], c.type.get_shape(), to_nest):  # type: ignore[attr-defined]
        return "does not read each element of C once, where it walks it"
    if nest.block.args[len(nest.ins)].uses:
        return "reads its output"
    return None


def from_c_indices(c_shape: Sequence[int], domain: Sequence[int]) -> AffineMap | None:
    """The map from C's indices to a nest domain's that walks the same elements in the
    same order (row-major), when the domain is C's shape give or take dimensions of 1,
    with runs of C's dimensions merged into one (else None): (d0, d1, d2) -> (d1, d2)
    from 1 x 24 x 210 to 24 x 210, (d0, d1) -> (d0 * 1024 + d1) from 128 x 1024 to 131072."""
    if tuple(c_shape) == tuple(domain):
        return AffineMap.identity(len(domain))
    c_dims = [i for i, n in enumerate(c_shape) if n != 1]
    results = [AffineExpr.constant(0)] * len(domain)
    for j, extent in enumerate(domain):
        if extent == 1:
            continue
        run: list[int] = []  # the C dimensions merged into domain dimension j
        while c_dims and math.prod(c_shape[i] for i in run) < extent:
            run.append(c_dims.pop(0))
        if math.prod(c_shape[i] for i in run) != extent:
            return None
        expr = AffineExpr.dimension(run[0])
        for i in run[1:]:
            expr = expr * c_shape[i] + AffineExpr.dimension(i)
        results[j] = expr
    return AffineMap(len(c_shape), 0, tuple(results)) if not c_dims else None


def reads_where_walked(nest: loop.NestOp, k: int, c_shape: Sequence[int], to_nest: AffineMap) -> bool:
    """Whether the nest's input k (C, seen with any shape: a view keeps the elements'
    order) is read at the element of C that the nest walks at each point: its map after
    `to_nest` gives C's row-major offset of C's indices (((d0 * 196) + d1, d2) after
    (d0, d1) -> (0, d0, d1) does)."""
    read = nest.in_maps[k].compose(to_nest).results
    identity = [AffineExpr.dimension(i) for i in range(len(c_shape))]
    return row_major_offset(read, nest.ins[k].type.get_shape(), c_shape) == row_major_offset(identity, c_shape, c_shape)  # type: ignore[attr-defined]


def row_major_offset(exprs: Sequence[AffineExpr], shape: Sequence[int], c_shape: Sequence[int]) -> dict[int, int] | None:
    """The element offset of indices `exprs` into a row-major `shape`, as a linear form
    over C's indices ({dimension: coefficient, -1: constant}; C's dimensions of 1 and
    zero coefficients dropped), or None when it is not linear."""
    total: dict[int, int] = {}
    stride = 1
    for expr, extent in reversed(list(zip(exprs, shape))):
        form = linear(expr)
        if form is None:
            return None
        for d, coeff in form.items():
            total[d] = total.get(d, 0) + coeff * stride
        stride *= extent
    return {d: c for d, c in total.items() if c != 0 and (d < 0 or c_shape[d] != 1)}


def fold(gemm: loop.GemmOp, nest: loop.NestOp) -> str | None:
    """Replace the product and the nest by one product into the nest's output with
    the nest's body as its epilogue; or say why not (nothing changed): the kernel
    cannot apply it, or the output is a buffer the product reads."""
    out = nest.outs[0]
    c_type = gemm.c.type
    assert isinstance(c_type, MemRefType)
    c_root = loop.view_root(gemm.c)
    k = next(i for i, v in enumerate(nest.ins) if loop.view_root(v) == c_root)
    others = [v for i, v in enumerate(nest.ins) if i != k]
    to_nest = from_c_indices(c_type.get_shape(), [hi for _, hi in nest.static_bounds() or ()])
    assert to_nest is not None  # elementwise_over
    maps = [m.compose(to_nest) for i, m in enumerate(nest.in_maps) if i != k]
    if loop.view_root(out) in {loop.view_root(v) for v in (gemm.a, gemm.b, *others)}:
        return f"'{nest.nest_name.data}' writes a buffer that it or the product reads"
    view = loop.ViewOp(out, MemRefType(c_type.get_element_type(), c_type.get_shape())) if out.type != c_type else None
    c = view.result if view is not None else out  # the output seen with C's shape
    window = tuple(gemm.window.get_values()) if gemm.window is not None else None
    fused = loop.GemmOp(gemm.a, gemm.b, c, window, (others, maps, epilogue_region(nest, k)))
    for name in ("window_border", "window_pads"):
        if name in gemm.properties:
            fused.properties[name] = gemm.properties[name]
    if kernel_epilogue(fused) is None:
        fused.erase()
        if view is not None:
            view.erase()
        return f"the GEMM kernel cannot apply '{nest.nest_name.data}' (ops other than arith's float ops and f32 exp, tanh and erf, an operand read across C's columns, or too long a program)"
    if view is not None:
        Rewriter.insert_op(view, InsertPoint.before(nest))
    for value in (c, *others):
        hoist_above(value, gemm)
    Rewriter.replace_op(gemm, fused, [])
    Rewriter.erase_op(nest)
    erase_buffer(c_root)
    return None


def epilogue_region(nest: loop.NestOp, k: int) -> Region:
    """The nest's body as an epilogue: the product's element (input k) first, the other
    inputs' after it, the output's dropped (unused)."""
    old = nest.block
    el = old.args[k].type
    block = Block(arg_types=[el] + [a.type for i, a in enumerate(old.args[: len(nest.ins)]) if i != k])
    mapping = {old.args[k]: block.args[0]}
    mapping.update(zip([a for i, a in enumerate(old.args[: len(nest.ins)]) if i != k], block.args[1:]))
    for before, after in mapping.items():
        after.name_hint = before.name_hint
    for op in old.ops:
        block.add_op(op.clone(value_mapper=mapping))  # type: ignore[arg-type]
    return Region(block)


def hoist_above(value: SSAValue, anchor: Operation) -> None:
    """Move the allocs and views that make `value` (and what they use) above `anchor`
    when they come after it in its block, so that `value` is defined there."""
    op = value.owner
    if not isinstance(op, Operation) or op.parent_block() is not anchor.parent_block():
        return
    block = anchor.parent_block()
    assert block is not None
    if block.get_operation_index(op) < block.get_operation_index(anchor):
        return
    for operand in op.operands:
        hoist_above(operand, anchor)
    op.detach()
    block.insert_op_before(op, anchor)


def erase_buffer(root: SSAValue) -> None:
    """Erase the buffer `root` (an alloc nothing reads any more), its views and its dealloc."""
    for user in loop.view_users(root):
        Rewriter.erase_op(user)
    views = [u.operation for u in root.uses]
    for view in views:
        erase_buffer(view.results[0])
    owner = root.owner
    assert isinstance(owner, Operation)
    Rewriter.erase_op(owner)
