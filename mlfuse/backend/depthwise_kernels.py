"""Depthwise conv kernels for `loop.gemm {window, window_pads}`: a depthwise conv at stride
1 or 2 over a small plane (at most MAX_PIXELS output positions), its input read as it is
(at stride 2, split into its phase planes first: split_phases).

convert-graph-to-loop{depthwise} lowers such a conv as a product batched over its
channels (`lower_depthwise_as_product`): batch c multiplies the 1 x (kh * kw) row of
channel c's taps with the patches of channel c's image, padded by zeros that are not in
memory (`window_pads`), into one output row of oh * ow positions:

    y[c, q] = sum_(i, j) w[c, i * kw + j] * x[c, q // ow + i - top, q % ow + j - left]   (0 outside x)

The generic kernel would run that as products of one row (one fma per tap and vector,
the register tile's other rows idle) over a padded copy. This kernel holds the plane in
registers instead. Its vectors run along the flat output positions q, across row ends
(a 7 x 7 plane is 3 vectors and a lane). Since x's rows are as long as the output's (a
"same" conv: takes_depthwise), tap (i, j) reads x at q + (i - top) * ow + j - left for
every lane, so each tap's inputs for a vector are one load, masked to the lanes inside
x (a constant mask per vector and tap: no copy, no pad, no read outside the image):

    for each channel c of the task:                   # a task per channel
      for each group of GROUP output vectors q0:
        acc = 0
        for each tap (i, j):                          # the window nest's order
          acc = fma(load(x_c + q0 + (i - top) * ow + j - left, inside), splat(w[c, i * kw + j]), acc)
        y[c, q0 .. q0 + VW) = epilogue(acc)           # bias, activation, residual; masked past n

Each output is one fma chain over the taps in the window nest's order from zero, as the
nest's flattened rows compute it: the same bits (tests/test_depthwise_kernels.py). The
window nest spent most of a small plane's time around its sums (MobileNetV2's 960 x 7 x 7
layers: a padded copy of each channel's plane, a store-forwarding stall on its first
read, rows of 7 stored as pieces of 4, 2 and 1); alone, one thread, 960 x 7 x 7 + bias
+ ReLU6 took 0.44x its time, blocks of expand, depthwise and project 0.92-0.97x.
"""

from __future__ import annotations

import math

import llvmlite.ir as ir
import numpy as np

from mlfuse.backend.gemm_kernels import I32, Blocking, GemmShape, _Kernels

# Output positions per image up to which a depthwise conv takes this kernel: its code
# runs the whole plane unrolled (32 x 32: 64 vectors of 16 lanes). Larger planes stay
# window nests, rows of vectors, which post-tiling fusion tiles (memory-bound there).
# One thread, 192 x 28 x 28 + bias + ReLU6 0.68x the nest's time, its inverted-residual
# block 0.87x; MobileNetV2 0.968x, MobileNetV3-small 0.944x with 1024 (0.973x, 0.950x
# with 256: 7 x 7 and 14 x 14 only); cold compile the same.
MAX_PIXELS = 1024
# Output vectors whose fma chains run side by side (each tap's fma waits on the one
# before it: 4 cycles), their accumulators beside the taps' splats in registers
GROUP = 4
# Output positions up to which a stride-2 conv splits the next channel's phases while it
# computes this one's (define). One thread, side by side, against one set: 576 x 14 x 14
# -> 7 x 7 0.82x the time, 192 x 28 x 28 -> 14 x 14 1.04x, 144 x 56 x 56 -> 28 x 28 1.2x.
PIPELINED_PIXELS = 100


def takes_depthwise(shape: GemmShape) -> bool:
    """Is `shape` a depthwise conv this kernel takes: one image per batch under a window at
    stride 1 or 2 along both axes (k = the window's taps) padded by zeros not in memory
    (`Window.pads`: what convert-graph-to-loop makes of a depthwise conv, and nothing
    else), one output row of at most MAX_PIXELS positions, the image's rows (at stride 2:
    their even columns) as long as the output's (the pads make up the window's width: a
    "same" conv) and in no border, any frame of C or of an operand around rows of the
    output's length?"""
    w = shape.window
    if not (w is not None and any(w.pads) and shape.m == 1 and shape.k == w.kh * w.kw and w.sh == w.sw in (1, 2)
            and 0 < shape.n <= MAX_PIXELS and not any(w.border) and -(-w.wp // w.sw) == w.out_w):
        return False
    framed = [o.ow for o in shape.epilogue.operands if o.ow] if shape.epilogue is not None else []
    framed += [shape.frame.ow] if shape.frame is not None else []
    return all(ow == w.out_w for ow in framed)


def depthwise_blocking(vw: int, shape: GemmShape) -> Blocking:
    return Blocking(vw=vw, mr=1, nr_vecs=1, kc=max(shape.k, 1), depthwise=True)


def depthwise_weights(a: np.ndarray, shape: GemmShape) -> np.ndarray:
    """A (batch x 1 x taps) as the kernel reads it: as it is, each channel's taps in a row."""
    return np.ascontiguousarray(a.reshape(shape.batch, shape.k))


class DepthwiseKernels(_Kernels):
    """The task function of a depthwise conv this kernel takes (takes_depthwise): task t of
    GemmShape.tasks (one per channel) computes channel t's plane."""

    def __init__(self, module: ir.Module, shape: GemmShape, blocking: Blocking):
        super().__init__(module, shape, blocking)
        assert shape.window is not None
        self.window = shape.window

    def define(self, fn: ir.Function) -> None:
        """The body of the task function `fn`: (lo, hi, taps, images, C, epilogue operands...)."""
        s, w = self.shape, self.window
        (lo, hi, a, image, c, *operands), b = self.entry(fn)

        def taps(b, t):
            return b.gep(a, [b.mul(t, self.const(s.k))], source_etype=self.el)

        def x_of(b, t):
            return b.gep(image, [b.mul(t, self.const(w.hp * w.wp))], source_etype=self.el)

        def c_of(b, t):  # C's row t (a frame's: its image, c_pieces)
            return b.gep(c, [b.mul(t, self.const(s.c_row_stride))], source_etype=self.el)

        def channel(b, t, _):
            self.plane(b, t, (taps(b, t), x_of(b, t), c_of(b, t)), operands)
            return []

        if w.sw == 1:
            self.counted_loop(b, lo, hi, 1, channel)
            b.ret_void()
            return
        # At stride 2 over a small plane, two sets of phase planes: channel t's are split
        # while channel t - 1 is computed from the other set, whose stores have retired by
        # then (a 7 x 7 plane's loads came right after the stores they read, and a load
        # that overlaps a store in flight unaligned waits for it). Larger planes, one set.
        sets = 2 if s.n <= PIPELINED_PIXELS else 1
        lag = sets - 1
        phases = b.alloca(self.el, size=self.const(sets * 4 * self.phase_size))
        phases.align = 64  # pyright: ignore[reportAttributeAccessIssue]  (llvmlite's stub lacks it)

        def set_of(b, t):
            return b.gep(phases, [b.mul(b.and_(t, self.const(lag)), self.const(4 * self.phase_size))], source_etype=self.el)

        def split_then_compute(b, t, _):
            with b.if_then(b.icmp_signed("<", t, hi)):
                self.split_phases(b, x_of(b, t), set_of(b, t))
            with b.if_then(b.icmp_signed(">=", t, b.add(lo, self.const(lag)))):
                last = b.sub(t, self.const(lag))
                self.plane(b, last, (taps(b, last), set_of(b, last), c_of(b, last)), operands)
            return []

        self.counted_loop(b, lo, b.add(hi, self.const(lag)), 1, split_then_compute)
        b.ret_void()

    def plane(self, b: ir.IRBuilder, t, pointers: tuple, operands: list) -> None:
        """Channel t's output plane: its taps at `taps`, its image at `x`, its row of C at
        `c`; the output vectors GROUP at a time (vector_groups), those of the steps inside
        the plane through a loop (interior_steps)."""
        s, vw = self.shape, self.blk.vw
        taps, x, c = pointers
        weights = [self.splat(b, b.load(b.gep(taps, [self.const(k)], source_etype=self.el), typ=self.el))
                   for k in range(s.k)]
        starts = list(range(0, s.n, vw))
        per, first, last = self.interior_steps()
        if last - first < 2:  # no rows to loop over
            self.vector_groups(b, t, (weights, x, c), starts, operands)
            return
        self.vector_groups(b, t, (weights, x, c), starts[: first * per], operands)

        def step(b, u, _):  # the vectors of step u, at the masks and offsets of step `first` and u - first steps on
            shift = b.mul(b.sub(u, self.const(first)), self.const(per * vw))
            self.vector_groups(b, t, (weights, x, c), starts[first * per : (first + 1) * per], operands, shift)
            return []

        self.counted_loop(b, self.const(first), self.const(last), 1, step)
        self.vector_groups(b, t, (weights, x, c), starts[last * per :], operands)

    def interior_steps(self) -> tuple[int, int, int]:
        """(vectors per step, first, last): the flat vectors go in steps of whole periods
        of their lanes' columns (lcm(VW, out_w) positions: every step's vectors meet
        row ends at the same lanes) and at least GROUP vectors; steps [first, last) lie
        where every tap reads rows inside its plane and every lane is an output, so
        their masks are step first's: those steps run as a loop (a 28 x 28 plane's 49
        vectors x 9 taps unrolled were 200 ms of LLVM work), the others unrolled."""
        w, vw, n = self.window, self.blk.vw, self.shape.n
        period = math.lcm(vw, w.out_w) // vw
        per = period * -(-GROUP // period)
        rows = per * vw // w.out_w  # output rows per step
        taps = [self.tap_geometry(k)[1:3] for k in range(self.shape.k)]  # (di, the plane's rows)

        def inside(u: int) -> bool:
            return (u + 1) * per * vw <= n and all(u * rows + di >= 0 and (u + 1) * rows + di <= plane_rows
                                                   for di, plane_rows in taps)

        steps = [u for u in range(n // (per * vw)) if inside(u)]
        return (per, steps[0], steps[-1] + 1) if steps else (per, 0, 0)

    def tap_geometry(self, k: int) -> tuple[int, int, int, int, int]:
        """Tap k = (i, j) at stride 1 or 2: (plane, di, rows, dj, cols): it reads the
        plane that starts `plane` elements into x (at stride 2 the phase plane of its
        parities, split_phases), rows x cols, at row r + di and column c + dj for output
        (r, c): di = (i - top) // stride, dj = (j - left) // stride."""
        w = self.window
        top, left = w.pads[:2]
        i, j = divmod(k, w.kw)
        (pi, di), (pj, dj) = ((i - top) % w.sh, (i - top) // w.sh), ((j - left) % w.sw, (j - left) // w.sw)
        plane = (2 * pi + pj) * self.phase_size if w.sw == 2 else 0
        return plane, di, -(-(w.hp - pi) // w.sh), dj, -(-(w.wp - pj) // w.sw)

    def vector_groups(self, b: ir.IRBuilder, t, pointers: tuple, starts: list[int], operands: list, shift=None) -> None:
        """The output vectors at `starts` (plus `shift` positions, a value, where given:
        the masks are those of `starts`), GROUP at a time, each tap's inputs for a group
        in turn; each vector's epilogue and store."""
        s, vw = self.shape, self.blk.vw
        weights, x, c = pointers
        for g in range(0, len(starts), GROUP):
            group = starts[g : g + GROUP]
            acc: list[ir.Value] = [ir.Constant(self.vec, None)] * len(group)
            for k in range(s.k):
                for n, q0 in enumerate(group):
                    acc[n] = b.call(self.fma, [self.inputs(b, x, q0, k, shift), weights[k], acc[n]])
            for n, q0 in enumerate(group):
                lanes = min(vw, s.n - q0)
                at = self.const(q0) if shift is None else b.add(shift, self.const(q0))
                value = acc[n]
                if s.epilogue is not None:
                    args = self.epilogue_args(t, self.const(0), at, operands)
                    value = self.apply_epilogue(b, [acc[n]], 1, lanes, args)(0)
                tile = self.c_pieces(b, c if s.frame is not None else b.gep(c, [at], source_etype=self.el), 1, lanes, at)
                self.store_tile(b, [value], tile, 1, lanes)

    @property
    def phase_size(self) -> int:
        """The elements of each phase plane of a stride-2 conv's image (split_phases): rows
        of the output's length, as many as the even rows of the image."""
        return -(-self.window.hp // 2) * self.window.out_w

    def split_phases(self, b: ir.IRBuilder, x, phases) -> None:
        """A stride-2 conv's image x as its four phase planes at `phases`: plane (pi, pj) =
        x[pi::2, pj::2], each row out_w elements long (the output's), plane 2 * pi + pj
        phase_size elements on. Under the window at stride 2, tap (i, j) reads plane
        ((i - top) % 2, (j - left) % 2) at stride 1 (inputs), so the output's flat vectors
        read each tap as one masked load again. Each row of x: loads of two vectors, their
        even and their odd lanes (one shuffle each), two stores; what the planes hold past
        each row's real lanes is never read. The rows go in pairs through a loop (row a
        of every plane): unrolled, 56 rows were most of a 0.37 s unit's code."""
        w = self.window

        def row_pair(b, a, _):
            for pi in (0, 1):
                self.split_row(b, b.gep(x, [b.mul(b.add(b.add(a, a), self.const(pi)), self.const(w.wp))], source_etype=self.el),
                               b.gep(phases, [b.add(b.mul(a, self.const(w.out_w)), self.const(2 * pi * self.phase_size))],
                                     source_etype=self.el))
            return []

        self.counted_loop(b, self.const(0), self.const(w.hp // 2), 1, row_pair)
        if w.hp % 2:  # the last row, even: row hp // 2 of the even planes
            self.split_row(b, b.gep(x, [self.const((w.hp - 1) * w.wp)], source_etype=self.el),
                           b.gep(phases, [self.const(w.hp // 2 * w.out_w)], source_etype=self.el))

    def split_row(self, b: ir.IRBuilder, row, into) -> None:
        """A row of the image at `row` as its even columns at `into` and its odd ones
        phase_size elements on, VW of each from each piece of 2 VW columns."""
        w, vw = self.window, self.blk.vw
        lanes_of = [ir.Constant(ir.VectorType(I32, vw), [2 * n + pj for n in range(vw)]) for pj in (0, 1)]
        for x0 in range(0, w.wp, 2 * vw):
            width = min(2 * vw, w.wp - x0)
            at = b.gep(row, [self.const(x0)], source_etype=self.el)
            low = self.load_row_vec(b, at, min(vw, width))
            high = (self.load_row_vec(b, b.gep(at, [self.const(vw)], source_etype=self.el), width - vw)
                    if width > vw else ir.Constant(self.vec, None))
            for pj in (0, 1):  # the even columns, then the odd ones
                at = b.gep(into, [self.const(pj * self.phase_size + x0 // 2)], source_etype=self.el)
                mask = ir.Constant(self.mask_type, [n < (width - pj + 1) // 2 for n in range(vw)])
                self.store_pieces(b, b.shuffle_vector(low, high, lanes_of[pj]), [(at, mask)])  # all lanes: a store

    def inputs(self, b: ir.IRBuilder, x, q0: int, k: int, shift=None):
        """What tap k = (i, j) reads for the output positions q0 .. q0 + VW (plus `shift`,
        a value, where given: its lanes are inside as q0's are): the image's elements
        from q0 + (i - top) * w + j - left on (the image's rows are the output's length),
        each lane that falls in the padding (or past the plane) zero: a masked load, or a
        plain one where every lane is inside the image. At stride 2, x holds the image's
        phase planes (split_phases) and the tap reads the plane of its parities at stride
        1, shifted by (i - top) // 2 rows and (j - left) // 2 columns (tap_geometry)."""
        w, vw = self.window, self.blk.vw
        plane, di, rows, dj, cols = self.tap_geometry(k)
        inside = []
        for q in range(q0, q0 + vw):
            row, col = q // w.out_w + di, q % w.out_w + dj
            inside.append(q < self.shape.n and 0 <= row < rows and 0 <= col < cols)
        if not any(inside):
            return ir.Constant(self.vec, None)
        at = b.gep(x, [self.const(plane + q0 + di * w.out_w + dj)], source_etype=self.el)
        at = at if shift is None else b.gep(at, [shift], source_etype=self.el)
        if all(inside):
            return b.load(at, typ=self.vec, align=self.ebytes)
        mask = ir.Constant(self.mask_type, inside)
        return b.call(self.masked_load, [at, ir.Constant(I32, self.ebytes), mask, ir.Constant(self.vec, None)])
