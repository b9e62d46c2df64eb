"""examples/embedding/embed.py, the program docs/embedding.md walks through, runs and checks itself."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_embedding_example_runs():
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "embedding" / "embed.py")],
                          capture_output=True, text=True, timeout=300, cwd=REPO / "examples")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
