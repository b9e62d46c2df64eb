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
- no writer reads the result of a loop.gemm that nothing else reads, element for
  element as it writes: that nest is the product's epilogue, which
  loop-gemm-epilogue-fuse moves into the GEMM kernel, whose output is contiguous (a
  writer that scatters the product, U-Net's ConvTranspose 2 x 2 into its pixels, is
  forwarded);
- the destination is a buffer of the function whose users before the copy are nests
  that only write it (its fills): they move before the first writer with its
  allocation, so that a fill of the whole buffer still comes before the interior;
  nests after the first writer that write only another part of it (a concat's other
  piece, `disjoint_writer`: boxes of static bounds through linear maps) stay where
  they are.

Each writer's map becomes the copy's output map after its own (both index the source
the same way), the copy and the source go, and forwarding repeats until nothing
changes (the concat's pieces are copies too).

A copy of a product (a `loop.gemm` that alone writes the source, after
loop-gemm-epilogue-fuse has given it its epilogue) is forwarded when the copy places
the product's rows into the interiors of images, a pad copy: it reads [..., oh, ow]
(the product's rows of oh * ow) and writes [..., top + y, left + x] of images [...,
hp, wp] over the same leading dimensions. The product then writes the images itself
(`c_frame`), their borders left to the fills (ResNet's and U-Net's convs write the
next conv's padded input, no pad copy between them). The source may have other
readers: products that read it as a residual in their epilogue (at the identity) read
the images' interiors instead, through (j floordiv ow + top, j mod ow + left), and one
that reads it as the image under its window (a strided 1x1 downsample) runs the window
over the interior (`window_border`); the images then live until the last of them.
Nests after the product that read the source itself (U-Net's max pool of a skip
connection) read it where the copy puts it, through the copy's map after their own.
A copy into a concat of padded images [1, channels, hp, wp] from image `channel` on
(U-Net's skip connection into the decoder's input) frames the product there too:
`c_frame = top, left, oh, ow, channel`, its residual readers' maps shifted by the
channel (a window reader is not: its B would have to start at the channel).

    loop.gemm %w, %x into %y {window = array<i64: 3, 3>} : ..., memref<1x64x3136xf32>
    %yv = loop.view %y : memref<1x64x3136xf32> to memref<64x56x56xf32>
    loop.nest "pad_copy" ... ins(%yv) outs(%p) maps [id, (d0, d1, d2) -> (d0, d1 + 1, d2 + 1)]
becomes
    %pv = loop.view %p : memref<64x58x58xf32> to memref<1x64x58x58xf32>
    loop.gemm %w, %x into %pv {c_frame = array<i64: 1, 1, 56, 56>, window = array<i64: 3, 3>} : ...
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects import func, memref
from xdsl.dialects.builtin import AffineMapAttr, ArrayAttr, DenseArrayBase, MemRefType, i64
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from mlfuse.conversion.group_to_loop import strides
from mlfuse.dialects import loop
from mlfuse.poly.delinearize import linear
from mlfuse.poly.program import block_positions, erase_buffer, with_maps
from mlfuse.poly.startup import is_copy


@dataclass(frozen=True)
class Forwarding:
    """What forwarding `copy` changes: the nests that write its source, in order, and the
    destination's users before the copy (its views and fills), which move up with it."""

    copy: loop.NestOp
    writers: list[loop.NestOp]  # the nests that write the source (none where a product does)
    product: Framing | None  # the product that writes it, which the copy frames
    moved: list[Operation]


@dataclass(frozen=True)
class Framing:
    """A product that writes a pad copy's source: the copy's frame (top, left, oh, ow),
    the image its first row goes to (`channel`: a concat's part), and the source's other
    readers: products (residual_readers) and nests (nest_readers)."""

    gemm: loop.GemmOp
    frame: tuple[int, int, int, int]
    readers: list[tuple[loop.GemmOp, int]]
    channel: int = 0
    nests: tuple[loop.NestOp, ...] = ()


def forward_copies(fn: func.FuncOp) -> int:
    """Forward every copy of `fn` that can be (see the module docstring); how many."""
    forwarded, block = 0, fn.body.block
    while True:  # sweeps of the block until one forwards nothing
        before = forwarded
        # one walk per forwarding: xDSL's is_before_in_block walks from one op towards the
        # other, once per question (DenseNet-121's concats: 37k walks, 3 s of a compile);
        # and the sweep goes on after a forwarding instead of starting again from the top
        # (each start asked every copy again: DenseNet-121 at 224 x 224, 2.3 s)
        position = block_positions(block)
        for op in [op for op in position if isinstance(op, loop.NestOp)]:
            plan = forwarding(op, position) if op.parent_block() is block else None  # not erased by now
            if plan is not None:
                forward(plan)
                forwarded += 1
                position = block_positions(block)
        if forwarded == before:
            return forwarded


def is_whole_copy(nest: loop.NestOp) -> bool:
    """Is `nest` a copy (startup.is_copy) of all of its input, read at the identity?"""
    if not is_copy(nest):
        return False
    shape = nest.ins[0].type.get_shape()  # type: ignore[union-attr]
    return nest.static_bounds() == [(0, n) for n in shape] and nest.in_maps[0] == AffineMap.identity(len(shape))


def forwarding(copy: loop.NestOp, position: Mapping[Operation, int]) -> Forwarding | None:
    """How `copy`, a top-level op of its function, is forwarded, or None where it cannot
    be (see the module docstring); `position`: its block's (block_positions)."""
    if not isinstance(copy.parent_block(), Block) or not is_whole_copy(copy):
        return None
    source, dest = loop.view_root(copy.ins[0]), loop.view_root(copy.outs[0])
    if source is dest or not _is_alloc(source) or not _is_alloc(dest):
        return None
    writers = source_writers(copy, source, position)
    product = None if writers else product_writer(copy, source, position)
    first = product.gemm if product else writers[0] if writers else None
    moved = dest_users_before(copy, dest, first, position) if first is not None else None
    return Forwarding(copy, writers, product, moved) if moved is not None else None


def product_writer(copy: loop.NestOp, source: SSAValue, position: Mapping[Operation, int]) -> Framing | None:
    """The loop.gemm before `copy` (in its block) that writes `source` as C (without a
    frame yet, not reading it), when the copy places its rows into images
    (`copy_frame`) and every other user of `source` but its dealloc is a product
    reading it as a residual (`residual_readers`); else None."""
    users = [u for u in loop.view_users(source) if u is not copy and not isinstance(u, memref.DeallocOp)]
    writers = [u for u in users if isinstance(u, loop.GemmOp) and loop.view_root(u.c) is source]
    if len(writers) != 1 or (gemm := writers[0]).frame is not None or source in {loop.view_root(v) for v in gemm.buffers_read}:
        return None
    if gemm.parent_block() is not copy.parent_block() or not position[gemm] < position[copy]:
        return None
    placed = copy_frame(copy)
    *batch, m, n = gemm.product_type.get_shape()
    rows = copy.ins[0].type.get_shape()[:-2]  # type: ignore[union-attr]
    if placed is None or math.prod(batch) * m != math.prod(rows) or n != placed[0][2] * placed[0][3]:
        return None
    frame, channel = placed
    readers = residual_readers(source, gemm, position)
    nests = nest_readers(source, gemm, copy, position)
    if readers is None or {r for r, _ in readers} | set(nests) != set(users) - {gemm}:
        return None
    if channel and any(k < 0 for _, k in readers):  # a window over a concat's part: not expressible
        return None
    return Framing(gemm, frame, readers, channel, tuple(nests))


def residual_readers(
    source: SSAValue, writer: loop.GemmOp, position: Mapping[Operation, int]
) -> list[tuple[loop.GemmOp, int]] | None:
    """(product, k) for each product after `writer` that reads `source` as its epilogue
    operand k at the identity over the writer's product shape (a residual), or (product,
    -1) for one that reads it as the image under its window (a downsample: B, as
    [batch..., m, oh, ow] images of the writer's rows, no border yet), and in no other
    way; None if a product reads it otherwise."""
    found = []
    for user in loop.view_users(source):
        if not isinstance(user, loop.GemmOp) or user is writer:
            continue
        if user.parent_block() is not writer.parent_block() or not position[writer] < position[user]:
            return None
        if any(loop.view_root(v) is source for v in (user.a, user.c)):
            return None
        if loop.view_root(user.b) is source:
            if user.window is None or user.window_border is not None or user.window_pads is not None or not _images_of(user.b.type, writer.product_type):
                return None
            found.append((user, -1))
        maps = user.epilogue_maps.data if user.epilogue_maps is not None else ()
        for k, (value, m) in enumerate(zip(user.epilogue_ins, maps)):
            if loop.view_root(value) is not source:
                continue
            if value.type != writer.product_type or m.data != AffineMap.identity(len(writer.product_type.get_shape())):
                return None
            found.append((user, k))
    return found


def _images_of(t: Attribute, product: MemRefType) -> bool:
    """Is `t` [batch..., m, h, w] with h * w = n, for a product [batch..., m, n]?"""
    shape = t.get_shape() if isinstance(t, MemRefType) else ()
    return len(shape) >= 3 and tuple(shape[:-2]) == tuple(product.get_shape()[:-1]) and shape[-2] * shape[-1] == product.get_shape()[-1]


def copy_frame(copy: loop.NestOp) -> tuple[tuple[int, int, int, int], int] | None:
    """((top, left, oh, ow), channel) when `copy` (a whole copy) reads [..., oh, ow] and
    writes element [..., y, x] at [..., top + y, left + x] of images [..., hp, wp] with
    the same leading dimensions, or of images [1, channels, hp, wp] from image `channel`
    on (a concat's part); else None."""
    src, dst = copy.ins[0].type.get_shape(), copy.outs[0].type.get_shape()  # type: ignore[union-attr]
    results = copy.out_maps[0].results
    if len(src) < 2 or len(dst) != len(src) or len(results) != len(src):
        return None
    offsets = []
    for d, expr in enumerate(results):
        form = linear(expr)
        if form is None or form[0] != {d: 1} or form[1] < 0:
            return None
        offsets.append(form[1])
    channel = offsets[-3] if len(src) == 4 and src[0] == 1 else 0
    lead = [o for d, o in enumerate(offsets[:-2]) if not (channel and d == 1)]
    same = [a == b for d, (a, b) in enumerate(zip(src[:-2], dst[:-2])) if not (channel and d == 1)]
    if any(lead) or not all(same) or (channel and channel + src[1] > dst[1]):
        return None
    top, left = offsets[-2:]
    return (top, left, src[-2], src[-1]), channel


def nest_readers(
    source: SSAValue, writer: loop.GemmOp, copy: loop.NestOp, position: Mapping[Operation, int]
) -> list[loop.NestOp]:
    """The nests between `writer` and `copy` (in their block, or in a band there) that
    read `source` itself, as the copy does, and do not write it (U-Net's max pool of a
    skip connection): they can read it where the copy puts it (after the copy, another
    writer of the destination could have come first)."""
    block = writer.parent_block()
    assert block is not None
    if source.type != copy.ins[0].type:  # the copy reads a view of it: a reader's map would not compose
        return []
    found = []
    for user in loop.view_users(source):
        at = block.find_ancestor_op_in_block(user)
        if not isinstance(user, loop.NestOp) or user is copy or at is None or not position[writer] < position[at]:
            continue
        if not position[at] < position[copy]:
            continue
        if any(loop.view_root(v) is source for v in user.outs) or any(
            loop.view_root(v) is source and v is not source for v in user.ins
        ):
            continue
        if source in user.ins:
            found.append(user)
    return found


def read_where_copied(nest: loop.NestOp, source: SSAValue, copy: loop.NestOp) -> None:
    """Make `nest` read `source` where `copy` put it: at the copy's output map after its
    own (the copy reads the source at the identity)."""
    into = copy.out_maps[0]
    maps = [into.compose(m) if v is source else m for v, m in zip(nest.ins, nest.in_maps)]
    Rewriter.replace_op(nest, with_maps(nest, [*maps, *nest.out_maps], buffers={source: copy.outs[0]}))


def written_box(nest: loop.NestOp, k: int) -> list[tuple[int, int]] | None:
    """[lo, hi] per index of output k that `nest` writes (its static bounds through a
    linear map), or None where not known."""
    bounds = nest.static_bounds()
    if bounds is None or nest.syms:
        return None
    box = []
    for expr in nest.out_maps[k].results:
        form = linear(expr)
        if form is None:
            return None
        terms, const = form
        lo = const + sum(c * (bounds[d][0] if c > 0 else bounds[d][1] - 1) for d, c in terms.items())
        hi = const + sum(c * (bounds[d][1] - 1 if c > 0 else bounds[d][0]) for d, c in terms.items())
        box.append((lo, hi))
    return box


def disjoint_writer(nest: loop.NestOp, dest: SSAValue, copy: loop.NestOp) -> bool:
    """Does `nest` write `dest` (as its only use of it, at the copy's shape) only outside
    what `copy` writes, so that the copy's writes may move before it?"""
    outs = [k for k, v in enumerate(nest.outs) if loop.view_root(v) is dest]
    if len(outs) != 1 or any(loop.view_root(v) is dest for v in nest.ins) or nest.outs[outs[0]].type != copy.outs[0].type:
        return False
    mine, theirs = written_box(nest, outs[0]), written_box(copy, 0)
    return mine is not None and theirs is not None and any(a[1] < b[0] or b[1] < a[0] for a, b in zip(mine, theirs))


def source_writers(copy: loop.NestOp, source: SSAValue, position: Mapping[Operation, int]) -> list[loop.NestOp]:
    """The nests that write `source` before `copy`, in order, if nothing else uses it
    (its dealloc aside) and none of them is a GEMM's epilogue; else []."""
    block, shape = copy.parent_block(), copy.ins[0].type.get_shape()  # type: ignore[union-attr]
    writers = []
    for user in loop.view_users(source):
        if user is copy or isinstance(user, memref.DeallocOp):
            continue
        if not (isinstance(user, loop.NestOp) and user.parent_block() is block and position[user] < position[copy]):
            return []
        written = [v for v in user.outs if loop.view_root(v) is source]
        if len(written) != 1 or written[0].type.get_shape() != shape or any(loop.view_root(v) is source for v in user.ins):  # type: ignore[union-attr]
            return []
        if any(_gemm_epilogue_input(v, user) for v in user.ins):
            return []
        writers.append(user)
    return sorted(writers, key=position.__getitem__)


def _gemm_epilogue_input(v: SSAValue, reader: loop.NestOp) -> bool:
    """Is `v` a loop.gemm's output that `reader` alone reads, element for element as it
    writes its output (so that it may become the product's epilogue)?"""
    root = loop.view_root(v)
    users = loop.view_users(root)
    gemm_writes = any(isinstance(u, loop.GemmOp) and loop.view_root(u.c) is root for u in users)
    readers = [u for u in users if not isinstance(u, loop.GemmOp | memref.DeallocOp)]
    return gemm_writes and readers == [reader] and _reads_in_write_order(reader, v)


def _reads_in_write_order(nest: loop.NestOp, v: SSAValue) -> bool:
    """Does `nest` read `v` at the flat position (row-major) where it writes its first
    output, at each of a few points of its domain? An epilogue does, up to reshapes that
    loop-delinearize and loop-coalesce take apart; a transpose or an interleave (a
    ConvTranspose's pixels scattered 2 x 2) does not, and its writes may be forwarded."""
    bounds = nest.static_bounds()
    k = next((i for i, x in enumerate(nest.ins) if x is v), None)
    if bounds is None or k is None or nest.syms:
        return True  # cannot tell: keep the nest a candidate epilogue
    read, write = nest.in_maps[k], nest.out_maps[0]
    corners = [[hi - 1 if (p >> d) & 1 else lo for d, (lo, hi) in enumerate(bounds)] for p in range(8)]
    inner = [[lo + (3 * p + 7 * d) % (hi - lo) for d, (lo, hi) in enumerate(bounds)] for p in range(8)]
    in_strides, out_strides = strides(v.type.get_shape()), strides(nest.outs[0].type.get_shape())  # type: ignore[attr-defined]
    return all(
        _dot(read.eval(point, []), in_strides) == _dot(write.eval(point, []), out_strides) for point in corners + inner
    )


def _dot(index: Sequence[int], steps: Sequence[int]) -> int:
    return sum(i * step for i, step in zip(index, steps))


def dest_users_before(
    copy: loop.NestOp, dest: SSAValue, first: Operation, position: Mapping[Operation, int]
) -> list[Operation] | None:
    """The ops that use `dest` before `copy` (its views and fills), if each can move
    before the source's first writer `first`: views, and nests with no inputs that
    write it alone; nests after `first` that write another part of it stay (disjoint_writer);
    else None (a use inside a band before the copy included)."""
    block = copy.parent_block()
    assert block is not None
    found: list[Operation] = []
    for use_op in loop.view_users(dest, views=True):
        at = block.find_ancestor_op_in_block(use_op)
        if at is None or at is copy or not position[at] < position[copy]:
            continue
        if at is not use_op:  # inside a band or another op's region
            return None
        if isinstance(use_op, loop.ViewOp):
            found.append(use_op)
        elif isinstance(use_op, loop.NestOp) and not use_op.ins and not use_op.syms and all(
            loop.view_root(v) is dest for v in use_op.outs
        ):  # a fill; one that writes another buffer too may be the source's writer (forwarded before)
            found.append(use_op)
        elif not (isinstance(use_op, loop.NestOp) and position[first] < position[use_op] and disjoint_writer(use_op, dest, copy)):
            return None  # a writer of another part of it (a concat's other piece) stays
    return sorted(found, key=position.__getitem__)


def forward(plan: Forwarding) -> None:
    """Make the source's writers write the copy's destination; drop the copy and the source."""
    copy, first = plan.copy, plan.product.gemm if plan.product else plan.writers[0]
    block = copy.parent_block()
    assert block is not None
    source, dest = loop.view_root(copy.ins[0]), loop.view_root(copy.outs[0])
    for op in [dest.owner, *plan.moved]:  # the allocation, its views and fills, in their order
        assert isinstance(op, Operation)
        op.detach()
        block.insert_op_before(op, first)
    if plan.product is not None:
        frame_product(plan.product, copy)
    else:
        forward_writes(plan)
    Rewriter.erase_op(copy)
    erase_buffer(source)


def frame_product(framing: Framing, copy: loop.NestOp) -> None:
    """Make the product write its rows into the images the copy writes (`c_frame`), and
    the products that read them as a residual or under a window read them there."""
    gemm, frame, readers, channel = framing.gemm, framing.frame, framing.readers, framing.channel
    *batch, m, _ = gemm.product_type.get_shape()
    dest = copy.outs[0]
    el = dest.type.get_element_type()  # type: ignore[attr-defined]
    images = MemRefType(el, [*batch, m, *dest.type.get_shape()[-2:]])  # type: ignore[attr-defined]
    c = dest
    if dest.type != images and not channel:  # a concat's part: C is all the images
        view = loop.ViewOp(dest, images)
        Rewriter.insert_op(view, InsertPoint.before(gemm))
        c = view.result
    operands = list(gemm.operands)
    operands[2] = c
    gemm.operands = operands
    gemm.properties["c_frame"] = DenseArrayBase.from_list(i64, [*frame, channel] if channel else frame)
    for reader, k in readers:
        if k < 0:
            read_interior(reader, c, frame)
        else:
            read_framed(reader, k, c, frame, channel)
    source = loop.view_root(copy.ins[0])
    for nest in framing.nests:
        read_where_copied(nest, source, copy)
    if readers or framing.nests:
        outlive(loop.view_root(dest), source)


def outlive(dest: SSAValue, source: SSAValue) -> None:
    """Move `dest`'s deallocs after `source`'s last one: the readers of the source that
    come after the copy read the destination now (the arena reuses a buffer's bytes
    after its dealloc)."""
    block = dest.owner.parent_block()  # type: ignore[union-attr]
    assert block is not None
    last = max((u.operation for u in source.uses if isinstance(u.operation, memref.DeallocOp)),
               key=block.get_operation_index, default=None)
    if last is None:
        return
    for dealloc in [u.operation for u in dest.uses if isinstance(u.operation, memref.DeallocOp)]:
        if dealloc.is_before_in_block(last):
            dealloc.detach()
            block.insert_op_after(dealloc, last)


def read_interior(reader: loop.GemmOp, images: SSAValue, frame: tuple[int, int, int, int]) -> None:
    """Make `reader`'s window run over the interiors of `images` [..., hp, wp] (its B)."""
    top, left, oh, ow = frame
    hp, wp = images.type.get_shape()[-2:]  # type: ignore[attr-defined]
    operands = list(reader.operands)
    operands[1] = images
    reader.operands = operands
    reader.properties["window_border"] = DenseArrayBase.from_list(i64, [top, left, hp - top - oh, wp - left - ow])


def read_framed(reader: loop.GemmOp, k: int, images: SSAValue, frame: tuple[int, int, int, int], channel: int = 0) -> None:
    """Make `reader`'s epilogue operand k (a residual at the identity) the interiors of
    `images` [..., hp, wp]: column j at (j floordiv ow + top, j mod ow + left), row i at
    image channel + i."""
    top, left, _, ow = frame
    rank = len(reader.product_type.get_shape())
    dims = [AffineExpr.dimension(d) for d in range(rank)]
    column = dims[-1]
    results = (*dims[:-2], dims[-2] + channel, column // ow + top, column % ow + left)
    operands = list(reader.operands)
    operands[3 + k] = images
    reader.operands = operands
    maps = list(reader.epilogue_maps.data) if reader.epilogue_maps is not None else []
    maps[k] = AffineMapAttr(AffineMap(rank, 0, results))
    reader.properties["epilogue_maps"] = ArrayAttr(maps)


def forward_writes(plan: Forwarding) -> None:
    """Make each of the nests that write the source write the copy's destination
    through the copy's map."""
    copy = plan.copy
    source = loop.view_root(copy.ins[0])
    into = copy.out_maps[0]
    for writer in plan.writers:
        k = next(i for i, v in enumerate(writer.outs) if loop.view_root(v) is source)
        maps = list(writer.access_maps)
        maps[len(writer.ins) + k] = into.compose(maps[len(writer.ins) + k])
        Rewriter.replace_op(writer, with_maps(writer, maps, buffers={writer.outs[k]: copy.outs[0]}))


def _is_alloc(v: SSAValue) -> bool:
    """A buffer of the function of static shape (its allocation can move up)."""
    return isinstance(v.owner, memref.AllocOp) and not v.owner.operands
