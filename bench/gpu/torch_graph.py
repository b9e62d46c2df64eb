"""A graph-dialect function as a PyTorch function: the baseline mlfuse's GPU kernels are timed against.

The function is generated as straight-line Python (one torch call per graph op,
fusion groups inlined), the way a person would write the model in eager PyTorch;
`torch.compile` of the same function is the fused baseline.

    fn = torch_function(module)          # fn(*cuda_tensors) -> tuple of tensors
    compiled = torch.compile(fn)
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from mlfuse.dialects import fusion, graph
from mlfuse.reference import find_function

UNARY = {
    graph.NegOp: "torch.neg({0})",
    graph.AbsOp: "torch.abs({0})",
    graph.ExpOp: "torch.exp({0})",
    graph.LogOp: "torch.log({0})",
    graph.SqrtOp: "torch.sqrt({0})",
    graph.RsqrtOp: "torch.rsqrt({0})",
    graph.ReciprocalOp: "torch.reciprocal({0})",
    graph.TanhOp: "torch.tanh({0})",
    graph.ErfOp: "torch.erf({0})",
    graph.SigmoidOp: "torch.sigmoid({0})",
    graph.ReluOp: "torch.relu({0})",
}
BINARY = {
    graph.AddOp: "({0} + {1})",
    graph.SubOp: "({0} - {1})",
    graph.MulOp: "({0} * {1})",
    graph.DivOp: "({0} / {1})",
    graph.MaxOp: "torch.maximum({0}, {1})",
    graph.MinOp: "torch.minimum({0}, {1})",
    graph.PowOp: "torch.pow({0}, {1})",
}
COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
REDUCE = {"sum": "torch.sum", "mean": "torch.mean", "max": "torch.amax", "min": "torch.amin"}
TORCH_DTYPES = {"float32": "torch.float32", "float16": "torch.float16", "float64": "torch.float64",
                "int32": "torch.int32", "int64": "torch.int64", "int8": "torch.int8", "bool": "torch.bool"}


class TorchSource:
    """Python source of one graph function, written with torch calls."""

    def __init__(self, fn: func.FuncOp):
        self.names: dict[SSAValue, str] = {}
        self.lines: list[str] = []
        self.constants: list = []
        args = [self.name(a) for a in fn.body.block.args]
        self.lines.append(f"def graph_function({', '.join(args)}):")
        results = self.block(fn.body.block)
        self.lines.append(f"    return ({''.join(r + ', ' for r in results)})")

    def name(self, v: SSAValue) -> str:
        if v not in self.names:
            self.names[v] = f"v{len(self.names)}"
        return self.names[v]

    def block(self, block: Block) -> list[str]:
        """Emit a block's ops; returns the names its terminator passes on."""
        for op in block.ops:
            if isinstance(op, func.ReturnOp | fusion.YieldOp):
                return [self.name(v) for v in op.operands]
            if isinstance(op, fusion.GroupOp):
                for inner, outer in zip(op.block.args, op.inputs):
                    self.names[inner] = self.name(outer)
                for r, value in zip(op.results, self.block(op.block)):
                    self.names[r] = value
                continue
            self.lines.append(f"    {self.name(op.results[0])} = {self.expression(op)}")
        raise ValueError("block without terminator")

    def expression(self, op: Operation) -> str:
        """The torch expression of one graph op, over the names of its operands."""
        a = [self.name(v) for v in op.operands]
        if type(op) in UNARY:
            return UNARY[type(op)].format(*a)
        if type(op) in BINARY:
            return BINARY[type(op)].format(*a)
        expr = self.compute_expression(op, a)
        if expr is None:
            expr = layout_expression(op, a)
        if expr is None:
            raise NotImplementedError(f"no torch translation of '{op.name}'")
        return expr

    def compute_expression(self, op: Operation, a: list[str]) -> str | None:
        """The torch expression of an op that computes values (not a unary or binary op in
        UNARY or BINARY), or None for an op that only moves them."""
        match op:
            case graph.GeluOp():
                approximate = "tanh" if op.form == "tanh" else "none"
                return f"torch.nn.functional.gelu({a[0]}, approximate={approximate!r})"
            case graph.CompareOp():
                return f"({a[0]} {COMPARE[op.predicate.data]} {a[1]})"
            case graph.SelectOp():
                return f"torch.where({a[0]}, {a[1]}, {a[2]})"
            case graph.CastOp():
                dtype = TORCH_DTYPES[graph.numpy_dtype(graph.element_type_of(op.result)).name]
                return f"({a[0]} != 0)" if dtype == "torch.bool" else f"{a[0]}.to({dtype})"
            case graph.ReduceOp():
                return reduce_expression(op, a[0])
            case graph.MatmulOp() | graph.BatchMatmulOp():
                return f"torch.matmul({a[0]}, {a[1]})"
            case graph.ConstantOp():
                self.constants.append(op.to_numpy())
                return f"CONSTANTS[{len(self.constants) - 1}]"
        return None

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def reduce_expression(op: graph.ReduceOp, operand: str) -> str:
    """A reduction over its axes, kept and then reshaped away (torch.prod takes one axis at a time)."""
    out_shape = tuple(graph.shape_of(op.results[0]))
    dims = tuple(op.reduce_axes)
    if op.KIND == "prod":
        expr = operand
        for d in sorted(dims, reverse=True):
            expr = f"torch.prod({expr}, dim={d}, keepdim=True)"
    else:
        expr = f"{REDUCE[op.KIND]}({operand}, dim={dims}, keepdim=True)"
    return f"{expr}.reshape({out_shape})"


def layout_expression(op: Operation, a: list[str]) -> str | None:
    """The torch expression of an op that moves or repeats values (broadcast, transpose,
    reshape, slice, pad, concat), over the names of its operands; None for any other op."""
    out_shape = tuple(graph.shape_of(op.results[0]))
    match op:
        case graph.BroadcastOp():
            expanded = [1] * len(out_shape)
            for src, dst in enumerate(op.dim_map):
                expanded[dst] = graph.shape_of(op.input)[src]
            return f"{a[0]}.reshape({tuple(expanded)}).expand({out_shape})"
        case graph.TransposeOp():
            return f"{a[0]}.permute({tuple(op.permutation)})"
        case graph.ReshapeOp():
            return f"{a[0]}.reshape({out_shape})"
        case graph.SliceOp():
            index = ", ".join(f"{lo}:{hi}:{step}" for lo, hi, step in zip(*op.bounds))
            return f"{a[0]}[{index}]"
        case graph.PadOp():
            low, high = op.padding
            widths = [w for lo, hi in reversed(list(zip(low, high))) for w in (lo, hi)]
            return f"torch.nn.functional.pad({a[0]}, {widths}, value={op.pad_value!r})"
        case graph.ConcatOp():
            return f"torch.cat([{', '.join(a)}], dim={op.concat_axis})"
    return None


def torch_function(module: ModuleOp, entry: str = "main", device: str = "cuda") -> Callable:
    """The graph function as Python over torch tensors (constants already on `device`)."""
    import torch

    source = TorchSource(find_function(module, entry))
    namespace = {
        "torch": torch,
        "math": math,
        "CONSTANTS": [torch.as_tensor(c, device=device) for c in source.constants],
    }
    exec(compile(source.text(), f"<torch {entry}>", "exec"), namespace)
    return namespace["graph_function"]
