"""Winograd F(2x2, 3x3) kernels for `loop.gemm {window}`: 3x3 convs at stride 1 with
constant weights, 2.25x fewer multiplies than the direct product.

Lavin & Gray (2016): an output tile Y of 2 x 2 positions of one channel is

    Y = A^T [ sum_c (G g[k, c] G^T) . (B^T d[c] B) ] A

with d[c] the 4 x 4 patch of input channel c under the tile, g[k, c] the 3 x 3 filter and
. the elementwise product: 16 multiplies per tile, output and input channel instead of
the direct conv's 36 (4 positions x 9 taps). With U[xi, nu] = G g G^T
(4 x 4 per (k, c), computed once, at translation: `winograd_weights`) and
V[xi, nu] = B^T d B, the products are 16 GEMMs, one per (xi, nu):
M[xi, nu] (K x tiles) = U[xi, nu] (K x C) @ V[xi, nu] (C x tiles).

The task function computes a tile row of the output (2 output rows) per work unit, or
2-3 of them over rows of at most 16 tiles, cut into segments of at most TILES tiles
(`segments`), each kept in L1/L2:

    for each segment of tiles x0 .. x0 + w of tile row ty:
      V[xi, nu][c][t] = B^T d B                     # input_fn: from the padded image, in place
      for each panel of MR = 8 output channels i0:
        for xi, nu: M[xi, nu][8][t] = U[xi, nu][i0 : i0 + 8] @ V[xi, nu]   # micro_fn: 8 x 48 in registers
        C[i0 : i0 + 8, rows 2ty, 2ty + 1, columns 2x0 ..] = epilogue(A^T M A)   # output_fn

Lanes run along the tiles (16 per vector): a tile's columns 2t .. 2t + 3 are the even
and odd elements of two loads each (shuffles). The output transform's two columns of
each tile row interleave back into 32 consecutive positions, which the GEMM kernels'
epilogue (bias, BN, activation, residual) and frame stores take as a tile of 8 rows x
32 columns (`_Kernels.apply_epilogue`, `store_tile`).

A segment whose V holds a value that is not finite runs as the direct conv instead
(`direct_fn`): a transform would spread a NaN or an infinity over its whole tile.

Accuracy: the transforms' entries are 0, +-1 and +-1/2; against float64 the errors
measured 0.2-0.5x the direct kernel's own (tests/test_winograd_kernels.py bounds them).
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np

from mlfuse.backend.gemm_kernels import I32, PTR, Blocking, GemmShape, _Kernels, channel_tiles_fit

WINOGRAD = True
TILES = 48  # tiles per segment: the micro-kernel's 3 vectors of 16
# Input channels a Winograd kernel takes: V of a segment is 16 x C x 48 floats (384 KB
# at 128, beside the L2's 2 MB). Under MIN_CHANNELS the transforms are most of the work:
# U-Net's 3-channel stem took the same time either way (the model 1.003x / 0.994x the
# time at 2 / 1 threads with it on Winograd, side by side).
MIN_CHANNELS = 8
MAX_CHANNELS = 128
# F(2x2, 3x3): V = B^T d B, U = G g G^T, Y = A^T M A
G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
XI_NU = 16


def takes_winograd(shape: GemmShape) -> bool:
    """Is `shape` a conv its Winograd kernel takes on hosts that have one (has_winograd)?
    A 3x3 window at stride 1 with constant weights (packed_a) in f32 onto an even number of
    output rows and columns (whole 2 x 2 tiles) that are not short rows (channel tiles
    take those), output channels a multiple of 8 (whole micro-kernel panels) and
    MIN_CHANNELS to MAX_CHANNELS input channels."""
    w = shape.window
    if not WINOGRAD or w is None or not shape.packed_a or shape.dtype != "f32":
        return False
    channels, taps = divmod(shape.k, 9)
    return ((w.kh, w.kw, w.sh, w.sw) == (3, 3, 1, 1) and taps == 0 and MIN_CHANNELS <= channels <= MAX_CHANNELS
            and w.out_h % 2 == 0 and w.out_w % 2 == 0 and shape.m % 8 == 0
            and not channel_tiles_fit(w.out_w, (1, 1)))


def has_winograd(features: str) -> bool:
    """Do the GEMM kernels for an LLVM feature string take Winograd convs (AVX-512: the
    16-lane vectors and 32 registers its 8 x 48 micro-kernel holds)?"""
    return WINOGRAD and "+avx512f" in features.split(",")


def winograd_blocking(shape: GemmShape) -> Blocking:
    return Blocking(vw=16, mr=8, nr_vecs=3, kc=shape.k // 9, winograd=True)


def winograd_weights(a: np.ndarray, shape: GemmShape) -> np.ndarray:
    """A (batch x K x 9C, a conv's weights) as its kernel reads them: per batch, for each
    (xi, nu), panels of 8 output channels, each C x 8 (the 8 values of one input channel
    contiguous), of U = G g G^T (computed in float64, rounded once); then A itself, for
    the direct fallback of segments with non-finite values (`direct_fn`)."""
    channels = shape.k // 9
    g = a.astype(np.float64).reshape(shape.batch, shape.m, channels, 3, 3)
    u = np.einsum("xi,bkcij,yj->bxykc", G, g, G).reshape(shape.batch, XI_NU, shape.m // 8, 8, channels)
    u = u.transpose(0, 1, 2, 4, 3).astype(np.float32).reshape(shape.batch, -1)
    return np.ascontiguousarray(np.concatenate([u, a.reshape(shape.batch, -1).astype(np.float32)], axis=1))


def winograd_bytes(shape: GemmShape) -> int:
    return shape.batch * (XI_NU + 9) * shape.m * (shape.k // 9) * 4


def unit_rows(tiles: int, rows: int) -> int:
    """Tile rows per work unit: one, or over rows of at most 16 tiles (a vector each) as
    many as divide the `rows` up to the micro-kernel's 3 vectors (28 x 28 outputs: 2)."""
    if tiles > 16:
        return 1
    return next(r for r in (3, 2, 1) if rows % r == 0)


def segments(tiles: int, rows: int = 1) -> list[tuple[int, tuple]]:
    """The segments of a work unit over rows of `tiles` 2 x 2 tiles (`rows` tile rows in
    all): (first tile, groups), each group a vector's tiles (tile row within the unit,
    first tile from the segment's, tiles). A row of more than 16 tiles is cut into
    segments of at most TILES, as even as can be in whole vectors (112: 48 + 32 + 32),
    each group 16 tiles of it; shorter rows are one segment of unit_rows rows, a group
    each."""
    if tiles <= 16:
        return [(0, tuple((r, 0, tiles) for r in range(unit_rows(tiles, rows))))]
    count = -(-tiles // TILES)
    vectors = -(-tiles // 16)
    out, x0 = [], 0
    for s in range(count):
        width = min(tiles - x0, 16 * (vectors // count + (s < vectors % count)))
        out.append((x0, tuple((0, dx, min(16, width - dx)) for dx in range(0, width, 16))))
        x0 += width
    return out


def groups_token(groups: tuple) -> str:
    """A segment's groups in a helper's name: its tiles along one row (48), or rows x tiles (2r14)."""
    if all(row == 0 for row, _, _ in groups):
        return str(sum(tiles for _, _, tiles in groups))
    return f"{len(groups)}r{groups[0][2]}"


class WinogradKernels(_Kernels):
    """The task function of a conv its Winograd kernel takes (takes_winograd). The work
    units are (batch, unit_rows tile rows), and task t of the team's GemmShape.tasks runs
    units [t * U // T, (t + 1) * U // T)."""

    def __init__(self, module: ir.Module, shape: GemmShape, blocking: Blocking):
        super().__init__(module, shape, blocking)
        assert shape.window is not None
        self.window = shape.window
        self.channels = shape.k // 9
        self.helpers: dict[tuple[str, tuple], ir.Function] = {}

    def define(self, fn: ir.Function) -> None:
        s, w = self.shape, self.window
        (lo, hi, a, image, c, *operands), b = self.entry(fn)
        v_scratch = b.alloca(ir.ArrayType(self.el, XI_NU * self.channels * TILES))
        m_scratch = b.alloca(ir.ArrayType(self.el, XI_NU * 8 * TILES))
        for scratch in (v_scratch, m_scratch):  # whole vectors at multiples of 64 bytes
            scratch.align = 64  # pyright: ignore[reportAttributeAccessIssue]  (llvmlite's stub types it None)
        finite = b.alloca(I32)
        rows = unit_rows(w.out_w // 2, w.out_h // 2)
        per_batch = w.out_h // 2 // rows
        units, tasks = s.batch * per_batch, max(s.tasks, 1)

        def unit(b, u, _):
            batch, ty = b.sdiv(u, self.const(per_batch)), b.mul(b.srem(u, self.const(per_batch)), self.const(rows))
            for x0, groups in segments(w.out_w // 2, w.out_h // 2):
                self.segment(b, (batch, ty, x0, groups), (v_scratch, m_scratch, finite), (a, image, c, *operands))
            return []

        def task(b, t, _):
            u0 = b.sdiv(b.mul(t, self.const(units)), self.const(tasks))
            u1 = b.sdiv(b.mul(b.add(t, self.const(1)), self.const(units)), self.const(tasks))
            self.counted_loop(b, u0, u1, 1, unit)
            return []

        self.counted_loop(b, lo, hi, 1, task)
        b.ret_void()

    def segment(self, b: ir.IRBuilder, where: tuple, scratch: tuple, operands: tuple) -> None:
        """The segment at tile x0 of tile row ty of `batch` (its `groups`: segments): transform
        their input into V, then for each panel of 8 output channels the 16 products and
        the output transform. Where V holds a value that is not finite (an infinity or NaN
        in the input, or a transform's overflow), the segment is a direct conv instead
        (`direct_fn`): a transform spreads a NaN or infinity to the whole 2 x 2 tile (and
        an infinity times U's zeros to NaN), where each output of the conv reads only
        its 3 x 3 window."""
        s, w, channels = self.shape, self.window, self.channels
        batch, ty, x0, groups = where
        v_scratch, m_scratch, finite = scratch
        a, image, c, *epilogue_operands = operands
        image_at = b.add(b.mul(batch, self.const(channels * w.hp * w.wp)), self.const(w.origin + 2 * x0))
        image_at = b.gep(image, [b.add(image_at, b.mul(ty, self.const(2 * w.wp)))], source_etype=self.el)
        v_base = b.gep(v_scratch, [self.const(0), self.const(0)], source_etype=v_scratch.allocated_type)
        m_base = b.gep(m_scratch, [self.const(0), self.const(0)], source_etype=m_scratch.allocated_type)
        b.call(self.input_fn(groups), [image_at, v_base, finite])
        per_batch = (XI_NU + 9) * s.m * channels
        weights = b.gep(a, [b.mul(batch, self.const(per_batch))], source_etype=self.el)
        y0 = b.mul(ty, self.const(2))
        j0 = b.add(b.mul(y0, self.const(w.out_w)), self.const(2 * x0))
        c_at = b.mul(batch, self.const(s.m * s.c_row_stride))
        if s.frame is None:
            c_at = b.add(c_at, j0)
        else:
            c_at = b.add(c_at, b.add(b.mul(y0, self.const(s.frame.wp)), self.const(s.frame.start + 2 * x0)))
        c_at = b.gep(c, [c_at], source_etype=self.el)
        with b.if_else(b.icmp_signed("!=", b.load(finite, typ=I32), ir.Constant(I32, 0))) as (winograd, direct):
            with winograd:
                self.products(b, groups, (weights, v_base, m_base), (c_at, batch, j0, epilogue_operands))
            with direct:
                plain = b.gep(weights, [self.const(XI_NU * s.m * channels)], source_etype=self.el)

                def channel(b, k, _):
                    row = b.gep(c_at, [b.mul(k, self.const(s.c_row_stride))], source_etype=self.el)
                    epilogue = self.epilogue_args(batch, k, j0, epilogue_operands)
                    b.call(self.direct_fn(groups), [b.gep(plain, [b.mul(k, self.const(s.k))], source_etype=self.el),
                                                    image_at, row, *epilogue])
                    return []

                self.counted_loop(b, self.const(0), self.const(s.m), 1, channel)

    def products(self, b: ir.IRBuilder, groups: tuple, scratch: tuple, out: tuple) -> None:
        """For each panel of 8 output channels: the 16 products M = U V and the output
        transform into C (at the segment's first position of the panel's first channel
        at c_at)."""
        s, channels = self.shape, self.channels
        weights, v_base, m_base = scratch
        c_at, batch, j0, epilogue_operands = out

        def panel(b, p, _):
            i0 = b.mul(p, self.const(8))
            u_panel = b.gep(weights, [b.mul(i0, self.const(channels))], source_etype=self.el)

            def product(b, xn, _):
                u_at = b.gep(u_panel, [b.mul(xn, self.const(s.m * channels))], source_etype=self.el)
                v_at = b.gep(v_base, [b.mul(xn, self.const(channels * TILES))], source_etype=self.el)
                m_at = b.gep(m_base, [b.mul(xn, self.const(8 * TILES))], source_etype=self.el)
                b.call(self.micro_fn_w(len(groups)), [u_at, v_at, m_at])
                return []

            self.counted_loop(b, self.const(0), self.const(XI_NU), 1, product)
            epilogue = self.epilogue_args(batch, i0, j0, epilogue_operands)
            panel_c = b.gep(c_at, [b.mul(i0, self.const(s.c_row_stride))], source_etype=self.el)
            b.call(self.output_fn(groups), [m_base, panel_c, *epilogue])
            return []

        self.counted_loop(b, self.const(0), self.const(s.m // 8), 1, panel)

    # --- the helpers (out of line, one per segment's groups) ------------------------------

    def helper(self, kind: str, groups: tuple, args: list[ir.Type]) -> tuple[ir.Function, ir.IRBuilder | None]:
        key = (kind, groups)
        if key in self.helpers:
            return self.helpers[key], None
        fn, b = self.function(f"{self.shape.symbol}_winograd_{kind}{groups_token(groups)}", args)
        self.helpers[key] = fn
        return fn, b

    def columns(self, b: ir.IRBuilder, row, tiles: int) -> list:
        """Columns 2t, 2t + 1, 2t + 2, 2t + 3 of a group's `tiles` tiles t of an image row
        at `row` (the group's first tile's first column): even and odd lanes of two loads
        from 0 and from 2, each only as far as the group's last tile reads (the rest zero)."""
        vw = self.blk.vw
        even = ir.Constant(ir.VectorType(I32, vw), [2 * t for t in range(vw)])
        odd = ir.Constant(ir.VectorType(I32, vw), [2 * t + 1 for t in range(vw)])
        out = []
        for shift in (0, 2):
            halves = []
            for h in range(2):
                lanes = max(0, min(vw, 2 * tiles - h * vw))
                at = b.gep(row, [self.const(shift + h * vw)], source_etype=self.el)
                halves.append(self.load_row_vec(b, at, lanes) if lanes else ir.Constant(self.vec, None))
            out += [b.shuffle_vector(halves[0], halves[1], even), b.shuffle_vector(halves[0], halves[1], odd)]
        return out

    def input_fn(self, groups: tuple) -> ir.Function:
        """input(image at the segment's first patch, V, finite): V[xi, nu][c][16g + t] =
        (B^T d B)[xi, nu] for every input channel c and tile t of group g (lanes past its
        tiles zero); finite = whether every value of V is (their sum, in 4 chains, is)."""
        fn, b = self.helper("input", groups, [PTR, PTR, PTR])
        if b is None:
            return fn
        w, channels, vw = self.window, self.channels, self.blk.vw
        image, v, finite = fn.args
        for arg in fn.args:
            arg.add_attribute("noalias")

        def channel(b, ch, sums):
            sums = list(sums)
            at = b.gep(image, [b.mul(ch, self.const(w.hp * w.wp))], source_etype=self.el)
            for g, (row, dx, tiles) in enumerate(groups):
                rows = []
                for r in range(4):
                    start = self.const((2 * row + r) * w.wp + 2 * dx)
                    d0, d1, d2, d3 = self.columns(b, b.gep(at, [start], source_etype=self.el), tiles)
                    rows.append((b.fsub(d0, d2), b.fadd(d1, d2), b.fsub(d2, d1), b.fsub(d1, d3)))
                for nu in range(4):
                    t0, t1, t2, t3 = (rows[r][nu] for r in range(4))
                    for xi, value in enumerate((b.fsub(t0, t2), b.fadd(t1, t2), b.fsub(t2, t1), b.fsub(t1, t3))):
                        offset = b.add(b.mul(self.const(xi * 4 + nu), self.const(channels * TILES)),
                                       b.add(b.mul(ch, self.const(TILES)), self.const(vw * g)))
                        b.store(value, b.gep(v, [offset], source_etype=self.el), align=64)
                        sums[nu] = b.fadd(sums[nu], value)
            return sums

        zero = ir.Constant(self.vec, None)
        sums = self.counted_loop(b, self.const(0), self.const(channels), 1, channel, [zero] * 4)
        total = b.fadd(b.fadd(sums[0], sums[1]), b.fadd(sums[2], sums[3]))
        lanes = b.fcmp_ordered("ord", b.fsub(total, total), b.fsub(total, total))  # x - x is NaN unless x is finite
        every = b.icmp_unsigned("==", b.bitcast(lanes, ir.IntType(vw)), ir.Constant(ir.IntType(vw), (1 << vw) - 1))
        b.store(b.zext(every, I32), finite)
        b.ret_void()
        return fn

    def direct_fn(self, groups: tuple) -> ir.Function:
        """direct(A's row k (9C weights), the image at the segment's first patch, C at
        channel k's first position of the segment[, batch, k, j0, operands...]): channel k
        of the segment as the direct conv, one fma chain in (c, i, j) order per output (the
        direct kernel's bits), through the epilogue."""
        s, w, vw = self.shape, self.window, self.blk.vw
        fn, b = self.helper("direct", groups, [PTR, PTR, PTR, *self.epilogue_types()])
        if b is None:
            return fn
        weights, image = fn.args[:2]
        table = self.row_offsets()  # where each (c, i, j) of the depth starts in the image
        offsets = b.gep(table, [self.const(0), self.const(0)], source_etype=table.value_type)
        for row, dx, tiles in groups:
            for y in (2 * row, 2 * row + 1):
                positions = 2 * tiles
                vectors = -(-positions // vw)

                def tap(b, k, acc, y=y, dx=dx, positions=positions, vectors=vectors):
                    at = self.panel_row(b, image, k, offsets, False)
                    weight = self.splat(b, b.load(b.gep(weights, [k], source_etype=self.el), typ=self.el, align=4))
                    return [b.call(self.fma, [weight, self.load_row_vec(b, b.gep(at, [self.const(y * w.wp + 2 * dx + v * vw)],
                                                                                 source_etype=self.el), self.lanes(positions, v)), acc[v]])
                            for v in range(vectors)]

                zero = ir.Constant(self.vec, None)
                acc = self.counted_loop(b, self.const(0), self.const(s.k), 1, tap, [zero] * vectors)
                self.store_positions(b, (fn.args[2], fn.args[3:]), list(acc), (y, 2 * dx, positions))
        b.ret_void()
        return fn

    def micro_fn_w(self, vectors: int) -> ir.Function:
        """micro(U's panel (C x 8), V's (C x 48), M's (8 x 48)): M = U^T V for 8 output
        channels by `vectors` vectors of tiles, in registers over the whole depth."""
        fn, b = self.helper("micro", tuple((0, 16 * j, 16) for j in range(vectors)), [PTR, PTR, PTR])  # named by its columns
        if b is None:
            return fn
        vw, channels = self.blk.vw, self.channels
        u, v, m = fn.args
        for arg in fn.args:
            arg.add_attribute("noalias")

        def body(b, ch, acc):
            row = b.gep(v, [b.mul(ch, self.const(TILES))], source_etype=self.el)
            bv = [b.load(b.gep(row, [self.const(j * vw)], source_etype=self.el), typ=self.vec, align=64) for j in range(vectors)]
            weights = b.gep(u, [b.mul(ch, self.const(8))], source_etype=self.el)
            out = []
            for i in range(8):
                splat = self.splat(b, b.load(b.gep(weights, [self.const(i)], source_etype=self.el), typ=self.el, align=4))
                out += [b.call(self.fma, [splat, bv[j], acc[i * vectors + j]]) for j in range(vectors)]
            return out

        zero = ir.Constant(self.vec, None)
        acc = self.counted_loop(b, self.const(0), self.const(channels), 1, body, [zero] * (8 * vectors))
        for i in range(8):
            for j in range(vectors):
                b.store(acc[i * vectors + j], b.gep(m, [self.const(i * TILES + j * vw)], source_etype=self.el), align=64)
        b.ret_void()
        return fn

    def output_fn(self, groups: tuple) -> ir.Function:
        """output(M, C at the panel's first row, output row 2ty, column 2x0[, batch, i0, j0,
        operands...]): Y = A^T M A for the panel's 8 channels and the segment's tiles, each
        output row's positions interleaved from the tiles' two columns, through the
        epilogue into C, one channel's 32 positions of a vector group at a time (a loop over
        the channels: unrolled, a 224-wide conv's kernel was 1 MB of IR and 0.26 s of LLVM)."""
        s, vw = self.shape, self.blk.vw
        fn, b = self.helper("output", groups, [PTR, PTR, *self.epilogue_types()])
        if b is None:
            return fn
        m, c = fn.args[:2]
        for arg in (m, c):
            arg.add_attribute("noalias")
        low = ir.Constant(ir.VectorType(I32, vw), [t // 2 + (vw if t % 2 else 0) for t in range(vw)])
        high = ir.Constant(ir.VectorType(I32, vw), [vw // 2 + t // 2 + (vw if t % 2 else 0) for t in range(vw)])

        def channel(b, i, _):
            m_row = b.gep(m, [b.mul(i, self.const(TILES))], source_etype=self.el)
            c_row = b.gep(c, [b.mul(i, self.const(s.c_row_stride))], source_etype=self.el)
            epilogue = list(fn.args[2:])
            if epilogue:
                epilogue[1] = b.add(epilogue[1], i)  # the channel: i0 + i
            for g, (row, dx, tiles) in enumerate(groups):
                positions = 2 * tiles
                mm = [[b.load(b.gep(m_row, [self.const((xi * 4 + nu) * 8 * TILES + g * vw)], source_etype=self.el),
                              typ=self.vec, align=64) for nu in range(4)] for xi in range(4)]
                p = [[b.fadd(b.fadd(mm[0][nu], mm[1][nu]), mm[2][nu]) for nu in range(4)],
                     [b.fsub(b.fsub(mm[1][nu], mm[2][nu]), mm[3][nu]) for nu in range(4)]]
                for a_row in range(2):
                    y0 = b.fadd(b.fadd(p[a_row][0], p[a_row][1]), p[a_row][2])
                    y1 = b.fsub(b.fsub(p[a_row][1], p[a_row][2]), p[a_row][3])
                    values = [b.shuffle_vector(y0, y1, low), b.shuffle_vector(y0, y1, high)][: -(-positions // vw)]
                    self.store_positions(b, (c_row, epilogue), values, (2 * row + a_row, 2 * dx, positions))
            return []

        self.counted_loop(b, self.const(0), self.const(8), 1, channel)
        b.ret_void()
        return fn

    def store_positions(self, b: ir.IRBuilder, out: tuple, values: list, where: tuple) -> None:
        """Store a channel's `positions` values of output row 2ty + y from the segment's
        position x on, through the epilogue; out = (C at the channel's first position of the
        segment, the epilogue's arguments (batch, the channel, j0, operands...))."""
        s, w = self.shape, self.window
        y, x, positions = where
        c, epilogue_args = out
        row_stride = w.out_w if s.frame is None else s.frame.wp
        c_at = b.gep(c, [self.const(y * row_stride + x)], source_etype=self.el)
        tile = (self.plain_pieces(b, c_at, 1, positions, s.c_row_stride), {})
        if s.epilogue is None:
            self.store_tile(b, values, tile, 1, positions)
            return
        batch, channel, j0, *pointers = epilogue_args
        at = [batch, channel, b.add(j0, self.const(y * w.out_w + x)), *pointers]
        self.store_tile(b, self.apply_epilogue(b, values, 1, positions, at), tile, 1, positions)
