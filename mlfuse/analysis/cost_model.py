"""Modeled cost of a fusion pattern (a set of ops run as one kernel), per target.

The time of a kernel is

    launch + max(bytes / (bandwidth * efficiency * utilization), compute) + barriers

- *bytes* cross the kernel boundary: every distinct input read once, every value used
  after the kernel written once, plus what stitching adds (a value stitched through
  global memory is written and read back; a value recomputed in a later phase re-reads
  its inputs). Values that stay inside the kernel cost nothing: that is what fusion saves.
- *launch* is paid per kernel (GPU launch, CPU parallel-region dispatch).
- *compute* counts elementwise work in light-op units (the cost of `graph.Elementwise`)
  including recomputation, and GEMM flops at library speed (large) or at a fraction of
  it (fine-grained GEMMs fused with a prologue or epilogue).
- *efficiency* comes from a simple occupancy model (registers and shared memory per
  block against the SM's budget) and *utilization* from parallelism: a kernel over
  fewer elements than it takes to saturate the memory system runs at a fraction of
  the bandwidth, which is what makes packing small kernels pay.
- *barriers*: one grid-wide barrier per phase that waits on a globally stitched value.

Stitching decides, for every value produced and consumed inside the kernel, where it
lives between producer and consumer (`REGISTER`, `SHARED`, `GLOBAL`):

- A reduction's result (and elementwise work on it) is held by the threads that
  finished the reduction. A consumer that needs the *whole* reduction (a broadcast, an
  injective op, another reduction) waits for it: a *row* reduction broadcast back along
  its rows is block-local (`SHARED`, AStitch's regional stitching, a new phase after a
  block barrier); a column or full reduction needs every block (`GLOBAL` plus a grid
  barrier).
- A value used in two phases (LayerNorm's `x - mean` feeds the variance and the
  output) is kept in shared memory when its per-block tile fits, else recomputed in
  the later phase (registers: pays its flops and re-reads its inputs) or spilled to
  global memory, whichever is cheaper.
- A value read through a broadcast is recomputed for every element it is broadcast to
  (`REGISTER`); when that repeats expensive work and the tile fits, it is kept in
  shared memory instead.
- An elementwise prologue of a fused GEMM is recomputed once per output tile that
  reads it.

On the CPU target `SHARED` means a per-core scratch row buffer that must fit in the
core's cache (`onchip_bytes`), and `GLOBAL` a barrier between parallel loops.

A pattern is infeasible when it mixes ops that cannot share a kernel (opaque ops,
large GEMMs, two contractions, a GEMM with a reduction, a grid barrier or GEMM inside a
horizontal pack; on the CPU, what mlfuse.conversion.group_to_loop.structural_problem
says the stitched code generator cannot emit), or when it exceeds a resource limit (kernel operands, registers per
thread, threads times registers per block, shared memory for an occupancy of zero).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from itertools import zip_longest

from mlfuse.analysis.fusion_graph import FusionGraph, bits
from mlfuse.analysis.op_classes import (
    DEFAULT_FINE_GEMM_FLOPS,
    ContractionSize,
    OpClass,
    ReductionLayout,
)
from mlfuse.dialects import graph

REGISTER, SHARED, GLOBAL = "register", "shared", "global"
SCHEME_ORDER = {REGISTER: 0, SHARED: 1, GLOBAL: 2}


@dataclass(frozen=True)
class TargetParams:
    """Machine parameters of the cost model. Times in microseconds, rates per second.

    Every field can be overridden: `TargetParams.for_target("gpu", launch_us=2.0)`, or
    from the pass: `fusion-plan{target=gpu params=launch_us:2.0,onchip_bytes:16384}`.
    """

    name: str
    bandwidth_gbps: float  # DRAM bandwidth, GB/s
    launch_us: float  # per kernel: GPU launch or CPU parallel-region dispatch
    elementwise_gops: float  # light elementwise ops per second, in G
    gemm_gflops: float  # large (library) GEMM throughput
    fine_gemm_efficiency: float  # share of gemm_gflops a fused fine-grained GEMM reaches
    gemm_tile: int  # output tile edge of a fused GEMM: a prologue is recomputed per tile
    onchip_bytes: int  # GPU: shared memory per block; CPU: per-core cache for row buffers
    onchip_bytes_per_unit: int  # GPU: shared memory per SM (occupancy); CPU: unused
    block_threads: int  # GPU threads per block
    max_threads_per_unit: int  # GPU threads per SM
    max_blocks_per_unit: int  # GPU resident blocks per SM
    registers_per_unit: int  # GPU register file per SM; 0 disables the register model
    max_registers_per_thread: int
    base_registers: int  # registers of an empty kernel (indices, pointers)
    registers_per_op: int  # per compute op of the largest component
    registers_per_live_value: int  # per value kept live for several uses
    full_bandwidth_occupancy: float  # occupancy from which DRAM bandwidth saturates
    saturation_elements: int  # elements in flight needed to saturate bandwidth
    global_barrier_us: float  # GPU grid-wide barrier / CPU barrier between parallel loops
    short_row: int  # rows up to this length are reduced by a warp (several rows per block)
    rows_per_block_short: int  # rows per block for short rows (1 for long rows)
    max_operands: int  # kernel inputs + outputs (XLA's fusion budget is 64)
    fine_gemm_flops: int = DEFAULT_FINE_GEMM_FLOPS  # contraction size threshold
    window_tile: int = 16  # output tile edge of a window group (post-tiling fusion's tiles)
    max_window_recompute: float = 2.0  # chained windows: the most a producer's work may grow

    @staticmethod
    def for_target(target: str, **overrides: float | int) -> TargetParams:
        if target not in TARGETS:
            raise ValueError(f"unknown target '{target}' (expected one of {', '.join(TARGETS)})")
        return TARGETS[target].with_overrides(**overrides)

    def with_overrides(self, **overrides: float | int) -> TargetParams:
        names = {f.name: f for f in dataclasses.fields(self) if f.name != "name"}
        changes: dict[str, float | int] = {}
        for key, value in overrides.items():
            if key not in names:
                raise ValueError(
                    f"unknown cost-model parameter '{key}' (known: {', '.join(sorted(names))})"
                )
            kind = int if names[key].type in ("int", int) else float
            if kind is int and float(value) != int(float(value)):
                raise ValueError(f"cost-model parameter '{key}' must be an integer, got {value}")
            if float(value) < 0:
                raise ValueError(f"cost-model parameter '{key}' must be non-negative, got {value}")
            changes[key] = kind(float(value)) if kind is int else float(value)
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, float | int | str]:
        return dataclasses.asdict(self)


# An A100-class GPU (fp32 without tensor cores).
GPU_PARAMS = TargetParams(
    name="gpu",
    bandwidth_gbps=1500.0,
    launch_us=4.0,
    elementwise_gops=9700.0,
    gemm_gflops=19500.0,
    fine_gemm_efficiency=0.4,
    gemm_tile=64,
    onchip_bytes=48 * 1024,
    onchip_bytes_per_unit=164 * 1024,
    block_threads=256,
    max_threads_per_unit=2048,
    max_blocks_per_unit=32,
    registers_per_unit=65536,
    max_registers_per_thread=255,
    base_registers=16,
    registers_per_op=2,
    registers_per_live_value=4,
    full_bandwidth_occupancy=0.5,
    saturation_elements=108 * 2048,
    global_barrier_us=3.0,
    short_row=512,
    rows_per_block_short=8,
    max_operands=64,
)

# A 16-core AVX2 server socket. GEMMs above 2^20 flops are not fused on the CPU:
# alone they run as a blocked GEMM kernel (loop.gemm), which beats a fused row-by-row loop GEMM by
# an order of magnitude (attention at seq 128: 3.1 ms fused, see bench/results).
CPU_PARAMS = TargetParams(
    name="cpu",
    fine_gemm_flops=2**20,
    bandwidth_gbps=50.0,
    launch_us=2.0,
    elementwise_gops=250.0,
    gemm_gflops=600.0,
    fine_gemm_efficiency=0.5,
    gemm_tile=64,
    onchip_bytes=256 * 1024,
    onchip_bytes_per_unit=256 * 1024,
    block_threads=1,
    max_threads_per_unit=1,
    max_blocks_per_unit=1,
    registers_per_unit=0,
    max_registers_per_thread=0,
    base_registers=0,
    registers_per_op=0,
    registers_per_live_value=0,
    full_bandwidth_occupancy=1.0,
    saturation_elements=16 * 8 * 64,
    global_barrier_us=1.0,
    short_row=0,
    rows_per_block_short=1,
    max_operands=64,
)

TARGETS = {"gpu": GPU_PARAMS, "cpu": CPU_PARAMS}


@dataclass(frozen=True)
class PatternCost:
    """The modeled kernel for one pattern; `feasible=False` says why not in `reason`."""

    mask: int
    feasible: bool
    category: str = ""  # when infeasible: "op-class" or "resource-limit"
    reason: str = ""
    kind: str = "single"
    bytes: int = 0
    time_us: float = math.inf
    stitch: dict[int, str] = field(default_factory=dict)  # node -> scheme of its result
    inputs: tuple[int, ...] = ()  # value ids read from memory
    outputs: tuple[int, ...] = ()  # value ids written for later kernels
    smem_bytes: int = 0
    registers: int = 0
    flops: float = 0.0
    recompute_flops: float = 0.0
    global_barriers: int = 0


def _infeasible(mask: int, category: str, reason: str) -> PatternCost:
    return PatternCost(mask, False, category, reason)


@dataclass
class Boundary:
    """What crosses a kernel's boundary: value ids read (`inputs`) and written for later
    kernels (`outputs`), their bytes, and each member's users inside the kernel."""

    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    internal_users: dict[int, list[int]] = field(default_factory=dict)
    bytes: int = 0


@dataclass
class Stitching:
    """A kernel's stitch scheme: the scheme of each node's result (`stitch`), each
    node's phase, the phases that start after a grid barrier, and what keeping values
    costs (shared memory, recomputed work, extra bytes)."""

    stitch: dict[int, str] = field(default_factory=dict)
    phase: dict[int, int] = field(default_factory=dict)
    global_phases: set[int] = field(default_factory=set)
    recompute_flops: float = 0.0
    extra_bytes: int = 0
    smem: int = 0


@dataclass(frozen=True)
class Occupancy:
    """Bandwidth efficiency from occupancy, the registers per thread behind it, and
    why the kernel cannot run at all ("" when it can; a single op runs anyway)."""

    efficiency: float
    registers: int
    problem: str = ""


class CostModel:
    """Costs of patterns of one `FusionGraph` on one target, memoized by mask."""

    def __init__(self, fgraph: FusionGraph, params: TargetParams):
        self.graph = fgraph
        self.params = params
        self._cache: dict[int, PatternCost] = {}
        values = fgraph.values
        # per node: elementwise work in light-op units
        self.work = []
        for node in fgraph.nodes:
            if node.op_class.elementwise or node.op_class is OpClass.REDUCTION:
                self.work.append(node.info.element_cost * node.domain)
            else:
                self.work.append(0.0)
        self.result = [node.results[0] if len(node.results) == 1 else None for node in fgraph.nodes]
        # reshapes that only add or drop unit dimensions keep a reduction's rows in place
        self.unit_reshape = [
            isinstance(node.op, graph.ReshapeOp)
            and [d for d in graph.shape_of(node.op.input) if d != 1]
            == [d for d in graph.shape_of(node.op.result) if d != 1]
            for node in fgraph.nodes
        ]
        self.element_size = [
            (v.nbytes // v.numel) if v.numel else 0 for v in values
        ]
        # per node: (user, the user's own halo) for every use of its results, in order;
        # _window_recompute walks these for every window pattern the planner prices
        self.user_halos = [
            tuple(
                (u, fgraph.nodes[u].info.halo if fgraph.nodes[u].op_class is OpClass.WINDOW else ())
                for r in node.results
                for u in values[r].users
            )
            for node in fgraph.nodes
        ]

    # --- public ----------------------------------------------------------------------------

    def cost(self, mask: int) -> PatternCost:
        c = self._cache.get(mask)
        if c is None:
            c = self._cost(mask)
            self._cache[mask] = c
        return c

    def time(self, mask: int) -> float:
        return self.cost(mask).time_us

    def singleton_time(self, i: int) -> float:
        return self.cost(1 << i).time_us

    def plan_time(self, groups: list[int]) -> float:
        return sum(self.cost(m).time_us for m in groups)

    def plan_bytes(self, groups: list[int]) -> int:
        return sum(self.cost(m).bytes for m in groups)

    # --- the model ---------------------------------------------------------------------------
    #
    # _cost runs the steps in order; each returns what the next ones need, or says
    # why the pattern is infeasible:
    #   feasibility       _mix_problem: op classes that cannot share a kernel
    #   boundary traffic  _boundary: inputs read, outputs written, in-kernel users
    #   stitch scheme     _stitching: phases, where each internal value lives, recomputation
    #   occupancy         _occupancy: registers, threads, shared memory -> efficiency
    #   time              _time: launch + max(memory, compute) + barriers

    def _cost(self, mask: int) -> PatternCost:
        p, nodes = self.params, self.graph.nodes
        members = list(bits(mask))
        single = len(members) == 1
        if single and not nodes[members[0]].is_kernel:
            return PatternCost(mask, True, time_us=0.0)  # scalar bookkeeping, not a kernel
        if not single and (problem := self._mix_problem(mask, members)) is not None:
            return problem
        windows = [i for i in members if nodes[i].op_class is OpClass.WINDOW]
        if windows:  # alone too: one time model for every window kernel
            return self._window_cost(mask, members, windows)
        boundary = self._boundary(mask, members)
        operands = len(boundary.inputs) + len(boundary.outputs)
        if not single and operands > p.max_operands:
            return _infeasible(mask, "resource-limit", f"{operands} kernel operands > limit {p.max_operands}")
        comps = self.graph.components(mask) if not single else [mask]
        stitching = Stitching()
        if not single:
            stitching = self._stitching(mask, members, boundary)
            if len(comps) > 1 and (problem := self._pack_problem(mask, members, stitching)) is not None:
                return problem
        occupancy = self._occupancy(comps, boundary, stitching)
        if not single and occupancy.problem:
            return _infeasible(mask, "resource-limit", occupancy.problem)
        total_bytes = boundary.bytes + stitching.extra_bytes
        work = sum(self.work[i] for i in members) + stitching.recompute_flops
        return PatternCost(
            mask=mask,
            feasible=True,
            kind=self._kind(members, comps, stitching.stitch, boundary.inputs),
            bytes=total_bytes,
            time_us=self._time(members, comps, total_bytes, work, occupancy.efficiency, len(stitching.global_phases)),
            stitch=stitching.stitch,
            inputs=tuple(boundary.inputs),
            outputs=tuple(boundary.outputs),
            smem_bytes=stitching.smem,
            registers=occupancy.registers,
            flops=work,
            recompute_flops=stitching.recompute_flops,
            global_barriers=len(stitching.global_phases),
        )

    def _mix_problem(self, mask: int, members: list[int]) -> PatternCost | None:
        """Feasibility: ops that cannot share one kernel (opaque, no-fuse or large ops,
        two contractions, a GEMM with a reduction, what the target's code generator
        cannot stitch); None when the mix is fine."""
        g, p = self.graph, self.params
        nodes = g.nodes
        for i in members:
            if not nodes[i].fusible:
                why = "marked no-fuse" if nodes[i].no_fuse else f"a {nodes[i].info.describe()}"
                return _infeasible(mask, "no-fuse" if nodes[i].no_fuse else "op-class",
                                   f"{g.node_label(i)} is {why}: it runs as its own kernel")
        contractions = [i for i in members if nodes[i].op_class is OpClass.CONTRACTION]
        if len(contractions) > 1:
            return _infeasible(mask, "op-class", "at most one contraction per kernel")
        if contractions and any(nodes[i].op_class is OpClass.REDUCTION for i in members):
            return _infeasible(
                mask, "op-class",
                "a GEMM kernel takes only an elementwise prologue and epilogue (no reductions)",
            )
        from mlfuse.target import get_target  # what the target's code generator can stitch

        problem = get_target(p.name).structural_problem([nodes[i].op for i in members])
        if problem is not None:
            return _infeasible(mask, "op-class", f"{p.name.upper()} code generation: {problem}")
        return None

    def _window_cost(self, mask: int, members: list[int], windows: list[int]) -> PatternCost:
        """A window group (conv or pooling with its elementwise epilogue and pad prologue;
        chains of windows): post-tiling fusion on the CPU, one direct kernel on the GPU.
        Its intermediates stay in tile-local storage; what it costs beyond the boundary
        traffic is the halo that chained windows recompute per output tile."""
        p, nodes, values = self.params, self.graph.nodes, self.graph.values
        for i in windows:
            for r in nodes[i].results:
                for u in values[r].users:
                    if (mask >> u) & 1 and nodes[u].op_class not in (OpClass.LIGHT_ELEMENTWISE,
                                                                    OpClass.EXPENSIVE_ELEMENTWISE, OpClass.WINDOW):
                        return _infeasible(mask, "op-class", f"{self.graph.node_label(i)}'s result is read inside "
                                           f"the kernel by {self.graph.node_label(u)}, in another layout")
        growth = self._window_recompute(mask, members)
        worst = max(growth.values(), default=1.0)
        if worst > p.max_window_recompute:
            return _infeasible(mask, "resource-limit", f"chained windows recompute {worst:.2f}x of a producer per "
                               f"tile (halo over a {p.window_tile}-wide tile), above {p.max_window_recompute}")
        boundary = self._boundary(mask, members)
        recompute = sum((g - 1.0) * (nodes[i].info.window_flops + self.work[i]) for i, g in growth.items())
        work = sum(self.work[i] for i in members) + recompute
        return PatternCost(
            mask=mask, feasible=True, kind="window" if len(members) > 1 else "single", bytes=boundary.bytes,
            time_us=self._window_time(members, boundary.bytes, work, recompute),
            inputs=tuple(boundary.inputs), outputs=tuple(boundary.outputs), flops=work, recompute_flops=recompute,
        )

    def _window_time(self, members: list[int], total_bytes: int, work: float, recompute: float) -> float:
        """launch + memory + window arithmetic + epilogue: summed, not overlapped (a direct
        window loop streams its tile's inputs between bursts of multiply-adds), so a plan
        that moves fewer bytes wins even when the convolution dominates."""
        p, nodes = self.params, self.graph.nodes
        rate = p.gemm_gflops * p.fine_gemm_efficiency * 1e3
        windows = sum(nodes[i].info.window_flops for i in members) + recompute
        t_mem = total_bytes / (p.bandwidth_gbps * 1e3)
        return p.launch_us + t_mem + windows / rate + work / (p.elementwise_gops * 1e3)

    def _window_recompute(self, mask: int, members: list[int]) -> dict[int, float]:
        """For each member feeding a window inside the group: how much its work grows when
        every output tile recomputes its halo, prod over axes of (tile + halo) / tile, the
        halo summed along the windows between it and the group's results."""
        tile = self.params.window_tile
        downstream: dict[int, tuple[int, ...]] = {}
        for i in reversed(members):  # node indices are in program order
            halo: tuple[int, ...] = ()
            for u, own in self.user_halos[i]:
                if (mask >> u) & 1:
                    through_u = [x + y for x, y in zip_longest(downstream.get(u, ()), own, fillvalue=0)]
                    halo = tuple(max(x, y) for x, y in zip_longest(halo, through_u, fillvalue=0))
            downstream[i] = halo
        return {i: math.prod((tile + h) / tile for h in halo) for i, halo in downstream.items() if any(halo)}

    def _boundary(self, mask: int, members: list[int]) -> Boundary:
        """Boundary traffic: every distinct input read once (splat constants are free),
        every value used after the kernel written once."""
        nodes, values = self.graph.nodes, self.graph.values
        b = Boundary()
        seen: set[int] = set()
        for i in members:
            for v in nodes[i].operands:
                val = values[v]
                if val.producer is not None and (mask >> val.producer) & 1:
                    continue
                if val.constant == "splat" or v in seen:
                    continue
                seen.add(v)
                b.inputs.append(v)
            for r in nodes[i].results:
                val = values[r]
                inside = [u for u in val.users if (mask >> u) & 1]
                if inside:
                    b.internal_users[i] = inside
                if val.escapes or len(inside) < len(val.users):
                    b.outputs.append(r)
        b.bytes = sum(values[v].nbytes for v in b.inputs) + sum(values[v].nbytes for v in b.outputs)
        return b

    def _stitching(self, mask: int, members: list[int], boundary: Boundary) -> Stitching:
        """Stitch scheme of a multi-op kernel: its phases, where each internal value lives
        between producer and consumer, and what recomputation and spills add."""
        s = Stitching()
        pending = self._phases(mask, members, boundary.internal_users, s)
        rows, rows_per_block = self._tile_geometry(members)
        values = self.graph.values

        def tile(v: int) -> int:
            return max(self.element_size[v], math.ceil(values[v].nbytes * rows_per_block / rows))

        for i, scheme in s.stitch.items():
            if scheme == SHARED:
                s.smem += tile(self.result[i])
        for i in members:
            r = self.result[i]
            if i not in boundary.internal_users or r is None:
                continue
            users = boundary.internal_users[i]
            if r in pending:
                self._keep_reduction(i, r, users, pending[r], s, tile)
            elif any(s.phase[u] > s.phase[i] for u in users):
                self._keep_across_phases(i, r, users, mask, s, tile)
            else:
                self._keep_broadcast(i, r, users, mask, s, tile)
        self._gemm_prologues(mask, members, s)
        return s

    def _phases(self, mask: int, members: list[int], internal_users: dict[int, list[int]],
                s: Stitching) -> dict[int, ReductionLayout]:
        """Phase of every member: a consumer that needs a whole reduction starts a new
        phase (SHARED for a row reduction broadcast along its rows, else GLOBAL and a
        grid barrier). Returns the values that carry a reduction's layout (the reduction
        and elementwise work on it), which are held by the reducing threads."""
        nodes, values = self.graph.nodes, self.graph.values
        pending: dict[int, ReductionLayout] = {}
        for i in members:
            node = nodes[i]
            cls = node.op_class
            ph = 0
            for v in set(node.operands):
                pr = values[v].producer
                if pr is None or not (mask >> pr) & 1:
                    continue
                s.stitch.setdefault(pr, REGISTER)
                layout = pending.get(v)
                if layout is not None and not (cls.elementwise or self.unit_reshape[i]):
                    need = SHARED if layout is ReductionLayout.ROW and self._row_broadcast(node.op) else GLOBAL
                    if SCHEME_ORDER[need] > SCHEME_ORDER[s.stitch[pr]]:
                        s.stitch[pr] = need
                    ph = max(ph, s.phase[pr] + 1)
                    if need == GLOBAL:
                        s.global_phases.add(s.phase[pr] + 1)
                else:
                    ph = max(ph, s.phase[pr])
            s.phase[i] = ph
            r = self.result[i]
            if r is None:
                continue
            if cls is OpClass.REDUCTION:
                pending[r] = node.info.reduction
            elif cls.elementwise or self.unit_reshape[i]:
                layouts = [pending[v] for v in node.operands if v in pending]
                if layouts:
                    pending[r] = max(layouts, key=lambda lay: lay is not ReductionLayout.ROW)
        # a value computed from kernel inputs only is computed as late as its users need it
        for i in reversed(members):
            r = self.result[i]
            if nodes[i].op_class is OpClass.REDUCTION or r in pending or i not in internal_users:
                continue
            target = min(s.phase[u] for u in internal_users[i])
            if target > s.phase[i]:
                s.phase[i] = target
        return pending

    @staticmethod
    def _row_broadcast(op) -> bool:
        """A broadcast that keeps the leading dimensions: a row value along its row."""
        return isinstance(op, graph.BroadcastOp) and op.dim_map == tuple(range(len(op.dim_map)))

    def _keep_reduction(self, i: int, r: int, users: list[int], layout: ReductionLayout, s: Stitching, tile) -> None:
        """A reduction result kept by the reducing threads but needed in a later phase
        must survive the barrier like a stitched value."""
        if s.stitch[i] == REGISTER and max(s.phase[u] for u in users) > s.phase[i]:
            s.stitch[i] = SHARED if layout is ReductionLayout.ROW else GLOBAL
            if s.stitch[i] == SHARED:
                s.smem += tile(r)

    def _keep_across_phases(self, i: int, r: int, users: list[int], mask: int, s: Stitching, tile) -> None:
        """A value used in later phases: in shared memory when its tile fits, else
        recomputed in each later phase or spilled to global memory, whichever is cheaper."""
        p, values = self.params, self.graph.values
        later = sorted({s.phase[u] for u in users if s.phase[u] > s.phase[i]})
        t = tile(r)
        if s.smem + t <= p.onchip_bytes:
            s.stitch[i] = SHARED
            s.smem += t
            return
        cone_work, cone_bytes = self._cone(i, mask, s.stitch)
        t_recompute = len(later) * (cone_work / (p.elementwise_gops * 1e3) + cone_bytes / (p.bandwidth_gbps * 1e3))
        new_barriers = len([ph for ph in later if ph not in s.global_phases])
        t_global = (2 * values[r].nbytes) / (p.bandwidth_gbps * 1e3) + new_barriers * p.global_barrier_us
        if t_recompute <= t_global:
            s.recompute_flops += len(later) * cone_work
            s.extra_bytes += len(later) * cone_bytes
        else:
            s.stitch[i] = GLOBAL
            s.extra_bytes += 2 * values[r].nbytes
            s.global_phases.update(later)

    def _keep_broadcast(self, i: int, r: int, users: list[int], mask: int, s: Stitching, tile) -> None:
        """A value read through a broadcast is recomputed for every element it is
        broadcast to; when that repeats expensive work and the tile fits, it is kept in
        shared memory instead."""
        nodes, values = self.graph.nodes, self.graph.values
        reuse = max(
            (values[self.result[u]].numel / max(1, values[r].numel)
             for u in users if nodes[u].op_class is OpClass.BROADCAST),
            default=1.0,
        )
        if reuse <= 1.0 or s.stitch[i] != REGISTER:
            return
        cone_work, _ = self._cone(i, mask, s.stitch)
        expensive = cone_work > self._light_work(i, mask, s.stitch)
        t = tile(r)
        if expensive and s.smem + t <= self.params.onchip_bytes:
            s.stitch[i] = SHARED
            s.smem += t
        else:
            s.recompute_flops += cone_work * (reuse - 1.0)

    def _gemm_prologues(self, mask: int, members: list[int], s: Stitching) -> None:
        """The elementwise prologue of a fused GEMM is recomputed once per output tile
        that reads it."""
        p, nodes, values = self.params, self.graph.nodes, self.graph.values
        for i in members:
            if nodes[i].op_class is not OpClass.CONTRACTION:
                continue
            lhs, rhs = graph.shape_of(nodes[i].op.operands[0]), graph.shape_of(nodes[i].op.operands[1])
            repeats = (math.ceil(rhs[-1] / p.gemm_tile), math.ceil(lhs[-2] / p.gemm_tile))
            for v, rep in zip(nodes[i].operands[:2], repeats):
                pr = values[v].producer
                if pr is not None and (mask >> pr) & 1 and rep > 1:
                    cone_work, _ = self._cone(pr, mask, s.stitch)
                    s.recompute_flops += cone_work * (rep - 1)

    def _pack_problem(self, mask: int, members: list[int], s: Stitching) -> PatternCost | None:
        """A horizontal pack (several independent components) takes no grid barrier and
        no GEMM."""
        if s.global_phases:
            return _infeasible(mask, "op-class", "a horizontal pack cannot contain a grid-wide barrier")
        if any(self.graph.nodes[i].op_class is OpClass.CONTRACTION for i in members):
            return _infeasible(mask, "op-class", "a horizontal pack cannot contain a GEMM")
        return None

    def _occupancy(self, comps: list[int], boundary: Boundary, s: Stitching) -> Occupancy:
        """Registers per thread (per component: base + compute ops + live values) and the
        blocks per SM they, the threads and the shared memory allow -> bandwidth
        efficiency. Without a register model (CPU) the efficiency is 1."""
        p, nodes = self.params, self.graph.nodes
        if not p.registers_per_unit:
            return Occupancy(1.0, 0)
        registers = 0
        for comp in comps:
            compute_ops = live = 0
            for i in bits(comp):
                cls = nodes[i].op_class
                if cls.elementwise or cls in (OpClass.REDUCTION, OpClass.CONTRACTION):
                    compute_ops += 1
                if len(boundary.internal_users.get(i, ())) > 1 or s.stitch.get(i, REGISTER) != REGISTER:
                    live += 1
            registers = max(
                registers,
                p.base_registers + p.registers_per_op * compute_ops + p.registers_per_live_value * live,
            )
        problem = ""
        if p.max_registers_per_thread and registers > p.max_registers_per_thread:
            problem = f"{registers} registers per thread > limit {p.max_registers_per_thread}"
        blocks = min(
            p.max_threads_per_unit // max(1, p.block_threads),
            p.max_blocks_per_unit,
            p.registers_per_unit // max(1, registers * p.block_threads),
            p.onchip_bytes_per_unit // s.smem if s.smem else p.max_blocks_per_unit,
        )
        if blocks == 0:
            problem = problem or (f"no block fits on an SM ({p.block_threads} threads x {registers} registers, "
                                  f"{s.smem} bytes of shared memory)")
            blocks = 1  # a single op runs anyway
        occupancy = blocks * p.block_threads / p.max_threads_per_unit
        return Occupancy(min(1.0, occupancy / p.full_bandwidth_occupancy), registers, problem)

    def _time(self, members: list[int], comps: list[int], total_bytes: int, work: float, efficiency: float,
              barriers: int) -> float:
        """launch + max(memory time, compute time) + grid barriers, in microseconds; memory
        runs at a fraction of the bandwidth when the kernel has too little parallelism."""
        p, nodes = self.params, self.graph.nodes
        parallel = sum(max(nodes[i].domain for i in bits(comp)) for comp in comps)
        utilization = min(1.0, max(1, parallel) / p.saturation_elements)
        gemm_time = 0.0
        for i in members:
            info = nodes[i].info
            if info.op_class is OpClass.CONTRACTION:
                rate = p.gemm_gflops * (1.0 if info.contraction is ContractionSize.LARGE else p.fine_gemm_efficiency)
                gemm_time += info.gemm_flops / (rate * 1e3)
        t_mem = total_bytes / (p.bandwidth_gbps * 1e3 * efficiency * utilization)
        t_compute = work / (p.elementwise_gops * 1e3) + gemm_time
        return p.launch_us + max(t_mem, t_compute) + barriers * p.global_barrier_us

    # --- helpers ------------------------------------------------------------------------------

    def _tile_geometry(self, members: list[int]) -> tuple[int, int]:
        """(rows, rows per block) of the kernel's blocking; shared tiles are a value's
        bytes divided by the number of blocks."""
        p, nodes = self.params, self.graph.nodes
        for i in members:
            info = nodes[i].info
            if info.reduction is ReductionLayout.ROW and info.row_length > 0:
                rows = max(1, nodes[i].domain // info.row_length)
                per_block = p.rows_per_block_short if info.row_length <= p.short_row else 1
                return rows, min(per_block, rows)
        domain = max(nodes[i].domain for i in members)
        blocks = max(1, domain // max(1, p.block_threads * 4))
        return blocks, 1

    def _cone(self, i: int, mask: int, stitch: dict[int, str]) -> tuple[float, int]:
        """Work and input bytes to recompute node i's value from what the kernel holds:
        in-kernel producers reached through register-stitched, non-reduction values."""
        g = self.graph
        work = 0.0
        read: set[int] = set()
        stack, seen = [i], {i}
        while stack:
            j = stack.pop()
            work += self.work[j]
            for v in g.nodes[j].operands:
                val = g.values[v]
                pr = val.producer
                if pr is None or not (mask >> pr) & 1:
                    if val.constant != "splat":
                        read.add(v)
                    continue
                if (
                    pr in seen
                    or g.nodes[pr].op_class is OpClass.REDUCTION
                    or stitch.get(pr, REGISTER) != REGISTER
                ):
                    continue
                seen.add(pr)
                stack.append(pr)
        return work, sum(g.values[v].nbytes for v in read)

    def _light_work(self, i: int, mask: int, stitch: dict[int, str]) -> float:
        """The work of node i's cone if every op in it were a light op."""
        g = self.graph
        total, stack, seen = 0.0, [i], {i}
        while stack:
            j = stack.pop()
            if self.work[j]:
                total += g.nodes[j].domain
            for pr in g.preds[j]:
                if (mask >> pr) & 1 and pr not in seen and g.nodes[pr].op_class is not OpClass.REDUCTION \
                        and stitch.get(pr, REGISTER) == REGISTER:
                    seen.add(pr)
                    stack.append(pr)
        return total

    def _kind(self, members: list[int], comps: list[int], stitch: dict[int, str], inputs: list[int]) -> str:
        nodes = self.graph.nodes
        if len(members) == 1:
            return "single"
        classes = {nodes[i].op_class for i in members}
        if OpClass.CONTRACTION in classes:
            return "gemm"
        if len(comps) > 1 and not self._siblings(comps):
            return "horizontal"
        schemes = set(stitch.values())
        if GLOBAL in schemes:
            return "global"
        if SHARED in schemes:
            return "stitch"
        if OpClass.REDUCTION in classes:
            return "reduce"
        return "loop"

    def _siblings(self, comps: list[int]) -> bool:
        """Whether all components read one common value (sibling multi-output fusion)."""
        g = self.graph
        common: set[int] | None = None
        for comp in comps:
            read = {v for i in bits(comp) for v in g.nodes[i].operands
                    if g.values[v].producer is None or not (comp >> g.values[v].producer) & 1}
            read = {v for v in read if g.values[v].constant != "splat"}
            common = read if common is None else common & read
        return bool(common)
