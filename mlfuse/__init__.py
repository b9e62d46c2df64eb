"""mlfuse: an MLIR-style fusion compiler on xDSL.

    import mlfuse
    f = mlfuse.compile("model.mlir")          # or an .onnx path, IR text, a ModuleOp
    (y,) = f(x)                               # numpy in, numpy out
    (y_ref,) = mlfuse.reference("model.mlir")(x)
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlfuse import reference


def _version() -> str:
    """pyproject.toml's version: from the installed metadata, else (a bare checkout) from the file itself."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mlfuse")
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        try:
            return tomllib.loads(pyproject.read_text())["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "0+unknown"


__version__ = _version()


def parse(source, input_shapes=None):
    from mlfuse.api import parse as _parse

    return _parse(source, input_shapes)


def compile(source, target: str = "cpu", **options):
    from mlfuse.api import compile as _compile

    return _compile(source, target=target, **options)


def run_pipeline(module, passes):
    from mlfuse.api import run_pipeline as _run

    return _run(module, passes)



def __getattr__(name: str) -> ModuleType:
    """`mlfuse.reference(source, entry="main")(*arrays)`: the module is callable. It is
    imported on first use: it loads xDSL's interpreters and scipy.special, which cost
    a second of every `import mlfuse` (and of every tool's start) before."""
    if name == "reference":
        import importlib

        return importlib.import_module("mlfuse.reference")
    raise AttributeError(f"module 'mlfuse' has no attribute {name!r}")


# every error a user can cause is raised as a Diagnostic (`file:line:col: error: message`)
from mlfuse.diagnostics import Diagnostic  # noqa: E402

__all__ = ["Diagnostic", "parse", "compile", "reference", "run_pipeline"]
