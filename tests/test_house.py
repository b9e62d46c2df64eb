"""House rules that ruff and pyright do not check (`make lint` runs this file too).

- no function in mlfuse/, dialects/ or passes/ is longer than 80 lines, from its
  `def` to its last line, nested functions included (KNOWN_LONG lists the ones
  that still are: split them, then drop the entry; the test fails on a stale one);
- one version: pyproject.toml's, which the installed metadata and mlfuse.__version__ repeat;
- pyproject.toml lists every package, so that a wheel has all of mlfuse.
"""

from __future__ import annotations

import ast
import tomllib
from importlib.metadata import version
from pathlib import Path

import mlfuse
import mlfuse.api

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 80
KNOWN_LONG: set[str] = set()


def function_lengths(path: Path) -> dict[str, int]:
    """Qualified name -> lines of every function in the file."""
    out: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out[name] = (child.end_lineno or child.lineno) - child.lineno + 1
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(ast.parse(path.read_text(), str(path)), "")
    return out


def long_functions() -> dict[str, int]:
    found = {}
    for root in ("mlfuse", "dialects", "passes"):
        for path in sorted((REPO / root).rglob("*.py")):
            for name, lines in function_lengths(path).items():
                if lines > MAX_LINES:
                    found[f"{path.relative_to(REPO)}::{name}"] = lines
    return found


def test_functions_fit_on_a_screen():
    found = long_functions()
    new = {k: v for k, v in found.items() if k not in KNOWN_LONG}
    assert not new, f"functions over {MAX_LINES} lines (split them):\n" + "\n".join(
        f"  {k}: {v} lines" for k, v in sorted(new.items()))
    stale = sorted(KNOWN_LONG - set(found))
    assert not stale, "no longer over the limit, so drop from KNOWN_LONG: " + ", ".join(stale)


def test_function_lengths_count_nested_functions(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("class A:\n    def f(self):\n        def g():\n            return 1\n\n        return g\n")
    assert function_lengths(src) == {"A.f": 5, "A.f.g": 2}


def test_one_version():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert mlfuse.__version__ == version("mlfuse") == pyproject
    assert getattr(mlfuse.api, "VERSION", pyproject) == pyproject


def test_pyproject_lists_every_package():
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {"mlfuse": "mlfuse", **setuptools["package-dir"]}
    found = set()
    for package, folder in folders.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder).parts
            found.add(".".join((package, *rel)))
    assert found == set(setuptools["packages"])
