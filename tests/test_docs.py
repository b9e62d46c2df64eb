"""The docs stay true: the files they cite exist, and the IR examples of the passes parse.

- every repository path cited in docs/*.md, README.md and the module docstrings of
  mlfuse/, dialects/, passes/ and bench/ exists (a path is looked up from the
  repository root, from mlfuse/, and from each folder above the citing file, so
  `conversion/expand_math.py` and `sim/memory.py` resolve as a reader would);
- every complete IR example in the docstrings of passes/*.py and dialects/*.py
  parses and verifies with mlfuse's parser (mlfuse.ir.parse_module). A whole
  function is parsed as it stands; a fragment is wrapped in a function whose
  arguments are the fragment's free values, typed as the fragment types them
  (`ins(%x : memref<...>)`, `math.exp %x : f32`). Sketches, which elide with `...`,
  and fragments whose free values have no type in the text are not checked.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from mlfuse.ir import parse_module

REPO = Path(__file__).resolve().parents[1]
SUFFIXES = "py|md|mlir|json|png|sh|onnx|toml|txt|cfg|yaml|csv|jsonl"
CITED_PATH = re.compile(rf"(?<![\w./-])((?:\.\./)*[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_.-]+)+\.(?:{SUFFIXES}))\b")
# (citing file, cited path) pairs known to be stale, for their owners to fix; the test fails once one is fixed,
# so that its entry goes too
KNOWN_MISSING: set[tuple[str, str]] = set()


def doc_sources() -> list[tuple[str, str]]:
    """(repository path, text) of every document whose citations are checked."""
    out = [(str(p.relative_to(REPO)), p.read_text()) for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]]
    for root in ("mlfuse", "dialects", "passes", "bench"):
        for p in sorted((REPO / root).rglob("*.py")):
            if "results" in p.parts:
                continue
            doc = ast.get_docstring(ast.parse(p.read_text()), clean=False)
            if doc:
                out.append((str(p.relative_to(REPO)), doc))
    return out


def resolves(citing: str, cited: str) -> bool:
    if cited.split("/")[0].isupper():  # a placeholder folder: OUT/gpu-check.json
        return True
    bases = [REPO, REPO / "mlfuse", *(REPO / citing).parents]
    for base in bases:
        path = (base / cited).resolve()
        if path.is_relative_to(REPO) and path.exists():
            return True
    return False


def missing_citations() -> set[tuple[str, str]]:
    return {(citing, cited) for citing, text in doc_sources() for cited in CITED_PATH.findall(text)
            if not resolves(citing, cited)}


def test_cited_files_exist():
    missing = missing_citations()
    new = sorted(missing - KNOWN_MISSING)
    assert not new, "docs cite files that are not in the repository:\n" + "\n".join(f"  {a}: {b}" for a, b in new)
    fixed = sorted(KNOWN_MISSING - missing)
    assert not fixed, "fixed, so drop from KNOWN_MISSING: " + ", ".join(f"{a}: {b}" for a, b in fixed)


def test_citation_pattern():
    assert CITED_PATH.findall("see `sim/memory.py` and bench/results/latest.md, not ../shared/X.md.") == [
        "sim/memory.py", "bench/results/latest.md", "../shared/X.md"]
    assert resolves("mlfuse/backend/gpu/sim/translate.py", "sim/memory.py") or not (
        REPO / "mlfuse/backend/gpu/sim/memory.py").exists()
    assert resolves("mlfuse/api.py", "conversion/to_llvm.py")
    assert not resolves("docs/architecture.md", "../shared/ARCHITECTURE.md")
    assert not resolves("README.md", "tests/test_no_such_file.py")


# --- IR examples -------------------------------------------------------------------------------

# the first line of an example: `%a = ...`, `%a, %b = ...`, or `dialect.op` followed by a name, string or operand
IR_START = re.compile(r"^ {4,}(%[\w.]+(?:, %[\w.]+)* = |[a-z_]+\.[a-z_]+[ \"@(%])")
WHOLE = re.compile(r"^(func\.func|kernel\.func|llvm\.func|builtin\.module)\b")


def ir_examples(doc: str) -> list[tuple[int, str]]:
    """(line in the docstring, dedented text) of each indented block that starts like IR."""
    lines = doc.split("\n")
    out, i = [], 0
    while i < len(lines):
        if not IR_START.match(lines[i]):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].startswith("    ") and lines[j].strip():
            j += 1
        indent = len(lines[i]) - len(lines[i].lstrip())
        out.append((i + 1, "\n".join(line[indent:] for line in lines[i:j])))
        i = j
    return out


def as_module(text: str) -> str | None:
    """The example as module text: a whole function as it is, a fragment wrapped in one (None: untyped values)."""
    if WHOLE.match(text):
        return text
    defined = set()
    for m in re.finditer(r"((?:%[\w.]+, )*%[\w.]+) = ", text):
        defined |= set(m.group(1).split(", "))
    for args in re.findall(r"\^bb\d+\(([^)]*)\)", text):
        defined |= set(re.findall(r"%[\w.]+", args))
    params = []
    for value in dict.fromkeys(re.findall(r"%[\w.]+", text)):
        if value in defined:
            continue
        typed = re.search(re.escape(value) + r"\s*:\s*([\w!.]+(?:<[^>]*>)?)", text)
        if typed is None:
            return None
        params.append(f"{value}: {typed.group(1)}")
    body = "\n".join("  " + line for line in text.split("\n"))
    return f"func.func @example({', '.join(params)}) {{\n{body}\n  func.return\n}}"


def examples() -> list:
    out = []
    for root in ("passes", "dialects"):
        for p in sorted((REPO / root).glob("*.py")):
            doc = ast.get_docstring(ast.parse(p.read_text()), clean=False) or ""
            for line, text in ir_examples(doc):
                out.append(pytest.param(text, id=f"{root}/{p.name}:{line}"))
    return out


EXAMPLES = examples()


def test_examples_found():
    checked = [p for p in EXAMPLES if "..." not in p.values[0] and as_module(p.values[0]) is not None]
    assert len(EXAMPLES) >= 20 and len(checked) >= 10, (len(EXAMPLES), len(checked))


@pytest.mark.parametrize("text", EXAMPLES)
def test_ir_example_parses(text: str):
    if "..." in text:
        pytest.skip("a sketch: it elides with ...")
    source = as_module(text)
    if source is None:
        pytest.skip("a fragment whose free values the text does not type")
    parse_module(source, name="<docstring example>")
