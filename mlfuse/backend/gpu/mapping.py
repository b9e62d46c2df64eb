"""Adaptive thread mapping: how one fusion group runs on a GPU (AStitch, section 4-5).

A group gets one of four mappings:

- elementwise: no reduction. One thread per vector of `vector` consecutive
  elements (16-byte loads and stores where the innermost dimension allows),
  grid-stride loop; everything stitched in registers.
- row: every reduction reduces the trailing dimensions (R rows of C elements),
  values are row-local. Variants, from C and R:
    thread  (C <= 16)          one thread per row, 256 rows per block;
    warp    (C <= 512)         one warp per row, 8 rows packed per block
                               (horizontal packing), warp-shuffle reduction;
    block   (C > 512)          one block per row, shuffles then shared memory;
    split   (few long rows)    S blocks per row, partial sums added atomically
                               (sum/mean whose results leave the kernel as they are).
  Inputs read again after a reduction are kept in registers when a thread
  holds at most 16 elements of its row, else in shared memory (static up to
  48 KiB, dynamic up to the opt-in limit), else read again from global memory
  (the shared-memory fallback).
- column: every reduction reduces the leading dimensions and only reduced
  values leave: 32x8 threads per tile of 32 columns, partials through a shared
  tile; when there are few tiles, rows are split over blocks with atomics.
- global: anything else (whole-tensor reductions, column statistics broadcast
  back, ...). One cooperative kernel: each reduction level writes global
  scratch buffers, then a grid barrier; the grid never exceeds one wave
  (min_blocks_per_sm is given to ptxas, which caps registers to fit).

The decision is a `Schedule`, recorded on the group by gpu-schedule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DictionaryAttr,
    Float32Type,
    IntegerAttr,
    IntegerType,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue

from mlfuse.abi import element_bytes
from mlfuse.backend.gpu.targets import GpuTarget
from mlfuse.dialects import fusion, graph

THREADS = 256
ROW_THREAD_MAX = 16
ROW_WARP_MAX = 512
REGISTER_CACHE_MAX = 16
SPLIT_MIN_ROW = 8192
SPLIT_MIN_CHUNK = 2048
ROW_BLOCK_256_MAX = 2048  # block per row: 256 threads up to this many columns, then 512
ROW_BLOCK_512_MAX = 8192  # ... up to this many, then 1024
COLUMN_SPLIT_MIN_ROWS = 512
COLUMN_SPLIT_ROWS_PER_BLOCK = 256  # at least this many rows per block when columns are split
COLUMN_TILE = (32, 8)
ELEMENTWISE_BLOCKS_PER_SM = 8
COOPERATIVE_BLOCKS_PER_SM = 2



@dataclass
class GroupInfo:
    """What mapping needs to know about a group body."""

    ops: list[Operation]
    inputs: list[SSAValue]
    outputs: list[SSAValue]
    reductions: list[graph.ReduceOp]
    levels: list[list[graph.ReduceOp]] = field(default_factory=list)


def analyze(group: fusion.GroupOp) -> GroupInfo:
    ops = [op for op in group.block.ops if not isinstance(op, fusion.YieldOp)]
    reductions = [op for op in ops if isinstance(op, graph.ReduceOp)]
    info = GroupInfo(ops, list(group.block.args), list(group.yield_op.values), reductions)
    # level of a reduction = 1 + the deepest level among the reductions it reads
    depth: dict[SSAValue, int] = {}
    for op in ops:
        d = max((depth.get(v, 0) for v in op.operands), default=0)
        if isinstance(op, graph.ReduceOp):
            d += 1
        for r in op.results:
            depth[r] = d
    count = max((depth[r.result] for r in reductions), default=0)
    info.levels = [[r for r in reductions if depth[r.result] == k + 1] for k in range(count)]
    return info


def depends_on_reduction(info: GroupInfo) -> set[SSAValue]:
    dependent: set[SSAValue] = set()
    for op in info.ops:
        if isinstance(op, graph.ReduceOp) or any(v in dependent for v in op.operands):
            dependent.update(op.results)
    return dependent


@dataclass(frozen=True)
class Schedule:
    mapping: str  # elementwise | row | column | global
    variant: str = ""
    block: tuple[int, int, int] = (THREADS, 1, 1)
    grid: tuple[int, int, int] = (1, 1, 1)
    rows: int = 0  # row/column geometry: R and C
    cols: int = 0
    rows_per_block: int = 1
    threads_per_row: int = 1
    split: int = 1
    vector: int = 1
    cache: str = "none"  # row: registers | shared | dynamic_shared | reload | none
    shared_bytes: int = 0
    cooperative: bool = False
    min_blocks_per_sm: int = 0
    stitch: tuple[str, ...] = ()  # per reduction, in order: register | warp | block | global
    reason: str = ""

    def to_attr(self) -> DictionaryAttr:
        def ints(values) -> ArrayAttr:
            return ArrayAttr([IntegerAttr(v, i64) for v in values])

        entries: dict[str, Attribute] = {
            "mapping": StringAttr(self.mapping),
            "block": ints(self.block),
            "grid": ints(self.grid),
            "reason": StringAttr(self.reason),
        }
        if self.variant:
            entries["variant"] = StringAttr(self.variant)
        if self.mapping in ("row", "column"):
            entries["rows"] = IntegerAttr(self.rows, i64)
            entries["cols"] = IntegerAttr(self.cols, i64)
        if self.mapping == "row":
            entries["rows_per_block"] = IntegerAttr(self.rows_per_block, i64)
            entries["threads_per_row"] = IntegerAttr(self.threads_per_row, i64)
            entries["cache"] = StringAttr(self.cache)
        if self.split > 1:
            entries["split"] = IntegerAttr(self.split, i64)
        if self.vector > 1:
            entries["vector"] = IntegerAttr(self.vector, i64)
        if self.shared_bytes:
            entries["shared_bytes"] = IntegerAttr(self.shared_bytes, i64)
        if self.cooperative:
            entries["cooperative"] = BoolAttr.from_bool(True)
        if self.stitch:
            entries["stitch"] = ArrayAttr([StringAttr(s) for s in self.stitch])
        return DictionaryAttr(entries)

    @staticmethod
    def from_attr(attr: DictionaryAttr) -> Schedule:
        d = attr.data

        def ints(name: str) -> tuple[int, ...]:
            return tuple(a.value.data for a in d[name].data)  # type: ignore[union-attr]

        def num(name: str, default: int) -> int:
            return d[name].value.data if name in d else default  # type: ignore[union-attr]

        def text(name: str, default: str) -> str:
            return d[name].data if name in d else default  # type: ignore[union-attr]

        return Schedule(
            mapping=text("mapping", ""),
            variant=text("variant", ""),
            block=ints("block"),  # type: ignore[arg-type]
            grid=ints("grid"),  # type: ignore[arg-type]
            rows=num("rows", 0),
            cols=num("cols", 0),
            rows_per_block=num("rows_per_block", 1),
            threads_per_row=num("threads_per_row", 1),
            split=num("split", 1),
            vector=num("vector", 1),
            cache=text("cache", "none"),
            shared_bytes=num("shared_bytes", 0),
            cooperative="cooperative" in d,
            min_blocks_per_sm=COOPERATIVE_BLOCKS_PER_SM if "cooperative" in d else 0,
            stitch=tuple(s.data for s in d["stitch"].data) if "stitch" in d else (),  # type: ignore[union-attr]
            reason=text("reason", ""),
        )




def shuffle_type(t: Attribute) -> bool:
    return isinstance(t, Float32Type) or (isinstance(t, IntegerType) and t.width.data == 32)


def atomic_type(t: Attribute) -> bool:
    return shuffle_type(t)


# --- geometry ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Geometry:
    prefix: tuple[int, ...]
    suffix: tuple[int, ...]

    @property
    def full(self) -> tuple[int, ...]:
        return self.prefix + self.suffix


def trailing_geometry(info: GroupInfo, leading: bool) -> Geometry | None:
    """The common (prefix, suffix) split of every reduction, reducing trailing (or leading) dims."""
    found: Geometry | None = None
    for r in info.reductions:
        shape = graph.shape_of(r.input)
        axes = r.reduce_axes
        if not axes:
            return None
        k = len(axes) if leading else min(axes)
        expected = tuple(range(0, k)) if leading else tuple(range(k, len(shape)))
        if tuple(axes) != expected:
            return None
        g = Geometry(tuple(shape[:k]), tuple(shape[k:]))
        if found is not None and g != found:
            return None
        found = g
    return found


def row_local(info: GroupInfo, g: Geometry) -> str | None:
    """Why the group is not row-local for geometry g (None when it is)."""
    full = g.full
    reduced = {g.prefix, g.prefix + (1,) * len(g.suffix)}
    dependent = depends_on_reduction(info)
    for op in info.ops:
        if not any(r in dependent for r in op.results) or isinstance(op, graph.ReduceOp):
            continue
        shape = graph.shape_of(op.results[0])
        if graph.is_elementwise(op) and shape in reduced | {full}:
            continue
        if isinstance(op, graph.BroadcastOp) and shape == full:
            in_shape = graph.shape_of(op.input)
            k = len(g.prefix)
            if in_shape == g.prefix and op.dim_map == tuple(range(k)):
                continue
            if in_shape == g.prefix + (1,) * len(g.suffix) and op.dim_map == tuple(range(len(full))):
                continue
        if isinstance(op, graph.ReshapeOp) and shape in reduced and graph.shape_of(op.input) in reduced:
            continue
        return f"'{op.name}' moves reduced values across rows"
    for v in info.outputs:
        if graph.shape_of(v) not in reduced | {full}:
            return f"an output of shape {graph.fmt_shape(graph.shape_of(v))} is neither a row nor a row result"
    return None


def column_local(info: GroupInfo, g: Geometry) -> str | None:
    reduced = {g.suffix, (1,) * len(g.prefix) + g.suffix}
    dependent = depends_on_reduction(info)
    if len(info.levels) != 1:
        return "a column reduction feeds another reduction"
    for op in info.ops:
        if not any(r in dependent for r in op.results) or isinstance(op, graph.ReduceOp):
            continue
        shape = graph.shape_of(op.results[0])
        if graph.is_elementwise(op) and shape in reduced:
            continue
        if isinstance(op, graph.ReshapeOp) and shape in reduced and graph.shape_of(op.input) in reduced:
            continue
        return f"'{op.name}' uses column results outside their column"
    for v in info.outputs:
        if graph.shape_of(v) not in reduced:
            return "an output is not a column result"
    return None


def outputs_are_sums(info: GroupInfo) -> bool:
    """Split reductions add partial results atomically: only plain sums/means that leave as they are."""
    return (
        len(info.levels) == 1
        and all(r.KIND in ("sum", "mean") and atomic_type(graph.element_type_of(r.result)) for r in info.reductions)
        and set(info.outputs) == {r.result for r in info.reductions}
        and len(info.outputs) == len(info.reductions)
    )


# --- choice -----------------------------------------------------------------------------


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def choose_schedule(info: GroupInfo, gpu: GpuTarget) -> Schedule:
    if any(graph.is_window_op(op) for op in info.ops):
        from mlfuse.backend.gpu.window import window_schedule  # conv/pool groups; it imports this module

        return window_schedule(info, gpu)
    if any(isinstance(op, graph.ReduceOp) for op in info.ops):
        g = trailing_geometry(info, leading=False)
        if g is not None and row_local(info, g) is None:
            return row_schedule(info, g, gpu)
        g = trailing_geometry(info, leading=True)
        if g is not None and column_local(info, g) is None:
            return column_schedule(info, g, gpu)
        return global_schedule(info, gpu)
    return elementwise_schedule(info, gpu)


def elementwise_schedule(info: GroupInfo, gpu: GpuTarget) -> Schedule:
    shapes = [graph.shape_of(v) for v in info.outputs]
    vector = 4
    while vector > 1 and any((s[-1] if s else 1) % vector for s in shapes):
        vector //= 2
    work = max(cdiv(math.prod(s), vector) for s in shapes)
    grid = max(1, min(cdiv(work, THREADS), gpu.sm_count * ELEMENTWISE_BLOCKS_PER_SM))
    return Schedule(
        "elementwise",
        vector=vector,
        grid=(grid, 1, 1),
        reason=f"no reduction: one thread per {vector} element(s), grid-stride loop",
    )


def row_schedule(info: GroupInfo, g: Geometry, gpu: GpuTarget) -> Schedule:
    rows, cols = math.prod(g.prefix), math.prod(g.suffix)
    el_types = [graph.element_type_of(r.result) for r in info.reductions]
    shuffles = all(shuffle_type(t) for t in el_types)
    passes = len(info.levels) + (1 if any(graph.shape_of(v) == g.full for v in info.outputs) else 0)
    if cols <= ROW_THREAD_MAX or not shuffles:
        variant, per_row, per_block, stitch = "thread", 1, THREADS, "register"
        why = f"rows of {cols} elements: one thread per row"
        if not shuffles:
            why = "reduced element type cannot be shuffled: one thread per row"
    elif cols <= ROW_WARP_MAX:
        variant, per_row, per_block, stitch = "warp", 32, THREADS // 32, "warp"
        why = f"rows of {cols} elements: one warp per row, {THREADS // 32} rows per block"
    elif rows < gpu.sm_count and cols >= SPLIT_MIN_ROW and outputs_are_sums(info):
        split = max(2, min(cdiv(2 * gpu.sm_count, rows), cols // SPLIT_MIN_CHUNK))
        return Schedule(
            "row",
            "split",
            grid=(rows * split, 1, 1),
            rows=rows,
            cols=cols,
            threads_per_row=THREADS,
            split=split,
            stitch=("global",) * len(info.reductions),
            reason=f"{rows} rows of {cols} elements cannot fill {gpu.sm_count} SMs: "
            f"{split} blocks per row, partial sums added atomically",
        )
    else:
        threads = 256 if cols <= ROW_BLOCK_256_MAX else 512 if cols <= ROW_BLOCK_512_MAX else 1024
        variant, per_row, per_block, stitch = "block", threads, 1, "block"
        why = f"rows of {cols} elements: one block of {threads} threads per row"
    block_threads = per_row * per_block
    if variant == "thread":
        block_threads = THREADS
    cache, shared = "none", 0
    if passes >= 2:
        per_thread = cdiv(cols, per_row)
        cached_inputs = [v for v in info.inputs if graph.shape_of(v) == g.full]
        if cols % per_row == 0 and per_thread <= REGISTER_CACHE_MAX:
            cache = "registers"
        elif cached_inputs:
            shared = per_block * cols * sum(element_bytes(graph.element_type_of(v)) for v in cached_inputs)
            if shared <= gpu.static_shared_per_block:
                cache = "shared"
            elif shared <= gpu.shared_per_block_optin - 4096:
                cache = "dynamic_shared"
            else:
                cache, shared = "reload", 0
                why += "; rows exceed shared memory: inputs are read again from global memory"
    return Schedule(
        "row",
        variant,
        block=(block_threads, 1, 1),
        grid=(cdiv(rows, per_block), 1, 1),
        rows=rows,
        cols=cols,
        rows_per_block=per_block,
        threads_per_row=per_row,
        cache=cache,
        shared_bytes=shared,
        stitch=(stitch,) * len(info.reductions),
        reason=why,
    )


def column_schedule(info: GroupInfo, g: Geometry, gpu: GpuTarget) -> Schedule:
    rows, cols = math.prod(g.prefix), math.prod(g.suffix)
    tiles = cdiv(cols, COLUMN_TILE[0])
    split = 1
    if tiles < gpu.sm_count and rows >= COLUMN_SPLIT_MIN_ROWS and outputs_are_sums(info):
        split = max(1, min(cdiv(2 * gpu.sm_count, tiles), rows // COLUMN_SPLIT_ROWS_PER_BLOCK))
    return Schedule(
        "column",
        "split" if split > 1 else "tiled",
        block=(*COLUMN_TILE, 1),
        grid=(tiles, split, 1),
        rows=rows,
        cols=cols,
        split=split,
        stitch=("global" if split > 1 else "block",) * len(info.reductions),
        reason=f"{rows} rows reduced into {cols} columns: tiles of 32 columns x 8 row lanes"
        + (f", rows split over {split} blocks with atomics" if split > 1 else ""),
    )


def global_schedule(info: GroupInfo, gpu: GpuTarget) -> Schedule:
    work = max(math.prod(graph.shape_of(v)) for v in [*info.outputs, *(r.input for r in info.reductions)])
    wave = gpu.sm_count * COOPERATIVE_BLOCKS_PER_SM
    grid = max(1, min(cdiv(work, THREADS), wave))
    return Schedule(
        "global",
        grid=(grid, 1, 1),
        cooperative=True,
        min_blocks_per_sm=COOPERATIVE_BLOCKS_PER_SM,
        stitch=("global",) * len(info.reductions),
        reason=f"{len(info.levels)} reduction level(s) read across blocks: global scratch and a grid "
        f"barrier per level, at most {wave} blocks (one wave at {COOPERATIVE_BLOCKS_PER_SM} blocks/SM)",
    )
