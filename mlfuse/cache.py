"""The on-disk compile cache: object code keyed by what produced it.

Keys are sha256 hashes (of the LLVM IR and the host CPU for object code), so a
stale entry can never be returned for different input. The directory is
$MLFUSE_CACHE_DIR, else ~/.cache/mlfuse; MLFUSE_CACHE_DIR=off disables it.
Writes go through a temporary file and a rename, so concurrent compiles
(pytest -n) never read a half-written entry.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path


@functools.cache
def compiler_fingerprint() -> str:
    """A hash of mlfuse's own sources and its key dependencies' versions.

    Part of every key, so that changing the compiler invalidates what it compiled.
    """
    import llvmlite
    import xdsl

    h = hashlib.sha256(f"{xdsl.__version__}|{llvmlite.__version__}".encode())
    import mlfuse.dialects
    import mlfuse.passes

    roots = [Path(__file__).parent, Path(mlfuse.dialects.__file__).parent, Path(mlfuse.passes.__file__).parent]
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            h.update(path.read_bytes())
    return h.hexdigest()


def cache_dir() -> str | None:
    path = os.environ.get("MLFUSE_CACHE_DIR")
    if path == "off":
        return None
    return path or os.path.join(os.path.expanduser("~"), ".cache", "mlfuse")


def _path(key: str) -> str | None:
    d = cache_dir()
    return os.path.join(d, key[:2], key + ".o") if d else None


def load_object(key: str) -> bytes | None:
    path = _path(key)
    if path is None or not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def store_object(key: str, data: bytes) -> None:
    path = _path(key)
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written is only slower
