"""Generated GEMM kernels for `loop.gemm`: packed, register-blocked, vectorized.

convert-to-llvm lowers a `loop.gemm` on f32 (f64) to a team call of

    void mlfuse_gemm_f32_<batch>x<m>x<n>x<k>(i64 lo, i64 hi, ptr A, ptr B, ptr C)
    void mlfuse_gemm_f64_<batch>x<m>x<n>x<k>(...)

(or `..._w<kh>x<kw>x<hp>x<wp>` when B is the patches of a padded image under a
window, read in place by the packing: `Window`, `loop.gemm {window}`),
which computes C[b] = A[b] @ B[b] (row-major, static shapes) for the tasks
[lo, hi): each task is a column slice of 48 columns, and when the columns give a
team too few tasks (a tall, narrow product: w @ patches of a CNN's late layers,
n = 49) also a slice of rows (`GemmShape.slice_rows`, a multiple of every MR).
Tasks are numbered batch-major, then by column slice, then by row slice, and within a
batch run in `GemmShape.task_order`: tasks of each size spread evenly, so that a chunk
of consecutive tasks (what the team's schedule hands a thread: home_blocks) holds its share
of full and short slices. The declaration is all the `llvm` dialect sees; this
module writes the body in llvmlite IR when the module is translated
(mlfuse/backend/llvm_translate.py), for the vector width of the target.

The structure is BLIS's (Goto's algorithm), cut down to static shapes:

    for pc in K by KC:
      for each task (48 columns, maybe a slice of rows):
        pack each panel B[pc:pc+KC, j0:j0+NR] of the task, KC x NR contiguous (zero-padded;
          a window's panel within one output row is read in place: READ_WINDOW_IN_PLACE)
        for ic in the task's rows by ROW_BLOCK:      # A[ic:ic+MC, pc:pc+KC] stays in L2
          for each panel j0:
            for i0 in the block by MR:               # the micro-kernel
              acc[MR][NR/VW] = first ? 0 : C[i0:i0+MR, j0:j0+NR]
              for k in KC: acc[i][v] = fma(splat(A[i0+i, pc+k]), packed[k, v], acc[i][v])
              C[i0:i0+MR, j0:j0+NR] = acc         # masked in the last, partial panel

On AVX-512 a conv (stride 1 or 2) with prepacked weights over output rows of 7-23
positions takes channel tiles instead (_ChannelKernels): vector lanes along C's rows, positions
splatted from the image; a 3x3 conv at stride 1 with constant weights over longer rows
takes a Winograd F(2x2, 3x3) kernel (winograd_kernels.py, takes_winograd).

A kernel `..._pb` (GemmShape.packed_b) reads B already packed: a constant that the
translation laid out as these panels (prepack_b), so the packing step is skipped. A
kernel `..._pa` reads a constant A laid out per depth block as panels of MR rows,
kc x MR each (prepack_a): the micro-kernel's loads of A are then one sequential stream,
and so are a depth block's micro-kernel calls one after another. Such a kernel reads
a plain B in place, unpacked (as does one with at most MR rows): see _Kernels.unpacked.

MR x NR/VW accumulators live in vector registers (AVX-512: 8 x 3 of 32 zmm;
AVX2: 6 x 2 of 16 ymm, or 4 x 3 for convs and narrow products; f64 tiles are half as wide). Each C element is one fma chain in k order, so the
result does not depend on the blocking or the thread count. Why not BLAS: the
machines here pin OpenBLAS to its AVX2 kernels (OPENBLAS_CORETYPE=Haswell), while
LLVM targets the host's AVX-512 (the GEMM-bearing graphs of bench/results/latest.md compare them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import llvmlite.ir as ir
import numpy as np

from mlfuse.backend.gemm_epilogue import Epilogue, Operand

TASK_COLUMNS = 48  # columns per task: a multiple of every NR below
ROW_SLICE = 24  # row slices are multiples of this: of every MR below
MIN_TASKS = 16  # rows are sliced when the batches and column slices give fewer tasks
# ... or this many where one batch's columns are less than two slices (a CNN's 7x7 layers, n = 49:
# one slice and a column) and B is read in place (GemmShape.reads_b_in_place: a task that
# packs B's panels would pack them once per row slice): their rows are all a team can
# split, and in 8 tasks (1280 x 49 x 320, 168 rows each) one thread waited up to a task's
# time on the other. Alone, 2
# threads, side by side: that conv + ReLU 0.871x the time in slices of 48 rows (0.919x
# at 32 tasks), 320 x 49 x 960 the same (0.998x); one thread 1.000x; MobileNetV2 0.99x.
MIN_TASKS_ONE_SLICE = 64
ROW_BLOCK = 96  # rows of A multiplied against all of a task's panels in turn (BLIS's MC): 96 KB at a depth block of 256
# The packing of B prefetches the row this many rows ahead of the one it copies: B's
# rows (or an image's channels) are far apart, each on another page, where the hardware
# prefetcher does not follow. Kernels alone, cold caches, one thread, medians of 31:
# 0.88x the time on ResNet-18's 64 x 3136 x 576 over an image, 0.92x on 16 x 50176 x 288,
# 0.97-1.02x elsewhere. (A prefetch never faults, so rows past the end are harmless.)
PACK_PREFETCH_ROWS = 8
# On AVX-512 hosts (Blocking.prefetch_tiles) the micro-kernel prefetches the next panel
# of a prepacked B and the next tile of a prepacked A (prefetch_next_tiles), at these
# llvm.prefetch localities (2: L2, 3: L1). Whole models, one process, medians of 21
# (time with over without, AVX-512 Xeon): one thread ResNet-18 0.93 (the B panels 0.955,
# then A 0.975), MobileNetV2 0.96, GPT-2 0.97, BERT 0.99; two threads ResNet-18 0.97,
# U-Net 1.00. (Separate processes, these and 7x7 convs along the channels together:
# ResNet-18 0.88 at one thread, 0.97-0.99 at two, where the team's waits, not the
# kernels, hold it back.) On an AVX2 host (Zen 3) the same prefetches cost time, a
# prefetch per depth step beside 12 fmas: one process, variants compiled side by side,
# medians of 45-55 calls (time without over with): a 3x3 conv 32 -> 32 at 112x112 0.82-0.93
# at one thread; without A's prefetch ResNet-18 0.96 and U-Net 0.99 at two threads,
# 0.98 at one; without B's as well ResNet-18 0.96 at one thread, MobileNetV2 0.86 at two.
NEXT_PANEL_LOCALITY = 2
NEXT_A_LOCALITY = 3
# A window's panels that lie in one output row (at column stride 1) are rows of the
# image: the micro-kernel reads them in place, at the window's row offsets, and only
# panels that wrap onto the next output row are packed (_Kernels.window_in_place).
# Packing a panel costs about as much as one micro-kernel call over it, so it paid
# least over few rows of A: U-Net's 16- and 32-channel convs spent 28% and 12% of
# their micro-kernels' time packing. One process, side by side (time with over
# without, medians of 21): U-Net 0.90 at one thread, 0.92 at two; ResNet-18 0.99,
# MobileNetV2 1.00, 3x3 convs 64 -> 64 at 56x56 0.98 (one thread) and 0.995 (two),
# 128 at 28x28 and 256 at 14x14 1.00.
READ_WINDOW_IN_PLACE = True
# ... and on AVX-512 (Blocking.wraps_in_place) so are the panels that wrap onto the next
# output rows, over rows of at least this many columns: each vector of B is then a
# masked load per output row it touches (at most 3 at 16 lanes), in the micro-kernel,
# instead of a packed copy. A micro-kernel step takes 24 fmas, time enough for 6-9
# masked loads; on AVX2 12 fmas would wait on them (not measured there: AVX2 keeps
# packing). One thread, one process, side by side (time with over without, medians
# of 11-15): 3x3 convs 32 -> 32 at 112x112 0.96, 64 at 56x56 0.98, 128 at 28x28 0.97,
# 256 at 14x14 0.99, 16 at 224x224 0.98; U-Net 0.975, ResNet-18 0.987, MobileNetV2 1.00.
WRAPPED_ROWS_MIN_WIDTH = 8
# A panel at most this many columns wide (the last one of n = 196: 4 x 48 + 4) under a
# prepacked A is accumulated along its columns on AVX-512 (Blocking.narrow_by_columns):
# a depth step loads A's column of MR rows as one vector, splats each column's element
# of B, and takes one fma per column on MR lanes, instead of MR fmas on 16-lane vectors
# that hold 4 real lanes (_Kernels.column_products).
NARROW_COLUMNS = 8
# ... and such a micro-kernel takes several row tiles of MR at once (column_groups), so
# that a depth step has up to this many independent fma chains: a 1-column panel (the
# last of n = 49: 48 + 1) was one chain of k fmas, waiting on each one's latency (4
# cycles), and MobileNetV2's 1- and 4-column micro-kernels took 3.9% of its time (one
# thread) for 2.4% of its products' work.
NARROW_CHAINS = 8
# the row tiles a narrow panel's micro-kernel may take at once, largest first: 3 divides a
# row slice (ROW_SLICE) and a row block (ROW_BLOCK). Each is a micro-kernel more per
# panel width: groups of 6, 3 and 2 ran MobileNetV2 at the speed of 3 alone (one thread,
# side by side, 1.002x) but cost 0.45 s more of its GEMM units' LLVM time.
COLUMN_GROUPS = (3,)
# On AVX-512 a conv with constant weights (a window, packed_a) over output rows of
# CHANNEL_TILE_ROW_WIDTHS positions takes register tiles whose lanes run along C's
# rows, the output channels: CHANNEL_TILE_ROWS rows (two vectors) of prepacked weights
# per depth step against up to CHANNEL_TILE_COLUMNS positions of one output row, or of
# two rows of 7 (channel_tile_rows), each one image element splatted (_ChannelKernels).
# Every lane is real: over rows of 14 a vector of 16 positions had wrapped over three
# rows, a masked load each. One process, side by side (time with over without,
# medians of 9-21): a 3x3 conv 256 -> 256 at 14x14 0.90-0.92 at one thread, 0.84-0.92
# at two; 512 -> 512 at 7x7 0.91 at one thread against patches @ wt (with the lowering's
# channel-tiles, its im2col gone); ResNet-18 0.91-0.93 at two threads, 0.96 at one; U-Net
# 1.00, MobileNetV2 and MobileNetV3-small 0.98-0.99 (noise). Elsewhere the row kernel
# stays: 128 at 28x28 1.04 at two threads (0.99 at one), 64 at 56x56 even at one thread,
# ResNet-18 0.985-0.99 with both; the stem (7x7 at stride 2 over rows of 112) 1.24 at
# one thread; U-Net's 16-32-channel convs at 224-28 1.19 on the model.
CHANNEL_TILES = True
CHANNEL_TILE_ROW_WIDTHS = range(7, 24)
# ... at these strides: ResNet-18's 3x3 convs at stride 2 onto 14x14 and 7x7, one thread,
# against their copied-out patches (STRIDED_WINDOW_MIN_ROW), 0.93 and 0.89 the time;
# the model 0.99 at two threads
CHANNEL_TILE_STRIDES = ((1, 1), (2, 2))
CHANNEL_TILE_ROWS = 32
CHANNEL_TILE_COLUMNS = 14
PREFIX = "mlfuse_gemm_"
ELEMENTS = {"f32": (ir.FloatType(), 4), "f64": (ir.DoubleType(), 8)}
I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()


class MicroArgs(NamedTuple):
    """A micro-kernel's arguments (_Kernels.micro_fn): A at the tile, B's panel, C at the
    tile, the depth block's kc and whether it is the first; the window's row offsets, the
    panel's first column where it wraps rows, the tile's column in framed images (each
    None where the kernel has none); the epilogue's (last, batch, i0, j0, operands...)."""

    a: ir.Argument
    packed: ir.Argument
    c: ir.Argument
    kc: ir.Argument
    first: ir.Argument
    offsets: ir.Argument | None
    wrap_j0: ir.Argument | None
    frame_j0: ir.Argument | None
    epilogue: list[ir.Argument]


@dataclass(frozen=True)
class Window:
    """B as the patches of a padded image x[c, hp, wp] under a kh x kw window at strides
    (sh, sw):

        B[(c, i, j), (y, x)] = x[c, y*sh + i, x*sw + j]     (y < out_h, x < out_w)

    the im2col of a convolution, read by the kernel's packing instead of materialized.
    With a border (top, left, bottom, right) the image is the interior of x (a
    downsample reading the next conv's padded input): x[c, top + ..., left + ...]. With
    pads (top, left, bottom, right) it is x padded by zeros that are not in memory (a
    depthwise conv's input as it is: only depthwise_kernels take those)."""

    kh: int
    kw: int
    hp: int
    wp: int
    sh: int = 1
    sw: int = 1
    border: tuple[int, int, int, int] = (0, 0, 0, 0)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)

    @property
    def out_w(self) -> int:
        return (self.wp - self.border[1] - self.border[3] + self.pads[1] + self.pads[3] - self.kw) // self.sw + 1

    @property
    def out_h(self) -> int:
        return (self.hp - self.border[0] - self.border[2] + self.pads[0] + self.pads[2] - self.kh) // self.sh + 1

    @property
    def origin(self) -> int:
        """Where the interior's first element is in each of x's channels."""
        return self.border[0] * self.wp + self.border[1]

    @property
    def token(self) -> str:
        """The window in a kernel's symbol: _w<kh>x<kw>x<hp>x<wp>, then s<sh>x<sw> if
        strided, b<top>x<left>x<bottom>x<right> with a border and p<top>x<left>x<bottom>x<right>
        with pads."""
        strides = f"s{self.sh}x{self.sw}" if (self.sh, self.sw) != (1, 1) else ""
        border = "b" + "x".join(map(str, self.border)) if any(self.border) else ""
        pads = "p" + "x".join(map(str, self.pads)) if any(self.pads) else ""
        return f"_w{self.kh}x{self.kw}x{self.hp}x{self.wp}{strides}{border}{pads}"

    @property
    def next_row(self) -> int:
        """From the element after an output row's last column to the next row's first
        column, in the image (at stride 1: the window's overhang kw - 1)."""
        return self.sh * self.wp - self.out_w * self.sw

    def row_offsets(self, k: int) -> list[int]:
        """Where row (c, i, j) of B starts in the image, for each of the k rows."""
        taps = self.kh * self.kw
        return [(r // taps) * self.hp * self.wp + (r % taps // self.kw) * self.wp + r % self.kw for r in range(k)]


@dataclass(frozen=True)
class Frame:
    """C's rows as the interiors of images: C[b, i, y * ow + x] is at c[b, channel + i,
    top + y, left + x] of a buffer [batch, channels, hp, wp]. A conv writes the interior
    of the next conv's padded input this way, and no pad copy moves its output there
    (`loop.gemm {c_frame}`); with a `channel` offset (a single batch: C's batch stride
    is m images), its channels of a concat of images. The border is never written."""

    ow: int
    hp: int
    wp: int
    top: int
    left: int
    channel: int = 0

    @property
    def plane(self) -> int:
        """Elements from one row of C to the next: an image."""
        return self.hp * self.wp

    @property
    def start(self) -> int:
        """Where column 0 of C's first row is in the images."""
        return self.channel * self.plane + self.top * self.wp + self.left

    @property
    def next_row(self) -> int:
        """From the element after an output row's last column to the next row's first."""
        return self.wp - self.ow

    @property
    def token(self) -> str:
        return f"_c{self.ow}x{self.hp}x{self.wp}x{self.top}x{self.left}" + (f"x{self.channel}" if self.channel else "")


@dataclass(frozen=True)
class GemmShape:
    batch: int
    m: int
    n: int
    k: int
    dtype: str = "f32"
    window: Window | None = None  # B is an image's patches (n = out_h * out_w)
    packed_b: bool = False  # B is a constant laid out as the kernel's panels (prepack_b)
    packed_a: bool = False  # A is a constant laid out as the kernel's row panels (prepack_a)
    epilogue: Epilogue | None = None  # C = epilogue(A @ B, operands...) (mlfuse/backend/gemm_epilogue.py)
    frame: Frame | None = None  # C's rows are the interiors of images

    @property
    def symbol(self) -> str:
        base = f"{PREFIX}{self.dtype}_{self.batch}x{self.m}x{self.n}x{self.k}"
        base = base if self.window is None else base + self.window.token
        base = base if self.frame is None else base + self.frame.token
        base += ("_pa" if self.packed_a else "") + ("_pb" if self.packed_b else "")
        return base if self.epilogue is None else f"{base}_e.{self.epilogue.token}"

    @property
    def c_row_stride(self) -> int:
        """Elements from one row of C to the next: n, or with a frame an image."""
        return self.n if self.frame is None else self.frame.plane

    @property
    def column_tasks(self) -> int:
        return -(-self.n // TASK_COLUMNS)

    @property
    def slice_rows(self) -> int:
        """Rows per task: all of them, unless the column slices are too few for a team
        (then enough slices of at least ROW_SLICE rows for MIN_TASKS tasks, or for
        MIN_TASKS_ONE_SLICE where one batch's columns are less than two slices and each
        task reads B in place)."""
        one_slice = self.batch == 1 and self.n < 2 * TASK_COLUMNS and self.reads_b_in_place
        tasks = MIN_TASKS_ONE_SLICE if one_slice else MIN_TASKS
        wanted = max(1, -(-tasks // (self.batch * self.column_tasks)))
        return ROW_SLICE * max(1, -(-self.m // (ROW_SLICE * wanted)))

    @property
    def reads_b_in_place(self) -> bool:
        """Does every task read B where it lies (a plain B under a prepacked A: a 1x1 conv),
        rather than pack its panels (a conv's patches on AVX2) again in each row slice?"""
        return self.window is None and self.packed_a and not self.packed_b

    @property
    def row_tasks(self) -> int:
        return -(-self.m // self.slice_rows)

    @property
    def tasks(self) -> int:
        from mlfuse.backend.depthwise_kernels import takes_depthwise  # it imports this module

        if takes_depthwise(self):  # a channel's plane each
            return self.batch
        return self.batch * self.column_tasks * self.row_tasks

    def task_extent(self, t: int) -> tuple[int, int]:
        """(rows, columns) of C that task t of a batch computes (t = column * row_tasks + row)."""
        col, row = divmod(t, self.row_tasks)
        return min(self.slice_rows, self.m - row * self.slice_rows), min(TASK_COLUMNS, self.n - col * TASK_COLUMNS)

    def task_order(self) -> list[int]:
        """The (column slice, row slice) of each task of a batch, numbered column * row_tasks
        + row, in the order the tasks run: tasks of one size (rows x columns) spread
        evenly through the order, so that every run of consecutive tasks holds its share
        of the work. libgomp's guided schedule (which the team used before home_blocks)
        gave the first thread half the tasks at once, as a home block does; with the short
        last slices all at the end, that half held 59% of
        256 x 196 x 2304's work (a 3x3 conv at 14x14) and the other thread waited. One
        conv, 2 threads, separate processes: 260 -> 290 GF/s at 14x14 256->256, 351 -> 373
        at 28x28 128->128, even at 56x56 and 7x7; ResNet-18 0.98x the time, MobileNetV2
        0.95-0.99x, U-Net and the transformers even (same bits)."""
        sizes: dict[tuple[int, int], list[int]] = {}
        for t in range(self.column_tasks * self.row_tasks):
            sizes.setdefault(self.task_extent(t), []).append(t)
        keyed = [((k + 0.5) / len(ids), -size[0] * size[1], t) for size, ids in sizes.items() for k, t in enumerate(ids)]
        return [t for *_, t in sorted(keyed)]

    @staticmethod
    def from_symbol(name: str) -> GemmShape | None:
        match = re.fullmatch(
            re.escape(PREFIX) + r"(?P<dtype>f32|f64)_(?P<dims>\d+x\d+x\d+x\d+)"
            r"(?:_w(?P<window>\d+x\d+x\d+x\d+)(?:s(?P<strides>\d+x\d+))?(?:b(?P<border>\d+x\d+x\d+x\d+))?(?:p(?P<pads>\d+x\d+x\d+x\d+))?)?"
            r"(?:_c(?P<frame>\d+x\d+x\d+x\d+x\d+(?:x\d+)?))?(?P<pa>_pa)?(?P<pb>_pb)?(?:_e\.(?P<epilogue>[a-z0-9.]+))?",
            name,
        )
        if match is None:
            return None

        def ints(group: str) -> list[int]:
            return [int(x) for x in match.group(group).split("x")]

        strides = ints("strides") if match.group("strides") else [1, 1]
        border = tuple(ints("border")) if match.group("border") else (0, 0, 0, 0)
        pads = tuple(ints("pads")) if match.group("pads") else (0, 0, 0, 0)
        window = Window(*ints("window"), *strides, border, pads) if match.group("window") else None  # type: ignore[arg-type]
        frame = Frame(*ints("frame")) if match.group("frame") else None
        epilogue = Epilogue.parse(match.group("epilogue")) if match.group("epilogue") else None
        return GemmShape(*ints("dims"), dtype=match.group("dtype"), window=window, packed_b=match.group("pb") is not None,  # type: ignore[arg-type]
                         packed_a=match.group("pa") is not None, epilogue=epilogue, frame=frame)


@dataclass(frozen=True)
class Blocking:
    vw: int  # lanes per vector
    mr: int  # rows of the register tile
    nr_vecs: int  # vectors per row of the register tile
    kc: int  # depth of a packed panel
    prefetch_tiles: bool = False  # prefetch the next B panel and A tile (prefetch_next_tiles)
    wraps_in_place: bool = False  # read a window's panels that wrap rows in place (WRAPPED_ROWS_MIN_WIDTH)
    narrow_by_columns: bool = False  # accumulate narrow panels along their columns (NARROW_COLUMNS)
    channel_tiles: bool = False  # lanes along C's rows, positions splatted from the image (_ChannelKernels)
    winograd: bool = False  # a 3x3 conv's Winograd F(2x2, 3x3) kernel (winograd_kernels.py)
    depthwise: bool = False  # a depthwise conv's plane in registers (depthwise_kernels.py)

    @property
    def nr(self) -> int:
        return self.vw * self.nr_vecs

    def padded_rows(self, m: int) -> int:
        """m rounded up to whole row panels (prepack_a's layout of a constant A)."""
        return -(-m // self.mr) * self.mr


# AVX-512 kernels take the depth in blocks of at most this many (depth_block; AVX2 and SSE
# in blocks of 256, BLIS's KC). Each depth block is a pass over C (the partial sums stored
# and loaded again), which cost most where the two threads' caches are far apart (the
# host's slow state, see README) and where C is framed (its vectors cross row ends,
# misaligned). A row block of A (ROW_BLOCK rows x 1024: 384 KB) and the panels of a task
# (1024 x 48: 192 KB) still fit a 1 MB L2. One process, side by side over minutes,
# medians of blocks by the host's state (time of 512 over 256 | 1024 over 512), fast and
# slow state: GPT-2 0.996, 0.969 | 0.998, 0.994; ResNet-18 0.996, 0.998 | 0.994, 0.992;
# MobileNetV2 0.998, 0.970 at 512. Kernels alone (one thread): plain products even,
# framed ones 4.0-4.3% slower than plain at 256, 1.5-2.4% at 512.
MAX_DEPTH_BLOCK = 1024
# AVX2 products with at most this many rows of A (or over an image's patches) use 4 x 24
# register tiles rather than 6 x 16 (see blocking_for)
NARROW_ROWS = 96


def blocking_for(features: str, shape: GemmShape | None = None) -> Blocking:
    """Register blocking (in f32 lanes; f64 kernels halve them) for an LLVM feature
    string ("+avx512f,+fma,...") and, where it matters, the product's `shape`.

    AVX2 takes tiles of 4 rows x 3 vectors for convs (B an image's patches) and products
    of at most NARROW_ROWS rows: 16 or 32 rows are whole tiles of 4, where 6 leaves a
    tile of 4 or 2, and a depth step loads 7 values for 12 fmas instead of 8. One thread,
    one process, kernels alone (medians of 15, time of 4 x 24 over 6 x 16): 0.84-0.95
    on 16 x 50176 x 288 and 32 x 12544 x 576 over an image, 0.85-0.88 on ResNet-18's
    64 x 3136 x 576, 0.93-0.99 at 128 and 256 rows, 0.95-0.98 at 512; but 1.04-1.11 on
    a transformer's 1536 x 768 x 384, which keeps 6 x 16. Whole models against 6 x 16
    everywhere (one process, medians of 21-31): U-Net 0.92-0.96, MobileNetV3-small
    0.96, MobileNetV2 and ResNet-18 1.01 (noise). Only AVX-512 kernels prefetch the
    next tiles (see NEXT_PANEL_LOCALITY: measured on an AVX-512 Xeon and on Zen 3)."""
    from mlfuse.backend import depthwise_kernels, winograd_kernels  # they import this module

    enabled = {f[1:] for f in features.split(",") if f.startswith("+")}
    if shape is not None and depthwise_kernels.takes_depthwise(shape):
        return depthwise_kernels.depthwise_blocking(blocking_for(features).vw, shape)  # the host's f32 lanes
    if winograd_kernels.has_winograd(features) and shape is not None and winograd_kernels.takes_winograd(shape):
        return winograd_kernels.winograd_blocking(shape)
    if has_channel_tiles(features) and shape is not None and takes_channel_tiles(shape):
        return Blocking(vw=16, mr=CHANNEL_TILE_ROWS, nr_vecs=1, kc=max(shape.k, 1), channel_tiles=True)
    if "avx512f" in enabled:
        kc = depth_block(shape.k) if shape is not None else MAX_DEPTH_BLOCK
        return Blocking(vw=16, mr=8, nr_vecs=3, kc=kc, prefetch_tiles=True, wraps_in_place=True, narrow_by_columns=True)  # 24 of 32 zmm accumulate
    if "avx" in enabled:
        if shape is not None and (shape.window is not None or shape.m <= NARROW_ROWS):
            return Blocking(vw=8, mr=4, nr_vecs=3, kc=256)  # 12 of 16 ymm
        return Blocking(vw=8, mr=6, nr_vecs=2, kc=256)  # 12 of 16 ymm
    return Blocking(vw=4, mr=4, nr_vecs=2, kc=256)  # SSE: 8 of 16 xmm


def depth_block(k: int) -> int:
    """The depth of an AVX-512 kernel's blocks over a depth of k: as few blocks of at most
    MAX_DEPTH_BLOCK as can be, as even as can be (576: 576; 2304: 3 x 768; 3072: 3 x 1024)."""
    blocks = -(-max(k, 1) // MAX_DEPTH_BLOCK)
    return -(-max(k, 1) // blocks)


def shape_blocking(features: str, shape: GemmShape) -> Blocking:
    """The blocking of the kernel of `shape` on a host with `features`."""
    return element_blocking(blocking_for(features, shape), shape.dtype)


def element_blocking(blocking: Blocking, dtype: str) -> Blocking:
    """The blocking of `dtype`'s kernels: f64 has half the lanes per vector, the same registers."""
    if ELEMENTS[dtype][1] == 8:
        if blocking.channel_tiles:  # two vectors of rows still, and a tile's row of columns in two vectors
            return replace(blocking, vw=blocking.vw // 2, mr=blocking.mr // 2, nr_vecs=2 * blocking.nr_vecs)
        return replace(blocking, vw=blocking.vw // 2)
    return blocking


def takes_channel_tiles(shape: GemmShape) -> bool:
    """Is `shape` a conv over an image (a window) with constant weights laid out by the
    translation (packed_a), whose kernel takes channel tiles (_ChannelKernels) where the
    host has them (has_channel_tiles)?"""
    w = shape.window
    return w is not None and shape.packed_a and channel_tiles_fit(w.out_w, (w.sh, w.sw))


def channel_tiles_fit(out_w: int, strides: tuple[int, int]) -> bool:
    """Do channel tiles take a conv over output rows of `out_w` positions at `strides`?
    Strides of CHANNEL_TILE_STRIDES: a tile's positions are splats of single elements,
    as cheap sw apart as next to each other."""
    return CHANNEL_TILES and strides in CHANNEL_TILE_STRIDES and out_w in CHANNEL_TILE_ROW_WIDTHS


def has_channel_tiles(features: str) -> bool:
    """Do the GEMM kernels for an LLVM feature string take channel tiles (AVX-512)?"""
    return CHANNEL_TILES and "+avx512f" in features.split(",")


def prepack_b(b: np.ndarray, shape: GemmShape, features: str) -> np.ndarray:
    """B (batch x k x n) in the layout the kernel of `shape` with packed_b reads: per batch,
    for each depth block of KC rows, its NR-column panels one after another, each
    kc x NR row-major, zero-padded past column n. The panel of rows [pc, pc + kc) and
    columns [j0, j0 + NR) starts at b*k*P*NR + pc*P*NR + j0*kc (P panels): what the
    packing would write at run time, done once at compile time for a constant B."""
    blk = shape_blocking(features, shape)
    nr, panels = blk.nr, -(-shape.n // blk.nr)
    full = shape.n // nr  # panels without padding
    b = b.reshape(shape.batch, shape.k, shape.n)
    out = np.zeros((shape.batch, shape.k * panels * nr), b.dtype)
    for pc in range(0, shape.k, blk.kc):  # each element copied once (VGG-11's FC weights: 400 MB)
        rows = b[:, pc : pc + blk.kc]
        kc = rows.shape[1]
        block = out[:, pc * panels * nr : (pc + kc) * panels * nr].reshape(shape.batch, panels, kc, nr)
        block[:, :full] = rows[:, :, : full * nr].reshape(shape.batch, kc, full, nr).transpose(0, 2, 1, 3)
        block[:, full:, :, : shape.n - full * nr] = rows[:, None, :, full * nr :]
    return out


def prepack_a(a: np.ndarray, shape: GemmShape, features: str) -> np.ndarray:
    """A (batch x m x k) in the layout the kernel of `shape` with packed_a reads: per batch,
    for each depth block of KC, panels of MR rows (the last zero-padded), each kc x MR
    (the MR values of one depth contiguous). A micro-kernel's loads of A are then one
    sequential stream, and so are the calls of one depth block one after another (a
    conv's weights come from memory once per call). Row r, depth pc + p of the block at
    pc is at b*M*k + pc*M + (r - r % MR)*kc + p*MR + r % MR (M: m rounded up to MR)."""
    blk = shape_blocking(features, shape)
    if blk.winograd:
        from mlfuse.backend.winograd_kernels import winograd_weights  # it imports this module

        return winograd_weights(a, shape)
    if blk.depthwise:
        from mlfuse.backend.depthwise_kernels import depthwise_weights  # it imports this module

        return depthwise_weights(a, shape)
    rows = blk.padded_rows(shape.m)
    padded = np.zeros((shape.batch, rows, shape.k), a.dtype)
    padded[:, : shape.m] = a.reshape(shape.batch, shape.m, shape.k)
    blocks = []
    for pc in range(0, shape.k, blk.kc):
        block = padded[:, :, pc : pc + blk.kc]
        panels = block.reshape(shape.batch, rows // blk.mr, blk.mr, -1).transpose(0, 1, 3, 2)
        blocks.append(panels.reshape(shape.batch, -1))
    return np.ascontiguousarray(np.concatenate(blocks, axis=1))


def prepacked_a_bytes(shape: GemmShape) -> int:
    """Room for prepack_a's layout under any blocking: ROW_SLICE is a multiple of every MR
    but a channel tile's (CHANNEL_TILE_ROWS), where the shape may take one; a Winograd
    kernel's U and weights (winograd_bytes), where the shape may take one; a depthwise
    kernel's weights as they are, where the shape takes one (on every host)."""
    from mlfuse.backend.depthwise_kernels import takes_depthwise  # they import this module
    from mlfuse.backend.winograd_kernels import takes_winograd, winograd_bytes

    if takes_depthwise(shape):
        return shape.batch * shape.k * ELEMENTS[shape.dtype][1]
    rows = -(-shape.m // ROW_SLICE) * ROW_SLICE
    if takes_channel_tiles(shape):
        rows = max(rows, -(-shape.m // CHANNEL_TILE_ROWS) * CHANNEL_TILE_ROWS)
    direct = shape.batch * rows * shape.k * ELEMENTS[shape.dtype][1]
    return max(direct, winograd_bytes(shape)) if takes_winograd(shape) else direct


# the attribute of a constant global that holds a kernel's operand as panels: its kernel's symbol
PACKED_ATTRS = {"a": "mlfuse.packed_a", "b": "mlfuse.packed_b"}


def prepacked_bytes(shape: GemmShape, operand: str) -> int:
    """The room prepack_a ("a") or prepack_b ("b") needs under any blocking."""
    return prepacked_a_bytes(shape) if operand == "a" else prepacked_b_bytes(shape)


def prepacked_b_bytes(shape: GemmShape) -> int:
    """Room for prepack_b's layout under any blocking: TASK_COLUMNS is a multiple of every NR."""
    return shape.batch * shape.k * -(-shape.n // TASK_COLUMNS) * TASK_COLUMNS * ELEMENTS[shape.dtype][1]


class _Kernels:
    """The functions of one GEMM shape, written into one llvmlite module."""

    def __init__(self, module: ir.Module, shape: GemmShape, blocking: Blocking):
        self.el, self.ebytes = ELEMENTS[shape.dtype]
        assert TASK_COLUMNS % blocking.nr == 0
        self.module, self.shape, self.blk = module, shape, blocking
        # B is read in place, not packed, where packing only copies it (an image's patches
        # are always packed: packing is what reads them):
        # - at most one block of rows: each element of B is used by one micro-kernel call
        #   (a GEMV, a classifier head: 1 x 1280 @ 1280 x 1000);
        # - A a constant laid out in row panels (a 1x1 conv: weights @ activations): each
        #   micro-kernel call of a panel re-reads the same kc x NR block of B, from the
        #   cache whether packed or not, and the copy costs more than its contiguous
        #   reads save, powers of two of columns included (4K-aliased rows). One thread,
        #   one process, side by side (time in place over packed, medians of 21): 1x1
        #   convs 384->64 at 14x14 0.82, 16->96 at 112x112 0.90, 64->64 at 56x56 0.90,
        #   1024->256 at 14x14 0.94, 256->256 at 32x32 0.97 and 64x64 0.99; MobileNetV2
        #   0.94-0.97, MobileNetV3-small 0.95-0.97, ResNet-18 1.00. (Products of two
        #   activations, attention's, came out even: they keep packing.)
        self.unpacked = shape.window is None and not shape.packed_b and (shape.m <= blocking.mr or shape.packed_a)
        self.vec = ir.VectorType(self.el, blocking.vw)
        self.vec_align = min(64, blocking.vw * self.ebytes)  # packed vectors sit at multiples of a vector
        self.mask_type = ir.VectorType(I1, blocking.vw)
        suffix = f"v{blocking.vw}{shape.dtype}"
        self.fma = self.intrinsic(f"llvm.fma.{suffix}", self.vec, [self.vec] * 3)
        self.masked_load = self.intrinsic(f"llvm.masked.load.{suffix}.p0", self.vec, [PTR, I32, self.mask_type, self.vec])
        self.masked_store = self.intrinsic(
            f"llvm.masked.store.{suffix}.p0", ir.VoidType(), [self.vec, PTR, I32, self.mask_type]
        )
        self.prefetch = self.intrinsic("llvm.prefetch.p0", ir.VoidType(), [PTR, I32, I32, I32])
        self.micro: dict[tuple[int, int, bool, bool, bool], ir.Function] = {}
        self.pack: dict[int, ir.Function] = {}

    def epilogue_types(self) -> list:
        """The arguments a helper that applies the epilogue takes after its own: (batch, row,
        column, operand pointers...), none without an epilogue."""
        epilogue = self.shape.epilogue
        if epilogue is None:
            return []
        return [I64, I64, I64, *[PTR] * len(epilogue.operands)]

    def epilogue_args(self, batch, row, column, operands) -> list:
        """The values of epilogue_types for C's element (batch, row, column)."""
        return [batch, row, column, *operands] if self.shape.epilogue is not None else []

    @staticmethod
    def const(value: int) -> ir.Constant:
        return ir.Constant(I64, value)

    @staticmethod
    def entry(fn: ir.Function) -> tuple[list, ir.IRBuilder]:
        """The task function's arguments (lo, hi, A, B, C, the epilogue's operands...), A,
        B and C marked noalias, and a builder at its entry."""
        for arg in fn.args[2:5]:
            arg.add_attribute("noalias")
        return list(fn.args), ir.IRBuilder(fn.append_basic_block("entry"))

    def intrinsic(self, name: str, result: ir.Type, args: list[ir.Type]) -> ir.Function:
        existing = self.module.globals.get(name)
        return existing if existing is not None else ir.Function(self.module, ir.FunctionType(result, args), name=name)

    # --- helpers -----------------------------------------------------------------------

    def lanes(self, width: int, v: int) -> int:
        """How many lanes of vector v of a row `width` floats wide are real."""
        return max(0, min(self.blk.vw, width - v * self.blk.vw))

    def vectors(self, width: int) -> list[int]:
        """The vectors of a panel row `width` floats wide that hold real lanes."""
        return [v for v in range(self.blk.nr_vecs) if self.lanes(width, v)]

    def load_row_vec(self, b: ir.IRBuilder, ptr, lanes: int):
        if lanes == self.blk.vw:
            return b.load(ptr, typ=self.vec, align=self.ebytes)
        mask = ir.Constant(self.mask_type, [i < lanes for i in range(self.blk.vw)])
        return b.call(self.masked_load, [ptr, ir.Constant(I32, self.ebytes), mask, ir.Constant(self.vec, None)])

    def store_row_vec(self, b: ir.IRBuilder, value, ptr, lanes: int) -> None:
        if lanes == self.blk.vw:
            b.store(value, ptr, align=self.ebytes)
            return
        mask = ir.Constant(self.mask_type, [i < lanes for i in range(self.blk.vw)])
        self.store_pieces(b, value, [(ptr, mask)])

    def prefetch_line(self, b: ir.IRBuilder, at, locality: int = 3) -> None:
        """Prefetch the cache line of `at` for reading (llvm.prefetch locality 3: every cache
        level; 2: not L1)."""
        b.call(self.prefetch, [at, ir.Constant(I32, 0), ir.Constant(I32, locality), ir.Constant(I32, 1)])

    def prefetch_row(self, b: ir.IRBuilder, start, width: int) -> None:
        """Prefetch the `width` elements at `start`: the cache lines of its first and last
        element."""
        for at in (start, b.gep(start, [ir.Constant(I64, width - 1)], source_etype=self.el)):
            self.prefetch_line(b, at)

    def splat(self, b: ir.IRBuilder, scalar, vector: ir.VectorType | None = None):
        """`scalar` in every lane of a `vector` (default: the kernel's element vector)."""
        vector = vector or self.vec
        one = b.insert_element(ir.Constant(vector, ir.Undefined), scalar, ir.Constant(I32, 0))
        return b.shuffle_vector(one, ir.Constant(vector, ir.Undefined), ir.Constant(ir.VectorType(I32, vector.count), [0] * vector.count))

    def function(self, name: str, args: list[ir.Type]) -> tuple[ir.Function, ir.IRBuilder]:
        """A helper of the task function (a micro-kernel, a packing loop), kept out of line
        and optimized for size: LLVM inlined each into every call site (a micro-kernel
        per row tail and panel width) and unrolled their depth loops, the bulk of a GEMM
        unit's compile time, for no speed (a call per kc x MR x NR tile; the loops are
        already vector code, one fma chain per depth step). LLVM CPU time of ResNet-18's
        16 GEMM units 2.5 -> 1.5 s, MobileNetV2's 87 units 4.5 -> 3.3 s; cold compile
        (medians of 3-5, alternating) ResNet-18 0.86x, MobileNetV2 0.92x the wall time;
        steady calls side by side, 21 rounds: ResNet-18 0.98x, MobileNetV2 1.00x (noise)."""
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), args), name=name)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        fn.attributes.add("optsize")
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    @staticmethod
    def counted_loop(b: ir.IRBuilder, start, stop, step: int, body, carried=()):
        """for i in range(start, stop, step): carried = body(b, i, carried). Returns carried."""
        head = b.append_basic_block("head")
        loop = b.append_basic_block("body")
        done = b.append_basic_block("done")
        pre = b.block
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64)
        phis = [b.phi(v.type) for v in carried]
        i.add_incoming(start, pre)
        for phi, v in zip(phis, carried):
            phi.add_incoming(v, pre)
        b.cbranch(b.icmp_signed("<", i, stop), loop, done)
        b.position_at_end(loop)
        new = body(b, i, phis)
        latch = b.block
        i.add_incoming(b.add(i, ir.Constant(I64, step)), latch)
        for phi, v in zip(phis, new):
            phi.add_incoming(v, latch)
        b.branch(head)
        b.position_at_end(done)
        return phis

    # --- the pieces --------------------------------------------------------------------

    def pack_fn(self, width: int) -> ir.Function:
        """pack(B at [pc, j0], packed, kc): packed[k, :] = B[pc + k, j0 : j0 + width], zero-padded."""
        if width in self.pack:
            return self.pack[width]
        blk, n = self.blk, self.shape.n
        fn, b = self.function(f"{self.shape.symbol}_pack{width}", [PTR, PTR, I64])
        src, dst, kc = fn.args

        def body(b, k, _):
            row = b.gep(src, [b.mul(k, ir.Constant(I64, n))], source_etype=self.el)
            self.prefetch_row(b, b.gep(row, [ir.Constant(I64, PACK_PREFETCH_ROWS * n)], source_etype=self.el), width)
            out = b.gep(dst, [b.mul(k, ir.Constant(I64, blk.nr))], source_etype=self.el)
            for v in range(blk.nr_vecs):
                lanes = self.lanes(width, v)
                if lanes == 0:
                    break
                value = self.load_row_vec(b, b.gep(row, [ir.Constant(I64, v * blk.vw)], source_etype=self.el), lanes)
                b.store(value, b.gep(out, [ir.Constant(I64, v * blk.vw)], source_etype=self.el), align=self.vec_align)
            return []

        self.counted_loop(b, ir.Constant(I64, 0), kc, 1, body)
        b.ret_void()
        self.pack[width] = fn
        return fn

    def i32_table(self, suffix: str, values) -> ir.GlobalVariable:
        """The constant i32 array `values` of this shape's kernels, `<symbol>_<suffix>`
        (made once per module)."""
        name = f"{self.shape.symbol}_{suffix}"
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing  # type: ignore[return-value]
        table = ir.GlobalVariable(self.module, ir.ArrayType(I32, len(values)), name=name)
        table.initializer = ir.Constant(ir.ArrayType(I32, len(values)), list(values))  # pyright: ignore[reportAttributeAccessIssue]  (llvmlite's stub types it None)
        table.global_constant, table.linkage = True, "internal"
        return table

    def row_offsets(self) -> ir.GlobalVariable:
        """The window's row offsets (Window.row_offsets) as a constant i32 table."""
        assert self.shape.window is not None
        return self.i32_table("rows", self.shape.window.row_offsets(self.shape.k))

    def ordered(self, b: ir.IRBuilder, within):
        """The task of a batch that runs `within`-th (GemmShape.task_order), from a constant
        table; `within` itself when the order is the identity."""
        order = self.shape.task_order()
        if order == list(range(len(order))):
            return within
        table = self.i32_table("order", order)
        at = b.gep(table, [ir.Constant(I64, 0), within], source_etype=table.value_type)
        return b.sext(b.load(at, typ=I32), I64)

    def pack_window_fn(self, width: int) -> ir.Function:
        """pack(image, packed, kc, pc, j0): packed[k, :] = B[pc + k, j0 : j0 + width] of
        an image's patches (Window), zero-padded. A vector of columns within one output
        row is one contiguous load; one that wraps onto the next rows is a chain of
        masked loads, one per row, each `sh * wp - out_w * sw` further on (at stride 1,
        the window's overhang `kw - 1`). At a column stride sw > 1 each load is a masked
        load of the sw vectors the columns span, keeping every sw-th element
        (`strided_columns`)."""
        if width in self.pack:
            return self.pack[width]
        blk, window = self.blk, self.shape.window
        assert window is not None
        fn, b = self.function(f"{self.shape.symbol}_pack{width}", [PTR, PTR, I64, I64, I64])
        image, dst, kc, pc, j0 = fn.args
        vecs = self.vectors(width)
        next_row = window.next_row
        table = self.row_offsets()
        offsets = b.gep(table, [ir.Constant(I64, 0), pc], source_etype=table.value_type)
        starts, reals, masks = zip(*self.vector_rows(b, j0, width))
        wraps_row = self.wraps_row(b, j0, width)

        last = b.sub(kc, ir.Constant(I64, 1))

        def body(b, k, _, wraps: bool):
            row = b.gep(image, [b.sext(b.load(b.gep(offsets, [k], source_etype=I32), typ=I32), I64)], source_etype=self.el)
            ahead = b.add(k, ir.Constant(I64, PACK_PREFETCH_ROWS))
            ahead = b.select(b.icmp_signed("<", ahead, kc), ahead, last)  # the table ends at the block's last row
            row_ahead = b.gep(image, [b.sext(b.load(b.gep(offsets, [ahead], source_etype=I32), typ=I32), I64)], source_etype=self.el)
            self.prefetch_row(b, b.gep(row_ahead, [starts[0]], source_etype=self.el), (width - 1) * window.sw + window.kw)
            out = b.gep(dst, [b.mul(k, ir.Constant(I64, blk.nr))], source_etype=self.el)
            for v, start, real, vmasks in zip(vecs, starts, reals, masks):
                at = b.gep(row, [start], source_etype=self.el)
                if window.sw != 1:
                    value = self.strided_columns(b, at, vmasks if wraps else [real], next_row)
                elif not wraps:
                    value = self.load_row_vec(b, at, self.lanes(width, v))
                else:
                    value = self.wrapped_columns(b, at, vmasks)
                b.store(value, b.gep(out, [ir.Constant(I64, v * blk.vw)], source_etype=self.el), align=self.vec_align)
            return []

        with b.if_else(b.not_(wraps_row)) as (contiguous, wrapping):
            with contiguous:
                self.counted_loop(b, ir.Constant(I64, 0), kc, 1, lambda b, k, c: body(b, k, c, False))
            with wrapping:
                self.counted_loop(b, ir.Constant(I64, 0), kc, 1, lambda b, k, c: body(b, k, c, True))
        b.ret_void()
        self.pack[width] = fn
        return fn

    def wrapped_columns(self, b: ir.IRBuilder, at, masks: list):
        """The vector of a window's columns from `at` on at stride 1 that wraps onto the
        next output rows: one masked load per row p (lanes where masks[p] holds, from
        p * next_row further on), zero in the lanes no mask holds."""
        next_row = self.shape.window.next_row  # type: ignore[union-attr]
        value = ir.Constant(self.vec, None)
        for p, mask in enumerate(masks):
            piece = b.gep(at, [ir.Constant(I64, p * next_row)], source_etype=self.el)
            value = b.call(self.masked_load, [piece, ir.Constant(I32, self.ebytes), mask, value])
        return value

    def strided_columns(self, b: ir.IRBuilder, at, masks: list, next_row: int):
        """The vector of lanes x[at + p * next_row + lane * sw] over the pieces p (lanes where
        masks[p] holds; zero elsewhere): for each piece one masked load of the sw vectors
        the lanes span, with only every sw-th element enabled (so nothing past the image is
        read), then the lanes' elements picked out by one shuffle."""
        vw, sw = self.blk.vw, self.shape.window.sw  # type: ignore[union-attr]
        span = ir.VectorType(self.el, vw * sw)
        span_masks = ir.VectorType(I1, vw * sw)
        suffix = f"v{vw * sw}{self.shape.dtype}"
        load = self.intrinsic(f"llvm.masked.load.{suffix}.p0", span, [PTR, I32, span_masks, span])
        element_of_lane = ir.Constant(ir.VectorType(I32, vw * sw), [e // sw for e in range(vw * sw)])
        first_of_lane = ir.Constant(span_masks, [e % sw == 0 for e in range(vw * sw)])
        value = ir.Constant(span, None)
        for p, mask in enumerate(masks):
            spread = b.and_(b.shuffle_vector(mask, ir.Constant(mask.type, ir.Undefined), element_of_lane), first_of_lane)
            piece = b.gep(at, [ir.Constant(I64, p * next_row)], source_etype=self.el)
            value = b.call(load, [piece, ir.Constant(I32, self.ebytes), spread, value])
        keep = ir.Constant(ir.VectorType(I32, vw), [lane * sw for lane in range(vw)])
        return b.shuffle_vector(value, ir.Constant(span, ir.Undefined), keep)

    def vector_rows(self, b: ir.IRBuilder, j0, width: int) -> list[tuple]:
        """For each vector of a window panel's columns [j0, j0 + width): where its first
        column is in the image (window_start), the mask of its real lanes, and for each
        output row p it may touch (`row_masks`) the mask of its real lanes in
        that row. Row p's lanes lie p * next_row further on than their lane number says."""
        window = self.shape.window
        assert window is not None
        out = []
        for v in self.vectors(width):
            j = b.add(j0, ir.Constant(I64, v * self.blk.vw))
            real, masks = self.row_masks(b, j, window.out_w, self.lanes(width, v))
            out.append((self.window_start(b, j), real, masks))
        return out

    def row_masks(self, b: ir.IRBuilder, j, out_w: int, lanes: int) -> tuple:
        """(the mask of a vector's first `lanes` lanes, [its real lanes in each output row p
        it may touch]) for a vector of consecutive columns j.. of output rows `out_w` wide."""
        vw = self.blk.vw
        ow = ir.Constant(I64, out_w)
        lane = ir.Constant(ir.VectorType(I32, vw), list(range(vw)))
        first_row = b.trunc(b.sub(ow, b.srem(j, ow)), I32)  # lanes before the first wrap
        real = self.lane_mask(b, lane, ir.Constant(I32, 0), ir.Constant(I32, lanes))
        rows = 1 + -(-(vw - 1) // out_w)  # output rows a vector may touch
        bounds = [ir.Constant(I32, 0)] + [b.add(first_row, ir.Constant(I32, p * out_w)) for p in range(rows)]
        return real, [b.and_(real, self.lane_mask(b, lane, bounds[p], bounds[p + 1])) for p in range(rows)]

    def lane_mask(self, b: ir.IRBuilder, lane, lo, hi):
        """lo <= lane < hi, per lane (lo and hi i32 scalars)."""
        return b.and_(b.icmp_signed(">=", lane, self.splat(b, lo, lane.type)), b.icmp_signed("<", lane, self.splat(b, hi, lane.type)))

    def micro_fn(self, rows: int, width: int, direct: bool = False, window: bool = False, wraps: bool = False) -> ir.Function:
        """micro(A at [i0, pc], panel, C at [i0, j0], kc, first): a rows x width tile of C
        (with a frame, C at row i0 of column 0 and, after the panel's arguments, j0).
        The panel is packed (rows NR apart, zero-padded), or with `direct` B itself (rows
        n apart, the last panel's loads masked), or with `window` the image at the
        panel's first column, followed by an argument more: the window's row offsets at
        pc (row k of the panel starts offsets[k] on; `unless_in_one_row`). With `wraps`
        as well the panel's columns run onto the next output rows: the panel argument is
        the image itself, and the panel's first column j0 follows the offsets; each
        vector of B is then a masked load per output row it touches (`vector_rows`).
        With an epilogue it also takes (last, batch, i0, j0, operands...) and applies it
        before the last depth block's store."""
        key = (rows, width, direct, window, wraps)
        if key in self.micro:
            return self.micro[key]
        blk, epilogue = self.blk, self.shape.epilogue
        vecs = self.vectors(width)
        fn, b, (a, packed, c, kc, first, offsets, wrap_j0, frame_j0, epilogue_args) = self.micro_function(
            rows, width, direct, window, wraps)
        columns = self.vector_rows(b, wrap_j0, width) if wraps else None
        c_at = self.c_pieces(b, c, rows, width, frame_j0)
        if self.shape.k <= blk.kc:  # one depth block: every call is the first, C is never read
            init = [ir.Constant(self.vec, None)] * (rows * len(vecs))
        else:
            init = self.load_tile(b, c_at, rows, width, first)
        if epilogue is not None:
            with b.if_then(epilogue_args[0]):  # the last depth block
                self.prefetch_epilogue_operands(b, rows, width, epilogue_args[1:])

        def body(b, k, acc):
            panel_row = self.panel_row(b, packed, k, offsets, direct)
            if columns is not None:  # each vector from where its columns start
                at = [b.gep(panel_row, [start], source_etype=self.el) for start, _, _ in columns]
                bv = [self.wrapped_columns(b, ptr, masks) for ptr, (_, _, masks) in zip(at, columns)]
            else:
                at = [b.gep(panel_row, [ir.Constant(I64, v * blk.vw)], source_etype=self.el) for v in vecs]
                if direct or window:
                    bv = [self.load_row_vec(b, ptr, self.lanes(width, v)) for ptr, v in zip(at, vecs)]
                else:
                    bv = [b.load(ptr, typ=self.vec, align=self.vec_align) for ptr in at]
            self.prefetch_next_tiles(b, a, panel_row, k, kc, vecs)
            out = []
            for i in range(rows):
                a_ik = b.load(b.gep(a, [self.a_offset(b, i, k)], source_etype=self.el), typ=self.el, align=self.ebytes)
                splat = self.splat(b, a_ik)
                for j, _ in enumerate(vecs):
                    out.append(b.call(self.fma, [splat, bv[j], acc[i * len(vecs) + j]]))
            return out

        if self.by_columns(width, wraps):
            acc = self.column_products(b, rows, width, (a, packed, offsets, direct), kc, init)
        else:
            acc = self.counted_loop(b, ir.Constant(I64, 0), kc, 1, body, init)
        self.finish_tile(b, acc, c_at, rows, width, epilogue_args)
        b.ret_void()
        self.micro[key] = fn
        return fn

    def micro_function(self, rows: int, width: int, direct: bool, window: bool, wraps: bool = False
                       ) -> tuple[ir.Function, ir.IRBuilder, MicroArgs]:
        """The function `<symbol>_micro<rows>x<width>` with micro_fn's arguments, and them."""
        epilogue = self.shape.epilogue
        suffix = "_wrap" if wraps else "_window" if window else "_direct" if direct else ""
        extra = [I1, I64, I64, I64] + [PTR] * len(epilogue.operands) if epilogue is not None else []
        framed = self.shape.frame is not None
        args = [PTR, PTR, PTR, I64, I1, *[PTR] * window, *[I64] * wraps, *[I64] * framed, *extra]
        fn, b = self.function(f"{self.shape.symbol}_micro{rows}x{width}{suffix}", args)
        a, packed, c, kc, first, *rest = fn.args
        for arg in (a, packed, c):
            arg.add_attribute("noalias")
        offsets = rest.pop(0) if window else None
        wrap_j0 = rest.pop(0) if wraps else None
        frame_j0 = rest.pop(0) if framed else None
        return fn, b, MicroArgs(a, packed, c, kc, first, offsets, wrap_j0, frame_j0, rest)

    def finish_tile(self, b: ir.IRBuilder, acc: list, c_at: tuple, rows: int, width: int, epilogue_args: Sequence) -> None:
        """Store the row-major tile `acc` at its pieces of C (c_pieces), through the
        epilogue in the last depth block. epilogue_args = (last, batch, i0, j0, operands...)
        (none without an epilogue)."""
        def store(values) -> None:
            self.store_tile(b, values, c_at, rows, width)

        if self.shape.epilogue is None:
            store(acc)
            return
        with b.if_else(epilogue_args[0]) as (last, partial):
            with last:
                store(self.apply_epilogue(b, acc, rows, width, epilogue_args[1:]))
            with partial:
                store(acc)

    def grouped_micro_fn(self, groups: int, width: int, direct: bool = False, window: bool = False) -> ir.Function:
        """micro_fn's micro-kernel for a narrow panel (`by_columns`) over `groups` row tiles
        of MR at once (column_groups): one depth loop with an fma chain per tile and
        column, each tile's column of A loaded from its own packed panel (kc x MR apart)
        against the same splats of B; the same chains as `groups` calls of micro_fn, so
        the same bits. The tiles' loads of C and their epilogues and stores run in loops
        over the tiles (their columns kept on the stack meanwhile): emitted once per
        tile, they had made MobileNetV2's GEMM units take 1.8x their LLVM time."""
        mr, epilogue = self.blk.mr, self.shape.epilogue
        key = (groups * mr, width, direct, window, False)  # more rows than micro_fn's tiles
        if key in self.micro:
            return self.micro[key]
        fn, b, (a, packed, c, kc, first, offsets, _, j0, epilogue_args) = self.micro_function(groups * mr, width, direct, window)
        column = ir.VectorType(self.el, mr)
        saved = b.alloca(column, size=groups * width)

        def slot(b, g, p):  # where tile g's column p waits
            return b.gep(saved, [b.add(b.mul(g, ir.Constant(I64, width)), ir.Constant(I64, p))], source_etype=column)

        def tile(b, g) -> tuple:  # C's pieces of tile g and its epilogue arguments
            c_at = self.c_pieces(b, b.gep(c, [b.mul(g, ir.Constant(I64, mr * self.shape.c_row_stride))], source_etype=self.el),
                                 mr, width, j0)
            if epilogue is None:
                return c_at, []
            last, batch, i0, *rest = epilogue_args
            return c_at, [last, batch, b.add(i0, b.mul(g, ir.Constant(I64, mr))), *rest]

        def each_tile(emit) -> None:
            self.counted_loop(b, ir.Constant(I64, 0), ir.Constant(I64, groups), 1, lambda b, g, _: emit(b, g) or [])

        if self.shape.k <= self.blk.kc:  # one depth block: every call is the first, C is never read
            init = [ir.Constant(column, None)] * (groups * width)
        else:
            def load(b, g) -> None:
                c_at, _ = tile(b, g)
                rows = self.load_tile(b, c_at, mr, width, first)
                for p, value in enumerate(self.lanes_transposed(b, rows, column, width, mr)):
                    b.store(value, slot(b, g, p))

            each_tile(load)
            init = [b.load(slot(b, ir.Constant(I64, g), p)) for g in range(groups) for p in range(width)]
        if epilogue is not None:
            with b.if_then(epilogue_args[0]):  # the last depth block
                each_tile(lambda b, g: self.prefetch_epilogue_operands(b, mr, width, tile(b, g)[1][1:]))
        columns = self.column_chains(b, groups, width, (a, packed, offsets, direct), kc, init)
        for i, value in enumerate(columns):
            b.store(value, slot(b, ir.Constant(I64, i // width), i % width))

        def finish(b, g) -> None:
            c_at, tile_args = tile(b, g)
            rows = self.lanes_transposed(b, [b.load(slot(b, g, p)) for p in range(width)], self.vec, mr, width)
            self.finish_tile(b, rows, c_at, mr, width, tile_args)

        each_tile(finish)
        b.ret_void()
        self.micro[key] = fn
        return fn

    def c_pieces(self, b: ir.IRBuilder, c, rows: int, width: int, j0=None) -> tuple[dict, dict]:
        """Where the tile's vectors lie in C: ({(i, v): [(pointer, mask)]}, {v: crosses}).
        Without a frame vector v of row i is one piece at `c` (the tile's first element,
        rows n apart) on, its mask None (the vector's real lanes), and `crosses` is
        empty. With a frame (`c` at the tile's first row, column 0; the tile at column
        j0) a vector is one piece per output row it may touch, its lanes there masked
        (`row_masks`), and crosses[v] says whether it runs onto the next output row at
        all (else its first piece holds every lane: one plain access)."""
        vw, frame = self.blk.vw, self.shape.frame
        if frame is None:
            return self.plain_pieces(b, c, rows, width, self.shape.n), {}
        pieces, crosses = {}, {}
        for v in self.vectors(width):
            start, masks, crosses[v] = self.framed_columns(b, b.add(j0, ir.Constant(I64, v * vw)), self.lanes(width, v), frame.ow, frame.wp)
            at = b.gep(c, [b.add(start, ir.Constant(I64, frame.start))], source_etype=self.el)  # the rest: constant offsets from it
            for i in range(rows):
                pieces[i, v] = [(b.gep(at, [ir.Constant(I64, i * frame.plane + p * frame.next_row)], source_etype=self.el), mask)
                                for p, mask in enumerate(masks)]
        return pieces, crosses

    def plain_pieces(self, b: ir.IRBuilder, c, rows: int, width: int, stride: int) -> dict:
        """c_pieces of a tile whose rows lie `stride` apart from `c` on, each vector one
        piece, its mask None (the vector's real lanes)."""
        return {(i, v): [(b.gep(c, [ir.Constant(I64, i * stride + v * self.blk.vw)], source_etype=self.el), None)]
                for i in range(rows) for v in self.vectors(width)}

    def framed_columns(self, b: ir.IRBuilder, j, lanes: int, ow: int, wp: int) -> tuple:
        """A vector of `lanes` consecutive columns j.. of rows of ow columns that lie wp
        apart (the interiors of images): (where column j lies, [the mask of its lanes in
        each row p it may touch, which lie p * (wp - ow) further on than their lane
        number says], whether it crosses a row end)."""
        x = b.srem(j, ir.Constant(I64, ow))
        _, masks = self.row_masks(b, j, ow, lanes)
        return self.framed_column(b, j, ow, wp), masks, b.icmp_signed(">", b.add(x, ir.Constant(I64, lanes)), ir.Constant(I64, ow))

    @staticmethod
    def framed_column(b: ir.IRBuilder, j, ow: int, wp: int):
        """Where column j of rows of ow columns that lie wp apart is: (j // ow) * wp + j % ow."""
        width = ir.Constant(I64, ow)
        return b.add(b.mul(b.sdiv(j, width), ir.Constant(I64, wp)), b.srem(j, width))

    def store_pieces(self, b: ir.IRBuilder, value, pieces: list) -> None:
        """Store `value` at its pieces [(pointer, mask)], each piece's lanes only."""
        for at, mask in pieces:
            b.call(self.masked_store, [value, at, ir.Constant(I32, self.ebytes), mask])

    def masked_pieces(self, b: ir.IRBuilder, pieces: list):
        """A vector loaded from its pieces [(pointer, mask)], zero in lanes no mask holds."""
        value = ir.Constant(self.vec, None)
        for at, mask in pieces:
            value = b.call(self.masked_load, [at, ir.Constant(I32, self.ebytes), mask, value])
        return value

    def load_tile(self, b: ir.IRBuilder, tile: tuple, rows: int, width: int, first) -> list:
        """The row-major tile (rows x the vectors of `width` columns) of C at `tile`
        (c_pieces), zero in lanes past the tile; all zero in the `first` depth block.
        Not emitted where the depth is one block (micro_fn): the loads that never ran
        still made LLVM compute a framed tile's 48 piece pointers before the depth loop
        and keep them on the stack through it (framed conv kernels 6% faster without,
        U-Net's 16-32 channels at 224 and 112, one thread, same bits; whole models at 2
        threads, side by side, fast | slow state: U-Net 0.976 | 0.950, MobileNetV2 1.003
        | 0.962, ResNet-18 0.999 | 0.996)."""
        (pieces, crosses), vecs = tile, self.vectors(width)
        zero = ir.Constant(self.vec, None)
        if not crosses:  # a select: LLVM keeps the loads branch-free
            return [b.select(first, zero, self.load_row_vec(b, pieces[i, v][0][0], self.lanes(width, v)))
                    for i in range(rows) for v in vecs]

        def split(b, v) -> list:
            return [self.masked_pieces(b, pieces[i, v]) for i in range(rows)]

        def loaded(b) -> list:
            columns = [self.branches(b, crosses[v], lambda b, v=v: split(b, v),
                                     lambda b, v=v: [self.load_row_vec(b, pieces[i, v][0][0], self.lanes(width, v)) for i in range(rows)])
                       for v in vecs]
            return [columns[j][i] for i in range(rows) for j in range(len(vecs))]

        return self.branches(b, first, lambda b: [zero] * (rows * len(vecs)), loaded)

    def store_tile(self, b: ir.IRBuilder, values: list | Callable[[int], ir.Value], tile: tuple, rows: int, width: int) -> None:
        """Store the row-major tile `values` (rows x the vectors of `width` columns, or a
        function of the index that emits one: an epilogue, `apply_epilogue`) at its
        pieces of C (c_pieces), only its real lanes: a vector that crosses a row end
        as one masked store per row it touches. A function is called right before its
        vector's store (or before the branch on crossing), so that an epilogue's
        temporaries (an erf's) live one vector at a time, not a tile's: computed for the
        whole tile first, an 8 x 48 tile's GELU spilled 327 times."""
        (pieces, crosses), vecs = tile, self.vectors(width)
        value = values if callable(values) else values.__getitem__
        for j, v in enumerate(vecs):
            def whole(b, j=j, v=v, ready=None) -> None:
                for i in range(rows):
                    x = ready[i] if ready else value(i * len(vecs) + j)
                    self.store_row_vec(b, x, pieces[i, v][0][0], self.lanes(width, v))

            if v not in crosses and pieces[0, v][0][1] is None:
                whole(b)
                continue
            def split(b, j=j, v=v, ready=None) -> None:
                for i in range(rows):
                    self.store_pieces(b, ready[i] if ready else value(i * len(vecs) + j), pieces[i, v])

            if v not in crosses:  # pieces known at compile time (a channel tile's rows)
                split(b)
                continue
            column = [value(i * len(vecs) + j) for i in range(rows)]  # before the branch: both arms store it
            with b.if_else(crosses[v]) as (crossing, one_row):
                with crossing:
                    split(b, ready=column)
                with one_row:
                    whole(b, ready=column)

    @staticmethod
    def branches(b: ir.IRBuilder, cond, if_true, if_false) -> list:
        """The values if_true(b) or else if_false(b) computes (lists of one length), as
        phis after a branch on `cond`."""
        with b.if_else(cond) as (then, otherwise):
            with then:
                taken, taken_at = if_true(b), b.block
            with otherwise:
                other, other_at = if_false(b), b.block
        out = []
        for x, y in zip(taken, other):
            phi = b.phi(x.type)
            phi.add_incoming(x, taken_at)
            phi.add_incoming(y, other_at)
            out.append(phi)
        return out

    def panel_row(self, b: ir.IRBuilder, panel, k, offsets, direct: bool):
        """Where row k of a micro-kernel's panel starts: at the window's row offset k (with
        `offsets`), else k rows of B on (n apart, `direct`) or of the packed panel (NR apart)."""
        if offsets is not None:
            start = b.sext(b.load(b.gep(offsets, [k], source_etype=I32), typ=I32), I64)
            return b.gep(panel, [start], source_etype=self.el)
        step = self.shape.n if direct else self.blk.nr
        return b.gep(panel, [b.mul(k, ir.Constant(I64, step))], source_etype=self.el)

    def by_columns(self, width: int, wraps: bool) -> bool:
        """Is a panel `width` columns wide accumulated along its columns (NARROW_COLUMNS)?
        Under a prepacked A, whose column of MR rows at each depth is contiguous; not a
        window's panel that wraps rows."""
        return self.blk.narrow_by_columns and self.shape.packed_a and width <= NARROW_COLUMNS and not wraps

    def column_groups(self, width: int) -> list[int]:
        """How many row tiles of MR a micro-kernel over a narrow panel of `width` columns
        (`by_columns`) may take at once, largest first, down to one: enough for
        NARROW_CHAINS fma chains."""
        wanted = -(-NARROW_CHAINS // width)
        return [g for g in COLUMN_GROUPS if g <= wanted] + [1]

    def column_products(self, b: ir.IRBuilder, rows: int, width: int, panel: tuple, kc, init: list) -> list:
        """The tile's products over a narrow panel (`by_columns`), from the row-major tile
        `init` (one vector per row), as one vector of MR rows per column (column_chains).
        The accumulators are the row-major tile's lanes, transposed before the depth loop
        and back after it: the same fma chains, so the same bits.
        panel = (A at the tile, B's panel, the window's row offsets or None, direct)."""
        column = ir.VectorType(self.el, self.blk.mr)
        columns = self.column_chains(b, 1, width, panel, kc, self.lanes_transposed(b, init, column, width, rows))
        return self.lanes_transposed(b, columns, self.vec, rows, width)

    def column_chains(self, b: ir.IRBuilder, groups: int, width: int, panel: tuple, kc, init: list) -> list:
        """The depth loop over a narrow panel for `groups` row tiles, from the column
        vectors `init` (tile-major, then by column): per depth step a load of each tile's
        packed column of A (kc x MR apart), a splat of each column's element of B, and
        one fma per tile and column. panel as in column_products."""
        a, packed, offsets, direct = panel
        blk = self.blk
        column = ir.VectorType(self.el, blk.mr)
        fma = self.intrinsic(f"llvm.fma.v{blk.mr}{self.shape.dtype}", column, [column] * 3)

        def body(b, k, acc):
            panel_row = self.panel_row(b, packed, k, offsets, direct)
            tiles = [b.gep(a, [b.mul(kc, ir.Constant(I64, g * blk.mr))], source_etype=self.el) for g in range(groups)]
            for tile in tiles:
                self.prefetch_next_tiles(b, tile, panel_row, k, kc, [], tiles_ahead=groups)
            a_columns = [b.load(b.gep(tile, [self.a_offset(b, 0, k)], source_etype=self.el), typ=column, align=self.ebytes)
                         for tile in tiles]
            splats = [self.splat(b, b.load(b.gep(panel_row, [ir.Constant(I64, p)], source_etype=self.el), typ=self.el,
                                           align=self.ebytes), column) for p in range(width)]
            return [b.call(fma, [a_column, splat, acc[g * width + p]])
                    for g, a_column in enumerate(a_columns) for p, splat in enumerate(splats)]

        return self.counted_loop(b, ir.Constant(I64, 0), kc, 1, body, init)

    @staticmethod
    def lanes_transposed(b: ir.IRBuilder, vectors: list, result: ir.VectorType, count: int, lanes: int) -> list:
        """`count` vectors of `result`: lane i of vector p is lane p of vectors[i] (i < lanes)."""
        out = []
        for p in range(count):
            value = ir.Constant(result, None)
            for i in range(lanes):
                value = b.insert_element(value, b.extract_element(vectors[i], ir.Constant(I32, p)), ir.Constant(I32, i))
            out.append(value)
        return out

    def prefetch_epilogue_operands(self, b: ir.IRBuilder, rows: int, width: int, args) -> None:
        """Prefetch the tile's elements of the epilogue's operands that step along the
        columns (a residual), before the last depth block's loop: the tile's rows are far
        apart, where the hardware prefetcher does not follow, and the loads come right
        after the loop. Kernels alone with the caches flushed between calls, paired calls,
        medians of 300 (time with over without, Zen 3): ResNet-18's 3x3 convs with a
        residual 0.98 (64 x 3136), 0.94 (128 x 784), 0.98 (256 x 196); whole models
        0.99 (ResNet-18, U-Net; one thread)."""
        epilogue = self.shape.epilogue
        assert epilogue is not None
        batch, i0, j0, *pointers = args
        for o, pointer in zip(epilogue.operands, pointers):
            if o.col_stride:
                for i in range(rows):
                    self.prefetch_row(b, self.operand_at(b, o, pointer, batch, b.add(i0, ir.Constant(I64, i)), j0), width)

    def operand_at(self, b: ir.IRBuilder, o: Operand, pointer, batch, row, col):
        """The address of epilogue operand `o`'s element for C[batch, row, col]."""
        at = b.add(ir.Constant(I64, o.offset), b.mul(batch, ir.Constant(I64, o.batch_stride)))
        at = b.add(at, b.mul(row, ir.Constant(I64, o.row_stride)))
        if o.ow:
            at = b.add(at, self.framed_column(b, col, o.ow, o.wp))
        else:
            at = b.add(at, b.mul(col, ir.Constant(I64, o.col_stride)))
        return b.gep(pointer, [at], source_etype=self.el)

    def apply_epilogue(self, b: ir.IRBuilder, acc: list, rows: int, width: int, args) -> Callable[[int], ir.Value]:
        """The shape's epilogue on the tile's accumulators (rows x the vectors of `width`
        columns, row-major), at (batch, i0, j0, operand pointers...) = args: a function
        that emits it on accumulator k where it is called (store_tile calls it right
        before k's store)."""
        epilogue, blk = self.shape.epilogue, self.blk
        assert epilogue is not None
        batch, i0, j0, *pointers = args
        vecs = self.vectors(width)
        suffix = f"v{blk.vw}{self.shape.dtype}"

        def intrinsic(name: str) -> ir.Function:
            return self.intrinsic(f"{name}.{suffix}", self.vec, [self.vec, self.vec])

        framed: dict[tuple[int, int], tuple] = {}  # (k, v): a framed operand's column and masks, for every row

        def operand(k: int, i: int, v: int):
            o = epilogue.operands[k]
            row, col = b.add(i0, ir.Constant(I64, i)), b.add(j0, ir.Constant(I64, v * blk.vw))
            if o.ow:  # a masked load per output row the vector may touch
                if (k, v) not in framed:
                    framed[k, v] = self.framed_columns(b, col, self.lanes(width, v), o.ow, o.wp)[:2]
                start, masks = framed[k, v]
                at = self.operand_at(b, replace(o, ow=0, col_stride=0), pointers[k], batch, row, col)
                at = b.gep(at, [start], source_etype=self.el)
                step = o.wp - o.ow
                return self.masked_pieces(b, [(b.gep(at, [ir.Constant(I64, p * step)], source_etype=self.el), mask)
                                              for p, mask in enumerate(masks)])
            ptr = self.operand_at(b, o, pointers[k], batch, row, col)
            if o.col_stride:
                return self.load_row_vec(b, ptr, self.lanes(width, v))
            return self.splat(b, b.load(ptr, typ=self.el, align=self.ebytes))

        def at(index: int) -> ir.Value:
            i, j = divmod(index, len(vecs))
            return epilogue.emit(b, acc[index], lambda k: operand(k, i, vecs[j]), intrinsic)

        return at

    def prefetch_next_tiles(self, b: ir.IRBuilder, a, panel_row, k, kc, vecs: list[int], tiles_ahead: int = 1) -> None:
        """Prefetch, at depth k, what the micro-kernel call after the next ones reads
        there, from constants laid out in the order the calls read them: with packed_b
        the panel after this one (kc x NR on: into L2, it is read a row block later),
        with packed_a the next tile's A (kc x MR on, or `tiles_ahead` tiles: into L1). The
        hardware prefetcher does not reach across those jumps, and weights come from
        memory (ResNet-18's are 47 MB). Only where the blocking asks for it
        (Blocking.prefetch_tiles): see NEXT_PANEL_LOCALITY."""
        blk = self.blk
        if not blk.prefetch_tiles:
            return
        if self.shape.packed_b:
            ahead = b.gep(panel_row, [b.mul(kc, ir.Constant(I64, blk.nr))], source_etype=self.el)
            for v in vecs:
                self.prefetch_line(b, b.gep(ahead, [ir.Constant(I64, v * blk.vw)], source_etype=self.el), NEXT_PANEL_LOCALITY)
        if self.shape.packed_a:
            ahead = kc if tiles_ahead == 1 else b.mul(kc, ir.Constant(I64, tiles_ahead))
            at = b.gep(a, [b.mul(b.add(ahead, k), ir.Constant(I64, blk.mr))], source_etype=self.el)
            self.prefetch_line(b, at, NEXT_A_LOCALITY)

    def a_offset(self, b: ir.IRBuilder, i: int, k):
        """Where A's element (row i of the tile, depth k) is, from the tile's A pointer."""
        if self.shape.packed_a:
            return b.add(b.mul(k, ir.Constant(I64, self.blk.mr)), ir.Constant(I64, i))
        return b.add(ir.Constant(I64, i * self.shape.k), k)

    def a_rows(self, b: ir.IRBuilder, a_block, i0, kc):
        """The A pointer of the tile at row i0 (a multiple of MR): i0 rows on, or with
        packed_a i0 / MR panels of this depth block's kc x MR."""
        stride = kc if self.shape.packed_a else ir.Constant(I64, self.shape.k)
        return b.gep(a_block, [b.mul(i0, stride)], source_etype=self.el)

    def multiply(self, b: ir.IRBuilder, width: int, a_block, packed, c_col, kc, first, rows: tuple, tile: tuple,
                 window_rows=None, wraps: bool = False) -> None:
        """One panel of `width` columns (packed, or B itself when `unpacked`, or with
        `window_rows` the image at the panel's first column, its rows at those offsets;
        with `wraps` too, the image itself and a panel that runs onto the next output rows)
        against the row blocks of A in rows = (row0, row1): row0 a multiple of MR, row1
        one too or m. tile = (last, batch, j0, epilogue operands...): what an epilogue
        needs besides the row."""
        direct, window = self.unpacked, window_rows is not None
        m, mr = self.shape.m, self.blk.mr
        full, (row0, row1) = m - m % mr, rows
        last, batch, j0, *operands = tile
        panel = [packed, *([window_rows] if window else []), *([j0] if wraps else [])]

        def epilogue_args(i0) -> list:
            return [last, batch, i0, j0, *operands] if self.shape.epilogue is not None else []

        def call(b, micro, i0) -> None:
            a_rows = self.a_rows(b, a_block, i0, kc)
            c_rows = b.gep(c_col, [b.mul(i0, ir.Constant(I64, self.shape.c_row_stride))], source_etype=self.el)
            framed = [j0] if self.shape.frame is not None else []
            b.call(micro, [a_rows, panel[0], c_rows, kc, first, *panel[1:], *framed, *epilogue_args(i0)])

        if full:
            stop = b.select(b.icmp_signed("<", row1, ir.Constant(I64, full)), row1, ir.Constant(I64, full))
            start = row0
            for groups in self.column_groups(width) if self.by_columns(width, wraps) else [1]:
                if groups > 1:
                    micro = self.grouped_micro_fn(groups, width, direct, window)
                else:
                    micro = self.micro_fn(mr, width, direct, window, wraps)
                step = groups * mr
                # as many whole groups as fit before stop, the rest to the smaller groups; single
                # tiles (the last) reach stop, a multiple of MR from row0
                end = stop if groups == 1 else b.add(start, b.mul(b.sdiv(b.sub(stop, start), ir.Constant(I64, step)),
                                                                  ir.Constant(I64, step)))

                def block(b, i0, _, micro=micro):
                    call(b, micro, i0)
                    return []

                self.counted_loop(b, start, end, step, block)
                start = end
        if m % mr:
            with b.if_then(b.icmp_signed(">", row1, ir.Constant(I64, full))):
                call(b, self.micro_fn(m % mr, width, direct, window, wraps), ir.Constant(I64, full))

    def for_panel_width(self, b: ir.IRBuilder, j0, emit) -> None:
        """emit(b, width) for the panel at column j0: NR wide, or the last one's width."""
        nr, last = self.blk.nr, self.shape.n % self.blk.nr
        if not last:
            emit(b, nr)
            return
        with b.if_else(b.icmp_signed(">", b.add(j0, ir.Constant(I64, nr)), ir.Constant(I64, self.shape.n))) as (partial, whole):
            with partial:
                emit(b, last)
            with whole:
                emit(b, nr)

    def task_rows(self, b: ir.IRBuilder, row_slice) -> tuple:
        """(row0, row1) of a task's row slice; constants when rows are not sliced."""
        s = self.shape
        if s.row_tasks == 1:
            return ir.Constant(I64, 0), ir.Constant(I64, s.m)
        row0 = b.mul(row_slice, ir.Constant(I64, s.slice_rows))
        row1 = b.add(row0, ir.Constant(I64, s.slice_rows))
        return row0, b.select(b.icmp_signed(">", row1, ir.Constant(I64, s.m)), ir.Constant(I64, s.m), row1)

    @property
    def window_in_place(self) -> bool:
        """Does the kernel read the panels of its window that lie in one output row in
        place, from the image (rows at the window's offsets), packing only those that
        wrap? At column stride 1, where such a panel's rows are contiguous in the image."""
        w = self.shape.window
        return READ_WINDOW_IN_PLACE and w is not None and w.sw == 1

    @property
    def wraps_in_place(self) -> bool:
        """Does the kernel read its window's panels that wrap onto the next output rows in
        place too (a masked load per row a vector touches), packing nothing? Over output
        rows of at least WRAPPED_ROWS_MIN_WIDTH columns, where the blocking asks for it."""
        w = self.shape.window
        return self.blk.wraps_in_place and self.window_in_place and w is not None and w.out_w >= WRAPPED_ROWS_MIN_WIDTH

    def window_start(self, b: ir.IRBuilder, j0):
        """Where column j0 = (y, x) of B's row 0 is in the image: y*sh*wp + x*sw."""
        w = self.shape.window
        assert w is not None
        ow = ir.Constant(I64, w.out_w)
        return b.add(b.mul(b.sdiv(j0, ow), ir.Constant(I64, w.sh * w.wp)), b.mul(b.srem(j0, ow), ir.Constant(I64, w.sw)))

    def wraps_row(self, b: ir.IRBuilder, j0, width: int):
        """Whether the window's columns [j0, j0 + width) run onto a next output row (an i1)."""
        w = self.shape.window
        assert w is not None
        ow = ir.Constant(I64, w.out_w)
        return b.icmp_signed(">", b.add(b.srem(j0, ow), ir.Constant(I64, width)), ow)

    def unless_in_one_row(self, b: ir.IRBuilder, j0, width: int, wraps, in_one_row=None) -> None:
        """wraps(b, j0, width) if the panel's columns [j0, j0 + width) run onto a next output
        row, else in_one_row(b, j0, width) (if given)."""
        w = self.shape.window
        assert w is not None
        if width > w.out_w:  # wider than an output row: it always wraps
            wraps(b, j0, width)
            return
        past = self.wraps_row(b, j0, width)
        if in_one_row is None:
            with b.if_then(past):
                wraps(b, j0, width)
            return
        with b.if_else(past) as (wrapping, one_row):
            with wrapping:
                wraps(b, j0, width)
            with one_row:
                in_one_row(b, j0, width)

    def a_block(self, b: ir.IRBuilder, a, batch, pc):
        """A at depth pc of `batch`: row 0's element, or with packed_a the depth block's
        first panel (prepack_a: the blocks before it hold pc x M values)."""
        s = self.shape
        if s.packed_a:
            rows = self.blk.padded_rows(s.m)
            start = b.add(b.mul(batch, ir.Constant(I64, rows * s.k)), b.mul(pc, ir.Constant(I64, rows)))
            return b.gep(a, [start], source_etype=self.el)
        return b.gep(a, [b.add(b.mul(batch, ir.Constant(I64, s.m * s.k)), pc)], source_etype=self.el)

    def b_block(self, b: ir.IRBuilder, bm, batch, pc):
        """B at depth pc of `batch`: row pc's element; with a window the batch's image;
        with packed_b the depth block of the batch's panels (prepack_b)."""
        s, blk = self.shape, self.blk
        if s.packed_b:
            panels = -(-s.n // blk.nr)
            start = b.add(b.mul(batch, ir.Constant(I64, s.k * panels * blk.nr)), b.mul(pc, ir.Constant(I64, panels * blk.nr)))
        elif s.window is not None:
            start = b.add(b.mul(batch, ir.Constant(I64, s.k // (s.window.kh * s.window.kw) * s.window.hp * s.window.wp)),
                          ir.Constant(I64, s.window.origin))
        else:
            start = b.add(b.mul(batch, ir.Constant(I64, s.k * s.n)), b.mul(pc, ir.Constant(I64, s.n)))
        return b.gep(bm, [start], source_etype=self.el)

    def pack_panel(self, b: ir.IRBuilder, width: int, b_base, j0, dst, depth: tuple) -> None:
        """Pack the panel of B at column j0, `width` wide, into dst at depth = (kc, pc):
        B's rows, or a window's patches (only if the panel wraps, where the others are
        read in place)."""
        kc, pc = depth
        if self.shape.window is None:
            b.call(self.pack_fn(width), [b.gep(b_base, [j0], source_etype=self.el), dst, kc])
            return

        def pack(b, j0, width) -> None:
            b.call(self.pack_window_fn(width), [b_base, dst, kc, pc, j0])

        if self.window_in_place:
            self.unless_in_one_row(b, j0, width, pack)
        else:
            pack(b, j0, width)

    def task(self, b: ir.IRBuilder, t, pc, kc, depth: tuple, packed, operands: tuple) -> None:
        """Task t at depth pc (depth = (first, last): whether it is the first and the last
        depth block): the panels of B in its columns packed once, then its rows
        in blocks of ROW_BLOCK, each against every panel (the block of A stays in L2
        while the panels pass over it, instead of all of A streaming once per panel).
        operands: A, B, C and the epilogue's."""
        s, blk, (a, bm, c, *epilogue_operands), (first, last) = self.shape, self.blk, operands, depth
        per_batch = ir.Constant(I64, s.column_tasks * s.row_tasks)
        batch, within = b.sdiv(t, per_batch), b.srem(t, per_batch)
        within = self.ordered(b, within)
        # which task this is: row slices vary fastest in the numbering (49 rows are slices
        # of 48 and 1: column-major, the first guided chunk took every full one, and
        # ResNet-18's 7x7 convs ran 74% on one of two threads; 52% now), and the order
        # table spreads the short and narrow slices through the run
        rows = self.task_rows(b, b.srem(within, ir.Constant(I64, s.row_tasks)))
        col0 = b.mul(b.sdiv(within, ir.Constant(I64, s.row_tasks)), ir.Constant(I64, TASK_COLUMNS))
        col1 = b.add(col0, ir.Constant(I64, TASK_COLUMNS))
        col1 = b.select(b.icmp_signed(">", col1, ir.Constant(I64, s.n)), ir.Constant(I64, s.n), col1)
        a_block, b_base = self.a_block(b, a, batch, pc), self.b_block(b, bm, batch, pc)
        c_base = b.gep(c, [b.mul(batch, ir.Constant(I64, s.m * s.c_row_stride))], source_etype=self.el)

        def slot(b, j0):  # panel (j0 - col0) / NR of the task, KC x NR floats each; or B itself
            if self.unpacked:
                return b.gep(b_base, [j0], source_etype=self.el)
            if s.packed_b:
                return b.gep(b_base, [b.mul(j0, kc)], source_etype=self.el)
            return b.gep(packed, [b.mul(b.sub(j0, col0), ir.Constant(I64, blk.kc))], source_etype=self.el)

        def pack(b, j0, _):
            self.for_panel_width(b, j0, lambda b, width: self.pack_panel(b, width, b_base, j0, slot(b, j0), (kc, pc)))
            return []

        if not self.unpacked and not s.packed_b and not self.wraps_in_place:
            self.counted_loop(b, col0, col1, blk.nr, pack)
        window_rows = None
        if self.window_in_place:
            table = self.row_offsets()
            window_rows = b.gep(table, [ir.Constant(I64, 0), pc], source_etype=table.value_type)

        def row_block(b, i0, _):
            i1 = b.add(i0, ir.Constant(I64, ROW_BLOCK))
            i1 = b.select(b.icmp_signed(">", i1, rows[1]), rows[1], i1)

            def panel(b, j0, _):
                c_col = b.gep(c_base, [j0], source_etype=self.el) if s.frame is None else c_base  # a frame's: c_pieces
                tile = (last, batch, j0, *epilogue_operands)

                def packed(b, j0, width) -> None:
                    self.multiply(b, width, a_block, slot(b, j0), c_col, kc, first, (i0, i1), tile)

                def in_place(b, j0, width) -> None:
                    at = b.gep(b_base, [self.window_start(b, j0)], source_etype=self.el)
                    self.multiply(b, width, a_block, at, c_col, kc, first, (i0, i1), tile, window_rows)

                def wrapped(b, j0, width) -> None:
                    self.multiply(b, width, a_block, b_base, c_col, kc, first, (i0, i1), tile, window_rows, wraps=True)

                wrapping = wrapped if self.wraps_in_place else packed
                if window_rows is None:
                    self.for_panel_width(b, j0, lambda b, width: packed(b, j0, width))
                else:
                    self.for_panel_width(b, j0, lambda b, width: self.unless_in_one_row(b, j0, width, wrapping, in_place))
                return []

            self.counted_loop(b, col0, col1, blk.nr, panel)
            return []

        self.counted_loop(b, rows[0], rows[1], ROW_BLOCK, row_block)

    def define(self, fn: ir.Function) -> None:
        """The body of the task function `fn` (declared by convert-to-llvm)."""
        s, blk = self.shape, self.blk
        (lo, hi, *operands), b = self.entry(fn)
        packed = b.alloca(ir.ArrayType(self.el, blk.kc * TASK_COLUMNS))  # every panel of a task
        packed.align = 64

        def depth(b, pc, _):
            kc = b.select(b.icmp_signed("<", b.sub(ir.Constant(I64, s.k), pc), ir.Constant(I64, blk.kc)),
                          b.sub(ir.Constant(I64, s.k), pc), ir.Constant(I64, blk.kc))
            first = b.icmp_signed("==", pc, ir.Constant(I64, 0))
            last = b.icmp_signed(">=", b.add(pc, ir.Constant(I64, blk.kc)), ir.Constant(I64, s.k))

            def task(b, t, _):
                self.task(b, t, pc, kc, (first, last), packed, tuple(operands))
                return []

            self.counted_loop(b, lo, hi, 1, task)
            return []

        # one depth block at least: over k = 0 it writes C = epilogue(0), the empty sum's
        self.counted_loop(b, ir.Constant(I64, 0), ir.Constant(I64, max(s.k, 1)), blk.kc, depth)
        b.ret_void()


def define_gemm_kernels(module: ir.Module, features: str) -> list[str]:
    """Give every declared `mlfuse_gemm_*` function of `module` its body."""
    defined = []
    for fn in list(module.functions):
        shape = GemmShape.from_symbol(fn.name)
        if shape is not None and fn.is_declaration:
            blocking = shape_blocking(features, shape)
            if shape.window is not None and any(shape.window.pads) and not blocking.depthwise:
                raise AssertionError(f"{fn.name}: only the depthwise kernels read a window with pads (takes_depthwise)")
            kernel_generator(blocking)(module, shape, blocking).define(fn)
            defined.append(fn.name)
    return defined


def kernel_generator(blocking: Blocking) -> type[_Kernels]:
    """What writes the task function of a shape with `blocking`: its Winograd kernel, its
    depthwise kernel, channel tiles, or the row-vector kernel."""
    if blocking.winograd:
        from mlfuse.backend.winograd_kernels import WinogradKernels  # it imports this module

        return WinogradKernels
    if blocking.depthwise:
        from mlfuse.backend.depthwise_kernels import DepthwiseKernels  # it imports this module

        return DepthwiseKernels
    return _ChannelKernels if blocking.channel_tiles else _Kernels


class _ChannelKernels(_Kernels):
    """The task function of a conv over an image with constant weights (takes_channel_tiles)
    on channel tiles: the tile of C's rows [i0, i0 + MR) (output channels) by `width`
    positions x0.. of output row y (or by whole output rows y.. where they are narrow:
    channel_tile_rows), accumulated as MR / VW vectors of rows per position, in
    registers over the whole depth:

        for k in K:
          w = A[k, i0 : i0 + MR]                        # prepack_a: kc = K, panels of MR rows
          at = image + rows[k] + y * sh * wp + x0 * sw  # Window.row_offsets
          for p in width: acc[p] = fma(w, splat(at[p * sw]), acc[p])
        C[i0 + i, y * out_w + x0 + p] = epilogue(acc[p][i])   # transposed into rows

    A tile's positions are constant offsets from one address (channel_tile_widths
    splits a row evenly). Each C element is still one fma chain in k order: the same
    bits as _Kernels. The work units are (batch, row panel, output rows), panel-major
    (consecutive units share the panel of weights), and task t of the team's
    GemmShape.tasks runs units [t * U // T, (t + 1) * U // T)."""

    def __init__(self, module: ir.Module, shape: GemmShape, blocking: Blocking):
        super().__init__(module, shape, blocking)
        self.channel_micro: dict[tuple[int, int, int], ir.Function] = {}
        assert shape.window is not None
        self.out_rows = channel_tile_rows(shape.window.out_w)  # output rows per unit

    def define(self, fn: ir.Function) -> None:
        s, blk, window = self.shape, self.blk, self.shape.window
        assert window is not None
        lo, hi, a, image, c, *operands = fn.args
        for arg in (a, image, c):
            arg.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        panels, groups = -(-s.m // blk.mr), -(-window.out_h // self.out_rows)
        per_batch = panels * groups
        units, tasks = s.batch * per_batch, max(s.tasks, 1)

        def unit(b, u, _):
            batch, within = b.sdiv(u, ir.Constant(I64, per_batch)), b.srem(u, ir.Constant(I64, per_batch))
            panel, group = b.sdiv(within, ir.Constant(I64, groups)), b.srem(within, ir.Constant(I64, groups))
            self.output_rows(b, batch, panel, b.mul(group, ir.Constant(I64, self.out_rows)), (a, image, c, *operands))
            return []

        def task(b, t, _):
            u0 = b.sdiv(b.mul(t, ir.Constant(I64, units)), ir.Constant(I64, tasks))
            u1 = b.sdiv(b.mul(b.add(t, ir.Constant(I64, 1)), ir.Constant(I64, units)), ir.Constant(I64, tasks))
            self.counted_loop(b, u0, u1, 1, unit)
            return []

        self.counted_loop(b, lo, hi, 1, task)
        b.ret_void()

    def output_rows(self, b: ir.IRBuilder, batch, panel, y, operands: tuple) -> None:
        """C's rows [panel * MR, + MR) at output rows y.. of `batch` (out_rows of them, or
        the rows left at the bottom), in tiles along a row or of whole rows."""
        s, blk, window = self.shape, self.blk, self.shape.window
        assert window is not None
        a, image, c, *epilogue_operands = operands
        zero = ir.Constant(I64, 0)
        i0 = b.mul(panel, ir.Constant(I64, blk.mr))
        a_panel = self.a_rows(b, self.a_block(b, a, batch, zero), i0, ir.Constant(I64, s.k))  # one depth block: kc = K
        row = b.gep(self.b_block(b, image, batch, zero), [b.mul(y, ir.Constant(I64, window.sh * window.wp))], source_etype=self.el)
        j_row = b.mul(y, ir.Constant(I64, window.out_w))
        c_rows = b.add(b.mul(batch, ir.Constant(I64, s.m * s.c_row_stride)), b.mul(i0, ir.Constant(I64, s.c_row_stride)))

        def call(b, tile_rows: int, x0: int, width: int, out_rows: int) -> None:
            j0 = b.add(j_row, ir.Constant(I64, x0))
            at = b.gep(row, [ir.Constant(I64, x0 * window.sw)], source_etype=self.el)
            # C at the tile's first element (with a frame, where it lies in its image)
            first = b.add(c_rows, j0) if s.frame is None else b.add(
                c_rows, b.add(b.mul(y, ir.Constant(I64, s.frame.wp)), ir.Constant(I64, s.frame.start + x0)))
            c_at = b.gep(c, [first], source_etype=self.el)
            epilogue = self.epilogue_args(batch, i0, j0, epilogue_operands)
            b.call(self.channel_micro_fn(tile_rows, width, out_rows), [a_panel, at, c_at, *epilogue])

        def tiles(b, tile_rows: int, out_rows: int) -> None:
            if self.out_rows > 1:  # whole rows
                call(b, tile_rows, 0, window.out_w, out_rows)
                return
            x0 = 0
            for width in channel_tile_widths(window.out_w):
                call(b, tile_rows, x0, width, 1)
                x0 += width

        def for_rows(b, out_rows: int) -> None:
            if s.m % blk.mr == 0:
                tiles(b, blk.mr, out_rows)
                return
            with b.if_else(b.icmp_signed(">", b.add(i0, ir.Constant(I64, blk.mr)), ir.Constant(I64, s.m))) as (short, whole):
                with short:
                    tiles(b, s.m % blk.mr, out_rows)
                with whole:
                    tiles(b, blk.mr, out_rows)

        last = window.out_h % self.out_rows
        if not last:
            for_rows(b, self.out_rows)
            return
        with b.if_else(b.icmp_signed(">", b.add(y, ir.Constant(I64, self.out_rows)), ir.Constant(I64, window.out_h))) as (bottom, whole):
            with bottom:
                for_rows(b, last)
            with whole:
                for_rows(b, self.out_rows)

    def channel_micro_fn(self, rows: int, width: int, out_rows: int = 1) -> ir.Function:
        """micro(A's panel, the image at the tile's first position, C at the tile[, batch,
        i0, j0, operands...]): a tile of `rows` (<= MR: the panel's real rows; its
        prepacked rows past m are zeros) by `width` positions of `out_rows` output rows,
        whole rows if more than one (C's columns of the tile are consecutive either way)."""
        key = (rows, width, out_rows)
        if key in self.channel_micro:
            return self.channel_micro[key]
        s, blk, window = self.shape, self.blk, self.shape.window
        assert window is not None
        name = f"{s.symbol}_channels{rows}x{width}" + (f"x{out_rows}" if out_rows > 1 else "")
        fn, b = self.function(name, [PTR, PTR, PTR, *self.epilogue_types()])
        a, image, c = fn.args[:3]
        for arg in (a, image, c):
            arg.add_attribute("noalias")
        vecs = -(-rows // blk.vw)
        count = width * out_rows
        offsets = [r * window.sh * window.wp + p * window.sw for r in range(out_rows) for p in range(width)]
        table = self.row_offsets()
        row_offsets = b.gep(table, [ir.Constant(I64, 0), ir.Constant(I64, 0)], source_etype=table.value_type)

        def body(b, k, acc):
            at = self.panel_row(b, image, k, row_offsets, False)  # the image at row k's offset
            w_k = b.gep(a, [b.mul(k, ir.Constant(I64, blk.mr))], source_etype=self.el)
            weights = [b.load(b.gep(w_k, [ir.Constant(I64, v * blk.vw)], source_etype=self.el), typ=self.vec, align=self.ebytes)
                       for v in range(vecs)]
            out = list(acc)
            for p, offset in enumerate(offsets):
                x = b.load(b.gep(at, [ir.Constant(I64, offset)], source_etype=self.el), typ=self.el, align=self.ebytes)
                x = self.splat(b, x)
                for v in range(vecs):
                    out[v * count + p] = b.call(self.fma, [weights[v], x, acc[v * count + p]])
            return out

        zero = ir.Constant(self.vec, None)
        acc = self.counted_loop(b, ir.Constant(I64, 0), ir.Constant(I64, s.k), 1, body, [zero] * (vecs * count))
        tile = self.rows_of(b, acc, rows, count)
        if s.epilogue is not None:
            tile = self.apply_epilogue(b, tile, rows, count, fn.args[3:])
        self.store_tile(b, tile, self.tile_pieces(b, c, rows, width, out_rows), rows, count)
        b.ret_void()
        self.channel_micro[key] = fn
        return fn

    def tile_pieces(self, b: ir.IRBuilder, c, rows: int, width: int, out_rows: int) -> tuple[dict, dict]:
        """Where a tile of `out_rows` output rows of `width` positions lies in C from its
        first element at `c` (c_pieces): rows n apart, or with a frame rows an image
        apart and each output row of the tile wp on, its lanes masked (known here: a
        tile is a run of one row or whole rows)."""
        frame, vw, count = self.shape.frame, self.blk.vw, width * out_rows
        if frame is None or out_rows == 1:
            return self.plain_pieces(b, c, rows, count, self.shape.c_row_stride), {}
        pieces: dict = {}
        for v in self.vectors(count):
            lanes = range(v * vw, min(count, (v + 1) * vw))
            for r in sorted({p // width for p in lanes}):
                mask = ir.Constant(self.mask_type, [v * vw + lane in lanes and (v * vw + lane) // width == r for lane in range(vw)])
                shift = r * (frame.wp - width) + v * vw  # lane l of the vector at c + shift + l
                for i in range(rows):
                    pieces.setdefault((i, v), []).append(
                        (b.gep(c, [ir.Constant(I64, i * frame.plane + shift)], source_etype=self.el), mask))
        return pieces, {}

    def rows_of(self, b: ir.IRBuilder, acc: list, rows: int, width: int) -> list:
        """The tile row-major (rows x the vectors of `width` columns, as apply_epilogue takes
        it) from its accumulators, acc[v * width + p] holding rows [v * VW, + VW) of column
        p: each VW x VW block transposed by `transpose` (LLVM had taken 0.5 s of a
        ResNet-18's compile to turn an element-by-element transpose into shuffles)."""
        vw = self.blk.vw
        zero = ir.Constant(self.vec, None)
        vectors = self.vectors(width)
        out: list = [None] * (rows * len(vectors))
        for v in range(-(-rows // vw)):
            for j, g in enumerate(vectors):
                block = [acc[v * width + p] if p < width else zero for p in range(g * vw, (g + 1) * vw)]
                for i, row in enumerate(self.transpose(b, block)):
                    if v * vw + i < rows:
                        out[(v * vw + i) * len(vectors) + j] = row
        return out

    def transpose(self, b: ir.IRBuilder, block: list) -> list:
        """The VW x VW block (a list of VW vectors) transposed: log2(VW) stages, each
        swapping the off-diagonal h x h sub-blocks of vectors h apart (h = VW / 2, ..., 1)
        with one two-input shuffle per vector."""
        n = len(block)
        block = list(block)
        h = n // 2
        while h:
            low = ir.Constant(ir.VectorType(I32, n), [j if not j & h else n + j - h for j in range(n)])
            high = ir.Constant(ir.VectorType(I32, n), [j + h if not j & h else n + j for j in range(n)])
            for i in range(n):
                if not i & h:
                    x, y = block[i], block[i + h]
                    block[i], block[i + h] = b.shuffle_vector(x, y, low), b.shuffle_vector(x, y, high)
            h //= 2
        return block


def channel_tile_rows(out_w: int) -> int:
    """Output rows per channel tile: as many whole rows as CHANNEL_TILE_COLUMNS holds (two
    of 7: a 7x7 image's tile of 7 positions had loaded its weights for 14 fmas), else one."""
    return max(1, CHANNEL_TILE_COLUMNS // out_w)


def channel_tile_widths(out_w: int) -> list[int]:
    """An output row of `out_w` positions as channel tiles of at most CHANNEL_TILE_COLUMNS,
    as even as can be (23: 12 + 11, not 14 + 9)."""
    tiles = -(-out_w // CHANNEL_TILE_COLUMNS)
    return [out_w // tiles + (t < out_w % tiles) for t in range(tiles)]
