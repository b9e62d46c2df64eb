"""The on-disk compile cache: object code keyed by what produced it.

Keys are sha256 hashes of what produced the code (the LLVM IR or the graph, the
pipeline, mlfuse's sources and the host CPU; for an ONNX file's source entry, its
bytes and every compile option: mlfuse.api.source_key), so a stale entry can never
be returned for different input. The directory is $MLFUSE_CACHE_DIR, else
~/.cache/mlfuse; MLFUSE_CACHE_DIR=off (any case; also 0, false, no) disables it.

A cache entry is machine code that will run in this process, so it is checked
before it is loaded:
- the folder is created 0700; a folder or entry not owned by this user, or
  writable by group or others, is refused (one warning) and compilation
  proceeds uncached;
- every entry starts with a header (magic, format version, the full key, the
  host CPU, the payload's length and CRC-32): an entry that fails any check is
  discarded, reported once, and rebuilt by the caller; it is never executed.
  The CRC guards against damage (cut, overwritten or flipped bytes), as in zip
  and PNG; the folder's permissions guard against others. It is twice as fast as
  sha256 here (47 MB of ResNet-18's weights: 12 against 26 ms);
- writes go to a temporary file in the same folder, are fsynced and renamed
  into place, so readers never see half an entry and a failed write leaves no
  temporary file behind.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import tempfile
import warnings
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

MAGIC = b"MLFUSE-CACHE\0"
FORMAT_VERSION = 2
OFF_VALUES = ("off", "0", "false", "no")
_MAX_HEADER = 1 << 16


class CacheWarning(UserWarning):
    """A cache folder or entry that mlfuse refused to use."""


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

    roots = [Path(__file__).parent, *(Path(str(pkg.__file__)).parent for pkg in (mlfuse.dialects, mlfuse.passes))]
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            h.update(path.read_bytes())
    return h.hexdigest()


def host_id() -> str:
    """The host CPU (triple, name, features), as the CPU backend spells it."""
    from mlfuse.backend.cpu import host_key

    return host_key()


_reported: set[str] = set()


def _warn_once(path: str, message: str) -> None:
    """One warning per path and process: a bad entry is reported, not repeated."""
    if path not in _reported:
        _reported.add(path)
        warnings.warn(f"mlfuse cache: {message}", CacheWarning, stacklevel=3)


def _unsafe(st: os.stat_result) -> str | None:
    """Why a folder or file with this stat must not be trusted, or None."""
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _safe_dir(path: str) -> bool:
    """Create `path` (mode 0700) if needed; False (warned once) if it is not safe to use."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError as e:
        _warn_once(path, f"cannot use folder {path} ({e}); compiling uncached")
        return False
    why = "not a folder" if not stat.S_ISDIR(st.st_mode) else _unsafe(st)
    if why:
        _warn_once(path, f"refusing folder {path}: {why}; compiling uncached")
        return False
    return True


def cache_dir() -> str | None:
    """The cache folder, created 0700; None when disabled or not safe to use."""
    path = os.environ.get("MLFUSE_CACHE_DIR", "").strip()
    if path.lower() in OFF_VALUES:
        return None
    path = path or os.path.join(os.path.expanduser("~"), ".cache", "mlfuse")
    return path if _safe_dir(path) else None


def _path(key: str) -> str | None:
    """Where the entry of `key` lives; the format version is in the name, so entries
    of older versions are never read (and never reported as damaged)."""
    d = cache_dir()
    return os.path.join(d, key[:2], f"{key}.v{FORMAT_VERSION}.o") if d else None


def pack(key: str, data: bytes) -> bytes:
    """An entry: magic, header length (4 bytes, little endian), JSON header, payload."""
    return entry_head(key, [data]) + data


def entry_head(key: str, parts: Sequence[bytes]) -> bytes:
    """What comes before the payload (`parts`, joined) in the entry of `key` (pack)."""
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    header = {
        "format": FORMAT_VERSION,
        "key": key,
        "host": host_id(),
        "length": sum(len(part) for part in parts),
        "crc32": crc,
    }
    text = json.dumps(header, sort_keys=True).encode()
    return MAGIC + len(text).to_bytes(4, "little") + text


def unpack(key: str, blob: bytes) -> tuple[bytes | None, str]:
    """The payload of a valid entry for `key` on this host, or None and the reason."""
    if not blob.startswith(MAGIC):
        return None, "not an mlfuse cache entry"
    start = len(MAGIC) + 4
    size = int.from_bytes(blob[len(MAGIC) : start], "little")
    if size > _MAX_HEADER or start + size > len(blob):
        return None, "truncated header"
    return _checked(key, blob[start : start + size], blob[start + size :])


def _checked(key: str, header_text: bytes, data: bytes) -> tuple[bytes | None, str]:
    """`data` if the entry's header says it is the payload for `key` on this host, or None and the reason."""
    try:
        header = json.loads(header_text)
    except ValueError:
        return None, "unreadable header"
    if not isinstance(header, dict) or header.get("format") != FORMAT_VERSION:
        return None, "another format version"
    if header.get("key") != key:
        return None, "the entry of another key"
    if header.get("host") != host_id():
        return None, f"compiled for another CPU ({str(header.get('host'))[:60]})"
    if header.get("length") != len(data):
        return None, f"payload of {len(data)} bytes, header says {header.get('length')}"
    if header.get("crc32") != zlib.crc32(data):
        return None, "checksum mismatch"
    return data, ""


def _read(path: str, into: Callable[[int], Any] | None = None) -> tuple[bytes, Any] | str | None:
    """An entry file's header text and payload (read apart: a payload of weights is not
    copied out of the whole file; `into(size)` gives the buffer to read it into); None
    when absent; else why it cannot be trusted. Symlinks are refused, and the file must
    be ours and not writable by others."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be read ({e})"
    with os.fdopen(fd, "rb") as f:
        why = _unsafe(os.fstat(f.fileno()))
        if why:
            return f"file {why}"
        start = f.read(len(MAGIC) + 4)
        if not start.startswith(MAGIC):
            return "not an mlfuse cache entry"
        size = int.from_bytes(start[len(MAGIC) :], "little")
        header_text = f.read(size) if size <= _MAX_HEADER and len(start) == len(MAGIC) + 4 else None
        if header_text is None or len(header_text) != size:
            return "truncated header"
        if into is None:
            return header_text, f.read()
        buffer = into(max(0, os.fstat(f.fileno()).st_size - f.tell()))
        return header_text, buffer[: f.readinto(buffer)]  # a file cut meanwhile fails the length check


def has_object(key: str) -> bool:
    """Is there an entry for `key` (not read: load_object checks it)?"""
    path = _path(key)
    return path is not None and os.path.isfile(path)


def load_object(key: str, into: Callable[[int], Any] | None = None) -> Any:
    """The cached object code for `key` (bytes, or the buffer `into(size)` returned, filled),
    or None: absent, or bad (then removed, reported once)."""
    path = _path(key)
    entry = _read(path, into) if path else None
    if entry is None or path is None:
        return None
    data, why = _checked(key, *entry) if isinstance(entry, tuple) else (None, entry)
    if data is not None:
        return data
    _warn_once(path, f"discarding bad entry {path}: {why}; rebuilding it")
    try:
        os.unlink(path)
    except OSError:
        pass  # the rebuilt entry replaces it
    return None


def store_object(key: str, data: bytes | Sequence[bytes]) -> None:
    """Write an entry atomically (temp file, fsync, rename); on failure leave nothing.
    `data`: the payload, or its parts (written one after another, never joined: a
    model's weights are 100s of MB, and each copy of VGG-11's 530 MB took a second)."""
    path = _path(key)
    if path is None or not _safe_dir(os.path.dirname(path)):
        return
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".o")
        with os.fdopen(fd, "wb") as f:
            parts = [data] if isinstance(data, bytes) else data
            f.write(entry_head(key, parts))
            for part in parts:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass  # a cache that cannot be written is only slower
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
