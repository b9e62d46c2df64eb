"""Named pipelines, readable top to bottom: what `mlfuse.compile` runs.

Each entry is a pass spec as `mlfuse-opt -p` takes it, so any pipeline can be
replayed (and bisected) on the command line.
"""

from __future__ import annotations

GRAPH_CLEANUP = ["inline", "graph-widen-accumulators", "canonicalize", "cse"]


def default_pipeline(target: str) -> list[str]:
    """The pass list `mlfuse.compile` runs for `target` (a name in
    mlfuse.universe.MLFUSE_COMPILE_TARGETS; "gpu-sim" runs the "gpu" one): replay it with
    `mlfuse-opt -p "$(python -c 'import mlfuse.pipelines as p; print(",".join(p.default_pipeline("cpu")))')"`."""
    from mlfuse.target import get_target

    return get_target(target).default_pipeline()


def planning(planner: str, target: str) -> list[str]:
    """The fusion plan for `target`, after each fusible reader of a shared broadcast has
    been given a copy of its own (graph-duplicate-broadcasts; without a planner that fuses,
    the copies would only be more kernels)."""
    plan = f"fusion-plan{{planner={planner} target={target} summary=false}}"
    return [plan] if planner == "none" else ["graph-duplicate-broadcasts", plan]


def gpu_graph_pipeline(planner: str = "ilp", fuse: bool = True) -> list[str]:
    """The graph part of gpu_pipeline: cleanup and fusion groups planned for the GPU
    (without `fuse`, every op becomes its own kernel when the groups are mapped)."""
    passes = list(GRAPH_CLEANUP)
    if fuse:
        passes += planning(planner, "gpu")
    return passes


def gpu_pipeline(planner: str = "ilp", fuse: bool = True) -> list[str]:
    """graph -> fused groups planned for the GPU -> kernel dialect (one kernel per group);
    `-t ptx` or the GPU runtime take it from there."""
    return [*gpu_graph_pipeline(planner, fuse), "gpu-map-kernels"]


def cpu_pipeline(
    fuse: bool = True,
    parallel: bool = True,
    planner: str = "ilp",
    post_tile: bool = False,
    fast_math: bool = False,
    outline_serial: bool = True,
    channel_tiles: bool | None = None,
    depthwise: bool = True,
) -> list[str]:
    """graph -> fused groups -> loop nests -> scf -> llvm, for the host CPU: one pipeline
    for both of mlfuse's techniques.

    The ILP planner (fusion-plan) groups every op, after graph-duplicate-broadcasts has
    given each fusible reader of a shared broadcast a copy of its own. convert-graph-to-loop stitches the
    elementwise, reduction and small-GEMM groups (registers, row scratch) and lowers the
    window groups (conv, pooling, stencils with their epilogues) one nest per op, tagged
    with the group; WINDOW_GROUPS then runs post-tiling fusion inside each window group:
    tile its live-outs, fuse its producers into the tiles, shrink its intermediates.
    loop-forward-copies makes the nests that write a copy's source (its only reader)
    write the copy's destination (a concat written into the next conv's padded input),
    loop-delinearize splits a dimension that accesses read through floordiv and mod (a
    reshape lowered with a transpose) in two, and loop-coalesce merges the dimensions
    every access walks as one run (an epilogue's 28 x 28 pixels: one loop of 784 for
    LLVM to vectorize),
    loop-gemm-epilogue-fuse folds the elementwise nest after a conv's or a linear
    layer's product into the GEMM kernel's register tile (loop-forward-copies again then
    makes a product write its pad copy's images: the next conv's padded input), loop-fold-init folds a
    depthwise conv's zeroing nest into the conv (its first tap reads the zero), and
    loop-flatten-windows runs a window nest over output rows of at most 16 over the
    rows' flat positions in its input's pitch, taps inside (a 7-wide row vectorized),
    loop-deinterleave-windows stores the tile a stride-2 window reads as rows of its
    even, then its odd columns (unit-stride taps, no scalar tail on each row), and
    loop-split-wrapped splits a nest whose innermost reads wrap around (a pad's
    `(d - 1) mod n`) into the pieces where they do and do not, the inside vectorized,
    and loop-trim-fills makes a pad's fill inside a tile write only the border that its
    copy leaves.

    post_tile: also run post-tiling fusion across the whole function afterwards
    (POST_TILE, an experiment: it may join nests of different groups).

    outline_serial: every kernel becomes a function, those too small for threads too, so
    that LLVM's work is bounded per kernel and the backend compiles and caches each on its
    own, repeated kernels once (mlfuse/backend/kernels.py); merge-kernels then lowers each
    repeated kernel once as well.

    channel_tiles: whether the GEMM kernels take channel tiles, so that convs over few
    pixels read their patches in place (convert-graph-to-loop{channel-tiles}); None: as
    the host's do (AVX-512).

    depthwise: whether depthwise convs over small planes lower as products that the
    depthwise kernels run (convert-graph-to-loop{depthwise}, depthwise_kernels.py)."""
    passes = list(GRAPH_CLEANUP)
    if fuse and _has_pass("fusion-plan"):
        passes += planning(planner, "cpu")
    if channel_tiles is None:
        channel_tiles = host_has_channel_tiles()
    options = " ".join(o for o, on in (("channel-tiles=true", channel_tiles), ("depthwise=true", depthwise)) if on)
    passes.append(f"convert-graph-to-loop{{{options}}}" if options else "convert-graph-to-loop")
    if fuse:
        passes += WINDOW_GROUPS
    if post_tile:
        passes += POST_TILE
    outline = " outline-serial=true" if outline_serial else ""
    passes += ["loop-forward-copies", "loop-delinearize", "loop-coalesce"]
    if fuse:  # then forward the pad copies of the products that now write their epilogue's output
        passes += ["loop-gemm-epilogue-fuse", "loop-forward-copies"]
    passes += [
        "assign-buffers",
        "loop-fold-init",
        "loop-flatten-windows",
        "loop-deinterleave-windows",
        "loop-split-wrapped",
        "loop-trim-fills",
        f"convert-loop-to-scf{{parallel={'true' if parallel else 'false'}{outline}}}",
        "merge-kernels",
        "expand-math",
        "convert-to-llvm{fast-math=true}" if fast_math else "convert-to-llvm",
    ]
    return passes


def step_index(steps: list[str], flag: str, missing: int | None = None) -> int:
    """Where in `steps` the pass `flag` runs, with or without options
    ("convert-graph-to-loop{channel-tiles=true}" is convert-graph-to-loop); `missing`
    where it does not (StopIteration without it)."""
    found = (i for i, step in enumerate(steps) if step.split("{", 1)[0] == flag)
    return next(found) if missing is None else next(found, missing)


# The first step of cpu_pipeline from which on no pass changes what kernel a loop.gemm
# is (shape, packing, epilogue, frame: its GEMM unit, api.expected_gemms). The loader
# starts compiling the GEMM units there, while this process runs the rest: the
# later loop passes (MobileNetV2: 0.3 s) and convert-to-llvm. Checked on the models of
# the zoo: their units are the same there as before convert-to-llvm. Should a later pass
# change one, that unit compiles for nothing and the changed one with the other kernels.
GEMM_UNITS_FIXED_AT = "assign-buffers"


def gemm_units_fixed(steps: list[str]) -> int:
    """How many of `steps` run before the GEMM units are fixed (GEMM_UNITS_FIXED_AT):
    all of them when that pass is not among them."""
    return step_index(steps, GEMM_UNITS_FIXED_AT, missing=len(steps))


def host_has_channel_tiles() -> bool:
    """Do the host's GEMM kernels take channel tiles (gemm_kernels.has_channel_tiles)?"""
    from mlfuse.backend.gemm_kernels import has_channel_tiles
    from mlfuse.backend.llvm_translate import host_features

    return has_channel_tiles(host_features())


def _has_pass(flag: str) -> bool:
    from mlfuse.universe import MLFUSE_PASSES

    return flag in MLFUSE_PASSES


# Post-tiling fusion on whatever convert-graph-to-loop left: start-up fusion, tiles only
# where a producer can be fused (analytical tile sizes), fusion, tile-local storage.
POST_TILE = ["loop-startup-fuse", "loop-tile{fusible-only=true}", "loop-post-tile-fuse", "loop-storage-reduce"]

# The same inside each window group of the plan (nests tagged fusion_group), nowhere else.
WINDOW_GROUPS = [
    "loop-startup-fuse{scope=group}",
    "loop-tile{fusible-only=true scope=group}",
    "loop-post-tile-fuse{scope=group}",
    "loop-storage-reduce",
]

STENCIL_STRATEGIES = ("post-tile", "tile-after-fuse", "none")


def cpu_stencil_pipeline(
    strategy: str = "post-tile",
    sizes: tuple[int, ...] | None = None,
    parallel: bool = True,
    max_recompute: float = 2.0,
) -> list[str]:
    """graph -> loop nests with start-up fusion -> tiling and fusion for locality -> llvm.

    Meant for stencil pipelines (slices, pads, conv2d, pooling: image filters, CNN
    layers), where the fusion planner's register/row stitching does not apply.
    Start-up fusion is conservative (each stencil stage keeps its own nest); then
    `strategy` decides:
      post-tile        tile the live-outs, fuse producers into the tiles with
                       overlapped tiles, shrink intermediates to tile-local buffers
      tile-after-fuse  fuse where legal without tiling (pointwise), then tile every
                       nest on its own (the PPCG/Pluto order; intermediates stay whole)
      none             start-up fusion only
    `sizes` are tile sizes of the trailing dimensions (None: analytical default from
    the L2 size, see mlfuse.poly.tiling.default_tile_sizes).
    """
    if strategy not in STENCIL_STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STENCIL_STRATEGIES)}, got {strategy!r}")
    passes = list(GRAPH_CLEANUP) + ["convert-graph-to-loop{stitch=false}", "loop-startup-fuse"]
    size_opt = f"sizes={','.join(map(str, sizes))}" if sizes else ""
    with_opts = lambda name, *opts: name + ("{" + " ".join(o for o in opts if o) + "}" if any(opts) else "")  # noqa: E731
    if strategy == "post-tile":
        passes += [
            with_opts("loop-tile", size_opt),
            with_opts("loop-post-tile-fuse", f"max-recompute={max_recompute}" if max_recompute != 2.0 else ""),
            "loop-storage-reduce",
        ]
    elif strategy == "tile-after-fuse":
        passes.append(with_opts("loop-tile-after-fuse", size_opt))
    passes += [
        "loop-trim-fills",
        "assign-buffers",
        f"convert-loop-to-scf{{parallel={'true' if parallel else 'false'}}}",
        "expand-math",
        "convert-to-llvm",
    ]
    return passes
