"""The dataflow graph a fusion planner works on, as plain numbers.

`FusionGraph.from_function(fn)` numbers the ops of a function body (program order,
which is a topological order) and its SSA values, and precomputes what planners ask
again and again: producers, users, byte sizes, and the strict ancestors and
descendants of every op as bit masks. A set of ops (a *pattern*, a future kernel)
is an `int` with bit `i` set for op `i`.

Constants are not nodes: a splat `graph.constant` is rebuilt inside every kernel
that uses it (it costs nothing), a dense one is a buffer read like an argument.
The terminator is not a node either; values it uses *escape* the function.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.traits import IsTerminator

from mlfuse import abi
from mlfuse.analysis.op_classes import DEFAULT_FINE_GEMM_FLOPS, OpClass, OpInfo, classify
from mlfuse.dialects import fusion, graph


@dataclass
class Value:
    id: int
    ssa: SSAValue
    shape: tuple[int, ...]
    numel: int
    nbytes: int
    producer: int | None  # node index; None for arguments and constants
    constant: str | None = None  # "splat" or "dense" for graph.constant results
    users: list[int] = field(default_factory=list)  # node indices, each once
    escapes: bool = False  # used by the terminator (or by an op that is not a node)


@dataclass
class Node:
    index: int
    op: Operation
    mnemonic: str  # "sub", "reduce_sum", ... (the dialect prefix dropped for graph ops)
    info: OpInfo
    operands: tuple[int, ...]  # value ids, in operand order (repeats kept)
    results: tuple[int, ...]
    domain: int  # size of the op's iteration space (elements)
    fusible: bool
    no_fuse: bool = False

    @property
    def op_class(self) -> OpClass:
        return self.info.op_class

    @property
    def is_kernel(self) -> bool:
        """Whether running the op alone is a kernel (a foreign scalar op is not)."""
        return any(isinstance(v.type, TensorType) for v in (*self.op.operands, *self.op.results))


def element_bytes(t) -> int:
    if not isinstance(t, TensorType):
        return 0
    return abi.element_bytes(t.get_element_type())


# A value read by this many ops or more is no reason to put its readers together (a
# broadcast constant or a mask that every layer reads): neighbourhoods and sibling patterns
# skip it, since joining its readers pairwise grows with the square of their number (a chain
# of 1000 tanh/mul/add sharing two broadcast constants took 40 s to plan).
MANY_READERS = 16


def bits(mask: int) -> Iterator[int]:
    """Indices of the set bits of `mask`, ascending."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def mnemonic_of(op: Operation) -> str:
    name = op.name
    return name.removeprefix("graph.") if name.startswith("graph.") else name.replace(".", "_")


class FusionGraph:
    """Ops of one function body as numbered nodes, with reachability as bit masks."""

    def __init__(self, fn: func.FuncOp | None, nodes: list[Node], values: list[Value]):
        self.fn = fn
        self.nodes = nodes
        self.values = values
        n = len(nodes)
        self.all_mask = (1 << n) - 1
        self.preds: list[tuple[int, ...]] = []
        self.succs: list[list[int]] = [[] for _ in range(n)]
        for node in nodes:
            ps = sorted({values[v].producer for v in node.operands if values[v].producer is not None})
            self.preds.append(tuple(ps))
            for p in ps:
                self.succs[p].append(node.index)
        self.anc = [0] * n
        for i in range(n):
            m = 0
            for p in self.preds[i]:
                m |= self.anc[p] | (1 << p)
            self.anc[i] = m
        self.desc = [0] * n
        for i in reversed(range(n)):
            m = 0
            for s in self.succs[i]:
                m |= self.desc[s] | (1 << s)
            self.desc[i] = m
        self.pred_mask = [sum(1 << p for p in ps) for ps in self.preds]
        self.succ_mask = [sum(1 << s for s in ss) for ss in self.succs]
        self.fusible_mask = sum(1 << node.index for node in nodes if node.fusible)
        # fusible ops none of whose results leave the function: a pattern may take them in
        # once it holds all their users (succ_mask), see candidates.absorb_producers
        self.absorbable_mask = sum(
            1 << node.index for node in nodes if node.fusible and not any(values[r].escapes for r in node.results)
        )

    # --- construction ------------------------------------------------------------------

    @staticmethod
    def from_function(
        fn: func.FuncOp,
        fine_gemm_flops: int = DEFAULT_FINE_GEMM_FLOPS,
        no_fuse: frozenset[int] = frozenset(),
    ) -> FusionGraph:
        """Number the ops of `fn`'s body. `no_fuse` holds op positions in the block
        (counting every op) that must stay single kernels."""
        block = fn.body.block
        values: list[Value] = []
        ids: dict[SSAValue, int] = {}

        def add_value(v: SSAValue, producer: int | None, constant: str | None = None) -> None:
            t = v.type
            shape = tuple(t.get_shape()) if isinstance(t, TensorType) else ()
            numel = math.prod(shape) if isinstance(t, TensorType) else 0
            ids[v] = len(values)
            values.append(Value(len(values), v, shape, numel, numel * element_bytes(t), producer, constant))

        for arg in block.args:
            add_value(arg, None)
        nodes: list[Node] = []
        for position, op in enumerate(block.ops):
            if op.has_trait(IsTerminator):
                for v in op.operands:
                    if v in ids:
                        values[ids[v]].escapes = True
                continue
            if isinstance(op, graph.ConstantOp):
                splat = graph.splat_value(op.value) is not None
                add_value(op.result, None, "splat" if splat else "dense")
                continue
            info = classify(op, fine_gemm_flops)
            index = len(nodes)
            operands = []
            for v in used_values(op):
                if v not in ids:  # defined outside the function body: treat as an argument
                    add_value(v, None)
                operands.append(ids[v])
            for r in op.results:
                add_value(r, index)
            pinned = position in no_fuse
            nodes.append(
                Node(
                    index,
                    op,
                    mnemonic_of(op),
                    info,
                    tuple(operands),
                    tuple(ids[r] for r in op.results),
                    domain=iteration_domain(op, info),
                    fusible=info.fusible and not pinned,
                    no_fuse=pinned,
                )
            )
            for v in operands:
                if index not in values[v].users:
                    values[v].users.append(index)
        return FusionGraph(fn, nodes, values)

    # --- queries -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.nodes)

    def members(self, mask: int) -> list[int]:
        return list(bits(mask))

    def is_convex(self, mask: int) -> bool:
        """No path leaves the pattern and re-enters it."""
        return self.convex_violation(mask) == 0

    def convex_violation(self, mask: int) -> int:
        """Ops outside `mask` that lie on a path from the pattern back into it."""
        down = up = 0
        for i in bits(mask):
            down |= self.desc[i]
            up |= self.anc[i]
        return down & up & ~mask

    def convex_closure(self, mask: int) -> int:
        return mask | self.convex_violation(mask)

    def external_preds(self, mask: int) -> int:
        m = 0
        for i in bits(mask):
            m |= self.pred_mask[i]
        return m & ~mask

    def neighbourhood(self, mask: int) -> int:
        """Ops next to a pattern: producers, consumers, and other readers of the values it
        reads (skipping splats, scalars and values read by MANY_READERS or more ops). Includes `mask`."""
        near = 0
        for i in bits(mask):
            near |= self.pred_mask[i] | self.succ_mask[i]
            for v in self.nodes[i].operands:
                val = self.values[v]
                if val.constant != "splat" and val.numel > 1 and len(val.users) < MANY_READERS:
                    near |= sum(1 << u for u in val.users)
        return near

    def kernel_successors(self, groups: list[int] | tuple[int, ...]) -> list[set[int]]:
        """For each group (a mask of ops), the indices of the groups that consume its results."""
        owner: dict[int, int] = {}
        for gi, m in enumerate(groups):
            for i in bits(m):
                owner[i] = gi
        succ: list[set[int]] = []
        for m in groups:
            out = 0
            for i in bits(m):
                out |= self.succ_mask[i]
            succ.append({owner[j] for j in bits(out & ~m)})
        return succ

    def components(self, mask: int) -> list[int]:
        """Weakly connected components of the pattern through its internal edges."""
        comps: list[int] = []
        rest = mask
        while rest:
            seed = rest & -rest
            comp = frontier = seed
            while frontier:
                grown = 0
                for i in bits(frontier):
                    grown |= (self.pred_mask[i] | self.succ_mask[i]) & mask
                frontier = grown & ~comp
                comp |= frontier
            comps.append(comp)
            rest &= ~comp
        return comps

    def value_name(self, vid: int) -> str:
        v = self.values[vid]
        return f"%{v.ssa.name_hint}" if v.ssa.name_hint else f"value #{vid}"

    def node_label(self, i: int) -> str:
        """`'graph.sub' #3 (%d)`: the op, its position among the nodes, its result's name."""
        node = self.nodes[i]
        hints = [self.values[r].ssa.name_hint for r in node.results if self.values[r].ssa.name_hint]
        return f"'{node.op.name}' #{i}" + (f" (%{hints[0]})" if hints else "")


class Partition:
    """A partition of the ops into groups, merged step by step without cycles."""

    def __init__(self, fgraph: FusionGraph, groups: list[int] | None = None):
        self.graph = fgraph
        self.owner = list(range(len(fgraph)))
        self.masks: dict[int, int] = {i: 1 << i for i in range(len(fgraph))}
        for m in groups or []:
            first = (m & -m).bit_length() - 1
            for i in bits(m):
                self.masks.pop(i, None)
                self.owner[i] = first
            self.masks[first] = m

    def group_of(self, i: int) -> int:
        return self.owner[i]

    def mask(self, gid: int) -> int:
        return self.masks[gid]

    def out_ops(self, mask: int) -> int:
        out = 0
        for i in bits(mask):
            out |= self.graph.succ_mask[i]
        return out & ~mask

    def creates_cycle(self, *gids: int) -> bool:
        """Whether merging the groups closes a cycle: a path leaves their union and
        comes back through other groups."""
        union = 0
        for gid in gids:
            union |= self.masks[gid]
        frontier = self.out_ops(union)
        seen = union
        while frontier:
            expanded = 0
            for i in bits(frontier):
                expanded |= self.masks[self.owner[i]]
            expanded &= ~seen
            seen |= expanded
            out = self.out_ops(expanded)
            if out & union:
                return True
            frontier = out & ~seen
        return False

    def merge(self, a: int, b: int) -> int:
        keep, gone = (a, b) if a < b else (b, a)
        for i in bits(self.masks[gone]):
            self.owner[i] = keep
        self.masks[keep] |= self.masks.pop(gone)
        return keep

    def groups(self) -> list[int]:
        return list(self.masks.values())


def used_values(op: Operation) -> list[SSAValue]:
    """The op's operands, then values its regions use from outside them (captures)."""
    values = list(op.operands)
    if op.regions:
        inner = {r for nested in op.walk() for r in nested.results}
        inner |= {a for region in op.regions for block in region.blocks for a in block.args}
        for nested in op.walk():
            if nested is not op:
                values += [v for v in nested.operands if v not in inner and v not in values]
    return values


def iteration_domain(op: Operation, info: OpInfo) -> int:
    """Elements the op's loop nest visits: its input for reductions, M*N*batch for
    contractions, otherwise its result."""
    if info.op_class is OpClass.REDUCTION:
        return math.prod(graph.shape_of(op.operands[0]))
    if op.results and isinstance(op.results[0].type, TensorType):
        return math.prod(graph.shape_of(op.results[0]))
    return 0


def is_plan_node(op: Operation) -> bool:
    """Ops the planner numbers (everything but constants and the terminator)."""
    return not isinstance(op, graph.ConstantOp) and not op.has_trait(IsTerminator)


def wraps_in_group(op: Operation) -> bool:
    """Graph ops become fusion groups; other nodes (existing groups, foreign ops) stay."""
    return op.name.startswith("graph.") and not isinstance(op, fusion.GroupOp)
