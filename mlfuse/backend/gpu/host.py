"""Graph functions of fusion groups -> kernel.funcs and a host function of launches.

Every fusion.group becomes one kernel (graph ops outside groups become their
own kernel, as singleton groups would). The tensor function becomes a host
function on buffers in global memory: its results become trailing output
arguments, intermediates between kernels `memref.alloc`s, non-splat constants
`memref.global`s that the runtime uploads, and every group a `kernel.launch`
(preceded by `kernel.memset` of what the kernel accumulates into atomically).

    func.func @main(%x: memref<4x8xf32, 1>, %out0: memref<4x8xf32, 1>)
        attributes {kernel.results = 1 : i64} {
      kernel.launch @fused_sub_exp(%x, %out0) {grid = ..., block = ..., dynamic_shared = 0 : i64} : ...
      func.return
    }
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import func, memref
from xdsl.dialects.builtin import (
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    i32,
    i64,
)
from xdsl.ir import Block, Operation, Region, SSAValue

from mlfuse.backend.gpu.kernels import (
    KernelContext,
    build_body,
    global_memref,
    global_split,
)
from mlfuse.backend.gpu.mapping import Schedule, analyze, choose_schedule
from mlfuse.backend.gpu.scalar import IR
from mlfuse.backend.gpu.targets import GpuTarget
from mlfuse.diagnostics import Diagnostic, location_of
from mlfuse.dialects import fusion, graph, kernel

SCHEDULE_ATTR = "gpu.schedule"
RESULTS_ATTR = "kernel.results"


def buffer_type(t) -> MemRefType:
    assert isinstance(t, TensorType)
    return global_memref(t.get_shape(), t.get_element_type())


def emit(host: IR, op: Operation) -> SSAValue:
    """Insert `op`, an op with a result, and return its (first) result."""
    value = host.op(op)
    assert value is not None
    return value


def wrap_singletons(fn: func.FuncOp) -> None:
    """Put every graph op outside a group (constants aside) into a fusion.group of kind single."""
    for op in list(fn.body.block.ops):
        if isinstance(op, fusion.GroupOp | func.ReturnOp | graph.ConstantOp):
            continue
        if op.dialect_name() != "graph":
            raise Diagnostic(f"the GPU backend cannot map '{op.name}' outside a fusion group", location_of(op))
        operands = list(dict.fromkeys(op.operands))
        block = Block(arg_types=[v.type for v in operands])
        inner = op.clone()
        for i, v in enumerate(op.operands):
            inner.operands[i] = block.args[operands.index(v)]
        block.add_op(inner)
        block.add_op(fusion.YieldOp(*inner.results))
        group = fusion.GroupOp(op.name.replace(".", "_"), "single", operands, [r.type for r in op.results], Region(block))
        group.location = op.location
        fn.body.block.insert_op_before(group, op)
        for old, new in zip(op.results, group.results):
            old.replace_all_uses_with(new)
        fn.body.block.erase_op(op)


def hoist_constants(group: fusion.GroupOp) -> None:
    """Non-splat constants inside a group become group inputs (uploaded by the host)."""
    for op in list(group.block.ops):
        if isinstance(op, graph.ConstantOp) and graph.splat_value(op.value) is None:
            outer = op.clone()
            parent = group.parent_block()
            assert parent is not None
            parent.insert_op_before(outer, group)
            arg = group.block.insert_arg(op.result.type, len(group.block.args))
            op.result.replace_all_uses_with(arg)
            group.block.erase_op(op)
            group.operands = [*group.operands, outer.result]


def schedule_of(group: fusion.GroupOp, gpu: GpuTarget) -> Schedule:
    attr = group.attributes.get(SCHEDULE_ATTR)
    if attr is not None:
        return Schedule.from_attr(attr)  # type: ignore[arg-type]
    return choose_schedule(analyze(group), gpu)


def annotate(module: ModuleOp, gpu: GpuTarget) -> None:
    """gpu-schedule: record the mapping chosen for every group (singletons wrapped first)."""
    for fn in [op for op in module.ops if isinstance(op, func.FuncOp)]:
        wrap_singletons(fn)
        for group in [op for op in fn.body.block.ops if isinstance(op, fusion.GroupOp)]:
            hoist_constants(group)
            group.attributes[SCHEDULE_ATTR] = choose_schedule(analyze(group), gpu).to_attr()


def kernel_name(group: fusion.GroupOp, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", group.group_name.data) or "kernel"
    name, n = base, 1
    while name in taken:
        name = f"{base}_{n}"
        n += 1
    taken.add(name)
    return name


def build_kernel(group: fusion.GroupOp, schedule: Schedule, name: str) -> tuple[kernel.KernelFuncOp, list[str]]:
    """The kernel of a group; returns it and the roles of its arguments, in order:
    'in:<k>' (group operand k), 'out:<k>' (group result k), 'scratch:<k>' (reduction k), 'counter'."""
    info = analyze(group)
    # one kernel argument per distinct outer value (noalias)
    roles: list[str] = []
    arg_types = []
    first_of: dict[SSAValue, int] = {}
    input_arg: list[int] = []
    for k, outer in enumerate(group.inputs):
        if outer not in first_of:
            first_of[outer] = len(roles)
            roles.append(f"in:{k}")
            arg_types.append(buffer_type(outer.type))
        input_arg.append(first_of[outer])
    for k, r in enumerate(group.results):
        roles.append(f"out:{k}")
        arg_types.append(buffer_type(r.type))
    scratch_of: dict[SSAValue, int] = {}
    if schedule.mapping == "global":
        for k, r in enumerate(info.reductions):
            scratch_of[r.result] = len(roles)
            roles.append(f"scratch:{k}")
            arg_types.append(buffer_type(r.result.type))
        roles.append("counter")
        arg_types.append(global_memref([1], i32))
    kfunc = kernel.KernelFuncOp(
        name,
        arg_types,
        schedule.block,
        min_blocks_per_sm=schedule.min_blocks_per_sm or None,
        cooperative=schedule.cooperative,
    )
    kfunc.location = group.location
    args = kfunc.entry.args
    n_in = len(first_of)
    ctx = KernelContext(
        ir=IR(kfunc.entry),
        info=info,
        schedule=schedule,
        buffers={a: args[input_arg[k]] for k, a in enumerate(group.block.args)},
        outputs=list(args[n_in : n_in + len(group.results)]),
        scratch={v: args[i] for v, i in scratch_of.items()},
        counter=args[-1] if schedule.mapping == "global" else None,
    )
    build_body(ctx)
    if ctx.dynamic_shared:
        kfunc.properties["dynamic_shared"] = IntegerAttr(ctx.dynamic_shared, i64)
    return kfunc, roles


def map_function(fn: func.FuncOp, module: ModuleOp, gpu: GpuTarget, taken: set[str]) -> list[Operation]:
    """Kernels and the host function for one tensor function; returns the new top-level ops."""
    reject_unsigned(fn)
    wrap_singletons(fn)
    for group in [op for op in fn.body.block.ops if isinstance(op, fusion.GroupOp)]:
        hoist_constants(group)
    inputs = list(fn.body.block.args)
    ret = fn.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    results = list(ret.arguments)
    reject_non_tensors(fn)
    host_block = Block(arg_types=[buffer_type(v.type) for v in inputs] + [buffer_type(v.type) for v in results])
    for a, v in zip(host_block.args, inputs):
        a.name_hint = v.name_hint
    out_args = host_block.args[len(inputs) :]
    buffers: dict[SSAValue, SSAValue] = dict(zip(inputs, host_block.args))
    returned_at: dict[SSAValue, int] = {}
    for p, v in enumerate(results):
        returned_at.setdefault(v, p)
    placement = ResultBuffers(out_args, returned_at)
    host = IR(host_block)
    new_ops: list[Operation] = []
    for op in fn.body.block.ops:
        if isinstance(op, graph.ConstantOp):
            new_ops.append(host_constant(op, host, buffers, taken))
            continue
        if isinstance(op, func.ReturnOp):
            break
        assert isinstance(op, fusion.GroupOp)
        new_ops.append(launch_group(op, host, buffers, placement, gpu, taken))
    for p, v in enumerate(results):
        if buffers[v] is not out_args[p]:
            host.op(memref.CopyOp(buffers[v], out_args[p]))
    host.op(func.ReturnOp())
    host_fn = func.FuncOp(fn.sym_name.data, ([a.type for a in host_block.args], []), Region(host_block))
    host_fn.attributes[RESULTS_ATTR] = IntegerAttr(len(results), i64)
    host_fn.location = fn.location
    new_ops.append(host_fn)
    return new_ops


def reject_non_tensors(fn: func.FuncOp) -> None:
    """The GPU backend maps functions whose arguments and results are all tensors."""
    for t in [*fn.function_type.inputs.data, *fn.function_type.outputs.data]:
        if not isinstance(t, TensorType):
            raise Diagnostic(f"@{fn.sym_name.data}: the GPU backend maps functions of tensors, got {t}", location_of(fn))


def host_constant(op: graph.ConstantOp, host: IR, buffers: dict[SSAValue, SSAValue], taken: set[str]) -> Operation:
    """A tensor constant as a global buffer (returned, for the module) that the host
    function reads through `memref.get_global` (recorded in `buffers`)."""
    name = f"__constant_{len(taken)}"
    taken.add(name)
    t = buffer_type(op.result.type)
    global_op = memref.GlobalOp.get(StringAttr(name), t, op.value, constant=None)
    buffers[op.result] = emit(host, memref.GetGlobalOp(name, t))
    return global_op


@dataclass
class ResultBuffers:
    """Where the host function's results go: its output arguments, by the first position
    at which each value is returned."""

    out_args: Sequence[SSAValue]
    returned_at: dict[SSAValue, int]

    def place(self, op: fusion.GroupOp, host: IR, buffers: dict[SSAValue, SSAValue]) -> None:
        """A buffer for every result of `op`: the output argument of a returned value, or
        else a new allocation."""
        for r in op.results:
            if r in self.returned_at and r not in buffers:
                buffers[r] = self.out_args[self.returned_at[r]]
            elif r not in buffers:
                buffers[r] = emit(host, memref.AllocOp([], [], buffer_type(r.type)))


def launch_group(
    op: fusion.GroupOp,
    host: IR,
    buffers: dict[SSAValue, SSAValue],
    results: ResultBuffers,
    gpu: GpuTarget,
    taken: set[str],
) -> kernel.KernelFuncOp:
    """Build the kernel of one fusion group and launch it from the host function, after
    placing its results and zeroing the buffers it accumulates into; `buffers` must
    hold the group's inputs. Returns the kernel."""
    schedule = schedule_of(op, gpu)
    kfunc, roles = build_kernel(op, schedule, kernel_name(op, taken))
    results.place(op, host, buffers)
    args, zeroed = kernel_arguments(op, roles, schedule, host, buffers)
    for buf in zeroed:
        host.op(kernel.MemsetOp(buf))
    launch = kernel.LaunchOp(kfunc.sym_name.data, args, schedule.grid, schedule.block, kfunc.dynamic_shared_bytes)
    launch.location = op.location
    host.op(launch)
    return kfunc


def kernel_arguments(
    op: fusion.GroupOp, roles: list[str], schedule: Schedule, host: IR, buffers: dict[SSAValue, SSAValue]
) -> tuple[list[SSAValue], list[SSAValue]]:
    """(the buffers passed for each kernel argument role, those to zero before the launch):
    group inputs and outputs, global scratch for reductions, and the grid barrier's counter."""
    args: list[SSAValue] = []
    zeroed: list[SSAValue] = []
    info = analyze(op)
    for role in roles:
        kind, _, k = role.partition(":")
        if kind == "in":
            args.append(buffers[op.inputs[int(k)]])
        elif kind == "out":
            args.append(buffers[op.results[int(k)]])
            if schedule.split > 1:
                zeroed.append(args[-1])
        elif kind == "scratch":
            red = info.reductions[int(k)]
            buf = emit(host, memref.AllocOp([], [], buffer_type(red.result.type)))
            args.append(buf)
            if global_split(red, schedule.grid[0] * schedule.block[0]) > 1:
                zeroed.append(buf)
        else:
            counter = emit(host, memref.AllocOp([], [], global_memref([1], i32)))
            args.append(counter)
            zeroed.append(counter)
    return args, zeroed


def reject_unsigned(fn: func.FuncOp) -> None:
    """Unsigned tensors are CPU-only: the GPU kernels would compare, divide and reduce
    them with the signed forms (their reductions and shuffles are not told the signedness)."""
    for op in fn.walk():
        for v in (*op.operands, *op.results):
            if isinstance(v.type, TensorType) and graph.is_unsigned(v.type.get_element_type()):
                raise Diagnostic(
                    f"the GPU backend does not support unsigned integer tensors ({v.type.get_element_type()}) yet",
                    location_of(op) or location_of(fn),
                )


def map_module(module: ModuleOp, gpu: GpuTarget) -> None:
    """gpu-map-kernels: every tensor function -> kernels + host function."""
    taken: set[str] = set()
    for op in list(module.ops):
        if isinstance(op, func.FuncOp) and any(isinstance(t, TensorType) for t in op.function_type.inputs.data):
            for new in map_function(op, module, gpu, taken):
                module.body.block.insert_op_before(new, op)
            module.body.block.erase_op(op)
