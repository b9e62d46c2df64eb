# lit configuration for mlfuse's FileCheck suite (filecheck = the Python FileCheck from PyPI).
import os

import lit.formats

config.name = "mlfuse"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".onnx.test", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["lit.cfg.py", "Inputs"]

# Tools come from the project's virtual environment (PATH set by the Makefile).
config.environment["PATH"] = os.environ.get("PATH", "")
for var in ("HOME", "TMPDIR", "MLFUSE_CACHE_DIR", "PYTHONPATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

# Round trip: print in custom form, re-parse, print again (must be identical),
# and through the generic form and back.
config.substitutions.append(
    ("%roundtrip", "mlfuse-opt --split-input-file %s | mlfuse-opt --split-input-file")
)
config.substitutions.append(
    ("%generic-roundtrip",
     "mlfuse-opt --split-input-file --print-op-generic %s | mlfuse-opt --split-input-file")
)

# GPU tests that assemble PTX need ptxas (the gpu extra: nvidia-cuda-nvcc).
try:
    from mlfuse.backend.gpu.ptxas import find_ptxas

    if find_ptxas():
        config.available_features.add("ptxas")
except ImportError:
    pass
