"""Rewrite a function so that every kernel of a plan is one `fusion.group`.

Each group gets the plan's ops (cloned in program order), its external values as
operands (splat constants are cloned inside instead: they cost nothing), and every
value used after it as a result (multi-output). Groups are placed in the plan's
dependence order; ops that are not graph ops (existing groups, foreign ops) stay as
they are. Attributes record the model's view of the kernel:

- `modeled_bytes` (i64): bytes the kernel reads and writes in memory;
- `modeled_time_us` (f64): its modeled time;
- `stitch` (array of strings): one entry per op of the region, in order, saying where
  that op's result lives for its consumers inside the kernel: "register", "shared"
  (GPU shared memory / CPU per-core scratch) or "global" (memory plus a grid-wide
  barrier); "none" when no op of the kernel uses it (it only leaves the kernel).
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, FloatAttr, IntegerAttr, StringAttr, f64, i64
from xdsl.ir import Block, Operation, Region, SSAValue

from mlfuse.analysis.cost_model import REGISTER, PatternCost
from mlfuse.analysis.fusion_graph import FusionGraph, bits, wraps_in_group
from mlfuse.analysis.op_classes import OpClass
from mlfuse.dialects import fusion, graph

MAX_NAMED_OPS = 8


def group_name(fgraph: FusionGraph, mask: int) -> str:
    """`fused_` and the ops' names in order (broadcasts left out unless alone)."""
    nodes = [fgraph.nodes[i] for i in bits(mask)]
    if len(nodes) == 1:
        return nodes[0].mnemonic
    names = [n.mnemonic for n in nodes if n.op_class is not OpClass.BROADCAST] or [n.mnemonic for n in nodes]
    if len(names) > MAX_NAMED_OPS:
        names = [*names[: MAX_NAMED_OPS - 1], f"and_{len(names) - MAX_NAMED_OPS + 1}_more"]
    return "fused_" + "_".join(names)


def build_group(fgraph: FusionGraph, mask: int, cost: PatternCost, name: str) -> fusion.GroupOp:
    values = fgraph.values
    members = [fgraph.nodes[i] for i in bits(mask)]
    inputs = [values[v].ssa for v in cost.inputs]
    block = Block(arg_types=[v.type for v in inputs])
    mapper: dict[SSAValue, SSAValue] = {}
    for outer, arg in zip(inputs, block.args):
        mapper[outer] = arg
        if outer.name_hint:
            arg.name_hint = outer.name_hint
    body: list[Operation] = []
    stitch: list[str] = []
    for node in members:
        for v in node.operands:
            ssa = values[v].ssa
            if values[v].constant == "splat" and ssa not in mapper:
                owner = ssa.owner
                assert isinstance(owner, graph.ConstantOp)
                body.append(owner.clone(value_mapper=mapper))
                stitch.append(REGISTER)
    for node in members:
        body.append(node.op.clone(value_mapper=mapper))
        stitch.append(cost.stitch.get(node.index, "none"))
    body.append(fusion.YieldOp(*[mapper[values[v].ssa] for v in cost.outputs]))
    block.add_ops(body)
    group = fusion.GroupOp(
        name,
        cost.kind,
        inputs,
        [values[v].ssa.type for v in cost.outputs],
        Region(block),
        attributes={
            "modeled_bytes": IntegerAttr(int(cost.bytes), i64),
            "modeled_time_us": FloatAttr(round(float(cost.time_us), 4), f64),
            "stitch": ArrayAttr([StringAttr(s) for s in stitch]),
        },
    )
    group.location = members[0].op.location
    return group


def apply_plan(fgraph: FusionGraph, groups: list[int], costs: list[PatternCost]) -> list[fusion.GroupOp]:
    """Replace the ops of `fgraph.fn` by one `fusion.group` per planned kernel.

    `groups` must be in dependence order (see `planners.order_groups`)."""
    fn = fgraph.fn
    assert isinstance(fn, func.FuncOp)
    block = fn.body.block
    terminator = block.last_op
    assert terminator is not None
    constants = [op for op in block.ops if isinstance(op, graph.ConstantOp)]
    for op in constants:  # constants first: kernels may now come before their old position
        op.detach()
    first = block.first_op
    for op in constants:
        if first is None:
            block.insert_op_before(op, terminator)
        else:
            block.insert_op_before(op, first)

    used_names: dict[str, int] = {}
    created: list[fusion.GroupOp] = []
    replaced: list[tuple[SSAValue, SSAValue]] = []
    grouped: list[Operation] = []
    for mask, cost in zip(groups, costs):
        members = list(bits(mask))
        if len(members) == 1 and not wraps_in_group(fgraph.nodes[members[0]].op):
            op = fgraph.nodes[members[0]].op
            op.detach()
            block.insert_op_before(op, terminator)
            continue
        name = group_name(fgraph, mask)
        count = used_names.get(name, 0)
        used_names[name] = count + 1
        group = build_group(fgraph, mask, cost, name if count == 0 else f"{name}_{count}")
        block.insert_op_before(group, terminator)
        created.append(group)
        replaced += [(fgraph.values[v].ssa, r) for v, r in zip(cost.outputs, group.results)]
        grouped += [fgraph.nodes[i].op for i in members]
    for old, new in replaced:
        old.replace_all_uses_with(new)
    position = {id(node.op): node.index for node in fgraph.nodes}
    for op in sorted(grouped, key=lambda o: -position[id(o)]):  # users before producers
        block.erase_op(op)
    for op in constants:
        if all(not r.uses for r in op.results):
            block.erase_op(op)
    return created

