"""ONNX frontend: an ONNX model (opsets 13 to the installed onnx's newest; 7-12 are upgraded
first) becomes a graph-dialect module.

    module = import_onnx("bert.onnx", input_shapes={"input_ids": (2, 128)})

The module has one function, @main. It takes the graph inputs in the graph's order
(initializers are constants; with `initializers_as_args=True` those that need not be
compile-time constants become trailing arguments) and returns the graph outputs in
order. The function's attributes `mlfuse.input_names` and `mlfuse.output_names`
hold the ONNX names of its arguments and results (see `bind_inputs`), and every op
carries a NameLoc with the name of the ONNX node it came from, so diagnostics and
fusion reports point at ONNX nodes.

The steps: load the model, check its opset, list every unsupported node in one
diagnostic, validate it with onnx.checker, bind symbolic input dimensions from
`input_shapes`, run ONNX shape inference, then convert node by node (the operator
table is in onnx_ops.py). Nodes whose inputs are all known at compile time are
evaluated with onnx's reference evaluator, so shape arithmetic such as
Shape -> Gather -> Concat -> Reshape leaves no ops behind. Every shape mlfuse
computes is checked against ONNX shape inference.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import IO, Any

import numpy as np
import onnx
import onnx.version_converter
from onnx import ModelProto, NodeProto, helper, inliner, numpy_helper
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, NameLoc, NoneAttr, StringAttr, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from mlfuse.diagnostics import MAX_DIM, MAX_ELEMENTS, Diagnostic, DynamicShapes, verify_located
from mlfuse.dialects import graph
from mlfuse.dialects.graph import fmt_shape
from mlfuse.frontend import onnx_narrow
from mlfuse.frontend.builder import NUMPY_ELEMENT_TYPES
from mlfuse.frontend.onnx_functions import expand_function_ops
from mlfuse.frontend.onnx_ops import (
    ELEMENT_TYPES,
    OPS,
    SUPPORTED_NUMPY_TYPES,
    Node,
    Value,
    dense_from_numpy,
    element_type,
    op_key,
    tensor_array,
)

# 13 up to what the installed onnx defines; older models are upgraded to 13 first
SUPPORTED_OPSETS = range(13, onnx.defs.onnx_opset_version() + 1)
# operators of old opsets that onnx's version converter replaces on the way to 13
REPLACED_BY_UPGRADE = {"Scatter": "ScatterElements", "Upsample": "Resize"}
DEFAULT_DOMAINS = ("", "ai.onnx")
INPUT_NAMES_ATTR = "mlfuse.input_names"
OUTPUT_NAMES_ATTR = "mlfuse.output_names"
# the ml_dtypes names of arguments and results of a narrow element type (onnx_narrow)
INPUT_DTYPES_ATTR = "mlfuse.input_dtypes"
OUTPUT_DTYPES_ATTR = "mlfuse.output_dtypes"
# never folded at compile time, even with constant inputs
NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial"}
# unrolled instead, its body's nodes folded one by one: onnx's reference evaluator stacks a
# Loop's scalar scan outputs as (steps, 1), not (steps,)
NOT_FOLDED = NONDETERMINISTIC | {"Loop"}

ModelSource = str | os.PathLike | bytes | IO[bytes] | ModelProto
# an input's declared shape: per dimension its size, symbol or None (unknown); None when it declares none
DeclaredShape = list[int | str | None] | None


# --- public API ---------------------------------------------------------------------------


def import_onnx(
    model: ModelSource,
    input_shapes: Mapping[str, Sequence[int] | str] | None = None,
    initializers_as_args: bool = False,
    name: str | None = None,
    input_values: Mapping[str, np.ndarray] | None = None,
) -> ModuleOp:
    """Import an ONNX model (a path, its bytes, a binary stream or a ModelProto).

    `input_shapes` gives the shapes of inputs with symbolic dimensions ({name: (2, 128)}
    or {name: "2x128"}); `name` is what diagnostics call the model (default: the path).
    `input_values` freezes graph inputs to values ({name: array}): they become constants,
    and leave the function's signature. mlfuse needs axes, shapes, pads, repeats and the
    like at compile time; a model that takes them as inputs compiles once they are given.
    Errors are Diagnostics.
    """
    proto, source = load_model(model, name)
    if input_values:
        proto = freeze_inputs(proto, input_values, source)
    return OnnxImporter(proto, source, input_shapes or {}, initializers_as_args).run()


def freeze_inputs(proto: ModelProto, values: Mapping[str, np.ndarray], source: str) -> ModelProto:
    """A copy of the model whose named graph inputs are initializers holding `values`."""
    frozen = ModelProto()
    frozen.CopyFrom(proto)
    inputs = {vi.name: vi for vi in frozen.graph.input}
    for name, value in values.items():
        if name not in inputs:
            raise Diagnostic(f"input_values names '{name}', which is not an input of the model", source)
        frozen.graph.input.remove(inputs[name])
        frozen.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    return frozen


def load_model(model: ModelSource, name: str | None = None) -> tuple[ModelProto, str]:
    """Read a model; a missing, malformed or truncated file is a Diagnostic."""
    if isinstance(model, ModelProto):
        copy = ModelProto()
        copy.CopyFrom(model)
        return copy, name or model.graph.name or "<onnx>"
    if isinstance(model, bytes | bytearray | memoryview):
        data, source = bytes(model), name or "<onnx>"
    elif hasattr(model, "read"):
        data, source = model.read(), name or getattr(model, "name", None) or "<onnx>"
    else:
        path = os.fspath(model)
        source = name or path
        try:
            proto = onnx.load_model(path)  # also loads external data next to the file
        except OSError as e:
            raise Diagnostic(f"cannot read ONNX model: {e.strerror or e}", source) from None
        except Exception as e:
            raise Diagnostic(f"not a valid ONNX model: {first_line(e)}", source) from None
        return check_loaded(proto, source), source
    try:
        proto = onnx.load_model_from_string(data)
    except Exception as e:
        raise Diagnostic(f"not a valid ONNX model: {first_line(e)}", source) from None
    return check_loaded(proto, source), source


def check_loaded(proto: ModelProto, source: str) -> ModelProto:
    # protobuf parses many byte strings (an empty one, a cut-off one) into a partial message
    if not proto.HasField("graph") or not proto.opset_import:
        raise Diagnostic("not a valid ONNX model: it has no graph or no opset import (truncated file?)", source)
    return proto


def parse_shape_options(specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """`["input_ids=2x128", ...]` (the --shape options) to {name: shape}."""
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        name, eq, dims = spec.rpartition("=")
        ok = bool(eq and name) and (dims == "" or re.fullmatch(r"\d+(x\d+)*", dims) is not None)
        if not ok:
            raise Diagnostic(
                f"malformed --shape '{spec}': expected NAME=DIMxDIMx..., e.g. input=2x128x768",
                "<command line>",
            )
        shape = tuple(int(d) for d in dims.split("x")) if dims else ()
        if any(d > MAX_DIM for d in shape) or math.prod(shape) > MAX_ELEMENTS:
            raise Diagnostic(
                f"--shape '{spec}' is too large (dimensions up to 2^31 - 1, 2^40 elements in all)", "<command line>"
            )
        if name in shapes and shapes[name] != shape:
            raise Diagnostic(
                f"--shape gives input '{name}' two shapes: {fmt_shape(shapes[name])} and {fmt_shape(shape)}",
                "<command line>",
            )
        shapes[name] = shape
    return shapes


def entry_function(module: ModuleOp, entry: str = "main") -> func.FuncOp:
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == entry:
            return op
    raise ValueError(f"no function '@{entry}' in the module")


def _names(module: ModuleOp | func.FuncOp, attr: str) -> list[str]:
    fn = module if isinstance(module, func.FuncOp) else entry_function(module)
    names = fn.attributes.get(attr)
    if not isinstance(names, ArrayAttr):
        raise ValueError(f"@{fn.sym_name.data} has no {attr} (was it imported from ONNX?)")
    return [n.data for n in names.data]


def input_names(module: ModuleOp | func.FuncOp) -> list[str]:
    """ONNX names of @main's arguments, in order."""
    return _names(module, INPUT_NAMES_ATTR)


def output_names(module: ModuleOp | func.FuncOp) -> list[str]:
    """ONNX names of @main's results, in order."""
    return _names(module, OUTPUT_NAMES_ATTR)


def bind_inputs(names: Sequence[str], args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
    """Positional and ONNX-named keyword inputs to the positional list, like a Python call."""
    if len(args) > len(names):
        raise TypeError(f"the model takes {len(names)} inputs ({', '.join(names)}), got {len(args)} positional")
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names:
            raise TypeError(f"the model has no input named '{key}' (inputs: {', '.join(names)})")
        if key in bound:
            raise TypeError(f"input '{key}' is given both by position and by name")
        bound[key] = value
    missing = [n for n in names if n not in bound]
    if missing:
        raise TypeError(f"missing model input{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
    return [bound[n] for n in names]


def first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0] if "\n" in text else text


# --- the importer ---------------------------------------------------------------------------


def node_name(proto: NodeProto, index: int) -> str:
    return proto.name or f"{proto.op_type}_{index}"


def is_default_domain(proto: NodeProto) -> bool:
    return proto.domain in DEFAULT_DOMAINS


def value_name_hint(name: str) -> str | None:
    hint = re.sub(r"[^\w$.-]", "_", name)
    if not hint or hint[0].isdigit():
        hint = "v" + hint
    return hint if SSAValue.is_valid_name(hint) else None


# Initializers with more elements than this are only a type and a shape to onnx's checker and
# shape inference: no operator infers a shape from the values of a tensor that large.
SHAPE_ONLY_ELEMENTS = 1024


def without_weights(model: ModelProto) -> ModelProto:
    """A copy of `model` whose large initializers are graph inputs of their type and shape.

    onnx's checker and shape inference serialize the model they are given, weights and all
    (ResNet-18: 0.3 s of a 0.7 s import), and need only the type and shape of a weight.
    Small initializers keep their values, which shape inference reads (Reshape's shape,
    Resize's scales)."""
    structure = ModelProto()
    structure.CopyFrom(model)
    g = structure.graph
    inputs = {vi.name for vi in g.input}
    large = [k for k, t in enumerate(g.initializer) if math.prod(t.dims) > SHAPE_ONLY_ELEMENTS]
    for k in large:
        t = g.initializer[k]
        if t.name not in inputs:
            g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    for k in reversed(large):
        del g.initializer[k]
    return structure


class OnnxImporter:
    def __init__(
        self,
        model: ModelProto,
        source: str,
        input_shapes: Mapping[str, Sequence[int] | str],
        initializers_as_args: bool,
    ):
        self.model = model
        self.source = source
        self.requested_shapes = {
            k: parse_shape_options([f"{k}={v}"])[k] if isinstance(v, str) else tuple(int(d) for d in v)
            for k, v in input_shapes.items()
        }
        self.initializers_as_args = initializers_as_args
        self.values: dict[str, SSAValue] = {}
        self.constants: dict[str, np.ndarray] = {}
        self.inferred: dict[str, tuple[int, tuple[int, ...] | None]] = {}
        self.input_types: dict[str, int] = {}  # the ONNX element types of the graph's inputs
        self.subgraph_types: dict[str, int] = {}  # and of the values in If, Loop and Scan bodies
        self.decoded: dict[str, SSAValue] = {}  # narrow values decoded (onnx_narrow.decode_inputs)
        self.uninferred: set[str] = set()  # values whose inferred shapes are known to be wrong
        self.block = Block()

    def error(self, message: str) -> Diagnostic:
        return Diagnostic(message, self.source)

    def run(self) -> ModuleOp:
        opset = self.check_opset()
        if self.model.functions:  # model-local functions (e.g. from torch.onnx) become plain nodes
            self.model = inliner.inline_local_functions(self.model)
        self.model = expand_function_ops(self.model, opset)  # function ops mlfuse lacks: their bodies
        self.model = explicit_stft_onesided(self.model)
        g = self.model.graph
        initializers = {t.name: t for t in g.initializer}
        arg_initializers = self.initializer_arguments(initializers)
        self.report_unsupported(initializers, arg_initializers)
        structure = without_weights(self.model)
        self.check_model(structure)
        inputs = [vi for vi in g.input if vi.name not in initializers]
        shapes = self.resolve_input_shapes(inputs)
        self.infer_shapes(structure, shapes)
        fn = self.build_function(inputs, shapes, initializers, arg_initializers)
        module = ModuleOp([fn])
        verify_located(module)
        return module

    # --- checks before conversion ------------------------------------------------------

    def check_opset(self) -> int:
        versions = [o.version for o in self.model.opset_import if o.domain in DEFAULT_DOMAINS]
        if not versions:
            if not self.model.opset_import or any(n.domain in DEFAULT_DOMAINS for n in self.model.graph.node):
                raise self.error("the model imports no version of the default ONNX domain")
            return SUPPORTED_OPSETS.stop - 1  # only other domains' operators (ai.onnx.preview.training's)
        version = versions[0]
        if version < SUPPORTED_OPSETS.start:
            self.model = self.upgraded(version)
            return SUPPORTED_OPSETS.start
        if version not in SUPPORTED_OPSETS:
            raise self.error(
                f"ONNX opset {version} is not supported (mlfuse imports opsets "
                f"{SUPPORTED_OPSETS.start} to {SUPPORTED_OPSETS.stop - 1}, those of the installed onnx package)"
            )
        return version

    def upgraded(self, version: int) -> ModelProto:
        """An opset 7-12 model converted by onnx's version converter, whose adapters move the
        attributes that later became inputs (axes, split, pads, min/max...)."""
        for index, proto in enumerate(self.model.graph.node):
            if proto.op_type == "Scan" and version < 9:
                # its adapter drops the batch axis from the graph's inputs, not only the node's
                raise Diagnostic(f"Scan: opset {version}'s batched Scan (with sequence_lens) is not supported; "
                                 "opset 9 and later's is", node_name(proto, index))
        try:
            return onnx.version_converter.convert_version(self.model, SUPPORTED_OPSETS.start)
        except Exception as e:
            raise self.error(
                f"ONNX opset {version} is older than {SUPPORTED_OPSETS.start} and onnx's version converter "
                f"could not upgrade the model: {first_line(e)}"
            ) from None

    def initializer_arguments(self, initializers: Mapping[str, Any]) -> list[str]:
        """Initializers that become arguments: all but those that must be compile-time constants."""
        if not self.initializers_as_args:
            return []
        static: set[str] = set()
        for proto in self.model.graph.node:
            spec = OPS.get(op_key(proto))
            for i, name in enumerate(proto.input):
                if spec is None or i in spec.static_inputs:
                    static.add(name)
        return [name for name in initializers if name not in static]

    def report_unsupported(self, initializers: Mapping[str, Any], arg_initializers: Sequence[str]) -> None:
        """One diagnostic naming every node that mlfuse can neither convert nor fold."""
        known = set(initializers) - set(arg_initializers)
        unsupported = []
        for index, proto in enumerate(self.model.graph.node):
            compile_time = is_default_domain(proto) and proto.op_type in ("Shape", "Size", "EyeLike", "Constant")
            if compile_time or self.foldable(proto, known):
                known.update(proto.output)
            elif op_key(proto) not in OPS:
                unsupported.append(f"'{node_name(proto, index)}' ({op_key(proto)})")
        if unsupported:
            raise self.error(
                f"unsupported ONNX operator{'s' if len(unsupported) > 1 else ''} in "
                f"{len(unsupported)} node{'s' if len(unsupported) > 1 else ''}: " + ", ".join(unsupported)
            )

    @staticmethod
    def foldable(proto: NodeProto, known: set[str] | Mapping[str, Any]) -> bool:
        inputs = [n for n in proto.input if n]
        return (
            is_default_domain(proto)
            and proto.op_type not in NOT_FOLDED
            and bool(inputs)
            and all(n in known for n in (*inputs, *outer_scope_names(proto)))
        )

    def check_model(self, structure: ModelProto) -> None:
        """onnx's checker on the model, its weights by type and shape (without_weights)."""
        try:
            onnx.checker.check_model(structure)
        except Exception as e:
            raise self.error(f"invalid ONNX model: {first_line(e)}") from None

    def resolve_input_shapes(self, inputs: Sequence[onnx.ValueInfoProto]) -> dict[str, tuple[int, ...]]:
        """Static shapes of the inputs: declared dimensions, `input_shapes`, and symbols bound by either."""
        self.check_requested_shapes([vi.name for vi in inputs])
        declared = self.declared_shapes(inputs)
        bindings: dict[str, tuple[int, str]] = {}  # dimension symbol -> (size, input that set it)
        shapes: dict[str, tuple[int, ...]] = {}
        for name, given in self.requested_shapes.items():
            dims = declared[name]
            if dims is not None:
                self.bind_requested_shape(name, dims, given, bindings)
            shapes[name] = given
        self.complete_input_shapes(declared, bindings, shapes)
        for name, shape in shapes.items():
            if any(d > MAX_DIM for d in shape) or math.prod(shape) > MAX_ELEMENTS:
                raise self.error(
                    f"input '{name}' has shape {fmt_shape(shape)}, larger than mlfuse supports "
                    "(dimensions up to 2^31 - 1, 2^40 elements in all)"
                )
        return shapes

    def check_requested_shapes(self, names: list[str]) -> None:
        """Every shape in `input_shapes` names an input of the model and has dimensions >= 1."""
        for name, shape in self.requested_shapes.items():
            if name not in names:
                raise self.error(
                    f"a shape is given for '{name}', which is not an input of the model "
                    f"(inputs: {', '.join(names) or 'none'})"
                )
            if any(d < 1 for d in shape):
                raise self.error(f"the shape {list(shape)} given for input '{name}' has a dimension < 1")

    def declared_shapes(self, inputs: Sequence[onnx.ValueInfoProto]) -> dict[str, DeclaredShape]:
        """The shape each input declares: per dimension its size, symbol or None (unknown);
        None for the whole shape when the input declares none."""
        declared: dict[str, DeclaredShape] = {}
        for vi in inputs:
            if not vi.type.HasField("tensor_type"):
                raise self.error(f"input '{vi.name}' is not a tensor (sequences, maps and optionals are not supported)")
            t = vi.type.tensor_type
            declared[vi.name] = (
                [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]
                if t.HasField("shape")
                else None
            )
        return declared

    def bind_requested_shape(
        self, name: str, dims: list[int | str | None], given: tuple[int, ...], bindings: dict[str, tuple[int, str]]
    ) -> None:
        """Check the shape given for input `name` against its declared `dims`, and bind the
        dimension symbols of `dims` to the given sizes (consistently across inputs)."""
        if len(dims) != len(given):
            raise self.error(
                f"input '{name}' has rank {len(dims)} ({describe(dims)}), but the shape "
                f"{fmt_shape(given)} given for it has rank {len(given)}"
            )
        for axis, (d, g) in enumerate(zip(dims, given)):
            if isinstance(d, int) and d != g:
                raise self.error(
                    f"input '{name}' has size {d} in dimension {axis} ({describe(dims)}), "
                    f"but the shape given for it is {fmt_shape(given)}"
                )
            if isinstance(d, str):
                if d in bindings and bindings[d][0] != g:
                    size, other = bindings[d]
                    raise self.error(
                        f"inconsistent input shapes: dimension '{d}' is {size} in input '{other}' "
                        f"but {g} in input '{name}'"
                    )
                bindings[d] = (g, name)

    def complete_input_shapes(
        self,
        declared: dict[str, DeclaredShape],
        bindings: dict[str, tuple[int, str]],
        shapes: dict[str, tuple[int, ...]],
    ) -> None:
        """Add to `shapes` every input not given a shape whose declared dimensions are all
        sizes or bound symbols; raise, with the `--shape` options to add, when some are not."""
        missing = []
        for name, dims in declared.items():
            if name in shapes:
                continue
            if dims is not None and all(isinstance(d, int) or (isinstance(d, str) and d in bindings) for d in dims):
                shapes[name] = tuple(d if isinstance(d, int) else bindings[d][0] for d in dims)
            else:
                missing.append(name)
        if missing:
            details = "; ".join(
                f"'{n}' has shape {describe(declared[n])}" if declared[n] is not None else f"'{n}' has no shape"
                for n in missing
            )
            example = " ".join(
                f"--shape {n}=" + ("x".join(str(d) if isinstance(d, int) else "N" for d in declared[n]) or "...")
                if declared[n] is not None
                else f"--shape {n}=..."
                for n in missing
            )
            raise DynamicShapes(f"input shapes are not static ({details}): give them with {example} "
                                "(or input_shapes= in the API)", self.source, self.declared_inputs(declared))

    def declared_inputs(self, declared: dict[str, DeclaredShape]) -> list[tuple[str, DeclaredShape, int]]:
        """(name, declared dimensions, element type) of each input, in argument order."""
        types = {vi.name: vi.type.tensor_type.elem_type for vi in self.model.graph.input}
        return [(name, dims, types[name]) for name, dims in declared.items()]

    def infer_shapes(self, structure: ModelProto, shapes: Mapping[str, tuple[int, ...]]) -> None:
        """onnx's shape inference on the model (its weights by type and shape: without_weights)
        with the inputs' static `shapes`."""
        model = ModelProto()
        model.CopyFrom(structure)
        for vi in model.graph.input:
            if vi.name in shapes:
                dims = vi.type.tensor_type.shape.dim
                del dims[:]
                for size in shapes[vi.name]:
                    dims.add().dim_value = size
        try:
            inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
        except Exception as e:
            raise shape_inference_diagnostic(first_line(e), self.source) from None
        for vi in [*inferred.graph.value_info, *inferred.graph.output]:
            t = vi.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
            static = tuple(dims) if t.HasField("shape") and None not in dims else None
            self.inferred[vi.name] = (t.elem_type, static)  # type: ignore[assignment]
        self.subgraph_types = subgraph_element_types(inferred.graph)

    # --- conversion ------------------------------------------------------------------------

    def build_function(
        self,
        inputs: Sequence[onnx.ValueInfoProto],
        shapes: Mapping[str, tuple[int, ...]],
        initializers: Mapping[str, onnx.TensorProto],
        arg_initializers: Sequence[str],
    ) -> func.FuncOp:
        arg_names, arg_types = [], []
        for vi in inputs:
            self.input_types[vi.name] = vi.type.tensor_type.elem_type
            el = self.storage_type(vi.type.tensor_type.elem_type, f"input '{vi.name}'")
            arg_names.append(vi.name)
            arg_types.append(TensorType(el, list(shapes[vi.name])))
        for name, tensor in initializers.items():
            array = tensor_array(tensor, f"initializer '{name}'", self.source)
            if name in arg_initializers:
                self.input_types[name] = tensor.data_type
                el = self.storage_type(tensor.data_type, f"initializer '{name}'")
                arg_names.append(name)
                arg_types.append(TensorType(el, list(array.shape)))
            else:
                self.constants[name] = array
        self.block = Block(arg_types=arg_types)
        for name, arg in zip(arg_names, self.block.args):
            self.values[name] = arg
            arg.name_hint = value_name_hint(name)
        for index, proto in enumerate(self.model.graph.node):
            self.convert(index, proto)
        g = self.model.graph
        results = [self.value(o.name) for o in g.output]
        graph_loc = NameLoc(StringAttr(g.name or "main"), NoneAttr())
        ret = func.ReturnOp(*results)
        ret.location = graph_loc
        self.block.add_op(ret)
        fn = func.FuncOp("main", (arg_types, [r.type for r in results]), Region(self.block))
        fn.location = graph_loc
        fn.attributes[INPUT_NAMES_ATTR] = ArrayAttr([StringAttr(n) for n in arg_names])
        fn.attributes[OUTPUT_NAMES_ATTR] = ArrayAttr([StringAttr(o.name) for o in g.output])
        for attr, names in ((INPUT_DTYPES_ATTR, arg_names), (OUTPUT_DTYPES_ATTR, [o.name for o in g.output])):
            narrow = [self.narrow_type(n) for n in names]
            if any(narrow):  # the ml_dtypes dtype of each narrow argument or result, else ""
                fn.attributes[attr] = ArrayAttr([StringAttr(t.dtype.name if t else "") for t in narrow])
        return fn

    def storage_type(self, onnx_type: int, what: str) -> Attribute:
        """The graph element type of an ONNX one: a narrow type's storage (onnx_narrow)."""
        narrow = onnx_narrow.NARROW.get(onnx_type)
        return narrow.storage if narrow else element_type(onnx_type, what, self.source)

    def convert(self, index: int, proto: NodeProto) -> None:
        node = Node(self, proto, node_name(proto, index))
        outputs = self.fold(node) if self.foldable(proto, self.constants) else None
        if outputs is None:
            spec = OPS[op_key(proto)]
            unknown = sorted(set(node.attributes) - spec.attributes)
            if unknown:
                raise node.error(
                    f"attribute{'s' if len(unknown) > 1 else ''} {', '.join(repr(a) for a in unknown)} "
                    f"{'are' if len(unknown) > 1 else 'is'} not supported"
                )
            outputs = onnx_narrow.convert_narrow(node)
            if outputs is None:
                outputs = spec.handler(node)
        if any(name in self.uninferred for name in proto.input):
            self.uninferred.update(proto.output)
        for i, name in enumerate(proto.output):
            if not name:
                continue
            if i >= len(outputs):
                raise node.error(f"output {i} ('{name}') is not supported")
            self.bind(node, name, outputs[i])

    def fold(self, node: Node) -> list[Value] | None:
        """Evaluate a node whose inputs are all constants; None to convert it to ops instead."""
        proto = node.proto
        try:
            used = [n for n in proto.input if n] + sorted(outer_scope_names(proto))
            values: list[Value] = [*evaluate_node(proto, {n: self.constants[n] for n in used}, self.model.opset_import)]
            return values
        except Exception as e:
            if op_key(proto) in OPS:
                return None
            raise node.error(f"cannot evaluate this node on its constant inputs: {first_line(e)}") from None

    def bind(self, node: Node, name: str, value: Value) -> None:
        self.decoded.pop(name, None)  # a name bound again (an unrolled loop's body) has new values
        if isinstance(value, np.ndarray):
            shape, el = value.shape, NUMPY_ELEMENT_TYPES.get(value.dtype)
            self.constants[name] = value
        else:
            shape, el = graph.shape_of(value), graph.element_type_of(value)
            self.values[name] = value
            if value.name_hint is None and isinstance(value.owner, Operation):
                value.name_hint = value_name_hint(name)
        onnx_type, inferred = self.inferred.get(name, (0, None))
        if name in self.uninferred:
            inferred = None
        elif inferred is not None and tuple(shape) != inferred and node.attr("ceil_mode", 0):
            # ONNX shape inference keeps a last ceil_mode window that starts in the end padding;
            # onnxruntime and onnx's reference evaluator drop it, and so does mlfuse.
            self.uninferred.add(name)
            inferred = None
        if inferred is not None and tuple(shape) != inferred:
            raise node.error(
                f"output '{name}' has shape {fmt_shape(shape)} here, but ONNX shape inference says "
                f"{fmt_shape(inferred)}"
            )
        expected = ELEMENT_TYPES.get(onnx_type)
        if expected is not None and el is not None and el != expected:
            raise node.error(f"output '{name}' has element type {el} here, but ONNX says {expected}")

    # --- values and ops ----------------------------------------------------------------------

    def value(self, name: str) -> SSAValue:
        """The SSA value of an ONNX name; a compile-time constant becomes a graph.constant on first use."""
        if name in self.values:
            return self.values[name]
        if name not in self.constants:
            raise self.error(f"value '{name}' is used but never defined")
        array = self.constants[name]
        if onnx_narrow.of_dtype(array.dtype):
            array = onnx_narrow.storage_array(array)
        el = NUMPY_ELEMENT_TYPES.get(array.dtype)
        if el is None:
            raise self.error(
                f"constant '{name}' has element type {array.dtype}, which mlfuse does not support "
                f"(supported: {SUPPORTED_NUMPY_TYPES})"
            )
        op = graph.ConstantOp(dense_from_numpy(array, el))
        op.location = NameLoc(StringAttr(name), NoneAttr())
        op.result.name_hint = value_name_hint(name)
        self.block.add_op(op)
        self.values[name] = op.result
        return op.result

    def constant(self, name: str) -> np.ndarray | None:
        return self.constants.get(name)

    def onnx_type(self, name: str) -> int:
        """The ONNX element type of a value (0 where unknown)."""
        if name in self.input_types:
            return self.input_types[name]
        if name in self.constants:
            return constant_onnx_type(self.constants[name])
        if name in self.inferred:
            return self.inferred[name][0]
        return self.subgraph_types.get(name, 0)

    def narrow_type(self, name: str) -> onnx_narrow.Narrow | None:
        """The narrow element type of a value (carried as its storage), or None."""
        return onnx_narrow.NARROW.get(self.onnx_type(name))

    def shape_of_value(self, name: str) -> tuple[int, ...]:
        if name in self.constants:
            return tuple(self.constants[name].shape)
        return graph.shape_of(self.value(name))

    def emit(self, op: Operation, node: Node) -> SSAValue:
        op.location = node.location
        self.block.add_op(op)
        try:
            op.verify()
        except VerifyException as e:
            raise node.error(first_line(e).removeprefix("Operation does not verify: ")) from None
        return op.results[0]


def constant_onnx_type(value: Any) -> int:
    """The ONNX element type of a compile-time value; 0 for one that is not a tensor of a
    type onnx maps (a folded sequence is a list)."""
    try:
        return int(helper.np_dtype_to_tensor_dtype(value.dtype))
    except (AttributeError, KeyError, TypeError, ValueError):
        return 0


def subgraph_element_types(g: onnx.GraphProto) -> dict[str, int]:
    """The ONNX element type of every input, value and output of the subgraphs (If, Loop
    and Scan bodies) under `g`, at any depth, as shape inference left them: a body's
    narrow values must be known as such where it is unrolled (onnx_narrow)."""
    types: dict[str, int] = {}
    for proto in g.node:
        for a in proto.attribute:
            for body in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
                for vi in [*body.input, *body.value_info, *body.output]:
                    if vi.type.HasField("tensor_type"):
                        types[vi.name] = vi.type.tensor_type.elem_type
                types.update(subgraph_element_types(body))
    return types


def explicit_stft_onesided(model: ModelProto) -> ModelProto:
    """The model with STFT's `onesided` written out where it is missing, as the schema's
    default, 1 (a copy; the caller's model is not changed): onnx's shape inference (1.23)
    reads a missing one as 0 and contradicts the spec's output shape."""
    missing = [i for i, proto in enumerate(model.graph.node) if proto.op_type == "STFT" and is_default_domain(proto)
               and not any(a.name == "onesided" for a in proto.attribute)]
    if not missing:
        return model
    copy = ModelProto()
    copy.CopyFrom(model)
    for i in missing:
        copy.graph.node[i].attribute.append(helper.make_attribute("onesided", 1))
    return copy


def shape_inference_diagnostic(message: str, source: str) -> Diagnostic:
    """ONNX's inference error, located at the node it names when it names one."""
    at_node = re.search(r"\(op_type:([^,]*), node name: ([^)]*)\): (?:\[\w+\] )?(.*)", message)
    if at_node and at_node.group(2):
        op_type, name, detail = at_node.groups()
        return Diagnostic(f"{op_type}: ONNX shape inference failed for these input shapes: {detail}", name)
    return Diagnostic(f"ONNX shape inference failed for these input shapes: {message}", source)


def describe(dims: Sequence[int | str | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def outer_scope_names(proto: NodeProto) -> set[str]:
    """The values of the enclosing graph that the node's subgraphs (Loop, If, Scan
    bodies) read without defining them: inputs of the node as much as its own."""
    names: set[str] = set()
    for a in proto.attribute:
        for body in (*([a.g] if a.HasField("g") else []), *a.graphs):
            defined = {v.name for v in body.input} | {t.name for t in body.initializer}
            for inner in body.node:
                names |= {n for n in (*inner.input, *outer_scope_names(inner)) if n and n not in defined}
                defined |= set(inner.output)
    return names


def evaluate_node(
    proto: NodeProto, feeds: Mapping[str, np.ndarray], opset_imports: Sequence[onnx.OperatorSetIdProto]
) -> list[np.ndarray]:
    """Run one node with onnx's reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    inputs = [
        onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for n, a in feeds.items()
    ]
    outputs = [onnx.helper.make_empty_tensor_value_info(n) for n in proto.output if n]
    g = onnx.helper.make_graph([proto], "fold", inputs, outputs)
    model = onnx.helper.make_model(g, opset_imports=list(opset_imports))
    results = ReferenceEvaluator(model).run(None, dict(feeds))
    if any(not isinstance(r, np.ndarray | np.generic) for r in results):  # a list (sequence) or None (optional)
        raise TypeError("it makes a sequence or an optional, which are not tensors")
    named = dict(zip([n for n in proto.output if n], results))
    return [np.asarray(named[n]) if n else np.empty(0) for n in proto.output]
