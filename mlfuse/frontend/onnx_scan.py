"""ONNX Scan and Loop, unrolled over their static number of steps.

Each step converts the body graph in place, as If converts the branch it takes: the
body's inputs are bound to the loop-carried states and to each scan input's slice at
that step (the scan axis removed, walked backwards where its direction is 1), and the
body's outputs give the next states and the step's scan-output slices. The final
states are the states after the last step; each scan output stacks its slices along
its axis (in reverse order where its direction is 1).

A Loop runs its body for i = 0, 1, ... below its trip count M while the condition
holds: M must be known at compile time, or the condition must fold to a constant at each
step (a loop whose condition is only known at run time is a diagnostic). Its scan
outputs stack the steps' values along a new first axis.

The body's names are unbound before each step, so that a value of the step before (a
constant there, a computed value here) is never read in its place. Outer-scope values
are read as they are, as ONNX's scoping allows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from onnx import GraphProto
from xdsl.ir import SSAValue

from mlfuse.dialects import graph
from mlfuse.dialects.graph import fmt_shape, shape_of
from mlfuse.frontend.builder import NUMPY_ELEMENT_TYPES
from mlfuse.frontend.onnx_composite import composite
from mlfuse.frontend.onnx_ops import (
    OPS,
    Node,
    Value,
    dense_from_numpy,
    normalize_axis,
    op_key,
    slice_axis,
    tensor_array,
)

SCAN_MAX_STEPS = 512  # each step is a copy of the body in the graph


def as_value(node: Node, v: Value) -> SSAValue:
    if isinstance(v, np.ndarray):
        return node.emit(graph.ConstantOp(dense_from_numpy(v, NUMPY_ELEMENT_TYPES[v.dtype])))
    return v


def known_or_value(node: Node, index: int) -> Value:
    """Input `index` as a constant when known at compile time (it may fold in the body)."""
    known = node.constant(index)
    return known if known is not None else node.input(index)


def step_slice(node: Node, v: SSAValue, axis: int, step: int) -> SSAValue:
    """v at position `step` of `axis`, the axis removed."""
    shape = shape_of(v)
    return node.reshape(slice_axis(node, v, axis, step, step + 1), shape[:axis] + shape[axis + 1:])


def stacked(node: Node, slices: Sequence[SSAValue], axis: int) -> SSAValue:
    """The slices stacked along a new `axis`."""
    shape = shape_of(slices[0])
    grown = [node.reshape(s, (*shape[:axis], 1, *shape[axis:])) for s in slices]
    return grown[0] if len(grown) == 1 else node.emit(graph.ConcatOp(grown, axis))


def run_body(node: Node, body: GraphProto, bindings: Sequence[Value]) -> list[Value]:
    """One step: the body's inputs bound to `bindings`, its nodes converted, its outputs."""
    importer = node.importer
    names = {i.name for i in body.input} | {t.name for t in body.initializer} | {o for n in body.node for o in n.output}
    for name in names:
        importer.values.pop(name, None)
        importer.constants.pop(name, None)
        importer.decoded.pop(name, None)
    for proto, value in zip(body.input, bindings):
        if isinstance(value, np.ndarray):
            importer.constants[proto.name] = value
        else:
            importer.values[proto.name] = value
    for t in body.initializer:
        importer.constants[t.name] = tensor_array(t, f"initializer '{t.name}'", node.name)
    for index, inner in enumerate(body.node):
        if not (op_key(inner) in OPS or importer.foldable(inner, importer.constants)):
            raise node.error(f"the body has a node '{inner.name or inner.op_type}' ({inner.op_type}) that mlfuse cannot convert")
        importer.convert(index, inner)
    return [importer.constants[o.name] if o.name in importer.constants else importer.value(o.name) for o in body.output]


@composite("Scan", attributes=("body", "num_scan_inputs", "scan_input_axes", "scan_input_directions",
                               "scan_output_axes", "scan_output_directions"))
def convert_scan(node: Node) -> list[Value]:
    body = node.attr("body")
    scans = int(node.attr("num_scan_inputs"))
    count = len(node.proto.input)
    if not 0 < scans <= count:
        raise node.error(f"num_scan_inputs {scans} does not fit the node's {count} inputs")
    states = [known_or_value(node, i) for i in range(count - scans)]
    inputs = [node.input(i) for i in range(count - scans, count)]
    in_axes = [normalize_axis(node, int(a), len(shape_of(v)), "scan_input_axes")
               for a, v in zip(node.attr("scan_input_axes", [0] * scans), inputs)]
    in_backwards = [bool(d) for d in node.attr("scan_input_directions", [0] * scans)]
    lengths = {shape_of(v)[a] for v, a in zip(inputs, in_axes)}
    if len(lengths) != 1:
        raise node.error(f"the scan inputs have different lengths along their axes: {sorted(lengths)}")
    steps = lengths.pop()
    if not 0 < steps <= SCAN_MAX_STEPS:
        raise node.error(f"a scan of {steps} steps is not supported (1 to {SCAN_MAX_STEPS})")
    if len(body.input) != len(states) + scans:
        raise node.error(f"the body takes {len(body.input)} inputs, the node gives {len(states) + scans}")
    outputs: list[list[SSAValue]] = []
    for step in range(steps):
        slices = [step_slice(node, v, a, steps - 1 - step if back else step) for v, a, back in zip(inputs, in_axes, in_backwards)]
        results = run_body(node, body, [*states, *slices])
        if len(results) < len(states):
            raise node.error(f"the body returns {len(results)} values, fewer than the {len(states)} states")
        states = results[: len(states)]
        outputs.append([as_value(node, r) for r in results[len(states):]])
    scanned = []
    directions = node.attr("scan_output_directions", [0] * len(outputs[0]))
    for k, axis in enumerate(node.attr("scan_output_axes", [0] * len(outputs[0]))):
        slices = [step_outputs[k] for step_outputs in outputs]
        if directions[k]:
            slices.reverse()
        rank = len(shape_of(slices[0])) + 1
        if any(shape_of(s) != shape_of(slices[0]) for s in slices):
            raise node.error(f"scan output {k} changes shape between steps ({fmt_shape(shape_of(slices[0]))} first)")
        scanned.append(stacked(node, slices, normalize_axis(node, int(axis), rank, "scan_output_axes")))
    return [*states, *scanned]


@composite("Loop", attributes=("body",), static_inputs=(0, 1))
def convert_loop(node: Node) -> list[Value]:
    body = node.attr("body")
    trip = node.const_input(0, "M")
    steps = int(np.asarray(trip).reshape(-1)[0]) if trip is not None else None
    running = True
    if node.has_input(1):  # the loop is unrolled, so its first condition must be known
        running = bool(np.asarray(node.const_input(1, "cond")).reshape(-1)[0])
    carried = [known_or_value(node, i) for i in range(2, len(node.proto.input))]
    if len(body.input) != 2 + len(carried):
        raise node.error(f"the body takes {len(body.input)} inputs, the node gives {2 + len(carried)}")
    outputs: list[list[SSAValue]] = []
    step = 0
    while running and (steps is None or step < steps):
        if step == SCAN_MAX_STEPS:
            raise node.error(f"a loop of more than {SCAN_MAX_STEPS} steps is not supported")
        results = run_body(node, body, [np.array(step, np.int64), np.array(running), *carried])
        condition = results[0]
        if not isinstance(condition, np.ndarray):
            raise node.error(f"the body's condition at step {step} is only known at run time: the loop is unrolled")
        running = bool(condition.reshape(-1)[0])
        carried = results[1 : 1 + len(carried)]
        outputs.append([as_value(node, r) for r in results[1 + len(carried):]])
        step += 1
    scanned = len(body.output) - 1 - len(carried)
    if scanned and not outputs:
        raise node.error("a loop that runs no step has scan outputs of unknown shape")
    stacks = []
    for k in range(scanned):
        slices = [step_outputs[k] for step_outputs in outputs]
        if any(shape_of(s) != shape_of(slices[0]) for s in slices):
            raise node.error(f"scan output {k} changes shape between steps ({fmt_shape(shape_of(slices[0]))} first)")
        stacks.append(stacked(node, slices, 0))
    return [*carried, *stacks]
