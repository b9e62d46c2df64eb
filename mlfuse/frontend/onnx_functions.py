"""ONNX operators defined by a function body in their schema, expanded into that body.

Attention, RotaryEmbedding, CenterCropPad, AffineGrid, SwiGLU, the
window functions... are *function ops*: their schema gives an equivalent graph of
simpler operators (the node suite's `_expanded` cases are those graphs). A node of
such an operator that mlfuse's table lacks is replaced by its schema's function for
the model's opset, instantiated for the node (context-dependent functions are built
from the node's attributes and input types, which need ONNX shape inference first),
with the body's values renamed `<node>/<value>` so that diagnostics still name the
node. Bodies made of function ops are expanded again, at most EXPANSION_DEPTH times.

Operators of `ai.onnx.preview` (FlexAttention) expand the same way, at the model's
version of that domain. Not expanded: nodes whose body has subgraph attributes (If,
Loop, Scan bodies) or imports another domain; such a node stays unsupported and is
reported as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import onnx
from onnx import FunctionProto, ModelProto, NodeProto, TypeProto

from mlfuse.frontend.onnx_ops import OPS

EXPANSION_DEPTH = 4
DEFAULT_DOMAINS = ("", "ai.onnx")
# other domains whose operators onnx defines by functions of default-domain ones
# (FlexAttention, whose score_mod and prob_mod graphs its function inlines)
FUNCTION_DOMAINS = ("ai.onnx.preview",)


def function_schema(node: NodeProto, opset: int, domain_versions: Mapping[str, int] | None = None) -> onnx.defs.OpSchema | None:
    """The schema of `node` at `opset` (for another domain of FUNCTION_DOMAINS, at the
    model's version of it, `domain_versions`) when mlfuse lacks the operator and the
    schema defines it by a function."""
    if node.domain in DEFAULT_DOMAINS:
        if node.op_type in OPS:
            return None
        domain, version = "", opset
    elif node.domain in FUNCTION_DOMAINS and node.domain in (domain_versions or {}):
        domain, version = node.domain, (domain_versions or {})[node.domain]
    else:
        return None
    try:  # Any: onnx's stubs lack the function accessors of OpSchema
        schema: Any = onnx.defs.get_schema(node.op_type, version, domain)
    except Exception:  # SchemaError; TypeError for an op_type that is not valid UTF-8 (a damaged file)
        return None
    return schema if schema.has_function or schema.has_context_dependent_function else None


def function_body(schema: Any, node: NodeProto, opset: int,
                  input_types: list[TypeProto]) -> FunctionProto | None:
    """The newest function of `schema` at or before `opset`, instantiated for `node`."""
    plain = [v for v in schema.function_opset_versions if v <= opset]
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    body = FunctionProto()
    if dependent and (not plain or max(dependent) >= max(plain)):
        try:
            data = schema.get_context_dependent_function_with_opset_version(
                max(dependent), node.SerializeToString(), [t.SerializeToString() for t in input_types])
        except Exception:  # the builder rejects the node (an input type it cannot handle)
            return None
    elif plain:
        data = schema.get_function_with_opset_version(max(plain))
    else:
        return None
    body.ParseFromString(data)
    if not body.node or any(n.domain not in DEFAULT_DOMAINS for n in body.node):
        return None  # (a preview op's body imports only its own domain, but uses default ops)
    return body


def with_defaults(schema: onnx.defs.OpSchema, node: NodeProto) -> dict[str, onnx.AttributeProto]:
    """The node's attributes, and the schema's default for each one it leaves out."""
    attributes = {a.name: a for a in node.attribute}
    for name, spec in schema.attributes.items():
        if name not in attributes and spec.default_value.name:
            attributes[name] = spec.default_value
    return attributes


def instantiate(node: NodeProto, body: FunctionProto, attributes: dict[str, onnx.AttributeProto]) -> list[NodeProto] | None:
    """The body's nodes with the node's inputs, outputs and attributes in place of the
    function's formals; internal values named `<node name>/<value>`. None when the body
    has subgraphs."""
    prefix = (node.name or node.op_type) + "/"
    names = {formal: (node.input[i] if i < len(node.input) else "") for i, formal in enumerate(body.input)}
    names.update({formal: node.output[i] for i, formal in enumerate(body.output)
                  if i < len(node.output) and node.output[i]})

    def rename(value: str) -> str:
        return names.get(value, prefix + value if value else "")

    nodes = []
    for k, inner in enumerate(body.node):
        new = NodeProto()
        new.CopyFrom(inner)
        new.name = prefix + (inner.name or f"{inner.op_type}_{k}")
        new.input[:] = [rename(v) for v in inner.input]
        new.output[:] = [rename(v) for v in inner.output]
        del new.attribute[:]
        for a in inner.attribute:
            if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                return None
            if a.ref_attr_name:
                if a.ref_attr_name not in attributes:
                    continue  # an optional attribute the node leaves out
                resolved = onnx.AttributeProto()
                resolved.CopyFrom(attributes[a.ref_attr_name])
                resolved.name = a.name
                new.attribute.append(resolved)
            else:
                new.attribute.append(a)
        nodes.append(new)
    return nodes


def value_types(model: ModelProto) -> dict[str, TypeProto]:
    """The type of every value ONNX shape inference finds (for context-dependent bodies),
    inferred on the model without its large weights (the importer's without_weights)."""
    from mlfuse.frontend.onnx import without_weights  # that module imports this one

    try:
        inferred = onnx.shape_inference.infer_shapes(without_weights(model))
    except Exception:  # left to the importer's own inference, which reports it at the node
        inferred = model
    g = inferred.graph
    types = {vi.name: vi.type for vi in (*g.input, *g.value_info, *g.output)}
    for t in g.initializer:
        types.setdefault(t.name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
    return types


def expand_function_ops(model: ModelProto, opset: int) -> ModelProto:
    """`model` with every node of a function op mlfuse lacks replaced by its body (the
    model itself when there is none)."""
    versions = {o.domain: o.version for o in model.opset_import}
    for _ in range(EXPANSION_DEPTH):
        if not any(function_schema(n, opset, versions) for n in model.graph.node):
            return model
        types = value_types(model)
        nodes: list[NodeProto] = []
        changed = False
        for node in model.graph.node:
            schema = function_schema(node, opset, versions)
            replacement = None
            if schema is not None:
                input_types = [types.get(v, TypeProto()) for v in node.input]
                body = function_body(schema, node, versions.get(node.domain, opset) if node.domain else opset, input_types)
                replacement = None if body is None else instantiate(node, body, with_defaults(schema, node))
            changed |= replacement is not None
            nodes.extend(replacement if replacement is not None else [node])
        if not changed:
            return model
        expanded = ModelProto()  # a copy: the caller's model stays as it was
        expanded.CopyFrom(model)
        del expanded.graph.node[:]
        expanded.graph.node.extend(nodes)
        model = expanded
    return model
