"""Buffer assignment: every intermediate of a function lives in one reused arena.

Like XLA's buffer assignment: the live range of each `memref.alloc` at the top
level of a function runs from the alloc to its `memref.dealloc`; buffers whose
ranges overlap get disjoint 64-byte-aligned slices of one arena, others share
bytes. The function gains a trailing `memref<Nxi8>` argument (the arena, given by
the runtime and reused across calls, so no call pays page faults for fresh
memory) and the attribute `mlfuse.arena_bytes = N`; allocs become `memref.view`s
and deallocs disappear.

Placement is first-fit in decreasing size order, the heuristic XLA's heap
simulator and TFLite's arena planner use. Planning (`plan_arena`) is an analysis
of whole functions; the rewrite is one pattern, `AllocToArenaView`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import FunctionType, IndexType, IntegerAttr, MemRefType, ModuleOp, i8, i64
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

from mlfuse.abi import ALIGNMENT, ARENA_ATTR, element_bytes


@dataclass
class Buffer:
    alloc: memref.AllocOp
    start: int
    end: int
    size: int
    offset: int = -1


def byte_size(t: MemRefType) -> int:
    n = t.element_count() * element_bytes(t.get_element_type())
    return max(ALIGNMENT, -(-n // ALIGNMENT) * ALIGNMENT)


def live_buffers(fn: func.FuncOp) -> list[Buffer]:
    block = fn.body.block
    position = {op: i for i, op in enumerate(block.ops)}
    buffers = []
    for op in block.ops:
        if not isinstance(op, memref.AllocOp):
            continue
        ends = [position[u.operation] for u in op.memref.uses if isinstance(u.operation, memref.DeallocOp)]
        end = max(ends) if ends else len(position)  # never freed: live to the end
        buffers.append(Buffer(op, position[op], end, byte_size(op.memref.type)))
    return buffers


def place(buffers: list[Buffer]) -> int:
    """First-fit placement, largest first; returns the arena size."""
    placed: list[Buffer] = []
    for buf in sorted(buffers, key=lambda b: (-b.size, b.start)):
        live = sorted(
            (p for p in placed if p.start <= buf.end and buf.start <= p.end), key=lambda p: p.offset
        )
        offset = 0
        for p in live:
            if offset + buf.size <= p.offset:
                break
            offset = max(offset, p.offset + p.size)
        buf.offset = offset
        placed.append(buf)
    return max((b.offset + b.size for b in placed), default=0)


def plan_arena(fn: func.FuncOp) -> dict[memref.AllocOp, tuple[SSAValue, int]]:
    """Place the function's buffers and give it the arena: a trailing `memref<Nxi8>`
    argument and `mlfuse.arena_bytes = N`. Returns where each alloc goes (arena, byte
    offset); empty when the function has nothing to assign."""
    buffers = live_buffers(fn) if fn.body.blocks else []
    if not buffers:
        return {}
    size = place(buffers)
    block = fn.body.block
    arena = block.insert_arg(MemRefType(i8, [size]), len(block.args))
    fn.function_type = FunctionType.from_lists([a.type for a in block.args], fn.function_type.outputs.data)
    fn.attributes[ARENA_ATTR] = IntegerAttr(size, i64)
    return {buf.alloc: (arena, buf.offset) for buf in buffers}


@dataclass
class AllocToArenaView(RewritePattern):
    """A placed `memref.alloc` -> `memref.view` of the arena at its offset; its deallocs go."""

    placement: dict[memref.AllocOp, tuple[SSAValue, int]]

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.AllocOp, rewriter: PatternRewriter) -> None:
        if op not in self.placement:
            return
        arena, offset = self.placement[op]
        constant = rewriter.insert(arith.ConstantOp(IntegerAttr(offset, IndexType())))
        view = rewriter.insert(memref.ViewOp(arena, constant.result, [], op.memref.type))
        for use in list(op.memref.uses):
            if isinstance(use.operation, memref.DeallocOp):
                rewriter.erase(use.operation)
        # not rewriter.replace: it would give the alloc's name to the offset constant too
        rewriter.replace_all_uses_with(op.memref, view.result)
        rewriter.erase(op)


def assign_buffers(fn: func.FuncOp) -> int:
    """Rewrite `fn` to take an arena; returns its size in bytes (0: nothing to assign)."""
    placement = plan_arena(fn)
    if not placement:
        return 0
    PatternRewriteWalker(AllocToArenaView(placement), apply_recursively=False).rewrite_region(fn.body)
    return arena_bytes(fn)


def assign_module_buffers(module: ModuleOp) -> None:
    """Plan every public function's arena, then rewrite all placed allocs in one walk."""
    placement: dict[memref.AllocOp, tuple[SSAValue, int]] = {}
    for op in list(module.ops):
        if isinstance(op, func.FuncOp) and op.sym_visibility is None and op.body.blocks:
            placement.update(plan_arena(op))
    if placement:
        PatternRewriteWalker(AllocToArenaView(placement), apply_recursively=False).rewrite_module(module)


def arena_bytes(fn: Operation) -> int:
    attr = fn.attributes.get(ARENA_ATTR)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0
