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

`map_module` is a dialect conversion in MLIR's manner: RewritePatterns that
xDSL's PatternRewriteWalker applies, in three walks, once `check_function` has
reported whatever cannot be mapped (before anything changes):

1. legalize (`legalize_patterns`, over each tensor function's body): `WrapSingleton`
   puts a graph op outside a group into a fusion.group of kind single,
   `HoistConstant` makes a non-splat constant inside a group an input of the group;
2. convert (`conversion_patterns`, over the module; the walker visits an op before
   the ops inside it, so a function before its body, and its body in order):
   `ConvertSignature` makes a tensor function a host function (tensor arguments ->
   `memref<..., 1>` buffers, results -> trailing output arguments, `RESULTS_ATTR`
   counts them); `ConvertConstant` makes a graph.constant a `memref.global` read by
   `memref.get_global`; `ConvertGroup` builds a group's kernel.func (before the
   host function) and replaces the group by its launch, after the buffers of its
   results (an output argument for a returned value, else a `memref.alloc`) and the
   memsets of what it accumulates into; `ConvertReturn` copies into the output
   arguments that no kernel wrote and returns nothing. A converted value reaches
   the ops not converted yet as a `builtin.unrealized_conversion_cast` of its
   buffer to its tensor type, and a pattern finds an operand's buffer through that
   cast (`buffer_of`): the value -> buffer map is the IR itself;
3. xDSL's reconcile-unrealized-casts pattern removes the casts, all unused by
   then; one left would be a tensor whose producer was not converted (reported
   at its user).

`MappingState` holds what the patterns share: the target, the names taken by
kernels and globals, and the host functions made. Code generation can still
reject an op (mlfuse/backend/gpu/scalar.py): the walk (`apply_once`, in
mlfuse/conversion/patterns.py) raises that Diagnostic as it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import (
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnrealizedConversionCastOp,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.transforms.reconcile_unrealized_casts import ReconcileUnrealizedCastsPattern

from mlfuse.backend.gpu.kernels import (
    KernelContext,
    build_body,
    global_memref,
    global_split,
)
from mlfuse.backend.gpu.mapping import Schedule, analyze, choose_schedule
from mlfuse.backend.gpu.scalar import IR
from mlfuse.backend.gpu.targets import GpuTarget
from mlfuse.conversion.patterns import apply_once, is_tensor_function
from mlfuse.diagnostics import Diagnostic, location_of
from mlfuse.dialects import fusion, graph, kernel

SCHEDULE_ATTR = "gpu.schedule"
RESULTS_ATTR = "kernel.results"


def buffer_type(t) -> MemRefType:
    assert isinstance(t, TensorType)
    return global_memref(t.get_shape(), t.get_element_type())


def emit(host: Builder, op: Operation) -> SSAValue:
    """Insert `op`, an op with a result, and return its (first) result."""
    host.insert(op)
    return op.results[0]


# --- checks, before anything changes -----------------------------------------------------------


def check_function(fn: func.FuncOp) -> None:
    """Report, at its location, the first thing in `fn` that the GPU backend cannot map."""
    if len(fn.body.blocks) != 1:
        raise Diagnostic(f"@{fn.sym_name.data}: the GPU backend maps functions with a body of one block", location_of(fn))
    reject_unsigned(fn)
    reject_foreign_ops(fn)
    reject_non_tensors(fn)


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


def reject_foreign_ops(fn: func.FuncOp) -> None:
    """Outside groups, a function to map holds graph ops and its func.return only."""
    for op in fn.body.block.ops:
        if not isinstance(op, fusion.GroupOp | func.ReturnOp) and op.dialect_name() != "graph":
            raise Diagnostic(f"the GPU backend cannot map '{op.name}' outside a fusion group", location_of(op))


def reject_non_tensors(fn: func.FuncOp) -> None:
    """The GPU backend maps functions whose arguments and results are all tensors."""
    for t in [*fn.function_type.inputs.data, *fn.function_type.outputs.data]:
        if not isinstance(t, TensorType):
            raise Diagnostic(f"@{fn.sym_name.data}: the GPU backend maps functions of tensors, got {t}", location_of(fn))


# --- legalization: every kernel a group, every non-splat constant outside groups ------------------


class WrapSingleton(RewritePattern):
    """A graph op outside a group (constants aside) -> a fusion.group of kind single around it."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if op.dialect_name() != "graph" or isinstance(op, graph.ConstantOp) or not isinstance(op.parent_op(), func.FuncOp):
            return
        operands = list(dict.fromkeys(op.operands))
        block = Block(arg_types=[v.type for v in operands])
        inner = op.clone()
        for i, v in enumerate(op.operands):
            inner.operands[i] = block.args[operands.index(v)]
        block.add_op(inner)
        block.add_op(fusion.YieldOp(*inner.results))
        group = fusion.GroupOp(op.name.replace(".", "_"), "single", operands, [r.type for r in op.results], Region(block))
        group.location = op.location
        rewriter.insert(group, InsertPoint.before(op))
        for old, new in zip(op.results, group.results):
            rewriter.replace_all_uses_with(old, new)
        rewriter.erase(op)


class HoistConstant(RewritePattern):
    """A non-splat constant inside a group -> an input of the group (uploaded by the host),
    the constant moving before the group."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.ConstantOp, rewriter: PatternRewriter) -> None:
        group = op.parent_op()
        if not isinstance(group, fusion.GroupOp) or graph.splat_value(op.value) is not None:
            return
        outer = rewriter.insert(op.clone(), InsertPoint.before(group))
        arg = rewriter.insert_block_argument(group.block, len(group.block.args), op.result.type)
        rewriter.replace_all_uses_with(op.result, arg)
        rewriter.erase(op)
        group.operands = [*group.operands, outer.result]
        rewriter.notify_op_modified(group)


def legalize_patterns() -> list[RewritePattern]:
    return [WrapSingleton(), HoistConstant()]


def wrap_singletons(fn: func.FuncOp) -> None:
    """Put every graph op outside a group (constants aside) into a fusion.group of kind single."""
    reject_foreign_ops(fn)
    apply_once(fn.body, [WrapSingleton()])


def hoist_constants(group: fusion.GroupOp) -> None:
    """Non-splat constants inside a group become group inputs (uploaded by the host)."""
    apply_once(group.body, [HoistConstant()])


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


# --- kernels -------------------------------------------------------------------------------------


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


# --- the host function ---------------------------------------------------------------------------


def output_arguments(fn: func.FuncOp) -> Sequence[SSAValue]:
    """The trailing arguments of a host function that receive its results."""
    count = fn.attributes[RESULTS_ATTR]
    assert isinstance(count, IntegerAttr)
    args = fn.body.block.args
    return args[len(args) - count.value.data :]


def as_tensor(buffer: SSAValue, t: Attribute) -> UnrealizedConversionCastOp:
    """The materialization of a converted value for the users not converted yet: the
    tensor of type `t` that `buffer` holds."""
    return UnrealizedConversionCastOp.get([buffer], [t])


def replace_by_buffers(rewriter: PatternRewriter, op: Operation, buffers: Sequence[SSAValue]) -> None:
    """Replace `op` by the buffers of its results, read as tensors through casts. The
    casts take no names (xDSL passes a replaced value's name on, and reconcile-unrealized-casts
    would pass it on to the buffer): a buffer keeps its own."""
    for r, buffer in zip(op.results, buffers):
        cast = rewriter.insert(as_tensor(buffer, r.type))
        rewriter.replace_all_uses_with(r, cast.results[0])
        cast.results[0].name_hint = None
    rewriter.erase(op)


def buffer_of(value: SSAValue, rewriter: PatternRewriter) -> SSAValue:
    """The buffer that holds the tensor `value`: the input of the cast that stands for a
    converted value, or else (a value no pattern converted) a cast the other way, which
    reconcile-unrealized-casts cannot remove."""
    owner = value.owner
    if isinstance(owner, UnrealizedConversionCastOp) and isinstance(owner.inputs[0].type, MemRefType):
        return owner.inputs[0]
    return emit(rewriter, UnrealizedConversionCastOp.get([value], [buffer_type(value.type)]))


def host_constant(op: graph.ConstantOp, taken: set[str]) -> memref.GlobalOp:
    """A tensor constant as a global buffer, which the runtime uploads."""
    name = f"__constant_{len(taken)}"
    taken.add(name)
    return memref.GlobalOp.get(StringAttr(name), buffer_type(op.result.type), op.value, constant=None)


@dataclass
class ResultBuffers:
    """Where the host function's results go: its output arguments, by the first position
    at which each value is returned."""

    out_args: Sequence[SSAValue]
    returned_at: dict[SSAValue, int]

    @staticmethod
    def of(fn: func.FuncOp) -> ResultBuffers:
        """The output arguments of host function `fn`, for the values its func.return
        (not converted yet) returns."""
        ret = fn.body.block.last_op
        assert isinstance(ret, func.ReturnOp)
        returned_at: dict[SSAValue, int] = {}
        for p, v in enumerate(ret.arguments):
            returned_at.setdefault(v, p)
        return ResultBuffers(output_arguments(fn), returned_at)

    def place(self, op: fusion.GroupOp, host: Builder, buffers: dict[SSAValue, SSAValue]) -> None:
        """A buffer for every result of `op`: the output argument of a returned value, or
        else a new allocation."""
        for r in op.results:
            if r in self.returned_at and r not in buffers:
                buffers[r] = self.out_args[self.returned_at[r]]
            elif r not in buffers:
                buffers[r] = emit(host, memref.AllocOp([], [], buffer_type(r.type)))


def launch_group(
    op: fusion.GroupOp,
    host: Builder,
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
        host.insert(kernel.MemsetOp(buf))
    launch = kernel.LaunchOp(kfunc.sym_name.data, args, schedule.grid, schedule.block, kfunc.dynamic_shared_bytes)
    launch.location = op.location
    host.insert(launch)
    return kfunc


def kernel_arguments(
    op: fusion.GroupOp, roles: list[str], schedule: Schedule, host: Builder, buffers: dict[SSAValue, SSAValue]
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


# --- conversion patterns ---------------------------------------------------------------------------


@dataclass
class MappingState:
    """What the conversion patterns share."""

    gpu: GpuTarget
    taken: set[str] = field(default_factory=set)
    """symbol names given to kernels and globals so far"""
    hosts: list[func.FuncOp] = field(default_factory=list)
    """the host functions made so far, whose bodies the other patterns convert"""

    def host_of(self, op: Operation) -> func.FuncOp | None:
        """The host function that `op` is directly in, if one is being converted."""
        fn = op.parent_op()
        return fn if isinstance(fn, func.FuncOp) and fn in self.hosts else None


def materialize_tensor(rewriter: PatternRewriter, buffer: SSAValue, t: Attribute, point: InsertPoint) -> None:
    """Let the uses of `buffer` read it as the tensor of type `t`, through a cast at `point`."""
    cast = rewriter.insert(as_tensor(buffer, t), point)
    rewriter.replace_uses_with_if(buffer, cast.results[0], lambda use: use.operation is not cast)


@dataclass
class ConvertSignature(RewritePattern):
    """A tensor function -> a host function on buffers: each tensor argument a
    `memref<..., 1>` (read as the tensor by the ops not converted yet), each result a
    trailing output argument; `RESULTS_ATTR` counts those."""

    state: MappingState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, fn: func.FuncOp, rewriter: PatternRewriter) -> None:
        if not is_tensor_function(fn):
            return
        results = fn.function_type.outputs.data
        body = rewriter.move_region_contents_to_new_regions(fn.body)
        block = body.block
        for arg in list(block.args):
            new = rewriter.replace_value_with_new_type(arg, buffer_type(arg.type))
            materialize_tensor(rewriter, new, arg.type, InsertPoint.at_start(block))
        for t in results:
            rewriter.insert_block_argument(block, len(block.args), buffer_type(t))
        host_fn = func.FuncOp(fn.sym_name.data, ([a.type for a in block.args], []), body)
        host_fn.attributes[RESULTS_ATTR] = IntegerAttr(len(results), i64)
        host_fn.location = fn.location
        self.state.hosts.append(host_fn)
        rewriter.replace(fn, host_fn)


@dataclass
class ConvertConstant(RewritePattern):
    """A graph.constant in a host function -> a `memref.global` (before the function)
    that the function reads with `memref.get_global`."""

    state: MappingState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.ConstantOp, rewriter: PatternRewriter) -> None:
        fn = self.state.host_of(op)
        if fn is None:
            return
        global_op = rewriter.insert(host_constant(op, self.state.taken), InsertPoint.before(fn))
        buffer = emit(rewriter, memref.GetGlobalOp(global_op.sym_name.data, global_op.type))
        replace_by_buffers(rewriter, op, [buffer])


@dataclass
class ConvertGroup(RewritePattern):
    """A fusion.group in a host function -> its kernel.func (before the function) and a
    `kernel.launch` of it on the buffers of the group's operands and results."""

    state: MappingState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: fusion.GroupOp, rewriter: PatternRewriter) -> None:
        fn = self.state.host_of(op)
        if fn is None:
            return
        buffers = {v: buffer_of(v, rewriter) for v in op.inputs}
        kfunc = launch_group(op, rewriter, buffers, ResultBuffers.of(fn), self.state.gpu, self.state.taken)
        rewriter.insert(kfunc, InsertPoint.before(fn))
        replace_by_buffers(rewriter, op, [buffers[r] for r in op.results])


@dataclass
class ConvertReturn(RewritePattern):
    """The func.return of a host function -> a return of nothing, after copying each
    returned value that is not in its output argument yet (an input, a constant, a value
    returned twice)."""

    state: MappingState

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.ReturnOp, rewriter: PatternRewriter) -> None:
        fn = self.state.host_of(op)
        if fn is None or not op.arguments:
            return
        for value, out in zip(op.arguments, output_arguments(fn)):
            buffer = buffer_of(value, rewriter)
            if buffer is not out:
                rewriter.insert(memref.CopyOp(buffer, out))
        rewriter.replace(op, func.ReturnOp())


def conversion_patterns(state: MappingState) -> list[RewritePattern]:
    return [ConvertSignature(state), ConvertConstant(state), ConvertGroup(state), ConvertReturn(state)]


def remove_casts(fn: func.FuncOp) -> None:
    """Remove the casts the conversion left in host function `fn`; one that stays means
    a tensor that no pattern gave a buffer, reported at its user."""
    apply_once(fn.body, [ReconcileUnrealizedCastsPattern()])
    for op in fn.body.block.ops:
        if isinstance(op, UnrealizedConversionCastOp):
            user = next((use.operation for use in op.results[0].uses), op)
            raise Diagnostic(f"the GPU backend found no buffer for an operand of '{user.name}'", location_of(user))


def map_module(module: ModuleOp, gpu: GpuTarget) -> None:
    """gpu-map-kernels: every tensor function -> kernels + host function."""
    functions = [op for op in module.ops if isinstance(op, func.FuncOp) and is_tensor_function(op)]
    for fn in functions:
        check_function(fn)
    for fn in functions:
        apply_once(fn.body, legalize_patterns())
    state = MappingState(gpu)
    apply_once(module, conversion_patterns(state))
    for fn in state.hosts:
        remove_casts(fn)
