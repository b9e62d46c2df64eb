"""Non-temporal ("streaming") stores for large outputs, after LLVM has vectorized.

A plain store to a line that is not in cache first reads the line (read for
ownership), so writing a 256 MB output moves 512 MB. A non-temporal store writes
the line without reading it. convert-loop-to-scf marks the stores that stream
(pure writes, unit stride, to a buffer too large to be read back from cache:
`memref.store {nontemporal = true}`), convert-to-llvm keeps the mark.

LLVM's loop vectorizer refuses a loop whose scalar store carries `!nontemporal`
unless the store is aligned to the vector width, so the mark cannot go on before
O3. Instead the translation tags those stores with a TBAA access tag of their own
(`tag_streaming_accesses`): the vectorizer carries TBAA tags onto the wide stores,
and a tag that only stores carry says nothing new to alias analysis (an access
without a tag may alias anything). After O3, `apply_streaming` turns each tagged
store into a non-temporal one and ends every function that has them with an
`sfence`, so the data is visible before the thread reaches the team's barrier.
Only vector stores that LLVM proves aligned to their width qualify (x86 has no
unaligned vector non-temporal store; LLVM would split it into 8-byte pieces):
the proof comes from the runtime's guarantee that outputs and the arena are
64-byte aligned (`llvm.align` on the entry's and the kernels' parameters, see
convert-to-llvm) and from convert-loop-to-scf's peel of each streaming row to
its first element at an aligned address (`loop.aligned_window`).

Loads that stream into the phases of a stitched row (marked `mlfuse.prefetch` by
convert-loop-to-scf) get a TBAA tag under a root of their own the same way, and
after O3 each tagged vector load is followed by a prefetch PREFETCH_BYTES ahead:
while a row's later phases run from L1 nothing asks memory for the next rows,
and the hardware prefetcher does not run that far ahead.

Measured at 65536x1024 f32, 2 threads, one run, plain / non-temporal: Adam
46.5 / 37.0 ms, LayerNorm 16.9 / 14.5, softmax 19.0 / 17.2, RMSNorm 14.6 / 13.5,
GELU 13.3 / 13.3 (compute-bound).
"""

from __future__ import annotations

import re

import llvmlite.ir as ir
from xdsl.dialects import llvm
from xdsl.dialects.builtin import ModuleOp

ROOT = "mlfuse.stream.root"
TYPE = "mlfuse.stream"
# Prefetched loads get a tag under a root of their own: TBAA never calls accesses
# under different roots disjoint, so neither tag tells alias analysis anything.
PREFETCH_ROOT = "mlfuse.prefetch.root"
PREFETCH_TYPE = "mlfuse.prefetch"
# How far ahead a streamed load prefetches: two rows of 1024 f32 (measured 4 KiB
# and 8 KiB alike for LayerNorm at 65536x1024; 8 KiB covers shorter rows too).
PREFETCH_BYTES = 8192


def _tag(module: ir.Module, root: str, name: str):
    zero = ir.Constant(ir.IntType(64), 0)
    scalar = module.add_metadata([name, module.add_metadata([root]), zero])
    return module.add_metadata([scalar, scalar, zero])


def tag_streaming_accesses(source: ModuleOp, module: ir.Module) -> int:
    """Give the stores that `source` marks nontemporal the streaming TBAA tag, and
    the loads it marks `mlfuse.prefetch` the prefetch tag, in `module` (its
    translation: one store or load instruction per llvm.store or llvm.load, in
    order). Returns how many accesses were tagged."""
    marks: dict[str, list[tuple[str, bool]]] = {}
    for fn in source.ops:
        if isinstance(fn, llvm.FuncOp) and fn.body.blocks:
            marks[fn.sym_name.data] = [
                ("store", op.nontemporal is not None) if isinstance(op, llvm.StoreOp) else ("load", "mlfuse.prefetch" in op.attributes)
                for op in fn.walk()
                if isinstance(op, llvm.StoreOp | llvm.LoadOp)
            ]
    if not any(marked for m in marks.values() for _, marked in m):
        return 0
    tags = {"store": _tag(module, ROOT, TYPE), "load": _tag(module, PREFETCH_ROOT, PREFETCH_TYPE)}
    tagged = 0
    for fn in module.functions:
        wanted = marks.get(fn.name)
        if not wanted or not any(marked for _, marked in wanted):
            continue
        accesses = [i for block in fn.blocks for i in block.instructions if isinstance(i, ir.StoreInstr | ir.LoadInstr)]
        kinds = ["store" if isinstance(i, ir.StoreInstr) else "load" for i in accesses]
        if kinds != [kind for kind, _ in wanted]:  # not the translation we expect: leave them plain
            continue
        for access, (kind, marked) in zip(accesses, wanted):
            if marked:
                access.set_metadata("tbaa", tags[kind])
                tagged += 1
    return tagged


def _tag_ids(text: str, name: str) -> set[str]:
    """The ids of the access tags whose type node is named `name` in LLVM IR text."""
    types = re.findall(rf'^(!\d+) = !\{{!"{re.escape(name)}", !\d+, i64 0\}}', text, re.M)
    return {t for k in types for t in re.findall(rf"^(!\d+) = !\{{{k}, {k}, i64 0\}}", text, re.M)}


def apply_streaming(text: str, triple: str) -> str:
    """Optimized LLVM IR text: tagged vector stores proven aligned become
    non-temporal (functions holding them fence before returning), and tagged vector
    loads prefetch PREFETCH_BYTES ahead. x86 only; elsewhere the text comes back
    unchanged."""
    if not triple.startswith(("x86_64", "i686", "i386")) or (ROOT not in text and PREFETCH_ROOT not in text):
        return text
    store_tags, load_tags = _tag_ids(text, TYPE), _tag_ids(text, PREFETCH_TYPE)
    if not store_tags and not load_tags:
        return text
    numbered = [int(n) for n in re.findall(r"^!(\d+) = ", text, re.M)]
    nt = f"!{1 + max(numbered)}"
    # integer vectors too: instcombine stores a float built by bit operations (tanh's
    # sign) as the integers it was computed in
    store = re.compile(r"^(\s+store <(\d+) x (float|double|i32|i64)> .*, align (\d+), !tbaa (!\d+))(.*)$")
    load = re.compile(r"^\s+%[\w.]+ = load <\d+ x (?:float|double)>, ptr (%[\w.]+), align \d+, !tbaa (!\d+)")
    out, in_function, fence, converted, prefetches = [], False, False, 0, 0
    for line in text.split("\n"):
        if line.startswith("define "):
            in_function, fence = True, False
        m = store.match(line)
        if in_function and m and m.group(5) in store_tags:
            lanes, element, align = int(m.group(2)), m.group(3), int(m.group(4))
            # x86 has no unaligned vector non-temporal store: LLVM would split it
            # into 8-byte pieces, so only stores proven aligned stream; 16 bytes is
            # enough (a wider store becomes 16-byte movntps pieces: outputs from np.empty)
            if align >= min(16, lanes * (4 if element in ("float", "i32") else 8)):
                line = f"{m.group(1)}, !nontemporal {nt}{m.group(6)}"
                fence = True
                converted += 1
        if in_function and fence and re.match(r"\s+ret ", line):
            out.append("  call void @llvm.x86.sse.sfence()")
        if line == "}":
            in_function = False
        out.append(line)
        m = load.match(line)
        if in_function and m and m.group(2) in load_tags:
            prefetches += 1
            ahead = f"%mlfuse.prefetch.{prefetches}"
            out.append(f"  {ahead} = getelementptr i8, ptr {m.group(1)}, i64 {PREFETCH_BYTES}")
            out.append(f"  call void @llvm.prefetch.p0(ptr {ahead}, i32 0, i32 3, i32 1)")
    if not converted and not prefetches:
        return text
    if converted and "declare void @llvm.x86.sse.sfence()" not in text:
        out.append("declare void @llvm.x86.sse.sfence()")
    if prefetches and "declare void @llvm.prefetch.p0(" not in text:
        out.append("declare void @llvm.prefetch.p0(ptr, i32, i32, i32)")
    out.append(f"{nt} = !{{i32 1}}")
    return "\n".join(out)
