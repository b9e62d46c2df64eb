"""A copy nest whose source has no other reader is removed: the nests that wrote the
source write the copy's destination instead (the loop-forward-copies pass).

A conv that reads its padded input in place (`loop.gemm {window}`) gets that input
from a pad copy: the interior of a fresh buffer, written element by element from the
conv's input. When that input is itself a concat of an upsampled image and a skip
connection (U-Net's decoder), each of its pieces was copied twice: into the concat,
then into the padded buffer. With the copy forwarded, the concat's pieces write the
padded interior at once, and the upsampling nest (whose result only the concat read)
writes its piece there as well:

    %y = memref.alloc() : memref<1x64x112x112xf32>
    loop.nest "concat" ... ins(%a) outs(%y) maps [id, (d0, d1, d2, d3) -> (d0, d1, d2, d3)]
    loop.nest "concat" ... ins(%b) outs(%y) maps [id, (d0, d1, d2, d3) -> (d0, d1 + 32, d2, d3)]
    %p = memref.alloc() : memref<1x64x114x114xf32>
    loop.nest "pad_fill" ... outs(%p)
    loop.nest "pad_copy" ... ins(%y) outs(%p) maps [id, (d0, d1, d2, d3) -> (d0, d1, d2 + 1, d3 + 1)]
becomes
    %p = memref.alloc() : memref<1x64x114x114xf32>
    loop.nest "pad_fill" ... outs(%p)
    loop.nest "concat" ... ins(%a) outs(%p) maps [id, (d0, d1, d2, d3) -> (d0, d1, d2 + 1, d3 + 1)]
    loop.nest "concat" ... ins(%b) outs(%p) maps [id, (d0, d1, d2, d3) -> (d0, d1 + 32, d2 + 1, d3 + 1)]

A copy is forwarded when:
- it is a top-level nest whose body yields its one input, read at the identity over
  the whole input (bounds 0 to its shape, no symbols);
- the source is a buffer of the function (memref.alloc) that nothing but the copy
  reads: its other users are nests before the copy, in the same block, that write it
  (as an output of the same shape as the copy's input, and not also as an input), and
  its dealloc;
- no writer reads the result of a loop.gemm that nothing else reads: that nest is the
  product's epilogue, which loop-gemm-epilogue-fuse moves into the GEMM kernel, whose
  output is contiguous;
- the destination is a buffer of the function whose users before the copy are nests
  that only write it (its fills): they move before the first writer with its
  allocation, so that a fill of the whole buffer still comes before the interior.

Each writer's map becomes the copy's output map after its own (both index the source
the same way), the copy and the source go, and forwarding repeats until nothing
changes (the concat's pieces are copies too).
"""

from __future__ import annotations

from xdsl.dialects import func, memref
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineMap

from mlfuse.dialects import loop
from mlfuse.poly.program import rebuild_nest


def forward_copies(fn: func.FuncOp) -> int:
    """Forward every copy of `fn` that can be (see the module docstring); how many."""
    forwarded = 0
    while True:
        copy = next((op for op in fn.body.block.ops if isinstance(op, loop.NestOp) and forwardable(op)), None)
        if copy is None:
            return forwarded
        forward(copy)
        forwarded += 1


def is_whole_copy(nest: loop.NestOp) -> bool:
    """Does `nest` copy all of its one input, read at the identity, into its one output?"""
    if len(nest.ins) != 1 or len(nest.outs) != 1 or nest.syms:
        return False
    yielded = nest.block.last_op
    if not isinstance(yielded, loop.YieldOp) or len(yielded.operands) != 1 or yielded.operands[0] is not nest.block.args[0]:
        return False
    shape = nest.ins[0].type.get_shape()  # type: ignore[union-attr]
    return nest.static_bounds() == [(0, n) for n in shape] and nest.in_maps[0] == AffineMap.identity(len(shape))


def forwardable(copy: loop.NestOp) -> bool:
    if not isinstance(copy.parent_block(), Block) or not is_whole_copy(copy):
        return False
    source, dest = loop.view_root(copy.ins[0]), loop.view_root(copy.outs[0])
    if source is dest or not _is_alloc(source) or not _is_alloc(dest):
        return False
    return bool(source_writers(copy, source)) and dest_users_before(copy, dest) is not None


def source_writers(copy: loop.NestOp, source: SSAValue) -> list[loop.NestOp]:
    """The nests that write `source` before `copy`, in order, if nothing else uses it
    (its dealloc aside) and none of them is a GEMM's epilogue; else []."""
    block, shape = copy.parent_block(), copy.ins[0].type.get_shape()  # type: ignore[union-attr]
    writers = []
    for user in loop.view_users(source):
        if user is copy or isinstance(user, memref.DeallocOp):
            continue
        if not (isinstance(user, loop.NestOp) and user.parent_block() is block and user.is_before_in_block(copy)):
            return []
        written = [v for v in user.outs if loop.view_root(v) is source]
        if len(written) != 1 or written[0].type.get_shape() != shape or any(loop.view_root(v) is source for v in user.ins):  # type: ignore[union-attr]
            return []
        if any(_gemm_epilogue_input(v, user) for v in user.ins):
            return []
        writers.append(user)
    return sorted(writers, key=lambda op: block.get_operation_index(op))  # type: ignore[union-attr]


def _gemm_epilogue_input(v: SSAValue, reader: loop.NestOp) -> bool:
    """Is `v` a loop.gemm's output that `reader` alone reads (its epilogue)?"""
    root = loop.view_root(v)
    users = loop.view_users(root)
    gemm_writes = any(isinstance(u, loop.GemmOp) and loop.view_root(u.c) is root for u in users)
    readers = [u for u in users if not isinstance(u, loop.GemmOp | memref.DeallocOp)]
    return gemm_writes and readers == [reader]


def dest_users_before(copy: loop.NestOp, dest: SSAValue) -> list[Operation] | None:
    """The ops that use `dest` before `copy` (its views and fills), if each can move
    before the source's first writer: views, and nests with no inputs that write it;
    else None (a use inside a band before the copy included)."""
    block = copy.parent_block()
    assert block is not None
    found: list[Operation] = []
    for use_op in _users_with_views(dest):
        at = block.find_ancestor_op_in_block(use_op)
        if at is None or at is copy or not at.is_before_in_block(copy):
            continue
        if at is not use_op:  # inside a band or another op's region
            return None
        if isinstance(use_op, loop.ViewOp):
            found.append(use_op)
        elif isinstance(use_op, loop.NestOp) and not use_op.ins and not use_op.syms:
            found.append(use_op)
        else:
            return None
    return sorted(found, key=lambda op: block.get_operation_index(op))


def _users_with_views(v: SSAValue) -> list[Operation]:
    """The users of buffer `v`, the loop.view ops that reshape it included."""
    found = []
    for use in v.uses:
        found.append(use.operation)
        if isinstance(use.operation, loop.ViewOp):
            found += _users_with_views(use.operation.result)
    return found


def forward(copy: loop.NestOp) -> None:
    """Make the source's writers write the copy's destination; drop the copy and the source."""
    block = copy.parent_block()
    assert block is not None
    source, dest = loop.view_root(copy.ins[0]), loop.view_root(copy.outs[0])
    writers = source_writers(copy, source)
    moved = dest_users_before(copy, dest)
    assert moved is not None
    for op in [dest.owner, *moved]:  # the allocation, its views and fills, in their order
        assert isinstance(op, Operation)
        op.detach()
        block.insert_op_before(op, writers[0])
    into = copy.out_maps[0]
    for writer in writers:
        k = next(i for i, v in enumerate(writer.outs) if loop.view_root(v) is source)
        maps = list(writer.access_maps)
        maps[len(writer.ins) + k] = into.compose(maps[len(writer.ins) + k])
        rebuilt = rebuild_nest(writer, writer.syms, [m.data for m in writer.lower.data], [m.data for m in writer.upper.data],
                               maps, buffers={writer.outs[k]: copy.outs[0]})
        block.insert_op_before(rebuilt, writer)
        writer.detach()
        writer.erase()
    copy.detach()
    copy.erase()
    _erase_buffer(source)


def _is_alloc(v: SSAValue) -> bool:
    """A buffer of the function of static shape (its allocation can move up)."""
    return isinstance(v.owner, memref.AllocOp) and not v.owner.operands


def _erase_buffer(buffer: SSAValue) -> None:
    """Erase the now unread buffer: its deallocs, views and allocation."""
    for use in list(buffer.uses):
        op = use.operation
        if isinstance(op, loop.ViewOp):
            _erase_buffer(op.result)
        else:
            assert isinstance(op, memref.DeallocOp), f"{op.name} still uses a forwarded copy's source"
            op.detach()
            op.erase()
    owner = buffer.owner
    assert isinstance(owner, Operation)
    owner.detach()
    owner.erase()
