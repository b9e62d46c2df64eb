"""Mutations of IR text and of ONNX models; each takes a random.Random and returns new input."""

from __future__ import annotations

import random
import re

ELEMENT_TYPES = ["f32", "i32", "bf16", "f16", "f64", "i64", "i1", "i8", "index"]
SIZES = ["0", "1", "3", "7", "65536", "2147483647", "2147483648", "4294967296", "99999999999999999999999", "?"]
VALUES = ["99999999999999999999999", "-99999999999999999999999", "1e400", "-1e400", "0x7fffffff", "nan", "inf",
          "-0.0", "2147483648", "-2147483649", "18446744073709551616", "1.5", "-1"]
GARBAGE = ["\x00", "\xff", "\x1b[31m", "}", "{", ">", "<", "(", ")", "%", "@", "\"", "\\", ":", "//", "loc(", "dense<",
           "\u202e", "é", "\n\n", "#map = ", "!t = ", "^bb0:"]
NUMBER = re.compile(r"(?<![\w%@#.])-?\d+(\.\d+)?([eE][-+]?\d+)?(?![\w])")
DIM = re.compile(r"(?<=[<x])(\d+|\?)(?=x)")


def truncate(rng: random.Random, text: str) -> str:
    return text[: rng.randrange(len(text) + 1)]


def delete_line(rng: random.Random, text: str) -> str:
    lines = text.splitlines(keepends=True)
    if lines:
        del lines[rng.randrange(len(lines))]
    return "".join(lines)


def duplicate_line(rng: random.Random, text: str) -> str:
    lines = text.splitlines(keepends=True)
    if lines:
        i = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[i])
    return "".join(lines)


def swap_lines(rng: random.Random, text: str) -> str:
    lines = text.splitlines(keepends=True)
    if len(lines) > 1:
        i, j = rng.sample(range(len(lines)), 2)
        lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def swap_type(rng: random.Random, text: str) -> str:
    """One element type (or all of them: a consistent swap gets past the verifier) to another."""
    found = [m for m in re.finditer(r"\b(f16|bf16|f32|f64|i1|i8|i32|i64)\b", text)]
    if not found:
        return text
    old = rng.choice(found).group(0)
    new = rng.choice([t for t in ELEMENT_TYPES if t != old])
    if rng.random() < 0.5:
        return re.sub(rf"\b{old}\b", new, text)
    m = rng.choice([m for m in found if m.group(0) == old])
    return text[: m.start()] + new + text[m.end() :]


def swap_dim(rng: random.Random, text: str) -> str:
    """A dimension of a shaped type (one, or everywhere it occurs) to another size."""
    found = list(DIM.finditer(text))
    if not found:
        return text
    m = rng.choice(found)
    new = rng.choice(SIZES)
    if rng.random() < 0.5:
        return DIM.sub(lambda x: new if x.group(0) == m.group(0) else x.group(0), text)
    return text[: m.start()] + new + text[m.end() :]


def huge_value(rng: random.Random, text: str) -> str:
    found = list(NUMBER.finditer(text))
    if not found:
        return text
    m = rng.choice(found)
    return text[: m.start()] + rng.choice(VALUES) + text[m.end() :]


def deep_nesting(rng: random.Random, text: str) -> str:
    """A type nested in tensor<...>, a region, or a literal nested in [...], 10 to 5000 deep."""
    depth = rng.choice([10, 31, 33, 100, 1000, 5000])
    kind = rng.randrange(3)
    if kind == 0:
        found = list(re.finditer(r"tensor<", text))
        if found:
            m = rng.choice(found)
            end = text.find(">", m.end())
            if end > 0:
                return text[: m.start()] + "tensor<" * depth + text[m.start() : end + 1] + ">" * depth + text[end + 1 :]
    if kind == 1:
        body = '"test.op"() ({\n' * depth + "}) : () -> ()\n" * depth
        i = text.find("{\n")
        if i >= 0:
            return text[: i + 2] + body + text[i + 2 :]
    i = text.find("dense<")
    if i >= 0:
        return text[: i + 6] + "[" * depth + "1.0" + "]" * depth + text[i + 6 :]
    return "builtin.module {\n" * depth + text + "}\n" * depth


def garbage(rng: random.Random, text: str) -> str:
    i = rng.randrange(len(text) + 1)
    if rng.random() < 0.5:
        junk = rng.choice(GARBAGE)
    else:
        junk = "".join(chr(rng.randrange(256)) for _ in range(rng.randrange(1, 16)))
    cut = rng.randrange(0, 4)
    return text[:i] + junk + text[i + cut :]


def big_splat(rng: random.Random, text: str) -> str:
    """A constant asked for at a huge size: the parser must refuse before allocating."""
    shape = rng.choice(["10000x10000", "65536x65536", "4194305", "2048x2048"])
    return text + f'\nfunc.func @big() -> tensor<{shape}xf32> {{\n  %c = graph.constant dense<0.125> : tensor<{shape}xf32>\n  func.return %c : tensor<{shape}xf32>\n}}\n'


TEXT_MUTATIONS = [truncate, delete_line, duplicate_line, swap_lines, swap_type, swap_dim, huge_value, huge_value,
                  deep_nesting, garbage, garbage, big_splat, swap_type, swap_dim]


def mutate_text(rng: random.Random, text: str) -> tuple[str, list[str]]:
    """1 to 3 mutations of `text`; the mutated text and the names of the mutations."""
    names = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        m = rng.choice(TEXT_MUTATIONS)
        text = m(rng, text)
        names.append(m.__name__)
    return text, names


# --- ONNX --------------------------------------------------------------------------------------

NAMES = ["evil\nname", "\x1b[2J\x1b[31mred", "a" * 300, "", "node\x00nul", "ünïcode", "%0", "'quoted'"]
ONNX_OPS = ["Add", "Relu", "MatMul", "Softmax", "Frobnicate", "Div", "Cast", "LSTM", "Identity", "Exp", "Where"]


def mutate_proto(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """One structural mutation of a serialized model, through its protobuf."""
    import onnx

    model = onnx.load_model_from_string(data)
    g = model.graph
    choice = rng.randrange(10)
    if choice == 0 and g.node:
        rng.choice(g.node).name = rng.choice(NAMES)
        what = "rename_node"
    elif choice == 1:
        values = [*g.input, *g.output]
        vi = rng.choice(values)
        vi.type.tensor_type.elem_type = rng.choice([1, 2, 3, 5, 6, 7, 9, 10, 11, 16, 0, 99])
        what = "elem_type"
    elif choice == 2:
        vi = rng.choice([*g.input, *g.output])
        dims = vi.type.tensor_type.shape.dim
        if dims:
            d = rng.choice(dims)
            d.dim_value = rng.choice([0, 1, 2**31, 2**40, 2**62, 99999])
        what = "dim"
    elif choice == 3 and g.node:
        del g.node[rng.randrange(len(g.node))]
        what = "delete_node"
    elif choice == 4 and g.node:
        n = rng.choice(g.node)
        g.node.append(n)
        what = "duplicate_node"
    elif choice == 5 and g.node:
        rng.choice(g.node).op_type = rng.choice(ONNX_OPS)
        what = "op_type"
    elif choice == 6 and g.node:
        n = rng.choice(g.node)
        attr = onnx.helper.make_attribute(rng.choice(["axis", "perm", "axes", "transB", "alpha"]),
                                          rng.choice([2**62, -2**62, 7, [2**40, 1], 1.5e300]))
        n.attribute.append(attr)
        what = "attribute"
    elif choice == 7 and g.initializer:
        init = rng.choice(g.initializer)
        if rng.random() < 0.5:
            init.dims[0] = rng.choice([0, 2**31, 2**40, 3])
        else:
            init.data_type = rng.choice([1, 6, 7, 10, 16])
        what = "initializer"
    elif choice == 8:
        model.opset_import[0].version = rng.choice([1, 7, 12, 22, 99, 2**40])
        what = "opset"
    else:
        vi = rng.choice([*g.input])
        vi.name = rng.choice(NAMES)
        what = "rename_input"
    return model.SerializeToString(), what


def mutate_bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    choice = rng.randrange(3)
    if choice == 0:
        return data[: rng.randrange(len(data) + 1)], "truncate_bytes"
    if choice == 1:
        b = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b), "flip_bytes"
    i = rng.randrange(len(data) + 1)
    return data[:i] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 32))) + data[i:], "insert_bytes"


def mutate_onnx(rng: random.Random, data: bytes) -> tuple[bytes, list[str]]:
    names = []
    for _ in range(rng.choice([1, 1, 2])):
        if rng.random() < 0.7:
            try:
                data, name = mutate_proto(rng, data)
            except Exception:  # an earlier byte mutation left no parseable proto
                data, name = mutate_bytes(rng, data)
        else:
            data, name = mutate_bytes(rng, data)
        names.append(name)
    return data, names
