"""An LLVM module as one unit per kernel: what the CPU backend optimizes, emits and caches apart.

A unit is a module of its own holding one externally visible function (a kernel,
a GEMM, the entry), the internal functions it calls (the `__omp` wrappers of the
kernels it runs on the thread team, GEMM micro-kernels) and the globals it uses;
the functions of other units are declarations. The JIT loads every unit's object
into one engine, which links the calls between them.

- **Bounded work.** LLVM's cost grows faster than the size of what it optimizes at
  once; per unit it is bounded by the kernel.
- **Deduplicated.** A kernel is compiled under a name made from a hash of its unit
  and the name of the first kernel with that body (`mlfuse_k_<hash>_<name>`, callers
  renamed to match; the name keeps profiles readable: `..._fused_conv2d_add_max_min_conv_matmul`),
  so identical kernels, such as those of repeated layers, are one unit, compiled once.
- **Cacheable per kernel.** The unit's text is the key of its object (see
  mlfuse.backend.cpu.compile_units), shared by every graph that holds the kernel.

Functions named in `keep` (the entry the runtime looks up) keep their names.
The module is split on llvmlite's printed form (one global or declaration per
line, `define` ... `}` blocks, metadata last); anything else there, a cycle of
calls between units, or a non-internal global two units use makes `split_units`
answer None, and the module is compiled whole.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field

NAME = re.compile(r'@"([^"]+)"')
SELF = "mlfuse.kernel.self"  # a unit's own name while it is hashed
PREFIX = "mlfuse_k_"


@dataclass(frozen=True)
class Unit:
    name: str  # the function it exports (renamed, unless kept)
    text: str  # an LLVM module of its own


@dataclass
class Parts:
    """llvmlite's printed module, by kind of line."""

    header: list[str] = field(default_factory=list)  # ModuleID, triple, datalayout
    globals: dict[str, str] = field(default_factory=dict)  # name -> its line
    declares: dict[str, str] = field(default_factory=dict)
    functions: dict[str, list[str]] = field(default_factory=dict)  # name -> define ... }
    metadata: list[str] = field(default_factory=list)


def parse_parts(text: str) -> Parts | None:
    """The lines of `text` by kind, or None for a line this splitter does not know."""
    parts = Parts()
    body: list[str] | None = None
    for line in text.split("\n"):
        if body is not None:
            body.append(line)
            if line == "}":
                body = None
            continue
        if not line.strip() or line.startswith(";"):
            continue
        if line.startswith(("target ", "source_filename")):
            parts.header.append(line)
        elif line.startswith("!") and '@"' not in line:  # metadata naming a function would tie units
            parts.metadata.append(line)
        elif line.startswith('@"') and " = " in line:
            parts.globals[NAME.match(line).group(1)] = line  # type: ignore[union-attr]
        elif line.startswith(("declare ", "define ")) and (named := NAME.search(line)) is not None:
            if line.startswith("declare "):
                parts.declares[named.group(1)] = line
            else:
                body = parts.functions[named.group(1)] = [line]
        else:
            return None
    return None if body is not None else parts


def _is_internal(line: str) -> bool:
    return line.startswith(("define internal ", "define private ")) or bool(
        re.match(r'@"[^"]+" = (internal|private) ', line)
    )


class Splitter:
    """The units of one parsed module (see split_units)."""

    def __init__(self, parts: Parts):
        self.parts = parts
        self.defined = set(parts.functions)
        self.internal = {f for f, lines in parts.functions.items() if _is_internal(lines[0])}
        self.exported = [f for f in parts.functions if f not in self.internal]
        self.refs = {f: set(NAME.findall("\n".join(lines))) - {f} for f, lines in parts.functions.items()}
        self.global_refs = {g: set(NAME.findall(line)) - {g} for g, line in parts.globals.items()}
        self.members = {e: self._members(e) for e in self.exported}

    def _members(self, export: str) -> list[str]:
        """`export` and the internal functions it reaches, in module order."""
        seen, todo = {export}, [export]
        while todo:
            for r in self.refs[todo.pop()]:
                if r in self.internal and r not in seen:
                    seen.add(r)
                    todo.append(r)
        return [f for f in self.parts.functions if f in seen]

    def used(self, export: str) -> set[str]:
        """Every name the unit of `export` refers to, globals' references included."""
        names = set().union(*(self.refs[m] for m in self.members[export]))
        todo = [n for n in names if n in self.global_refs]
        while todo:
            for r in self.global_refs[todo.pop()] - names:
                names.add(r)
                if r in self.global_refs:
                    todo.append(r)
        return names

    def homes(self, keep: Collection[str]) -> dict[str, str] | None:
        """The unit that defines each non-internal global (its only user, else the kept
        entry's); None if two units use one, or a global refers to a function."""
        if any(r in self.defined for refs in self.global_refs.values() for r in refs):
            return None
        shared = [g for g, line in self.parts.globals.items() if not _is_internal(line) and " = external " not in line]
        users = {g: [e for e in self.exported if g in self.used(e)] for g in shared}
        if any(len(u) > 1 for u in users.values()):
            return None
        default = next((e for e in self.exported if e in keep), self.exported[0])
        return {g: (u[0] if u else default) for g, u in users.items()}

    def callee_first(self) -> list[str] | None:
        """The exported functions, each after the exported functions it uses; None on a cycle."""
        deps = {e: self.used(e) & set(self.exported) - {e} for e in self.exported}
        order: list[str] = []
        placed: set[str] = set()
        while len(order) < len(self.exported):
            ready = [e for e in self.exported if e not in placed and deps[e] <= placed]
            if not ready:
                return None
            order += ready
            placed.update(ready)
        return order

    def unit_text(self, export: str, homes: dict[str, str], names: dict[str, str]) -> str:
        """The module of `export`'s unit, other units' functions declared under `names`."""
        used = self.used(export)
        lines = list(self.parts.header)
        for g, line in self.parts.globals.items():
            if g in used or homes.get(g) == export:
                lines.append(line)
        lines += [line for d, line in self.parts.declares.items() if d in used]
        declared = set()
        for f in self.exported:
            if f != export and f in used and names[f] not in declared:  # twins are declared once
                declared.add(names[f])
                lines.append("declare " + self.parts.functions[f][0].removeprefix("define "))
        for m in self.members[export]:
            lines += self.parts.functions[m]
        lines = with_own_metadata(lines, self.parts.metadata)
        return rename("\n".join(lines) + "\n", {f: n for f, n in names.items() if f != export})


METADATA_REF = re.compile(r"!(\d+)\b")
METADATA_DEF = re.compile(r"!(\d+) = ")


def with_own_metadata(code: list[str], metadata: list[str]) -> list[str]:
    """`code` and the numbered metadata nodes it uses, directly or through other nodes,
    renumbered in the order they are first used: a unit does not carry the module's
    other nodes (each row loop has its own `!llvm.loop` ID), and twin kernels of two
    modules, whose nodes the modules numbered apart, get the same text."""
    bodies = {m.group(1): line[m.end():] for line in metadata if (m := METADATA_DEF.match(line))}
    named = [line for line in metadata if not METADATA_DEF.match(line)]  # `!name = !{...}`: kept whole
    order: dict[str, str] = {}
    pending = deque(ref for line in code + named for ref in METADATA_REF.findall(line))
    while pending:
        ref = pending.popleft()
        if ref in bodies and ref not in order:
            order[ref] = str(len(order))
            pending.extend(METADATA_REF.findall(bodies[ref]))

    def renumber(line: str) -> str:
        return METADATA_REF.sub(lambda m: "!" + order.get(m.group(1), m.group(1)), line)

    nodes = [f"!{new} = {renumber(bodies[old])}" for old, new in order.items()]
    return [renumber(line) for line in code] + nodes + [renumber(line) for line in named]


def rename(text: str, names: dict[str, str]) -> str:
    """`text` with the functions of `names` referred to by their new names."""
    if not names:
        return text
    return NAME.sub(lambda m: f'@"{names.get(m.group(1), m.group(1))}"', text)


def readable(name: str) -> str:
    """What a kernel's symbol says about it: its function's name without the entry's
    prefix and the op counter (main__200_fused_conv2d_add_conv_matmul ->
    fused_conv2d_add_conv_matmul), at most 64 characters."""
    return re.sub(r"^[A-Za-z0-9]+__[0-9]+_", "", name)[:64]


def split_units(text: str, keep: Collection[str]) -> list[Unit] | None:
    """The distinct units of an LLVM module (llvmlite's text), callees first; None when
    the module is better compiled whole (see the module docstring)."""
    parts = parse_parts(text)
    if parts is None or not parts.functions:
        return None
    splitter = Splitter(parts)
    if not splitter.exported:
        return None
    homes, order = splitter.homes(keep), splitter.callee_first()
    if homes is None or order is None:
        return None
    names: dict[str, str] = {}
    by_digest: dict[str, str] = {}  # the first name given to each body
    units: dict[str, Unit] = {}
    for export in order:
        body = splitter.unit_text(export, homes, names)
        if export in keep:
            names[export] = export
        else:
            generic = rename(body, {export: SELF})
            digest = hashlib.sha256(generic.encode()).hexdigest()[:32]
            names[export] = by_digest.setdefault(digest, f"{PREFIX}{digest}_{readable(export)}")
            body = rename(generic, {SELF: names[export]})
        units.setdefault(names[export], Unit(names[export], body))
    return list(units.values())
